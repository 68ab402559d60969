//! Files other programs leave behind as they rotate them: hybrid-overlay writes a new client certificate
//! (`ovnkube-client-<time>.pem`) about once a day and never removes the old ones. As WICD does, each pass keeps the
//! newest of them (node.json's `rotatedFiles`) and removes the rest. Best effort: a file that cannot be removed now
//! is tried again by the next pass.

use crate::system::System;
use std::time::SystemTime;
use wmrender_contract::{NodePath, NodeSettings, RotatedFiles};

/// Removes, for each rule of the settings, the rotated files beyond the newest ones. Returns the files removed.
pub fn rotated_files(sys: &mut dyn System, settings: &NodeSettings) -> Vec<NodePath> {
    let mut removed = Vec::new();
    for rule in &settings.rotated_files {
        for path in beyond_the_newest(sys, rule) {
            if sys.remove_file(&path).is_ok() {
                removed.push(path);
            }
        }
    }
    removed
}

/// The files of `rule` that are older than its `keep` newest: by modification time, then by name (the names carry
/// the time the program wrote them).
fn beyond_the_newest(sys: &dyn System, rule: &RotatedFiles) -> Vec<NodePath> {
    let Ok(entries) = std::fs::read_dir(sys.local(&rule.directory)) else { return vec![] };
    let mut files: Vec<(SystemTime, String)> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let modified = e.metadata().and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH);
            rule.matches(&name).then_some((modified, name))
        })
        .collect();
    files.sort_by(|a, b| b.cmp(a));
    files
        .into_iter()
        .skip(rule.keep)
        .filter_map(|(_, name)| NodePath::parse(&format!("{}\\{name}", rule.directory)).ok())
        .collect()
}
