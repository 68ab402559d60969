//! The PowerShell of the bundle (from templates/) and the small static files WMCO also ships.

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

const DEFENDER_EXCLUSION: &str = r#"# Rendered by wmrender: keeps Windows Defender from scanning a binary's processes, if Defender runs.
param(
    [Parameter(Mandatory = $true)]
    [string]$BinPath
)
$ErrorActionPreference = 'Stop'
if (Get-Process -Name 'MsMpEng' -ErrorAction SilentlyContinue) {
    $excluded = @((Get-MpPreference).ExclusionProcess)
    if ($excluded -notcontains $BinPath) {
        Add-MpPreference -ExclusionProcess $BinPath
    }
}
"#;

const GCP_HOSTNAME: &str = r#"# Rendered by wmrender: the GCP instance's host name, as the node name kubelet registers (at most 63 characters).
$ErrorActionPreference = 'Stop'
$name = [string](Invoke-RestMethod -UseBasicParsing -Headers @{ 'Metadata-Flavor' = 'Google' } `
    -Uri 'http://metadata.google.internal/computeMetadata/v1/instance/hostname')
if ($name.Length -gt 63) {
    $name = $name.Split('.')[0]
}
return $name
"#;

const AWS_METADATA_ROUTE: &str = r#"# Rendered by wmrender: restores the route to the EC2 instance metadata service, which a reboot of a node with
# container networking can lose (AWS's documented fix for Windows nodes).
$ErrorActionPreference = 'Stop'
if (-not (Get-NetRoute -DestinationPrefix '169.254.169.254/32' -ErrorAction SilentlyContinue)) {
    $route = Get-NetRoute -DestinationPrefix '0.0.0.0/0' | Sort-Object -Property RouteMetric | Select-Object -First 1
    New-NetRoute -DestinationPrefix '169.254.169.254/32' -InterfaceIndex $route.ifIndex -NextHop $route.NextHop | Out-Null
}
"#;

/// windows_exporter's TLS settings; the certificate and key are delivered by `sync`. Plain YAML scalars: the
/// doubled backslashes are read literally, as WMCO writes them.
const EXPORTER_WEBCONFIG: &str = "tls_server_config:\n  cert_file: C:\\\\k\\\\tls\\\\certs\\\\tls.crt\n  key_file: C:\\\\k\\\\tls\\\\certs\\\\tls.key\n";

pub fn static_files(plan: &Plan) -> Vec<Artifact> {
    let mut files = vec![
        artifact(paths::DEFENDER_PS1, DEFENDER_EXCLUSION.into()),
        artifact(paths::EXPORTER_WEBCONFIG, EXPORTER_WEBCONFIG.into()),
    ];
    match plan.platform {
        PlatformPlan::Gcp(_) => files.push(artifact(paths::GCP_HOSTNAME_PS1, GCP_HOSTNAME.into())),
        PlatformPlan::Aws(_) => files.push(artifact(paths::AWS_ROUTE_PS1, AWS_METADATA_ROUTE.into())),
        _ => {}
    }
    files
}
