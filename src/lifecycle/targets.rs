//! The desired state: the Windows hosts that are wmrender's to configure, read whole or not at all. Three sources
//! merge, each checked as untrusted input:
//!
//! - the **Windows Machines** (with `--kubeconfig`, or the controller's watch), provisioned ones only
//!   ([`super::machines`]);
//! - the **BYOH hosts** of the rendered `windows-instances` ConfigMap (unless WMCO manages them);
//! - the **inventory** (`--inventory`): how to reach a host (port, user, profile) and hosts of its own. An entry at a
//!   Machine's or a BYOH host's address (or name) says how to reach that host, which stays the Machine's or the BYOH
//!   host's; an entry with `reachOnly: true` is nothing else.
//!
//! A source that cannot be read (an inventory that does not parse, a rendered directory whose manifest does not
//! verify, a Machine list the API server did not return) makes the whole state an error, never a smaller fleet: an
//! empty fleet is `Ok` and empty, and only an `Ok` state may lead to a destructive step.
//!
//! Each [`Target`] carries how it is reached and the Kubernetes name of its node, computed once here: the Machine's
//! `status.nodeRef` (the Machine API's link), else what its agent reported at its last sync (kept in its login
//! record, [`super::login`]), else its name. Two targets whose agents reported one node name are both refused:
//! which of them the Node is cannot be told.

use super::machines::{Candidate, Refusal};
use crate::cluster::machines::{Machine, WindowsMachines};
use crate::delivery::Rendered;
use crate::delivery::inventory::{self, Node};
use crate::diagnostics::Diagnostics;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use wmrender_contract::Mode;

/// The rendered BYOH ConfigMap's path in the output directory.
pub const BYOH_CONFIGMAP: &str = "cluster/configmap-windows-instances.yaml";

/// Where a target comes from: what vouches for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A Windows Machine's instance: the Machine, as read.
    Machine(Machine),
    /// A BYOH host of the rendered ConfigMap (Git).
    Byoh,
    /// A host of the inventory (Git, or the operator's file).
    Inventory,
}

/// A host to configure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// Its name, which its login record is kept under: the Machine's name, the BYOH host's address, or the
    /// inventory's name.
    pub name: String,
    /// How it is reached over SSH (the inventory's entry for its address wins).
    pub reach: Node,
    /// The Kubernetes name of its node.
    pub node_name: String,
    pub origin: Origin,
}

impl Target {
    pub fn machine(&self) -> Option<&Machine> {
        match &self.origin {
            Origin::Machine(m) => Some(m),
            _ => None,
        }
    }

    /// The names a serving certificate of this node may carry, from what the node cannot write: its Machine's
    /// `status.addresses` (cluster-machine-approver's rule: DNS names of type InternalDNS, ExternalDNS and Hostname,
    /// IPs of type InternalIP and ExternalIP), the address Git (the BYOH list, the inventory) gives for it, and its
    /// node name. Never its Node's own `status.addresses`.
    pub fn vouched_names(&self) -> Vec<String> {
        let mut names = vec![self.node_name.clone(), self.reach.address.clone()];
        if let Some(m) = self.machine() {
            const KINDS: [&str; 5] = ["InternalDNS", "ExternalDNS", "Hostname", "InternalIP", "ExternalIP"];
            names.extend(m.addresses.iter().filter(|(t, _)| KINDS.contains(&t.as_str())).map(|(_, a)| a.clone()));
        }
        let mut unique = Vec::new();
        for n in names {
            let n = n.trim_end_matches('.').to_string();
            if !n.is_empty() && !unique.iter().any(|u: &String| u.eq_ignore_ascii_case(&n)) {
                unique.push(n);
            }
        }
        unique
    }
}

/// The desired state, read whole.
#[derive(Clone, Debug, Default)]
pub struct Targets {
    pub targets: Vec<Target>,
    /// The hosts not contacted, and why.
    pub refused: Vec<Refusal>,
    /// Every Windows Machine, targets or not: a Node that is a Machine's is never pruned (the Machine API owns it).
    pub machines: Vec<Machine>,
    /// The files it was read from, for messages.
    pub inventory: Option<PathBuf>,
}

impl Targets {
    /// Whether `name` is a host of the desired state: a target, or one refused or waiting (still wanted).
    pub fn names(&self, name: &str) -> bool {
        self.targets.iter().any(|t| t.name == name) || self.refused.iter().any(|r| r.target == name)
    }
}

/// Why the desired state could not be read. Each says which file (and line) or which call, in wmrender's words.
#[derive(Debug, thiserror::Error)]
pub enum DesiredError {
    /// The rendered directory (its manifest, a file it lists, the services table).
    #[error("{0}")]
    Rendered(String),
    /// The inventory or the rendered BYOH ConfigMap: every problem with its file and line.
    #[error("{}", .0.render_human().trim_end())]
    Invalid(Diagnostics),
    /// The sources contradict each other (an inventory entry for a host WMCO manages).
    #[error("{0}")]
    Conflict(String),
    /// The cluster did not answer (the Machines, the login records).
    #[error("{0}")]
    Cluster(String),
}

/// What the state is read from.
pub struct Sources<'a> {
    pub rendered: &'a Rendered,
    pub inventory: Option<&'a Path>,
    /// The Windows Machines; `None` without a cluster.
    pub machines: Option<&'a WindowsMachines>,
    /// The node name each target's agent last reported, by target name (the login records).
    pub reported: &'a BTreeMap<String, String>,
}

/// Reads the inventory and the rendered BYOH ConfigMap and merges them with the Machines.
pub fn read(sources: &Sources) -> Result<Targets, DesiredError> {
    let rendered = sources.rendered;
    let byoh = match rendered.file(BYOH_CONFIGMAP) {
        Some(bytes) => {
            let file = rendered.dir.join(BYOH_CONFIGMAP).display().to_string();
            inventory::from_configmap(&file, &String::from_utf8_lossy(bytes)).map_err(DesiredError::Invalid)?
        }
        None => vec![],
    };
    let listed = match sources.inventory {
        Some(path) => Some(inventory::load(path).map_err(DesiredError::Invalid)?),
        None => None,
    };
    let mut targets = merge(Merge {
        operator: rendered.mode() == Some(Mode::WithOperator),
        machines: sources.machines,
        byoh,
        inventory: listed.unwrap_or_default(),
        reported: sources.reported,
    })?;
    targets.inventory = sources.inventory.map(Path::to_path_buf);
    Ok(targets)
}

/// The sources, read.
pub struct Merge<'a> {
    /// The render installs WMCO, which configures its BYOH hosts and Machines.
    pub operator: bool,
    pub machines: Option<&'a WindowsMachines>,
    pub byoh: Vec<Node>,
    pub inventory: Vec<Node>,
    pub reported: &'a BTreeMap<String, String>,
}

/// One host while the sources merge.
struct Entry {
    name: String,
    /// The address its own source gave (a Machine's, a BYOH host's): what later sources are matched with, never a
    /// reach an inventory entry put in its place.
    address: String,
    /// An inventory entry has said how to reach it: no other one may.
    taken: bool,
    reach: Node,
    origin: Origin,
    /// A Machine on a platform without a user wmrender knows: only an inventory entry can say how to log in.
    needs_user: bool,
}

impl Entry {
    fn new(name: String, reach: Node, origin: Origin, needs_user: bool) -> Entry {
        Entry { name, address: reach.address.clone(), taken: false, reach, origin, needs_user }
    }
}

/// The entry of another source that `n` says how to reach: the one of its name, else the one at its address.
fn entry_for<'a>(entries: &'a mut [Entry], n: &Node) -> Option<&'a mut Entry> {
    let open = |e: &Entry| e.origin != Origin::Inventory && !e.taken;
    let by_name = entries.iter().position(|e| open(e) && e.reach.name == n.name);
    let at = by_name.or_else(|| entries.iter().position(|e| open(e) && e.address == n.address))?;
    entries.get_mut(at)
}

/// Merges the sources (later wins for how a host is reached; the first names it): pure.
pub fn merge(m: Merge) -> Result<Targets, DesiredError> {
    let mut out = Targets::default();
    let mut entries: Vec<Entry> = Vec::new();
    if let Some(found) = m.machines.filter(|_| !m.operator) {
        out.machines = found.machines.clone();
        for (machine, candidate) in found.machines.iter().zip(super::machines::candidates(found)) {
            match candidate {
                Candidate::Ready { node, user_known } => {
                    entries.push(Entry::new(machine.name.clone(), node, Origin::Machine(machine.clone()), !user_known))
                }
                Candidate::Skip(refusal) => out.refused.push(refusal),
            }
        }
    }
    if !m.operator {
        for b in m.byoh.iter().cloned() {
            // A BYOH host at a Machine's address stays the Machine's: Git says how to log in.
            match entries.iter_mut().find(|e| e.reach.name == b.name || e.address == b.address) {
                Some(e) => {
                    e.reach = Node { machine: e.reach.machine.clone(), name: e.reach.name.clone(), ..b };
                    e.needs_user = false;
                }
                None => entries.push(Entry::new(b.address.clone(), b, Origin::Byoh, false)),
            }
        }
    }
    for n in m.inventory {
        if m.operator && m.byoh.iter().any(|b| b.address == n.address) {
            return Err(DesiredError::Conflict(format!(
                "{} is a BYOH host that WMCO manages (the rendered output installs the operator); sync leaves it to WMCO",
                n.address
            )));
        }
        // An inventory entry says how to reach a host the cluster or Git also names (one entry per host); several
        // entries may share an address (posix staging hosts on one machine), so only the other sources' entries
        // take it in.
        match entry_for(&mut entries, &n) {
            Some(e) => {
                let machine = e.reach.machine.clone();
                e.reach = Node { machine, reach_only: false, ..n };
                e.needs_user = false;
                e.taken = true;
            }
            // An entry only saying how to reach a host is no host when no other source names it (yet, or any
            // more: a Machine not provisioned, a BYOH host removed from the render).
            None if n.reach_only => {}
            None => entries.push(Entry::new(n.name.clone(), n, Origin::Inventory, false)),
        }
    }
    for e in entries {
        if e.needs_user {
            let platform = m.machines.map(|f| f.platform.as_str()).unwrap_or_default();
            out.refused.push(Refusal {
                target: e.name.clone(),
                machine: Some(e.name.clone()),
                refused: true,
                why: format!(
                    "the platform `{}` has no SSH user wmrender knows; add an inventory entry for {} with its `user` \
                     (and `reachOnly: true`)",
                    platform.escape_debug(),
                    e.reach.address
                ),
            });
            continue;
        }
        let node_name = match &e.origin {
            Origin::Machine(machine) => machine.node_ref.clone(),
            _ => None,
        }
        .or_else(|| m.reported.get(&e.name).cloned())
        .unwrap_or_else(|| e.reach.name.clone());
        out.targets.push(Target { name: e.name, reach: e.reach, node_name, origin: e.origin });
    }
    refuse_shared_node_names(&mut out);
    Ok(out)
}

/// Two targets with one node name: which of them the Node is cannot be told, so neither is contacted.
fn refuse_shared_node_names(out: &mut Targets) {
    let mut by_name: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for t in &out.targets {
        by_name.entry(&t.node_name).or_default().push(&t.name);
    }
    let shared: BTreeMap<String, Vec<String>> = by_name
        .into_iter()
        .filter(|(_, names)| names.len() > 1)
        .map(|(node, names)| (node.to_string(), names.iter().map(|n| n.to_string()).collect()))
        .collect();
    if shared.is_empty() {
        return;
    }
    let (kept, conflicting): (Vec<Target>, Vec<Target>) =
        std::mem::take(&mut out.targets).into_iter().partition(|t| !shared.contains_key(&t.node_name));
    out.targets = kept;
    for t in conflicting {
        let others: Vec<&String> = shared[&t.node_name].iter().filter(|n| **n != t.name).collect();
        out.refused.push(Refusal {
            target: t.name.clone(),
            machine: t.machine().map(|m| m.name.clone()),
            refused: true,
            why: format!(
                "its node name `{}` is also {}'s; its login record (or its Machine's nodeRef) must name its own node",
                t.node_name.escape_debug(),
                others.iter().map(|n| n.as_str()).collect::<Vec<_>>().join(", ")
            ),
        });
    }
}

/// A Windows host reached on port 22 as `Administrator`, for tests.
#[cfg(test)]
pub(crate) fn test_host(name: &str, address: &str, reach_only: bool) -> Node {
    Node {
        name: name.into(),
        address: address.into(),
        port: 22,
        user: "Administrator".into(),
        profile: crate::delivery::profile::Profile::Windows,
        machine: None,
        reach_only,
    }
}

/// A BYOH target named `name` at `address` whose node is `node_name`, for tests.
#[cfg(test)]
pub(crate) fn test_target(name: &str, address: &str, node_name: &str) -> Target {
    Target {
        name: name.into(),
        reach: test_host(name, address, false),
        node_name: node_name.into(),
        origin: Origin::Byoh,
    }
}

/// A login record of `target` at `address`, its node `node`, for tests.
#[cfg(test)]
pub(crate) fn test_login(target: &str, address: &str, node: Option<&str>) -> super::login::Login {
    super::login::Login {
        target: target.into(),
        address: address.into(),
        port: 22,
        user: "Administrator".into(),
        root: None,
        machine: None,
        node_name: node.map(str::to_string),
        host_keys: vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::machines::test_machine;
    use serde_json::json;

    fn host(name: &str, address: &str, reach_only: bool) -> Node {
        test_host(name, address, reach_only)
    }

    fn machines(platform: &str, list: &[(&str, &str)]) -> WindowsMachines {
        WindowsMachines {
            platform: platform.into(),
            machines: list
                .iter()
                .map(|(n, a)| test_machine(n, Some("Provisioned"), json!([{"type": "InternalIP", "address": a}])))
                .collect(),
        }
    }

    fn merged(
        found: Option<&WindowsMachines>,
        byoh: Vec<Node>,
        inventory: Vec<Node>,
        reported: &[(&str, &str)],
    ) -> Targets {
        let reported = reported.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
        merge(Merge { operator: false, machines: found, byoh, inventory, reported: &reported }).unwrap()
    }

    #[test]
    fn the_inventory_says_how_to_reach_a_machine_or_byoh_host_which_keeps_its_name() {
        let found = machines("AWS", &[("win-m-0", "10.0.0.5")]);
        let t = merged(
            Some(&found),
            vec![host("10.0.0.9", "10.0.0.9", false)],
            vec![host("m0", "10.0.0.5", true), host("b9", "10.0.0.9", true), host("lonely", "10.0.0.7", true)],
            &[],
        );
        let seen: Vec<(&str, &str, Option<&str>)> =
            t.targets.iter().map(|t| (t.name.as_str(), t.reach.name.as_str(), t.reach.machine.as_deref())).collect();
        assert_eq!(seen, [("win-m-0", "m0", Some("win-m-0")), ("10.0.0.9", "b9", None)]);
        assert!(t.refused.is_empty());
    }

    #[test]
    fn a_node_name_comes_from_the_machine_api_then_the_agents_report_then_the_name() {
        let mut found = machines("Azure", &[("win-m-0", "10.0.0.5"), ("win-m-1", "10.0.0.6")]);
        found.machines[0].node_ref = Some("win-m-0-node".into());
        let t = merged(
            Some(&found),
            vec![host("10.0.0.9", "10.0.0.9", false)],
            vec![],
            &[("win-m-0", "ignored"), ("win-m-1", "reported-1")],
        );
        let names: Vec<&str> = t.targets.iter().map(|t| t.node_name.as_str()).collect();
        assert_eq!(names, ["win-m-0-node", "reported-1", "10.0.0.9"]);
    }

    #[test]
    fn two_targets_reporting_one_node_name_are_both_refused() {
        let t = merged(
            None,
            vec![host("10.0.0.8", "10.0.0.8", false), host("10.0.0.9", "10.0.0.9", false)],
            vec![host("other", "10.0.0.7", false)],
            &[("10.0.0.8", "win-a"), ("10.0.0.9", "win-a")],
        );
        assert_eq!(t.targets.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["other"]);
        assert_eq!(t.refused.len(), 2);
        assert!(t.refused[0].why.contains("10.0.0.9"), "{:?}", t.refused);
    }

    #[test]
    fn a_machine_on_a_platform_without_a_user_needs_an_inventory_entry() {
        let found = machines("BareMetal", &[("m-0", "10.0.0.5"), ("m-1", "10.0.0.6")]);
        let t = merged(Some(&found), vec![], vec![host("m1", "10.0.0.6", true)], &[]);
        assert_eq!(t.targets.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["m-1"]);
        assert!(t.refused[0].refused && t.refused[0].why.contains("`BareMetal`"), "{:?}", t.refused);
    }

    #[test]
    fn serving_names_are_the_machines_addresses_gits_address_and_the_node_name() {
        let mut found = machines("AWS", &[("m-0", "10.0.0.5")]);
        found.machines[0].addresses.push(("InternalDNS".into(), "ip-10-0-0-5.ec2.internal.".into()));
        found.machines[0].addresses.push(("ExternalIP".into(), "203.0.113.5".into()));
        let t = merged(Some(&found), vec![], vec![], &[("m-0", "ip-10-0-0-5")]);
        assert_eq!(
            t.targets[0].vouched_names(),
            ["ip-10-0-0-5", "10.0.0.5", "ip-10-0-0-5.ec2.internal", "203.0.113.5"]
        );
    }
}
