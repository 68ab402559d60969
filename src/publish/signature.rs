//! A cosign signature of a published bundle, in the form `cosign verify --key` accepts (sigstore's "simple
//! signing"): the payload names the repository and the manifest digest; an ECDSA P-256 / SHA-256 signature of the
//! payload's bytes rides as the `dev.cosignproject.cosign/signature` annotation of the payload's layer; the layers
//! sit in an OCI image stored under the tag `sha256-<hex>.sig` beside the bundle, where cosign looks for them on a
//! registry without the referrers API. A bundle signed again (another key, a rotation) gains a layer; the layers
//! already there are kept, as cosign keeps them.
//!
//! The payload's `optional` part carries the bundle version (a number that only grows, so a node can refuse an older
//! bundle than the one it applied) and, when the publisher says so, that this bundle is a signed downgrade.

use super::artifact::{Blob, Descriptor, MANIFEST_MEDIA_TYPE, Manifest, descriptor};
use super::error::PublishError;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair};
use std::path::Path;
use wmrender_contract::signed_bundle::{
    PublicKey, REFERRER_ARTIFACT_TYPE, SIGNATURE_ANNOTATION, SIMPLE_SIGNING_MEDIA_TYPE,
};

const CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";

/// An ECDSA P-256 private key to sign with.
pub struct SigningKey {
    pair: EcdsaKeyPair,
    /// `sha256:<hex>` of the public key's SubjectPublicKeyInfo (DER): which key signed, safe to print.
    pub id: String,
}

impl SigningKey {
    /// Reads an ECDSA P-256 private key: a PEM `PRIVATE KEY` (PKCS#8), as `openssl genpkey -algorithm EC -pkeyopt
    /// ec_paramgen_curve:P-256` writes it, or a key `cosign generate-key-pair` wrote (encrypted; its password from
    /// `COSIGN_PASSWORD`, as cosign reads it).
    pub fn load(path: &Path) -> Result<SigningKey, PublishError> {
        let refuse = |why: String| PublishError::Key { file: path.to_path_buf(), why };
        let bytes = std::fs::read(path).map_err(|source| PublishError::Read { file: path.to_path_buf(), source })?;
        let text = String::from_utf8(bytes).map_err(|_| refuse("not a PEM file (it is not text)".into()))?;
        let der = if let Some(sealed) = COSIGN_LABELS.iter().find_map(|label| pem_block(&text, label)) {
            let password = std::env::var("COSIGN_PASSWORD").map_err(|_| {
                refuse("a cosign key, which is encrypted: set COSIGN_PASSWORD to its password, as for cosign".into())
            })?;
            cosign_key::open(&sealed, password.as_bytes()).map_err(refuse)?
        } else if text.contains("-----BEGIN EC PRIVATE KEY-----") {
            return Err(refuse(
                "an EC PRIVATE KEY (SEC 1) block: convert it to PKCS#8 with `openssl pkcs8 -topk8 -nocrypt -in KEY \
                 -out KEY.pk8.pem`"
                    .into(),
            ));
        } else if text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") {
            return Err(refuse(
                "an encrypted PKCS#8 key: give it unencrypted (kept in your CI's secret store), or as a cosign key \
                 (`cosign import-key-pair --key KEY` makes one, encrypted with COSIGN_PASSWORD)"
                    .into(),
            ));
        } else {
            use rustls_pki_types::PrivatePkcs8KeyDer;
            use rustls_pki_types::pem::PemObject;
            let key = PrivatePkcs8KeyDer::from_pem_slice(text.as_bytes()).map_err(|_| {
                refuse(
                    "no -----BEGIN PRIVATE KEY----- block: expected an ECDSA P-256 key in PKCS#8 PEM, or a cosign key"
                        .into(),
                )
            })?;
            key.secret_pkcs8_der().to_vec()
        };
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &der, &SystemRandom::new()).map_err(|_| {
                refuse("not an ECDSA P-256 key (cosign's keys are P-256; RSA and other curves are not)".into())
            })?;
        let id = PublicKey::from_point(pair.public_key().as_ref())
            .map(|k| k.id)
            .ok_or_else(|| refuse("not an ECDSA P-256 key".into()))?;
        Ok(SigningKey { id, pair })
    }

    /// The public half, as a node holds it.
    pub fn public(&self) -> PublicKey {
        PublicKey::from_point(self.pair.public_key().as_ref())
            .expect("ring's P-256 public key is an uncompressed point")
    }

    /// The signature of `payload` (ASN.1 DER, as cosign writes it), base64.
    pub fn sign(&self, payload: &[u8]) -> Result<String, PublishError> {
        let sig = self
            .pair
            .sign(&SystemRandom::new(), payload)
            .map_err(|_| PublishError::Sign("the system's random number generator failed".into()))?;
        Ok(STANDARD.encode(sig.as_ref()))
    }
}

/// The PEM labels of cosign's encrypted keys: sigstore's (cosign 2), and cosign 1's.
const COSIGN_LABELS: [&str; 2] = ["ENCRYPTED SIGSTORE PRIVATE KEY", "ENCRYPTED COSIGN PRIVATE KEY"];

/// cosign's encrypted private key (sigstore's `encrypted` format, from secure-systems-lab): JSON naming a scrypt
/// key derivation and a NaCl secretbox, whose plaintext is the PKCS#8 DER of the key.
mod cosign_key {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use crypto_secretbox::aead::{Aead, KeyInit};
    use crypto_secretbox::{Nonce, XSalsa20Poly1305};
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct Sealed {
        kdf: Kdf,
        cipher: Cipher,
        ciphertext: String,
    }

    #[derive(Deserialize)]
    struct Kdf {
        name: String,
        params: ScryptParams,
        salt: String,
    }

    #[derive(Deserialize)]
    #[allow(non_snake_case)] // the format's own names
    struct ScryptParams {
        N: u64,
        r: u32,
        p: u32,
    }

    #[derive(Deserialize)]
    struct Cipher {
        name: String,
        nonce: String,
    }

    /// The PKCS#8 DER inside, or why not (in words for the user).
    pub fn open(sealed: &[u8], password: &[u8]) -> Result<Vec<u8>, String> {
        let sealed: Sealed = serde_json::from_slice(sealed)
            .map_err(|_| "a cosign key whose contents are not cosign's JSON".to_string())?;
        if sealed.kdf.name != "scrypt" || sealed.cipher.name != "nacl/secretbox" {
            return Err(format!(
                "a cosign key sealed with {} and {}; wmrender reads scrypt and nacl/secretbox, as cosign writes",
                sealed.kdf.name, sealed.cipher.name
            ));
        }
        let ScryptParams { N: n, r, p } = sealed.kdf.params;
        // cosign writes N = 2^15 or 2^16 with r = 8, p = 1; a file asking for more than 2^20 × r 8 (1 GiB) is refused.
        if !n.is_power_of_two() || !(2..=1 << 20).contains(&n) || !(1..=8).contains(&r) || !(1..=16).contains(&p) {
            return Err(format!("a cosign key with scrypt parameters wmrender does not accept (N {n}, r {r}, p {p})"));
        }
        let decode =
            |what: &str, v: &str| STANDARD.decode(v).map_err(|_| format!("a cosign key whose {what} is not base64"));
        let (salt, nonce, ciphertext) = (
            decode("salt", &sealed.kdf.salt)?,
            decode("nonce", &sealed.cipher.nonce)?,
            decode("ciphertext", &sealed.ciphertext)?,
        );
        if nonce.len() != 24 {
            return Err("a cosign key whose nonce is not 24 bytes".into());
        }
        let params = scrypt::Params::new(n.trailing_zeros() as u8, r, p).map_err(|_| {
            format!("a cosign key with scrypt parameters wmrender does not accept (N {n}, r {r}, p {p})")
        })?;
        let mut key = [0u8; 32];
        scrypt::scrypt(password, &salt, &params, &mut key).map_err(|_| "scrypt refused the key length".to_string())?;
        XSalsa20Poly1305::new(&key.into())
            .decrypt(Nonce::from_slice(&nonce), ciphertext.as_slice())
            .map_err(|_| "cannot open this cosign key: a wrong COSIGN_PASSWORD, or the file is damaged".to_string())
    }
}

/// The body of the first PEM block of that label: for cosign's own labels, which rustls-pki-types' PEM reader
/// skips as unknown.
fn pem_block(text: &str, label: &str) -> Option<Vec<u8>> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let start = text.find(&begin)? + begin.len();
    let stop = start + text[start..].find(&end)?;
    let body: String = text[start..stop].chars().filter(|c| !c.is_whitespace()).collect();
    STANDARD.decode(body).ok()
}

pub use wmrender_contract::signed_bundle::{Layer, stored_layers};

/// The signature image of `layers` (the ones already stored first, then the new ones): its config blob and its
/// manifest's bytes.
pub fn image(layers: &[Layer]) -> (Blob, Vec<u8>) {
    let (config, manifest) = image_manifest(layers);
    (config, manifest.to_bytes())
}

/// The same signature image stored as an OCI 1.1 referrer of the bundle `subject`, in the form cosign's
/// `--registry-referrers-mode=oci-1-1` writes: the artifact type `application/vnd.dev.cosign.artifact.sig.v1+json`
/// as the manifest's `artifactType` and its config's media type (the config blob is the image's).
pub fn referrer(layers: &[Layer], subject: Descriptor) -> Vec<u8> {
    let (_, mut manifest) = image_manifest(layers);
    manifest.artifact_type = Some(REFERRER_ARTIFACT_TYPE);
    manifest.config.media_type = REFERRER_ARTIFACT_TYPE.into();
    manifest.subject = Some(subject);
    manifest.to_bytes()
}

fn image_manifest(layers: &[Layer]) -> (Blob, Manifest) {
    // The config go-containerregistry writes for cosign's image: one history entry and one diff ID per layer.
    let diff_ids: Vec<&str> = layers.iter().map(|l| l.payload_digest.as_str()).collect();
    let history: Vec<serde_json::Value> =
        layers.iter().map(|_| serde_json::json!({"created": "0001-01-01T00:00:00Z"})).collect();
    let config = serde_json::json!({
        "architecture": "",
        "created": "0001-01-01T00:00:00Z",
        "history": history,
        "os": "",
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
        "config": {},
    });
    let config = Blob::of(serde_json::to_vec(&config).expect("JSON of strings serializes"));
    let manifest = Manifest {
        schema_version: 2,
        media_type: MANIFEST_MEDIA_TYPE,
        artifact_type: None,
        config: descriptor(CONFIG_MEDIA_TYPE, &config),
        layers: layers
            .iter()
            .map(|l| Descriptor {
                media_type: SIMPLE_SIGNING_MEDIA_TYPE.into(),
                digest: l.payload_digest.clone(),
                size: l.payload_size,
                annotations: [(SIGNATURE_ANNOTATION.to_string(), l.signature.clone())].into(),
            })
            .collect(),
        subject: None,
    };
    (config, manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    use wmrender_contract::signed_bundle::{BUNDLE_VERSION, Claim, DOWNGRADE, tag_for};

    #[test]
    fn the_tag_and_the_payload_are_cosigns() {
        let d = format!("sha256:{}", "ab".repeat(32));
        assert_eq!(tag_for(&d), format!("sha256-{}.sig", "ab".repeat(32)));
        let claim = Claim {
            repository: "r.example:5000/fleet/bundle".into(),
            manifest_digest: d.clone(),
            version: 7,
            downgrade: false,
        };
        let p: serde_json::Value = serde_json::from_slice(&claim.payload()).unwrap();
        assert_eq!(p["critical"]["type"], "cosign container image signature");
        assert_eq!(p["critical"]["image"]["docker-manifest-digest"], d.as_str());
        assert_eq!(p["critical"]["identity"]["docker-reference"], "r.example:5000/fleet/bundle");
        assert_eq!(p["optional"], serde_json::json!({BUNDLE_VERSION: "7"}));
        let down: serde_json::Value = serde_json::from_slice(&Claim { downgrade: true, ..claim }.payload()).unwrap();
        assert_eq!(down["optional"][DOWNGRADE], "true");
    }

    #[test]
    fn stored_layers_are_kept_in_a_new_image() {
        let a =
            Layer { payload_digest: crate::publish::artifact::digest(b"p"), payload_size: 1, signature: "c2ln".into() };
        let (config, manifest) = image(std::slice::from_ref(&a));
        assert_eq!(stored_layers(&manifest), std::slice::from_ref(&a));
        let c: serde_json::Value = serde_json::from_slice(&config.bytes).unwrap();
        assert_eq!(c["rootfs"]["diff_ids"][0], a.payload_digest.as_str());
        assert!(stored_layers(b"not json").is_empty());
    }

    #[test]
    fn the_referrer_is_the_image_with_cosigns_artifact_type_and_the_bundle_as_subject() {
        let a =
            Layer { payload_digest: crate::publish::artifact::digest(b"p"), payload_size: 1, signature: "c2ln".into() };
        let (config, image) = image(std::slice::from_ref(&a));
        let bundle = Descriptor {
            media_type: MANIFEST_MEDIA_TYPE.into(),
            digest: crate::publish::artifact::digest(b"bundle"),
            size: 6,
            annotations: Default::default(),
        };
        let bytes = referrer(std::slice::from_ref(&a), bundle.clone());
        let r: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(r["artifactType"], REFERRER_ARTIFACT_TYPE);
        assert_eq!(r["config"]["mediaType"], REFERRER_ARTIFACT_TYPE);
        assert_eq!(r["config"]["digest"], config.digest.as_str(), "the image's config blob");
        assert_eq!(r["subject"], serde_json::to_value(&bundle).unwrap());
        assert_eq!(stored_layers(&bytes), stored_layers(&image), "the same signatures");
        let listed = serde_json::json!({"manifests": [{
            "mediaType": MANIFEST_MEDIA_TYPE, "digest": crate::publish::artifact::digest(&bytes),
            "size": bytes.len(), "artifactType": r["artifactType"],
        }]});
        assert_eq!(
            wmrender_contract::signed_bundle::signature_referrers(listed.to_string().as_bytes()).len(),
            1,
            "what a node lists as a signature"
        );
    }
}
