//! `C:\k\wmrender\applied.json`: what the agent has applied, so the next pass knows what changed. It records
//! only what was done: a service once it runs with the recorded definition and files, a step once it succeeded.
//! Written atomically (a `.tmp` beside it, then a rename), so a cut never leaves half a record.

use crate::digest::DigestCache;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use wmrender_contract::{Actions, NodePath};

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppliedState {
    /// Per service: the definition it was (re)started with and the digests of its files at that time.
    #[serde(default)]
    pub services: BTreeMap<String, AppliedService>,
    /// Services the agent created (or found with wmrender's description): only these are ever deleted.
    #[serde(default)]
    pub owned: BTreeSet<String>,
    /// `once` steps that succeeded: step name → sha256 of the script that ran.
    #[serde(default)]
    pub steps_done: BTreeMap<String, String>,
    /// `every-boot` and pre-start steps: step name → the boot id they last succeeded in.
    #[serde(default)]
    pub boot_steps: BTreeMap<String, String>,
    /// Names of the machine environment variables the agent manages (values stay in the registry only: a
    /// proxy URL may carry a password).
    #[serde(default)]
    pub environment: BTreeSet<String>,
    /// Certificates the agent added to the LocalMachine Root store (sha256 of the DER, hex): only these are ever
    /// removed from it.
    #[serde(default)]
    pub trusted_cas: BTreeSet<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reboot: Option<RebootWait>,
    #[serde(default)]
    pub digests: DigestCache,
    /// The node's name as the last pass that got that far computed it: a pass that stops before (a step that fails
    /// after a reboot) is still reported on its Node.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub node_name: String,
    /// What the passes did since sync delivered the files now on the node.
    #[serde(default)]
    pub delivery: Delivery,
}

/// The passes' actions for one delivery: the node manifest's files, by
/// [`wmrender_contract::NodeManifest::delivery_digest`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Delivery {
    pub manifest: String,
    pub actions: Actions,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppliedService {
    pub command: String,
    pub description: String,
    pub dependencies: Vec<String>,
    /// Node path → sha256 of each of its files, binaries and credentials.
    pub files: BTreeMap<NodePath, String>,
}

/// A reboot the agent asked for, and the boot it was asked in: a different boot id means it happened.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RebootWait {
    pub boot_id: String,
    pub reasons: Vec<String>,
    /// Nothing else can be done before it (the Containers feature); otherwise the pass goes on.
    pub blocks: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("{path} cannot be read: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path} is not an agent state file ({message}); starting from an empty record")]
    Corrupt { path: String, message: String },
    #[error("{path} cannot be written: {source}")]
    Write { path: String, source: std::io::Error },
}

impl AppliedState {
    /// The record, or an empty one when there is none yet.
    pub fn load(path: &Path) -> Result<AppliedState, StateError> {
        let shown = path.display().to_string();
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(AppliedState::default()),
            Err(source) => return Err(StateError::Read { path: shown, source }),
        };
        serde_json::from_slice(&bytes).map_err(|e| StateError::Corrupt { path: shown, message: e.to_string() })
    }

    pub fn save(&self, path: &Path) -> Result<(), StateError> {
        let shown = || path.display().to_string();
        let tmp = path.with_extension("json.tmp");
        let mut bytes = serde_json::to_vec_pretty(self).unwrap_or_default();
        bytes.push(b'\n');
        let write = || -> std::io::Result<()> {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            drop(f);
            std::fs::rename(&tmp, path)
        };
        write().map_err(|source| StateError::Write { path: shown(), source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_missing_and_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("applied.json");
        assert_eq!(AppliedState::load(&path).unwrap(), AppliedState::default());
        let mut s = AppliedState::default();
        s.owned.insert("kubelet".into());
        s.reboot = Some(RebootWait { boot_id: "1".into(), reasons: vec!["x".into()], blocks: true });
        s.save(&path).unwrap();
        assert_eq!(AppliedState::load(&path).unwrap(), s);
        assert!(!dir.path().join("applied.json.tmp").exists());
        std::fs::write(&path, "{\"services\": 3").unwrap();
        assert!(matches!(AppliedState::load(&path), Err(StateError::Corrupt { .. })));
    }
}
