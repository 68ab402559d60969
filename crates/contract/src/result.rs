//! The agent's answer: one JSON line on stdout from `wmrender-node apply`, read by sync.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApplyStatus {
    /// Everything matches the staged bundle. Exit code 0.
    Converged,
    /// Waiting on a reboot or on the cluster (kubelet's certificate, the HNS network); the agent service goes on
    /// by itself. Exit code 3.
    Pending,
    /// A step failed; the agent service retries it. Exit code 1.
    #[default]
    Failed,
}

impl ApplyStatus {
    pub fn exit_code(self) -> i32 {
        match self {
            ApplyStatus::Converged => 0,
            ApplyStatus::Failed => 1,
            ApplyStatus::Pending => 3,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplyResult {
    pub status: ApplyStatus,
    #[serde(default)]
    pub node_name: String,
    #[serde(default)]
    pub node_ip: String,
    #[serde(default)]
    pub created: Vec<String>,
    #[serde(default)]
    pub updated: Vec<String>,
    #[serde(default)]
    pub deleted: Vec<String>,
    #[serde(default)]
    pub started: Vec<String>,
    #[serde(default)]
    pub restarted: Vec<String>,
    /// Service processes killed after they did not stop within the bounded wait.
    #[serde(default)]
    pub killed: Vec<String>,
    /// Files swapped in from staging (service binaries).
    #[serde(default)]
    pub replaced: Vec<String>,
    /// Steps (scripts) that ran.
    #[serde(default)]
    pub steps: Vec<String>,
    #[serde(default)]
    pub environment: Vec<String>,
    /// Certificates of `C:\k\ca-bundle.crt` the agent added to the LocalMachine Root store (sha256 of each
    /// certificate's DER, lower-case hex).
    #[serde(default)]
    pub trusted_cas_added: Vec<String>,
    /// Certificates the agent had added that left the bundle, now removed from the store.
    #[serde(default)]
    pub trusted_cas_removed: Vec<String>,
    #[serde(default)]
    pub reboot_required: bool,
    /// Which boot of Windows the pass ran in (it changes with every restart): how sync tells that a node it
    /// rebooted came back.
    #[serde(default)]
    pub boot_id: String,
    /// The digest of the bundle the pass converged to ([`crate::node_status::bundle_digest`]).
    #[serde(default)]
    pub bundle: String,
    /// The digest of the payload on the node ([`crate::node_status::payload_digest`]); empty when it holds none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub payload: String,
    /// The sha256 (hex) of the agent's executable on the node ([`crate::NodeManifest::agent_digest`]); empty when
    /// the manifest lists none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub agent: String,
    /// Whether the pass was reported on the node's Node (`reported`), or why not.
    #[serde(default)]
    pub node_report: String,
    /// Why the node is not converged yet, when it is pending.
    #[serde(default)]
    pub pending: Vec<String>,
    /// Files the services need that are not on the node.
    #[serde(default)]
    pub missing: Vec<String>,
    /// Optional services that are not running, and why (`windows_exporter: C:\k\tls\certs\tls.crt is not on
    /// the node`): the node works without them, so the pass still converges.
    #[serde(default)]
    pub degraded: Vec<String>,
    /// What the agent's passes did since sync delivered the files now on the node, this pass included: a change the
    /// agent service applied between sync's push and sync's own `apply` still shows here.
    #[serde(default)]
    pub since_delivery: Actions,
    #[serde(default)]
    pub errors: Vec<String>,
    /// What the pass's pull of the Node's desired bundle came to; `None` where no bundle is to be pulled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull: Option<PullReport>,
    /// What the pass's pull of the Node's desired payload (`wmrender.dev/desired-payload`) came to; `None` where no
    /// payload is to be pulled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_pull: Option<PullReport>,
}

/// The outcome of a pull of the bundle named by the Node's `wmrender.dev/desired-bundle`
/// ([`crate::node_status::DESIRED_BUNDLE_ANNOTATION`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PullReport {
    /// The reference the annotation holds.
    pub desired: String,
    pub outcome: PullOutcome,
    /// What was done, or why nothing was.
    pub message: String,
    /// The pulled bundle now on the node (`registry/repository@sha256:…`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_node: Option<String>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PullOutcome {
    /// The desired bundle was verified and staged in this pass; the pass applied it.
    Staged,
    /// The desired bundle is the one on the node already.
    #[default]
    Current,
    /// The bundle was refused (no trusted signature, another digest, an older version, content that does not
    /// match its digest, a manifest that is not a node bundle): nothing changed on the node.
    Refused,
    /// The registry or the API server could not be asked, or a sync is delivering: tried again next pass.
    Retrying,
}

/// What passes did to the services and files, for [`ApplyResult::since_delivery`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Actions {
    #[serde(default)]
    pub created: Vec<String>,
    #[serde(default)]
    pub updated: Vec<String>,
    #[serde(default)]
    pub deleted: Vec<String>,
    #[serde(default)]
    pub started: Vec<String>,
    #[serde(default)]
    pub restarted: Vec<String>,
    #[serde(default)]
    pub killed: Vec<String>,
    #[serde(default)]
    pub replaced: Vec<String>,
}

impl Actions {
    /// This pass's actions.
    pub fn of(r: &ApplyResult) -> Actions {
        Actions {
            created: r.created.clone(),
            updated: r.updated.clone(),
            deleted: r.deleted.clone(),
            started: r.started.clone(),
            restarted: r.restarted.clone(),
            killed: r.killed.clone(),
            replaced: r.replaced.clone(),
        }
    }

    /// Adds `later`'s entries, each once, in order.
    pub fn merge(&mut self, later: &Actions) {
        let pairs = [
            (&mut self.created, &later.created),
            (&mut self.updated, &later.updated),
            (&mut self.deleted, &later.deleted),
            (&mut self.started, &later.started),
            (&mut self.restarted, &later.restarted),
            (&mut self.killed, &later.killed),
            (&mut self.replaced, &later.replaced),
        ];
        for (mine, theirs) in pairs {
            for x in theirs {
                if !mine.contains(x) {
                    mine.push(x.clone());
                }
            }
        }
    }
}

impl ApplyResult {
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The last line of `stdout` that is an apply result.
    pub fn from_stdout(stdout: &str) -> Option<ApplyResult> {
        stdout.lines().rev().find_map(|l| serde_json::from_str::<ApplyResult>(l.trim()).ok())
    }
}
