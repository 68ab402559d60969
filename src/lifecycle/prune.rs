//! `sync --prune-nodes`: nodes wmrender configured (labelled `wmrender.dev/managed=true`) that left this sync's
//! targets (inventory, BYOH list, Machines) are cordoned and drained, deconfigured and their Node objects deleted,
//! as WMCO does when a host's `windows-instances` entry goes (controllers/configmap_controller.go
//! `deconfigureInstances`, then controllers.go `deconfigureInstance`: drain, deconfigure the instance, then delete
//! the Node; a failure keeps the Node). The drain is `oc adm drain`'s (through the Eviction API, with
//! `--drain-timeout` and `--force`); a drain that cannot finish keeps the node configured and cordoned.
//!
//! Which Node is a target's ([`Target`]): the Node named as the target's node (the name the agent computed on the
//! host, else the inventory's); failing that, the one Node that has the target's address (WMCO's
//! `hasAssociatedInstance` matches addresses, for BYOH hosts known by address only). An address claims a Node
//! only for a target that has no Node of its own name: two inventory entries reached through one address (posix
//! staging hosts on one machine) each keep their own Node and no other. A Node that is a Windows Machine's (the
//! Machine API's nodelink rule) is never pruned: the Machine API owns it.
//!
//! To reach a node that left the inventory, sync records on each Node it reached how it logged in (annotation
//! `wmrender.dev/ssh`: user, port, and the posix root), as WMCO records the username on BYOH nodes: only on the
//! Node named as that target's node. Everything read back from a Node is untrusted and checked by the inventory's
//! rules before any connection.

use crate::cluster::drain::{self, DrainOptions};
use crate::cluster::machines::{self, Machine};
use crate::cluster::nodes::{self, addresses, name_of};
use crate::cluster::{Cluster, ClusterError, MANAGED};
use crate::sync::inventory::{Node, address_problem, user_problem};
use crate::sync::profile::{Profile, strip_clixml};
use crate::sync::ssh::{ConnectOptions, Connection};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use wmrender_contract::{ApplyResult, ApplyStatus};

pub const SSH_ANNOTATION: &str = "wmrender.dev/ssh";

/// A sync target as the cluster knows it: how it is reached, and the Kubernetes name of its node.
#[derive(Clone, Debug)]
pub struct Target {
    pub node: Node,
    pub node_name: String,
}

/// How sync logged in to a node, kept on its Node object for `--prune-nodes`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Login {
    pub user: String,
    pub port: u16,
    /// The folder standing for `C:\` on a posix host; absent for Windows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
}

impl Login {
    fn of(node: &Node) -> Login {
        let root = match &node.profile {
            Profile::Windows => None,
            Profile::Posix { root } => Some(root.clone()),
        };
        Login { user: node.user.clone(), port: node.port, root }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PruneStatus {
    /// `--dry-run`: this node would be deconfigured and its Node deleted.
    WouldPrune,
    /// Deconfigured and its Node deleted.
    Pruned,
    /// Not deleted: deconfigure did not finish (or the node could not be reached).
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

/// The names of the Nodes that are the targets' (see the module's rule).
fn claimed(all: &[Value], targets: &[Target]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for t in targets {
        if all.iter().any(|n| name_of(n) == t.node_name) {
            names.push(t.node_name.clone());
            continue;
        }
        let by_address: Vec<&Value> = all.iter().filter(|n| addresses(n).any(|(_, a)| a == t.node.address)).collect();
        if let [one] = by_address.as_slice() {
            names.push(name_of(one).to_string());
        }
    }
    names
}

/// Records, on the Node of each target sync reached, how it logged in: on the Node named as the target's node and
/// no other. Nodes not registered yet are left for a later sync; a record already right is not written again.
pub async fn record_logins(cluster: &Cluster, reached: &[Target]) -> Result<(), ClusterError> {
    for target in reached {
        let value = serde_json::to_string(&Login::of(&target.node)).unwrap_or_default();
        nodes::annotate(cluster, &target.node_name, SSH_ANNOTATION, &value).await?;
    }
    Ok(())
}

/// The managed Nodes that are not the targets' (nor a Windows Machine's).
pub async fn leaving(cluster: &Cluster, targets: &[Target], machines: &[Machine]) -> Result<Vec<Value>, ClusterError> {
    let all = nodes::list(cluster, "kubernetes.io/os%3Dwindows").await?;
    Ok(leaving_among(&all, targets, machines))
}

/// [`leaving`] among Windows Nodes already read (the controller's watched view).
pub fn leaving_among(all: &[Value], targets: &[Target], machines: &[Machine]) -> Vec<Value> {
    let mut kept = claimed(all, targets);
    for m in machines {
        kept.extend(m.node_ref.iter().cloned());
        kept.extend(machines::node_of(m, all).map(|n| name_of(n).to_string()));
    }
    let managed = |n: &&Value| n["metadata"]["labels"][MANAGED] == "true";
    all.iter().filter(managed).filter(|n| !kept.iter().any(|k| k == name_of(n))).cloned().collect()
}

/// The Node that is this target's, among the Windows Nodes (the module's rule), if it has registered.
pub fn node_of<'a>(all: &'a [Value], target: &Target, machines: &[Machine]) -> Option<&'a Value> {
    if let Some(n) = all.iter().find(|n| name_of(n) == target.node_name) {
        return Some(n);
    }
    if let Some(m) = target.node.machine.as_ref().and_then(|name| machines.iter().find(|m| &m.name == name)) {
        let by_ref = m.node_ref.as_ref().and_then(|r| all.iter().find(|n| name_of(n) == r));
        return by_ref.or_else(|| machines::node_of(m, all));
    }
    let by_address: Vec<&Value> = all.iter().filter(|n| addresses(n).any(|(_, a)| a == target.node.address)).collect();
    if let [one] = by_address.as_slice() { Some(one) } else { None }
}

/// How to reach a leaving Node: its InternalIP and the login sync recorded, each checked as inventory input.
pub fn reach(node: &Value) -> Result<Node, String> {
    let name = name_of(node);
    let address = addresses(node)
        .find(|(t, _)| *t == "InternalIP")
        .map(|(_, a)| a.to_string())
        .ok_or("the Node has no InternalIP in status.addresses")?;
    if let Some(p) = address_problem(&address) {
        return Err(format!("its InternalIP `{}` {p}", address.escape_debug()));
    }
    let record = node["metadata"]["annotations"][SSH_ANNOTATION].as_str().ok_or(format!(
        "no {SSH_ANNOTATION} annotation: sync has not recorded how it logs in to this node; deconfigure it by hand \
         (`C:\\k\\wmrender\\wmrender-node.exe deconfigure` over SSH) and delete the Node"
    ))?;
    let login: Login =
        serde_json::from_str(record).map_err(|_| format!("its {SSH_ANNOTATION} annotation is not wmrender's"))?;
    if let Some(p) = user_problem(&login.user) {
        return Err(format!("the user `{}` in its {SSH_ANNOTATION} annotation {p}", login.user.escape_debug()));
    }
    if login.port == 0 {
        return Err(format!("port 0 in its {SSH_ANNOTATION} annotation"));
    }
    let profile = match login.root {
        None => Profile::Windows,
        Some(r) if r.starts_with('/') && !r.contains("..") && !r.chars().any(char::is_control) => {
            Profile::Posix { root: r }
        }
        Some(_) => return Err(format!("the posix root in its {SSH_ANNOTATION} annotation is not an absolute path")),
    };
    Ok(Node {
        name: name.to_string(),
        address,
        port: login.port,
        user: login.user,
        profile,
        machine: None,
        reach_only: false,
    })
}

/// Cordons, drains and deconfigures each leaving node over SSH and deletes its Node; with `dry_run`, only says
/// which would go.
pub async fn prune(
    cluster: &Cluster,
    leaving: &[Value],
    connect: &ConnectOptions,
    drain_opts: &DrainOptions,
    dry_run: bool,
) -> Vec<Pruned> {
    let mut out = Vec::new();
    for node in leaving {
        let name = name_of(node).to_string();
        let address = addresses(node).find(|(t, _)| *t == "InternalIP").map(|(_, a)| a.to_string()).unwrap_or_default();
        let mut report = Pruned {
            node: name.clone(),
            address,
            status: PruneStatus::Failed,
            error: None,
            evicted: vec![],
            deconfigure: None,
        };
        if dry_run {
            report.status = PruneStatus::WouldPrune;
            out.push(report);
            continue;
        }
        // Its pods go elsewhere first: deconfigure ends whatever still runs there.
        match drain_first(cluster, &name, drain_opts).await {
            Ok(evicted) => report.evicted = evicted,
            Err(e) => {
                report.error = Some(e);
                out.push(report);
                continue;
            }
        }
        match deconfigure(node, connect).await {
            Ok(result) => {
                report.deconfigure = Some(result);
                match nodes::delete(cluster, node).await {
                    Ok(()) => report.status = PruneStatus::Pruned,
                    Err(e) => report.error = Some(e.to_string()),
                }
            }
            Err((e, result)) => {
                report.error = Some(e);
                report.deconfigure = result;
            }
        }
        out.push(report);
    }
    out
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
async fn deconfigure(node: &Value, connect: &ConnectOptions) -> Result<ApplyResult, (String, Option<ApplyResult>)> {
    let target = reach(node).map_err(|e| (format!("cannot reach the node: {e}"), None))?;
    let conn = Connection::open(&target, connect).await.map_err(|e| (e.to_string(), None))?;
    let out = conn.exec(&target.profile.deconfigure_command()).await.map_err(|e| (e.to_string(), None));
    conn.close().await;
    let out = out?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    match ApplyResult::from_stdout(&stdout) {
        Some(r) if r.status == ApplyStatus::Converged && r.errors.is_empty() && out.status == Some(0) => Ok(r),
        Some(r) => {
            let why = if r.errors.is_empty() { "deconfigure did not finish".to_string() } else { r.errors.join("; ") };
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, ip: &str, annotation: Option<&str>) -> Value {
        let mut n = json!({ "metadata": { "name": name, "uid": "u1" },
                            "status": { "addresses": [{ "type": "InternalIP", "address": ip },
                                                      { "type": "Hostname", "address": name }] } });
        if let Some(a) = annotation {
            n["metadata"]["annotations"] = json!({ SSH_ANNOTATION: a });
        }
        n
    }

    fn target(name: &str, address: &str) -> Target {
        let node = Node {
            name: name.into(),
            address: address.into(),
            port: 22,
            user: "Administrator".into(),
            profile: Profile::Windows,
            machine: None,
            reach_only: false,
        };
        Target { node, node_name: name.into() }
    }

    #[test]
    fn a_target_claims_the_node_of_its_name_else_the_one_node_of_its_address() {
        let all = [node("win-a", "10.0.0.5", None), node("win-b", "10.0.0.6", None), node("x", "10.0.0.7", None)];
        // By name; by address for a BYOH host known by its address only.
        assert_eq!(claimed(&all, &[target("win-a", "10.9.9.9"), target("10.0.0.6", "10.0.0.6")]), ["win-a", "win-b"]);
        // Two targets through one address: each keeps its own Node, and a third Node there is no one's.
        let shared = [node("stays", "127.0.0.1", None), node("left", "127.0.0.1", None)];
        assert_eq!(claimed(&shared, &[target("stays", "127.0.0.1")]), ["stays"]);
        // An address two Nodes share claims neither.
        assert!(claimed(&shared, &[target("new-one", "127.0.0.1")]).is_empty());
    }

    #[test]
    fn the_recorded_login_is_checked_like_inventory_input() {
        let ok = reach(&node("win-a", "10.0.0.5", Some(r#"{"user":"capi","port":22}"#))).unwrap();
        assert_eq!((ok.user.as_str(), ok.port, ok.profile), ("capi", 22, Profile::Windows));
        for bad in [
            r#"{"user":"-oProxyCommand=x","port":22}"#,
            r#"{"user":"a","port":22,"root":"../x"}"#,
            r#"{"user":"a","port":22,"extra":1}"#,
            "not json",
        ] {
            assert!(reach(&node("win-a", "10.0.0.5", Some(bad))).is_err(), "{bad}");
        }
        assert!(reach(&node("win-a", "-oX", Some(r#"{"user":"a","port":22}"#))).is_err());
        assert!(reach(&node("win-a", "10.0.0.5", None)).unwrap_err().contains("deconfigure it by hand"));
    }
}
