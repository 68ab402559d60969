//! Live cluster access with kube-rs (the `cluster` cargo feature, on by default): `import --kubeconfig` reads the
//! cluster's configuration; `sync --kubeconfig` fetches node credentials, approves the configured nodes' kubelet
//! CSRs and labels them. Everything read from the cluster is untrusted input.
//!
//! [`ClusterError`] is compiled with or without the feature, so a build without it can say which command needs it.

#[cfg(feature = "cluster")]
pub mod drain;
#[cfg(feature = "cluster")]
pub mod import;
#[cfg(feature = "cluster")]
pub mod reboot;

use std::path::PathBuf;

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
