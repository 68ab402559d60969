//! `sync --kubeconfig`: the node credentials WMCO would deliver, fetched from the cluster into memory
//! (../shared/reference/wmco-node-artifacts.md, sections 1, 3.4 and 7). Nothing fetched is written locally or
//! printed; errors name the object, never its content. Everything is checked as untrusted input before it is used.
//!
//! - `C:\k\bootstrap-kubeconfig`: token and `ca.crt` of Secret `openshift-machine-config-operator/node-bootstrapper-token`,
//!   server = the Infrastructure's `status.apiServerInternalURI` (api-int; openshift/api's Go field
//!   `APIServerInternalURL` is serialised as `apiServerInternalURI`), in WMCO's JSON shape.
//! - `C:\k\bootstrap-ca.crt`: that Secret's `ca.crt`.
//! - `C:\k\kubelet-ca.crt`: `spec.kubeAPIServerServingCAData` of the first ControllerConfig that has it.
//! - `C:\k\ca-bundle.crt`: the ControllerConfig's image registry bundles (`imageRegistryBundleUserData`, then
//!   `imageRegistryBundleData`, each `# file` + data, as WMCO writes them), then the additional trusted CAs the
//!   cluster Proxy names (`spec.trustedCA.name`: ConfigMap in `openshift-config`, key `ca-bundle.crt`). Always
//!   pushed, even empty, so a CA removed from the cluster leaves the node too.
//! - the pull secret: Secret `openshift-config/pull-secret`, key `.dockerconfigjson`.
//! - `C:\k\tls\certs\tls.crt` and `tls.key`, windows_exporter's serving certificate: Secret
//!   `wmrender/windows-exporter-tls`, which the service CA operator writes for the Service wmrender renders without
//!   the operator (src/render/exporter.rs). Until the service CA has issued it there is none and nothing is
//!   pushed: the exporter is optional, and the agent reports it left out. With the operator (which delivers its own)
//!   it is not asked for.

use super::{Cluster, ClusterError};
use crate::secret::Secret;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use wmrender_contract::paths;

const BOOTSTRAP_SECRET: &str = "/api/v1/namespaces/openshift-machine-config-operator/secrets/node-bootstrapper-token";
const INFRASTRUCTURE: &str = "/apis/config.openshift.io/v1/infrastructures/cluster";
const CONTROLLER_CONFIGS: &str = "/apis/machineconfiguration.openshift.io/v1/controllerconfigs";
const PROXY: &str = "/apis/config.openshift.io/v1/proxies/cluster";
const PULL_SECRET: &str = "/api/v1/namespaces/openshift-config/secrets/pull-secret";
const EXPORTER_SECRET: &str = "/api/v1/namespaces/wmrender/secrets/windows-exporter-tls";

/// The node credentials, in memory only.
#[derive(Clone, Debug, Default)]
pub struct NodeCredentials {
    /// Node path → content.
    pub files: BTreeMap<&'static str, Secret>,
    /// The cluster's `.dockerconfigjson`.
    pub pull_secret: Option<Secret>,
    /// What could not be fetched without failing the sync (the optional exporter's certificate), and why.
    pub notes: Vec<String>,
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

/// Fetches the node credentials; with `exporter` (the mode without the operator, which renders the exporter's
/// Service in `wmrender`), windows_exporter's serving certificate too.
pub async fn fetch(cluster: &Cluster, exporter: bool) -> Result<NodeCredentials, ClusterError> {
    let mut fetched = NodeCredentials::default();

    let what = "Infrastructure `cluster`";
    let infrastructure = cluster.get(INFRASTRUCTURE).await?.ok_or_else(|| unusable(what, "the cluster has none"))?;
    let server = infrastructure["status"]["apiServerInternalURI"].as_str().unwrap_or("");
    if !server.starts_with("https://") || server.len() < 9 || server.contains(|c: char| c.is_whitespace() || c == '"') {
        return Err(unusable(what, format!("`status.apiServerInternalURI` is not an https URL: {server:?}")));
    }

    let what = "Secret openshift-machine-config-operator/node-bootstrapper-token";
    let secret = cluster.get(BOOTSTRAP_SECRET).await?.ok_or_else(|| unusable(what, "the cluster has none"))?;
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
    let items = cluster.list(CONTROLLER_CONFIGS).await?;
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
    let proxy = cluster.get(PROXY).await?.unwrap_or(Value::Null);
    if let Some(name) = proxy["spec"]["trustedCA"]["name"].as_str().filter(|n| !n.is_empty()) {
        let what = format!("ConfigMap openshift-config/{name} (the Proxy's trustedCA)");
        let path = format!("/api/v1/namespaces/openshift-config/configmaps/{name}");
        let cm = cluster.get(&path).await?.ok_or_else(|| unusable(&what, "the cluster has none"))?;
        let cas = cm["data"]["ca-bundle.crt"].as_str().ok_or_else(|| unusable(&what, "it has no `ca-bundle.crt`"))?;
        bundle.push_str(&format!("# {what}\n{cas}\n"));
    }
    if bundle.is_empty() {
        bundle.push_str("# the cluster has no additional trusted CAs\n");
    }
    check_bundle(bundle.as_bytes(), "the cluster's additional trusted CAs", false)?;
    fetched.files.insert(paths::TRUSTED_CA_BUNDLE, Secret::new(bundle.into_bytes()));

    let what = "Secret openshift-config/pull-secret";
    let pull = cluster.get(PULL_SECRET).await?.ok_or_else(|| unusable(what, "the cluster has none"))?;
    fetched.pull_secret = Some(Secret::new(decoded(&pull, "/data/.dockerconfigjson", what)?));

    let what = "Secret wmrender/windows-exporter-tls (the service CA's serving certificate of windows_exporter)";
    let tls = if exporter { optional_get(cluster, EXPORTER_SECRET, what, &mut fetched.notes).await? } else { None };
    if let Some(tls) = tls {
        let cert = decoded(&tls, "/data/tls.crt", what)?;
        check_bundle(&cert, &format!("{what} (tls.crt)"), true)?;
        let key = decoded(&tls, "/data/tls.key", what)?;
        if !is_private_key_pem(&key) {
            return Err(unusable(what, "its tls.key is not a PEM private key"));
        }
        fetched.files.insert(paths::EXPORTER_TLS_CERT, Secret::new(cert));
        fetched.files.insert(paths::EXPORTER_TLS_KEY, Secret::new(key));
    }
    Ok(fetched)
}

/// What only an optional service needs: not there (the service CA has not answered the Service yet) or not
/// readable (the documented Role in `wmrender` not bound, or `cluster/` not applied) leaves that service out on the
/// nodes, said in `notes`, instead of failing the sync. Any other failure is one.
async fn optional_get(
    cluster: &Cluster,
    path: &str,
    what: &str,
    notes: &mut Vec<String>,
) -> Result<Option<Value>, ClusterError> {
    let deadline = std::time::Instant::now() + super::API_TIMEOUT;
    match cluster.call(http::Method::GET, path, None, deadline).await {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.is(404) => {
            notes.push(format!(
                "{what} is not there yet (the service CA writes it for the rendered Service \
                 wmrender/windows-exporter): windows_exporter is left out on the nodes until a sync finds it"
            ));
            Ok(None)
        }
        Err(e) if e.is(403) => {
            notes.push(format!(
                "{what} cannot be read ({e}): bind the `wmrender-sync` Role of namespace wmrender (docs/without-operator.md) \
                 once cluster/ is applied; windows_exporter is left out on the nodes until then"
            ));
            Ok(None)
        }
        Err(e) => Err(cluster.failed(&http::Method::GET, path, e)),
    }
}

/// One PEM block of a private key (`PRIVATE KEY`, `RSA PRIVATE KEY`, `EC PRIVATE KEY`), and nothing else.
fn is_private_key_pem(bytes: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(bytes) else { return false };
    let text = text.trim();
    let Some(label) = text.strip_prefix("-----BEGIN ").and_then(|r| r.split("-----").next()) else { return false };
    label.ends_with("PRIVATE KEY")
        && text.ends_with(&format!("-----END {label}-----"))
        && text.matches("-----BEGIN ").count() == 1
}
