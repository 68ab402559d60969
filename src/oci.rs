//! An OCI registry as wmrender talks to it, for `payload pull` and `publish`: one HTTP client (the system's CAs
//! and the ones given, time-outs, wmrender's User-Agent) and the registries' credentials from the file given or the
//! usual auth files (podman's, docker's), held as secrets and never printed.

use crate::error::io_reason;
use crate::secret::Secret;
use base64::Engine;
use oci_client::Client;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig};
use oci_client::secrets::RegistryAuth;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why the client or the credentials could not be had: a file the user named (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error("reading {}: {}", .file.display(), io_reason(source))]
    Read {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file of credentials or CAs that cannot be used (the variant names the first use it had).
    #[error("{what}: {why}")]
    Credentials { what: String, why: String },
}

/// The registry client: the system's CAs and those of `ca_files` (PEM), 10 s to connect, 60 s per read.
pub fn client(ca_files: &[PathBuf]) -> Result<Client, AccessError> {
    let certificates = extra_cas(ca_files)?;
    Ok(Client::new(ClientConfig {
        extra_root_certificates: certificates
            .into_iter()
            .map(|data| Certificate { encoding: CertificateEncoding::Pem, data })
            .collect(),
        connect_timeout: Some(CONNECT_TIMEOUT),
        read_timeout: Some(READ_TIMEOUT),
        user_agent: USER_AGENT,
        // A blob in one request after the upload's start, not three (start, chunk, end): bundle files are small.
        use_monolithic_push: true,
        ..ClientConfig::default()
    }))
}

/// An HTTP client as [`client`]'s (the same CAs, time-outs and User-Agent), for the few requests oci-client does
/// not make as wmrender needs them (asking whether a registry has the referrers API).
pub fn http_client(ca_files: &[PathBuf]) -> Result<reqwest::Client, AccessError> {
    let mut certificates = Vec::new();
    for (pem, file) in extra_cas(ca_files)?.iter().zip(ca_files) {
        let mut found = reqwest::Certificate::from_pem_bundle(pem).map_err(|_| AccessError::Credentials {
            what: file.display().to_string(),
            why: "its PEM certificates cannot be read".into(),
        })?;
        certificates.append(&mut found);
    }
    reqwest::Client::builder()
        .tls_certs_merge(certificates)
        .connect_timeout(CONNECT_TIMEOUT)
        .read_timeout(READ_TIMEOUT)
        .user_agent(USER_AGENT)
        .build()
        // What fails here is the TLS set-up with the CAs given: the user's files.
        .map_err(|e| AccessError::Credentials { what: "--registry-ca".into(), why: request_reason(&e) })
}

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const READ_TIMEOUT: Duration = Duration::from_secs(60);
const USER_AGENT: &str = concat!("wmrender/", env!("CARGO_PKG_VERSION"));

/// The PEM files of CAs to trust besides the system's, read and checked to hold a certificate.
fn extra_cas(ca_files: &[PathBuf]) -> Result<Vec<Vec<u8>>, AccessError> {
    // reqwest is built without a crypto provider of its own: the ring one, as kube's client and the metrics use.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut certificates = Vec::new();
    for file in ca_files {
        let data = std::fs::read(file).map_err(|source| AccessError::Read { file: file.clone(), source })?;
        if !String::from_utf8_lossy(&data).contains("-----BEGIN CERTIFICATE-----") {
            return Err(AccessError::Credentials {
                what: file.display().to_string(),
                why: "it holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into(),
            });
        }
        certificates.push(data);
    }
    Ok(certificates)
}

/// The registries' credentials: the file given, else the usual places (podman's and docker's); none when there is
/// no file. Held as secrets: never printed.
pub fn credentials(given: Option<&Path>) -> Result<BTreeMap<String, Secret>, AccessError> {
    let path = match given {
        Some(p) => Some(p.to_path_buf()),
        None => default_auth_file(),
    };
    let Some(path) = path else { return Ok(BTreeMap::new()) };
    let bytes = std::fs::read(&path).map_err(|source| AccessError::Read { file: path.clone(), source })?;
    crate::secret::parse_pull_secret(&bytes)
        .map_err(|problem| AccessError::Credentials { what: path.display().to_string(), why: problem.to_string() })
}

fn default_auth_file() -> Option<PathBuf> {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let mut places = Vec::new();
    places.extend(env("REGISTRY_AUTH_FILE"));
    places.extend(env("XDG_RUNTIME_DIR").map(|d| d.join("containers/auth.json")));
    places.extend(env("DOCKER_CONFIG").map(|d| d.join("config.json")));
    places.extend(env("HOME").map(|d| d.join(".docker/config.json")));
    places.into_iter().find(|p| p.is_file())
}

/// What a registry that refuses the credentials given (or asks for some) is told to the user.
pub const CREDENTIALS_REFUSED: &str =
    "the registry refused the credentials (or asks for some): check --registry-config";

/// A connection failure in words, the innermost cause (a refused connection, a certificate not trusted).
pub fn request_reason(e: &reqwest::Error) -> String {
    let mut cause: &dyn std::error::Error = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    if e.is_timeout() { "it did not answer in time".into() } else { format!("cannot reach it: {cause}") }
}

/// The credentials for one registry (`host[:port]`), anonymous when the file has none for it.
pub fn auth_for(auths: &BTreeMap<String, Secret>, registry: &str) -> RegistryAuth {
    let Some(secret) = auths.get(registry) else { return RegistryAuth::Anonymous };
    // Stored as `Basic <base64 user:password>` (the form hosts.toml takes); parse_pull_secret checked the colon.
    let encoded = String::from_utf8_lossy(secret.bytes()).trim_start_matches("Basic ").to_string();
    let decoded = base64::engine::general_purpose::STANDARD.decode(encoded).unwrap_or_default();
    let text = String::from_utf8_lossy(&decoded);
    match text.split_once(':') {
        Some((user, password)) => RegistryAuth::Basic(user.to_string(), password.to_string()),
        None => RegistryAuth::Anonymous,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_per_registry() {
        let auths = crate::secret::parse_pull_secret(
            br#"{"auths":{"https://mirror.example.com:5000/v1/":{"auth":"dXNlcjpwYXNz"}}}"#,
        )
        .unwrap();
        assert!(
            matches!(auth_for(&auths, "mirror.example.com:5000"), RegistryAuth::Basic(u, p) if u == "user" && p == "pass")
        );
        assert!(matches!(auth_for(&auths, "registry.redhat.io"), RegistryAuth::Anonymous));
    }
}
