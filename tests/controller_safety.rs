//! The controller, safe by construction (issue 35), against a real kube-apiserver as the user holding exactly the
//! documented `wmrender-controller` role, with posix-profile hosts behind a real sshd (each at an address of a network
//! namespace the test makes):
//!
//! - identity only from what a node cannot write: a node that writes a neighbour's addresses into its own status
//!   gets no serving certificate naming them; a Machine holding a hostile address is never contacted, and that is
//!   said in all four places (a log line, an Event on the Machine, `wmrender status` and its JSON, a metric);
//! - nothing on a desired state it could not read: an inventory that does not parse and a cut-short
//!   `manifest.json`, under a running controller with configured nodes, cause no eviction, cordon, deconfigure or
//!   delete; they are reported (log with the file and line, an Event on the Lease, status, readiness) and the
//!   controller resumes by itself once they read again; a prune over `--max-prune` prunes none and says why; a
//!   restarted controller verifies the hosts' keys from its login records, without `--accept-new`;
//! - no head-of-line blocking: a Machine provisioned while a rollout waits on a slow drain starts its sync within
//!   seconds.
//!
//! Played (tests/support/played.rs): the Machine API, kubelet on each host (its TLS bootstrap with the delivered
//! bootstrap kubeconfig, its Node with the delivered taints), the CSR signer, the node lifecycle and disruption
//! controllers. Posix hosts run no agent: their "agent" is the posix apply script, which reports nothing on a Node.
#![cfg(feature = "cluster")]

mod support;

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::apiserver::WMRENDER_USER;
use support::controller_manager::{CSR_SIGNING, ControllerManager, NODE_LIFECYCLE};
use support::controller_rig::{Rig, StopOnDrop, configured, free_port, http_get, inputs, kubelets, metrics};
use support::played::{CSRS, MACHINES, MachineApi};

/// The inputs of these tests, with these BYOH hosts (their addresses).
fn with_byoh(addresses: &[&str]) -> String {
    inputs("safe", addresses)
}

/// The Events in `namespace` about the object named `name`, as (reason, message).
fn events(rig: &Rig, namespace: &str, name: &str) -> Vec<(String, String)> {
    rig.cp
        .admin()
        .list(&format!("/api/v1/namespaces/{namespace}/events"))
        .iter()
        .filter(|e| e["involvedObject"]["name"] == name)
        .map(|e| (e["reason"].as_str().unwrap_or("").to_string(), e["message"].as_str().unwrap_or("").to_string()))
        .collect()
}

/// Whether the CSR was approved (or given a certificate).
fn approved(rig: &Rig, csr: &str) -> bool {
    let c = rig.cp.admin().get(&format!("{CSRS}/{csr}")).unwrap_or(Value::Null);
    !c["status"]["certificate"].is_null()
        || c["status"]["conditions"].as_array().is_some_and(|l| l.iter().any(|x| x["type"] == "Approved"))
}

/// What the controller's user did that disturbs a node, from the API server's audit log: evictions, Node deletes,
/// and the Node patches that cordon (a merge patch setting `unschedulable`, which the audit log does not show; the
/// Nodes are read instead by the caller).
fn disturbing(rig: &Rig, since: usize) -> Vec<String> {
    rig.cp.requests_by(WMRENDER_USER)[since..]
        .iter()
        .filter(|r| {
            (r.verb == "create" && r.uri.ends_with("/eviction")) || (r.verb == "delete" && r.uri.contains("/nodes/"))
        })
        .map(|r| r.to_string())
        .collect()
}

#[test]
fn a_node_gets_no_certificate_for_a_neighbours_names_and_a_hostile_machine_is_refused_and_said_everywhere() {
    let rig = Rig::start(&["m1", "m2"]);
    rig.render(&with_byoh(&[]));
    rig.write_inventory();
    let (m1_address, m2_address) = (rig.address("m1"), rig.address("m2"));
    let (_controllers, _machine_api) =
        (ControllerManager::start(&rig.cp, &[CSR_SIGNING, NODE_LIFECYCLE]), MachineApi::start(&rig.cp));
    let stop = std::sync::atomic::AtomicBool::new(false);
    let joined = std::sync::Mutex::new(Vec::new());
    let port = free_port();
    let pwned = rig.path("pwned");
    std::thread::scope(|s| {
        s.spawn(|| kubelets(&rig, &stop, &joined));
        let _stop_kubelets = StopOnDrop(&stop);
        let _a = rig.controller("a", port);
        MachineApi::provision(
            rig.cp.admin(),
            "safe-00000-windows-worker-us-west-2a-0",
            "aws:///us-west-2a/i-0",
            &[("InternalIP", m1_address)],
        );
        // A Machine whose address is a command line: never contacted, whatever it says.
        let hostile = format!("{m2_address} -oProxyCommand=touch {}", pwned.display());
        MachineApi::provision(
            rig.cp.admin(),
            "safe-00000-windows-worker-us-west-2a-evil",
            "aws:///us-west-2a/i-e",
            &[("InternalIP", &hostile)],
        );
        rig.wait("m1 configured", Duration::from_secs(120), || rig.node("m1").is_some_and(|n| configured(&n)));
        // Its login record was kept in the cluster, with the host key the connection verified.
        let record = format!(
            "/api/v1/namespaces/wmrender/secrets/{}",
            wmrender::lifecycle::login::secret_name("safe-00000-windows-worker-us-west-2a-0")
        );
        assert!(rig.cp.admin().get(&record).is_some(), "m1's login record");

        // m1 writes its neighbour's address and name into its own Node status (its kubelet may), and asks for a
        // serving certificate naming them: the Machine says m1 has its own address only.
        let m1 = joined.lock().unwrap().iter().find(|(n, _)| n == "m1").unwrap().1.clone();
        let kubelet = support::apiserver::Kube::new(&m1);
        kubelet
            .strategic_patch(
                "/api/v1/nodes/m1/status",
                &json!({"status": {"addresses": [{"type": "InternalIP", "address": m2_address},
                                                 {"type": "Hostname", "address": "m2"},
                                                 {"type": "InternalIP", "address": m1_address}]}}),
            )
            .unwrap();
        let key = rig.path("hostile.key");
        let names = format!("DNS:m1,DNS:m2,IP:{m1_address},IP:{m2_address}");
        let request = support::request(&key, "/O=system:nodes/CN=system:node:m1", &names);
        use base64::Engine;
        kubelet
            .create(
                CSRS,
                &json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                        "metadata": {"name": "csr-serving-m1-neighbour"},
                        "spec": {"request": base64::engine::general_purpose::STANDARD.encode(&request),
                                 "signerName": "kubernetes.io/kubelet-serving",
                                 "usages": ["digital signature", "server auth"]}}),
            )
            .unwrap();
        rig.wait("the neighbour's CSR judged", Duration::from_secs(60), || {
            rig.logs().contains("csr-serving-m1-neighbour")
        });
        assert!(!approved(&rig, "csr-serving-m1-neighbour"), "{}", rig.logs());
        let said = rig.logs().lines().find(|l| l.contains("csr-serving-m1-neighbour")).unwrap_or("").to_string();
        assert!(said.contains(m2_address) && said.contains("not among the names vouched"), "{said}");
        assert!(approved(&rig, "csr-serving-m1-m1-boot-1"), "its own serving CSR was approved");

        // The hostile Machine: a log line, an Event on it, a metric, and wmrender status (table and JSON).
        rig.wait("the hostile Machine said", Duration::from_secs(30), || {
            rig.logs().lines().any(|l| l.contains("safe-00000-windows-worker-us-west-2a-evil refused"))
        });
        rig.wait("the Event on the hostile Machine", Duration::from_secs(30), || {
            events(&rig, "openshift-machine-api", "safe-00000-windows-worker-us-west-2a-evil")
                .iter()
                .any(|(reason, message)| reason == "NotContacted" && message.contains("-oProxyCommand"))
        });
        assert!(metrics(port).contains("wmrender_controller_nodes{state=\"refused\"} 1"), "{}", metrics(port));
        let (rc, fleet, table) = rig.status();
        assert_eq!(rc, 1, "a refused host is not settled: {table}");
        let evil =
            fleet.as_array().unwrap().iter().find(|l| l["target"] == "safe-00000-windows-worker-us-west-2a-evil");
        assert_eq!(evil.map(|l| l["next"].clone()), Some(json!("refused")), "{fleet}");
        assert!(table.lines().any(|l| l.contains("-evil") && l.contains("refused")), "{table}");
    });
    assert!(!pwned.exists(), "the hostile address was never used");
    let refused: Vec<String> =
        rig.cp.requests_by(WMRENDER_USER).iter().filter(|r| r.code == 403).map(|r| r.to_string()).collect();
    assert!(refused.is_empty(), "{refused:?}");
}

#[test]
fn an_unreadable_desired_state_stops_every_step_and_is_said_until_it_reads_again() {
    let hosts = ["b1", "b2", "b3"];
    let rig = Rig::start(&hosts);
    let [b1, b2, b3] = hosts.map(|n| rig.address(n));
    rig.render(&with_byoh(&[b1, b2, b3]));
    rig.write_inventory();
    let _controllers = ControllerManager::start(&rig.cp, &[CSR_SIGNING, NODE_LIFECYCLE]);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let joined = std::sync::Mutex::new(Vec::new());
    let port = free_port();
    let all_there = || {
        hosts.iter().all(|n| {
            rig.node(n).is_some_and(|node| node["spec"]["unschedulable"].is_null())
                && rig.path(n).join("C/k/kubelet.conf").exists()
        })
    };
    let ready = || http_get(port, "/readyz");
    std::thread::scope(|s| {
        s.spawn(|| kubelets(&rig, &stop, &joined));
        let _stop_kubelets = StopOnDrop(&stop);
        let mut a = rig.controller("a", port);
        for n in &hosts {
            rig.wait(&format!("{n} configured"), Duration::from_secs(120), || {
                rig.node(n).is_some_and(|x| configured(&x))
            });
        }
        rig.wait("ready", Duration::from_secs(10), || ready().starts_with("HTTP/1.1 200"));
        // A configured host whose login record is lost (or that was configured before records were kept) gets it
        // back from Git and its Node, without being contacted.
        let record = |target: &str| {
            format!("/api/v1/namespaces/wmrender/secrets/{}", wmrender::lifecycle::login::secret_name(target))
        };
        rig.cp.admin().delete(&record(b3)).unwrap();
        // Any change the controller watches wakes a pass (a label a user adds to b3's Node).
        rig.cp
            .admin()
            .merge_patch("/api/v1/nodes/b3", &json!({"metadata": {"labels": {"example.com/team": "a"}}}))
            .unwrap();
        rig.wait("b3's login record back", Duration::from_secs(40), || rig.cp.admin().get(&record(b3)).is_some());
        let back = rig.cp.admin().get(&record(b3)).unwrap();
        use base64::Engine;
        let login: Value = serde_json::from_slice(
            &base64::engine::general_purpose::STANDARD.decode(back["data"]["login.json"].as_str().unwrap()).unwrap(),
        )
        .unwrap();
        assert_eq!((login["nodeName"].as_str(), login["hostKeys"].as_array()), (Some("b3"), None), "{login}");

        // b1 leaves Git, and in the same commit the inventory breaks: nothing is pruned while the state cannot be
        // read, and it is said with the file and line.
        let since = rig.cp.requests_by(WMRENDER_USER).len();
        rig.render(&with_byoh(&[b2, b3]));
        let inventory = std::fs::read_to_string(rig.path("nodes.yaml")).unwrap();
        std::fs::write(rig.path("nodes.yaml"), format!("nodes:\n- address: {b1}\n  port: [22\n")).unwrap();
        rig.wait("the broken inventory said", Duration::from_secs(30), || {
            rig.logs().lines().any(|l| l.contains("desired state cannot be read") && l.contains("nodes.yaml:3"))
        });
        rig.wait("not ready", Duration::from_secs(10), || ready().starts_with("HTTP/1.1 503"));
        assert!(ready().contains("nodes.yaml:3"), "{}", ready());
        assert!(metrics(port).contains("wmrender_controller_desired_state_valid 0"));
        rig.wait("the Event on the Lease", Duration::from_secs(30), || {
            events(&rig, "wmrender", "wmrender-controller")
                .iter()
                .any(|(r, m)| r == "DesiredStateUnreadable" && m.contains("nodes.yaml:3"))
        });
        let (_, fleet, table) = rig.status();
        assert_eq!(fleet[0]["next"], "blocked", "{fleet}");
        assert!(table.contains("blocked") && table.contains("nodes.yaml:3"), "{table}");
        std::thread::sleep(Duration::from_secs(6));
        assert!(all_there(), "nothing cordoned or deconfigured\n{}", rig.logs());
        assert!(disturbing(&rig, since).is_empty(), "{:?}", disturbing(&rig, since));

        // Fixed: it resumes by itself, and b1, which left, is pruned (one of three: within --max-prune 25%).
        std::fs::write(rig.path("nodes.yaml"), &inventory).unwrap();
        rig.wait("ready again", Duration::from_secs(30), || ready().starts_with("HTTP/1.1 200"));
        rig.wait("b1 pruned", Duration::from_secs(90), || rig.node("b1").is_none());
        assert!(support::read_tree(&rig.path("b1")).is_empty(), "b1 deconfigured");

        // A render cut short while it is copied (a manifest.json that ends half way): the same.
        let since = rig.cp.requests_by(WMRENDER_USER).len();
        let manifest = std::fs::read(rig.path("rendered/manifest.json")).unwrap();
        std::fs::write(rig.path("rendered/manifest.json"), &manifest[..manifest.len() / 2]).unwrap();
        rig.wait("the cut-short render said", Duration::from_secs(30), || {
            rig.logs().lines().any(|l| l.contains("desired state cannot be read") && l.contains("manifest.json:"))
        });
        rig.wait("not ready", Duration::from_secs(10), || ready().starts_with("HTTP/1.1 503"));
        std::fs::write(rig.path("rendered/manifest.json"), &manifest).unwrap();
        rig.wait("ready again", Duration::from_secs(30), || ready().starts_with("HTTP/1.1 200"));
        assert!(disturbing(&rig, since).is_empty(), "{:?}", disturbing(&rig, since));

        // Both others leave at once: more than --max-prune allows (1 of 2), so none goes, and that is said.
        rig.render(&with_byoh(&[]));
        rig.wait("the prune refused", Duration::from_secs(30), || {
            rig.logs().lines().any(|l| l.contains("not pruned") && l.contains("--max-prune"))
        });
        std::thread::sleep(Duration::from_secs(5));
        assert!(rig.node("b2").is_some() && rig.node("b3").is_some());
        assert!(rig.path("b2/C/k/kubelet.conf").exists() && rig.path("b3/C/k/kubelet.conf").exists());
        let (_, fleet, _) = rig.status();
        let held: Vec<&Value> = fleet.as_array().unwrap().iter().filter(|l| l["next"] == "refused").collect();
        assert_eq!(held.len(), 2, "{fleet}");

        // A controller started afresh, with no known_hosts and without --accept-new, verifies every host's key from
        // its login record: b2 and b3 are back in Git and synced again (its memory is new). b2 is reached with the key
        // its record holds; b3's record was rebuilt without one (lost with the record), so b3 is refused, not trusted.
        rig.render(&with_byoh(&[b2, b3]));
        let _ = a.0.kill();
        let _ = a.0.wait();
        let _ = std::fs::remove_file(rig.path("known_hosts"));
        let _b = rig.controller_with("b", free_port(), &[]);
        let log = || std::fs::read_to_string(rig.path("b.log")).unwrap_or_default();
        rig.wait("b2 synced and b3 refused by the new controller", Duration::from_secs(60), || {
            log().lines().any(|l| l.contains("wmrender-controller: b2 Configured"))
                && log()
                    .lines()
                    .any(|l| l.contains("wmrender-controller: b3 ConfigurationFailed") && l.contains("is not known"))
        });
        assert!(!log().lines().any(|l| l.contains("b2 ConfigurationFailed")), "{}", log());
    });
}

#[test]
fn a_machine_provisioned_during_a_rollout_that_waits_on_a_slow_drain_starts_its_sync_within_seconds() {
    let rig = Rig::start(&["m1", "b1", "b2", "b3"]);
    let byoh = ["b1", "b2", "b3"].map(|n| rig.address(n));
    rig.render(&with_byoh(&byoh));
    rig.write_inventory();
    let payload = rig.path("payload");
    std::fs::create_dir_all(payload.join("C/k")).unwrap();
    std::fs::write(payload.join("C/k/kubelet.exe"), b"kubelet v1").unwrap();
    let (_controllers, _machine_api) =
        (ControllerManager::start(&rig.cp, &[CSR_SIGNING, NODE_LIFECYCLE]), MachineApi::start(&rig.cp));
    let stop = std::sync::atomic::AtomicBool::new(false);
    let joined = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        s.spawn(|| kubelets(&rig, &stop, &joined));
        let _stop_kubelets = StopOnDrop(&stop);
        let p = payload.to_str().unwrap();
        let _a = rig.controller_with(
            "a",
            free_port(),
            &["--accept-new", "--payload", p, "--max-unavailable", "1", "--parallel", "2"],
        );
        for n in ["b1", "b2", "b3"] {
            rig.wait(&format!("{n} configured"), Duration::from_secs(120), || {
                rig.node(n).is_some_and(|x| configured(&x))
            });
        }
        // A pod on each BYOH node that a budget protects: each drain waits (up to --drain-timeout, 30 s).
        rig.cp.namespace("apps");
        for n in ["b1", "b2", "b3"] {
            rig.cp.admin().seed(&json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": { "name": format!("web-{n}"), "namespace": "apps", "labels": { "app": "web" },
                              "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d9",
                                                    "uid": "7d9c1b8e-0000-4000-8000-000000000001", "controller": true }] },
                "spec": { "nodeName": n, "containers": [{ "name": "c", "image": "mcr.microsoft.com/windows/nanoserver" }] },
                "status": { "phase": "Running", "conditions": [{ "type": "Ready", "status": "True" }] },
            }));
        }
        rig.cp
            .admin()
            .create(
                "/apis/policy/v1/namespaces/apps/poddisruptionbudgets",
                &json!({ "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                         "metadata": { "name": "web", "namespace": "apps" },
                         "spec": { "minAvailable": 3, "selector": { "matchLabels": { "app": "web" } } } }),
            )
            .unwrap();
        support::played::pdb_status(rig.cp.admin(), "apps", "web", 0, 3);
        // A new kubelet and a new render: every node's binary changes, each under a drain, one at a time.
        std::fs::write(payload.join("C/k/kubelet.exe"), b"kubelet v2").unwrap();
        let moved = "hybridClusterNetwork: [10.132.0.0/14]\n    serviceNetwork: [172.31.0.0/16]";
        rig.render(&with_byoh(&byoh).replace("hybridClusterNetwork: [10.132.0.0/14]", moved));
        rig.wait("the rollout draining", Duration::from_secs(60), || {
            rig.cp.admin().list("/api/v1/nodes").iter().any(|n| n["spec"]["unschedulable"] == true)
        });
        // While it waits on the drain, a Machine is provisioned: its first contact does not wait for the rollout.
        let provisioned = Instant::now();
        MachineApi::provision(
            rig.cp.admin(),
            "safe-00000-windows-worker-us-west-2a-0",
            "aws:///us-west-2a/i-0",
            &[("InternalIP", rig.address("m1"))],
        );
        // Its sync has started once its host holds wmrender's manifest (the journal, written first).
        rig.wait("m1's sync started", Duration::from_secs(40), || rig.path("m1/C/k/wmrender/manifest.json").exists());
        let started = provisioned.elapsed();
        assert!(started < Duration::from_secs(10), "m1's sync started {started:?} after its Machine\n{}", rig.logs());
        rig.wait("m1 configured", Duration::from_secs(60), || rig.node("m1").is_some_and(|n| configured(&n)));
        let m1 = rig.cp.admin().get(&format!("{MACHINES}/safe-00000-windows-worker-us-west-2a-0")).unwrap();
        assert_eq!(m1["status"]["nodeRef"]["name"], "m1");
    });
}
