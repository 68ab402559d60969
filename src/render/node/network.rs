//! The two network files that only the node can complete, rendered here as templates with placeholders that
//! network-conf.ps1 fills in once hybrid-overlay has created the HNS network:
//! `C:\k\kube-proxy.conf` (reference wmco-node-artifacts §4) and `C:\k\cni\config\cni.conf` (§5.3).

use super::paths;
use crate::plan::Plan;
use serde::Serialize;
use std::collections::BTreeMap;

/// Placeholders the script replaces; none of them can occur in the rest of the file.
pub const NODE_NAME: &str = "__NODE_NAME__";
pub const NODE_SUBNET: &str = "__NODE_SUBNET__";
pub const SOURCE_VIP: &str = "__SOURCE_VIP__";
pub const PROVIDER_ADDRESS: &str = "__PROVIDER_ADDRESS__";
/// Created by hybrid-overlay-node from the node's `k8s.ovn.org/hybrid-overlay-node-subnet`.
pub const HNS_NETWORK: &str = "OVNKubernetesHybridOverlayNetwork";
/// The base network hybrid-overlay-node creates before the overlay network (WMCO removes both on deconfigure).
pub const HNS_BASE_NETWORK: &str = "BaseOVNKubernetesHybridOverlayNetwork";

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeProxyConfiguration {
    kind: &'static str,
    api_version: &'static str,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    feature_gates: BTreeMap<&'static str, bool>,
    client_connection: ClientConnection,
    hostname_override: &'static str,
    /// `kernelspace` is the Windows (HNS) proxier.
    mode: &'static str,
    winkernel: Winkernel,
    /// The node's hybrid-overlay subnet, not the cluster network.
    #[serde(rename = "clusterCIDR")]
    cluster_cidr: &'static str,
}

#[derive(Serialize)]
struct ClientConnection {
    kubeconfig: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Winkernel {
    network_name: &'static str,
    source_vip: &'static str,
    #[serde(rename = "enableDSR")]
    enable_dsr: bool,
}

pub fn kube_proxy(plan: &Plan) -> KubeProxyConfiguration {
    // WinDSR and WinOverlay are GA and locked on from 1.34; naming a gate after its removal would stop kube-proxy.
    let feature_gates =
        if plan.node.kubernetes.minor < 34 { [("WinDSR", true), ("WinOverlay", true)].into() } else { BTreeMap::new() };
    KubeProxyConfiguration {
        kind: "KubeProxyConfiguration",
        api_version: "kubeproxy.config.k8s.io/v1alpha1",
        feature_gates,
        client_connection: ClientConnection { kubeconfig: paths::KUBECONFIG },
        hostname_override: NODE_NAME,
        mode: "kernelspace",
        winkernel: Winkernel { network_name: HNS_NETWORK, source_vip: SOURCE_VIP, enable_dsr: true },
        cluster_cidr: NODE_SUBNET,
    }
}

pub fn kube_proxy_template(plan: &Plan) -> String {
    crate::render::yaml::to_string(&kube_proxy(plan)).unwrap_or_default()
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CniConf {
    cni_version: &'static str,
    name: &'static str,
    #[serde(rename = "type")]
    kind: &'static str,
    api_version: u32,
    capabilities: BTreeMap<&'static str, bool>,
    ipam: Ipam,
    policies: Vec<Policy>,
}

#[derive(Serialize)]
struct Ipam {
    #[serde(rename = "type")]
    kind: &'static str,
    subnet: &'static str,
}

#[derive(Serialize)]
struct Policy {
    name: &'static str,
    value: serde_json::Value,
}

/// The win-overlay CNI configuration: service traffic is not NATed and is routed through the overlay.
pub fn cni_template(plan: &Plan) -> String {
    let service = plan.node.service_network.as_str();
    let policy = |value| Policy { name: "EndpointPolicy", value };
    let conf = CniConf {
        cni_version: "0.2.0",
        name: HNS_NETWORK,
        kind: "win-overlay",
        api_version: 2,
        capabilities: [("dns", true), ("portMappings", true)].into(),
        ipam: Ipam { kind: "host-local", subnet: NODE_SUBNET },
        policies: vec![
            policy(
                serde_json::json!({"type": "OutBoundNAT", "settings": {"exceptionList": [service], "destinationPrefix": "", "needEncap": false}}),
            ),
            policy(
                serde_json::json!({"type": "SDNRoute", "settings": {"exceptionList": [], "destinationPrefix": service, "needEncap": true}}),
            ),
            policy(serde_json::json!({"type": "ProviderAddress", "settings": {"providerAddress": PROVIDER_ADDRESS}})),
        ],
    };
    serde_json::to_string_pretty(&conf).unwrap_or_default() + "\n"
}
