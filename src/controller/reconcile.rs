//! One reconcile of the fleet: every Windows instance (the Windows Machines' instances, the rendered BYOH hosts,
//! the inventory) judged from the watched view alone ([`super::decide`]), then acted on: the instances to sync are
//! synced through sync's own per-node step ([`crate::sync::Session::sync_node`]), `--parallel` at a time and one
//! at a time per instance; the kubelet CSRs of the instances are approved; taints follow the agents' reports; the
//! managed Nodes that are no one's any more are pruned. Each step is recorded as an Event on the Node (or, before
//! there is one, on the Machine) and logged as one line.

use super::decide::{Memory, Next, decide, token_due};
use super::metrics::Metrics;
use super::view::View;
use crate::cluster::events::{self, About, Kind};
use crate::cluster::machines::{Machine, WindowsMachines};
use crate::cluster::{Cluster, csr, join, label, nodes};
use crate::lifecycle::prune::{self, Target};
use crate::sync::inventory::Node;
use crate::sync::node::{NodeReport, Status};
use crate::sync::{Rendered, Session};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One instance's line of the fleet: where it stands and what the controller does (or would do) next.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Line {
    /// The target's name (the Machine's, the inventory's, the BYOH host's address).
    pub target: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// Its Node, once registered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The bundle its agent reports applied, and the one rendered.
    pub applied: String,
    pub desired: String,
    /// The agent's condition: `True`, `False`, `Unknown`, or empty when it never reported.
    pub configured: String,
    pub tainted: bool,
    /// `nothing`, `sync`, `untaint`, `taint`, `wait`, `prune`.
    pub next: String,
    pub why: String,
}

/// What the controller keeps from one reconcile to the next: only pacing (level-triggered otherwise).
#[derive(Default)]
pub struct Memories {
    by_target: BTreeMap<String, Memory>,
    /// The node name the agent reported for each target (its first pass may come before its Node).
    node_names: BTreeMap<String, String>,
    /// Targets last synced before they had a Node: synced again as soon as it registers (the agent finishes what
    /// waited on kubelet's certificate, and the taint follows), not after the back-off.
    waiting_on_join: BTreeSet<String>,
}

impl Memories {
    /// The name of a target's Node: the one its agent reported, else the target's own (an inventory entry named as
    /// its Node).
    fn node_name(&self, target: &Node) -> String {
        self.node_names.get(&target.name).cloned().unwrap_or_else(|| target.name.clone())
    }
}

/// What a reconcile needs besides the view.
pub struct Context<'a> {
    pub cluster: &'a Cluster,
    pub view: &'a View,
    pub rendered: &'a Rendered,
    pub session: &'a Arc<Session>,
    pub platform: &'a str,
    pub metrics: &'a Metrics,
    /// This replica, for the Events it records.
    pub replica: &'a str,
    pub prune: bool,
    /// Decide and report, act on nothing.
    pub dry_run: bool,
}

/// The state a line counts under in the metrics: "configured" is what the decision judged configured (the agent's
/// report, or the controller's own sync converging on the bundle where the agent cannot report).
fn state_of(line: &Line) -> &'static str {
    match (line.node.is_some(), line.configured.as_str(), line.tainted) {
        (false, _, _) => "no-node",
        (true, "False", _) => "failing",
        (true, _, false) if line.next == "nothing" => "configured",
        (true, _, true) => "tainted",
        _ => "not-configured",
    }
}

/// One reconcile; returns the fleet's lines (in target order, then the Nodes pruned).
pub async fn reconcile(ctx: &Context<'_>, memories: &mut Memories) -> Vec<Line> {
    let started = Instant::now();
    let desired = ctx.session.bundle_digest();
    let machines: Vec<Machine> = ctx.view.machines().iter().map(Machine::from_object).collect();
    let found = crate::lifecycle::machines::targets(WindowsMachines {
        platform: ctx.platform.to_string(),
        machines: machines.clone(),
    });
    let inventory = ctx.session.opts().inventory.as_deref();
    // No target at all is a fleet scaled to zero, not an error.
    let targets: Vec<Node> = crate::sync::nodes(ctx.rendered, inventory, found.nodes).unwrap_or_default();
    let all = ctx.view.nodes();
    let now = Instant::now();
    let mut lines = Vec::new();
    let mut to_sync: Vec<(Node, Option<Value>)> = Vec::new();
    for target in &targets {
        let node_name = memories.node_name(target);
        let t = Target { node: target.clone(), node_name };
        let node = prune::node_of(&all, &t, &machines).cloned();
        let memory = memories.by_target.entry(target.name.clone()).or_default().clone();
        let renew = node.is_some() && token_due(&memory, ctx.session.token(), now);
        let mut next = decide(node.as_ref(), &desired, renew, &memory, now);
        // A node whose agent waited on the join is finished as soon as its Node is there.
        if node.is_some() && memories.waiting_on_join.contains(&target.name) && matches!(next, Next::Wait(_)) {
            next = Next::Sync("it joined: the agent finishes now".into());
        }
        let agent = node.as_ref().and_then(nodes::configured);
        let (kind, why) = match &next {
            Next::Nothing => ("nothing", String::new()),
            Next::Sync(w) => ("sync", w.clone()),
            Next::Untaint => ("untaint", "the agent reports the bundle configured".into()),
            Next::Taint(w) => ("taint", w.clone()),
            Next::Wait(w) => ("wait", w.clone()),
        };
        lines.push(Line {
            target: target.name.clone(),
            machine: target.machine.clone(),
            node: node.as_ref().map(|n| nodes::name_of(n).to_string()),
            applied: agent.as_ref().map(|a| a.bundle.clone()).unwrap_or_default(),
            desired: desired.clone(),
            configured: agent.as_ref().map(|a| a.status.clone()).unwrap_or_default(),
            tainted: node.as_ref().is_some_and(nodes::tainted),
            next: kind.to_string(),
            why,
        });
        if ctx.dry_run {
            continue;
        }
        match next {
            Next::Sync(_) => to_sync.push((target.clone(), node.clone())),
            Next::Untaint | Next::Taint(_) => {
                let (on, reason, message) = match &next {
                    Next::Taint(w) => (true, "NotConfigured", w.clone()),
                    _ => (false, "Configured", format!("the agent applied {desired}; taint removed")),
                };
                let name = lines.last().and_then(|l| l.node.clone()).unwrap_or_default();
                let ok = nodes::set_taint(ctx.cluster, &name, on).await.is_ok();
                ctx.metrics.step(if on { "taint" } else { "untaint" }, ok);
                let kind = if on { Kind::Warning } else { Kind::Normal };
                if let Some(n) = &node {
                    record(ctx, n, kind, reason, &message).await;
                }
                log(&name, if on { "tainted" } else { "untainted" }, &message);
            }
            Next::Nothing | Next::Wait(_) => {}
        }
    }
    if !to_sync.is_empty() {
        sync_all(ctx, memories, &to_sync, &machines, &desired).await;
    }
    approve(ctx, &targets, &all, memories).await;
    if ctx.prune {
        lines.extend(prune(ctx, &all, &targets, &machines, memories).await);
    }
    let mut states: BTreeMap<String, u64> = BTreeMap::new();
    for l in lines.iter().filter(|l| l.next != "prune") {
        *states.entry(state_of(l).to_string()).or_default() += 1;
    }
    ctx.metrics.reconciled(&states, started.elapsed());
    lines
}

/// Syncs the instances, `--parallel` at a time (each once: one instance is never synced twice at once), records
/// what came of each in the memories, an Event and a log line.
async fn sync_all(
    ctx: &Context<'_>,
    memories: &mut Memories,
    to_sync: &[(Node, Option<Value>)],
    machines: &[Machine],
    desired: &str,
) {
    let targets: Vec<Node> = to_sync.iter().map(|(t, _)| t.clone()).collect();
    let reports = match crate::sync::rollout(ctx.session, &targets).await {
        Ok(r) => r,
        Err(e) => {
            log("-", "sync failed", &e.to_string());
            return;
        }
    };
    for ((target, node), report) in to_sync.iter().zip(&reports) {
        let ok = matches!(report.status, Status::Synced | Status::Unchanged | Status::Pending);
        ctx.metrics.step("sync", ok);
        let memory = memories.by_target.entry(target.name.clone()).or_default();
        memory.synced_at = Some(Instant::now());
        let converged = matches!(report.status, Status::Synced | Status::Unchanged);
        memory.failures = if converged { 0 } else { memory.failures.saturating_add(1) };
        memory.converged = converged.then(|| desired.to_string());
        // The files reached the node (the apply step may still wait): so did the token.
        if ok {
            memory.token = ctx.session.token();
        }
        if let Some(name) = report.apply.as_ref().map(|a| a.node_name.clone()).filter(|n| !n.is_empty()) {
            memories.node_names.insert(target.name.clone(), name);
        }
        if report.status == Status::Pending && !report.reboot_required && node.is_none() {
            memories.waiting_on_join.insert(target.name.clone());
        } else {
            memories.waiting_on_join.remove(&target.name);
        }
        let (kind, reason, message) = outcome(report, desired);
        log(&target.name, reason, &message);
        let machine = target.machine.as_ref().and_then(|m| machines.iter().find(|x| &x.name == m));
        match node {
            Some(n) => record(ctx, n, kind, reason, &message).await,
            None => {
                if let Some(m) = machine {
                    record_machine(ctx, m, kind, reason, &message).await;
                }
            }
        }
    }
    // How each host was reached, on its Node, for its pruning one day (as sync records it).
    let reached: Vec<Target> = to_sync
        .iter()
        .zip(&reports)
        .filter(|(_, r)| matches!(r.status, Status::Synced | Status::Unchanged | Status::Pending))
        .map(|((t, _), r)| Target { node: t.clone(), node_name: r.node_name() })
        .collect();
    if let Err(e) = prune::record_logins(ctx.cluster, &reached).await {
        log("-", "logins not recorded", &e.to_string());
    }
    // The taint follows the sync's own outcome too, as after `sync` (a converged pass untaints at once).
    let mut report = crate::sync::cluster_side::ClusterReport::default();
    crate::sync::cluster_side::settle_taints(ctx.cluster, ctx.rendered, &reports, &mut report).await;
}

/// The Event of a sync: reason and message.
fn outcome(report: &NodeReport, desired: &str) -> (Kind, &'static str, String) {
    match report.status {
        Status::Synced | Status::Unchanged => (Kind::Normal, "Configured", format!("the agent converged on {desired}")),
        Status::Pending if report.rebooted => {
            (Kind::Normal, "Rebooted", format!("first boot's reboot done; waiting: {}", report.pending.join("; ")))
        }
        Status::Pending => (Kind::Normal, "Configuring", format!("waiting: {}", report.pending.join("; "))),
        _ => (Kind::Warning, "ConfigurationFailed", report.error.clone().unwrap_or_else(|| "the sync failed".into())),
    }
}

/// One pass over the pending kubelet CSRs of the instances whose node name is known: WMCO's checks, as sync. Only
/// the instances a pending CSR claims, and those whose Node is there without its labels, go to the pass (which
/// reads each one's Node): the others have nothing to approve or label, and a CSR that stays pending (another
/// signer's, one refused) must not cost a read of every Node at every reconcile.
async fn approve(ctx: &Context<'_>, targets: &[Node], all: &[Value], memories: &Memories) {
    let claimed: Vec<String> = ctx
        .view
        .csrs()
        .iter()
        .filter(|c| c["status"]["conditions"].is_null())
        .flat_map(|c| {
            let request = c["spec"]["request"].as_str().and_then(|r| STANDARD.decode(r).ok()).unwrap_or_default();
            csr::claimed(&request, c["spec"]["username"].as_str().unwrap_or(""))
        })
        .collect();
    if claimed.is_empty() || ctx.dry_run {
        return;
    }
    let unlabelled = |name: &str| all.iter().any(|n| nodes::name_of(n) == name && !label::is_labelled(n));
    let expected: Vec<csr::Expected> = targets
        .iter()
        .map(|t| csr::Expected { name: memories.node_name(t), addresses: vec![t.address.clone()] })
        .filter(|e| nodes::can_be_node_name(&e.name))
        .filter(|e| claimed.contains(&e.name) || unlabelled(&e.name))
        .collect();
    if expected.is_empty() {
        return;
    }
    match join::run(ctx.cluster, &expected, Duration::ZERO).await {
        Ok(joined) => {
            for a in &joined.approved {
                ctx.metrics.step("approve", true);
                log(&a.node, "approved", &format!("{} ({:?} certificate)", a.csr, a.kind));
            }
        }
        Err(e) => {
            ctx.metrics.step("approve", false);
            log("-", "approving failed", &e.to_string());
        }
    }
}

/// The managed Nodes that are no one's any more: drained, deconfigured, deleted.
async fn prune(
    ctx: &Context<'_>,
    all: &[Value],
    targets: &[Node],
    machines: &[Machine],
    memories: &Memories,
) -> Vec<Line> {
    let targets: Vec<Target> =
        targets.iter().map(|t| Target { node: t.clone(), node_name: memories.node_name(t) }).collect();
    let leaving = prune::leaving_among(all, &targets, machines);
    let mut lines: Vec<Line> = leaving
        .iter()
        .map(|n| Line {
            target: String::new(),
            machine: None,
            node: Some(nodes::name_of(n).to_string()),
            applied: nodes::configured(n).map(|c| c.bundle).unwrap_or_default(),
            desired: String::new(),
            configured: nodes::configured(n).map(|c| c.status).unwrap_or_default(),
            tainted: nodes::tainted(n),
            next: "prune".into(),
            why: "no target names it any more".into(),
        })
        .collect();
    if ctx.dry_run || leaving.is_empty() {
        return lines;
    }
    let drain = crate::cluster::drain::DrainOptions {
        force: ctx.session.opts().drain.force,
        timeout: ctx.session.opts().drain.drain_timeout,
    };
    for done in prune::prune(ctx.cluster, &leaving, ctx.session.connect(), &drain, false).await {
        let ok = done.error.is_none();
        ctx.metrics.step("prune", ok);
        let message = done.error.clone().unwrap_or_else(|| "deconfigured, Node deleted".into());
        log(&done.node, if ok { "pruned" } else { "not pruned" }, &message);
        if let Some(l) = lines.iter_mut().find(|l| l.node.as_deref() == Some(done.node.as_str())) {
            l.why = message;
        }
    }
    lines
}

async fn record(ctx: &Context<'_>, node: &Value, kind: Kind, reason: &str, message: &str) {
    let about = About { api_version: "v1", kind: "Node", object: node };
    if let Err(e) = events::record(ctx.cluster, &about, kind, reason, message, ctx.replica).await {
        log(nodes::name_of(node), "event not recorded", &e.to_string());
    }
}

async fn record_machine(ctx: &Context<'_>, machine: &Machine, kind: Kind, reason: &str, message: &str) {
    let object = serde_json::json!({ "metadata": { "name": machine.name, "namespace": crate::cluster::machines::NAMESPACE,
                                                   "uid": machine.uid } });
    let about = About { api_version: "machine.openshift.io/v1beta1", kind: "Machine", object: &object };
    if let Err(e) = events::record(ctx.cluster, &about, kind, reason, message, ctx.replica).await {
        log(&machine.name, "event not recorded", &e.to_string());
    }
}

/// One line per decision on stderr: `wmrender-controller: <target> <what>: <why>`. What a node or the cluster said
/// (an agent's message, a target's name) is untrusted: a control character is written escaped, so it can neither
/// split the line nor drive the terminal that shows it.
pub fn log(target: &str, what: &str, why: &str) {
    eprintln!("wmrender-controller: {} {what}: {}", one_line(target), one_line(&why.replace('\n', " ")));
}

pub fn one_line(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_log_line_stays_one_line_whatever_a_node_said() {
        assert_eq!(super::one_line("kube-proxy: \u{1b}[2Jstopped\r"), "kube-proxy: \\u{1b}[2Jstopped\\r");
        assert_eq!(super::one_line("ünïcode ok"), "ünïcode ok");
    }
}
