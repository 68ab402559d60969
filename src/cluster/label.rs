//! The labels sync puts on the nodes it configured: `node-role.kubernetes.io/worker=""`, as WMCO labels BYOH nodes,
//! and `wmrender.dev/managed=true`, wmrender's record of the nodes it manages (what `--prune-nodes` looks for).
//! A merge patch carrying the resourceVersion just read, so a concurrent writer makes it fail with 409 instead of
//! being overwritten; then it is read and tried again, a bounded number of times.

use super::credentials::get;
use super::{Cluster, ClusterError, api_error};
use serde_json::{Value, json};

pub use super::{MANAGED, WORKER_ROLE};
const ATTEMPTS: usize = 5;

pub fn is_labelled(node: &Value) -> bool {
    let labels = &node["metadata"]["labels"];
    labels[WORKER_ROLE] == "" && labels[MANAGED] == "true"
}

/// Labels Node `name`; `Ok(false)` when there is no such Node (yet).
pub async fn label(cluster: &Cluster, name: &str) -> Result<bool, ClusterError> {
    let path = format!("/api/v1/nodes/{name}");
    for _ in 0..ATTEMPTS {
        let Some(node) = get(cluster, &path).await? else { return Ok(false) };
        if is_labelled(&node) {
            return Ok(true);
        }
        let patch = json!({"metadata": {
            "resourceVersion": node["metadata"]["resourceVersion"],
            "labels": {WORKER_ROLE: "", MANAGED: "true"},
        }});
        let request = http::Request::patch(&path)
            .header("Content-Type", "application/merge-patch+json")
            .body(patch.to_string().into_bytes())
            .map_err(|e| ClusterError::Api { what: format!("PATCH {path}"), why: e.to_string() })?;
        match cluster.client.request::<Value>(request).await {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Err(api_error(format!("labelling node {name}"), e)),
        }
    }
    Err(ClusterError::Api {
        what: format!("labelling node {name}"),
        why: format!("the Node kept changing under the patch ({ATTEMPTS} conflicts in a row)"),
    })
}
