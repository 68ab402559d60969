//! The labels sync puts on the nodes it configured: `node-role.kubernetes.io/worker=""`, as WMCO labels BYOH nodes,
//! and `wmrender.dev/managed=true`, wmrender's record of the nodes it manages (what `--prune-nodes` looks for).
//! A merge patch carrying the resourceVersion just read ([`super::nodes::patch`]), so a concurrent writer makes it
//! fail with 409 instead of being overwritten; then it is read and tried again, a bounded number of times.

use super::{API_TIMEOUT, Cluster, ClusterError, nodes};
use serde_json::{Value, json};
use std::time::Instant;

pub use super::{MANAGED, WORKER_ROLE};

pub fn is_labelled(node: &Value) -> bool {
    let labels = &node["metadata"]["labels"];
    labels[WORKER_ROLE] == "" && labels[MANAGED] == "true"
}

/// Labels Node `name`; `Ok(false)` when there is no such Node (yet).
pub async fn label(cluster: &Cluster, name: &str) -> Result<bool, ClusterError> {
    let found = nodes::patch(cluster, name, Instant::now() + API_TIMEOUT, |node| {
        (!is_labelled(node)).then(|| json!({"metadata": {"labels": {WORKER_ROLE: "", MANAGED: "true"}}}))
    })
    .await?;
    Ok(found.is_some())
}
