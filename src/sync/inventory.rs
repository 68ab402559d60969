//! Which nodes `sync` talks to: the BYOH hosts of the rendered `windows-instances` ConfigMap, plus an optional
//! inventory file for everything else (Machine-backed nodes, staging hosts, non-default ports).

use super::profile::Profile;
use crate::diagnostics::{Diagnostic, Diagnostics, Loc};
use crate::inputs::yaml::{self, Fields, Located};
use std::path::Path;
use std::sync::Arc;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// A name for reports; the address when none is given.
    pub name: String,
    pub address: String,
    pub port: u16,
    pub user: String,
    pub profile: Profile,
}

/// The BYOH hosts of a rendered `cluster/configmap-windows-instances.yaml` (`address: username=<user>`).
pub fn from_configmap(text: &str) -> Result<Vec<Node>, String> {
    let cm: serde_json::Value = serde_saphyr::from_str(text).map_err(|e| format!("cannot read the ConfigMap: {e}"))?;
    let mut nodes = Vec::new();
    if let Some(data) = cm["data"].as_object() {
        for (address, value) in data {
            let user = value
                .as_str()
                .and_then(|v| v.strip_prefix("username="))
                .ok_or_else(|| format!("windows-instances entry `{address}` is not `username=<user>`"))?;
            nodes.push(Node {
                name: address.clone(),
                address: address.clone(),
                port: 22,
                user: user.to_string(),
                profile: Profile::Windows,
            });
        }
    }
    Ok(nodes)
}

/// Reads `--inventory nodes.yaml`:
/// ```yaml
/// nodes:
/// - address: 10.0.0.5        # required
///   name: win-a              # default: the address
///   port: 22                 # default 22
///   user: Administrator      # default Administrator
///   profile: windows         # windows (default) | posix
///   root: /srv/staging/win-a # posix only: where C:\ maps to
/// ```
pub fn load(path: &Path) -> Result<Vec<Node>, Diagnostics> {
    let file: Arc<str> = Arc::from(path.display().to_string());
    let mut diags = Diagnostics::default();
    let text = yaml::read_source(path, &file, &mut diags).map_err(|e| {
        let mut d = Diagnostics::default();
        d.push(Diagnostic::error(&Loc::file_only(&file), "", format!("cannot read the inventory: {e}")));
        d
    })?;
    let root = match yaml::parse(&file, &text) {
        Ok(n) => n,
        Err(e) => {
            diags.push(e);
            return Err(diags);
        }
    };
    let mut nodes = Vec::new();
    if let Some(mut f) = Fields::new(&root, "", &mut diags) {
        if let Some(list) = f.node("nodes") {
            if let yaml::Value::Seq(items) = &list.value {
                for (i, item) in items.iter().enumerate() {
                    if let Some(n) = node(item, &format!("nodes[{i}]"), &mut diags) {
                        nodes.push(n);
                    }
                }
            } else {
                diags.push(Diagnostic::error(&list.loc, "nodes", "expected a list of nodes"));
            }
        }
        f.finish(&mut diags);
    }
    let mut seen = std::collections::BTreeSet::new();
    for n in &nodes {
        if !seen.insert(n.name.clone()) {
            diags.push(
                Diagnostic::error(&Loc::file_only(&file), "nodes", format!("node name `{}` is used twice", n.name))
                    .hint("give each node a unique `name`"),
            );
        }
    }
    if diags.has_errors() { Err(diags) } else { Ok(nodes) }
}

fn node(item: &yaml::Node, field: &str, diags: &mut Diagnostics) -> Option<Node> {
    let mut f = Fields::new(item, field, diags)?;
    let address: Option<Located<String>> = f.req("address", "the node's IPv4 address or DNS name", diags);
    let name: Option<String> = f.opt("name", diags);
    let port: Option<u16> = f.opt("port", diags);
    let user: Option<String> = f.opt("user", diags);
    let profile: Option<Located<String>> = f.opt("profile", diags);
    let root: Option<Located<String>> = f.opt("root", diags);
    let at = f.at();
    f.finish(diags);
    let address = address?;
    let profile = match (profile.as_ref().map(|p| p.as_str()), root) {
        (None | Some("windows"), None) => Profile::Windows,
        (None | Some("windows"), Some(r)) => {
            diags.push(r.error("`root` is only for the posix profile").expected("no root with the windows profile"));
            return None;
        }
        (Some("posix"), Some(r)) if r.starts_with('/') && !r.contains("..") => Profile::Posix { root: r.value.clone() },
        (Some("posix"), Some(r)) => {
            diags.push(
                r.error("the posix root must be an absolute path without `..`").expected("e.g. /srv/staging/win-a"),
            );
            return None;
        }
        (Some("posix"), None) => {
            diags.push(at.error("a posix node needs `root`").expected("the directory that stands for C:\\"));
            return None;
        }
        (Some(other), _) => {
            let p = profile.as_ref()?;
            diags.push(p.error(format!("unknown profile `{other}`")).expected("windows or posix"));
            return None;
        }
    };
    Some(Node {
        name: name.unwrap_or_else(|| address.value.clone()),
        address: address.value,
        port: port.unwrap_or(22),
        user: user.unwrap_or_else(|| "Administrator".into()),
        profile,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configmap_entries_become_windows_nodes() {
        let cm =
            "apiVersion: v1\nkind: ConfigMap\ndata:\n  \"10.1.42.1\": username=Administrator\n  win-b: username=capi\n";
        let nodes = from_configmap(cm).unwrap();
        assert_eq!(nodes.len(), 2);
        assert_eq!((nodes[1].address.as_str(), nodes[1].user.as_str(), nodes[1].port), ("win-b", "capi", 22));
    }
}
