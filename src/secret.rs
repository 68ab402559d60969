//! Bytes that must never be shown: credentials read from files or fetched from the cluster at sync time. They go
//! into the bytes pushed to a node and nowhere else; `Debug` prints only their length, so a stray `{:?}` cannot
//! leak one. The pull secret's reader is here too: `sync` (mirror credentials in hosts.toml) and `payload pull` (the
//! registry's) read the same `.dockerconfigjson`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use std::collections::BTreeMap;

#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl Secret {
    pub fn new(bytes: Vec<u8>) -> Secret {
        Secret(bytes)
    }

    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secret({} bytes)", self.0.len())
    }
}

/// What is wrong inside a pull secret; never its values.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum PullSecretProblem {
    #[error("it is not JSON")]
    NotJson,
    #[error("it has no `auths` object")]
    NoAuths,
    #[error("the `auth` of `{host}` is not base64")]
    NotBase64 { host: String },
    #[error("the credentials of `{host}` are not `user:password`")]
    NotUserPassword { host: String },
}

/// `.dockerconfigjson` → `host[:port]` → `Basic <base64>`. Keys written with a scheme or a path are normalised to
/// the host; `auth` is decoded and re-encoded with standard padded base64; `username`/`password` are used when
/// `auth` is absent.
pub fn parse_pull_secret(bytes: &[u8]) -> Result<BTreeMap<String, Secret>, PullSecretProblem> {
    // serde_json's message may quote the text it read: never shown.
    let doc: serde_json::Value = serde_json::from_slice(bytes).map_err(|_| PullSecretProblem::NotJson)?;
    let auths = doc.get("auths").and_then(|a| a.as_object()).ok_or(PullSecretProblem::NoAuths)?;
    let mut out = BTreeMap::new();
    for (key, entry) in auths {
        let host = key.split("://").last().unwrap_or(key).split('/').next().unwrap_or("").to_string();
        let user_pass = match (entry.get("auth").and_then(|a| a.as_str()), entry.get("username"), entry.get("password"))
        {
            (Some(auth), _, _) => {
                STANDARD.decode(auth.trim()).map_err(|_| PullSecretProblem::NotBase64 { host: host.clone() })?
            }
            (None, Some(u), Some(p)) => {
                format!("{}:{}", u.as_str().unwrap_or(""), p.as_str().unwrap_or("")).into_bytes()
            }
            _ => continue, // an entry without credentials (e.g. only an identity token) adds no header
        };
        if !user_pass.contains(&b':') {
            return Err(PullSecretProblem::NotUserPassword { host });
        }
        out.insert(host, Secret::new(format!("Basic {}", STANDARD.encode(&user_pass)).into_bytes()));
    }
    Ok(out)
}
