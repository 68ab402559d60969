//! Events on the objects wmrender acts on — a Node, a Machine — as a controller records them (what `oc describe
//! node` shows under Events, and what WMCO records for each step): `core/v1` Events with the object as
//! `involvedObject`, in the object's namespace (a Node's in `default`, as kubelet's), reported by
//! `wmrender-controller` and this replica.

use super::{API_TIMEOUT, Body, Cluster, ClusterError};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};
use std::time::Instant;

pub const COMPONENT: &str = "wmrender-controller";

/// Normal or Warning, as the API has them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Normal,
    Warning,
}

/// What an Event is about: the object read from the API (its kind, name, namespace and uid are taken from it).
pub struct About<'a> {
    pub api_version: &'a str,
    pub kind: &'a str,
    pub object: &'a Value,
}

/// Records one Event (`reason`: CamelCase, as Kubernetes reasons are; `message`: at most 1,000 characters kept).
pub async fn record(
    cluster: &Cluster,
    about: &About<'_>,
    kind: Kind,
    reason: &str,
    message: &str,
    instance: &str,
) -> Result<(), ClusterError> {
    let meta = &about.object["metadata"];
    let name = meta["name"].as_str().unwrap_or("");
    let namespace = meta["namespace"].as_str().unwrap_or("default");
    let now = Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let event = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": { "generateName": format!("{name}."), "namespace": namespace },
        "involvedObject": { "apiVersion": about.api_version, "kind": about.kind, "name": name,
                            "namespace": meta["namespace"], "uid": meta["uid"] },
        "reason": reason,
        "message": message.chars().take(1000).collect::<String>(),
        "type": match kind { Kind::Normal => "Normal", Kind::Warning => "Warning" },
        "source": { "component": COMPONENT },
        "reportingComponent": COMPONENT,
        "reportingInstance": instance,
        "firstTimestamp": now, "lastTimestamp": now, "count": 1,
    });
    let path = format!("/api/v1/namespaces/{namespace}/events");
    cluster
        .call(http::Method::POST, &path, Some(Body::json(&event)), Instant::now() + API_TIMEOUT)
        .await
        .map(|_| ())
        .map_err(|e| cluster.failed(&http::Method::POST, &path, e))
}
