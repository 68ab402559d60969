//! A payload directory's digest list (`payload.json`, the contract's [`PayloadList`]): made from the files, checked
//! against them, and the versions in it checked against the cluster's Kubernetes minor with the contract's table.

use super::buildinfo::GoBuild;
use super::error::PayloadError;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use wmrender_contract::compat::{self, Component, Version};
use wmrender_contract::payload::{PAYLOAD_LIST, PayloadFile, PayloadList};

/// The list of the files under `dir/C`, each hashed and asked its version.
pub fn make(dir: &Path, source: Option<String>) -> Result<PayloadList, PayloadError> {
    walk(dir, source, |_| true)
}

/// The list of the files under `dir/C` that `keep` keeps (by their `C/…` path).
fn walk(dir: &Path, source: Option<String>, keep: impl Fn(&str) -> bool) -> Result<PayloadList, PayloadError> {
    let root = dir.join("C");
    if !root.is_dir() {
        return Err(PayloadError::NoRoot { dir: dir.to_path_buf() });
    }
    let mut files = Vec::new();
    for entry in walkdir::WalkDir::new(&root).sort_by_file_name() {
        let entry = entry.map_err(|e| PayloadError::Walk { dir: dir.to_path_buf(), why: e.to_string() })?;
        if entry.file_type().is_dir() {
            continue;
        }
        if !entry.file_type().is_file() {
            return Err(PayloadError::NotAFile { file: entry.path().to_path_buf() });
        }
        let below = entry.path().strip_prefix(dir).unwrap_or(entry.path());
        let parts: Vec<String> = below.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        let path = parts.join("/");
        if keep(&path) {
            let bytes = read(entry.path())?;
            files.push(describe(path, &bytes));
        }
    }
    let list = PayloadList { source, files };
    // What was made is what a reader accepts: a name that is no node path is refused here already.
    for f in &list.files {
        f.node_path().map_err(|e| PayloadError::List { file: dir.join(PAYLOAD_LIST), why: e.to_string() })?;
    }
    Ok(list)
}

/// The list of `dir` made anew, keeping from the list written before its source and the versions written in by
/// hand for files that did not change.
pub fn remake(dir: &Path) -> Result<PayloadList, PayloadError> {
    let before = read_list(dir)?;
    let mut list = make(dir, before.as_ref().and_then(|b| b.source.clone()))?;
    if let Some(before) = &before {
        for f in list.files.iter_mut().filter(|f| f.version.is_none()) {
            let same = before.files.iter().find(|b| b.path == f.path && b.sha256 == f.sha256);
            f.version = same.and_then(|b| b.version.clone());
        }
    }
    Ok(list)
}

/// One file's line: its digest, size and version.
pub fn describe(path: String, bytes: &[u8]) -> PayloadFile {
    let version = GoBuild::read(bytes).and_then(|b| b.version(Component::of_file(&path)));
    PayloadFile { path, sha256: crate::hex(&Sha256::digest(bytes)), size: bytes.len() as u64, version }
}

/// `dir/payload.json`, when there is one.
pub fn read_list(dir: &Path) -> Result<Option<PayloadList>, PayloadError> {
    let file = dir.join(PAYLOAD_LIST);
    let bytes = match std::fs::read(&file) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(PayloadError::Read { file, source }),
    };
    PayloadList::parse(&bytes).map(Some).map_err(|e| PayloadError::List { file, why: e.to_string() })
}

/// The payload of `dir` as it is, checked against its `payload.json` when it has one: every listed file there with
/// its digest, no file that is not listed; versions are then the list's (a user may state one a program does not
/// carry). Without a list, the programs the compatibility table has a rule for, with the versions they carry.
pub fn checked(dir: &Path) -> Result<PayloadList, PayloadError> {
    let Some(listed) = read_list(dir)? else {
        // No list: only the programs the table has a rule for are read (for their versions); the delivery hashes
        // the rest anyway.
        return walk(dir, None, |path| Component::of_file(path).is_some());
    };
    let found = make(dir, None)?;
    let file = dir.join(PAYLOAD_LIST);
    for l in &listed.files {
        match found.files.iter().find(|f| f.path == l.path) {
            None => return Err(PayloadError::Missing { file: file.clone(), path: l.path.clone() }),
            Some(f) if f.sha256 != l.sha256 => {
                return Err(PayloadError::Changed {
                    file: file.clone(),
                    path: l.path.clone(),
                    listed: l.sha256.clone(),
                    found: f.sha256.clone(),
                });
            }
            Some(_) => {}
        }
    }
    if let Some(extra) = found.files.iter().find(|f| !listed.files.iter().any(|l| l.path == f.path)) {
        return Err(PayloadError::Unlisted { file, path: extra.path.clone() });
    }
    Ok(listed)
}

/// Every payload program of `list` the table has a rule for, checked against a cluster on Kubernetes
/// `1.<cluster>`: refused when one does not go with it. A program whose version cannot be told (a build that
/// carries none) is not refused but said: the notes returned.
pub fn fits(list: &PayloadList, cluster: u32, dir: &Path) -> Result<Vec<String>, PayloadError> {
    let mut problems = Vec::new();
    let mut notes = Vec::new();
    for f in &list.files {
        let Some(component) = Component::of_file(&f.path) else { continue };
        match f.version.as_deref().and_then(Version::parse) {
            Some(v) => {
                if let Err(m) = compat::check(cluster, component, v) {
                    problems.push(format!("{}: {m}", f.path));
                }
            }
            None => notes.push(format!(
                "{}: {} cannot be checked against the cluster's Kubernetes 1.{cluster}: {}; give its `version` in {} \
                 (`wmrender payload list {}` writes the file)",
                f.path,
                component.name(),
                match f.version.as_deref() {
                    Some(v) => format!("`{}` is no release version", v.escape_debug()),
                    None => "the program carries no version".into(),
                },
                dir.join(PAYLOAD_LIST).display(),
                dir.display()
            )),
        }
    }
    if problems.is_empty() {
        Ok(notes)
    } else {
        let release = compat::release(cluster).map(|r| format!(" (OpenShift {}, WMCO {})", r.openshift, r.wmco));
        Err(PayloadError::DoesNotFit {
            dir: dir.to_path_buf(),
            cluster: format!("Kubernetes 1.{cluster}{}", release.unwrap_or_default()),
            problems,
        })
    }
}

fn read(path: &Path) -> Result<Vec<u8>, PayloadError> {
    std::fs::read(path).map_err(|source| PayloadError::Read { file: PathBuf::from(path), source })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(files: &[(&str, &[u8])]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, bytes) in files {
            let p = dir.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, bytes).unwrap();
        }
        dir
    }

    #[test]
    fn the_list_is_checked_against_the_files() {
        let dir = payload(&[("C/k/kubelet.exe", b"one"), ("C/k/cni/win-bridge.exe", b"two")]);
        let list = make(dir.path(), None).unwrap();
        assert_eq!(
            list.files.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(),
            ["C/k/cni/win-bridge.exe", "C/k/kubelet.exe"]
        );
        std::fs::write(dir.path().join(PAYLOAD_LIST), list.to_json()).unwrap();
        assert_eq!(checked(dir.path()).unwrap(), list);

        std::fs::write(dir.path().join("C/k/kubelet.exe"), b"changed").unwrap();
        assert!(matches!(checked(dir.path()), Err(PayloadError::Changed { .. })));
        std::fs::write(dir.path().join("C/k/kubelet.exe"), b"one").unwrap();
        std::fs::write(dir.path().join("C/k/extra.exe"), b"x").unwrap();
        assert!(matches!(checked(dir.path()), Err(PayloadError::Unlisted { .. })));
        std::fs::remove_file(dir.path().join("C/k/extra.exe")).unwrap();
        std::fs::remove_file(dir.path().join("C/k/kubelet.exe")).unwrap();
        assert!(matches!(checked(dir.path()), Err(PayloadError::Missing { .. })));
    }

    #[test]
    fn versions_are_checked_against_the_clusters_minor() {
        let line = |path: &str, version: Option<&str>| PayloadFile {
            path: path.into(),
            sha256: "0".repeat(64),
            size: 1,
            version: version.map(str::to_string),
        };
        let list = |files| PayloadList { source: None, files };
        let dir = Path::new("payload");
        let ok = list(vec![line("C/k/kubelet.exe", Some("v1.35.1")), line("C/k/hns.psm1", None)]);
        assert!(fits(&ok, 35, dir).is_ok());
        let err = fits(&list(vec![line("C/k/kubelet.exe", Some("v1.31.0"))]), 35, dir).unwrap_err().to_string();
        assert!(err.contains("Kubernetes 1.35 (OpenShift 4.22, WMCO 10.22)"), "{err}");
        assert!(
            err.contains("C/k/kubelet.exe: kubelet is 1.31.0; this cluster takes Kubernetes 1.32 to 1.35"),
            "{err}"
        );
        let unknown = fits(&list(vec![line("C/k/kube-proxy.exe", None)]), 35, dir).unwrap();
        assert!(unknown[0].contains("kube-proxy cannot be checked") && unknown[0].contains("carries no version"));
    }
}
