//! The Windows sync profile end to end: `wmrender sync` with an inventory node of `profile: windows` talks to a
//! real OpenSSH server on 127.0.0.1 arranged like a Windows node's (commands run through Wine's cmd.exe, SFTP
//! serves `/C:/…` from the Wine prefix), pushes the rendered bundle, the payload and the agent, runs
//! `wmrender-node apply` under Wine and reads its JSON result line. The services are real services in Wine's SCM
//! running the fake service program (see tests/wine_agent.rs for what the rig fakes and why). Windows' lock on a
//! running program's file, which the rig's SFTP server (a Linux program) never meets under Wine, is simulated where
//! an agent upgrade depends on it: the test holds the file (`Wine::hold_while_running`) while that program runs.
//!
//! Needs root, openssh-server, wine, wine64 and gcc-mingw-w64-x86-64 (`bash tests/e2e/wine-setup.sh`).

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::MutexGuard;
use support::sshd::Sshd;
use support::wine::{Wine, describe, rig};
use support::wine_bundle::{approve_csrs, network_step_output, write_whole};
use support::{code, stderr, wmrender};
use wmrender_contract::{NodePath, ServicesFile, paths};

/// BYOH-only inputs with the operator installed: sync touches the inventory node only.
const INPUTS: &str = "apiVersion: wmrender.dev/v1alpha1
kind: ClusterInputs
metadata:
  name: wine-sync
spec:
  infrastructureID: wine-00000
  apiServerInternalURL: https://api-int.wine.example.com:6443
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
    // Declared first: the sshd stops before the machine is handed to the next test.
    sshd: Sshd,
    wine: MutexGuard<'static, Wine>,
    work: tempfile::TempDir,
}

impl Rig {
    fn new() -> Rig {
        let wine = rig();
        let sshd = support::wine_sshd::start(&wine);
        let rig = Rig { sshd, wine, work: tempfile::tempdir().expect("tempdir") };
        rig.render();
        rig.payload();
        rig.credentials();
        // Every step succeeds; the platform-none node takes its DNS host name, so no step answers a value.
        let mut answers = BTreeMap::new();
        answers.insert("*".to_string(), vec![("{\"ok\":true}\n".to_string(), 0)]);
        rig.wine.set_powershell(&answers);
        rig
    }

    fn path(&self, name: &str) -> PathBuf {
        self.work.path().join(name)
    }

    fn render(&self) {
        let file = self.path("wmrender.yaml");
        std::fs::write(&file, INPUTS).unwrap();
        let o = wmrender(&["render", "-f", file.to_str().unwrap(), "-o", self.path("rendered").to_str().unwrap()]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
    }

    /// The rendered services table (the node contract).
    fn services(&self) -> ServicesFile {
        let file = self.path("rendered").join(NodePath::known(paths::SERVICES_JSON).bundle_path());
        ServicesFile::parse(&std::fs::read(&file).unwrap())
            .unwrap_or_else(|e| panic!("the rendered services.json is not the node contract's: {e}"))
    }

    /// `--payload`: the fake service at every service binary path, and the agent.
    fn payload(&self) {
        let fake = std::fs::read(self.wine.exes.join("fake-service.exe")).unwrap();
        let root = self.path("payload");
        for b in self.services().binaries() {
            let bytes = if b.as_str().to_ascii_lowercase().ends_with(".exe") {
                fake.clone()
            } else {
                format!("# payload {b}\n").into_bytes()
            };
            write_whole(&root.join(b.as_str().replace('\\', "/").replacen("C:/", "C/", 1)), &bytes);
        }
        let agent = std::fs::read(self.wine.exes.join("wmrender-node.exe")).unwrap();
        write_whole(&root.join("C/k/wmrender/wmrender-node.exe"), &agent);
    }

    fn credentials(&self) {
        for name in ["bootstrap-kubeconfig", "kubelet-ca.crt", "bootstrap-ca.crt", "tls.crt", "tls.key"] {
            std::fs::write(self.path(name), format!("wine rig credential {name}\n")).unwrap();
        }
    }

    fn inventory(&self, port: u16) -> PathBuf {
        let file = self.path("nodes.yaml");
        std::fs::write(
            &file,
            format!(
                "nodes:\n- name: wine-node\n  address: 127.0.0.1\n  port: {port}\n  user: root\n  profile: windows\n"
            ),
        )
        .unwrap();
        file
    }

    fn sync(&self) -> (i32, serde_json::Value, String) {
        self.sync_with(&[])
    }

    /// `sync` with `extra` flags.
    fn sync_with(&self, extra: &[&str]) -> (i32, serde_json::Value, String) {
        let s = |p: &Path| p.to_str().unwrap().to_string();
        let mut args = [
            "sync".to_string(),
            "--rendered".into(),
            s(&self.path("rendered")),
            "--inventory".into(),
            s(&self.inventory(self.sshd.port)),
            "--identity".into(),
            s(&self.sshd.path("client_ed25519")),
            "--known-hosts".into(),
            s(&self.sshd.path("known_hosts")),
            "--payload".into(),
            s(&self.path("payload")),
            "--bootstrap-kubeconfig".into(),
            s(&self.path("bootstrap-kubeconfig")),
            "--kubelet-ca".into(),
            s(&self.path("kubelet-ca.crt")),
            "--bootstrap-ca".into(),
            s(&self.path("bootstrap-ca.crt")),
            "--exporter-tls-cert".into(),
            s(&self.path("tls.crt")),
            "--exporter-tls-key".into(),
            s(&self.path("tls.key")),
            "--output".into(),
            "json".into(),
            "--connect-timeout".into(),
            "10".into(),
        ]
        .to_vec();
        args.extend(extra.iter().map(|e| e.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = wmrender(&args);
        let report = serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null);
        (code(&o), report, stderr(&o))
    }

    /// Every service of the table runs, with its command resolved (no placeholder left).
    fn assert_all_running(&self) {
        let table = self.services();
        let names: Vec<&str> = table.services.iter().map(|s| s.name.as_str()).collect();
        for (name, s) in self.wine.services(&names) {
            assert_eq!(s["state"], "running", "{name}: {s}");
            let command = s["registry"]["imagePath"].as_str().unwrap_or_default();
            assert!(!command.contains("NODE_IP") && !command.contains("NODE_NAME"), "{name}: {command}");
        }
    }
}

fn node(report: &serde_json::Value) -> &serde_json::Value {
    &report["nodes"].as_array().unwrap_or_else(|| panic!("no report: {report}"))[0]
}

#[test]
fn sync_pushes_the_agent_which_applies_under_wine_and_the_next_sync_is_a_no_op() {
    let rig = Rig::new();
    approve_csrs(&rig.wine);
    network_step_output(&rig.wine);
    let (rc, report, err) = rig.sync();
    assert_eq!(rc, 0, "{err}\n{report}");
    let n = node(&report);
    assert_eq!(n["status"], "synced", "{n}");
    assert_eq!(n["apply"]["status"], "converged", "sync read the agent's result line: {n}");
    assert!(rig.wine.c(paths::AGENT_EXE).is_file());
    rig.assert_all_running();
    // The agent service the apply installed makes its first pass at once (every pass applies the Defender
    // exclusion): what follows is counted from after it.
    rig.wine.wait_agent_passes(1, std::time::Duration::from_secs(60));
    let events = rig.wine.service_events().len();
    let calls = rig.wine.powershell_calls().len();

    let (rc, report, err) = rig.sync();
    assert_eq!(rc, 0, "{err}");
    let n = node(&report);
    assert_eq!((n["status"].as_str(), n["bytesSent"].as_u64()), (Some("unchanged"), Some(0)), "{n}");
    let after = rig.wine.service_events();
    assert_eq!(after.len(), events, "nothing was restarted\n{}", describe(&after[events..]));
    assert_eq!(rig.wine.powershell_calls().len(), calls, "no step ran");

    // A one-file change (kubelet's client CA, which kubelet reloads by itself): the file and the manifest's update
    // travel, not the node manifest; the agent reads the two together, converges, and the next sync is a no-op.
    let manifest = std::fs::read(rig.wine.c(paths::NODE_MANIFEST)).unwrap();
    std::fs::write(rig.path("kubelet-ca.crt"), "wine rig credential kubelet-ca.crt, rotated\n").unwrap();
    let (rc, report, err) = rig.sync();
    assert_eq!(rc, 0, "{err}\n{report}");
    let n = node(&report);
    assert_eq!((n["status"].as_str(), n["apply"]["status"].as_str()), (Some("synced"), Some("converged")), "{n}");
    assert_eq!(n["changed"], serde_json::json!([paths::KUBELET_CA]), "{n}");
    let size = std::fs::metadata(rig.wine.c(paths::KUBELET_CA)).unwrap().len();
    assert!(n["bytesSent"].as_u64().unwrap() <= size + 2048, "{n}");
    assert_eq!(std::fs::read(rig.wine.c(paths::NODE_MANIFEST)).unwrap(), manifest, "the manifest is not sent again");
    assert!(rig.wine.c(paths::NODE_MANIFEST_UPDATE).is_file());
    let (rc, report, _) = rig.sync();
    assert_eq!((rc, node(&report)["status"].as_str()), (0, Some("unchanged")), "{report}");
}

#[test]
fn a_sync_cut_off_between_push_and_apply_is_finished_by_the_next_one() {
    let rig = Rig::new();
    approve_csrs(&rig.wine);
    network_step_output(&rig.wine);
    support::wine_sshd::cut_before_agent(&rig.sshd);
    let (rc, report, err) = rig.sync();
    assert_eq!(rc, 3, "the connection was cut: {err}\n{report}");
    assert_eq!(node(&report)["status"], "failed", "{report}");
    assert!(rig.wine.c(paths::SERVICES_JSON).is_file(), "the push happened");
    assert!(!rig.sshd.path("cut-before-agent").exists(), "the cut happened at the agent's command");
    assert!(rig.wine.service_events().is_empty(), "nothing was applied");

    let (rc, report, err) = rig.sync();
    assert_eq!(rc, 0, "{err}\n{report}");
    let n = node(&report);
    assert_eq!((n["status"].as_str(), n["apply"]["status"].as_str()), (Some("synced"), Some("converged")), "{n}");
    rig.assert_all_running();
    let (rc, report, _) = rig.sync();
    assert_eq!((rc, node(&report)["status"].as_str()), (0, Some("unchanged")));
}

#[test]
fn a_pending_node_is_reported_as_such_and_the_next_sync_applies_again() {
    let rig = Rig::new();
    // kubelet's certificate is not approved yet: hybrid-overlay and kube-proxy wait for C:\k\kubeconfig.
    let (rc, report, err) = rig.sync();
    let n = node(&report);
    assert_eq!((n["status"].as_str(), n["apply"]["status"].as_str()), (Some("pending"), Some("pending")), "{err}\n{n}");
    assert_ne!(rc, 3, "pending is not a failure: {err}");

    approve_csrs(&rig.wine);
    network_step_output(&rig.wine);

    let (rc, report, err) = rig.sync();
    assert_eq!(rc, 0, "{err}\n{report}");
    let n = node(&report);
    assert_eq!(n["apply"]["status"], "converged", "nothing changed, yet the apply ran again: {n}");
    rig.assert_all_running();
}

#[test]
fn the_rig_sshd_runs_commands_through_cmd_and_serves_drive_c_over_sftp() {
    // The rig itself, with OpenSSH's own client: a command reaches cmd.exe verbatim (arguments, quotes, exit
    // code), and `/C:/k/x` over SFTP is drive_c/k/x of the prefix.
    let rig = rig();
    let sshd = support::wine_sshd::start(&rig);
    let ssh_args = |extra: &[&str]| {
        let mut a: Vec<String> = vec![
            "-i".into(),
            sshd.path("client_ed25519").display().to_string(),
            "-o".into(),
            format!("UserKnownHostsFile={}", sshd.path("known_hosts").display()),
            "-o".into(),
            "StrictHostKeyChecking=yes".into(),
            "-o".into(),
            "BatchMode=yes".into(),
        ];
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let port = sshd.port.to_string();
    let mut args = ssh_args(&["-p", &port, "root@127.0.0.1"]);
    args.push(r#"echo "a b" %OS% & exit 7"#.into());
    let r =
        support::wine::run_bounded(std::process::Command::new("ssh").args(&args), std::time::Duration::from_secs(60));
    assert_eq!((r.code, r.stdout.trim_end()), (7, r#""a b" Windows_NT"#), "{}", r.text());

    let batch = sshd.path("batch");
    std::fs::write(sshd.path("local.txt"), "over sftp\n").unwrap();
    std::fs::write(
        &batch,
        format!("-mkdir /C:/k\nput {} /C:/k/x.txt\nrename /C:/k/x.txt /C:/k/y.txt\n", sshd.path("local.txt").display()),
    )
    .unwrap();
    let mut args = ssh_args(&["-P", &port, "-b", batch.to_str().unwrap(), "root@127.0.0.1"]);
    args.retain(|a| a != "-p");
    let r =
        support::wine::run_bounded(std::process::Command::new("sftp").args(&args), std::time::Duration::from_secs(60));
    assert_eq!(r.code, 0, "{}", r.text());
    assert_eq!(std::fs::read_to_string(rig.c(r"C:\k\y.txt")).unwrap(), "over sftp\n");
}

/// The agent program with bytes after its end (Windows ignores them; the hash changes): build `n`.
fn agent_build(rig: &Rig, n: u32) -> String {
    let mut bytes = std::fs::read(rig.wine.exes.join("wmrender-node.exe")).unwrap();
    bytes.extend_from_slice(format!("wine-rig agent build {n}").as_bytes());
    write_whole(&rig.path("payload").join("C/k/wmrender/wmrender-node.exe"), &bytes);
    wmrender_contract::sha256_hex(&bytes)
}

fn agent_pid(rig: &Rig) -> u64 {
    let s = &rig.wine.services(&[paths::AGENT_SERVICE])[paths::AGENT_SERVICE];
    assert_eq!(s["state"], "running", "{s}");
    s["pid"].as_u64().unwrap()
}

/// What the agent service recorded about itself when it started: (pid, sha256 of its program).
fn agent_running(rig: &Rig) -> (u64, String) {
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(rig.wine.c(r"C:\k\wmrender\agent-running.json")).unwrap()).unwrap();
    (v["pid"].as_u64().unwrap(), v["sha256"].as_str().unwrap().to_string())
}

#[test]
fn an_agent_upgrade_hands_over_at_once_and_the_next_one_before_a_reboot_goes_through() {
    let rig = Rig::new();
    approve_csrs(&rig.wine);
    network_step_output(&rig.wine);
    let (rc, _, err) = rig.sync();
    assert_eq!(rc, 0, "{err}");
    let first = agent_pid(&rig);
    let aside = rig.wine.c(r"C:\k\wmrender\wmrender-node.exe.wmrender-old");

    // A new agent: sync sets the running one aside, the new one's pass restarts the service, which now runs it.
    let build2 = agent_build(&rig, 2);
    let (rc, report, err) = rig.sync();
    assert_eq!(rc, 0, "{err}\n{report}");
    let second = agent_pid(&rig);
    assert_ne!(second, first, "the agent service was restarted");
    assert_eq!(agent_running(&rig), (second, build2), "the service runs the new agent");
    assert!(node(&report)["restarted"].as_array().unwrap().contains(&paths::AGENT_SERVICE.into()), "{report}");
    assert!(!aside.exists(), "the old agent set aside is removed");

    // Windows keeps the file of a running program: were the first agent still running (from the copy set aside),
    // that copy could not be removed, nor replaced (the rig holds it for as long as that process runs).
    let _held = rig.wine.hold_while_running(first as u32, &aside);
    let build3 = agent_build(&rig, 3);
    let (rc, report, err) = rig.sync();
    assert_eq!(rc, 0, "a second upgrade before any reboot: {err}\n{report}");
    let third = agent_pid(&rig);
    assert_eq!(agent_running(&rig), (third, build3));
    assert!(!aside.exists());
}

#[test]
fn a_set_aside_agent_still_running_stops_sync_before_its_journal_and_the_agent_keeps_the_node() {
    let rig = Rig::new();
    approve_csrs(&rig.wine);
    network_step_output(&rig.wine);
    let (rc, _, err) = rig.sync();
    assert_eq!(rc, 0, "{err}");
    // A process still runs the agent an earlier upgrade set aside (a program of that name, run outside the SCM);
    // Windows keeps its file, which the rig stands in for.
    let aside = rig.wine.c(r"C:\k\wmrender\wmrender-node.exe.wmrender-old");
    write_whole(&aside, &std::fs::read(rig.wine.exes.join("fake-service.exe")).unwrap());
    let mut lingering = rig
        .wine
        .command("wine")
        .args([r"C:\k\wmrender\wmrender-node.exe.wmrender-old", "--linger"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let events = rig.wine.wait_events("the old agent to run", std::time::Duration::from_secs(30), |e| {
        e.iter().any(|e| e.event == "linger")
    });
    let pid = events.iter().find(|e| e.event == "linger").unwrap().pid;
    let held = rig.wine.hold_while_running(pid, &aside);
    assert!(held.held);

    agent_build(&rig, 4);
    let (rc, report, err) = rig.sync();
    assert_eq!(rc, 3, "{err}\n{report}");
    let why = node(&report)["error"].as_str().unwrap_or_default().to_string();
    assert!(
        why.contains(r"C:\k\wmrender\wmrender-node.exe.wmrender-old") && why.contains("nothing was changed"),
        "{why}"
    );
    // Nothing was delivered: no open journal, so the agent goes on maintaining the node.
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(rig.wine.c(paths::NODE_MANIFEST)).unwrap()).unwrap();
    assert!(manifest["pending"].is_null(), "{manifest}");
    let (run, result) = rig.wine.apply();
    assert_eq!((run.code, result.status), (0, wmrender_contract::ApplyStatus::Converged), "{}", run.text());

    // Once that process ended, the upgrade goes through.
    rig.wine.kill_pid(pid);
    drop(held);
    let _ = lingering.wait();
    let (rc, report, err) = rig.sync();
    assert_eq!(rc, 0, "{err}\n{report}");
}

#[test]
fn a_change_the_agent_service_applied_before_syncs_apply_is_still_reported() {
    let mut rig = Rig::new();
    // The agent service passes every 2 s here (machine variables reach it at boot).
    rig.wine.set_knob("WMRENDER_NODE_INTERVAL", "2");
    rig.wine.reboot();
    approve_csrs(&rig.wine);
    network_step_output(&rig.wine);
    let (rc, _, err) = rig.sync();
    assert_eq!(rc, 0, "{err}");

    // A new csi-proxy.exe is pushed and the connection cut before sync runs the agent: the agent service's own
    // pass swaps it in. The next sync's `apply` finds nothing left to do, and still reports the restart.
    let binary = rig.path("payload").join("C/k/csi-proxy.exe");
    let mut bytes = std::fs::read(&binary).unwrap();
    bytes.extend_from_slice(b"wine-rig build 2");
    write_whole(&binary, &bytes);
    support::wine_sshd::cut_before_agent(&rig.sshd);
    let (rc, _, err) = rig.sync_with(&["--allow-undrained-upgrade"]);
    assert_eq!(rc, 3, "cut off: {err}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !rig.wine.agent_passes().iter().any(|p| p.replaced.iter().any(|r| r == r"C:\k\csi-proxy.exe")) {
        assert!(std::time::Instant::now() < deadline, "the agent service did not swap it in");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let (rc, report, err) = rig.sync_with(&["--allow-undrained-upgrade"]);
    assert_eq!(rc, 0, "{err}\n{report}");
    let n = node(&report);
    assert_eq!(n["status"], "synced", "{n}");
    assert_eq!(n["restarted"], serde_json::json!(["csi-proxy"]), "{n}");
}

#[test]
fn a_failed_pass_is_the_agents_and_one_failing_after_a_reboot_shows_in_the_next_sync() {
    let mut rig = Rig::new();
    approve_csrs(&rig.wine);
    network_step_output(&rig.wine);
    // A step fails: sync says the agent's pass failed, and which step.
    let mut answers = BTreeMap::new();
    answers.insert("*".to_string(), vec![("{\"ok\":true}\n".to_string(), 0)]);
    answers.insert(
        "firewall.ps1".to_string(),
        vec![("{\"ok\":false,\"error\":\"New-NetFirewallRule: access denied\"}\n".to_string(), 1)],
    );
    rig.wine.set_powershell(&answers);
    let (rc, report, err) = rig.sync();
    assert_eq!(rc, 3, "{err}");
    let why = node(&report)["error"].as_str().unwrap_or_default().to_string();
    assert!(why.starts_with("the agent's pass failed: step `firewall`") && why.contains("access denied"), "{why}");
    assert!(!err.contains("install step") && !why.contains("install step"), "{err}");
    answers.remove("firewall.ps1");
    rig.wine.set_powershell(&answers);
    let (rc, _, err) = rig.sync();
    assert_eq!(rc, 0, "{err}");

    // After a reboot, the agent service's pass fails (the Defender exclusion, which every pass applies): only the
    // agent saw it. The next sync, with nothing to deliver, shows it.
    answers.insert(
        "windows-defender-exclusion.ps1".to_string(),
        vec![("{\"ok\":false,\"error\":\"Add-MpPreference: 0x800106ba\"}\n".to_string(), 1)],
    );
    rig.wine.set_powershell(&answers);
    let passes = rig.wine.agent_passes().len();
    rig.wine.reboot();
    let failed = rig.wine.wait_agent_passes(passes + 1, std::time::Duration::from_secs(120));
    assert_eq!(failed[passes].status, wmrender_contract::ApplyStatus::Failed, "{failed:?}");
    let (rc, report, err) = rig.sync();
    assert_eq!(rc, 3, "not `unchanged`: {err}\n{report}");
    let n = node(&report);
    assert_eq!(n["status"], "failed", "{n}");
    assert!(n["error"].as_str().unwrap_or_default().contains("0x800106ba"), "{n}");
}
