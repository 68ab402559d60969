//! `manifest.json`: every output file with its sha256 and size, the wmrender version, the inputs digest and the
//! mode (with or without the operator). `sync` reads it to verify the directory and to know whether it may touch
//! BYOH hosts; reviewers can see at a glance what a render produced. The controller's bundle ConfigMaps carry one
//! of their own, for the files they hold. The type is the node contract's.

use super::Artifact;
use wmrender_contract::{BundleEntry, BundleManifest, Mode};

/// The manifest of `files` (in the order given: sorted by path, as [`super::render`] returns them).
pub fn of<'a>(files: impl IntoIterator<Item = &'a Artifact>, inputs_digest: &str, mode: Mode) -> BundleManifest {
    BundleManifest {
        wmrender: env!("CARGO_PKG_VERSION").into(),
        inputs: inputs_digest.into(),
        mode: Some(mode),
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
pub fn render(files: &[Artifact], inputs_digest: &str, mode: Mode) -> Artifact {
    Artifact { path: "manifest.json".into(), bytes: of(files, inputs_digest, mode).to_json() }
}
