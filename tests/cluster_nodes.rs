//! `sync --kubeconfig` and the cluster's nodes, against the stand-in API server of crates/kube-standin (no real
//! kube-apiserver can be installed where these tests run; the stand-in enforces bearer auth, TokenRequest, label
//! selectors and delete preconditions) and a real OpenSSH server on 127.0.0.1 with posix-profile nodes: the
//! cloud-node-manager's kubeconfig with a minted token, Windows Machines as targets, and `--prune-nodes`.
#![cfg(feature = "cluster")]

mod support;

use kube_standin::ApiServer;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use support::sshd::{Sshd, SshdOptions};
use support::{code, stderr, wmrender};

const SA_USER: &str = "system:serviceaccount:wmrender:cloud-node-manager";
const API_INT: &str = "https://api-int.azure-prod.example.com:6443";

struct Rig {
    sshd: Sshd,
    api: ApiServer,
    work: tempfile::TempDir,
}

impl Rig {
    /// The Azure example rendered (without the operator: the cloud-node-manager has its own identity), an sshd on
    /// 127.0.0.1 and 127.0.0.2, and a stand-in holding the cluster's Infrastructure and the rendered
    /// ServiceAccount.
    fn new() -> Rig {
        let sshd =
            Sshd::start_with(SshdOptions { extra_config: "ListenAddress 127.0.0.2\n".into(), ..Default::default() });
        let rig = Rig { sshd, api: ApiServer::start(), work: tempfile::tempdir().unwrap() };
        let inputs = support::root().join("examples/azure/wmrender.yaml");
        let o = wmrender(&["render", "-f", inputs.to_str().unwrap(), "-o", rig.path("rendered").to_str().unwrap()]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        rig.api.write_kubeconfig(&rig.path("kubeconfig")).unwrap();
        std::fs::write(
            rig.path("bootstrap-kubeconfig"),
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {API_INT}\n    \
                 certificate-authority-data: Y2EtcGVt\ncontexts:\n- name: k\n  context:\n    cluster: c\n    user: k\n\
                 current-context: k\nusers:\n- name: k\n  user:\n    token: bootstrap-secret-token\n"
            ),
        )
        .unwrap();
        rig.api.put_object(json!({
            "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure", "metadata": { "name": "cluster" },
            "status": { "platformStatus": { "type": "Azure" }, "apiServerInternalURL": API_INT },
        }));
        support::cluster::seed_credentials(&rig.api, "bootstrap-secret-token");
        rig.service_account();
        rig
    }

    fn service_account(&self) {
        self.api.put_object(json!({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": { "name": "cloud-node-manager", "namespace": "wmrender" },
        }));
    }

    fn path(&self, name: &str) -> PathBuf {
        self.work.path().join(name)
    }

    /// An inventory of posix nodes `(name, address)` on this sshd, each with its own root.
    fn inventory(&self, nodes: &[(&str, &str)]) -> PathBuf {
        let mut text = String::from(if nodes.is_empty() { "nodes: []\n" } else { "nodes:\n" });
        for (name, address) in nodes {
            let root = self.path(name);
            std::fs::create_dir_all(&root).unwrap();
            text.push_str(&format!(
                "- name: {name}\n  address: {address}\n  port: {}\n  user: root\n  profile: posix\n  root: {}\n",
                self.sshd.port,
                root.display()
            ));
        }
        let file = self.path(&format!("nodes-{}.yaml", nodes.len()));
        std::fs::write(&file, text).unwrap();
        file
    }

    fn sync(&self, inventory: &Path, extra: &[&str]) -> (i32, Value, String, String) {
        let (rendered, kubeconfig, bootstrap) =
            (self.path("rendered"), self.path("kubeconfig"), self.path("bootstrap-kubeconfig"));
        let identity = self.sshd.path("client_ed25519");
        let known = self.path("known_hosts");
        let mut args = vec![
            "sync",
            "--rendered",
            rendered.to_str().unwrap(),
            "--inventory",
            inventory.to_str().unwrap(),
            "--identity",
            identity.to_str().unwrap(),
            "--known-hosts",
            known.to_str().unwrap(),
            "--accept-new",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--bootstrap-kubeconfig",
            bootstrap.to_str().unwrap(),
            "--output",
            "json",
            "-v",
            "--connect-timeout",
            "5",
        ];
        args.extend_from_slice(extra);
        let o = wmrender(&args);
        let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
        let report = serde_json::from_str(&stdout).unwrap_or(Value::Null);
        (code(&o), report, stdout, stderr(&o))
    }

    /// A Node that joined earlier (Ready).
    fn node(&self, name: &str, address: &str, managed: bool) {
        let mut labels = json!({ "kubernetes.io/os": "windows" });
        if managed {
            labels["wmrender.dev/managed"] = "true".into();
        }
        self.api.put_object(json!({
            "apiVersion": "v1", "kind": "Node", "metadata": { "name": name, "labels": labels },
            // Ready: joined before, so sync has no kubelet CSR to wait for.
            "status": { "addresses": [{ "type": "InternalIP", "address": address }, { "type": "Hostname", "address": name }],
                        "conditions": [{ "type": "Ready", "status": "True" }] },
        }));
    }

    fn writes(&self) -> Vec<String> {
        self.api
            .requests()
            .into_iter()
            .filter(|r| r.method != "GET")
            .map(|r| format!("{} {}", r.method, r.target))
            .collect()
    }
}

/// The token and API server of the cloud-node-manager credentials pushed under `root`: the kubeconfig names the
/// token file (re-read by the service while it runs), which holds the token.
fn token_of(root: &Path) -> (String, String) {
    let kubeconfig = std::fs::read(root.join("C/k/cloud-node-manager.kubeconfig")).unwrap();
    let v: Value = serde_json::from_slice(&kubeconfig).expect("the pushed kubeconfig is JSON");
    assert_eq!(v["users"][0]["user"]["tokenFile"], r"C:\k\cloud-node-manager.token", "{v}");
    assert!(v["users"][0]["user"]["token"].is_null(), "the kubeconfig holds no token itself");
    let token = std::fs::read_to_string(root.join("C/k/cloud-node-manager.token")).unwrap();
    (token, v["clusters"][0]["cluster"]["server"].as_str().unwrap().to_string())
}

#[test]
fn the_cloud_node_managers_kubeconfig_holds_a_token_minted_for_its_service_account_and_shown_nowhere() {
    let rig = Rig::new();
    rig.node("node-00", "127.0.0.1", false);
    let inv = rig.inventory(&[("node-00", "127.0.0.1")]);

    // Without the rendered ServiceAccount applied there is no identity to mint for: exit 3, nothing pushed.
    rig.api.delete_object("v1", "serviceaccounts", "wmrender", "cloud-node-manager");
    let (rc, _, _, err) = rig.sync(&inv, &[]);
    assert_eq!(rc, 3, "{err}");
    assert!(err.contains("ServiceAccount wmrender/cloud-node-manager does not exist"), "{err}");
    assert!(!rig.path("node-00/C").exists());
    rig.service_account();

    let (rc, report, out, err) = rig.sync(&inv, &[]);
    assert_eq!(rc, 0, "{err}\n{out}");
    assert_eq!(report["nodes"][0]["status"], "synced");
    let (token, server) = token_of(&rig.path("node-00"));
    assert_eq!(server, API_INT, "the API server kubelet's bootstrap kubeconfig names");
    // The stand-in issued exactly this token, for exactly that ServiceAccount.
    assert_eq!(rig.api.with_state(|s| s.tokens.get(&token).cloned()).as_deref(), Some(SA_USER));
    let minted: Vec<_> = rig.api.requests().into_iter().filter(|r| r.target.ends_with("/token")).collect();
    let minted: Vec<(&str, &str, u16)> =
        minted.iter().map(|r| (r.method.as_str(), r.target.as_str(), r.code)).collect();
    let url = "/api/v1/namespaces/wmrender/serviceaccounts/cloud-node-manager/token";
    assert_eq!(minted, [("POST", url, 404), ("POST", url, 201)], "one refused (no ServiceAccount), one issued");
    // The secret is nowhere but on the node: not on stdout or stderr, not in a local file.
    assert!(!out.contains(&token) && !err.contains(&token));
    for (path, bytes) in support::read_tree(rig.work.path()) {
        if !path.starts_with("node-00/") {
            assert!(!String::from_utf8_lossy(&bytes).contains(&token), "{path} holds the token");
        }
    }

    // A later sync refreshes it; --dry-run mints nothing and keeps the node's as it is.
    let (rc, _, _, err) = rig.sync(&inv, &[]);
    assert_eq!(rc, 0, "{err}");
    let (again, _) = token_of(&rig.path("node-00"));
    assert_ne!(again, token);
    assert_eq!(rig.api.with_state(|s| s.tokens.get(&again).cloned()).as_deref(), Some(SA_USER));
    let before = rig.api.requests().len();
    let (_, report, _, err) = rig.sync(&inv, &["--dry-run"]);
    assert!(rig.api.requests()[before..].iter().all(|r| r.method == "GET"), "{err}");
    assert_eq!(
        report["nodes"][0]["kept"],
        json!([r"C:\k\cloud-node-manager.kubeconfig", r"C:\k\cloud-node-manager.token"]),
        "{report}"
    );
}

fn machine(name: &str, os_label: bool, node: Option<&str>, addresses: Value) -> Value {
    let labels = if os_label { json!({ "machine.openshift.io/os-id": "Windows" }) } else { json!({}) };
    let mut m = json!({
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
        "metadata": { "name": name, "namespace": "openshift-machine-api", "labels": labels },
        "status": { "phase": "Provisioned", "addresses": addresses },
    });
    if let Some(n) = node {
        m["status"]["nodeRef"] = json!({ "kind": "Node", "name": n });
    }
    m
}

#[test]
fn windows_machines_become_targets_and_the_unfinished_or_hostile_ones_are_reported() {
    let rig = Rig::new();
    let ip = |a: &str| json!([{ "type": "InternalIP", "address": a }]);
    // 127.0.0.1:22 has no SSH server: the Machine's node is a target that cannot be reached (Windows profile,
    // port 22), which the report shows with the Machine's node name and address.
    rig.api.put_object(machine("win-m-ready", true, Some("win-node-1"), ip("127.0.0.1")));
    rig.api.put_object(machine("win-m-new", true, None, json!([])));
    rig.api.put_object(machine("win-m-booting", true, Some("win-node-2"), json!([])));
    rig.api.put_object(machine("win-m-evil", true, Some("win-node-3"), ip("-oProxyCommand=touch /tmp/pwned")));
    rig.api.put_object(machine("win-m-evil-name", true, Some("a;reboot"), ip("127.0.0.9")));
    rig.api.put_object(machine("linux-m", false, Some("linux-node"), ip("127.0.0.1")));
    let inv = rig.inventory(&[("node-00", "127.0.0.1")]);
    let (rc, report, _, err) = rig.sync(&inv, &["--dry-run", "--keep-going"]);
    assert_eq!(rc, 3, "a refused Machine and an unreachable node fail the sync: {err}");
    let nodes: Vec<(&str, &str, &str)> = report["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["name"].as_str().unwrap(), n["address"].as_str().unwrap(), n["status"].as_str().unwrap()))
        .collect();
    // The inventory wins for its address: win-node-1 at 127.0.0.1 is node-00's address, so the inventory entry
    // (posix, this sshd) replaces it.
    assert_eq!(nodes, [("node-00", "127.0.0.1", "would-change")], "{report}");
    let machines: Vec<(&str, bool)> = report["machines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["machine"].as_str().unwrap(), m["refused"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        machines,
        [("win-m-booting", false), ("win-m-evil", true), ("win-m-evil-name", true), ("win-m-new", false)],
        "{report}"
    );
    assert!(err.contains("machine win-m-booting: waiting:") && err.contains("machine win-m-evil: refused:"), "{err}");
    assert!(!Path::new("/tmp/pwned").exists());
    assert!(
        rig.api.requests().iter().any(|r| r.target
            == "/apis/machine.openshift.io/v1beta1/namespaces/openshift-machine-api/machines?labelSelector=machine.openshift.io%2Fos-id%3DWindows"
            || r.target.ends_with("machines?labelSelector=machine.openshift.io/os-id%3DWindows")),
        "{:?}",
        rig.api.requests()
    );

    // Without the inventory the ready Machine's node is a target of its own, as WMCO's user on Azure (`capi`).
    let empty = rig.inventory(&[]);
    let (rc, report, _, err) = rig.sync(&empty, &["--dry-run", "--keep-going"]);
    assert_eq!(rc, 3, "{err}");
    let n = &report["nodes"][0];
    assert_eq!(
        (n["name"].as_str(), n["address"].as_str(), n["status"].as_str()),
        (Some("win-node-1"), Some("127.0.0.1"), Some("failed")),
        "{report}"
    );
    assert_eq!(report["nodes"].as_array().unwrap().len(), 1);
    assert!(rig.writes().is_empty(), "a dry run writes nothing: {:?}", rig.writes());
}

#[test]
fn prune_nodes_deconfigures_a_node_that_left_then_deletes_its_node_and_keeps_one_whose_deconfigure_failed() {
    let rig = Rig::new();
    rig.node("node-00", "127.0.0.1", true);
    rig.node("node-gone", "127.0.0.2", true);
    rig.node("not-ours", "127.0.0.3", false);
    // The first sync configures both and records on each Node how it logged in.
    let both = rig.inventory(&[("node-00", "127.0.0.1"), ("node-gone", "127.0.0.2")]);
    let (rc, _, _, err) = rig.sync(&both, &[]);
    assert_eq!(rc, 0, "{err}");
    let gone = rig.api.object("v1", "nodes", "", "node-gone").unwrap();
    let login: Value =
        serde_json::from_str(gone["metadata"]["annotations"]["wmrender.dev/ssh"].as_str().unwrap()).unwrap();
    assert_eq!(
        login,
        json!({ "user": "root", "port": rig.sshd.port, "root": rig.path("node-gone").to_str().unwrap() })
    );
    assert!(rig.path("node-gone/C/k/kubelet.conf").exists());

    // node-gone leaves the inventory. --dry-run names it and changes nothing.
    let one = rig.inventory(&[("node-00", "127.0.0.1")]);
    let before = rig.api.requests().len();
    let (rc, report, _, err) = rig.sync(&one, &["--prune-nodes", "--dry-run"]);
    assert_eq!(rc, 1, "{err}");
    assert_eq!(report["pruned"], json!([{ "node": "node-gone", "address": "127.0.0.2", "status": "would-prune" }]));
    assert!(err.contains("node-gone (127.0.0.2) would be pruned"), "{err}");
    assert!(rig.api.requests()[before..].iter().all(|r| r.method == "GET"));
    assert!(
        rig.api.object("v1", "nodes", "", "node-gone").is_some() && rig.path("node-gone/C/k/kubelet.conf").exists()
    );

    // A file deconfigure cannot remove (a folder in its place) fails it: the Node is kept, exit 3.
    let kubelet_conf = rig.path("node-gone/C/k/kubelet.conf");
    std::fs::remove_file(&kubelet_conf).unwrap();
    std::fs::create_dir_all(kubelet_conf.join("in-the-way")).unwrap();
    let (rc, report, _, err) = rig.sync(&one, &["--prune-nodes"]);
    assert_eq!(rc, 3, "{err}");
    let p = &report["pruned"][0];
    assert_eq!((p["node"].as_str(), p["status"].as_str()), (Some("node-gone"), Some("failed")), "{report}");
    assert!(p["error"].as_str().unwrap().contains(r"cannot remove C:\k\kubelet.conf"), "{p}");
    assert!(err.contains("node node-gone (127.0.0.2) not pruned"), "{err}");
    assert!(rig.api.object("v1", "nodes", "", "node-gone").is_some(), "a failed deconfigure keeps the Node");
    assert!(!rig.writes().iter().any(|w| w.starts_with("DELETE")));

    // Once it can finish: deconfigured over SSH (every delivered file and the manifest gone), then deleted.
    std::fs::remove_dir_all(&kubelet_conf).unwrap();
    let (rc, report, _, err) = rig.sync(&one, &["--prune-nodes"]);
    assert_eq!(rc, 0, "{err}");
    let p = &report["pruned"][0];
    assert_eq!((p["status"].as_str(), p["deconfigure"]["status"].as_str()), (Some("pruned"), Some("converged")));
    assert!(support::read_tree(&rig.path("node-gone")).is_empty(), "{:?}", support::read_tree(&rig.path("node-gone")));
    assert!(rig.api.object("v1", "nodes", "", "node-gone").is_none());
    assert!(
        rig.api.object("v1", "nodes", "", "node-00").is_some()
            && rig.api.object("v1", "nodes", "", "not-ours").is_some()
    );
    assert!(rig.writes().contains(&"DELETE /api/v1/nodes/node-gone".to_string()), "{:?}", rig.writes());
    assert!(rig.path("node-00/C/k/kubelet.conf").exists());
}

#[test]
fn prune_nodes_without_kubeconfig_is_a_usage_error() {
    let o = wmrender(&["sync", "--rendered", "x", "--identity", "y", "--prune-nodes"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("--kubeconfig"), "{}", stderr(&o));
}
