//! `wmrender sync --kubeconfig` end to end: a real OpenSSH server on 127.0.0.1 with posix-profile nodes (the rig of
//! tests/sync.rs) and the stand-in API server of crates/kube-standin (no real kube-apiserver can be installed where
//! these tests run). The credentials come from the cluster into the bytes pushed and nowhere else; a rotation is
//! followed by the next sync; the configured node's kubelet CSRs are approved and the node labelled.
#![cfg(feature = "cluster")]

mod support;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use kube_standin::ApiServer;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::cluster::certificate;
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

const TOKEN: &str = "eyJhbGciOiJSUzI1NiJ9.bootstrapper-token-one";
const PULL_AUTH: &str = "cHVsbC11c2VyOnB1bGwtcGFzcw=="; // pull-user:pull-pass

struct Rig {
    sshd: Sshd,
    work: tempfile::TempDir,
    api: Arc<ApiServer>,
    /// The image registry CA the ControllerConfig carries (one for the rig, so a second seed does not change it).
    registry_ca: String,
}

/// A self-signed certificate (PEM) with `cn`, made by openssl.
impl Rig {
    fn new() -> Rig {
        let rig = Rig {
            sshd: Sshd::start(),
            work: tempfile::tempdir().unwrap(),
            api: Arc::new(ApiServer::start()),
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
                "nodes:\n- name: node-00\n  address: 127.0.0.1\n  port: {}\n  user: root\n  profile: posix\n  root: {}\n",
                rig.sshd.port,
                rig.path("node-00").display()
            ),
        )
        .unwrap();
        rig.api.write_kubeconfig(&rig.path("kubeconfig")).unwrap();
        rig
    }

    fn path(&self, name: &str) -> PathBuf {
        self.work.path().join(name)
    }

    fn node_file(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path("node-00/C/k").join(rel)).unwrap_or_default()
    }

    /// The cluster's credentials: bootstrap token and CA, kubelet CA, registry and proxy CAs, pull secret.
    fn seed(&self, token: &str, bootstrap_ca: &str, kubelet_ca: &str, user_ca: &str) {
        let b64 = |s: &str| STANDARD.encode(s);
        self.api.put_object(
            json!({"apiVersion": "config.openshift.io/v1", "kind": "Infrastructure", "metadata": {"name": "cluster"},
            "status": {"apiServerInternalURL": "https://api-int.sync.example.com:6443"}}),
        );
        self.api.put_object(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "node-bootstrapper-token", "namespace": "openshift-machine-config-operator"},
            "type": "kubernetes.io/service-account-token", "data": {"token": b64(token), "ca.crt": b64(bootstrap_ca)}}));
        self.api.put_object(json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "ControllerConfig",
            "metadata": {"name": "machine-config-controller"},
            "spec": {"kubeAPIServerServingCAData": b64(kubelet_ca),
                     "imageRegistryBundleData": [{"file": "mirror.example.com..5000", "data": b64(&self.registry_ca)}]}}));
        self.api.put_object(
            json!({"apiVersion": "config.openshift.io/v1", "kind": "Proxy", "metadata": {"name": "cluster"},
            "spec": {"trustedCA": {"name": "user-ca-bundle"}}}),
        );
        self.api.put_object(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "user-ca-bundle", "namespace": "openshift-config"}, "data": {"ca-bundle.crt": user_ca}}));
        let dockerconfig = json!({"auths": {"mirror.example.com:5000": {"auth": PULL_AUTH}}}).to_string();
        self.api.put_object(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "pull-secret", "namespace": "openshift-config"},
            "type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": b64(&dockerconfig)}}));
    }

    /// A Node that joined earlier (Ready), so sync has no CSR to wait for.
    fn joined_node(&self) {
        self.api.put_object(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-00"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}));
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
    let (ca1, kubelet1, user1) = (certificate("bootstrap-ca-1"), certificate("kubelet-ca-1"), certificate("user-ca-1"));
    rig.seed(TOKEN, &ca1, &kubelet1, &user1);
    rig.joined_node();
    let (rc, report, stdout, err) = rig.sync(&["--csr-timeout", "0"]);
    assert_eq!(rc, 0, "{err}\n{stdout}");
    assert_eq!(report["nodes"][0]["status"], "synced", "{report}");

    let kubeconfig: Value = serde_json::from_str(&rig.node_file("bootstrap-kubeconfig")).unwrap();
    assert_eq!(kubeconfig["clusters"][0]["cluster"]["server"], "https://api-int.sync.example.com:6443");
    assert_eq!(kubeconfig["users"][0]["user"]["token"], TOKEN);
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
    let node = rig.api.object("v1", "nodes", "", "node-00").unwrap();
    assert_eq!(node["metadata"]["labels"]["node-role.kubernetes.io/worker"], "");
    assert_eq!(node["metadata"]["labels"]["wmrender.dev/managed"], "true");

    let secrets = [TOKEN, PULL_AUTH, "pull-pass", ca_data];
    assert_no_secret(&[&stdout, &err], &secrets);
    local_files_hold_no(rig.work.path(), &secrets);
    let writes: Vec<_> = rig.api.requests().into_iter().filter(|r| r.method != "GET").collect();
    assert!(
        writes.iter().all(|r| r.method == "PATCH" && r.target == "/api/v1/nodes/node-00"),
        "only the label: {writes:?}"
    );

    // The cluster rotates the bootstrap token and the kubelet CA; the next sync pushes the new material.
    let token2 = "eyJhbGciOiJSUzI1NiJ9.bootstrapper-token-two";
    let kubelet2 = certificate("kubelet-ca-2");
    rig.seed(token2, &ca1, &kubelet2, &user1);
    let (rc, report, stdout, err) = rig.sync(&["--csr-timeout", "0"]);
    assert_eq!(rc, 0, "{err}");
    let changed = report["nodes"][0]["changed"].as_array().unwrap();
    let changed: Vec<&str> = changed.iter().filter_map(Value::as_str).collect();
    assert_eq!(changed, [r"C:\k\bootstrap-kubeconfig", r"C:\k\kubelet-ca.crt"], "{report}");
    assert!(rig.node_file("bootstrap-kubeconfig").contains(token2));
    assert_eq!(rig.node_file("kubelet-ca.crt"), kubelet2);
    assert_no_secret(&[&stdout, &err], &[token2]);

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
    rig.seed(TOKEN, &certificate("ca"), &certificate("kubelet-ca"), &certificate("user-ca"));
    // The bootstrap token authenticates as the node-bootstrapper, as on a cluster; kubelet's own certificate (once
    // the client CSR is approved) as the node.
    rig.api.add_token(TOKEN, "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper");
    rig.api.add_token("node-00-client-certificate", "system:node:node-00");
    // Plays kubelet on node-00: once the bootstrap kubeconfig is delivered, asks for its client certificate with the
    // token it holds, then registers the Node and asks for its serving certificate as the node.
    let api = rig.api.clone();
    let delivered = rig.path("node-00/C/k/bootstrap-kubeconfig");
    let kubeconfig_for = rig.path("kubelet-kubeconfig");
    let kubelet = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !delivered.exists() {
            assert!(Instant::now() < deadline, "the bootstrap kubeconfig never arrived");
            std::thread::sleep(Duration::from_millis(100));
        }
        let bootstrap: Value = serde_json::from_str(&std::fs::read_to_string(&delivered).unwrap()).unwrap();
        let token = bootstrap["users"][0]["user"]["token"].as_str().unwrap().to_string();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        // POSTs a CSR as `token` (the stand-in's URL: api-int does not resolve here).
        let post = |token: &str, name: &str, signer: &str, usages: &[&str], subject: &str, san: &str| {
            std::fs::write(&kubeconfig_for, api.kubeconfig_with(token)).unwrap();
            let mut cmd = std::process::Command::new("openssl");
            cmd.args([
                "req",
                "-new",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                "/dev/null",
                "-subj",
                subject,
            ]);
            if !san.is_empty() {
                cmd.args(["-addext", &format!("subjectAltName={san}")]);
            }
            let body = json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {"name": name},
                "spec": {"request": STANDARD.encode(cmd.output().unwrap().stdout), "signerName": signer, "usages": usages}});
            runtime.block_on(async {
                let client = wmrender::cluster::Cluster::connect(&kubeconfig_for).await.unwrap().client;
                let request = http::Request::post("/apis/certificates.k8s.io/v1/certificatesigningrequests")
                    .header("Content-Type", "application/json")
                    .body(body.to_string().into_bytes())
                    .unwrap();
                client.request::<Value>(request).await.unwrap();
            });
        };
        let approved = |name: &str| {
            api.object("certificates.k8s.io/v1", "certificatesigningrequests", "", name).is_some_and(|c| {
                c["status"]["conditions"].as_array().is_some_and(|l| l.iter().any(|c| c["type"] == "Approved"))
            })
        };
        let subject = "/O=system:nodes/CN=system:node:node-00";
        post(
            &token,
            "csr-a",
            "kubernetes.io/kube-apiserver-client-kubelet",
            &["digital signature", "client auth"],
            subject,
            "",
        );
        while !approved("csr-a") {
            assert!(Instant::now() < deadline, "the client CSR was never approved");
            std::thread::sleep(Duration::from_millis(100));
        }
        api.put_object(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-00"},
            "status": {"conditions": [{"type": "Ready", "status": "False"}]}}));
        post(
            "node-00-client-certificate",
            "csr-b",
            "kubernetes.io/kubelet-serving",
            &["digital signature", "server auth"],
            subject,
            "DNS:node-00,IP:127.0.0.1",
        );
    });
    let (rc, report, stdout, err) = rig.sync(&["--csr-timeout", "60"]);
    kubelet.join().unwrap();
    assert_eq!(rc, 0, "{err}\n{stdout}");
    let approved: Vec<(&str, &str)> = report["cluster"]["approved"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["csr"].as_str().unwrap(), a["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(approved, [("csr-a", "client"), ("csr-b", "serving")], "{report}");
    assert_eq!(report["cluster"]["labelled"], json!(["node-00"]));
    assert!(err.contains("approved csr-a") && err.contains("labelled node-00"), "{err}");
    assert_no_secret(&[&stdout, &err], &[TOKEN, PULL_AUTH]);
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
    assert!(rig.api.requests().is_empty());
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
    rig.api.write_kubeconfig(&rig.path("kubeconfig")).unwrap();
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
