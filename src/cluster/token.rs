//! The Azure cloud-node-manager's kubeconfig (mode without the operator): a short-lived token for the rendered
//! ServiceAccount `wmrender/cloud-node-manager`, minted with TokenRequest, and the API server (api-int) and its CA
//! the bootstrap kubeconfig names. The kubeconfig (`C:\k\cloud-node-manager.kubeconfig`) names the token by file
//! (`C:\k\cloud-node-manager.token`), which the service's client re-reads while it runs: a token a later sync pushes
//! is picked up without a restart. The token is a secret: it lives in memory and in the bytes pushed, never in
//! output, logs, messages or local files.

use super::{API_TIMEOUT, Body, Cluster, ClusterError};
use crate::secret::Secret;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use wmrender_contract::cluster_names::{CLOUD_NODE_MANAGER_SERVICE_ACCOUNT as SERVICE_ACCOUNT, NAMESPACE};
use wmrender_contract::paths::CLOUD_NODE_MANAGER_TOKEN;

/// 24 hours. The token is bound to nothing but the ServiceAccount, so it should not outlive its use by much: a day
/// covers a node that is configured, reboots and is initialised (the service's main work), and a token copied off
/// a node is soon worthless. Each `sync --kubeconfig` mints a new one and pushes it, so a node synced daily never
/// holds an expired token; the API server may shorten it (its `--service-account-max-token-expiration`).
pub const EXPIRATION_SECONDS: i64 = 24 * 3600;

/// Where the node's services reach the API server, and its CA (base64 PEM, as a kubeconfig carries it).
pub struct Endpoint {
    pub server: String,
    pub ca_data: String,
}

/// The API server and CA of the bootstrap kubeconfig sync pushes (given with --bootstrap-kubeconfig or fetched):
/// the api-int URL and CA kubelet itself uses, so the service reaches the API server as kubelet does. `None` when
/// the bootstrap kubeconfig names no server with an inline CA.
pub fn endpoint_from_bootstrap(bootstrap_kubeconfig: &[u8]) -> Option<Endpoint> {
    let config = kube::config::Kubeconfig::from_yaml(std::str::from_utf8(bootstrap_kubeconfig).ok()?).ok()?;
    let current = config.current_context.as_deref();
    let context_cluster = config
        .contexts
        .iter()
        .find(|c| Some(c.name.as_str()) == current)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone());
    let named = match context_cluster {
        Some(name) => config.clusters.iter().find(|c| c.name == name)?,
        None if config.clusters.len() == 1 => &config.clusters[0],
        None => return None,
    };
    let cluster = named.cluster.as_ref()?;
    let server = cluster.server.clone()?;
    let ca_data = cluster.certificate_authority_data.clone()?;
    // Read from a file: only an https URL and base64 go into the kubeconfig pushed.
    let base64 = |c: char| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=');
    let url_ok = server.starts_with("https://") && !server.chars().any(|c| c.is_whitespace() || c.is_control());
    (url_ok && !ca_data.is_empty() && ca_data.chars().all(base64)).then_some(Endpoint { server, ca_data })
}

/// The service's credentials: its kubeconfig and the token file it names.
pub struct Credentials {
    pub kubeconfig: Secret,
    pub token: Secret,
    /// How long the token is valid from now: the API server's `status.expirationTimestamp` (it may shorten what
    /// was asked for), or what was asked for when the answer holds none that parses.
    pub lifetime: Duration,
}

/// The token's lifetime from the TokenRequest's answer, bounded by what was asked for.
fn lifetime(answer: &Value) -> Duration {
    let asked = Duration::from_secs(EXPIRATION_SECONDS as u64);
    let Some(expires) =
        answer["status"]["expirationTimestamp"].as_str().and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
    else {
        return asked;
    };
    let left = expires.duration_since(k8s_openapi::jiff::Timestamp::now());
    Duration::try_from(left).unwrap_or(Duration::ZERO).min(asked)
}

/// Mints a token for `wmrender/cloud-node-manager` (audience: the API server's own) and returns the kubeconfig and
/// token file. A missing ServiceAccount means the rendered `cluster/` objects are not applied yet.
pub async fn cloud_node_manager_credentials(
    cluster: &Cluster,
    endpoint: &Endpoint,
) -> Result<Credentials, ClusterError> {
    let path = format!("/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{SERVICE_ACCOUNT}/token");
    let what = format!("TokenRequest for ServiceAccount {NAMESPACE}/{SERVICE_ACCOUNT}");
    let body = json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": { "expirationSeconds": EXPIRATION_SECONDS },
    });
    let answer: Value =
        match cluster.call(http::Method::POST, &path, Some(Body::json(&body)), Instant::now() + API_TIMEOUT).await {
            Ok(v) => v,
            Err(e) if e.is(404) => {
                return Err(ClusterError::Api {
                    what,
                    why: format!(
                        "the ServiceAccount {NAMESPACE}/{SERVICE_ACCOUNT} does not exist: apply the rendered cluster/ \
                         objects first"
                    ),
                });
            }
            Err(e) => return Err(ClusterError::Api { what, why: e.to_string() }),
        };
    let Some(token) = answer["status"]["token"].as_str().filter(|t| !t.is_empty()) else {
        return Err(ClusterError::Api { what, why: "the answer holds no status.token".into() });
    };
    Ok(Credentials {
        kubeconfig: Secret::new(kubeconfig(endpoint)),
        token: Secret::new(token.as_bytes().to_vec()),
        lifetime: lifetime(&answer),
    })
}

/// A kubeconfig with one cluster, one user (the token file) and one context. JSON, which every kubeconfig reader
/// takes, so no value needs YAML quoting. It holds no secret and stays the same from one sync to the next.
fn kubeconfig(endpoint: &Endpoint) -> Vec<u8> {
    let doc = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "cluster", "cluster": {
            "server": endpoint.server, "certificate-authority-data": endpoint.ca_data } }],
        "users": [{ "name": SERVICE_ACCOUNT, "user": { "tokenFile": CLOUD_NODE_MANAGER_TOKEN } }],
        "contexts": [{ "name": SERVICE_ACCOUNT, "context": { "cluster": "cluster", "user": SERVICE_ACCOUNT } }],
        "current-context": SERVICE_ACCOUNT,
    });
    let mut bytes = serde_json::to_vec_pretty(&doc).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOOTSTRAP: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: https://api-int.x.example.com:6443\n    certificate-authority-data: TFMwdExTMUNSVWRK\ncontexts:\n- name: kubelet\n  context:\n    cluster: local\n    user: kubelet\ncurrent-context: kubelet\nusers:\n- name: kubelet\n  user:\n    token: bootstrap-token\n";

    #[test]
    fn the_endpoint_is_the_bootstrap_kubeconfigs_current_cluster() {
        let e = endpoint_from_bootstrap(BOOTSTRAP.as_bytes()).unwrap();
        assert_eq!((e.server.as_str(), e.ca_data.as_str()), ("https://api-int.x.example.com:6443", "TFMwdExTMUNSVWRK"));
        let written: Value = serde_json::from_slice(&kubeconfig(&e)).unwrap();
        assert_eq!(written["users"][0]["user"]["tokenFile"], CLOUD_NODE_MANAGER_TOKEN);
        assert_eq!(written["clusters"][0]["cluster"]["server"], "https://api-int.x.example.com:6443");
    }

    #[test]
    fn a_bootstrap_kubeconfig_without_https_or_inline_ca_gives_no_endpoint() {
        assert!(endpoint_from_bootstrap(BOOTSTRAP.replace("https://", "http://").as_bytes()).is_none());
        assert!(endpoint_from_bootstrap(BOOTSTRAP.replace("TFMwdExTMUNSVWRK", "\"a b\"").as_bytes()).is_none());
        assert!(endpoint_from_bootstrap(b"not: [yaml").is_none());
    }

    #[test]
    fn the_lifetime_is_the_servers_expiry_bounded_by_what_was_asked() {
        let in_secs = |secs: i64| {
            let t = k8s_openapi::jiff::Timestamp::now() + k8s_openapi::jiff::SignedDuration::from_secs(secs);
            json!({"status": {"expirationTimestamp": t.to_string()}})
        };
        let shortened = lifetime(&in_secs(3600)).as_secs();
        assert!((3590..=3600).contains(&shortened), "{shortened}");
        assert_eq!(lifetime(&in_secs(10 * EXPIRATION_SECONDS)).as_secs(), EXPIRATION_SECONDS as u64);
        assert_eq!(lifetime(&in_secs(-60)), Duration::ZERO, "already expired");
        assert_eq!(lifetime(&json!({"status": {"expirationTimestamp": "soon"}})).as_secs(), EXPIRATION_SECONDS as u64);
    }
}
