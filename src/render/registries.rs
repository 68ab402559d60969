//! containerd `hosts.toml` per mirrored registry host, byte for byte as ../shared/spec/registries.md fixes it.

use super::Artifact;
use crate::plan::Plan;
use crate::registries::{Mirror, RegistryHost, url};

pub fn render(plan: &Plan) -> Vec<Artifact> {
    let dir = wmrender_contract::NodePath::known(wmrender_contract::paths::CONTAINERD_REGISTRIES).bundle_path();
    plan.registries
        .iter()
        .map(|r| Artifact { path: format!("{dir}/{}/hosts.toml", r.dir()), bytes: hosts_toml(r).into_bytes() })
        .collect()
}

/// A TOML basic string. Inputs are validated to plain host and path characters; escaping still guarantees that
/// nothing can leave the quotes.
pub fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn capabilities(m: &Mirror) -> &'static str {
    if m.resolve { r#"["pull", "resolve"]"# } else { r#"["pull"]"# }
}

pub fn hosts_toml(r: &RegistryHost) -> String {
    let mut out = String::new();
    match (r.never_contact_source, r.mirrors.first()) {
        // The source must never be asked: the first mirror becomes the fallback `server`, with its own
        // capabilities so that a digest-only mirror does not resolve tags through the fallback either.
        (true, Some(first)) => {
            out.push_str(&format!("server = {}\n", toml_string(&url(&first.prefix))));
            out.push_str(&format!("capabilities = {}\n", capabilities(first)));
        }
        _ => out.push_str(&format!("server = {}\n", toml_string(&url(&r.host)))),
    }
    out.push_str("\noverride_path = true\n");
    // Hosts are tried in file order, `server` last. containerd 1.6 rejects a file without any [host] table;
    // `merge` never returns a host without mirrors.
    for m in &r.mirrors {
        let u = toml_string(&url(&m.prefix));
        out.push_str(&format!("\n[host.{u}]\n  capabilities = {}\n  override_path = true\n", capabilities(m)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(never: bool) -> RegistryHost {
        RegistryHost {
            host: "registry.redhat.io".into(),
            never_contact_source: never,
            mirrors: vec![
                Mirror { prefix: "m1.example.com/redhat".into(), resolve: false },
                Mirror { prefix: "m2.example.com:5000".into(), resolve: true },
            ],
        }
    }

    #[test]
    fn allow_contacting_source_exact_bytes() {
        assert_eq!(
            hosts_toml(&host(false)),
            "server = \"https://registry.redhat.io/v2\"\n\noverride_path = true\n\n\
             [host.\"https://m1.example.com/v2/redhat\"]\n  capabilities = [\"pull\"]\n  override_path = true\n\n\
             [host.\"https://m2.example.com:5000/v2\"]\n  capabilities = [\"pull\", \"resolve\"]\n  override_path = true\n"
        );
    }

    #[test]
    fn never_contact_source_exact_bytes() {
        assert_eq!(
            hosts_toml(&host(true)),
            "server = \"https://m1.example.com/v2/redhat\"\ncapabilities = [\"pull\"]\n\noverride_path = true\n\n\
             [host.\"https://m1.example.com/v2/redhat\"]\n  capabilities = [\"pull\"]\n  override_path = true\n\n\
             [host.\"https://m2.example.com:5000/v2\"]\n  capabilities = [\"pull\", \"resolve\"]\n  override_path = true\n"
        );
    }

    #[test]
    fn toml_strings_cannot_be_escaped_from() {
        assert_eq!(toml_string("a\"b\\c\nd"), r#""a\"b\\c\u000Ad""#);
    }
}
