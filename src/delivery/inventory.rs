//! Which nodes `sync` talks to: the BYOH hosts of the rendered `windows-instances` ConfigMap, plus an optional
//! inventory file for everything else (Machine-backed nodes, staging hosts, non-default ports).

use super::profile::Profile;
use crate::diagnostics::{Diagnostic, Diagnostics, Loc};
use crate::inputs::yaml::{self, Fields, Located};
use crate::validate::{has_control_chars, is_dns1123_subdomain};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::sync::Arc;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// A name for reports (the Machine's name for a Machine's instance); the address when none is given. The
    /// Kubernetes node name is the one the agent computes on the host (`NodeReport::node_name`).
    pub name: String,
    pub address: String,
    pub port: u16,
    pub user: String,
    pub profile: Profile,
    /// The Windows Machine whose instance this is (`openshift-machine-api/<name>`), for Machine-backed nodes.
    pub machine: Option<String>,
    /// An inventory entry with `reachOnly: true`: only how to reach a host the cluster or the render names at its
    /// address (a Windows Machine's instance, a BYOH host): port, user, profile; without such a host it is no node.
    pub reach_only: bool,
}

/// The BYOH hosts of a rendered `cluster/configmap-windows-instances.yaml` (`address: username=<user>`), `file`
/// naming it in messages. The render validated these; the rendered directory is checked again because it is a file
/// on disk: each problem points at its line and entry.
pub fn from_configmap(file: &str, text: &str) -> Result<Vec<Node>, Diagnostics> {
    let file: Arc<str> = Arc::from(file);
    let mut diags = Diagnostics::default();
    let text: Arc<str> = Arc::from(text);
    diags.add_source(&file, &text);
    let root = match yaml::parse(&file, &text) {
        Ok(root) => root,
        Err(d) => {
            diags.push(d);
            return Err(diags);
        }
    };
    let data = root.child("data").map(|d| &d.value);
    let data = match data {
        Some(yaml::Value::Map(data)) => data.as_slice(),
        _ => &[],
    };
    let mut nodes = Vec::new();
    for (key, value) in data {
        let address = &key.name;
        let field = format!("data[\"{}\"]", address.escape_debug());
        let user = match &value.value {
            yaml::Value::Str(v) => v.strip_prefix("username="),
            _ => None,
        };
        let Some(user) = user else {
            diags.push(
                Diagnostic::error(&value.loc, &field, "a windows-instances entry is not `username=<user>`")
                    .expected("username=<user>, as WMCO reads it"),
            );
            continue;
        };
        // A BYOH host's user is checked by the rule validation applied when it was rendered.
        let byoh_user = crate::validate::names::check_byoh_user_name(user)
            .err()
            .map(|why| format!("the user `{}` {why}", user.escape_debug()));
        let address = address_problem(address).map(|p| format!("the address {p}"));
        let mut ok = true;
        for (problem, loc) in [(address, &key.loc), (byoh_user, &value.loc)] {
            if let Some(p) = problem {
                diags.push(Diagnostic::error(loc, &field, p));
                ok = false;
            }
        }
        let address = &key.name;
        if ok {
            nodes.push(Node {
                name: address.to_string(),
                address: address.to_string(),
                port: 22,
                user: user.to_string(),
                profile: Profile::Windows,
                machine: None,
                reach_only: false,
            });
        }
    }
    if diags.has_errors() { Err(diags) } else { Ok(nodes) }
}

/// A value read from the cluster that wmrender will not connect with: which one, as written, and why.
#[derive(Debug, thiserror::Error)]
#[error("the {what} `{}` {problem}", value.escape_debug())]
pub struct RefusedNode {
    pub what: &'static str,
    pub value: String,
    pub problem: String,
}

/// A Windows Machine's instance, named after the Machine, checked by the same rules as an inventory entry: the
/// cluster is untrusted input.
pub fn machine_node(machine: &str, address: &str, user: &str) -> Result<Node, RefusedNode> {
    for (what, value, problem) in [
        ("Machine name", machine, name_problem(machine)),
        ("address", address, address_problem(address)),
        ("user", user, user_problem(user)),
    ] {
        if let Some(problem) = problem {
            return Err(RefusedNode { what, value: value.to_string(), problem });
        }
    }
    Ok(Node {
        name: machine.into(),
        address: address.into(),
        port: 22,
        user: user.into(),
        profile: Profile::Windows,
        machine: Some(machine.into()),
        reach_only: false,
    })
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
    let text = match yaml::read_source(path, &file, &mut diags) {
        Ok(text) => text,
        Err(e) => {
            diags.push(e.diagnostic("the inventory", &Loc::file_only(&file), ""));
            return Err(diags);
        }
    };
    let root = match yaml::parse(&file, &text) {
        Ok(n) => n,
        Err(e) => {
            diags.push(e);
            return Err(diags);
        }
    };
    let mut nodes = Vec::new();
    if let Some(mut f) = Fields::new(root, "", &mut diags) {
        if let Some(list) = f.node("nodes") {
            if let yaml::Value::Seq(items) = list.value {
                for (i, item) in items.into_iter().enumerate() {
                    let field = format!("nodes[{i}]");
                    let at = Located { value: (), loc: item.loc.clone(), field: field.as_str().into() };
                    if let Some(n) = node(item, &field, &mut diags) {
                        nodes.push((n, at));
                    }
                }
            } else {
                diags.push(Diagnostic::error(&list.loc, "nodes", "expected a list of nodes"));
            }
        }
        f.finish(&mut diags);
    }
    duplicate_names(&nodes, &mut diags);
    if diags.has_errors() { Err(diags) } else { Ok(nodes.into_iter().map(|(n, _)| n).collect()) }
}

/// One error per name given to more than one node, at its second entry, with where the others are.
fn duplicate_names(nodes: &[(Node, Located<()>)], diags: &mut Diagnostics) {
    let mut by_name: std::collections::HashMap<&str, Vec<&Located<()>>> = std::collections::HashMap::new();
    let mut order = Vec::new();
    for (node, at) in nodes {
        let places = by_name.entry(&node.name).or_default();
        if places.len() == 1 {
            order.push(node.name.as_str());
        }
        places.push(at);
    }
    for name in order {
        let places = &by_name[name];
        let lines: Vec<String> = places.iter().take(6).map(|p| p.loc.line.to_string()).collect();
        let more = if places.len() > 6 { format!(" and {} more", places.len() - 6) } else { String::new() };
        diags.push(
            places[1]
                .error(format!(
                    "node name `{name}` is given to {} nodes (lines {}{more})",
                    places.len(),
                    lines.join(", ")
                ))
                .expected("each node's name once (the name defaults to the address)")
                .hint("give each node a unique `name`"),
        );
    }
}

fn node(item: yaml::Node, field: &str, diags: &mut Diagnostics) -> Option<Node> {
    let mut f = Fields::new(item, field, diags)?;
    let address: Option<Located<String>> = f.req("address", "the node's IP address or DNS name", diags);
    let name: Option<Located<String>> = f.opt("name", diags);
    let port = f.node("port").map(|n| (n, f.path("port")));
    let user: Option<Located<String>> = f.opt("user", diags);
    let profile: Option<Located<String>> = f.opt("profile", diags);
    let root: Option<Located<String>> = f.opt("root", diags);
    let reach_only: Option<Located<bool>> = f.opt("reachOnly", diags);
    let at = f.at();
    f.finish(diags);
    // Every value is checked before any node is contacted, so a bad line never fails a rollout half-way.
    let mut ok = true;
    let mut check = |value: Option<&Located<String>>, problem: fn(&str) -> Option<String>, expected: &str| {
        if let Some(v) = value
            && let Some(p) = problem(v)
        {
            diags.push(v.error(format!("`{}` {p}", v.value.escape_debug())).expected(expected.to_string()));
            ok = false;
        }
    };
    check(address.as_ref(), address_problem, "an IPv4 or IPv6 address, or a DNS name such as win-a.example.com");
    check(user.as_ref(), user_problem, USER_EXPECTED);
    check(name.as_ref(), name_problem, "letters, digits, `.`, `_`, `:` and `-`, starting with a letter or digit");
    let port = match port {
        None => 22,
        Some((n, path)) => match &n.value {
            yaml::Value::Int(p @ 1..=65535, _) => *p as u16,
            other => {
                let shown = match other {
                    yaml::Value::Int(i, _) => i.to_string(),
                    yaml::Value::Str(s) => format!("\"{}\"", s.escape_debug()),
                    _ => n.plain().unwrap_or("this value").to_string(),
                };
                diags.push(
                    Diagnostic::error(&n.loc, &path, format!("{shown} is not a TCP port"))
                        .expected("a whole number from 1 to 65535"),
                );
                ok = false;
                22
            }
        },
    };
    let address = address?;
    let profile = match (profile.as_ref().map(|p| p.as_str()), root) {
        (None | Some("windows"), None) => Profile::Windows,
        (None | Some("windows"), Some(r)) => {
            diags.push(r.error("`root` is only for the posix profile").expected("no root with the windows profile"));
            return None;
        }
        (Some("posix"), Some(r)) if r.starts_with('/') && !r.contains("..") && !has_control_chars(&r) => {
            Profile::Posix { root: r.value.clone() }
        }
        (Some("posix"), Some(r)) => {
            diags.push(
                r.error("the posix root must be an absolute path without `..` or control characters")
                    .expected("e.g. /srv/staging/win-a"),
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
    if !ok {
        return None;
    }
    Some(Node {
        name: name.map(|n| n.value).unwrap_or_else(|| address.value.clone()),
        address: address.value,
        port,
        user: user.map(|u| u.value).unwrap_or_else(|| "Administrator".into()),
        profile,
        machine: None,
        reach_only: reach_only.is_some_and(|f| f.value),
    })
}

/// What is wrong with a node address, if anything: it must be an IP address or a DNS name. That is stricter than
/// OpenSSH 9.6, which refuses a leading `-`, whitespace, control characters and the shell metacharacters
/// ``'`"$\;&<>|(){}`` in host names; none of those can occur in an address or DNS name.
pub(crate) fn address_problem(address: &str) -> Option<String> {
    if address.parse::<Ipv4Addr>().is_ok() || address.parse::<Ipv6Addr>().is_ok() {
        return None;
    }
    let lower = address.to_ascii_lowercase();
    let name = lower.strip_suffix('.').unwrap_or(&lower);
    let numeric = name.rsplit('.').next().is_some_and(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()));
    if address.is_empty() {
        Some("is empty".into())
    } else if address.starts_with('-') {
        Some("starts with `-` (ssh would read it as an option)".into())
    } else if numeric {
        Some("is not a valid IPv4 address".into())
    } else if !is_dns1123_subdomain(name) {
        Some("is not an IP address or DNS name".into())
    } else {
        None
    }
}

const USER_EXPECTED: &str = "a user name without control characters or any of ' ` \" ; & < > | ( ) { }, not starting \
with `-`, e.g. Administrator";

/// What is wrong with a login name, if anything: OpenSSH's rules (one place: `validate::names`).
pub(crate) fn user_problem(user: &str) -> Option<String> {
    crate::validate::names::ssh_user_problem(user)
}

/// What is wrong with a node name (shown in reports and progress), if anything.
fn name_problem(name: &str) -> Option<String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-');
    if name.is_empty() {
        Some("is empty".into())
    } else if name.len() > 253 {
        Some("is longer than 253 characters".into())
    } else if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        Some("does not start with a letter or digit".into())
    } else {
        name.chars().find(|c| !allowed(*c)).map(|c| format!("contains `{}`", c.escape_debug()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configmap_entries_become_windows_nodes() {
        let cm =
            "apiVersion: v1\nkind: ConfigMap\ndata:\n  \"10.1.42.1\": username=Administrator\n  win-b: username=capi\n";
        let nodes = from_configmap("cm.yaml", cm).unwrap();
        assert_eq!(nodes.len(), 2);
        assert_eq!((nodes[1].address.as_str(), nodes[1].user.as_str(), nodes[1].port), ("win-b", "capi", 22));
    }

    /// A bad entry is pointed at by file, line and entry, with what is wrong.
    #[test]
    fn bad_configmap_entries_point_at_their_line() {
        let cm = "kind: ConfigMap\ndata:\n  win-a: username=a\n  \"-oProxyCommand=x\": username=a\n  win-c: capi\n";
        let diags = from_configmap("out/cluster/cm.yaml", cm).unwrap_err();
        let shown = diags.render_human();
        assert!(shown.contains("out/cluster/cm.yaml:4:3"), "{shown}");
        assert!(
            shown.contains("data[\"-oProxyCommand=x\"]") && shown.contains("the address starts with `-`"),
            "{shown}"
        );
        assert!(shown.contains("out/cluster/cm.yaml:5:10") && shown.contains("username=<user>"), "{shown}");
    }

    #[test]
    fn addresses_users_and_names() {
        for good in ["10.0.0.5", "::1", "fe80::1", "win-a.example.com", "WIN-A", "win-a.example.com."] {
            assert_eq!(address_problem(good), None, "{good}");
        }
        for bad in ["", "-oProxyCommand=id", "a;b", "$(reboot)", "a b", "10.0.0.256", "a\nb", "host_1", "a..b"] {
            assert!(address_problem(bad).is_some(), "{bad}");
        }
        for good in ["Administrator", "capi", "DOMAIN\\user", "user@example.com", "Jane Doe", "svc$"] {
            assert_eq!(user_problem(good), None, "{good}");
        }
        for bad in ["", "-oProxyCommand=x", "a;b", "a`id`", "a|b", "a\nb", "a -x", "trail\\", "a'b", " a"] {
            assert!(user_problem(bad).is_some(), "{bad}");
        }
        assert_eq!(name_problem("node-01.lab"), None);
        for bad in ["", "-x", "a b", "a;b", "a\u{7}"] {
            assert!(name_problem(bad).is_some(), "{bad}");
        }
    }
}
