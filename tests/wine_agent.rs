//! `wmrender-node` under Wine: real services in Wine's Service Control Manager, fake service programs at the
//! paths of the service binaries (they log every start and stop with their command line, pid and executable
//! hashes), a recording fake in place of Wine's `powershell.exe` stub (it answers from a table each test writes;
//! it stands in for PowerShell and runs nothing), reboots simulated by restarting the wineserver.
//!
//! What Wine cannot show, and where it is covered instead: HNS, the Containers feature, Defender and a real
//! kubelet (the steps are scripts the fake answers for; their PowerShell is checked by parsing in
//! tests/node_bundle.rs); the SCM's dependency enforcement and recovery actions (Wine stores neither: the agent
//! starts in order itself, which these tests check, and its run loop restarts a killed service); the host's rename
//! (a step the fake answers: a reboot asked, then done; Wine's DNS name stays the Linux host's); a pod's containerd
//! shim (the fake service program run outside the SCM at the shim's path, `--linger`).
//!
//! Needs wine, wine64 and gcc-mingw-w64-x86-64 (`bash tests/e2e/wine-setup.sh`); the rig builds the Windows
//! programs itself.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use support::wine::{ServiceEvent, Wine, describe, rig};
use support::wine_bundle::{AWS_NAME, Delivery, STEP_OK, approve_csrs, network_step_output, step_answers, write_whole};
use wmrender_contract::{ApplyResult, ApplyStatus, NodePath, ServicesFile, paths};

/// Stages the example, answers every step, approves the node and applies: a converged node.
fn converged(wine: &Wine) -> (Delivery, ApplyResult) {
    let d = Delivery::example(wine);
    d.stage(wine);
    wine.set_powershell(&step_answers());
    approve_csrs(wine);
    network_step_output(wine);
    let passes = wine.agent_passes().len();
    let (run, result) = wine.apply();
    assert_eq!((run.code, result.status), (0, ApplyStatus::Converged), "{}", run.text());
    // The agent service this apply started makes a pass at once (then waits its interval): wait for it, so it does
    // not race the test's next change (it would apply the change itself, and the test's apply would find nothing).
    let after = wine.wait_agent_passes(passes + 1, Duration::from_secs(60));
    assert_eq!(after.last().map(|p| p.status), Some(ApplyStatus::Converged), "{after:?}");
    (d, result)
}

/// The command the SCM must hold for a service: its table command with the node variables replaced as text.
fn resolved(command: &str, node_ip: &str, node_name: &str) -> String {
    command.replace("HOSTNAME_OVERRIDE", node_name).replace("NODE_NAME", node_name).replace("NODE_IP", node_ip)
}

/// The IPv4 address Linux would send from towards the internet: the source address of the default route.
fn default_route_source() -> Option<String> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("192.0.2.200:9").ok()?; // no packet is sent for a UDP connect
    Some(s.local_addr().ok()?.ip().to_string())
}

fn names(v: &[String]) -> BTreeSet<String> {
    v.iter().cloned().collect()
}

fn set<const N: usize>(v: [&str; N]) -> BTreeSet<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The services that logged `event` among `events`.
fn with_event(events: &[ServiceEvent], event: &str) -> BTreeSet<String> {
    events.iter().filter(|e| e.event == event).map(|e| e.service.clone()).collect()
}

fn first(events: &[ServiceEvent], service: &str, event: &str) -> Option<ServiceEvent> {
    events.iter().find(|e| e.service == service && e.event == event).cloned()
}

fn last(events: &[ServiceEvent], service: &str, event: &str) -> Option<ServiceEvent> {
    events.iter().rev().find(|e| e.service == service && e.event == event).cloned()
}

/// The fake services that are running right now, by the SCM.
fn running(wine: &Wine, table: &ServicesFile) -> BTreeSet<String> {
    let names: Vec<&str> = table.services.iter().map(|s| s.name.as_str()).collect();
    wine.services(&names).into_iter().filter(|(_, s)| s["state"] == "running").map(|(n, _)| n).collect()
}

/// A service restarted by a change: stopped, then started again by a new process.
fn assert_restarted(events: &[ServiceEvent], expected: &BTreeSet<String>) {
    assert_eq!(with_event(events, "stop-requested"), *expected, "stopped:\n{}", describe(events));
    assert_eq!(with_event(events, "start"), *expected, "started again:\n{}", describe(events));
    for name in expected {
        let stop = first(events, name, "stop-requested").unwrap();
        let start = last(events, name, "start").unwrap();
        assert!(stop.t <= start.t && stop.pid != start.pid, "{name}: stop, then a new process\n{}", describe(events));
    }
}

/// `changed` plus every service that depends on them: Windows refuses to stop a service whose dependents run.
fn with_dependents(table: &ServicesFile, changed: &[&str]) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = changed.iter().map(|s| s.to_string()).collect();
    for c in changed {
        out.extend(table.dependents(c).iter().map(|s| s.name.clone()));
    }
    out
}

/// Wine's sc.exe.
fn sc(wine: &Wine, args: &[&str]) {
    let mut all = vec!["sc"];
    all.extend_from_slice(args);
    let r = wine.wine(&all, Duration::from_secs(60));
    assert_eq!(r.code, 0, "sc {args:?}\n{}", r.text());
}

#[test]
fn the_rig_runs_fake_services_in_wines_scm_and_survives_a_reboot() {
    // The rig itself, without the agent: a fake service created with Wine's sc.exe logs its exact command line,
    // stops on request, stalls when told to, is killed by the probe, and an automatic one comes back after a reboot.
    let mut wine = rig();
    let fake = std::fs::read(wine.exes.join("fake-service.exe")).unwrap();
    write_whole(&wine.c(r"C:\k\rig-check.exe"), &fake);
    let command = r#"C:\k\rig-check.exe --flag="a b" 100% $(x) & y"#;
    sc(&wine, &["create", "rig-check", "binPath=", command, "start=", "auto", "depend=", "RpcSs"]);
    sc(&wine, &["start", "rig-check"]);
    let events = wine.wait_events("the rig check service to start", Duration::from_secs(30), |e| {
        e.iter().any(|e| e.event == "start")
    });
    let start = first(&events, "rig-check", "start").expect("a start line");
    assert_eq!(start.command_line.as_deref(), Some(command));
    assert_eq!(start.argv[1], "--flag=a b");
    let s = &wine.services(&["rig-check"])["rig-check"];
    assert_eq!((s["state"].as_str(), s["pid"].as_u64()), (Some("running"), Some(start.pid as u64)), "{s}");
    // Wine's sc.exe ends its DependOnService list with one NUL and stray bytes; the first entry is what it got.
    assert_eq!(s["registry"]["dependOnService"][0], "RpcSs", "{s}");
    assert_eq!(wine.listed_services(), ["rig-check"]);

    wine.reboot();
    let events = wine.wait_events("the automatic service after the reboot", Duration::from_secs(30), |e| {
        e.iter().filter(|e| e.event == "start").count() == 2
    });
    assert_ne!(last(&events, "rig-check", "start").unwrap().pid, start.pid);
    assert_eq!(with_event(&events, "stop-requested"), BTreeSet::new(), "a reboot sends no stop request");

    wine.set_mode("rig-check", Some("stall-stop"));
    let r = wine.wine(&["sc", "stop", "rig-check"], Duration::from_secs(60));
    assert_eq!(r.code, 0, "{}", r.text());
    wine.wait_events("the stall", Duration::from_secs(30), |e| e.iter().any(|e| e.event == "stalling"));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(wine.services(&["rig-check"])["rig-check"]["state"], "stop-pending");
    let pid = last(&wine.service_events(), "rig-check", "start").unwrap().pid;
    wine.kill_pid(pid);
    // Wine's SCM goes on reporting StopPending for a killed service (Windows reports Stopped), and starts it again
    // on request.
    wine.set_mode("rig-check", None);
    sc(&wine, &["start", "rig-check"]);
    let events = wine.wait_events("the killed service to start again", Duration::from_secs(30), |e| {
        e.iter().filter(|e| e.event == "start").count() == 3
    });
    assert_ne!(last(&events, "rig-check", "start").unwrap().pid, pid);
    assert!(!events.iter().any(|e| e.event == "stop"), "killed, never stopped by itself\n{}", describe(&events));

    // The fake powershell: recorded, answered from the table, loud about calls nobody expected.
    let mut table = BTreeMap::new();
    table.insert("step.ps1".to_string(), vec![("first\n".to_string(), 4), ("second\n".to_string(), 0)]);
    wine.set_powershell(&table);
    let ps = r"C:\windows\system32\WindowsPowerShell\v1.0\powershell.exe";
    let r1 = wine.wine(&[ps, "-NoProfile", "-File", r"C:\k\step.ps1", "-X", "$(y)"], Duration::from_secs(30));
    let r2 = wine.wine(&["powershell.exe", "-File", r"C:\k\step.ps1"], Duration::from_secs(30));
    let r3 = wine.wine(&["powershell", "-Command", "Remove-Item C:\\"], Duration::from_secs(30));
    assert_eq!((r1.code, r1.stdout.as_str(), r2.code, r2.stdout.as_str()), (4, "first\n", 0, "second\n"));
    assert!(r3.code == 1 && r3.stderr.contains("runs nothing"), "{}", r3.text());
    assert_eq!(wine.powershell_calls()[0], ("step.ps1".to_string(), vec!["-X".to_string(), "$(y)".to_string()]));
}

#[test]
fn apply_creates_every_service_with_its_rendered_command_and_starts_them_in_dependency_order() {
    let wine = rig();
    let (d, result) = converged(&wine);
    let table = d.bundle.services();
    let all: Vec<&str> = table.services.iter().map(|s| s.name.as_str()).collect();

    assert_eq!(result.node_name, AWS_NAME, "the metadata step's name, lower case: {result:?}");
    if let Some(ip) = default_route_source() {
        assert_eq!(result.node_ip, ip, "the address of the default route's interface");
    }
    let mut expected_created = names(&all.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    expected_created.insert(paths::AGENT_SERVICE.into());
    assert_eq!(names(&result.created), expected_created, "{result:?}");

    let scm = wine.services(&all);
    let events = wine.wait_events("every service to log its start", Duration::from_secs(30), |e| {
        all.iter().all(|n| e.iter().any(|e| e.service == *n && e.event == "start"))
    });
    for s in &table.services {
        let want = resolved(&s.command, &result.node_ip, &result.node_name);
        let got = &scm[&s.name];
        assert_eq!(got["state"], "running", "{}: {got}", s.name);
        assert_eq!(got["registry"]["imagePath"].as_str(), Some(want.as_str()), "{}", s.name);
        assert_eq!(got["registry"]["description"].as_str(), Some(s.description.as_str()), "{}", s.name);
        // Demand start: only the agent's service starts at boot; it starts the others in order.
        assert_eq!(got["registry"]["start"], 3, "{}: demand start", s.name);
        assert_eq!(got["registry"]["dependOnService"], serde_json::json!(s.dependencies), "{}", s.name);
        // The SCM ran exactly that line.
        let start = first(&events, &s.name, "start").unwrap();
        assert_eq!(start.command_line.as_deref(), Some(want.as_str()), "{}", s.name);
        assert!(!want.contains("NODE_IP") && !want.contains("NODE_NAME") && !want.contains("HOSTNAME_OVERRIDE"));
        // Each dependency was running before the service was started (Wine's SCM does not enforce this).
        for dep in &s.dependencies {
            let (a, b) = (first(&events, dep, "start").unwrap(), first(&events, &s.name, "starting").unwrap());
            assert!(a.t <= b.t, "{dep} must run before {} starts\n{}", s.name, describe(&events));
        }
    }
    assert_eq!(
        events.iter().filter(|e| e.event == "starting").count(),
        all.len(),
        "one start each\n{}",
        describe(&events)
    );

    // The agent's own service: installed and running, so the node finishes and stays converged by itself.
    let agent = &wine.services(&[paths::AGENT_SERVICE])[paths::AGENT_SERVICE];
    assert_eq!(agent["registry"]["imagePath"].as_str(), Some(r#""C:\k\wmrender\wmrender-node.exe" run"#), "{agent}");
    assert_eq!((agent["registry"]["start"].as_u64(), agent["state"].as_str()), (Some(2), Some("running")), "{agent}");

    // The steps ran through powershell: the once steps once, the network step with the node name before
    // kube-proxy started.
    let calls = wine.powershell_calls();
    for once in ["containers-feature.ps1", "firewall.ps1"] {
        assert_eq!(calls.iter().filter(|(k, _)| k == once).count(), 1, "{once}: {calls:?}");
    }
    let network: Vec<&Vec<String>> = calls.iter().filter(|(k, _)| k == "network-conf.ps1").map(|(_, a)| a).collect();
    assert!(!network.is_empty(), "{calls:?}");
    assert_eq!(network[0], &vec!["-NodeName".to_string(), AWS_NAME.to_string()]);
    assert!(calls.iter().all(|(k, _)| k != "-command"), "no inline PowerShell: {calls:?}");
}

#[test]
fn first_boot_starts_containerd_and_kubelet_and_the_rest_once_the_kubeconfig_exists() {
    let wine = rig();
    let d = Delivery::example(&wine);
    d.stage(&wine);
    wine.set_powershell(&step_answers());
    let (run, result) = wine.apply();
    assert_eq!((run.code, result.status), (3, ApplyStatus::Pending), "{}", run.text());
    assert!(result.pending.iter().any(|p| p.contains("kubeconfig")), "{result:?}");
    assert!(result.missing.is_empty(), "kube-proxy.conf is the network step's to write, not missing: {result:?}");
    let table = d.bundle.services();
    // What runs before the node joined: every service that waits for no file and on no waiting service
    // (containerd and kubelet, as WMCO's first stage).
    let mut first_stage = BTreeSet::new();
    for s in &table.services {
        if s.requires.is_empty() && s.dependencies.iter().all(|d| first_stage.contains(d)) {
            first_stage.insert(s.name.clone());
        }
    }
    assert!(first_stage.contains("containerd") && first_stage.contains("kubelet"), "{first_stage:?}");
    assert_eq!(running(&wine, &table), first_stage);
    assert!(
        !wine.powershell_calls().iter().any(|(k, _)| k == "network-conf.ps1"),
        "no network step before kubelet joined"
    );

    approve_csrs(&wine);
    network_step_output(&wine);
    let (run, result) = wine.apply();
    assert_eq!((run.code, result.status), (0, ApplyStatus::Converged), "{}", run.text());
    assert_eq!(running(&wine, &table).len(), table.services.len());
}

#[test]
fn a_second_apply_changes_nothing() {
    let wine = rig();
    converged(&wine);
    let (events, calls) = (wine.service_events().len(), wine.powershell_calls());
    let (run, again) = wine.apply();
    assert_eq!((run.code, again.status), (0, ApplyStatus::Converged), "{}", run.text());
    let nothing: Vec<String> = vec![];
    for (what, list) in [
        ("created", &again.created),
        ("updated", &again.updated),
        ("deleted", &again.deleted),
        ("started", &again.started),
        ("restarted", &again.restarted),
        ("killed", &again.killed),
        ("replaced", &again.replaced),
        ("environment", &again.environment),
    ] {
        assert_eq!(list, &nothing, "{what}: {again:?}");
    }
    assert_eq!(wine.service_events().len(), events, "no service was touched\n{}", describe(&wine.service_events()));
    let new_calls = &wine.powershell_calls()[calls.len()..];
    assert!(
        new_calls.iter().all(|(k, _)| k != "containers-feature.ps1" && k != "firewall.ps1"),
        "once steps do not run again: {new_calls:?}"
    );
    // The Defender exclusion is applied on every pass, as WICD does on every reconcile (someone may remove it).
    assert_eq!(new_calls.iter().filter(|(k, _)| k == "windows-defender-exclusion.ps1").count(), 1, "{new_calls:?}");
}

#[test]
fn changing_one_file_restarts_exactly_the_services_that_use_it_and_two_files_likewise() {
    let wine = rig();
    let (mut d, _) = converged(&wine);
    let table = d.bundle.services();

    for (changed, services) in [
        (vec![r"C:\k\tls\windows-exporter-webconfig.yaml"], vec!["windows_exporter"]),
        (vec![r"C:\k\kubelet.conf"], vec!["kubelet"]),
        (
            vec![r"C:\k\tls\windows-exporter-webconfig.yaml", r"C:\k\credential-provider-config.yaml"],
            vec!["windows_exporter", "kubelet"],
        ),
    ] {
        for path in &changed {
            let p = NodePath::known(path);
            let mut bytes = d.bundle.files[&p].clone();
            bytes.extend_from_slice(b"# changed\n");
            d.bundle.files.insert(p, bytes);
        }
        d.stage(&wine);
        let mark = wine.service_events().len();
        let (run, result) = wine.apply();
        assert_eq!((run.code, result.status), (0, ApplyStatus::Converged), "{}", run.text());
        let expected = with_dependents(&table, &services);
        assert_eq!(names(&result.restarted), expected, "{changed:?}: {result:?}");
        let events = wine.wait_events("the restarted services to log their start", Duration::from_secs(30), |e| {
            with_event(&e[mark..], "start") == expected
        });
        assert_restarted(&events[mark..], &expected);
        assert_eq!(running(&wine, &table).len(), table.services.len());
    }
}

#[test]
fn a_changed_binary_stops_its_services_before_the_swap_and_starts_them_after() {
    let wine = rig();
    let (mut d, _) = converged(&wine);
    let table = d.bundle.services();
    let old = wmrender_contract::sha256_hex(&d.payload[&NodePath::known(r"C:\k\csi-proxy.exe")].1);

    for (binary, users, version) in [
        (r"C:\k\csi-proxy.exe", vec!["csi-proxy"], "2"),
        (r"C:\k\kube-log-runner.exe", vec!["kubelet", "kube-proxy"], "3"),
    ] {
        let path = NodePath::known(binary);
        // A new build of the binary: the fake with bytes after its end (Windows ignores them; the hash changes).
        let mut new = d.payload[&path].1.clone();
        new.extend_from_slice(format!("wine-rig build {version}").as_bytes());
        let new_sha = wmrender_contract::sha256_hex(&new);
        d.payload.get_mut(&path).unwrap().1 = new;
        d.stage(&wine);
        assert!(wine.node(&path.with_suffix(wmrender_contract::STAGED_SUFFIX).unwrap()).is_file());
        let mark = wine.service_events().len();
        let (run, result) = wine.apply();
        assert_eq!((run.code, result.status), (0, ApplyStatus::Converged), "{}", run.text());
        assert_eq!(result.replaced, vec![binary.to_string()], "{result:?}");
        let expected = with_dependents(&table, &users);
        let events = wine.wait_events("the services of the new binary to start", Duration::from_secs(30), |e| {
            with_event(&e[mark..], "start") == expected
        });
        let events = &events[mark..];
        assert_restarted(events, &expected);
        for user in &users {
            // The process that stopped still saw the old binary at its path; the new process runs the new one.
            let stop = first(events, user, "stop").unwrap_or_else(|| panic!("{user} stopped\n{}", describe(events)));
            let start = last(events, user, "start").unwrap();
            let sha_at = |e: &ServiceEvent| {
                if e.exe.eq_ignore_ascii_case(binary) { e.exe_sha256.clone() } else { e.binaries[binary].clone() }
            };
            assert_eq!(sha_at(&start).as_deref(), Some(new_sha.as_str()), "{user} runs the new {binary}");
            assert_ne!(sha_at(&stop).as_deref(), Some(new_sha.as_str()), "{user} was stopped before the swap");
            if *user == "csi-proxy" {
                assert_eq!(sha_at(&stop).as_deref(), Some(old.as_str()));
            }
        }
        assert!(!wine.node(&path.with_suffix(wmrender_contract::STAGED_SUFFIX).unwrap()).exists());
        assert_eq!(wmrender_contract::sha256_hex(&std::fs::read(wine.node(&path)).unwrap()), new_sha);
    }
}

#[test]
fn a_stalled_service_is_killed_after_the_bounded_wait() {
    let wine = rig();
    let (mut d, _) = converged(&wine);
    wine.set_mode("csi-proxy", Some("stall-stop"));
    let path = NodePath::known(r"C:\k\csi-proxy.exe");
    d.payload.get_mut(&path).unwrap().1.extend_from_slice(b"wine-rig build 2");
    d.stage(&wine);
    let mark = wine.service_events().len();
    let old_pid = wine.services(&["csi-proxy"])["csi-proxy"]["pid"].as_u64().unwrap() as u32;
    let (run, result) = wine.apply();
    assert_eq!((run.code, result.status), (0, ApplyStatus::Converged), "{}", run.text());
    assert_eq!(result.killed, vec!["csi-proxy".to_string()], "{result:?}");
    let events = wine.wait_events("csi-proxy to start again", Duration::from_secs(30), |e| {
        e[mark..].iter().any(|e| e.service == "csi-proxy" && e.event == "start")
    });
    let events = &events[mark..];
    let stall = first(events, "csi-proxy", "stalling").expect("the stop request reached the service");
    let start = last(events, "csi-proxy", "start").unwrap();
    assert!(first(events, "csi-proxy", "stop").is_none(), "it never stopped by itself\n{}", describe(events));
    assert_eq!(stall.pid, old_pid);
    assert_ne!(start.pid, old_pid);
    // The agent waited (WMRENDER_NODE_STOP_TIMEOUT=3 in the rig) before it killed the process.
    assert!(start.t - stall.t >= 2_500, "killed {} ms after the stop request", start.t - stall.t);
    assert_eq!(wine.services(&["csi-proxy"])["csi-proxy"]["state"], "running");
}

#[test]
fn a_service_removed_from_services_json_is_deleted_and_others_are_left_alone() {
    let wine = rig();
    // A service wmrender never created, with its binary below C:\k: never touched.
    let fake = std::fs::read(wine.exes.join("fake-service.exe")).unwrap();
    write_whole(&wine.c(r"C:\k\bystander.exe"), &fake);
    sc(&wine, &["create", "bystander", "binPath=", r"C:\k\bystander.exe", "start=", "auto"]);
    sc(&wine, &["start", "bystander"]);
    let (mut d, _) = converged(&wine);

    let mut table = d.bundle.services();
    table.services.retain(|s| s.name != "csi-proxy");
    d.bundle.set_services(&table);
    d.stage(&wine);
    let mark = wine.service_events().len();
    let (run, result) = wine.apply();
    assert_eq!((run.code, result.status), (0, ApplyStatus::Converged), "{}", run.text());
    assert_eq!(
        result.deleted,
        vec!["csi-proxy".to_string()],
        "{result:?}\nagent service passes: {:?}",
        wine.agent_passes()
    );
    let gone = &wine.services(&["csi-proxy"])["csi-proxy"];
    assert_eq!((gone["exists"].as_bool(), &gone["registry"]), (Some(false), &serde_json::Value::Null), "{gone}");
    let events = &wine.service_events()[mark..];
    assert_eq!(with_event(events, "stop-requested"), set(["csi-proxy"]), "{}", describe(events));
    let bystander = &wine.services(&["bystander"])["bystander"];
    assert_eq!(bystander["state"], "running", "{bystander}");
    assert_eq!(running(&wine, &table).len(), table.services.len());
}

#[test]
fn proxy_variables_are_set_and_removed_in_the_registry_and_services_see_them_after_a_reboot() {
    let mut wine = rig();
    let (mut d, _) = converged(&wine);
    let mut settings = d.bundle.settings();
    let no_proxy = ".cluster.local,.svc,10.0.0.0/16,169.254.169.254,api-int.wine.example.com";
    settings.environment.insert("HTTP_PROXY".into(), "http://proxy.example.com:3128".into());
    settings.environment.insert("NO_PROXY".into(), no_proxy.into());
    d.bundle.set_settings(&settings);
    d.stage(&wine);
    let (run, result) = wine.apply();
    assert_eq!((run.code, result.status, result.reboot_required), (3, ApplyStatus::Pending, true), "{}", run.text());
    assert_eq!(names(&result.environment), set(["HTTP_PROXY", "NO_PROXY"]), "{result:?}");
    let env = wine.machine_env(&["HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"]);
    assert_eq!(env["HTTP_PROXY"].as_deref(), Some("http://proxy.example.com:3128"));
    assert_eq!(env["NO_PROXY"].as_deref(), Some(no_proxy));
    assert_eq!(env["HTTPS_PROXY"], None, "an empty value means not set");

    let mark = wine.service_events().len();
    wine.reboot();
    let (run, result) = wine.apply();
    assert_eq!((run.code, result.status), (0, ApplyStatus::Converged), "after the reboot: {}", run.text());
    let events = wine.wait_events("kubelet to start after the reboot", Duration::from_secs(60), |e| {
        e[mark..].iter().any(|e| e.service == "kubelet" && e.event == "start")
    });
    let kubelet = last(&events[mark..], "kubelet", "start").unwrap();
    assert_eq!(kubelet.env["HTTP_PROXY"].as_deref(), Some("http://proxy.example.com:3128"), "{kubelet:?}");
    assert_eq!(kubelet.env["NO_PROXY"].as_deref(), Some(no_proxy));

    settings.environment.insert("HTTP_PROXY".into(), String::new());
    settings.environment.insert("NO_PROXY".into(), String::new());
    d.bundle.set_settings(&settings);
    d.stage(&wine);
    let (run, result) = wine.apply();
    assert_eq!((run.code, result.status, result.reboot_required), (3, ApplyStatus::Pending, true), "{}", run.text());
    let env = wine.machine_env(&["HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"]);
    assert!(env.values().all(Option::is_none), "removed: {env:?}");
}

#[test]
fn a_step_that_fails_is_retried_by_the_next_run_and_converges() {
    let wine = rig();
    let d = Delivery::example(&wine);
    d.stage(&wine);
    approve_csrs(&wine);
    network_step_output(&wine);
    let mut table = step_answers();
    // Exit 0 and no result line (what Wine's own stub does), then exit 0 with ok:false, then success: the agent
    // trusts the result line, not the exit code.
    table.insert(
        "windows-defender-exclusion.ps1".into(),
        vec![
            (String::new(), 0),
            ("{\"ok\":false,\"error\":\"Add-MpPreference: access denied\"}\n".into(), 0),
            (format!("{STEP_OK}\n"), 0),
        ],
    );
    wine.set_powershell(&table);
    let (run, result) = wine.apply();
    assert_eq!((run.code, result.status), (1, ApplyStatus::Failed), "{}", run.text());
    assert!(result.errors.iter().any(|e| e.contains("defender-exclusion")), "the error names the step: {result:?}");

    // The next runs (the agent service's loop, with back-off, or another apply) retry it until it converges.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if wine.agent_passes().iter().any(|p| p.status == ApplyStatus::Converged) {
            break;
        }
        let (_, r) = wine.apply();
        if r.status == ApplyStatus::Converged {
            break;
        }
        assert!(Instant::now() < deadline, "never converged; last: {r:?}");
    }
    let defender = wine.powershell_calls().iter().filter(|(k, _)| k == "windows-defender-exclusion.ps1").count();
    assert!(defender >= 3, "retried until it succeeded: {:?}", wine.powershell_calls());
    let calls = wine.powershell_calls().len();
    let (run, result) = wine.apply();
    assert_eq!((run.code, result.status), (0, ApplyStatus::Converged), "{}", run.text());
    assert!(
        wine.powershell_calls()[calls..].iter().any(|(k, _)| k == "windows-defender-exclusion.ps1"),
        "applied again on the next pass, as WICD does on every reconcile"
    );
    let table = d.bundle.services();
    assert_eq!(running(&wine, &table).len(), table.services.len());
}

#[test]
fn after_a_simulated_reboot_the_agent_service_comes_back_and_finishes() {
    let mut wine = rig();
    let d = Delivery::example(&wine);
    d.stage(&wine);
    approve_csrs(&wine);
    network_step_output(&wine);
    // Enabling the Containers feature needs a reboot; until Windows restarts, the script says so every time.
    let mut table = step_answers();
    table.insert("containers-feature.ps1".into(), vec![("{\"ok\":true,\"rebootRequired\":true}\n".into(), 0)]);
    wine.set_powershell(&table);
    // The cluster's CA is imported before the reboot and must survive it (the store is in the registry).
    let dir = tempfile::tempdir().unwrap();
    let (ca_pem, _, ca_sha) = openssl_ca(dir.path(), "proxy-ca");
    write_whole(&wine.c(r"C:\k\ca-bundle.crt"), ca_pem.as_bytes());
    let (run, result) = wine.apply();
    assert_eq!((run.code, result.status, result.reboot_required), (3, ApplyStatus::Pending, true), "{}", run.text());
    assert_eq!(result.trusted_cas_added, std::slice::from_ref(&ca_sha), "{}", run.text());
    assert!(
        result.created.iter().all(|s| s == paths::AGENT_SERVICE),
        "containerd cannot run before the reboot: {result:?}"
    );
    assert!(wine.service_events().is_empty(), "no service started before the reboot");
    let routes_before = wine.powershell_calls().iter().filter(|(k, _)| k == "aws-routes.ps1").count();

    // The reboot: the feature is on afterwards. Nobody runs apply: the agent service does it.
    wine.set_powershell(&step_answers());
    let passes = wine.agent_passes().len();
    wine.reboot();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let p = wine.agent_passes();
        if p[passes.min(p.len())..].iter().any(|r| r.status == ApplyStatus::Converged) {
            break;
        }
        assert!(Instant::now() < deadline, "the agent service did not converge after the reboot: {p:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
    let services = d.bundle.services();
    assert_eq!(running(&wine, &services).len(), services.services.len());
    assert!(root_store(&wine).contains(&ca_sha), "the imported CA survived the reboot");
    let after_reboot = wine.agent_passes();
    assert!(
        after_reboot[passes.min(after_reboot.len())..].iter().all(|p| p.trusted_cas_added.is_empty()),
        "not imported again after the reboot: {after_reboot:?}"
    );
    let routes_after = wine.powershell_calls().iter().filter(|(k, _)| k == "aws-routes.ps1").count();
    assert!(routes_after > routes_before, "the every-boot step ran again after the reboot");
}

#[test]
fn a_killed_service_process_is_restarted() {
    let mut wine = rig();
    // A short loop interval for this test; machine variables reach the agent service at boot.
    wine.set_knob("WMRENDER_NODE_INTERVAL", "2");
    wine.reboot();
    let (d, _) = converged(&wine);
    let table = d.bundle.services();
    let pid = wine.kill_service_process("kubelet");
    let events = wine.wait_events("kubelet to run again", Duration::from_secs(60), |e| {
        e.iter().filter(|e| e.service == "kubelet" && e.event == "start").any(|e| e.pid != pid)
    });
    assert_ne!(last(&events, "kubelet", "start").unwrap().pid, pid);
    let deadline = Instant::now() + Duration::from_secs(30);
    while running(&wine, &table).len() != table.services.len() {
        assert!(Instant::now() < deadline, "not every service runs again");
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn hostile_values_end_up_as_literal_text_in_service_command_lines() {
    let wine = rig();
    let mut d = Delivery::example(&wine);
    let mut table = d.bundle.services();
    let command = r#"C:\k\hostile.exe --label="a b" --q='c d' $(New-Item C:\pwned-ps.txt) `whoami` & echo pwned> C:\pwned-cmd.txt | more ^& "x"#;
    // No `%` here: services.json refuses it (the SCM would expand `%NAME%`); that case is checked below.
    let mut hostile = table.services[4].clone();
    hostile.name = "hostile".into();
    hostile.description = "quotes \" ' & | > %PATH% $(whoami)".into();
    hostile.command = command.into();
    hostile.binaries = vec![NodePath::known(r"C:\k\hostile.exe")];
    table.services.push(hostile);
    d.bundle.set_services(&table);
    let mut settings = d.bundle.settings();
    let no_proxy = "a.example.com & echo pwned > C:\\pwned-env.txt\n$(whoami) %PATH% \"q\"";
    settings.environment.insert("NO_PROXY".into(), no_proxy.into());
    d.bundle.set_settings(&settings);
    let fake = std::fs::read(wine.exes.join("fake-service.exe")).unwrap();
    d.payload = d.bundle.payload(&fake);
    d.stage(&wine);
    wine.set_powershell(&step_answers());
    approve_csrs(&wine);
    network_step_output(&wine);
    let (run, result) = wine.apply();
    assert!(result.status != ApplyStatus::Failed, "{}", run.text());

    let s = &wine.services(&["hostile"])["hostile"];
    assert_eq!(s["registry"]["imagePath"].as_str(), Some(command), "{s}");
    assert_eq!(s["registry"]["description"].as_str(), Some(table.services[6].description.as_str()));
    let events = wine.wait_events("the hostile service to start", Duration::from_secs(30), |e| {
        e.iter().any(|e| e.service == "hostile" && e.event == "start")
    });
    assert_eq!(first(&events, "hostile", "start").unwrap().command_line.as_deref(), Some(command));
    assert_eq!(wine.machine_env(&["NO_PROXY"])["NO_PROXY"].as_deref(), Some(no_proxy));
    for pwned in [r"C:\pwned-ps.txt", r"C:\pwned-cmd.txt", r"C:\pwned-env.txt"] {
        assert!(!wine.c(pwned).exists(), "{pwned} was created: something ran the text");
    }
    assert!(wine.powershell_calls().iter().all(|(k, _)| k.ends_with(".ps1")), "{:?}", wine.powershell_calls());

    // `%NAME%` in a command: the SCM expands environment variables in a service's command line when it starts it
    // (Windows and Wine alike), so such a command is either refused or reaches the process as written; never
    // expanded.
    let with_hostile = d.bundle.services();
    let mut table = with_hostile.clone();
    let expanding = r"C:\k\hostile.exe --token=%PATH% --user=%USERNAME%".to_string();
    table.services.last_mut().unwrap().command = expanding.clone();
    d.bundle.set_services(&table);
    d.stage(&wine);
    let mark = wine.service_events().len();
    let (run, result) = wine.apply();
    if result.status == ApplyStatus::Failed {
        assert!(result.errors.iter().any(|e| e.contains("services.json") || e.contains('%')), "{}", run.text());
        assert!(result.errors.iter().any(|e| e.contains("hostile")), "the error names the service: {}", run.text());
        let s = &wine.services(&["hostile"])["hostile"];
        assert_eq!(s["registry"]["imagePath"].as_str(), Some(command), "refused, the service is left as it was: {s}");
    } else {
        let events = wine.wait_events("the hostile service to start again", Duration::from_secs(30), |e| {
            e[mark..].iter().any(|e| e.service == "hostile" && e.event == "start")
        });
        let start = last(&events[mark..], "hostile", "start").unwrap();
        assert_eq!(start.command_line.as_deref(), Some(expanding.as_str()), "the SCM expanded the command");
    }
    d.bundle.set_services(&with_hostile);

    // A node name from the metadata step that is not a DNS name is refused, never put into a command.
    let mut answers = step_answers();
    answers.insert(
        "aws-get-hostname.ps1".into(),
        vec![("{\"ok\":true,\"value\":\"x\\\" & echo pwned > C:\\\\pwned-name.txt & \\\"\"}\n".into(), 0)],
    );
    wine.set_powershell(&answers);
    let mut services = d.bundle.services();
    services.services.retain(|s| s.name != "hostile");
    d.bundle.set_services(&services);
    d.stage(&wine);
    let (run, result) = wine.apply();
    assert_eq!((run.code, result.status), (1, ApplyStatus::Failed), "{}", run.text());
    assert!(result.errors.iter().any(|e| e.to_lowercase().contains("name")), "{result:?}");
    let kubelet = &wine.services(&["kubelet"])["kubelet"];
    assert!(!kubelet["registry"]["imagePath"].as_str().unwrap_or_default().contains("pwned"), "{kubelet}");
    assert!(!wine.c(r"C:\pwned-name.txt").exists());
}

/// A self-signed CA made by openssl: (PEM, DER, sha256 of the DER).
fn openssl_ca(dir: &std::path::Path, name: &str) -> (String, Vec<u8>, String) {
    let pem = dir.join(format!("{name}.pem"));
    let run = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2"])
        .args(["-subj", &format!("/CN=wmrender test {name}"), "-keyout"])
        .arg(dir.join(format!("{name}.key")))
        .arg("-out")
        .arg(&pem)
        .output()
        .expect("openssl runs");
    assert!(run.status.success(), "openssl: {}", String::from_utf8_lossy(&run.stderr));
    let der = std::process::Command::new("openssl")
        .args(["x509", "-outform", "DER", "-in"])
        .arg(&pem)
        .output()
        .expect("openssl runs")
        .stdout;
    let sha = wmrender_contract::sha256_hex(&der);
    (std::fs::read_to_string(&pem).unwrap(), der, sha)
}

fn root_store(wine: &Wine) -> BTreeSet<String> {
    serde_json::from_value(wine.probe(&["roots"])).expect("a list of thumbprints")
}

#[test]
fn trusted_cas_are_imported_into_local_machine_root_rotated_and_only_the_agents_removed() {
    let wine = rig();
    let (_d, _) = converged(&wine);
    let dir = tempfile::tempdir().unwrap();
    let (pem1, _, sha1) = openssl_ca(dir.path(), "ca1");
    let (pem2, _, sha2) = openssl_ca(dir.path(), "ca2");
    let (pem_admin, der_admin, sha_admin) = openssl_ca(dir.path(), "admin");
    // A certificate an administrator put into the store (crypt32, as certutil would), not the agent.
    write_whole(&wine.c(r"C:\wine-fakes\admin.der"), &der_admin);
    wine.probe(&["add-root", r"C:\wine-fakes\admin.der"]);
    let before = root_store(&wine);
    assert!(before.contains(&sha_admin) && !before.contains(&sha1), "{before:?}");

    // A bad bundle (a private key in it) fails the pass and imports nothing, not even the good certificate.
    let key = std::fs::read_to_string(dir.path().join("ca1.key")).unwrap();
    write_whole(&wine.c(r"C:\k\ca-bundle.crt"), format!("{pem1}{key}").as_bytes());
    let (run, result) = wine.apply();
    assert_eq!((run.code, result.status), (1, ApplyStatus::Failed), "{}", run.text());
    assert!(run.stdout.contains("PRIVATE KEY") && !run.stdout.contains(key.lines().nth(1).unwrap()), "{}", run.text());
    assert_eq!(root_store(&wine), before, "nothing imported from a bad bundle");

    write_whole(&wine.c(r"C:\k\ca-bundle.crt"), format!("# cluster CAs\n{pem1}{pem2}{pem_admin}").as_bytes());
    let (run, result) = wine.apply();
    assert_eq!((run.code, result.status), (0, ApplyStatus::Converged), "{}", run.text());
    assert_eq!(
        set([sha1.as_str(), sha2.as_str()]),
        result.trusted_cas_added.iter().cloned().collect(),
        "{}",
        run.text()
    );
    let store = root_store(&wine);
    assert!(store.is_superset(&set([sha1.as_str(), sha2.as_str(), sha_admin.as_str()])), "{store:?}");
    let (_, again) = wine.apply();
    assert!(again.trusted_cas_added.is_empty() && again.trusted_cas_removed.is_empty(), "{again:?}");

    // Rotation: ca1 and the administrator's leave the bundle. ca1 goes; the administrator's stays.
    write_whole(&wine.c(r"C:\k\ca-bundle.crt"), pem2.as_bytes());
    let (run, result) = wine.apply();
    assert_eq!((run.code, result.trusted_cas_removed.clone()), (0, vec![sha1.clone()]), "{}", run.text());
    let store = root_store(&wine);
    let held = |sha: &String| store.contains(sha);
    assert_eq!(
        (held(&sha1), held(&sha2), held(&sha_admin)),
        (false, true, true),
        "ca1 gone, ca2 and the administrator's kept"
    );
    assert_eq!(store.len(), before.len() + 1, "exactly ca2 added to what the store held before");
}

#[test]
fn deconfigure_removes_the_services_dependents_first_the_networks_cas_and_files_and_again_changes_nothing() {
    let wine = rig();
    let dir = tempfile::tempdir().unwrap();
    let (ca_pem, _, ca_sha) = openssl_ca(dir.path(), "cluster-ca");
    write_whole(&wine.c(r"C:\k\ca-bundle.crt"), ca_pem.as_bytes());
    let (d, result) = converged(&wine);
    assert_eq!(result.trusted_cas_added, std::slice::from_ref(&ca_sha));
    let table = d.bundle.services();
    let calls = wine.powershell_calls().len();

    let (run, result) = wine.agent(&["deconfigure"], Duration::from_secs(300));
    assert_eq!((run.code, result.status), (0, ApplyStatus::Converged), "{}", run.text());
    assert!(wine.listed_services().is_empty(), "services left: {:?}", wine.listed_services());
    // Dependents first: each service is deleted before every service it depends on.
    for s in &table.services {
        let at = |n: &str| result.deleted.iter().position(|d| d == n);
        for dep in &s.dependencies {
            assert!(at(&s.name) < at(dep), "{} deleted after its dependency {dep}: {:?}", s.name, result.deleted);
        }
    }
    assert_eq!(result.deleted.last().map(String::as_str), Some(paths::AGENT_SERVICE), "its own service last");
    let ran: Vec<String> = wine.powershell_calls()[calls..].iter().map(|(k, _)| k.clone()).collect();
    assert_eq!(ran, ["remove-hns-networks.ps1"], "{}", run.text());
    assert!(!root_store(&wine).contains(&ca_sha), "the imported CA is removed");
    for gone in
        [r"C:\k\kubelet.conf", r"C:\k\kubeconfig", r"C:\k\ca-bundle.crt", paths::SERVICES_JSON, paths::SETTINGS_JSON]
    {
        assert!(!wine.node(&NodePath::known(gone)).exists(), "{gone} is still there");
    }

    let (run, again) = wine.agent(&["deconfigure"], Duration::from_secs(120));
    assert_eq!((run.code, again.status), (0, ApplyStatus::Converged), "{}", run.text());
    assert!(again.deleted.is_empty() && again.steps.is_empty() && again.trusted_cas_removed.is_empty(), "{again:?}");
}

/// The agent's result line as JSON, for what the result type of an older agent does not have.
fn line(run: &support::wine::Run) -> serde_json::Value {
    run.stdout.lines().rev().find_map(|l| serde_json::from_str(l.trim()).ok()).unwrap_or_default()
}

fn strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array().into_iter().flatten().filter_map(|x| x.as_str()).map(String::from).collect()
}

#[test]
fn optional_services_without_their_files_are_left_out_alone_and_the_node_converges() {
    let wine = rig();
    let mut d = Delivery::example(&wine);
    // A payload without csi-proxy.exe, and no windows_exporter TLS pair (no service CA certificate yet).
    d.payload.remove(&NodePath::known(r"C:\k\csi-proxy.exe"));
    d.payload.remove(&NodePath::known(paths::EXPORTER_TLS_CERT));
    d.payload.remove(&NodePath::known(paths::EXPORTER_TLS_KEY));
    d.stage(&wine);
    wine.set_powershell(&step_answers());
    approve_csrs(&wine);
    network_step_output(&wine);
    let (run, result) = wine.apply();
    assert_eq!((run.code, result.status), (0, ApplyStatus::Converged), "{}", run.text());
    let degraded = strings(&line(&run)["degraded"]);
    assert_eq!(degraded.len(), 2, "{}", run.text());
    assert!(degraded.iter().any(|d| d.starts_with("windows_exporter: ") && d.contains("tls.crt")), "{degraded:?}");
    assert!(degraded.iter().any(|d| d.starts_with("csi-proxy: ") && d.contains("csi-proxy.exe")), "{degraded:?}");
    // What the node needs to join runs; the optional services are not even created.
    let table = d.bundle.services();
    assert_eq!(running(&wine, &table), set(["containerd", "kubelet", "hybrid-overlay-node", "kube-proxy"]));
    let left_out = wine.services(&["windows_exporter", "csi-proxy"]);
    assert!(left_out.values().all(|s| s["exists"] == false), "{left_out:?}");

    // Once their files are delivered, the next pass sets them up and nothing else moves.
    let mut full = Delivery::example(&wine);
    full.bundle = d.bundle.clone();
    full.stage(&wine);
    let mark = wine.service_events().len();
    let (run, result) = wine.apply();
    assert_eq!((run.code, result.status), (0, ApplyStatus::Converged), "{}", run.text());
    assert!(strings(&line(&run)["degraded"]).is_empty(), "{}", run.text());
    assert_eq!(names(&result.created), set(["windows_exporter", "csi-proxy"]), "{result:?}");
    assert!(result.restarted.is_empty(), "{result:?}");
    let events = wine.wait_events("the optional services to start", Duration::from_secs(30), |e| {
        with_event(&e[mark..], "start") == set(["windows_exporter", "csi-proxy"])
    });
    assert_eq!(with_event(&events[mark..], "stop-requested"), BTreeSet::new(), "{}", describe(&events[mark..]));
}

#[test]
fn after_a_reboot_only_the_agent_starts_and_it_starts_the_others_in_order_after_its_every_boot_steps() {
    let mut wine = rig();
    let (d, _) = converged(&wine);
    let table = d.bundle.services();
    let names: Vec<&str> = table.services.iter().map(|s| s.name.as_str()).collect();
    for (name, s) in wine.services(&names) {
        assert_eq!(s["registry"]["start"], 3, "{name}: demand start, not at boot: {s}");
    }
    let agent = &wine.services(&[paths::AGENT_SERVICE])[paths::AGENT_SERVICE];
    assert_eq!(agent["registry"]["start"], 2, "the agent's own service starts at boot: {agent}");

    let (mark, calls) = (wine.service_events().len(), wine.powershell_calls_timed().len());
    let passes = wine.agent_passes().len();
    wine.reboot();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !wine.agent_passes()[passes.min(wine.agent_passes().len())..]
        .iter()
        .any(|p| p.status == ApplyStatus::Converged)
    {
        assert!(Instant::now() < deadline, "the agent service did not converge after the reboot");
        std::thread::sleep(Duration::from_millis(500));
    }
    let events = wine.wait_events("every service to start after the reboot", Duration::from_secs(30), |e| {
        with_event(&e[mark..], "start").len() == names.len()
    });
    let events = &events[mark..];
    let calls = &wine.powershell_calls_timed()[calls..];
    let ran = |script: &str| {
        calls.iter().find(|(_, k, _)| k == script).map(|(t, _, _)| *t).unwrap_or_else(|| panic!("{script}: {calls:?}"))
    };
    // Nothing started before the agent's every-boot step ran in this boot (Windows starting automatic services at
    // boot would have); kube-proxy after hybrid-overlay-node and after the network step of this boot.
    let routes = ran("aws-routes.ps1");
    for name in &names {
        let starting = first(events, name, "starting").unwrap_or_else(|| panic!("{name}\n{}", describe(events)));
        assert!(starting.t >= routes, "{name} started before the every-boot step\n{}", describe(events));
    }
    let network = ran("network-conf.ps1");
    let proxy = first(events, "kube-proxy", "starting").unwrap();
    assert!(network <= proxy.t, "kube-proxy started before this boot's network step\n{}", describe(events));
    assert!(first(events, "hybrid-overlay-node", "start").unwrap().t <= proxy.t, "{}", describe(events));
}

#[test]
fn a_new_kubelet_ca_or_bootstrap_kubeconfig_restarts_nothing_and_a_new_bootstrap_ca_only_what_reads_it() {
    let wine = rig();
    let (mut d, _) = converged(&wine);
    let table = d.bundle.services();
    let rotate = |d: &mut Delivery, paths: &[&str], round: u32| {
        for p in paths {
            d.payload.get_mut(&NodePath::known(p)).unwrap().1 = format!("rotated {p} {round}\n").into_bytes();
        }
        d.stage(&wine);
        let mark = wine.service_events().len();
        let (run, result) = wine.apply();
        assert_eq!((run.code, result.status), (0, ApplyStatus::Converged), "{}", run.text());
        (result, mark)
    };
    // kubelet reloads its client CA file and reads the bootstrap kubeconfig only to bootstrap; windows_exporter
    // reloads its certificate.
    let reloaded = [paths::KUBELET_CA, paths::BOOTSTRAP_KUBECONFIG, paths::EXPORTER_TLS_CERT, paths::EXPORTER_TLS_KEY];
    let (result, mark) = rotate(&mut d, &reloaded, 1);
    assert!(result.restarted.is_empty(), "{result:?}");
    std::thread::sleep(Duration::from_secs(1));
    let events = &wine.service_events()[mark..];
    assert!(events.is_empty(), "nothing stopped or started\n{}", describe(events));
    // hybrid-overlay-node reads the bootstrap CA once, at start: it restarts, and kube-proxy with it.
    let (result, mark) = rotate(&mut d, &[paths::BOOTSTRAP_CA], 2);
    let expected = with_dependents(&table, &["hybrid-overlay-node"]);
    assert_eq!(names(&result.restarted), expected, "{result:?}");
    let events = wine.wait_events("the restarted services", Duration::from_secs(30), |e| {
        with_event(&e[mark..], "start") == expected
    });
    assert_restarted(&events[mark..], &expected);
}

#[test]
fn deconfigure_ends_the_containers_shims_and_clears_host_local_state() {
    let wine = rig();
    let (_d, _) = converged(&wine);
    // A pod's shim, which containerd started and which outlives it (the fake program, run outside the SCM).
    let shim = r"C:\k\containerd\containerd-shim-runhcs-v1.exe";
    let mut child = wine
        .command("wine")
        .args([shim, "--linger"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let events =
        wine.wait_events("the shim to run", Duration::from_secs(30), |e| e.iter().any(|e| e.event == "linger"));
    let pid = events.iter().find(|e| e.event == "linger").unwrap().pid;
    assert!(wine.process_alive(pid));
    // host-local IPAM's state: addresses handed to the pods.
    write_whole(&wine.c(r"C:\var\lib\cni\networks\OVNKubernetesHybridOverlayNetwork\10.132.0.5"), b"container-1");

    let (run, result) = wine.agent(&["deconfigure"], Duration::from_secs(300));
    assert_eq!((run.code, result.status), (0, ApplyStatus::Converged), "{}", run.text());
    assert!(result.killed.iter().any(|k| k == &format!("containerd-shim-runhcs-v1.exe (pid {pid})")), "{}", run.text());
    assert!(!wine.process_alive(pid), "the shim was ended");
    assert!(!wine.c(r"C:\var\lib\cni").exists(), "host-local IPAM's state is cleared");
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_machines_host_takes_the_machines_name_before_anything_starts() {
    let mut wine = rig();
    // vSphere: the Machine API names the VM after its Machine, not the Windows inside.
    let d = Delivery::of(
        &wine,
        support::wine_bundle::Bundle::rendered(&support::root().join("examples/vsphere/wmrender.yaml")),
    );
    d.stage(&wine);
    // Which Machine this host is: what sync delivers to a Machine's instance.
    write_whole(&wine.c(r"C:\k\wmrender\machine.json"), br#"{"machine": "winwork-x7k2p"}"#);
    let mut table = step_answers();
    table.insert(
        "rename-host.ps1".into(),
        vec![("{\"ok\":true,\"rebootRequired\":true}\n".into(), 0), (format!("{STEP_OK}\n"), 0)],
    );
    wine.set_powershell(&table);
    approve_csrs(&wine);
    network_step_output(&wine);
    let (run, result) = wine.apply();
    assert_eq!((run.code, result.status, result.reboot_required), (3, ApplyStatus::Pending, true), "{}", run.text());
    let calls = wine.powershell_calls();
    assert_eq!(
        calls[0],
        ("rename-host.ps1".to_string(), vec!["-MachineName".to_string(), "winwork-x7k2p".to_string()])
    );
    assert!(
        wine.service_events().is_empty(),
        "nothing starts under the template's name\n{}",
        describe(&wine.service_events())
    );
    assert!(result.created.iter().all(|s| s == paths::AGENT_SERVICE), "{result:?}");

    // Windows restarts with the new name; the agent service finishes, and renames nothing again.
    let passes = wine.agent_passes().len();
    wine.reboot();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !wine.agent_passes()[passes.min(wine.agent_passes().len())..]
        .iter()
        .any(|p| p.status == ApplyStatus::Converged)
    {
        assert!(
            Instant::now() < deadline,
            "the agent service did not converge after the reboot: {:?}",
            wine.agent_passes()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let renames = wine.powershell_calls().iter().filter(|(k, _)| k == "rename-host.ps1").count();
    assert_eq!(renames, 1, "{:?}", wine.powershell_calls());
    let services = d.bundle.services();
    assert_eq!(running(&wine, &services).len(), services.services.len());

    // A host that is no Machine's (no machine.json: BYOH) keeps its name.
    std::fs::remove_file(wine.c(r"C:\k\wmrender\machine.json")).unwrap();
    let calls = wine.powershell_calls().len();
    let (run, _) = wine.apply();
    assert_eq!(run.code, 0, "{}", run.text());
    assert!(!wine.powershell_calls()[calls..].iter().any(|(k, _)| k == "rename-host.ps1"));
}

#[test]
fn old_hybrid_overlay_certificates_are_removed_but_the_newest_two() {
    let wine = rig();
    let (_d, _) = converged(&wine);
    let dir = wine.c(r"C:\k\cni\config");
    let day = |n: u64| std::time::SystemTime::now() - Duration::from_secs(86_400 * n);
    // One a day for five days, the file pointing at the one in use, and hybrid-overlay's other files.
    for n in 1..=5u64 {
        let f = dir.join(format!("ovnkube-client-2026-11-0{}-10-00-00.pem", 6 - n));
        std::fs::write(&f, "cert").unwrap();
        std::fs::File::options().write(true).open(&f).unwrap().set_modified(day(n)).unwrap();
    }
    for other in ["ovnkube-client-current.pem", "cni.conf", "ovnkube-client-key.txt"] {
        std::fs::write(dir.join(other), "x").unwrap();
        std::fs::File::options().write(true).open(dir.join(other)).unwrap().set_modified(day(30)).unwrap();
    }
    let (run, _) = wine.apply();
    assert_eq!(run.code, 0, "{}", run.text());
    let mut left: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    left.sort();
    assert_eq!(
        left,
        [
            "cni.conf",
            "ovnkube-client-2026-11-04-10-00-00.pem",
            "ovnkube-client-2026-11-05-10-00-00.pem",
            "ovnkube-client-current.pem",
            "ovnkube-client-key.txt"
        ]
    );
}

#[test]
fn a_name_added_to_the_agents_record_does_not_make_it_delete_a_service_it_never_created() {
    let wine = rig();
    let fake = std::fs::read(wine.exes.join("fake-service.exe")).unwrap();
    write_whole(&wine.c(r"C:\k\bystander.exe"), &fake);
    let (_d, _) = converged(&wine);
    // A service someone else made, with wmrender's own description even; its name is put into applied.json.
    sc(&wine, &["create", "bystander", "binPath=", r"C:\k\bystander.exe", "start=", "auto"]);
    sc(&wine, &["description", "bystander", "OpenShift managed bystander (wmrender)"]);
    sc(&wine, &["start", "bystander"]);
    let state_path = wine.c(paths::APPLIED_STATE);
    let mut state: serde_json::Value = serde_json::from_slice(&std::fs::read(&state_path).unwrap()).unwrap();
    state["owned"].as_array_mut().unwrap().push("bystander".into());
    std::fs::write(&state_path, serde_json::to_vec_pretty(&state).unwrap()).unwrap();
    let (run, result) = wine.apply();
    assert_eq!(run.code, 0, "{}", run.text());
    assert!(result.deleted.is_empty(), "{result:?}");
    let bystander = &wine.services(&["bystander"])["bystander"];
    assert_eq!(
        (bystander["exists"].as_bool(), bystander["state"].as_str()),
        (Some(true), Some("running")),
        "{bystander}"
    );
    // Nor does deconfigure touch it.
    let (run, result) = wine.agent(&["deconfigure"], Duration::from_secs(300));
    assert_eq!(run.code, 0, "{}", run.text());
    assert!(!result.deleted.iter().any(|s| s == "bystander"), "{result:?}");
    assert_eq!(wine.services(&["bystander"])["bystander"]["state"], "running");
}
