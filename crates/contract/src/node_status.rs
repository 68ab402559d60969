//! How a node's configuration shows on its Node object, without the operator: written by the agent with the node's
//! own credentials (what kubelet's TLS bootstrap left in `C:\k\kubeconfig`), read by `wmrender sync`, which keeps
//! the node tainted while it is not configured.
//!
//! - kubelet registers the Node with [`TAINT_KEY`] (`registerWithTaints` in the rendered kubelet configuration):
//!   nothing is scheduled on a node before its configuration is known good;
//! - after each pass the agent sets the condition [`CONDITION_TYPE`] in the Node's status (`True` when the pass
//!   converged, `False` with the reason and the errors when it failed, `Unknown` while it waits) and the annotation
//!   [`BUNDLE_ANNOTATION`] with the digest of the bundle it applied, as node-problem-detector reports on a node;
//! - sync removes the taint once the condition is `True` for the bundle it delivered, and puts it back when the
//!   condition turns `False`. A node may not change its own taints (the NodeRestriction admission plugin), so
//!   only a user with rights on Nodes can untaint it.

use crate::manifest::{FileKind, NodeManifest};
use crate::path::NodePath;
use sha2::{Digest, Sha256};

/// The taint kubelet registers with and sync removes once the node is configured.
pub const TAINT_KEY: &str = "wmrender.dev/unconfigured";
pub const TAINT_EFFECT: &str = "NoSchedule";
/// The Node condition the agent keeps.
pub const CONDITION_TYPE: &str = "wmrender.dev/Configured";
/// The Node annotation with the digest of the bundle the agent last applied.
pub const BUNDLE_ANNOTATION: &str = "wmrender.dev/bundle";
/// The Node annotation with the digest of the payload (the programs and the agent, [`NodeManifest::payload_digest`])
/// the agent last applied: a payload changes without the bundle, and the controller delivers it over SSH.
pub const PAYLOAD_ANNOTATION: &str = "wmrender.dev/payload";
/// The Node annotation with the sha256 (hex) of the agent's own executable as the node manifest lists it
/// ([`NodeManifest::agent_digest`]): the one program a pulled payload never brings (it comes over SSH), so a
/// controller whose Nodes pull their payload tells from it which still need the agent synced.
pub const AGENT_ANNOTATION: &str = "wmrender.dev/agent";
/// The Node annotation with the bundle the node should pull (`registry/repository@sha256:…`,
/// [`crate::bundle_artifact::Reference`]): set by the controller, a user or Argo CD; read by the agent.
pub const DESIRED_BUNDLE_ANNOTATION: &str = "wmrender.dev/desired-bundle";
/// The Node annotation with the pulled bundle (`registry/repository@sha256:…`) the agent last converged to, while it
/// is on the node (a sync that delivered another since removes it).
pub const PULLED_BUNDLE_ANNOTATION: &str = "wmrender.dev/pulled-bundle";
/// The Node condition that says whether the desired bundle was pulled: `True` (reason [`REASON_PULLED`]) once it is
/// on the node, `False` ([`REASON_REFUSED`]) when the node refused it, `Unknown` ([`REASON_RETRYING`]) while it
/// cannot be fetched. A refused bundle leaves the node as it was, still configured: this condition, not
/// [`CONDITION_TYPE`], says so.
pub const PULL_CONDITION_TYPE: &str = "wmrender.dev/BundlePulled";
/// The Node annotation with the payload the node should pull (`registry/repository@sha256:…` of an artifact
/// `wmrender publish --payload` wrote): set by the controller (`--pull-payload-from`), a user or Argo CD; read by the
/// agent.
pub const DESIRED_PAYLOAD_ANNOTATION: &str = "wmrender.dev/desired-payload";
/// The Node annotation with the pulled payload the agent last converged to, while its programs are on the node (a
/// sync that replaced one since removes it).
pub const PULLED_PAYLOAD_ANNOTATION: &str = "wmrender.dev/pulled-payload";
/// As [`PULL_CONDITION_TYPE`], for the desired payload.
pub const PAYLOAD_PULL_CONDITION_TYPE: &str = "wmrender.dev/PayloadPulled";
pub const REASON_PULLED: &str = "Pulled";
/// The reason of a pull condition whose pulled bundle or payload was on the node and is no longer (a sync delivered
/// another since): `True`, and the agent pulls again only when the annotation changes.
pub const REASON_SYNCED_SINCE: &str = "SyncedSince";
pub const REASON_REFUSED: &str = "Refused";
pub const REASON_RETRYING: &str = "Retrying";

/// The condition's reasons (CamelCase, as Kubernetes condition reasons are).
pub const REASON_CONVERGED: &str = "Converged";
pub const REASON_FAILED: &str = "ApplyFailed";
pub const REASON_PENDING: &str = "Pending";

/// `sha256:…` of a bundle: its rendered files, by node path and content hash, in path order. The same for the
/// files sync delivers and for the manifest it leaves on the node, so the Node's annotation can be compared with
/// what a sync would deliver.
pub fn bundle_digest<'a>(files: impl IntoIterator<Item = (&'a NodePath, &'a str)>) -> String {
    let mut lines: Vec<String> = files.into_iter().map(|(p, sha)| format!("{p}\t{sha}\n")).collect();
    lines.sort();
    let mut h = Sha256::new();
    for l in &lines {
        h.update(l.as_bytes());
    }
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// `sha256:…` of a payload: the programs and the agent, by node path and content hash, in path order, as
/// [`bundle_digest`] is of the bundle. Empty files list: an empty string (a node that got no payload says nothing).
pub fn payload_digest<'a>(files: impl IntoIterator<Item = (&'a NodePath, &'a str)>) -> String {
    let mut files = files.into_iter().peekable();
    if files.peek().is_none() {
        return String::new();
    }
    bundle_digest(files)
}

impl NodeManifest {
    /// The digest of the rendered bundle this manifest says is on the node (payload and credentials left out:
    /// they are the same for every render).
    pub fn bundle_digest(&self) -> String {
        bundle_digest(self.files.iter().filter(|f| f.kind == FileKind::Bundle).map(|f| (&f.path, f.sha256.as_str())))
    }

    /// The digest of the payload this manifest says is on the node: its programs and the agent, by node path and
    /// content hash ([`payload_digest`]).
    pub fn payload_digest(&self) -> String {
        payload_digest(self.files.iter().filter(|f| f.kind == FileKind::Payload).map(|f| (&f.path, f.sha256.as_str())))
    }

    /// The sha256 (hex) of the agent's executable this manifest lists; empty when it lists none.
    pub fn agent_digest(&self) -> String {
        let agent = |f: &&crate::NodeFile| f.path.as_str().eq_ignore_ascii_case(crate::paths::AGENT_EXE);
        self.files.iter().find(agent).map(|f| f.sha256.clone()).unwrap_or_default()
    }

    /// The digest of everything this manifest says sync delivered (bundle, payload, credentials): a new one for each
    /// sync that changed a file, the same when a sync only marks the delivery applied.
    pub fn delivery_digest(&self) -> String {
        bundle_digest(self.files.iter().map(|f| (&f.path, f.sha256.as_str())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_ignores_order_and_follows_content() {
        let (a, b) = (NodePath::known(r"C:\k\a"), NodePath::known(r"C:\k\b"));
        let one = bundle_digest([(&a, "11"), (&b, "22")]);
        assert_eq!(one, bundle_digest([(&b, "22"), (&a, "11")]));
        assert_ne!(one, bundle_digest([(&a, "11"), (&b, "23")]));
        assert!(one.starts_with("sha256:") && one.len() == 7 + 64);
    }
}
