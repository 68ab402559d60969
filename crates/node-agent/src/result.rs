//! The pass's answer: the status follows from what the pass collected, never set by hand.

use wmrender_contract::{ApplyResult, ApplyStatus};

/// Failed when anything failed or is missing; else pending when waiting on a reboot or the cluster.
pub fn status_of(r: &ApplyResult) -> ApplyStatus {
    if !r.errors.is_empty() || !r.missing.is_empty() {
        ApplyStatus::Failed
    } else if !r.pending.is_empty() || r.reboot_required {
        ApplyStatus::Pending
    } else {
        ApplyStatus::Converged
    }
}

/// A pass that could not start.
pub fn failed(error: String) -> ApplyResult {
    ApplyResult { status: ApplyStatus::Failed, errors: vec![error], ..ApplyResult::default() }
}

/// Adds a line once.
pub fn push_once(list: &mut Vec<String>, line: String) {
    if !list.contains(&line) {
        list.push(line);
    }
}
