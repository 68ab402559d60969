//! The PowerShell of the bundle (all from templates/) and the small static files WMCO also ships.

use super::{network, paths};
use crate::plan::{Plan, PlatformPlan};
use crate::render::Artifact;
use crate::render::templates;

fn artifact(node_path: &str, text: String) -> Artifact {
    Artifact { path: paths::bundle(node_path), bytes: text.into_bytes() }
}

pub fn install(plan: &Plan) -> Artifact {
    let proxy = &plan.node.proxy;
    let ctx = minijinja::context! {
        platform => plan.platform.name(),
        directories => paths::DIRECTORIES.to_vec(),
        http_proxy => proxy.http.clone().unwrap_or_default(),
        https_proxy => proxy.https.clone().unwrap_or_default(),
        no_proxy => proxy.no_proxy.clone().unwrap_or_default(),
        defender_script => paths::DEFENDER_PS1,
        containerd_exe => r"C:\k\containerd\containerd.exe",
        gcp_hostname_script => paths::GCP_HOSTNAME_PS1,
        aws_route_script => paths::AWS_ROUTE_PS1,
        services_json => paths::SERVICES_JSON,
    };
    artifact(paths::INSTALL_PS1, templates::render("install.ps1.j2", ctx))
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

/// windows_exporter's TLS settings; the certificate and key are delivered by `sync`. Plain YAML scalars: the
/// doubled backslashes are read literally, as WMCO writes them.
const EXPORTER_WEBCONFIG: &str = "tls_server_config:\n  cert_file: C:\\\\k\\\\tls\\\\certs\\\\tls.crt\n  key_file: C:\\\\k\\\\tls\\\\certs\\\\tls.key\n";

/// A script whose template takes no values.
fn fixed(node_path: &str, template: &str) -> Artifact {
    artifact(node_path, templates::render(template, minijinja::context! {}))
}

pub fn static_files(plan: &Plan) -> Vec<Artifact> {
    let mut files = vec![
        fixed(paths::DEFENDER_PS1, "windows-defender-exclusion.ps1.j2"),
        artifact(paths::EXPORTER_WEBCONFIG, EXPORTER_WEBCONFIG.into()),
    ];
    match plan.platform {
        PlatformPlan::Gcp(_) => files.push(fixed(paths::GCP_HOSTNAME_PS1, "gcp-get-hostname.ps1.j2")),
        PlatformPlan::Aws(_) => files.push(fixed(paths::AWS_ROUTE_PS1, "aws-metadata-route.ps1.j2")),
        _ => {}
    }
    files
}
