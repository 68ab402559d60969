//! Reading `--identity`: the private key file, with an error that says what is really wrong with it (missing,
//! a public key, protected by a passphrase, a format wmrender cannot read) instead of the key library's words.

use russh::keys::{self, PrivateKey};
use std::path::Path;

/// The key, or a message for the user (exit 2): `cannot use the private key PATH: WHY`.
pub fn load_identity(path: &Path) -> Result<PrivateKey, String> {
    let shown = path.display();
    let fail = |why: String| format!("cannot use the private key {shown}: {why}");
    let bytes = std::fs::read(path).map_err(|e| {
        fail(match e.kind() {
            std::io::ErrorKind::NotFound => "no such file".to_string(),
            std::io::ErrorKind::PermissionDenied => "permission denied (run as a user that can read it)".to_string(),
            std::io::ErrorKind::IsADirectory => "it is a directory, not a key file".to_string(),
            _ if path.is_dir() => "it is a directory, not a key file".to_string(),
            _ => e.to_string(),
        })
    })?;
    let Ok(text) = String::from_utf8(bytes) else {
        return Err(fail(UNKNOWN_FORMAT.into()));
    };
    if is_public_key(&text) {
        let private = path.extension().is_some_and(|e| e == "pub").then(|| path.with_extension(""));
        return Err(fail(match private {
            Some(p) => format!("this is a public key; give the private key instead ({})", p.display()),
            None => "this is a public key; give the private key instead".to_string(),
        }));
    }
    if looks_encrypted(&text) {
        return Err(fail(PASSPHRASE.into()));
    }
    keys::decode_secret_key(&text, None).map_err(|e| {
        fail(match e {
            keys::Error::KeyIsEncrypted => PASSPHRASE.to_string(),
            keys::Error::UnsupportedKeyType { key_type_string, .. } => {
                format!("the key type `{key_type_string}` is not supported (use ed25519, ECDSA or RSA)")
            }
            _ if !text.contains("-----BEGIN ") && !text.trim_start().starts_with("PuTTY-User-Key-File-") => {
                UNKNOWN_FORMAT.to_string()
            }
            _ => format!("{} (the file looks damaged or is not a private key)", UNKNOWN_FORMAT),
        })
    })
}

const PASSPHRASE: &str = "the key is protected by a passphrase, which wmrender cannot ask for; use a key without one \
(e.g. a copy decrypted with `ssh-keygen -p -N '' -f COPY`)";

const UNKNOWN_FORMAT: &str = "not a private key format wmrender reads (an OpenSSH `BEGIN OPENSSH PRIVATE KEY` file, \
PEM RSA `BEGIN RSA PRIVATE KEY` like WMCO's cloud-private-key, or PKCS#8 `BEGIN PRIVATE KEY`)";

/// An OpenSSH public key line (`ssh-ed25519 AAAA… comment`), an RFC 4716 or a PEM public key.
fn is_public_key(text: &str) -> bool {
    let t = text.trim_start();
    let first = t.split_whitespace().next().unwrap_or("");
    let openssh_line = ["ssh-", "ecdsa-sha2-", "sk-ssh-", "sk-ecdsa-"].iter().any(|p| first.starts_with(p))
        && t.split_whitespace().nth(1).is_some_and(|b| b.starts_with("AAAA"));
    openssh_line
        || t.starts_with("---- BEGIN SSH2 PUBLIC KEY ----")
        || t.starts_with("-----BEGIN PUBLIC KEY-----")
        || t.starts_with("-----BEGIN RSA PUBLIC KEY-----")
}

/// Passphrase-protected PEM (`Proc-Type: 4,ENCRYPTED`), PKCS#8 (`BEGIN ENCRYPTED PRIVATE KEY`) or PuTTY keys; an
/// encrypted OpenSSH key is recognised by the decoder (its cipher name is inside the base64).
fn looks_encrypted(text: &str) -> bool {
    text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----")
        || text.lines().any(|l| l.trim() == "Proc-Type: 4,ENCRYPTED")
        || (text.trim_start().starts_with("PuTTY-User-Key-File-")
            && text.lines().any(|l| l.starts_with("Encryption:") && l.trim() != "Encryption: none"))
}
