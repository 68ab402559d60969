//! `wmrender controller` against `wmrender sync --kubeconfig` run in a loop, both measured in the same run against
//! the tests' real kube-apiserver and etcd (tests/support/apiserver.rs) and a real OpenSSH server on 127.0.0.1
//! (tests/support/sshd.rs), with posix-profile hosts (one folder per host, all behind that sshd, each at an address
//! of its own in 198.19.0.0/16, a network namespace the bench makes: tests/support/netns.rs):
//!
//! 1. **At rest**: 500 Windows nodes already configured (inventory entries on the sshd, each with its own posix
//!    root holding the synced bundle; Node objects Ready, labelled, with the agent's condition
//!    `wmrender.dev/Configured=True` and `wmrender.dev/bundle` = the rendered bundle's digest). The controller's
//!    API requests (the API server's audit log, by user), SSH connections (sshd's log) and CPU (/proc) over a
//!    window after it settled: quiet, then with kubelet-like status updates (each Node's status written once per
//!    5 minutes, kubelet's `nodeStatusReportFrequency`), then the same with one pending CSR that is not a node's.
//!    Against it, `sync --kubeconfig` back to back: per run and per minute.
//! 2. **Scale-up**: 50 Windows Machines provisioned at once by the played Machine API, their hosts on the sshd,
//!    played kubelets bootstrapping with the delivered credentials and registering with the delivered taints (as
//!    tests/cluster_controller.rs). Time until all 50 are Ready, untainted and labelled, for the controller and for
//!    `sync --kubeconfig` run back to back until they are.
//! 3. **Rollout**: 10 Windows Machines configured by a controller with `--payload` (kubelet.exe v1; played kubelets
//!    as in 2), then one Machine provisioned at a time on a host of its own, and the time from its `Provisioned`
//!    status until its sync starts (its host holds `C/k/wmrender/manifest.json`, polled every 25 ms): 3 times with
//!    the controller at rest (each configured before the next), then 3 times while a rollout waits on a slow drain
//!    (a pod on each of the 10 nodes under a PodDisruptionBudget allowing no disruption, kubelet.exe v2 and a render
//!    with `serviceNetwork` added: every node's binary upgrade under a drain, `--max-unavailable 1`,
//!    `--drain-timeout 60`; each Machine provisioned while a node is cordoned). The medians and their ratio, against
//!    the goal ≤ 1.5× (measured, not asserted; a sync that does not start within 60 s fails the bench).
//!
//! Run: `cargo bench --bench controller` (root, openssh-server, the kube assets of tests/setup.sh; `../shared`
//! beside the checkout). `WMRENDER_BENCH_WINDOW=SECS` sets the controller's quiet window in 1 (default 60; the two
//! others are a third of it, the sync loop runs for 3/4 of it and at least twice); 2 and 3 do not depend on it.
//! Everything is bounded: every wait has a limit, every process a timeout.

#[path = "../tests/support/mod.rs"]
mod support;

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use support::apiserver::{ControlPlane, Kube};
use support::controller_manager::{CSR_SIGNING, ControllerManager, NODE_LIFECYCLE};
use support::netns::Fleet;
use support::played::{CSRS, Kubelet, MACHINES, MachineApi, Registration};
use support::sshd::Sshd;
use support::{code, stderr, wmrender};
use wmrender_contract::node_status::{BUNDLE_ANNOTATION, CONDITION_TYPE, TAINT_KEY};

const AT_REST: usize = 500;
const SCALE_UP: usize = 50;
/// The nodes of the rollout, and the Machines provisioned at rest and then during it (each, one after the other).
const ROLLOUT: usize = 10;
const PROBES: usize = 3;
/// Long enough that the rollout still waits on its first drains while the Machines are measured.
const DRAIN_TIMEOUT: &str = "60";
/// A Machine's sync starts within this time of its `Provisioned`, or the bench fails.
const START_LIMIT: Duration = Duration::from_secs(60);
const CONTROLLER_USER: &str = "wmrender-bench-controller";
const SYNC_USER: &str = "wmrender-bench-sync";
/// kubelet writes a Node's status at least this often (`nodeStatusReportFrequency`), even when nothing changed.
const STATUS_REPORT: Duration = Duration::from_secs(300);

struct Rig {
    sshd: Sshd,
    _fleet: Fleet,
    cp: ControlPlane,
    work: tempfile::TempDir,
    /// Each host's address in the fleet, given on first use.
    addresses: std::sync::Mutex<BTreeMap<String, String>>,
}

impl Rig {
    fn path(&self, name: &str) -> PathBuf {
        self.work.path().join(name)
    }

    fn p(&self, name: &str) -> String {
        self.path(name).to_str().unwrap().to_string()
    }

    /// The host's address (and, the first time, a line pinning the sshd's host key there in `known_hosts`).
    fn address(&self, name: &str) -> String {
        let mut addresses = self.addresses.lock().unwrap();
        let next = addresses.len();
        let address = addresses.entry(name.to_string()).or_insert_with(|| Fleet::address(next)).clone();
        if addresses.len() > next {
            use std::io::Write;
            let line = self.sshd.known_hosts_line_at(&self.sshd.host_keys[0], &address, 22);
            let mut known =
                std::fs::OpenOptions::new().create(true).append(true).open(self.path("known_hosts")).unwrap();
            known.write_all(line.as_bytes()).unwrap();
        }
        address
    }

    /// An inventory of posix hosts on the sshd (port 22 at each one's address), each with its own root
    /// (`hosts/<name>`).
    fn inventory(&self, file: &str, names: &[String], reach_only: bool) {
        let mut text = String::from("nodes:\n");
        for name in names {
            let root = self.path(&format!("hosts/{name}"));
            std::fs::create_dir_all(&root).unwrap();
            text.push_str(&format!(
                "- name: {name}\n  address: {}\n  port: 22\n  user: root\n  profile: posix\n  root: {}\n  reachOnly: {reach_only}\n",
                self.address(name),
                root.display()
            ));
        }
        std::fs::write(self.path(file), text).unwrap();
    }

    fn access_args(&self, inventory: &str) -> Vec<String> {
        let mut a: Vec<String> = vec!["--rendered".into(), self.p("rendered"), "--inventory".into(), self.p(inventory)];
        a.extend(["--identity".into(), self.sshd.path("client_ed25519").to_str().unwrap().into()]);
        a.extend(["--known-hosts".into(), self.p("known_hosts")]);
        a.extend(["--connect-timeout".into(), "5".into()]);
        a
    }

    /// A controller process with its defaults (resync 600 s, lease 15 s, parallel 4), its log in `<work>/<name>.log`.
    fn controller(&self, name: &str, inventory: &str, metrics_port: u16) -> Proc {
        self.controller_with(name, inventory, metrics_port, &[])
    }

    /// A controller process with these flags besides its defaults (e.g. `--payload`, `--drain-timeout`).
    fn controller_with(&self, name: &str, inventory: &str, metrics_port: u16, extra: &[&str]) -> Proc {
        let log = std::fs::File::create(self.path(&format!("{name}.log"))).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_wmrender"))
            .args(["controller", "--kubeconfig", &self.p("controller.kubeconfig")])
            .args(self.access_args(inventory))
            .args(extra)
            .args([
                "--replica",
                name,
                "--metrics-address",
                &format!("127.0.0.1:{metrics_port}"),
                "--metrics-plain-http",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("the controller starts");
        Proc { child: Some(child), metrics_port }
    }

    /// One `sync --kubeconfig` run (its defaults: parallel 8, csr-timeout 600 s), killed after `limit`. Reaped with
    /// wait4(2), which gives its CPU time (std's `wait` does not), hence the lint's exception.
    #[allow(clippy::zombie_processes)]
    fn sync(&self, inventory: &str, extra: &[&str], limit: Duration) -> Run {
        let snap = Snapshot::take(self, SYNC_USER);
        let started = Instant::now();
        let mut child = Command::new(env!("CARGO_BIN_EXE_wmrender"))
            .args(["sync", "--kubeconfig", &self.p("sync.kubeconfig"), "--output", "json"])
            .args(self.access_args(inventory))
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("sync starts");
        let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
        let readers = (
            std::thread::spawn(move || {
                let mut s = Vec::new();
                let _ = std::io::Read::read_to_end(&mut out, &mut s);
                s
            }),
            std::thread::spawn(move || {
                let mut s = Vec::new();
                let _ = std::io::Read::read_to_end(&mut err, &mut s);
                s
            }),
        );
        let pid = child.id() as libc::pid_t;
        // wait4 with WNOHANG until it ends or the limit: its own CPU time, from the kernel.
        let mut status = 0;
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        loop {
            // SAFETY: pid is our child, not yet reaped; status and usage are valid for writes.
            let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
            if r == pid {
                break;
            }
            if started.elapsed() > limit {
                let _ = child.kill();
                // SAFETY: as above.
                unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let wall = started.elapsed();
        let stdout = readers.0.join().unwrap();
        let stderr = readers.1.join().unwrap();
        let cpu = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        let after = Snapshot::take(self, SYNC_USER);
        Run {
            wall,
            cpu: cpu(usage.ru_utime) + cpu(usage.ru_stime),
            exit: if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { -1 },
            requests: after.requests - snap.requests,
            ssh: after.ssh - snap.ssh,
            report: serde_json::from_slice(&stdout).unwrap_or(Value::Null),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        }
    }

    fn nodes(&self, admin: &Kube) -> Vec<Value> {
        admin.try_get("/api/v1/nodes").ok().and_then(|l| l["items"].as_array().cloned()).unwrap_or_default()
    }
}

/// One `sync` run.
struct Run {
    wall: Duration,
    cpu: f64,
    exit: i32,
    requests: usize,
    ssh: usize,
    report: Value,
    stderr: String,
}

/// A process killed when dropped; SIGTERM first through [`Proc::stop`].
struct Proc {
    child: Option<Child>,
    metrics_port: u16,
}

impl Proc {
    fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// user + system CPU seconds so far, from /proc/<pid>/stat.
    fn cpu(&self) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap_or_default();
        let fields: Vec<&str> = stat.rsplit_once(") ").map(|(_, r)| r.split(' ').collect()).unwrap_or_default();
        // After the command: state is field 3 (index 0 here); utime and stime are fields 14 and 15.
        let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        (ticks(11) + ticks(12)) / hz
    }

    fn rss_mib(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        let kib = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .unwrap_or(0.0);
        kib / 1024.0
    }

    fn metrics(&self) -> String {
        use std::io::{Read, Write};
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", self.metrics_port)) else { return String::new() };
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    fn metric(&self, name: &str) -> Option<f64> {
        self.metrics().lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline && c.try_wait().ok().flatten().is_none() {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Counts at one moment: the user's completed API requests and sshd's accepted logins.
struct Snapshot {
    requests: usize,
    ssh: usize,
    at: Instant,
}

impl Snapshot {
    fn take(rig: &Rig, user: &str) -> Snapshot {
        Snapshot {
            requests: rig.cp.requests_by(user).len(),
            ssh: rig.sshd.log().matches("Accepted publickey").count(),
            at: Instant::now(),
        }
    }
}

/// The requests of `user` from the `from`-th on, by verb and path (names as `*`), most frequent first.
fn breakdown(cp: &ControlPlane, user: &str, from: usize) -> Vec<(String, usize)> {
    let mut by: BTreeMap<String, usize> = BTreeMap::new();
    for a in cp.requests_by(user).into_iter().skip(from) {
        let path = a.uri.split('?').next().unwrap_or("");
        let generic: Vec<&str> = path
            .split('/')
            .map(|s| if s.starts_with("win-") || s.starts_with("up-") || s.starts_with("csr-") { "*" } else { s })
            .collect();
        let watch = if a.uri.contains("watch=true") { " (watch)" } else { "" };
        *by.entry(format!("{} {}{watch}", a.verb, generic.join("/"))).or_default() += 1;
    }
    let mut v: Vec<(String, usize)> = by.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

fn show_breakdown(title: &str, b: &[(String, usize)]) {
    println!("  {title}:");
    if b.is_empty() {
        println!("    (none)");
    }
    for (k, n) in b.iter().take(8) {
        println!("    {n:>7}  {k}");
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn wait(what: &str, limit: Duration, mut done: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "waited {limit:?} for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
    started.elapsed()
}

fn configured(node: &Value) -> bool {
    let ready = node["status"]["conditions"]
        .as_array()
        .is_some_and(|l| l.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"));
    let taints = node["spec"]["taints"].as_array().cloned().unwrap_or_default();
    ready
        && taints.iter().all(|t| t["key"] != TAINT_KEY && t["key"] != "node.kubernetes.io/not-ready")
        && node["metadata"]["labels"]["wmrender.dev/managed"] == "true"
}

/// The status kubelet and the agent keep on a configured node; `beat` changes the heartbeat.
fn configured_status(name: &str, address: &str, beat: &str) -> Value {
    json!({
        "addresses": [{"type": "InternalIP", "address": address}, {"type": "Hostname", "address": name}],
        "nodeInfo": {"bootID": format!("{name}-boot-1"), "machineID": "", "systemUUID": "", "kernelVersion": "10.0.20348",
                     "osImage": "Windows Server 2022 Datacenter", "containerRuntimeVersion": "containerd://1.7",
                     "kubeletVersion": "v1.36.3", "kubeProxyVersion": "", "operatingSystem": "windows",
                     "architecture": "amd64"},
        "conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "",
             "lastHeartbeatTime": beat, "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": CONDITION_TYPE, "status": "True", "reason": "Converged", "message": "",
             "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        ],
    })
}

/// `n` at rest: configured Node objects, as sync and the agent leave them (the login sync records, the bundle
/// digest, the condition, the labels join sets), written by `threads` admin clients at once.
fn seed_nodes(rig: &Rig, names: &[String], digest: &str) {
    let chunks: Vec<&[String]> = names.chunks(names.len().div_ceil(4)).collect();
    std::thread::scope(|s| {
        for chunk in chunks {
            s.spawn(move || {
                let admin = Kube::new(&rig.cp.path("admin.kubeconfig"));
                for name in chunk {
                    let login = json!({"user": "root", "port": 22,
                                       "root": rig.path(&format!("hosts/{name}")).to_str().unwrap()});
                    let node = json!({
                        "apiVersion": "v1", "kind": "Node",
                        "metadata": {"name": name,
                                     "labels": {"kubernetes.io/os": "windows", "kubernetes.io/hostname": name,
                                                "node-role.kubernetes.io/worker": "", "wmrender.dev/managed": "true"},
                                     "annotations": {BUNDLE_ANNOTATION: digest, "wmrender.dev/ssh": login.to_string()}},
                        "spec": {},
                    });
                    admin.create("/api/v1/nodes", &node).unwrap_or_else(|e| panic!("Node {name}: {e}"));
                    let path = format!("/api/v1/nodes/{name}");
                    admin.set_status(&path, &configured_status(name, &rig.address(name), &support::played::now()));
                    // The node lifecycle controller's not-ready taint, off once Ready.
                    admin.merge_patch(&path, &json!({"spec": {"taints": []}})).unwrap();
                }
            });
        }
    });
}

/// kubelet on each host (`hosts/<name>`): once the bundle and the bootstrap kubeconfig are there, its TLS bootstrap
/// and the Node, with the delivered taints and the Machine's provider ID. One thread per host, until `stop`.
fn kubelets(rig: &Rig, hosts: &[(String, String)], stop: &AtomicBool) {
    std::thread::scope(|s| {
        for (name, provider_id) in hosts {
            s.spawn(move || {
                let root = rig.path(&format!("hosts/{name}"));
                let mut client: Option<Kubelet> = None;
                while !stop.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(250));
                    if !root.join("C/k/bootstrap-kubeconfig").exists() || !root.join("C/k/kubelet.conf").exists() {
                        continue;
                    }
                    if client.is_none() {
                        let Ok(text) = std::fs::read_to_string(root.join("C/k/bootstrap-kubeconfig")) else { continue };
                        let Ok(bootstrap) = serde_json::from_str::<Value>(&text) else { continue };
                        let Some(token) = bootstrap["users"][0]["user"]["token"].as_str() else { continue };
                        let dir = rig.path(&format!("kubelet-{name}"));
                        match Kubelet::bootstrap(&rig.cp, token, name, &dir, Duration::from_secs(60)) {
                            Ok(k) => client = Some(k),
                            Err(e) => {
                                eprintln!("kubelet {name}: {e}");
                                continue;
                            }
                        }
                    }
                    let Ok(text) = std::fs::read_to_string(root.join("C/k/kubelet.conf")) else { continue };
                    let Ok(config) = serde_json::from_str::<Value>(&text) else { continue };
                    let reg = Registration {
                        addresses: vec![("InternalIP".into(), rig.address(name)), ("Hostname".into(), name.clone())],
                        taints: config["registerWithTaints"].as_array().cloned().unwrap_or_default(),
                        provider_id: Some(provider_id.clone()),
                        boot_id: format!("{name}-boot-1"),
                    };
                    match client.as_ref().unwrap().register(&reg, Duration::from_secs(60)) {
                        Ok(()) => return,
                        Err(e) => eprintln!("kubelet {name}: {e}"),
                    }
                }
            });
        }
    });
}

/// What one controller window measured.
struct Window {
    name: &'static str,
    secs: f64,
    requests: usize,
    ssh: usize,
    cpu: f64,
    reconciles: f64,
    breakdown: Vec<(String, usize)>,
}

impl Window {
    fn per_node_min(&self, nodes: usize) -> f64 {
        self.requests as f64 / nodes as f64 / (self.secs / 60.0)
    }
}

/// Measures the controller for `secs` while `during` runs (until it returns or the window ends).
fn window(rig: &Rig, ctl: &Proc, name: &'static str, secs: u64, during: impl FnOnce(Instant) + Send) -> Window {
    let before = Snapshot::take(rig, CONTROLLER_USER);
    let (cpu0, rec0) = (ctl.cpu(), ctl.metric("wmrender_controller_reconcile_seconds_count").unwrap_or(0.0));
    let end = before.at + Duration::from_secs(secs);
    std::thread::scope(|s| {
        s.spawn(move || during(end));
        while Instant::now() < end {
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let after = Snapshot::take(rig, CONTROLLER_USER);
    Window {
        name,
        secs: (after.at - before.at).as_secs_f64(),
        requests: after.requests - before.requests,
        ssh: after.ssh - before.ssh,
        cpu: ctl.cpu() - cpu0,
        reconciles: ctl.metric("wmrender_controller_reconcile_seconds_count").unwrap_or(0.0) - rec0,
        breakdown: breakdown(&rig.cp, CONTROLLER_USER, before.requests),
    }
}

/// Each node's status written again, spread evenly so that every node's comes once per [`STATUS_REPORT`].
fn heartbeats(rig: &Rig, names: &[String], end: Instant) {
    let admin = Kube::new(&rig.cp.path("admin.kubeconfig"));
    let every = STATUS_REPORT / names.len() as u32;
    let mut next = Instant::now();
    for name in names.iter().cycle() {
        if Instant::now() >= end {
            break;
        }
        let _ = admin.merge_patch(
            &format!("/api/v1/nodes/{name}/status"),
            &json!({"status": configured_status(name, &rig.address(name), &support::played::now())}),
        );
        next += every;
        if let Some(d) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(d.min(end.saturating_duration_since(Instant::now())));
        }
    }
}

/// What the rollout scenario measured.
struct Rollout {
    /// From each Machine's `Provisioned` until its sync started, the controller at rest.
    idle: Vec<Duration>,
    /// The same, while the rollout waited on a drain; with the Nodes cordoned when the Machine was provisioned and
    /// when its sync had started.
    busy: Vec<(Duration, Vec<String>, Vec<String>)>,
    /// The 10 Machines configured (from their Machines to all Ready, untainted and labelled).
    configured: Duration,
    /// From the new render until the first Node was cordoned.
    draining: Duration,
    /// The scenario, from its controller's start to its stop.
    took: Duration,
}

/// The median of `times` (the mean of the two middle ones for an even count).
fn median(times: &[Duration]) -> Duration {
    let mut sorted = times.to_vec();
    sorted.sort();
    match sorted.len() {
        0 => Duration::ZERO,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2,
    }
}

/// The last `n` lines of `text`.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Scenario 3: [`ROLLOUT`] Machines configured by a controller with `--payload` (kubelet.exe v1), then a Machine
/// provisioned at a time, [`PROBES`] times with the controller at rest and as many times while a rollout (kubelet.exe
/// v2 and a node-bundle change) waits on a drain that a PodDisruptionBudget holds: each time, from the Machine's
/// `Provisioned` until its sync started (its host holds `C/k/wmrender/manifest.json`, the journal sync writes first).
fn rollout(rig: &Rig) -> Rollout {
    let admin = rig.cp.admin();
    let machines = |prefix: &str, n: usize| -> Vec<(String, String)> {
        (0..n).map(|i| (format!("ro-{prefix}{i:02}"), format!("aws:///us-west-2a/i-ro{prefix}{i:012}"))).collect()
    };
    let (fleet, idle, busy) = (machines("", ROLLOUT), machines("idle-", PROBES), machines("busy-", PROBES));
    let all: Vec<(String, String)> = fleet.iter().chain(&idle).chain(&busy).cloned().collect();
    let names: Vec<String> = all.iter().map(|(n, _)| n.clone()).collect();
    rig.inventory("rollout.yaml", &names, true);
    let payload = rig.path("payload");
    std::fs::create_dir_all(payload.join("C/k")).unwrap();
    std::fs::write(payload.join("C/k/kubelet.exe"), b"kubelet v1").unwrap();
    let extra = ["--payload", payload.to_str().unwrap(), "--max-unavailable", "1", "--drain-timeout", DRAIN_TIMEOUT];
    let started = Instant::now();
    let mut ctl = rig.controller_with("rollout", "rollout.yaml", free_port(), &extra);
    let log = || tail(&std::fs::read_to_string(rig.path("rollout.log")).unwrap_or_default(), 60);
    wait("the rollout's controller leading", Duration::from_secs(60), || {
        ctl.metric("wmrender_controller_leader") == Some(1.0)
            && ctl.metric("wmrender_controller_reconcile_seconds_count").unwrap_or(0.0) >= 1.0
    });
    let node_configured = |name: &str| rig.nodes(admin).iter().any(|x| x["metadata"]["name"] == name && configured(x));
    let cordoned = || -> Vec<String> {
        rig.nodes(admin)
            .iter()
            .filter(|n| n["spec"]["unschedulable"] == true)
            .filter_map(|n| n["metadata"]["name"].as_str().map(String::from))
            .collect()
    };
    // The controller said the end of the Machine's sync (whatever it came to).
    let sync_ended = |name: &str| {
        let text = std::fs::read_to_string(rig.path("rollout.log")).unwrap_or_default();
        ["Configured", "Configuring", "Rebooted", "ConfigurationFailed"]
            .iter()
            .any(|r| text.contains(&format!("wmrender-controller: {name} {r}: ")))
    };
    // A Machine provisioned at its host's address (the one its kubelet registers), and the time from its Provisioned
    // status (acknowledged by the API server) until its host holds wmrender's manifest.
    let provision = |(name, id): &(String, String)| -> Duration {
        MachineApi::provision(admin, name, id, &[("InternalIP", &rig.address(name))]);
        let provisioned = Instant::now();
        let manifest = rig.path(&format!("hosts/{name}/C/k/wmrender/manifest.json"));
        while !manifest.exists() {
            assert!(
                provisioned.elapsed() < START_LIMIT,
                "{name}'s sync did not start within {START_LIMIT:?} of its Machine's Provisioned\n{}",
                log()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
        provisioned.elapsed()
    };
    let stop = AtomicBool::new(false);
    let result = std::thread::scope(|s| {
        s.spawn(|| kubelets(rig, &all, &stop));
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // 1. The fleet, configured by the controller with kubelet.exe v1.
            let t = Instant::now();
            for (name, id) in &fleet {
                MachineApi::provision(admin, name, id, &[("InternalIP", &rig.address(name))]);
            }
            wait("the rollout's 10 nodes configured", Duration::from_secs(150), || {
                fleet.iter().all(|(n, _)| node_configured(n))
            });
            let configured_in = t.elapsed();
            let at_rest = |n: usize| {
                wait("the controller at rest", Duration::from_secs(60), || {
                    ctl.metric("wmrender_controller_nodes{state=\"configured\"}") == Some(n as f64)
                })
            };
            at_rest(ROLLOUT);

            // 2. At rest: one Machine at a time, each configured (the controller at rest again) before the next.
            let mut idle_times = Vec::new();
            for (k, m) in idle.iter().enumerate() {
                idle_times.push(provision(m));
                wait("an idle probe's sync ended", START_LIMIT, || sync_ended(&m.0));
                wait("an idle probe configured", START_LIMIT, || node_configured(&m.0));
                at_rest(ROLLOUT + k + 1);
            }
            // They leave (Machine and Node, as the Machine API removes them): the rollout is the 10 nodes'.
            for (name, _) in &idle {
                let _ = admin.delete(&format!("{MACHINES}/{name}"));
                let _ = admin.delete(&format!("/api/v1/nodes/{name}"));
            }
            wait("the idle probes gone", Duration::from_secs(60), || rig.nodes(admin).len() == ROLLOUT);
            at_rest(ROLLOUT);

            // 3. A pod on each node that a budget protects (the disruption controller allows none), a new kubelet
            // and a new render (a node-bundle change): every node syncs, each binary upgrade under a drain, one at a
            // time, and the first drain waits (up to --drain-timeout).
            rig.cp.namespace("apps");
            for (n, _) in &fleet {
                admin.seed(&json!({
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": format!("web-{n}"), "namespace": "apps", "labels": {"app": "web"},
                                 "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d9",
                                                      "uid": "7d9c1b8e-0000-4000-8000-000000000001",
                                                      "controller": true}]},
                    "spec": {"nodeName": n, "containers": [{"name": "c", "image": "mcr.microsoft.com/windows/nanoserver"}]},
                    "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
                }));
            }
            admin
                .create(
                    "/apis/policy/v1/namespaces/apps/poddisruptionbudgets",
                    &json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                            "metadata": {"name": "web", "namespace": "apps"},
                            "spec": {"minAvailable": ROLLOUT, "selector": {"matchLabels": {"app": "web"}}}}),
                )
                .expect("the PodDisruptionBudget");
            support::played::pdb_status(admin, "apps", "web", 0, ROLLOUT as i64);
            std::fs::write(payload.join("C/k/kubelet.exe"), b"kubelet v2").unwrap();
            let moved = "hybridClusterNetwork: [10.132.0.0/14]\n    serviceNetwork: [172.31.0.0/16]";
            std::fs::write(
                rig.path("wmrender.yaml"),
                support::controller_rig::inputs("bench", &[]).replace("hybridClusterNetwork: [10.132.0.0/14]", moved),
            )
            .unwrap();
            let rendered = Instant::now();
            let o = wmrender(&["render", "-f", &rig.p("wmrender.yaml"), "-o", &rig.p("rendered")]);
            assert_eq!(code(&o), 0, "{}", stderr(&o));
            wait("the rollout draining", Duration::from_secs(60), || !cordoned().is_empty());
            let draining = rendered.elapsed();

            // 4. During the rollout: the same, each Machine provisioned while a node is cordoned and drained.
            let mut busy_times = Vec::new();
            for m in &busy {
                wait("the rollout draining", Duration::from_secs(90), || !cordoned().is_empty());
                let before = cordoned();
                let took = provision(m);
                busy_times.push((took, before, cordoned()));
                wait("a probe's sync ended during the rollout", START_LIMIT, || sync_ended(&m.0));
            }
            (idle_times, busy_times, configured_in, draining)
        }));
        stop.store(true, Ordering::SeqCst);
        result
    });
    let (idle, busy, configured, draining) = result.unwrap_or_else(|p| {
        eprintln!("bench: the rollout's controller:\n{}", log());
        std::panic::resume_unwind(p)
    });
    ctl.stop();
    Rollout { idle, busy, configured, draining, took: started.elapsed() }
}

fn main() {
    let total = Instant::now();
    let window_secs: u64 = std::env::var("WMRENDER_BENCH_WINDOW").ok().and_then(|w| w.parse().ok()).unwrap_or(60);
    let sshd = Sshd::start();
    let fleet = Fleet::new(&sshd);
    let rig = Rig {
        sshd,
        _fleet: fleet,
        cp: ControlPlane::start(),
        work: tempfile::tempdir().unwrap(),
        addresses: Default::default(),
    };
    support::openshift::cluster(&rig.cp, "AWS");
    rig.cp.namespace("wmrender");
    rig.cp.role_kubeconfig(&rig.path("controller.kubeconfig"), CONTROLLER_USER, "wmrender-controller");
    rig.cp.role_kubeconfig(&rig.path("sync.kubeconfig"), SYNC_USER, "wmrender-sync");
    // AWS without the operator; no BYOH host, the MachineSet at zero: the targets are the inventory's and the
    // Machines'.
    std::fs::write(rig.path("wmrender.yaml"), support::controller_rig::inputs("bench", &[])).unwrap();
    let o = wmrender(&["render", "-f", &rig.p("wmrender.yaml"), "-o", &rig.p("rendered")]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let admin = rig.cp.admin();

    // ---- 1. At rest: 500 configured nodes. ----
    let names: Vec<String> = (0..AT_REST).map(|i| format!("win-{i:03}")).collect();
    // One host synced for real (with the cluster's credentials), its root copied to the others: every host holds
    // what sync would deliver, and the digest is that of the bundle the controller delivers.
    rig.inventory("seed.yaml", &names[..1], false);
    let seed = rig.sync("seed.yaml", &["--csr-timeout", "0"], Duration::from_secs(60));
    let manifest = rig.path("hosts/win-000/C/k/wmrender/manifest.json");
    let manifest = wmrender_contract::NodeManifest::parse(
        &std::fs::read(&manifest)
            .unwrap_or_else(|e| panic!("the seed sync left no manifest ({e}): exit {}\n{}", seed.exit, seed.stderr)),
    )
    .unwrap();
    let digest = manifest.bundle_digest();
    rig.inventory("rest.yaml", &names, false);
    for name in &names[1..] {
        let (from, to) = (rig.path("hosts/win-000/C"), rig.path(&format!("hosts/{name}")));
        let st = Command::new("cp").arg("-a").arg(&from).arg(&to).status().unwrap();
        assert!(st.success());
    }
    seed_nodes(&rig, &names, &digest);
    let seeded = total.elapsed();
    eprintln!("bench: {AT_REST} nodes at rest after {seeded:.1?}");

    let port = free_port();
    let before_start = Snapshot::take(&rig, CONTROLLER_USER);
    let mut ctl = rig.controller("rest", "rest.yaml", port);
    let settle = wait("the controller to judge 500 nodes configured", Duration::from_secs(90), || {
        ctl.metric("wmrender_controller_nodes{state=\"configured\"}") == Some(AT_REST as f64)
    });
    std::thread::sleep(Duration::from_secs(2));
    let startup = Snapshot::take(&rig, CONTROLLER_USER);
    let startup_breakdown = breakdown(&rig.cp, CONTROLLER_USER, before_start.requests);
    let startup_cpu = ctl.cpu();
    let third = (window_secs / 3).max(5);
    let quiet = window(&rig, &ctl, "quiet", window_secs, |_| {});
    let beating = window(&rig, &ctl, "status updates", third, |end| heartbeats(&rig, &names, end));
    // One CSR that no node of the controller's asks (a user's, for another signer): pending until someone acts.
    let request = support::request(&rig.path("other.key"), "/CN=someone-else", "");
    use base64::Engine;
    admin
        .create(
            CSRS,
            &json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                    "metadata": {"name": "someone-else"},
                    "spec": {"request": base64::engine::general_purpose::STANDARD.encode(&request),
                             "signerName": "example.com/someone-else", "usages": ["digital signature", "client auth"]}}),
        )
        .expect("the pending CSR");
    let pending = window(&rig, &ctl, "status updates + 1 pending CSR", third, |end| heartbeats(&rig, &names, end));
    let _ = admin.delete(&format!("{CSRS}/someone-else"));
    let rss = ctl.rss_mib();
    ctl.stop();
    let log = std::fs::read_to_string(rig.path("rest.log")).unwrap_or_default();
    assert_eq!(quiet.ssh + beating.ssh, 0, "the controller synced a configured node:\n{log}");

    // The baseline: sync --kubeconfig back to back over the same 500 nodes, at least twice, for about 3/4 of the
    // window.
    let loop_started = Instant::now();
    let mut runs: Vec<Run> = Vec::new();
    while runs.len() < 2 || (loop_started.elapsed() < Duration::from_secs(window_secs * 3 / 4) && runs.len() < 10) {
        let r = rig.sync("rest.yaml", &[], Duration::from_secs(180));
        assert_eq!(r.exit, 0, "sync at rest failed:\n{}", r.stderr);
        let unchanged = r.report["nodes"].as_array().map(|l| l.iter().filter(|n| n["status"] == "unchanged").count());
        assert_eq!(unchanged, Some(AT_REST), "every node unchanged: {}", r.stderr);
        runs.push(r);
    }
    let sync_breakdown = {
        let all = rig.cp.requests_by(SYNC_USER).len();
        let last = runs.last().unwrap().requests;
        breakdown(&rig.cp, SYNC_USER, all - last)
    };
    let rest_done = total.elapsed();
    eprintln!("bench: at rest measured after {rest_done:.1?}");

    // ---- 2. Scale-up: 50 Machines at once. ----
    let _ = admin.delete("/api/v1/nodes?labelSelector=kubernetes.io%2Fos%3Dwindows");
    wait("the nodes at rest deleted", Duration::from_secs(60), || rig.nodes(admin).is_empty());
    let (_controllers, _machine_api) =
        (ControllerManager::start(&rig.cp, &[CSR_SIGNING, NODE_LIFECYCLE]), MachineApi::start(&rig.cp));

    let limit = Duration::from_secs(150);
    let hosts = |prefix: &str| -> Vec<(String, String)> {
        (0..SCALE_UP).map(|i| (format!("up-{prefix}-{i:02}"), format!("aws:///us-west-2a/i-{prefix}{i:015}"))).collect()
    };
    let (ctl_hosts, sync_hosts) = (hosts("c"), hosts("s"));
    let names_of = |h: &[(String, String)]| -> Vec<String> { h.iter().map(|(n, _)| n.clone()).collect() };
    // The inventories only say how to reach the Machines' instances (reachOnly): no target until a Machine is there.
    rig.inventory("up-ctl.yaml", &names_of(&ctl_hosts), true);
    rig.inventory("up-sync.yaml", &names_of(&sync_hosts), true);
    // The Machine API provisions the Machines at once, played kubelets join; `converge` waits (bounded) until they
    // are configured and returns the time from the first Machine on.
    let scale_up = |hosts: &[(String, String)], converge: &dyn Fn(&[String])| -> Duration {
        let names = names_of(hosts);
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| kubelets(&rig, hosts, &stop));
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let started = Instant::now();
                for (name, id) in hosts {
                    // The instance's own address, as the cloud reports it and its kubelet registers it.
                    MachineApi::provision(admin, name, id, &[("InternalIP", &rig.address(name))]);
                }
                converge(&names);
                started.elapsed()
            }));
            stop.store(true, Ordering::SeqCst);
            result.unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    };
    let remove = |hosts: &[(String, String)]| {
        for (name, _) in hosts {
            let _ = admin.delete(&format!("{MACHINES}/{name}"));
            let _ = admin.delete(&format!("/api/v1/nodes/{name}"));
        }
    };
    let all_configured = |names: &[String]| {
        let nodes = rig.nodes(admin);
        names.iter().all(|n| nodes.iter().any(|x| x["metadata"]["name"] == *n && configured(x)))
    };

    let mut up = rig.controller("up", "up-ctl.yaml", free_port());
    wait("the controller leading", Duration::from_secs(60), || {
        up.metric("wmrender_controller_leader") == Some(1.0)
            && up.metric("wmrender_controller_reconcile_seconds_count").unwrap_or(0.0) >= 1.0
    });
    let before = Snapshot::take(&rig, CONTROLLER_USER);
    let cpu0 = up.cpu();
    let ctl_took = scale_up(&ctl_hosts, &|names| {
        wait("the controller's 50 nodes configured", limit, || all_configured(names));
    });
    let ctl_up = Snapshot::take(&rig, CONTROLLER_USER);
    let ctl_up_cpu = up.cpu() - cpu0;
    let ctl_up_breakdown = breakdown(&rig.cp, CONTROLLER_USER, before.requests);
    up.stop();
    remove(&ctl_hosts);

    let sync_runs = std::cell::RefCell::new(Vec::<Run>::new());
    let sync_took = scale_up(&sync_hosts, &|names| {
        let started = Instant::now();
        while !all_configured(names) {
            assert!(started.elapsed() < limit, "sync did not configure the 50 nodes within {limit:?}");
            let left = limit.saturating_sub(started.elapsed()).max(Duration::from_secs(5));
            sync_runs.borrow_mut().push(rig.sync("up-sync.yaml", &[], left));
        }
    });
    let sync_runs = sync_runs.into_inner();
    remove(&sync_hosts);

    // ---- 3. Rollout: a Machine provisioned at rest, and while a rollout waits on a slow drain. ----
    let ro = rollout(&rig);
    eprintln!("bench: rollout measured in {:.0} s", ro.took.as_secs_f64());

    // ---- The tables. ----
    let rest_runs = runs.len();
    let per_run = |f: &dyn Fn(&Run) -> f64| runs.iter().map(f).sum::<f64>() / rest_runs as f64;
    let run_req = per_run(&|r| r.requests as f64);
    let run_ssh = per_run(&|r| r.ssh as f64);
    let run_wall = per_run(&|r| r.wall.as_secs_f64());
    let run_cpu = per_run(&|r| r.cpu);
    let loop_secs: f64 = runs.iter().map(|r| r.wall.as_secs_f64()).sum();
    let loop_req_min = runs.iter().map(|r| r.requests).sum::<usize>() as f64 / (loop_secs / 60.0);
    let n = AT_REST as f64;
    println!();
    println!("wmrender controller vs sync --kubeconfig, {AT_REST} configured Windows nodes at rest");
    println!(
        "(controller settled in {:.1} s after start: {} API requests, {:.2} s CPU; RSS {:.0} MiB)",
        settle.as_secs_f64(),
        startup.requests - before_start.requests,
        startup_cpu,
        rss
    );
    println!();
    println!("| at rest | window | API requests | per node per minute | SSH connections | CPU | CPU per minute |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for w in [&quiet, &beating, &pending] {
        println!(
            "| controller, {} ({:.0} reconciles) | {:.0} s | {} | {:.4} | {} | {:.2} s | {:.2} s |",
            w.name,
            w.reconciles,
            w.secs,
            w.requests,
            w.per_node_min(AT_REST),
            w.ssh,
            w.cpu,
            w.cpu / (w.secs / 60.0)
        );
    }
    println!(
        "| sync --kubeconfig, once a minute | {:.1} s a run | {run_req:.0} a run | {:.2} | {run_ssh:.0} a run | {run_cpu:.2} s a run | {run_cpu:.2} s |",
        run_wall,
        run_req / n
    );
    println!(
        "| sync --kubeconfig, back to back ({rest_runs} runs) | {loop_secs:.0} s | {} | {:.2} | {} | {:.2} s | {:.2} s |",
        runs.iter().map(|r| r.requests).sum::<usize>(),
        loop_req_min / n,
        runs.iter().map(|r| r.ssh).sum::<usize>(),
        runs.iter().map(|r| r.cpu).sum::<f64>(),
        runs.iter().map(|r| r.cpu).sum::<f64>() / (loop_secs / 60.0)
    );
    let ratio = |a: f64, b: f64| match a / b {
        r if !r.is_finite() => "∞".to_string(),
        r if r >= 10.0 => format!("{r:.0}×"),
        r => format!("{r:.2}×"),
    };
    println!();
    println!(
        "requests per minute, sync once a minute / controller quiet: {}; sync back to back / controller quiet: {}",
        ratio(run_req, quiet.requests as f64 / (quiet.secs / 60.0)),
        ratio(loop_req_min, quiet.requests as f64 / (quiet.secs / 60.0))
    );
    println!(
        "CPU per minute, sync once a minute / controller quiet: {}; / controller with status updates: {}",
        ratio(run_cpu, quiet.cpu / (quiet.secs / 60.0)),
        ratio(run_cpu, beating.cpu / (beating.secs / 60.0))
    );
    println!();
    show_breakdown("controller start-up, requests", &startup_breakdown);
    for w in [&quiet, &beating, &pending] {
        show_breakdown(&format!("controller {}, requests", w.name), &w.breakdown);
    }
    show_breakdown("one sync run at rest, requests", &sync_breakdown);

    println!();
    println!("scale-up: {SCALE_UP} Windows Machines provisioned at once, until all are Ready, untainted and labelled");
    println!();
    println!("| | time to converge | API requests | SSH connections | CPU | runs |");
    println!("| --- | --- | --- | --- | --- | --- |");
    println!(
        "| controller | {:.1} s | {} | {} | {:.2} s | |",
        ctl_took.as_secs_f64(),
        ctl_up.requests - before.requests,
        ctl_up.ssh - before.ssh,
        ctl_up_cpu
    );
    println!(
        "| sync --kubeconfig, back to back | {:.1} s | {} | {} | {:.2} s | {} |",
        sync_took.as_secs_f64(),
        sync_runs.iter().map(|r| r.requests).sum::<usize>(),
        sync_runs.iter().map(|r| r.ssh).sum::<usize>(),
        sync_runs.iter().map(|r| r.cpu).sum::<f64>(),
        sync_runs.len()
    );
    println!();
    println!(
        "time to converge, sync loop / controller: {:.2}×",
        sync_took.as_secs_f64() / ctl_took.as_secs_f64().max(0.001)
    );
    show_breakdown("controller scale-up, requests", &ctl_up_breakdown);

    println!();
    println!(
        "rollout: a Windows Machine provisioned while a {ROLLOUT}-node rollout waits on a slow drain (a new kubelet.exe \
         and node bundle; --max-unavailable 1; a PodDisruptionBudget allowing no disruption; --drain-timeout \
         {DRAIN_TIMEOUT}), from its Provisioned status until its sync starts (its host holds \
         C/k/wmrender/manifest.json); {PROBES} Machines one after the other"
    );
    println!();
    let secs = |d: &Duration| format!("{:.2} s", d.as_secs_f64());
    let each = |l: &[Duration]| l.iter().map(secs).collect::<Vec<_>>().join(", ");
    let busy: Vec<Duration> = ro.busy.iter().map(|(d, _, _)| *d).collect();
    let (idle_median, busy_median) = (median(&ro.idle), median(&busy));
    println!("| Provisioned to sync start | median | each |");
    println!("| --- | --- | --- |");
    println!("| controller at rest | {} | {} |", secs(&idle_median), each(&ro.idle));
    println!("| controller during the rollout | {} | {} |", secs(&busy_median), each(&busy));
    println!();
    println!(
        "time to sync start, during the rollout / at rest: {} (goal ≤ 1.5×)",
        ratio(busy_median.as_secs_f64(), idle_median.as_secs_f64())
    );
    for (i, (d, before, after)) in ro.busy.iter().enumerate() {
        println!(
            "  during the rollout, Machine {}: {}; cordoned when provisioned: {}; when its sync started: {}",
            i + 1,
            secs(d),
            before.join(", "),
            if after.is_empty() { "none".to_string() } else { after.join(", ") }
        );
    }
    println!(
        "  ({ROLLOUT} nodes configured in {:.1} s; the rollout draining {:.1} s after the new render; the scenario \
         took {:.0} s)",
        ro.configured.as_secs_f64(),
        ro.draining.as_secs_f64(),
        ro.took.as_secs_f64()
    );
    println!();
    println!("bench: {:.0} s in all", total.elapsed().as_secs_f64());
}
