//! What the controller does next, as a pure function of the desired state (the targets, read whole), the cluster
//! as watched (the Windows Nodes), the login records, what the controller remembers (which only paces it) and the
//! clock. No I/O: level-triggered, so after a restart it reaches the same decisions; tested without an API server.
//!
//! For each target, in order:
//! 1. no Node yet: sync it (first contact: bundle, agent, credentials; its first boot's reboot), again after a
//!    back-off while its Node does not appear;
//! 2. the Node's agent applied another bundle than the one rendered (annotation `wmrender.dev/bundle`; for a host
//!    whose agent does not report, its last sync delivered another), or the cloud-node-manager's token is due
//!    ([`token_due`]: half its life gone): sync it;
//! 3. the taint's one rule ([`crate::lifecycle::taint::verdict`]): failing → taint it (nothing new lands there, its
//!    pods stay) and sync it again after a back-off; otherwise, its agent runs another payload than the
//!    controller's (`wmrender.dev/payload`, `payload_behind`) → sync it after the back-off; configured → untaint it
//!    if it is tainted, else nothing; not known yet → sync it again after a back-off (its agent's service also goes
//!    on by itself).
//!
//! With `--pull-from` (the pull model, docs/pull.md), step 2 points the Node at the published bundle instead
//! (annotation `wmrender.dev/desired-bundle`, [`Next::Pull`]) and its agent pulls it; with `--pull-payload-from`,
//! step 3 points it at the published payload (`wmrender.dev/desired-payload`) instead of syncing it, and a Node
//! pointed at a new bundle while it runs another payload is pointed at both at once (the agent pulls the payload
//! first, and one pass swaps the programs and applies the bundle). At most `--max-unavailable` Nodes are on their
//! way at once (pointed, not yet applied or pulled), the others wait for the wave. SSH stays for first contact and
//! for a node that fails.
//!
//! A target whose step is still running is left to it. Then the hosts that left ([`crate::lifecycle::prune::plan`]),
//! within `--max-prune`: over the budget, none.

use crate::cluster::node_object::{condition, configured, name_of, tainted};
use crate::delivery::MintedToken;
use crate::lifecycle::login::Login;
use crate::lifecycle::machines::Refusal;
use crate::lifecycle::prune::{self, Leaving, MaxPrune};
use crate::lifecycle::taint::{Fresh, Verdict, verdict};
use crate::lifecycle::targets::{Target, Targets};
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use wmrender_contract::node_status::{
    AGENT_ANNOTATION, DESIRED_BUNDLE_ANNOTATION, DESIRED_PAYLOAD_ANNOTATION, PAYLOAD_PULL_CONDITION_TYPE,
    PULL_CONDITION_TYPE, PULLED_PAYLOAD_ANNOTATION, REASON_SYNCED_SINCE,
};

/// The first pause before the same target is synced again while it is not configured; it doubles up to
/// [`BACKOFF_MAX`].
pub const BACKOFF_FIRST: Duration = Duration::from_secs(30);
pub const BACKOFF_MAX: Duration = Duration::from_secs(600);

/// What the controller remembers of one target (lost on a restart, which costs at most one early sync).
#[derive(Clone, Debug, Default)]
pub struct Memory {
    /// When it was last synced.
    pub synced_at: Option<Instant>,
    /// Syncs in a row after which it was still not configured.
    pub failures: u32,
    /// The bundle its last sync converged on: a host whose agent does not report on its Node (it cannot yet, or a
    /// posix staging host) counts as configured on it until its agent says otherwise.
    pub converged: Option<String>,
    /// The payload its last converged sync delivered, and the one its agent then said it runs.
    pub payload: Option<PayloadSeen>,
    /// Its last sync's agent pass failed (`Fresh::Failed`): tainted until a later sync says otherwise.
    pub fresh: Option<Fresh>,
    /// The cloud-node-manager's token its last sync pushed.
    pub token: Option<MintedToken>,
    /// Its last sync waited on the cluster before its Node existed: synced again as soon as the Node registers (the
    /// agent finishes what waited on kubelet's certificate), not after the back-off.
    pub waiting_on_join: bool,
    /// The published payload its Node was pointed at, and when this controller pointed it (or first saw it pointed,
    /// after a restart): the start of its [`PULL_PATIENCE`].
    pub pointed: Option<(String, Instant)>,
    /// What this controller last set on its Node (the references of a [`Point`]), and when: on its way (a place in
    /// the wave) for [`WATCH_LAG`] even while the watch still shows the Node as it was before; past that, the Node
    /// as the watch shows it says.
    pub just_pointed: Option<(Vec<String>, Instant)>,
}

/// How long a Node the controller pointed counts as on its way though the watch does not show it pointed: the
/// watch's lag behind the patch (well under a second at rest, seconds under load). Bounded, so that a memory the
/// Node never bears out (its patch answered and lost, say) does not hold the wave for good.
pub const WATCH_LAG: Duration = Duration::from_secs(60);

/// How long a Node pointed at the published payload is given to pull it before, if its agent shows no sign of
/// doing so (no `wmrender.dev/PayloadPulled` condition, or one that says it has nothing to do: reason
/// `SyncedSince`), the payload is delivered over SSH instead: an agent too old to pull a payload never does, nor one
/// that a sync gave another payload since it pulled this one (it pulls again only when the annotation changes). A
/// pull that is refused, retried or still at work holds the wave instead, and says why.
pub const PULL_PATIENCE: Duration = Duration::from_secs(600);

/// What the controller delivers: the rendered bundle's digest, its payload's digest and its agent's sha256 (when it
/// has a payload: `--payload`).
#[derive(Clone, Copy, Debug)]
pub struct Want<'a> {
    pub bundle: &'a str,
    pub payload: Option<&'a str>,
    pub agent: Option<&'a str>,
}

/// What a converged sync of a target delivered of the payload, and what its agent's pass said of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PayloadSeen {
    /// The controller's payload digest the sync delivered.
    pub delivered: String,
    /// The payload digest the agent's pass reported right after (empty: an agent, or a posix host's apply step,
    /// that does not say).
    pub reported: String,
}

impl Memory {
    /// The pause before the next sync of a not-configured target.
    pub fn backoff(&self) -> Duration {
        BACKOFF_FIRST.saturating_mul(1 << self.failures.min(5)).min(BACKOFF_MAX)
    }

    fn due(&self, now: Instant) -> bool {
        self.synced_at.is_none_or(|t| now.saturating_duration_since(t) >= self.backoff())
    }

    /// Whether this controller pointed the Node at `reference` within the last [`WATCH_LAG`].
    fn just_pointed_at(&self, reference: &str, now: Instant) -> bool {
        self.just_pointed.as_ref().is_some_and(|(references, at)| {
            now.saturating_duration_since(*at) < WATCH_LAG && references.iter().any(|r| r == reference)
        })
    }
}

/// Whether a target's token must be renewed now, the session pushing `pushing` (none: the bundle needs no token,
/// or this is a dry run). Once half its life is gone, so that a failed sync and its back-off still leave it hours.
/// A token the controller did not push itself (it restarted since) is of unknown age: renewed once.
pub fn token_due(memory: &Memory, pushing: Option<MintedToken>, now: Instant) -> bool {
    pushing.is_some() && memory.token.is_none_or(|t| now.saturating_duration_since(t.minted) >= t.lifetime / 2)
}

/// The next step for a target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next {
    /// Nothing to do: configured and schedulable.
    Nothing,
    /// Deliver the bundle (one sync of the target), for this reason.
    Sync(String),
    /// Take wmrender's taint off: configured.
    Untaint,
    /// Put the taint on (known failing), then sync again once the back-off allows.
    Taint(String),
    /// Not configured, synced recently: wait for the back-off (or for the agent's service, which goes on by itself).
    Wait(String),
    /// Point the Node at the published bundle, payload or both: its agent pulls them (`--pull-from`,
    /// `--pull-payload-from`).
    Pull(Point),
}

/// What a Node is pointed at (the annotations the controller sets), and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Point {
    /// `wmrender.dev/desired-bundle`: the rendered bundle as published.
    pub bundle: Option<String>,
    /// `wmrender.dev/desired-payload`: the controller's payload as published.
    pub payload: Option<String>,
    pub why: String,
}

/// Where the controller's bundle and payload are published, for the Nodes to pull them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Published<'a> {
    /// `--pull-from`: the rendered bundle, `registry/repository@sha256:…`.
    pub bundle: Option<&'a str>,
    /// `--pull-payload-from`: the payload (`--payload`), `registry/repository@sha256:…`.
    pub payload: Option<&'a str>,
}

/// The bundle the Node is pointed at (`wmrender.dev/desired-bundle`), if any.
pub fn desired_bundle(node: &Value) -> Option<&str> {
    node["metadata"]["annotations"][DESIRED_BUNDLE_ANNOTATION].as_str()
}

/// The payload the Node is pointed at (`wmrender.dev/desired-payload`), if any.
pub fn desired_payload(node: &Value) -> Option<&str> {
    node["metadata"]["annotations"][DESIRED_PAYLOAD_ANNOTATION].as_str()
}

/// The payload the Node's agent last pulled and converged on (`wmrender.dev/pulled-payload`), if any.
fn pulled_payload(node: &Value) -> Option<&str> {
    node["metadata"]["annotations"][PULLED_PAYLOAD_ANNOTATION].as_str()
}

/// Whether the Node is on its way to what is published: pointed at the bundle and not yet applied it, or at the
/// payload, not yet converged on it and still running another (failing ones too: a pull that goes wrong holds the
/// wave, as a drain holds a rollout). Pointed as the Node says or as this controller pointed it just now: the watch
/// may not show a patch of the last pass yet, and a Node counted by neither would let the wave overshoot.
fn on_its_way(node: &Value, want: Want, published: Published, memory: &Memory, now: Instant) -> bool {
    let agent = configured(node);
    let bundle = published.bundle.is_some_and(|r| {
        (desired_bundle(node) == Some(r) || memory.just_pointed_at(r, now))
            && agent.as_ref().is_none_or(|c| c.bundle != want.bundle)
    });
    let payload = published.payload.is_some_and(|r| {
        (desired_payload(node) == Some(r) || memory.just_pointed_at(r, now))
            && pulled_payload(node) != Some(r)
            && payload_behind(agent.as_ref().map(|c| c.payload.as_str()), want.payload, memory).is_some()
    });
    bundle || payload
}

/// What a Node pointed at `reference` (`what`: "bundle" or "payload") says of its pull (its condition
/// `condition_type`), for the line and the log.
fn pulling(node: &Value, condition_type: &str, what: &str, reference: &str) -> String {
    let c = node["status"]["conditions"]
        .as_array()
        .and_then(|l| l.iter().find(|c| c["type"] == condition_type))
        .filter(|c| c["message"].as_str().is_some_and(|m| m.contains(reference)) || c["status"] != "True");
    let message = c.and_then(|c| c["message"].as_str()).unwrap_or("");
    match c.and_then(|c| c["status"].as_str()) {
        Some("False") => format!("the node refused the {what} {reference}: {message}"),
        Some("Unknown") => format!("the node retries the {what} {reference}: {message}"),
        _ => format!("the node is pulling the {what} {reference}"),
    }
}

/// The decision for a target whose Node is `node` (none yet), the controller delivering `want`, published as
/// `published` for the Node to pull, `token_due` when its credentials must be renewed now.
pub fn decide(
    node: Option<&Value>,
    want: Want,
    published: Published,
    token_due: bool,
    memory: &Memory,
    now: Instant,
) -> Next {
    let Some(node) = node else {
        return if memory.due(now) {
            Next::Sync("no Node yet: first contact".into())
        } else {
            Next::Wait("no Node yet; synced, waiting for kubelet to register".into())
        };
    };
    if memory.waiting_on_join {
        return Next::Sync("it joined: the agent finishes now".into());
    }
    let desired = want.bundle;
    let agent = configured(node);
    let applied = agent.as_ref().map(|c| c.bundle.as_str()).unwrap_or("");
    let behind = payload_behind(agent.as_ref().map(|c| c.payload.as_str()), want.payload, memory);
    // The published payload the Node runs another of and has not pulled: a Node that pulled it may still keep
    // programs the payload no longer holds (a pull, like a sync, leaves them), or another agent (payload_step).
    let payload_to_pull = published.payload.filter(|r| behind.is_some() && pulled_payload(node) != Some(*r));
    if !applied.is_empty() && applied != desired {
        return match published.bundle {
            Some(reference) if desired_bundle(node) == Some(reference) => {
                Next::Wait(pulling(node, PULL_CONDITION_TYPE, "bundle", reference))
            }
            Some(reference) => Next::Pull(Point {
                bundle: Some(reference.to_string()),
                payload: payload_to_pull.map(str::to_string),
                why: format!("the agent applied {applied}; the rendered bundle is {desired}, published as {reference}"),
            }),
            None => Next::Sync(format!("the agent applied {applied}; the rendered bundle is {desired}")),
        };
    }
    // A host whose agent does not report (yet): what its last sync delivered says the same.
    if applied.is_empty()
        && let Some(delivered) = memory.converged.as_deref().filter(|c| *c != desired)
    {
        return Next::Sync(format!("its last sync delivered {delivered}; the rendered bundle is {desired}"));
    }
    if token_due && memory.due(now) {
        return Next::Sync("the cloud-node-manager's token is due for renewal".into());
    }
    let fresh = memory.fresh.clone().unwrap_or(Fresh::Unknown);
    let verdict = verdict(node, desired, &fresh, memory.converged.as_deref() == Some(desired));
    // A failing node is tainted first (its sync after the back-off delivers the payload too).
    if !matches!(verdict, Verdict::On(_))
        && let Some(why) = behind
        && let Some(next) = payload_step(node, want, published, &verdict, why, memory, now)
    {
        return next;
    }
    match verdict {
        Verdict::On(why) if !tainted(node) => Next::Taint(why),
        Verdict::On(why) if memory.due(now) => Next::Sync(why),
        Verdict::On(why) => Next::Wait(why),
        Verdict::Off if tainted(node) => Next::Untaint,
        Verdict::Off => Next::Nothing,
        Verdict::Keep if memory.due(now) => Next::Sync("the agent has not reported the bundle configured yet".into()),
        Verdict::Keep => Next::Wait("the agent has not reported the bundle configured yet".into()),
    }
}

/// The step for a Node that runs another payload than the controller's (`why`), when it is not failing: sync it, or
/// with `--pull-payload-from` point it at the published payload, wait while it pulls (a pull refused or retried
/// holds the wave and says why), and sync it after all when its agent shows no sign of pulling it after
/// [`PULL_PATIENCE`]; once pulled, sync it only for its agent, which a pull never brings. `None`: the taint rule's
/// step.
fn payload_step(
    node: &Value,
    want: Want,
    published: Published,
    verdict: &Verdict,
    why: String,
    memory: &Memory,
    now: Instant,
) -> Option<Next> {
    let due = memory.due(now);
    let Some(r) = published.payload else { return due.then_some(Next::Sync(why)) };
    if pulled_payload(node) == Some(r) {
        let runs_agent = node["metadata"]["annotations"][AGENT_ANNOTATION].as_str().unwrap_or("");
        let want_agent = want.agent.filter(|a| *a != runs_agent)?;
        let runs = if runs_agent.is_empty() {
            "does not say which agent it runs".to_string()
        } else {
            format!("runs the agent {runs_agent}")
        };
        return due.then(|| {
            Next::Sync(format!(
                "it pulled the payload {r} and {runs}; the payload's agent is {want_agent}, which only comes over SSH"
            ))
        });
    }
    if desired_payload(node) != Some(r) {
        let why = format!("{why}, published as {r}");
        return Some(Next::Pull(Point { bundle: None, payload: Some(r.to_string()), why }));
    }
    let since = memory.pointed.as_ref().filter(|(p, _)| p == r).map(|(_, at)| now.saturating_duration_since(*at));
    let silent = match condition(node, PAYLOAD_PULL_CONDITION_TYPE) {
        None => true,
        Some(c) => c["reason"] == REASON_SYNCED_SINCE,
    };
    if silent && since.is_some_and(|s| s >= PULL_PATIENCE) {
        let minutes = PULL_PATIENCE.as_secs() / 60;
        return due.then(|| {
            Next::Sync(format!(
                "pointed at the payload {r} over {minutes} minutes ago, its agent shows no sign of pulling it: {why}"
            ))
        });
    }
    // On its way; a configured Node that is tainted is untainted all the same, and one not known configured is
    // synced after the back-off.
    (matches!(verdict, Verdict::Off) && !tainted(node))
        .then(|| Next::Wait(pulling(node, PAYLOAD_PULL_CONDITION_TYPE, "payload", r)))
}

/// Why a node whose agent says it runs `runs` (empty: it does not say) needs the controller's payload `want`, if it
/// does. Not when this controller's own converged sync delivered `want` and the agent then said what it says now: a
/// node keeps programs a payload no longer holds (sync prunes them only when asked), so its digest may stay another.
fn payload_behind(runs: Option<&str>, want: Option<&str>, memory: &Memory) -> Option<String> {
    let (runs, want) = (runs?, want?);
    let seen =
        memory.payload.as_ref().is_some_and(|s| s.delivered == want && (s.reported.is_empty() || s.reported == runs));
    if runs == want || seen {
        return None;
    }
    Some(if runs.is_empty() {
        format!("the agent does not say which payload it runs; the payload is {want}")
    } else {
        format!("the agent runs the payload {runs}; the payload is {want}")
    })
}

/// What a status line says the controller does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    Nothing,
    Sync,
    Untaint,
    Taint,
    Wait,
    /// A step of this target is running.
    InProgress,
    /// Drain, deconfigure, delete: the host left the desired state.
    Prune,
    /// Not contacted, and why: a hostile or missing address, an unknown platform, a conflict, no record.
    Refused,
    /// Point the Node at the published bundle or payload, for its agent to pull.
    Pull,
    /// The desired state could not be read: nothing is done until it can.
    Blocked,
}

/// A unit enum's name as it is written in the JSON (`in-progress`), for the table and the metrics.
fn written(value: &impl Serialize, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    f.write_str(serde_json::to_value(value).ok().as_ref().and_then(|v| v.as_str()).unwrap_or_default())
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        written(self, f)
    }
}

/// Where a host stands, for the metrics (`wmrender_controller_nodes{state}`) and the status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// Its Node is there, configured on the rendered bundle, untainted.
    Configured,
    /// Its Node is there, not (yet) known configured.
    NotConfigured,
    /// Its agent reports failing.
    Failing,
    /// Tainted, not failing.
    Tainted,
    /// A target without a Node yet.
    NoNode,
    /// Not contacted: refused (a hostile address, a conflict, no login record, over the prune budget).
    Refused,
    /// Not contacted yet: a Machine not provisioned far enough.
    Waiting,
    /// Left the desired state: being pruned.
    Leaving,
    /// The desired state could not be read.
    Unknown,
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        written(self, f)
    }
}

/// One line of the fleet: where a target stands and what the controller does (or would do) next.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Line {
    /// The target's name (the Machine's, the BYOH host's address, the inventory's), empty for a Node no target names.
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
    pub state: State,
    pub next: Action,
    pub why: String,
}

impl Line {
    /// A line about a host whose Node is `node`; its state as the Node tells it until the decision says more.
    fn of(target: &str, machine: Option<String>, node: Option<&Value>, desired: &str) -> Line {
        let agent = node.and_then(configured);
        let state = match (node, agent.as_ref().map(|a| a.status.as_str())) {
            (None, _) => State::NoNode,
            (Some(_), Some("False")) => State::Failing,
            (Some(n), _) if tainted(n) => State::Tainted,
            (Some(_), _) => State::NotConfigured,
        };
        Line {
            target: target.to_string(),
            machine,
            node: node.map(|n| name_of(n).to_string()),
            applied: agent.as_ref().map(|a| a.bundle.clone()).unwrap_or_default(),
            desired: desired.to_string(),
            configured: agent.map(|a| a.status).unwrap_or_default(),
            tainted: node.is_some_and(tainted),
            state,
            next: Action::Nothing,
            why: String::new(),
        }
    }

    /// The line of a desired state that could not be read.
    pub fn blocked(why: String) -> Line {
        Line { state: State::Unknown, next: Action::Blocked, why, ..Line::of("", None, None, "") }
    }

    /// A host not contacted.
    pub fn refused(r: &Refusal) -> Line {
        Line {
            state: if r.refused { State::Refused } else { State::Waiting },
            next: if r.refused { Action::Refused } else { Action::Wait },
            why: r.why.clone(),
            ..Line::of(&r.target, r.machine.clone(), None, "")
        }
    }
}

/// What one pass decided.
#[derive(Debug, Default)]
pub struct Plan {
    /// Every target, every host not contacted, every host leaving: the status lines.
    pub lines: Vec<Line>,
    /// Targets to sync (index into the targets), with whether the host may run pods (it has a Node).
    pub sync: Vec<(usize, bool, String)>,
    /// Nodes to taint (with why) or untaint, by target index.
    pub taint: Vec<(usize, Verdict)>,
    /// Nodes to point at the published bundle, by target index (within `--max-unavailable`).
    pub pull: Vec<(usize, Point)>,
    /// Hosts to prune.
    pub prune: Vec<Leaving>,
    /// Records to drop: a Machine's whose Machine and Node are gone.
    pub forget: Vec<Login>,
    /// Why none of the hosts that left is pruned (over `--max-prune`).
    pub prune_refused: Option<String>,
    /// The hosts held back by the budget, by target name.
    pub held_back: Vec<String>,
}

/// What a pass decides from.
pub struct Fleet<'a> {
    pub targets: &'a Targets,
    /// The Windows Nodes, as watched.
    pub nodes: &'a [Value],
    pub logins: &'a [Login],
    pub memories: &'a BTreeMap<String, Memory>,
    /// Targets (and prunes, by target name) whose step is running.
    pub in_flight: &'a BTreeSet<String>,
    /// The rendered bundle's digest.
    pub desired: &'a str,
    /// The payload's digest, when the controller has one (`--payload`).
    pub payload: Option<&'a str>,
    /// The sha256 of the agent's executable the controller delivers, when it has a payload.
    pub agent: Option<&'a str>,
    /// The token the session pushes.
    pub token: Option<MintedToken>,
    /// Prune the hosts that left, within this budget (`None`: `--no-prune`).
    pub prune: Option<MaxPrune>,
    /// Nodes pull the bundle, the payload or both: where they are published, and how many Nodes may be on their way
    /// at once.
    pub pull: Option<Wave<'a>>,
    pub now: Instant,
}

/// The pull model's rollout (`--pull-from`, `--pull-payload-from`, `--max-unavailable`).
#[derive(Clone, Copy, Debug)]
pub struct Wave<'a> {
    /// What is published, as `wmrender publish` names it: `registry/repository@sha256:…`.
    pub published: Published<'a>,
    /// How many Nodes may be pointed at it and not have applied (or pulled) it yet.
    pub max_unavailable: usize,
}

/// The Node of a target: the one named as its node, and no other (a Node writes its own addresses).
pub fn node_of<'a>(nodes: &'a [Value], target: &Target) -> Option<&'a Value> {
    nodes.iter().find(|n| name_of(n) == target.node_name)
}

/// The whole pass's decision.
pub fn fleet(f: &Fleet) -> Plan {
    let mut plan = Plan::default();
    let published = f.pull.map(|w| w.published).unwrap_or_default();
    let want = Want { bundle: f.desired, payload: f.payload, agent: f.agent };
    let none = Memory::default();
    let memory_of = |t: &Target| f.memories.get(&t.name).unwrap_or(&none);
    let on_its_way =
        |t: &Target| node_of(f.nodes, t).is_some_and(|n| on_its_way(n, want, published, memory_of(t), f.now));
    let mut on_the_way = f.targets.targets.iter().filter(|t| on_its_way(t)).count();
    for (i, target) in f.targets.targets.iter().enumerate() {
        let node = node_of(f.nodes, target);
        let mut line = Line::of(&target.reach.name, target.machine().map(|m| m.name.clone()), node, f.desired);
        if f.in_flight.contains(&target.name) {
            line.next = Action::InProgress;
            line.why = "its sync is running".into();
            plan.lines.push(line);
            continue;
        }
        let memory = memory_of(target);
        let renew = node.is_some() && token_due(memory, f.token, f.now);
        let (next, why) = match decide(node, want, published, renew, memory, f.now) {
            Next::Nothing => (Action::Nothing, String::new()),
            Next::Sync(why) => {
                plan.sync.push((i, node.is_some(), why.clone()));
                (Action::Sync, why)
            }
            Next::Untaint => {
                plan.taint.push((i, Verdict::Off));
                (Action::Untaint, "the agent reports the bundle configured".into())
            }
            Next::Taint(why) => {
                plan.taint.push((i, Verdict::On(why.clone())));
                (Action::Taint, why)
            }
            Next::Wait(why) => (Action::Wait, why),
            Next::Pull(point) => match f.pull {
                // A Node on its way already (to the payload, now pointed at a new bundle too) keeps its place.
                Some(_) if on_its_way(target) => {
                    let why = point.why.clone();
                    plan.pull.push((i, point));
                    (Action::Pull, why)
                }
                Some(w) if on_the_way < w.max_unavailable => {
                    on_the_way += 1;
                    let why = point.why.clone();
                    plan.pull.push((i, point));
                    (Action::Pull, why)
                }
                _ => {
                    let max = f.pull.map_or(0, |w| w.max_unavailable);
                    (
                        Action::Wait,
                        format!(
                            "waiting for the wave: {on_the_way} node(s) on their way to what is published \
                             (--max-unavailable {max})"
                        ),
                    )
                }
            },
        };
        if next == Action::Nothing && line.state != State::NoNode {
            line.state = State::Configured;
        }
        line.next = next;
        line.why = why;
        plan.lines.push(line);
    }
    plan.lines.extend(f.targets.refused.iter().map(Line::refused));
    let Some(max) = f.prune else { return plan };
    let pruning = prune::plan(f.logins, f.targets, f.nodes);
    for orphan in &pruning.orphans {
        let node = f.nodes.iter().find(|n| name_of(n) == orphan);
        plan.lines.push(Line {
            state: State::Refused,
            next: Action::Refused,
            why: "labelled wmrender.dev/managed, but no login record says how to reach it: never pruned; \
                  deconfigure it by hand and delete the Node"
                .into(),
            ..Line::of("", None, node, "")
        });
    }
    plan.forget = pruning.gone;
    let leaving: Vec<Leaving> =
        pruning.leaving.into_iter().filter(|l| !f.in_flight.contains(&prune_key(&l.login.target))).collect();
    let budget = prune::budget(leaving.len(), f.logins.len(), max);
    for l in &leaving {
        let (state, next, why) = match &budget {
            Ok(()) => (State::Leaving, Action::Prune, "no target names it any more".to_string()),
            Err(why) => (State::Refused, Action::Refused, why.clone()),
        };
        let line = Line::of(&l.login.target, l.login.machine.clone(), l.node.as_ref(), "");
        plan.lines.push(Line { state, next, why, ..line });
    }
    match budget {
        Ok(()) => plan.prune = leaving,
        Err(why) => {
            plan.prune_refused = Some(why);
            plan.held_back = leaving.iter().map(|l| l.login.target.clone()).collect();
        }
    }
    plan
}

/// The queue's key of a host's prune (a target's own key is its name).
pub fn prune_key(target: &str) -> String {
    format!("prune:{target}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::targets::{test_login, test_target};
    use serde_json::json;
    use wmrender_contract::node_status::{
        BUNDLE_ANNOTATION, CONDITION_TYPE, PAYLOAD_ANNOTATION, TAINT_EFFECT, TAINT_KEY,
    };

    const DESIRED: &str = "sha256:11";
    const NOT_PUBLISHED: Published = Published { bundle: None, payload: None };
    /// A controller without a payload.
    const BUNDLE_ONLY: Want = Want { bundle: DESIRED, payload: None, agent: None };

    fn node(status: Option<&str>, bundle: &str, taint: bool) -> Value {
        let mut n = json!({"metadata": {"name": "win-a", "annotations": {BUNDLE_ANNOTATION: bundle},
                                        "labels": {"wmrender.dev/managed": "true"}},
                           "spec": {}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        if let Some(s) = status {
            n["status"]["conditions"].as_array_mut().unwrap().push(json!({
                "type": CONDITION_TYPE, "status": s, "reason": "ApplyFailed", "message": "kube-proxy stopped"}));
        }
        if taint {
            n["spec"]["taints"] = json!([{"key": TAINT_KEY, "effect": TAINT_EFFECT}]);
        }
        n
    }

    fn synced(ago: u64, failures: u32, now: Instant) -> Memory {
        Memory { synced_at: Some(now - Duration::from_secs(ago)), failures, ..Default::default() }
    }

    #[test]
    fn a_target_without_a_node_is_synced_then_waited_for() {
        let now = Instant::now() + Duration::from_secs(3600);
        assert!(matches!(decide(None, BUNDLE_ONLY, NOT_PUBLISHED, false, &Memory::default(), now), Next::Sync(_)));
        assert!(matches!(decide(None, BUNDLE_ONLY, NOT_PUBLISHED, false, &synced(10, 0, now), now), Next::Wait(_)));
        assert!(matches!(decide(None, BUNDLE_ONLY, NOT_PUBLISHED, false, &synced(31, 0, now), now), Next::Sync(_)));
        assert!(
            matches!(decide(None, BUNDLE_ONLY, NOT_PUBLISHED, false, &synced(100, 3, now), now), Next::Wait(_)),
            "back-off 240 s"
        );
    }

    #[test]
    fn a_configured_node_is_untainted_and_then_left_alone() {
        let now = Instant::now();
        let m = Memory::default();
        assert_eq!(
            decide(Some(&node(Some("True"), DESIRED, true)), BUNDLE_ONLY, NOT_PUBLISHED, false, &m, now),
            Next::Untaint
        );
        assert_eq!(
            decide(Some(&node(Some("True"), DESIRED, false)), BUNDLE_ONLY, NOT_PUBLISHED, false, &m, now),
            Next::Nothing
        );
    }

    #[test]
    fn another_payload_is_synced_unless_this_controller_delivered_it_since() {
        let now = Instant::now() + Duration::from_secs(3600);
        let on = |payload: &str| {
            let mut n = node(Some("True"), DESIRED, false);
            n["metadata"]["annotations"][PAYLOAD_ANNOTATION] = json!(payload);
            n
        };
        let m = Memory::default();
        let want = Some("sha256:p2");
        let sync = |n: &Value, pull: Option<&str>, m: &Memory| match decide(
            Some(n),
            Want { bundle: DESIRED, payload: want, agent: None },
            Published { bundle: pull, payload: None },
            false,
            m,
            now,
        ) {
            Next::Sync(why) => why,
            other => format!("{other:?}"),
        };
        // The agent runs another payload, even with the rendered bundle applied; with `--pull-from` too.
        let old = on("sha256:p1");
        assert!(sync(&old, None, &m).contains("the agent runs the payload sha256:p1"));
        assert!(sync(&old, Some("r@sha256:11"), &m).contains("the payload is sha256:p2"));
        // An agent that does not say (an older one): synced.
        let silent = node(Some("True"), DESIRED, false);
        assert!(sync(&silent, None, &m).contains("does not say"));
        // The same payload; no payload given to the controller: nothing to do.
        assert_eq!(
            decide(
                Some(&on("sha256:p2")),
                Want { bundle: DESIRED, payload: want, agent: None },
                NOT_PUBLISHED,
                false,
                &m,
                now
            ),
            Next::Nothing
        );
        assert_eq!(decide(Some(&old), BUNDLE_ONLY, NOT_PUBLISHED, false, &m, now), Next::Nothing);
        // Delivered by this controller's converged sync, after which the agent said what it says now (a node that
        // keeps programs the payload left; an agent that does not say): nothing to do. The agent saying another
        // since (drift) is synced again, after the back-off.
        let seen = |reported: &str| Memory {
            payload: Some(PayloadSeen { delivered: "sha256:p2".into(), reported: reported.into() }),
            ..synced(60, 0, now)
        };
        assert_eq!(
            decide(
                Some(&old),
                Want { bundle: DESIRED, payload: want, agent: None },
                NOT_PUBLISHED,
                false,
                &seen("sha256:p1"),
                now
            ),
            Next::Nothing
        );
        assert_eq!(
            decide(
                Some(&silent),
                Want { bundle: DESIRED, payload: want, agent: None },
                NOT_PUBLISHED,
                false,
                &seen(""),
                now
            ),
            Next::Nothing
        );
        assert!(sync(&on("sha256:p3"), None, &seen("sha256:p1")).contains("sha256:p3"));
        let recent = Memory { synced_at: Some(now), ..seen("sha256:p1") };
        assert_eq!(
            decide(
                Some(&on("sha256:p3")),
                Want { bundle: DESIRED, payload: want, agent: None },
                NOT_PUBLISHED,
                false,
                &recent,
                now
            ),
            Next::Nothing
        );
        // A failing node is tainted first.
        let mut failing = on("sha256:p1");
        failing["status"]["conditions"][1]["status"] = json!("False");
        assert!(matches!(
            decide(Some(&failing), Want { bundle: DESIRED, payload: want, agent: None }, NOT_PUBLISHED, false, &m, now),
            Next::Taint(_)
        ));
    }

    #[test]
    fn another_bundle_is_synced_at_once_a_due_token_after_the_back_off() {
        let now = Instant::now() + Duration::from_secs(3600);
        let recent = synced(1, 4, now);
        let old = node(Some("True"), "sha256:00", false);
        assert!(
            matches!(decide(Some(&old), BUNDLE_ONLY, NOT_PUBLISHED, false, &recent, now), Next::Sync(w) if w.contains("sha256:00"))
        );
        let current = node(Some("True"), DESIRED, false);
        assert!(
            matches!(decide(Some(&current), BUNDLE_ONLY, NOT_PUBLISHED, true, &synced(3600, 0, now), now), Next::Sync(w) if w.contains("token"))
        );
        // A renewal that just failed is not tried again on every change in the cluster.
        assert_eq!(decide(Some(&current), BUNDLE_ONLY, NOT_PUBLISHED, true, &recent, now), Next::Nothing);
    }

    #[test]
    fn a_token_is_renewed_once_half_its_life_is_gone_or_when_its_age_is_unknown() {
        let now = Instant::now() + Duration::from_secs(48 * 3600);
        let day = Duration::from_secs(24 * 3600);
        let minted =
            |hours_ago: u64| MintedToken { minted: now - Duration::from_secs(hours_ago * 3600), lifetime: day };
        let holding = |hours_ago| Memory { token: Some(minted(hours_ago)), ..Default::default() };
        let pushing = Some(minted(0));
        assert!(!token_due(&holding(11), pushing, now));
        assert!(token_due(&holding(12), pushing, now));
        assert!(token_due(&Memory::default(), pushing, now), "pushed before a restart: of unknown age");
        assert!(!token_due(&Memory::default(), None, now), "the bundle needs no token");
    }

    #[test]
    fn a_failing_agent_is_tainted_then_synced_again_after_the_back_off() {
        let now = Instant::now() + Duration::from_secs(3600);
        let failing = node(Some("False"), DESIRED, false);
        assert!(
            matches!(decide(Some(&failing), BUNDLE_ONLY, NOT_PUBLISHED, false, &synced(1, 0, now), now), Next::Taint(w) if w.contains("kube-proxy"))
        );
        let tainted = node(Some("False"), DESIRED, true);
        assert!(matches!(
            decide(Some(&tainted), BUNDLE_ONLY, NOT_PUBLISHED, false, &synced(1, 0, now), now),
            Next::Wait(_)
        ));
        assert!(matches!(
            decide(Some(&tainted), BUNDLE_ONLY, NOT_PUBLISHED, false, &synced(60, 0, now), now),
            Next::Sync(_)
        ));
        // A sync whose agent pass just failed taints at once, whatever the Node says yet.
        let fresh = Memory { fresh: Some(Fresh::Failed("kubelet".into())), ..synced(1, 1, now) };
        let silent = node(None, "", false);
        assert!(
            matches!(decide(Some(&silent), BUNDLE_ONLY, NOT_PUBLISHED, false, &fresh, now), Next::Taint(w) if w == "kubelet")
        );
    }

    #[test]
    fn a_node_whose_agent_has_not_reported_is_synced_again_only_after_the_back_off() {
        let now = Instant::now() + Duration::from_secs(3600);
        let silent = node(None, "", true);
        assert!(matches!(
            decide(Some(&silent), BUNDLE_ONLY, NOT_PUBLISHED, false, &synced(5, 1, now), now),
            Next::Wait(_)
        ));
        assert!(matches!(
            decide(Some(&silent), BUNDLE_ONLY, NOT_PUBLISHED, false, &synced(61, 1, now), now),
            Next::Sync(_)
        ));
        assert_eq!(Memory { failures: 30, ..Default::default() }.backoff(), BACKOFF_MAX);
        // Its last sync converged on the bundle: configured until the agent says otherwise.
        let converged = Memory { converged: Some(DESIRED.into()), ..synced(600, 0, now) };
        assert_eq!(decide(Some(&silent), BUNDLE_ONLY, NOT_PUBLISHED, false, &converged, now), Next::Untaint);
        let untainted = node(None, "", false);
        assert_eq!(decide(Some(&untainted), BUNDLE_ONLY, NOT_PUBLISHED, false, &converged, now), Next::Nothing);
        let failing = node(Some("False"), DESIRED, true);
        assert!(matches!(decide(Some(&failing), BUNDLE_ONLY, NOT_PUBLISHED, false, &converged, now), Next::Sync(_)));
        // A new render: synced at once, not after the back-off.
        let recent = Memory { converged: Some("sha256:00".into()), ..synced(1, 0, now) };
        assert!(
            matches!(decide(Some(&untainted), BUNDLE_ONLY, NOT_PUBLISHED, false, &recent, now), Next::Sync(w) if w.contains("sha256:00"))
        );
    }

    fn target(name: &str, node_name: &str) -> Target {
        test_target(name, &format!("10.0.0.{}", name.len()), node_name)
    }

    fn login(target: &str, node: &str) -> Login {
        test_login(target, &format!("10.1.0.{}", target.len()), Some(node))
    }

    fn named(name: &str, n: Value) -> Value {
        let mut n = n;
        n["metadata"]["name"] = name.into();
        n
    }

    #[test]
    fn the_fleet_syncs_new_hosts_leaves_running_ones_to_their_step_and_reports_refusals() {
        let now = Instant::now();
        let targets = Targets {
            targets: vec![target("new", "new"), target("busy", "busy"), target("done", "done")],
            refused: vec![Refusal {
                target: "m-evil".into(),
                machine: Some("m-evil".into()),
                refused: true,
                why: "the address `$(x)` is not an IP address or DNS name".into(),
            }],
            ..Default::default()
        };
        let nodes = [named("done", node(Some("True"), DESIRED, false)), named("busy", node(None, "", true))];
        let in_flight: BTreeSet<String> = ["busy".to_string()].into();
        let plan = fleet(&Fleet {
            targets: &targets,
            nodes: &nodes,
            logins: &[],
            memories: &BTreeMap::new(),
            in_flight: &in_flight,
            desired: DESIRED,
            payload: None,
            agent: None,
            token: None,
            pull: None,
            prune: Some(MaxPrune::default()),
            now,
        });
        let actions: Vec<(&str, Action)> = plan.lines.iter().map(|l| (l.target.as_str(), l.next)).collect();
        assert_eq!(
            actions,
            [
                ("new", Action::Sync),
                ("busy", Action::InProgress),
                ("done", Action::Nothing),
                ("m-evil", Action::Refused)
            ]
        );
        assert_eq!(plan.sync.iter().map(|(i, has_node, _)| (*i, *has_node)).collect::<Vec<_>>(), [(0, false)]);
    }

    #[test]
    fn hosts_that_left_are_pruned_within_the_budget_and_none_over_it() {
        let now = Instant::now();
        let targets = Targets { targets: vec![target("a", "a")], ..Default::default() };
        let managed = |name: &str| named(name, node(Some("True"), DESIRED, false));
        let nodes = [managed("a"), managed("b"), managed("c")];
        let logins = [login("a", "a"), login("b", "b"), login("c", "c")];
        let decide_with = |max: MaxPrune| {
            fleet(&Fleet {
                targets: &targets,
                nodes: &nodes,
                logins: &logins,
                memories: &BTreeMap::new(),
                in_flight: &BTreeSet::new(),
                desired: DESIRED,
                payload: None,
                agent: None,
                token: None,
                pull: None,
                prune: Some(max),
                now,
            })
        };
        let within = decide_with(MaxPrune::Count(2));
        assert_eq!(within.prune.iter().map(|l| l.login.target.as_str()).collect::<Vec<_>>(), ["b", "c"]);
        let over = decide_with(MaxPrune::default());
        assert!(over.prune.is_empty());
        assert!(over.prune_refused.as_deref().is_some_and(|w| w.contains("2 of the 3")), "{:?}", over.prune_refused);
        assert!(over.lines.iter().filter(|l| l.next == Action::Refused).count() == 2);
    }

    #[test]
    fn with_pull_from_nodes_are_pointed_at_the_published_bundle_in_waves_and_a_refusal_holds_the_wave() {
        let now = Instant::now();
        let targets = four_targets();
        let old = |name: &str| named(name, node(Some("True"), "sha256:00", false));
        let pointed = |name: &str, condition: Option<(&str, &str)>| {
            let mut n = old(name);
            n["metadata"]["annotations"][DESIRED_BUNDLE_ANNOTATION] = BUNDLE.into();
            if let Some((status, message)) = condition {
                n["status"]["conditions"].as_array_mut().unwrap().push(json!({
                    "type": PULL_CONDITION_TYPE, "status": status, "reason": "Refused", "message": message}));
            }
            n
        };
        let plan_for = |nodes: &[Value], max: usize| {
            fleet(&Fleet {
                targets: &targets,
                nodes,
                logins: &[],
                memories: &BTreeMap::new(),
                in_flight: &BTreeSet::new(),
                desired: DESIRED,
                payload: None,
                agent: None,
                token: None,
                pull: Some(Wave { published: Published { bundle: Some(BUNDLE), payload: None }, max_unavailable: max }),
                prune: None,
                now,
            })
        };
        let actions = |plan: &Plan| plan.lines.iter().map(|l| l.next).collect::<Vec<_>>();

        // Nobody pointed yet: the first two of four, not synced.
        let plan = plan_for(&[old("a"), old("b"), old("c"), old("d")], 2);
        assert_eq!(actions(&plan), [Action::Pull, Action::Pull, Action::Wait, Action::Wait]);
        assert_eq!(plan.pull.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [0, 1]);
        assert!(plan.sync.is_empty(), "the push path is for first contact and failing nodes");
        assert!(plan.lines[2].why.contains("waiting for the wave: 2 node(s)"), "{}", plan.lines[2].why);

        // a applied it; b still pulling: one more may go.
        let a_done = named("a", node(Some("True"), DESIRED, false));
        let plan = plan_for(&[a_done.clone(), pointed("b", None), old("c"), old("d")], 2);
        assert_eq!(actions(&plan), [Action::Nothing, Action::Wait, Action::Pull, Action::Wait]);
        assert!(plan.lines[1].why.contains("pulling"), "{}", plan.lines[1].why);

        // b refused the bundle: it holds the wave, and says why.
        let refused = pointed("b", Some(("False", "version 1 is older than version 2")));
        let plan = plan_for(&[a_done.clone(), refused, pointed("c", None), old("d")], 2);
        assert_eq!(actions(&plan), [Action::Nothing, Action::Wait, Action::Wait, Action::Wait]);
        assert!(plan.lines[1].why.contains("refused") && plan.lines[1].why.contains("older"), "{}", plan.lines[1].why);
        assert!(plan.pull.is_empty());
    }

    #[test]
    fn with_pull_payload_from_nodes_are_pointed_at_the_published_payload_in_the_same_waves_and_at_both_at_once() {
        let now = Instant::now();
        let targets = four_targets();
        let annotate = |mut n: Value, pairs: &[(&str, &str)]| {
            for (k, v) in pairs {
                n["metadata"]["annotations"][*k] = json!(v);
            }
            n
        };
        // Configured on the rendered bundle, running the old payload.
        let old = |name: &str| {
            annotate(named(name, node(Some("True"), DESIRED, false)), &[(PAYLOAD_ANNOTATION, "sha256:p1")])
        };
        let plan_for = |nodes: &[Value], published: Published, max: usize| {
            fleet(&Fleet {
                targets: &targets,
                nodes,
                logins: &[],
                memories: &BTreeMap::new(),
                in_flight: &BTreeSet::new(),
                desired: DESIRED,
                payload: Some("sha256:p2"),
                agent: None,
                token: None,
                pull: Some(Wave { published, max_unavailable: max }),
                prune: None,
                now,
            })
        };
        let payload_only = Published { bundle: None, payload: Some(PAYLOAD) };
        let actions = |plan: &Plan| plan.lines.iter().map(|l| l.next).collect::<Vec<_>>();

        // Another payload on every node: pointed at the published one two at a time, none synced.
        let plan = plan_for(&[old("a"), old("b"), old("c"), old("d")], payload_only, 2);
        assert_eq!(actions(&plan), [Action::Pull, Action::Pull, Action::Wait, Action::Wait]);
        assert!(plan.sync.is_empty(), "programs are pulled, not synced: {:?}", plan.sync);
        let (_, point) = &plan.pull[0];
        assert_eq!((point.bundle.as_deref(), point.payload.as_deref()), (None, Some(PAYLOAD)));
        assert!(point.why.contains("sha256:p1") && point.why.contains(PAYLOAD), "{}", point.why);

        // a pulled it (its own executable still another: it comes over SSH), b is on its way and c refused it: the
        // wave is full.
        let pulled = annotate(old("a"), &[(DESIRED_PAYLOAD_ANNOTATION, PAYLOAD), (PULLED_PAYLOAD_ANNOTATION, PAYLOAD)]);
        let pulling = annotate(old("b"), &[(DESIRED_PAYLOAD_ANNOTATION, PAYLOAD)]);
        let mut refused = annotate(old("c"), &[(DESIRED_PAYLOAD_ANNOTATION, PAYLOAD)]);
        refused["status"]["conditions"].as_array_mut().unwrap().push(json!({
            "type": PAYLOAD_PULL_CONDITION_TYPE, "status": "False", "reason": "Refused",
            "message": format!("{PAYLOAD} is not signed")}));
        let plan = plan_for(&[pulled.clone(), pulling.clone(), refused.clone(), old("d")], payload_only, 2);
        assert_eq!(actions(&plan), [Action::Nothing, Action::Wait, Action::Wait, Action::Wait]);
        assert!(plan.lines[1].why.contains("pulling the payload"), "{}", plan.lines[1].why);
        assert!(plan.lines[2].why.contains("refused the payload") && plan.lines[2].why.contains("not signed"));
        assert!(plan.lines[3].why.contains("waiting for the wave: 2"), "{}", plan.lines[3].why);
        // With room for one more, d goes; a tainted node on its way is untainted all the same.
        let mut tainted_pulling = pulling.clone();
        tainted_pulling["spec"]["taints"] = json!([{"key": TAINT_KEY, "effect": TAINT_EFFECT}]);
        let plan = plan_for(&[pulled.clone(), tainted_pulling, refused.clone(), old("d")], payload_only, 3);
        assert_eq!(actions(&plan), [Action::Nothing, Action::Untaint, Action::Wait, Action::Pull]);

        // A Node that runs the payload already (delivered at first contact) is not pointed; without
        // --pull-payload-from, another payload is synced as before.
        let current = annotate(old("a"), &[(PAYLOAD_ANNOTATION, "sha256:p2")]);
        let plan = plan_for(&[current, old("b"), old("c"), old("d")], payload_only, 1);
        assert_eq!(actions(&plan), [Action::Nothing, Action::Pull, Action::Wait, Action::Wait]);
        let plan = plan_for(&[old("a")], Published { bundle: Some(BUNDLE), payload: None }, 1);
        assert_eq!(actions(&plan)[0], Action::Sync);

        // A new bundle and another payload: pointed at both in one step, one wave place; the bundle on its way holds
        // the wave until it is applied, the payload until it is pulled.
        let both = Published { bundle: Some(BUNDLE), payload: Some(PAYLOAD) };
        let behind = |name: &str| {
            annotate(named(name, node(Some("True"), "sha256:00", false)), &[(PAYLOAD_ANNOTATION, "sha256:p1")])
        };
        let plan = plan_for(&[behind("a"), behind("b"), behind("c"), behind("d")], both, 1);
        assert_eq!(actions(&plan), [Action::Pull, Action::Wait, Action::Wait, Action::Wait]);
        let (_, point) = &plan.pull[0];
        assert_eq!((point.bundle.as_deref(), point.payload.as_deref()), (Some(BUNDLE), Some(PAYLOAD)));
        let applied_not_pulled = annotate(
            named("a", node(Some("True"), DESIRED, false)),
            &[
                (PAYLOAD_ANNOTATION, "sha256:p1"),
                (DESIRED_BUNDLE_ANNOTATION, BUNDLE),
                (DESIRED_PAYLOAD_ANNOTATION, PAYLOAD),
            ],
        );
        let plan = plan_for(&[applied_not_pulled.clone(), behind("b"), behind("c"), behind("d")], both, 1);
        assert_eq!(actions(&plan), [Action::Wait, Action::Wait, Action::Wait, Action::Wait]);
        let done = annotate(applied_not_pulled, &[(PULLED_PAYLOAD_ANNOTATION, PAYLOAD)]);
        let plan = plan_for(&[done, behind("b"), behind("c"), behind("d")], both, 1);
        assert_eq!(actions(&plan), [Action::Nothing, Action::Pull, Action::Wait, Action::Wait]);
    }

    #[test]
    fn a_pointed_node_whose_agent_shows_no_sign_of_pulling_is_synced_after_the_patience_and_a_pulled_one_for_its_agent()
    {
        let now = Instant::now() + Duration::from_secs(3600);
        let want = Want { bundle: DESIRED, payload: Some("sha256:p2"), agent: Some("a2") };
        let published = Published { bundle: None, payload: Some(PAYLOAD) };
        let with = |pairs: &[(&str, &str)], pull: Option<(&str, &str)>| {
            let mut n = node(Some("True"), DESIRED, false);
            n["metadata"]["annotations"][PAYLOAD_ANNOTATION] = json!("sha256:p1");
            for (k, v) in pairs {
                n["metadata"]["annotations"][*k] = json!(v);
            }
            if let Some((status, reason)) = pull {
                n["status"]["conditions"].as_array_mut().unwrap().push(json!({
                    "type": PAYLOAD_PULL_CONDITION_TYPE, "status": status, "reason": reason,
                    "message": "the payload registry.example.com/fleet/p@sha256:22 is on the node"}));
            }
            n
        };
        let pointed_ago = |secs: u64| Memory {
            pointed: Some((PAYLOAD.into(), now - Duration::from_secs(secs))),
            ..synced(3600, 0, now)
        };
        let next = |n: &Value, m: &Memory| decide(Some(n), want, published, false, m, now);
        let is_sync = |n: Next| matches!(n, Next::Sync(_));

        // An agent too old to pull a payload (no condition), or one that says it has nothing to do (a sync gave it
        // another since it pulled this one): waited for within the patience, synced over SSH after it.
        for pull in [None, Some(("True", REASON_SYNCED_SINCE))] {
            let n = with(&[(DESIRED_PAYLOAD_ANNOTATION, PAYLOAD)], pull);
            assert!(matches!(next(&n, &pointed_ago(60)), Next::Wait(w) if w.contains("pulling")), "{pull:?}");
            let after = next(&n, &pointed_ago(PULL_PATIENCE.as_secs() + 1));
            assert!(matches!(&after, Next::Sync(w) if w.contains("no sign of pulling")), "{pull:?}: {after:?}");
            // After a restart the patience starts again (the reconcile records when it first saw the Node pointed).
            assert!(matches!(next(&n, &synced(3600, 0, now)), Next::Wait(_)));
        }
        // A pull refused or retried holds the wave, patience or not: it says why.
        // So does one whose agent still says it pulled the one before: it is at work on this one (the condition is
        // written after the pull and its pass).
        for pull in [("False", "Refused"), ("Unknown", "Retrying"), ("True", "Pulled")] {
            let n = with(&[(DESIRED_PAYLOAD_ANNOTATION, PAYLOAD)], Some(pull));
            assert!(matches!(next(&n, &pointed_ago(7200)), Next::Wait(_)), "{pull:?}");
        }
        // A pointed Node its agent has not reported configured is synced after the back-off, as without a pull.
        let mut keep = with(&[(DESIRED_PAYLOAD_ANNOTATION, PAYLOAD)], None);
        keep["status"]["conditions"][1]["status"] = json!("Unknown");
        assert!(is_sync(next(&keep, &pointed_ago(60))));

        // Pulled: synced for its agent only, which a pull never brings (one that does not say counts as another).
        let pulled = |agent: Option<&str>| {
            let mut pairs = vec![(DESIRED_PAYLOAD_ANNOTATION, PAYLOAD), (PULLED_PAYLOAD_ANNOTATION, PAYLOAD)];
            pairs.extend(agent.map(|a| (AGENT_ANNOTATION, a)));
            with(&pairs, Some(("True", "Pulled")))
        };
        assert!(matches!(next(&pulled(Some("a1")), &pointed_ago(60)), Next::Sync(w) if w.contains("agent a1")));
        assert!(is_sync(next(&pulled(None), &pointed_ago(60))));
        assert_eq!(next(&pulled(Some("a2")), &pointed_ago(60)), Next::Nothing);
        let recent = Memory { synced_at: Some(now), ..pointed_ago(60) };
        assert_eq!(next(&pulled(Some("a1")), &recent), Next::Nothing, "after the back-off");
    }

    /// The bundle and the payload published for the Nodes to pull.
    const BUNDLE: &str = "registry.example.com/fleet/b@sha256:22";
    const PAYLOAD: &str = "registry.example.com/fleet/p@sha256:33";

    /// Hosts a to d, each its own Node.
    fn four_targets() -> Targets {
        Targets {
            targets: vec![target("a", "a"), target("b", "b"), target("c", "c"), target("d", "d")],
            ..Default::default()
        }
    }

    /// A pass pulling `published` in waves of one, the controller delivering the payload `sha256:p2`.
    fn wave_of_one(
        targets: &Targets,
        nodes: &[Value],
        memories: &BTreeMap<String, Memory>,
        published: Published,
        now: Instant,
    ) -> Plan {
        fleet(&Fleet {
            targets,
            nodes,
            logins: &[],
            memories,
            in_flight: &BTreeSet::new(),
            desired: DESIRED,
            payload: Some("sha256:p2"),
            agent: None,
            token: None,
            pull: Some(Wave { published, max_unavailable: 1 }),
            prune: None,
            now,
        })
    }

    #[test]
    fn a_node_this_controller_pointed_holds_its_place_while_the_watch_still_shows_it_unpointed() {
        // Later than any `now - WATCH_LAG` can underflow (an Instant may start at boot).
        let now = Instant::now() + Duration::from_secs(3600);
        let targets = four_targets();
        // Every Node as the watch shows it: the old payload and, when the bundle is published, the old bundle;
        // none pointed yet.
        let plan_for = |memories: &BTreeMap<String, Memory>, published: Published| {
            let bundle = if published.bundle.is_some() { "sha256:00" } else { DESIRED };
            let nodes: Vec<Value> = ["a", "b", "c", "d"]
                .iter()
                .map(|name| {
                    let mut n = named(name, node(Some("True"), bundle, false));
                    n["metadata"]["annotations"][PAYLOAD_ANNOTATION] = json!("sha256:p1");
                    n
                })
                .collect();
            wave_of_one(&targets, &nodes, memories, published, now)
        };
        let actions = |plan: &Plan| plan.lines.iter().map(|l| l.next).collect::<Vec<_>>();
        // The last pass pointed d (the last in order); the watch has not shown the patch yet. d keeps its place
        // (pointed again, a no-op on the Node), and a, first in order, waits instead of joining it over the bound.
        for (published, memory) in [
            (
                Published { bundle: Some(BUNDLE), payload: None },
                Memory { just_pointed: Some((vec![BUNDLE.into()], now - Duration::from_secs(5))), ..Memory::default() },
            ),
            (
                Published { bundle: None, payload: Some(PAYLOAD) },
                Memory {
                    just_pointed: Some((vec![PAYLOAD.into()], now - Duration::from_secs(5))),
                    ..Memory::default()
                },
            ),
        ] {
            let memories = BTreeMap::from([("d".to_string(), memory.clone())]);
            let plan = plan_for(&memories, published);
            assert_eq!(actions(&plan), [Action::Wait, Action::Wait, Action::Wait, Action::Pull], "{published:?}");
            assert!(plan.lines[0].why.contains("waiting for the wave: 1 node(s)"), "{}", plan.lines[0].why);
            // Pointed at another reference than the one published, or longer ago than a watch lags (a memory the
            // Node never bears out does not hold the wave for good): no place held by the memory; the Node as the
            // watch shows it says.
            let other =
                vec!["registry.example.com/fleet/b@sha256:11".into(), "registry.example.com/fleet/p@sha256:11".into()];
            let long_ago = memory.just_pointed.clone().map(|(r, _)| (r, now - WATCH_LAG));
            for just_pointed in [Some((other, now)), long_ago] {
                let stale = BTreeMap::from([("d".to_string(), Memory { just_pointed, ..Memory::default() })]);
                let plan = plan_for(&stale, published);
                assert_eq!(actions(&plan), [Action::Pull, Action::Wait, Action::Wait, Action::Wait], "{published:?}");
            }
        }
    }

    #[test]
    fn the_wave_counts_only_nodes_still_behind_and_a_node_on_its_way_keeps_its_place_when_pointed_again() {
        let now = Instant::now();
        let targets = Targets { targets: vec![target("a", "a"), target("b", "b")], ..Default::default() };
        let with = |name: &str, bundle: &str, payload: &str, pairs: &[(&str, &str)]| {
            let mut n = named(name, node(Some("True"), bundle, false));
            n["metadata"]["annotations"][PAYLOAD_ANNOTATION] = json!(payload);
            for (k, v) in pairs {
                n["metadata"]["annotations"][*k] = json!(v);
            }
            n
        };
        let plan_for =
            |nodes: &[Value], published: Published| wave_of_one(&targets, nodes, &BTreeMap::new(), published, now);
        let actions = |plan: &Plan| plan.lines.iter().map(|l| l.next).collect::<Vec<_>>();
        let both = Published { bundle: Some(BUNDLE), payload: Some(PAYLOAD) };
        // a was pointed at the payload, then got it over SSH (it runs it): not on its way, so b may go.
        let synced_since = with("a", DESIRED, "sha256:p2", &[(DESIRED_PAYLOAD_ANNOTATION, PAYLOAD)]);
        let plan = plan_for(&[synced_since, with("b", DESIRED, "sha256:p1", &[])], both);
        assert_eq!(actions(&plan), [Action::Nothing, Action::Pull]);
        // a is on its way to the payload when a new bundle comes: pointed at it too, in the place it holds.
        let pulling = with("a", "sha256:00", "sha256:p1", &[(DESIRED_PAYLOAD_ANNOTATION, PAYLOAD)]);
        let plan = plan_for(&[pulling, with("b", "sha256:00", "sha256:p1", &[])], both);
        assert_eq!(actions(&plan), [Action::Pull, Action::Wait]);
        assert_eq!(plan.pull[0].1.bundle.as_deref(), Some(BUNDLE));
    }
}
