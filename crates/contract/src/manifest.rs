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

/// `C:\k\wmrender\manifest.json.wmrender-update`: what a one-file change writes instead of the whole manifest, so
/// that it costs the file and a few hundred bytes rather than every file's entry again. It holds the entries that
/// changed since the manifest it names by digest, and whether the apply step converged for the result.
///
/// It counts only over exactly that manifest, holding no journal ([`NodeManifest::read`]). Every writer of a whole
/// manifest (sync, the agent's pull) first writes one with a journal, which is then no longer the base, and removes
/// the update before the journal goes: an update never applies to a manifest written after it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestUpdate {
    /// `sha256:…` of the manifest's bytes.
    pub base: String,
    /// Entries that replace those of the same path, or are new.
    pub files: Vec<NodeFile>,
    /// True once the apply step succeeded for the manifest with these entries.
    pub applied: bool,
}

impl ManifestUpdate {
    /// An update over the manifest `base` (its bytes as read from the node).
    pub fn over(base: &[u8], files: Vec<NodeFile>, applied: bool) -> ManifestUpdate {
        ManifestUpdate { base: base_of(base), files, applied }
    }

    /// Parses an update read from a node, refusing any path that is not a normal path below `C:\k`.
    pub fn parse(bytes: &[u8]) -> Result<ManifestUpdate, ManifestError> {
        let u: ManifestUpdate = serde_json::from_slice(bytes).map_err(|e| ManifestError::Syntax(e.to_string()))?;
        check_paths(u.files.iter().map(|f| &f.path))?;
        Ok(u)
    }

    pub fn to_json(&self) -> Vec<u8> {
        crate::pretty_json(self)
    }
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

/// Which of the two files of a node's manifest does not check.
#[derive(Debug, thiserror::Error)]
pub enum UpdateError {
    #[error("{0}")]
    Manifest(ManifestError),
    #[error("{0}")]
    Update(ManifestError),
}

/// How an update names the manifest it was written over: `sha256:…` of its bytes.
fn base_of(manifest: &[u8]) -> String {
    format!("sha256:{}", crate::sha256_hex(manifest))
}

fn check_paths<'a>(paths: impl IntoIterator<Item = &'a NodePath>) -> Result<(), ManifestError> {
    for p in paths {
        if NodePath::parse_delivered(p.as_str()).is_err() {
            return Err(ManifestError::Outside(p.to_string()));
        }
    }
    Ok(())
}

impl NodeManifest {
    /// Parses a node manifest read from a node, refusing any path that is not a normal path below `C:\k`.
    pub fn parse(bytes: &[u8]) -> Result<NodeManifest, ManifestError> {
        let m: NodeManifest = serde_json::from_slice(bytes).map_err(|e| ManifestError::Syntax(e.to_string()))?;
        let pending = m.pending.iter().flat_map(|j| j.files.iter().map(|f| &f.path).chain(&j.remove));
        check_paths(m.files.iter().map(|f| &f.path).chain(pending))?;
        Ok(m)
    }

    /// What the node holds: its manifest with the update beside it applied, when that update was written over
    /// exactly these bytes and the manifest holds no journal ([`ManifestUpdate`]); with the update that applied.
    /// A stale update (over an earlier manifest) is ignored: it says nothing about the files any more.
    pub fn read(manifest: &[u8], update: Option<&[u8]>) -> Result<(NodeManifest, Option<ManifestUpdate>), UpdateError> {
        let mut m = NodeManifest::parse(manifest).map_err(UpdateError::Manifest)?;
        let Some(bytes) = update else { return Ok((m, None)) };
        let update = ManifestUpdate::parse(bytes).map_err(UpdateError::Update)?;
        if m.pending.is_some() || update.base != base_of(manifest) {
            return Ok((m, None));
        }
        for f in &update.files {
            match m.files.iter_mut().find(|k| k.path == f.path) {
                Some(known) => *known = f.clone(),
                None => m.files.push(f.clone()),
            }
        }
        m.applied = update.applied;
        Ok((m, Some(update)))
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

    fn file(path: &str, sha: &str) -> NodeFile {
        NodeFile { path: NodePath::known(path), sha256: sha.into(), size: 1, kind: FileKind::Bundle, staged: false }
    }

    #[test]
    fn an_update_applies_only_over_the_manifest_it_names_holding_no_journal() {
        let base = NodeManifest {
            wmrender: "0".into(),
            files: vec![file(r"C:\k\a", "1"), file(r"C:\k\b", "2")],
            pending: None,
            applied: false,
        };
        let bytes = base.to_json();
        let update = ManifestUpdate::over(&bytes, vec![file(r"C:\k\b", "3"), file(r"C:\k\c", "4")], true);
        let (read, applied) = NodeManifest::read(&bytes, Some(&update.to_json())).unwrap();
        assert_eq!(applied.as_ref(), Some(&update));
        assert!(read.applied);
        let shas: Vec<&str> = read.files.iter().map(|f| f.sha256.as_str()).collect();
        assert_eq!(shas, ["1", "3", "4"]);

        // Over another manifest (one written after it), or over one holding a journal: stale, ignored.
        let later = NodeManifest { applied: true, ..base.clone() }.to_json();
        assert_eq!(NodeManifest::read(&later, Some(&update.to_json())).unwrap().1, None);
        let journaled = NodeManifest { pending: Some(Journal::default()), ..base.clone() };
        let over_journal = ManifestUpdate::over(&journaled.to_json(), vec![file(r"C:\k\b", "3")], true);
        let (read, applied) = NodeManifest::read(&journaled.to_json(), Some(&over_journal.to_json())).unwrap();
        assert_eq!((read, applied), (journaled, None));

        // Read from a node: its paths are checked like the manifest's.
        let outside = ManifestUpdate::over(&bytes, vec![file(r"C:\k\b", "3")], true);
        let text = String::from_utf8(outside.to_json()).unwrap().replace(r"C:\\k\\b", r"C:\\Windows\\b");
        assert!(matches!(
            NodeManifest::read(&bytes, Some(text.as_bytes())),
            Err(UpdateError::Update(ManifestError::Outside(_)))
        ));
        assert!(matches!(NodeManifest::read(&bytes, Some(b"{")), Err(UpdateError::Update(ManifestError::Syntax(_)))));
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
