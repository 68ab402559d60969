//! Stage 2: every rule of the support matrix and of the Machine API webhooks, checked on the decoded inputs.
//! Rules never stop at the first problem: each adds its diagnostics and the caller stops if any is an error.

mod byoh;
mod cluster;
mod machinesets;
pub mod matrix;
mod mirrors;
pub mod names;
mod network;

use crate::diagnostics::Diagnostics;
use crate::inputs::Loaded;

pub fn validate(loaded: &Loaded) -> Diagnostics {
    let inputs = &loaded.inputs;
    let mut d = Diagnostics::default();
    cluster::check(inputs, &mut d);
    machinesets::check(inputs, &mut d);
    network::check(inputs, &mut d);
    byoh::check(inputs, &mut d);
    mirrors::check(loaded, &mut d);
    d
}

/// RFC 1123 label: lower-case letters, digits and `-`, starting and ending with a letter or digit, ≤ 63.
pub fn is_dns1123_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// RFC 1123 subdomain: dot-separated labels, ≤ 253 characters.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns1123_label)
}

/// Text that reaches scripts, URLs or file contents must be a single printable line.
pub fn has_control_chars(s: &str) -> bool {
    s.chars().any(char::is_control)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_names() {
        assert!(is_dns1123_label("winworker"));
        assert!(!is_dns1123_label("WinWorker"));
        assert!(!is_dns1123_label("-a"));
        assert!(!is_dns1123_label(&"a".repeat(64)));
        assert!(is_dns1123_subdomain("host.example.com"));
        assert!(!is_dns1123_subdomain("host..example.com"));
        assert!(!is_dns1123_subdomain("host_1.example.com"));
    }
}
