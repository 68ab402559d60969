//! The PowerShell steps of the bundle (all from templates/), each printing one JSON result line the agent reads,
//! and the small static files WMCO also ships.

use super::{network, paths};
use crate::plan::{Plan, PlatformPlan};
use crate::render::Artifact;
use crate::render::templates;

fn artifact(node_path: &str, text: String) -> Artifact {
    Artifact { path: paths::bundle(node_path), bytes: text.into_bytes() }
}

pub fn network_conf(plan: &Plan) -> Artifact {
    let ctx = minijinja::context! {
        hns_network => network::HNS_NETWORK,
        hns_module => paths::HNS_MODULE,
        cni_template => network::cni_template(plan),
        kube_proxy_template => network::kube_proxy_template(plan),
        cni_conf => paths::CNI_CONF,
        kube_proxy_conf => paths::KUBE_PROXY_CONF,
        node_name_placeholder => network::NODE_NAME,
        node_subnet_placeholder => network::NODE_SUBNET,
        source_vip_placeholder => network::SOURCE_VIP,
        provider_address_placeholder => network::PROVIDER_ADDRESS,
    };
    artifact(paths::NETWORK_CONF_PS1, templates::render("network-conf.ps1.j2", ctx))
}

struct FirewallRule {
    name: &'static str,
    port: u16,
}

/// kubelet (logs, exec) and windows_exporter (metrics), as WMCO's user data opens them.
const FIREWALL_RULES: &[FirewallRule] =
    &[FirewallRule { name: "ContainerLogsPort", port: 10250 }, FirewallRule { name: "WindowsExporter", port: 9182 }];

fn firewall_rules() -> Vec<minijinja::Value> {
    FIREWALL_RULES.iter().map(|r| minijinja::context! { name => r.name, port => r.port }).collect()
}

/// The EC2 link-local services the launch agent routes: instance metadata, KMS (activation), time.
const AWS_LINK_LOCAL: &[&str] =
    &["169.254.169.254/32", "169.254.169.250/32", "169.254.169.251/32", "169.254.169.123/32"];

/// windows_exporter's TLS settings; the certificate and key are delivered by `sync`. Plain YAML scalars: the
/// doubled backslashes are read literally, as WMCO writes them.
const EXPORTER_WEBCONFIG: &str = "tls_server_config:\n  cert_file: C:\\\\k\\\\tls\\\\certs\\\\tls.crt\n  key_file: C:\\\\k\\\\tls\\\\certs\\\\tls.key\n";

/// A script whose template takes no values.
fn fixed(node_path: &str, template: &str) -> Artifact {
    artifact(node_path, templates::render(template, minijinja::context! {}))
}

pub fn static_files(plan: &Plan) -> Vec<Artifact> {
    let mut files = vec![
        fixed(paths::CONTAINERS_FEATURE_PS1, "containers-feature.ps1.j2"),
        fixed(paths::DEFENDER_PS1, "windows-defender-exclusion.ps1.j2"),
        artifact(
            paths::FIREWALL_PS1,
            templates::render("firewall.ps1.j2", minijinja::context! { rules => firewall_rules() }),
        ),
        artifact(paths::EXPORTER_WEBCONFIG, EXPORTER_WEBCONFIG.into()),
        artifact(
            paths::REMOVE_HNS_NETWORKS_PS1,
            templates::render(
                "remove-hns-networks.ps1.j2",
                minijinja::context! {
                    hns_module => paths::HNS_MODULE,
                    networks => vec![network::HNS_NETWORK, network::HNS_BASE_NETWORK],
                },
            ),
        ),
    ];
    match plan.platform {
        PlatformPlan::Gcp(_) => files.push(fixed(paths::GCP_HOSTNAME_PS1, "gcp-get-hostname.ps1.j2")),
        PlatformPlan::Aws(_) => {
            files.push(fixed(paths::AWS_HOSTNAME_PS1, "aws-get-hostname.ps1.j2"));
            files.push(artifact(
                paths::AWS_ROUTES_PS1,
                templates::render("aws-routes.ps1.j2", minijinja::context! { prefixes => AWS_LINK_LOCAL.to_vec() }),
            ));
        }
        _ => {}
    }
    if super::settings::renames_hosts(plan) {
        files.push(fixed(paths::RENAME_HOST_PS1, "rename-host.ps1.j2"));
    }
    files
}
