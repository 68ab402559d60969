//! Networks: OVN-Kubernetes hybrid networking must be configured, CIDRs must parse and not collide, no class E,
//! the first service network holds the cluster DNS address, and the hybrid-overlay VXLAN port is a usable port
//! (vSphere requires a custom one; every other platform may have one, which WMCO passes to the nodes as it is).

use super::Decoded;
use super::checked::{DEFAULT_CLUSTER_NETWORK, DEFAULT_SERVICE_NETWORK, Networks};
use super::matrix::support;
use crate::diagnostics::Diagnostics;
use crate::inputs::schema::ClusterInputs;
use crate::inputs::yaml::Located;
use crate::net::{is_class_e, nth, overlaps, parse_cidr};
use ipnet::IpNet;

/// The port OVN-Kubernetes' Geneve tunnels use on every node.
const GENEVE_PORT: u32 = 6081;
/// The default VXLAN port, which vSphere's own networking holds.
const DEFAULT_VXLAN_PORT: u32 = 4789;

/// Checks the networks; returns the parsed values the plan needs when they are sound.
pub(super) fn check(inputs: &ClusterInputs, decoded: &Decoded, d: &mut Diagnostics) -> Option<Networks> {
    let net = &inputs.spec.network;
    let file = &net.at.loc.file;
    let failed = |key: &str| decoded.failed_within(file, &format!("{}.{key}", net.at.field));

    // Networks left out take the documented defaults, so a hybrid network overlapping them is still caught.
    let default = |cidr: &str, key: &str| {
        vec![Located {
            value: cidr.to_string(),
            loc: net.at.loc.clone(),
            field: format!("{}.{key}, the default", net.at.field).into(),
        }]
    };
    let service_default = default(DEFAULT_SERVICE_NETWORK, "serviceNetwork");
    let cluster_default = default(DEFAULT_CLUSTER_NETWORK, "clusterNetwork");
    let service = parse_all(net.service_network.as_deref().unwrap_or(&service_default), d);
    let cluster = parse_all(net.cluster_network.as_deref().unwrap_or(&cluster_default), d);
    let hybrid = parse_all(net.hybrid_cluster_network.as_deref().unwrap_or_default(), d);

    if net.hybrid_cluster_network.as_ref().is_none_or(|h| h.is_empty()) {
        d.push(
            net.at
                .error("OVN-Kubernetes hybrid networking is not configured: `hybridClusterNetwork` is missing")
                .expected("hybridClusterNetwork: a list of CIDRs, e.g. [10.132.0.0/14]")
                .hint("copy it from spec.defaultNetwork.ovnKubernetesConfig.hybridOverlayConfig of networks.operator.openshift.io/cluster; Windows nodes need hybrid networking, set at install time"),
        );
    }
    for (c, at) in cluster.iter().chain(&hybrid) {
        if is_class_e(c) {
            d.push(
                at.error(format!("`{}` is in class E (240.0.0.0/4), which Windows nodes cannot use", at.value))
                    .expected("a cluster network outside 240.0.0.0/4"),
            );
        }
    }
    // A list that could not be read is not compared with the defaults that would stand in for it.
    let others: Vec<&(IpNet, &Located<String>)> = [("clusterNetwork", &cluster), ("serviceNetwork", &service)]
        .into_iter()
        .filter(|(key, _)| !failed(key))
        .flat_map(|(_, list)| list.iter())
        .collect();
    for (h, hat) in &hybrid {
        for (other, oat) in &others {
            if overlaps(h, other) {
                d.push(
                    hat.error(format!(
                        "hybrid cluster network `{}` overlaps `{}` ({})",
                        hat.value, oat.value, oat.field
                    ))
                    .expected("a hybridClusterNetwork that shares no address with clusterNetwork or serviceNetwork"),
                );
            }
        }
    }

    let row = decoded.get(&inputs.spec.platform).map(|p| support(p.kind()));
    let port = net.hybrid_overlay_vxlan_port.as_ref();
    match (port, row) {
        (None, Some(row)) if row.requires_custom_vxlan_port => d.push(
            net.at
                .error(format!("{} needs a custom hybrid-overlay VXLAN port", row.display))
                .expected("hybridOverlayVXLANPort: the port set in hybridOverlayConfig at install time, e.g. 9898")
                .hint("vSphere's own networking uses the default VXLAN port 4789"),
        ),
        (Some(p), Some(row)) if row.requires_custom_vxlan_port && p.value == DEFAULT_VXLAN_PORT => d.push(
            p.error(format!("{} cannot be the hybrid-overlay VXLAN port on {}", p.value, row.display))
                .expected("a free port in 1..65535 other than 6081 (Geneve) and 4789 (vSphere's own VXLAN port)"),
        ),
        (Some(p), _) if p.value == 0 || p.value > 65535 || p.value == GENEVE_PORT => d.push(
            p.error(format!("{} cannot be the hybrid-overlay VXLAN port", p.value))
                .expected("the cluster's hybridOverlayVXLANPort: a port in 1..65535 other than 6081 (Geneve)"),
        ),
        _ => {}
    }

    // The cluster DNS service is the 10th address of the first service network.
    let Some((first, at)) = service.first() else {
        if net.service_network.as_ref().is_some_and(|l| l.is_empty()) {
            d.push(net.at.error("`serviceNetwork` is an empty list").expected(
                "the cluster's serviceNetwork, e.g. [172.30.0.0/16], or no `serviceNetwork` for the default",
            ));
        }
        return None;
    };
    let Some(cluster_dns) = nth(first, 10) else {
        d.push(
            at.error(format!("service network `{}` is too small to hold the cluster DNS address (its 10th)", at.value))
                .expected("the cluster's serviceNetwork, e.g. 172.30.0.0/16"),
        );
        return None;
    };
    Some(Networks { service: *first, cluster_dns, cluster: cluster.iter().map(|(c, _)| *c).collect() })
}

fn parse_all<'a>(list: &'a [Located<String>], d: &mut Diagnostics) -> Vec<(IpNet, &'a Located<String>)> {
    let mut out = Vec::new();
    for at in list {
        match parse_cidr(at) {
            Ok(c) => out.push((c, at)),
            Err(why) => d.push(
                at.error(format!("`{}` is not a CIDR: {why}", at.value.escape_debug()))
                    .expected("an address and prefix length, e.g. 10.128.0.0/14"),
            ),
        }
    }
    out
}
