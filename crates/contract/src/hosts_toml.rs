//! containerd's `hosts.toml`, one per mirrored registry host (`C:\k\containerd\registries\<host>\hosts.toml`):
//! rendered by wmrender (../shared/spec/registries.md), with mirror credentials merged in by sync, and read by
//! containerd to pull images and by the agent to pull the node bundle the same way: the `[host]` tables in file
//! order, then `server`; a digest goes to a host that can `pull`, a tag only to one that can `resolve`.
//!
//! Read from the node: untrusted input. Only `https` hosts are used; a file that does not read is an error.

use crate::path::NodePath;
use std::collections::BTreeMap;

/// The folder name of a registry host's hosts.toml: containerd's form, `host_port_` for `host:port`.
pub fn dir_for(host: &str) -> String {
    match host.rsplit_once(':') {
        Some((h, port)) => format!("{h}_{port}_"),
        None => host.to_string(),
    }
}

/// Where the hosts.toml of `host` is on the node.
pub fn node_path(host: &str) -> Option<NodePath> {
    NodePath::parse_delivered(&format!(r"{}\{}\hosts.toml", crate::paths::CONTAINERD_REGISTRIES, dir_for(host))).ok()
}

/// Whether a node path is a registry's hosts.toml (`C:\k\containerd\registries\<host>\hosts.toml`), which
/// carries mirror credentials when a pull secret was given.
pub fn is_hosts_toml(path: &NodePath) -> bool {
    let registries = NodePath::known(crate::paths::CONTAINERD_REGISTRIES);
    path.parent().and_then(|registry| registry.parent()).is_some_and(|dir| dir == registries)
        && path.file_name() == "hosts.toml"
}

/// One host to ask, in the order containerd asks them.
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The API's base, ending in `/v2` or the mirror's path (`https://m.example.com/v2/quay`): a repository's
    /// manifests are at `<url>/<repository>/manifests/<reference>`.
    pub url: String,
    /// May serve content by digest.
    pub pull: bool,
    /// May turn a tag into a digest.
    pub resolve: bool,
    /// The `authorization` header sync merged in from the pull secret: a secret.
    pub authorization: Option<String>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("url", &self.url)
            .field("pull", &self.pull)
            .field("resolve", &self.resolve)
            .field("authorization", &self.authorization.as_ref().map(|_| "(set)"))
            .finish()
    }
}

/// The hosts to ask for `registry` when no hosts.toml names mirrors: the registry itself.
pub fn direct(registry: &str) -> Vec<Endpoint> {
    vec![Endpoint { url: format!("https://{registry}/v2"), pull: true, resolve: true, authorization: None }]
}

/// The hosts a hosts.toml names, `[host]` tables in file order, then `server`.
pub fn endpoints(text: &str) -> Result<Vec<Endpoint>, String> {
    let doc: toml_edit::DocumentMut = text.parse().map_err(|_| "is not TOML".to_string())?;
    let mut out = Vec::new();
    if let Some(hosts) = doc.get("host") {
        let hosts = hosts.as_table_like().ok_or("`host` is not a table")?;
        let mut ordered: Vec<(Option<isize>, &str, &dyn toml_edit::TableLike)> = Vec::new();
        for (url, item) in hosts.iter() {
            let table = item.as_table_like().ok_or_else(|| format!("host `{url}` is not a table"))?;
            let position = item.as_table().and_then(|t| t.position());
            ordered.push((position, url, table));
        }
        // containerd keeps the order the tables appear in the file.
        ordered.sort_by_key(|(position, _, _)| *position);
        for (_, url, table) in ordered {
            out.push(endpoint(url, table)?);
        }
    }
    if let Some(server) = doc.get("server") {
        let url = server.as_str().ok_or("`server` is not a string")?;
        out.push(endpoint(url, doc.as_table())?);
    }
    Ok(out)
}

fn endpoint(url: &str, table: &dyn toml_edit::TableLike) -> Result<Endpoint, String> {
    let Some(rest) = url.strip_prefix("https://") else {
        return Err(format!("host `{url}` is not https"));
    };
    if rest.is_empty() || rest.contains(['?', '#', '@', ' ']) {
        return Err(format!("host `{url}` is not a registry URL"));
    }
    let override_path = table.get("override_path").and_then(|v| v.as_bool()).unwrap_or(false);
    let mut url = url.trim_end_matches('/').to_string();
    if !override_path && !url.ends_with("/v2") {
        url.push_str("/v2");
    }
    let (pull, resolve) = match table.get("capabilities") {
        None => (true, true),
        Some(item) => {
            let list = item.as_array().ok_or_else(|| format!("host `{url}`: capabilities is not a list"))?;
            let has = |c: &str| list.iter().any(|v| v.as_str() == Some(c));
            (has("pull"), has("resolve"))
        }
    };
    let authorization = match table.get("header").and_then(|h| h.as_table_like()).and_then(|h| h.get("authorization")) {
        None => None,
        Some(value) => match (value.as_str(), value.as_array()) {
            (Some(s), _) => Some(s.to_string()),
            (None, Some(list)) => list.iter().next().and_then(|v| v.as_str()).map(str::to_string),
            _ => return Err(format!("host `{url}`: the authorization header is not a string")),
        },
    };
    Ok(Endpoint { url, pull, resolve, authorization })
}

/// A rendered hosts.toml with an `authorization` header after every mirror that `auth_for` has credentials for, by
/// its `host[:port]` (../shared/spec/registries.md, "Credentials"): what sync merges from the pull secret, and what
/// the agent carries over from the hosts.toml on the node into one it pulled.
pub fn merge_credentials(rendered: &[u8], auth_for: &dyn Fn(&str) -> Option<String>) -> Vec<u8> {
    let text = String::from_utf8_lossy(rendered);
    let mut out = String::new();
    let mut current: Option<(String, String)> = None; // (URL, host[:port]) of the [host] table being read
    for line in text.lines() {
        out.push_str(line);
        out.push('\n');
        if let Some(url) = line.strip_prefix("[host.\"").and_then(|l| l.strip_suffix("\"]")) {
            let host = url.trim_start_matches("https://").split('/').next().unwrap_or("").to_string();
            current = Some((url.to_string(), host));
        } else if line == "  override_path = true"
            && let Some((url, host)) = current.take()
            && let Some(auth) = auth_for(&host)
        {
            out.push_str(&format!("  [host.\"{url}\".header]\n"));
            out.push_str("    authorization = \"");
            out.push_str(&auth);
            out.push_str("\"\n");
        }
    }
    out.into_bytes()
}

/// A hosts.toml with the headers [`merge_credentials`] added taken out again: the rendered bytes.
pub fn strip_credentials(merged: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(merged);
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.starts_with("  [host.\"") && line.ends_with("\".header]") {
            if lines.peek().is_some_and(|next| next.starts_with("    authorization = \"")) {
                lines.next();
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.into_bytes()
}

/// The credentials of a hosts.toml (read from the node), by mirror `host[:port]`.
pub fn credentials(text: &str) -> BTreeMap<String, String> {
    let Ok(list) = endpoints(text) else { return BTreeMap::new() };
    list.into_iter()
        .filter_map(|e| {
            let host = e.url.trim_start_matches("https://").split('/').next()?.to_string();
            Some((host, e.authorization?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirrors_in_file_order_then_the_server_with_their_capabilities_and_credentials() {
        let text = "server = \"https://quay.io/v2\"\n\noverride_path = true\n\n\
             [host.\"https://m2.example.com:5000/v2\"]\n  capabilities = [\"pull\", \"resolve\"]\n  override_path = true\n\n\
             [host.\"https://m1.example.com/v2/redhat\"]\n  capabilities = [\"pull\"]\n  override_path = true\n  \
             [host.\"https://m1.example.com/v2/redhat\".header]\n    authorization = \"Basic dTpw\"\n";
        let e = endpoints(text).unwrap();
        let urls: Vec<(&str, bool, bool)> = e.iter().map(|e| (e.url.as_str(), e.pull, e.resolve)).collect();
        assert_eq!(
            urls,
            [
                ("https://m2.example.com:5000/v2", true, true),
                ("https://m1.example.com/v2/redhat", true, false),
                ("https://quay.io/v2", true, true)
            ]
        );
        assert_eq!(e[1].authorization.as_deref(), Some("Basic dTpw"));
        assert!(!format!("{e:?}").contains("dTpw"), "Debug never shows a credential");
        let rendered = text
            .replace("  [host.\"https://m1.example.com/v2/redhat\".header]\n    authorization = \"Basic dTpw\"\n", "");
        assert_eq!(String::from_utf8(strip_credentials(text.as_bytes())).unwrap(), rendered);
        let remerged =
            merge_credentials(rendered.as_bytes(), &|h| (h == "m1.example.com").then(|| "Basic dTpw".into()));
        assert_eq!(String::from_utf8(remerged).unwrap(), text);
        let creds = credentials(text);
        assert_eq!(creds.into_iter().collect::<Vec<_>>(), [("m1.example.com".to_string(), "Basic dTpw".to_string())]);
    }

    #[test]
    fn a_digest_only_fallback_keeps_its_capabilities_and_bad_files_are_errors() {
        let e = endpoints("server = \"https://m.example.com/v2/x\"\ncapabilities = [\"pull\"]\noverride_path = true\n")
            .unwrap();
        assert_eq!((e[0].pull, e[0].resolve), (true, false));
        let e = endpoints("server = \"https://r.example.com\"\n").unwrap();
        assert_eq!(e[0].url, "https://r.example.com/v2");
        assert!(endpoints("server = \"http://r.example.com\"\n").unwrap_err().contains("not https"));
        assert!(endpoints("server = [").unwrap_err().contains("not TOML"));
        assert_eq!(
            node_path("r.example.com:5000").unwrap().as_str(),
            r"C:\k\containerd\registries\r.example.com_5000_\hosts.toml"
        );
    }
}
