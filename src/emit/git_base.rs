//! `wmrender diff --base REF`: the output the inputs had at a git revision, for a review against the base branch
//! rather than against whatever output the pull request itself committed.
//!
//! The repository's tree at REF is written to a temporary directory with git's own plumbing (`read-tree` into a
//! private index, `checkout-index`), so the user's index and working tree are never touched, and the inputs file
//! found there is rendered like any other. Files the inputs reference (mirror sets) come from the same revision.

use crate::error::Error;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The output files (by path, as `render -o` writes them) of the inputs file `inputs` as it was at `rev`; empty
/// when the file did not exist there (everything is then new).
pub fn render_at(rev: &str, inputs: &Path) -> Result<BTreeMap<String, Vec<u8>>, Error> {
    if rev.is_empty() || rev.starts_with('-') {
        return Err(Error::Usage(format!("--base `{rev}` is not a git revision")));
    }
    let abs = std::fs::canonicalize(inputs).map_err(|e| Error::io(format!("reading {}", inputs.display()), e))?;
    let dir = abs.parent().map(Path::to_path_buf).unwrap_or_default();
    let top = PathBuf::from(git(&dir, &["rev-parse", "--show-toplevel"], None)?.trim_end());
    let top = std::fs::canonicalize(&top).unwrap_or(top);
    let rel = abs.strip_prefix(&top).map_err(|_| {
        Error::Usage(format!("{} is not inside the git repository at {}", inputs.display(), top.display()))
    })?;
    let commit = git(&top, &["rev-parse", "--verify", "--quiet", &format!("{rev}^{{commit}}")], None)
        .map_err(|_| Error::Usage(format!("--base `{rev}`: no such commit in {}", top.display())))?;
    let commit = commit.trim();
    let tmp = tempfile::Builder::new()
        .prefix("wmrender-base-")
        .tempdir()
        .map_err(|e| Error::io("creating a temporary directory", e))?;
    let tree = tmp.path().join("tree");
    let index = tmp.path().join("index");
    git(&top, &["read-tree", commit], Some(&index))?;
    let prefix = format!("{}/", tree.display());
    git(&top, &["checkout-index", "--all", &format!("--prefix={prefix}")], Some(&index))?;
    let old_inputs = tree.join(rel);
    if !old_inputs.is_file() {
        return Ok(BTreeMap::new());
    }
    let compiled = crate::compile(&old_inputs, false).map_err(|e| match e {
        Error::Invalid(_) => Error::Usage(format!(
            "the inputs at {rev} do not render (check them out and run `wmrender validate`); nothing to compare with"
        )),
        other => other,
    })?;
    Ok(compiled.output_files(None).into_iter().map(|a| (a.path, a.bytes)).collect())
}

/// Runs git in `dir`; stdout on success. `index`: a private index file.
fn git(dir: &Path, args: &[&str], index: Option<&Path>) -> Result<String, Error> {
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(dir).args(args).stdin(Stdio::null());
    if let Some(index) = index {
        cmd.env("GIT_INDEX_FILE", index);
    }
    let out = cmd.output().map_err(|e| Error::io("running git (needed by --base)", e))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(Error::Usage(format!("git {} failed: {}", args.join(" "), err.trim())));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
