//! The registries spec (../shared/spec/registries.md): from IDMS/ITMS entries to one containerd host
//! configuration per registry host. Pure: the plan uses the configurations, validation the warnings.

use crate::diagnostics::Diagnostics;
use crate::inputs::mirrors::{MirrorKind, MirrorSet};
use crate::inputs::schema::MirrorEntry;
use crate::inputs::yaml::Located;
use std::collections::BTreeMap;

pub const NEVER_CONTACT_SOURCE: &str = "NeverContactSource";
pub const ALLOW_CONTACTING_SOURCE: &str = "AllowContactingSource";

/// containerd's host configuration for one registry host: `registries/<dir>/hosts.toml`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistryHost {
    /// `host[:port]` of the sources.
    pub host: String,
    pub never_contact_source: bool,
    /// Mirror prefixes in priority order; never empty.
    pub mirrors: Vec<Mirror>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mirror {
    /// `host[:port][/path]`: containerd appends the pulled image's repository path to it.
    pub prefix: String,
    /// Listed by an ImageTagMirrorSet on this host: may resolve tags, not only serve digests.
    pub resolve: bool,
}

impl RegistryHost {
    /// containerd on Windows looks for `host_port_` first (`:` is illegal in NTFS names).
    pub fn dir(&self) -> String {
        dir_for(&self.host)
    }
}

pub use wmrender_contract::hosts_toml::dir_for;

/// A directory name is safe when it cannot climb out of, or reach beside, the registries directory.
pub fn is_safe_dir(dir: &str) -> bool {
    !dir.is_empty()
        && dir != "."
        && dir != ".."
        && dir.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
}

/// The longest name a file or directory may have: 255 on NTFS and on the file systems a render is written to.
pub const MAX_NAME: usize = 255;

/// Why `host` (`host[:port]`) cannot have its `hosts.toml` directory on the node, if it cannot: a name that could
/// leave the registries directory, or one too long to be a file name (a 250-character host with a port). The name
/// is not shortened: containerd looks the directory up by exactly this name.
pub fn dir_problem(host: &str) -> Option<String> {
    // The name [`dir_for`] gives, judged without being built (every source of every mirror entry comes here):
    // `host_port_` is safe when the host and the port are (`_` is), and one character longer than `host:port`.
    let safe = |s: &str| s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
    let (name, port) = match host.bytes().rposition(|b| b == b':') {
        Some(i) => (&host[..i], Some(&host[i + 1..])),
        None => (host, None),
    };
    let (is_safe, dir_len) = match port {
        Some(port) => (safe(name) && safe(port), host.len() + 1),
        None => (is_safe_dir(host), host.len()),
    };
    if !is_safe {
        Some(format!("registry host `{host}` cannot name a directory on the node"))
    } else if dir_len > MAX_NAME {
        let start: String = host.chars().take(20).collect();
        Some(format!(
            "registry host `{start}…` needs a directory named by its {} characters and port on the node ({dir_len} \
             characters, as containerd looks it up), where a file name holds at most {MAX_NAME}",
            name.len(),
        ))
    } else {
        None
    }
}

/// `https://<host[:port]>/v2[/<path>]`.
pub fn url(prefix: &str) -> String {
    match prefix.split_once('/') {
        Some((host, path)) => format!("https://{host}/v2/{path}"),
        None => format!("https://{prefix}/v2"),
    }
}

/// `(registry, path)` of `registry[/path]`, split at the first `/`. Byte by byte: this runs for every mirror of
/// every entry, and the search `str::split_once` makes is built for long text (several times the cost on a
/// registry name).
fn split(source: &str) -> (&str, &str) {
    match source.bytes().position(|b| b == b'/') {
        Some(i) => (&source[..i], &source[i + 1..]),
        None => (source, ""),
    }
}

/// The registry (`host[:port]`, or a `*.domain` wildcard) of a source or mirror: the text before its first `/`.
pub fn registry(location: &str) -> &str {
    split(location).0
}

/// What containerd would request for images under `source` if `mirror` (not faithful) were written anyway, the
/// way WMCO does: the mirror less the path components it shares at the end with the source, then the source path.
fn would_request(source_path: &str, mirror: &str) -> String {
    let (mhost, mpath) = split(mirror);
    let mut m: Vec<&str> = mpath.split('/').filter(|s| !s.is_empty()).collect();
    let mut s: Vec<&str> = source_path.split('/').filter(|s| !s.is_empty()).collect();
    while let (Some(a), Some(b)) = (m.last(), s.last()) {
        if a != b {
            break;
        }
        m.pop();
        s.pop();
    }
    let prefix = std::iter::once(mhost).chain(m).collect::<Vec<_>>().join("/");
    format!("{prefix}/{source_path}")
}

/// The prefix containerd must be given for `mirror` to serve exactly the images of `source` (the mirror less the
/// source's repository path), or `None` when the mirror does not end with that path (not faithful).
pub fn faithful_prefix<'m>(source: &str, mirror: &'m str) -> Option<&'m str> {
    let (_, path) = split(source);
    if path.is_empty() {
        return Some(mirror);
    }
    mirror.strip_suffix(path).and_then(|rest| rest.strip_suffix('/')).filter(|rest| !rest.is_empty())
}

struct HostAcc<'a> {
    mirrors: Vec<Mirror>,
    never: Option<Located<String>>,
    /// The repository paths of the entries on this host, borrowed: only counted.
    sources: Vec<&'a str>,
}

/// Merges every entry into one configuration per registry host, in the spec's order, with the warnings the spec
/// asks for. Entries that validation rejects must not reach here; anything malformed is skipped, never a panic.
pub fn merge(sets: &[MirrorSet]) -> (Vec<RegistryHost>, Diagnostics) {
    let mut warnings = Diagnostics::default();
    let mut hosts: BTreeMap<&str, HostAcc> = BTreeMap::new();
    for set in sets {
        for entry in &set.entries {
            add_entry(entry, set.kind, &mut hosts, &mut warnings);
        }
    }
    let mut out = Vec::new();
    for (host, acc) in hosts {
        // Counted only where a warning needs it.
        let distinct_sources = || {
            let mut s = acc.sources.clone();
            s.sort_unstable();
            s.dedup();
            s.len()
        };
        match (&acc.never, acc.mirrors.is_empty()) {
            (Some(never), true) => warnings.push(
                never
                    .warning(format!(
                        "NeverContactSource for `{host}` has no mirror usable on Windows nodes; they will pull from `{host}`"
                    ))
                    .expected("at least one faithful mirror for this registry")
                    .hint("a mirror is usable when it ends with the source's repository path"),
            ),
            (Some(never), false) if distinct_sources() > 1 => warnings.push(
                never
                    .warning(format!(
                        "on Windows nodes NeverContactSource covers every image of `{host}`, not only this source"
                    ))
                    .expected("one policy per registry host")
                    .hint("containerd configures mirrors per registry host; the other sources on this host lose their fallback too"),
            ),
            _ => {}
        }
        if !acc.mirrors.is_empty() {
            let host = host.to_string();
            out.push(RegistryHost { host, never_contact_source: acc.never.is_some(), mirrors: acc.mirrors });
        }
    }
    (out, warnings)
}

fn add_entry<'a>(
    entry: &'a MirrorEntry,
    kind: MirrorKind,
    hosts: &mut BTreeMap<&'a str, HostAcc<'a>>,
    warnings: &mut Diagnostics,
) {
    let source = entry.source.as_str();
    if source.starts_with("*.") {
        warnings.push(
            entry
                .source
                .warning(format!("wildcard source `{source}` is left out of the Windows nodes' mirror configuration"))
                .expected("an exact registry host")
                .hint("containerd matches registry hosts exactly; list each host the nodes pull from"),
        );
        return;
    }
    let (host, path) = split(source);
    let acc = hosts.entry(host).or_insert_with(|| HostAcc { mirrors: Vec::new(), never: None, sources: Vec::new() });
    acc.sources.push(path);
    if let Some(p) = &entry.mirror_source_policy
        && p.as_str() == NEVER_CONTACT_SOURCE
        && acc.never.is_none()
    {
        acc.never = Some((**p).clone());
    }
    for mirror in &entry.mirrors {
        let m = mirror.as_str();
        if m == source {
            continue; // a mirror equal to its source adds nothing
        }
        let Some(prefix) = faithful_prefix(source, m) else {
            warnings.push(
                mirror
                    .warning(format!(
                        "mirror `{m}` is left out of the Windows nodes' configuration: containerd would pull `{source}` from `{}`",
                        would_request(path, m)
                    ))
                    .expected(format!("a mirror ending with `/{path}`, the source's repository path"))
                    .hint("containerd appends the image's full repository path to a mirror; mirror the same path"),
            );
            continue;
        };
        match acc.mirrors.iter_mut().find(|x| x.prefix == prefix) {
            Some(existing) => existing.resolve |= kind == MirrorKind::Tag,
            None => acc.mirrors.push(Mirror { prefix: prefix.to_string(), resolve: kind == MirrorKind::Tag }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostics::Loc;

    fn at<T>(value: T) -> Located<T> {
        Located { value, loc: Loc { file: "t".into(), line: 1, column: 1 }, field: "f".into() }
    }

    fn entry(source: &str, mirrors: &[&str], policy: Option<&str>) -> MirrorEntry {
        MirrorEntry {
            source: at(source.to_string()),
            mirrors: mirrors.iter().map(|m| at(m.to_string())).collect(),
            mirror_source_policy: policy.map(|p| Box::new(at(p.to_string()))),
        }
    }

    fn set(kind: MirrorKind, entries: Vec<MirrorEntry>) -> MirrorSet {
        MirrorSet { kind, name: String::new(), entries }
    }

    #[test]
    fn faithful_mirrors_keep_priority_and_prefixes() {
        let (hosts, w) = merge(&[set(
            MirrorKind::Digest,
            vec![entry(
                "registry.redhat.io/ubi9/ubi",
                &["m1.example.com/redhat/ubi9/ubi", "m2.example.com:5000/ubi9/ubi"],
                None,
            )],
        )]);
        assert!(w.is_empty());
        assert_eq!(hosts.len(), 1);
        let prefixes: Vec<&str> = hosts[0].mirrors.iter().map(|m| m.prefix.as_str()).collect();
        assert_eq!(prefixes, ["m1.example.com/redhat", "m2.example.com:5000"]);
        assert_eq!(url("m1.example.com/redhat"), "https://m1.example.com/v2/redhat");
        assert_eq!(url("m2.example.com:5000"), "https://m2.example.com:5000/v2");
    }

    #[test]
    fn unfaithful_mirror_is_left_out_with_the_path_containerd_would_request() {
        let (hosts, w) = merge(&[set(
            MirrorKind::Digest,
            vec![entry("registry.access.redhat.com/ubi9/ubi-minimal", &["example.io/example/ubi-minimal"], None)],
        )]);
        assert!(hosts.is_empty());
        let msg = &w.sorted()[0].message;
        assert!(msg.contains("`example.io/example/ubi9/ubi-minimal`"), "{msg}");
    }

    #[test]
    fn merge_keeps_first_position_and_ors_resolve() {
        let (hosts, _) = merge(&[
            set(MirrorKind::Digest, vec![entry("q.io/a", &["m1.io/a", "m2.io/a"], None)]),
            set(MirrorKind::Tag, vec![entry("q.io/b", &["m2.io/b", "m3.io/b"], None)]),
        ]);
        let got: Vec<(&str, bool)> = hosts[0].mirrors.iter().map(|m| (m.prefix.as_str(), m.resolve)).collect();
        assert_eq!(got, [("m1.io", false), ("m2.io", true), ("m3.io", true)]);
    }

    #[test]
    fn never_contact_source_wins_and_is_widened_with_a_warning() {
        let (hosts, w) = merge(&[set(
            MirrorKind::Digest,
            vec![entry("q.io/a", &["m.io/a"], None), entry("q.io/b", &["m.io/b"], Some(NEVER_CONTACT_SOURCE))],
        )]);
        assert!(hosts[0].never_contact_source);
        assert!(w.sorted()[0].message.contains("covers every image"));
    }

    #[test]
    fn wildcards_and_self_mirrors_produce_no_file() {
        let (hosts, w) = merge(&[set(
            MirrorKind::Digest,
            vec![entry("*.redhat.io", &["m.io"], None), entry("q.io/a", &["q.io/a"], None)],
        )]);
        assert!(hosts.is_empty());
        assert_eq!(w.sorted().len(), 1, "only the wildcard warns; a mirror equal to its source is silent");
    }

    #[test]
    fn a_whole_registry_source_takes_the_mirror_as_prefix() {
        let (hosts, w) = merge(&[set(MirrorKind::Tag, vec![entry("quay.io", &["mirror.io:5000/quay"], None)])]);
        assert!(w.is_empty());
        assert_eq!(hosts[0].mirrors, [Mirror { prefix: "mirror.io:5000/quay".into(), resolve: true }]);
    }

    #[test]
    fn never_contact_source_without_a_usable_mirror_warns_and_renders_nothing() {
        let (hosts, w) =
            merge(&[set(MirrorKind::Digest, vec![entry("q.io/a/b", &["m.io/x"], Some(NEVER_CONTACT_SOURCE))])]);
        assert!(hosts.is_empty());
        let messages: Vec<&str> = w.sorted().iter().map(|d| d.message.as_str()).collect();
        assert!(messages.iter().any(|m| m.contains("has no mirror usable on Windows nodes")), "{messages:?}");
    }

    #[test]
    fn host_port_directories() {
        assert_eq!(dir_for("mirror.example.com:5000"), "mirror.example.com_5000_");
        assert_eq!(dir_for("quay.io"), "quay.io");
        assert!(!is_safe_dir(".."));
        assert!(!is_safe_dir("C:"));
        assert!(!is_safe_dir("a/b"));
        assert!(is_safe_dir("127.0.0.1_5000_"));
        let long = format!("{}.io", "a.".repeat(124));
        assert_eq!(dir_problem(&long), None);
        assert!(dir_problem(&format!("{long}:65535")).is_some_and(|p| p.contains("at most 255")));
    }

    /// `dir_problem` judges the name without building it: the same verdict as building it with `dir_for`.
    #[test]
    fn dir_problem_judges_the_name_dir_for_gives() {
        let long = "a".repeat(254);
        let hosts =
            ["", ":", "::", ".", "..", ".:1", "a:b:c", "a b", "x:5000", "[::1]:5000", "é:1", "a/b:1", "_:_", &long];
        for host in hosts.iter().copied().chain([format!("{long}:1").as_str()]) {
            let dir = dir_for(host);
            let built = !is_safe_dir(&dir) || dir.len() > MAX_NAME;
            assert_eq!(dir_problem(host).is_some(), built, "{host:?}");
        }
    }
}
