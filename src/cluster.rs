//! Read-only access to a live cluster with kube-rs, for `wmrender import --kubeconfig`: the same objects an
//! operator would dump with `oc get -o yaml`, fetched as JSON. Nothing is ever written to the cluster.

use crate::error::Error;
use kube::config::{KubeConfigOptions, Kubeconfig};
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
pub async fn fetch(kubeconfig: &Path) -> Result<Vec<Value>, Error> {
    let problem = |what: String| Error::Usage(format!("{}: {what}", kubeconfig.display()));
    let file = Kubeconfig::read_from(kubeconfig).map_err(|e| problem(e.to_string()))?;
    let config = kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .map_err(|e| problem(e.to_string()))?;
    let client = kube::Client::try_from(config).map_err(|e| problem(e.to_string()))?;
    let mut out = Vec::new();
    for path in PATHS {
        let request = http::Request::get(*path).body(Vec::new()).map_err(|e| problem(e.to_string()))?;
        match client.request::<Value>(request).await {
            Ok(v) if v["items"].is_array() => {
                // List items carry no apiVersion/kind of their own; restore them from the list.
                let kind = v["kind"].as_str().unwrap_or("").trim_end_matches("List").to_string();
                for mut item in v["items"].as_array().cloned().unwrap_or_default() {
                    item["apiVersion"] = v["apiVersion"].clone();
                    item["kind"] = kind.clone().into();
                    out.push(item);
                }
            }
            Ok(v) => out.push(v),
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => return Err(problem(format!("GET {path}: {e}"))),
        }
    }
    Ok(out)
}
