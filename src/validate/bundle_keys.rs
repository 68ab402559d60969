//! `spec.bundleSigning.publicKeys`: the keys whose signatures a node accepts on a bundle it pulls (docs/pull.md).
//! Each entry is one PEM public key, ECDSA P-256 as cosign makes them (`cosign generate-key-pair` writes
//! `cosign.pub`); two during a rotation. A private key pasted here is refused without showing it. The checked value
//! is each key as PEM in one fixed form, so that the rendered node.json does not change with line endings or
//! surrounding space.

use super::Decoded;
use crate::diagnostics::Diagnostics;
use crate::inputs::schema::ClusterInputs;
use base64::Engine as _;
use wmrender_contract::signed_bundle::{P256_SPKI_PREFIX, PublicKey};

const EXPECTED: &str = "one PEM public key, -----BEGIN PUBLIC KEY----- … -----END PUBLIC KEY-----, ECDSA P-256 \
                        (cosign.pub from `cosign generate-key-pair`)";

/// The checked keys, in the inputs' order.
pub fn check(inputs: &ClusterInputs, decoded: &Decoded, d: &mut Diagnostics) -> Vec<String> {
    let Some(signing) = &inputs.spec.bundle_signing else { return Vec::new() };
    let mut keys: Vec<String> = Vec::new();
    for key in &signing.public_keys {
        let Some(text) = decoded.get(key) else { continue };
        if text.contains("PRIVATE KEY") {
            d.push(
                key.error("this is a private key; `publicKeys` takes the public half only")
                    .expected(EXPECTED)
                    .hint("remove it from the file (and from Git history, if it was committed) and write cosign.pub instead")
                    .without_source(),
            );
            continue;
        }
        match PublicKey::parse_pem(text) {
            Ok(parsed) if parsed.len() == 1 => {
                let pem = pem(&parsed[0]);
                if keys.contains(&pem) {
                    d.push(key.warning("this key is listed twice").expected("each key once"));
                } else {
                    keys.push(pem);
                }
            }
            Ok(parsed) => d.push(
                key.error(format!("{} keys in one entry", parsed.len()))
                    .expected(EXPECTED)
                    .hint("give each key its own list entry"),
            ),
            Err(why) => {
                // One entry is one key: the block's number in it says nothing.
                let why = why.strip_prefix("public key 1: ").unwrap_or(&why);
                d.push(key.error(why.to_string()).expected(EXPECTED))
            }
        }
    }
    if keys.is_empty() && !d.has_errors() {
        d.push(
            signing
                .at
                .warning("`bundleSigning` lists no key: nodes refuse every bundle they would pull")
                .expected("publicKeys: with at least one key"),
        );
    }
    keys
}

/// The key as PEM: the SubjectPublicKeyInfo in base64, 64 characters a line, as OpenSSL and cosign write it.
fn pem(key: &PublicKey) -> String {
    let mut der = P256_SPKI_PREFIX.to_vec();
    der.extend_from_slice(key.point());
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::from("-----BEGIN PUBLIC KEY-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(chunk));
        out.push('\n');
    }
    out.push_str("-----END PUBLIC KEY-----\n");
    out
}
