//! The shapes of names that reach the cluster, the node or the file system: host names and ports, Windows user
//! names, noProxy entries, image references and plain identifiers (regions, projects, datastores). Each check
//! returns why a value is wrong, in words a user can act on, so every rule that takes such a value words it alike.

use std::net::{Ipv4Addr, Ipv6Addr};

/// RFC 1035/1123 limits: a DNS name of at most 253 characters, each dot-separated label 1–63 characters of
/// letters, digits and `-`, not starting or ending with `-`.
pub fn check_dns_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the host name is empty".into());
    }
    if name.len() > 253 {
        return Err(format!("the host name is {} characters long; DNS allows at most 253", name.len()));
    }
    // Split as bytes: every host of every mirror entry comes here, and `str::split` looks for the dot with a
    // search made for long text. A label is whole characters (the dot is ASCII), so its text is exact.
    for label in name.as_bytes().split(|&b| b == b'.') {
        let text = || String::from_utf8_lossy(label);
        if label.is_empty() {
            return Err("the host name has an empty label (two dots in a row, or a dot at an end)".into());
        }
        if label.len() > 63 {
            let start: String = text().chars().take(20).collect();
            return Err(format!("the label `{start}…` is {} characters long; DNS allows at most 63", label.len()));
        }
        if !label.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-') {
            return Err(format!("the label `{}` may hold only letters, digits and `-`", text().escape_debug()));
        }
        if label.first() == Some(&b'-') || label.last() == Some(&b'-') {
            return Err(format!("the label `{}` starts or ends with `-`", text()));
        }
    }
    Ok(())
}

/// A TCP port, 1–65535, written as plain digits.
pub fn check_port(port: &str) -> Result<u16, String> {
    match port.parse::<u16>() {
        Ok(p) if p > 0 && port.bytes().all(|b| b.is_ascii_digit()) => Ok(p),
        _ => Err(format!("`{}` is not a port; ports are 1 to 65535", port.escape_debug())),
    }
}

/// `host`, `host:port`, `[ipv6]` or `[ipv6]:port`, where host is a DNS name or an IPv4 address.
pub fn check_host_port(s: &str) -> Result<(), String> {
    if let Some(rest) = s.strip_prefix('[') {
        let (addr, after) = rest.split_once(']').ok_or("an IPv6 address needs a closing `]`")?;
        addr.parse::<Ipv6Addr>().map_err(|_| format!("`{addr}` is not an IPv6 address"))?;
        return match after.strip_prefix(':') {
            Some(port) => check_port(port).map(|_| ()),
            None if after.is_empty() => Ok(()),
            None => Err(format!("unexpected `{}` after the address", after.escape_debug())),
        };
    }
    // Found byte by byte: every host of every mirror entry comes here, and the search `rsplit_once` makes is
    // built for long text.
    let (host, port) = match s.bytes().rposition(|b| b == b':') {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    if let Some(p) = port {
        check_port(p)?;
    }
    if host.parse::<Ipv4Addr>().is_ok() { Ok(()) } else { check_dns_name(host) }
}

/// Windows' rules for local and domain user names (sAMAccountName): at most 20 characters, none of
/// `" / \ [ ] : ; | = , + * ? < > @`, no control or format characters (U+202E, U+2028, U+FEFF, …), and not only
/// dots or spaces.
pub fn check_windows_user_name(name: &str) -> Result<(), String> {
    let forbidden = |c: &char| {
        matches!(c, '"' | '/' | '\\' | '[' | ']' | ':' | ';' | '|' | '=' | ',' | '+' | '*' | '?' | '<' | '>' | '@')
    };
    if name.is_empty() {
        return Err("the user name is empty".into());
    }
    if let Some(c) = name.chars().find(|c| is_invisible(*c)) {
        return Err(format!("the user name holds the invisible or control character U+{:04X}", c as u32));
    }
    if let Some(c) = name.chars().find(forbidden) {
        return Err(format!("Windows user names cannot contain `{c}`"));
    }
    if name.trim() != name {
        return Err("the user name starts or ends with a space".into());
    }
    if name.chars().all(|c| c == '.' || c == ' ') {
        return Err("a Windows user name cannot consist only of dots and spaces".into());
    }
    let n = name.chars().count();
    if n > 20 {
        return Err(format!("the user name is {n} characters long; Windows allows at most 20"));
    }
    Ok(())
}

/// What OpenSSH's client refuses in a remote user name (`valid_ruser` in OpenSSH 9.6), if anything: a leading `-`,
/// control characters, any of ``'`";&<>|(){}``, a `-` after whitespace, a trailing `\`. Worded to follow "the user".
pub fn ssh_user_problem(user: &str) -> Option<String> {
    let metacharacter = |c: &char| matches!(c, '\'' | '`' | '"' | ';' | '&' | '<' | '>' | '|' | '(' | ')' | '{' | '}');
    if user.is_empty() {
        Some("is empty".into())
    } else if user.starts_with('-') {
        Some("starts with `-` (ssh would read it as an option)".into())
    } else if user.chars().any(char::is_control) {
        Some("contains a control character".into())
    } else if let Some(c) = user.chars().find(metacharacter) {
        Some(format!("contains `{c}`, a shell metacharacter"))
    } else if user.chars().zip(user.chars().skip(1)).any(|(a, b)| a.is_whitespace() && b == '-') {
        Some("has a `-` after a space (ssh would read it as an option)".into())
    } else if user.ends_with('\\') {
        Some("ends with `\\`".into())
    } else if user.trim() != user {
        Some("has spaces around it".into())
    } else {
        None
    }
}

/// A BYOH host's user name: WMCO writes it into the `windows-instances` ConfigMap and `sync` logs in with it, so it
/// must be a Windows user name ([`check_windows_user_name`]) that OpenSSH accepts ([`ssh_user_problem`]). The one
/// rule validation and sync both apply, so a name is valid everywhere or refused at validate. The error reads after
/// the name: "`a(b)c` cannot be used to log in over SSH: …".
pub fn check_byoh_user_name(name: &str) -> Result<(), String> {
    check_windows_user_name(name).map_err(|why| format!("is not a Windows user name: {why}"))?;
    match ssh_user_problem(name) {
        Some(problem) => Err(format!("cannot be used to log in over SSH, as sync does: it {problem}")),
        None => Ok(()),
    }
}

/// Control characters and the Unicode format and separator characters that change how text reads without being
/// seen: bidirectional overrides, zero-width characters, line and paragraph separators, the byte-order mark.
pub fn is_invisible(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}')
}

/// A plain identifier such as a cloud region, project or datastore: not empty, no surrounding spaces, no control
/// or invisible characters.
pub fn check_identifier(value: &str) -> Result<(), String> {
    if value.trim().is_empty() {
        return Err("it is empty".into());
    }
    if let Some(c) = value.chars().find(|c| is_invisible(*c)) {
        return Err(format!("it holds the invisible or control character U+{:04X}", c as u32));
    }
    if value.trim() != value {
        return Err("it starts or ends with a space".into());
    }
    Ok(())
}

/// One entry of a proxy's noProxy list as Go's `httpproxy` reads it: `*`, a host name, a domain suffix
/// (`.example.com`), an IP address or a CIDR, each optionally with a `:port`.
pub fn check_no_proxy_entry(entry: &str) -> Result<(), String> {
    if entry == "*" {
        return Ok(());
    }
    if let Some((addr, bits)) = entry.split_once('/') {
        let max = if addr.parse::<Ipv4Addr>().is_ok() {
            32
        } else if addr.parse::<Ipv6Addr>().is_ok() {
            128
        } else {
            return Err(format!("`{}` is not an IP address before the `/` of a CIDR", addr.escape_debug()));
        };
        return match bits.parse::<u8>() {
            Ok(b) if b <= max && bits.bytes().all(|c| c.is_ascii_digit()) => Ok(()),
            _ => Err(format!("`/{}` is not a prefix length from 0 to {max}", bits.escape_debug())),
        };
    }
    if entry.parse::<Ipv6Addr>().is_ok() {
        return Ok(());
    }
    let host = entry.strip_prefix("*.").or_else(|| entry.strip_prefix('.')).unwrap_or(entry);
    check_host_port(host)
}

/// An image reference as the container runtimes read it: `[registry[:port]/]repository[:tag][@digest]`, with a
/// lower-case repository of `/`-separated components of letters, digits and `.`, `_`, `-` separators.
pub fn check_image_reference(image: &str) -> Result<(), String> {
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    if let Some(d) = digest {
        let ok = d.split_once(':').is_some_and(|(alg, hex)| {
            !alg.is_empty()
                && alg.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"+._-".contains(&b))
                && hex.len() >= 32
                && hex.bytes().all(|b| b.is_ascii_hexdigit())
        });
        if !ok {
            return Err(format!("`@{}` is not a digest such as @sha256:<64 hex digits>", d.escape_debug()));
        }
    }
    // A tag is the part after the last `:` that has no `/` after it (a `:` before a `/` is a registry port).
    let (path, tag) = match name.rsplit_once(':') {
        Some((p, t)) if !t.contains('/') => (p, Some(t)),
        _ => (name, None),
    };
    if let Some(t) = tag {
        let ok = !t.is_empty()
            && t.len() <= 128
            && !t.starts_with(['.', '-'])
            && t.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
        if !ok {
            return Err(format!("`:{}` is not a tag (letters, digits, `.`, `_`, `-`; at most 128)", t.escape_debug()));
        }
    }
    let mut parts: Vec<&str> = path.split('/').collect();
    if parts.len() > 1 && (parts[0].contains(['.', ':']) || parts[0] == "localhost") {
        check_host_port(parts[0]).map_err(|e| format!("the registry `{}`: {e}", parts[0].escape_debug()))?;
        parts.remove(0);
    }
    for part in parts {
        let ok = !part.is_empty()
            && part.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
            && part.starts_with(|c: char| c.is_ascii_alphanumeric())
            && part.ends_with(|c: char| c.is_ascii_alphanumeric());
        if !ok {
            return Err(format!(
                "the path component `{}` must be lower-case letters and digits joined by `.`, `_` or `-`",
                part.escape_debug()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_and_ports() {
        assert!(check_host_port("mirror.example.com:5000").is_ok());
        assert!(check_host_port("10.0.0.1").is_ok());
        assert!(check_host_port("[fd00::1]:443").is_ok());
        assert!(check_host_port(&format!("{}.com", "a".repeat(64))).is_err());
        assert!(check_host_port(&format!("{}.com", vec!["a".repeat(60); 5].join("."))).is_err());
        assert!(check_host_port("h.example.com:0").is_err());
        assert!(check_host_port("h.example.com:65536").is_err());
        assert!(check_host_port("h.example.com:+80").is_err());
    }

    #[test]
    fn windows_user_names() {
        for ok in ["Administrator", "ops.admin", "svc-win_1", "Ünïcode"] {
            assert_eq!(check_windows_user_name(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "a\"b",
            "a/b",
            "a:b",
            "a*b",
            "a|b",
            "...",
            ". .",
            "a\u{202E}b",
            "a\u{2028}b",
            "\u{FEFF}admin",
            " x",
            "abcdefghijklmnopqrstu",
        ] {
            assert!(check_windows_user_name(bad).is_err(), "{bad:?}");
        }
    }

    /// A BYOH user name is one Windows takes and OpenSSH logs in with: both rules, in one place.
    #[test]
    fn byoh_user_names() {
        for ok in ["Administrator", "ops.admin", "svc$", "Jane Doe"] {
            assert_eq!(check_byoh_user_name(ok), Ok(()), "{ok}");
        }
        for bad in ["a(b)c", "$(id)", "a`id`", "a'b", "a&b", "a{b}", "-admin", "a -x", "a\\b", "a:b", ""] {
            assert!(check_byoh_user_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn no_proxy_entries() {
        for ok in ["*", ".example.com", "example.com", "10.0.0.0/8", "fd00::/8", "10.1.2.3", "host:8080", "fd00::1"] {
            assert_eq!(check_no_proxy_entry(ok), Ok(()), "{ok}");
        }
        for bad in ["$(id)", "{a}", "<x>", "10.0.0.0/33", "a b", ""] {
            assert!(check_no_proxy_entry(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn image_references() {
        for ok in [
            "mcr.microsoft.com/oss/kubernetes/pause:3.9",
            "pause",
            "localhost:5000/pause:3.9",
            "registry.example.com:5000/a/b@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ] {
            assert_eq!(check_image_reference(ok), Ok(()), "{ok}");
        }
        for bad in ["$(id)", "a\"b", "", "Registry/Pause", "a:b:c", "x@sha256:zz", "https://x/y"] {
            assert!(check_image_reference(bad).is_err(), "{bad:?}");
        }
    }
}
