//! Network namespaces the tests make, each with a veth pair to the test's own namespace: a test's hosts get
//! addresses a real node could have (not loopback), reached from the test's processes. Their addresses are in
//! 198.18.0.0/15, RFC 2544's range for benchmarking, which no real network uses: /30s of 198.18.0.0/16 for
//! [`NetNs`], 198.19.0.0/16 for a benchmark's [`Fleet`]. Outside the namespaces only their veth ends (and a
//! fleet's route) change, and go when they drop. A [`Forwarder`] carries connections to what listens on 127.0.0.1.

use super::sshd::Sshd;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::Duration;

/// A network namespace with a veth pair to the test's own: `host` (this side) and `node` (inside), a /30 of
/// 198.18.0.0/16. `node` is an address a real kubelet accepts as its node IP (not loopback) and that this side
/// reaches.
pub struct NetNs {
    pub name: String,
    pub host: String,
    pub node: String,
}

/// Held while a /30 (or a fleet's route) is chosen and taken: test processes run at once (a developer's and CI's, a
/// test and a benchmark), and each namespace's /30 must be its own among them all.
const LOCK: &str = "/run/wmrender-test-netns.lock";

/// How many namespaces may exist at once on a machine.
const MOST: u32 = 1024;

/// The /30 numbered `index` of 198.18.0.0/16: (this side's address, the namespace's).
fn pair(index: u32) -> (String, String) {
    let (third, fourth) = (index / 64, index % 64 * 4);
    (format!("198.18.{third}.{}", fourth + 1), format!("198.18.{third}.{}", fourth + 2))
}

/// The /30s of 198.18.0.0/16 whose side here some interface holds: taken, by this process or another, or by a
/// namespace that lives on after its deletion while a socket in it is open.
fn taken() -> std::collections::BTreeSet<u32> {
    let o = Command::new("ip").args(["-o", "-4", "addr", "show"]).output().expect("ip (iproute2)");
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .filter_map(|word| {
            let (third, fourth) = word.strip_prefix("198.18.")?.split('/').next()?.split_once('.')?;
            Some(third.parse::<u32>().ok()? * 64 + fourth.parse::<u32>().ok()? / 4)
        })
        .collect()
}

/// The lock, held until the returned file closes; waits at most a minute for another process to let it go.
fn lock() -> std::fs::File {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(LOCK)
        .unwrap_or_else(|e| panic!("{LOCK}: {e}"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    // SAFETY: flock on a file we hold open; released when it closes.
    while unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        assert!(std::time::Instant::now() < deadline, "{LOCK} held by another process for a minute");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    file
}

/// Deletes the namespaces of test processes that are gone (killed outright, their `Drop`s never ran); their veth
/// pairs go with them.
fn sweep() {
    for entry in std::fs::read_dir("/run/netns").into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.strip_prefix("wmr-").is_some_and(|rest| super::process_gone(rest.split('-').next().unwrap_or(""))) {
            let _ = Command::new("ip").args(["netns", "del", &name]).output();
        }
    }
}

fn ip(args: &[&str]) {
    let o = Command::new("ip").args(args).output().expect("ip (iproute2)");
    assert!(o.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

impl NetNs {
    /// Makes a namespace with the first /30 no test process holds (1,024 at once on a machine).
    pub fn create() -> NetNs {
        let _lock = lock();
        sweep();
        let taken = taken();
        let index = (0..MOST).find(|i| !taken.contains(i)).expect("at most 1,024 test network namespaces at once");
        let pid = std::process::id();
        let name = format!("wmr-{pid}-{index}");
        // Interface names: at most 15 bytes.
        let (h, n) = (format!("wh{}x{index}", pid % 100_000), format!("wn{}x{index}", pid % 100_000));
        let (host, node) = pair(index);
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

    /// Links this namespace to `other` directly with a veth pair of its own, a /30 of TEST-NET-3 (203.0.113.0/24)
    /// numbered `index` (0–63), as two hosts of one network: (this side's address, `other`'s).
    pub fn link(&self, other: &NetNs, index: u8) -> (String, String) {
        let base = u32::from(index) * 4;
        let (a, b) = (format!("203.0.113.{}", base + 1), format!("203.0.113.{}", base + 2));
        let pid = std::process::id() % 100_000;
        let (la, lb) = (format!("wl{pid}x{index}a"), format!("wl{pid}x{index}b"));
        ip(&["-n", &self.name, "link", "add", &la, "type", "veth", "peer", "name", &lb, "netns", &other.name]);
        ip(&["-n", &self.name, "addr", "add", &format!("{a}/30"), "dev", &la]);
        ip(&["-n", &self.name, "link", "set", &la, "up"]);
        ip(&["-n", &other.name, "addr", "add", &format!("{b}/30"), "dev", &lb]);
        ip(&["-n", &other.name, "link", "set", &lb, "up"]);
        (a, b)
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        // Deleting the namespace deletes the veth pair with it.
        let _ = Command::new("ip").args(["netns", "del", &self.name]).output();
    }
}

/// A host reached over SSH at an address of its own: a namespace whose port 22 at its address is forwarded to an
/// sshd on 127.0.0.1 (one sshd serves any number of hosts, each with a root of its own in the inventory). The
/// forwarder can go down, as a host that is gone.
pub struct SshHost {
    pub ssh: Forwarder,
    /// The host's namespace (where a real kubelet of the host runs).
    pub ns: NetNs,
}

impl SshHost {
    pub fn new(sshd: &Sshd) -> SshHost {
        let ns = NetNs::create();
        let ssh = ns.forward(&format!("{}:22", ns.node), ([127, 0, 0, 1], sshd.port).into());
        SshHost { ssh, ns }
    }

    /// The host's address: one a real kubelet accepts as its node IP, unlike 127.0.0.0/8 ("nodeIP can't be loopback
    /// address").
    pub fn address(&self) -> &str {
        &self.ns.node
    }

    /// The known_hosts line that pins the sshd's first host key at this host's address.
    pub fn known_hosts_line(&self, sshd: &Sshd) -> String {
        sshd.known_hosts_line_at(&sshd.host_keys[0], self.address(), 22)
    }
}

/// Many hosts behind one namespace, for the benchmarks: every address of 198.19.0.0/16 is local there (an AnyIP route
/// on its loopback) and routed to it from here, and port 22 at any of them is forwarded to an sshd on 127.0.0.1. Host
/// `i` has an address of its own. One fleet at a time on a machine.
pub struct Fleet {
    _ssh: Forwarder,
    ns: NetNs,
}

const FLEET: &str = "198.19.0.0/16";

impl Fleet {
    pub fn new(sshd: &Sshd) -> Fleet {
        let ns = NetNs::create();
        ip(&["-n", &ns.name, "route", "add", "local", FLEET, "dev", "lo"]);
        {
            let _lock = lock();
            let o = Command::new("ip").args(["route", "add", FLEET, "via", &ns.node]).output().expect("ip (iproute2)");
            assert!(
                o.status.success(),
                "routing {FLEET} to a benchmark's hosts: {} (does another benchmark run?)",
                String::from_utf8_lossy(&o.stderr).trim()
            );
        }
        let ssh = ns.forward("0.0.0.0:22", ([127, 0, 0, 1], sshd.port).into());
        Fleet { _ssh: ssh, ns }
    }

    /// Host `i`'s address (at most 65,024 hosts: 256 /24s of 254 addresses, none ending in .0 or .255).
    pub fn address(i: usize) -> String {
        assert!(i < 256 * 254, "{FLEET} holds 65,024 hosts here");
        format!("198.19.{}.{}", i / 254, i % 254 + 1)
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        // The route goes with the veth pair once the namespace is gone; said here, since a socket may keep it alive.
        let _ = Command::new("ip").args(["route", "del", FLEET, "via", &self.ns.node]).output();
    }
}

/// A host's SSH port that can go down: it forwards connections to the sshd while up, and closes each one at once
/// while down (as a host that is gone, or whose sshd is stopped, ends a handshake).
pub struct Forwarder {
    pub port: u16,
    up: std::sync::Arc<std::sync::atomic::AtomicBool>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Forwarder {
    /// Forwards what `listener` accepts (a socket made elsewhere, e.g. in a network namespace) to `target`.
    pub fn on(listener: std::net::TcpListener, target: std::net::SocketAddr) -> Forwarder {
        use std::sync::atomic::{AtomicBool, Ordering};
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let up = std::sync::Arc::new(AtomicBool::new(true));
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let (up2, stop2) = (up.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop2.load(Ordering::SeqCst) {
                let Ok((client, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                };
                if !up2.load(Ordering::SeqCst) {
                    let _ = client.shutdown(std::net::Shutdown::Both);
                    continue;
                }
                let _ = client.set_nonblocking(false);
                let Ok(server) = std::net::TcpStream::connect_timeout(&target, Duration::from_secs(5)) else {
                    continue;
                };
                for (mut from, mut to) in [(client.try_clone().unwrap(), server.try_clone().unwrap()), (server, client)]
                {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Write);
                    });
                }
            }
        });
        Forwarder { port, up, stop }
    }

    pub fn set_up(&self, up: bool) {
        self.up.store(up, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}
