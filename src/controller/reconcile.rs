//! One pass of the leader: the desired state read whole (or the pass does nothing but say why), the fleet decided
//! from it and the watched cluster ([`super::decide`]), and the decisions started: each target's sync and each
//! prune as a task of its own ([`super::queue`]), the taints and the CSR approvals at once. What every step came to
//! is said as a log line, an Event (on the Node, before there is one on the Machine, and for the desired state on
//! the controller's Lease), a metric, and a line of `wmrender status`.

use super::ControllerOptions;
use super::decide::{self, Fleet, Line, Memory, PayloadSeen, State, prune_key};
use super::metrics::Metrics;
use super::queue::{Disruption, Queue};
use super::view::View;
use crate::cluster::events::{self, About, Kind};
use crate::cluster::machines::{Machine, WindowsMachines};
use crate::cluster::node_object::{claimed_by_pending_csr, name_of};
use crate::cluster::{Cluster, label};
use crate::delivery::node::{NodeReport, Status};
use crate::delivery::{Permit, Rendered, Session};
use crate::lifecycle::login::Logins;
use crate::lifecycle::prune::{self, Leaving, PruneStatus, Pruned};
use crate::lifecycle::taint::{self, Fresh};
use crate::lifecycle::targets::{self, Target};
use crate::lifecycle::{self, join};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a resync prepares: the rendered bundle (verified), the Session (credentials fetched), the platform, the login
/// records.
pub struct Prepared {
    /// What fetching the credentials left to say (said once while it stays the same).
    pub notes: Vec<String>,
    pub rendered: Rendered,
    pub session: Arc<Session>,
    pub platform: String,
    pub logins: Arc<Logins>,
    /// `--pull-from`: the rendered bundle as published (`registry/repository@sha256:…`), which nodes pull.
    pub pull: Option<String>,
    /// `--pull-payload-from`: the payload as published, which nodes pull.
    pub pull_payload: Option<String>,
}

/// What a finished task came to.
pub enum Done {
    /// `target` is the target's name; the report carries the name it is shown under.
    Synced {
        target: String,
        report: Box<NodeReport>,
        node_name: String,
        /// The payload digest of the session the sync delivered (`--payload`).
        payload: Option<String>,
    },
    Pruned(Box<Pruned>),
}

/// What the leader keeps from one pass to the next: the pacing of each target, its running steps, and what it has
/// already said (a refusal is logged and recorded once, not at every pass).
pub struct Leading {
    /// The bundle and credentials, or why they could not be prepared.
    pub prepared: Result<Prepared, String>,
    memories: BTreeMap<String, Memory>,
    pub queue: Queue<Done>,
    /// What was said last about each target refused, the desired state and the prune budget.
    said: BTreeMap<String, String>,
    /// The Windows Machines as the desired state last read them: the Machine an Event is about. Not the view's,
    /// which lags behind while the Machines' watch fails and the desired state lists them afresh.
    machines: Vec<Machine>,
}

/// What a pass needs besides the leader's own state.
pub struct Context<'a> {
    pub opts: &'a ControllerOptions,
    pub cluster: &'a Cluster,
    pub view: &'a View,
    pub metrics: &'a Metrics,
}

const BLOCKED: &str = "-desired-state";
const PRUNE_BUDGET: &str = "-prune-budget";

impl Leading {
    pub fn new(opts: &ControllerOptions, prepared: Result<Prepared, String>) -> Leading {
        Leading {
            prepared,
            memories: BTreeMap::new(),
            queue: Queue::new(opts.parallel, opts.delivery.max_unavailable),
            said: BTreeMap::new(),
            machines: Vec::new(),
        }
    }

    /// Whether `key`'s message is new (or changed) since it was last said; remembers it.
    fn news(&mut self, key: &str, message: &str) -> bool {
        self.said.insert(key.to_string(), message.to_string()).as_deref() != Some(message)
    }

    /// One pass; returns the fleet's lines.
    pub async fn pass(&mut self, ctx: &Context<'_>) -> Vec<Line> {
        let started = Instant::now();
        while let Some((_, done)) = self.queue.try_finished() {
            self.finished(ctx, done).await;
        }
        let desired = match self.read(ctx).await {
            Ok(d) => d,
            Err(why) => return self.blocked(ctx, why).await,
        };
        if self.said.remove(BLOCKED).is_some() {
            log("-", "the desired state reads again", "resuming");
            self.record_on_lease(ctx, Kind::Normal, "DesiredStateRead", "the desired state reads again").await;
        }
        ctx.metrics.set_blocked(None);
        let Ok(prepared) = &self.prepared else { return vec![] };
        let (session, logins, notes) = (prepared.session.clone(), prepared.logins.clone(), prepared.notes.clone());
        let (bundle_reference, payload_reference) = (prepared.pull.clone(), prepared.pull_payload.clone());
        for note in notes.clone() {
            if self.news(&format!("-note {note}"), "") {
                log("-", "note", &note);
            }
        }
        let nodes = ctx.view.nodes();
        self.machines = desired.machines.clone();
        let digest = session.bundle_digest();
        let payload = session.payload_digest();
        let agent = session.agent_digest();
        let records = logins.all();
        let running = self.queue.running();
        let plan = decide::fleet(&Fleet {
            targets: &desired,
            nodes: &nodes,
            logins: &records,
            memories: &self.memories,
            in_flight: &running,
            desired: &digest,
            payload: payload.as_deref(),
            agent: agent.as_deref(),
            token: session.token(),
            prune: ctx.opts.prune,
            pull: (bundle_reference.is_some() || payload_reference.is_some()).then_some(decide::Wave {
                published: decide::Published {
                    bundle: bundle_reference.as_deref(),
                    payload: payload_reference.as_deref(),
                },
                max_unavailable: ctx.opts.delivery.max_unavailable,
            }),
            now: Instant::now(),
        });
        for refusal in &desired.refused {
            if self.news(&refusal.target, &refusal.why) {
                let what = if refusal.refused { "refused" } else { "waiting" };
                log(&refusal.target, what, &refusal.why);
                // A Machine that waits (not provisioned yet, no address yet) is said as plainly as a refused one.
                let kind = if refusal.refused { Kind::Warning } else { Kind::Normal };
                if !ctx.opts.dry_run()
                    && let Some(m) = refusal.machine.as_ref().and_then(|n| self.machines.iter().find(|m| &m.name == n))
                {
                    record_machine(ctx, m, kind, "NotContacted", &format!("{what}: {}", refusal.why)).await;
                }
            }
        }
        // What no longer holds is forgotten, so that it is said again should it come back.
        let still: Vec<String> = desired.refused.iter().map(|r| r.target.clone()).collect();
        self.said.retain(|k, _| match k.strip_prefix("-note ") {
            Some(note) => notes.iter().any(|n| n == note),
            None => k.starts_with('-') || still.contains(k),
        });
        if ctx.opts.dry_run() {
            ctx.metrics.reconciled(&states(&plan.lines), started.elapsed());
            return plan.lines;
        }
        for (i, has_node, why) in &plan.sync {
            let target = desired.targets[*i].clone();
            let disruption = if *has_node { Disruption::MayDisrupt } else { Disruption::None };
            let (cluster, logins, session) = (ctx.cluster.clone(), logins.clone(), session.clone());
            let why = why.clone();
            // Said when it starts: a change to a host that may run pods may first wait for --max-unavailable.
            self.queue.start(target.name.clone(), disruption, async move {
                log(&target.reach.name, "sync", &why);
                let d = lifecycle::deliver(Some(&cluster), Some(&logins), &session, &target, Permit::NotNeeded, false)
                    .await;
                let payload = session.payload_digest();
                Done::Synced { target: target.name, report: Box::new(d.report), node_name: d.node_name, payload }
            });
        }
        for (i, verdict) in &plan.taint {
            let target = &desired.targets[*i];
            if let Some(node) = decide::node_of(&nodes, target) {
                self.set_taint(ctx, node, verdict).await;
            }
        }
        for (i, to) in &plan.pull {
            let target = &desired.targets[*i];
            let Some(node) = decide::node_of(&nodes, target) else { continue };
            // Not pointed (the patch failed, or the Node is gone): nothing to remember.
            let Some(changed) = point(ctx, node, to).await else { continue };
            let memory = self.memories.entry(target.name.clone()).or_default();
            // What this controller pointed the Node at holds its place in the wave even while the watch does not
            // show it yet (the next pass may read an older Node).
            let references = [&to.bundle, &to.payload].into_iter().flatten().cloned().collect();
            memory.just_pointed = Some((references, Instant::now()));
            // The patience starts when the Node is first pointed at the payload, not again when a new bundle
            // points it at both.
            if let Some(reference) = &to.payload
                && (changed.iter().any(|k| k == wmrender_contract::node_status::DESIRED_PAYLOAD_ANNOTATION)
                    || memory.pointed.as_ref().is_none_or(|(r, _)| r != reference))
            {
                memory.pointed = Some((reference.clone(), Instant::now()));
            }
        }
        // A Node found pointed at the published payload with no time for it (this controller restarted since, or
        // another replica pointed it): its patience starts now.
        if let Some(reference) = &payload_reference {
            for target in &desired.targets {
                if decide::node_of(&nodes, target).is_some_and(|n| decide::desired_payload(n) == Some(reference)) {
                    let memory = self.memories.entry(target.name.clone()).or_default();
                    if memory.pointed.as_ref().is_none_or(|(r, _)| r != reference) {
                        memory.pointed = Some((reference.clone(), Instant::now()));
                    }
                }
            }
        }
        self.approve(ctx, &desired.targets, &nodes).await;
        keep_records_current(&logins, &desired.targets, &nodes, &running).await;
        for gone in &plan.forget {
            if let Err(e) = logins.remove(&gone.target).await {
                log(&gone.target, "login record not removed", &e.to_string());
            }
        }
        self.prune(ctx, &plan, &session, &logins).await;
        ctx.metrics.reconciled(&states(&plan.lines), started.elapsed());
        plan.lines
    }

    /// The desired state: the targets from the render, the inventory, the Machines (read afresh while their watch
    /// fails) and the login records. `Err` names what could not be read, with its file and line.
    async fn read(&self, ctx: &Context<'_>) -> Result<targets::Targets, String> {
        let prepared = self.prepared.as_ref().map_err(|e| e.clone())?;
        let machines = match ctx.view.machines_failing() {
            None => WindowsMachines {
                platform: prepared.platform.clone(),
                machines: ctx.view.machines().iter().map(Machine::from_object).collect(),
            },
            Some(why) => crate::cluster::machines::list(ctx.cluster)
                .await
                .map_err(|e| format!("the Windows Machines could not be listed ({e}; their watch: {why})"))?,
        };
        let reported = prepared.logins.reported_node_names();
        targets::read(&targets::Sources {
            rendered: &prepared.rendered,
            inventory: ctx.opts.inventory.as_deref(),
            machines: Some(&machines),
            reported: &reported,
        })
        .map_err(|e| e.to_string())
    }

    /// A pass on a desired state that could not be read: nothing is done; it is said (a log line and an Event on
    /// the Lease when it changes), the replica is not ready, and the next pass tries again.
    async fn blocked(&mut self, ctx: &Context<'_>, why: String) -> Vec<Line> {
        ctx.metrics.set_blocked(Some(why.clone()));
        if self.news(BLOCKED, &why) {
            log("-", "the desired state cannot be read; nothing is done until it can", &why);
            if !ctx.opts.dry_run() {
                self.record_on_lease(ctx, Kind::Warning, "DesiredStateUnreadable", &why).await;
            }
        }
        ctx.metrics.reconciled(&BTreeMap::new(), Duration::ZERO);
        vec![Line::blocked(why)]
    }

    async fn record_on_lease(&self, ctx: &Context<'_>, kind: Kind, reason: &str, message: &str) {
        let path = format!(
            "/apis/coordination.k8s.io/v1/namespaces/{}/leases/{}",
            ctx.opts.lease_namespace, ctx.opts.lease_name
        );
        let lease = match ctx.cluster.get(&path).await {
            Ok(Some(l)) => l,
            _ => serde_json::json!({"metadata": {"name": ctx.opts.lease_name, "namespace": ctx.opts.lease_namespace}}),
        };
        let about = About { api_version: "coordination.k8s.io/v1", kind: "Lease", object: &lease };
        if let Err(e) = events::record(ctx.cluster, &about, kind, reason, message, &ctx.opts.replica).await {
            log("-", "event not recorded", &e.to_string());
        }
    }

    /// Takes in what a finished task came to: the target's pacing, and what it says (log, Event, metric).
    pub async fn finished(&mut self, ctx: &Context<'_>, done: Done) {
        match done {
            Done::Synced { target, report, node_name, payload } => {
                let Ok(prepared) = &self.prepared else { return };
                let desired = prepared.session.bundle_digest();
                let token = prepared.session.token();
                let ok = lifecycle::reached(&report);
                ctx.metrics.step("sync", ok);
                let memory = self.memories.entry(target.clone()).or_default();
                memory.synced_at = Some(Instant::now());
                let converged = matches!(report.status, Status::Synced | Status::Unchanged);
                memory.failures = if converged { 0 } else { memory.failures.saturating_add(1) };
                memory.converged = converged.then(|| desired.clone());
                if converged {
                    let reported = report.apply.as_ref().map(|a| a.payload.clone()).unwrap_or_default();
                    memory.payload = payload.map(|delivered| PayloadSeen { delivered, reported });
                }
                // A pass that failed keeps the node tainted until a later sync says otherwise; a converged one counts
                // as configured (above) until its agent reports failing.
                memory.fresh = match Fresh::of(&report) {
                    failed @ Fresh::Failed(_) => Some(failed),
                    _ => None,
                };
                // The files reached the node (the apply step may still wait): so did the token.
                if ok {
                    memory.token = token;
                }
                let nodes = ctx.view.nodes();
                let node = nodes.iter().find(|n| name_of(n) == node_name);
                memory.waiting_on_join = report.status == Status::Pending && !report.reboot_required && node.is_none();
                let (kind, reason, message) = outcome(&report, &desired);
                log(&report.name, reason, &message);
                match node {
                    Some(n) => record_node(ctx, n, kind, reason, &message).await,
                    None => {
                        let machine = report.machine.as_ref().and_then(|m| self.machines.iter().find(|x| &x.name == m));
                        if let Some(m) = machine {
                            record_machine(ctx, m, kind, reason, &message).await;
                        }
                    }
                }
            }
            Done::Pruned(done) => {
                let ok = done.status == PruneStatus::Pruned;
                ctx.metrics.step("prune", ok);
                let message = done.error.clone().unwrap_or_else(|| "deconfigured, Node deleted".into());
                log(&done.node, if ok { "pruned" } else { "not pruned" }, &message);
            }
        }
    }

    async fn set_taint(&mut self, ctx: &Context<'_>, node: &Value, verdict: &taint::Verdict) {
        let name = name_of(node).to_string();
        let (on, reason) = match verdict {
            taint::Verdict::On(_) => (true, "NotConfigured"),
            _ => (false, "Configured"),
        };
        match taint::apply(ctx.cluster, node, verdict).await {
            Ok(Some(change)) => {
                ctx.metrics.step(if on { "taint" } else { "untaint" }, true);
                let (kind, message) = match change {
                    taint::Change::Tainted(why) => (Kind::Warning, why),
                    taint::Change::Untainted => (Kind::Normal, "the agent applied the bundle; taint removed".into()),
                };
                record_node(ctx, node, kind, reason, &message).await;
                log(&name, if on { "tainted" } else { "untainted" }, &message);
            }
            Ok(None) => {}
            Err(e) => {
                ctx.metrics.step(if on { "taint" } else { "untaint" }, false);
                log(&name, "taint not changed", &e.to_string());
            }
        }
    }

    /// The hosts that left, each pruned by a task of its own (a drain may take long), within the budget.
    async fn prune(&mut self, ctx: &Context<'_>, plan: &decide::Plan, session: &Arc<Session>, logins: &Arc<Logins>) {
        match &plan.prune_refused {
            Some(why) => {
                // Said again only when other hosts are held back, not as the fleet around them grows.
                if self.news(PRUNE_BUDGET, &plan.held_back.join(" ")) {
                    log("-", "not pruned", why);
                    self.record_on_lease(ctx, Kind::Warning, "PruneRefused", why).await;
                }
                return;
            }
            None => {
                self.said.remove(PRUNE_BUDGET);
            }
        }
        let drain = ctx.opts.drain.drain();
        for leaving in &plan.prune {
            let leaving: Leaving = leaving.clone();
            let (cluster, logins, session, drain) =
                (ctx.cluster.clone(), logins.clone(), session.clone(), drain.clone());
            self.queue.start(prune_key(&leaving.login.target), Disruption::MayDisrupt, async move {
                log(&leaving.name(), "prune", "no target names it any more: drain, deconfigure, delete its Node");
                Done::Pruned(Box::new(prune::prune(&cluster, &logins, &leaving, session.connect(), &drain).await))
            });
        }
    }
    /// One pass over the pending kubelet CSRs of the targets: only those a pending CSR claims, and those whose Node
    /// is there without its labels, go to the pass (which reads each one's Node); a CSR that stays pending (another
    /// signer's, one refused) must not cost a read of every Node at every reconcile. A CSR left pending is said
    /// once.
    async fn approve(&mut self, ctx: &Context<'_>, targets: &[Target], nodes: &[Value]) {
        let csrs = ctx.view.csrs();
        let pending: Vec<&str> = csrs
            .iter()
            .filter(|c| c["status"]["conditions"].is_null())
            .filter_map(|c| c["metadata"]["name"].as_str())
            .collect();
        self.said.retain(|k, _| k.strip_prefix("-csr ").is_none_or(|csr| pending.contains(&csr)));
        let claimed = claimed_by_pending_csr(&csrs);
        if claimed.is_empty() {
            return;
        }
        let unlabelled = |name: &str| nodes.iter().any(|n| name_of(n) == name && !label::is_labelled(n));
        let joining: Vec<&Target> =
            targets.iter().filter(|t| claimed.contains(&t.node_name) || unlabelled(&t.node_name)).collect();
        if joining.is_empty() {
            return;
        }
        match join::run(ctx.cluster, &joining, Duration::ZERO).await {
            Ok(joined) => {
                for a in &joined.approved {
                    ctx.metrics.step("approve", true);
                    log(&a.node, "approved", &format!("{} ({:?} certificate)", a.csr, a.kind));
                }
                for l in &joined.left_alone {
                    if self.news(&format!("-csr {}", l.csr), &l.why) {
                        log(&l.node, "CSR left pending", &format!("{}: {}", l.csr, l.why));
                    }
                }
            }
            Err(e) => {
                ctx.metrics.step("approve", false);
                log("-", "approving failed", &e.to_string());
            }
        }
    }
}

/// Every configured host keeps a login record that says how it is reached now: one configured before records were
/// kept (or whose record was lost) gets one from Git's reach and its Node's name once its Node is wmrender's, and one
/// whose reach changed in Git has it rewritten. A host being synced is left to its sync, which writes it anyway. At
/// rest this writes nothing.
async fn keep_records_current(logins: &Logins, targets: &[Target], nodes: &[Value], running: &BTreeSet<String>) {
    use crate::cluster::MANAGED;
    use crate::lifecycle::login::Login;
    for t in targets.iter().filter(|t| !running.contains(&t.name)) {
        let recorded = logins.get(&t.name);
        let node = decide::node_of(nodes, t).filter(|n| n["metadata"]["labels"][MANAGED] == "true");
        if recorded.is_none() && node.is_none() {
            // Never configured (or not yet joined): its first contact writes the record.
            continue;
        }
        let mut login = Login::of(&t.name, &t.reach, recorded.as_ref());
        if login.node_name.is_none() {
            login.node_name = node.map(|n| name_of(n).to_string());
        }
        if recorded.as_ref() != Some(&login)
            && let Err(e) = logins.write(login).await
        {
            log(&t.reach.name, "login record not written", &e.to_string());
        }
    }
}

/// How many hosts are in each state, for the metrics.
fn states(lines: &[Line]) -> BTreeMap<String, u64> {
    let mut states: BTreeMap<String, u64> = BTreeMap::new();
    for l in lines.iter().filter(|l| l.state != State::Unknown) {
        *states.entry(l.state.to_string()).or_default() += 1;
    }
    states
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

/// Points a Node at the published bundle (`wmrender.dev/desired-bundle`), payload (`wmrender.dev/desired-payload`)
/// or both, in one patch: its agent pulls them. The annotations it changed (none when the Node had them already);
/// `None` when the patch failed or the Node is gone.
async fn point(ctx: &Context<'_>, node: &Value, to: &decide::Point) -> Option<Vec<String>> {
    use wmrender_contract::node_status::{DESIRED_BUNDLE_ANNOTATION, DESIRED_PAYLOAD_ANNOTATION};
    let name = name_of(node).to_string();
    let wanted: Vec<(&str, &str)> =
        [(DESIRED_BUNDLE_ANNOTATION, &to.bundle), (DESIRED_PAYLOAD_ANNOTATION, &to.payload)]
            .into_iter()
            .filter_map(|(key, reference)| Some((key, reference.as_deref()?)))
            .collect();
    let what = match (&to.bundle, &to.payload) {
        (Some(_), Some(_)) => "the published bundle and payload",
        (None, Some(_)) => "the published payload",
        _ => "the published bundle",
    };
    match crate::cluster::nodes::set_desired(ctx.cluster, &name, &wanted).await {
        Ok(None) => {
            log(&name, &format!("not pointed at {what}"), "the Node is gone");
            None
        }
        Ok(Some(changed)) => {
            ctx.metrics.step("pull", true);
            // Said once, when the annotation changes: a watch that lags makes the same point again, which the
            // Node as read then already has.
            if !changed.is_empty() {
                log(&name, &format!("pointed at {what}"), &to.why);
            }
            // One Event per thing pulled, for `kubectl get events --field-selector reason=…`.
            for (key, reference) in wanted.iter().filter(|(key, _)| changed.iter().any(|c| c == key)) {
                let reason = if *key == DESIRED_BUNDLE_ANNOTATION { "PullBundle" } else { "PullPayload" };
                record_node(ctx, node, Kind::Normal, reason, &format!("pointed at {reference}: {}", to.why)).await;
            }
            Some(changed)
        }
        Err(e) => {
            ctx.metrics.step("pull", false);
            log(&name, &format!("not pointed at {what}"), &e.to_string());
            None
        }
    }
}

async fn record_node(ctx: &Context<'_>, node: &Value, kind: Kind, reason: &str, message: &str) {
    let about = About { api_version: "v1", kind: "Node", object: node };
    if let Err(e) = events::record(ctx.cluster, &about, kind, reason, message, &ctx.opts.replica).await {
        log(name_of(node), "event not recorded", &e.to_string());
    }
}

async fn record_machine(ctx: &Context<'_>, machine: &Machine, kind: Kind, reason: &str, message: &str) {
    let object = serde_json::json!({ "metadata": { "name": machine.name, "namespace": crate::cluster::machines::NAMESPACE,
                                                   "uid": machine.uid } });
    let about = About { api_version: "machine.openshift.io/v1beta1", kind: "Machine", object: &object };
    if let Err(e) = events::record(ctx.cluster, &about, kind, reason, message, &ctx.opts.replica).await {
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
