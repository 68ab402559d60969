//! A node's life without the operator, as `sync --kubeconfig` runs it against a real kube-apiserver (wmrender as the
//! user holding exactly the documented `wmrender-sync` role) and a posix-profile node behind a real sshd (at an
//! address of a network namespace the test makes, port 22 forwarded to the sshd on 127.0.0.1): the first boot's
//! reboot done by wmrender itself (no Node yet: no drain) and the CSRs approved in the same run; the node registered
//! with wmrender's taint (from the rendered kubelet configuration) and untainted once its agent converged; tainted
//! again when a later sync finds the agent failing, or its Node reports so.
//!
//! Real: kube-controller-manager's CSR signer and token controller (tests/support/controller_manager.rs). Played
//! (tests/support/played.rs): the host — its reboot (the posix
//! profile records the request in `<root>/reboot-requested`; the player changes `<root>/boot-id`) and its kubelet,
//! which bootstraps with the delivered bootstrap kubeconfig and registers with the delivered configuration's taints.
#![cfg(feature = "cluster")]

mod support;

use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use support::apiserver::{ControlPlane, WMRENDER_USER};
use support::controller_manager::{CSR_SIGNING, ControllerManager};
use support::netns::SshHost;
use support::played::{Kubelet, Registration};
use support::sshd::Sshd;
use support::{code, stderr, wmrender};
use wmrender::delivery::profile::REBOOT_DELAY;
use wmrender_contract::node_status::{CONDITION_TYPE, TAINT_KEY};

/// Without the operator; the BYOH host is the inventory's node (the inventory says how to reach its address, which
/// the rig puts in place of NODE-ADDRESS).
const INPUTS: &str = "apiVersion: wmrender.dev/v1alpha1
kind: ClusterInputs
metadata:
  name: lifecycle
spec:
  infrastructureID: life-00000
  apiServerInternalURL: https://api-int.life.example.com:6443
  platform:
    none: {}
  byoh:
  - address: NODE-ADDRESS
    username: Administrator
  network:
    hybridClusterNetwork: [10.132.0.0/14]
";

struct Rig {
    sshd: Sshd,
    /// node-00, reached at port 22 of its address.
    host: SshHost,
    cp: ControlPlane,
    work: tempfile::TempDir,
}

impl Rig {
    fn new() -> Rig {
        let sshd = Sshd::start();
        let host = SshHost::new(&sshd);
        let rig = Rig { sshd, host, cp: ControlPlane::start(), work: tempfile::tempdir().unwrap() };
        let file = rig.path("wmrender.yaml");
        std::fs::write(&file, INPUTS.replace("NODE-ADDRESS", rig.host.address())).unwrap();
        let o = wmrender(&["render", "-f", file.to_str().unwrap(), "-o", rig.path("rendered").to_str().unwrap()]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        std::fs::create_dir_all(rig.path("node-00")).unwrap();
        std::fs::write(rig.path("node-00/boot-id"), "boot-0").unwrap();
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
        support::openshift::cluster(&rig.cp, "None");
        // The rendered cluster/ applied: wmrender's namespace, where sync keeps each host's login record.
        rig.cp.namespace("wmrender");
        rig.cp.wmrender_kubeconfig(&rig.path("kubeconfig"), "wmrender-sync");
        rig
    }

    fn path(&self, name: &str) -> PathBuf {
        self.work.path().join(name)
    }

    fn sync(&self) -> (i32, Value, String) {
        let p = |n: &str| self.path(n).to_str().unwrap().to_string();
        let args = [
            "sync".to_string(),
            "--rendered".into(),
            p("rendered"),
            "--inventory".into(),
            p("nodes.yaml"),
            "--identity".into(),
            self.sshd.path("client_ed25519").to_str().unwrap().into(),
            "--known-hosts".into(),
            self.sshd.path("known_hosts").to_str().unwrap().into(),
            "--kubeconfig".into(),
            p("kubeconfig"),
            "--csr-timeout".into(),
            "60".into(),
            "--reboot-timeout".into(),
            "60".into(),
            "--connect-timeout".into(),
            "5".into(),
            "--output".into(),
            "json".into(),
        ];
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = wmrender(&refs);
        (code(&o), serde_json::from_slice(&o.stdout).unwrap_or(Value::Null), stderr(&o))
    }

    fn node(&self) -> Value {
        self.cp.admin().get("/api/v1/nodes/node-00").expect("the Node")
    }
}

fn ours_tainted(node: &Value) -> bool {
    node["spec"]["taints"].as_array().is_some_and(|l| l.iter().any(|t| t["key"] == TAINT_KEY))
}

/// The host's reboot, once sync asks for it: no sooner than Windows goes down after the reboot command
/// (`REBOOT_DELAY`; cutting at once would cut the command's own session before it answers, which a real node never
/// does), every SSH connection is cut, the pending flag goes, a new boot begins.
fn reboot_when_asked(rig: &Rig, deadline: Instant) -> Result<(), String> {
    let root = rig.path("node-00");
    while !root.join("reboot-requested").exists() {
        if Instant::now() > deadline {
            return Err("the node was never asked to reboot".into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(REBOOT_DELAY);
    rig.sshd.drop_connections();
    std::thread::sleep(Duration::from_millis(500));
    std::fs::remove_file(root.join("reboot-pending")).ok();
    std::fs::remove_file(root.join("reboot-requested")).ok();
    std::fs::write(root.join("boot-id"), "boot-1").unwrap();
    Ok(())
}

/// The host's kubelet: starts once sync delivered its files, bootstraps with the bootstrap kubeconfig, and registers
/// the Node with the taints of the kubelet configuration, in the host's current boot.
fn kubelet_starts(rig: &Rig, deadline: Instant) -> Result<(), String> {
    let root = rig.path("node-00");
    // Sync writes the manifest (with its journal) before the files, one by one, so each file kubelet reads is
    // waited for itself.
    let reads = ["C/k/wmrender/manifest.json", "C/k/bootstrap-kubeconfig", "C/k/kubelet.conf"];
    while !reads.iter().all(|f| root.join(f).exists()) {
        if Instant::now() > deadline {
            return Err("the bundle never arrived".into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let bootstrap: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("C/k/bootstrap-kubeconfig")).unwrap()).unwrap();
    let token = bootstrap["users"][0]["user"]["token"].as_str().unwrap().to_string();
    let config: Value = serde_json::from_str(&std::fs::read_to_string(root.join("C/k/kubelet.conf")).unwrap()).unwrap();
    let taints = config["registerWithTaints"].as_array().cloned().unwrap_or_default();
    let k = Kubelet::bootstrap(&rig.cp, &token, "node-00", &rig.path("kubelet"), Duration::from_secs(60))?;
    let reg = Registration {
        addresses: vec![("InternalIP".into(), rig.host.address().into()), ("Hostname".into(), "node-00".into())],
        taints,
        provider_id: None,
        boot_id: std::fs::read_to_string(root.join("boot-id")).unwrap(),
    };
    k.register(&reg, Duration::from_secs(60))
}

#[test]
fn a_fresh_node_is_rebooted_for_its_first_boot_joins_and_is_untainted_once_configured_in_one_sync() {
    let rig = Rig::new();
    let _controllers = ControllerManager::start(&rig.cp, &[CSR_SIGNING]);
    // The agent's first pass on a fresh host asks for a reboot (the Containers feature, on Windows).
    std::fs::write(rig.path("node-00/reboot-pending"), "").unwrap();
    let (rc, report, err) = std::thread::scope(|s| {
        let host = s.spawn(|| {
            let deadline = Instant::now() + Duration::from_secs(90);
            reboot_when_asked(&rig, deadline)?;
            kubelet_starts(&rig, deadline)
        });
        let out = rig.sync();
        host.join().unwrap().unwrap();
        out
    });
    assert_eq!(rc, 0, "{err}\n{report}");
    let n = &report["nodes"][0];
    assert_eq!((n["status"].as_str(), n["rebooted"].as_bool()), (Some("synced"), Some(true)), "{report}");
    assert_eq!(n["apply"]["bootId"], "boot-1", "the pass after the reboot");
    let approved: Vec<&str> =
        report["cluster"]["approved"].as_array().unwrap().iter().map(|a| a["kind"].as_str().unwrap()).collect();
    assert_eq!(approved, ["client", "serving"], "{report}");
    assert_eq!(report["taints"]["untainted"], json!(["node-00"]), "{report}");
    // Registered with wmrender's taint (from the rendered kubelet.conf), which sync took off: configured.
    let node = rig.node();
    assert!(!ours_tainted(&node), "{node}");
    assert_eq!(node["metadata"]["labels"]["wmrender.dev/managed"], "true");
    // No Node before the reboot: nothing to cordon or drain.
    let log = rig.cp.requests_by(WMRENDER_USER);
    assert!(log.iter().all(|r| !r.uri.contains("/pods")), "no drain: {log:?}");
    assert!(!rig.path("node-00/reboot-pending").exists());
}

#[test]
fn a_node_is_tainted_again_when_its_agent_fails_or_reports_failing_and_untainted_when_it_recovers() {
    let rig = Rig::new();
    let _controllers = ControllerManager::start(&rig.cp, &[CSR_SIGNING]);
    let (rc, report, err) = std::thread::scope(|s| {
        // No reboot asked: kubelet starts once its files are there.
        let host = s.spawn(|| kubelet_starts(&rig, Instant::now() + Duration::from_secs(90)));
        let out = rig.sync();
        host.join().unwrap().unwrap();
        out
    });
    assert_eq!(rc, 0, "{err}\n{report}");
    assert!(!ours_tainted(&rig.node()), "configured: {}", rig.node());

    // The agent fails on the next sync (a file it needs went missing): the taint goes back on, exit 3.
    let manifest = rig.path("node-00/C/k/wmrender/manifest.json");
    let text = std::fs::read_to_string(&manifest).unwrap().replace("\"applied\": true", "\"applied\": false");
    std::fs::write(&manifest, text).unwrap();
    std::fs::remove_file(rig.path("node-00/C/k/kubelet.conf")).unwrap();
    let (rc, report, err) = rig.sync();
    assert_eq!(rc, 3, "{err}\n{report}");
    assert_eq!(report["taints"]["tainted"][0]["node"], "node-00", "{report}");
    assert!(err.contains("node-00 is not configured, tainted wmrender.dev/unconfigured"), "{err}");
    assert!(ours_tainted(&rig.node()));

    // Mended (sync pushes the file again): untainted.
    let text = std::fs::read_to_string(&manifest).unwrap();
    let kubelet = "C:\\\\k\\\\kubelet.conf";
    assert!(text.contains(kubelet), "{text}");
    std::fs::write(rig.path("node-00/C/k/wmrender/manifest.json"), "{\"wmrender\":\"0\",\"files\":[]}").unwrap();
    let (rc, report, err) = rig.sync();
    assert_eq!(rc, 0, "{err}\n{report}");
    assert!(!ours_tainted(&rig.node()));

    // The agent's own report says it fails (its service's later passes): the next sync, with nothing to push,
    // taints the node.
    rig.cp
        .admin()
        .strategic_patch(
            "/api/v1/nodes/node-00/status",
            &json!({"status": {"conditions": [{"type": CONDITION_TYPE, "status": "False", "reason": "ApplyFailed",
                                           "message": "kube-proxy: the service stopped"}]}}),
        )
        .unwrap();
    let (rc, report, err) = rig.sync();
    assert_eq!(report["nodes"][0]["status"], "unchanged", "{report}");
    assert_eq!(rc, 3, "{err}");
    assert!(err.contains("kube-proxy: the service stopped"), "{err}");
    assert!(ours_tainted(&rig.node()));
}

#[test]
fn a_host_that_joined_before_is_never_rebooted_without_a_drain_even_when_the_cluster_has_no_node_for_it() {
    let rig = Rig::new();
    // kubelet's credentials are there (an earlier join; its Node may be named or addressed otherwise), and the
    // agent asks for a reboot: that is for `--reboot` or `wmrender reboot` (cordon, drain), not the first boot's.
    std::fs::create_dir_all(rig.path("node-00/C/k")).unwrap();
    std::fs::write(rig.path("node-00/C/k/kubeconfig"), "apiVersion: v1\nkind: Config\n").unwrap();
    std::fs::write(rig.path("node-00/reboot-pending"), "").unwrap();
    let (_, report, err) = rig.sync();
    let n = &report["nodes"][0];
    assert_eq!((n["rebootRequired"].as_bool(), n["rebooted"].as_bool()), (Some(true), None), "{err}\n{report}");
    assert!(!rig.path("node-00/reboot-requested").exists(), "not rebooted");
}
