//! What the kubeconfig's user may do, asked before a step that changes a node: a drain that found out half way that
//! it may not evict (or may not read a pod's DaemonSet) would leave the node cordoned, some pods evicted. Each
//! permission is asked with a SelfSubjectAccessReview, which every authenticated user may create; the answer names
//! what is missing and the documented role that grants it.

use super::{API_TIMEOUT, Body, Cluster, ClusterError};
use serde_json::json;
use std::time::Instant;

/// One permission: `verb` on `resource` (with `subresource`) of API `group`, in every namespace.
#[derive(Clone, Copy, Debug)]
pub struct Permission {
    pub verb: &'static str,
    pub group: &'static str,
    pub resource: &'static str,
    pub subresource: &'static str,
}

const fn may(verb: &'static str, group: &'static str, resource: &'static str, subresource: &'static str) -> Permission {
    Permission { verb, group, resource, subresource }
}

/// What a cordon, drain, reboot and uncordon need (`oc adm drain`'s calls).
pub const DRAIN: [Permission; 6] = [
    may("get", "", "nodes", ""),
    may("patch", "", "nodes", ""),
    may("list", "", "pods", ""),
    may("get", "", "pods", ""),
    may("create", "", "pods", "eviction"),
    may("get", "apps", "daemonsets", ""),
];

impl std::fmt::Display for Permission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() { String::new() } else { format!(".{}", self.group) };
        let sub = if self.subresource.is_empty() { String::new() } else { format!("/{}", self.subresource) };
        write!(f, "{} {}{sub}{group}", self.verb, self.resource)
    }
}

/// Checks every permission of `needed` for the kubeconfig's user; `what` (e.g. `reboot`) and `role` (the documented
/// role that grants them) go into the error.
pub async fn require(cluster: &Cluster, needed: &[Permission], what: &str, role: &str) -> Result<(), ClusterError> {
    let path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let mut missing = Vec::new();
    for p in needed {
        let review = json!({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": { "resourceAttributes": {
                "verb": p.verb, "group": p.group, "resource": p.resource, "subresource": p.subresource,
            }},
        });
        let answer = cluster
            .call(http::Method::POST, path, Some(Body::json(&review)), Instant::now() + API_TIMEOUT)
            .await
            .map_err(|e| cluster.failed(&http::Method::POST, path, e))?;
        if answer["status"]["allowed"].as_bool() != Some(true) {
            missing.push(p.to_string());
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(ClusterError::Api {
        what: format!("{what} (checked before any change)"),
        why: format!(
            "the kubeconfig's user may not {}; grant it the role `{role}` (docs/without-operator.md, \"The permissions \
             wmrender needs\")",
            missing.join(", ")
        ),
    })
}
