//! What a sync did, for the user: the per-node table (stderr), the cluster side's lines, and the JSON report
//! (`--output json`: each node's report, then `machines`, `cluster`, `taints`, `pruned` at the top level).

use crate::delivery::node::{NodeReport, Status};
use crate::lifecycle::machines::Refusal;
use crate::lifecycle::prune::{PruneStatus, Pruned};
use serde::Serialize;

/// What a sync did: each target's report and, with `--kubeconfig`, what happened in the cluster.
#[derive(Debug, Default, Serialize)]
pub struct SyncReport {
    pub nodes: Vec<NodeReport>,
    #[serde(flatten)]
    pub cluster: ClusterReport,
}

impl SyncReport {
    /// A node failed, or the cluster side did (a Machine refused, a node not pruned, a node that did not join).
    pub fn failed(&self) -> bool {
        self.nodes.iter().any(|r| r.status == Status::Failed) || self.cluster.failed()
    }

    /// `--dry-run` found something to change (a node, or a node to prune).
    pub fn would_change(&self) -> bool {
        self.nodes.iter().any(|r| r.status == Status::WouldChange) || self.cluster.would_change()
    }
}

/// What happened besides the nodes' delivery: merged into the report's top level.
#[derive(Debug, Default, Serialize)]
pub struct ClusterReport {
    /// Hosts not contacted: Windows Machines waiting to be provisioned or refused, targets whose identity conflicts.
    #[serde(rename = "machines", skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<Refusal>,
    /// Nodes deconfigured and deleted, or that would be (`--dry-run`), or could not be.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pruned: Vec<Pruned>,
    /// Why no node was pruned at all: more left than `--max-prune` allows.
    #[serde(rename = "pruneRefused", skip_serializing_if = "Option::is_none")]
    pub prune_refused: Option<String>,
    /// Hosts that left but are not wmrender's to prune, with why (target, why).
    #[serde(rename = "notPruned", skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<crate::lifecycle::prune::NotPruned>,
    /// Nodes labelled `wmrender.dev/managed` that no login record and no target names: never touched.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub orphans: Vec<String>,
    /// The configured nodes' CSRs approved, CSRs left alone, labels set, nodes that did not join in time.
    #[serde(rename = "cluster", skip_serializing_if = "Option::is_none")]
    #[cfg(feature = "cluster")]
    pub join: Option<crate::cluster::join::JoinReport>,
    /// Nodes whose taint wmrender took off (configured) or put on (not configured), with why.
    #[serde(skip_serializing_if = "Taints::is_empty")]
    pub taints: Taints,
}

#[derive(Debug, Default, Serialize)]
pub struct Taints {
    /// Configured now: the taint is off.
    pub untainted: Vec<String>,
    /// Not configured: the taint is on, nothing new is scheduled there (running pods stay).
    pub tainted: Vec<Tainted>,
    /// Nodes whose taint could not be read or changed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<Tainted>,
}

impl Taints {
    fn is_empty(&self) -> bool {
        self.untainted.is_empty() && self.tainted.is_empty() && self.failed.is_empty()
    }
}

#[derive(Debug, Serialize)]
pub struct Tainted {
    pub node: String,
    pub why: String,
}

impl ClusterReport {
    /// A Machine was refused, a node could not be pruned (or none was, over the budget), a node did not join in
    /// time, or a node is left tainted.
    pub fn failed(&self) -> bool {
        #[cfg(feature = "cluster")]
        let timed_out = self.join.as_ref().is_some_and(|j| !j.timed_out.is_empty());
        #[cfg(not(feature = "cluster"))]
        let timed_out = false;
        self.refused.iter().any(|m| m.refused)
            || self.pruned.iter().any(|p| p.status == PruneStatus::Failed)
            || self.prune_refused.is_some()
            || timed_out
            || !self.taints.tainted.is_empty()
            || !self.taints.failed.is_empty()
    }

    /// `--dry-run` found nodes to prune.
    pub fn would_change(&self) -> bool {
        self.pruned.iter().any(|p| p.status == PruneStatus::WouldPrune)
    }

    /// The summary lines (stderr): hosts not contacted, CSRs approved or left alone, labels, taints, nodes pruned,
    /// and with `--dry-run` the nodes that would be; with `chatty` false only the errors: hosts refused, nodes that
    /// did not join (with the steps to finish by hand), nodes left tainted, and nodes that could not be pruned.
    pub fn lines(&self, csr_timeout: std::time::Duration, chatty: bool) -> String {
        use wmrender_contract::node_status::{TAINT_EFFECT, TAINT_KEY};
        let mut out = String::new();
        let mut say = |error: bool, line: String| {
            if chatty || error {
                out.push_str(&line);
            }
        };
        for m in &self.refused {
            let state = if m.refused { "refused" } else { "waiting" };
            let what = if m.machine.is_some() { "machine" } else { "host" };
            say(m.refused, format!("{what} {}: {state}: {}\n", m.target, m.why));
        }
        #[cfg(feature = "cluster")]
        if let Some(j) = &self.join {
            for a in &j.approved {
                say(false, format!("approved {} ({:?} certificate of {})\n", a.csr, a.kind, a.node));
            }
            for l in &j.left_alone {
                say(false, format!("left {} pending: it names {} but {}\n", l.csr, l.node, l.why));
            }
            for n in &j.labelled {
                let (worker, managed) = (crate::cluster::WORKER_ROLE, crate::cluster::MANAGED);
                say(false, format!("labelled {n} {worker}= {managed}=true\n"));
            }
            for n in &j.timed_out {
                say(
                    true,
                    format!(
                        "error: {n} did not finish joining within {}s; finish by hand:\n{}",
                        csr_timeout.as_secs(),
                        crate::cluster::manual_steps(n)
                    ),
                );
            }
        }
        #[cfg(not(feature = "cluster"))]
        let _ = csr_timeout;
        for n in &self.taints.untainted {
            say(false, format!("configured {n}: taint {TAINT_KEY}:{TAINT_EFFECT} removed\n"));
        }
        for t in &self.taints.tainted {
            say(true, format!("error: {} is not configured, tainted {TAINT_KEY}:{TAINT_EFFECT}: {}\n", t.node, t.why));
        }
        for t in &self.taints.failed {
            say(true, format!("error: {}: {}\n", t.node, t.why));
        }
        if let Some(why) = &self.prune_refused {
            say(true, format!("error: not pruned: {why}\n"));
        }
        for p in self.pruned.iter().filter(|_| self.prune_refused.is_none()) {
            match (&p.status, &p.error) {
                (PruneStatus::WouldPrune, _) => say(
                    false,
                    format!(
                        "{} ({}) would be pruned: deconfigured over SSH, then its Node deleted\n",
                        p.node, p.address
                    ),
                ),
                (_, None) => {
                    say(false, format!("pruned node {} ({}): deconfigured, Node deleted\n", p.node, p.address))
                }
                (_, Some(e)) => say(true, format!("node {} ({}) not pruned: {e}\n", p.node, p.address)),
            }
        }
        for h in &self.held {
            say(false, format!("{} left, not pruned: {}\n", h.target, h.why));
        }
        for n in &self.orphans {
            say(
                false,
                format!(
                    "node {n} is labelled wmrender.dev/managed but has no login record: how to reach it is not known; \
                     deconfigure it by hand (`C:\\k\\wmrender\\wmrender-node.exe deconfigure` over SSH) and delete the \
                     Node\n"
                ),
            );
        }
        out
    }
}

/// The per-node summary table (stderr).
pub fn table(reports: &[NodeReport]) -> String {
    let mut out = format!(
        "{:<24} {:<22} {:<13} {:>5} {:>7} {:>7} {:>10}  restarted / reboot / error\n",
        "NODE", "ADDRESS", "RESULT", "ADDED", "CHANGED", "REMOVED", "SENT"
    );
    for r in reports {
        let result =
            serde_json::to_value(r.status).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
        let mut notes = r.restarted.join(",");
        if r.rebooted {
            notes.push_str(" rebooted");
        } else if r.reboot_required {
            notes.push_str(" REBOOT NEEDED");
        }
        for p in &r.pending {
            notes.push_str(&format!(" waiting: {p}"));
        }
        for d in &r.degraded {
            notes.push_str(&format!(" left out: {d}"));
        }
        if let Some(e) = &r.error {
            notes.push_str(&format!(" {e}"));
        }
        out.push_str(&format!(
            "{:<24} {:<22} {:<13} {:>5} {:>7} {:>7} {:>10}  {}\n",
            r.name,
            r.address,
            result,
            r.added.len(),
            r.changed.len(),
            r.removed.len(),
            r.bytes_sent,
            notes.trim()
        ));
    }
    out
}
