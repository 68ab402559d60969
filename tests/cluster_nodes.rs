//! `sync --kubeconfig` and the cluster's nodes, against a real kube-apiserver (tests/support/apiserver.rs; wmrender
//! runs as the user holding exactly the documented `wmrender-sync` role) and a real OpenSSH server on 127.0.0.1 with
//! posix-profile nodes (each at an address of a network namespace the test makes, port 22 forwarded to the sshd: a real
//! node's kubelet refuses a loopback address): the cloud-node-manager's kubeconfig with a minted token, Windows
//! Machines as targets, and `--prune-nodes`.
#![cfg(feature = "cluster")]

mod support;

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use support::apiserver::{ControlPlane, WMRENDER_USER};
use support::netns::SshHost;
use support::sshd::Sshd;
use support::{code, stderr, wmrender};

const SA_USER: &str = "system:serviceaccount:wmrender:cloud-node-manager";
const API_INT: &str = "https://api-int.azure-prod.example.com:6443";
const SERVICE_ACCOUNT: &str = "/api/v1/namespaces/wmrender/serviceaccounts/cloud-node-manager";

struct Rig {
    sshd: Sshd,
    cp: ControlPlane,
    work: tempfile::TempDir,
    /// Three hosts, each reached at port 22 of its address.
    hosts: Vec<SshHost>,
}

impl Rig {
    /// The Azure example rendered (without the operator: the cloud-node-manager has its own identity) and its
    /// cluster objects applied, an sshd reached at three hosts' addresses, and a cluster holding what sync reads.
    fn new() -> Rig {
        let sshd = Sshd::start();
        let hosts = (0..3).map(|_| SshHost::new(&sshd)).collect();
        let rig = Rig { sshd, cp: ControlPlane::start(), work: tempfile::tempdir().unwrap(), hosts };
        let inputs = support::root().join("examples/azure/wmrender.yaml");
        let o = wmrender(&["render", "-f", inputs.to_str().unwrap(), "-o", rig.path("rendered").to_str().unwrap()]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        // What Argo CD would apply of the rendered cluster/: the cloud-node-manager's identity.
        for file in [
            "namespace-wmrender.yaml",
            "clusterrole-wmrender-cloud-node-manager.yaml",
            "clusterrolebinding-wmrender-cloud-node-manager.yaml",
        ] {
            let text = std::fs::read_to_string(rig.path("rendered/cluster").join(file)).unwrap();
            rig.cp.admin().seed(&serde_saphyr::from_str(&text).unwrap());
        }
        rig.cp.wmrender_kubeconfig(&rig.path("kubeconfig"), "wmrender-sync");
        std::fs::write(
            rig.path("bootstrap-kubeconfig"),
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {API_INT}\n    \
                 certificate-authority-data: Y2EtcGVt\ncontexts:\n- name: k\n  context:\n    cluster: c\n    user: k\n\
                 current-context: k\nusers:\n- name: k\n  user:\n    token: bootstrap-secret-token\n"
            ),
        )
        .unwrap();
        support::openshift::infrastructure(&rig.cp, "Azure", API_INT);
        support::openshift::controller_config(&rig.cp, &support::certificate("kubelet-ca"), &[]);
        support::openshift::proxy(&rig.cp, None);
        support::openshift::pull_secret(&rig.cp, r#"{"auths":{}}"#);
        support::played::bootstrap_token(&rig.cp);
        rig.service_account();
        rig
    }

    /// The rendered ServiceAccount, applied.
    fn service_account(&self) {
        let text =
            std::fs::read_to_string(self.path("rendered/cluster/serviceaccount-cloud-node-manager.yaml")).unwrap();
        self.cp.admin().seed(&serde_saphyr::from_str(&text).unwrap());
    }

    fn path(&self, name: &str) -> PathBuf {
        self.work.path().join(name)
    }

    /// The three hosts' addresses.
    fn addresses(&self) -> [&str; 3] {
        [0, 1, 2].map(|i| self.hosts[i].address())
    }

    /// An inventory of posix nodes `(name, address)` on this sshd (port 22 at the address), each with its own root.
    fn inventory(&self, nodes: &[(&str, &str)]) -> PathBuf {
        let mut text = String::from(if nodes.is_empty() { "nodes: []\n" } else { "nodes:\n" });
        for (name, address) in nodes {
            let root = self.path(name);
            std::fs::create_dir_all(&root).unwrap();
            text.push_str(&format!(
                "- name: {name}\n  address: {address}\n  port: 22\n  user: root\n  profile: posix\n  root: {}\n",
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
        let admin = self.cp.admin();
        admin.create("/api/v1/nodes", &json!({ "metadata": { "name": name, "labels": labels } })).unwrap();
        // Ready: joined before, so sync has no kubelet CSR to wait for.
        admin.set_status(
            &format!("/api/v1/nodes/{name}"),
            &json!({ "addresses": [{ "type": "InternalIP", "address": address }, { "type": "Hostname", "address": name }],
                     "conditions": [{ "type": "Ready", "status": "True" }] }),
        );
    }

    fn get(&self, path: &str) -> Option<Value> {
        self.cp.admin().get(path)
    }

    /// The login record sync keeps for a target (a Secret in wmrender's namespace), decoded.
    fn login(&self, target: &str) -> Option<Value> {
        use base64::Engine;
        let name = wmrender::lifecycle::login::secret_name(target);
        let secret = self.get(&format!("/api/v1/namespaces/wmrender/secrets/{name}"))?;
        let data = base64::engine::general_purpose::STANDARD
            .decode(secret["data"][wmrender::lifecycle::login::KEY].as_str()?)
            .ok()?;
        serde_json::from_slice(&data).ok()
    }

    /// wmrender's writes, as the API server's audit log recorded them: `verb uri`.
    fn writes(&self) -> Vec<String> {
        self.cp
            .requests_by(WMRENDER_USER)
            .into_iter()
            .filter(|r| !matches!(r.verb.as_str(), "get" | "list"))
            .map(|r| format!("{} {}", r.verb, r.uri))
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
    let [one, ..] = rig.addresses();
    rig.node("node-00", one, false);
    let inv = rig.inventory(&[("node-00", one)]);

    // Without the rendered ServiceAccount applied there is no identity to mint for: exit 3, nothing pushed.
    rig.cp.admin().delete(SERVICE_ACCOUNT).unwrap();
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
    // The API server issued exactly this token, for exactly that ServiceAccount.
    assert_eq!(rig.token_user(&token), SA_USER);
    let minted: Vec<String> =
        rig.cp.requests_by(WMRENDER_USER).iter().filter(|r| r.uri.ends_with("/token")).map(|r| r.to_string()).collect();
    let url = "/api/v1/namespaces/wmrender/serviceaccounts/cloud-node-manager/token";
    assert_eq!(minted, [format!("create {url} 404"), format!("create {url} 201")], "one refused, one issued");
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
    assert_eq!(rig.token_user(&again), SA_USER);
    let before = rig.writes().len();
    let (_, report, _, err) = rig.sync(&inv, &["--dry-run"]);
    assert_eq!(rig.writes().len(), before, "a dry run writes nothing: {err}");
    assert_eq!(
        report["nodes"][0]["kept"],
        json!([r"C:\k\cloud-node-manager.kubeconfig", r"C:\k\cloud-node-manager.token"]),
        "{report}"
    );
}

impl Rig {
    /// Who the API server says `token` authenticates (a TokenReview, as the cluster's admin).
    fn token_user(&self, token: &str) -> String {
        let review = self
            .cp
            .admin()
            .create(
                "/apis/authentication.k8s.io/v1/tokenreviews",
                &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}),
            )
            .unwrap();
        review["status"]["user"]["username"].as_str().unwrap_or("").to_string()
    }
}

/// A Machine as the Machine API leaves it: created with its labels, then its status (phase, addresses) written by
/// the machine controller. `phase: None`: not picked up yet.
fn machine(rig: &Rig, name: &str, os_label: bool, phase: Option<&str>, addresses: Value) {
    let labels = if os_label { json!({ "machine.openshift.io/os-id": "Windows" }) } else { json!({}) };
    let admin = rig.cp.admin();
    admin
        .create(
            support::played::MACHINES,
            &json!({"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
                    "metadata": { "name": name, "namespace": "openshift-machine-api", "labels": labels }}),
        )
        .unwrap();
    if let Some(phase) = phase {
        admin.set_status(
            &format!("{}/{name}", support::played::MACHINES),
            &json!({ "phase": phase, "addresses": addresses }),
        );
    }
}

#[test]
fn provisioned_windows_machines_are_targets_the_others_wait_or_are_refused() {
    let rig = Rig::new();
    let [one, ..] = rig.addresses();
    let ip = |a: &str| json!([{ "type": "InternalIP", "address": a }]);
    // Provisioned with an address: a target now, with no Node and no nodeRef yet (kubelet is what sync installs).
    machine(&rig, "win-m-ready", true, Some("Provisioned"), ip(one));
    machine(&rig, "win-m-new", true, Some("Provisioning"), json!([]));
    machine(&rig, "win-m-unseen", true, None, json!([]));
    machine(&rig, "win-m-booting", true, Some("Provisioned"), json!([]));
    machine(&rig, "win-m-evil", true, Some("Provisioned"), ip("-oProxyCommand=touch /tmp/pwned"));
    machine(&rig, "linux-m", false, Some("Provisioned"), ip(one));
    let inv = rig.inventory(&[("node-00", one)]);
    let (rc, report, _, err) = rig.sync(&inv, &["--dry-run", "--keep-going"]);
    assert_eq!(rc, 3, "a refused Machine fails the sync: {err}");
    let nodes: Vec<(&str, &str, &str)> = report["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["name"].as_str().unwrap(), n["address"].as_str().unwrap(), n["status"].as_str().unwrap()))
        .collect();
    // The inventory says how to reach the first host (posix, this sshd): its entry stands for win-m-ready's instance.
    assert_eq!(nodes, [("node-00", one, "would-change")], "{report}");
    let machines: Vec<(&str, bool)> = report["machines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["machine"].as_str().unwrap(), m["refused"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        machines,
        [("win-m-booting", false), ("win-m-evil", true), ("win-m-new", false), ("win-m-unseen", false)],
        "{report}"
    );
    assert!(err.contains("machine win-m-booting: waiting:") && err.contains("machine win-m-evil: refused:"), "{err}");
    assert!(err.contains("phase Provisioning"), "{err}");
    assert!(!Path::new("/tmp/pwned").exists());
    let listed = rig.cp.requests_by(WMRENDER_USER).iter().any(|r| {
        r.verb == "list"
            && r.uri.starts_with("/apis/machine.openshift.io/v1beta1/namespaces/openshift-machine-api/machines")
    });
    assert!(listed, "the Machines are listed with the documented role");

    // Without the inventory the provisioned Machine's instance is a target of its own (the Windows profile on port
    // 22, WMCO's user on Azure), named after its Machine until its agent names the node.
    let empty = rig.inventory(&[]);
    let (rc, report, _, err) = rig.sync(&empty, &["--dry-run", "--keep-going"]);
    assert_eq!(rc, 3, "{err}");
    let n = &report["nodes"][0];
    assert_eq!(
        (n["name"].as_str(), n["address"].as_str(), n["status"].as_str()),
        (Some("win-m-ready"), Some(one), Some("failed")),
        "{report}"
    );
    assert_eq!(report["nodes"].as_array().unwrap().len(), 1);
    assert!(rig.writes().is_empty(), "a dry run writes nothing: {:?}", rig.writes());
}

#[test]
fn prune_nodes_deconfigures_a_node_that_left_then_deletes_its_node_and_keeps_one_whose_deconfigure_failed() {
    let rig = Rig::new();
    let [one, two, three] = rig.addresses();
    rig.node("node-00", one, true);
    rig.node("node-gone", two, true);
    rig.node("not-ours", three, false);
    // The first sync configures both and records, in the cluster where no node can write, how it logged in to each
    // and the host key it verified; nothing on the Nodes, which their kubelets may rewrite.
    let both = rig.inventory(&[("node-00", one), ("node-gone", two)]);
    let (rc, _, _, err) = rig.sync(&both, &[]);
    assert_eq!(rc, 0, "{err}");
    let mut login = rig.login("node-gone").expect("node-gone's login record");
    let keys = login.as_object_mut().unwrap().remove("hostKeys").expect("the host key verified");
    assert!(keys[0].as_str().is_some_and(|k| k.starts_with("ssh-")), "{keys}");
    assert_eq!(
        login,
        json!({ "target": "node-gone", "address": two, "user": "root", "port": 22,
                "root": rig.path("node-gone").to_str().unwrap(), "nodeName": "node-gone" })
    );
    let gone = rig.get("/api/v1/nodes/node-gone").unwrap();
    assert!(gone["metadata"]["annotations"]["wmrender.dev/ssh"].is_null(), "{gone}");
    assert!(rig.path("node-gone/C/k/kubelet.conf").exists());

    // node-gone leaves the inventory. --dry-run names it and changes nothing.
    let one = rig.inventory(&[("node-00", one)]);
    let before = rig.writes().len();
    let (rc, report, _, err) = rig.sync(&one, &["--prune-nodes", "--dry-run"]);
    assert_eq!(rc, 1, "{err}");
    assert_eq!(report["pruned"], json!([{ "node": "node-gone", "address": two, "status": "would-prune" }]));
    assert!(err.contains(&format!("node-gone ({two}) would be pruned")), "{err}");
    assert_eq!(rig.writes().len(), before);
    assert!(rig.get("/api/v1/nodes/node-gone").is_some() && rig.path("node-gone/C/k/kubelet.conf").exists());

    // A file deconfigure cannot remove (a folder in its place) fails it: the Node is kept, exit 3.
    let kubelet_conf = rig.path("node-gone/C/k/kubelet.conf");
    std::fs::remove_file(&kubelet_conf).unwrap();
    std::fs::create_dir_all(kubelet_conf.join("in-the-way")).unwrap();
    let (rc, report, _, err) = rig.sync(&one, &["--prune-nodes"]);
    assert_eq!(rc, 3, "{err}");
    let p = &report["pruned"][0];
    assert_eq!((p["node"].as_str(), p["status"].as_str()), (Some("node-gone"), Some("failed")), "{report}");
    assert!(p["error"].as_str().unwrap().contains(r"cannot remove C:\k\kubelet.conf"), "{p}");
    assert!(err.contains(&format!("node node-gone ({two}) not pruned")), "{err}");
    assert!(rig.get("/api/v1/nodes/node-gone").is_some(), "a failed deconfigure keeps the Node");
    assert!(!rig.writes().iter().any(|w| w.starts_with("delete")));

    // Once it can finish: cordoned and drained (a pod still runs there), deconfigured over SSH (every delivered file
    // and the manifest gone), then deleted.
    std::fs::remove_dir_all(&kubelet_conf).unwrap();
    rig.cp.namespace("apps");
    rig.cp.admin().seed(&json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "web", "namespace": "apps",
                      "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d9",
                                            "uid": "00000000-0000-0000-0000-000000000001", "controller": true }] },
        "spec": { "nodeName": "node-gone", "terminationGracePeriodSeconds": 0,
                  "containers": [{ "name": "web", "image": "mcr.microsoft.com/windows/nanoserver:ltsc2022" }] },
    }));
    let (rc, report, _, err) = rig.sync(&one, &["--prune-nodes"]);
    assert_eq!(rc, 0, "{err}");
    let p = &report["pruned"][0];
    assert_eq!((p["status"].as_str(), p["deconfigure"]["status"].as_str()), (Some("pruned"), Some("converged")));
    assert_eq!(p["evicted"], json!(["apps/web"]), "drained before it was deconfigured: {report}");
    assert!(rig.get("/api/v1/namespaces/apps/pods/web").is_none());
    let writes = rig.writes();
    let at = |w: &str| writes.iter().position(|x| x.starts_with(w)).unwrap_or_else(|| panic!("{w}: {writes:?}"));
    assert!(at("create /api/v1/namespaces/apps/pods/web/eviction") < at("delete /api/v1/nodes/node-gone"));
    assert!(support::read_tree(&rig.path("node-gone")).is_empty(), "{:?}", support::read_tree(&rig.path("node-gone")));
    assert!(rig.get("/api/v1/nodes/node-gone").is_none());
    assert!(rig.login("node-gone").is_none(), "its login record goes last");
    assert!(rig.get("/api/v1/nodes/node-00").is_some() && rig.get("/api/v1/nodes/not-ours").is_some());
    assert!(rig.writes().contains(&"delete /api/v1/nodes/node-gone".to_string()), "{:?}", rig.writes());
    assert!(rig.path("node-00/C/k/kubelet.conf").exists());
}

#[test]
fn two_targets_reached_through_one_address_each_keep_their_own_node_and_only_the_one_that_left_is_pruned() {
    let rig = Rig::new();
    let [one, ..] = rig.addresses();
    // Two posix staging hosts on one machine: one address, one sshd, two roots; a Node each, both at that address.
    rig.node("stays", one, true);
    rig.node("leaves", one, true);
    let both = rig.inventory(&[("stays", one), ("leaves", one)]);
    let (rc, _, _, err) = rig.sync(&both, &[]);
    assert_eq!(rc, 0, "{err}");
    // Each host's record says how that host is reached.
    for name in ["stays", "leaves"] {
        let login = rig.login(name).unwrap();
        assert_eq!(login["root"], rig.path(name).to_str().unwrap(), "{name}: {login}");
    }
    // `leaves` leaves the inventory: its host is deconfigured and its Node deleted; `stays` keeps both.
    let one = rig.inventory(&[("stays", one)]);
    let (rc, report, _, err) = rig.sync(&one, &["--prune-nodes"]);
    assert_eq!(rc, 0, "{err}");
    let pruned: Vec<(&str, &str)> = report["pruned"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["node"].as_str().unwrap(), p["status"].as_str().unwrap()))
        .collect();
    assert_eq!(pruned, [("leaves", "pruned")], "{report}");
    assert!(rig.get("/api/v1/nodes/leaves").is_none());
    assert!(rig.get("/api/v1/nodes/stays").is_some());
    assert!(support::read_tree(&rig.path("leaves")).is_empty(), "the host that left is deconfigured");
    assert!(rig.path("stays/C/k/kubelet.conf").exists(), "the host that stays keeps its files");
}

/// More hosts leaving at once than `--max-prune` allows: none is pruned, the run fails and says why; raised for that
/// change, they go.
#[test]
fn prune_nodes_over_the_budget_prunes_none() {
    let rig = Rig::new();
    let [one, two, three] = rig.addresses();
    let all = [("node-a", one), ("node-b", two), ("node-c", three)];
    for (name, address) in all {
        rig.node(name, address, true);
    }
    let (rc, _, _, err) = rig.sync(&rig.inventory(&all), &[]);
    assert_eq!(rc, 0, "{err}");
    // Two of three leave: the default budget (25%, rounded up: 1) holds them both back.
    let one = rig.inventory(&all[..1]);
    let (rc, report, _, err) = rig.sync(&one, &["--prune-nodes"]);
    assert_eq!(rc, 3, "{err}");
    assert!(report["pruneRefused"].as_str().is_some_and(|w| w.contains("2 of the 3")), "{report}");
    assert!(err.contains("not pruned") && err.contains("--max-prune"), "{err}");
    assert!(rig.get("/api/v1/nodes/node-b").is_some() && rig.path("node-b/C/k/kubelet.conf").exists());
    assert!(!rig.writes().iter().any(|w| w.starts_with("delete") || w.contains("eviction")), "{:?}", rig.writes());
    // --dry-run says the same.
    let (rc, report, _, _) = rig.sync(&one, &["--prune-nodes", "--dry-run"]);
    assert_eq!(rc, 3);
    assert!(report["pruneRefused"].is_string(), "{report}");
    // Meant: raised for the change, both go.
    let (rc, report, _, err) = rig.sync(&one, &["--prune-nodes", "--max-prune", "2"]);
    assert_eq!(rc, 0, "{err}");
    let pruned: Vec<&str> =
        report["pruned"].as_array().unwrap().iter().map(|p| p["status"].as_str().unwrap()).collect();
    assert_eq!(pruned, ["pruned", "pruned"], "{report}");
    assert!(rig.get("/api/v1/nodes/node-b").is_none() && rig.get("/api/v1/nodes/node-c").is_none());
    // A budget that is neither a number nor a percentage is a usage error.
    let (rc, _, _, err) = rig.sync(&one, &["--prune-nodes", "--max-prune", "half"]);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("not a number of nodes or a percentage"), "{err}");
}

#[test]
fn prune_nodes_without_kubeconfig_is_a_usage_error() {
    let o = wmrender(&["sync", "--rendered", "x", "--identity", "y", "--prune-nodes"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("--kubeconfig"), "{}", stderr(&o));
}

#[test]
fn the_exporters_serving_certificate_comes_from_the_service_ca_once_it_issued_one() {
    let rig = Rig::new();
    let [one, ..] = rig.addresses();
    rig.node("node-00", one, false);
    let inv = rig.inventory(&[("node-00", one)]);
    let cert_file = rig.path("node-00/C/k/tls/certs/tls.crt");

    // The rendered Service is applied, but no service CA has answered yet: nothing to push, and the sync goes on
    // (windows_exporter is optional; the agent reports it left out).
    let text = std::fs::read_to_string(rig.path("rendered/cluster/service-windows-exporter.yaml")).unwrap();
    let service: Value = serde_saphyr::from_str(&text).unwrap();
    assert_eq!(service["metadata"]["annotations"][support::played::SERVING_CERT_SECRET], "windows-exporter-tls");
    rig.cp.admin().seed(&service);
    let (rc, _, _, err) = rig.sync(&inv, &[]);
    assert_eq!(rc, 0, "{err}");
    assert!(!cert_file.exists(), "no certificate before the service CA issued one");

    // The service CA operator (played) issues the Secret for the Service; the next sync fetches it with the
    // documented role and pushes it.
    let ca = support::played::ServiceCa::start(&rig.cp);
    let path = "/api/v1/namespaces/wmrender/secrets/windows-exporter-tls";
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let secret = loop {
        if let Some(s) = rig.get(path) {
            break s;
        }
        assert!(std::time::Instant::now() < deadline, "the service CA issued no certificate");
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let data = |k: &str| {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.decode(secret["data"][k].as_str().unwrap()).unwrap()
    };
    let (rc, report, out, err) = rig.sync(&inv, &[]);
    assert_eq!(rc, 0, "{err}\n{out}");
    let added = &report["nodes"][0]["added"];
    assert!(added.as_array().unwrap().contains(&json!(r"C:\k\tls\certs\tls.crt")), "{report}");
    assert_eq!(std::fs::read(&cert_file).unwrap(), data("tls.crt"));
    assert_eq!(std::fs::read(rig.path("node-00/C/k/tls/certs/tls.key")).unwrap(), data("tls.key"));
    // It is the exporter's: it verifies against the service CA for the Service's name.
    let ca_file = rig.path("service-ca.crt");
    std::fs::write(&ca_file, &ca.ca_pem).unwrap();
    let verify = std::process::Command::new("openssl")
        .args(["verify", "-CAfile", ca_file.to_str().unwrap(), "-verify_hostname", "windows-exporter.wmrender.svc"])
        .arg(&cert_file)
        .output()
        .unwrap();
    assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stderr));
    // The key is on the node and nowhere else.
    let key = String::from_utf8(data("tls.key")).unwrap();
    let key_line = key.lines().nth(1).unwrap();
    assert!(!out.contains(key_line) && !err.contains(key_line));
    for (file, bytes) in support::read_tree(rig.work.path()) {
        if !file.starts_with("node-00/") {
            assert!(!String::from_utf8_lossy(&bytes).contains(key_line), "{file} holds the exporter's key");
        }
    }
    let fetched =
        rig.cp.requests_by(WMRENDER_USER).iter().filter(|r| r.uri == path).map(|r| r.code).collect::<Vec<_>>();
    assert!(fetched.contains(&200) && !fetched.contains(&403), "{fetched:?}");
}
