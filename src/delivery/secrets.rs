//! Sync-time secrets. They are read from files named on the command line, merged only into the bytes pushed to a
//! node, and never printed, logged or written locally. Values here are wrapped so that a stray `{:?}` cannot
//! print them.

use super::error::SecretsError;
pub use crate::secret::Secret;
use crate::secret::parse_pull_secret;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use wmrender_contract::paths;

/// The secret files given to `sync`, and where each goes on the node.
#[derive(Clone, Debug, Default)]
pub struct SecretFiles {
    pub pull_secret: Option<PathBuf>,
    pub bootstrap_kubeconfig: Option<PathBuf>,
    pub kubelet_ca: Option<PathBuf>,
    pub bootstrap_ca: Option<PathBuf>,
    pub exporter_tls_cert: Option<PathBuf>,
    pub exporter_tls_key: Option<PathBuf>,
    /// The additional trusted CA bundle (PEM), pushed to `C:\k\ca-bundle.crt`.
    pub trusted_ca_bundle: Option<PathBuf>,
    /// What `sync --kubeconfig` fetched from the cluster; a file named above wins over it.
    pub fetched: Fetched,
}

/// Credentials fetched from the cluster (src/cluster/credentials.rs), held in memory only.
#[derive(Clone, Debug, Default)]
pub struct Fetched {
    /// Node path → content.
    pub files: BTreeMap<&'static str, Secret>,
    /// The cluster's `.dockerconfigjson`.
    pub pull_secret: Option<Secret>,
    /// What could not be fetched without failing the sync, and why (printed as notes).
    pub notes: Vec<String>,
}

impl SecretFiles {
    /// Whether a pull secret is given or fetched (hosts.toml then carry mirror credentials).
    pub fn has_pull_secret(&self) -> bool {
        self.pull_secret.is_some() || self.fetched.pull_secret.is_some()
    }
}

#[derive(Clone, Debug, Default)]
pub struct Secrets {
    /// `host[:port]` → `Basic <base64 user:password>`.
    auths: BTreeMap<String, Secret>,
    /// Node path → content, for the credential files pushed as they are.
    pub files: BTreeMap<&'static str, Secret>,
}

fn read(path: &Path, what: &'static str) -> Result<Secret, SecretsError> {
    // The error names the file, never its content.
    std::fs::read(path).map(Secret::new).map_err(|source| SecretsError::Read { what, file: path.to_path_buf(), source })
}

impl Secrets {
    pub fn load(files: &SecretFiles) -> Result<Secrets, SecretsError> {
        let mut s = Secrets::default();
        if let Some(p) = &files.pull_secret {
            s.auths = parse_pull_secret(read(p, "pull secret")?.bytes())
                .map_err(|problem| SecretsError::PullSecret { file: p.clone(), problem })?;
        } else if let Some(fetched) = &files.fetched.pull_secret {
            s.auths = parse_pull_secret(fetched.bytes()).map_err(SecretsError::FetchedPullSecret)?;
        }
        let pairs = [
            (&files.bootstrap_kubeconfig, paths::BOOTSTRAP_KUBECONFIG, "bootstrap kubeconfig"),
            (&files.kubelet_ca, paths::KUBELET_CA, "kubelet CA"),
            (&files.bootstrap_ca, paths::BOOTSTRAP_CA, "bootstrap CA"),
            (&files.exporter_tls_cert, paths::EXPORTER_TLS_CERT, "windows_exporter certificate"),
            (&files.exporter_tls_key, paths::EXPORTER_TLS_KEY, "windows_exporter key"),
            (&files.trusted_ca_bundle, paths::TRUSTED_CA_BUNDLE, "trusted CA bundle"),
        ];
        for (path, node_path, what) in pairs {
            if let Some(p) = path {
                s.files.insert(node_path, read(p, what)?);
            }
        }
        if let (Some(p), Some(bundle)) = (&files.trusted_ca_bundle, s.files.get(paths::TRUSTED_CA_BUNDLE)) {
            // The agent would refuse a bad bundle on every node; say so here, once.
            wmrender_contract::parse_ca_bundle(bundle.bytes())
                .map_err(|e| SecretsError::CaBundle { file: p.clone(), why: e.to_string() })?;
        }
        for (node_path, secret) in &files.fetched.files {
            s.files.entry(node_path).or_insert_with(|| secret.clone());
        }
        Ok(s)
    }

    /// A rendered hosts.toml with an `authorization` header after every mirror that has credentials
    /// (../shared/spec/registries.md, "Credentials").
    pub fn merge_into_hosts_toml(&self, rendered: &[u8]) -> Vec<u8> {
        wmrender_contract::hosts_toml::merge_credentials(rendered, &|host| {
            self.auths.get(host).map(|auth| String::from_utf8_lossy(auth.bytes()).into_owned())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secret::PullSecretProblem;

    const HOSTS: &str = "server = \"https://quay.io/v2\"\n\noverride_path = true\n\n[host.\"https://mirror.example.com:5000/v2/quay\"]\n  capabilities = [\"pull\"]\n  override_path = true\n\n[host.\"https://other.example.com/v2\"]\n  capabilities = [\"pull\"]\n  override_path = true\n";

    #[test]
    fn header_goes_right_after_the_mirrors_override_path() {
        let auths =
            parse_pull_secret(br#"{"auths":{"https://mirror.example.com:5000/v1/":{"auth":"dXNlcjpwYXNz"}}}"#).unwrap();
        let s = Secrets { auths, ..Secrets::default() };
        let merged = String::from_utf8(s.merge_into_hosts_toml(HOSTS.as_bytes())).unwrap();
        assert_eq!(
            merged,
            HOSTS.replace(
                "/v2/quay\"]\n  capabilities = [\"pull\"]\n  override_path = true\n",
                "/v2/quay\"]\n  capabilities = [\"pull\"]\n  override_path = true\n  [host.\"https://mirror.example.com:5000/v2/quay\".header]\n    authorization = \"Basic dXNlcjpwYXNz\"\n"
            )
        );
        toml::from_str::<toml::Table>(&merged).unwrap();
    }

    #[test]
    fn username_and_password_are_used_without_auth_and_reencoded_padded() {
        let a =
            parse_pull_secret(br#"{"auths":{"m.io":{"username":"u","password":"p"},"n.io":{"auth":"dTpw"}}}"#).unwrap();
        assert_eq!(a["m.io"].bytes(), b"Basic dTpw");
        assert_eq!(a["n.io"].bytes(), b"Basic dTpw");
        assert!(format!("{:?}", a["m.io"]).contains("bytes"), "Debug never shows the value");
    }

    #[test]
    fn bad_pull_secrets_are_refused_without_echoing_them() {
        let e = parse_pull_secret(br#"{"auths":{"m.io":{"auth":"bm9jb2xvbg=="}}}"#).unwrap_err();
        assert_eq!(e, PullSecretProblem::NotUserPassword { host: "m.io".into() });
        assert!(!e.to_string().contains("bm9jb2xvbg"), "{e}");
        assert_eq!(parse_pull_secret(b"not json").unwrap_err(), PullSecretProblem::NotJson);
    }
}
