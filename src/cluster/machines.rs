//! Machine-backed Windows nodes, found as WMCO finds them (controllers/windowsmachine_controller.go): the Machines
//! in `openshift-machine-api` labelled `machine.openshift.io/os-id=Windows`. A Machine becomes a sync target once
//! it has a node (`status.nodeRef`) and an address in `status.addresses`: the first InternalIP that is not IPv6,
//! else the first InternalDNS (WMCO's `GetAddress`). The SSH user is WMCO's per platform: `capi` on Azure,
//! `Administrator` elsewhere. Machine data is untrusted: names and addresses are checked by the inventory's rules.

use super::{Cluster, ClusterError, api_error};
use crate::sync::inventory::{self, Node};
use serde::Serialize;
use serde_json::Value;

pub const NAMESPACE: &str = "openshift-machine-api";
pub const OS_LABEL: &str = "machine.openshift.io/os-id";

/// A Windows Machine that is not a sync target: not provisioned far enough yet (`refused: false`), or holding a
/// value wmrender will not use (`refused: true`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub machine: String,
    pub refused: bool,
    pub why: String,
}

#[derive(Debug, Default)]
pub struct Found {
    pub nodes: Vec<Node>,
    pub skipped: Vec<Skipped>,
    /// Node names the Machines claim, targets or not: a node whose Machine is still settling is not pruned.
    pub node_names: Vec<String>,
}

async fn get(cluster: &Cluster, path: &str) -> Result<Value, ClusterError> {
    let what = format!("GET {}{path}", cluster.server.trim_end_matches('/'));
    let request = http::Request::get(path)
        .body(Vec::new())
        .map_err(|e| ClusterError::Api { what: what.clone(), why: e.to_string() })?;
    cluster.client.request::<Value>(request).await.map_err(|e| api_error(what, e))
}

/// The SSH user WMCO logs in with on a Machine of this platform (`status.platformStatus.type` of the cluster's
/// Infrastructure).
pub fn user_for(platform: &str) -> &'static str {
    if platform == "Azure" { "capi" } else { "Administrator" }
}

/// Lists the Windows Machines and turns them into sync targets.
pub async fn find(cluster: &Cluster) -> Result<Found, ClusterError> {
    let infra = get(cluster, "/apis/config.openshift.io/v1/infrastructures/cluster").await?;
    let platform = infra["status"]["platformStatus"]["type"].as_str().or(infra["status"]["platform"].as_str());
    let user = user_for(platform.unwrap_or(""));
    let list = get(
        cluster,
        &format!(
            "/apis/machine.openshift.io/v1beta1/namespaces/{NAMESPACE}/machines?labelSelector={OS_LABEL}%3DWindows"
        ),
    )
    .await?;
    Ok(from_list(list["items"].as_array().map(Vec::as_slice).unwrap_or_default(), user))
}

/// The targets of a list of Machines (already selected by label), in list order.
pub fn from_list(machines: &[Value], user: &str) -> Found {
    let mut found = Found::default();
    for m in machines {
        let machine = m["metadata"]["name"].as_str().unwrap_or("").escape_debug().to_string();
        let skip = |refused: bool, why: String| Skipped { machine: machine.clone(), refused, why };
        let Some(node_name) = m["status"]["nodeRef"]["name"].as_str() else {
            found.skipped.push(skip(false, "no node yet (status.nodeRef)".into()));
            continue;
        };
        found.node_names.push(node_name.to_string());
        let Some(address) = address(&m["status"]["addresses"]) else {
            found.skipped.push(skip(false, "no InternalIP or InternalDNS address yet (status.addresses)".into()));
            continue;
        };
        match inventory::cluster_node(node_name, &address, user) {
            Ok(node) => found.nodes.push(node),
            Err(refused) => found.skipped.push(skip(true, refused.to_string())),
        }
    }
    found
}

/// The first InternalIP that is not IPv6, else the first InternalDNS (WMCO reaches nodes over IPv4).
fn address(addresses: &Value) -> Option<String> {
    let list = addresses.as_array()?;
    let of = |kind: &str| {
        list.iter()
            .filter(|a| a["type"] == kind)
            .filter_map(|a| a["address"].as_str())
            .find(|a| a.parse::<std::net::Ipv6Addr>().is_err())
            .map(str::to_string)
    };
    of("InternalIP").or_else(|| of("InternalDNS"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn machine(name: &str, node: Option<&str>, addresses: Value) -> Value {
        let mut m = json!({ "metadata": { "name": name }, "status": { "addresses": addresses } });
        if let Some(n) = node {
            m["status"]["nodeRef"] = json!({ "kind": "Node", "name": n });
        }
        m
    }

    #[test]
    fn internal_ipv4_then_internal_dns_is_the_address() {
        let a = json!([{"type": "InternalIP", "address": "fd00::5"}, {"type": "InternalDNS", "address": "win-a.x"},
                       {"type": "InternalIP", "address": "10.0.0.5"}]);
        assert_eq!(address(&a).as_deref(), Some("10.0.0.5"));
        assert_eq!(address(&json!([{"type": "InternalDNS", "address": "win-a.x"}])).as_deref(), Some("win-a.x"));
        assert_eq!(address(&json!([{"type": "ExternalIP", "address": "1.2.3.4"}])), None);
    }

    #[test]
    fn machines_become_targets_wait_or_are_refused() {
        let found = from_list(
            &[
                machine("m-ok", Some("win-a"), json!([{"type": "InternalIP", "address": "10.0.0.5"}])),
                machine("m-new", None, json!([])),
                machine("m-noaddr", Some("win-b"), json!([])),
                machine("m-evil", Some("win-c"), json!([{"type": "InternalIP", "address": "-oProxyCommand=x"}])),
                machine("m-evil-name", Some("a;b"), json!([{"type": "InternalIP", "address": "10.0.0.6"}])),
            ],
            user_for("Azure"),
        );
        assert_eq!(found.nodes.len(), 1);
        assert_eq!((found.nodes[0].name.as_str(), found.nodes[0].user.as_str()), ("win-a", "capi"));
        let states: Vec<(&str, bool)> = found.skipped.iter().map(|s| (s.machine.as_str(), s.refused)).collect();
        assert_eq!(states, [("m-new", false), ("m-noaddr", false), ("m-evil", true), ("m-evil-name", true)]);
        assert_eq!(found.node_names, ["win-a", "win-b", "win-c", "a;b"]);
        assert_eq!(user_for("AWS"), "Administrator");
    }
}
