//! Read-only access for `wmrender import --kubeconfig`: the same objects an operator would dump with
//! `oc get -o yaml`, fetched as JSON. Nothing is ever written to the cluster.

use super::{Cluster, ClusterError};
use serde_json::Value;
use std::path::Path;

/// What import reads: single objects (`…/name`) and lists.
const PATHS: &[&str] = &[
    "/apis/config.openshift.io/v1/infrastructures/cluster",
    "/apis/config.openshift.io/v1/networks/cluster",
    "/apis/operator.openshift.io/v1/networks/cluster",
    "/apis/config.openshift.io/v1/proxies/cluster",
    "/apis/config.openshift.io/v1/imagedigestmirrorsets",
    "/apis/config.openshift.io/v1/imagetagmirrorsets",
    "/apis/machine.openshift.io/v1beta1/namespaces/openshift-machine-api/machinesets",
];

/// Every object import needs, list items flattened; objects the cluster does not have are left out.
pub async fn fetch(kubeconfig: &Path) -> Result<Vec<Value>, ClusterError> {
    let cluster = Cluster::connect(kubeconfig).await?;
    let mut out = Vec::new();
    for path in PATHS {
        match cluster.get(path).await? {
            Some(v) if v["items"].is_array() => {
                // List items carry no apiVersion/kind of their own; restore them from the list.
                let kind = v["kind"].as_str().unwrap_or("").trim_end_matches("List").to_string();
                for mut item in v["items"].as_array().cloned().unwrap_or_default() {
                    item["apiVersion"] = v["apiVersion"].clone();
                    item["kind"] = kind.clone().into();
                    out.push(item);
                }
            }
            Some(v) => out.push(v),
            None => {}
        }
    }
    Ok(out)
}
