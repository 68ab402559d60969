//! The graceful reboot of OpenShift's documentation, automated (`wmrender reboot`, `sync --reboot`): cordon, drain
//! ([`crate::cluster::drain`]), reboot over SSH, wait until the Node is back — its `status.nodeInfo.bootID` changed (so it
//! really restarted) **and** its `Ready` condition is `True` — within `--reboot-timeout`, then uncordon. Nodes go
//! `max_unavailable` at a time (1 by default) in the order given; the first node that fails or does not come back
//! stops the rollout: no node after it is touched, and it stays cordoned for a human to look at.
//!
//! Binary upgrades use the same cordon and drain ([`super::guard`]).

use crate::cluster::access;
use crate::cluster::drain::{self, Cordon, DrainError, DrainOptions};
use crate::cluster::nodes::{self, boot_id, wait_back};
use crate::cluster::{API_TIMEOUT, Cluster};
use crate::delivery::inventory::Node;
use crate::delivery::ssh::ConnectOptions;
use serde::Serialize;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(Clone)]
pub struct RebootOptions {
    pub drain: DrainOptions,
    /// The bound on the node coming back after the reboot command (bootID changed and Ready).
    pub reboot_timeout: Duration,
    pub max_unavailable: usize,
    pub connect: ConnectOptions,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Drained, rebooted, back Ready with a new boot ID, and uncordoned (unless someone else had cordoned it).
    Rebooted,
    /// Cordon, drain or the reboot command failed; see the error.
    Failed,
    /// Rebooted (or asked to) but not back within --reboot-timeout: the rollout stopped here.
    NotBack,
    /// Not started: an earlier node failed.
    Skipped,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RebootReport {
    pub name: String,
    pub address: String,
    pub outcome: Outcome,
    /// `namespace/name` of the pods evicted.
    pub evicted: Vec<String>,
    /// Pods left on the node (DaemonSet-managed, mirror pods), with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub left: Vec<String>,
    /// The node was cordoned before wmrender came (by someone else): it stays cordoned.
    pub cordon_kept: bool,
    /// The node is cordoned now (by wmrender, after a failure): uncordon it once it is healthy.
    pub left_cordoned: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl RebootReport {
    fn new(node: &Node, outcome: Outcome) -> RebootReport {
        RebootReport {
            name: node.name.clone(),
            address: node.address.clone(),
            outcome,
            evicted: vec![],
            left: vec![],
            cordon_kept: false,
            left_cordoned: false,
            error: None,
        }
    }
}

/// Reboots `nodes` in order, `max_unavailable` at a time, and stops at the first that fails or does not come back.
pub async fn rollout(cluster: &Cluster, nodes: &[Node], opts: &RebootOptions) -> Vec<RebootReport> {
    let slots = Arc::new(tokio::sync::Semaphore::new(opts.max_unavailable.max(1)));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = tokio::task::JoinSet::new();
    let mut reports = Vec::new();
    for (i, node) in nodes.iter().cloned().enumerate() {
        let Ok(slot) = slots.clone().acquire_owned().await else { break };
        if stop.load(Ordering::SeqCst) {
            reports.push((i, RebootReport::new(&node, Outcome::Skipped)));
            continue;
        }
        let (cluster, opts, stop) = (cluster.clone(), opts.clone(), stop.clone());
        tasks.spawn(async move {
            let _slot = slot;
            let report = reboot_node(&cluster, &node, &opts).await;
            if report.outcome != Outcome::Rebooted {
                stop.store(true, Ordering::SeqCst);
            }
            (i, report)
        });
    }
    while let Some(done) = tasks.join_next().await {
        if let Ok(r) = done {
            reports.push(r);
        }
    }
    // A task that died leaves its node without a report: say so rather than drop it.
    for (i, node) in nodes.iter().enumerate() {
        if !reports.iter().any(|(j, _)| *j == i) {
            let mut r = RebootReport::new(node, Outcome::Failed);
            r.error = Some("the reboot task died".into());
            reports.push((i, r));
        }
    }
    reports.sort_by_key(|(i, _)| *i);
    reports.into_iter().map(|(_, r)| r).collect()
}

/// One node's graceful reboot.
pub async fn reboot_node(cluster: &Cluster, node: &Node, opts: &RebootOptions) -> RebootReport {
    let mut report = RebootReport::new(node, Outcome::Failed);
    let failed = |mut r: RebootReport, outcome: Outcome, e: String| {
        r.outcome = outcome;
        r.error = Some(e);
        r
    };
    // A permission missing half way would leave the node cordoned and some pods evicted.
    if let Err(e) = access::require(cluster, &access::DRAIN, "rebooting a node", "wmrender-reboot").await {
        return failed(report, Outcome::Failed, e.to_string());
    }
    let before = match nodes::get(cluster, &node.name, Instant::now() + API_TIMEOUT).await {
        Ok(Some(n)) => boot_id(&n).to_string(),
        Ok(None) => return failed(report, Outcome::Failed, format!("the cluster has no Node named {}", node.name)),
        Err(e) => return failed(report, Outcome::Failed, e.to_string()),
    };
    let cordon = match drain::cordon(cluster, &node.name, "reboot").await {
        Ok(c) => c,
        Err(e) => return failed(report, Outcome::Failed, e.to_string()),
    };
    report.cordon_kept = !cordon.ours;
    report.left_cordoned = cordon.ours;
    match drain::drain(cluster, &node.name, &opts.drain).await {
        Ok(d) => (report.evicted, report.left) = (d.evicted, d.skipped),
        Err(e) => return failed(undo_refused(cluster, &cordon, &e, report).await, Outcome::Failed, e.to_string()),
    }
    if let Err(e) = crate::delivery::node::restart(node, &opts.connect).await {
        return failed(report, Outcome::Failed, format!("the reboot command: {e}"));
    }
    let deadline = Instant::now() + opts.reboot_timeout;
    if let Err(e) = wait_back(cluster, &node.name, Some(&before), deadline).await {
        return failed(
            report,
            Outcome::NotBack,
            format!("{e} within --reboot-timeout {}s", opts.reboot_timeout.as_secs()),
        );
    }
    if let Err(e) = drain::uncordon(cluster, &cordon).await {
        return failed(report, Outcome::Failed, format!("back, but uncordoning failed: {e}"));
    }
    report.left_cordoned = false;
    report.outcome = Outcome::Rebooted;
    report
}

/// A drain refused before anything was evicted leaves the node as it was: wmrender's own cordon is undone.
async fn undo_refused(cluster: &Cluster, cordon: &Cordon, e: &DrainError, mut report: RebootReport) -> RebootReport {
    if matches!(e, DrainError::Refused { .. }) && drain::uncordon(cluster, cordon).await.is_ok() {
        report.left_cordoned = false;
    }
    report
}
