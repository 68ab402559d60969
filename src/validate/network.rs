//! Networks: OVN-Kubernetes hybrid networking must be configured, CIDRs must parse and not collide, no class E,
//! and the hybrid-overlay VXLAN port is set exactly when the platform needs a custom one (vSphere).

use super::matrix::support;
use crate::diagnostics::Diagnostics;
use crate::inputs::schema::ClusterInputs;
use crate::inputs::yaml::Located;
use crate::net::Cidr;
use crate::plan::{DEFAULT_CLUSTER_NETWORK, DEFAULT_SERVICE_NETWORK};

pub fn check(inputs: &ClusterInputs, d: &mut Diagnostics) {
    let net = &inputs.spec.network;
    let row = support(inputs.spec.platform.name());

    // Networks left out take the documented defaults, so a hybrid network overlapping them is still caught.
    let default = |cidr: &str, key: &str| {
        vec![Located {
            value: cidr.to_string(),
            loc: net.at.loc.clone(),
            field: format!("{}.{key}, the default", net.at.field),
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
        if c.is_class_e() {
            d.push(
                at.error(format!("`{}` is in class E (240.0.0.0/4), which Windows nodes cannot use", at.value))
                    .expected("a cluster network outside 240.0.0.0/4"),
            );
        }
    }
    for (h, hat) in &hybrid {
        for (other, oat) in cluster.iter().chain(&service) {
            if h.overlaps(other) {
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

    match (&net.hybrid_overlay_vxlan_port, row.custom_vxlan_port) {
        (None, true) => d.push(
            net.at
                .error(format!("{} needs a custom hybrid-overlay VXLAN port", row.display))
                .expected("hybridOverlayVXLANPort: the port set in hybridOverlayConfig at install time, e.g. 9898")
                .hint("vSphere's own networking uses the default VXLAN port 4789"),
        ),
        (Some(p), false) => d.push(
            p.error(format!("hybridOverlayVXLANPort must not be set on {}", row.display))
                .expected("no hybridOverlayVXLANPort: the custom port is for vSphere only"),
        ),
        (Some(p), true) if p.value == 0 || p.value > 65535 || p.value == 6081 || p.value == 4789 => d.push(
            p.error(format!("{} cannot be the hybrid-overlay VXLAN port", p.value))
                .expected("a free port in 1..65535 other than 6081 (Geneve) and 4789 (the default VXLAN port)"),
        ),
        _ => {}
    }
}

fn parse_all<'a>(list: &'a [Located<String>], d: &mut Diagnostics) -> Vec<(Cidr, &'a Located<String>)> {
    let mut out = Vec::new();
    for at in list {
        match Cidr::parse(at) {
            Ok(c) => out.push((c, at)),
            Err(why) => d.push(
                at.error(format!("`{}` is not a CIDR: {why}", at.value.escape_debug()))
                    .expected("an address and prefix length, e.g. 10.128.0.0/14"),
            ),
        }
    }
    out
}
