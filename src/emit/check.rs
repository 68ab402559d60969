//! `render --check`: compare a fresh render with a directory on disk, as `cargo fmt --check` does.

use crate::error::Error;
use crate::render::Artifact;
use similar::TextDiff;
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use walkdir::WalkDir;

/// What differs between the directory and the render.
#[derive(Debug, Default)]
pub struct Staleness {
    pub changed: Vec<String>,
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// A unified diff per differing file, `a/` = on disk, `b/` = freshly rendered, in path order.
    pub diffs: Vec<(String, String)>,
}

impl Staleness {
    /// Every file's diff, one after the other.
    pub fn diff(&self) -> String {
        self.diffs.iter().map(|(_, d)| d.as_str()).collect()
    }

    pub fn is_current(&self) -> bool {
        self.changed.is_empty() && self.added.is_empty() && self.removed.is_empty()
    }

    pub fn summary(&self) -> String {
        format!(
            "{} changed, {} to add, {} to remove; the output is stale: run `wmrender render` again",
            self.changed.len(),
            self.added.len(),
            self.removed.len()
        )
    }
}

pub fn compare(dir: &Path, files: &[Artifact]) -> Result<Staleness, Error> {
    Ok(compare_with(read_dir(dir)?, files))
}

/// Every file below `dir` by `/`-separated relative path (none if `dir` does not exist).
pub fn read_dir(dir: &Path) -> Result<BTreeMap<String, Vec<u8>>, Error> {
    let mut on_disk = BTreeMap::new();
    if dir.is_dir() {
        read_tree(dir, &mut on_disk)?;
    }
    Ok(on_disk)
}

/// Compares an earlier output tree (`on_disk`: from a directory, or rendered at a git revision) with `files`.
pub fn compare_with(mut on_disk: BTreeMap<String, Vec<u8>>, files: &[Artifact]) -> Staleness {
    let mut s = Staleness::default();
    for f in files {
        match on_disk.remove(&f.path) {
            Some(old) if old == f.bytes => {}
            Some(old) => {
                s.diffs.push((f.path.clone(), unified(&f.path, &old, &f.bytes)));
                s.changed.push(f.path.clone());
            }
            None => {
                s.diffs.push((f.path.clone(), unified(&f.path, b"", &f.bytes)));
                s.added.push(f.path.clone());
            }
        }
    }
    for (path, old) in on_disk {
        s.diffs.push((path.clone(), unified(&path, &old, b"")));
        s.removed.push(path);
    }
    s.diffs.sort_by(|a, b| a.0.cmp(&b.0));
    s
}

fn unified(path: &str, old: &[u8], new: &[u8]) -> String {
    let (old, new) = (String::from_utf8_lossy(old), String::from_utf8_lossy(new));
    TextDiff::from_lines(old.as_ref(), new.as_ref())
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string()
}

/// Every file below `root` by `/`-separated relative path. Symbolic links are not followed (a link to `..` would
/// loop, a link elsewhere would compare someone else's files); wmrender writes none, so each shows up as a file
/// whose content names its target, and the comparison reports it. Named pipes, sockets and devices show up the same
/// way, by their kind, and are never opened.
fn read_tree(root: &Path, out: &mut BTreeMap<String, Vec<u8>>) -> Result<(), Error> {
    for entry in WalkDir::new(root).min_depth(1).follow_links(false).sort_by_file_name() {
        let entry = entry.map_err(|e| {
            let at = e.path().unwrap_or(root).display().to_string();
            Error::io(format!("reading {at}"), e.into_io_error().unwrap_or_else(|| std::io::Error::other("a loop")))
        })?;
        if entry.file_type().is_dir() {
            continue;
        }
        let path = entry.path();
        let rel = path.strip_prefix(root).unwrap_or(path);
        let key = rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
        let bytes = if entry.file_type().is_symlink() {
            let target = fs::read_link(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
            format!("(a symbolic link to {})\n", target.display()).into_bytes()
        } else if let Some(kind) = super::special_files::kind(&entry.file_type()) {
            // Reported, never opened: reading a named pipe waits for a writer.
            format!("({kind}, not read)\n").into_bytes()
        } else {
            fs::read(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?
        };
        out.insert(key, bytes);
    }
    Ok(())
}
