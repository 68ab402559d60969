//! Which files in an existing output directory wmrender wrote, so `render -o` never deletes anything else.
//!
//! A directory is wmrender's when its `manifest.json` is a wmrender manifest and every file in it is one that
//! manifest lists, unchanged. A file named `manifest.json` alone proves nothing: any project may have one.

use crate::error::Error;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;
use walkdir::WalkDir;
use wmrender_contract::{BundleEntry as Entry, BundleManifest as Manifest};

/// At most this many file names are listed in a refusal; the rest are counted.
const LISTED: usize = 10;

/// Succeeds when replacing `dir` loses nothing wmrender did not write. A directory with a wmrender manifest but
/// added or edited files is replaced only with `force`; a directory without one never is.
pub fn check_replaceable(dir: &Path, force: bool) -> Result<(), Error> {
    let entries = walk(dir)?;
    if entries.is_empty() {
        return Ok(());
    }
    let Some(manifest) = read_manifest(dir) else {
        let files: Vec<String> = entries.into_iter().filter(|e| !e.is_dir).map(|e| format!("`{}`", e.path)).collect();
        return Err(Error::Usage(format!(
            "`{}` was not written by wmrender (it has no wmrender manifest.json), so rendering into it would delete \
             {}; choose another -o directory, or empty this one yourself if its contents are disposable",
            dir.display(),
            list(&files)
        )));
    };
    let foreign = foreign(dir, &manifest, &entries)?;
    if foreign.is_empty() || force {
        return Ok(());
    }
    Err(Error::Usage(format!(
        "`{}` holds files wmrender did not write, which rendering would delete: {}; move them elsewhere, or give \
         --force to delete them",
        dir.display(),
        list(&foreign)
    )))
}

/// Whether `dir` holds exactly a render: a wmrender manifest, every file it lists unchanged, nothing else.
pub fn is_rendered_tree(dir: &Path) -> bool {
    let (Ok(entries), Some(manifest)) = (walk(dir), read_manifest(dir)) else { return false };
    let present: BTreeSet<&str> = entries.iter().filter(|e| !e.is_dir).map(|e| e.path.as_str()).collect();
    manifest.files.iter().all(|f| present.contains(f.path.as_str()))
        && foreign(dir, &manifest, &entries).is_ok_and(|f| f.is_empty())
}

/// The entries of `dir` a render did not write, each with why.
fn foreign(dir: &Path, manifest: &Manifest, entries: &[Found]) -> Result<Vec<String>, Error> {
    let listed: BTreeMap<&str, &Entry> = manifest.files.iter().map(|e| (e.path.as_str(), e)).collect();
    let listed_dirs: BTreeSet<String> = manifest.files.iter().flat_map(|e| ancestors(&e.path)).collect();
    let mut foreign = Vec::new();
    for e in entries {
        if e.path == "manifest.json" {
            continue;
        }
        if e.is_dir {
            if !listed_dirs.contains(&e.path) && e.is_empty_dir {
                foreign.push(format!("`{}/` (an empty directory)", e.path));
            }
            continue;
        }
        match listed.get(e.path.as_str()) {
            None => foreign.push(format!("`{}` (not in manifest.json)", e.path)),
            Some(_) if e.is_symlink => foreign.push(format!("`{}` (a symbolic link)", e.path)),
            // Never opened: a named pipe would wait for a writer.
            Some(_) if e.special.is_some() => {
                foreign.push(format!("`{}` ({}, not a file wmrender wrote)", e.path, e.special.unwrap_or_default()))
            }
            Some(entry) if !unchanged(&dir.join(&e.path), entry)? => {
                foreign.push(format!("`{}` (changed since wmrender wrote it)", e.path))
            }
            Some(_) => {}
        }
    }
    Ok(foreign)
}

struct Found {
    /// Relative to the directory, `/`-separated.
    path: String,
    is_dir: bool,
    is_empty_dir: bool,
    is_symlink: bool,
    /// A named pipe, a socket, a device: what it is.
    special: Option<&'static str>,
}

/// Every entry below `dir`, without following symbolic links, in name order.
fn walk(dir: &Path) -> Result<Vec<Found>, Error> {
    let mut out = Vec::new();
    for entry in WalkDir::new(dir).min_depth(1).follow_links(false).sort_by_file_name() {
        let entry = entry.map_err(|e| walk_error(dir, e))?;
        let path = relative(dir, entry.path());
        let ft = entry.file_type();
        let is_empty_dir = ft.is_dir()
            && fs::read_dir(entry.path())
                .map_err(|e| Error::io(format!("reading {}", entry.path().display()), e))?
                .next()
                .is_none();
        let special = super::special_files::kind(&ft);
        out.push(Found { path, is_dir: ft.is_dir(), is_empty_dir, is_symlink: ft.is_symlink(), special });
    }
    Ok(out)
}

fn walk_error(dir: &Path, e: walkdir::Error) -> Error {
    let at = e.path().unwrap_or(dir).display().to_string();
    match e.into_io_error() {
        Some(io) => Error::io(format!("reading {at}"), io),
        None => Error::io(format!("reading {at}"), std::io::Error::other("a directory loop")),
    }
}

fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
}

/// `a/b/c.yaml` → `a`, `a/b`.
fn ancestors(path: &str) -> Vec<String> {
    let parts: Vec<&str> = path.split('/').collect();
    (1..parts.len()).map(|n| parts[..n].join("/")).collect()
}

fn read_manifest(dir: &Path) -> Option<Manifest> {
    let path = dir.join("manifest.json");
    if !fs::symlink_metadata(&path).ok()?.is_file() {
        return None;
    }
    let m: Manifest = serde_json::from_slice(&fs::read(&path).ok()?).ok()?;
    // Every render records its version and the inputs digest; a bare `{"files": []}` is someone else's.
    (!m.wmrender.is_empty() && m.inputs.starts_with("sha256:")).then_some(m)
}

fn unchanged(path: &Path, entry: &Entry) -> Result<bool, Error> {
    let meta = fs::metadata(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    if meta.len() != entry.size {
        return Ok(false);
    }
    let bytes = fs::read(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    Ok(wmrender_contract::sha256_hex(&bytes) == entry.sha256)
}

fn list(items: &[String]) -> String {
    let mut shown: Vec<String> = items.iter().take(LISTED).cloned().collect();
    if items.len() > LISTED {
        shown.push(format!("and {} more", items.len() - LISTED));
    }
    shown.join(", ")
}
