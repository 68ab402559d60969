//! The whole join, end to end: a Machine-backed Windows node joins a cluster without the operator in one
//! `wmrender sync --kubeconfig` run — first contact, the first boot's reboot, the CSRs, Ready, untainted.
//!
//! - **The cluster** is a real kube-apiserver with RBAC and NodeRestriction (tests/support/apiserver.rs); wmrender
//!   runs as the user holding exactly the documented `wmrender-sync` role.
//! - **The node** is the Wine rig (tests/support/wine.rs) behind a real sshd arranged as a Windows node's
//!   (tests/support/wine_sshd.rs), reached at port 22 of an address of its own (a network namespace the test makes,
//!   forwarded to the sshd on 127.0.0.1; a real kubelet refuses a loopback node IP): sync pushes the bundle and the
//!   agent, the agent runs under Wine with the rendered services in Wine's Service Control Manager, and reports on its
//!   own Node through the real API server with the node's own credentials.
//! - **Real** beside them: kube-controller-manager's CSR signer, token controller and node lifecycle controller.
//! - **Played** (tests/support/played.rs): the Machine API (the Machine provisioned at the Wine node's address; its
//!   nodelink sets `nodeRef` only after the Node registered), kubelet (when the rendered kubelet service starts, its
//!   TLS bootstrap with the bootstrap kubeconfig sync delivered, then the Node with the delivered configuration's
//!   taints) and the service CA operator (the exporter's serving certificate for the rendered Service); the reboots
//!   (`shutdown.exe /r` is recorded by the sshd's wrapper and the Wine machine restarted); PowerShell (the fake
//!   answers each step: the Containers feature asks for a reboot once, the metadata step names the host).
//! - **Pulled** afterwards: a bundle published and signed by `wmrender publish` to Debian's `docker-registry` (TLS
//!   from a CA the cluster's proxy trusts, which sync delivers), named on the Node, pulled by the agent under Wine
//!   through the rendered mirror, verified and applied by the agent service, which watches its Node and starts a
//!   pass as soon as the desired bundle changes; each bad bundle refused with nothing changed. Then a payload
//!   published and signed the same way (kubelet changed): fetched alone, swapped in by the agent's pass with the
//!   kubelet service stopped and started again; an unsigned one refused with nothing changed.
//!
//! Needs root, openssh-server, Wine and the Windows target (`bash tests/setup.sh`).
#![cfg(all(feature = "cluster", feature = "registry"))]

mod support;

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use support::apiserver::{ControlPlane, WMRENDER_USER};
use support::controller_manager::{CSR_SIGNING, ControllerManager, NODE_LIFECYCLE};
use support::netns::SshHost;
use support::played::{self, Kubelet, MachineApi, Registration, ServiceCa};
use support::registry::{Registry, Scratch};
use support::sshd::Sshd;
use support::wine::{Wine, rig};
use support::wine_bundle::write_whole;
use support::{code, stderr, wmrender};
use wmrender::delivery::profile::REBOOT_DELAY;
use wmrender_contract::node_status::{
    AGENT_ANNOTATION, BUNDLE_ANNOTATION, CONDITION_TYPE, DESIRED_BUNDLE_ANNOTATION, DESIRED_PAYLOAD_ANNOTATION,
    PAYLOAD_ANNOTATION, PAYLOAD_PULL_CONDITION_TYPE, PULL_CONDITION_TYPE, PULLED_BUNDLE_ANNOTATION,
    PULLED_PAYLOAD_ANNOTATION, TAINT_KEY,
};
use wmrender_contract::{ApplyResult, ApplyStatus, NodePath, PullOutcome, ServicesFile, paths};

/// The name the host gives itself (AWS's metadata step): the Node's name.
const NODE: &str = "ip-10-0-0-5.ec2.internal";
const MACHINE: &str = "min-00000-windows-worker-us-west-2a-x7k2p";

fn p(path: &Path) -> String {
    path.to_str().unwrap().to_string()
}

/// Every step succeeds; the Containers feature asks for one reboot; the metadata step names the host.
fn answers() -> BTreeMap<String, Vec<(String, i32)>> {
    let ok = ("{\"ok\":true}\n".to_string(), 0);
    let mut t = BTreeMap::new();
    t.insert("*".to_string(), vec![ok.clone()]);
    t.insert("containers-feature.ps1".into(), vec![("{\"ok\":true,\"rebootRequired\":true}\n".into(), 0), ok]);
    t.insert(
        "aws-get-hostname.ps1".into(),
        vec![(format!("{{\"ok\":true,\"value\":\"{}\"}}\n", NODE.to_uppercase()), 0)],
    );
    t
}

/// `--payload`: the fake service at every service binary path, and the agent.
fn payload(wine: &Wine, rendered: &Path, root: &Path) {
    let file = rendered.join(NodePath::known(paths::SERVICES_JSON).bundle_path());
    let services = ServicesFile::parse(&std::fs::read(file).unwrap()).unwrap();
    let fake = std::fs::read(wine.exes.join("fake-service.exe")).unwrap();
    for b in services.binaries() {
        let bytes = if b.as_str().to_ascii_lowercase().ends_with(".exe") {
            fake.clone()
        } else {
            format!("# payload {b}\n").into_bytes()
        };
        write_whole(&root.join(b.as_str().replace('\\', "/").replacen("C:/", "C/", 1)), &bytes);
    }
    write_whole(
        &root.join("C/k/wmrender/wmrender-node.exe"),
        &std::fs::read(wine.exes.join("wmrender-node.exe")).unwrap(),
    );
}

/// The host: its reboot when asked (every SSH connection cut, as a host going down cuts them), then kubelet once
/// its service starts; it gives up when `over` (sync ended).
fn host(
    wine: &mut Wine,
    sshd: &Sshd,
    address: &str,
    cp: &ControlPlane,
    kubelet_dir: &Path,
    over: &AtomicBool,
) -> Result<(), String> {
    let sshd_dir = sshd.path("");
    let deadline = Instant::now() + Duration::from_secs(240);
    let wait = |what: &str, done: &dyn Fn() -> bool| -> Result<(), String> {
        while !done() {
            if Instant::now() > deadline || over.load(Ordering::SeqCst) {
                return Err(format!("waited in vain for {what}"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    };
    wait("the first boot's reboot", &|| sshd_dir.join("reboot-requested").exists())?;
    // Windows goes down `REBOOT_DELAY` after the command, which has answered by then: cutting at once would cut its
    // own session first, which a real node never does.
    std::thread::sleep(REBOOT_DELAY);
    std::fs::remove_file(sshd_dir.join("reboot-requested")).ok();
    sshd.drop_connections();
    wine.reboot();
    std::fs::remove_file(sshd_dir.join("rebooting")).ok();
    wait("kubelet to start", &|| wine.service_events().iter().any(|e| e.event == "start" && e.service == "kubelet"))?;
    // kubelet's TLS bootstrap with what sync delivered, its kubeconfig where kubelet writes it.
    let bootstrap: Value =
        serde_json::from_slice(&std::fs::read(wine.c(paths::BOOTSTRAP_KUBECONFIG)).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    let token = bootstrap["users"][0]["user"]["token"].as_str().unwrap_or("").to_string();
    let config: Value = serde_json::from_slice(&std::fs::read(wine.c(r"C:\k\kubelet.conf")).unwrap()).unwrap();
    let k = Kubelet::bootstrap(cp, &token, NODE, kubelet_dir, Duration::from_secs(120))?;
    write_whole(&wine.c(paths::KUBECONFIG), &std::fs::read(&k.kubeconfig).unwrap());
    let reg = Registration {
        addresses: vec![("InternalIP".into(), address.into()), ("Hostname".into(), NODE.into())],
        taints: config["registerWithTaints"].as_array().cloned().unwrap_or_default(),
        provider_id: None,
        boot_id: "wine-boot-2".into(),
    };
    k.register(&reg, Duration::from_secs(120))
}

#[test]
fn a_machine_backed_windows_node_joins_without_the_operator_in_one_sync() {
    let mut wine = rig();
    let sshd = support::wine_sshd::start(&wine);
    let at = SshHost::new(&sshd);
    let work = tempfile::tempdir().unwrap();
    let path = |n: &str| -> PathBuf { work.path().join(n) };
    let cp = ControlPlane::start();
    support::openshift::infrastructure(&cp, "AWS", &cp.url);
    support::openshift::controller_config(&cp, &support::certificate("kubelet-ca"), &[]);
    // The registry the node pulls its later bundles from, with TLS from a CA the cluster's proxy trusts (sync
    // fetches that bundle and delivers it; the agent trusts it for the registry too).
    let scratch = Scratch::new();
    let registry = Registry::start(&scratch.path("registry"), &scratch.ca, None);
    let ca_pem = std::fs::read_to_string(scratch.ca.pem()).unwrap();
    support::openshift::proxy(&cp, Some(("user-ca-bundle", &ca_pem)));
    support::openshift::pull_secret(&cp, r#"{"auths":{}}"#);
    played::bootstrap_token(&cp);
    let (ci, ci_public) = scratch.key("ci");
    let (_, next_public) = scratch.key("next");
    let render = |name: &str, keys: &[&Path]| -> PathBuf {
        let text = std::fs::read_to_string(support::root().join("fixtures/aws-defaults/wmrender.yaml")).unwrap();
        std::fs::write(path(&format!("{name}.yaml")), support::registry::with_pull(&text, &registry.addr, keys))
            .unwrap();
        let o = wmrender(&["render", "-f", &p(&path(&format!("{name}.yaml"))), "-o", &p(&path(name))]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        path(name)
    };
    render("rendered", &[&ci_public]);
    // What Argo CD applies of the rendered cluster/ for the nodes' sake: wmrender's namespace and the exporter's
    // Service, whose serving certificate the service CA issues.
    for file in ["namespace-wmrender.yaml", "service-windows-exporter.yaml"] {
        let text = std::fs::read_to_string(path("rendered/cluster").join(file)).unwrap();
        cp.admin().seed(&serde_saphyr::from_str(&text).unwrap());
    }
    cp.wmrender_kubeconfig(&path("kubeconfig"), "wmrender-sync");
    let (_controllers, _machine_api) =
        (ControllerManager::start(&cp, &[CSR_SIGNING, NODE_LIFECYCLE]), MachineApi::start(&cp));
    let _service_ca = ServiceCa::start(&cp);
    let exporter_secret = "/api/v1/namespaces/wmrender/secrets/windows-exporter-tls";
    let deadline = Instant::now() + Duration::from_secs(60);
    while cp.admin().get(exporter_secret).is_none() {
        assert!(Instant::now() < deadline, "the service CA issued no certificate");
        std::thread::sleep(Duration::from_millis(200));
    }
    // The MachineSet's Machine, provisioned by the Machine API at the Wine node's address; no Node, no nodeRef.
    MachineApi::provision(
        cp.admin(),
        MACHINE,
        "aws:///us-west-2a/i-0123456789abcdef0",
        &[("InternalIP", at.address()), ("InternalDNS", NODE)],
    );

    payload(&wine, &path("rendered"), &path("payload"));
    // How the rig's Wine node is reached: the Machine's address, through this sshd (port, user).
    std::fs::write(
        path("nodes.yaml"),
        format!(
            "nodes:\n- name: wine-node\n  address: {}\n  port: 22\n  user: root\n  profile: windows\n",
            at.address()
        ),
    )
    .unwrap();
    std::fs::write(path("known_hosts"), at.known_hosts_line(&sshd)).unwrap();
    wine.set_powershell(&answers());
    // What the network step writes on a real node (the fake powershell runs nothing).
    write_whole(&wine.c(r"C:\k\kube-proxy.conf"), b"kind: KubeProxyConfiguration\n");

    let args: Vec<String> = vec![
        "sync".into(),
        "--rendered".into(),
        p(&path("rendered")),
        "--inventory".into(),
        p(&path("nodes.yaml")),
        "--identity".into(),
        p(&sshd.path("client_ed25519")),
        "--known-hosts".into(),
        p(&path("known_hosts")),
        "--payload".into(),
        p(&path("payload")),
        "--kubeconfig".into(),
        p(&path("kubeconfig")),
        "--csr-timeout".into(),
        "180".into(),
        "--reboot-timeout".into(),
        "180".into(),
        "--connect-timeout".into(),
        "20".into(),
        "--output".into(),
        "json".into(),
    ];
    let over = AtomicBool::new(false);
    let machine: &mut Wine = &mut wine;
    let (o, played) = std::thread::scope(|s| {
        let host = s.spawn(|| host(machine, &sshd, at.address(), &cp, &path("kubelet"), &over));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = wmrender(&refs);
        over.store(true, Ordering::SeqCst);
        (o, host.join().unwrap())
    });
    let err = stderr(&o);
    let report: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    assert_eq!(code(&o), 0, "{err}\n{report}\nhost: {played:?}");
    played.unwrap();

    let n = &report["nodes"][0];
    assert_eq!(n["machine"], MACHINE, "the inventory says how to reach the Machine's instance: {report}");
    assert_eq!((n["status"].as_str(), n["rebooted"].as_bool()), (Some("synced"), Some(true)), "{report}");
    assert_eq!(n["apply"]["status"], "converged", "{report}");
    assert_eq!(n["apply"]["nodeName"], NODE);
    assert_eq!(n["apply"]["nodeReport"], "reported", "the agent reported on its Node: {report}");
    let approved: Vec<&str> =
        report["cluster"]["approved"].as_array().unwrap().iter().map(|a| a["kind"].as_str().unwrap()).collect();
    assert_eq!(approved, ["client", "serving"], "{report}");
    assert_eq!(report["taints"]["untainted"], json!([NODE]), "{report}");

    // The Node: Ready, labelled, untainted, reported configured by its agent for the bundle sync delivered.
    let node = cp.admin().get(&format!("/api/v1/nodes/{NODE}")).expect("the Node");
    let conditions = node["status"]["conditions"].as_array().unwrap();
    assert!(conditions.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"), "{node}");
    let configured = conditions.iter().find(|c| c["type"] == CONDITION_TYPE).expect("the agent's condition");
    assert_eq!(configured["status"], "True", "{node}");
    assert_eq!(node["metadata"]["annotations"][BUNDLE_ANNOTATION], n["apply"]["bundle"], "{node}");
    let taints = node["spec"]["taints"].as_array().cloned().unwrap_or_default();
    assert!(taints.iter().all(|t| t["key"] != TAINT_KEY && t["key"] != "node.kubernetes.io/not-ready"), "{node}");
    assert_eq!(node["metadata"]["labels"]["node-role.kubernetes.io/worker"], "");
    // The Machine API linked the Machine to its Node once the Node registered.
    let machine = cp.admin().get(&format!("{}/{MACHINE}", played::MACHINES)).unwrap();
    assert_eq!(
        (machine["status"]["nodeRef"]["name"].as_str(), machine["status"]["phase"].as_str()),
        (Some(NODE), Some("Running"))
    );
    // The agent under Wine wrote with the node's identity and its own User-Agent; wmrender with its role only.
    let agent = cp.requests_by(&format!("system:node:{NODE}"));
    assert!(
        agent.iter().any(|r| r.user_agent.starts_with("wmrender-node/") && r.uri.ends_with("/status")),
        "{agent:?}"
    );
    assert!(cp.requests_by(WMRENDER_USER).iter().all(|r| r.code != 403), "the documented role was enough");
    // No Node before the reboot: nothing was drained.
    assert!(cp.requests_by(WMRENDER_USER).iter().all(|r| !r.uri.contains("/eviction")));
    // windows_exporter runs with the serving certificate the service CA issued, which sync fetched and pushed.
    let secret = cp.admin().get(exporter_secret).unwrap();
    use base64::Engine;
    let issued = base64::engine::general_purpose::STANDARD.decode(secret["data"]["tls.crt"].as_str().unwrap()).unwrap();
    assert_eq!(std::fs::read(wine.c(paths::EXPORTER_TLS_CERT)).unwrap(), issued);
    let exporter = &wine.services(&["windows_exporter"])["windows_exporter"];
    assert_eq!(exporter["state"], "running", "{exporter}");
    assert!(n["degraded"].is_null(), "nothing left out: {report}");
    // sync told the host which Machine it is.
    let identity: Value =
        serde_json::from_slice(&std::fs::read(wine.c(r"C:\k\wmrender\machine.json")).unwrap()).unwrap();
    assert_eq!(identity["machine"], MACHINE);

    // Pulled: CI publishes the next bundle (a key rotation's first step: a second key beside the first, so only
    // node.json changes), signed with the key the node trusts; the Node is told to take it by the mirrored source's
    // name. The agent under Wine reads its Node with its own credentials, pulls through the rendered mirror over TLS,
    // verifies, stages and applies it, and says so on its Node.
    let next = render("rendered-next", &[&ci_public, &next_public]);
    // `wmrender publish <what> DIR` to the registry's `repository`; the reference by the mirrored source's name.
    let publish_as = |what: &str, dir: &Path, repository: &str, extra: &[&str]| -> String {
        let to = format!("{}/fleet/{repository}:main", registry.addr);
        let mut args = vec!["publish", what, dir.to_str().unwrap(), "--to", &to];
        let ca = scratch.ca.pem();
        args.extend(["--registry-ca", ca.to_str().unwrap()]);
        args.extend_from_slice(extra);
        let o = wmrender(&args);
        assert_eq!(code(&o), 0, "publish {what}: {}", stderr(&o));
        let published = String::from_utf8_lossy(&o.stdout).trim().to_string();
        format!("bundles.example.com/fleet/{repository}@{}", published.split_once('@').unwrap().1)
    };
    let publish = |rendered: &Path, extra: &[&str]| publish_as("--rendered", rendered, "windows-bundle", extra);
    let desired = publish(&next, &["--sign-key", ci.to_str().unwrap(), "--bundle-version", "2"]);
    let want = |reference: &str| {
        let patch = json!({"metadata": {"annotations": {DESIRED_BUNDLE_ANNOTATION: reference}}});
        cp.admin().merge_patch(&format!("/api/v1/nodes/{NODE}"), &patch).unwrap();
    };
    let pulled = |node: &Value| {
        node["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == PULL_CONDITION_TYPE).cloned()
    };
    // The agent service watches its Node: a new desired bundle or payload starts its pass at once (its interval here
    // is an hour).
    let pass_where = |what: &str, found: &dyn Fn(&ApplyResult) -> bool| -> ApplyResult {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let passes = wine.agent_passes();
            if let Some(p) = passes.iter().rev().find(|p| found(p)) {
                return p.clone();
            }
            assert!(Instant::now() < deadline, "no pass of the agent service pulled {what}: {passes:?}");
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    let service_pass = |reference: &str| -> ApplyResult {
        pass_where(reference, &|p| p.pull.as_ref().is_some_and(|p| p.desired == reference))
    };
    want(&desired);
    let result = service_pass(&desired);
    let pull = result.pull.clone().unwrap();
    assert_eq!((pull.outcome, result.status), (PullOutcome::Staged, ApplyStatus::Converged), "{result:?}");
    let node_json = r"C:\k\wmrender\node.json";
    let next_node_json = std::fs::read(next.join(NodePath::known(node_json).bundle_path())).unwrap();
    assert_eq!(std::fs::read(wine.c(node_json)).unwrap(), next_node_json);
    let node = cp.admin().get(&format!("/api/v1/nodes/{NODE}")).unwrap();
    assert_eq!(pulled(&node).map(|c| c["reason"].clone()), Some(json!("Pulled")), "{node}");
    assert_eq!(node["metadata"]["annotations"][PULLED_BUNDLE_ANNOTATION], desired.as_str(), "{node}");
    assert_eq!(node["metadata"]["annotations"][BUNDLE_ANNOTATION], result.bundle.as_str(), "{node}");

    // Each bad bundle is refused by the agent under Wine: nothing changes on the node, the Node says why, and the
    // node stays configured. Unsigned (the rotation's end, published without a signature), signed by a key the node
    // does not trust, older than the version applied, and changed at rest in the registry under its digest; a
    // registry that cannot be reached is tried again.
    let (stranger, stranger_public) = scratch.key("stranger");
    let last = render("rendered-last", &[&next_public]);
    let unsigned = publish(&last, &[]);
    let strangers = publish(
        &render("rendered-stranger", &[&next_public, &ci_public]),
        &["--sign-key", stranger.to_str().unwrap(), "--bundle-version", "3"],
    );
    let older = publish(&path("rendered"), &["--sign-key", ci.to_str().unwrap(), "--bundle-version", "1"]);
    let tampered = {
        let r = publish(
            &render("rendered-tampered", &[&ci_public, &stranger_public]),
            &["--sign-key", ci.to_str().unwrap(), "--bundle-version", "4"],
        );
        let bytes = std::fs::read(path("rendered-tampered").join(NodePath::known(node_json).bundle_path())).unwrap();
        let blob = registry.blob(&format!("sha256:{}", wmrender_contract::sha256_hex(&bytes)));
        let mut changed = bytes.clone();
        *changed.last_mut().unwrap() ^= 0x20;
        std::fs::write(blob, changed).unwrap();
        r
    };
    let down = format!("127.0.0.1:1/fleet/windows-bundle@{}", desired.split_once('@').unwrap().1);
    for (reference, outcome, says) in [
        (&unsigned, PullOutcome::Refused, "not signed"),
        (&strangers, PullOutcome::Refused, "no trusted key verifies"),
        (&older, PullOutcome::Refused, "older than version 2"),
        (&tampered, PullOutcome::Refused, "does not match its digest"),
        (&down, PullOutcome::Retrying, "cannot be fetched"),
    ] {
        let before = std::fs::read(wine.c(r"C:\k\wmrender\manifest.json")).unwrap();
        want(reference);
        let result = service_pass(reference);
        let pull = result.pull.clone().unwrap();
        assert_eq!((pull.outcome, result.status), (outcome, ApplyStatus::Converged), "{says}: {result:?}");
        assert!(pull.message.contains(says), "{says}: {}", pull.message);
        assert_eq!(std::fs::read(wine.c(node_json)).unwrap(), next_node_json, "{says}");
        assert_eq!(std::fs::read(wine.c(r"C:\k\wmrender\manifest.json")).unwrap(), before, "{says}");
        let node = cp.admin().get(&format!("/api/v1/nodes/{NODE}")).unwrap();
        let c = pulled(&node).unwrap();
        let expected = if outcome == PullOutcome::Refused { ("False", "Refused") } else { ("Unknown", "Retrying") };
        assert_eq!((c["status"].as_str(), c["reason"].as_str()), (Some(expected.0), Some(expected.1)), "{node}");
        assert!(c["message"].as_str().unwrap().contains(says), "{c}");
        let configured = node["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == CONDITION_TYPE);
        assert_eq!(configured.unwrap()["status"], "True", "a refused bundle leaves the node configured: {node}");
        assert_eq!(node["metadata"]["annotations"][PULLED_BUNDLE_ANNOTATION], desired.as_str(), "{node}");
    }
    want(&desired);

    // The payload pulled: CI publishes the next programs (kubelet changed, the rest as sync delivered them, the agent
    // beside them as in every payload), signed; the Node names it. The agent under Wine fetches kubelet alone, stages
    // it, and its pass stops the kubelet service, swaps the program in and starts it again; the Node says so.
    let next_payload = path("payload-next");
    for e in walkdir::WalkDir::new(path("payload")).into_iter().map(|e| e.unwrap()) {
        if e.file_type().is_file() {
            let rel = e.path().strip_prefix(path("payload")).unwrap();
            write_whole(&next_payload.join(rel), &std::fs::read(e.path()).unwrap());
        }
    }
    let kubelet = r"C:\k\kubelet.exe";
    let mut next_kubelet = std::fs::read(next_payload.join("C/k/kubelet.exe")).unwrap();
    // Bytes after a program's image (an overlay) are not loaded: the fake service still runs, as another build.
    next_kubelet.extend_from_slice(b"kubelet v1.36.4");
    write_whole(&next_payload.join("C/k/kubelet.exe"), &next_kubelet);
    let publish_payload = |dir: &Path, extra: &[&str]| -> String {
        let listed = wmrender(&["payload", "list", dir.to_str().unwrap()]);
        assert_eq!(code(&listed), 0, "payload list: {}", stderr(&listed));
        publish_as("--payload", dir, "windows-payload", extra)
    };
    let want_payload = |reference: &str| {
        let patch = json!({"metadata": {"annotations": {DESIRED_PAYLOAD_ANNOTATION: reference}}});
        cp.admin().merge_patch(&format!("/api/v1/nodes/{NODE}"), &patch).unwrap();
    };
    let payload_pass = |reference: &str| -> ApplyResult {
        pass_where(reference, &|p| p.payload_pull.as_ref().is_some_and(|p| p.desired == reference))
    };
    let programs = walkdir::WalkDir::new(next_payload.join("C"))
        .into_iter()
        .filter(|e| e.as_ref().unwrap().file_type().is_file())
        .count();
    let payload_ref = publish_payload(&next_payload, &["--sign-key", ci.to_str().unwrap(), "--bundle-version", "1"]);
    let starts = |events: &[support::wine::ServiceEvent]| {
        events.iter().filter(|e| e.event == "start" && e.service == "kubelet").count()
    };
    let starts_before = starts(&wine.service_events());
    want_payload(&payload_ref);
    let result = payload_pass(&payload_ref);
    let pull = result.payload_pull.clone().unwrap();
    assert_eq!((pull.outcome, result.status), (PullOutcome::Staged, ApplyStatus::Converged), "{result:?}");
    // Every program is a layer (the list, payload.json, beside them); the agent's own is not pulled.
    assert!(pull.message.contains(&format!("1 of {programs} programs fetched")), "{}", pull.message);
    assert_eq!(std::fs::read(wine.c(kubelet)).unwrap(), next_kubelet, "swapped in by the pass");
    assert!(!wine.c(r"C:\k\kubelet.exe.wmrender-staged").exists());
    // The fake service reports running before it logs its start (the pass waits for the former only).
    wine.wait_events("the kubelet service started again", Duration::from_secs(30), |e| starts(e) > starts_before);
    assert_eq!(wine.services(&["kubelet"])["kubelet"]["state"], "running");
    let node = cp.admin().get(&format!("/api/v1/nodes/{NODE}")).unwrap();
    let c = node["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == PAYLOAD_PULL_CONDITION_TYPE);
    assert_eq!(c.map(|c| (c["status"].clone(), c["reason"].clone())), Some((json!("True"), json!("Pulled"))), "{node}");
    assert_eq!(node["metadata"]["annotations"][PULLED_PAYLOAD_ANNOTATION], payload_ref.as_str(), "{node}");
    assert_eq!(node["metadata"]["annotations"][PAYLOAD_ANNOTATION], result.payload.as_str(), "{node}");
    // The agent it runs (which a pull never brings), as the controller compares it with the payload's.
    let agent_exe = std::fs::read(wine.c(r"C:\k\wmrender\wmrender-node.exe")).unwrap();
    assert_eq!(result.agent, wmrender_contract::sha256_hex(&agent_exe), "{result:?}");
    assert_eq!(node["metadata"]["annotations"][AGENT_ANNOTATION], result.agent.as_str(), "{node}");
    // An unsigned payload is refused by the agent under Wine, with nothing changed.
    let mut unsigned_kubelet = next_kubelet.clone();
    unsigned_kubelet.extend_from_slice(b" unsigned");
    write_whole(&next_payload.join("C/k/kubelet.exe"), &unsigned_kubelet);
    let unsigned_payload = publish_payload(&next_payload, &[]);
    let before = std::fs::read(wine.c(r"C:\k\wmrender\manifest.json")).unwrap();
    want_payload(&unsigned_payload);
    let result = payload_pass(&unsigned_payload);
    let pull = result.payload_pull.clone().unwrap();
    assert_eq!((pull.outcome, result.status), (PullOutcome::Refused, ApplyStatus::Converged), "{result:?}");
    assert!(pull.message.contains("not signed"), "{}", pull.message);
    assert_eq!(std::fs::read(wine.c(kubelet)).unwrap(), next_kubelet);
    assert_eq!(std::fs::read(wine.c(r"C:\k\wmrender\manifest.json")).unwrap(), before);
    assert!(!wine.c(r"C:\k\kubelet.exe.wmrender-staged").exists());
    want_payload(&payload_ref);

    // Later, after a reboot, the agent service's pass fails (the AWS routes, which every boot needs): its report
    // turns the Node's condition False at once, and the next sync, with nothing to deliver, fails and taints it.
    let mut failing = answers();
    failing.insert(
        "aws-routes.ps1".into(),
        vec![("{\"ok\":false,\"error\":\"route add: the object exists\"}\n".into(), 1)],
    );
    wine.set_powershell(&failing);
    let passes = wine.agent_passes().len();
    wine.reboot();
    let after = wine.wait_agent_passes(passes + 1, Duration::from_secs(120));
    assert_eq!(after[passes].status, wmrender_contract::ApplyStatus::Failed, "{after:?}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let condition = loop {
        let node = cp.admin().get(&format!("/api/v1/nodes/{NODE}")).unwrap();
        let c = node["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == CONDITION_TYPE).cloned();
        if let Some(c) = c.filter(|c| c["status"] == "False") {
            break c;
        }
        assert!(Instant::now() < deadline, "the Node does not show the failure: {node}");
        std::thread::sleep(Duration::from_millis(250));
    };
    assert!(condition["message"].as_str().unwrap().contains("route add"), "{condition}");
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = wmrender(&refs);
    let (err, report): (String, Value) = (stderr(&o), serde_json::from_slice(&o.stdout).unwrap_or(Value::Null));
    assert_eq!(code(&o), 3, "{err}\n{report}");
    assert_eq!(report["nodes"][0]["status"], "failed", "{report}");
    assert!(report["nodes"][0]["error"].as_str().unwrap().contains("route add"), "{report}");
    assert_eq!(report["taints"]["tainted"][0]["node"], NODE, "{report}");
    let node = cp.admin().get(&format!("/api/v1/nodes/{NODE}")).unwrap();
    assert!(node["spec"]["taints"].as_array().unwrap().iter().any(|t| t["key"] == TAINT_KEY), "{node}");
}
