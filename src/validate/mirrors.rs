//! Mirror entries: the openshift/api patterns for sources and mirrors, the policy enum, names that could become
//! unsafe paths, and the registries spec's warnings (including a pause image no mirror can serve).

use super::checked::DEFAULT_PAUSE_IMAGE;
use crate::diagnostics::Diagnostics;
use crate::inputs::Loaded;
use crate::registries::{self, ALLOW_CONTACTING_SOURCE, NEVER_CONTACT_SOURCE};
use regex::Regex;
use std::sync::LazyLock;

// The kubebuilder patterns of ImageDigestMirrors / ImageTagMirrors (openshift/api config/v1): host[:port] then
// lower-case path components; no scheme, tag or digest. The source may also be a `*.host` wildcard.
const HOST: &str = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))+)?(?::[0-9]+)?";
const PATH: &str = r"(?:(?:/[a-z0-9]+(?:(?:(?:[._]|__|[-]*)[a-z0-9]+)+)?)+)?";
const WILDCARD: &str = r"\*(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))+";

static MIRROR: LazyLock<Regex> = LazyLock::new(|| Regex::new(&format!("^(?:{HOST}){PATH}$")).expect("a valid pattern"));
static SOURCE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!("^{WILDCARD}$|^(?:{HOST}){PATH}$")).expect("a valid pattern"));

/// Returns the registry hosts, merged once here, unless an entry is invalid.
pub fn check(loaded: &Loaded, d: &mut Diagnostics) -> Option<Vec<registries::RegistryHost>> {
    let mut valid = true;
    for set in &loaded.mirror_sets {
        for e in &set.entries {
            if !SOURCE.is_match(&e.source) {
                valid = false;
                d.push(
                    e.source
                        .error(format!("`{}` is not a registry source", e.source.value.escape_debug()))
                        .expected("host[:port] then optional /path components, lower-case; no scheme, tag or digest (e.g. registry.redhat.io/ubi9)")
                        .hint(hint(&e.source)),
                );
            } else if let Some(why) = host_problem(registries::registry(&e.source)) {
                valid = false;
                d.push(
                    e.source
                        .error(format!("`{}` is not a registry source: {why}", e.source.value.escape_debug()))
                        .expected("a registry host name of at most 253 characters (labels of at most 63), and a port from 1 to 65535"),
                );
            } else if !registries::registry(&e.source).starts_with("*.")
                && let Some(why) = registries::dir_problem(registries::registry(&e.source))
            {
                valid = false;
                d.push(e.source.error(why).expected(format!(
                    "letters, digits, `.`, `-` and a :port, at most {} characters with the port",
                    registries::MAX_NAME - 2
                )));
            }
            for m in &e.mirrors {
                if !MIRROR.is_match(m) {
                    valid = false;
                    d.push(
                        m.error(format!("`{}` is not a mirror location", m.value.escape_debug()))
                            .expected("host[:port] then optional /path components, lower-case; no scheme, tag, digest or wildcard")
                            .hint(hint(m)),
                    );
                } else if let Some(why) = host_problem(registries::registry(m)) {
                    valid = false;
                    d.push(
                        m.error(format!("`{}` is not a mirror location: {why}", m.value.escape_debug()))
                            .expected("a registry host name of at most 253 characters (labels of at most 63), and a port from 1 to 65535"),
                    );
                }
            }
            if let Some(p) = &e.mirror_source_policy
                && !matches!(p.as_str(), NEVER_CONTACT_SOURCE | ALLOW_CONTACTING_SOURCE)
            {
                valid = false;
                d.push(
                    p.error(format!("unknown mirrorSourcePolicy `{}`", p.value.escape_debug()))
                        .expected("AllowContactingSource or NeverContactSource"),
                );
            }
        }
    }
    if !valid {
        return None; // the merge warnings would only repeat the errors
    }
    let (hosts, warnings) = registries::merge(&loaded.mirror_sets);
    d.extend(warnings);
    check_pause_image(loaded, &hosts, d);
    Some(hosts)
}

/// Why a registry host (`host[:port]`, or `*.domain` for a source) cannot be used, if it cannot: the host
/// names a directory on the node and goes into URLs, so DNS's length limits and a real port apply.
fn host_problem(host: &str) -> Option<String> {
    let host = host.strip_prefix("*.").unwrap_or(host);
    super::names::check_host_port(host).err()
}

fn hint(v: &crate::inputs::yaml::Located<String>) -> String {
    if let Some(c) = v.chars().find(|c| !c.is_ascii()) {
        format!("`{c}` (U+{:04X}) is not ASCII: registry names are plain ASCII letters, digits, `.`, `-`", c as u32)
    } else if v.contains("://") {
        "leave out the scheme: mirrors are always reached over https".into()
    } else if v.contains('@') || v.rsplit('/').next().is_some_and(|last| last.contains(':')) {
        "leave out the tag or digest: a mirror names a repository".into()
    } else {
        "path components are lower-case letters and digits separated by `.`, `_`, `__` or `-`".into()
    }
}

/// Disconnected clusters must mirror the pause image: warn when its registry has mirrors but no entry covers it.
fn check_pause_image(loaded: &Loaded, hosts: &[registries::RegistryHost], d: &mut Diagnostics) {
    let spec = &loaded.inputs.spec;
    let image = spec.pause_image.as_ref().map(|p| p.as_str()).unwrap_or(DEFAULT_PAUSE_IMAGE);
    let repo = image.split('@').next().unwrap_or(image);
    let repo = match repo.rsplit_once(':') {
        Some((r, tag)) if !tag.contains('/') => r,
        _ => repo,
    };
    let Some(host) = repo.split('/').next() else { return };
    if !hosts.iter().any(|h| h.host == host) {
        return;
    }
    let covered = loaded.mirror_sets.iter().flat_map(|s| &s.entries).any(|e| {
        let src = e.source.as_str();
        (repo == src || repo.starts_with(&format!("{src}/")))
            && e.mirrors.iter().any(|m| m.as_str() != src && registries::faithful_prefix(src, m).is_some())
    });
    if !covered {
        // Point at the pause image if written, else at the first entry for its registry: where the fix goes.
        let first_on_host =
            loaded.mirror_sets.iter().flat_map(|s| &s.entries).find(|e| e.source.split('/').next() == Some(host));
        let mut w = match (&spec.pause_image, first_on_host) {
            (Some(p), _) => p.warning(String::new()),
            (None, Some(e)) => e.source.warning(String::new()),
            (None, None) => spec.platform.warning(String::new()),
        };
        w.message = format!(
            "`{host}` has mirrors, but none serves the pause image `{image}`; Windows nodes in a disconnected cluster cannot start pods"
        );
        d.push(w.expected(format!("a mirror entry whose source covers `{repo}`")).hint(format!(
            "add e.g. an ImageTagMirrorSet entry with source `{repo}` and a mirror ending in `{}`",
            &repo[host.len()..]
        )));
    }
}
