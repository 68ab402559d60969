//! The node bundle, or the payload, as one OCI artifact (pure): an OCI image manifest with its own artifact type,
//! the empty config of OCI 1.1, and one layer per file, each the file's bytes as they are, titled with its path (under
//! `node/` for the bundle, in the payload directory for the payload: a node path either way, `C/k/kubelet.conf`;
//! ORAS's convention: `oras pull` writes the files back). A layer is addressed by the file's sha256, so
//! a registry keeps every file once across versions: a bundle that changed in one file costs that file and a new
//! manifest to push or pull, nothing else.
//!
//! Same files, byte-identical manifest, same digest: the manifest carries no time and no wmrender version.

use std::collections::BTreeMap;
use wmrender_contract::bundle_artifact::{self, Entry};
pub use wmrender_contract::bundle_artifact::{
    Descriptor, EMPTY, EMPTY_MEDIA_TYPE, Kind, MANIFEST_MEDIA_TYPE, Manifest, TITLE,
};

/// A blob to push: its digest (`sha256:<hex>`) and bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blob {
    pub digest: String,
    pub bytes: Vec<u8>,
}

impl Blob {
    pub fn of(bytes: Vec<u8>) -> Blob {
        Blob { digest: digest(&bytes), bytes }
    }
}

/// An artifact ready to push: its manifest, that manifest's digest, and every blob it names, each once.
#[derive(Clone, Debug)]
pub struct Artifact {
    pub manifest: Vec<u8>,
    pub digest: String,
    pub blobs: Vec<Blob>,
}

/// `sha256:<hex>` of some bytes.
pub fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", wmrender_contract::sha256_hex(bytes))
}

/// The descriptor of a blob.
pub fn descriptor(media_type: &str, blob: &Blob) -> Descriptor {
    Descriptor {
        media_type: media_type.into(),
        digest: blob.digest.clone(),
        size: blob.bytes.len() as u64,
        annotations: BTreeMap::new(),
    }
}

/// A file to publish, with the sha256 (hex) its reader checked it against (the rendered manifest.json, the
/// payload's payload.json): not hashed again here. Were the bytes to differ, the registry refuses the blob.
#[derive(Clone, Debug)]
pub struct File {
    /// The node path, `/`-separated: `C/k/kubelet.conf`.
    pub path: String,
    pub bytes: Vec<u8>,
    pub sha256: String,
}

/// The artifact of `files`, in any order: the manifest is the contract's ([`bundle_artifact::manifest`]), which a
/// controller computes from the same files without publishing.
pub fn artifact(kind: Kind, files: Vec<File>) -> Artifact {
    let entries: Vec<Entry> = files
        .iter()
        .map(|f| Entry { path: f.path.clone(), sha256: f.sha256.clone(), size: f.bytes.len() as u64 })
        .collect();
    let manifest = bundle_artifact::manifest(kind, &entries);
    let mut blobs = vec![Blob::of(EMPTY.to_vec())];
    for File { bytes, sha256, .. } in files {
        let digest = format!("sha256:{sha256}");
        if !blobs.iter().any(|b| b.digest == digest) {
            blobs.push(Blob { digest, bytes });
        }
    }
    Artifact { digest: digest(&manifest), manifest, blobs }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(list: &[(&str, &str)]) -> Vec<File> {
        list.iter()
            .map(|(p, b)| File {
                path: p.to_string(),
                bytes: b.as_bytes().to_vec(),
                sha256: wmrender_contract::sha256_hex(b.as_bytes()),
            })
            .collect()
    }

    #[test]
    fn one_layer_per_file_titled_by_its_path_each_blob_once_and_the_same_files_give_the_same_digest() {
        let a = artifact(
            Kind::NodeBundle,
            files(&[("C/k/b.conf", "same"), ("C/k/a.conf", "same"), ("C/k/c.toml", "other")]),
        );
        let m: serde_json::Value = serde_json::from_slice(&a.manifest).unwrap();
        assert_eq!(m["artifactType"], "application/vnd.wmrender.node-bundle.v1");
        assert_eq!(m["config"]["digest"], digest(b"{}"));
        assert_eq!(m["config"]["size"], 2);
        let titles: Vec<&str> =
            m["layers"].as_array().unwrap().iter().map(|l| l["annotations"][TITLE].as_str().unwrap()).collect();
        assert_eq!(titles, ["C/k/a.conf", "C/k/b.conf", "C/k/c.toml"]);
        assert_eq!(m["layers"][0]["digest"], m["layers"][1]["digest"]);
        // the config, "same" and "other": three blobs for four descriptors.
        assert_eq!(a.blobs.len(), 3);
        assert_eq!(a.digest, digest(&a.manifest));

        let again = artifact(
            Kind::NodeBundle,
            files(&[("C/k/c.toml", "other"), ("C/k/a.conf", "same"), ("C/k/b.conf", "same")]),
        );
        assert_eq!((again.manifest, again.digest), (a.manifest.clone(), a.digest.clone()));
        let changed =
            artifact(Kind::NodeBundle, files(&[("C/k/b.conf", "same"), ("C/k/a.conf", "same"), ("C/k/c.toml", "new")]));
        assert_ne!(changed.digest, a.digest);
        // The same files as a payload: another artifact type, another digest.
        let payload =
            artifact(Kind::Payload, files(&[("C/k/b.conf", "same"), ("C/k/a.conf", "same"), ("C/k/c.toml", "other")]));
        let m: serde_json::Value = serde_json::from_slice(&payload.manifest).unwrap();
        assert_eq!(m["artifactType"], "application/vnd.wmrender.payload.v1");
        assert_eq!(m["layers"][0]["mediaType"], "application/vnd.wmrender.payload.file.v1");
        assert_ne!(payload.digest, a.digest);
    }
}
