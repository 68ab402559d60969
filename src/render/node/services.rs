//! The Windows services, with WMCO's dependencies and command lines (reference wmco-node-artifacts §3.1, §4, §5.1,
//! §6.1), as one reviewable file, `C:\k\wmrender\services.json`, that the node agent converges the Service Control
//! Manager to. The table order is the start order: first the services the node needs to join (containerd, kubelet,
//! hybrid-overlay-node, kube-proxy, on Azure cloud-node-manager), then the optional ones (windows_exporter,
//! csi-proxy), whose problems the agent reports without holding the others back (in WMCO the exporter cannot block
//! kubelet either). Each service also names the bundle files whose change restarts it, the payload binaries it
//! runs, the credentials `sync` delivers for it (those it reads again by itself while it runs apart: a new one needs
//! no restart), the files the cluster must create before it can start, and the step that prepares it. The types are
//! the node contract's.

use super::paths::{self, node};
use super::settings::NETWORK_STEP;
use crate::plan::{Plan, PlatformPlan};
use crate::render::Artifact;
use crate::validate::logs::ROTATING_LOG_RUNNER;
use wmrender_contract::{NodeVariable, Service, ServicesFile};

fn service(name: &str, command: String) -> Service {
    Service {
        name: name.into(),
        description: format!("OpenShift managed {name} (wmrender)"),
        command,
        dependencies: vec![],
        node_variables: vec![],
        files: vec![],
        binaries: vec![],
        secrets: vec![],
        reloads: vec![],
        requires: vec![],
        pre_start: None,
        optional: false,
    }
}

fn nodes(list: &[&str]) -> Vec<wmrender_contract::NodePath> {
    list.iter().map(|p| node(p)).collect()
}

/// `kube-log-runner.exe` writes the service's log file and hands the SCM handshake to the child; from Kubernetes
/// 1.34 on it also rotates it (`-log-file-size`, then removes rotated files older than `-log-file-age`) and flushes
/// it every `-flush-interval`, as WMCO 10.22 runs it when its log rotation is asked for.
fn with_log_runner(plan: &Plan, log: &str, exe: &str, args: &str) -> String {
    let logs = &plan.node.logs;
    let mut runner = format!(r"C:\k\kube-log-runner.exe -log-file={log}");
    if plan.node.kubernetes.minor >= ROTATING_LOG_RUNNER {
        if logs.max_size.bytes() > 0 {
            runner.push_str(&format!(" -log-file-size={}", logs.max_size.canonical()));
            if logs.max_age.seconds() > 0 {
                runner.push_str(&format!(" -log-file-age={}", logs.max_age.go()));
            }
        }
        if logs.flush_interval.seconds() > 0 {
            runner.push_str(&format!(" -flush-interval={}", logs.flush_interval.go()));
        }
    }
    format!("{runner} {exe} {args}")
}

/// A size in whole mebibytes, rounded up: what hybrid-overlay-node (lumberjack) and csi-proxy (klog) count in.
fn mebibytes(bytes: u64) -> u64 {
    bytes.div_ceil(1 << 20)
}

pub fn services(plan: &Plan) -> Vec<Service> {
    let platform = &plan.platform;
    let mut all = Vec::new();

    let mut containerd = service(
        "containerd",
        format!(
            r"{} --config {} --log-file C:\var\log\containerd\containerd.log --run-service --log-level info",
            paths::CONTAINERD_EXE,
            paths::CONTAINERD_CONF
        ),
    );
    containerd.files = nodes(&[paths::CONTAINERD_CONF]);
    containerd.binaries = nodes(&[paths::CONTAINERD_EXE, r"C:\k\containerd\containerd-shim-runhcs-v1.exe"]);
    all.push(containerd);

    let mut args = format!(
        r"--config={} --bootstrap-kubeconfig={} --kubeconfig={} --cert-dir=c:\var\lib\kubelet\pki\ --windows-service --node-labels=node.openshift.io/os_id=Windows --windows-priorityclass=ABOVE_NORMAL_PRIORITY_CLASS --v=2",
        paths::KUBELET_CONF,
        paths::BOOTSTRAP_KUBECONFIG,
        paths::KUBECONFIG
    );
    let mut kubelet_vars = vec![NodeVariable::NodeIp];
    if !matches!(platform, PlatformPlan::None) {
        // IPI clusters of OpenShift 4.x run external cloud controller managers, Windows nodes included.
        args.push_str(" --cloud-provider=external");
    }
    if has_hostname_override(platform) {
        args.push_str(&format!(" --hostname-override={}", NodeVariable::HostnameOverride.placeholder()));
        kubelet_vars.push(NodeVariable::HostnameOverride);
    }
    args.push_str(&format!(" --node-ip={}", NodeVariable::NodeIp.placeholder()));
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
        service("kubelet", with_log_runner(plan, r"C:\var\log\kubelet\kubelet.log", r"C:\k\kubelet.exe", &args));
    kubelet.dependencies = vec!["containerd".into()];
    kubelet.node_variables = kubelet_vars;
    kubelet.files = nodes(&kubelet_files);
    kubelet.binaries = nodes(&kubelet_binaries);
    // kubelet reloads its client CA file (`authentication.x509.clientCAFile`) while it runs, as WMCO relies on when
    // it updates the kubelet CA, and reads the bootstrap kubeconfig only when it has no valid client certificate:
    // a new one of either needs no restart.
    kubelet.reloads = nodes(&[paths::BOOTSTRAP_KUBECONFIG, paths::KUBELET_CA]);
    all.push(kubelet);

    // WMCO starts only containerd and kubelet at first boot; everything below waits for the Node to exist, which
    // on a node shows as kubelet's kubeconfig (written once its client certificate is approved).
    let mut exporter = service(
        "windows_exporter",
        format!(
            r"C:\k\windows_exporter.exe --collectors.enabled cpu,logical_disk,net,os,service,system,container,memory,cpu_info --web.config.file {} --log.level info --log.file C:\var\log\windows_exporter\windows_exporter.log",
            paths::EXPORTER_WEBCONFIG
        ),
    );
    exporter.files = nodes(&[paths::EXPORTER_WEBCONFIG]);
    exporter.binaries = nodes(&[r"C:\k\windows_exporter.exe"]);
    // windows_exporter's web configuration (exporter-toolkit) loads the certificate and key again for new
    // connections: the cluster's service CA renews them without a restart.
    exporter.reloads = nodes(&[paths::EXPORTER_TLS_CERT, paths::EXPORTER_TLS_KEY]);
    exporter.requires = nodes(&[paths::KUBECONFIG]);
    // Monitoring: the node works without it.
    exporter.optional = true;

    // Its own rotation beside its log file (lumberjack, on whenever `--logfile` is given): the size in MiB and the
    // age in days, both rounded up; it keeps its default of 5 rotated files, compressed.
    let logs = &plan.node.logs;
    let mut rotation = String::new();
    if logs.max_size.bytes() > 0 {
        rotation.push_str(&format!(" --logfile-maxsize {}", mebibytes(logs.max_size.bytes())));
        if logs.max_age.seconds() > 0 {
            rotation.push_str(&format!(" --logfile-maxage {}", logs.max_age.days_rounded_up()));
        }
    }
    let mut hybrid = format!(
        r"C:\k\hybrid-overlay-node.exe --node {} --bootstrap-kubeconfig={} --cert-dir=C:\k\cni\config --cert-duration=24h --windows-service --logfile C:\var\log\hybrid-overlay\hybrid-overlay.log{rotation} --k8s-apiserver={} --k8s-cacert {}",
        NodeVariable::NodeName.placeholder(),
        paths::KUBECONFIG,
        plan.node.api_server_url,
        paths::BOOTSTRAP_CA
    );
    if let Some(port) = plan.node.vxlan_port {
        hybrid.push_str(&format!(" --hybrid-overlay-vxlan-port {port}"));
    }
    let mut hybrid = service("hybrid-overlay-node", hybrid);
    hybrid.dependencies = vec!["kubelet".into()];
    hybrid.node_variables = vec![NodeVariable::NodeName];
    hybrid.binaries = nodes(&[r"C:\k\hybrid-overlay-node.exe"]);
    // Read once at start (`--k8s-cacert`): a new bootstrap CA restarts hybrid-overlay-node, and kube-proxy with it
    // (a networking restart, which sync does only on a drained node).
    hybrid.secrets = nodes(&[paths::BOOTSTRAP_CA]);
    hybrid.requires = nodes(&[paths::KUBECONFIG]);
    all.push(hybrid);

    // klog's own limit: past it, the file is started again (klog keeps no rotated copy).
    let mut csi_command =
        r"C:\k\csi-proxy.exe -log_file=C:\var\log\csi-proxy\csi-proxy.log -logtostderr=false".to_string();
    if logs.max_size.bytes() > 0 {
        csi_command.push_str(&format!(" -log_file_max_size={}", mebibytes(logs.max_size.bytes())));
    }
    csi_command.push_str(" -windows-service --v=2");
    let mut csi = service("csi-proxy", csi_command);
    csi.binaries = nodes(&[r"C:\k\csi-proxy.exe"]);
    csi.requires = nodes(&[paths::KUBECONFIG]);
    // A storage helper: only pods with CSI volumes need it.
    csi.optional = true;

    let mut proxy = service(
        "kube-proxy",
        with_log_runner(
            plan,
            r"C:\var\log\kube-proxy\kube-proxy.log",
            r"C:\k\kube-proxy.exe",
            &format!("--config {} --windows-service", paths::KUBE_PROXY_CONF),
        ),
    );
    // kube-proxy must start after hybrid-overlay has created the HNS network its config names; the network step
    // waits for that network and writes kube-proxy.conf, so a change of either restarts kube-proxy.
    proxy.dependencies = vec!["hybrid-overlay-node".into()];
    proxy.files = nodes(&[paths::NETWORK_CONF_PS1, paths::KUBE_PROXY_CONF]);
    proxy.binaries = nodes(&[r"C:\k\kube-proxy.exe", r"C:\k\kube-log-runner.exe", paths::HNS_MODULE]);
    proxy.requires = nodes(&[paths::KUBECONFIG]);
    proxy.pre_start = Some(NETWORK_STEP.into());
    all.push(proxy);

    if matches!(platform, PlatformPlan::Azure(_)) {
        // Without the operator the service has its own identity (render/cloud_node_manager.rs), whose kubeconfig
        // sync pushes; kubelet's identity may not change the node's taints. With WMCO, WMCO's own choice stays.
        let kubeconfig = if crate::render::cloud_node_manager::applies(plan) {
            paths::CLOUD_NODE_MANAGER_KUBECONFIG
        } else {
            paths::KUBECONFIG
        };
        let mut cnm = service(
            "cloud-node-manager",
            format!(
                r"C:\k\azure-cloud-node-manager.exe --windows-service --node-name={} --wait-routes=false --kubeconfig={}",
                NodeVariable::NodeName.placeholder(),
                kubeconfig
            ),
        );
        cnm.node_variables = vec![NodeVariable::NodeName];
        cnm.binaries = nodes(&[r"C:\k\azure-cloud-node-manager.exe"]);
        // It waits for kubelet's kubeconfig too: the node must be registered before it can be initialised.
        cnm.requires = nodes(&[paths::KUBECONFIG, kubeconfig]);
        cnm.requires.dedup();
        all.push(cnm);
    }
    // The optional services last: the table order is the start order.
    all.push(exporter);
    all.push(csi);
    all
}

/// AWS, GCP and vSphere name nodes after the cloud's host name, which the node looks up at start.
pub fn has_hostname_override(platform: &PlatformPlan) -> bool {
    matches!(platform, PlatformPlan::Aws(_) | PlatformPlan::Gcp(_) | PlatformPlan::Vsphere(_))
}

pub fn render(services: Vec<Service>) -> Artifact {
    Artifact { path: paths::bundle(paths::SERVICES_JSON), bytes: ServicesFile { services }.to_json() }
}
