//! Staged binaries: sync cannot overwrite an executable that a running service holds, so it leaves the new
//! content beside it as `<path>.wmrender-staged`; the agent stops the services that run it, swaps it in and starts
//! them again. The staged file is checked against the manifest's sha256 before it replaces anything.

use crate::digest::{DigestCache, sha256_file};
use crate::system::System;
use wmrender_contract::{ASIDE_SUFFIX, NodeManifest, NodePath, STAGED_SUFFIX};

/// A staged file that is there and matches the manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Staged {
    pub path: NodePath,
    pub staged: NodePath,
}

/// A staged entry that cannot be swapped in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StagedProblem {
    pub path: NodePath,
    /// Its new content is neither staged nor in place (`missing`), rather than staged wrong (an error).
    pub missing: bool,
    pub text: String,
}

/// What the manifest's staged entries ask for.
#[derive(Debug, Default)]
pub struct StagedCheck {
    pub ready: Vec<Staged>,
    pub problems: Vec<StagedProblem>,
}

/// A file already swapped in (its entry stays `staged` until the next sync) is checked through `digests`, so an
/// unchanged node does not read its binaries again every pass.
pub fn check(sys: &dyn System, manifest: &NodeManifest, digests: &mut DigestCache) -> StagedCheck {
    let mut out = StagedCheck::default();
    for entry in manifest.files.iter().filter(|f| f.staged) {
        let problem = |missing: bool, text: String| StagedProblem { path: entry.path.clone(), missing, text };
        let staged = match entry.path.with_suffix(STAGED_SUFFIX) {
            Ok(p) => p,
            Err(e) => {
                out.problems.push(problem(false, format!("manifest.json: {e}")));
                continue;
            }
        };
        let local_staged = sys.local(&staged);
        if local_staged.exists() {
            match sha256_file(&local_staged) {
                Ok(sha) if sha == entry.sha256 => out.ready.push(Staged { path: entry.path.clone(), staged }),
                // Swapped in already, and another file staged beside it since that the manifest does not name yet
                // (a pull cut off before it wrote the manifest): not this entry's to swap.
                Ok(_)
                    if digests.digest(&entry.path, &sys.local(&entry.path)).ok().flatten().as_ref()
                        == Some(&entry.sha256) => {}
                Ok(sha) => out.problems.push(problem(
                    false,
                    format!(
                        "{staged} does not match manifest.json (sha256 {sha}, expected {}); not swapped in: sync again",
                        entry.sha256
                    ),
                )),
                Err(e) => out.problems.push(problem(false, format!("cannot read {staged}: {e}"))),
            }
            continue;
        }
        match digests.digest(&entry.path, &sys.local(&entry.path)) {
            Ok(Some(sha)) if sha == entry.sha256 => {}
            Ok(Some(_)) => {
                out.problems.push(problem(true, format!("{} (the staged new version is not there)", entry.path)))
            }
            Ok(None) | Err(_) => out.problems.push(problem(true, entry.path.to_string())),
        }
    }
    out
}

/// Moves the staged file over its path. When the path is still held by a process the agent does not stop (a pod's
/// containerd shim), the old file is renamed aside first, which Windows allows for a running executable; the old
/// copy is removed by a later pass once nothing runs it ([`remove_set_aside`]).
pub fn swap(sys: &mut dyn System, s: &Staged) -> Result<(), String> {
    if sys.replace_file(&s.staged, &s.path).is_ok() {
        return Ok(());
    }
    let aside = s.path.with_suffix(ASIDE_SUFFIX).map_err(|e| e.to_string())?;
    let local_aside = sys.local(&aside);
    if local_aside.exists() {
        std::fs::remove_file(&local_aside).map_err(|e| format!("cannot remove the old copy {aside}: {e}"))?;
    }
    sys.replace_file(&s.path, &aside).map_err(|e| format!("cannot swap in {}: {e}", s.path))?;
    sys.replace_file(&s.staged, &s.path).map_err(|e| format!("cannot swap in {}: {e}", s.path))?;
    let _ = std::fs::remove_file(&local_aside);
    Ok(())
}

/// Removes the old copies set aside beside the manifest's files (by a swap here, or by sync for the agent's own
/// executable) once Windows lets them go: a copy a process still runs cannot be deleted, and is tried again by the
/// next pass. Returns the copies removed.
pub fn remove_set_aside(sys: &mut dyn System, manifest: &NodeManifest) -> Vec<NodePath> {
    let mut removed = Vec::new();
    let agent = NodePath::known(wmrender_contract::paths::AGENT_EXE);
    let paths = manifest.files.iter().map(|f| &f.path).chain(std::iter::once(&agent));
    for path in paths {
        let Ok(aside) = path.with_suffix(ASIDE_SUFFIX) else { continue };
        if sys.local(&aside).is_file() && sys.remove_file(&aside).is_ok() {
            removed.push(aside);
        }
    }
    removed
}
