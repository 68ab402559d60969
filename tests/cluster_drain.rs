//! Graceful reboots and drained upgrades (`wmrender reboot`, `sync --reboot`, sync's binary upgrades) against a real
//! kube-apiserver (tests/support/apiserver.rs) — the Eviction API answering 429 while a PodDisruptionBudget allows no
//! disruption, graceful pod deletion, 409 on a stale resourceVersion — and a real OpenSSH server with posix-profile
//! nodes, each at an address of its own (a network namespace the test makes). `wmrender reboot` runs as a user holding
//! only the documented `wmrender-reboot` role, `sync` as one holding `wmrender-sync`. A thread plays the kubelets and
//! the disruption controller (tests/support/played.rs): when a node's reboot command has run (it writes
//! `<root>/reboot-requested`), the Node goes NotReady, then comes back Ready with a new boot ID; a second after a pod
//! was evicted its kubelet confirms the deletion, so a client that does not wait for it sees it still there.

#![cfg(feature = "cluster")]

mod support;

use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use support::apiserver::{ControlPlane, Kube, WMRENDER_USER};
use support::netns::SshHost;
use support::played;
use support::sshd::Sshd;
use support::{code, stderr, wmrender};

/// The user `wmrender reboot` runs as, with the `wmrender-reboot` role only.
const REBOOT_USER: &str = "wmrender-reboot-ops";

/// With the operator installed, WMCO owns the ConfigMap's BYOH host: the nodes are the inventory's.
const INPUTS: &str = "apiVersion: wmrender.dev/v1alpha1
kind: ClusterInputs
metadata:
  name: drain-test
spec:
  infrastructureID: drain-00000
  apiServerInternalURL: https://api-int.drain.example.com:6443
  platform:
    none: {}
  byoh:
  - address: 10.0.0.5
    username: Administrator
  network:
    hybridClusterNetwork: [10.132.0.0/14]
  operator:
    install: true
";

struct Rig {
    sshd: Sshd,
    cp: ControlPlane,
    work: tempfile::TempDir,
    nodes: usize,
    /// Each node's host, by name: reached at port 22 of its address.
    hosts: Vec<(String, SshHost)>,
}

impl Rig {
    fn new(nodes: usize) -> Rig {
        let sshd = Sshd::start();
        let hosts = (0..nodes).map(|i| (format!("node-{i:02}"), SshHost::new(&sshd))).collect();
        let rig = Rig { sshd, cp: ControlPlane::start(), work: tempfile::tempdir().unwrap(), nodes, hosts };
        rig.cp.role_kubeconfig(&rig.path("kubeconfig"), REBOOT_USER, "wmrender-reboot");
        // The rendered cluster/ applied: wmrender's namespace, where sync keeps each host's login record.
        rig.cp.namespace("wmrender");
        rig.cp.wmrender_kubeconfig(&rig.path("kubeconfig-sync"), "wmrender-sync");
        // What sync --kubeconfig fetches before it touches a node.
        support::openshift::cluster(&rig.cp, "None");
        rig.cp.namespace("apps");
        let inputs = rig.path("wmrender.yaml");
        std::fs::write(&inputs, INPUTS).unwrap();
        let o = wmrender(&["render", "-f", inputs.to_str().unwrap(), "-o", rig.path("rendered").to_str().unwrap()]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let (mut text, mut known_hosts) = (String::from("nodes:\n"), String::new());
        for (name, host) in &rig.hosts {
            let root = rig.path(name);
            std::fs::create_dir_all(&root).unwrap();
            text.push_str(&format!(
                "- name: {name}\n  address: {}\n  port: 22\n  user: root\n  profile: posix\n  root: {}\n",
                host.address(),
                root.display()
            ));
            known_hosts.push_str(&host.known_hosts_line(&rig.sshd));
            let admin = rig.cp.admin();
            admin
                .create(
                    "/api/v1/nodes",
                    &json!({ "metadata": { "name": name, "labels": { "kubernetes.io/os": "windows" } } }),
                )
                .unwrap();
            rig.set_status(name, Some(&format!("{name}-boot-0")), "True");
        }
        std::fs::write(rig.path("nodes.yaml"), text).unwrap();
        std::fs::write(rig.path("known_hosts"), known_hosts).unwrap();
        rig
    }

    fn path(&self, name: &str) -> PathBuf {
        self.work.path().join(name)
    }

    fn s(&self, name: &str) -> String {
        self.path(name).to_str().unwrap().to_string()
    }

    /// The flags every command here needs to reach the nodes.
    fn access(&self) -> Vec<String> {
        let mut v: Vec<String> =
            vec!["--rendered".into(), self.s("rendered"), "--inventory".into(), self.s("nodes.yaml")];
        v.extend(["--identity".into(), self.sshd.path("client_ed25519").to_str().unwrap().into()]);
        v.extend(["--known-hosts".into(), self.s("known_hosts")]);
        v.extend(["--connect-timeout".into(), "5".into()]);
        v
    }

    /// `wmrender reboot NODES... ` with `extra`; (exit code, JSON report, stderr).
    fn reboot(&self, nodes: &[&str], extra: &[&str]) -> (i32, Value, String) {
        let mut args: Vec<String> = vec!["reboot".into()];
        args.extend(nodes.iter().map(|n| n.to_string()));
        args.extend(["--kubeconfig".into(), self.s("kubeconfig"), "--output".into(), "json".into()]);
        if !extra.contains(&"--reboot-timeout") {
            args.extend(["--reboot-timeout".into(), "30".into()]);
        }
        if !extra.contains(&"--drain-timeout") {
            args.extend(["--drain-timeout".into(), "60".into()]);
        }
        args.extend(self.access());
        args.extend(extra.iter().map(|e| e.to_string()));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = wmrender(&refs);
        (code(&o), serde_json::from_slice(&o.stdout).unwrap_or(Value::Null), stderr(&o))
    }

    fn sync(&self, extra: &[&str]) -> (i32, Value, String) {
        let mut args: Vec<String> = vec!["sync".into(), "--output".into(), "json".into()];
        args.extend(["--reboot-timeout".into(), "30".into(), "--drain-timeout".into(), "60".into()]);
        args.extend(self.access());
        args.extend(extra.iter().map(|e| e.to_string()));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = wmrender(&refs);
        (code(&o), serde_json::from_slice(&o.stdout).unwrap_or(Value::Null), stderr(&o))
    }

    fn admin(&self) -> &Kube {
        self.cp.admin()
    }

    fn node(&self, name: &str) -> Value {
        self.admin().get(&format!("/api/v1/nodes/{name}")).expect("the Node")
    }

    fn pod(&self, name: &str) -> Option<Value> {
        self.admin().get(&format!("/api/v1/namespaces/apps/pods/{name}"))
    }

    /// wmrender's requests whose URI holds `path_part` (e.g. `pods/web-1/eviction`), as (verb, code), from the
    /// API server's audit log.
    fn calls(&self, path_part: &str) -> Vec<(String, u16)> {
        self.cp
            .audit()
            .into_iter()
            .filter(|r| (r.user == REBOOT_USER || r.user == WMRENDER_USER) && r.uri.contains(path_part))
            .map(|r| (r.verb, r.code))
            .collect()
    }

    /// Creates `object` in the cluster (status through its subresource).
    fn put(&self, object: Value) {
        self.admin().seed(&object);
    }

    /// Plays the kubelets while `f` runs: reboots the nodes that asked for it (except `never_back`), finishes
    /// terminating pods a second after they were evicted. Returns `f`'s result and what the kubelets saw.
    fn with_kubelets<T>(&self, never_back: &[&str], f: impl FnOnce() -> T) -> (T, Kubelets) {
        let stop = AtomicBool::new(false);
        let seen = Mutex::new(Kubelets::default());
        let out = std::thread::scope(|scope| {
            scope.spawn(|| self.kubelets(never_back, &stop, &seen));
            let out = f();
            stop.store(true, Ordering::SeqCst);
            out
        });
        (out, seen.into_inner().unwrap())
    }

    fn kubelets(&self, never_back: &[&str], stop: &AtomicBool, seen: &Mutex<Kubelets>) {
        let mut last_finish = Instant::now();
        let deadline = Instant::now() + Duration::from_secs(120);
        while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
            if last_finish.elapsed() > Duration::from_secs(1) {
                for i in 0..self.nodes {
                    played::finish_terminating_once(self.admin(), &format!("node-{i:02}"));
                }
                last_finish = Instant::now();
            }
            let cordoned =
                (0..self.nodes).filter(|i| self.node(&format!("node-{i:02}"))["spec"]["unschedulable"] == true).count();
            let mut s = seen.lock().unwrap();
            s.peak_cordoned = s.peak_cordoned.max(cordoned);
            drop(s);
            for i in 0..self.nodes {
                let name = format!("node-{i:02}");
                let request = self.path(&name).join("reboot-requested");
                if !request.exists() {
                    continue;
                }
                std::fs::remove_file(&request).unwrap();
                let on_node: Vec<String> = self
                    .admin()
                    .list(&format!("/api/v1/pods?fieldSelector=spec.nodeName%3D{name}"))
                    .iter()
                    .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
                    .collect();
                let unschedulable = self.node(&name)["spec"]["unschedulable"] == true;
                let boot = self.node(&name)["status"]["nodeInfo"]["bootID"].as_str().unwrap().to_string();
                let (prefix, n) = boot.rsplit_once('-').unwrap();
                let next = format!("{prefix}-{}", n.parse::<u32>().unwrap() + 1);
                seen.lock().unwrap().reboots.push((name.clone(), on_node, unschedulable));
                if never_back.contains(&name.as_str()) {
                    continue;
                }
                self.set_status(&name, None, "False");
                std::thread::sleep(Duration::from_millis(700));
                let _ = std::fs::remove_file(self.path(&name).join("reboot-pending"));
                self.set_status(&name, Some(&next), "True");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The node's kubelet posts its status: its boot, and whether it is Ready.
    fn set_status(&self, node: &str, boot_id: Option<&str>, ready: &str) {
        let address = self.hosts.iter().find(|(n, _)| n == node).expect("a node of the rig").1.address();
        let mut status = json!({ "conditions": [{ "type": "Ready", "status": ready, "lastHeartbeatTime": played::now(),
                                                  "lastTransitionTime": played::now() }],
                                 "addresses": [{ "type": "InternalIP", "address": address },
                                               { "type": "Hostname", "address": node }] });
        if let Some(b) = boot_id {
            status["nodeInfo"] = json!({ "bootID": b, "machineID": "", "systemUUID": "", "kernelVersion": "",
                                         "osImage": "", "containerRuntimeVersion": "", "kubeletVersion": "",
                                         "kubeProxyVersion": "", "operatingSystem": "windows", "architecture": "amd64" });
        }
        self.admin().strategic_patch(&format!("/api/v1/nodes/{node}/status"), &json!({ "status": status })).unwrap();
    }
}

#[derive(Default, Debug)]
struct Kubelets {
    /// (node, the pods bound to it when its reboot command ran, whether it was cordoned then).
    reboots: Vec<(String, Vec<String>, bool)>,
    /// The most nodes cordoned at once.
    peak_cordoned: usize,
}

fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                merge(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (t, p) => *t = p.clone(),
    }
}

/// A pod bound to `node` (as the scheduler binds it), controlled by `owner` if given, its status Running (as its
/// kubelet reports it) unless `extra` says otherwise.
fn pod(name: &str, node: &str, owner: Option<(&str, &str)>, extra: Value) -> Value {
    let mut p = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": name, "namespace": "apps", "labels": { "app": name } },
        "spec": { "nodeName": node, "containers": [{ "name": "c", "image": "mcr.microsoft.com/windows/nanoserver" }],
                  "tolerations": [{ "key": "os", "operator": "Equal", "value": "Windows", "effect": "NoSchedule" }] },
        // Running and Ready, as its kubelet reports it: a healthy pod, which a budget protects.
        "status": { "phase": "Running", "conditions": [{ "type": "Ready", "status": "True" }] },
    });
    if let Some((kind, owner)) = owner {
        let api_version = "apps/v1";
        p["metadata"]["ownerReferences"] = json!([{ "apiVersion": api_version, "kind": kind, "name": owner,
                                                    "uid": "7d9c1b8e-0000-4000-8000-000000000001", "controller": true }]);
    }
    merge(&mut p, &extra);
    p
}

/// PodDisruptionBudget `apps/web` (at least one `app=web` pod available), and its status as the disruption
/// controller computes it: `allowed` disruptions now.
fn budget(rig: &Rig, allowed: i64) {
    let path = "/apis/policy/v1/namespaces/apps/poddisruptionbudgets/web";
    if rig.admin().get(path).is_none() {
        rig.admin()
            .create(
                "/apis/policy/v1/namespaces/apps/poddisruptionbudgets",
                &json!({ "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                         "metadata": { "name": "web", "namespace": "apps" },
                         "spec": { "minAvailable": 1, "selector": { "matchLabels": { "app": "web" } } } }),
            )
            .unwrap();
    }
    played::pdb_status(rig.admin(), "apps", "web", allowed, 1 + allowed);
}

/// A DaemonSet (its controller does not run: its pods are the test's).
fn daemonset(rig: &Rig, name: &str) {
    rig.put(json!({ "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": { "name": name, "namespace": "apps" },
                    "spec": { "selector": { "matchLabels": { "ds": name } },
                              "template": { "metadata": { "labels": { "ds": name } },
                                            "spec": { "containers": [{ "name": "c", "image": "exporter" }] } } } }));
}

fn outcomes(report: &Value) -> Vec<(String, String)> {
    report["nodes"]
        .as_array()
        .unwrap_or_else(|| panic!("no report: {report}"))
        .iter()
        .map(|n| (n["name"].as_str().unwrap().to_string(), n["outcome"].as_str().unwrap().to_string()))
        .collect()
}

#[test]
fn a_drain_waits_on_the_budget_skips_daemonsets_and_mirror_pods_and_the_node_reboots_and_returns() {
    let rig = Rig::new(1);
    daemonset(&rig, "exporter");
    rig.put(pod("web", "node-00", Some(("ReplicaSet", "web-5d9")), json!({})));
    rig.put(pod("exporter-x", "node-00", Some(("DaemonSet", "exporter")), json!({})));
    rig.put(pod(
        "static-kube-proxy",
        "node-00",
        None,
        json!({ "metadata": { "annotations": { "kubernetes.io/config.mirror": "abc" } } }),
    ));
    // emptyDir data is deleted (--delete-emptydir-data); it terminates gracefully, so the drain must wait.
    rig.put(pod(
        "cache",
        "node-00",
        Some(("StatefulSet", "cache")),
        json!({ "spec": { "terminationGracePeriodSeconds": 30, "volumes": [{ "name": "scratch", "emptyDir": {} }] } }),
    ));
    rig.put(pod("done-job", "node-00", None, json!({ "status": { "phase": "Succeeded", "conditions": [] } })));
    rig.put(pod("elsewhere", "node-99", None, json!({})));
    budget(&rig, 0);

    let started = Instant::now();
    let ((rc, report, err), kubelets) = rig.with_kubelets(&[], || {
        std::thread::scope(|scope| {
            // The disruption controller allows one disruption after 2 s (another replica became healthy).
            scope.spawn(|| {
                std::thread::sleep(Duration::from_secs(2));
                budget(&rig, 1);
            });
            rig.reboot(&["node-00"], &[])
        })
    });
    assert_eq!(rc, 0, "{err}");
    assert_eq!(outcomes(&report), [("node-00".to_string(), "rebooted".to_string())]);
    assert!(started.elapsed() >= Duration::from_secs(2), "the drain did not wait for the budget");
    let web = rig.calls("pods/web/eviction");
    assert!(web.len() >= 2 && web[0] == ("create".into(), 429), "{web:?}");
    assert_eq!(web.last(), Some(&("create".into(), 201)));
    // The eviction API took the one disruption the budget allowed.
    let pdb = rig.admin().get("/apis/policy/v1/namespaces/apps/poddisruptionbudgets/web").unwrap();
    assert_eq!(pdb["status"]["disruptionsAllowed"], 0, "{pdb}");
    // Evicted: web, cache (emptyDir), done-job (finished); left: the DaemonSet's and the mirror pod.
    let evicted: BTreeSet<&str> =
        report["nodes"][0]["evicted"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert_eq!(evicted, BTreeSet::from(["apps/cache", "apps/done-job", "apps/web"]));
    assert!(
        rig.calls("pods/exporter-x/eviction").is_empty() && rig.calls("pods/static-kube-proxy/eviction").is_empty()
    );
    assert!(
        rig.pod("exporter-x").is_some() && rig.pod("static-kube-proxy").is_some() && rig.pod("elsewhere").is_some()
    );
    // The reboot ran on a cordoned node whose evicted pods were all gone (the terminating one too).
    assert_eq!(kubelets.reboots.len(), 1);
    let (_, on_node, cordoned) = &kubelets.reboots[0];
    assert!(cordoned);
    assert_eq!(
        on_node.iter().map(String::as_str).collect::<BTreeSet<_>>(),
        BTreeSet::from(["exporter-x", "static-kube-proxy"])
    );
    // Back with a new boot and uncordoned, the annotation gone.
    let node = rig.node("node-00");
    assert_eq!(node["status"]["nodeInfo"]["bootID"], "node-00-boot-1");
    assert!(node["spec"]["unschedulable"].is_null(), "{node}");
    assert!(node["metadata"]["annotations"]["wmrender.dev/cordoned"].is_null(), "{node}");
}

#[test]
fn a_pod_without_a_controller_stops_the_drain_unless_forced() {
    let rig = Rig::new(1);
    rig.put(pod("bare", "node-00", None, json!({})));
    rig.put(pod("web", "node-00", Some(("ReplicaSet", "web-5d9")), json!({})));
    // A DaemonSet pod whose DaemonSet is gone is an orphan: kubectl refuses it too without --force.
    rig.put(pod("orphan", "node-00", Some(("DaemonSet", "gone")), json!({})));
    let ((rc, report, err), kubelets) = rig.with_kubelets(&[], || rig.reboot(&["node-00"], &[]));
    assert_eq!(rc, 3, "{err}");
    assert_eq!(outcomes(&report), [("node-00".to_string(), "failed".to_string())]);
    assert!(err.contains("apps/bare: it declares no controller (use --force"), "{err}");
    assert!(err.contains("apps/orphan: its DaemonSet gone is gone"), "{err}");
    // Nothing evicted, nothing rebooted, and wmrender's own cordon undone.
    assert!(rig.calls("/eviction").is_empty());
    assert!(kubelets.reboots.is_empty());
    assert!(rig.pod("bare").is_some() && rig.pod("web").is_some());
    assert!(rig.node("node-00")["spec"]["unschedulable"].is_null());

    let ((rc, _, err), kubelets) = rig.with_kubelets(&[], || rig.reboot(&["node-00"], &["--force"]));
    assert_eq!(rc, 0, "{err}");
    assert!(rig.pod("bare").is_none() && rig.pod("web").is_none() && rig.pod("orphan").is_none());
    assert_eq!(kubelets.reboots.len(), 1);
}

#[test]
fn a_node_that_does_not_come_back_stops_the_rollout_and_the_next_node_is_not_touched() {
    let rig = Rig::new(2);
    let started = Instant::now();
    let ((rc, report, err), kubelets) =
        rig.with_kubelets(&["node-00"], || rig.reboot(&["node-00", "node-01"], &["--reboot-timeout", "3"]));
    assert_eq!(rc, 3, "{err}");
    assert!(started.elapsed() >= Duration::from_secs(3), "it did not wait for the node: {err}");
    assert_eq!(
        outcomes(&report),
        [("node-00".to_string(), "not-back".to_string()), ("node-01".to_string(), "skipped".to_string())]
    );
    assert!(err.contains("node-00 did not come back") && err.contains("oc adm uncordon node-00"), "{err}");
    // node-00 stays cordoned (by wmrender, so a later run can undo it); node-01 was never patched nor rebooted.
    let n0 = rig.node("node-00");
    assert_eq!(
        (n0["spec"]["unschedulable"].as_bool(), n0["metadata"]["annotations"]["wmrender.dev/cordoned"].as_str()),
        (Some(true), Some("reboot"))
    );
    assert_eq!(rig.calls("nodes/node-01"), []);
    assert_eq!(kubelets.reboots.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(), ["node-00"]);
    assert!(!rig.path("node-01/reboot-requested").exists());
}

#[test]
fn a_node_someone_else_cordoned_stays_cordoned_after_the_reboot() {
    let rig = Rig::new(1);
    rig.admin().merge_patch("/api/v1/nodes/node-00", &json!({ "spec": { "unschedulable": true } })).unwrap();
    let ((rc, report, err), kubelets) = rig.with_kubelets(&[], || rig.reboot(&["node-00"], &[]));
    assert_eq!(rc, 0, "{err}");
    assert_eq!(report["nodes"][0]["cordonKept"], true);
    assert_eq!(kubelets.reboots.len(), 1);
    let node = rig.node("node-00");
    assert_eq!(node["status"]["nodeInfo"]["bootID"], "node-00-boot-1");
    assert_eq!(node["spec"]["unschedulable"], true, "the user's cordon was undone");
    assert!(node["metadata"]["annotations"]["wmrender.dev/cordoned"].is_null());
    assert!(rig.calls("nodes/node-00").iter().all(|(m, _)| m == "get"), "the Node was written");
}

#[test]
fn max_unavailable_is_honoured() {
    let rig = Rig::new(3);
    let ((rc, report, err), kubelets) =
        rig.with_kubelets(&[], || rig.reboot(&["node-00", "node-01", "node-02"], &["--max-unavailable", "2"]));
    assert_eq!(rc, 0, "{err}");
    assert!(outcomes(&report).iter().all(|(_, o)| o == "rebooted"), "{report}");
    assert_eq!(kubelets.reboots.len(), 3);
    assert_eq!(kubelets.peak_cordoned, 2, "never more than 2 down at once, and 2 at once");

    // A name sync does not know is the user's to fix, before any node is touched.
    let before = rig.calls("").len();
    let (rc, _, err) = rig.reboot(&["node-00", "win-zz"], &[]);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("win-zz is not a node of") && err.contains("known: node-00, node-01, node-02"), "{err}");
    assert_eq!(rig.calls("").len(), before);

    let ((rc, _, err), kubelets) = rig.with_kubelets(&[], || rig.reboot(&["node-02", "node-00"], &[]));
    assert_eq!(rc, 0, "{err}");
    assert_eq!(kubelets.peak_cordoned, 1, "one node at a time by default");
    assert_eq!(kubelets.reboots.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(), ["node-02", "node-00"]);
}

#[test]
fn a_user_missing_a_permission_of_the_drain_is_refused_before_the_node_is_cordoned() {
    let rig = Rig::new(1);
    daemonset(&rig, "exporter");
    rig.put(pod("exporter-x", "node-00", Some(("DaemonSet", "exporter")), json!({})));
    rig.put(pod("web", "node-00", Some(("ReplicaSet", "web-5d9")), json!({})));
    // The documented role without `get daemonsets`: the drain would read one only after cordoning and evicting.
    let mut role = support::rbac::documented()
        .into_iter()
        .find(|o| o["kind"] == "ClusterRole" && o["metadata"]["name"] == "wmrender-reboot")
        .unwrap();
    role["metadata"]["name"] = "partial".into();
    role["rules"].as_array_mut().unwrap().retain(|r| r["resources"] != json!(["daemonsets"]));
    rig.admin().create("/apis/rbac.authorization.k8s.io/v1/clusterroles", &role).unwrap();
    rig.admin()
        .create(
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            &json!({"metadata": {"name": "partial"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "partial"},
                    "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": REBOOT_USER}]}),
        )
        .unwrap();
    rig.admin()
        .delete(&format!("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/wmrender-reboot-{REBOOT_USER}"))
        .unwrap();
    let ((rc, report, err), kubelets) = rig.with_kubelets(&[], || rig.reboot(&["node-00"], &[]));
    assert_eq!(rc, 3, "{err}");
    assert_eq!(outcomes(&report), [("node-00".to_string(), "failed".to_string())]);
    assert!(err.contains("may not get daemonsets.apps") && err.contains("wmrender-reboot"), "{err}");
    let node = rig.node("node-00");
    assert!(node["spec"]["unschedulable"].is_null(), "not cordoned: {node}");
    assert!(rig.calls("/eviction").is_empty() && kubelets.reboots.is_empty());
    assert!(rig.pod("web").is_some());
}

#[test]
fn the_drain_time_out_bounds_the_evictions_of_a_budget_that_never_allows_one() {
    let rig = Rig::new(1);
    rig.put(pod("web", "node-00", Some(("ReplicaSet", "web-5d9")), json!({})));
    budget(&rig, 0);
    let started = Instant::now();
    let ((rc, report, err), kubelets) = rig.with_kubelets(&[], || rig.reboot(&["node-00"], &["--drain-timeout", "5"]));
    let took = started.elapsed();
    assert_eq!(rc, 3, "{err}");
    assert!(took < Duration::from_secs(15), "--drain-timeout 5 took {took:?}: {err}");
    assert!(err.contains("did not finish within 5s") && err.contains("apps/web could not be evicted"), "{err}");
    assert_eq!(outcomes(&report), [("node-00".to_string(), "failed".to_string())]);
    assert!(kubelets.reboots.is_empty(), "no reboot after a failed drain");
    // wmrender's own back-off (0.5 s, 1 s, 2 s, 4 s…) within the 5 s: a handful of tries, no library retries.
    let web = rig.calls("pods/web/eviction");
    assert!((3..=6).contains(&web.len()) && web.iter().all(|c| c == &("create".to_string(), 429)), "{web:?}");
    assert!(rig.pod("web").is_some());
}

#[test]
fn sync_drains_a_node_before_replacing_a_running_binary_and_refuses_without_the_cluster() {
    let rig = Rig::new(1);
    let payload = rig.path("payload");
    std::fs::create_dir_all(payload.join("C/k")).unwrap();
    std::fs::write(payload.join("C/k/kubelet.exe"), b"kubelet v1").unwrap();
    let p = payload.to_str().unwrap().to_string();
    let (rc, _, err) = rig.sync(&["--payload", &p]);
    assert_eq!(rc, 0, "a first install replaces nothing: {err}");

    std::fs::write(payload.join("C/k/kubelet.exe"), b"kubelet v2").unwrap();
    let (rc, report, err) = rig.sync(&["--payload", &p]);
    assert_eq!(rc, 3, "{err}");
    assert!(
        report["nodes"][0]["error"]
            .as_str()
            .unwrap()
            .contains("refusing to replace C:\\k\\kubelet.exe under running pods: give --kubeconfig"),
        "{report}"
    );
    assert_eq!(std::fs::read(rig.path("node-00/C/k/kubelet.exe")).unwrap(), b"kubelet v1");

    rig.put(pod(
        "web",
        "node-00",
        Some(("ReplicaSet", "web-5d9")),
        json!({ "spec": { "terminationGracePeriodSeconds": 30 } }),
    ));
    // What the node holds when the Node is first seen cordoned.
    let at_cordon = Mutex::new(None);
    let ((rc, report, err), _) = rig.with_kubelets(&[], || {
        let done = AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                while !done.load(Ordering::SeqCst) && at_cordon.lock().unwrap().is_none() {
                    if rig.node("node-00")["spec"]["unschedulable"] == true {
                        *at_cordon.lock().unwrap() = Some(std::fs::read(rig.path("node-00/C/k/kubelet.exe")).unwrap());
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            });
            let out = rig.sync(&["--payload", &p, "--kubeconfig", &rig.s("kubeconfig-sync")]);
            done.store(true, Ordering::SeqCst);
            out
        })
    });
    assert_eq!(rc, 0, "{err}");
    assert_eq!(report["nodes"][0]["evicted"], json!(["apps/web"]), "{report}");
    assert_eq!(at_cordon.into_inner().unwrap().as_deref(), Some(&b"kubelet v1"[..]), "cordoned before the swap");
    assert_eq!(std::fs::read(rig.path("node-00/C/k/kubelet.exe")).unwrap(), b"kubelet v2");
    assert!(rig.pod("web").is_none());
    assert!(rig.node("node-00")["spec"]["unschedulable"].is_null(), "uncordoned once Ready");
}

#[test]
fn a_new_credential_read_at_start_is_delivered_on_a_drained_node_and_one_reloaded_is_not_drained_for() {
    let rig = Rig::new(1);
    let kc = rig.s("kubeconfig-sync");
    let (kubelet_ca, bootstrap_ca) = (rig.s("kubelet-ca.crt"), rig.s("bootstrap-ca.crt"));
    std::fs::write(&kubelet_ca, support::certificate("kubelet-ca-1")).unwrap();
    std::fs::write(&bootstrap_ca, support::certificate("bootstrap-ca-1")).unwrap();
    let creds = ["--kubelet-ca", kubelet_ca.as_str(), "--bootstrap-ca", bootstrap_ca.as_str()];
    let with_cluster = [&creds[..], &["--kubeconfig", kc.as_str()]].concat();
    let ((rc, _, err), _) = rig.with_kubelets(&[], || rig.sync(&with_cluster));
    assert_eq!(rc, 0, "a first delivery replaces nothing: {err}");
    rig.put(pod("web", "node-00", Some(("ReplicaSet", "web-5d9")), json!({})));

    // kubelet reloads its client CA file: a rotation restarts nothing and needs no drain.
    std::fs::write(&kubelet_ca, support::certificate("kubelet-ca-2")).unwrap();
    let ((rc, report, err), _) = rig.with_kubelets(&[], || rig.sync(&with_cluster));
    assert_eq!(rc, 0, "{err}");
    assert_eq!(report["nodes"][0]["changed"], json!([r"C:\k\kubelet-ca.crt"]), "{report}");
    assert!(report["nodes"][0]["evicted"].is_null(), "{report}");
    assert!(rig.pod("web").is_some() && rig.calls("/eviction").is_empty(), "nothing was evicted");

    // hybrid-overlay-node reads the bootstrap CA once, at start: its rotation restarts networking, so it is
    // delivered on a drained node, as a binary upgrade is, or refused without the cluster.
    let rotated = support::certificate("bootstrap-ca-2");
    std::fs::write(&bootstrap_ca, &rotated).unwrap();
    let (rc, report, err) = rig.sync(&creds);
    assert_eq!(rc, 3, "{err}");
    let refused = report["nodes"][0]["error"].as_str().unwrap_or_default();
    assert!(refused.contains(r"refusing to replace C:\k\bootstrap-ca.crt under running pods"), "{report}");
    let ((rc, report, err), _) = rig.with_kubelets(&[], || rig.sync(&with_cluster));
    assert_eq!(rc, 0, "{err}");
    assert_eq!(report["nodes"][0]["evicted"], json!(["apps/web"]), "{report}");
    assert!(rig.pod("web").is_none());
    assert_eq!(std::fs::read_to_string(rig.path("node-00/C/k/bootstrap-ca.crt")).unwrap(), rotated);
    assert!(rig.node("node-00")["spec"]["unschedulable"].is_null(), "uncordoned once Ready");
}

#[test]
fn sync_reboot_reboots_the_nodes_whose_apply_asks_for_it() {
    let rig = Rig::new(2);
    std::fs::write(rig.path("node-01/reboot-pending"), "").unwrap();
    let kc = rig.s("kubeconfig-sync");
    let (rc, _, err) = rig.sync(&["--reboot"]);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("sync --reboot needs --kubeconfig"), "{err}");

    let ((rc, report, err), kubelets) = rig.with_kubelets(&[], || rig.sync(&["--reboot", "--kubeconfig", &kc]));
    assert_eq!(rc, 0, "{err}");
    let n = report["nodes"].as_array().unwrap();
    assert_eq!((n[0]["rebootRequired"].as_bool(), n[0]["rebooted"].as_bool()), (Some(false), None));
    assert_eq!((n[1]["rebootRequired"].as_bool(), n[1]["rebooted"].as_bool()), (Some(true), Some(true)), "{report}");
    assert_eq!(kubelets.reboots.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(), ["node-01"]);
    assert_eq!(rig.node("node-01")["status"]["nodeInfo"]["bootID"], "node-01-boot-1");
    assert_eq!(rig.node("node-00")["status"]["nodeInfo"]["bootID"], "node-00-boot-0");
    assert!(rig.node("node-01")["spec"]["unschedulable"].is_null());
}
