//! A node bundle for the Wine tests and the way `wmrender sync` leaves it on a node: bundle files in place, service
//! binaries beside their targets as `<path>.wmrender-staged` for the agent to swap in, and
//! `C:\k\wmrender\manifest.json` listing everything with its sha256.
//!
//! [`example_bundle`] is the one place that says where the bundle comes from. Until the renderer writes the node
//! contract (services.json and node.json as `wmrender_contract` defines them), it is [`Bundle::hand_made`]: the
//! services, commands and steps of a rendered AWS node, written here by hand to the contract; then it becomes
//! `Bundle::rendered(&support::root().join("examples/aws/wmrender.yaml"))`.

use super::wine::Wine;
use std::collections::BTreeMap;
use std::path::Path;
use wmrender_contract::{
    FileKind, NodeFile, NodeManifest, NodeNameSource, NodePath, NodeSettings, NodeVariable, STAGED_SUFFIX, Service,
    ServicesFile, Step, When, paths, sha256_hex,
};

/// The bundle the agent tests apply.
pub fn example_bundle() -> Bundle {
    Bundle::hand_made()
}

/// The rendered files of a node, by node path.
#[derive(Clone, Debug)]
pub struct Bundle {
    pub files: BTreeMap<NodePath, Vec<u8>>,
}

fn p(text: &str) -> NodePath {
    NodePath::known(text)
}

fn service(name: &str, command: &str) -> Service {
    Service {
        name: name.into(),
        description: format!("OpenShift managed {name} (wmrender)"),
        command: command.into(),
        dependencies: vec![],
        node_variables: vec![],
        files: vec![],
        binaries: vec![],
        secrets: vec![],
        requires: vec![],
        pre_start: None,
    }
}

fn step(name: &str, script: &str, when: When) -> Step {
    Step { name: name.into(), script: p(script), args: vec![], when }
}

impl Bundle {
    /// The node half of a render of examples/aws, by the node contract: six services in WMCO's order and
    /// dependencies, AWS's host name from the instance metadata (a step) given to kubelet as
    /// `--hostname-override`, the PowerShell-only steps as scripts.
    pub fn hand_made() -> Bundle {
        let mut containerd = service(
            "containerd",
            r"C:\k\containerd\containerd.exe --config C:\k\containerd\containerd_conf.toml --log-file C:\var\log\containerd\containerd.log --run-service --log-level info",
        );
        containerd.files = vec![p(r"C:\k\containerd\containerd_conf.toml")];
        containerd.binaries =
            vec![p(r"C:\k\containerd\containerd.exe"), p(r"C:\k\containerd\containerd-shim-runhcs-v1.exe")];

        let mut kubelet = service(
            "kubelet",
            r"C:\k\kube-log-runner.exe -log-file=C:\var\log\kubelet\kubelet.log C:\k\kubelet.exe --config=C:\k\kubelet.conf --bootstrap-kubeconfig=C:\k\bootstrap-kubeconfig --kubeconfig=C:\k\kubeconfig --cert-dir=c:\var\lib\kubelet\pki\ --windows-service --node-labels=node.openshift.io/os_id=Windows --windows-priorityclass=ABOVE_NORMAL_PRIORITY_CLASS --v=2 --cloud-provider=external --hostname-override=HOSTNAME_OVERRIDE --node-ip=NODE_IP --image-credential-provider-bin-dir=C:\k --image-credential-provider-config=C:\k\credential-provider-config.yaml",
        );
        kubelet.dependencies = vec!["containerd".into()];
        kubelet.node_variables = vec![NodeVariable::NodeIp, NodeVariable::HostnameOverride];
        kubelet.files = vec![p(r"C:\k\kubelet.conf"), p(r"C:\k\credential-provider-config.yaml")];
        kubelet.binaries =
            vec![p(r"C:\k\kubelet.exe"), p(r"C:\k\kube-log-runner.exe"), p(r"C:\k\ecr-credential-provider.exe")];
        kubelet.secrets = vec![p(r"C:\k\bootstrap-kubeconfig"), p(r"C:\k\kubelet-ca.crt")];

        let mut exporter = service(
            "windows_exporter",
            r"C:\k\windows_exporter.exe --collectors.enabled cpu,logical_disk,net,os,service,system,container,memory,cpu_info --web.config.file C:\k\windows-exporter-webconfig.yaml --log.level info --log.file C:\var\log\windows_exporter\windows_exporter.log",
        );
        exporter.files = vec![p(r"C:\k\windows-exporter-webconfig.yaml")];
        exporter.binaries = vec![p(r"C:\k\windows_exporter.exe")];
        exporter.secrets = vec![p(r"C:\k\tls\certs\tls.crt"), p(r"C:\k\tls\certs\tls.key")];

        let mut hybrid = service(
            "hybrid-overlay-node",
            r"C:\k\hybrid-overlay-node.exe --node NODE_NAME --bootstrap-kubeconfig=C:\k\kubeconfig --cert-dir=C:\k\cni\config --cert-duration=24h --windows-service --logfile C:\var\log\hybrid-overlay\hybrid-overlay.log --k8s-apiserver=https://api-int.wine.example.com:6443 --k8s-cacert C:\k\bootstrap-ca.crt",
        );
        hybrid.dependencies = vec!["kubelet".into()];
        hybrid.node_variables = vec![NodeVariable::NodeName];
        hybrid.binaries = vec![p(r"C:\k\hybrid-overlay-node.exe")];
        hybrid.secrets = vec![p(r"C:\k\bootstrap-ca.crt")];
        hybrid.requires = vec![p(r"C:\k\kubeconfig")];

        let mut csi = service(
            "csi-proxy",
            r"C:\k\csi-proxy.exe -log_file=C:\var\log\csi-proxy\csi-proxy.log -logtostderr=false -windows-service --v=2",
        );
        csi.binaries = vec![p(r"C:\k\csi-proxy.exe")];

        let mut proxy = service(
            "kube-proxy",
            r"C:\k\kube-log-runner.exe -log-file=C:\var\log\kube-proxy\kube-proxy.log C:\k\kube-proxy.exe --config C:\k\kube-proxy.conf --windows-service",
        );
        proxy.dependencies = vec!["hybrid-overlay-node".into()];
        proxy.files = vec![p(r"C:\k\wmrender\network-conf.ps1")];
        proxy.binaries = vec![p(r"C:\k\kube-proxy.exe"), p(r"C:\k\kube-log-runner.exe"), p(r"C:\k\hns.psm1")];
        proxy.requires = vec![p(r"C:\k\kubeconfig")];
        proxy.pre_start = Some("network".into());

        let services = ServicesFile { services: vec![containerd, kubelet, exporter, hybrid, csi, proxy] };
        services.check().expect("the hand-made services table follows the contract");

        let settings = NodeSettings {
            platform: "aws".into(),
            node_name: NodeNameSource::Step { step: "node-name".into() },
            directories: [
                r"C:\var\log\containerd",
                r"C:\var\log\kubelet",
                r"C:\var\log\kube-proxy",
                r"C:\var\log\hybrid-overlay",
                r"C:\var\log\csi-proxy",
                r"C:\var\log\windows_exporter",
                r"C:\var\lib\kubelet\pki",
                r"C:\k\cni\config",
            ]
            .iter()
            .map(|d| p(d))
            .collect(),
            environment: ["HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"]
                .iter()
                .map(|v| (v.to_string(), String::new()))
                .collect(),
            steps: vec![
                step("containers-feature", r"C:\k\wmrender\containers-feature.ps1", When::Once),
                step("defender-exclusion", r"C:\k\wmrender\defender-exclusion.ps1", When::Once),
                step("aws-routes", r"C:\k\wmrender\aws-routes.ps1", When::EveryBoot),
                step("node-name", r"C:\k\wmrender\aws-node-name.ps1", When::OnDemand),
                Step {
                    name: "network".into(),
                    script: p(r"C:\k\wmrender\network-conf.ps1"),
                    args: vec!["-NodeName".into(), "NODE_NAME".into()],
                    when: When::OnDemand,
                },
            ],
        };
        NodeSettings::parse(&settings.to_json()).expect("the hand-made node settings follow the contract");

        let mut files = BTreeMap::new();
        let text = |s: &str| s.as_bytes().to_vec();
        files.insert(p(paths::SERVICES_JSON), services.to_json());
        files.insert(p(paths::SETTINGS_JSON), settings.to_json());
        files.insert(
            p(r"C:\k\containerd\containerd_conf.toml"),
            text("version = 2\nroot = 'C:\\ProgramData\\containerd\\root'\n"),
        );
        files.insert(
            p(r"C:\k\kubelet.conf"),
            text("{\"kind\":\"KubeletConfiguration\",\"apiVersion\":\"kubelet.config.k8s.io/v1beta1\"}\n"),
        );
        files.insert(p(r"C:\k\credential-provider-config.yaml"), text("kind: CredentialProviderConfig\n"));
        files.insert(p(r"C:\k\windows-exporter-webconfig.yaml"), text("tls_server_config: {}\n"));
        for s in &settings.steps {
            files.insert(
                s.script.clone(),
                format!("# {} (rendered PowerShell; the Wine rig's fake does not run it)\n", s.name).into_bytes(),
            );
        }
        Bundle { files }
    }

    /// The node files of a real render of `inputs` (`wmrender render --only node`).
    pub fn rendered(inputs: &Path) -> Bundle {
        let (_tmp, out) = super::render_to_temp(inputs);
        let mut files = BTreeMap::new();
        for (rel, bytes) in super::read_tree(&out) {
            if let Some(path) = NodePath::from_bundle_path(&rel) {
                files.insert(path, bytes);
            }
        }
        let b = Bundle { files };
        b.services();
        b.settings();
        b
    }

    pub fn services(&self) -> ServicesFile {
        ServicesFile::parse(&self.files[&p(paths::SERVICES_JSON)]).expect("services.json follows the contract")
    }

    pub fn settings(&self) -> NodeSettings {
        NodeSettings::parse(&self.files[&p(paths::SETTINGS_JSON)]).expect("node.json follows the contract")
    }

    pub fn set_services(&mut self, services: &ServicesFile) {
        self.files.insert(p(paths::SERVICES_JSON), services.to_json());
    }

    pub fn set_settings(&mut self, settings: &NodeSettings) {
        self.files.insert(p(paths::SETTINGS_JSON), settings.to_json());
    }

    /// Every service binary and payload file the services name, and every credential: what `--payload` and the
    /// credential flags of sync deliver. Executables are the fake service (so the command lines run it).
    pub fn payload(&self, fake_service: &[u8]) -> BTreeMap<NodePath, (FileKind, Vec<u8>)> {
        let mut out = BTreeMap::new();
        for s in &self.services().services {
            for b in &s.binaries {
                let bytes = if b.as_str().to_ascii_lowercase().ends_with(".exe") {
                    fake_service.to_vec()
                } else {
                    format!("# payload file {b} (not run under Wine)\n").into_bytes()
                };
                out.insert(b.clone(), (FileKind::Payload, bytes));
            }
            for secret in &s.secrets {
                out.insert(secret.clone(), (FileKind::Credential, format!("credential for {secret}\n").into_bytes()));
            }
        }
        out
    }
}

/// What a node holds after a sync: the bundle, the payload, the agent.
pub struct Delivery {
    pub bundle: Bundle,
    pub payload: BTreeMap<NodePath, (FileKind, Vec<u8>)>,
    pub agent: Vec<u8>,
}

impl Delivery {
    /// The example bundle with fake services as its binaries and the built agent.
    pub fn example(wine: &Wine) -> Delivery {
        Delivery::of(wine, example_bundle())
    }

    pub fn of(wine: &Wine, bundle: Bundle) -> Delivery {
        let fake = std::fs::read(wine.exes.join("fake-service.exe")).expect("fake-service.exe");
        let agent = std::fs::read(wine.exes.join("wmrender-node.exe")).expect("wmrender-node.exe");
        let payload = bundle.payload(&fake);
        Delivery { bundle, payload, agent }
    }

    /// Puts everything on the Wine machine the way sync does: files written whole (temporary file, then rename);
    /// a service binary whose content differs from what is there goes beside it as `<path>.wmrender-staged` and is
    /// marked `staged` in the node manifest, which is written last.
    pub fn stage(&self, wine: &Wine) {
        let binaries: Vec<NodePath> = self.bundle.services().binaries().into_iter().cloned().collect();
        let mut entries = Vec::new();
        let mut all: Vec<(NodePath, FileKind, &[u8])> =
            self.bundle.files.iter().map(|(p, b)| (p.clone(), FileKind::Bundle, b.as_slice())).collect();
        all.extend(self.payload.iter().map(|(p, (k, b))| (p.clone(), *k, b.as_slice())));
        all.push((p(paths::AGENT_EXE), FileKind::Payload, &self.agent));
        for (path, kind, bytes) in all {
            let local = wine.node(&path);
            let staged = binaries.contains(&path) && std::fs::read(&local).ok().as_deref() != Some(bytes);
            let target = if staged { wine.node(&path.with_suffix(STAGED_SUFFIX).expect("staged name")) } else { local };
            write_whole(&target, bytes);
            entries.push(NodeFile { path, sha256: sha256_hex(bytes), size: bytes.len() as u64, kind, staged });
        }
        let manifest = NodeManifest { wmrender: "wine-rig".into(), files: entries, pending: None, applied: false };
        write_whole(&wine.node(&p(paths::NODE_MANIFEST)), &manifest.to_json());
    }
}

/// Writes a file through a temporary sibling and a rename: a running program mapping the old file keeps it.
pub fn write_whole(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("creating folders");
    let tmp = path.with_extension("wine-rig-tmp");
    std::fs::write(&tmp, bytes).unwrap_or_else(|e| panic!("writing {}: {e}", tmp.display()));
    std::fs::rename(&tmp, path).unwrap_or_else(|e| panic!("renaming to {}: {e}", path.display()));
}
