//! Undoing a node that left: a host wmrender configured (it has a login record, [`super::login`]) that is no longer
//! in the desired state — its BYOH entry or inventory line removed from Git — is cordoned and drained, deconfigured
//! over SSH at the address, port, user and host key recorded, its Node deleted, and then its record, as WMCO does
//! when a host's `windows-instances` entry goes (controllers/configmap_controller.go `deconfigureInstances`, then
//! `deconfigureInstance`: drain, deconfigure the instance, delete the Node; a failure keeps the Node). The drain is
//! `oc adm drain`'s (the Eviction API, `--drain-timeout`, `--force`); a drain that cannot finish keeps the node
//! configured and cordoned.
//!
//! The decision is pure ([`plan`]) and acts only on a desired state read whole ([`super::targets`]); a pass that
//! would prune more than the budget (`--max-prune`, MachineHealthCheck's `maxUnhealthy`) prunes none ([`budget`]):
//! a Git commit that drops the inventory by mistake must not deconfigure the fleet.
//!
//! Never pruned: a Machine's instance (the Machine API removes it with its Machine; its record goes once its Node
//! is gone), a Node that is a Windows Machine's (the Machine API's nodelink rule), a Node wmrender did not label as
//! its own (`wmrender.dev/managed`), and a host that is still a target under another name (same address, port and
//! root). A managed Node with no login record is reported, never touched: how to reach it is not known from anything
//! the node cannot write.

use super::login::Login;
use super::targets::Targets;
use crate::cluster::node_object::name_of;
use crate::cluster::{MANAGED, machines};
use serde::Serialize;
use serde_json::Value;
#[cfg(feature = "cluster")]
pub use with_cluster::prune;
use wmrender_contract::ApplyResult;

/// `--max-prune`: how many nodes one pass may prune, as a number or a percentage of the managed fleet (the hosts
/// with a login record), rounded up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaxPrune {
    Count(usize),
    Percent(u8),
}

impl Default for MaxPrune {
    /// A quarter of the fleet: one node of a fleet of up to four.
    fn default() -> MaxPrune {
        MaxPrune::Percent(25)
    }
}

impl std::str::FromStr for MaxPrune {
    type Err = String;

    fn from_str(s: &str) -> Result<MaxPrune, String> {
        let bad = || format!("`{}` is not a number of nodes or a percentage (e.g. 3 or 25%)", s.escape_debug());
        match s.strip_suffix('%') {
            Some(p) => match p.parse::<u8>() {
                Ok(p) if p <= 100 => Ok(MaxPrune::Percent(p)),
                _ => Err(bad()),
            },
            None => s.parse::<usize>().map(MaxPrune::Count).map_err(|_| bad()),
        }
    }
}

impl std::fmt::Display for MaxPrune {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MaxPrune::Count(n) => write!(f, "{n}"),
            MaxPrune::Percent(p) => write!(f, "{p}%"),
        }
    }
}

impl MaxPrune {
    /// How many nodes of a fleet of `fleet` may go in one pass.
    pub fn limit(self, fleet: usize) -> usize {
        match self {
            MaxPrune::Count(n) => n,
            MaxPrune::Percent(p) => (fleet * usize::from(p)).div_ceil(100),
        }
    }
}

/// A host that left, and its Node (when it registered).
#[derive(Clone, Debug)]
pub struct Leaving {
    pub login: Login,
    pub node: Option<Value>,
}

impl Leaving {
    /// Its Node's name, else its target's.
    pub fn name(&self) -> String {
        self.node.as_ref().map(|n| name_of(n).to_string()).unwrap_or_else(|| self.login.target.clone())
    }
}

/// A host that left, and why it is not pruned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NotPruned {
    pub target: String,
    pub why: String,
}

/// What pruning would do.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// The hosts to deconfigure.
    pub leaving: Vec<Leaving>,
    /// Records to drop without touching anything: a Machine's instance whose Machine and Node are gone.
    pub gone: Vec<Login>,
    /// Hosts that left but are not pruned, and why.
    pub held: Vec<NotPruned>,
    /// Managed Nodes no record and no target names: reported, never touched.
    pub orphans: Vec<String>,
}

/// Which recorded hosts left the desired state, among the Windows Nodes as read (see the module's rules). Pure.
pub fn plan(logins: &[Login], desired: &Targets, all: &[Value]) -> Plan {
    let mut out = Plan::default();
    let by_name = |name: &str| all.iter().find(|n| name_of(n) == name);
    let machine_nodes: Vec<String> = desired
        .machines
        .iter()
        .flat_map(|m| m.node_ref.iter().cloned().chain(machines::node_of(m, all).map(|n| name_of(n).to_string())))
        .collect();
    for login in logins {
        let same_host = |t: &super::targets::Target| {
            let root = match &t.reach.profile {
                crate::delivery::profile::Profile::Posix { root } => Some(root.as_str()),
                _ => None,
            };
            t.reach.address == login.address && t.reach.port == login.port && root == login.root.as_deref()
        };
        if desired.names(&login.target) || desired.targets.iter().any(same_host) {
            continue;
        }
        let node = login.node_name.as_deref().and_then(by_name);
        if login.machine.is_some() {
            match node {
                None => out.gone.push(login.clone()),
                Some(n) => out.held.push(NotPruned {
                    target: login.target.clone(),
                    why: format!(
                        "its Machine is gone; the Machine API removes its instance and its Node {}",
                        name_of(n)
                    ),
                }),
            }
            continue;
        }
        if let Some(n) = node {
            let name = name_of(n);
            if machine_nodes.iter().any(|m| m == name) {
                out.held.push(NotPruned {
                    target: login.target.clone(),
                    why: format!("its Node {name} is a Machine's: the Machine API owns it"),
                });
                continue;
            }
            if n["metadata"]["labels"][MANAGED] != "true" {
                out.held.push(NotPruned {
                    target: login.target.clone(),
                    why: format!("its Node {name} is not labelled {MANAGED}=true: not wmrender's to drain or delete"),
                });
                continue;
            }
        }
        out.leaving.push(Leaving { login: login.clone(), node: node.cloned() });
    }
    let named = |name: &str| {
        logins.iter().any(|l| l.node_name.as_deref() == Some(name))
            || desired.targets.iter().any(|t| t.node_name == name)
            || machine_nodes.iter().any(|m| m == name)
    };
    out.orphans = all
        .iter()
        .filter(|n| n["metadata"]["labels"][MANAGED] == "true")
        .map(|n| name_of(n).to_string())
        .filter(|n| !named(n))
        .collect();
    out
}

/// Whether a pass may prune `leaving` hosts of a managed fleet of `fleet`: `Err` says why not (none is pruned).
pub fn budget(leaving: usize, fleet: usize, max: MaxPrune) -> Result<(), String> {
    let limit = max.limit(fleet);
    if leaving <= limit {
        return Ok(());
    }
    Err(format!(
        "{leaving} of the {fleet} managed nodes left the desired state at once, more than --max-prune {max} allows \
         ({limit}); none is pruned. If the inventory or the BYOH list lost them by mistake, restore it; if they are \
         meant to go, prune with a larger --max-prune"
    ))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PruneStatus {
    /// `--dry-run`: this node would be deconfigured and its Node deleted.
    WouldPrune,
    /// Deconfigured and its Node deleted.
    Pruned,
    /// Not deleted: the drain or the deconfigure did not finish, the node could not be reached, or the budget held
    /// the pass back.
    Failed,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pruned {
    pub node: String,
    pub address: String,
    pub status: PruneStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `namespace/name` of the pods evicted before the node was deconfigured.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub evicted: Vec<String>,
    /// The deconfigure step's result line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deconfigure: Option<ApplyResult>,
}

impl Pruned {
    pub fn new(leaving: &Leaving, status: PruneStatus, error: Option<String>) -> Pruned {
        Pruned {
            node: leaving.name(),
            address: leaving.login.address.clone(),
            status,
            error,
            evicted: vec![],
            deconfigure: None,
        }
    }
}

#[cfg(feature = "cluster")]
mod with_cluster {
    use super::{Leaving, PruneStatus, Pruned};
    use crate::cluster::Cluster;
    use crate::cluster::drain::{self, DrainOptions};
    use crate::cluster::node_object::name_of;
    use crate::cluster::nodes;
    use crate::delivery::profile::strip_clixml;
    use crate::delivery::ssh::{ConnectOptions, Connection};
    use crate::lifecycle::login::{Login, Logins};
    use wmrender_contract::{ApplyResult, ApplyStatus};

    /// Cordons, drains and deconfigures one leaving host over SSH, deletes its Node and then its record.
    pub async fn prune(
        cluster: &Cluster,
        logins: &Logins,
        leaving: &Leaving,
        connect: &ConnectOptions,
        drain_opts: &DrainOptions,
    ) -> Pruned {
        let mut report = Pruned::new(leaving, PruneStatus::Failed, None);
        // Its pods go elsewhere first: deconfigure ends whatever still runs there.
        if let Some(node) = &leaving.node {
            match drain_first(cluster, name_of(node), drain_opts).await {
                Ok(evicted) => report.evicted = evicted,
                Err(e) => {
                    report.error = Some(e);
                    return report;
                }
            }
        }
        match deconfigure(&leaving.login, connect).await {
            Ok(result) => report.deconfigure = Some(result),
            Err((e, result)) => {
                report.error = Some(e);
                report.deconfigure = result;
                return report;
            }
        }
        if let Some(node) = &leaving.node
            && let Err(e) = nodes::delete(cluster, node).await
        {
            report.error = Some(format!("deconfigured, but its Node could not be deleted: {e}"));
            return report;
        }
        match logins.remove(&leaving.login.target).await {
            Ok(()) => report.status = PruneStatus::Pruned,
            Err(e) => {
                report.error = Some(format!("deconfigured and its Node deleted, but its login record stays: {e}"))
            }
        }
        report
    }

    /// Cordons the leaving Node and evicts its pods (as `oc adm drain --ignore-daemonsets --delete-emptydir-data`);
    /// returns the pods evicted. The Node stays cordoned whatever happens next: it is leaving.
    async fn drain_first(cluster: &Cluster, name: &str, opts: &DrainOptions) -> Result<Vec<String>, String> {
        crate::cluster::access::require(
            cluster,
            &crate::cluster::access::DRAIN,
            "draining a node that leaves",
            "wmrender-sync",
        )
        .await
        .map_err(|e| e.to_string())?;
        drain::cordon(cluster, name, "removal").await.map_err(|e| format!("cannot cordon it: {e}"))?;
        drain::drain(cluster, name, opts)
            .await
            .map(|d| d.evicted)
            .map_err(|e| format!("{e}; the node stays configured and cordoned, the Node is kept"))
    }

    /// Runs the deconfigure step and reads its result line: done only when it says converged and exits 0.
    async fn deconfigure(
        login: &Login,
        connect: &ConnectOptions,
    ) -> Result<ApplyResult, (String, Option<ApplyResult>)> {
        let target = login.reach().map_err(|e| (format!("cannot reach the node: {e}"), None))?;
        let conn = Connection::open(&target, connect).await.map_err(|e| (e.to_string(), None))?;
        let out = conn.exec(&target.profile.deconfigure_command()).await.map_err(|e| (e.to_string(), None));
        conn.close().await;
        let out = out?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        match ApplyResult::from_stdout(&stdout) {
            Some(r) if r.status == ApplyStatus::Converged && r.errors.is_empty() && out.status == Some(0) => Ok(r),
            Some(r) => {
                let why =
                    if r.errors.is_empty() { "deconfigure did not finish".to_string() } else { r.errors.join("; ") };
                Err((format!("deconfigure failed, the Node is kept: {why}"), Some(r)))
            }
            None => Err((
                format!(
                    "deconfigure printed no result line (exit status {}), the Node is kept: {}",
                    out.status.map(|s| s.to_string()).unwrap_or_else(|| "none".into()),
                    strip_clixml(&String::from_utf8_lossy(&out.stderr)).trim()
                ),
                None,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::machines::test_machine;
    use crate::lifecycle::targets::{Target, test_login, test_target};
    use serde_json::json;

    fn login(target: &str, address: &str, node: Option<&str>) -> Login {
        test_login(target, address, node)
    }

    fn node(name: &str, managed: bool) -> Value {
        let mut n = json!({"metadata": {"name": name, "uid": "u", "labels": {}}, "spec": {},
                           "status": {"addresses": [{"type": "InternalIP", "address": "10.9.9.9"}]}});
        if managed {
            n["metadata"]["labels"][MANAGED] = "true".into();
        }
        n
    }

    fn target(name: &str, address: &str) -> Target {
        test_target(name, address, name)
    }

    #[test]
    fn a_recorded_host_that_left_is_pruned_whether_or_not_its_node_registered() {
        let desired = Targets { targets: vec![target("10.0.0.1", "10.0.0.1")], ..Default::default() };
        let logins = [
            login("10.0.0.1", "10.0.0.1", Some("stays")),
            login("10.0.0.2", "10.0.0.2", Some("win-b")),
            login("10.0.0.3", "10.0.0.3", None),
        ];
        let p = plan(&logins, &desired, &[node("stays", true), node("win-b", true)]);
        let names: Vec<String> = p.leaving.iter().map(Leaving::name).collect();
        assert_eq!(names, ["win-b", "10.0.0.3"]);
        assert!(p.orphans.is_empty() && p.held.is_empty());
    }

    #[test]
    fn machines_nodes_foreign_nodes_and_moved_hosts_are_never_pruned() {
        let mut m = test_machine("m-0", Some("Running"), json!([{"type": "InternalIP", "address": "10.0.0.7"}]));
        m.node_ref = Some("win-m".into());
        let desired = Targets { targets: vec![target("renamed", "10.0.0.4")], machines: vec![m], ..Default::default() };
        let logins = [
            login("old-name", "10.0.0.4", Some("win-d")),
            login("b-machine-node", "10.0.0.5", Some("win-m")),
            login("b-foreign", "10.0.0.6", Some("master-0")),
            Login { machine: Some("m-gone".into()), ..login("m-gone", "10.0.0.8", Some("win-gone")) },
            Login { machine: Some("m-old".into()), ..login("m-old", "10.0.0.9", Some("win-old")) },
        ];
        let all = [node("win-d", true), node("win-m", true), node("master-0", false), node("win-old", true)];
        let p = plan(&logins, &desired, &all);
        assert!(p.leaving.is_empty(), "{:?}", p.leaving);
        assert_eq!(p.gone.iter().map(|l| l.target.as_str()).collect::<Vec<_>>(), ["m-gone"]);
        let held: Vec<&str> = p.held.iter().map(|h| h.target.as_str()).collect();
        assert_eq!(held, ["b-machine-node", "b-foreign", "m-old"]);
    }

    #[test]
    fn a_managed_node_without_a_record_is_reported_never_touched() {
        let desired = Targets { targets: vec![target("a", "10.0.0.1")], ..Default::default() };
        let p = plan(&[], &desired, &[node("a", true), node("legacy", true), node("linux", false)]);
        assert_eq!(p.orphans, ["legacy"]);
        assert!(p.leaving.is_empty());
    }

    #[test]
    fn the_budget_is_a_number_or_a_percentage_of_the_fleet_rounded_up() {
        assert_eq!("3".parse::<MaxPrune>(), Ok(MaxPrune::Count(3)));
        assert_eq!("25%".parse::<MaxPrune>(), Ok(MaxPrune::Percent(25)));
        for bad in ["", "x", "101%", "-1", "2.5"] {
            assert!(bad.parse::<MaxPrune>().is_err(), "{bad}");
        }
        assert_eq!(MaxPrune::default().limit(4), 1);
        assert_eq!(MaxPrune::default().limit(5), 2);
        assert_eq!(MaxPrune::Percent(0).limit(100), 0);
        assert!(budget(1, 4, MaxPrune::default()).is_ok());
        let refused = budget(3, 4, MaxPrune::default()).unwrap_err();
        assert!(refused.contains("3 of the 4") && refused.contains("none is pruned"), "{refused}");
        assert!(budget(0, 0, MaxPrune::Count(0)).is_ok());
    }
}
