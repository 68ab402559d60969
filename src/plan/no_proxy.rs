//! NO_PROXY as the cluster computes it: the cluster network operator's rule (cluster-network-operator,
//! `pkg/util/proxyconfig/no_proxy.go`, `MergeUserSystemNoProxy`), which fills the cluster Proxy's
//! `status.noProxy` that WMCO gives the Windows services. Without it kubelet would send api-int through the proxy.
//!
//! The rule, from what wmrender's inputs know:
//! - always `127.0.0.1`, `localhost`, `.svc`, `.cluster.local`;
//! - the host of `apiServerInternalURL` (api-int);
//! - the first service network, and every cluster network;
//! - the machine networks, when given (CNO reads them from the install-config);
//! - `169.254.169.254` (the metadata address) on AWS, GCP, Azure (and OpenStack, which wmrender does not render);
//! - AWS: `.ec2.internal` in us-east-1, `.<region>.compute.internal` elsewhere; GCP: `metadata`,
//!   `metadata.google.internal`, `metadata.google.internal.`;
//! - the spec's own `noProxy` entries;
//!
//! as a set, sorted by bytes (Go's `sets.String.List`) and joined with commas. CNO also adds `etcd-N.<etcd discovery
//! domain>` per control-plane replica; the inputs know neither, and nodes never reach etcd, so they are left out
//! (`import` of a Proxy with a status gives the cluster's exact list).

use crate::plan::PlatformPlan;
use crate::validate::Checked;
use crate::validate::checked::ProxySettings;
use std::collections::BTreeSet;

/// The Proxy status's noProxy for the checked inputs: none without a proxy, as the network operator leaves the
/// status empty when neither httpProxy nor httpsProxy is set. The inputs have no machine network: not added.
pub fn from_checked(checked: &Checked, proxy: &ProxySettings) -> Option<String> {
    if proxy.http.is_none() && proxy.https.is_none() {
        return None;
    }
    let platform = match &checked.platform {
        PlatformPlan::Aws(a) => NoProxyPlatform::Aws { region: &a.region },
        PlatformPlan::Azure(_) => NoProxyPlatform::Azure,
        PlatformPlan::Gcp(_) => NoProxyPlatform::Gcp,
        PlatformPlan::Nutanix(_) | PlatformPlan::Vsphere(_) | PlatformPlan::None => NoProxyPlatform::Other,
    };
    let networks = ClusterNetworks {
        api_server_internal_url: &checked.api_server_url,
        service_networks: &[checked.service_network.to_string()],
        cluster_networks: &checked.cluster_networks.iter().map(ToString::to_string).collect::<Vec<_>>(),
        machine_networks: &[],
    };
    Some(cluster_no_proxy(platform, &networks, &proxy.no_proxy))
}

/// What the platform adds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoProxyPlatform<'a> {
    Aws {
        region: &'a str,
    },
    Azure,
    Gcp,
    /// vSphere, Nutanix, none: nothing platform-specific.
    Other,
}

pub struct ClusterNetworks<'a> {
    pub api_server_internal_url: &'a str,
    /// CNO takes the first only.
    pub service_networks: &'a [String],
    pub cluster_networks: &'a [String],
    pub machine_networks: &'a [String],
}

/// The cluster's NO_PROXY: the fixed entries, the cluster's own addresses, the platform's and the user's.
pub fn cluster_no_proxy(platform: NoProxyPlatform, networks: &ClusterNetworks, user: &[String]) -> String {
    let mut set: BTreeSet<String> =
        ["127.0.0.1", "localhost", ".svc", ".cluster.local"].iter().map(|s| s.to_string()).collect();
    set.extend(networks.machine_networks.iter().cloned());
    if let Some(host) = url_host(networks.api_server_internal_url) {
        set.insert(host);
    }
    set.extend(networks.service_networks.first().cloned());
    match platform {
        NoProxyPlatform::Aws { region } => {
            set.insert("169.254.169.254".into());
            set.insert(if region == "us-east-1" {
                ".ec2.internal".into()
            } else {
                format!(".{region}.compute.internal")
            });
        }
        NoProxyPlatform::Azure => {
            set.insert("169.254.169.254".into());
        }
        NoProxyPlatform::Gcp => {
            set.insert("169.254.169.254".into());
            set.extend(["metadata", "metadata.google.internal", "metadata.google.internal."].map(String::from));
        }
        NoProxyPlatform::Other => {}
    }
    set.extend(networks.cluster_networks.iter().cloned());
    // The spec's noProxy is one comma-separated string in the Proxy object; empty pieces are dropped.
    set.extend(user.iter().flat_map(|u| u.split(',')).filter(|u| !u.is_empty()).map(String::from));
    set.remove("");
    // BTreeSet<String> orders by bytes, as Go sorts strings.
    set.into_iter().collect::<Vec<_>>().join(",")
}

/// The host of a URL as Go's `url.Hostname()` gives it: no scheme, user, port or brackets.
fn url_host(url: &str) -> Option<String> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next()?;
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host =
        if let Some(v6) = host_port.strip_prefix('[') { v6.split(']').next()? } else { host_port.split(':').next()? };
    (!host.is_empty()).then(|| host.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn networks<'a>(service: &'a [String], cluster: &'a [String], machine: &'a [String]) -> ClusterNetworks<'a> {
        ClusterNetworks {
            api_server_internal_url: "https://api-int.demo.example.com:6443",
            service_networks: service,
            cluster_networks: cluster,
            machine_networks: machine,
        }
    }

    #[test]
    fn the_network_operators_rule_per_platform() {
        let (service, cluster) = (strings(&["172.30.0.0/16", "fd02::/112"]), strings(&["10.128.0.0/14", "fd01::/48"]));
        let n = networks(&service, &cluster, &[]);
        let api = "api-int.demo.example.com";
        assert_eq!(
            cluster_no_proxy(NoProxyPlatform::Other, &n, &[]),
            format!(".cluster.local,.svc,10.128.0.0/14,127.0.0.1,172.30.0.0/16,{api},fd01::/48,localhost"),
            "vSphere, Nutanix, none: no metadata address; only the first service network"
        );
        assert_eq!(
            cluster_no_proxy(NoProxyPlatform::Azure, &n, &[]),
            format!(
                ".cluster.local,.svc,10.128.0.0/14,127.0.0.1,169.254.169.254,172.30.0.0/16,{api},fd01::/48,localhost"
            )
        );
        assert_eq!(
            cluster_no_proxy(NoProxyPlatform::Aws { region: "us-east-1" }, &n, &[]),
            format!(
                ".cluster.local,.ec2.internal,.svc,10.128.0.0/14,127.0.0.1,169.254.169.254,172.30.0.0/16,{api},\
                 fd01::/48,localhost"
            )
        );
        assert_eq!(
            cluster_no_proxy(NoProxyPlatform::Aws { region: "eu-west-3" }, &n, &[]),
            format!(
                ".cluster.local,.eu-west-3.compute.internal,.svc,10.128.0.0/14,127.0.0.1,169.254.169.254,\
                 172.30.0.0/16,{api},fd01::/48,localhost"
            )
        );
        assert_eq!(
            cluster_no_proxy(NoProxyPlatform::Gcp, &n, &[]),
            format!(
                ".cluster.local,.svc,10.128.0.0/14,127.0.0.1,169.254.169.254,172.30.0.0/16,{api},fd01::/48,\
                 localhost,metadata,metadata.google.internal,metadata.google.internal."
            )
        );
    }

    #[test]
    fn user_entries_and_machine_networks_join_the_set_once_in_byte_order() {
        let (service, cluster, machine) =
            (strings(&["172.30.0.0/16"]), strings(&["10.128.0.0/14"]), strings(&["10.0.0.0/16"]));
        let n = networks(&service, &cluster, &machine);
        let user = strings(&["Zeta.example.com", ".corp,,localhost", "10.0.0.0/16"]);
        assert_eq!(
            cluster_no_proxy(NoProxyPlatform::Other, &n, &user),
            ".cluster.local,.corp,.svc,10.0.0.0/16,10.128.0.0/14,127.0.0.1,172.30.0.0/16,Zeta.example.com,\
             api-int.demo.example.com,localhost"
        );
    }

    #[test]
    fn the_api_host_as_go_parses_it() {
        assert_eq!(url_host("https://api-int.a.b:6443").as_deref(), Some("api-int.a.b"));
        assert_eq!(url_host("https://[fd00::5]:6443/").as_deref(), Some("fd00::5"));
        assert_eq!(url_host("https://user@10.0.0.4").as_deref(), Some("10.0.0.4"));
        assert_eq!(url_host("https://:6443"), None);
    }
}
