//! `manifest.json`: every output file with its sha256 and size, the wmrender version, the inputs digest and the
//! mode (with or without the operator). `sync` reads it to verify the directory and to know whether it may touch
//! BYOH hosts; reviewers can see at a glance what a render produced. The type is the node contract's.

use crate::render::Artifact;
use wmrender_contract::{BundleEntry, BundleManifest, Mode};

/// The manifest for `files` (which must be sorted by path, as [`crate::render::render`] returns them).
pub fn render(files: &[Artifact], inputs_digest: &str, mode: Mode) -> Artifact {
    let m = BundleManifest {
        wmrender: env!("CARGO_PKG_VERSION").into(),
        inputs: inputs_digest.into(),
        mode: Some(mode),
        files: files
            .iter()
            .map(|f| BundleEntry {
                path: f.path.clone(),
                sha256: wmrender_contract::sha256_hex(&f.bytes),
                size: f.bytes.len() as u64,
            })
            .collect(),
    };
    Artifact { path: "manifest.json".into(), bytes: m.to_json() }
}
