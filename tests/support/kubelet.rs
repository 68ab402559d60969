//! A real Linux kubelet (k8s.io/kubernetes v1.36.3, `cmd/kubelet`, built by tests/payload/build.sh into
//! `target/payload-programs/linux/kubelet`) with Debian's containerd on a socket of its own, for the tests where
//! kubelet's side of a join can be had for real: its TLS bootstrap with the bootstrap token of the kubeconfig
//! wmrender delivered, its Node with the taints the rendered configuration registers, its serving certificate.
//!
//! kubelet refuses a loopback node IP ("failed to validate nodeIP: nodeIP can't be loopback address": no addresses on
//! its Node, so no serving certificate), so it runs in a network namespace the test makes ([`NetNs`]), with an address
//! of its own (TEST-NET-2) on a veth pair; the API server and the rig's sshd on 127.0.0.1 are reached through
//! forwarders whose listening sockets live in that namespace. These machines run cgroup v1, which kubelet 1.36
//! refuses unless `failCgroupV1: false`; no pod is run (runc inside this sandbox is not asked for). Every process
//! dies with the test (killed when [`RealKubelet`] drops, and with the thread that started it); the namespace is
//! deleted when [`NetNs`] drops.

use super::apiserver::{ControlPlane, spawn};
use super::controller_rig::Forwarder;
use serde_json::Value;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// A network namespace with a veth pair to the test's own: `host` (this side) and `node` (inside), a /30 of
/// TEST-NET-2 (198.51.100.0/24), which no real network uses.
pub struct NetNs {
    pub name: String,
    pub host: String,
    pub node: String,
}

fn ip(args: &[&str]) {
    let o = Command::new("ip").args(args).output().expect("ip (iproute2)");
    assert!(o.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

impl NetNs {
    /// Makes namespace number `index` (0–63) of this test process.
    pub fn create(index: u8) -> NetNs {
        let pid = std::process::id();
        let name = format!("wmr-{pid}-{index}");
        // Interface names: at most 15 bytes.
        let (h, n) = (format!("wh{}x{index}", pid % 100_000), format!("wn{}x{index}", pid % 100_000));
        let base = u32::from(index) * 4;
        let (host, node) = (format!("198.51.100.{}", base + 1), format!("198.51.100.{}", base + 2));
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        ip(&["netns", "add", &name]);
        let ns = NetNs { name: name.clone(), host: host.clone(), node: node.clone() };
        ip(&["link", "add", &h, "type", "veth", "peer", "name", &n, "netns", &name]);
        ip(&["addr", "add", &format!("{host}/30"), "dev", &h]);
        ip(&["link", "set", &h, "up"]);
        ip(&["-n", &name, "addr", "add", &format!("{node}/30"), "dev", &n]);
        ip(&["-n", &name, "link", "set", &n, "up"]);
        ip(&["-n", &name, "link", "set", "lo", "up"]);
        ns
    }

    /// A listening socket inside the namespace (made by a thread that entered it; the socket stays there).
    fn listen(&self, address: String) -> TcpListener {
        let path = format!("/run/netns/{}", self.name);
        std::thread::spawn(move || {
            let ns = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            // SAFETY: setns on this thread only, with a namespace file we hold open.
            let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns {path}: {}", std::io::Error::last_os_error());
            TcpListener::bind(&address).unwrap_or_else(|e| panic!("binding {address} in {path}: {e}"))
        })
        .join()
        .expect("the namespace's listener")
    }

    /// Forwards `address` inside the namespace to `target` here, while the returned forwarder lives.
    pub fn forward(&self, address: &str, target: SocketAddr) -> Forwarder {
        Forwarder::on(self.listen(address.to_string()), target)
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        // Deleting the namespace deletes the veth pair with it.
        let _ = Command::new("ip").args(["netns", "del", &self.name]).output();
    }
}

/// The kubelet program, or a panic that says how to build it.
pub fn program() -> PathBuf {
    let path = super::root().join("target/payload-programs/linux/kubelet");
    assert!(path.is_file(), "{} is missing: run `bash tests/payload/build.sh` (Go)", path.display());
    path
}

/// What the node's kubelet is started with.
pub struct Join<'a> {
    /// The Node's name (`--hostname-override`).
    pub name: &'a str,
    /// Its InternalIP (`--node-ip`).
    pub address: &'a str,
    /// The bootstrap token of the kubeconfig wmrender delivered.
    pub token: &'a str,
    /// `registerWithTaints`, as the rendered kubelet configuration gives them.
    pub taints: Vec<Value>,
}

/// A running kubelet and its containerd.
pub struct RealKubelet {
    pub dir: PathBuf,
    children: Vec<Child>,
    /// kubelet's way to the API server.
    _apiserver: Forwarder,
}

impl Drop for RealKubelet {
    fn drop(&mut self) {
        for c in self.children.iter_mut().rev() {
            let _ = c.kill();
            let _ = c.wait();
        }
        // kubelet bind-mounts its root folder onto itself (and containerd may mount below its own): unmounted, or
        // the test's folder could not be removed.
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let mut below: Vec<&str> = mounts
            .lines()
            .filter_map(|l| l.split(' ').nth(1))
            .filter(|m| Path::new(m).starts_with(&self.dir))
            .collect();
        below.sort_by_key(|m| std::cmp::Reverse(m.len()));
        for m in below {
            let _ = Command::new("umount").args(["-l", m]).output();
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("its address").port()
}

impl RealKubelet {
    /// Starts containerd, waits (bounded) for its socket, then starts kubelet in `ns` against the control plane with
    /// a bootstrap kubeconfig holding `join.token` (the API server's address and CA are the rig's, reached through a
    /// forwarder on the namespace's 127.0.0.1: the delivered kubeconfig names api-int, which these tests do not
    /// resolve).
    pub fn start(cp: &ControlPlane, join: &Join, dir: &Path, ns: &NetNs) -> RealKubelet {
        let kubelet = program();
        for d in ["containerd/root", "containerd/state", "root", "pki", "manifests"] {
            std::fs::create_dir_all(dir.join(d)).expect("kubelet folders");
        }
        let socket = dir.join("containerd/containerd.sock");
        let config = dir.join("containerd/config.toml");
        std::fs::write(
            &config,
            format!(
                "version = 2\nroot = \"{}\"\nstate = \"{}\"\n[grpc]\n  address = \"{}\"\n[ttrpc]\n  address = \"{}.ttrpc\"\n",
                dir.join("containerd/root").display(),
                dir.join("containerd/state").display(),
                socket.display(),
                socket.display()
            ),
        )
        .expect("containerd config");
        let containerd = spawn(
            Path::new("/usr/bin/containerd"),
            &["--config".into(), config.display().to_string()],
            &dir.join("containerd.log"),
        );
        let mut children = vec![containerd];
        let deadline = Instant::now() + Duration::from_secs(30);
        while !socket.exists() {
            assert!(Instant::now() < deadline, "containerd did not open {} within 30 s", socket.display());
            std::thread::sleep(Duration::from_millis(100));
        }

        let apiserver: SocketAddr =
            cp.url.trim_start_matches("https://").parse().expect("the API server's address is 127.0.0.1:port");
        let forwarder = ns.forward("127.0.0.1:0", apiserver);
        let port = forwarder.port;
        std::fs::write(
            dir.join("bootstrap-kubeconfig"),
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{port}\n    \
                 certificate-authority: {}\nusers:\n- name: u\n  user:\n    token: {}\ncontexts:\n- name: c\n  context:\n    \
                 cluster: c\n    user: u\ncurrent-context: c\n",
                cp.path("ca.crt").display(),
                join.token
            ),
        )
        .expect("bootstrap kubeconfig");
        let kubelet_config = serde_json::json!({
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "failCgroupV1": false,
            "failSwapOn": false,
            "cgroupDriver": "cgroupfs",
            "containerRuntimeEndpoint": format!("unix://{}", socket.display()),
            "address": "127.0.0.1",
            "port": free_port(),
            "readOnlyPort": 0,
            "healthzPort": free_port(),
            "healthzBindAddress": "127.0.0.1",
            "serverTLSBootstrap": true,
            "rotateCertificates": true,
            "registerWithTaints": join.taints,
            "staticPodPath": dir.join("manifests").display().to_string(),
            // The tests' machines are small: no eviction on their disks.
            "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
            "authentication": {"anonymous": {"enabled": false}, "webhook": {"enabled": false},
                               "x509": {"clientCAFile": cp.path("ca.crt").display().to_string()}},
            "authorization": {"mode": "AlwaysAllow"},
        });
        let config = dir.join("kubelet.json");
        std::fs::write(&config, serde_json::to_vec_pretty(&kubelet_config).expect("json")).expect("kubelet config");
        let args: Vec<String> = [
            // nsenter, not `ip netns exec`: the latter mounts a fresh /sys, without the cgroup mounts kubelet needs.
            &format!("--net=/run/netns/{}", ns.name),
            "--",
            &kubelet.display().to_string(),
            "--config",
            &config.display().to_string(),
            "--bootstrap-kubeconfig",
            &dir.join("bootstrap-kubeconfig").display().to_string(),
            "--kubeconfig",
            &dir.join("kubeconfig").display().to_string(),
            "--cert-dir",
            &dir.join("pki").display().to_string(),
            "--root-dir",
            &dir.join("root").display().to_string(),
            "--hostname-override",
            join.name,
            "--node-ip",
            join.address,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        children.push(spawn(Path::new("/usr/bin/nsenter"), &args, &dir.join("kubelet.log")));
        RealKubelet { dir: dir.to_path_buf(), children, _apiserver: forwarder }
    }

    /// The end of kubelet's log, for a failure message.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("kubelet.log")).unwrap_or_default();
        super::apiserver::tail(&text, 30)
    }
}
