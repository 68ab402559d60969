//! A real Linux kubelet (k8s.io/kubernetes v1.36.3, `cmd/kubelet`, built by tests/payload/build.sh into
//! `target/payload-programs/linux/kubelet`) with Debian's containerd on a socket of its own, for the tests where a
//! node's side can be had for real: its TLS bootstrap with the bootstrap token of the kubeconfig wmrender delivered,
//! its Node with the taints the rendered configuration registers, its serving certificate; and pods, run by runc on
//! the CNI bridge plugin's network (Debian's containernetworking-plugins), their images pulled by containerd through
//! `hosts.toml` from a mirror.
//!
//! kubelet refuses a loopback node IP ("failed to validate nodeIP: nodeIP can't be loopback address": no addresses on
//! its Node, so no serving certificate), so it runs, with its containerd, in a network namespace the test makes
//! ([`NetNs`]), with an address of its own (198.18.0.0/16) on a veth pair; the API server, the rig's sshd and the
//! registry on 127.0.0.1 are reached through forwarders whose listening sockets live in that namespace. These
//! machines run cgroup v1, which kubelet 1.36 refuses unless `failCgroupV1: false`; each kubelet puts its pods under a
//! cgroup root of its own. When [`RealKubelet`] drops, kubelet, its pods' processes, containerd's shims and
//! containerd are killed and what they left outside the test's folder (shim sockets, CNI results) is removed; kubelet
//! and containerd also die with the thread that started them. A test process killed outright leaves its pods and
//! shims running: the next kubelet started here ends them ([`sweep`]). The namespace is deleted when [`NetNs`] drops.

use super::apiserver::{ControlPlane, spawn};
use super::netns::{Forwarder, NetNs};
use serde_json::Value;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

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
    /// How it proves who it is.
    pub credential: Credential<'a>,
    /// `registerWithTaints`, as the rendered kubelet configuration gives them.
    pub taints: Vec<Value>,
    /// Where its containerd pulls images from, for a node that runs pods.
    pub mirror: Option<Mirror<'a>>,
}

/// How kubelet authenticates to the API server.
pub enum Credential<'a> {
    /// The bootstrap token of the kubeconfig wmrender delivered: TLS bootstrap, then a serving certificate by CSR.
    Bootstrap(&'a str),
    /// A client certificate of the rig's CA for `system:node:<name>` (a node that joined before the test), and a
    /// self-signed serving certificate.
    Node,
}

/// A registry on 127.0.0.1 standing in, as a mirror, for the registries named in `hosts` (containerd's
/// `hosts.toml`, the rendered mirrors' own format), reached from the namespace through a forwarder.
pub struct Mirror<'a> {
    pub registry: SocketAddr,
    /// The CA of its serving certificate.
    pub ca: &'a Path,
    /// The registries it mirrors, e.g. `quay.io`, `registry.k8s.io`.
    pub hosts: &'a [&'a str],
}

/// The pod sandbox ("pause") image containerd runs for each pod: [`pause_image`] builds it.
pub const PAUSE_IMAGE: &str = "registry.k8s.io/pause:3.10";
/// The pods' network (the CNI bridge plugin, host-local addresses) inside the node's namespace.
pub const POD_SUBNET: &str = "10.88.0.0/24";
/// Its CNI name (containerd caches each pod's result as /var/lib/cni/results/<name>-<sandbox id>-<interface>).
const CNI_NETWORK: &str = "wmrender-test-pods";

/// The pause image as an OCI image layout at `layout` (tag `3.10`), built with umoci: Debian's static busybox
/// sleeping (a pod sandbox's process only holds the pod's namespaces), as user 65535 like the upstream image.
pub fn pause_image(layout: &Path) {
    let busybox = ["/bin/busybox", "/usr/bin/busybox"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
        .expect("busybox (busybox-static; bash tests/setup.sh)");
    let image = format!("{}:3.10", layout.display());
    super::umoci(&["init", "--layout", &layout.display().to_string()]);
    super::umoci(&["new", "--image", &image]);
    super::umoci(&["insert", "--image", &image, busybox, "/bin/busybox"]);
    super::umoci(&[
        "config",
        "--image",
        &image,
        "--config.user",
        "65535:65535",
        "--config.entrypoint",
        "/bin/busybox",
        "--config.cmd",
        "sleep",
        "--config.cmd",
        "2147483647",
    ]);
}

/// A running kubelet and its containerd.
pub struct RealKubelet {
    pub dir: PathBuf,
    children: Vec<Child>,
    /// The cgroup (in every v1 hierarchy) kubelet puts its pods under: one per kubelet, removed when it stops.
    cgroup_root: String,
    /// kubelet's way to the API server, and containerd's to the mirror.
    _forwarders: Vec<Forwarder>,
}

/// The cgroup v1 hierarchies mounted here (`/sys/fs/cgroup/<name>`).
fn cgroup_hierarchies() -> Vec<PathBuf> {
    std::fs::read_dir("/sys/fs/cgroup")
        .map(|d| d.flatten().map(|e| e.path()).filter(|p| p.join("cgroup.procs").exists()).collect())
        .unwrap_or_default()
}

/// The cgroups at and below `dir`, deepest first.
fn cgroups_below(dir: &Path) -> Vec<PathBuf> {
    let mut all = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if let Ok(entries) = std::fs::read_dir(&d) {
            stack.extend(entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
        }
        all.push(d);
    }
    all.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    all
}

/// Kills every process in the cgroups at and below `root` (in every hierarchy).
fn kill_cgroup(root: &str) {
    for hierarchy in cgroup_hierarchies() {
        for cgroup in cgroups_below(&hierarchy.join(root)) {
            let procs = std::fs::read_to_string(cgroup.join("cgroup.procs")).unwrap_or_default();
            for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                // SAFETY: a plain kill(2) of a process in a test kubelet's own cgroup.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}

/// Removes the cgroups at and below `root`, killing again what is still in them (a container being created while
/// the first kill ran), for at most ten seconds.
fn remove_cgroup(root: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    for hierarchy in cgroup_hierarchies() {
        for cgroup in cgroups_below(&hierarchy.join(root)) {
            while std::fs::remove_dir(&cgroup).is_err() && cgroup.exists() && Instant::now() < deadline {
                kill_cgroup(root);
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// The containerd shims running here: (pid, the containerd socket they were started for).
fn shims() -> Vec<(i32, String)> {
    let mut found = vec![];
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let args: Vec<String> = cmdline.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        if !args.first().is_some_and(|a| a.ends_with("containerd-shim-runc-v2")) {
            continue;
        }
        if let Some(i) = args.iter().position(|a| a == "-address") {
            found.push((pid, args.get(i + 1).cloned().unwrap_or_default()));
        }
    }
    found
}

/// Unmounts everything mounted at or below `dir`, deepest first.
fn unmount_below(dir: &Path) {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let mut below: Vec<&str> =
        mounts.lines().filter_map(|l| l.split(' ').nth(1)).filter(|m| Path::new(m).starts_with(dir)).collect();
    below.sort_by_key(|m| std::cmp::Reverse(m.len()));
    for m in below {
        let _ = Command::new("umount").args(["-l", m]).output();
    }
}

/// Removes what the containerd of the kubelet folder `dir` would have removed itself, outside its folders: each
/// task's shim socket (the path is fixed: /run/containerd/s/…) and each pod's cached CNI results
/// (/var/lib/cni/results/<network>-<id>-<interface>, for the pods' network and containerd's loopback).
fn remove_outside(dir: &Path) {
    let tasks = dir.join("containerd/state/io.containerd.runtime.v2.task/k8s.io");
    let ids: Vec<String> = std::fs::read_dir(&tasks)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    for id in &ids {
        let address = std::fs::read_to_string(tasks.join(id).join("address")).unwrap_or_default();
        if let Some(path) = address.trim().strip_prefix("unix://").filter(|p| p.starts_with("/run/containerd/s/")) {
            let _ = std::fs::remove_file(path);
        }
    }
    for entry in std::fs::read_dir("/var/lib/cni/results").into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let of = |id: &String| [CNI_NETWORK, "cni-loopback"].iter().any(|n| name.starts_with(&format!("{n}-{id}-")));
        if ids.iter().any(of) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Ends what a test process killed outright left (its kubelet and containerd died with it, its pods and shims did
/// not): the pods' cgroups of test processes that are gone (their namespaces: [`NetNs::create`]), the shims of a test's
/// containerd that no longer answers on its socket, and the mounts below that test's kubelet folder.
pub fn sweep() {
    for hierarchy in cgroup_hierarchies() {
        for entry in std::fs::read_dir(&hierarchy).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(rest) = name.strip_prefix("wmrender-test-wmr-") else { continue };
            if super::process_gone(rest.split('-').next().unwrap_or("")) {
                kill_cgroup(&name);
                remove_cgroup(&name);
            }
        }
    }
    let mut left = std::collections::BTreeSet::new();
    for (pid, socket) in shims() {
        let ours =
            socket.ends_with("/containerd/containerd.sock") && Path::new(&socket).starts_with(std::env::temp_dir());
        if ours && std::os::unix::net::UnixStream::connect(&socket).is_err() {
            // SAFETY: a shim of a test containerd that is gone.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            left.extend(Path::new(&socket).parent().and_then(Path::parent).map(Path::to_path_buf));
        }
    }
    for dir in left {
        unmount_below(&dir);
        remove_outside(&dir);
    }
}

impl Drop for RealKubelet {
    fn drop(&mut self) {
        // kubelet first (it would restart what dies below it), then what runs in its pods' cgroups, then
        // containerd's shims (they outlive containerd: they are found by the socket they were started for), then
        // containerd.
        if let Some(kubelet) = self.children.last_mut() {
            let _ = kubelet.kill();
            let _ = kubelet.wait();
        }
        kill_cgroup(&self.cgroup_root);
        let socket = self.dir.join("containerd/containerd.sock").display().to_string();
        for (pid, _) in shims().into_iter().filter(|(_, s)| *s == socket) {
            // SAFETY: a shim of this kubelet's containerd.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        for c in self.children.iter_mut().rev() {
            let _ = c.kill();
            let _ = c.wait();
        }
        remove_outside(&self.dir);
        // kubelet bind-mounts its root folder onto itself, containerd mounts the containers' root file systems and
        // the pods' network namespaces below its own: unmounted, or the test's folder could not be removed.
        unmount_below(&self.dir);
        remove_cgroup(&self.cgroup_root);
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("its address").port()
}

fn apiserver(cp: &ControlPlane) -> SocketAddr {
    cp.url.trim_start_matches("https://").parse().expect("the API server's address is 127.0.0.1:port")
}

/// containerd's configuration: its own root, state and socket; CRI with runc, the CNI bridge plugin from Debian's
/// containernetworking-plugins (conflist below), the pause image, and `hosts.toml` files under `certs.d` (the
/// pods' network namespaces are mounted under its state folder, so they go with it).
fn containerd_config(dir: &Path, socket: &Path) -> String {
    let d = |p: &str| dir.join(p).display().to_string();
    format!(
        r#"version = 2
root = "{root}"
state = "{state}"
[grpc]
  address = "{socket}"
[ttrpc]
  address = "{socket}.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  netns_mounts_under_state_dir = true
  # This sandbox withholds CAP_SYS_RESOURCE, so no process may lower its oom_score_adj: without this, runc stops
  # every pod sandbox at "failed to update /proc/self/oom_score_adj: Permission denied" (the sandbox's -998).
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "{runc}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni}"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "{certs}"
"#,
        root = d("containerd/root"),
        state = d("containerd/state"),
        socket = socket.display(),
        cni = d("cni"),
        certs = d("certs.d"),
        runc = d("runc"),
    )
}

/// The pods' network: a bridge in the node's namespace, its address the pods' gateway, addresses from
/// [`POD_SUBNET`] kept under `dir`; what pods send off the node leaves with the node's address (every kubelet here
/// has the same subnet, so no other namespace routes back to it).
fn cni_conflist(dir: &Path) -> Value {
    serde_json::json!({
        "cniVersion": "1.0.0",
        "name": CNI_NETWORK,
        "plugins": [{
            "type": "bridge",
            "bridge": "cni0",
            "isGateway": true,
            "ipMasq": true,
            "ipam": {"type": "host-local", "ranges": [[{"subnet": POD_SUBNET}]], "routes": [{"dst": "0.0.0.0/0"}],
                     "dataDir": dir.join("cni-ipam").display().to_string()},
        }],
    })
}

impl RealKubelet {
    /// Starts containerd in `ns`, waits (bounded) for its socket, then starts kubelet there against the control
    /// plane, authenticated by `join.credential` (the API server's address and CA are the rig's, reached through a
    /// forwarder on the namespace's 127.0.0.1: the delivered kubeconfig names api-int, which these tests do not
    /// resolve). With `join.mirror`, containerd pulls the mirrored registries' images from it.
    pub fn start(cp: &ControlPlane, join: &Join, dir: &Path, ns: &NetNs) -> RealKubelet {
        let kubelet = program();
        sweep();
        for d in ["containerd/root", "containerd/state", "root", "pki", "manifests", "cni", "certs.d", "pod-logs"] {
            std::fs::create_dir_all(dir.join(d)).expect("kubelet folders");
        }
        let mut forwarders = vec![];
        if let Some(mirror) = &join.mirror {
            let to = ns.forward("127.0.0.1:0", mirror.registry);
            for host in mirror.hosts {
                let folder = dir.join("certs.d").join(host);
                std::fs::create_dir_all(&folder).expect("certs.d");
                let text = format!(
                    "server = \"https://{host}\"\n\n[host.\"https://127.0.0.1:{}\"]\n  capabilities = [\"pull\", \"resolve\"]\n  \
                     ca = \"{}\"\n",
                    to.port,
                    mirror.ca.display()
                );
                std::fs::write(folder.join("hosts.toml"), text).expect("hosts.toml");
            }
            forwarders.push(to);
        }
        std::fs::write(dir.join("cni/10-pods.conflist"), cni_conflist(dir).to_string()).expect("CNI configuration");
        let socket = dir.join("containerd/containerd.sock");
        let config = dir.join("containerd/config.toml");
        std::fs::write(&config, containerd_config(dir, &socket)).expect("containerd config");
        // In the node's namespace: the CNI plugin makes the pods' bridge in containerd's.
        let containerd = spawn(
            Path::new("/usr/bin/nsenter"),
            &[
                format!("--net=/run/netns/{}", ns.name),
                "--".into(),
                "/usr/bin/containerd".into(),
                "--config".into(),
                config.display().to_string(),
            ],
            &dir.join("containerd.log"),
        );
        let mut children = vec![containerd];
        let deadline = Instant::now() + Duration::from_secs(30);
        while !socket.exists() {
            assert!(Instant::now() < deadline, "containerd did not open {} within 30 s", socket.display());
            std::thread::sleep(Duration::from_millis(100));
        }
        // Pods' cgroups under a root of this kubelet's own (kubelet wants it made).
        let cgroup_root = format!("wmrender-test-{}", ns.name);
        for hierarchy in cgroup_hierarchies() {
            let _ = std::fs::create_dir_all(hierarchy.join(&cgroup_root));
        }

        let forwarder = ns.forward("127.0.0.1:0", apiserver(cp));
        let server = format!("https://127.0.0.1:{}", forwarder.port);
        let bootstrap = match join.credential {
            Credential::Bootstrap(token) => {
                std::fs::write(
                    dir.join("bootstrap-kubeconfig"),
                    format!(
                        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n    \
                         certificate-authority: {}\nusers:\n- name: u\n  user:\n    token: {token}\ncontexts:\n- name: c\n  \
                         context:\n    cluster: c\n    user: u\ncurrent-context: c\n",
                        cp.path("ca.crt").display(),
                    ),
                )
                .expect("bootstrap kubeconfig");
                true
            }
            Credential::Node => {
                let creds = cp.credentials(&format!("system:node:{}", join.name), &["system:nodes"]);
                let text = super::apiserver::kubeconfig_text(&server, &cp.path("ca.crt"), &creds);
                std::fs::write(dir.join("kubeconfig"), text).expect("kubeconfig");
                false
            }
        };
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
            "serverTLSBootstrap": bootstrap,
            "rotateCertificates": true,
            "registerWithTaints": join.taints,
            "staticPodPath": dir.join("manifests").display().to_string(),
            "cgroupRoot": format!("/{cgroup_root}"),
            // A pod's ConfigMap volumes follow their ConfigMaps at each pod sync: every 10 s, not every minute.
            "syncFrequency": "10s",
            "podLogsDir": dir.join("pod-logs").display().to_string(),
            // The tests' machines are small: no eviction on their disks.
            "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
            "authentication": {"anonymous": {"enabled": false}, "webhook": {"enabled": false},
                               "x509": {"clientCAFile": cp.path("ca.crt").display().to_string()}},
            "authorization": {"mode": "AlwaysAllow"},
        });
        let config = dir.join("kubelet.json");
        std::fs::write(&config, serde_json::to_vec_pretty(&kubelet_config).expect("json")).expect("kubelet config");
        let mut args: Vec<String> = [
            // nsenter, not `ip netns exec`: the latter mounts a fresh /sys, without the cgroup mounts kubelet needs.
            &format!("--net=/run/netns/{}", ns.name),
            "--",
            &kubelet.display().to_string(),
            "--config",
            &config.display().to_string(),
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
        if bootstrap {
            args.push("--bootstrap-kubeconfig".into());
            args.push(dir.join("bootstrap-kubeconfig").display().to_string());
        }
        children.push(spawn(Path::new("/usr/bin/nsenter"), &args, &dir.join("kubelet.log")));
        forwarders.push(forwarder);
        RealKubelet { dir: dir.to_path_buf(), children, cgroup_root, _forwarders: forwarders }
    }

    /// The end of kubelet's log, for a failure message.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("kubelet.log")).unwrap_or_default();
        super::apiserver::tail(&text, 30)
    }
}
