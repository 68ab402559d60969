//! `sync --prune-nodes`: nodes wmrender configured (labelled `wmrender.dev/managed=true`) that left this sync's
//! targets (inventory, BYOH list, Machines) are deconfigured and their Node objects deleted, as WMCO does when a
//! host's `windows-instances` entry goes (controllers/configmap_controller.go `deconfigureInstances`, then
//! controllers.go `deconfigureInstance`: deconfigure the instance, then delete the Node; a failure keeps the Node).
//! A Node stays with its targets when its name or any of its `status.addresses` is a target's (WMCO's
//! `hasAssociatedInstance` matches addresses).
//!
//! To reach a node that left the inventory, sync records on each Node it reached how it logged in (annotation
//! `wmrender.dev/ssh`: user, port, and the posix root), as WMCO records the username on BYOH nodes. Everything
//! read back from a Node is untrusted and checked by the inventory's rules before any connection.

use super::{Cluster, ClusterError, api_error};
use crate::sync::inventory::{Node, address_problem, user_problem};
use crate::sync::node::Status;
use crate::sync::profile::{Profile, strip_clixml};
use crate::sync::ssh::{ConnectOptions, Connection};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use wmrender_contract::{ApplyResult, ApplyStatus};

pub const MANAGED_LABEL: &str = "wmrender.dev/managed";
pub const SSH_ANNOTATION: &str = "wmrender.dev/ssh";

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
    /// The deconfigure step's result line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deconfigure: Option<ApplyResult>,
}

fn name_of(node: &Value) -> &str {
    node["metadata"]["name"].as_str().unwrap_or("")
}

fn addresses(node: &Value) -> impl Iterator<Item = (&str, &str)> {
    node["status"]["addresses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| Some((a["type"].as_str()?, a["address"].as_str()?)))
}

/// Whether a Node is one of the targets: by name, or by any of its addresses.
fn is_target(node: &Value, targets: &[Node], names: &[String]) -> bool {
    let name = name_of(node);
    names.iter().any(|n| n == name)
        || targets.iter().any(|t| t.name == name || addresses(node).any(|(_, a)| a == t.address))
}

/// The Nodes a label selector (URL-encoded) picks.
async fn list_nodes(cluster: &Cluster, selector: &str) -> Result<Vec<Value>, ClusterError> {
    let path = format!("/api/v1/nodes?labelSelector={selector}");
    let what = format!("GET {}{path}", cluster.server.trim_end_matches('/'));
    let request = http::Request::get(&path)
        .body(Vec::new())
        .map_err(|e| ClusterError::Api { what: what.clone(), why: e.to_string() })?;
    let list: Value = cluster.client.request(request).await.map_err(|e| api_error(what, e))?;
    Ok(list["items"].as_array().cloned().unwrap_or_default())
}

/// Records, on the Node of each target sync reached, how it logged in. Nodes not registered yet are left for a
/// later sync; a record already right is not written again.
pub async fn record_logins(cluster: &Cluster, reached: &[Node]) -> Result<(), ClusterError> {
    if reached.is_empty() {
        return Ok(());
    }
    // kubelet labels every node with its OS: only Windows nodes can be sync's.
    let nodes = list_nodes(cluster, "kubernetes.io/os%3Dwindows").await?;
    for target in reached {
        let Some(node) = nodes.iter().find(|n| is_target(n, std::slice::from_ref(target), &[])) else { continue };
        let value = serde_json::to_string(&Login::of(target)).unwrap_or_default();
        if node["metadata"]["annotations"][SSH_ANNOTATION].as_str() == Some(value.as_str()) {
            continue;
        }
        let name = name_of(node);
        let path = format!("/api/v1/nodes/{name}");
        let what = format!("recording how sync reached node {name} (PATCH {path})");
        let patch = json!({ "metadata": { "annotations": { SSH_ANNOTATION: value } } });
        let request = http::Request::patch(&path)
            .header("content-type", "application/merge-patch+json")
            .body(serde_json::to_vec(&patch).unwrap_or_default())
            .map_err(|e| ClusterError::Api { what: what.clone(), why: e.to_string() })?;
        cluster.client.request::<Value>(request).await.map_err(|e| api_error(what, e))?;
    }
    Ok(())
}

/// The managed Nodes that are not among the targets (nor named by a Windows Machine still settling).
pub async fn leaving(
    cluster: &Cluster,
    targets: &[Node],
    machine_nodes: &[String],
) -> Result<Vec<Value>, ClusterError> {
    let managed = list_nodes(cluster, &format!("{MANAGED_LABEL}%3Dtrue")).await?;
    Ok(managed.into_iter().filter(|n| !is_target(n, targets, machine_nodes)).collect())
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
    Ok(Node { name: name.to_string(), address, port: login.port, user: login.user, profile })
}

/// Deconfigures each leaving node over SSH and deletes its Node; with `dry_run`, only says which would go.
pub async fn prune(cluster: &Cluster, leaving: &[Value], connect: &ConnectOptions, dry_run: bool) -> Vec<Pruned> {
    let mut out = Vec::new();
    for node in leaving {
        let name = name_of(node).to_string();
        let address = addresses(node).find(|(t, _)| *t == "InternalIP").map(|(_, a)| a.to_string()).unwrap_or_default();
        let mut report =
            Pruned { node: name.clone(), address, status: PruneStatus::Failed, error: None, deconfigure: None };
        if dry_run {
            report.status = PruneStatus::WouldPrune;
            out.push(report);
            continue;
        }
        match deconfigure(node, connect).await {
            Ok(result) => {
                report.deconfigure = Some(result);
                match delete(cluster, node).await {
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

/// Deletes the Node looked at, and no other: the uid is a precondition (a Node registered again under the same
/// name since is left alone).
async fn delete(cluster: &Cluster, node: &Value) -> Result<(), ClusterError> {
    let name = name_of(node);
    let path = format!("/api/v1/nodes/{name}");
    let what = format!("deleting node {name} (DELETE {path})");
    let options =
        json!({ "apiVersion": "v1", "kind": "DeleteOptions", "preconditions": { "uid": node["metadata"]["uid"] } });
    let request = http::Request::delete(&path)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&options).unwrap_or_default())
        .map_err(|e| ClusterError::Api { what: what.clone(), why: e.to_string() })?;
    match cluster.client.request::<Value>(request).await {
        Ok(_) => Ok(()),
        // Gone already: what pruning wanted.
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(api_error(what, e)),
    }
}

/// The statuses of the sync targets whose Node may be annotated: the ones sync reached and changed or found right.
pub fn reached(status: Status) -> bool {
    matches!(status, Status::Synced | Status::Unchanged | Status::Pending)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, ip: &str, annotation: Option<&str>) -> Value {
        let mut n = json!({ "metadata": { "name": name, "uid": "u1" },
                            "status": { "addresses": [{ "type": "InternalIP", "address": ip },
                                                      { "type": "Hostname", "address": name }] } });
        if let Some(a) = annotation {
            n["metadata"]["annotations"] = json!({ SSH_ANNOTATION: a });
        }
        n
    }

    #[test]
    fn a_node_stays_with_its_target_by_name_or_address() {
        let t = crate::sync::inventory::cluster_node("10.0.0.5", "10.0.0.5", "Administrator").unwrap();
        assert!(is_target(&node("win-a", "10.0.0.5", None), std::slice::from_ref(&t), &[]));
        assert!(!is_target(&node("win-b", "10.0.0.6", None), std::slice::from_ref(&t), &[]));
        assert!(is_target(&node("win-b", "10.0.0.6", None), &[], &["win-b".to_string()]));
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
