//! `wmrender sync --kubeconfig` end to end: a real OpenSSH server with a posix-profile node at an address of a
//! network namespace the test makes (its port 22 forwarded to the sshd on 127.0.0.1) and a real kube-apiserver
//! (tests/support/apiserver.rs), wmrender running as the user that holds exactly the documented `wmrender-sync`
//! role. The credentials come from the cluster into the bytes pushed and nowhere else; a rotation is followed by the
//! next sync; the configured node's kubelet CSRs are approved and the node labelled: by the real Linux kubelet
//! v1.36.3 (tests/support/kubelet.rs) in the node's namespace, with Debian's containerd; and by the played one
//! (tests/support/played.rs), which registers the node's address as the real one does. The token controller and the
//! CSR signer are kube-controller-manager's own (tests/support/controller_manager.rs).
#![cfg(feature = "cluster")]

mod support;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::apiserver::{ControlPlane, WMRENDER_USER};
use support::certificate;
use support::controller_manager::{CSR_SIGNING, ControllerManager};
use support::kubelet::{Credential, Join, RealKubelet};
use support::netns::SshHost;
use support::played::{Kubelet, Registration};
use support::sshd::Sshd;
use support::{code, stderr, wmrender};

/// With the operator installed, WMCO owns the BYOH host; sync configures the inventory's node-00.
const INPUTS: &str = "apiVersion: wmrender.dev/v1alpha1
kind: ClusterInputs
metadata:
  name: sync-test
spec:
  infrastructureID: sync-00000
  apiServerInternalURL: https://api-int.sync.example.com:6443
  platform:
    none: {}
  byoh:
  - address: 10.0.0.5
    username: Administrator
  network:
    hybridClusterNetwork: [10.132.0.0/14]
  operator:
    install: true
  mirrors:
    imageTagMirrors:
    - source: quay.io/openshift
      mirrors: [mirror.example.com:5000/quay/openshift]
";

const PULL_AUTH: &str = "cHVsbC11c2VyOnB1bGwtcGFzcw=="; // pull-user:pull-pass

struct Rig {
    sshd: Sshd,
    /// node-00, reached at port 22 of its address.
    host: SshHost,
    work: tempfile::TempDir,
    cp: ControlPlane,
    /// The image registry CA the ControllerConfig carries (one for the rig, so a second seed does not change it).
    registry_ca: String,
}

/// A self-signed certificate (PEM) with `cn`, made by openssl.
impl Rig {
    fn new() -> Rig {
        let sshd = Sshd::start();
        let host = SshHost::new(&sshd);
        let rig = Rig {
            sshd,
            host,
            work: tempfile::tempdir().unwrap(),
            cp: ControlPlane::start(),
            registry_ca: certificate("registry-ca"),
        };
        let file = rig.path("wmrender.yaml");
        std::fs::write(&file, INPUTS).unwrap();
        let o = wmrender(&["render", "-f", file.to_str().unwrap(), "-o", rig.path("rendered").to_str().unwrap()]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        std::fs::create_dir_all(rig.path("node-00")).unwrap();
        std::fs::write(
            rig.path("nodes.yaml"),
            format!(
                "nodes:\n- name: node-00\n  address: {}\n  port: 22\n  user: root\n  profile: posix\n  root: {}\n",
                rig.host.address(),
                rig.path("node-00").display()
            ),
        )
        .unwrap();
        std::fs::write(rig.sshd.path("known_hosts"), rig.host.known_hosts_line(&rig.sshd)).unwrap();
        // The rendered cluster/ applied: wmrender's namespace, where sync keeps each host's login record.
        rig.cp.namespace("wmrender");
        rig.cp.wmrender_kubeconfig(&rig.path("kubeconfig"), "wmrender-sync");
        rig
    }

    fn path(&self, name: &str) -> PathBuf {
        self.work.path().join(name)
    }

    fn node_file(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path("node-00/C/k").join(rel)).unwrap_or_default()
    }

    /// The cluster's credentials: the Infrastructure (api-int: this API server), the bootstrap token, the kubelet
    /// CA and a registry CA in the ControllerConfig, the Proxy's trusted CAs, the pull secret. Returns the token.
    fn seed(&self, kubelet_ca: &str, user_ca: &str) -> String {
        support::openshift::infrastructure(&self.cp, "None", &self.cp.url);
        support::openshift::controller_config(&self.cp, kubelet_ca, &[("mirror.example.com..5000", &self.registry_ca)]);
        support::openshift::proxy(&self.cp, Some(("user-ca-bundle", user_ca)));
        let dockerconfig = json!({"auths": {"mirror.example.com:5000": {"auth": PULL_AUTH}}}).to_string();
        support::openshift::pull_secret(&self.cp, &dockerconfig);
        support::played::bootstrap_token(&self.cp)
    }

    /// A Node that joined earlier (Ready), so sync has no CSR to wait for.
    fn joined_node(&self) {
        let admin = self.cp.admin();
        admin.create("/api/v1/nodes", &json!({"metadata": {"name": "node-00"}})).unwrap();
        admin.set_status("/api/v1/nodes/node-00", &json!({"conditions": [{"type": "Ready", "status": "True"}]}));
    }

    fn sync(&self, extra: &[&str]) -> (i32, Value, String, String) {
        let (rendered, nodes, identity, known, kubeconfig) = (
            self.path("rendered"),
            self.path("nodes.yaml"),
            self.sshd.path("client_ed25519"),
            self.sshd.path("known_hosts"),
            self.path("kubeconfig"),
        );
        let mut args = vec![
            "sync",
            "--rendered",
            rendered.to_str().unwrap(),
            "--inventory",
            nodes.to_str().unwrap(),
            "--identity",
            identity.to_str().unwrap(),
            "--known-hosts",
            known.to_str().unwrap(),
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--output",
            "json",
            "-v",
        ];
        args.extend_from_slice(extra);
        let o = wmrender(&args);
        let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
        (code(&o), serde_json::from_str(&stdout).unwrap_or(Value::Null), stdout, stderr(&o))
    }
}

fn assert_no_secret(texts: &[&str], secrets: &[&str]) {
    for t in texts {
        for s in secrets {
            assert!(!t.contains(s), "a secret ({s:.12}…) was printed:\n{t}");
        }
    }
}

/// Every local file under `dir` but the node roots: none may hold a secret.
fn local_files_hold_no(dir: &Path, secrets: &[&str]) {
    for entry in walkdir::WalkDir::new(dir).into_iter().flatten().filter(|e| e.file_type().is_file()) {
        if entry.path().components().any(|c| c.as_os_str() == "node-00") {
            continue;
        }
        let bytes = std::fs::read(entry.path()).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        for s in secrets {
            assert!(!text.contains(s), "{} holds a secret", entry.path().display());
        }
    }
}

#[test]
fn credentials_come_from_the_cluster_follow_a_rotation_and_are_never_shown() {
    let rig = Rig::new();
    let (kubelet1, user1) = (certificate("kubelet-ca-1"), certificate("user-ca-1"));
    let token = rig.seed(&kubelet1, &user1);
    let ca1 = rig.cp.ca_pem();
    rig.joined_node();
    let (rc, report, stdout, err) = rig.sync(&["--csr-timeout", "0"]);
    assert_eq!(rc, 0, "{err}\n{stdout}");
    assert_eq!(report["nodes"][0]["status"], "synced", "{report}");

    let kubeconfig: Value = serde_json::from_str(&rig.node_file("bootstrap-kubeconfig")).unwrap();
    assert_eq!(
        kubeconfig["clusters"][0]["cluster"]["server"],
        rig.cp.url.as_str(),
        "the Infrastructure's apiServerInternalURI"
    );
    assert_eq!(kubeconfig["users"][0]["user"]["token"], token.as_str());
    assert_eq!(kubeconfig["current-context"], "kubelet");
    let ca_data = kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"].as_str().unwrap();
    assert_eq!(STANDARD.decode(ca_data).unwrap(), ca1.as_bytes());
    assert_eq!(rig.node_file("bootstrap-ca.crt"), ca1);
    assert_eq!(rig.node_file("kubelet-ca.crt"), kubelet1);
    let bundle = rig.node_file("ca-bundle.crt");
    assert!(bundle.starts_with("# mirror.example.com:5000\n-----BEGIN CERTIFICATE-----"), "{bundle}");
    assert!(bundle.contains(&user1), "{bundle}");
    assert_eq!(wmrender_contract::parse_ca_bundle(bundle.as_bytes()).unwrap().len(), 2);
    let hosts = rig.node_file("containerd/registries/quay.io/hosts.toml");
    assert!(hosts.contains(&format!("authorization = \"Basic {PULL_AUTH}\"")), "{hosts}");
    // Labelled as WMCO labels BYOH nodes, and as wmrender's.
    let node = rig.cp.admin().get("/api/v1/nodes/node-00").unwrap();
    assert_eq!(node["metadata"]["labels"]["node-role.kubernetes.io/worker"], "");
    assert_eq!(node["metadata"]["labels"]["wmrender.dev/managed"], "true");

    let secrets = [token.as_str(), PULL_AUTH, "pull-pass"];
    assert_no_secret(&[&stdout, &err], &secrets);
    local_files_hold_no(rig.work.path(), &secrets);
    let writes: Vec<String> = rig
        .cp
        .requests_by(WMRENDER_USER)
        .into_iter()
        .filter(|r| !matches!(r.verb.as_str(), "get" | "list"))
        .map(|r| r.to_string())
        .collect();
    assert!(writes.iter().all(|w| w.starts_with("patch /api/v1/nodes/node-00 200")), "only the Node: {writes:?}");
    assert!(!writes.is_empty());

    // The cluster rotates the bootstrap token and the kubelet CA; the next sync pushes the new material.
    let kubelet2 = certificate("kubelet-ca-2");
    let token2 = rig.seed(&kubelet2, &user1);
    assert_ne!(token2, token);
    let (rc, report, stdout, err) = rig.sync(&["--csr-timeout", "0"]);
    assert_eq!(rc, 0, "{err}");
    let changed = report["nodes"][0]["changed"].as_array().unwrap();
    let changed: Vec<&str> = changed.iter().filter_map(Value::as_str).collect();
    assert_eq!(changed, [r"C:\k\bootstrap-kubeconfig", r"C:\k\kubelet-ca.crt"], "{report}");
    assert!(rig.node_file("bootstrap-kubeconfig").contains(&token2));
    assert_eq!(rig.node_file("kubelet-ca.crt"), kubelet2);
    assert_no_secret(&[&stdout, &err], &[&token2]);

    // A file named on the command line wins over the cluster's.
    let mine = certificate("my-kubelet-ca");
    std::fs::write(rig.path("my-kubelet-ca.crt"), &mine).unwrap();
    let (rc, _, _, err) =
        rig.sync(&["--csr-timeout", "0", "--kubelet-ca", rig.path("my-kubelet-ca.crt").to_str().unwrap()]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(rig.node_file("kubelet-ca.crt"), mine);
}

#[test]
fn sync_approves_the_configured_nodes_kubelet_csrs_and_labels_it() {
    let rig = Rig::new();
    let token = rig.seed(&certificate("kubelet-ca"), &certificate("user-ca"));
    let _controllers = ControllerManager::start(&rig.cp, &[CSR_SIGNING]);
    // Plays kubelet on node-00: once the bootstrap kubeconfig is delivered, its TLS bootstrap with the token it
    // holds, then the Node and its serving certificate as the node.
    let delivered = rig.path("node-00/C/k/bootstrap-kubeconfig");
    let (rc, report, stdout, err) = std::thread::scope(|s| {
        let kubelet = s.spawn(|| {
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while !delivered.exists() {
                assert!(std::time::Instant::now() < deadline, "the bootstrap kubeconfig never arrived");
                std::thread::sleep(Duration::from_millis(100));
            }
            let bootstrap: Value = serde_json::from_str(&std::fs::read_to_string(&delivered).unwrap()).unwrap();
            let token = bootstrap["users"][0]["user"]["token"].as_str().unwrap().to_string();
            let k = Kubelet::bootstrap(&rig.cp, &token, "node-00", &rig.path("kubelet"), Duration::from_secs(60))?;
            let reg = Registration {
                addresses: vec![
                    ("InternalIP".into(), rig.host.address().into()),
                    ("Hostname".into(), "node-00".into()),
                ],
                boot_id: "b1".into(),
                ..Default::default()
            };
            k.register(&reg, Duration::from_secs(60))
        });
        let out = rig.sync(&["--csr-timeout", "60"]);
        kubelet.join().unwrap().unwrap();
        out
    });
    assert_eq!(rc, 0, "{err}\n{stdout}");
    let approved: Vec<(&str, &str)> = report["cluster"]["approved"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["csr"].as_str().unwrap(), a["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(approved, [("csr-client-node-00", "client"), ("csr-serving-node-00-b1", "serving")], "{report}");
    assert_eq!(report["cluster"]["labelled"], json!(["node-00"]));
    assert!(err.contains("approved csr-client-node-00") && err.contains("labelled node-00"), "{err}");
    assert_no_secret(&[&stdout, &err], &[&token, PULL_AUTH]);
}

/// The same join with the real kubelet (tests/support/kubelet.rs) instead of the played one: its TLS bootstrap with
/// the token of the kubeconfig sync delivered, its Node registered with the taints of the rendered kubelet.conf, its
/// serving certificate for the node's own address. wmrender's join approves both of its real CSRs and labels the
/// Node. kubelet runs in the node's network namespace, at the address where the inventory reaches its sshd.
#[test]
fn a_real_kubelet_joins_with_what_sync_delivered_and_sync_approves_its_csrs() {
    let rig = Rig::new();
    let token = rig.seed(&certificate("kubelet-ca"), &certificate("user-ca"));
    let _controllers = ControllerManager::start(&rig.cp, &[CSR_SIGNING]);
    let delivered = rig.path("node-00/C/k/bootstrap-kubeconfig");
    let ((rc, report, stdout, err), kubelet) = std::thread::scope(|s| {
        let sync = s.spawn(|| rig.sync(&["--csr-timeout", "90"]));
        // kubelet starts once the bootstrap kubeconfig is there (on this thread: its processes die with the thread
        // that started them).
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let conf = rig.path("node-00/C/k/kubelet.conf");
        while !(sync.is_finished() || delivered.exists() && conf.exists()) {
            assert!(std::time::Instant::now() < deadline, "the bootstrap kubeconfig never arrived");
            std::thread::sleep(Duration::from_millis(100));
        }
        let bootstrap: Value = serde_json::from_str(&std::fs::read_to_string(&delivered).unwrap()).unwrap();
        let config: Value = serde_json::from_str(&std::fs::read_to_string(&conf).unwrap()).unwrap();
        let join = Join {
            name: "node-00",
            address: rig.host.address(),
            credential: Credential::Bootstrap(bootstrap["users"][0]["user"]["token"].as_str().unwrap()),
            taints: config["registerWithTaints"].as_array().cloned().unwrap_or_default(),
            mirror: None,
        };
        let kubelet = RealKubelet::start(&rig.cp, &join, &rig.path("kubelet"), &rig.host.ns);
        (sync.join().unwrap(), kubelet)
    });
    assert_eq!(rc, 0, "{err}\n{stdout}\nkubelet:\n{}", kubelet.log_tail());
    let kinds: Vec<&str> =
        report["cluster"]["approved"].as_array().unwrap().iter().map(|a| a["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["client", "serving"], "{report}");
    assert_eq!(report["cluster"]["labelled"], json!(["node-00"]));
    // The Node kubelet registered: the taints of the rendered kubelet.conf, wmrender's label, and the certificate
    // kubelet now holds.
    let node = rig.cp.admin().get("/api/v1/nodes/node-00").unwrap();
    let taints = node["spec"]["taints"].as_array().cloned().unwrap_or_default();
    let config: Value = serde_json::from_str(&rig.node_file("kubelet.conf")).unwrap();
    let rendered = config["registerWithTaints"].as_array().cloned().unwrap_or_default();
    assert!(!rendered.is_empty(), "{config}");
    for t in &rendered {
        assert!(taints.iter().any(|n| n["key"] == t["key"] && n["effect"] == t["effect"]), "{t} on {node}");
    }
    assert_eq!(node["metadata"]["labels"]["wmrender.dev/managed"], "true", "{node}");
    assert!(rig.path("kubelet/pki/kubelet-client-current.pem").exists(), "{}", kubelet.log_tail());
    assert_no_secret(&[&stdout, &err], &[&token, PULL_AUTH]);
}

#[test]
fn without_a_kubeconfig_sync_says_exactly_how_to_approve_and_label() {
    let rig = Rig::new();
    let (rendered, nodes) = (rig.path("rendered"), rig.path("nodes.yaml"));
    let o = wmrender(&[
        "sync",
        "--rendered",
        rendered.to_str().unwrap(),
        "--inventory",
        nodes.to_str().unwrap(),
        "--identity",
        rig.sshd.path("client_ed25519").to_str().unwrap(),
        "--known-hosts",
        rig.sshd.path("known_hosts").to_str().unwrap(),
    ]);
    let err = stderr(&o);
    assert_eq!(code(&o), 0, "{err}");
    for line in [
        "oc get csr --field-selector spec.signerName=kubernetes.io/kube-apiserver-client-kubelet",
        "oc adm certificate approve CSR_NAME",
        "grep 'system:node:node-00'",
        "oc label node node-00 node-role.kubernetes.io/worker= wmrender.dev/managed=true",
    ] {
        assert!(err.contains(line), "{line}\n{err}");
    }
    assert!(rig.cp.requests_by(WMRENDER_USER).is_empty());
}

#[test]
fn an_unusable_kubeconfig_stops_sync_before_any_node_is_touched() {
    let rig = Rig::new();
    std::fs::write(rig.path("kubeconfig"), "not: [a kubeconfig\n").unwrap();
    let (rc, _, _, err) = rig.sync(&[]);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("kubeconfig"), "{err}");
    assert!(!rig.path("node-00/C").exists(), "no node was touched");
    // A cluster that lacks what a node needs is a failure of the cluster (3), named, before any node is touched.
    rig.cp.wmrender_kubeconfig(&rig.path("kubeconfig"), "wmrender-sync");
    let (rc, _, _, err) = rig.sync(&[]);
    assert_eq!(rc, 3, "{err}");
    assert!(err.contains("Infrastructure"), "{err}");
    assert!(!rig.path("node-00/C").exists(), "no node was touched");
}

#[test]
fn a_trusted_ca_bundle_that_is_not_certificates_is_refused_before_any_node_is_touched() {
    let rig = Rig::new();
    let bundle = rig.path("ca-bundle.crt");
    std::fs::write(&bundle, "-----BEGIN PRIVATE KEY-----\nTUlTVEFLRQ==\n-----END PRIVATE KEY-----\n").unwrap();
    let (rendered, nodes) = (rig.path("rendered"), rig.path("nodes.yaml"));
    let o = wmrender(&[
        "sync",
        "--rendered",
        rendered.to_str().unwrap(),
        "--inventory",
        nodes.to_str().unwrap(),
        "--identity",
        rig.sshd.path("client_ed25519").to_str().unwrap(),
        "--known-hosts",
        rig.sshd.path("known_hosts").to_str().unwrap(),
        "--trusted-ca-bundle",
        bundle.to_str().unwrap(),
    ]);
    let err = stderr(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert!(err.contains("ca-bundle.crt") && err.contains("PRIVATE KEY"), "{err}");
    assert!(!err.contains("TUlTVEFLRQ"), "the block's content is not echoed: {err}");
    assert!(!rig.path("node-00/C").exists());
}
