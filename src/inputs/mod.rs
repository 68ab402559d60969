//! Stage 1: read the inputs file, decode it with source locations, and check the files it references.

mod digest;
pub mod mirrors;
pub mod schema;
pub mod yaml;

use crate::diagnostics::{Diagnostic, Diagnostics, Loc};
use crate::error::io_reason;
use schema::ClusterInputs;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// The inputs as read from disk.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The inputs file. Its inline mirror entries (`spec.mirrors.imageDigestMirrors`, `imageTagMirrors`) are
    /// moved into `mirror_sets`, so that a large list is held once; the digest counts them where they were written.
    pub inputs: ClusterInputs,
    /// The inline mirror entries and those of the referenced IDMS/ITMS files, in merge order.
    pub mirror_sets: Vec<mirrors::MirrorSet>,
    /// What reading found (errors included: see [`from_node`]), and the source text for snippets.
    pub diagnostics: Diagnostics,
    digest: String,
}

impl Loaded {
    /// `sha256:<hex>` of the inputs' meaning (canonical JSON, keys sorted): the same whatever the key order,
    /// comments or formatting of the file. The referenced files count through their content, not their names.
    pub fn digest(&self) -> String {
        self.digest.clone()
    }
}

/// Reads and decodes `path`. On any error, every diagnostic found is returned.
pub fn load(path: &Path) -> Result<Loaded, Diagnostics> {
    let file: Arc<str> = Arc::from(path.display().to_string());
    let mut diags = Diagnostics::default();
    let text = match yaml::read_source(path, &file, &mut diags) {
        Ok(t) => t,
        Err(e @ yaml::NotRead::NotUtf8 { .. }) => {
            diags.push(e.diagnostic("the inputs file", &Loc::file_only(&file), ""));
            return Err(diags);
        }
        Err(e) => {
            return Err(one(e
                .diagnostic("the inputs file", &Loc::file_only(&file), "")
                .hint("pass the inputs with -f PATH (default: wmrender.yaml in the current directory)")));
        }
    };
    load_text(path, &file, &text, diags)
}

fn load_text(path: &Path, file: &Arc<str>, text: &Arc<str>, mut diags: Diagnostics) -> Result<Loaded, Diagnostics> {
    if text.trim().is_empty() {
        // At its first line: where the document should start.
        let start = Loc { file: file.clone(), line: 1, column: 1 };
        diags.push(
            Diagnostic::error(&start, "(document)", "the inputs file is empty").expected("a ClusterInputs document"),
        );
        return Err(diags);
    }
    let node = match yaml::parse(file, text) {
        Ok(n) => n,
        Err(e) => {
            diags.push(e);
            return Err(diags);
        }
    };
    // Decoding takes the tree, freeing it as it goes: it is gone before the mirror files are read.
    let Some(inputs) = schema::decode_document(node, &mut diags) else {
        return Err(diags);
    };
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let base = if base.as_os_str().is_empty() { PathBuf::from(".") } else { base };
    let root = repository_root(&base);
    Ok(with_files(inputs, &base, &root, diags))
}

/// Decodes a ClusterInputs document already parsed (a KRM functionConfig) and loads the files it references,
/// relative to `base` and never outside `root` (the repository: where the function runs, not where its input says
/// it comes from).
///
/// Decoding goes as far as it can: the `Loaded` may carry errors in its diagnostics (a missing field, a wrong
/// type), so that validation still runs every rule on what was read and every error is reported in one run.
/// `Err` only when there is nothing to validate: the document is not a mapping.
pub fn from_node(node: yaml::Node, base: &Path, root: &Path, mut diags: Diagnostics) -> Result<Loaded, Diagnostics> {
    let Some(inputs) = schema::decode_document(node, &mut diags) else {
        return Err(diags);
    };
    Ok(with_files(inputs, base, root, diags))
}

/// Loads the mirror files the decoded inputs reference, relative to `base`, inside `root`.
fn with_files(mut inputs: ClusterInputs, base: &Path, root: &Path, mut diags: Diagnostics) -> Loaded {
    let base = base.to_path_buf();
    let mut mirror_files = Vec::new();
    for f in &inputs.spec.mirrors.files {
        match resolve_inside(&base, root, f) {
            Ok(p) => {
                // Messages name the file as the user would open it from where wmrender runs.
                let shown = if base == Path::new(".") { PathBuf::from(f.as_str()) } else { base.join(f.as_str()) };
                mirror_files.push(mirrors::MirrorFile {
                    written: f.clone(),
                    path: p,
                    shown: shown.display().to_string(),
                })
            }
            Err(e) => diags.push(e),
        }
    }
    let mut mirror_sets = mirrors::load_files(&mirror_files, &mut diags);
    // Hashed while the inline entries are still in the inputs, where the user wrote them.
    let digest = digest::inputs_digest(&inputs, &mirrors::merge_order(&inputs, &mirror_sets));
    mirrors::take_inline(&mut inputs, &mut mirror_sets);
    Loaded { inputs, mirror_sets, diagnostics: diags, digest }
}

fn one(d: Diagnostic) -> Diagnostics {
    let mut ds = Diagnostics::default();
    ds.push(d);
    ds
}

/// The repository `dir` is in: its nearest ancestor holding `.git`, else `dir` itself. Resolved (absolute, links
/// followed), so that paths can be compared with it.
pub fn repository_root(dir: &Path) -> PathBuf {
    let abs = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    abs.ancestors().find(|dir| dir.join(".git").exists()).map(Path::to_path_buf).unwrap_or(abs)
}

/// `path` resolved (links followed), when it exists and is inside `root`: the only files a path taken from an
/// untrusted document (a KRM function's annotations, a kustomization's list) may lead wmrender to read.
pub fn inside_root(root: &Path, path: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(path).ok().filter(|real| real.starts_with(root))
}

/// Resolves a path written in the inputs relative to the inputs file, refusing absolute paths and paths that
/// leave the repository: in an Argo CD plugin the inputs come from Git and must not read the host.
fn resolve_inside(base: &Path, root: &Path, rel: &yaml::Located<String>) -> Result<PathBuf, Diagnostic> {
    let written = Path::new(rel.as_str());
    let expected = "a path relative to the inputs file, inside the repository";
    if rel.is_empty()
        || written.is_absolute()
        || written.components().any(|c| matches!(c, Component::Prefix(_) | Component::RootDir))
    {
        return Err(rel.error(format!("`{}` is an absolute path", rel.value)).expected(expected));
    }
    let base = std::fs::canonicalize(base).unwrap_or_else(|_| base.to_path_buf());
    let joined = lexically_normal(&base.join(written));
    let outside =
        || rel.error(format!("`{}` is outside the repository ({})", rel.value, root.display())).expected(expected);
    if !joined.starts_with(root) {
        return Err(outside());
    }
    let real = std::fs::canonicalize(&joined).map_err(|e| {
        rel.error(format!("cannot read `{}`: {}", rel.value, io_reason(&e))).expected("an existing file")
    })?;
    // A symbolic link inside the repository may still point out of it.
    if !real.starts_with(root) {
        return Err(outside());
    }
    if !real.is_file() {
        return Err(rel.error(format!("`{}` is not a file", rel.value)).expected("an existing file"));
    }
    Ok(real)
}

/// Resolves `.` and `..` without touching the disk, so a path that climbs out is caught before it is read.
fn lexically_normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}
