//! What a node should hold, and what must change on it: the rendered bundle (with sync-time secrets merged in),
//! the credential files, the payload and the agent, each with its sha256 and kind, compared with the node's
//! manifest. A sync replaces only the kinds it was given: payload and credentials it was not handed stay as they
//! are on the node unless pruning them is asked for.

use super::error::PlanError;
use super::secrets::Secrets;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use wmrender_contract::paths::{AGENT_EXE, NODE_MANIFEST};
use wmrender_contract::{FileKind, Journal, NodeFile, NodeManifest, NodePath, sha256_hex};

#[derive(Clone, Debug)]
pub enum Source {
    /// Small files, held in memory (the bundle, merged secrets).
    Bytes(Arc<Vec<u8>>),
    /// Payload binaries, streamed from disk.
    File(PathBuf),
}

#[derive(Clone, Debug)]
pub struct Desired {
    pub file: NodeFile,
    pub source: Source,
}

impl Desired {
    pub fn path(&self) -> &NodePath {
        &self.file.path
    }
}

/// What this sync was given besides the bundle, which decides what it may replace or remove.
#[derive(Clone, Debug, Default)]
pub struct Given {
    /// `--payload` was given: the payload on the node is replaced by it.
    pub payload: bool,
    /// `--agent` (or the payload) brings the agent executable.
    pub agent: bool,
    /// The credential files given, by node path.
    pub credentials: BTreeSet<NodePath>,
    /// `--pull-secret` was given: hosts.toml files carry mirror credentials.
    pub pull_secret: bool,
    /// `--prune-payload`: payload files not given are removed.
    pub prune_payload: bool,
    /// `--prune-credentials`: credentials not given are removed, and hosts.toml lose their credentials.
    pub prune_credentials: bool,
}

fn from_bytes(path: NodePath, kind: FileKind, bytes: Vec<u8>) -> Desired {
    let file = NodeFile { path, sha256: sha256_hex(&bytes), size: bytes.len() as u64, kind, staged: false };
    Desired { file, source: Source::Bytes(Arc::new(bytes)) }
}

/// What sync delivers to one node alone: for a Machine's instance, which Machine it is (`C:\k\wmrender\machine.json`;
/// where the platform names the host after its Machine, the agent renames it).
pub fn identity(machine: Option<&str>) -> Option<Desired> {
    let name = machine?;
    let bytes = wmrender_contract::NodeMachine { machine: name.to_string() }.to_json();
    Some(from_bytes(NodePath::known(wmrender_contract::paths::MACHINE), FileKind::Identity, bytes))
}

pub use wmrender_contract::hosts_toml::is_hosts_toml;

/// Everything every node should hold, sorted by node path.
pub fn desired(
    bundle: &[(String, Vec<u8>)],
    secrets: &Secrets,
    payload: Option<&Path>,
    agent: Option<&Path>,
) -> Result<Vec<Desired>, PlanError> {
    let mut all: BTreeMap<NodePath, Desired> = BTreeMap::new();
    for (path, bytes) in bundle {
        let Some(np) = NodePath::from_bundle_path(path) else { continue };
        let bytes = if is_hosts_toml(&np) { secrets.merge_into_hosts_toml(bytes) } else { bytes.clone() };
        all.insert(np.clone(), from_bytes(np, FileKind::Bundle, bytes));
    }
    for (np, secret) in &secrets.files {
        let np = NodePath::known(np);
        all.insert(np.clone(), from_bytes(np, FileKind::Credential, secret.bytes().to_vec()));
    }
    let mut files: Vec<(NodePath, PathBuf)> = match payload {
        Some(dir) => payload_files(dir)?,
        None => vec![],
    };
    if let Some(exe) = agent {
        // --agent wins over a copy of the agent in the payload.
        let np = NodePath::known(AGENT_EXE);
        files.retain(|(p, _)| *p != np);
        files.push((np, exe.to_path_buf()));
    }
    for (np, file) in files {
        if all.contains_key(&np) {
            return Err(PlanError::Overwrites { file, path: np });
        }
        let (sha256, size) = hash_file(&file)?;
        let entry = NodeFile { path: np.clone(), sha256, size, kind: FileKind::Payload, staged: false };
        all.insert(np, Desired { file: entry, source: Source::File(file) });
    }
    all.remove(&NodePath::known(NODE_MANIFEST));
    Ok(all.into_values().collect())
}

/// The payload directory is laid out by node path: `DIR/C/k/kubelet.exe` is `C:\k\kubelet.exe`.
fn payload_files(dir: &Path) -> Result<Vec<(NodePath, PathBuf)>, PlanError> {
    let root = dir.join("C");
    if !root.is_dir() {
        return Err(PlanError::NoPayloadRoot { dir: dir.to_path_buf() });
    }
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(&root).sort_by_file_name() {
        let entry = entry.map_err(|source| PlanError::Walk { dir: dir.to_path_buf(), source })?;
        if entry.file_type().is_dir() {
            continue;
        }
        if let Some(kind) = crate::emit::special_files::kind(&entry.file_type()) {
            return Err(PlanError::Special { file: entry.path().to_path_buf(), kind });
        }
        // The walk's paths are the root joined with the names below it.
        let below = entry.path().components().skip(root.components().count());
        let parts: Vec<String> = below.map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        let text = format!("C:\\{}", parts.join("\\"));
        let np = NodePath::parse_delivered(&text)
            .map_err(|source| PlanError::NotANodePath { file: entry.path().to_path_buf(), source })?;
        out.push((np, entry.path().to_path_buf()));
    }
    Ok(out)
}

fn hash_file(path: &Path) -> Result<(String, u64), PlanError> {
    let mut f = std::fs::File::open(path).map_err(|source| PlanError::Open { file: path.to_path_buf(), source })?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf).map_err(|source| PlanError::Read { file: path.to_path_buf(), source })?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        size += n as u64;
    }
    Ok((crate::hex(&h.finalize()), size))
}

/// What one node needs.
#[derive(Clone, Debug, Default)]
pub struct Changes {
    /// Files to write (new, changed, or left uncertain by an interrupted sync), with the content they get.
    pub write: Vec<Desired>,
    /// How many of `write` are new on the node.
    pub added: Vec<NodePath>,
    pub changed: Vec<NodePath>,
    pub remove: Vec<NodePath>,
    /// Files of kinds this sync was not given, left as they are.
    pub kept: Vec<NodeFile>,
    /// The node's manifest after the sync: every file the node holds from wmrender.
    pub result: Vec<NodeFile>,
    /// The files an interrupted sync left uncertain (temporary files to clean up).
    pub leftovers: Vec<NodePath>,
}

impl Changes {
    pub fn files_differ(&self) -> bool {
        !self.write.is_empty() || !self.remove.is_empty()
    }

    /// Every node path the change touches.
    pub fn touched(&self) -> Vec<NodePath> {
        let mut v: Vec<NodePath> = self.write.iter().map(|d| d.file.path.clone()).chain(self.remove.clone()).collect();
        v.sort();
        v
    }

    /// A change of one file replaced in place, and nothing else: one rename, which no reader of the node can see
    /// half done, so the agent need not be held back while it is made (see `delivery::node`).
    pub fn one_file(&self) -> bool {
        matches!(self.write.as_slice(), [only] if !only.file.staged) && self.remove.is_empty()
    }

    /// The manifest written before anything changes: the files known not to change, and the journal.
    pub fn journal(&self, on_node: &NodeManifest) -> NodeManifest {
        let touched: BTreeSet<NodePath> = self.touched().into_iter().collect();
        NodeManifest {
            wmrender: env!("CARGO_PKG_VERSION").into(),
            files: on_node.files.iter().filter(|f| !touched.contains(&f.path)).cloned().collect(),
            pending: Some(Journal {
                files: self.write.iter().map(|d| d.file.clone()).chain(self.uncertain_of(on_node)).collect(),
                remove: self.remove.clone(),
            }),
            applied: false,
        }
    }

    /// Entries of an earlier journal that this sync neither writes nor removes (kept kinds): still uncertain.
    fn uncertain_of(&self, on_node: &NodeManifest) -> Vec<NodeFile> {
        let written: BTreeSet<&NodePath> = self.write.iter().map(|d| &d.file.path).collect();
        on_node
            .pending
            .iter()
            .flat_map(|j| &j.files)
            .filter(|f| !written.contains(&f.path) && self.kept.iter().any(|k| k.path == f.path))
            .cloned()
            .collect()
    }

    /// The manifest written after the files are in place; `applied` is set once the apply step succeeded.
    pub fn done(&self, applied: bool) -> NodeManifest {
        NodeManifest { wmrender: env!("CARGO_PKG_VERSION").into(), files: self.result.clone(), pending: None, applied }
    }
}

/// Compares the desired files with a node's manifest. `staged` says which paths must be staged for the agent
/// (service binaries on Windows) instead of being replaced in place.
pub fn diff(desired: &[Desired], on_node: &NodeManifest, given: &Given, staged: &dyn Fn(&NodePath) -> bool) -> Changes {
    let known: BTreeMap<&NodePath, &NodeFile> = on_node.files.iter().map(|f| (&f.path, f)).collect();
    let journal = on_node.pending.clone().unwrap_or_default();
    let uncertain: BTreeSet<&NodePath> = journal.files.iter().map(|f| &f.path).collect();
    let wanted: BTreeSet<&NodePath> = desired.iter().map(|d| &d.file.path).collect();
    let mut c = Changes::default();

    // Files of a kind this sync was not given stay as they are (and in the manifest), unless pruning is asked.
    let keep = |f: &NodeFile| -> bool {
        if wanted.contains(&f.path) {
            return false;
        }
        match f.kind {
            // The bundle and the node's identity are replaced by every sync: what it no longer holds goes.
            FileKind::Bundle | FileKind::Identity => false,
            // A registry that left the bundle takes its hosts.toml with it, credentials or not.
            FileKind::Credential if is_hosts_toml(&f.path) => false,
            FileKind::Payload if f.path.as_str().eq_ignore_ascii_case(AGENT_EXE) => {
                !given.agent && !given.prune_payload
            }
            FileKind::Payload => !given.payload && !given.prune_payload,
            FileKind::Credential => !given.credentials.contains(&f.path) && !given.prune_credentials,
        }
    };
    let mut seen = BTreeSet::new();
    for f in on_node.files.iter().chain(&journal.files) {
        if seen.insert(&f.path) && keep(f) {
            c.kept.push(f.clone());
        }
    }
    // hosts.toml carrying mirror credentials stay as they are when this sync has no pull secret.
    let keep_hosts = on_node_has_pull_secret(on_node) && !given.pull_secret && !given.prune_credentials;

    for d in desired {
        let path = &d.file.path;
        let on = known.get(path);
        if keep_hosts
            && is_hosts_toml(path)
            && let Some(f) = on
        {
            c.kept.push((*f).clone());
            continue;
        }
        let mut file = d.file.clone();
        file.staged = staged(path);
        let same = on.is_some_and(|f| f.sha256 == d.file.sha256) && !uncertain.contains(path);
        if same {
            // Still waiting for the agent to swap it in? Keep the mark until an apply succeeds.
            file.staged = on.is_some_and(|f| f.staged) && !on_node.applied;
            c.result.push(file);
            continue;
        }
        if on.is_some() {
            c.changed.push(path.clone());
        } else {
            c.added.push(path.clone());
        }
        c.result.push(file.clone());
        c.write.push(Desired { file, source: d.source.clone() });
    }
    let kept: BTreeSet<NodePath> = c.kept.iter().map(|f| f.path.clone()).collect();
    c.result.extend(c.kept.iter().filter(|f| !wanted.contains(&f.path)).cloned());
    c.result.sort_by(|a, b| a.path.cmp(&b.path));
    let mut remove: BTreeSet<NodePath> = BTreeSet::new();
    for p in on_node.files.iter().map(|f| &f.path).chain(uncertain.iter().copied()).chain(&journal.remove) {
        if !wanted.contains(p) && !kept.contains(p) {
            remove.insert(p.clone());
        }
    }
    c.remove = remove.into_iter().collect();
    c.leftovers = uncertain.into_iter().cloned().collect();
    c
}

/// A node whose hosts.toml were pushed with mirror credentials: its manifest lists them as credentials.
fn on_node_has_pull_secret(on_node: &NodeManifest) -> bool {
    on_node.files.iter().any(|f| is_hosts_toml(&f.path) && f.kind == FileKind::Credential)
}

/// Marks hosts.toml entries as carrying credentials when the pull secret was merged into them.
pub fn mark_credentials(desired: &mut [Desired], pull_secret: bool) {
    if pull_secret {
        for d in desired.iter_mut().filter(|d| is_hosts_toml(&d.file.path)) {
            d.file.kind = FileKind::Credential;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> NodePath {
        NodePath::known(s)
    }

    fn entry(path: &str, sha: &str, kind: FileKind) -> NodeFile {
        NodeFile { path: p(path), sha256: sha.into(), size: 1, kind, staged: false }
    }

    fn no_staging(_: &NodePath) -> bool {
        false
    }

    #[test]
    fn diff_finds_adds_changes_and_removals() {
        let desired = vec![
            from_bytes(p(r"C:\k\a"), FileKind::Bundle, b"new".to_vec()),
            from_bytes(p(r"C:\k\b"), FileKind::Bundle, b"same".to_vec()),
        ];
        let on_node = NodeManifest {
            wmrender: "0".into(),
            files: vec![
                entry(r"C:\k\b", &sha256_hex(b"same"), FileKind::Bundle),
                entry(r"C:\k\old", "x", FileKind::Bundle),
            ],
            pending: None,
            applied: true,
        };
        let c = diff(&desired, &on_node, &Given::default(), &no_staging);
        assert_eq!(c.added, vec![p(r"C:\k\a")]);
        assert!(c.changed.is_empty());
        assert_eq!(c.remove, vec![p(r"C:\k\old")]);
    }

    #[test]
    fn kinds_not_given_are_kept_unless_pruned() {
        let desired = vec![from_bytes(p(r"C:\k\kubelet.conf"), FileKind::Bundle, b"x".to_vec())];
        let on_node = NodeManifest {
            wmrender: "0".into(),
            files: vec![
                entry(r"C:\k\kubelet.exe", "1", FileKind::Payload),
                entry(r"C:\k\bootstrap-kubeconfig", "2", FileKind::Credential),
                entry(r"C:\k\wmrender\wmrender-node.exe", "3", FileKind::Payload),
            ],
            pending: None,
            applied: true,
        };
        let c = diff(&desired, &on_node, &Given::default(), &no_staging);
        assert!(c.remove.is_empty(), "{:?}", c.remove);
        assert_eq!(c.kept.len(), 3);
        assert_eq!(c.result.len(), 4);
        let pruned = Given { prune_payload: true, ..Given::default() };
        let c = diff(&desired, &on_node, &pruned, &no_staging);
        assert_eq!(c.remove, vec![p(r"C:\k\kubelet.exe"), p(r"C:\k\wmrender\wmrender-node.exe")]);
        let given = Given { credentials: BTreeSet::from([p(r"C:\k\kubelet-ca.crt")]), ..Given::default() };
        let c = diff(&desired, &on_node, &given, &no_staging);
        assert!(c.kept.iter().any(|f| f.path == p(r"C:\k\bootstrap-kubeconfig")), "other credentials stay");
    }

    #[test]
    fn an_interrupted_journal_is_finished() {
        // A cut while pushing version 2 (which added C:\k\two and meant to remove C:\k\gone), then version 1.
        let desired = vec![from_bytes(p(r"C:\k\one"), FileKind::Bundle, b"1".to_vec())];
        let on_node = NodeManifest {
            wmrender: "0".into(),
            files: vec![],
            pending: Some(Journal {
                files: vec![
                    entry(r"C:\k\one", &sha256_hex(b"1"), FileKind::Bundle),
                    entry(r"C:\k\two", "2", FileKind::Bundle),
                ],
                remove: vec![p(r"C:\k\gone")],
            }),
            applied: false,
        };
        let c = diff(&desired, &on_node, &Given::default(), &no_staging);
        assert_eq!(c.write.len(), 1, "an uncertain file is written again");
        assert_eq!(c.remove, vec![p(r"C:\k\gone"), p(r"C:\k\two")]);
        assert_eq!(c.leftovers, vec![p(r"C:\k\one"), p(r"C:\k\two")]);
    }

    #[test]
    fn service_binaries_are_staged() {
        let desired = vec![from_bytes(p(r"C:\k\kubelet.exe"), FileKind::Payload, b"new".to_vec())];
        let on_node = NodeManifest { wmrender: "0".into(), files: vec![], pending: None, applied: true };
        let given = Given { payload: true, ..Given::default() };
        let c = diff(&desired, &on_node, &given, &|p: &NodePath| p.file_name() == "kubelet.exe");
        assert!(c.write[0].file.staged);
        assert!(c.result[0].staged);
    }
}
