//! The node contract: what wmrender's renderer writes, `wmrender sync` delivers and `wmrender-node` converges
//! to. One definition of each file and path, used by all three; everything read back from a node goes through the
//! parsers here, which check it as untrusted input.

pub mod bundle_artifact;
pub mod ca_bundle;
pub mod cluster_names;
pub mod compat;
pub mod hosts_toml;
pub mod machine;
pub mod manifest;
pub mod node_status;
pub mod path;
pub mod payload;
pub mod result;
pub mod services;
pub mod settings;
pub mod signed_bundle;

pub use ca_bundle::{BundleError, parse_ca_bundle};
pub use machine::NodeMachine;
pub use manifest::{
    BundleEntry, BundleManifest, FileKind, Journal, ManifestUpdate, Mode, NodeFile, NodeManifest, UpdateError,
};
pub use path::NodePath;
pub use result::Actions;
pub use result::{ApplyResult, ApplyStatus, PullOutcome, PullReport};
pub use services::{NodeVariable, Service, ServicesFile};
pub use settings::{NodeNameSource, NodeSettings, RotatedFiles, Step, StepOutput, When};

use sha2::{Digest, Sha256};

/// The node paths of the contract's own files.
pub mod paths {
    /// wmrender's folder on the node.
    pub const WMRENDER_DIR: &str = r"C:\k\wmrender";
    /// Written by sync: what it delivered, with its journal.
    pub const NODE_MANIFEST: &str = r"C:\k\wmrender\manifest.json";
    /// Written by sync for a one-file change instead of the whole manifest: the entries that changed since, over
    /// the manifest it names by digest ([`crate::ManifestUpdate`]).
    pub const NODE_MANIFEST_UPDATE: &str = r"C:\k\wmrender\manifest.json.wmrender-update";
    pub const SERVICES_JSON: &str = r"C:\k\wmrender\services.json";
    pub const SETTINGS_JSON: &str = r"C:\k\wmrender\node.json";
    /// The agent itself; sync delivers it with the bundle.
    pub const AGENT_EXE: &str = r"C:\k\wmrender\wmrender-node.exe";
    /// Written by the agent only after a converged pass: what it applied.
    pub const APPLIED_STATE: &str = r"C:\k\wmrender\applied.json";
    /// The pulled bundle on the node: its reference, its signed version and its files' digest (the agent's).
    pub const PULLED_STATE: &str = r"C:\k\wmrender\pulled.json";
    /// Held by the agent while it converges, so a sync's `apply` and the service's loop never overlap.
    pub const AGENT_LOCK: &str = r"C:\k\wmrender\agent.lock";
    /// Written by every pass of the agent (sync's `apply` and the service's): its result line, so that sync sees a
    /// pass that failed after a reboot although nothing it delivered changed.
    pub const LAST_PASS: &str = r"C:\k\wmrender\last-pass.json";
    /// Written by the agent service when it starts: its process and the sha256 of the program it runs, so that a
    /// pass can tell that the service still runs an agent that sync has since replaced.
    pub const AGENT_RUNNING: &str = r"C:\k\wmrender\agent-running.json";
    /// Written by sync for a Machine's instance: which Machine it is ([`crate::NodeMachine`]).
    pub const MACHINE: &str = r"C:\k\wmrender\machine.json";
    /// host-local IPAM's state (the CNI plugins'), which WMCO clears when a node leaves: addresses of containers
    /// that no longer exist.
    pub const CNI_STATE_DIR: &str = r"C:\var\lib\cni";
    /// The agent's own service.
    pub const AGENT_SERVICE: &str = "wmrender-node";
    /// The cluster's additional trusted CAs (PEM bundle, pushed by sync); the agent imports each certificate into
    /// the LocalMachine Root store and removes the ones it imported that left the bundle.
    pub const TRUSTED_CA_BUNDLE: &str = r"C:\k\ca-bundle.crt";

    // Delivered by sync at push time, never rendered: the cluster's credentials and CAs.
    pub const BOOTSTRAP_KUBECONFIG: &str = r"C:\k\bootstrap-kubeconfig";
    pub const KUBELET_CA: &str = r"C:\k\kubelet-ca.crt";
    pub const BOOTSTRAP_CA: &str = r"C:\k\bootstrap-ca.crt";
    /// containerd's `config_path`: one `<registry host>\hosts.toml` per mirrored registry host.
    pub const CONTAINERD_REGISTRIES: &str = r"C:\k\containerd\registries";
    pub const EXPORTER_TLS_CERT: &str = r"C:\k\tls\certs\tls.crt";
    pub const EXPORTER_TLS_KEY: &str = r"C:\k\tls\certs\tls.key";
    /// Kubeconfig of the Azure cloud-node-manager's own identity (mode without the operator): its ServiceAccount's
    /// short-lived token, by file.
    pub const CLOUD_NODE_MANAGER_KUBECONFIG: &str = r"C:\k\cloud-node-manager.kubeconfig";
    /// The token that kubeconfig names (`tokenFile`). The service's client re-reads a token file while it runs
    /// (client-go reads `tokenFile` again every minute), so a token a later sync pushes is used without restarting
    /// the service.
    pub const CLOUD_NODE_MANAGER_TOKEN: &str = r"C:\k\cloud-node-manager.token";
    /// Written by kubelet's TLS bootstrap: the node's own credentials (its client certificate, by file). The
    /// agent, hybrid-overlay, kube-proxy and Azure's cloud-node-manager use it.
    pub const KUBECONFIG: &str = r"C:\k\kubeconfig";
}

/// Suffix of a file sync is still writing; a cut leaves it behind and the next sync removes it.
pub const TEMP_SUFFIX: &str = ".wmrender-tmp";
/// Suffix of a service binary waiting for the agent to stop its services and swap it in.
pub const STAGED_SUFFIX: &str = ".wmrender-staged";
/// Suffix of a program the agent's pull is fetching (kept between pulls to be taken up): a name of its own, so that
/// a sync writing the same program's staged file (`<path>.wmrender-staged.wmrender-tmp`) never writes the same file.
/// It ends with [`TEMP_SUFFIX`], so no delivered or pulled file may be named so.
pub const PULLING_SUFFIX: &str = ".wmrender-pulling.wmrender-tmp";
/// Suffix of an executable set aside because a running program held it (the agent's own, when sync replaces it;
/// a service binary a pod's shim still runs): the agent removes it once nothing runs it.
pub const ASIDE_SUFFIX: &str = ".wmrender-old";

/// Pretty JSON with a final newline, the form of every contract file (reviewers read them in pull requests).
/// Contract types hold only strings, numbers, booleans, lists and string-keyed maps: serialising cannot fail.
pub(crate) fn pretty_json(value: &impl serde::Serialize) -> Vec<u8> {
    let mut out = serde_json::to_vec_pretty(value).unwrap_or_default();
    out.push(b'\n');
    out
}

/// Lower-case hex sha256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contract_paths_are_node_paths() {
        for p in [
            paths::WMRENDER_DIR,
            paths::NODE_MANIFEST,
            paths::NODE_MANIFEST_UPDATE,
            paths::SERVICES_JSON,
            paths::SETTINGS_JSON,
            paths::AGENT_EXE,
            paths::APPLIED_STATE,
            paths::AGENT_LOCK,
            paths::LAST_PASS,
            paths::AGENT_RUNNING,
            paths::MACHINE,
            paths::TRUSTED_CA_BUNDLE,
            paths::BOOTSTRAP_KUBECONFIG,
            paths::KUBELET_CA,
            paths::BOOTSTRAP_CA,
            paths::EXPORTER_TLS_CERT,
            paths::EXPORTER_TLS_KEY,
            paths::CLOUD_NODE_MANAGER_KUBECONFIG,
            paths::CLOUD_NODE_MANAGER_TOKEN,
            paths::KUBECONFIG,
        ] {
            NodePath::parse_delivered(p).unwrap();
        }
    }
}
