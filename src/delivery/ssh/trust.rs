//! Host-key trust: the server's key must be pinned in known_hosts (`--accept-new` pins a host seen for the first
//! time, except in a dry run, which writes nothing). Also which host-key algorithms to ask for, so that a host
//! pinned by its RSA key is reached with rsa-sha2-512/256 as OpenSSH's client does.

use super::ConnectOptions;
use russh::client;
use russh::keys::{Algorithm, HashAlg, PublicKey, PublicKeyOrCertificate, known_hosts};
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// What the host-key check decided, kept for the error message (russh only reports "unknown key").
#[derive(Clone, Debug, Default)]
pub(super) enum Verdict {
    #[default]
    Pending,
    Trusted,
    Unknown {
        offered: String,
    },
    Changed {
        known: String,
        offered: String,
    },
    Failed(String),
}

pub(super) struct Trust {
    pub host: String,
    pub port: u16,
    pub opts: ConnectOptions,
    pub verdict: Arc<Mutex<Verdict>>,
    /// Held for its drop: the session task owns this handler, so it goes when the session ends, and with it every
    /// wait on the connection.
    pub _pulse: super::lifeline::Pulse,
}

pub(super) fn fingerprint(key: &PublicKey) -> String {
    format!("{} {}", key.algorithm(), key.fingerprint(HashAlg::Sha256))
}

/// RSA keys are one kind whatever hash signs with them (ssh-rsa, rsa-sha2-256, rsa-sha2-512).
fn same_kind(a: &Algorithm, b: &Algorithm) -> bool {
    a == b || matches!((a, b), (Algorithm::Rsa { .. }, Algorithm::Rsa { .. }))
}

/// The host-key algorithms OpenSSH's client offers, in its order; SHA-1 `ssh-rsa` is left out, as OpenSSH does
/// since 8.8 and as current servers refuse it.
const HOST_KEY_ALGORITHMS: [Algorithm; 6] = [
    Algorithm::Ed25519,
    Algorithm::Ecdsa { curve: russh::keys::EcdsaCurve::NistP256 },
    Algorithm::Ecdsa { curve: russh::keys::EcdsaCurve::NistP384 },
    Algorithm::Ecdsa { curve: russh::keys::EcdsaCurve::NistP521 },
    Algorithm::Rsa { hash: Some(HashAlg::Sha512) },
    Algorithm::Rsa { hash: Some(HashAlg::Sha256) },
];

/// The host-key algorithms to ask for: those of the keys already pinned for this host (so a host known by its
/// RSA key is not refused for offering Ed25519 first), or all of them for a host not pinned yet.
pub(super) fn host_key_algorithms(pinned: &[PublicKey]) -> Vec<Algorithm> {
    let wanted: Vec<Algorithm> =
        HOST_KEY_ALGORITHMS.iter().filter(|a| pinned.iter().any(|k| same_kind(&k.algorithm(), a))).cloned().collect();
    if wanted.is_empty() { HOST_KEY_ALGORITHMS.to_vec() } else { wanted }
}

/// Host keys kept beside (or instead of) the known_hosts file: the controller keeps each node's keys in the cluster,
/// with its login record ([`crate::lifecycle::login`]), so that a restarted or rescheduled controller verifies them
/// instead of trusting every host anew. Keys are OpenSSH's `type base64`, by `host:port`.
#[derive(Debug, Default)]
pub struct HostKeyBook {
    keys: Mutex<std::collections::BTreeMap<String, Vec<String>>>,
}

fn book_key(host: &str, port: u16) -> String {
    format!("{host}:{port}")
}

impl HostKeyBook {
    /// The keys pinned for `host:port`, as OpenSSH text.
    pub fn keys(&self, host: &str, port: u16) -> Vec<String> {
        self.keys.lock().unwrap_or_else(|p| p.into_inner()).get(&book_key(host, port)).cloned().unwrap_or_default()
    }

    /// Pins `keys` for `host:port` (what a login record says), replacing what was pinned.
    pub fn set(&self, host: &str, port: u16, keys: Vec<String>) {
        let mut book = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        if keys.is_empty() {
            book.remove(&book_key(host, port));
        } else {
            book.insert(book_key(host, port), keys);
        }
    }

    fn pin(&self, host: &str, port: u16, key: &PublicKey) -> Result<(), String> {
        let text = key.to_openssh().map_err(|e| e.to_string())?;
        let mut book = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        let keys = book.entry(book_key(host, port)).or_default();
        if !keys.contains(&text) {
            keys.push(text);
        }
        Ok(())
    }
}

/// The keys pinned for `host:port`: in the known_hosts file (none when it does not exist yet) and in the book.
/// A key in the book that does not parse (a record is cluster data: untrusted) pins nothing.
pub(super) fn pinned_keys(host: &str, port: u16, opts: &ConnectOptions) -> Result<Vec<PublicKey>, String> {
    let mut keys = Vec::new();
    {
        let _guard = opts.known_hosts_lock.lock().unwrap_or_else(|p| p.into_inner());
        if opts.known_hosts.exists() {
            keys = known_hosts::known_host_keys_path(host, port, &opts.known_hosts)
                .map(|keys| keys.into_iter().map(|(_, k)| k).collect())
                .map_err(|e| format!("cannot read {}: {e}", opts.known_hosts.display()))?;
        }
    }
    if let Some(book) = &opts.host_keys {
        keys.extend(book.keys(host, port).iter().filter_map(|k| PublicKey::from_openssh(k).ok()));
    }
    Ok(keys)
}

impl client::Handler for Trust {
    type Error = russh::Error;

    async fn check_server_key(&mut self, offered: &PublicKeyOrCertificate) -> Result<bool, Self::Error> {
        let PublicKeyOrCertificate::PublicKey { key, .. } = offered else {
            *self.verdict.lock().unwrap_or_else(|p| p.into_inner()) =
                Verdict::Failed("the server offered a certificate; wmrender pins plain host keys".into());
            return Ok(false);
        };
        let verdict = self.decide(key);
        let trusted = matches!(verdict, Verdict::Trusted);
        *self.verdict.lock().unwrap_or_else(|p| p.into_inner()) = verdict;
        Ok(trusted)
    }
}

impl Trust {
    fn decide(&self, key: &PublicKey) -> Verdict {
        let recorded = match pinned_keys(&self.host, self.port, &self.opts) {
            Ok(r) => r,
            Err(why) => return Verdict::Failed(why),
        };
        let same_kind: Vec<&PublicKey> =
            recorded.iter().filter(|k| same_kind(&k.algorithm(), &key.algorithm())).collect();
        if same_kind.iter().any(|k| k.key_data() == key.key_data()) {
            return Verdict::Trusted;
        }
        if let Some(known) = same_kind.first() {
            return Verdict::Changed { known: fingerprint(known), offered: fingerprint(key) };
        }
        if !(self.opts.accept_new && recorded.is_empty()) {
            return Verdict::Unknown { offered: fingerprint(key) };
        }
        if self.opts.dry_run {
            // Trusted for this look only: a dry run writes nothing, known_hosts included.
            return Verdict::Trusted;
        }
        if let Some(book) = &self.opts.host_keys {
            return match book.pin(&self.host, self.port, key) {
                Ok(()) => Verdict::Trusted,
                Err(e) => Verdict::Failed(format!("cannot keep the host key: {e}")),
            };
        }
        let _guard = self.opts.known_hosts_lock.lock().unwrap_or_else(|p| p.into_inner());
        match pin(&self.host, self.port, key, &self.opts.known_hosts) {
            Ok(()) => Verdict::Trusted,
            Err(e) => Verdict::Failed(format!("cannot write {}: {e}", self.opts.known_hosts.display())),
        }
    }
}

/// Appends `[host]:port type base64` (or `host type base64` on port 22), as OpenSSH writes it: a newline first only
/// when the file does not end with one, so a new or empty file never starts with a blank line.
fn pin(host: &str, port: u16, key: &PublicKey, file: &Path) -> std::io::Result<()> {
    if let Some(parent) = file.parent().filter(|p| !p.as_os_str().is_empty() && !p.exists()) {
        std::fs::create_dir_all(parent)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o700))?;
        }
    }
    let existing = match std::fs::read(file) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => vec![],
        Err(e) => return Err(e),
    };
    let mut line = String::new();
    if existing.last().is_some_and(|b| *b != b'\n') {
        line.push('\n');
    }
    let name = if port == 22 { host.to_string() } else { format!("[{host}]:{port}") };
    let blob = key.to_openssh().map_err(std::io::Error::other)?;
    // The server's key carries no comment, so its OpenSSH text is exactly `type base64`.
    line.push_str(&format!("{name} {}\n", blob.trim()));
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(file)?;
    f.write_all(line.as_bytes())?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    const RSA: &str = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQDACtdtr0iLKxCsOlApPDJ+EEFckua0XtWZ0FjUWasrS32lgLFqDXvku/u7poht45/Qg0lB1UwbXkudCdAQc75P8xH2YvfqfYQYLytpsgmqw8NirZz83LuVCtvDb8a5u80zO6X6YqZ0zhOALpw3xOBcW0/hrcR2vd0bPmRUopqBFw==";
    const ED25519: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPDvSn+xQVysV5MJUnI3ZfxQb+mMzptmBUrGYHGWdD9i";

    #[test]
    fn a_host_pinned_by_rsa_is_asked_for_sha2_signatures_only() {
        let rsa = PublicKey::from_openssh(RSA).unwrap();
        let sha2 = vec![Algorithm::Rsa { hash: Some(HashAlg::Sha512) }, Algorithm::Rsa { hash: Some(HashAlg::Sha256) }];
        assert_eq!(host_key_algorithms(std::slice::from_ref(&rsa)), sha2);
        let ed = PublicKey::from_openssh(ED25519).unwrap();
        assert_eq!(host_key_algorithms(&[rsa, ed])[0], Algorithm::Ed25519);
        assert!(!host_key_algorithms(&[]).contains(&Algorithm::Rsa { hash: None }));
    }

    #[test]
    fn pinning_never_starts_a_file_with_a_blank_line() {
        let dir = tempfile::tempdir().unwrap();
        let key = PublicKey::from_openssh(ED25519).unwrap();
        let file = dir.path().join("new/.ssh/known_hosts");
        pin("10.0.0.5", 22, &key, &file).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), format!("10.0.0.5 {ED25519}\n"));
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "").unwrap();
        pin("h", 2222, &key, &empty).unwrap();
        assert_eq!(std::fs::read_to_string(&empty).unwrap(), format!("[h]:2222 {ED25519}\n"));
        let unterminated = dir.path().join("unterminated");
        std::fs::write(&unterminated, "a ssh-ed25519 X").unwrap();
        pin("h", 22, &key, &unterminated).unwrap();
        assert_eq!(std::fs::read_to_string(&unterminated).unwrap(), format!("a ssh-ed25519 X\nh {ED25519}\n"));
    }
}
