//! Reading `--identity`: the private key file, with an error that says what is really wrong with it (missing,
//! a public key, protected by a passphrase, a format wmrender cannot read) instead of the key library's words.

use russh::keys::{self, PrivateKey};
use std::path::{Path, PathBuf};

/// Why the `--identity` file cannot be used; a usage error (exit 2): the user gave the wrong file.
#[derive(Debug, thiserror::Error)]
#[error("cannot use the private key {}: {problem}", path.display())]
pub struct IdentityError {
    pub path: PathBuf,
    pub problem: IdentityProblem,
}

#[derive(Debug, thiserror::Error)]
pub enum IdentityProblem {
    #[error("no such file")]
    Missing,
    #[error("permission denied (run as a user that can read it)")]
    Unreadable,
    #[error("it is a directory, not a key file")]
    Directory,
    #[error("{0}")]
    Io(std::io::Error),
    /// `private`: the file beside it without `.pub`, most likely the key meant.
    #[error("this is a public key; give the private key instead{}", in_parens(.private))]
    PublicKey { private: Option<PathBuf> },
    #[error("{PASSPHRASE}")]
    Passphrase,
    #[error("the key type `{0}` is not supported (use ed25519, ECDSA or RSA)")]
    UnsupportedType(String),
    #[error("{UNKNOWN_FORMAT}")]
    UnknownFormat,
    #[error("{UNKNOWN_FORMAT} (the file looks damaged or is not a private key)")]
    Damaged,
}

impl From<IdentityError> for crate::error::Error {
    fn from(e: IdentityError) -> crate::error::Error {
        crate::error::Error::Unusable(Box::new(e))
    }
}

fn in_parens(path: &Option<PathBuf>) -> String {
    path.as_ref().map(|p| format!(" ({})", p.display())).unwrap_or_default()
}

/// The key, or what is wrong with the file in words the user can act on.
pub fn load_identity(path: &Path) -> Result<PrivateKey, IdentityError> {
    let fail = |problem| IdentityError { path: path.to_path_buf(), problem };
    let bytes = std::fs::read(path).map_err(|e| {
        fail(match e.kind() {
            std::io::ErrorKind::NotFound => IdentityProblem::Missing,
            std::io::ErrorKind::PermissionDenied => IdentityProblem::Unreadable,
            std::io::ErrorKind::IsADirectory => IdentityProblem::Directory,
            _ if path.is_dir() => IdentityProblem::Directory,
            _ => IdentityProblem::Io(e),
        })
    })?;
    let Ok(text) = String::from_utf8(bytes) else {
        return Err(fail(IdentityProblem::UnknownFormat));
    };
    if is_public_key(&text) {
        let private = path.extension().is_some_and(|e| e == "pub").then(|| path.with_extension(""));
        return Err(fail(IdentityProblem::PublicKey { private }));
    }
    if looks_encrypted(&text) {
        return Err(fail(IdentityProblem::Passphrase));
    }
    keys::decode_secret_key(&text, None).map_err(|e| {
        fail(match e {
            keys::Error::KeyIsEncrypted => IdentityProblem::Passphrase,
            keys::Error::UnsupportedKeyType { key_type_string, .. } => {
                IdentityProblem::UnsupportedType(key_type_string)
            }
            _ if !text.contains("-----BEGIN ") && !text.trim_start().starts_with("PuTTY-User-Key-File-") => {
                IdentityProblem::UnknownFormat
            }
            _ => IdentityProblem::Damaged,
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
