//! The convergence engine against the fake system (fake.rs lists the Windows rules it enforces).

use crate::apply::apply;
use crate::fake::{Event, FakeSystem, StopBehaviour};
use crate::state::AppliedState;
use crate::system::Files;
use crate::system::{RunState, ServiceConfig, System};
use crate::timing::Timing;
use std::collections::BTreeMap;
use std::time::Duration;
use wmrender_contract::{
    Actions, ApplyResult, ApplyStatus, FileKind, Journal, NodeFile, NodeManifest, NodeNameSource, NodePath,
    NodeSettings, NodeVariable, STAGED_SUFFIX, Service, ServicesFile, Step, When, paths, sha256_hex,
};

const CONTAINERS: &str = r"C:\k\wmrender\steps\containers.ps1";
const NETWORK: &str = r"C:\k\wmrender\steps\network-conf.ps1";
const OK: &str = "{\"ok\":true}";

fn np(p: &str) -> NodePath {
    NodePath::known(p)
}

fn svc(name: &str, exe: &str, args: &str, deps: &[&str]) -> Service {
    Service {
        name: name.into(),
        description: format!("OpenShift managed {name} (wmrender)"),
        command: format!("{exe} {args}"),
        dependencies: deps.iter().map(|d| d.to_string()).collect(),
        node_variables: vec![],
        files: vec![],
        binaries: vec![np(exe)],
        secrets: vec![],
        reloads: vec![],
        requires: vec![],
        pre_start: None,
        optional: false,
    }
}

/// A node laid out like a rendered bundle: containerd, kubelet (through kube-log-runner), windows_exporter,
/// hybrid-overlay-node (waits for C:\k\kubeconfig) and kube-proxy (network step before it starts).
struct Node {
    sys: FakeSystem,
    timing: Timing,
    services: ServicesFile,
    settings: NodeSettings,
    manifest: NodeManifest,
}

impl Node {
    fn new() -> Node {
        let mut containerd =
            svc("containerd", r"C:\k\containerd\containerd.exe", r"--config C:\k\containerd\containerd_conf.toml", &[]);
        containerd.files = vec![np(r"C:\k\containerd\containerd_conf.toml")];
        let mut kubelet = svc(
            "kubelet",
            r"C:\k\kube-log-runner.exe",
            r"-log-file=C:\var\log\kubelet\kubelet.log C:\k\kubelet.exe --config=C:\k\kubelet.conf --node-ip=NODE_IP",
            &["containerd"],
        );
        kubelet.binaries.push(np(r"C:\k\kubelet.exe"));
        kubelet.files = vec![np(r"C:\k\kubelet.conf")];
        kubelet.secrets = vec![np(r"C:\k\bootstrap-kubeconfig")];
        kubelet.node_variables = vec![NodeVariable::NodeIp];
        let mut exporter =
            svc("windows_exporter", r"C:\k\windows_exporter.exe", r"--web.config.file C:\k\tls\web.yaml", &[]);
        exporter.files = vec![np(r"C:\k\tls\web.yaml")];
        let mut hybrid = svc("hybrid-overlay-node", r"C:\k\hybrid-overlay-node.exe", "--node NODE_NAME", &["kubelet"]);
        hybrid.node_variables = vec![NodeVariable::NodeName];
        hybrid.requires = vec![np(r"C:\k\kubeconfig")];
        let mut proxy =
            svc("kube-proxy", r"C:\k\kube-proxy.exe", r"--config C:\k\kube-proxy.conf", &["hybrid-overlay-node"]);
        proxy.files = vec![np(r"C:\k\kube-proxy.conf")];
        proxy.pre_start = Some("network".into());
        let services = ServicesFile { services: vec![containerd, kubelet, exporter, hybrid, proxy] };
        let settings = NodeSettings {
            platform: "none".into(),
            node_name: NodeNameSource::DnsHostName,
            directories: vec![np(r"C:\var\log\kubelet"), np(r"C:\k\cni\config")],
            environment: BTreeMap::new(),
            steps: vec![
                Step { name: "containers".into(), script: np(CONTAINERS), args: vec![], when: When::Once },
                Step {
                    name: "network".into(),
                    script: np(NETWORK),
                    args: vec!["-hostnameOverride".into(), "NODE_NAME".into()],
                    when: When::OnDemand,
                },
            ],
            rename_to_machine: None,
            rotated_files: vec![],
            bundle_keys: vec![],
        };
        let node = Node {
            sys: FakeSystem::new(),
            timing: Timing { stop_timeout: Duration::from_secs(60), ..Timing::default() },
            services,
            settings,
            manifest: NodeManifest { wmrender: "0.1.0".into(), ..NodeManifest::default() },
        };
        for s in &node.services.services {
            for p in s.files.iter().chain(&s.binaries).chain(&s.secrets) {
                node.write(p.as_str(), &format!("{p} v1"));
            }
        }
        node.write(r"C:\k\kubeconfig", "kubeconfig");
        node.write(paths::AGENT_EXE, "agent");
        node.write(CONTAINERS, "containers script");
        node.write(NETWORK, "network script");
        node.sys.script(CONTAINERS, 0, OK);
        node.sys.script(NETWORK, 0, OK);
        node.save();
        node
    }

    fn write(&self, path: &str, content: &str) {
        let local = self.sys.local(&np(path));
        std::fs::create_dir_all(local.parent().unwrap()).unwrap();
        std::fs::write(local, content).unwrap();
    }

    fn remove(&self, path: &str) {
        std::fs::remove_file(self.sys.local(&np(path))).unwrap();
    }

    fn read(&self, path: &str) -> String {
        std::fs::read_to_string(self.sys.local(&np(path))).unwrap()
    }

    /// Writes services.json, node.json and manifest.json as sync would.
    fn save(&self) {
        self.write(paths::SERVICES_JSON, &String::from_utf8(self.services.to_json()).unwrap());
        self.write(paths::SETTINGS_JSON, &String::from_utf8(self.settings.to_json()).unwrap());
        self.write(paths::NODE_MANIFEST, &String::from_utf8(self.manifest.to_json()).unwrap());
    }

    fn service_mut(&mut self, name: &str) -> &mut Service {
        self.services.services.iter_mut().find(|s| s.name == name).unwrap()
    }

    fn apply(&mut self) -> ApplyResult {
        self.save();
        let r = apply(&mut self.sys, &self.timing);
        // The line sync reads round-trips.
        assert_eq!(ApplyResult::from_stdout(&r.to_line()).as_ref(), Some(&r));
        r
    }

    /// Converged first pass, then the event log cleared.
    fn converged(mut self) -> Node {
        let r = self.apply();
        assert_eq!(r.status, ApplyStatus::Converged, "{r:#?}");
        self.sys.clear_events();
        self
    }

    fn state(&self) -> AppliedState {
        AppliedState::load(&self.sys.local(&np(paths::APPLIED_STATE))).unwrap()
    }
}

fn started(events: &[Event]) -> Vec<String> {
    events.iter().filter_map(|e| if let Event::Started { name, .. } = e { Some(name.clone()) } else { None }).collect()
}

fn stop_requests(events: &[Event]) -> Vec<String> {
    events.iter().filter_map(|e| if let Event::StopRequested(n) = e { Some(n.clone()) } else { None }).collect()
}

fn position(events: &[Event], wanted: &Event) -> usize {
    events.iter().position(|e| e == wanted).unwrap_or_else(|| panic!("{wanted:?} not in {events:#?}"))
}

const ALL: [&str; 5] = ["containerd", "kubelet", "windows_exporter", "hybrid-overlay-node", "kube-proxy"];

#[test]
fn first_pass_creates_every_service_and_starts_them_in_dependency_order() {
    let mut node = Node::new();
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Converged, "{r:#?}");
    assert_eq!(r.created, [&ALL[..], &[paths::AGENT_SERVICE]].concat());
    assert_eq!(r.started, [&ALL[..], &[paths::AGENT_SERVICE]].concat());
    assert_eq!((r.node_name.as_str(), r.node_ip.as_str()), ("win-node-1", "10.0.0.5"));
    assert_eq!(r.steps, ["containers", "network"]);
    let events = node.sys.events();
    for e in &events {
        if let Event::Started { name, deps_not_running } = e {
            assert!(deps_not_running.is_empty(), "{name} started before {deps_not_running:?}");
        }
    }
    let kubelet = node.sys.status("kubelet").unwrap();
    assert_eq!(
        kubelet.config,
        ServiceConfig {
            name: "kubelet".into(),
            command: r"C:\k\kube-log-runner.exe -log-file=C:\var\log\kubelet\kubelet.log C:\k\kubelet.exe --config=C:\k\kubelet.conf --node-ip=10.0.0.5".into(),
            description: "OpenShift managed kubelet (wmrender)".into(),
            dependencies: vec!["containerd".into()],
            // Demand start: only the agent's own service starts at boot, and it starts the others in order.
            automatic: false,
        }
    );
    assert_eq!(
        node.sys.status("hybrid-overlay-node").unwrap().config.command,
        r"C:\k\hybrid-overlay-node.exe --node win-node-1"
    );
    // The network step got the node name, before kube-proxy started.
    let script = Event::Script { script: np(NETWORK), args: vec!["-hostnameOverride".into(), "win-node-1".into()] };
    assert!(
        position(&events, &script)
            < position(&events, &Event::Started { name: "kube-proxy".into(), deps_not_running: vec![] })
    );
    assert!(node.sys.local(&np(r"C:\var\log\kubelet")).is_dir());
    let agent = node.sys.status(paths::AGENT_SERVICE).unwrap();
    assert_eq!(agent.config.command, r#""C:\k\wmrender\wmrender-node.exe" run"#);
    assert!(agent.config.automatic && agent.state == RunState::Running);
    let state = node.state();
    assert_eq!(state.owned.iter().map(String::as_str).collect::<Vec<_>>().len(), 5);
    assert_eq!(state.services["kubelet"].files[&np(r"C:\k\kubelet.conf")], sha256_hex(br"C:\k\kubelet.conf v1"));
}

#[test]
fn a_second_pass_changes_nothing() {
    let mut node = Node::new();
    let first = node.apply();
    node.sys.clear_events();
    node.sys.take_queries();
    let r = node.apply();
    // One question to the SCM per service (two for the agent's own: the pass's and the hand-over check's), and the
    // Root store left unopened with no CA bundle: each is a round trip that made most of an unchanged pass's time.
    let mut queries = node.sys.take_queries();
    assert_eq!(queries.remove(paths::AGENT_SERVICE), Some(2));
    let once: BTreeMap<String, u32> = node.services.services.iter().map(|s| (s.name.clone(), 1)).collect();
    assert_eq!(queries, once, "every service is checked, once");
    assert_eq!(node.sys.root_reads(), 0);
    // The pass says which boot it ran in, the bundle it converged to, and (the fake's kubeconfig being no real
    // one) that it reported nothing on a Node.
    assert_eq!((r.boot_id.as_str(), r.bundle.len()), ("boot-1", "sha256:".len() + 64), "{r:#?}");
    assert!(r.node_report.starts_with("not reported: "), "{r:#?}");
    assert_eq!(
        r,
        ApplyResult {
            status: ApplyStatus::Converged,
            node_name: "win-node-1".into(),
            node_ip: "10.0.0.5".into(),
            boot_id: first.boot_id.clone(),
            bundle: first.bundle.clone(),
            node_report: first.node_report.clone(),
            // Still the first pass's work: the files on the node are the same delivery.
            since_delivery: Actions::of(&first),
            ..ApplyResult::default()
        }
    );
    assert_eq!(node.sys.events(), []);
}

#[test]
fn an_scm_that_reads_back_no_dependencies_like_wines_causes_no_update_loop() {
    let node = Node::new();
    node.sys.hide_dependencies();
    let mut node = node.converged();
    let r = node.apply();
    assert_eq!((r.status, r.updated.len()), (ApplyStatus::Converged, 0), "{r:#?}");
    assert_eq!(node.sys.events(), []);
    // A real change of dependencies is still applied.
    node.service_mut("windows_exporter").dependencies = vec!["containerd".into()];
    assert_eq!(node.apply().updated, ["windows_exporter"]);
}

#[test]
fn one_changed_file_restarts_exactly_its_service() {
    let mut node = Node::new().converged();
    node.write(r"C:\k\kube-proxy.conf", "v2");
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Converged, "{r:#?}");
    assert_eq!(r.restarted, ["kube-proxy"]);
    assert!(r.started.is_empty() && r.updated.is_empty());
    let events = node.sys.events();
    assert_eq!(stop_requests(&events), ["kube-proxy"]);
    assert_eq!(started(&events), ["kube-proxy"]);
    // The network step runs again before kube-proxy starts again.
    assert_eq!(r.steps, ["network"]);
}

/// A one-file sync leaves the manifest as it was and writes the changed entry into the update beside it: the pass
/// reads the two together, and ignores an update over a manifest written since.
#[test]
fn a_one_file_syncs_update_beside_the_manifest_is_read_with_it_unless_a_later_manifest_replaced_it() {
    let mut node = Node::new().converged();
    let conf = r"C:\k\kube-proxy.conf";
    let entry = |content: &str| NodeFile {
        path: np(conf),
        sha256: sha256_hex(content.as_bytes()),
        size: content.len() as u64,
        kind: FileKind::Bundle,
        staged: false,
    };
    let digest =
        |content: &str| NodeManifest { files: vec![entry(content)], ..NodeManifest::default() }.bundle_digest();
    let v1 = format!("{conf} v1");
    node.manifest.files.push(entry(&v1));
    assert_eq!(node.apply().bundle, digest(&v1));

    node.write(conf, "v2");
    let update = wmrender_contract::ManifestUpdate::over(&node.manifest.to_json(), vec![entry("v2")], true);
    node.write(paths::NODE_MANIFEST_UPDATE, &String::from_utf8(update.to_json()).unwrap());
    let r = node.apply();
    assert_eq!((r.status, r.bundle.clone()), (ApplyStatus::Converged, digest("v2")), "{r:#?}");
    assert_eq!(r.restarted, ["kube-proxy"]);

    // A whole manifest written since (another sync, a pull): the update over the old one says nothing.
    node.manifest.applied = true;
    assert_eq!(node.apply().bundle, digest(&v1));
}

#[test]
fn a_changed_file_of_a_service_with_dependents_stops_them_first() {
    let mut node = Node::new().converged();
    node.write(r"C:\k\kubelet.conf", "v2");
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Converged, "{r:#?}");
    assert_eq!(r.restarted, ["kubelet", "hybrid-overlay-node", "kube-proxy"]);
    let events = node.sys.events();
    assert_eq!(stop_requests(&events), ["kube-proxy", "hybrid-overlay-node", "kubelet"]);
    assert_eq!(started(&events), ["kubelet", "hybrid-overlay-node", "kube-proxy"]);
}

#[test]
fn two_changed_files_restart_exactly_their_services() {
    let mut node = Node::new().converged();
    node.write(r"C:\k\kube-proxy.conf", "v2");
    node.write(r"C:\k\tls\web.yaml", "v2");
    let r = node.apply();
    assert_eq!(r.restarted, ["windows_exporter", "kube-proxy"], "{r:#?}");
    assert_eq!(started(&node.sys.events()), ["windows_exporter", "kube-proxy"]);
    // A credential counts too.
    node.sys.clear_events();
    node.write(r"C:\k\bootstrap-kubeconfig", "rotated");
    assert_eq!(node.apply().restarted, ["kubelet", "hybrid-overlay-node", "kube-proxy"]);
}

#[test]
fn a_staged_binary_is_swapped_in_between_the_stop_and_the_start_of_its_services() {
    let mut node = Node::new().converged();
    node.sys.set_holds("kubelet", &[r"C:\k\kubelet.exe"]);
    node.write(&format!(r"C:\k\kubelet.exe{STAGED_SUFFIX}"), "kubelet v2");
    node.manifest.files.push(NodeFile {
        path: np(r"C:\k\kubelet.exe"),
        sha256: sha256_hex(b"kubelet v2"),
        size: 10,
        kind: FileKind::Payload,
        staged: true,
    });
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Converged, "{r:#?}");
    assert_eq!(r.replaced, [r"C:\k\kubelet.exe"]);
    assert_eq!(r.restarted, ["kubelet", "hybrid-overlay-node", "kube-proxy"]);
    let events = node.sys.events();
    let swap = position(
        &events,
        &Event::Replaced { from: np(&format!(r"C:\k\kubelet.exe{STAGED_SUFFIX}")), to: np(r"C:\k\kubelet.exe") },
    );
    assert!(position(&events, &Event::StopRequested("kubelet".into())) < swap);
    assert!(swap < position(&events, &Event::Started { name: "kubelet".into(), deps_not_running: vec![] }));
    assert_eq!(node.read(r"C:\k\kubelet.exe"), "kubelet v2");
    assert!(!node.sys.local(&np(&format!(r"C:\k\kubelet.exe{STAGED_SUFFIX}"))).exists());
    // Next pass: the entry is still marked staged, the file in place matches: nothing to do.
    node.sys.clear_events();
    assert_eq!(node.apply().status, ApplyStatus::Converged);
    assert_eq!(node.sys.events(), []);
    // The file in place is checked through the digest cache, like the services' files: while its size and time
    // stay, it is not read again (a digest planted in the cache is believed, and here fails the check).
    let kubelet = np(r"C:\k\kubelet.exe");
    let an_hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    std::fs::File::options().write(true).open(node.sys.local(&kubelet)).unwrap().set_modified(an_hour_ago).unwrap();
    assert_eq!(node.apply().status, ApplyStatus::Converged);
    let mut state = node.state();
    state.digests.0.get_mut(&kubelet).unwrap().sha256 = sha256_hex(b"planted");
    state.save(&node.sys.local(&np(paths::APPLIED_STATE))).unwrap();
    let r = node.apply();
    assert_eq!(r.missing, [r"C:\k\kubelet.exe (the staged new version is not there)"], "{r:#?}");
}

#[test]
fn a_staged_binary_that_does_not_match_the_manifest_is_refused_before_anything_stops() {
    let mut node = Node::new().converged();
    node.write(&format!(r"C:\k\kubelet.exe{STAGED_SUFFIX}"), "tampered");
    let entry = NodeFile {
        path: np(r"C:\k\kubelet.exe"),
        sha256: sha256_hex(b"kubelet v2"),
        size: 10,
        kind: FileKind::Payload,
        staged: true,
    };
    node.manifest.files.push(entry);
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Failed);
    assert!(r.errors[0].contains("does not match manifest.json"), "{r:#?}");
    assert_eq!(node.read(r"C:\k\kubelet.exe"), r"C:\k\kubelet.exe v1");
    assert_eq!(node.sys.events(), []);
    // Staged file gone and the old one in place: the new content is missing.
    node.remove(&format!(r"C:\k\kubelet.exe{STAGED_SUFFIX}"));
    let r = node.apply();
    assert_eq!((r.status, r.missing.len()), (ApplyStatus::Failed, 1), "{r:#?}");
    assert!(r.missing[0].starts_with(r"C:\k\kubelet.exe"));
}

#[test]
fn a_stray_staged_file_beside_a_program_already_swapped_in_is_passed_over() {
    // A pull cut off after it staged a program and before it wrote the manifest: the manifest's entry is staged and
    // in place already; the staged file beside it is not this entry's.
    let mut node = Node::new().converged();
    node.write(r"C:\k\kubelet.exe", "kubelet v2");
    node.write(&format!(r"C:\k\kubelet.exe{STAGED_SUFFIX}"), "kubelet v3");
    let entry = NodeFile {
        path: np(r"C:\k\kubelet.exe"),
        sha256: sha256_hex(b"kubelet v2"),
        size: 10,
        kind: FileKind::Payload,
        staged: true,
    };
    node.manifest.files.retain(|f| f.path != entry.path);
    node.manifest.files.push(entry);
    let r = node.apply();
    assert!(r.errors.is_empty() && r.missing.is_empty(), "{r:#?}");
    assert_eq!(node.read(r"C:\k\kubelet.exe"), "kubelet v2");
}

#[test]
fn a_stalled_service_is_killed_after_the_bounded_wait_and_a_slow_one_is_not() {
    let mut node = Node::new().converged();
    node.sys.set_stop_behaviour("kube-proxy", StopBehaviour::Never);
    node.write(r"C:\k\kube-proxy.conf", "v2");
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Converged, "{r:#?}");
    assert_eq!(
        (r.killed.as_slice(), r.restarted.as_slice()),
        (&["kube-proxy".to_string()][..], &["kube-proxy".to_string()][..])
    );
    let waited = node.sys.clock();
    assert!(waited >= Duration::from_secs(60) && waited < Duration::from_secs(62), "{waited:?}");

    node.sys.set_stop_behaviour("windows_exporter", StopBehaviour::After(Duration::from_secs(5)));
    node.write(r"C:\k\tls\web.yaml", "v2");
    let r = node.apply();
    assert_eq!((r.killed.len(), r.restarted.as_slice()), (0, &["windows_exporter".to_string()][..]), "{r:#?}");
}

#[test]
fn a_service_removed_from_the_table_is_deleted_and_others_are_never_touched() {
    let mut node = Node::new();
    let foreign = ServiceConfig {
        name: "w32time".into(),
        command: r"C:\Windows\w32tm.exe".into(),
        description: "time".into(),
        dependencies: vec![],
        automatic: true,
    };
    node.sys.create_service(&foreign).unwrap();
    let mut node = node.converged();
    node.services.services.retain(|s| s.name != "windows_exporter");
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Converged, "{r:#?}");
    assert_eq!(r.deleted, ["windows_exporter"]);
    assert_eq!(stop_requests(&node.sys.events()), ["windows_exporter"]);
    assert!(node.sys.status("windows_exporter").is_none());
    assert!(node.sys.status("w32time").is_some());
    assert!(!node.state().owned.contains("windows_exporter"));
    node.sys.clear_events();
    assert_eq!(node.apply().deleted.len(), 0);
    assert_eq!(node.sys.events(), []);
}

#[test]
fn a_proxy_change_is_applied_and_reported_with_a_reboot() {
    let mut node = Node::new().converged();
    let secret_url = "http://user:s3cret@proxy.example:3128";
    node.settings.environment = BTreeMap::from([
        ("HTTP_PROXY".into(), secret_url.to_string()),
        ("NO_PROXY".into(), ".cluster.local,10.0.0.0/16".into()),
        ("HTTPS_PROXY".into(), String::new()),
    ]);
    let r = node.apply();
    assert_eq!((r.status, r.reboot_required), (ApplyStatus::Pending, true), "{r:#?}");
    assert_eq!(r.environment, ["HTTP_PROXY", "NO_PROXY"]);
    assert!(!r.to_line().contains("s3cret"), "a proxy password reached the result line");
    assert!(!std::fs::read_to_string(node.sys.local(&np(paths::APPLIED_STATE))).unwrap().contains("s3cret"));
    assert_eq!(node.sys.env("HTTP_PROXY").as_deref(), Some(secret_url));
    assert_eq!(node.sys.env("HTTPS_PROXY"), None);
    // Same boot: still waiting for the reboot; nothing set again.
    node.sys.clear_events();
    let r = node.apply();
    assert_eq!((r.status, r.reboot_required, r.environment.len()), (ApplyStatus::Pending, true, 0));
    node.sys.reboot();
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Converged, "{r:#?}");
    // Removed: emptied, and dropped from node.json altogether.
    node.settings.environment.insert("HTTP_PROXY".into(), String::new());
    node.settings.environment.remove("NO_PROXY");
    let r = node.apply();
    assert_eq!(
        (r.status, r.environment.clone()),
        (ApplyStatus::Pending, vec!["HTTP_PROXY".to_string(), "NO_PROXY".to_string()])
    );
    assert_eq!((node.sys.env("HTTP_PROXY"), node.sys.env("NO_PROXY")), (None, None));
}

#[test]
fn a_step_that_fails_stops_the_pass_and_the_next_pass_converges() {
    let mut node = Node::new();
    // The Containers step fails three ways, then succeeds.
    node.sys.clear_script(CONTAINERS);
    node.sys.script(CONTAINERS, 1, "{\"ok\":false,\"error\":\"DISM failed\"}");
    node.sys.script(CONTAINERS, 0, "{\"ok\":false,\"error\":\"still failing\"}");
    node.sys.script(CONTAINERS, 0, "");
    node.sys.script(CONTAINERS, 0, OK);
    let mut errors = vec![];
    for _ in 0..3 {
        let r = node.apply();
        assert_eq!(r.status, ApplyStatus::Failed);
        assert!(
            r.created == [paths::AGENT_SERVICE] || r.created.is_empty(),
            "services created before the step succeeded: {r:#?}"
        );
        assert!(!node.state().steps_done.contains_key("containers"));
        errors.push(r.errors[0].clone());
    }
    assert!(errors[0].contains("exited with code 1: DISM failed"), "{errors:?}");
    assert!(errors[1].contains("still failing"), "{errors:?}");
    // Wine's powershell stub: exit 0 and no output is not a success.
    assert!(errors[2].contains("printed no result line"), "{errors:?}");
    let r = node.apply();
    assert_eq!((r.status, r.created.len()), (ApplyStatus::Converged, 5), "{r:#?}");
    assert!(node.state().steps_done.contains_key("containers"));
    // Done for this script's content; a new script runs again.
    node.sys.clear_events();
    node.apply();
    assert_eq!(node.sys.events(), []);
    node.write(CONTAINERS, "c v2");
    assert_eq!(node.apply().steps, ["containers"]);
}

#[test]
fn services_that_need_the_kubeconfig_wait_and_the_node_is_pending() {
    let mut node = Node::new();
    node.remove(r"C:\k\kubeconfig");
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Pending, "{r:#?}");
    assert_eq!(r.status.exit_code(), 3);
    assert_eq!(r.started, ["containerd", "kubelet", "windows_exporter", paths::AGENT_SERVICE]);
    assert!(r.pending[0].starts_with(r"hybrid-overlay-node waits for C:\k\kubeconfig"), "{r:#?}");
    assert_eq!(r.pending[1], "kube-proxy waits for `hybrid-overlay-node`");
    assert!(node.sys.status("hybrid-overlay-node").is_none() && node.sys.status("kube-proxy").is_none());
    // kubelet's certificate approved: the rest comes up, nothing else restarts.
    node.write(r"C:\k\kubeconfig", "kubeconfig");
    node.sys.clear_events();
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Converged, "{r:#?}");
    assert_eq!(r.started, ["hybrid-overlay-node", "kube-proxy"]);
    assert!(r.restarted.is_empty());
}

#[test]
fn under_wines_scm_a_stalled_service_is_killed_by_the_pid_taken_before_the_stop() {
    // Wine reports no pid while a service is stop-pending and goes on reporting stop-pending after its process
    // was killed: the agent kills the pid it saw before the stop request and counts the ended process as stopped.
    let mut node = Node::new().converged();
    node.sys.wine_stop_quirks();
    node.sys.set_stop_behaviour("kube-proxy", StopBehaviour::Never);
    let old_pid = node.sys.status("kube-proxy").unwrap().pid.unwrap();
    node.write(r"C:\k\kube-proxy.conf", "v2");
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Converged, "{r:#?}");
    assert_eq!(
        (r.killed.as_slice(), r.restarted.as_slice()),
        (&["kube-proxy".to_string()][..], &["kube-proxy".to_string()][..])
    );
    let now = node.sys.status("kube-proxy").unwrap();
    assert_eq!(now.state, RunState::Running);
    assert_ne!(now.pid, Some(old_pid));
}

#[test]
fn a_file_the_pre_start_step_writes_is_not_missing_before_the_step_runs() {
    // kube-proxy.conf is written on the node by the network step; sync does not deliver it.
    let mut node = Node::new();
    node.remove(r"C:\k\kube-proxy.conf");
    let r = node.apply();
    assert_eq!(r.missing, Vec::<String>::new(), "{r:#?}");
    assert!(r.steps.iter().any(|s| s == "network"), "{r:#?}");
    // The step ran and did not write it: the pass fails naming the file; the other services run.
    assert_eq!(r.status, ApplyStatus::Failed, "{r:#?}");
    assert!(r.errors.iter().any(|e| e.contains("kube-proxy.conf")), "{r:#?}");
    assert_eq!(node.sys.state_of("kubelet"), Some(RunState::Running));
    node.write(r"C:\k\kube-proxy.conf", "written by the network step");
    let r = node.apply();
    assert_eq!((r.status, r.started.as_slice()), (ApplyStatus::Converged, &["kube-proxy".to_string()][..]), "{r:#?}");

    // A file sync delivers (listed in the manifest) is missing when it is not there.
    node.manifest.files.push(wmrender_contract::NodeFile {
        path: np(r"C:\k\kube-proxy.conf"),
        sha256: "0".repeat(64),
        size: 1,
        kind: wmrender_contract::FileKind::Bundle,
        staged: false,
    });
    node.remove(r"C:\k\kube-proxy.conf");
    let r = node.apply();
    assert_eq!(
        (r.status, r.missing.as_slice()),
        (ApplyStatus::Failed, &[r"C:\k\kube-proxy.conf".to_string()][..]),
        "{r:#?}"
    );
}

#[test]
fn kube_proxy_waits_while_the_network_step_is_pending() {
    let mut node = Node::new();
    node.sys.clear_script(NETWORK);
    node.sys.script(NETWORK, 0, "{\"ok\":false,\"pending\":\"the HNS network is not there yet\"}");
    node.sys.script(NETWORK, 0, OK);
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Pending, "{r:#?}");
    assert_eq!(r.pending, ["kube-proxy waits for step `network`: the HNS network is not there yet"]);
    assert_eq!(node.sys.state_of("kube-proxy"), Some(RunState::Stopped));
    let r = node.apply();
    assert_eq!((r.status, r.started.as_slice()), (ApplyStatus::Converged, &["kube-proxy".to_string()][..]), "{r:#?}");
    // Once per boot while kube-proxy runs; again after a reboot.
    node.sys.clear_events();
    assert_eq!(node.apply().steps.len(), 0);
    node.sys.reboot();
    assert_eq!(node.apply().steps, ["network"]);
}

#[test]
fn the_containers_reboot_makes_the_node_pending_until_the_boot_id_changes() {
    let mut node = Node::new();
    node.sys.clear_script(CONTAINERS);
    node.sys.script(CONTAINERS, 0, "{\"ok\":true,\"rebootRequired\":true}");
    let r = node.apply();
    assert_eq!((r.status, r.reboot_required), (ApplyStatus::Pending, true), "{r:#?}");
    // Nothing but the agent's own service, so the node finishes by itself after the reboot.
    assert_eq!(r.created, [paths::AGENT_SERVICE]);
    assert_eq!(node.sys.service_names(), [paths::AGENT_SERVICE]);
    let r = node.apply();
    assert_eq!((r.status, r.steps.len()), (ApplyStatus::Pending, 0), "{r:#?}");
    node.sys.reboot();
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Converged, "{r:#?}");
    assert_eq!(r.created, ALL);
    assert!(r.steps == ["network"], "the Containers step ran again: {r:#?}");
}

#[test]
fn hostile_values_reach_the_scm_and_the_scripts_as_literal_text() {
    let mut node = Node::new();
    // No `%`: the SCM expands `%NAME%` in a command line, so services.json refuses it (checked below).
    let hostile = r#"--label="a b" $(Remove-Item C:\ -Recurse) & calc.exe | ^& ; `whoami` 'q'"#;
    node.service_mut("windows_exporter").command = format!(r"C:\k\windows_exporter.exe {hostile} NODE_IP");
    node.service_mut("windows_exporter").description = "it's \"quoted\" & 100% $(x)".into();
    let arg = "line one\nline two $(Get-Process) \"q\" & 'x' %TEMP%";
    node.settings.steps[1].args = vec![arg.into(), "NODE_NAME".into()];
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Converged, "{r:#?}");
    let exporter = node.sys.status("windows_exporter").unwrap().config;
    // NODE_IP is not one of the service's node variables: left as written (WMCO's rule).
    assert_eq!(exporter.command, format!(r"C:\k\windows_exporter.exe {hostile} NODE_IP"));
    assert_eq!(exporter.description, "it's \"quoted\" & 100% $(x)");
    let script = Event::Script { script: np(NETWORK), args: vec![arg.into(), "win-node-1".into()] };
    position(&node.sys.events(), &script);
    // A command with a line break never reaches the SCM: services.json is refused, naming the file.
    node.service_mut("windows_exporter").command = "C:\\k\\windows_exporter.exe\r\nC:\\evil.exe".into();
    node.sys.clear_events();
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Failed);
    assert!(r.errors[0].starts_with(r"C:\k\wmrender\services.json: service `windows_exporter`"), "{r:#?}");
    assert!(node.sys.events().iter().all(|e| !matches!(e, Event::Updated(n) if n == "windows_exporter")));
    // Likewise a command with `%`.
    node.service_mut("windows_exporter").command = r"C:\k\windows_exporter.exe --x=%PATH%".into();
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Failed);
    assert!(r.errors[0].starts_with(r"C:\k\wmrender\services.json: service `windows_exporter`"), "{r:#?}");
    assert!(r.errors[0].contains('%'), "{r:#?}");
}

#[test]
fn the_node_name_is_lower_case_from_its_source_and_junk_is_refused() {
    // vSphere: host name and DNS suffix, also given to kubelet as --hostname-override.
    let mut node = Node::new();
    node.settings.node_name = NodeNameSource::DnsFullyQualified;
    let kubelet = node.service_mut("kubelet");
    kubelet.command.push_str(" --hostname-override=HOSTNAME_OVERRIDE");
    kubelet.node_variables.push(NodeVariable::HostnameOverride);
    let r = node.apply();
    assert_eq!((r.status, r.node_name.as_str()), (ApplyStatus::Converged, "win-node-1.example.internal"), "{r:#?}");
    assert!(
        node.sys
            .status("kubelet")
            .unwrap()
            .config
            .command
            .ends_with("--node-ip=10.0.0.5 --hostname-override=win-node-1.example.internal")
    );
    // The host name changes: kubelet is updated and restarted with its dependents.
    node.sys.set_dns("WIN-Node-2", "WIN-NODE-2.example.internal");
    let r = node.apply();
    assert_eq!(
        (r.updated.as_slice(), r.restarted.len()),
        (&["kubelet".to_string(), "hybrid-overlay-node".to_string()][..], 3),
        "{r:#?}"
    );

    // AWS: a step prints the name.
    node.settings.steps.push(Step {
        name: "hostname".into(),
        script: np(r"C:\k\wmrender\steps\hostname.ps1"),
        args: vec![],
        when: When::OnDemand,
    });
    node.settings.node_name = NodeNameSource::Step { step: "hostname".into() };
    node.write(r"C:\k\wmrender\steps\hostname.ps1", "s");
    node.sys.script(
        r"C:\k\wmrender\steps\hostname.ps1",
        0,
        "{\"ok\":true,\"value\":\"IP-10-0-0-5.EC2.Internal\\r\\n\"}",
    );
    let r = node.apply();
    assert_eq!((r.status, r.node_name.as_str()), (ApplyStatus::Converged, "ip-10-0-0-5.ec2.internal"), "{r:#?}");
    for junk in ["{\"ok\":true,\"value\":\"$(calc) & x\"}", "{\"ok\":true}", "{\"ok\":true,\"value\":\"\"}"] {
        node.sys.clear_script(r"C:\k\wmrender\steps\hostname.ps1");
        node.sys.script(r"C:\k\wmrender\steps\hostname.ps1", 0, junk);
        node.sys.clear_events();
        let r = node.apply();
        assert_eq!(r.status, ApplyStatus::Failed, "{junk}: {r:#?}");
        assert!(r.errors[0].contains("step `hostname`"), "{r:#?}");
        assert!(node.sys.events().iter().all(|e| matches!(e, Event::Script { .. })), "{junk}: acted on a bad name");
    }

    // A host name that is not a DNS name.
    let mut node = Node::new();
    node.sys.set_dns("bad_name!", "x");
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Failed);
    assert!(r.errors[0].contains("\"bad_name!\" is not a usable node name"), "{r:#?}");
    assert_eq!(node.sys.service_names(), [paths::AGENT_SERVICE]);
    // HOSTNAME_OVERRIDE where the platform does not override the name: the table contradicts node.json.
    let mut node = Node::new();
    node.service_mut("kubelet").node_variables.push(NodeVariable::HostnameOverride);
    let r = node.apply();
    assert!(r.errors.iter().any(|e| e.contains("uses HOSTNAME_OVERRIDE")), "{r:#?}");
}

#[test]
fn the_agent_service_is_registered_updated_and_never_stopped() {
    let mut node = Node::new();
    let old = ServiceConfig {
        name: paths::AGENT_SERVICE.into(),
        command: r"C:\old\wmrender-node.exe run".into(),
        description: "old".into(),
        dependencies: vec![],
        automatic: false,
    };
    node.sys.create_service(&old).unwrap();
    node.write(r"C:\old\wmrender-node.exe", "old agent");
    node.sys.start_service(paths::AGENT_SERVICE).unwrap();
    node.sys.clear_events();
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Converged, "{r:#?}");
    assert_eq!(r.updated, [paths::AGENT_SERVICE]);
    assert!(!r.started.contains(&paths::AGENT_SERVICE.to_string()));
    assert!(!stop_requests(&node.sys.events()).contains(&paths::AGENT_SERVICE.to_string()));
    assert_eq!(node.sys.status(paths::AGENT_SERVICE).unwrap().config, crate::agent_service::config());
    // Without its executable the service cannot run: a failure, said plainly.
    let mut node = Node::new();
    node.remove(paths::AGENT_EXE);
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Failed);
    assert!(r.errors[0].contains(r"C:\k\wmrender\wmrender-node.exe is not there"), "{r:#?}");
}

#[test]
fn a_crashed_service_is_started_again_and_nothing_else_moves() {
    let mut node = Node::new().converged();
    node.sys.crash("kubelet");
    let r = node.apply();
    assert_eq!((r.status, r.started.as_slice()), (ApplyStatus::Converged, &["kubelet".to_string()][..]), "{r:#?}");
    assert_eq!(stop_requests(&node.sys.events()), Vec::<String>::new());
}

#[test]
fn missing_files_fail_the_pass_before_anything_is_stopped() {
    let mut node = Node::new().converged();
    node.write(r"C:\k\kube-proxy.conf", "v2");
    node.remove(r"C:\k\hybrid-overlay-node.exe");
    node.remove(r"C:\k\bootstrap-kubeconfig");
    let r = node.apply();
    assert_eq!((r.status, r.status.exit_code()), (ApplyStatus::Failed, 1));
    assert_eq!(r.missing, [r"C:\k\bootstrap-kubeconfig", r"C:\k\hybrid-overlay-node.exe"]);
    assert_eq!(node.sys.events(), []);
    // No default route: NODE_IP is unknown, nothing is touched.
    node.sys.set_ip(None);
    node.write(r"C:\k\hybrid-overlay-node.exe", "v1");
    node.write(r"C:\k\bootstrap-kubeconfig", "v1");
    let r = node.apply();
    assert!(r.errors[0].contains("no IPv4 default route"), "{r:#?}");
    assert_eq!(node.sys.events(), []);
}

#[test]
fn an_open_sync_journal_or_a_bad_file_stops_the_pass_and_says_which_file() {
    let mut node = Node::new();
    node.manifest.pending = Some(Journal { files: vec![], remove: vec![] });
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Pending);
    assert!(r.pending[0].contains("open journal"), "{r:#?}");
    assert_eq!(node.sys.service_names(), [paths::AGENT_SERVICE]);

    let mut node = Node::new();
    node.save();
    node.write(paths::SETTINGS_JSON, "{\"platform\": 1}");
    let r = apply(&mut node.sys, &node.timing);
    assert_eq!(r.status, ApplyStatus::Failed);
    assert!(r.errors[0].starts_with(r"C:\k\wmrender\node.json: node.json does not parse"), "{r:#?}");
    node.remove(paths::SERVICES_JSON);
    let r = apply(&mut node.sys, &node.timing);
    assert!(r.errors[0].starts_with(r"C:\k\wmrender\services.json: is not on the node"), "{r:#?}");
    node.save();
    node.write(
        paths::NODE_MANIFEST,
        r#"{"wmrender":"0","files":[],"pending":{"files":[],"remove":["C:\\Windows\\win.ini"]}}"#,
    );
    let r = apply(&mut node.sys, &node.timing);
    assert!(r.errors[0].contains(r"names C:\Windows\win.ini, outside C:\k"), "{r:#?}");
}

#[test]
fn an_unreadable_record_costs_one_failed_pass_and_wmrender_services_are_adopted() {
    let mut node = Node::new().converged();
    node.write(paths::APPLIED_STATE, "{ not json");
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Failed);
    assert!(r.errors[0].contains("is not an agent state file"), "{r:#?}");
    // Without a record the running services are restarted once (what they loaded is unknown) and owned again.
    assert_eq!(r.restarted.len(), 5);
    assert_eq!(node.state().owned.len(), 5);
    node.sys.clear_events();
    assert_eq!(node.apply().status, ApplyStatus::Converged);
    assert_eq!(node.sys.events(), []);
}

#[test]
fn the_run_loop_backs_off_while_pending_and_finishes_after_the_reboot() {
    let node = Node::new();
    node.sys.clear_script(CONTAINERS);
    node.sys.script(CONTAINERS, 0, "{\"ok\":true,\"rebootRequired\":true}");
    node.save();
    let timing = Timing { interval: Duration::from_secs(7), ..node.timing.clone() };
    let mut pauses = vec![];
    let sys = &node.sys;
    // A second handle on the same fake, so the loop's wait can reboot it.
    let (_, passes) = crate::run::run_loop(&mut sys.clone(), &timing, None, &mut |d| {
        pauses.push(d);
        match pauses.len() {
            1 | 2 => false,
            3 => {
                sys.reboot();
                false
            }
            _ => true,
        }
    });
    assert_eq!(passes, 4);
    assert_eq!(pauses, [5, 10, 20, 7].map(Duration::from_secs));
    assert_eq!(sys.state_of("kube-proxy"), Some(RunState::Running));
    let log = std::fs::read_to_string(sys.local(&np(crate::log::LOG_FILE))).unwrap();
    assert_eq!(log.lines().count(), 4);
    assert!(log.lines().last().unwrap().contains("\"status\":\"converged\""), "{log}");
}

/// A certificate's outer shape (what the fake store checks): SEQUENCE { SEQUENCE {INTEGER n}, SEQUENCE {}, BIT
/// STRING }.
fn cert(n: u8) -> Vec<u8> {
    vec![0x30, 0x0b, 0x30, 0x03, 0x02, 0x01, n, 0x30, 0x00, 0x03, 0x02, 0x00, 0x00]
}

fn pem_bundle(certs: &[Vec<u8>]) -> String {
    use base64::Engine;
    certs
        .iter()
        .map(|c| {
            let b64 = base64::engine::general_purpose::STANDARD.encode(c);
            format!("-----BEGIN CERTIFICATE-----\n{b64}\n-----END CERTIFICATE-----\n")
        })
        .collect()
}

#[test]
fn the_bundles_cas_are_imported_rotated_and_only_the_agents_own_removed() {
    let mut node = Node::new();
    let (ca1, ca2, ca3, nodes_own) = (cert(1), cert(2), cert(3), cert(4));
    node.sys.preinstall_root(&nodes_own);
    node.write(
        paths::TRUSTED_CA_BUNDLE,
        &format!("# cluster CAs\n{}", pem_bundle(&[ca1.clone(), ca2.clone(), nodes_own.clone()])),
    );
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Converged, "{r:#?}");
    assert_eq!(r.trusted_cas_added, [sha256_hex(&ca1), sha256_hex(&ca2)]);
    assert_eq!(node.sys.root_store(), [nodes_own.clone(), ca1.clone(), ca2.clone()]);
    // The certificate the node had is not recorded as the agent's.
    assert_eq!(node.state().trusted_cas, [sha256_hex(&ca1), sha256_hex(&ca2)].into_iter().collect());

    // Nothing changes on the next pass.
    let r = node.apply();
    assert!(r.trusted_cas_added.is_empty() && r.trusted_cas_removed.is_empty(), "{r:#?}");

    // Rotation: ca1 and the node's own leave the bundle, ca3 joins. The node's own stays in the store.
    node.write(paths::TRUSTED_CA_BUNDLE, &pem_bundle(&[ca2.clone(), ca3.clone()]));
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Converged, "{r:#?}");
    assert_eq!((r.trusted_cas_added, r.trusted_cas_removed), (vec![sha256_hex(&ca3)], vec![sha256_hex(&ca1)]));
    assert_eq!(node.sys.root_store(), [nodes_own.clone(), ca2.clone(), ca3.clone()]);

    // A certificate the agent added but someone removed by hand is added again; one gone from the bundle and
    // from the store is just forgotten.
    assert!(node.sys.remove_root_certificate(&sha256_hex(&ca3)).unwrap());
    let r = node.apply();
    assert_eq!(r.trusted_cas_added, [sha256_hex(&ca3)]);

    // The bundle gone: everything the agent added goes, the node's own stays.
    node.remove(paths::TRUSTED_CA_BUNDLE);
    let r = node.apply();
    assert_eq!(r.trusted_cas_removed, [sha256_hex(&ca2), sha256_hex(&ca3)]);
    assert_eq!(node.sys.root_store(), [nodes_own]);
    assert!(node.state().trusted_cas.is_empty());
}

#[test]
fn a_bad_bundle_fails_the_pass_and_imports_nothing() {
    let mut node = Node::new();
    let key = "-----BEGIN RSA PRIVATE KEY-----\nc2VjcmV0LWtleS1tYXRlcmlhbA==\n-----END RSA PRIVATE KEY-----\n";
    node.write(paths::TRUSTED_CA_BUNDLE, &format!("{}{key}", pem_bundle(&[cert(1)])));
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Failed, "{r:#?}");
    assert!(node.sys.root_store().is_empty(), "the good certificate before the bad block was not imported");
    let line = r.to_line();
    assert!(line.contains(r"C:\\k\\ca-bundle.crt") && line.contains("RSA PRIVATE KEY"), "{line}");
    assert!(!line.contains("c2VjcmV0"), "the block's content is never echoed: {line}");
    assert!(node.sys.service_names().iter().all(|s| s == paths::AGENT_SERVICE), "no service before the CAs");

    // A fixed bundle converges.
    node.write(paths::TRUSTED_CA_BUNDLE, &pem_bundle(&[cert(1)]));
    let r = node.apply();
    assert_eq!((r.status, r.trusted_cas_added.len()), (ApplyStatus::Converged, 1), "{r:#?}");
}

#[test]
fn imported_cas_survive_the_containers_reboot_and_are_not_imported_twice() {
    let mut node = Node::new();
    node.write(paths::TRUSTED_CA_BUNDLE, &pem_bundle(&[cert(1)]));
    node.sys.clear_script(CONTAINERS);
    node.sys.script(CONTAINERS, 0, "{\"ok\":true,\"rebootRequired\":true}");
    let r = node.apply();
    assert_eq!((r.status, r.trusted_cas_added.len()), (ApplyStatus::Pending, 1), "{r:#?}");
    node.sys.reboot();
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Converged, "{r:#?}");
    assert!(r.trusted_cas_added.is_empty(), "{r:#?}");
    assert_eq!(node.sys.root_store(), [cert(1)]);
}

const REMOVE_HNS: &str = r"C:\k\wmrender\remove-hns-networks.ps1";

#[test]
fn deconfigure_removes_what_the_agent_set_up_dependents_first_its_own_service_last_and_again_is_a_no_op() {
    let mut node = Node::new();
    node.settings.steps.push(Step {
        name: wmrender_contract::settings::REMOVE_HNS_NETWORKS_STEP.into(),
        script: np(REMOVE_HNS),
        args: vec![],
        when: When::OnDemand,
    });
    node.settings.environment.insert("HTTP_PROXY".into(), "http://proxy:3128".into());
    node.write(REMOVE_HNS, "remove script");
    node.sys.script(REMOVE_HNS, 0, OK);
    node.write(paths::TRUSTED_CA_BUNDLE, &pem_bundle(&[cert(1)]));
    node.sys.preinstall_root(&cert(9));
    node.manifest.files.push(NodeFile {
        path: np(r"C:\k\bootstrap-kubeconfig"),
        sha256: String::new(),
        size: 0,
        kind: FileKind::Credential,
        staged: false,
    });
    // The proxy variable asks for a reboot first.
    let mut node = node;
    assert!(node.apply().reboot_required);
    node.sys.reboot();
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Converged, "{r:#?}");
    // A service the agent never created.
    let mut other = node.sys.clone();
    let foreign = ServiceConfig {
        name: "someone-else".into(),
        command: r"C:\tools\x.exe".into(),
        description: "not wmrender's".into(),
        dependencies: vec![],
        automatic: true,
    };
    other.create_service(&foreign).unwrap();
    node.sys.clear_events();
    assert!(node.sys.events().is_empty());
    // A pull was cut off fetching a program the manifest does not name yet: its part is the pull's record's.
    let never_committed = r"C:\k\csi-proxy\csi-proxy.exe";
    crate::pull::parts::record(&node.sys, never_committed).unwrap();
    let part = node.sys.local(&np(never_committed).with_suffix(wmrender_contract::PULLING_SUFFIX).unwrap());
    std::fs::create_dir_all(part.parent().unwrap()).unwrap();
    std::fs::write(&part, "MZ half a program").unwrap();

    let r = crate::deconfigure::deconfigure(&mut node.sys, &node.timing);
    assert_eq!(r.status, ApplyStatus::Converged, "{r:#?}");
    assert!(!part.exists(), "the part of a program never committed is still there");
    let deleted: Vec<&str> = r.deleted.iter().map(String::as_str).collect();
    let at = |n: &str| deleted.iter().position(|d| *d == n).unwrap_or_else(|| panic!("{n} not deleted: {deleted:?}"));
    assert!(at("kube-proxy") < at("hybrid-overlay-node") && at("hybrid-overlay-node") < at("kubelet"));
    assert!(at("kubelet") < at("containerd"));
    assert_eq!(deleted.last(), Some(&paths::AGENT_SERVICE), "its own service last");
    assert_eq!(deleted.len(), ALL.len() + 1);
    assert_eq!(node.sys.service_names(), ["someone-else"], "a service it never created stays");
    // The HNS networks go after every service stopped (hybrid-overlay would create them again).
    let events = node.sys.events();
    let script_at = position(&events, &Event::Script { script: np(REMOVE_HNS), args: vec![] });
    assert!(position(&events, &Event::Deleted("hybrid-overlay-node".into())) < script_at);
    assert_eq!(node.sys.root_store(), [cert(9)], "its CA removed, the node's own kept");
    assert_eq!(r.trusted_cas_removed, [sha256_hex(&cert(1))]);
    assert_eq!(node.sys.env("HTTP_PROXY"), None);
    for gone in [
        r"C:\k\bootstrap-kubeconfig",
        r"C:\k\kubelet.conf",
        r"C:\k\kubeconfig",
        r"C:\k\kube-proxy.exe",
        paths::TRUSTED_CA_BUNDLE,
        paths::SERVICES_JSON,
        paths::SETTINGS_JSON,
        paths::NODE_MANIFEST,
        paths::PULLED_STATE,
        REMOVE_HNS,
    ] {
        assert!(!node.sys.local(&np(gone)).exists(), "{gone} is still there");
    }
    assert!(node.sys.local(&np(paths::AGENT_EXE)).exists(), "the running agent's executable stays");

    node.sys.clear_events();
    let again = crate::deconfigure::deconfigure(&mut node.sys, &node.timing);
    assert_eq!(again.status, ApplyStatus::Converged, "{again:#?}");
    assert!(again.deleted.is_empty() && again.steps.is_empty() && again.trusted_cas_removed.is_empty(), "{again:#?}");
    assert!(node.sys.events().is_empty(), "a second run changes nothing: {:?}", node.sys.events());
}

#[test]
fn deconfigure_reports_a_failed_hns_step_keeps_the_bundle_and_a_second_run_finishes() {
    let mut node = Node::new();
    node.settings.steps.push(Step {
        name: wmrender_contract::settings::REMOVE_HNS_NETWORKS_STEP.into(),
        script: np(REMOVE_HNS),
        args: vec![],
        when: When::OnDemand,
    });
    node.write(REMOVE_HNS, "remove script");
    node.sys.script(REMOVE_HNS, 1, "{\"ok\":false,\"error\":\"HNS is busy\"}");
    let mut node = node.converged();
    let r = crate::deconfigure::deconfigure(&mut node.sys, &node.timing);
    assert_eq!((r.status, r.status.exit_code()), (ApplyStatus::Failed, 1), "{r:#?}");
    assert!(r.errors.iter().any(|e| e.contains("HNS is busy")), "{r:#?}");
    assert!(node.sys.local(&np(paths::SETTINGS_JSON)).exists(), "the bundle stays until the networks are gone");
    assert_eq!(node.sys.service_names(), [paths::AGENT_SERVICE], "its own service stays while something failed");
    node.sys.clear_script(REMOVE_HNS);
    node.sys.script(REMOVE_HNS, 0, OK);
    let r = crate::deconfigure::deconfigure(&mut node.sys, &node.timing);
    assert_eq!(r.status, ApplyStatus::Converged, "{r:#?}");
    assert_eq!(r.deleted, [paths::AGENT_SERVICE]);
    assert!(node.sys.service_names().is_empty());
}

#[test]
fn deconfigure_keeps_the_pull_record_while_a_part_cannot_be_removed_and_a_later_run_removes_both() {
    let mut node = Node::new().converged();
    let program = r"C:\k\kubelet.exe";
    crate::pull::parts::record(&node.sys, program).unwrap();
    // A folder where the part would be: it cannot be removed as a file.
    let part = node.sys.local(&np(program).with_suffix(wmrender_contract::PULLING_SUFFIX).unwrap());
    std::fs::create_dir_all(&part).unwrap();
    let state = node.sys.local(&np(paths::PULLED_STATE));
    let r = crate::deconfigure::deconfigure(&mut node.sys, &node.timing);
    assert_eq!(r.status, ApplyStatus::Failed, "{r:#?}");
    assert!(r.errors.iter().any(|e| e.contains("cannot remove")), "{r:#?}");
    assert!(state.exists(), "the record of the part that stays is kept");
    // Whatever went with the first run (the bundle may be gone by now), the next removes the part and the record.
    std::fs::remove_dir(&part).unwrap();
    std::fs::write(&part, "MZ part").unwrap();
    let r = crate::deconfigure::deconfigure(&mut node.sys, &node.timing);
    assert!(r.errors.is_empty(), "{r:#?}");
    assert!(!part.exists() && !state.exists(), "the part or the pull record outlived deconfigure");
}

#[test]
fn only_the_agent_starts_at_boot_and_it_starts_the_others_in_order_after_its_every_boot_steps() {
    let mut node = Node::new();
    node.settings.steps.push(Step {
        name: "routes".into(),
        script: np(r"C:\k\wmrender\steps\routes.ps1"),
        args: vec![],
        when: When::EveryBoot,
    });
    node.write(r"C:\k\wmrender\steps\routes.ps1", "routes");
    node.sys.script(r"C:\k\wmrender\steps\routes.ps1", 0, OK);
    let mut node = node.converged();
    for name in ALL {
        assert!(!node.sys.status(name).unwrap().config.automatic, "{name} starts on demand");
    }
    node.sys.reboot();
    // At boot Windows starts only the agent's service.
    assert_eq!(node.sys.state_of("kube-proxy"), Some(RunState::Stopped));
    assert_eq!(node.sys.state_of(paths::AGENT_SERVICE), Some(RunState::Running));
    node.sys.clear_events();
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Converged, "{r:#?}");
    let events = node.sys.events();
    let routes = position(&events, &Event::Script { script: np(r"C:\k\wmrender\steps\routes.ps1"), args: vec![] });
    let network = events
        .iter()
        .position(|e| matches!(e, Event::Script { script, .. } if *script == np(NETWORK)))
        .expect("the network step");
    let start = |n: &str| position(&events, &Event::Started { name: n.into(), deps_not_running: vec![] });
    assert!(ALL.iter().all(|n| routes < start(n)), "{events:#?}");
    assert!(start("hybrid-overlay-node") < network && network < start("kube-proxy"), "{events:#?}");
    assert_eq!(started(&events), ALL, "in table order");
}

#[test]
fn services_started_at_boot_by_an_older_agent_are_switched_to_demand_start_without_a_restart() {
    let mut node = Node::new().converged();
    for name in ALL {
        let mut config = node.sys.status(name).unwrap().config;
        config.automatic = true;
        node.sys.update_service(&config).unwrap();
    }
    node.sys.clear_events();
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Converged, "{r:#?}");
    assert_eq!(r.updated, ALL);
    assert!(r.restarted.is_empty() && stop_requests(&node.sys.events()).is_empty(), "{r:#?}");
}

#[test]
fn an_optional_service_that_lacks_a_file_or_fails_to_start_is_left_out_and_the_node_converges() {
    let mut node = Node::new();
    node.service_mut("windows_exporter").optional = true;
    // A required service never depends on an optional one: the table refuses it.
    node.remove(r"C:\k\tls\web.yaml");
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Converged, "{r:#?}");
    assert_eq!(r.degraded, [r"windows_exporter: C:\k\tls\web.yaml is not on the node"]);
    assert!(node.sys.status("windows_exporter").is_none(), "not created");
    for name in ["containerd", "kubelet", "hybrid-overlay-node", "kube-proxy"] {
        assert_eq!(node.sys.state_of(name), Some(RunState::Running), "{name}");
    }
    // Its file delivered, it is set up; a start that fails is its own problem too.
    node.write(r"C:\k\tls\web.yaml", "v1");
    node.remove(r"C:\k\windows_exporter.exe");
    let mut staged = np(r"C:\k\windows_exporter.exe");
    node.manifest.files.push(NodeFile {
        path: staged.clone(),
        sha256: sha256_hex(b"v2"),
        size: 2,
        kind: FileKind::Payload,
        staged: true,
    });
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Converged, "{r:#?}");
    assert!(r.degraded[0].starts_with(r"windows_exporter: C:\k\windows_exporter.exe"), "{r:#?}");
    assert!(r.missing.is_empty(), "{r:#?}");
    staged = staged.with_suffix(STAGED_SUFFIX).unwrap();
    node.write(staged.as_str(), "v2");
    let r = node.apply();
    assert_eq!((r.status, r.degraded.len()), (ApplyStatus::Converged, 0), "{r:#?}");
    assert_eq!(r.created, ["windows_exporter"]);
    // A required service lacking a file still fails the pass, before anything is stopped.
    node.remove(r"C:\k\kubelet.conf");
    node.sys.clear_events();
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Failed, "{r:#?}");
    assert_eq!(r.missing, [r"C:\k\kubelet.conf"]);
    assert_eq!(node.sys.events(), []);
}

#[test]
fn a_credential_the_service_reloads_restarts_nothing_and_one_it_reads_at_start_restarts_it() {
    let mut node = Node::new();
    node.service_mut("kubelet").reloads = vec![np(r"C:\k\kubelet-ca.crt")];
    node.service_mut("hybrid-overlay-node").secrets = vec![np(r"C:\k\bootstrap-ca.crt")];
    node.write(r"C:\k\kubelet-ca.crt", "ca 1");
    node.write(r"C:\k\bootstrap-ca.crt", "ca 1");
    let mut node = node.converged();
    node.write(r"C:\k\kubelet-ca.crt", "ca 2");
    let r = node.apply();
    assert_eq!((r.status, r.restarted.len()), (ApplyStatus::Converged, 0), "{r:#?}");
    assert_eq!(node.sys.events(), []);
    node.write(r"C:\k\bootstrap-ca.crt", "ca 2");
    let r = node.apply();
    assert_eq!(r.restarted, ["hybrid-overlay-node", "kube-proxy"], "{r:#?}");
    // A reloaded credential must be there all the same.
    node.remove(r"C:\k\kubelet-ca.crt");
    let r = node.apply();
    assert_eq!(r.missing, [r"C:\k\kubelet-ca.crt"], "{r:#?}");
}

#[test]
fn a_service_in_the_agents_record_without_wmrenders_mark_is_never_deleted() {
    let mut node = Node::new().converged();
    let foreign = ServiceConfig {
        name: "bystander".into(),
        command: r"C:\k\kubelet.exe".into(),
        description: "OpenShift managed bystander (wmrender)".into(),
        dependencies: vec![],
        automatic: true,
    };
    node.sys.add_foreign_service(foreign);
    let mut state = node.state();
    state.owned.insert("bystander".into());
    state.save(&node.sys.local(&np(paths::APPLIED_STATE))).unwrap();
    let r = node.apply();
    assert!(r.deleted.is_empty(), "{r:#?}");
    assert_eq!(node.sys.state_of("bystander"), Some(RunState::Running));
    assert!(!node.state().owned.contains("bystander"), "taken off the record");
    let r = crate::deconfigure::deconfigure(&mut node.sys, &node.timing);
    assert!(!r.deleted.contains(&"bystander".to_string()), "{r:#?}");
    assert!(node.sys.status("bystander").is_some());
}

#[test]
fn a_replaced_agent_hands_over_its_service_and_its_old_copy_goes() {
    let mut node = Node::new().converged();
    let first = node.sys.status(paths::AGENT_SERVICE).unwrap().pid.unwrap();
    // Sync sets the running agent aside and puts a new one in place.
    let aside = np(r"C:\k\wmrender\wmrender-node.exe.wmrender-old");
    node.write(aside.as_str(), "agent");
    node.write(paths::AGENT_EXE, "agent 2");
    node.sys.clear_events();
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Converged, "{r:#?}");
    assert_eq!(r.restarted, [paths::AGENT_SERVICE], "{r:#?}");
    assert!(r.since_delivery.restarted.contains(&paths::AGENT_SERVICE.to_string()));
    let second = node.sys.status(paths::AGENT_SERVICE).unwrap().pid.unwrap();
    assert_ne!(first, second);
    assert!(!node.sys.local(&aside).exists(), "the old copy goes once nothing runs it");
    // Same program: nothing to hand over.
    node.sys.clear_events();
    assert!(node.apply().restarted.is_empty());
    assert_eq!(node.sys.events(), []);
    // The service's own pass finds its program replaced: its loop ends for the new one to start.
    node.sys.set_current_pid(second);
    assert!(!crate::agent_service::replaced_under_me(&node.sys));
    node.write(paths::AGENT_EXE, "agent 3");
    assert!(crate::agent_service::replaced_under_me(&node.sys));
    let (ended, passes) = crate::run::run_loop(&mut node.sys.clone(), &node.timing, None, &mut |_| false);
    assert_eq!((ended, passes), (crate::run::Ended::HandOver, 1));
    // A copy still run by a process stays, and goes once that process ended.
    node.write(aside.as_str(), "agent 2");
    let old = node.sys.spawn(aside.as_str());
    node.sys.set_current_pid(1);
    node.apply();
    assert!(node.sys.local(&aside).exists());
    node.sys.kill_process(old).unwrap();
    node.apply();
    assert!(!node.sys.local(&aside).exists());
}

#[test]
fn deconfigure_ends_what_still_runs_the_services_programs_and_clears_host_local_state() {
    let mut node = Node::new().converged();
    let shim = node.sys.spawn(r"C:\k\containerd\containerd.exe");
    let stranger = node.sys.spawn(r"C:\Windows\notepad.exe");
    node.write(r"C:\var\lib\cni\networks\cbr0\10.132.0.5", "container-1");
    let r = crate::deconfigure::deconfigure(&mut node.sys, &node.timing);
    assert_eq!(r.status, ApplyStatus::Converged, "{r:#?}");
    assert_eq!(r.killed, [format!("containerd.exe (pid {shim})")]);
    assert!(!node.sys.process_alive(shim) && node.sys.process_alive(stranger));
    assert!(!node.sys.local(&np(paths::CNI_STATE_DIR)).exists());
}

#[test]
fn a_machines_host_is_renamed_to_the_machine_before_any_step_or_service_and_waits_for_the_reboot() {
    const RENAME: &str = r"C:\k\wmrender\steps\rename-host.ps1";
    let mut node = Node::new();
    node.settings.steps.push(Step {
        name: "rename-host".into(),
        script: np(RENAME),
        args: vec!["-MachineName".into(), "MACHINE_NAME".into()],
        when: When::OnDemand,
    });
    node.settings.rename_to_machine = Some("rename-host".into());
    node.write(RENAME, "rename");
    node.sys.script(RENAME, 0, "{\"ok\":true,\"rebootRequired\":true}");
    node.sys.script(RENAME, 0, OK);
    // No machine.json: a BYOH host keeps its name.
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Converged, "{r:#?}");
    assert!(!r.steps.contains(&"rename-host".to_string()));
    // A Machine's instance: renamed first, then nothing until Windows restarts.
    let mut node = Node::new();
    node.settings = node.settings.clone();
    node.settings.steps.push(Step {
        name: "rename-host".into(),
        script: np(RENAME),
        args: vec!["-MachineName".into(), "MACHINE_NAME".into()],
        when: When::OnDemand,
    });
    node.settings.rename_to_machine = Some("rename-host".into());
    node.write(RENAME, "rename");
    node.sys.script(RENAME, 0, "{\"ok\":true,\"rebootRequired\":true}");
    node.sys.script(RENAME, 0, OK);
    node.write(paths::MACHINE, r#"{"machine":"winwork-x7k2p"}"#);
    let r = node.apply();
    assert_eq!((r.status, r.reboot_required), (ApplyStatus::Pending, true), "{r:#?}");
    assert_eq!(r.steps, ["rename-host"]);
    let events = node.sys.events();
    assert_eq!(
        events[0],
        Event::Script { script: np(RENAME), args: vec!["-MachineName".into(), "winwork-x7k2p".into()] }
    );
    assert!(started(&events).iter().all(|s| s == paths::AGENT_SERVICE), "{events:#?}");
    // Same boot: still waiting. After the reboot: not renamed again, the node converges.
    assert!(node.apply().reboot_required);
    node.sys.reboot();
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Converged, "{r:#?}");
    assert!(!r.steps.contains(&"rename-host".to_string()));
    // A Machine name Windows cannot take is refused, never passed on.
    node.write(paths::MACHINE, r#"{"machine":"x & calc"}"#);
    let r = node.apply();
    assert!(r.errors[0].contains("not a Windows host name"), "{r:#?}");
}

#[test]
fn every_pass_steps_run_on_every_pass_and_old_rotated_files_go() {
    let mut node = Node::new();
    node.settings.steps.push(Step {
        name: "defender".into(),
        script: np(r"C:\k\wmrender\steps\defender.ps1"),
        args: vec![],
        when: When::EveryPass,
    });
    node.write(r"C:\k\wmrender\steps\defender.ps1", "defender");
    node.sys.script(r"C:\k\wmrender\steps\defender.ps1", 0, OK);
    node.settings.rotated_files = vec![wmrender_contract::RotatedFiles {
        directory: np(r"C:\k\cni\config"),
        prefix: "ovnkube-client-".into(),
        suffix: ".pem".into(),
        keep: 2,
        keep_always: vec!["ovnkube-client-current.pem".into()],
    }];
    for (i, name) in ["a", "b", "c", "current"].iter().enumerate() {
        let path = format!(r"C:\k\cni\config\ovnkube-client-{name}.pem");
        node.write(&path, name);
        let when = std::time::SystemTime::now() - Duration::from_secs(3600 * (10 - i as u64));
        std::fs::File::options().write(true).open(node.sys.local(&np(&path))).unwrap().set_modified(when).unwrap();
    }
    assert!(node.apply().steps.contains(&"defender".to_string()));
    assert!(node.apply().steps.contains(&"defender".to_string()), "again on the next pass");
    let dir = node.sys.local(&np(r"C:\k\cni\config"));
    let mut left: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    left.sort();
    assert_eq!(left, ["ovnkube-client-b.pem", "ovnkube-client-c.pem", "ovnkube-client-current.pem"]);
}

#[test]
fn a_pass_that_stops_early_is_reported_under_the_last_known_name_and_written_for_sync() {
    let mut node = Node::new().converged();
    node.sys.clear_script(CONTAINERS);
    node.write(CONTAINERS, "a new script");
    node.sys.script(CONTAINERS, 1, "{\"ok\":false,\"error\":\"DISM failed\"}");
    let r = node.apply();
    assert_eq!(r.status, ApplyStatus::Failed, "{r:#?}");
    assert_eq!(r.node_name, "win-node-1", "the name the last pass computed");
    let last = std::fs::read_to_string(node.sys.local(&np(paths::LAST_PASS))).unwrap();
    assert_eq!(ApplyResult::from_stdout(&last).unwrap(), r);
}

#[test]
fn what_passes_did_since_the_delivery_adds_up_until_the_next_delivery() {
    let mut node = Node::new().converged();
    node.write(r"C:\k\kube-proxy.conf", "v2");
    node.manifest.files.push(NodeFile {
        path: np(r"C:\k\kube-proxy.conf"),
        sha256: sha256_hex(b"v2"),
        size: 2,
        kind: FileKind::Bundle,
        staged: false,
    });
    // The agent service's pass applies the delivery; sync's apply comes after and has nothing left to do.
    let service_pass = node.apply();
    assert_eq!(service_pass.restarted, ["kube-proxy"]);
    let syncs_apply = node.apply();
    assert!(syncs_apply.restarted.is_empty());
    assert_eq!(syncs_apply.since_delivery.restarted, ["kube-proxy"]);
    // A new delivery starts again.
    node.manifest.files.push(NodeFile {
        path: np(r"C:\k\kubelet.conf"),
        sha256: sha256_hex(br"C:\k\kubelet.conf v1"),
        size: 1,
        kind: FileKind::Bundle,
        staged: false,
    });
    assert!(node.apply().since_delivery.restarted.is_empty());
}
