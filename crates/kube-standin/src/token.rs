//! `serviceaccounts/{name}/token` (TokenRequest, authentication.k8s.io/v1), as
//! k8s.io/kubernetes pkg/registry/core/serviceaccount/storage/token.go answers it: POST only; 404 when the
//! ServiceAccount does not exist; the body must be a TokenRequest (kind and apiVersion checked) whose
//! `spec.expirationSeconds`, when given, is at least 600 (10 minutes; 422 otherwise); no audiences means the
//! API server's own. The answer is 201 with the request echoed back, `status.token` and
//! `status.expirationTimestamp`. The token issued is a bearer token this server then accepts, for user
//! `system:serviceaccount:{namespace}:{name}`, so a test can check which identity a pushed kubeconfig carries.

use crate::{Key, Request, Response, State, Subresource};
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};

/// The API server's default when the request names no expiry (`--service-account-max-token-expiration` aside).
const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
const MIN_EXPIRATION_SECONDS: i64 = 600;

pub struct TokenRequest;

static ISSUED: AtomicU64 = AtomicU64::new(0);

impl Subresource for TokenRequest {
    fn route(&self) -> (&str, &str, &str) {
        ("v1", "serviceaccounts", "token")
    }

    fn handle(&self, state: &mut State, key: &Key, request: &Request) -> Response {
        if request.method != "POST" {
            return Response::method_not_allowed(&request.method);
        }
        if state.store.get(key).is_none() {
            return Response::not_found("serviceaccounts", &key.name);
        }
        let mut body = match request.json() {
            Ok(b) => b,
            Err(r) => return r,
        };
        if body["kind"] != "TokenRequest" || body["apiVersion"] != "authentication.k8s.io/v1" {
            return Response::bad_request(format!(
                "the API version and kind in the data ({}, {}) do not match the expected authentication.k8s.io/v1, \
                 TokenRequest",
                body["apiVersion"], body["kind"]
            ));
        }
        let seconds = match &body["spec"]["expirationSeconds"] {
            serde_json::Value::Null => DEFAULT_EXPIRATION_SECONDS,
            v => match v.as_i64() {
                Some(s) if s >= MIN_EXPIRATION_SECONDS => s,
                _ => {
                    return Response::invalid(
                        "tokenrequests.authentication.k8s.io",
                        &key.name,
                        format!(
                            "spec.expirationSeconds: Invalid value: {v}: may not specify a duration less than 10 minutes"
                        ),
                    );
                }
            },
        };
        let n = ISSUED.fetch_add(1, Ordering::SeqCst);
        let token = format!("standin-sa.{}.{}.{n:x}", key.namespace, key.name);
        let user = format!("system:serviceaccount:{}:{}", key.namespace, key.name);
        state.tokens.insert(token.clone(), user);
        let expires =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
                + seconds;
        body["spec"]["expirationSeconds"] = seconds.into();
        if body["spec"]["audiences"].as_array().is_none_or(|a| a.is_empty()) {
            body["spec"]["audiences"] = json!(["https://kubernetes.default.svc"]);
        }
        body["metadata"]["name"] = key.name.clone().into();
        body["metadata"]["namespace"] = key.namespace.clone().into();
        body["status"] = json!({ "token": token, "expirationTimestamp": crate::store::rfc3339_at(expires) });
        Response::created(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn post(state: &mut State, name: &str, body: Value) -> Response {
        let request = Request {
            method: "POST".into(),
            path: format!("/api/v1/namespaces/ns/serviceaccounts/{name}/token"),
            raw_query: String::new(),
            query: Default::default(),
            headers: [("content-type".to_string(), "application/json".to_string())].into(),
            body: body.to_string().into_bytes(),
            user: "system:admin".into(),
        };
        TokenRequest.handle(state, &Key::new("v1", "serviceaccounts", "ns", name), &request)
    }

    fn request(seconds: Value) -> Value {
        json!({ "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": { "expirationSeconds": seconds } })
    }

    #[test]
    fn a_token_is_issued_for_an_existing_service_account_only_and_then_authenticates_as_it() {
        let mut state = State::default();
        assert_eq!(post(&mut state, "sa", request(json!(3600))).code, 404);
        let sa =
            json!({ "apiVersion": "v1", "kind": "ServiceAccount", "metadata": { "name": "sa", "namespace": "ns" } });
        state.store.create(Key::new("v1", "serviceaccounts", "ns", "sa"), sa);
        let r = post(&mut state, "sa", request(json!(3600)));
        assert_eq!(r.code, 201, "{}", r.body);
        let token = r.body["status"]["token"].as_str().unwrap();
        assert_eq!(state.tokens.get(token).map(String::as_str), Some("system:serviceaccount:ns:sa"));
        assert!(r.body["status"]["expirationTimestamp"].as_str().unwrap().ends_with('Z'));
        assert_eq!(r.body["spec"]["audiences"], json!(["https://kubernetes.default.svc"]));
        // Under 10 minutes, or not a TokenRequest: refused as the API server refuses them.
        assert_eq!(post(&mut state, "sa", request(json!(599))).code, 422);
        assert_eq!(post(&mut state, "sa", json!({ "kind": "Secret", "apiVersion": "v1" })).code, 400);
    }
}
