//! Live cluster access (the `cluster` cargo feature, on by default): the API calls of `import --kubeconfig`,
//! `sync --kubeconfig`, `reboot` and `controller`, each in the file of its concern, and the plain readers of what
//! they return (a Machine, a Node object), which build without the feature. This module talks to the API server and
//! nothing else: it knows no SSH, no delivery and no lifecycle; the steps that need both the cluster and a node are
//! in [`crate::lifecycle`]. Everything read from the cluster is untrusted input.
//!
//! [`ClusterError`] is compiled with or without the feature, so a build without it can say which command needs it.

#[cfg(feature = "cluster")]
pub mod access;
#[cfg(feature = "cluster")]
pub mod client;
#[cfg(feature = "cluster")]
pub mod credentials;
#[cfg(feature = "cluster")]
pub mod csr;
#[cfg(feature = "cluster")]
pub mod drain;
#[cfg(feature = "cluster")]
pub mod events;
#[cfg(feature = "cluster")]
pub mod import;
#[cfg(feature = "cluster")]
pub mod join;
#[cfg(feature = "cluster")]
pub mod label;
#[cfg(feature = "cluster")]
pub mod lease;
pub mod machines;
pub mod node_object;
#[cfg(feature = "cluster")]
pub mod nodes;
#[cfg(feature = "cluster")]
pub mod tls_profile;
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
         # its labels, and once the agent reports it configured (condition {condition}=True), its taint:\n\
         oc label node {node} {worker}= {managed}=true\n\
         oc adm taint node {node} {taint}:{effect}-\n",
        client = CLIENT_SIGNER,
        serving = SERVING_SIGNER,
        worker = WORKER_ROLE,
        managed = MANAGED,
        condition = wmrender_contract::node_status::CONDITION_TYPE,
        taint = wmrender_contract::node_status::TAINT_KEY,
        effect = wmrender_contract::node_status::TAINT_EFFECT,
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
pub use client::{API_TIMEOUT, Body, CallError, Cluster};

/// Without the `cluster` feature there is no client: no value of this type exists, so every step that needs the
/// cluster is unreachable, and the commands that ask for one say which feature is missing.
#[cfg(not(feature = "cluster"))]
#[derive(Clone)]
pub enum Cluster {}
