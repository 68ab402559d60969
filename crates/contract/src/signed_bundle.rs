//! A published bundle's signatures, as `wmrender publish` writes them and a node judges them: cosign's "simple
//! signing" (the payload names the repository and the manifest digest; an ECDSA P-256 / SHA-256 signature of the
//! payload's bytes rides as an annotation of the payload's layer, in an image under the tag `sha256-<hex>.sig`, and
//! where the registry has the OCI 1.1 referrers API also as a referrer of the bundle, as cosign's
//! `--registry-referrers-mode=oci-1-1` stores it), with the bundle version in the payload's `optional` part. What
//! `cosign sign --key … -a dev.wmrender.bundle-version=N` signs is accepted the same way, in either place.
//!
//! Everything here is read from a registry: untrusted. A bundle is accepted only when a signature that a trusted key
//! verifies names exactly its digest, carries a version, and that version is not older than the one the node
//! applied — unless that very signature says it is a downgrade (TUF's rollback protection, in its simplest form).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;
use std::collections::BTreeMap;

pub const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
pub const SIGNATURE_TYPE: &str = "cosign container image signature";
/// In the payload's `optional`: the bundle version, a decimal string (cosign's `-a key=value` form).
pub const BUNDLE_VERSION: &str = "dev.wmrender.bundle-version";
/// In the payload's `optional`: `"true"` when the publisher signed this bundle as a downgrade.
pub const DOWNGRADE: &str = "dev.wmrender.downgrade";

/// The tag cosign stores a manifest's signatures under: `sha256:<hex>` → `sha256-<hex>.sig`.
pub fn tag_for(manifest_digest: &str) -> String {
    format!("{}.sig", manifest_digest.replace(':', "-"))
}

/// The artifact type of a signature image stored as an OCI 1.1 referrer of what it signs (cosign's
/// `--registry-referrers-mode=oci-1-1`: the manifest's `artifactType` and its config's media type).
pub const REFERRER_ARTIFACT_TYPE: &str = "application/vnd.dev.cosign.artifact.sig.v1+json";

/// The tag of the distribution spec's referrers tag schema, where a registry without the referrers API keeps a
/// manifest's referrers (an image index that the clients writing them update): `sha256:<hex>` → `sha256-<hex>`.
pub fn referrers_tag_for(manifest_digest: &str) -> String {
    manifest_digest.replace(':', "-")
}

/// The signature images an OCI referrers index lists (from the referrers API or its tag schema): the digests of the
/// image manifests of [`REFERRER_ARTIFACT_TYPE`], each once, at most [`SIGNATURES_MAX`]. Read from a registry: an
/// entry without a sha256 digest is left out.
pub fn signature_referrers(index: &[u8]) -> Vec<String> {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(index) else { return Vec::new() };
    let mut digests: Vec<String> = Vec::new();
    let listed = value["manifests"].as_array().into_iter().flatten();
    for m in listed.filter(|m| {
        m["artifactType"] == REFERRER_ARTIFACT_TYPE && m["mediaType"] == crate::bundle_artifact::MANIFEST_MEDIA_TYPE
    }) {
        if let Some(d) = m["digest"].as_str().filter(|d| crate::bundle_artifact::is_digest(d))
            && !digests.iter().any(|seen| seen == d)
        {
            digests.push(d.to_string());
        }
    }
    digests.truncate(SIGNATURES_MAX);
    digests
}

/// What a signature vouches for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    /// `registry/repository`, as cosign writes `docker-reference`.
    pub repository: String,
    pub manifest_digest: String,
    pub version: u64,
    pub downgrade: bool,
}

impl Claim {
    /// The simple-signing payload (compact JSON, keys in a fixed order).
    pub fn payload(&self) -> Vec<u8> {
        let mut optional = serde_json::Map::new();
        optional.insert(BUNDLE_VERSION.into(), self.version.to_string().into());
        if self.downgrade {
            optional.insert(DOWNGRADE.into(), "true".into());
        }
        let value = serde_json::json!({
            "critical": {
                "identity": {"docker-reference": self.repository},
                "image": {"docker-manifest-digest": self.manifest_digest},
                "type": SIGNATURE_TYPE,
            },
            "optional": optional,
        });
        serde_json::to_vec(&value).expect("JSON of strings serializes")
    }
}

/// DER of a P-256 SubjectPublicKeyInfo up to its 65-byte uncompressed point (id-ecPublicKey, prime256v1).
pub const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce,
    0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// A trusted ECDSA P-256 public key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublicKey {
    /// The uncompressed point (65 bytes).
    point: Vec<u8>,
    /// `sha256:<hex>` of the SubjectPublicKeyInfo (DER): which key, safe to print.
    pub id: String,
}

impl PublicKey {
    /// From the 65-byte uncompressed point.
    pub fn from_point(point: &[u8]) -> Option<PublicKey> {
        (point.len() == 65 && point[0] == 4).then(|| {
            let mut spki = P256_SPKI_PREFIX.to_vec();
            spki.extend_from_slice(point);
            PublicKey { point: point.to_vec(), id: format!("sha256:{}", crate::sha256_hex(&spki)) }
        })
    }

    /// Every `PUBLIC KEY` block of a PEM text (one file may hold the old and the new key of a rotation). A block
    /// that is not a P-256 key is an error naming it; a text without any block is an error.
    pub fn parse_pem(text: &str) -> Result<Vec<PublicKey>, String> {
        use rustls_pki_types::SubjectPublicKeyInfoDer;
        use rustls_pki_types::pem::PemObject;
        let mut keys = Vec::new();
        for (i, der) in SubjectPublicKeyInfoDer::pem_slice_iter(text.as_bytes()).enumerate() {
            let n = i + 1;
            let der = der.map_err(|_| format!("public key {n}: not a PEM block that reads (base64, an END line)"))?;
            let point = der
                .as_ref()
                .strip_prefix(&P256_SPKI_PREFIX[..])
                .ok_or_else(|| format!("public key {n}: not an ECDSA P-256 key (cosign's keys are P-256)"))?;
            keys.push(PublicKey::from_point(point).ok_or_else(|| format!("public key {n}: not a P-256 point"))?);
        }
        if keys.is_empty() {
            return Err("no -----BEGIN PUBLIC KEY----- block".into());
        }
        Ok(keys)
    }

    /// The uncompressed point (65 bytes).
    pub fn point(&self) -> &[u8] {
        &self.point
    }

    /// Whether `signature` (base64 of ASN.1 DER) is this key's signature of `payload`.
    pub fn verifies(&self, payload: &[u8], signature: &str) -> bool {
        let Ok(sig) = STANDARD.decode(signature.trim()) else { return false };
        ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_ASN1, &self.point)
            .verify(payload, &sig)
            .is_ok()
    }
}

/// One signature as stored: the payload's bytes (fetched by the digest its layer names, and checked against it by
/// whoever fetched it) and the annotation's value.
#[derive(Clone, Debug)]
pub struct Signature {
    pub payload: Vec<u8>,
    pub signature: String,
}

/// One signature layer of a signature image: the payload's blob, and the signature that rides on its descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layer {
    pub payload_digest: String,
    pub payload_size: u64,
    pub signature: String,
}

/// The largest signature payload a node fetches (cosign's are a few hundred bytes).
pub const PAYLOAD_MAX: u64 = 64 << 10;
/// The most signatures of one digest a node looks at (one per key and re-signing; a registry could list more).
pub const SIGNATURES_MAX: usize = 64;

/// The signature layers of a stored signature image (a manifest cosign or wmrender wrote); those of another kind
/// are left out. Read from a registry: a layer without a sha256 digest is left out too.
pub fn stored_layers(manifest: &[u8]) -> Vec<Layer> {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(manifest) else { return Vec::new() };
    value["layers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|l| l["mediaType"] == SIMPLE_SIGNING_MEDIA_TYPE)
        .filter_map(|l| {
            Some(Layer {
                payload_digest: l["digest"].as_str().filter(|d| crate::bundle_artifact::is_digest(d))?.to_string(),
                payload_size: l["size"].as_u64()?,
                signature: l["annotations"][SIGNATURE_ANNOTATION].as_str()?.to_string(),
            })
        })
        .collect()
}

/// What a node accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Accepted {
    pub version: u64,
    pub downgrade: bool,
    /// The key that verified it.
    pub key: String,
}

/// Why a node refuses a bundle; each says what to do in its message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "the bundle is not signed (no signature under its sha256-<hex>.sig tag or among its OCI referrers): sign it with `wmrender publish --sign-key`"
    )]
    Unsigned,
    #[error(
        "no trusted key verifies any of its {0} signature(s): sign it with a key the node trusts, or deliver the new public key first"
    )]
    Untrusted(usize),
    #[error("its signature names another digest ({0}): the signature was made for another bundle")]
    OtherDigest(String),
    #[error("its signature carries no bundle version ({BUNDLE_VERSION}): publish it with --bundle-version")]
    NoVersion,
    #[error(
        "version {offered} is older than version {applied}, which this node applied: a rollback must be signed as one (`wmrender publish --downgrade`)"
    )]
    Older { offered: u64, applied: u64 },
}

#[derive(Deserialize)]
struct Payload {
    critical: Critical,
    #[serde(default)]
    optional: Option<BTreeMap<String, serde_json::Value>>,
}

#[derive(Deserialize)]
struct Critical {
    image: Image,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Deserialize)]
struct Image {
    #[serde(rename = "docker-manifest-digest")]
    digest: String,
}

/// Judges a bundle by its signatures: accepted when a trusted key verifies a signature that names `digest` and
/// carries a version not older than `applied` (or is a signed downgrade). Of several such signatures, the highest
/// version counts.
pub fn judge(
    digest: &str,
    signatures: &[Signature],
    keys: &[PublicKey],
    applied: Option<u64>,
) -> Result<Accepted, Refusal> {
    if signatures.is_empty() {
        return Err(Refusal::Unsigned);
    }
    let mut verified: Vec<Accepted> = Vec::new();
    let mut other_digest = None;
    let mut unversioned = false;
    for s in signatures {
        let Some(key) = keys.iter().find(|k| k.verifies(&s.payload, &s.signature)) else { continue };
        // Verified, and only now parsed: the bytes are the signer's.
        let Ok(p) = serde_json::from_slice::<Payload>(&s.payload) else { continue };
        if p.critical.kind != SIGNATURE_TYPE {
            continue;
        }
        if p.critical.image.digest != digest {
            other_digest = Some(p.critical.image.digest);
            continue;
        }
        let optional = p.optional.unwrap_or_default();
        let Some(version) = optional.get(BUNDLE_VERSION).and_then(|v| v.as_str()).and_then(|v| v.parse::<u64>().ok())
        else {
            unversioned = true;
            continue;
        };
        let downgrade = optional.get(DOWNGRADE).and_then(|v| v.as_str()) == Some("true");
        verified.push(Accepted { version, downgrade, key: key.id.clone() });
    }
    // The newest signature that the rollback rule lets through: a bundle signed once as version 2 and again as a
    // downgrade to 2 is taken on a node at version 5 by the second.
    let allowed = |a: &Accepted| applied.is_none_or(|applied| a.version >= applied || a.downgrade);
    let newest = |list: &mut dyn Iterator<Item = &Accepted>| list.max_by_key(|a| (a.version, !a.downgrade)).cloned();
    if let Some(accepted) = newest(&mut verified.iter().filter(|a| allowed(a))) {
        return Ok(accepted);
    }
    match (newest(&mut verified.iter()), applied) {
        (Some(a), Some(applied)) => Err(Refusal::Older { offered: a.version, applied }),
        _ => Err(match (other_digest, unversioned) {
            (_, true) => Refusal::NoVersion,
            (Some(d), false) => Refusal::OtherDigest(d),
            (None, false) => Refusal::Untrusted(signatures.len()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::rand::SystemRandom;
    use ring::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair};

    struct Signer(EcdsaKeyPair);

    impl Signer {
        fn new() -> Signer {
            let rng = SystemRandom::new();
            let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).unwrap();
            Signer(EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref(), &rng).unwrap())
        }
        fn key(&self) -> PublicKey {
            PublicKey::from_point(self.0.public_key().as_ref()).unwrap()
        }
        fn sign(&self, claim: &Claim) -> Signature {
            let payload = claim.payload();
            let sig = self.0.sign(&SystemRandom::new(), &payload).unwrap();
            Signature { payload, signature: STANDARD.encode(sig.as_ref()) }
        }
    }

    fn claim(digest: &str, version: u64, downgrade: bool) -> Claim {
        Claim { repository: "r.example/fleet/b".into(), manifest_digest: digest.into(), version, downgrade }
    }

    #[test]
    fn a_trusted_signature_of_this_digest_with_a_version_not_older_is_accepted_and_nothing_else() {
        let (d, other) = (format!("sha256:{}", "a".repeat(64)), format!("sha256:{}", "b".repeat(64)));
        let (ci, stranger) = (Signer::new(), Signer::new());
        let keys = [ci.key()];
        let ok = judge(&d, &[ci.sign(&claim(&d, 5, false))], &keys, Some(5)).unwrap();
        assert_eq!(ok, Accepted { version: 5, downgrade: false, key: ci.key().id });
        assert_eq!(judge(&d, &[], &keys, None), Err(Refusal::Unsigned));
        assert_eq!(judge(&d, &[stranger.sign(&claim(&d, 5, false))], &keys, None), Err(Refusal::Untrusted(1)));
        assert_eq!(judge(&d, &[ci.sign(&claim(&other, 5, false))], &keys, None), Err(Refusal::OtherDigest(other)));
        assert_eq!(
            judge(&d, &[ci.sign(&claim(&d, 4, false))], &keys, Some(5)),
            Err(Refusal::Older { offered: 4, applied: 5 })
        );
        // A downgrade signed as one is accepted; the highest verified version counts.
        assert!(judge(&d, &[ci.sign(&claim(&d, 4, true))], &keys, Some(5)).unwrap().downgrade);
        // Signed as version 4 once, and again as a downgrade to 4: the downgrade lets it through.
        let twice = [ci.sign(&claim(&d, 4, false)), ci.sign(&claim(&d, 4, true))];
        assert!(judge(&d, &twice, &keys, Some(5)).unwrap().downgrade);
        assert!(!judge(&d, &twice, &keys, Some(4)).unwrap().downgrade, "not a downgrade where none is needed");
        let two = [stranger.sign(&claim(&d, 9, false)), ci.sign(&claim(&d, 6, false)), ci.sign(&claim(&d, 7, false))];
        assert_eq!(judge(&d, &two, &keys, Some(6)).unwrap().version, 7);
        // A payload changed after signing verifies with no key.
        let mut tampered = ci.sign(&claim(&d, 5, false));
        tampered.payload = claim(&d, 50, false).payload();
        assert_eq!(judge(&d, &[tampered], &keys, None), Err(Refusal::Untrusted(1)));
        // A payload without a version (cosign sign with no -a) is refused for that.
        let mut bare = serde_json::from_slice::<serde_json::Value>(&claim(&d, 1, false).payload()).unwrap();
        bare["optional"] = serde_json::Value::Null;
        let payload = serde_json::to_vec(&bare).unwrap();
        let sig = STANDARD.encode(ci.0.sign(&SystemRandom::new(), &payload).unwrap().as_ref());
        assert_eq!(judge(&d, &[Signature { payload, signature: sig }], &keys, None), Err(Refusal::NoVersion));
    }

    #[test]
    fn an_index_lists_the_signature_images_among_other_referrers() {
        let d = |c: &str| format!("sha256:{}", c.repeat(64));
        let entry = |digest: &str, media: &str, artifact: &str| serde_json::json!({"mediaType": media, "digest": digest, "size": 700, "artifactType": artifact});
        let manifest = crate::bundle_artifact::MANIFEST_MEDIA_TYPE;
        let index = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [
                entry(&d("a"), manifest, REFERRER_ARTIFACT_TYPE),
                entry(&d("b"), manifest, "application/spdx+json"),
                entry("sha256:short", manifest, REFERRER_ARTIFACT_TYPE),
                entry(&d("c"), "application/vnd.oci.image.index.v1+json", REFERRER_ARTIFACT_TYPE),
                entry(&d("e"), manifest, REFERRER_ARTIFACT_TYPE),
                entry(&d("a"), manifest, REFERRER_ARTIFACT_TYPE),
            ],
        });
        assert_eq!(signature_referrers(index.to_string().as_bytes()), [d("a"), d("e")]);
        assert!(signature_referrers(b"<html>").is_empty());
        let many: Vec<_> =
            (0..100).map(|i| entry(&format!("sha256:{i:064x}"), manifest, REFERRER_ARTIFACT_TYPE)).collect();
        let many = serde_json::json!({"manifests": many}).to_string();
        assert_eq!(signature_referrers(many.as_bytes()).len(), SIGNATURES_MAX);
        assert_eq!(referrers_tag_for(&d("a")), format!("sha256-{}", "a".repeat(64)));
    }

    #[test]
    fn public_keys_parse_from_pem_one_or_more_and_only_p256() {
        let a = Signer::new().key();
        let pem = |k: &PublicKey| {
            let mut der = P256_SPKI_PREFIX.to_vec();
            der.extend_from_slice(&k.point);
            format!("-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n", STANDARD.encode(der))
        };
        let b = Signer::new().key();
        assert_eq!(PublicKey::parse_pem(&format!("{}{}", pem(&a), pem(&b))).unwrap(), [a.clone(), b]);
        assert!(PublicKey::parse_pem("nothing").unwrap_err().contains("no -----BEGIN PUBLIC KEY-----"));
        let rsa = "-----BEGIN PUBLIC KEY-----\nMA0GCSqGSIb3DQEBAQUAA4IBDwAwggEKAoIBAQ==\n-----END PUBLIC KEY-----\n";
        assert!(PublicKey::parse_pem(rsa).unwrap_err().contains("not an ECDSA P-256 key"));
    }
}
