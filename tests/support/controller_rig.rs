//! The rig of the controller's end-to-end tests: posix-profile hosts behind one real sshd on 127.0.0.1 (each host a
//! network namespace the test makes, with an address a real node could have, whose port 22 is forwarded to the sshd,
//! and a folder of its own), the tests' real kube-apiserver with an AWS cluster and wmrender's namespace (the
//! rendered `cluster/` applied), the controller run as the user holding exactly the documented `wmrender-controller`
//! role, and kubelets played on every host (tests/support/played.rs says what is played).

use super::apiserver::ControlPlane;
use super::netns::SshHost;
use super::played::{Kubelet, Registration};
use super::sshd::Sshd;
use super::{code, stderr, wmrender};
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use wmrender_contract::node_status::TAINT_KEY;

/// AWS without the operator, named `name`: one Windows MachineSet at zero (the Machines come from the played Machine
/// API) and these BYOH hosts (their addresses).
pub fn inputs(name: &str, byoh: &[&str]) -> String {
    let mut inputs = format!(
        "apiVersion: wmrender.dev/v1alpha1
kind: ClusterInputs
metadata:
  name: {name}
spec:
  infrastructureID: {name}-00000
  apiServerInternalURL: https://api-int.{name}.example.com:6443
  platform:
    aws:
      region: us-west-2
      ami: ami-0123456789abcdef0
  machineSets:
  - zone: us-west-2a
    replicas: 0
  sshPublicKey: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEivnOQOwpFfgIiplCNH1jWkEmNppWw2KdSLHn7d3tKp wmrender-example
  network:
    hybridClusterNetwork: [10.132.0.0/14]
"
    );
    if !byoh.is_empty() {
        inputs.push_str("  byoh:\n");
        for a in byoh {
            inputs.push_str(&format!("  - address: {a}\n    username: Administrator\n"));
        }
    }
    inputs
}

pub struct Rig {
    pub sshd: Sshd,
    pub cp: ControlPlane,
    pub work: tempfile::TempDir,
    /// The hosts, by name (the inventory's, and its Node's).
    pub hosts: Vec<(String, SshHost)>,
}

impl Rig {
    /// The sshd, a host of these names, the API server with an AWS cluster, wmrender's namespace and the documented
    /// `wmrender-controller` role. Nothing is rendered yet: the inputs name the hosts' addresses ([`Rig::address`]).
    pub fn start(names: &[&str]) -> Rig {
        let sshd = Sshd::start();
        let hosts = names.iter().map(|name| (name.to_string(), SshHost::new(&sshd))).collect();
        let rig = Rig { sshd, cp: ControlPlane::start(), work: tempfile::tempdir().unwrap(), hosts };
        super::openshift::cluster(&rig.cp, "AWS");
        rig.cp.namespace("wmrender");
        rig.cp.wmrender_kubeconfig(&rig.path("kubeconfig"), "wmrender-controller");
        rig
    }

    /// The address of the host named `name`.
    pub fn address(&self, name: &str) -> &str {
        self.host(name).address()
    }

    pub fn host(&self, name: &str) -> &SshHost {
        self.hosts
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, h)| h)
            .unwrap_or_else(|| panic!("no host {name} in the rig"))
    }

    /// How each host is reached: port 22 at its address, a posix root of its own on the sshd.
    pub fn write_inventory(&self) {
        let mut inventory = String::from("nodes:\n");
        for (name, host) in &self.hosts {
            let address = host.address();
            std::fs::create_dir_all(self.path(name)).unwrap();
            inventory.push_str(&format!(
                "- name: {name}\n  address: {address}\n  port: 22\n  user: root\n  profile: posix\n  root: {}\n  reachOnly: true\n",
                self.path(name).display()
            ));
        }
        std::fs::write(self.path("nodes.yaml"), inventory).unwrap();
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.work.path().join(name)
    }

    pub fn render(&self, inputs: &str) {
        std::fs::write(self.path("wmrender.yaml"), inputs).unwrap();
        let o = wmrender(&[
            "render",
            "-f",
            self.path("wmrender.yaml").to_str().unwrap(),
            "-o",
            self.path("rendered").to_str().unwrap(),
        ]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
    }

    /// A replica of the controller, its log in `<work>/<name>.log`.
    pub fn controller(&self, name: &str, metrics_port: u16) -> Replica {
        self.controller_with(name, metrics_port, &["--accept-new"])
    }

    /// A replica with these flags besides the rig's (e.g. `--accept-new`, `--max-prune`); its metrics over plain HTTP
    /// unless they give `--metrics-cert`.
    pub fn controller_with(&self, name: &str, metrics_port: u16, extra: &[&str]) -> Replica {
        let log =
            std::fs::OpenOptions::new().create(true).append(true).open(self.path(&format!("{name}.log"))).unwrap();
        let p = |n: &str| self.path(n).to_str().unwrap().to_string();
        Command::new(env!("CARGO_BIN_EXE_wmrender"))
            .args(["controller", "--kubeconfig", &p("kubeconfig"), "--rendered", &p("rendered")])
            .args(["--inventory", &p("nodes.yaml"), "--identity", self.sshd.path("client_ed25519").to_str().unwrap()])
            .args(["--known-hosts", &p("known_hosts"), "--connect-timeout", "5"])
            .args(extra)
            .args(["--lease-duration", "4", "--resync", "30", "--replica", name, "--drain-timeout", "30"])
            .args(["--metrics-address", &format!("127.0.0.1:{metrics_port}")])
            .args(if extra.contains(&"--metrics-cert") { &[][..] } else { &["--metrics-plain-http"][..] })
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map(Replica)
            .expect("the controller starts")
    }

    /// Every replica's log.
    pub fn logs(&self) -> String {
        let mut logs: Vec<PathBuf> = std::fs::read_dir(self.work.path())
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
            .collect();
        logs.sort();
        logs.iter().map(|p| std::fs::read_to_string(p).unwrap_or_default()).collect()
    }

    /// `wmrender status` as the controller's user: (exit code, the JSON fleet, the table on stderr).
    pub fn status(&self) -> (i32, Value, String) {
        let p = |n: &str| self.path(n).to_str().unwrap().to_string();
        let identity = self.sshd.path("client_ed25519");
        let args = [
            "status",
            "--kubeconfig",
            &p("kubeconfig"),
            "--rendered",
            &p("rendered"),
            "--inventory",
            &p("nodes.yaml"),
            "--identity",
            identity.to_str().unwrap(),
            "--known-hosts",
            &p("known_hosts"),
        ];
        let human = wmrender(&args);
        let mut json_args = args.to_vec();
        json_args.extend(["--output", "json"]);
        let json = wmrender(&json_args);
        (code(&json), serde_json::from_slice(&json.stdout).unwrap_or(Value::Null), stderr(&human))
    }

    pub fn node(&self, name: &str) -> Option<Value> {
        self.cp.admin().get(&format!("/api/v1/nodes/{name}"))
    }

    /// Waits (bounded) until `done`; fails with the controllers' logs.
    pub fn wait(&self, what: &str, limit: Duration, done: impl Fn() -> bool) {
        let deadline = Instant::now() + limit;
        while !done() {
            assert!(Instant::now() < deadline, "waited {limit:?} for {what}\n--- controllers:\n{}", self.logs());
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// Ready, neither wmrender's taint nor the not-ready one, labelled as wmrender's.
pub fn configured(node: &Value) -> bool {
    let ready = node["status"]["conditions"]
        .as_array()
        .is_some_and(|l| l.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"));
    let taints = node["spec"]["taints"].as_array().cloned().unwrap_or_default();
    ready
        && taints.iter().all(|t| t["key"] != TAINT_KEY && t["key"] != "node.kubernetes.io/not-ready")
        && node["metadata"]["labels"]["wmrender.dev/managed"] == "true"
}

/// kubelet on every host: once the controller delivered the bootstrap kubeconfig, its TLS bootstrap and the Node,
/// with the delivered configuration's taints; it keeps the node's client for the agent's report. As the real one,
/// it keeps its client certificate once it has one and retries registering until it succeeds.
pub fn kubelets(rig: &Rig, stop: &std::sync::atomic::AtomicBool, joined: &std::sync::Mutex<Vec<(String, PathBuf)>>) {
    let mut clients: std::collections::BTreeMap<&str, Kubelet> = std::collections::BTreeMap::new();
    let mut registered: Vec<&str> = Vec::new();
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        for (name, host) in &rig.hosts {
            let (name, address) = (name.as_str(), host.address());
            let root = rig.path(name);
            if registered.contains(&name)
                || !root.join("C/k/bootstrap-kubeconfig").exists()
                || !root.join("C/k/kubelet.conf").exists()
            {
                continue;
            }
            if !clients.contains_key(name) {
                let Ok(text) = std::fs::read_to_string(root.join("C/k/bootstrap-kubeconfig")) else { continue };
                let Ok(bootstrap) = serde_json::from_str::<Value>(&text) else { continue };
                let Some(token) = bootstrap["users"][0]["user"]["token"].as_str() else { continue };
                let dir = rig.path(&format!("kubelet-{name}"));
                match Kubelet::bootstrap(&rig.cp, token, name, &dir, Duration::from_secs(20)) {
                    Ok(k) => {
                        joined.lock().unwrap().push((name.to_string(), k.kubeconfig.clone()));
                        clients.insert(name, k);
                    }
                    Err(e) => {
                        eprintln!("kubelet {name}: {e}");
                        continue;
                    }
                }
            }
            let Ok(text) = std::fs::read_to_string(root.join("C/k/kubelet.conf")) else { continue };
            let Ok(config) = serde_json::from_str::<Value>(&text) else { continue };
            let reg = Registration {
                addresses: vec![("InternalIP".into(), address.into()), ("Hostname".into(), name.into())],
                taints: config["registerWithTaints"].as_array().cloned().unwrap_or_default(),
                provider_id: None,
                boot_id: format!("{name}-boot-1"),
            };
            match clients[name].register(&reg, Duration::from_secs(20)) {
                Ok(()) => registered.push(name),
                Err(e) => eprintln!("kubelet {name}: {e}"),
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A controller process, killed when the test ends however it ends.
pub struct Replica(pub Child);

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Sets the flag when dropped, on success or on a panic.
pub struct StopOnDrop<'a>(pub &'a std::sync::atomic::AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

pub fn metrics(port: u16) -> String {
    http_get(port, "/metrics")
}

/// The answer (status line, headers and body) to `GET path` on 127.0.0.1:`port`; empty when nothing answers.
pub fn http_get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return String::new() };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes());
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}
