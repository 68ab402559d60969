//! The controller's metrics endpoint over HTTPS, as the cluster requires: the serving certificate OpenShift's service
//! CA issues for its Service (the Secret mounted into the pod, renewed in place), and the TLS versions and ciphers of
//! the cluster's `APIServer` `tlsSecurityProfile` ([`crate::cluster::tls_profile`]), read at start and every
//! [`RELOAD`] after, the certificate with it: a new profile or certificate applies to the next connection, without a
//! restart.
//!
//! rustls serves TLS 1.2 and 1.3 with AEAD ciphers only, so a profile is met as closely as it allows: its minimum
//! version (TLS 1.0 and 1.1 are never offered), its TLS 1.2 ciphers among those rustls has (the CBC, RSA key
//! exchange and 3DES ciphers of the `Old` profile are left out, and said so), its key exchange groups among those
//! rustls has (not the post-quantum hybrids), and TLS 1.3's ciphers, which, as in Go's TLS (what OpenShift's own
//! components serve with), a profile does not choose.

use crate::cluster::tls_profile::{TLS13, TlsProfile};
use crate::secret::Secret;
use rustls::crypto::ring::{cipher_suite as suite, default_provider};
use rustls::{ServerConfig, SupportedCipherSuite};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio_rustls::TlsAcceptor;

/// How often the profile and the certificate are read again.
pub const RELOAD: Duration = Duration::from_secs(10);

/// The TLS 1.2 ciphers rustls has, by their OpenSSL names.
fn tls12(openssl: &str) -> Option<SupportedCipherSuite> {
    Some(match openssl {
        "ECDHE-ECDSA-AES128-GCM-SHA256" => suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        "ECDHE-RSA-AES128-GCM-SHA256" => suite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        "ECDHE-ECDSA-AES256-GCM-SHA384" => suite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        "ECDHE-RSA-AES256-GCM-SHA384" => suite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        "ECDHE-ECDSA-CHACHA20-POLY1305" => suite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        "ECDHE-RSA-CHACHA20-POLY1305" => suite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        _ => return None,
    })
}

/// The key exchange groups rustls has (ring), by openshift/api's names.
fn group(name: &str) -> Option<&'static dyn rustls::crypto::SupportedKxGroup> {
    use rustls::crypto::ring::kx_group;
    Some(match name {
        "X25519" => kx_group::X25519,
        "secp256r1" => kx_group::SECP256R1,
        "secp384r1" => kx_group::SECP384R1,
        _ => return None,
    })
}

/// What a profile comes to here: the ciphers and versions served, and the profile's ciphers left out.
pub struct Served {
    pub config: ServerConfig,
    pub left_out: Vec<String>,
}

/// The server configuration for `profile` with this certificate chain and key (PEM).
pub fn server_config(profile: &TlsProfile, cert_pem: &[u8], key_pem: &[u8]) -> Result<Served, String> {
    let tls13_only = profile.min_version == "VersionTLS13";
    let mut left_out = Vec::new();
    let mut suites: Vec<SupportedCipherSuite> = Vec::new();
    if !tls13_only {
        for name in &profile.ciphers {
            match tls12(name) {
                Some(s) => suites.push(s),
                None if TLS13.contains(&name.as_str()) => {}
                None => left_out.push(name.clone()),
            }
        }
    }
    suites.extend([
        suite::TLS13_AES_128_GCM_SHA256,
        suite::TLS13_AES_256_GCM_SHA384,
        suite::TLS13_CHACHA20_POLY1305_SHA256,
    ]);
    let tls12_any = suites.iter().any(|s| s.version() == &rustls::version::TLS12);
    let versions: &[&rustls::SupportedProtocolVersion] =
        if tls12_any { &[&rustls::version::TLS13, &rustls::version::TLS12] } else { &[&rustls::version::TLS13] };
    // The profile's groups, in its order, as far as rustls has them (the post-quantum hybrids it has not: left out).
    let mut kx_groups = Vec::new();
    for name in &profile.groups {
        match group(name) {
            Some(g) => kx_groups.push(g),
            None => left_out.push(name.clone()),
        }
    }
    if kx_groups.is_empty() {
        if !profile.groups.is_empty() {
            return Err(format!("none of the profile's groups ({}) is one rustls has", profile.groups.join(", ")));
        }
        kx_groups = default_provider().kx_groups;
    }
    let provider = rustls::crypto::CryptoProvider { cipher_suites: suites, kx_groups, ..default_provider() };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|_| "the certificate file is not PEM certificates".to_string())?;
    if certs.is_empty() {
        return Err("the certificate file holds no certificate".into());
    }
    let key =
        PrivateKeyDer::from_pem_slice(key_pem).map_err(|_| "the key file is not a PEM private key".to_string())?;
    let config = ServerConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(versions)
        .map_err(|_| "the profile's TLS versions cannot be served with the ciphers it leaves".to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|_| "the key does not belong to the certificate (or is of a kind not served)".to_string())?;
    Ok(Served { config, left_out })
}

/// The largest certificate or key file read: the service CA's chain and key take a few KiB, and the files are
/// read again every [`RELOAD`], so a file past this is refused rather than read whole.
pub const MAX_PEM_BYTES: u64 = 1 << 20;

/// A certificate or key file, at most [`MAX_PEM_BYTES`] of it, read through tokio's blocking pool: the reload runs
/// on the runtime's workers, which a slow volume must not hold up.
async fn read_bounded(path: &Path) -> Result<Vec<u8>, String> {
    let failed = |e: std::io::Error| format!("{}: {}", path.display(), crate::error::io_reason(&e));
    let file = tokio::fs::File::open(path).await.map_err(failed)?;
    let mut bytes = Vec::new();
    file.take(MAX_PEM_BYTES + 1).read_to_end(&mut bytes).await.map_err(failed)?;
    if bytes.len() as u64 > MAX_PEM_BYTES {
        return Err(format!(
            "{}: larger than {MAX_PEM_BYTES} bytes (1 MiB), more than any certificate or key file",
            path.display()
        ));
    }
    Ok(bytes)
}

/// The certificate and key files, and what they and the profile were when last loaded.
pub struct Tls {
    pub cert: PathBuf,
    pub key: PathBuf,
    current: Mutex<Current>,
}

struct Current {
    acceptor: TlsAcceptor,
    profile: TlsProfile,
    cert: Vec<u8>,
    key: Secret,
}

impl Current {
    /// `profile` served with this certificate and key, and what that comes to in words (the profile's ciphers left
    /// out included).
    fn new(profile: &TlsProfile, cert: Vec<u8>, key: Secret) -> Result<(Current, String), String> {
        let served = server_config(profile, &cert, key.bytes())?;
        let mut what = format!("the {} TLS profile, minimum {}", profile.kind, profile.min_version);
        if !served.left_out.is_empty() {
            what.push_str(&format!(" (not served, rustls has none such: {})", served.left_out.join(", ")));
        }
        let acceptor = TlsAcceptor::from(Arc::new(served.config));
        Ok((Current { acceptor, profile: profile.clone(), cert, key }, what))
    }
}

impl Tls {
    /// Loads the files and serves `profile` with them; says what is served. A `Tls` exists only loaded: the
    /// controller does not start without its certificate.
    pub async fn load(cert: PathBuf, key: PathBuf, profile: &TlsProfile) -> Result<(Tls, String), String> {
        let (cert_pem, key_pem) = (read_bounded(&cert).await?, Secret::new(read_bounded(&key).await?));
        let (current, what) = Current::new(profile, cert_pem, key_pem)?;
        Ok((Tls { cert, key, current: Mutex::new(current) }, what))
    }

    /// What new connections are served with (a `Tls` is only made loaded, see [`Tls::load`]).
    pub fn acceptor(&self) -> TlsAcceptor {
        self.current.lock().unwrap_or_else(|p| p.into_inner()).acceptor.clone()
    }

    /// Loads the files again and applies `profile` when either or it changed. `Ok(Some(what))` says what changed
    /// (and the profile's ciphers left out), `Ok(None)` that nothing did; on an error the last loaded is served.
    pub async fn reload(&self, profile: &TlsProfile) -> Result<Option<String>, String> {
        let (cert, key) = (read_bounded(&self.cert).await?, Secret::new(read_bounded(&self.key).await?));
        // Taken only now: a std Mutex is not held across the reads' awaits.
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if current.profile == *profile && current.cert == cert && current.key == key {
            return Ok(None);
        }
        let renewed = current.cert != cert || current.key != key;
        let (next, mut what) = Current::new(profile, cert, key)?;
        if renewed {
            what.insert_str(0, "a new certificate, ");
        }
        *current = next;
        Ok(Some(what))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profiles_ciphers_are_served_as_far_as_rustls_has_them() {
        let intermediate = TlsProfile::named("Intermediate").unwrap();
        let names: Vec<Option<SupportedCipherSuite>> = intermediate.ciphers.iter().map(|c| tls12(c)).collect();
        assert_eq!(names.iter().filter(|s| s.is_some()).count(), 6, "every TLS 1.2 cipher of Intermediate");
        let old = TlsProfile::named("Old").unwrap();
        let missing: Vec<&String> =
            old.ciphers.iter().filter(|c| tls12(c).is_none() && !TLS13.contains(&c.as_str())).collect();
        assert_eq!(missing.len(), 15, "CBC, RSA key exchange and 3DES: {missing:?}");
    }

    #[tokio::test]
    async fn a_certificate_or_key_file_past_1_mib_is_refused_not_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let (fits, past) = (dir.path().join("fits.pem"), dir.path().join("past.pem"));
        std::fs::write(&fits, vec![b'A'; MAX_PEM_BYTES as usize]).unwrap();
        std::fs::write(&past, vec![b'A'; MAX_PEM_BYTES as usize + 1]).unwrap();
        assert_eq!(read_bounded(&fits).await.unwrap().len() as u64, MAX_PEM_BYTES);
        let err = read_bounded(&past).await.unwrap_err();
        assert!(err.contains("past.pem: larger than 1048576 bytes (1 MiB)"), "{err}");
        let profile = TlsProfile::named("Intermediate").unwrap();
        let err = Tls::load(fits.clone(), past, &profile).await.err().unwrap();
        assert!(err.contains("past.pem: larger than"), "{err}");
        let err = read_bounded(&dir.path().join("absent.pem")).await.unwrap_err();
        assert!(err.contains("absent.pem: "), "{err}");
    }
}
