//! Staged binaries: sync cannot overwrite an executable that a running service holds, so it leaves the new
//! content beside it as `<path>.wmrender-staged`; the agent stops the services that run it, swaps it in and starts
//! them again. The staged file is checked against the manifest's sha256 before it replaces anything.

use crate::digest::sha256_file;
use crate::system::System;
use wmrender_contract::{NodeManifest, NodePath, STAGED_SUFFIX};

/// A staged file that is there and matches the manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Staged {
    pub path: NodePath,
    pub staged: NodePath,
}

/// What the manifest's staged entries ask for.
#[derive(Debug, Default)]
pub struct StagedCheck {
    pub ready: Vec<Staged>,
    /// Paths whose new content is neither staged nor in place.
    pub missing: Vec<String>,
    pub errors: Vec<String>,
}

pub fn check(sys: &dyn System, manifest: &NodeManifest) -> StagedCheck {
    let mut out = StagedCheck::default();
    for entry in manifest.files.iter().filter(|f| f.staged) {
        let staged = match entry.path.with_suffix(STAGED_SUFFIX) {
            Ok(p) => p,
            Err(e) => {
                out.errors.push(format!("manifest.json: {e}"));
                continue;
            }
        };
        let local_staged = sys.local(&staged);
        if local_staged.exists() {
            match sha256_file(&local_staged) {
                Ok(sha) if sha == entry.sha256 => out.ready.push(Staged { path: entry.path.clone(), staged }),
                Ok(sha) => out.errors.push(format!(
                    "{staged} does not match manifest.json (sha256 {sha}, expected {}); not swapped in: sync again",
                    entry.sha256
                )),
                Err(e) => out.errors.push(format!("cannot read {staged}: {e}")),
            }
            continue;
        }
        match sha256_file(&sys.local(&entry.path)) {
            Ok(sha) if sha == entry.sha256 => {}
            Ok(_) => out.missing.push(format!("{} (the staged new version is not there)", entry.path)),
            Err(_) => out.missing.push(entry.path.to_string()),
        }
    }
    out
}

/// Moves the staged file over its path. When the path is still held by a process the agent does not stop (a pod's
/// containerd shim, the agent itself), the old file is renamed aside first, which Windows allows for a running
/// executable; the old copy is removed on a later pass.
pub fn swap(sys: &mut dyn System, s: &Staged) -> Result<(), String> {
    if sys.replace_file(&s.staged, &s.path).is_ok() {
        return Ok(());
    }
    let aside = s.path.with_suffix(".wmrender-old").map_err(|e| e.to_string())?;
    let local_aside = sys.local(&aside);
    if local_aside.exists() {
        std::fs::remove_file(&local_aside).map_err(|e| format!("cannot remove the old copy {aside}: {e}"))?;
    }
    sys.replace_file(&s.path, &aside).map_err(|e| format!("cannot swap in {}: {e}", s.path))?;
    sys.replace_file(&s.staged, &s.path).map_err(|e| format!("cannot swap in {}: {e}", s.path))?;
    let _ = std::fs::remove_file(&local_aside);
    Ok(())
}
