//! Machine-backed Windows nodes, read as WMCO reads them (controllers/windowsmachine_controller.go): the Machines in
//! `openshift-machine-api` labelled `machine.openshift.io/os-id=Windows`. What they say is untrusted data; turning
//! one into a target (with the inventory's checks) is [`crate::lifecycle::machines`]'s.
//!
//! A Machine is configured once the Machine API has `Provisioned` it: the instance exists and has an address. The
//! Node comes later — kubelet registers it after the configuration — and the Machine API's nodelink controller then
//! sets the Machine's `status.nodeRef` and its phase `Running`. So a Machine's node is found, as nodelink finds it,
//! by provider ID, then by internal IP ([`node_of`]).

#[cfg(feature = "cluster")]
use super::{Cluster, ClusterError};
use serde_json::Value;

pub const NAMESPACE: &str = "openshift-machine-api";
pub const OS_LABEL: &str = "machine.openshift.io/os-id";

/// The phases in which WMCO configures a Machine's instance (`Provisioned`) or keeps it configured (`Running`).
pub const CONFIGURED_PHASES: [&str; 2] = ["Provisioned", "Running"];

/// What a Windows Machine's object says, as read (not yet checked).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Machine {
    pub name: String,
    pub uid: String,
    /// `status.phase`.
    pub phase: Option<String>,
    /// `spec.providerID`.
    pub provider_id: Option<String>,
    /// `status.addresses`: (type, address).
    pub addresses: Vec<(String, String)>,
    /// `status.nodeRef.name`.
    pub node_ref: Option<String>,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
}

impl Machine {
    pub fn from_object(m: &Value) -> Machine {
        let s = |v: &Value| v.as_str().map(str::to_string);
        Machine {
            name: m["metadata"]["name"].as_str().unwrap_or("").to_string(),
            uid: m["metadata"]["uid"].as_str().unwrap_or("").to_string(),
            phase: s(&m["status"]["phase"]),
            provider_id: s(&m["spec"]["providerID"]).filter(|p| !p.is_empty()),
            addresses: m["status"]["addresses"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| Some((a["type"].as_str()?.to_string(), a["address"].as_str()?.to_string())))
                .collect(),
            node_ref: s(&m["status"]["nodeRef"]["name"]),
            deleting: !m["metadata"]["deletionTimestamp"].is_null(),
        }
    }

    /// Where WMCO reaches the instance (`GetAddress`): the first InternalIP that is not IPv6, else the first
    /// InternalDNS.
    pub fn ssh_address(&self) -> Option<&str> {
        let of = |kind: &str| {
            self.addresses
                .iter()
                .filter(|(t, _)| t == kind)
                .map(|(_, a)| a.as_str())
                .find(|a| a.parse::<std::net::Ipv6Addr>().is_err())
        };
        of("InternalIP").or_else(|| of("InternalDNS"))
    }

    fn internal_ips(&self) -> impl Iterator<Item = &str> {
        self.addresses.iter().filter(|(t, _)| t == "InternalIP").map(|(_, a)| a.as_str())
    }

    /// Why the Machine is not ready to be configured yet (`None` when it is): WMCO's rule, a phase of
    /// [`CONFIGURED_PHASES`] and an address.
    pub fn waiting_for(&self) -> Option<String> {
        if self.deleting {
            return Some("it is being deleted".into());
        }
        match self.phase.as_deref() {
            Some(p) if CONFIGURED_PHASES.contains(&p) => {}
            Some(p) => return Some(format!("phase {} (configured once Provisioned)", p.escape_debug())),
            None => return Some("no phase yet (configured once Provisioned)".into()),
        }
        if self.ssh_address().is_none() {
            return Some("no InternalIP or InternalDNS address yet (status.addresses)".into());
        }
        None
    }
}

/// The Windows Machines and the platform they run on (`status.platformStatus.type` of the Infrastructure).
#[derive(Clone, Debug, Default)]
pub struct WindowsMachines {
    pub platform: String,
    pub machines: Vec<Machine>,
}

/// Lists the Windows Machines.
#[cfg(feature = "cluster")]
pub async fn list(cluster: &Cluster) -> Result<WindowsMachines, ClusterError> {
    let infra = cluster.get("/apis/config.openshift.io/v1/infrastructures/cluster").await?.unwrap_or(Value::Null);
    let platform = infra["status"]["platformStatus"]["type"].as_str().or(infra["status"]["platform"].as_str());
    let items = cluster
        .list(&format!(
            "/apis/machine.openshift.io/v1beta1/namespaces/{NAMESPACE}/machines?labelSelector={OS_LABEL}%3DWindows"
        ))
        .await?;
    Ok(WindowsMachines {
        platform: platform.unwrap_or("").to_string(),
        machines: items.iter().map(Machine::from_object).collect(),
    })
}

/// The Node of a Machine, as the Machine API's nodelink controller finds it: the one Node whose `spec.providerID`
/// is the Machine's, else the one whose first InternalIP is one of the Machine's InternalIPs. Two candidates are
/// no match (nodelink refuses them too).
pub fn node_of<'a>(machine: &Machine, nodes: &'a [Value]) -> Option<&'a Value> {
    let one = |found: Vec<&'a Value>| if found.len() == 1 { found.first().copied() } else { None };
    if let Some(id) = &machine.provider_id {
        let by_id: Vec<&Value> = nodes.iter().filter(|n| n["spec"]["providerID"].as_str() == Some(id)).collect();
        if !by_id.is_empty() {
            return one(by_id);
        }
    }
    let ips: Vec<&str> = machine.internal_ips().collect();
    if ips.is_empty() {
        return None;
    }
    one(nodes.iter().filter(|n| first_internal_ip(n).is_some_and(|ip| ips.contains(&ip))).collect())
}

fn first_internal_ip(node: &Value) -> Option<&str> {
    node["status"]["addresses"].as_array()?.iter().find(|a| a["type"] == "InternalIP")?["address"].as_str()
}

/// A Machine as read, for tests: named, in `phase`, at `addresses` (a JSON list of `{type, address}`).
#[cfg(test)]
pub(crate) fn test_machine(name: &str, phase: Option<&str>, addresses: Value) -> Machine {
    let mut m = serde_json::json!({ "metadata": { "name": name }, "status": { "addresses": addresses } });
    if let Some(p) = phase {
        m["status"]["phase"] = p.into();
    }
    Machine::from_object(&m)
}

#[cfg(test)]
mod tests {
    use super::test_machine as machine;
    use super::*;
    use serde_json::json;

    #[test]
    fn internal_ipv4_then_internal_dns_is_the_address() {
        let a = json!([{"type": "InternalIP", "address": "fd00::5"}, {"type": "InternalDNS", "address": "win-a.x"},
                       {"type": "InternalIP", "address": "10.0.0.5"}]);
        assert_eq!(machine("m", None, a).ssh_address(), Some("10.0.0.5"));
        let dns = json!([{"type": "InternalDNS", "address": "win-a.x"}]);
        assert_eq!(machine("m", None, dns).ssh_address(), Some("win-a.x"));
        let external = json!([{"type": "ExternalIP", "address": "1.2.3.4"}]);
        assert_eq!(machine("m", None, external).ssh_address(), None);
    }

    #[test]
    fn a_machine_is_configured_once_provisioned_with_an_address() {
        let ip = json!([{"type": "InternalIP", "address": "10.0.0.5"}]);
        assert_eq!(machine("m", Some("Provisioned"), ip.clone()).waiting_for(), None);
        assert_eq!(machine("m", Some("Running"), ip.clone()).waiting_for(), None);
        assert!(machine("m", Some("Provisioning"), ip.clone()).waiting_for().unwrap().contains("Provisioning"));
        assert!(machine("m", None, ip).waiting_for().unwrap().contains("no phase"));
        assert!(machine("m", Some("Provisioned"), json!([])).waiting_for().unwrap().contains("address"));
    }

    #[test]
    fn a_machines_node_is_found_by_provider_id_then_by_internal_ip() {
        let mut m = machine("m", Some("Provisioned"), json!([{"type": "InternalIP", "address": "10.0.0.5"}]));
        let node = |name: &str, id: Option<&str>, ip: &str| {
            let mut n = json!({"metadata": {"name": name}, "spec": {},
                               "status": {"addresses": [{"type": "InternalIP", "address": ip}]}});
            if let Some(id) = id {
                n["spec"]["providerID"] = id.into();
            }
            n
        };
        let nodes = [node("by-ip", None, "10.0.0.5"), node("other", Some("aws:///z/i-2"), "10.0.0.9")];
        assert_eq!(node_of(&m, &nodes).unwrap()["metadata"]["name"], "by-ip");
        m.provider_id = Some("aws:///z/i-2".into());
        assert_eq!(node_of(&m, &nodes).unwrap()["metadata"]["name"], "other", "the provider ID comes first");
        m.provider_id = None;
        let twins = [node("a", None, "10.0.0.5"), node("b", None, "10.0.0.5")];
        assert!(node_of(&m, &twins).is_none(), "two candidates are no match");
    }
}
