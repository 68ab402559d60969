//! A node bundle for the Wine tests and the way `wmrender sync` leaves it on a node: bundle files in place, service
//! binaries beside their targets as `<path>.wmrender-staged` for the agent to swap in, and
//! `C:\k\wmrender\manifest.json` listing everything with its sha256.
//!
//! [`example_bundle`] is the one place that says where the bundle comes from: the real render of examples/aws, so
//! the tests prove what `wmrender render` writes.

use super::wine::Wine;
use std::collections::BTreeMap;
use std::path::Path;
use wmrender_contract::{
    FileKind, NodeFile, NodeManifest, NodePath, NodeSettings, STAGED_SUFFIX, ServicesFile, paths, sha256_hex,
};

/// The bundle the agent tests apply.
pub fn example_bundle() -> Bundle {
    Bundle::rendered(&super::root().join("examples/aws/wmrender.yaml"))
}

/// The rendered files of a node, by node path.
#[derive(Clone, Debug)]
pub struct Bundle {
    pub files: BTreeMap<NodePath, Vec<u8>>,
}

fn p(text: &str) -> NodePath {
    NodePath::known(text)
}

impl Bundle {
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

    /// services.json read without the contract's checks: a test may stage a table the agent must refuse.
    pub fn services_unchecked(&self) -> ServicesFile {
        serde_json::from_slice(&self.files[&p(paths::SERVICES_JSON)]).expect("services.json is a services table")
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
        for s in &self.services_unchecked().services {
            for b in &s.binaries {
                let bytes = if b.as_str().to_ascii_lowercase().ends_with(".exe") {
                    fake_service.to_vec()
                } else {
                    format!("# payload file {b} (not run under Wine)\n").into_bytes()
                };
                out.insert(b.clone(), (FileKind::Payload, bytes));
            }
        }
        for credential in self.credentials() {
            let bytes = format!("credential for {credential}\n").into_bytes();
            out.insert(credential, (FileKind::Credential, bytes));
        }
        out
    }

    /// Every credential the services name: those read at start (`secrets`) and those they reload (`reloads`).
    pub fn credentials(&self) -> Vec<NodePath> {
        let table: serde_json::Value =
            serde_json::from_slice(&self.files[&p(paths::SERVICES_JSON)]).expect("services.json is JSON");
        let mut out = Vec::new();
        for s in table["services"].as_array().into_iter().flatten() {
            for key in ["secrets", "reloads"] {
                for c in s[key].as_array().into_iter().flatten().filter_map(|c| c.as_str()) {
                    let path = NodePath::known(c);
                    if !out.contains(&path) {
                        out.push(path);
                    }
                }
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
        let binaries: Vec<NodePath> = self.bundle.services_unchecked().binaries().into_iter().cloned().collect();
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

/// What the fake metadata step answers: the node's AWS host name.
pub const AWS_NAME: &str = "ip-10-0-3-7.ec2.internal";
/// A step's result line for success, as the rendered step scripts print it.
pub const STEP_OK: &str = "{\"ok\":true}";

/// What the fake powershell answers for every step of the rendered example: all succeed; the node name comes from
/// the metadata step.
pub fn step_answers() -> BTreeMap<String, Vec<(String, i32)>> {
    let mut t = BTreeMap::new();
    for script in [
        "containers-feature.ps1",
        "windows-defender-exclusion.ps1",
        "firewall.ps1",
        "aws-routes.ps1",
        "network-conf.ps1",
        "remove-hns-networks.ps1",
    ] {
        t.insert(script.to_string(), vec![(format!("noise before the result\n{STEP_OK}\n"), 0)]);
    }
    t.insert(
        "aws-get-hostname.ps1".into(),
        vec![(format!("{{\"ok\":true,\"value\":\"{}\"}}\n", AWS_NAME.to_uppercase()), 0)],
    );
    t
}

/// kubelet's kubeconfig, which exists once the cluster approved the node's certificates.
pub fn approve_csrs(wine: &Wine) {
    write_whole(&wine.c(r"C:\k\kubeconfig"), b"apiVersion: v1\nkind: Config\n");
}

/// What the network step (network-conf.ps1) writes on a real node before kube-proxy starts: its configuration,
/// which sync does not deliver. The fake powershell runs nothing, so the test writes it.
pub fn network_step_output(wine: &Wine) {
    write_whole(&wine.c(r"C:\k\kube-proxy.conf"), b"kind: KubeProxyConfiguration\n");
}

/// Writes a file through a temporary sibling and a rename: a running program mapping the old file keeps it.
pub fn write_whole(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("creating folders");
    let tmp = path.with_extension("wine-rig-tmp");
    std::fs::write(&tmp, bytes).unwrap_or_else(|e| panic!("writing {}: {e}", tmp.display()));
    std::fs::rename(&tmp, path).unwrap_or_else(|e| panic!("renaming to {}: {e}", path.display()));
}
