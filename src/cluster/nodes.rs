//! Reading and writing Node objects: lookups, patches that carry the resourceVersion just read (a concurrent
//! writer makes them 409, and they are read and tried again), waiting for a node to come back from a reboot,
//! wmrender's taint and the agent's condition ([`wmrender_contract::node_status`]), and deletion with a uid
//! precondition. Everything read from a Node is untrusted.

use super::{API_TIMEOUT, Body, Cluster, ClusterError};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use wmrender_contract::node_status::{TAINT_EFFECT, TAINT_KEY};

/// Attempts at a patch when another writer keeps changing the Node (409 Conflict).
const PATCH_ATTEMPTS: u32 = 5;
/// How often the Node is read while waiting for it.
const NODE_POLL: Duration = Duration::from_millis(500);

pub use super::node_object::*;

/// The Node, or `None` when the cluster has no Node of that name (or none can have it).
pub async fn get(cluster: &Cluster, node: &str, deadline: Instant) -> Result<Option<Value>, ClusterError> {
    if !can_be_node_name(node) {
        return Ok(None);
    }
    cluster.get_until(&path(node), deadline).await
}

/// The Nodes a label selector (URL-encoded, e.g. `kubernetes.io/os%3Dwindows`) picks.
pub async fn list(cluster: &Cluster, selector: &str) -> Result<Vec<Value>, ClusterError> {
    cluster.list(&format!("/api/v1/nodes?labelSelector={selector}")).await
}

/// Patches the Node with its current resourceVersion as a precondition, reading it again after a 409. `change` sees
/// the Node as read and returns the merge patch, or `None` when nothing is to be done (then the Node as read is
/// returned). `Ok(None)`: there is no such Node.
pub async fn patch(
    cluster: &Cluster,
    node: &str,
    deadline: Instant,
    change: impl Fn(&Value) -> Option<Value>,
) -> Result<Option<Value>, ClusterError> {
    let path = path(node);
    let mut last = String::new();
    for _ in 0..PATCH_ATTEMPTS {
        let Some(current) = get(cluster, node, deadline).await? else { return Ok(None) };
        let Some(mut patch) = change(&current) else { return Ok(Some(current)) };
        patch["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
        match cluster.call(http::Method::PATCH, &path, Some(Body::merge_patch(&patch)), deadline).await {
            Ok(v) => return Ok(Some(v)),
            Err(e) if e.is(409) => last = e.to_string(),
            Err(e) => return Err(cluster.failed(&http::Method::PATCH, &path, e)),
        }
    }
    Err(ClusterError::Api {
        what: cluster.what(&http::Method::PATCH, &path),
        why: format!("the Node kept changing under {PATCH_ATTEMPTS} attempts (409 Conflict): {last}"),
    })
}

/// Puts wmrender's taint on the Node (`true`) or takes it off (`false`); other taints stay as they are. Returns
/// whether the Node exists.
pub async fn set_taint(cluster: &Cluster, node: &str, on: bool) -> Result<bool, ClusterError> {
    let found = patch(cluster, node, Instant::now() + API_TIMEOUT, |current| {
        if tainted(current) == on {
            return None;
        }
        let mut list: Vec<Value> = taints(current).into_iter().filter(|t| t["key"] != TAINT_KEY).collect();
        if on {
            list.push(json!({ "key": TAINT_KEY, "effect": TAINT_EFFECT }));
        }
        // A merge patch replaces a list whole: the other taints are carried over as read (and the
        // resourceVersion precondition guards them against a concurrent change).
        Some(json!({ "spec": { "taints": list } }))
    })
    .await?;
    Ok(found.is_some())
}

/// Sets the Node's annotations `wanted` (`wmrender.dev/desired-bundle`, `wmrender.dev/desired-payload`: what its
/// agent pulls) in one patch, those it does not have already (read fresh, not from a watch that may lag): the keys
/// it changed, none when the Node had them all; `None` when the Node is gone.
pub async fn set_desired(
    cluster: &Cluster,
    node: &str,
    wanted: &[(&str, &str)],
) -> Result<Option<Vec<String>>, ClusterError> {
    let unlike = |current: &Value| -> serde_json::Map<String, Value> {
        wanted
            .iter()
            .filter(|(key, value)| current["metadata"]["annotations"][*key].as_str() != Some(*value))
            .map(|(key, value)| (key.to_string(), Value::from(*value)))
            .collect()
    };
    // The keys the last attempt changed: a patch retried after a 409 may find some already set by then.
    let changed = std::sync::Mutex::new(Vec::new());
    let found = patch(cluster, node, Instant::now() + API_TIMEOUT, |current| {
        let patch = unlike(current);
        if let Ok(mut keys) = changed.lock() {
            *keys = patch.keys().cloned().collect();
        }
        (!patch.is_empty()).then(|| json!({ "metadata": { "annotations": patch } }))
    })
    .await?;
    Ok(found.map(|_| changed.into_inner().unwrap_or_default()))
}

/// Waits until the Node is Ready and, when `old_boot` is given, runs a boot other than that one.
pub async fn wait_back(cluster: &Cluster, name: &str, old_boot: Option<&str>, deadline: Instant) -> Result<(), String> {
    loop {
        let last = match get(cluster, name, deadline).await {
            Ok(Some(n)) => {
                let (boot, ready) = (boot_id(&n), ready(&n));
                let rebooted = old_boot.is_none_or(|old| !boot.is_empty() && boot != old);
                if rebooted && ready {
                    return Ok(());
                }
                format!("boot ID {}, Ready {}", if rebooted { "new" } else { "unchanged" }, ready)
            }
            Ok(None) => "the Node object is gone".into(),
            // The API server may be briefly unreachable too; the deadline bounds the wait.
            Err(e) => e.to_string(),
        };
        // Read once more at the deadline itself: the whole time-out is waited, not less.
        let Some(left) = remaining(deadline) else {
            return Err(format!("{name} did not come back ({last})"));
        };
        tokio::time::sleep(NODE_POLL.min(left)).await;
    }
}

/// The time left before `deadline`, `None` once it has passed (so the last try is made at the deadline itself).
pub fn remaining(deadline: Instant) -> Option<Duration> {
    deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero())
}

/// Sets annotation `key` on the Node to `value` unless it already has it. `Ok(false)`: no such Node.
pub async fn annotate(cluster: &Cluster, node: &str, key: &str, value: &str) -> Result<bool, ClusterError> {
    let found = patch(cluster, node, Instant::now() + API_TIMEOUT, |current| {
        (current["metadata"]["annotations"][key].as_str() != Some(value))
            .then(|| json!({ "metadata": { "annotations": { key: value } } }))
    })
    .await?;
    Ok(found.is_some())
}

/// Deletes the Node read as `node`, and no other: its uid is a precondition (a Node registered again under the same
/// name since is left alone). A Node already gone is what was wanted.
pub async fn delete(cluster: &Cluster, node: &Value) -> Result<(), ClusterError> {
    let path = path(name_of(node));
    let options =
        json!({ "apiVersion": "v1", "kind": "DeleteOptions", "preconditions": { "uid": node["metadata"]["uid"] } });
    match cluster.call(http::Method::DELETE, &path, Some(Body::json(&options)), Instant::now() + API_TIMEOUT).await {
        Ok(_) => Ok(()),
        Err(e) if e.is(404) => Ok(()),
        Err(e) => Err(cluster.failed(&http::Method::DELETE, &path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wmrender_contract::node_status::{BUNDLE_ANNOTATION, CONDITION_TYPE};

    #[test]
    fn node_names() {
        for ok in ["win-a", "ip-10-0-0-5.ec2.internal", "10.0.0.5", "node-00"] {
            assert!(can_be_node_name(ok), "{ok}");
        }
        for bad in ["", "Win-A", "a/b", "a?watch=1", "fd00::5", "-a", "a..b", "a b"] {
            assert!(!can_be_node_name(bad), "{bad}");
        }
    }

    #[test]
    fn the_agents_report_is_read_from_the_condition_and_the_annotation() {
        let n = json!({"metadata": {"annotations": {BUNDLE_ANNOTATION: "sha256:ab"}},
                       "spec": {"taints": [{"key": TAINT_KEY, "effect": "NoSchedule"}]},
                       "status": {"conditions": [{"type": "Ready", "status": "True"},
                                                 {"type": CONDITION_TYPE, "status": "False", "reason": "ApplyFailed",
                                                  "message": "kube-proxy failed"}]}});
        let c = configured(&n).unwrap();
        assert_eq!((c.status.as_str(), c.bundle.as_str()), ("False", "sha256:ab"));
        assert!(ready(&n) && tainted(&n));
        assert!(configured(&json!({})).is_none());
    }
}
