//! The node bundle as an OCI artifact: what `wmrender publish` writes and what the agent pulls. One OCI image
//! manifest with its own artifact type, OCI 1.1's empty config, and one layer per file: the file's bytes as they
//! are, addressed by their sha256 and titled with the node path (`C/k/kubelet.conf`, ORAS's convention). A registry
//! keeps every file once across versions, so a bundle that changed in one file costs that file and a manifest.
//!
//! Here are the names both sides use, the reference a Node's `wmrender.dev/desired-bundle` annotation holds, and the
//! reading of a manifest fetched from a registry: untrusted input, every path a checked [`NodePath`], every digest a
//! sha256, every size bounded.

use crate::path::NodePath;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// What is published.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `node/` of a rendered directory.
    NodeBundle,
    /// A payload directory (`payload pull`, `payload list`): the programs, with their `payload.json`.
    Payload,
}

impl Kind {
    /// The manifest's `artifactType`.
    pub fn artifact_type(self) -> &'static str {
        match self {
            Kind::NodeBundle => "application/vnd.wmrender.node-bundle.v1",
            Kind::Payload => "application/vnd.wmrender.payload.v1",
        }
    }

    /// A layer's media type: one file, its bytes as they are.
    pub fn file_media_type(self) -> &'static str {
        match self {
            Kind::NodeBundle => "application/vnd.wmrender.node-bundle.file.v1",
            Kind::Payload => "application/vnd.wmrender.payload.file.v1",
        }
    }
}

/// The layer annotation that names the file: its path under `node/` (`C/k/kubelet.conf`).
pub const TITLE: &str = "org.opencontainers.image.title";
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// OCI 1.1's empty descriptor: the config of an artifact that needs none.
/// An OCI image index: what the referrers API and the referrers tag schema answer.
pub const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
pub const EMPTY_MEDIA_TYPE: &str = "application/vnd.oci.empty.v1+json";
/// The largest manifest a node reads (a bundle of a few hundred files is tens of KiB).
pub const MANIFEST_MAX: u64 = 4 << 20;
/// The largest bundle file a node accepts (the node bundle is configuration; programs come with the payload).
pub const BUNDLE_FILE_MAX: u64 = 64 << 20;
/// The largest program a node takes from a payload (WMCO's largest is about 120 MB; `payload pull`'s bound too).
pub const PAYLOAD_FILE_MAX: u64 = 1 << 30;
/// The most a payload's programs may add up to (WMCO's payload is about 400 MB): what a node writes to its disk.
pub const PAYLOAD_TOTAL_MAX: u64 = 4 << 30;
/// The largest `payload.json` a node reads (one line per program: a few KiB).
pub const PAYLOAD_LIST_MAX: u64 = 1 << 20;

/// `registry/repository@sha256:<hex>`: what `publish` prints and what the desired-bundle annotation holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    /// `host[:port]`.
    pub registry: String,
    /// `fleet/windows-bundle`.
    pub repository: String,
    /// `sha256:<hex>`.
    pub digest: String,
}

impl Reference {
    /// Reads a reference by digest; the error says what was expected.
    pub fn parse(text: &str) -> Result<Reference, String> {
        let expected = "expected registry/repository@sha256:<64 hex digits>, as `wmrender publish` prints it";
        let (name, digest) = text.trim().split_once('@').ok_or_else(|| format!("no @digest: {expected}"))?;
        if !is_digest(digest) {
            return Err(format!("`{}` is not a sha256 digest: {expected}", digest.escape_debug()));
        }
        let (registry, repository) = name.split_once('/').ok_or_else(|| format!("no repository: {expected}"))?;
        let host_ok = !registry.is_empty()
            && (registry.contains('.') || registry.contains(':') || registry == "localhost")
            && registry.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'));
        if !host_ok {
            return Err(format!("`{}` is not a registry host: {expected}", registry.escape_debug()));
        }
        // The distribution spec's repository name: lowercase path components separated by `/`.
        let component_ok = |c: &str| {
            !c.is_empty()
                && c.starts_with(|ch: char| ch.is_ascii_lowercase() || ch.is_ascii_digit())
                && c.ends_with(|ch: char| ch.is_ascii_lowercase() || ch.is_ascii_digit())
                && c.chars().all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || matches!(ch, '.' | '_' | '-'))
        };
        if repository.len() > 255 || !repository.split('/').all(component_ok) {
            return Err(format!("`{}` is not a repository name: {expected}", repository.escape_debug()));
        }
        Ok(Reference { registry: registry.into(), repository: repository.into(), digest: digest.into() })
    }
}

/// A repository without a tag or digest (`registry.example.com/fleet/windows-bundle`): where a controller expects
/// the rendered bundle to be published (`--pull-from`). Returned as written when it reads as one.
pub fn parse_repository(text: &str) -> Result<String, String> {
    let probe = format!("{text}@sha256:{}", "0".repeat(64));
    Reference::parse(&probe).map(|r| format!("{}/{}", r.registry, r.repository)).map_err(|_| {
        format!(
            "`{}` is not a repository: expected registry/repository, as given to `wmrender publish --to` without \
             its tag, e.g. registry.example.com/fleet/windows-bundle",
            text.escape_debug()
        )
    })
}

impl std::fmt::Display for Reference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}@{}", self.registry, self.repository, self.digest)
    }
}

/// `sha256:` and 64 lowercase hex digits.
pub fn is_digest(text: &str) -> bool {
    text.strip_prefix("sha256:")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

/// One file of a fetched bundle manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layer {
    pub path: NodePath,
    /// `sha256:<hex>`.
    pub digest: String,
    pub size: u64,
}

/// An OCI descriptor: what a manifest says of a blob.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub media_type: String,
    pub digest: String,
    pub size: u64,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// An OCI image manifest as wmrender writes one (the bundle, the payload, a signature image): compact JSON, fields
/// in a fixed order, no time, no version.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub schema_version: u8,
    pub media_type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<&'static str>,
    pub config: Descriptor,
    pub layers: Vec<Descriptor>,
    /// What this manifest refers to (OCI 1.1): set on a signature stored as a referrer of the bundle.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<Descriptor>,
}

impl Manifest {
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a manifest of strings and numbers serializes")
    }
}

/// OCI 1.1's empty config: `{}`.
pub const EMPTY: &[u8] = b"{}";

/// One file of an artifact: its path under `node/` (`C/k/kubelet.conf`, or in the payload directory), its sha256
/// (hex) and size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub path: String,
    pub sha256: String,
    pub size: u64,
}

/// The manifest of an artifact of `kind` holding `entries` (in any order): the bytes `wmrender publish` pushes and
/// whose digest names the artifact. Same files, same bytes.
pub fn manifest(kind: Kind, entries: &[Entry]) -> Vec<u8> {
    let mut entries: Vec<&Entry> = entries.iter().collect();
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    let config = Descriptor {
        media_type: EMPTY_MEDIA_TYPE.into(),
        digest: format!("sha256:{}", crate::sha256_hex(EMPTY)),
        size: EMPTY.len() as u64,
        annotations: BTreeMap::new(),
    };
    let layers = entries
        .iter()
        .map(|e| Descriptor {
            media_type: kind.file_media_type().into(),
            digest: format!("sha256:{}", e.sha256),
            size: e.size,
            annotations: [(TITLE.to_string(), e.path.clone())].into(),
        })
        .collect();
    Manifest {
        schema_version: 2,
        media_type: MANIFEST_MEDIA_TYPE,
        artifact_type: Some(kind.artifact_type()),
        config,
        layers,
        subject: None,
    }
    .to_bytes()
}

/// A manifest as fetched: only what a node checks.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Fetched {
    media_type: Option<String>,
    artifact_type: Option<String>,
    layers: Vec<Descriptor>,
}

/// Reads a manifest fetched for a node bundle: its files, each a node path below `C:\k` named once, with a sha256
/// and a size under [`BUNDLE_FILE_MAX`]. Anything else is refused with what was wrong.
pub fn read_manifest(bytes: &[u8], kind: Kind) -> Result<Vec<Layer>, String> {
    let (files, list) = read_layers(bytes, kind)?;
    match list {
        Some(_) => {
            Err(format!("the manifest has a layer titled {}: a bundle has no such file", crate::payload::PAYLOAD_LIST))
        }
        None => Ok(files),
    }
}

/// A fetched payload manifest: its programs and its list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PayloadLayers {
    pub files: Vec<Layer>,
    /// The `payload.json` layer.
    pub list: Blob,
}

/// A blob a manifest names: its digest (`sha256:<hex>`) and size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blob {
    pub digest: String,
    pub size: u64,
}

/// Reads a manifest fetched for a payload (`publish --payload`): its programs, each a node path below `C:\k` named
/// once, with a sha256 and a size under [`PAYLOAD_FILE_MAX`], and its `payload.json` (under [`PAYLOAD_LIST_MAX`]),
/// which a payload must have.
pub fn read_payload_manifest(bytes: &[u8]) -> Result<PayloadLayers, String> {
    let (files, list) = read_layers(bytes, Kind::Payload)?;
    let list = list.ok_or_else(|| format!("the payload has no {} layer", crate::payload::PAYLOAD_LIST))?;
    let total: u64 = files.iter().map(|f| f.size).sum();
    if total > PAYLOAD_TOTAL_MAX {
        return Err(format!("its programs add up to {total} bytes, over the {PAYLOAD_TOTAL_MAX} a payload may have"));
    }
    Ok(PayloadLayers { files, list })
}

/// The layers of a manifest of `kind`, and (for a payload) the one titled `payload.json`.
fn read_layers(bytes: &[u8], kind: Kind) -> Result<(Vec<Layer>, Option<Blob>), String> {
    let m: Fetched =
        serde_json::from_slice(bytes).map_err(|e| format!("the manifest is not an OCI image manifest: {e}"))?;
    if m.media_type.as_deref().is_some_and(|t| t != MANIFEST_MEDIA_TYPE) {
        return Err(format!("the manifest's mediaType is not {MANIFEST_MEDIA_TYPE}"));
    }
    if m.artifact_type.as_deref() != Some(kind.artifact_type()) {
        return Err(format!(
            "the artifact's type is {}, not {}: the reference names something other than a wmrender {}",
            m.artifact_type.as_deref().unwrap_or("(none)"),
            kind.artifact_type(),
            match kind {
                Kind::NodeBundle => "node bundle",
                Kind::Payload => "payload",
            }
        ));
    }
    let max = match kind {
        Kind::NodeBundle => BUNDLE_FILE_MAX,
        Kind::Payload => PAYLOAD_FILE_MAX,
    };
    let mut seen = BTreeSet::new();
    let mut layers = Vec::new();
    let mut list = None;
    for (i, d) in m.layers.into_iter().enumerate() {
        let n = i + 1;
        if d.media_type != kind.file_media_type() {
            return Err(format!("layer {n} is a {}, not a {}", d.media_type, kind.file_media_type()));
        }
        if !is_digest(&d.digest) {
            return Err(format!("layer {n}'s digest is not a sha256 digest"));
        }
        let title = d.annotations.get(TITLE).ok_or_else(|| format!("layer {n} has no {TITLE}"))?;
        if kind == Kind::Payload && title == crate::payload::PAYLOAD_LIST {
            if d.size > PAYLOAD_LIST_MAX {
                return Err(format!(
                    "layer {n} ({title}) is {} bytes, over the {PAYLOAD_LIST_MAX} it may have",
                    d.size
                ));
            }
            if list.replace(Blob { digest: d.digest, size: d.size }).is_some() {
                return Err(format!("layer {n} is a second {title}"));
            }
            continue;
        }
        if d.size > max {
            return Err(format!("layer {n} is {} bytes, over the {max} a file of it may have", d.size));
        }
        let path = NodePath::from_bundle_path(&format!("node/{title}"))
            .and_then(|p| NodePath::parse_delivered(p.as_str()).ok())
            .ok_or_else(|| format!("layer {n}'s title `{}` is not a path below C:\\k", title.escape_debug()))?;
        if !seen.insert(path.as_str().to_ascii_lowercase()) {
            return Err(format!("layer {n} names {path} a second time"));
        }
        layers.push(Layer { path, digest: d.digest, size: d.size });
    }
    Ok((layers, list))
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn references_by_digest_are_read_and_anything_else_is_refused() {
        let r = Reference::parse(&format!("127.0.0.1:5000/fleet/windows-bundle@{D}")).unwrap();
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str(), r.digest.as_str()),
            ("127.0.0.1:5000", "fleet/windows-bundle", D)
        );
        assert_eq!(r.to_string(), format!("127.0.0.1:5000/fleet/windows-bundle@{D}"));
        for bad in [
            "registry.example.com/fleet/b:main".to_string(),
            format!("fleet/b@{D}"),
            format!("registry.example.com/Fleet/b@{D}"),
            format!("registry.example.com/fleet/../b@{D}"),
            "registry.example.com/fleet/b@sha256:ABC".to_string(),
            format!("reg istry.example.com/b@{D}"),
        ] {
            assert!(Reference::parse(&bad).is_err(), "{bad}");
        }
    }

    fn manifest(layers: &str) -> Vec<u8> {
        format!(
            r#"{{"schemaVersion":2,"mediaType":"{MANIFEST_MEDIA_TYPE}","artifactType":"application/vnd.wmrender.node-bundle.v1","config":{{"mediaType":"{EMPTY_MEDIA_TYPE}","digest":"{D}","size":2}},"layers":[{layers}]}}"#
        )
        .into_bytes()
    }

    fn layer(title: &str) -> String {
        format!(
            r#"{{"mediaType":"application/vnd.wmrender.node-bundle.file.v1","digest":"{D}","size":3,"annotations":{{"{TITLE}":"{title}"}}}}"#
        )
    }

    #[test]
    fn a_bundle_manifest_gives_node_paths_and_refuses_what_could_reach_outside() {
        let layers = read_manifest(
            &manifest(&[layer("C/k/kubelet.conf"), layer("C/k/wmrender/node.json")].join(",")),
            Kind::NodeBundle,
        )
        .unwrap();
        assert_eq!(layers[0], Layer { path: NodePath::known(r"C:\k\kubelet.conf"), digest: D.into(), size: 3 });
        assert_eq!(layers[1].path, NodePath::known(r"C:\k\wmrender\node.json"));
        for (bad, why) in [
            (manifest(&layer("C/k/../../Windows/win.ini")), "not a path below"),
            (manifest(&layer("C/Windows/win.ini")), "not a path below"),
            (manifest(&[layer("C/k/a"), layer("C/k/A")].join(",")), "second time"),
            (
                manifest(&layer("C/k/a").replace("node-bundle.file", "payload.file")),
                "not a application/vnd.wmrender.node-bundle.file.v1",
            ),
            (manifest(&layer("C/k/a").replace(D, "sha256:00")), "not a sha256"),
            (manifest(&layer("C/k/a").replace("\"size\":3", "\"size\":99999999999")), "over the"),
            (
                manifest(&layer("C/k/a")).replace_with("node-bundle.v1", "payload.v1"),
                "not application/vnd.wmrender.node-bundle.v1",
            ),
            (b"{}".to_vec(), "not an OCI image manifest"),
        ] {
            let e = read_manifest(&bad, Kind::NodeBundle).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
    }

    #[test]
    fn a_payload_manifest_gives_its_programs_and_its_list_and_a_bundle_has_no_list() {
        let entry = |path: &str, size: u64| Entry { path: path.into(), sha256: D[7..].into(), size };
        let programs = [entry("C/k/kubelet.exe", 120 << 20), entry("payload.json", 400)];
        let read = read_payload_manifest(&super::manifest(Kind::Payload, &programs)).unwrap();
        assert_eq!(read.files.len(), 1);
        assert_eq!(read.files[0].path.as_str(), r"C:\k\kubelet.exe");
        assert_eq!(read.list, Blob { digest: D.to_string(), size: 400 });
        // A program may be larger than a bundle file; never past the payload's bound.
        let huge = [entry("C/k/kubelet.exe", PAYLOAD_FILE_MAX + 1), entry("payload.json", 400)];
        assert!(read_payload_manifest(&super::manifest(Kind::Payload, &huge)).unwrap_err().contains("over the"));
        let many: Vec<Entry> = (0..5)
            .map(|i| entry(&format!("C/k/p{i}.exe"), PAYLOAD_FILE_MAX))
            .chain([entry("payload.json", 400)])
            .collect();
        assert!(read_payload_manifest(&super::manifest(Kind::Payload, &many)).unwrap_err().contains("add up to"));
        let no_list = [entry("C/k/kubelet.exe", 1)];
        assert!(
            read_payload_manifest(&super::manifest(Kind::Payload, &no_list)).unwrap_err().contains("no payload.json")
        );
        let big_list = [entry("payload.json", PAYLOAD_LIST_MAX + 1)];
        assert!(read_payload_manifest(&super::manifest(Kind::Payload, &big_list)).unwrap_err().contains("over the"));
        let bundle = super::manifest(Kind::NodeBundle, &[entry("C/k/kubelet.conf", 3)]);
        assert!(read_payload_manifest(&bundle).unwrap_err().contains("other than a wmrender payload"));
        let a_list_in_a_bundle = super::manifest(Kind::NodeBundle, &[entry("payload.json", 3)]);
        let e = read_manifest(&a_list_in_a_bundle, Kind::NodeBundle).unwrap_err();
        assert!(e.contains("`payload.json` is not a path below"), "{e}");
        // A payload read as a bundle of its kind: its list is no file of it.
        let e = read_manifest(&super::manifest(Kind::Payload, &programs), Kind::Payload).unwrap_err();
        assert!(e.contains("a bundle has no such file"), "{e}");
    }

    trait ReplaceWith {
        fn replace_with(self, from: &str, to: &str) -> Vec<u8>;
    }

    impl ReplaceWith for Vec<u8> {
        fn replace_with(self, from: &str, to: &str) -> Vec<u8> {
            String::from_utf8(self).unwrap().replacen(from, to, 1).into_bytes()
        }
    }
}
