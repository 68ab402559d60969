//! Stage 2: every rule of the support matrix and of the Machine API webhooks, run on the decoded inputs, producing
//! the [`Checked`] value the plan reads. Rules never stop at the first problem: each adds its diagnostics, and
//! every rule whose fields were read runs, whatever failed elsewhere (see [`Decoded`]).

mod bundle_keys;
mod byoh;
pub mod checked;
mod cluster;
pub mod logs;
mod machinesets;
pub mod matrix;
mod mirrors;
pub mod names;
mod network;
mod ssh_key;
mod webhook;

pub use checked::Checked;

use crate::diagnostics::{Diagnostic, Diagnostics, Severity};
use crate::inputs::Loaded;
use crate::inputs::yaml::Located;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::Arc;

/// Which fields could not be read, so that the rules run on everything else: decoding leaves a placeholder where
/// a field failed (see `inputs::schema::Placeholder`) and reports why; these are the places of those reports.
/// A rule's diagnostic at such a field (or below it) is dropped, since the field's own error says what to fix, and
/// a rule that compares a field with another reads the other through [`Decoded::get`].
pub struct Decoded {
    /// The fields that failed, by file. A set, not a list to search: every rule asks about the fields it reads, and
    /// an input with thousands of bad list items must not make each question cost thousands of comparisons.
    failed: BTreeMap<Arc<str>, BTreeSet<String>>,
}

impl Decoded {
    pub fn from_errors(diags: &Diagnostics) -> Decoded {
        let mut failed: BTreeMap<Arc<str>, BTreeSet<String>> = BTreeMap::new();
        for d in diags.sorted().into_iter().filter(|d| d.severity == Severity::Error) {
            failed.entry(d.loc.file.clone()).or_default().insert(d.field.clone());
        }
        Decoded { failed }
    }

    /// Whether `field` in `file`, or a mapping or list holding it, failed to decode.
    pub fn failed(&self, file: &str, field: &str) -> bool {
        let Some(failed) = self.failed.get(file) else { return false };
        // `field` itself, and each path that holds it: the text before each `.` or `[`.
        let holders = field.match_indices(['.', '[']).map(|(i, _)| &field[..i]);
        holders.chain([field]).any(|path| failed.contains(path))
    }

    /// Whether `field` or anything below it failed to decode (a list with one unreadable item reads as absent).
    pub fn failed_within(&self, file: &str, field: &str) -> bool {
        let Some(failed) = self.failed.get(file) else { return false };
        let below = |separator: char| {
            let prefix = format!("{field}{separator}");
            failed
                .range::<str, _>((Bound::Included(prefix.as_str()), Bound::Unbounded))
                .next()
                .is_some_and(|f| f.starts_with(&prefix))
        };
        self.failed(file, field) || below('.') || below('[')
    }

    /// The value, unless it is a placeholder for a field that failed to decode.
    pub fn get<'a, T>(&self, v: &'a Located<T>) -> Option<&'a T> {
        (!self.failed(&v.loc.file, &v.field)).then_some(&v.value)
    }

    /// The rules' diagnostics less those about fields that failed to decode.
    fn keep(&self, rules: Diagnostics) -> Diagnostics {
        let mut kept = Diagnostics::default();
        for d in rules.sorted() {
            if !self.failed(&d.loc.file, &d.field) {
                kept.push(Diagnostic::clone(d));
            }
        }
        kept
    }
}

/// Runs every rule on the loaded inputs. `Ok` holds the checked value with its warnings; `Err` every diagnostic,
/// reading's and the rules', errors and warnings.
pub fn check(loaded: Loaded) -> Result<Checked, Diagnostics> {
    let decoded = Decoded::from_errors(&loaded.diagnostics);
    let inputs = &loaded.inputs;
    let mut d = Diagnostics::default();
    cluster::check(inputs, &decoded, &mut d);
    machinesets::check(inputs, &decoded, &mut d);
    let networks = network::check(inputs, &decoded, &mut d);
    byoh::check(inputs, &decoded, &mut d);
    logs::check(inputs, &decoded, &mut d);
    let ssh_public_key = ssh_key::check(inputs, &decoded, &mut d);
    let bundle_keys = bundle_keys::check(inputs, &decoded, &mut d);
    let registries = mirrors::check(&loaded, &mut d);
    let mut all = loaded.diagnostics.clone();
    all.extend(decoded.keep(d));
    match (networks, registries) {
        (Some(networks), Some(registries)) if !all.has_errors() => {
            Ok(checked::resolve(loaded, registries, networks, ssh_public_key, bundle_keys, all))
        }
        _ => {
            if !all.has_errors() {
                // Every rule that withholds a value says why; this is the net under that promise, so that exit
                // code 2 never comes without a diagnostic.
                all.push(
                    Diagnostic::error(&inputs.spec.network.at.loc, "(document)", "the inputs could not be checked")
                        .expected("a ClusterInputs document as in docs/inputs.md"),
                );
            }
            Err(all)
        }
    }
}
/// RFC 1123 label: lower-case letters, digits and `-`, starting and ending with a letter or digit, ≤ 63.
pub fn is_dns1123_label(s: &str) -> bool {
    is_dns1123_label_bytes(s.as_bytes())
}

fn is_dns1123_label_bytes(s: &[u8]) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && s.first() != Some(&b'-')
        && s.last() != Some(&b'-')
}

/// RFC 1123 subdomain: dot-separated labels, ≤ 253 characters. (Split as bytes: every BYOH host comes here, and
/// `str::split` looks for the dot with a search made for long text.)
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.as_bytes().split(|&b| b == b'.').all(is_dns1123_label_bytes)
}

/// Text that reaches scripts, URLs or file contents must be a single printable line.
pub fn has_control_chars(s: &str) -> bool {
    s.chars().any(char::is_control)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_field_covers_what_is_below_it_and_nothing_else() {
        let file: Arc<str> = Arc::from("w.yaml");
        let mut errors = Diagnostics::default();
        let loc = crate::diagnostics::Loc::file_only(&file);
        errors.push(Diagnostic::error(&loc, "spec.network", "expected a mapping"));
        errors.push(Diagnostic::warning(&loc, "spec.proxy", "only a warning"));
        let decoded = Decoded::from_errors(&errors);
        assert!(decoded.failed("w.yaml", "spec.network"));
        assert!(decoded.failed("w.yaml", "spec.network.serviceNetwork[0]"));
        assert!(!decoded.failed("w.yaml", "spec.networkX"));
        assert!(!decoded.failed("w.yaml", "spec.proxy"));
        assert!(!decoded.failed("other.yaml", "spec.network"));
        let placeholder = Located { value: 1, loc: loc.clone(), field: "spec.network.at".into() };
        assert_eq!(decoded.get(&placeholder), None);
    }

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
