//! `wmrender controller` end to end against a real kube-apiserver (as the user holding exactly the documented
//! `wmrender-controller` role), with posix-profile nodes behind a real sshd (each at an address of a network namespace
//! the test makes) and two replicas electing their leader through a Lease. Without any command: a MachineSet scaled
//! from 0 to 3 brings three nodes to Ready and untainted — with the leader killed half way, its successor finishing; a
//! node whose agent reports failing is tainted, with an Event saying why; a BYOH host removed from the render is
//! drained, deconfigured and its Node deleted. And faults: the API server stopped and started again (every call and
//! watch fails, then resumes), and a host whose SSH is down when its Machine appears (an Event on the Machine;
//! configured once it is back). With `--pull-from`, a new bundle reaches configured nodes by their
//! `wmrender.dev/desired-bundle` annotation, one wave of `--max-unavailable` after another, and not over SSH; with
//! `--pull-payload-from`, a new payload the same way (`wmrender.dev/desired-payload`).
//!
//! Played (tests/support/played.rs): the Machine API (the MachineSet controller's Machines, provisioned at the
//! nodes' addresses; nodelink), kubelet on each host (its TLS bootstrap with the bootstrap kubeconfig the controller
//! delivered, the Node with the delivered taints) and the agent's report on a Node (posix hosts run no agent). Real:
//! kube-controller-manager's CSR signer, token controller and node lifecycle controller
//! (tests/support/controller_manager.rs).
#![cfg(feature = "cluster")]

mod support;

use serde_json::json;
use std::time::Duration;
use support::apiserver::{ControlPlane, Kube, WMRENDER_USER};
use support::controller_manager::{CSR_SIGNING, ControllerManager, NODE_LIFECYCLE};
use support::controller_rig::{Rig, StopOnDrop, configured, free_port, inputs, kubelets, metrics};
use support::played::MachineApi;
use wmrender_contract::NodeManifest;
use wmrender_contract::node_status::{
    BUNDLE_ANNOTATION, CONDITION_TYPE, DESIRED_BUNDLE_ANNOTATION, DESIRED_PAYLOAD_ANNOTATION, PAYLOAD_ANNOTATION,
    PULLED_PAYLOAD_ANNOTATION, TAINT_KEY,
};

/// The hosts (inventory name = Node name): three for the Machines, one BYOH.
const HOSTS: [&str; 4] = ["m1", "m2", "m3", "b1"];

#[test]
fn the_controller_scales_up_taints_a_failing_node_prunes_a_removed_host_and_survives_its_leader() {
    let rig = Rig::start(&HOSTS);
    rig.render(&inputs("ctl", &[rig.address("b1")]));
    rig.write_inventory();
    let (_controllers, _machine_api) =
        (ControllerManager::start(&rig.cp, &[CSR_SIGNING, NODE_LIFECYCLE]), MachineApi::start(&rig.cp));
    let stop = std::sync::atomic::AtomicBool::new(false);
    let joined = std::sync::Mutex::new(Vec::new());
    let (port_a, port_b) = (free_port(), free_port());

    std::thread::scope(|s| {
        s.spawn(|| kubelets(&rig, &stop, &joined));
        // A failed wait panics: the played kubelets stop with it, so that the scope ends and the failure shows.
        let _stop_kubelets = StopOnDrop(&stop);
        let mut a = rig.controller("a", port_a);
        let mut b = rig.controller("b", port_b);

        // The BYOH host of the render is configured without any command.
        rig.wait("b1 configured", Duration::from_secs(120), || rig.node("b1").is_some_and(|n| configured(&n)));

        // The MachineSet scales from 0 to 3: the Machine API provisions three Machines at the hosts' addresses.
        for (i, name) in HOSTS[..3].iter().enumerate() {
            MachineApi::provision(
                rig.cp.admin(),
                &format!("ctl-00000-windows-worker-us-west-2a-{i}"),
                &format!("aws:///us-west-2a/i-{i:017}"),
                &[("InternalIP", rig.address(name))],
            );
        }
        // Half way, the leader dies; the other replica holds the Lease next and finishes.
        rig.wait("a first Machine's host reached", Duration::from_secs(60), || {
            HOSTS[..3].iter().any(|n| rig.path(n).join("C/k/wmrender/manifest.json").exists())
        });
        let lease = |cp: &ControlPlane| {
            cp.admin().get("/apis/coordination.k8s.io/v1/namespaces/wmrender/leases/wmrender-controller").unwrap()
        };
        let leader = lease(&rig.cp)["spec"]["holderIdentity"].as_str().unwrap().to_string();
        let (dead, survivor) = if leader == "a" { (&mut a, "b") } else { (&mut b, "a") };
        dead.0.kill().unwrap();
        let _ = dead.0.wait();
        for name in &HOSTS[..3] {
            rig.wait(&format!("{name} configured"), Duration::from_secs(180), || {
                rig.node(name).is_some_and(|n| configured(&n))
            });
        }
        assert_eq!(lease(&rig.cp)["spec"]["holderIdentity"], survivor);
        for (i, name) in HOSTS[..3].iter().enumerate() {
            let m = rig
                .cp
                .admin()
                .get(&format!("{}/ctl-00000-windows-worker-us-west-2a-{i}", support::played::MACHINES))
                .unwrap();
            assert_eq!(m["status"]["nodeRef"]["name"], *name, "nodelink matched the Node to its Machine");
        }

        // m2's agent reports failing (its report, with the node's own credentials): tainted, with an Event.
        let m2 = joined.lock().unwrap().iter().find(|(n, _)| n == "m2").unwrap().1.clone();
        Kube::new(&m2)
            .strategic_patch(
                "/api/v1/nodes/m2/status",
                &json!({"status": {"conditions": [{"type": CONDITION_TYPE, "status": "False", "reason": "ApplyFailed",
                                                   "message": "kube-proxy: the service stopped"}]}}),
            )
            .unwrap();
        rig.wait("m2 tainted", Duration::from_secs(60), || {
            rig.node("m2").is_some_and(|n| {
                n["spec"]["taints"].as_array().is_some_and(|l| l.iter().any(|t| t["key"] == TAINT_KEY))
            })
        });
        rig.wait("the Event on m2", Duration::from_secs(30), || {
            rig.cp.admin().list("/api/v1/namespaces/default/events").iter().any(|e| {
                e["involvedObject"]["name"] == "m2"
                    && e["reason"] == "NotConfigured"
                    && e["message"].as_str().is_some_and(|m| m.contains("kube-proxy: the service stopped"))
            })
        });

        // b1 leaves the render (Git moves on): drained, deconfigured, its Node deleted.
        rig.render(&inputs("ctl", &[]));
        rig.wait("b1 pruned", Duration::from_secs(120), || rig.node("b1").is_none());
        assert!(support::read_tree(&rig.path("b1")).is_empty(), "b1 deconfigured");
        assert!(rig.node("m1").is_some_and(|n| configured(&n)), "the others stay");

        let port = if survivor == "a" { port_a } else { port_b };
        let m = metrics(port);
        assert!(m.contains("wmrender_controller_leader 1"), "{m}");
        assert!(m.contains("wmrender_controller_nodes{state=\"configured\"} 2"), "{m}");

        // A clean stop lets the Lease go.
        let alive = if survivor == "a" { &mut a } else { &mut b };
        unsafe { libc::kill(alive.0.id() as i32, libc::SIGTERM) };
        let _ = alive.0.wait();
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    let lease =
        rig.cp.admin().get("/apis/coordination.k8s.io/v1/namespaces/wmrender/leases/wmrender-controller").unwrap();
    assert!(lease["spec"]["holderIdentity"].is_null(), "released: {lease}");
    // Everything the controllers did, with the documented role alone.
    let refused: Vec<String> =
        rig.cp.requests_by(WMRENDER_USER).iter().filter(|r| r.code == 403).map(|r| r.to_string()).collect();
    assert!(refused.is_empty(), "{refused:?}");
}

#[test]
fn the_controller_finishes_what_an_api_server_outage_and_a_host_that_was_down_interrupted() {
    let rig = Rig::start(&HOSTS);
    rig.render(&inputs("ctl", &[rig.address("b1")]));
    rig.write_inventory();
    // m2's SSH port can go down.
    let m2_ssh = &rig.host("m2").ssh;
    let (_controllers, _machine_api) =
        (ControllerManager::start(&rig.cp, &[CSR_SIGNING, NODE_LIFECYCLE]), MachineApi::start(&rig.cp));
    let stop = std::sync::atomic::AtomicBool::new(false);
    let joined = std::sync::Mutex::new(Vec::new());
    let provision = |i: usize| {
        MachineApi::provision(
            rig.cp.admin(),
            &format!("ctl-00000-windows-worker-us-west-2a-{i}"),
            &format!("aws:///us-west-2a/i-{i:017}"),
            &[("InternalIP", rig.address(HOSTS[i]))],
        );
    };

    let restarted = std::cell::Cell::new(None);
    std::thread::scope(|s| {
        s.spawn(|| kubelets(&rig, &stop, &joined));
        let _stop_kubelets = StopOnDrop(&stop);
        let _a = rig.controller("a", free_port());
        rig.wait("b1 configured", Duration::from_secs(120), || rig.node("b1").is_some_and(|n| configured(&n)));

        // The API server goes away for a while: every call and every watch of the controller fails. When it is back,
        // the watches resume and a Machine provisioned then is configured.
        rig.cp.stop_apiserver();
        std::thread::sleep(Duration::from_secs(8));
        restarted.set(Some(k8s_openapi::jiff::Timestamp::now()));
        rig.cp.start_apiserver();
        provision(0);
        rig.wait("m1 configured after the outage", Duration::from_secs(120), || {
            rig.node("m1").is_some_and(|n| configured(&n))
        });
        assert!(rig.logs().contains("watch failed"), "the outage was seen:\n{}", rig.logs());

        // m2's host is down when its Machine is provisioned: the sync fails, nothing of the node exists, and once the
        // host is back the controller (after its back-off) configures it.
        m2_ssh.set_up(false);
        provision(1);
        rig.wait("m2's sync failing", Duration::from_secs(60), || {
            rig.logs().lines().any(|l| l.contains("wmrender-controller: m2 ") && l.contains("ConfigurationFailed"))
        });
        assert!(rig.node("m2").is_none());
        // Before its Node exists, the Event is on its Machine.
        rig.wait("the Event on m2's Machine", Duration::from_secs(30), || {
            rig.cp.admin().list("/api/v1/namespaces/openshift-machine-api/events").iter().any(|e| {
                e["involvedObject"]["name"] == "ctl-00000-windows-worker-us-west-2a-1"
                    && e["reason"] == "ConfigurationFailed"
            })
        });
        m2_ssh.set_up(true);
        rig.wait("m2 configured once its host is back", Duration::from_secs(150), || {
            rig.node("m2").is_some_and(|n| configured(&n))
        });
        assert!(rig.node("m1").is_some_and(|n| configured(&n)) && rig.node("b1").is_some_and(|n| configured(&n)));
    });
    // Refused only in the first seconds of the restarted API server, before its authorizer has read the RBAC
    // objects again (a real server's start-up, which the controller rides out); never with the documented role.
    let restarted = restarted.get().expect("restarted");
    let settling = |r: &support::apiserver::Audit| {
        r.at.is_some_and(|t| t >= restarted && t < restarted + k8s_openapi::jiff::SignedDuration::from_secs(15))
    };
    let refused: Vec<String> = rig
        .cp
        .requests_by(WMRENDER_USER)
        .iter()
        .filter(|r| r.code == 403 && !settling(r))
        .map(|r| r.to_string())
        .collect();
    assert!(refused.is_empty(), "{refused:?}");
}

/// The bundle digest the controller wants, as `wmrender status` shows it.
fn desired_digest(rig: &Rig) -> String {
    let (_, fleet, human) = rig.status();
    fleet
        .as_array()
        .and_then(|l| l.iter().find_map(|line| line["desired"].as_str().filter(|d| !d.is_empty()).map(str::to_string)))
        .unwrap_or_else(|| panic!("no fleet from status: {human}"))
}

#[test]
fn with_pull_from_nodes_are_pointed_at_the_published_bundle_in_waves_of_max_unavailable() {
    const BYOH: [&str; 3] = ["p1", "p2", "p3"];
    const REPOSITORY: &str = "registry.example.com/fleet/windows-bundle";
    let rig = Rig::start(&BYOH);
    let addresses: Vec<&str> = BYOH.iter().map(|n| rig.address(n)).collect();
    rig.render(&inputs("waves", &addresses));
    rig.write_inventory();
    let _controllers = ControllerManager::start(&rig.cp, &[CSR_SIGNING, NODE_LIFECYCLE]);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let joined = std::sync::Mutex::new(Vec::new());

    // The payload the controller's init container copied: programs come over SSH, pulled bundle or not.
    let (payload, probe) = (rig.path("payload"), rig.path("payload/C/k/tools/probe.txt"));
    std::fs::create_dir_all(probe.parent().unwrap()).unwrap();
    std::fs::write(&probe, "probe 1\n").unwrap();
    let flags =
        ["--accept-new", "--pull-from", REPOSITORY, "--max-unavailable", "1", "--payload", payload.to_str().unwrap()];

    std::thread::scope(|s| {
        s.spawn(|| kubelets(&rig, &stop, &joined));
        let _stop_kubelets = StopOnDrop(&stop);
        let controller = rig.controller_with("a", free_port(), &flags);
        // First contact is SSH's, pull or not.
        for name in &BYOH {
            rig.wait(&format!("{name} configured"), Duration::from_secs(120), || {
                rig.node(name).is_some_and(|n| configured(&n))
            });
        }
        // Each node's agent reports the bundle it applied (played: posix hosts run no agent), with its credentials.
        let agent = |name: &str| Kube::new(&joined.lock().unwrap().iter().find(|(n, _)| n == name).unwrap().1.clone());
        let report = |name: &str, bundle: &str| {
            let a = agent(name);
            a.merge_patch(
                &format!("/api/v1/nodes/{name}"),
                &json!({"metadata": {"annotations": {BUNDLE_ANNOTATION: bundle}}}),
            )
            .unwrap();
            a.strategic_patch(
                &format!("/api/v1/nodes/{name}/status"),
                &json!({"status": {"conditions": [{"type": CONDITION_TYPE, "status": "True", "reason": "Converged",
                                                   "message": format!("the bundle {bundle} is applied")}]}}),
            )
            .unwrap();
        };
        let first = desired_digest(&rig);
        for name in &BYOH {
            report(name, &first);
        }
        // What each host's sync wrote: its manifest and, from a one-file change, the manifest's update.
        let manifests = || -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
            let dir = |n: &str| rig.path(n).join("C/k/wmrender");
            let read = |n: &str| std::fs::read(dir(n).join("manifest.json")).unwrap();
            BYOH.iter().map(|n| (read(n), std::fs::read(dir(n).join("manifest.json.wmrender-update")).ok())).collect()
        };
        let synced = manifests();

        // Git moves on: a new bundle. The controller points one Node at a time at it, as published; none is synced.
        let mut next = inputs("waves", &addresses);
        next.push_str("  nodeLogs:\n    maxSize: 50Mi\n");
        rig.render(&next);
        let rendered = wmrender::delivery::read_rendered(&rig.path("rendered")).unwrap();
        let reference = wmrender::controller::published_reference(&rendered, REPOSITORY);
        let second = desired_digest(&rig);
        assert_ne!(first, second);
        let pointed = || -> Vec<String> {
            BYOH.iter()
                .filter(|n| {
                    rig.node(n).is_some_and(|node| {
                        node["metadata"]["annotations"][DESIRED_BUNDLE_ANNOTATION] == reference.as_str()
                    })
                })
                .map(|n| n.to_string())
                .collect()
        };
        let mut done: Vec<String> = Vec::new();
        for wave in 1..=BYOH.len() {
            rig.wait(&format!("wave {wave}"), Duration::from_secs(60), || pointed().len() == wave);
            // Another pass of the controller (the Node watch wakes it): still one at a time.
            std::thread::sleep(Duration::from_secs(3));
            let now = pointed();
            assert_eq!(now.len(), wave, "at most --max-unavailable 1 on the way: {now:?}\n{}", rig.logs());
            let newest = now.iter().find(|n| !done.contains(n)).unwrap().clone();
            // Its agent pulls and applies it.
            report(&newest, &second);
            done.push(newest);
        }
        assert_eq!(manifests(), synced, "pulled, not synced: no host got a delivery over SSH");
        rig.wait("every node configured on the new bundle", Duration::from_secs(60), || {
            BYOH.iter().all(|n| rig.node(n).is_some_and(|n| configured(&n)))
        });
        let events = rig.cp.admin().list("/api/v1/namespaces/default/events");
        let pulls = events.iter().filter(|e| e["reason"] == "PullBundle").count();
        assert_eq!(pulls, BYOH.len(), "an Event for each Node pointed");

        // Each agent says which payload it runs (played: read from its node manifest, as the agent reads it).
        let node_manifest = |name: &str| {
            let dir = rig.path(name).join("C/k/wmrender");
            let update = std::fs::read(dir.join("manifest.json.wmrender-update")).ok();
            let manifest = std::fs::read(dir.join("manifest.json")).unwrap();
            NodeManifest::read(&manifest, update.as_deref()).unwrap().0
        };
        let report_payload = |name: &str| {
            let payload = node_manifest(name).payload_digest();
            assert!(!payload.is_empty(), "{name} holds the payload");
            let patch = json!({"metadata": {"annotations": {PAYLOAD_ANNOTATION: payload}}});
            agent(name).merge_patch(&format!("/api/v1/nodes/{name}"), &patch).unwrap();
        };
        BYOH.iter().for_each(|n| report_payload(n));
        // A new payload (a new controller image): the bundle is pulled, but programs come over SSH, to every node.
        drop(controller);
        std::fs::write(&probe, "probe 2\n").unwrap();
        let controller = rig.controller_with("b", free_port(), &flags);
        // Delivered: the file there, and the sync that brought it done (its manifest says so, applied; no journal).
        let delivered = |name: &str| {
            let (probe, journal) = (
                rig.path(name).join("C/k/tools/probe.txt"),
                rig.path(name).join("C/k/wmrender/manifest.json.wmrender-journal"),
            );
            let manifest = node_manifest(name);
            let listed = manifest.applied
                && manifest.files.iter().any(|f| {
                    f.path.as_str() == r"C:\k\tools\probe.txt"
                        && f.sha256 == wmrender_contract::sha256_hex(b"probe 2\n")
                });
            std::fs::read(probe).unwrap() == b"probe 2\n" && listed && !journal.exists()
        };
        rig.wait("the new payload on every host", Duration::from_secs(120), || BYOH.iter().all(|n| delivered(n)));
        // Once the agents say they run it, nothing more is delivered.
        BYOH.iter().for_each(|n| report_payload(n));
        let now = manifests();
        std::thread::sleep(Duration::from_secs(5));
        assert_eq!(manifests(), now, "no sync once every agent runs the payload\n{}", rig.logs());

        // The programs pulled too (`--pull-payload-from`): a payload with its payload.json, as CI publishes it. The
        // controller points one Node at a time at it as published (`wmrender.dev/desired-payload`); none is synced.
        drop(controller);
        const PAYLOAD_REPOSITORY: &str = "registry.example.com/fleet/windows-payload";
        let published = rig.path("published-payload");
        std::fs::create_dir_all(published.join("C/k")).unwrap();
        std::fs::write(published.join("C/k/probe.exe"), "probe 3\n").unwrap();
        let listed = support::wmrender(&["payload", "list", published.to_str().unwrap()]);
        assert!(listed.status.success(), "payload list: {}", String::from_utf8_lossy(&listed.stderr));
        let payload_reference =
            wmrender::controller::published_payload_reference(&published, PAYLOAD_REPOSITORY).unwrap();
        let flags = [
            "--accept-new",
            "--pull-from",
            REPOSITORY,
            "--pull-payload-from",
            PAYLOAD_REPOSITORY,
            "--max-unavailable",
            "1",
            "--payload",
            published.to_str().unwrap(),
        ];
        let _controller = rig.controller_with("c", free_port(), &flags);
        let pointed = || -> Vec<String> {
            BYOH.iter()
                .filter(|n| {
                    rig.node(n).is_some_and(|node| {
                        node["metadata"]["annotations"][DESIRED_PAYLOAD_ANNOTATION] == payload_reference.as_str()
                    })
                })
                .map(|n| n.to_string())
                .collect()
        };
        let mut done: Vec<String> = Vec::new();
        for wave in 1..=BYOH.len() {
            rig.wait(&format!("payload wave {wave}"), Duration::from_secs(60), || pointed().len() == wave);
            std::thread::sleep(Duration::from_secs(3));
            let now = pointed();
            assert_eq!(now.len(), wave, "at most --max-unavailable 1 on the way: {now:?}\n{}", rig.logs());
            let newest = now.iter().find(|n| !done.contains(n)).unwrap().clone();
            // Its agent pulls it and converges (played): it names the payload pulled, and its programs' digest stays
            // another (a pull leaves the programs the payload does not hold, as a sync does).
            let patch = json!({"metadata": {"annotations": {PULLED_PAYLOAD_ANNOTATION: payload_reference}}});
            agent(&newest).merge_patch(&format!("/api/v1/nodes/{newest}"), &patch).unwrap();
            done.push(newest);
        }
        std::thread::sleep(Duration::from_secs(5));
        assert_eq!(manifests(), now, "the payload pulled, not synced: no host got a delivery over SSH\n{}", rig.logs());
        let events = rig.cp.admin().list("/api/v1/namespaces/default/events");
        let pulls = events.iter().filter(|e| e["reason"] == "PullPayload").count();
        assert_eq!(pulls, BYOH.len(), "an Event for each Node pointed at the payload");
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    let refused: Vec<String> =
        rig.cp.requests_by(WMRENDER_USER).iter().filter(|r| r.code == 403).map(|r| r.to_string()).collect();
    assert!(refused.is_empty(), "the documented role points Nodes: {refused:?}");
}
