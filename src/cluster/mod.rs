//! Live cluster access with kube-rs (the `cluster` cargo feature, on by default): `import --kubeconfig` reads the
//! cluster's configuration; `sync --kubeconfig` fetches node credentials, approves the configured nodes' kubelet
//! CSRs and labels them, finds the Windows Machines' nodes, mints the cloud-node-manager's token and prunes the nodes
//! that left (src/sync/cluster_side.rs calls them in order). Everything read from the cluster is untrusted input.
//!
//! [`ClusterError`] is compiled with or without the feature, so a build without it can say which command needs it.

#[cfg(feature = "cluster")]
pub mod credentials;
#[cfg(feature = "cluster")]
pub mod csr;
#[cfg(feature = "cluster")]
pub mod drain;
#[cfg(feature = "cluster")]
pub mod import;
#[cfg(feature = "cluster")]
pub mod join;
#[cfg(feature = "cluster")]
pub mod label;
#[cfg(feature = "cluster")]
pub mod machines;
#[cfg(feature = "cluster")]
pub mod prune;
#[cfg(feature = "cluster")]
pub mod reboot;
#[cfg(feature = "cluster")]
pub mod token;

use std::path::PathBuf;

/// kubelet's client certificates (TLS bootstrap).
pub const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// kubelet's serving certificates.
pub const SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";
/// The role label WMCO puts on BYOH nodes.
pub const WORKER_ROLE: &str = "node-role.kubernetes.io/worker";
/// wmrender's record of the nodes it configured.
pub const MANAGED: &str = "wmrender.dev/managed";

/// What the user runs to approve a node's CSRs by hand (sync without `--kubeconfig`, or a node that timed out).
pub fn manual_steps(node: &str) -> String {
    format!(
        "  # {node}: kubelet's client CSR first (requested by the node-bootstrapper), check that its subject is\n\
         #   O=system:nodes, CN=system:node:{node}, then approve it:\n\
         oc get csr --field-selector spec.signerName={client}\n\
         oc get csr CSR_NAME -o jsonpath='{{.spec.request}}' | base64 -d | openssl req -noout -subject\n\
         oc adm certificate approve CSR_NAME\n\
         # then its serving CSR (requested by system:node:{node}) once kubelet registers the node:\n\
         oc get csr --field-selector spec.signerName={serving} | grep 'system:node:{node}'\n\
         oc adm certificate approve CSR_NAME\n\
         # and its labels:\n\
         oc label node {node} {worker}= {managed}=true\n",
        client = CLIENT_SIGNER,
        serving = SERVING_SIGNER,
        worker = WORKER_ROLE,
        managed = MANAGED,
    )
}

/// Why the cluster could not be used. `main.rs` maps it to an exit code: a kubeconfig that cannot be used, or a build
/// without the feature, is the user's to fix (2); a cluster that cannot be reached or answers with an error is a
/// failure (3).
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("the kubeconfig {path}: {why}")]
    Kubeconfig { path: PathBuf, why: String },
    #[error(
        "{0} needs live cluster access, and this wmrender was built without the `cluster` feature; build it with the \
         default features (`cargo install --path .`)"
    )]
    NotBuilt(&'static str),
    #[error("{what}: {why}")]
    Api { what: String, why: String },
}

#[cfg(feature = "cluster")]
pub use client::{Cluster, api_error};

#[cfg(feature = "cluster")]
mod client {
    use super::ClusterError;
    use kube::config::{KubeConfigOptions, Kubeconfig};
    use std::path::Path;

    /// A client for the cluster a kubeconfig names (its current context).
    #[derive(Clone)]
    pub struct Cluster {
        pub client: kube::Client,
        /// The API server's URL, for messages.
        pub server: String,
    }

    impl Cluster {
        pub async fn connect(kubeconfig: &Path) -> Result<Cluster, ClusterError> {
            let bad = |why: String| ClusterError::Kubeconfig { path: kubeconfig.to_path_buf(), why };
            let file = Kubeconfig::read_from(kubeconfig).map_err(|e| bad(format!("cannot be read: {e}")))?;
            let config = kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .map_err(|e| bad(format!("cannot be used: {e}")))?;
            let server = config.cluster_url.to_string();
            let client =
                kube::Client::try_from(config).map_err(|e| bad(format!("cannot make a client from it: {e}")))?;
            Ok(Cluster { client, server })
        }
    }

    /// An API call that failed, in wmrender's words: what was asked, and the API's reason or the network's.
    pub fn api_error(what: impl std::fmt::Display, e: kube::Error) -> ClusterError {
        let why = match &e {
            kube::Error::Api(s) => format!("the API server answered {} {}: {}", s.code, s.reason, s.message),
            other => format!("the API server could not be reached: {other}"),
        };
        ClusterError::Api { what: what.to_string(), why }
    }
}
