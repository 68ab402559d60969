//! The cluster's additional trusted CAs: every certificate of `C:\k\ca-bundle.crt` in the LocalMachine Root
//! store, as WMCO imports its `ca-bundle.crt`. The agent records which certificates it added (sha256 of the DER)
//! and removes only those when they leave the bundle (a CA rotation, or the bundle gone), so a certificate the
//! node had before, or one an administrator added, is never touched. The whole bundle is parsed before the store
//! changes: a bad bundle fails the pass with the reason and imports nothing.

use crate::system::System;
use std::collections::BTreeSet;
use wmrender_contract::{NodePath, parse_ca_bundle, paths, sha256_hex};

/// What a pass changed in the store: thumbprints (sha256 of the DER, hex).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct CaChanges {
    pub added: Vec<String>,
    pub removed: Vec<String>,
}

/// The certificates the bundle asks for, deduplicated, in bundle order. No bundle means none.
pub fn wanted(sys: &dyn System) -> Result<Vec<(String, Vec<u8>)>, String> {
    let path = NodePath::known(paths::TRUSTED_CA_BUNDLE);
    let bytes = match std::fs::read(sys.local(&path)) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot read {path}: {e}")),
    };
    let certificates = parse_ca_bundle(&bytes).map_err(|e| format!("{path}: {e}; no certificate was imported"))?;
    let mut seen = BTreeSet::new();
    Ok(certificates
        .into_iter()
        .map(|der| (sha256_hex(&der), der))
        .filter(|(sha, _)| seen.insert(sha.clone()))
        .collect())
}

/// Brings the store to the bundle. `owned` (the agent's record) is updated after each change, so a failure half
/// way still leaves a true record.
pub fn converge(sys: &mut dyn System, owned: &mut BTreeSet<String>) -> Result<CaChanges, String> {
    let wanted = wanted(sys)?;
    converge_to(sys, &wanted, owned)
}

/// Removes every certificate the agent added (deconfigure).
pub fn remove_all(sys: &mut dyn System, owned: &mut BTreeSet<String>) -> Result<CaChanges, String> {
    converge_to(sys, &[], owned)
}

fn converge_to(
    sys: &mut dyn System,
    wanted: &[(String, Vec<u8>)],
    owned: &mut BTreeSet<String>,
) -> Result<CaChanges, String> {
    // Nothing wanted and nothing of the agent's to remove: the store is left unopened. Opening it is not free: under
    // Wine, crypt32 copies the host's root certificates into it the first time a process opens it (about 150 ms,
    // most of an unchanged pass).
    if wanted.is_empty() && owned.is_empty() {
        return Ok(CaChanges::default());
    }
    let present: BTreeSet<String> = sys
        .root_certificates()
        .map_err(|e| format!("cannot read the LocalMachine Root store: {e}"))?
        .iter()
        .map(|der| sha256_hex(der))
        .collect();
    let mut changes = CaChanges::default();
    for (sha, der) in wanted {
        // Already there: the agent's own from an earlier pass, or the node's; either way nothing to do, and a
        // certificate the agent did not add is not recorded as its own.
        if present.contains(sha) {
            continue;
        }
        sys.add_root_certificate(der)
            .map_err(|e| format!("cannot add certificate {sha} to the LocalMachine Root store: {e}"))?;
        owned.insert(sha.clone());
        changes.added.push(sha.clone());
    }
    let keep: BTreeSet<&String> = wanted.iter().map(|(sha, _)| sha).collect();
    for sha in owned.clone() {
        if keep.contains(&sha) {
            continue;
        }
        if present.contains(&sha) {
            sys.remove_root_certificate(&sha)
                .map_err(|e| format!("cannot remove certificate {sha} from the LocalMachine Root store: {e}"))?;
            changes.removed.push(sha.clone());
        }
        owned.remove(&sha);
    }
    Ok(changes)
}
