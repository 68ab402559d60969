//! wmrender: a GitOps rendering compiler for Windows nodes on OpenShift.
//!
//! The pipeline runs one way: [`inputs`] → [`validate`] → [`plan`] → [`render`] → [`emit`]. Every stage but the
//! first and the last is pure. See DESIGN.md in the shared folder and docs/ for the contracts.

// A Diagnostic is returned at most a few times per run, on the error path; boxing it would buy nothing.
#![allow(clippy::result_large_err)]

pub mod cluster;
#[cfg(feature = "cluster")]
pub mod controller;
pub mod delivery;
pub mod diagnostics;
pub mod duration;
pub mod emit;
pub mod error;
pub mod import;
pub mod inputs;
pub mod lifecycle;
pub mod net;
#[cfg(feature = "registry")]
pub mod oci;
pub mod payload;
pub mod plan;
#[cfg(feature = "registry")]
pub mod publish;
pub mod quantity;
pub mod registries;
pub mod render;
pub mod secret;
pub mod sync;
pub mod validate;
pub mod windows;

use diagnostics::Diagnostics;
use error::Error;
use render::{Artifact, ArtifactSet};
use std::path::Path;

/// The result of compiling an inputs file: the rendered artifacts and the warnings met on the way.
pub struct Compiled {
    pub artifacts: ArtifactSet,
    /// What `manifest.json` says besides the files: the inputs digest, who configures the nodes, the cluster's
    /// Kubernetes minor.
    pub stamp: render::manifest::Stamp,
    pub warnings: Diagnostics,
}

/// The two halves of the output tree, for `--only`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// `cluster/`: the objects Argo CD or Flux apply.
    Cluster,
    /// `node/`: the node bundle `sync` pushes.
    Node,
}

impl Part {
    fn prefix(self) -> &'static str {
        match self {
            Part::Cluster => "cluster/",
            Part::Node => "node/",
        }
    }
}

impl Compiled {
    /// The files of the output directory, limited to one part if asked, with a `manifest.json` that lists
    /// exactly those files; sorted by path.
    pub fn output_files(&self, only: Option<Part>) -> Vec<Artifact> {
        let mut files: Vec<Artifact> = self
            .artifacts
            .files
            .iter()
            .filter(|f| only.is_none_or(|p| f.path.starts_with(p.prefix())))
            .cloned()
            .collect();
        files.push(render::manifest::render(&files, &self.stamp));
        files.sort_by(|a, b| a.path.cmp(&b.path));
        files
    }
}

/// Loads and validates the inputs: stages 1 and 2. With `strict`, warnings count as errors.
pub fn check_inputs(path: &Path, strict: bool) -> Result<validate::Checked, Error> {
    check_loaded(inputs::load(path), strict).map_err(Error::Invalid)
}

/// Validates inputs already read (from a file, or a KRM functionConfig): the one path from reading to the checked
/// value. `Err` holds every diagnostic, warnings included.
pub fn check_loaded(
    loaded: Result<inputs::Loaded, Diagnostics>,
    strict: bool,
) -> Result<validate::Checked, Diagnostics> {
    let mut checked = validate::check(loaded?)?;
    if strict && checked.warnings.warning_count() > 0 {
        checked.warnings.promote_warnings();
        return Err(checked.warnings);
    }
    Ok(checked)
}

/// Runs the whole pipeline up to (not including) emit.
pub fn compile(path: &Path, strict: bool) -> Result<Compiled, Error> {
    let checked = check_inputs(path, strict)?;
    let plan = plan::plan(&checked);
    let artifacts = render::render(&plan);
    Ok(Compiled {
        artifacts,
        stamp: render::manifest::Stamp {
            inputs_digest: checked.loaded.digest(),
            mode: plan.operator.mode(),
            kubernetes_minor: plan.node.kubernetes.minor,
        },
        warnings: checked.warnings,
    })
}

/// Lower-case hex, for digests.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
