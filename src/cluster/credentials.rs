//! `sync --kubeconfig`: the node credentials WMCO would deliver, fetched from the cluster into memory
//! (../shared/reference/wmco-node-artifacts.md, sections 1, 3.4 and 7). Nothing fetched is written locally or
//! printed; errors name the object, never its content. Everything is checked as untrusted input before it is used.
//!
//! - `C:\k\bootstrap-kubeconfig`: token and `ca.crt` of Secret `openshift-machine-config-operator/node-bootstrapper-token`,
//!   server = the Infrastructure's `status.apiServerInternalURL` (api-int), in WMCO's JSON shape.
//! - `C:\k\bootstrap-ca.crt`: that Secret's `ca.crt`.
//! - `C:\k\kubelet-ca.crt`: `spec.kubeAPIServerServingCAData` of the first ControllerConfig that has it.
//! - `C:\k\ca-bundle.crt`: the ControllerConfig's image registry bundles (`imageRegistryBundleUserData`, then
//!   `imageRegistryBundleData`, each `# file` + data, as WMCO writes them), then the additional trusted CAs the
//!   cluster Proxy names (`spec.trustedCA.name`: ConfigMap in `openshift-config`, key `ca-bundle.crt`). Always
//!   pushed, even empty, so a CA removed from the cluster leaves the node too.
//! - the pull secret: Secret `openshift-config/pull-secret`, key `.dockerconfigjson`.

use super::{Cluster, ClusterError, api_error};
use crate::render::node::paths;
use crate::sync::secrets::{Fetched, Secret};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

const BOOTSTRAP_SECRET: &str = "/api/v1/namespaces/openshift-machine-config-operator/secrets/node-bootstrapper-token";
const INFRASTRUCTURE: &str = "/apis/config.openshift.io/v1/infrastructures/cluster";
const CONTROLLER_CONFIGS: &str = "/apis/machineconfiguration.openshift.io/v1/controllerconfigs";
const PROXY: &str = "/apis/config.openshift.io/v1/proxies/cluster";
const PULL_SECRET: &str = "/api/v1/namespaces/openshift-config/secrets/pull-secret";

/// GET of one object; `None` when the cluster does not have it.
pub(crate) async fn get(cluster: &Cluster, path: &str) -> Result<Option<Value>, ClusterError> {
    let request = http::Request::get(path)
        .body(Vec::new())
        .map_err(|e| ClusterError::Api { what: format!("GET {path}"), why: e.to_string() })?;
    match cluster.client.request::<Value>(request).await {
        Ok(v) => Ok(Some(v)),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        Err(e) => Err(api_error(format!("GET {path}"), e)),
    }
}

/// What the cluster holds that is not usable: exit 3 (the cluster is not as an OpenShift cluster should be).
fn unusable(what: &str, why: impl Into<String>) -> ClusterError {
    ClusterError::Api { what: what.to_string(), why: why.into() }
}

/// A base64 value of a Secret's or ControllerConfig's data, decoded. The error never shows the value.
fn decoded(object: &Value, pointer: &str, what: &str) -> Result<Vec<u8>, ClusterError> {
    let text = object
        .pointer(pointer)
        .and_then(Value::as_str)
        .ok_or_else(|| unusable(what, format!("it has no `{pointer}`")))?;
    STANDARD.decode(text.trim()).map_err(|_| unusable(what, format!("`{pointer}` is not base64")))
}

fn check_bundle(bytes: &[u8], what: &str, need_one: bool) -> Result<(), ClusterError> {
    let certificates = wmrender_contract::parse_ca_bundle(bytes).map_err(|e| unusable(what, e.to_string()))?;
    if need_one && certificates.is_empty() {
        return Err(unusable(what, "it holds no certificate"));
    }
    Ok(())
}

pub async fn fetch(cluster: &Cluster) -> Result<Fetched, ClusterError> {
    let mut fetched = Fetched::default();

    let what = "Infrastructure `cluster`";
    let infrastructure = get(cluster, INFRASTRUCTURE).await?.ok_or_else(|| unusable(what, "the cluster has none"))?;
    let server = infrastructure["status"]["apiServerInternalURL"].as_str().unwrap_or("");
    if !server.starts_with("https://") || server.len() < 9 || server.contains(|c: char| c.is_whitespace() || c == '"') {
        return Err(unusable(what, format!("`status.apiServerInternalURL` is not an https URL: {server:?}")));
    }

    let what = "Secret openshift-machine-config-operator/node-bootstrapper-token";
    let secret = get(cluster, BOOTSTRAP_SECRET).await?.ok_or_else(|| unusable(what, "the cluster has none"))?;
    let token = decoded(&secret, "/data/token", what)?;
    if token.is_empty() || !token.iter().all(|b| b.is_ascii_graphic()) {
        return Err(unusable(what, "its token is not a bearer token (empty, or not printable ASCII)"));
    }
    let ca = decoded(&secret, "/data/ca.crt", what)?;
    check_bundle(&ca, &format!("{what} (ca.crt)"), true)?;
    // WMCO's bootstrap kubeconfig: JSON, no kind/apiVersion.
    let kubeconfig = json!({
        "clusters": [{"name": "local", "cluster": {"server": server, "certificate-authority-data": STANDARD.encode(&ca)}}],
        "users": [{"name": "kubelet", "user": {"token": String::from_utf8_lossy(&token)}}],
        "contexts": [{"name": "kubelet", "context": {"cluster": "local", "user": "kubelet"}}],
        "current-context": "kubelet",
    });
    fetched.files.insert(paths::BOOTSTRAP_KUBECONFIG, Secret::new(kubeconfig.to_string().into_bytes()));
    fetched.files.insert(paths::BOOTSTRAP_CA, Secret::new(ca));

    let what = "ControllerConfig";
    let configs = get(cluster, CONTROLLER_CONFIGS).await?.unwrap_or(Value::Null);
    let items = configs["items"].as_array().cloned().unwrap_or_default();
    let config = items
        .iter()
        .find(|c| c["spec"]["kubeAPIServerServingCAData"].as_str().is_some_and(|s| !s.is_empty()))
        .ok_or_else(|| unusable(what, "no ControllerConfig has `spec.kubeAPIServerServingCAData` (the kubelet CA)"))?;
    let kubelet_ca = decoded(config, "/spec/kubeAPIServerServingCAData", what)?;
    check_bundle(&kubelet_ca, "the ControllerConfig's kubeAPIServerServingCAData", true)?;
    fetched.files.insert(paths::KUBELET_CA, Secret::new(kubelet_ca));

    let mut bundle = String::new();
    for key in ["imageRegistryBundleUserData", "imageRegistryBundleData"] {
        for (i, entry) in config["spec"][key].as_array().into_iter().flatten().enumerate() {
            let data = decoded(entry, "/data", &format!("the ControllerConfig's {key}[{i}]"))?;
            let file = entry["file"].as_str().unwrap_or("").replace("..", ":");
            bundle.push_str(&format!("# {file}\n{}\n\n", String::from_utf8_lossy(&data)));
        }
    }
    let proxy = get(cluster, PROXY).await?.unwrap_or(Value::Null);
    if let Some(name) = proxy["spec"]["trustedCA"]["name"].as_str().filter(|n| !n.is_empty()) {
        let what = format!("ConfigMap openshift-config/{name} (the Proxy's trustedCA)");
        let path = format!("/api/v1/namespaces/openshift-config/configmaps/{name}");
        let cm = get(cluster, &path).await?.ok_or_else(|| unusable(&what, "the cluster has none"))?;
        let cas = cm["data"]["ca-bundle.crt"].as_str().ok_or_else(|| unusable(&what, "it has no `ca-bundle.crt`"))?;
        bundle.push_str(&format!("# {what}\n{cas}\n"));
    }
    if bundle.is_empty() {
        bundle.push_str("# the cluster has no additional trusted CAs\n");
    }
    check_bundle(bundle.as_bytes(), "the cluster's additional trusted CAs", false)?;
    fetched.files.insert(paths::TRUSTED_CA_BUNDLE, Secret::new(bundle.into_bytes()));

    let what = "Secret openshift-config/pull-secret";
    let pull = get(cluster, PULL_SECRET).await?.ok_or_else(|| unusable(what, "the cluster has none"))?;
    fetched.pull_secret = Some(Secret::new(decoded(&pull, "/data/.dockerconfigjson", what)?));
    Ok(fetched)
}
