//! What `publish` publishes, read from the user's directory and checked before anything is sent: the rendered
//! `node/` bundle against its manifest.json (`delivery::read_rendered`, as `sync` reads it), a payload against its
//! payload.json (`payload::list::checked`). Each file keeps the sha256 it was checked against, so it is not hashed
//! again.

use super::artifact::File;
use crate::error::Error;
use std::collections::BTreeMap;
use std::path::Path;
use wmrender_contract::bundle_artifact::Entry;
use wmrender_contract::payload::PAYLOAD_LIST;

/// The node bundle of a rendered directory: the files under `node/`, by their path there (`C/k/kubelet.conf`).
pub fn node_bundle(dir: &Path) -> Result<Vec<File>, Error> {
    let rendered = crate::delivery::read_rendered(dir)?;
    let checked: BTreeMap<&str, &str> =
        rendered.manifest.files.iter().map(|e| (e.path.as_str(), e.sha256.as_str())).collect();
    let mut files = Vec::new();
    for (path, bytes) in &rendered.files {
        let (Some(node_path), Some(sha256)) = (path.strip_prefix("node/"), checked.get(path.as_str())) else {
            continue;
        };
        files.push(File { path: node_path.to_string(), bytes: bytes.clone(), sha256: sha256.to_string() });
    }
    Ok(files)
}

/// A payload directory's files: those its payload.json lists, checked against it, and the list itself (a node
/// reads the versions there). A directory without a list is refused: what is published must be listed.
pub fn payload(dir: &Path) -> Result<Vec<File>, Error> {
    let mut files = Vec::new();
    for Entry { path, sha256, .. } in payload_entries(dir)? {
        let file = dir.join(&path);
        let bytes = std::fs::read(&file).map_err(|source| crate::payload::PayloadError::Read { file, source })?;
        files.push(File { path, bytes, sha256 });
    }
    Ok(files)
}

/// What a payload directory publishes, by path, sha256 and size: the files its payload.json lists, checked against
/// it and against the rule of a pulled payload, and the list itself. The controller names the payload by the same
/// entries (`controller::published_payload_reference`), without publishing.
pub fn payload_entries(dir: &Path) -> Result<Vec<Entry>, Error> {
    if crate::payload::list::read_list(dir)?.is_none() {
        return Err(Error::Usage(format!(
            "{} has no {PAYLOAD_LIST}: run `wmrender payload list {}` first, so that what is published is listed",
            dir.display(),
            dir.display()
        )));
    }
    let list = crate::payload::list::checked(dir)?;
    // What nodes would refuse to pull is refused here, in CI, before anything is sent. The agent's own executable
    // may ride along (sync delivers a payload with it); nodes leave it out of a pull.
    for f in &list.files {
        let Ok(path) = f.node_path() else { continue };
        if path.as_str().eq_ignore_ascii_case(wmrender_contract::paths::AGENT_EXE) {
            continue;
        }
        if let Some(why) = wmrender_contract::payload::pulled_program_refusal(&path) {
            return Err(Error::Usage(format!(
                "{}: {} may not be in a published payload: {why}; nodes would refuse to pull it",
                dir.join(PAYLOAD_LIST).display(),
                f.path
            )));
        }
    }
    let mut entries = Vec::new();
    for f in &list.files {
        // The size as the file has it (the list's own could be edited by hand; its digest was checked).
        let file = dir.join(&f.path);
        let size =
            std::fs::metadata(&file).map_err(|source| crate::payload::PayloadError::Read { file, source })?.len();
        if size == 0 {
            return Err(Error::Usage(format!(
                "{}: {} is empty: a published payload holds programs, and an empty blob cannot be pushed; remove it \
                 and run `wmrender payload list {}` again",
                dir.join(PAYLOAD_LIST).display(),
                f.path,
                dir.display()
            )));
        }
        entries.push(Entry { path: f.path.clone(), sha256: f.sha256.clone(), size });
    }
    let file = dir.join(PAYLOAD_LIST);
    let bytes = std::fs::read(&file).map_err(|source| crate::payload::PayloadError::Read { file, source })?;
    entries.push(Entry {
        path: PAYLOAD_LIST.to_string(),
        sha256: wmrender_contract::sha256_hex(&bytes),
        size: bytes.len() as u64,
    });
    Ok(entries)
}
