//! A verified pulled bundle put on the node the way sync puts a pushed one, so that the pass after it applies it
//! exactly as it would a pushed bundle: the node manifest first with a journal of what will change, then each file
//! (`<path>.wmrender-tmp`, then a rename over the old one), the files that left the bundle removed, and the manifest
//! without its journal, not yet applied. A pull replaces the bundle only: the payload, the credentials and the node's
//! identity stay as sync left them, and a pulled bundle that names one of their files, or one of the agent's own,
//! is refused. The mirror credentials sync merged into the registries' hosts.toml are carried over into the pulled
//! ones.
//!
//! A pull cut off halfway leaves the journal; the next pull finishes it (the files it names are written again).

use crate::system::Files;
use std::collections::{BTreeMap, BTreeSet};
use wmrender_contract::hosts_toml::{credentials, is_hosts_toml, merge_credentials};
use wmrender_contract::payload::pulled_program_refusal;
use wmrender_contract::{
    FileKind, Journal, NodeFile, NodeManifest, NodePath, STAGED_SUFFIX, TEMP_SUFFIX, paths, sha256_hex,
};

/// Files only the agent or sync writes: never from a bundle.
const AGENT_FILES: &[&str] = &[
    paths::NODE_MANIFEST,
    paths::NODE_MANIFEST_UPDATE,
    paths::APPLIED_STATE,
    paths::PULLED_STATE,
    paths::AGENT_LOCK,
    paths::LAST_PASS,
    paths::AGENT_RUNNING,
    paths::MACHINE,
    paths::AGENT_EXE,
];

/// Why a bundle cannot be staged.
#[derive(Debug, PartialEq, Eq)]
pub enum StageError {
    /// The bundle would overwrite what is not the bundle's: refused for good.
    Refused(String),
    /// The node cannot take it now (a sync's journal, a file that cannot be written): tried again.
    NotNow(String),
}

/// What staging changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Staged {
    pub written: Vec<NodePath>,
    pub removed: Vec<NodePath>,
    /// The node manifest's bundle digest after staging.
    pub bundle: String,
}

/// Reads the node manifest (with a one-file sync's update applied); a node sync never reached has none.
pub fn node_manifest(sys: &dyn Files) -> Result<NodeManifest, String> {
    Ok(crate::desired::node_manifest(sys).map_err(|e| e.to_string())?.unwrap_or_default())
}

/// Stages `files` (node path, verified bytes) as the node's bundle. `own_journal`: the journal on the node, if
/// any, is one a pull of this agent left.
pub fn stage(sys: &dyn Files, files: Vec<(NodePath, Vec<u8>)>, own_journal: bool) -> Result<Staged, StageError> {
    let on_node = node_manifest(sys).map_err(StageError::NotNow)?;
    if on_node.pending.is_some() && !own_journal {
        return Err(StageError::NotNow(format!(
            "{} has an open journal: a sync is delivering files or was cut off; the pull waits for it",
            paths::NODE_MANIFEST
        )));
    }
    let journal = on_node.pending.clone().unwrap_or_default();
    let uncertain: BTreeSet<&NodePath> = journal.files.iter().map(|f| &f.path).collect();
    let replaced = |f: &NodeFile| f.kind == FileKind::Bundle || is_hosts_toml(&f.path);
    let kept: Vec<&NodeFile> = on_node.files.iter().filter(|f| !replaced(f)).collect();

    // The mirror credentials of the hosts.toml on the node, carried into the pulled ones.
    let had_credentials = on_node.files.iter().any(|f| is_hosts_toml(&f.path) && f.kind == FileKind::Credential);
    let mut auths = BTreeMap::new();
    for f in on_node.files.iter().filter(|f| is_hosts_toml(&f.path) && f.kind == FileKind::Credential) {
        if let Ok(text) = std::fs::read_to_string(sys.local(&f.path)) {
            auths.extend(credentials(&text));
        }
    }

    let mut new: Vec<(NodeFile, Vec<u8>)> = Vec::new();
    for (path, bytes) in files {
        let lower = path.as_str().to_ascii_lowercase();
        if AGENT_FILES.iter().any(|a| a.eq_ignore_ascii_case(&lower))
            || kept.iter().any(|k| k.path.as_str().eq_ignore_ascii_case(&lower))
        {
            return Err(StageError::Refused(format!(
                "the bundle names {path}, which is the agent's or came with the payload or a credential: a bundle may not replace it"
            )));
        }
        // As sync marks them: the registries' hosts.toml are credentials on a node whose hosts.toml were.
        let (kind, bytes) = if is_hosts_toml(&path) && had_credentials {
            (FileKind::Credential, merge_credentials(&bytes, &|host| auths.get(host).cloned()))
        } else {
            (FileKind::Bundle, bytes)
        };
        let file = NodeFile { sha256: sha256_hex(&bytes), size: bytes.len() as u64, path, kind, staged: false };
        new.push((file, bytes));
    }

    let known: BTreeMap<&NodePath, &NodeFile> = on_node.files.iter().map(|f| (&f.path, f)).collect();
    let wanted: BTreeSet<&NodePath> = new.iter().map(|(f, _)| &f.path).collect();
    let write: Vec<&(NodeFile, Vec<u8>)> = new
        .iter()
        .filter(|(f, _)| uncertain.contains(&f.path) || known.get(&f.path).is_none_or(|k| k.sha256 != f.sha256))
        .collect();
    let remove: Vec<NodePath> = on_node
        .files
        .iter()
        .filter(|f| replaced(f))
        .map(|f| &f.path)
        .chain(&journal.remove)
        .filter(|p| !wanted.contains(p))
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();

    let mut result: Vec<NodeFile> =
        kept.iter().map(|f| (*f).clone()).chain(new.iter().map(|(f, _)| f.clone())).collect();
    result.sort_by(|a, b| a.path.cmp(&b.path));
    let bundle = NodeManifest { files: result.clone(), ..NodeManifest::default() }.bundle_digest();
    let version =
        if on_node.wmrender.is_empty() { env!("CARGO_PKG_VERSION").to_string() } else { on_node.wmrender.clone() };
    if write.is_empty() && remove.is_empty() && on_node.pending.is_none() {
        return Ok(Staged { bundle, ..Staged::default() });
    }

    let touched: BTreeSet<&NodePath> = write.iter().map(|(f, _)| &f.path).chain(&remove).collect();
    let journal_manifest = NodeManifest {
        wmrender: version.clone(),
        files: on_node.files.iter().filter(|f| !touched.contains(&f.path)).cloned().collect(),
        pending: Some(Journal { files: write.iter().map(|(f, _)| f.clone()).collect(), remove: remove.clone() }),
        applied: false,
    };
    write_atomically(sys, &NodePath::known(paths::NODE_MANIFEST), &journal_manifest.to_json())?;
    // A one-file sync's update is over the manifest just replaced: its entries are in the one written now. It goes
    // before the manifest loses its journal (see `ManifestUpdate`).
    sys.remove_if_there(&NodePath::known(paths::NODE_MANIFEST_UPDATE)).map_err(StageError::NotNow)?;
    for (f, bytes) in &write {
        write_atomically(sys, &f.path, bytes)?;
    }
    for p in &remove {
        sys.remove_if_there(p).map_err(StageError::NotNow)?;
    }
    let done = NodeManifest { wmrender: version, files: result, pending: None, applied: false };
    write_atomically(sys, &NodePath::known(paths::NODE_MANIFEST), &done.to_json())?;
    Ok(Staged { written: write.iter().map(|(f, _)| f.path.clone()).collect(), removed: remove, bundle })
}

/// What staging a pulled payload takes: the programs to stage, and the node manifest once they are.
#[derive(Debug, PartialEq, Eq)]
pub struct PayloadPlan {
    /// New or changed programs: each written to `<path>.wmrender-staged`, then swapped in by the pass with the
    /// services that run it stopped (as sync stages a binary under a running service).
    pub stage: Vec<NodeFile>,
    /// The node manifest listing them `staged`, not yet applied; `None` when nothing changes.
    pub manifest: Option<NodeManifest>,
    /// Every program of the payload as the node names it (a path the node holds keeps the node's spelling, which
    /// services.json uses), with its sha256.
    pub programs: BTreeMap<String, String>,
    /// The manifest's and its update's bytes the plan was made from: a sync that writes either while the programs
    /// are fetched holds the commit back.
    read: (Option<Vec<u8>>, Option<Vec<u8>>),
}

fn manifest_bytes(sys: &dyn Files) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    let read = |p: &str| std::fs::read(sys.local(&NodePath::known(p))).ok();
    (read(paths::NODE_MANIFEST), read(paths::NODE_MANIFEST_UPDATE))
}

/// Plans staging a payload's programs (`files`, checked against its payload.json): a program the node holds at
/// that path with that content stays as it is; the node's other payload files stay too, as a sync without
/// `--prune-payload` leaves them. Refused, before anything is written, for a path a pulled payload may not hold
/// ([`pulled_program_refusal`]) or that the node holds as a file of the bundle, a credential or its identity. Held
/// back while a sync's journal is open, and while a program staged before still waits for the pass to swap it in
/// (its staged file is never overwritten).
pub fn plan_payload(sys: &dyn Files, files: Vec<NodeFile>) -> Result<PayloadPlan, StageError> {
    let read = manifest_bytes(sys);
    let on_node = node_manifest(sys).map_err(StageError::NotNow)?;
    if on_node.pending.is_some() {
        return Err(StageError::NotNow(format!(
            "{} has an open journal: a sync is delivering files or was cut off; the pull waits for it",
            paths::NODE_MANIFEST
        )));
    }
    let mut result = on_node.files.clone();
    let mut stage = Vec::new();
    let mut programs = BTreeMap::new();
    for file in files {
        let held = result.iter().position(|f| f.path.as_str().eq_ignore_ascii_case(file.path.as_str()));
        let refusal = pulled_program_refusal(&file.path).or_else(|| {
            held.filter(|&i| result[i].kind != FileKind::Payload)
                .map(|_| "the node holds it as a file of the bundle, a credential or its identity".to_string())
        });
        if let Some(why) = refusal {
            return Err(StageError::Refused(format!(
                "the payload names {}: a payload may not hold it: {why}",
                file.path
            )));
        }
        let path = held.map_or(file.path.clone(), |i| result[i].path.clone());
        let entry = NodeFile { path, kind: FileKind::Payload, staged: true, ..file };
        programs.insert(entry.path.to_string(), entry.sha256.clone());
        match held {
            Some(i) if result[i].sha256 == entry.sha256 => {}
            Some(i) => {
                if waits_for_its_swap(sys, &result[i]) {
                    return Err(StageError::NotNow(format!(
                        "{} staged before waits for the pass to swap it in; the pull comes after",
                        entry.path
                    )));
                }
                stage.push(entry.clone());
                result[i] = entry;
            }
            None => {
                stage.push(entry.clone());
                result.push(entry);
            }
        }
    }
    if stage.is_empty() {
        return Ok(PayloadPlan { stage, manifest: None, programs, read });
    }
    result.sort_by(|a, b| a.path.cmp(&b.path));
    let manifest = NodeManifest { files: result, pending: None, applied: false, ..on_node };
    Ok(PayloadPlan { stage, manifest: Some(manifest), programs, read })
}

/// A manifest entry staged whose staged file is there with its content: the pass has not swapped it in yet.
fn waits_for_its_swap(sys: &dyn Files, entry: &NodeFile) -> bool {
    entry.staged
        && entry
            .path
            .with_suffix(STAGED_SUFFIX)
            .is_ok_and(|staged| crate::digest::sha256_file(&sys.local(&staged)).is_ok_and(|sha| sha == entry.sha256))
}

/// Puts a [`PayloadPlan`]'s programs in place, each fetched and checked into its `fetched` file (a
/// `<path>.wmrender-pulling.wmrender-tmp`), and writes its manifest: the staged files first (the manifest does not
/// name them yet, so a pass passes them over), then the manifest with an empty journal, so that a one-file sync's
/// update, folded into it, no longer counts and can be removed ([`wmrender_contract::ManifestUpdate`]), then the
/// manifest without it. Held back, with nothing written, when the manifest or its update changed since the plan
/// (a sync while the programs were fetched).
pub fn commit_payload(sys: &dyn Files, plan: &PayloadPlan, fetched: &[(NodePath, NodePath)]) -> Result<(), StageError> {
    let Some(manifest) = &plan.manifest else { return Ok(()) };
    let unchanged = || {
        if manifest_bytes(sys) == plan.read {
            return Ok(());
        }
        Err(StageError::NotNow(format!(
            "{} changed while the payload was fetched (a sync): the pull plans again",
            paths::NODE_MANIFEST
        )))
    };
    unchanged()?;
    for (tmp, staged) in fetched {
        std::fs::rename(sys.local(tmp), sys.local(staged))
            .map_err(|e| StageError::NotNow(format!("cannot move {tmp} to {staged}: {e}")))?;
    }
    // Again just before the manifest is written (sync takes no lock on the node; what it writes in the instant
    // between is repaired by its next run, as after any cut).
    unchanged()?;
    let journal = NodeManifest { pending: Some(Journal::default()), ..manifest.clone() };
    write_atomically(sys, &NodePath::known(paths::NODE_MANIFEST), &journal.to_json())?;
    sys.remove_if_there(&NodePath::known(paths::NODE_MANIFEST_UPDATE)).map_err(StageError::NotNow)?;
    write_atomically(sys, &NodePath::known(paths::NODE_MANIFEST), &manifest.to_json())
}

/// Finishes what a payload pull cut off after it wrote the manifest with its empty journal: a one-file sync's
/// update removed (it was folded in before the journal was written), then the manifest without the journal. A
/// journal that lists files is a sync's, left for sync. Returns whether one was finished.
pub fn finish_payload_journal(sys: &dyn Files) -> Result<bool, StageError> {
    let on_node = node_manifest(sys).map_err(StageError::NotNow)?;
    if on_node.pending.as_ref().is_none_or(|j| !j.files.is_empty() || !j.remove.is_empty()) {
        return Ok(false);
    }
    sys.remove_if_there(&NodePath::known(paths::NODE_MANIFEST_UPDATE)).map_err(StageError::NotNow)?;
    let done = NodeManifest { pending: None, ..on_node };
    write_atomically(sys, &NodePath::known(paths::NODE_MANIFEST), &done.to_json())?;
    Ok(true)
}

/// `<path>.wmrender-tmp`, then a rename over `path`: a reader sees the old file or the new one, never half.
fn write_atomically(sys: &dyn Files, path: &NodePath, bytes: &[u8]) -> Result<(), StageError> {
    let local = sys.local(path);
    let tmp = path.with_suffix(TEMP_SUFFIX).map_err(|e| StageError::NotNow(e.to_string()))?;
    if let Some(dir) = local.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| StageError::NotNow(format!("cannot create the folder of {path}: {e}")))?;
    }
    std::fs::write(sys.local(&tmp), bytes).map_err(|e| StageError::NotNow(format!("cannot write {tmp}: {e}")))?;
    std::fs::rename(sys.local(&tmp), &local)
        .map_err(|e| StageError::NotNow(format!("cannot move {tmp} to {path}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::Folder;

    fn np(p: &str) -> NodePath {
        NodePath::known(p)
    }

    /// A node as sync leaves it: two bundle files, a payload file, a credential.
    fn node() -> (tempfile::TempDir, Folder) {
        let dir = tempfile::tempdir().unwrap();
        let folder = Folder(dir.path().to_path_buf());
        let mut files = Vec::new();
        for (path, bytes, kind) in [
            (r"C:\k\kubelet.conf", "old conf", FileKind::Bundle),
            (r"C:\k\gone.ps1", "left the bundle", FileKind::Bundle),
            (r"C:\k\kubelet.exe", "MZ", FileKind::Payload),
            (r"C:\k\bootstrap-kubeconfig", "secret", FileKind::Credential),
        ] {
            let local = folder.local(&np(path));
            std::fs::create_dir_all(local.parent().unwrap()).unwrap();
            std::fs::write(&local, bytes).unwrap();
            files.push(NodeFile {
                path: np(path),
                sha256: sha256_hex(bytes.as_bytes()),
                size: bytes.len() as u64,
                kind,
                staged: false,
            });
        }
        let m = NodeManifest { wmrender: "0.1.0".into(), files, pending: None, applied: true };
        write_atomically(&folder, &np(paths::NODE_MANIFEST), &m.to_json()).unwrap();
        (dir, folder)
    }

    #[test]
    fn the_bundle_is_replaced_and_the_payload_and_credentials_stay() {
        let (_dir, f) = node();
        let staged = stage(
            &f,
            vec![(np(r"C:\k\kubelet.conf"), b"new conf".to_vec()), (np(r"C:\k\new.toml"), b"x".to_vec())],
            false,
        )
        .unwrap();
        assert_eq!(staged.written, [np(r"C:\k\kubelet.conf"), np(r"C:\k\new.toml")]);
        assert_eq!(staged.removed, [np(r"C:\k\gone.ps1")]);
        assert_eq!(std::fs::read(f.local(&np(r"C:\k\kubelet.conf"))).unwrap(), b"new conf");
        assert!(!f.local(&np(r"C:\k\gone.ps1")).exists());
        assert_eq!(std::fs::read(f.local(&np(r"C:\k\kubelet.exe"))).unwrap(), b"MZ");
        let m = node_manifest(&f).unwrap();
        let listed: Vec<(&str, FileKind)> = m.files.iter().map(|e| (e.path.as_str(), e.kind)).collect();
        assert_eq!(
            listed,
            [
                (r"C:\k\bootstrap-kubeconfig", FileKind::Credential),
                (r"C:\k\kubelet.conf", FileKind::Bundle),
                (r"C:\k\kubelet.exe", FileKind::Payload),
                (r"C:\k\new.toml", FileKind::Bundle),
            ]
        );
        assert!(m.pending.is_none() && !m.applied);
        assert_eq!(staged.bundle, m.bundle_digest());
    }

    #[test]
    fn a_bundle_naming_the_payload_a_credential_or_the_agents_files_is_refused_before_anything_is_written() {
        for path in [
            r"C:\k\kubelet.exe",
            r"C:\k\BOOTSTRAP-kubeconfig",
            r"C:\k\wmrender\pulled.json",
            r"C:\k\wmrender\wmrender-node.exe",
        ] {
            let (_dir, f) = node();
            let before = std::fs::read(f.local(&np(paths::NODE_MANIFEST))).unwrap();
            let e = stage(&f, vec![(np(path), b"evil".to_vec())], false).unwrap_err();
            assert!(matches!(&e, StageError::Refused(why) if why.contains("may not replace")), "{e:?}");
            assert_eq!(std::fs::read(f.local(&np(paths::NODE_MANIFEST))).unwrap(), before, "{path}");
        }
    }

    fn program(path: &str, bytes: &str) -> NodeFile {
        NodeFile {
            path: np(path),
            sha256: sha256_hex(bytes.as_bytes()),
            size: bytes.len() as u64,
            kind: FileKind::Payload,
            staged: true,
        }
    }

    #[test]
    fn a_payload_stages_only_what_changed_keeps_the_rest_and_may_not_replace_the_bundle_or_a_credential() {
        let (_dir, f) = node();
        let before = node_manifest(&f).unwrap();
        // The kubelet the node holds: nothing to stage, nothing written.
        let same = plan_payload(&f, vec![program(r"C:\k\kubelet.exe", "MZ")]).unwrap();
        assert_eq!((same.stage.len(), same.manifest), (0, None));

        let plan = plan_payload(
            &f,
            vec![program(r"C:\k\kubelet.exe", "MZ new"), program(r"C:\k\containerd\containerd.exe", "MZ c")],
        )
        .unwrap();
        let staged: Vec<&str> = plan.stage.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(staged, [r"C:\k\kubelet.exe", r"C:\k\containerd\containerd.exe"]);
        let m = plan.manifest.unwrap();
        assert!(!m.applied && m.pending.is_none());
        for e in &m.files {
            let was = before.files.iter().find(|b| b.path == e.path);
            match e.kind {
                FileKind::Payload => assert!(e.staged, "{e:?}"),
                // The bundle and the credentials are the manifest's as they were.
                _ => assert_eq!(Some(e), was),
            }
        }
        assert_eq!(m.files.len(), before.files.len() + 1);
        // Nothing was written by planning.
        assert_eq!(node_manifest(&f).unwrap(), before);

        for path in [
            r"C:\k\kubelet.conf",
            r"C:\k\BOOTSTRAP-kubeconfig",
            r"C:\k\wmrender\manifest.json",
            r"C:\k\kubeconfig",
            r"C:\k\containerd\registries\quay.io\hosts.toml",
            r"C:\k\kubelet.exe.wmrender-staged",
        ] {
            let e = plan_payload(&f, vec![program(path, "MZ evil")]).unwrap_err();
            assert!(matches!(&e, StageError::Refused(why) if why.contains("may not hold it")), "{path}: {e:?}");
        }
    }

    /// Stages `plan` as the pull does: each program written to its temporary file, then the commit.
    fn commit(f: &Folder, plan: &PayloadPlan, bytes: &[(&str, &str)]) -> Result<(), StageError> {
        let mut fetched = Vec::new();
        for (path, content) in bytes {
            let staged = np(path).with_suffix(STAGED_SUFFIX).unwrap();
            let tmp = np(path).with_suffix(wmrender_contract::PULLING_SUFFIX).unwrap();
            std::fs::create_dir_all(f.local(&tmp).parent().unwrap()).unwrap();
            std::fs::write(f.local(&tmp), content).unwrap();
            fetched.push((tmp, staged));
        }
        commit_payload(f, plan, &fetched)
    }

    #[test]
    fn a_program_the_node_holds_under_another_spelling_keeps_the_nodes() {
        let (_dir, f) = node();
        // services.json names C:\k\kubelet.exe; the payload spells it otherwise.
        let plan = plan_payload(&f, vec![program(r"C:\k\KUBELET.exe", "MZ new")]).unwrap();
        assert_eq!(plan.stage[0].path, np(r"C:\k\kubelet.exe"));
        assert_eq!(plan.programs.keys().collect::<Vec<_>>(), [r"C:\k\kubelet.exe"]);
        let m = plan.manifest.unwrap();
        assert_eq!(m.files.iter().filter(|e| e.path.as_str().eq_ignore_ascii_case(r"C:\k\kubelet.exe")).count(), 1);
        let same = plan_payload(&f, vec![program(r"C:\k\Kubelet.EXE", "MZ")]).unwrap();
        assert_eq!(same.programs.keys().collect::<Vec<_>>(), [r"C:\k\kubelet.exe"]);
    }

    #[test]
    fn a_program_staged_before_is_not_overwritten_until_the_pass_swapped_it_in() {
        let (_dir, f) = node();
        let plan = plan_payload(&f, vec![program(r"C:\k\kubelet.exe", "MZ new")]).unwrap();
        commit(&f, &plan, &[(r"C:\k\kubelet.exe", "MZ new")]).unwrap();
        assert_eq!(std::fs::read(f.local(&np(r"C:\k\kubelet.exe.wmrender-staged"))).unwrap(), b"MZ new");
        // Another payload before the pass swapped it in: held back, the staged program kept.
        let e = plan_payload(&f, vec![program(r"C:\k\kubelet.exe", "MZ newer")]).unwrap_err();
        assert!(matches!(&e, StageError::NotNow(why) if why.contains("waits for the pass")), "{e:?}");
        // Swapped in (the staged file moved over the program): the next payload is staged.
        std::fs::rename(f.local(&np(r"C:\k\kubelet.exe.wmrender-staged")), f.local(&np(r"C:\k\kubelet.exe"))).unwrap();
        assert_eq!(plan_payload(&f, vec![program(r"C:\k\kubelet.exe", "MZ newer")]).unwrap().stage.len(), 1);
    }

    #[test]
    fn a_sync_while_the_programs_are_fetched_holds_the_commit_back_with_nothing_written() {
        let (_dir, f) = node();
        let plan = plan_payload(&f, vec![program(r"C:\k\kubelet.exe", "MZ new")]).unwrap();
        // A sync writes the manifest meanwhile.
        let mut m = node_manifest(&f).unwrap();
        m.applied = false;
        write_atomically(&f, &np(paths::NODE_MANIFEST), &m.to_json()).unwrap();
        let before = std::fs::read(f.local(&np(paths::NODE_MANIFEST))).unwrap();
        let e = commit(&f, &plan, &[(r"C:\k\kubelet.exe", "MZ new")]).unwrap_err();
        assert!(matches!(&e, StageError::NotNow(why) if why.contains("changed while")), "{e:?}");
        assert_eq!(std::fs::read(f.local(&np(paths::NODE_MANIFEST))).unwrap(), before);
        assert!(!f.local(&np(r"C:\k\kubelet.exe.wmrender-staged")).exists());
    }

    #[test]
    fn a_payload_pulls_empty_journal_is_finished_and_a_syncs_is_not() {
        let (_dir, f) = node();
        let mut m = node_manifest(&f).unwrap();
        m.pending = Some(Journal::default());
        write_atomically(&f, &np(paths::NODE_MANIFEST), &m.to_json()).unwrap();
        assert_eq!(finish_payload_journal(&f), Ok(true));
        assert!(node_manifest(&f).unwrap().pending.is_none());
        assert_eq!(finish_payload_journal(&f), Ok(false));
        m.pending = Some(Journal { files: vec![], remove: vec![np(r"C:\k\gone.ps1")] });
        write_atomically(&f, &np(paths::NODE_MANIFEST), &m.to_json()).unwrap();
        assert_eq!(finish_payload_journal(&f), Ok(false));
        assert!(node_manifest(&f).unwrap().pending.is_some(), "a sync's journal is sync's to finish");
    }

    #[test]
    fn a_payload_waits_for_a_syncs_journal_and_its_manifest_replaces_a_one_file_syncs_update() {
        let (_dir, f) = node();
        let mut m = node_manifest(&f).unwrap();
        m.pending = Some(Journal { files: vec![], remove: vec![] });
        write_atomically(&f, &np(paths::NODE_MANIFEST), &m.to_json()).unwrap();
        let e = plan_payload(&f, vec![program(r"C:\k\kubelet.exe", "MZ new")]).unwrap_err();
        assert!(matches!(&e, StageError::NotNow(why) if why.contains("journal")), "{e:?}");

        let (_dir, f) = node();
        let base = std::fs::read(f.local(&np(paths::NODE_MANIFEST))).unwrap();
        std::fs::write(f.local(&np(r"C:\k\kubelet.conf")), "synced conf").unwrap();
        let entry = NodeFile {
            path: np(r"C:\k\kubelet.conf"),
            sha256: sha256_hex(b"synced conf"),
            size: 11,
            kind: FileKind::Bundle,
            staged: false,
        };
        let update = wmrender_contract::ManifestUpdate::over(&base, vec![entry.clone()], true);
        write_atomically(&f, &np(paths::NODE_MANIFEST_UPDATE), &update.to_json()).unwrap();
        let plan = plan_payload(&f, vec![program(r"C:\k\kubelet.exe", "MZ new")]).unwrap();
        commit(&f, &plan, &[(r"C:\k\kubelet.exe", "MZ new")]).unwrap();
        assert!(!f.local(&np(paths::NODE_MANIFEST_UPDATE)).exists());
        let m = node_manifest(&f).unwrap();
        assert!(m.files.contains(&entry), "the update's entry is kept in the manifest written");
        assert!(m.files.iter().any(|e| e.path == np(r"C:\k\kubelet.exe") && e.staged));
    }

    #[test]
    fn a_one_file_syncs_update_is_read_with_the_manifest_and_folded_into_the_one_staging_writes() {
        let (_dir, f) = node();
        // A one-file sync changed kubelet.conf: the manifest as it was, the new entry in the update beside it.
        let base = std::fs::read(f.local(&np(paths::NODE_MANIFEST))).unwrap();
        std::fs::write(f.local(&np(r"C:\k\kubelet.conf")), "synced conf").unwrap();
        let entry = NodeFile {
            path: np(r"C:\k\kubelet.conf"),
            sha256: sha256_hex(b"synced conf"),
            size: 11,
            kind: FileKind::Bundle,
            staged: false,
        };
        let update = wmrender_contract::ManifestUpdate::over(&base, vec![entry], true);
        write_atomically(&f, &np(paths::NODE_MANIFEST_UPDATE), &update.to_json()).unwrap();
        // The pulled bundle holds the synced kubelet.conf: not written again; gone.ps1 left it.
        let staged = stage(&f, vec![(np(r"C:\k\kubelet.conf"), b"synced conf".to_vec())], false).unwrap();
        assert!(staged.written.is_empty(), "{staged:?}");
        assert_eq!(staged.removed, [np(r"C:\k\gone.ps1")]);
        assert!(!f.local(&np(paths::NODE_MANIFEST_UPDATE)).exists(), "the update is folded into the manifest");
        let m = NodeManifest::parse(&std::fs::read(f.local(&np(paths::NODE_MANIFEST))).unwrap()).unwrap();
        let conf = m.files.iter().find(|e| e.path == np(r"C:\k\kubelet.conf")).unwrap();
        assert_eq!(conf.sha256, sha256_hex(b"synced conf"));
    }

    #[test]
    fn a_syncs_journal_holds_the_pull_back_and_the_agents_own_is_finished() {
        let (_dir, f) = node();
        let mut m = node_manifest(&f).unwrap();
        m.files.retain(|e| e.path != np(r"C:\k\kubelet.conf"));
        m.pending = Some(Journal { files: vec![], remove: vec![np(r"C:\k\gone.ps1")] });
        write_atomically(&f, &np(paths::NODE_MANIFEST), &m.to_json()).unwrap();
        let files = || vec![(np(r"C:\k\kubelet.conf"), b"new conf".to_vec())];
        assert!(matches!(stage(&f, files(), false), Err(StageError::NotNow(why)) if why.contains("journal")));
        let staged = stage(&f, files(), true).unwrap();
        assert_eq!(staged.written, [np(r"C:\k\kubelet.conf")]);
        assert_eq!(staged.removed, [np(r"C:\k\gone.ps1")]);
        assert!(node_manifest(&f).unwrap().pending.is_none());
    }
}
