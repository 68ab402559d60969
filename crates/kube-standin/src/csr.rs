//! CertificateSigningRequest status, as k8s.io/kubernetes pkg/registry/certificates/certificates/strategy.go and
//! pkg/apis/certificates/validation enforce it: the `Approved` and `Denied` conditions change **only** through
//! `…/approval`; `…/status` keeps them as they were (and writes to the object keep the whole status). Through
//! `/approval`: Approved and Denied must have status `True`, are mutually exclusive, each type appears once, and
//! once set they may not be removed.

use crate::{Key, Request, Response, State, Subresource, updated};
use serde_json::Value;

const API_VERSION: &str = "certificates.k8s.io/v1";
const RESOURCE: &str = "certificatesigningrequests";

fn is_approval(condition: &Value) -> bool {
    matches!(condition["type"].as_str(), Some("Approved" | "Denied"))
}

fn conditions(object: &Value) -> Vec<Value> {
    object["status"]["conditions"].as_array().cloned().unwrap_or_default()
}

/// `status.conditions` of `new` with the approval conditions taken from `approval_from` and the others from
/// `others_from`.
fn merged(base: &Value, approval_from: &Value, others_from: &Value) -> Value {
    let mut out = base.clone();
    let mut list: Vec<Value> = conditions(others_from).into_iter().filter(|c| !is_approval(c)).collect();
    list.extend(conditions(approval_from).into_iter().filter(is_approval));
    if !out["status"].is_object() {
        out["status"] = serde_json::json!({});
    }
    out["status"]["conditions"] = Value::Array(list);
    out
}

fn validate(old: &Value, new: &Value) -> Result<(), String> {
    let list = conditions(new);
    let mut seen = Vec::new();
    for (i, c) in list.iter().enumerate() {
        let t = c["type"].as_str().unwrap_or("");
        if t.is_empty() {
            return Err(format!("status.conditions[{i}].type: Required value"));
        }
        if seen.contains(&t) && is_approval(c) {
            return Err(format!("status.conditions[{i}].type: Duplicate value: \"{t}\""));
        }
        seen.push(t);
        if is_approval(c) && c["status"].as_str() != Some("True") {
            return Err(format!(
                "status.conditions[{i}].status: Unsupported value: {}: supported values: \"True\"",
                c["status"]
            ));
        }
    }
    if seen.contains(&"Approved") && seen.contains(&"Denied") {
        return Err("status.conditions: Invalid value: Approved and Denied conditions are mutually exclusive".into());
    }
    for c in conditions(old).iter().filter(|c| is_approval(c)) {
        let t = c["type"].as_str().unwrap_or("");
        if !seen.contains(&t) {
            return Err(format!("status.conditions: Forbidden: updates may not remove a condition of type \"{t}\""));
        }
    }
    Ok(())
}

fn write(state: &mut State, key: &Key, request: &Request, approval: bool) -> Response {
    let resource = key.qualified_resource();
    let Some(old) = state.store.get(key).cloned() else { return Response::not_found(&resource, &key.name) };
    if request.method == "GET" {
        return Response::ok(old);
    }
    let new = match updated(&old, request, &resource, &key.name) {
        Ok(n) => n,
        Err(r) => return r,
    };
    let object = if approval {
        let mut o = merged(&old, &new, &old);
        for c in o["status"]["conditions"].as_array_mut().into_iter().flatten() {
            if c.get("lastUpdateTime").is_none_or(Value::is_null) {
                c["lastUpdateTime"] = crate::store::now_rfc3339().into();
            }
        }
        o
    } else {
        // Status writes may set the certificate and other conditions; the approval stays as it was.
        let mut o = old.clone();
        o["status"] = new["status"].clone();
        merged(&o, &old, &new)
    };
    if let Err(e) = validate(&old, &object) {
        return Response::invalid(&resource, &key.name, e);
    }
    Response::ok(state.store.replace(key, object))
}

/// `certificatesigningrequests/{name}/approval`: the one way to approve or deny.
pub struct Approval;

impl Subresource for Approval {
    fn route(&self) -> (&str, &str, &str) {
        (API_VERSION, RESOURCE, "approval")
    }

    fn handle(&self, state: &mut State, key: &Key, request: &Request) -> Response {
        write(state, key, request, true)
    }
}

/// `certificatesigningrequests/{name}/status`: may not change the approval.
pub struct StatusKeepsApproval;

impl Subresource for StatusKeepsApproval {
    fn route(&self) -> (&str, &str, &str) {
        (API_VERSION, RESOURCE, "status")
    }

    fn handle(&self, state: &mut State, key: &Key, request: &Request) -> Response {
        write(state, key, request, false)
    }
}
