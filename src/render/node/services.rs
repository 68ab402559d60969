//! The Windows services, in WMCO's order and with its dependencies and command lines (reference
//! wmco-node-artifacts §3.1, §4, §5.1, §6.1), as one reviewable file, `C:\k\wmrender\services.json`, that
//! install.ps1 applies. Each service also names the bundle files whose change restarts it, the payload binaries
//! it needs and the credentials `sync` delivers for it.

use super::paths;
use crate::plan::{Plan, PlatformPlan};
use crate::render::Artifact;
use serde::Serialize;

/// Node values the install script computes and substitutes into commands (plain text replacement, as WMCO does).
pub const NODE_IP: &str = "NODE_IP";
pub const NODE_NAME: &str = "NODE_NAME";
pub const HOSTNAME_OVERRIDE: &str = "HOSTNAME_OVERRIDE";

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Service {
    pub name: &'static str,
    pub description: String,
    pub command: String,
    pub dependencies: Vec<&'static str>,
    pub node_variables: Vec<&'static str>,
    /// Node paths of bundle files; a change to any of them restarts the service.
    pub files: Vec<&'static str>,
    /// Node paths of the payload files the service runs.
    pub binaries: Vec<&'static str>,
    /// Node paths of the credentials and CAs `sync` delivers.
    pub secrets: Vec<&'static str>,
    /// A script the install script runs before starting the service.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pre_start: Option<&'static str>,
}

#[derive(Serialize)]
struct ServicesFile<'a> {
    services: &'a [Service],
}

fn service(name: &'static str, command: String) -> Service {
    Service {
        name,
        description: format!("OpenShift managed {name} (wmrender)"),
        command,
        dependencies: vec![],
        node_variables: vec![],
        files: vec![],
        binaries: vec![],
        secrets: vec![],
        pre_start: None,
    }
}

/// `kube-log-runner.exe` writes the service's log file and hands the SCM handshake to the child.
fn with_log_runner(log: &str, exe: &str, args: &str) -> String {
    format!(r"C:\k\kube-log-runner.exe -log-file={log} {exe} {args}")
}

pub fn services(plan: &Plan) -> Vec<Service> {
    let platform = &plan.platform;
    let mut all = Vec::new();

    let mut containerd = service(
        "containerd",
        format!(
            r"C:\k\containerd\containerd.exe --config {} --log-file C:\var\log\containerd\containerd.log --run-service --log-level info",
            paths::CONTAINERD_CONF
        ),
    );
    containerd.files = vec![paths::CONTAINERD_CONF];
    containerd.binaries = vec![r"C:\k\containerd\containerd.exe", r"C:\k\containerd\containerd-shim-runhcs-v1.exe"];
    all.push(containerd);

    let mut args = format!(
        r"--config={} --bootstrap-kubeconfig={} --kubeconfig={} --cert-dir=c:\var\lib\kubelet\pki\ --windows-service --node-labels=node.openshift.io/os_id=Windows --windows-priorityclass=ABOVE_NORMAL_PRIORITY_CLASS --v=2",
        paths::KUBELET_CONF,
        paths::BOOTSTRAP_KUBECONFIG,
        paths::KUBECONFIG
    );
    let mut kubelet_vars = vec![NODE_IP];
    if !matches!(platform, PlatformPlan::None) {
        // IPI clusters of OpenShift 4.x run external cloud controller managers, Windows nodes included.
        args.push_str(" --cloud-provider=external");
    }
    if has_hostname_override(platform) {
        args.push_str(&format!(" --hostname-override={HOSTNAME_OVERRIDE}"));
        kubelet_vars.push(HOSTNAME_OVERRIDE);
    }
    args.push_str(&format!(" --node-ip={NODE_IP}"));
    let mut kubelet_files = vec![paths::KUBELET_CONF];
    let mut kubelet_binaries = vec![r"C:\k\kubelet.exe", r"C:\k\kube-log-runner.exe"];
    if matches!(platform, PlatformPlan::Aws(_)) {
        args.push_str(&format!(
            r" --image-credential-provider-bin-dir=C:\k --image-credential-provider-config={}",
            paths::CREDENTIAL_PROVIDER_CONF
        ));
        kubelet_files.push(paths::CREDENTIAL_PROVIDER_CONF);
        kubelet_binaries.push(r"C:\k\ecr-credential-provider.exe");
    }
    let mut kubelet =
        service("kubelet", with_log_runner(r"C:\var\log\kubelet\kubelet.log", r"C:\k\kubelet.exe", &args));
    kubelet.dependencies = vec!["containerd"];
    kubelet.node_variables = kubelet_vars;
    kubelet.files = kubelet_files;
    kubelet.binaries = kubelet_binaries;
    kubelet.secrets = vec![paths::BOOTSTRAP_KUBECONFIG, paths::KUBELET_CA];
    all.push(kubelet);

    let mut exporter = service(
        "windows_exporter",
        format!(
            r"C:\k\windows_exporter.exe --collectors.enabled cpu,logical_disk,net,os,service,system,container,memory,cpu_info --web.config.file {} --log.level info --log.file C:\var\log\windows_exporter\windows_exporter.log",
            paths::EXPORTER_WEBCONFIG
        ),
    );
    exporter.files = vec![paths::EXPORTER_WEBCONFIG];
    exporter.binaries = vec![r"C:\k\windows_exporter.exe"];
    exporter.secrets = vec![paths::EXPORTER_TLS_CERT, paths::EXPORTER_TLS_KEY];
    all.push(exporter);

    let mut hybrid = format!(
        r"C:\k\hybrid-overlay-node.exe --node {NODE_NAME} --bootstrap-kubeconfig={} --cert-dir=C:\k\cni\config --cert-duration=24h --windows-service --logfile C:\var\log\hybrid-overlay\hybrid-overlay.log --k8s-apiserver={} --k8s-cacert {}",
        paths::KUBECONFIG,
        plan.node.api_server_url,
        paths::BOOTSTRAP_CA
    );
    if let Some(port) = plan.node.vxlan_port {
        hybrid.push_str(&format!(" --hybrid-overlay-vxlan-port {port}"));
    }
    let mut hybrid = service("hybrid-overlay-node", hybrid);
    hybrid.dependencies = vec!["kubelet"];
    hybrid.node_variables = vec![NODE_NAME];
    hybrid.binaries = vec![r"C:\k\hybrid-overlay-node.exe"];
    hybrid.secrets = vec![paths::BOOTSTRAP_CA];
    all.push(hybrid);

    let mut csi = service(
        "csi-proxy",
        r"C:\k\csi-proxy.exe -log_file=C:\var\log\csi-proxy\csi-proxy.log -logtostderr=false -windows-service --v=2"
            .into(),
    );
    csi.binaries = vec![r"C:\k\csi-proxy.exe"];
    all.push(csi);

    let mut proxy = service(
        "kube-proxy",
        with_log_runner(
            r"C:\var\log\kube-proxy\kube-proxy.log",
            r"C:\k\kube-proxy.exe",
            &format!("--config {} --windows-service", paths::KUBE_PROXY_CONF),
        ),
    );
    // kube-proxy must start after hybrid-overlay has created the HNS network its config names.
    proxy.dependencies = vec!["hybrid-overlay-node"];
    proxy.files = vec![paths::NETWORK_CONF_PS1];
    proxy.binaries = vec![r"C:\k\kube-proxy.exe", r"C:\k\kube-log-runner.exe", paths::HNS_MODULE];
    proxy.pre_start = Some(paths::NETWORK_CONF_PS1);
    all.push(proxy);

    if matches!(platform, PlatformPlan::Azure(_)) {
        let mut cnm = service(
            "cloud-node-manager",
            format!(
                r"C:\k\azure-cloud-node-manager.exe --windows-service --node-name={NODE_NAME} --wait-routes=false --kubeconfig={}",
                paths::KUBECONFIG
            ),
        );
        cnm.node_variables = vec![NODE_NAME];
        cnm.binaries = vec![r"C:\k\azure-cloud-node-manager.exe"];
        all.push(cnm);
    }
    all
}

/// AWS, GCP and vSphere name nodes after the cloud's host name, which the node looks up at start.
pub fn has_hostname_override(platform: &PlatformPlan) -> bool {
    matches!(platform, PlatformPlan::Aws(_) | PlatformPlan::Gcp(_) | PlatformPlan::Vsphere(_))
}

pub fn render(services: &[Service]) -> Artifact {
    let json = serde_json::to_string_pretty(&ServicesFile { services }).unwrap_or_default() + "\n";
    Artifact { path: paths::bundle(paths::SERVICES_JSON), bytes: json.into_bytes() }
}
