//! wmrender: a GitOps rendering compiler for Windows nodes on OpenShift.
//!
//! The pipeline runs one way: [`inputs`] → [`validate`] → [`plan`] → [`render`] → [`emit`]. Every stage but the
//! first and the last is pure. See DESIGN.md in the shared folder and docs/ for the contracts.

// A Diagnostic is returned at most a few times per run, on the error path; boxing it would buy nothing.
#![allow(clippy::result_large_err)]

pub mod diagnostics;
pub mod emit;
pub mod error;
pub mod inputs;
pub mod net;
pub mod plan;
pub mod quantity;
pub mod render;
pub mod validate;
pub mod windows;

use diagnostics::Diagnostics;
use error::Error;
use render::{Artifact, ArtifactSet};
use std::path::Path;

/// The result of compiling an inputs file: the rendered artifacts and the warnings met on the way.
pub struct Compiled {
    pub artifacts: ArtifactSet,
    /// `manifest.json`, describing `artifacts.files`.
    pub manifest: Artifact,
    pub warnings: Diagnostics,
}

impl Compiled {
    /// Every file of the output directory, `manifest.json` included, sorted by path.
    pub fn all_files(&self) -> Vec<Artifact> {
        let mut files = self.artifacts.files.clone();
        files.push(self.manifest.clone());
        files.sort_by(|a, b| a.path.cmp(&b.path));
        files
    }
}

/// Loads and validates the inputs: stages 1 and 2. Warnings come back with the error or in the result.
pub fn check_inputs(path: &Path) -> Result<(inputs::Loaded, Diagnostics), Error> {
    let loaded = inputs::load(path).map_err(Error::Invalid)?;
    let mut diags = loaded.diagnostics.clone();
    diags.extend(validate::validate(&loaded.inputs));
    if diags.has_errors() {
        return Err(Error::Invalid(diags));
    }
    Ok((loaded, diags))
}

/// Runs the whole pipeline up to (not including) emit.
pub fn compile(path: &Path) -> Result<Compiled, Error> {
    let (loaded, warnings) = check_inputs(path)?;
    let plan = plan::plan(&loaded.inputs);
    let artifacts = render::render(&plan);
    let manifest = emit::manifest::render(&artifacts.files, &loaded.digest());
    Ok(Compiled { artifacts, manifest, warnings })
}

/// Lower-case hex, for digests.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
