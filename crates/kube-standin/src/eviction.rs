//! `pods/{name}/eviction` (policy/v1 Eviction), as k8s.io/kubernetes pkg/registry/core/pod/storage/eviction.go
//! answers it:
//!
//! - the body is an Eviction (`policy/v1` or `policy/v1beta1`; a body without apiVersion/kind is defaulted to it, as
//!   the API server's decoder does) whose `metadata.name` is the pod in the URL, else 400; a missing pod is 404;
//! - a pod that is finished (`Succeeded`/`Failed`), `Pending` or already being deleted is deleted without looking at
//!   budgets;
//! - otherwise the PodDisruptionBudgets of the pod's namespace whose (non-empty) selector matches its labels decide:
//!   more than one is 500; a budget whose `status.observedGeneration` is behind its `metadata.generation`, or whose
//!   `status.disruptionsAllowed` is 0, is 429 TooManyRequests (the client retries); a negative one is 403; else the
//!   budget is decremented, the pod recorded in `status.disruptedPods`, and the pod deleted: 201.
//!
//! Deleting a pod that has `spec.terminationGracePeriodSeconds` > 0 only marks it (`metadata.deletionTimestamp`),
//! as the API server does; it is gone once the kubelet has stopped it, which a test plays with [`finish_terminating`].
//! A client that does not wait for evicted pods to be gone therefore sees them still there.

use crate::{Key, Request, Response, State, Subresource};
use serde_json::{Value, json};

pub struct Eviction;

impl Subresource for Eviction {
    fn route(&self) -> (&str, &str, &str) {
        ("v1", "pods", "eviction")
    }

    fn handle(&self, state: &mut State, key: &Key, request: &Request) -> Response {
        if request.method != "POST" {
            return Response::method_not_allowed(&request.method);
        }
        let body = match request.json() {
            Ok(b) => b,
            Err(r) => return r,
        };
        let api_version = body["apiVersion"].as_str().unwrap_or("policy/v1");
        let kind = body["kind"].as_str().unwrap_or("Eviction");
        if !matches!(api_version, "policy/v1" | "policy/v1beta1") || kind != "Eviction" {
            return Response::bad_request(format!("not a Eviction object: {api_version}, Kind={kind}"));
        }
        if body["metadata"]["name"].as_str() != Some(key.name.as_str()) {
            return Response::bad_request("name in URL does not match name in Eviction object");
        }
        let Some(pod) = state.store.get(key).cloned() else { return Response::not_found("pods", &key.name) };
        let phase = pod["status"]["phase"].as_str().unwrap_or("");
        let terminating = !pod["metadata"]["deletionTimestamp"].is_null();
        if matches!(phase, "Succeeded" | "Failed" | "Pending") || terminating {
            delete_pod(state, key, &pod);
            return evicted();
        }
        let budgets: Vec<Value> = state
            .store
            .list("policy/v1", "poddisruptionbudgets", Some(&key.namespace))
            .into_iter()
            .filter(|b| selects(&b["spec"]["selector"], &pod["metadata"]["labels"]))
            .cloned()
            .collect();
        if budgets.len() > 1 {
            let mut r = Response::failure(
                500,
                "InternalError",
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
                    .into(),
                "",
                "",
            );
            r.body["reason"] = Value::Null;
            return r;
        }
        if let Some(budget) = budgets.into_iter().next() {
            let name = budget["metadata"]["name"].as_str().unwrap_or("").to_string();
            let status = &budget["status"];
            let allowed = status["disruptionsAllowed"].as_i64().unwrap_or(0);
            let behind = status["observedGeneration"].as_i64().unwrap_or(0)
                < budget["metadata"]["generation"].as_i64().unwrap_or(0);
            if behind {
                return too_many(format!("The disruption budget {name} is still being processed by the server."));
            }
            if allowed < 0 {
                return Response::failure(
                    403,
                    "Forbidden",
                    format!("poddisruptionbudget.policy \"{name}\" is forbidden: pdb disruptions allowed is negative"),
                    "poddisruptionbudget.policy",
                    &name,
                );
            }
            if allowed == 0 {
                let why = format!(
                    "The disruption budget {name} needs {} healthy pods and has {} currently",
                    status["desiredHealthy"].as_i64().unwrap_or(0),
                    status["currentHealthy"].as_i64().unwrap_or(0)
                );
                return too_many(why);
            }
            let mut updated = budget.clone();
            updated["status"]["disruptionsAllowed"] = json!(allowed - 1);
            if !updated["status"]["disruptedPods"].is_object() {
                updated["status"]["disruptedPods"] = json!({});
            }
            updated["status"]["disruptedPods"][&key.name] = crate::store::now_rfc3339().into();
            let budget_key = Key::new("policy/v1", "poddisruptionbudgets", &key.namespace, &name);
            state.store.replace(&budget_key, updated);
        }
        delete_pod(state, key, &pod);
        evicted()
    }
}

fn evicted() -> Response {
    Response::created(json!({ "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success" }))
}

fn too_many(cause: String) -> Response {
    let mut r = Response::too_many_requests("Cannot evict pod as it would violate the pod's disruption budget.");
    r.body["details"] = json!({ "causes": [{ "reason": "DisruptionBudget", "message": cause }] });
    r
}

/// Deletes a pod as the API server does: at once without a grace period, else marked for the kubelet.
fn delete_pod(state: &mut State, key: &Key, pod: &Value) {
    let grace = pod["spec"]["terminationGracePeriodSeconds"].as_i64().unwrap_or(0);
    if grace <= 0 {
        state.store.remove(key);
    } else if pod["metadata"]["deletionTimestamp"].is_null() {
        let mut marked = pod.clone();
        marked["metadata"]["deletionTimestamp"] = crate::store::now_rfc3339().into();
        marked["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
        state.store.replace(key, marked);
    }
}

/// Plays the kubelet: removes every pod marked for deletion (its containers have stopped). Returns how many.
pub fn finish_terminating(state: &mut State) -> usize {
    let keys: Vec<Key> = state
        .store
        .list("v1", "pods", None)
        .into_iter()
        .filter(|p| !p["metadata"]["deletionTimestamp"].is_null())
        .filter_map(|p| state.store.key_of(&json!({"apiVersion": "v1", "kind": "Pod", "metadata": p["metadata"]})))
        .collect();
    for k in &keys {
        state.store.remove(k);
    }
    keys.len()
}

/// A metav1.LabelSelector (`matchLabels`, `matchExpressions` with In, NotIn, Exists, DoesNotExist) against labels.
/// A missing or empty selector matches nothing here, as the eviction code treats it; an operator it does not know
/// matches nothing (an invalid selector "does not match the pod").
pub fn selects(selector: &Value, labels: &Value) -> bool {
    let match_labels = selector["matchLabels"].as_object();
    let expressions = selector["matchExpressions"].as_array();
    if match_labels.is_none_or(|m| m.is_empty()) && expressions.is_none_or(|e| e.is_empty()) {
        return false;
    }
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let labels_ok = match_labels.into_iter().flatten().all(|(k, v)| label(k) == v.as_str());
    let expressions_ok = expressions.into_iter().flatten().all(|e| {
        let key = e["key"].as_str().unwrap_or("");
        let values: Vec<&str> = e["values"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        match e["operator"].as_str() {
            Some("In") => label(key).is_some_and(|v| values.contains(&v)),
            Some("NotIn") => label(key).is_none_or(|v| !values.contains(&v)),
            Some("Exists") => label(key).is_some(),
            Some("DoesNotExist") => label(key).is_none(),
            _ => false,
        }
    });
    labels_ok && expressions_ok
}

#[cfg(test)]
mod tests {
    use super::selects;
    use serde_json::json;

    #[test]
    fn selectors() {
        let labels = json!({"app": "web", "tier": "front"});
        assert!(selects(&json!({"matchLabels": {"app": "web"}}), &labels));
        assert!(!selects(&json!({"matchLabels": {"app": "db"}}), &labels));
        assert!(!selects(&json!({}), &labels), "an empty selector matches nothing");
        assert!(selects(
            &json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}]}),
            &labels
        ));
        assert!(!selects(
            &json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["front"]}]}),
            &labels
        ));
        assert!(selects(&json!({"matchExpressions": [{"key": "x", "operator": "DoesNotExist"}]}), &labels));
    }
}
