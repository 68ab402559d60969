//! `manifest.json`: every output file with its sha256 and size, the wmrender version, the inputs digest, the mode
//! (with or without the operator) and the cluster's Kubernetes minor (a payload is checked against it). `sync` reads
//! it to verify the directory and to know whether it may touch BYOH hosts; reviewers can see at a glance what a render produced. The controller's bundle ConfigMaps carry one
//! of their own, for the files they hold. The type is the node contract's.

use super::Artifact;
use wmrender_contract::{BundleEntry, BundleManifest, Mode};

/// What a manifest says besides its files.
#[derive(Clone, Debug)]
pub struct Stamp {
    /// `sha256:…` of the inputs.
    pub inputs_digest: String,
    /// Who configures the nodes (sync reads it).
    pub mode: Mode,
    /// `1.<minor>` of the cluster's Kubernetes.
    pub kubernetes_minor: u32,
}

/// The manifest of `files` (in the order given: sorted by path, as [`super::render`] returns them).
pub fn of<'a>(files: impl IntoIterator<Item = &'a Artifact>, stamp: &Stamp) -> BundleManifest {
    BundleManifest {
        wmrender: env!("CARGO_PKG_VERSION").into(),
        inputs: stamp.inputs_digest.clone(),
        mode: Some(stamp.mode),
        kubernetes: Some(format!("1.{}", stamp.kubernetes_minor)),
        files: files
            .into_iter()
            .map(|f| BundleEntry {
                path: f.path.clone(),
                sha256: wmrender_contract::sha256_hex(&f.bytes),
                size: f.bytes.len() as u64,
            })
            .collect(),
    }
}

/// `manifest.json` of the output directory holding `files`.
pub fn render(files: &[Artifact], stamp: &Stamp) -> Artifact {
    Artifact { path: "manifest.json".into(), bytes: of(files, stamp).to_json() }
}
