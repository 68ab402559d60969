//! The two manifests: `manifest.json` in the rendered output (what a render produced, and for whom), and
//! `C:\k\wmrender\manifest.json` on a node (what sync delivered there, with the journal that lets the next sync
//! finish an interrupted one).

use crate::path::NodePath;
use serde::{Deserialize, Serialize};

/// Who configures the Windows nodes; the one setting that decides whether `sync` may touch a BYOH host.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// WMCO is installed by the render and configures the BYOH hosts and Machines; sync leaves them alone.
    WithOperator,
    /// No operator: `sync` and `wmrender-node` configure every node.
    #[default]
    WithoutOperator,
}

/// `manifest.json` of a rendered output directory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundleManifest {
    /// The wmrender version that rendered the directory.
    pub wmrender: String,
    /// `sha256:…` of the inputs.
    pub inputs: String,
    /// Always written; `None` only in a manifest of an older wmrender, which `sync` refuses (render again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    /// The cluster's Kubernetes minor the bundle is rendered for (`"1.35"`): a payload is checked against it. `None`
    /// in a manifest of an older wmrender.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<String>,
    pub files: Vec<BundleEntry>,
}

impl BundleManifest {
    /// The minor of [`BundleManifest::kubernetes`] (`35` for `"1.35"`), when it reads as one.
    pub fn kubernetes_minor(&self) -> Option<u32> {
        self.kubernetes.as_deref()?.strip_prefix("1.")?.parse().ok()
    }
}

impl BundleManifest {
    pub fn to_json(&self) -> Vec<u8> {
        crate::pretty_json(self)
    }
}

/// One file of the output directory, by its path relative to the directory (`cluster/…`, `node/C/k/…`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundleEntry {
    pub path: String,
    pub sha256: String,
    pub size: u64,
}

/// Where a node file comes from. A sync replaces only the kinds it was given: a config-only sync leaves the
/// payload and every credential it was not handed as they are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileKind {
    /// Rendered: in the output directory's `node/`.
    Bundle,
    /// From `--payload` (binaries, hns.psm1) or the agent executable.
    Payload,
    /// A sync-time credential or CA (one file each).
    Credential,
    /// This node's own, from the cluster: which Machine it is (`C:\k\wmrender\machine.json`). Replaced and
    /// removed with every sync, as the bundle is.
    Identity,
}

/// One file on the node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeFile {
    pub path: NodePath,
    pub sha256: String,
    pub size: u64,
    pub kind: FileKind,
    /// The new content waits beside the file as `<path>.wmrender-staged` for the agent to swap in, because a
    /// running service holds the file (service binaries on Windows).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub staged: bool,
}

/// `C:\k\wmrender\manifest.json`: written by sync, read by sync and by the agent. Read from a node, it is
/// untrusted input: every path in it is a checked [`NodePath`] below [`crate::path::ROOT`] (see [`NodeManifest::parse`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeManifest {
    pub wmrender: String,
    /// What sync knows to be on the node.
    pub files: Vec<NodeFile>,
    /// Written before sync changes anything, removed when it is done: every file an interrupted sync may have
    /// written (or half-written as `<path>.wmrender-tmp`) and every file it meant to remove.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<Journal>,
    /// True once the apply step succeeded for exactly these files; a sync that finds `false` runs it again.
    #[serde(default)]
    pub applied: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Journal {
    pub files: Vec<NodeFile>,
    pub remove: Vec<NodePath>,
}

#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("is not a wmrender node manifest: {0}")]
    Syntax(String),
    #[error("names {0}, outside C:\\k; refusing to act on it")]
    Outside(String),
}

impl NodeManifest {
    /// Parses a node manifest read from a node, refusing any path that is not a normal path below `C:\k`.
    pub fn parse(bytes: &[u8]) -> Result<NodeManifest, ManifestError> {
        let m: NodeManifest = serde_json::from_slice(bytes).map_err(|e| ManifestError::Syntax(e.to_string()))?;
        let pending = m.pending.iter().flat_map(|j| j.files.iter().map(|f| &f.path).chain(&j.remove));
        for p in m.files.iter().map(|f| &f.path).chain(pending) {
            if NodePath::parse_delivered(p.as_str()).is_err() {
                return Err(ManifestError::Outside(p.to_string()));
            }
        }
        Ok(m)
    }

    pub fn to_json(&self) -> Vec<u8> {
        crate::pretty_json(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traversal_in_a_node_manifest_is_refused() {
        let text =
            r#"{"wmrender":"0","files":[{"path":"C:\\k\\..\\..\\victim","sha256":"x","size":1,"kind":"bundle"}]}"#;
        assert!(matches!(NodeManifest::parse(text.as_bytes()), Err(ManifestError::Syntax(_))));
        let text = r#"{"wmrender":"0","files":[],"pending":{"files":[],"remove":["C:\\Windows\\win.ini"]}}"#;
        assert!(
            matches!(NodeManifest::parse(text.as_bytes()), Err(ManifestError::Outside(p)) if p == r"C:\Windows\win.ini")
        );
    }

    #[test]
    fn round_trip() {
        let m = NodeManifest {
            wmrender: "0.1.0".into(),
            files: vec![NodeFile {
                path: NodePath::known(r"C:\k\kubelet.exe"),
                sha256: "ab".into(),
                size: 2,
                kind: FileKind::Payload,
                staged: true,
            }],
            pending: None,
            applied: false,
        };
        assert_eq!(NodeManifest::parse(&m.to_json()).unwrap(), m);
    }
}
