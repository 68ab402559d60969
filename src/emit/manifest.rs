//! `manifest.json`: every output file with its sha256 and size, the wmrender version and the inputs digest.
//! `sync` (later) compares it with the node's copy; reviewers can see at a glance what a render produced.

use crate::render::Artifact;
use serde::Serialize;
use sha2::{Digest, Sha256};

#[derive(Serialize)]
struct Manifest<'a> {
    wmrender: &'a str,
    inputs: &'a str,
    files: Vec<Entry<'a>>,
}

#[derive(Serialize)]
struct Entry<'a> {
    path: &'a str,
    sha256: String,
    size: usize,
}

/// The manifest for `files` (which must be sorted by path, as [`crate::render::render`] returns them).
pub fn render(files: &[Artifact], inputs_digest: &str) -> Artifact {
    let m = Manifest {
        wmrender: env!("CARGO_PKG_VERSION"),
        inputs: inputs_digest,
        files: files
            .iter()
            .map(|f| Entry { path: &f.path, sha256: crate::hex(&Sha256::digest(&f.bytes)), size: f.bytes.len() })
            .collect(),
    };
    // Plain strings and numbers: serialisation cannot fail.
    let json = serde_json::to_string_pretty(&m).unwrap_or_default() + "\n";
    Artifact { path: "manifest.json".into(), bytes: json.into_bytes() }
}
