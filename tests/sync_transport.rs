//! `wmrender sync`'s transport against real OpenSSH servers on 127.0.0.1: RSA-only hosts, inventory values checked
//! before any node is contacted, what is printed where, servers that are silent or not SSH at all, key files that
//! are not usable keys, and the SFTP layer itself (one channel, uploads hashed on the way).

mod support;

use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use support::sshd::{Sshd, SshdOptions, keygen};
use support::{code, stderr, wmrender};

/// With the operator installed, WMCO owns the ConfigMap's BYOH host: sync only touches the inventory nodes.
const INPUTS: &str = "apiVersion: wmrender.dev/v1alpha1
kind: ClusterInputs
metadata:
  name: transport-test
spec:
  infrastructureID: transport-00000
  apiServerInternalURL: https://api-int.transport.example.com:6443
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

struct Work {
    dir: tempfile::TempDir,
}

impl Work {
    fn new() -> Work {
        let w = Work { dir: tempfile::tempdir().unwrap() };
        let inputs = w.path("wmrender.yaml");
        std::fs::write(&inputs, INPUTS).unwrap();
        let o = wmrender(&["render", "-f", inputs.to_str().unwrap(), "-o", w.path("rendered").to_str().unwrap()]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        w
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// An inventory of one posix node at `port` with its root under this work directory.
    fn inventory(&self, port: u16) -> PathBuf {
        let root = self.path(&format!("node-{port}"));
        std::fs::create_dir_all(&root).unwrap();
        let file = self.path(&format!("nodes-{port}.yaml"));
        std::fs::write(
            &file,
            format!(
                "nodes:\n- name: node-a\n  address: 127.0.0.1\n  port: {port}\n  user: root\n  profile: posix\n  root: {}\n",
                root.display()
            ),
        )
        .unwrap();
        file
    }

    /// Runs `wmrender sync --rendered <work>/rendered ARGS`.
    fn sync(&self, args: &[&str]) -> std::process::Output {
        let rendered = self.path("rendered");
        let mut all = vec!["sync", "--rendered", rendered.to_str().unwrap()];
        all.extend_from_slice(args);
        wmrender(&all)
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn report(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}):\n{}", String::from_utf8_lossy(&o.stdout)))
}

fn first_error(o: &std::process::Output) -> String {
    report(o)["nodes"][0]["error"].as_str().unwrap_or_default().to_string()
}

/// A TCP server on 127.0.0.1 that counts connections and treats each with `serve`; stopped on drop.
struct FakeServer {
    port: u16,
    accepted: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl FakeServer {
    fn start(serve: fn(std::net::TcpStream)) -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let (accepted, stop) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
        let (a, st) = (accepted.clone(), stop.clone());
        std::thread::spawn(move || {
            while !st.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        a.fetch_add(1, Ordering::SeqCst);
                        conn.set_nonblocking(false).unwrap();
                        std::thread::spawn(move || serve(conn));
                    }
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(5)),
                }
            }
        });
        FakeServer { port, accepted, stop }
    }

    fn connections(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn ssh_client_ok(sshd: &Sshd, key: &Path, known_hosts: &Path) -> bool {
    Command::new("ssh")
        .args(["-i", s(key), "-p", &sshd.port.to_string(), "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes"])
        .args(["-o", &format!("UserKnownHostsFile={}", s(known_hosts)), "-o", "StrictHostKeyChecking=yes"])
        .args(["-F", "/dev/null", "root@127.0.0.1", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("ssh (openssh-client)")
        .success()
}

const RSA_ONLY: &str =
    "HostKeyAlgorithms rsa-sha2-512,rsa-sha2-256\nPubkeyAcceptedAlgorithms rsa-sha2-512,rsa-sha2-256\n";

#[test]
fn an_rsa_only_server_is_reached_with_rsa_sha2_host_and_user_keys() {
    let sshd = Sshd::start_with(SshdOptions { host_keys: vec!["rsa"], extra_config: RSA_ONLY.into() });
    let work = Work::new();
    let inv = work.inventory(sshd.port);
    let known = sshd.path("known_hosts");
    assert!(std::fs::read_to_string(&known).unwrap().contains(" ssh-rsa "), "only the RSA host key is pinned");
    let pem = sshd.path("client_rsa_pem");
    let openssh_rsa = sshd.add_client_key("client_rsa", &["-t", "rsa", "-b", "3072"]);
    // The rig is what it claims: OpenSSH's own client connects with this known_hosts file and these keys.
    assert!(ssh_client_ok(&sshd, &pem, &known) && ssh_client_ok(&sshd, &openssh_rsa, &known));

    let base = ["--inventory", s(&inv), "--known-hosts", s(&known), "--output", "json", "--connect-timeout", "5"];
    let o = work.sync(&[&base[..], &["--identity", s(&pem)]].concat());
    assert_eq!(code(&o), 0, "{}\n{}", stderr(&o), sshd.log());
    assert_eq!(report(&o)["nodes"][0]["status"], "synced");
    let o = work.sync(&[&base[..], &["--identity", s(&openssh_rsa)]].concat());
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(report(&o)["nodes"][0]["status"], "unchanged");
    assert!(sshd.log().contains("Accepted publickey for root"), "{}", sshd.log());

    // The server takes only RSA user keys: an Ed25519 key is refused, and said so.
    let o = work.sync(&[&base[..], &["--identity", s(&sshd.path("client_ed25519"))]].concat());
    assert_eq!(code(&o), 3);
    assert!(first_error(&o).contains("authentication as root@[127.0.0.1]:"), "{}", first_error(&o));

    // First contact with --accept-new pins the RSA key, as one clean line.
    let fresh = work.path("fresh_known_hosts");
    let o = work.sync(&[
        "--inventory",
        s(&inv),
        "--known-hosts",
        s(&fresh),
        "--accept-new",
        "--identity",
        s(&pem),
        "--output",
        "json",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&fresh).unwrap(), sshd.known_hosts_line("host_rsa", sshd.port));
}

#[test]
fn a_host_known_only_by_its_rsa_key_is_asked_for_that_key() {
    // The server holds an Ed25519 key too, which it would offer first; only the RSA key is pinned.
    let sshd = Sshd::start_with(SshdOptions { host_keys: vec!["ed25519", "rsa"], extra_config: String::new() });
    let work = Work::new();
    let inv = work.inventory(sshd.port);
    let known = work.path("known_rsa");
    std::fs::write(&known, sshd.known_hosts_line("host_rsa", sshd.port)).unwrap();
    let key = sshd.path("client_ed25519");
    assert!(ssh_client_ok(&sshd, &key, &known));
    let o = work.sync(&["--inventory", s(&inv), "--known-hosts", s(&known), "--identity", s(&key), "--output", "json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(report(&o)["nodes"][0]["status"], "synced");
}

/// Each bad value for the second node of an inventory whose first node is a counting server: exit 2, the file,
/// line and field, and no connection to any node.
#[test]
fn bad_inventory_values_are_refused_before_any_node_is_contacted() {
    let work = Work::new();
    let server = FakeServer::start(|_| {});
    let key = work.path("id");
    keygen(&["-q", "-t", "ed25519", "-N", "", "-f", s(&key)]);
    let template = format!(
        "nodes:\n- name: good\n  address: 127.0.0.1\n  port: {}\n  user: root\n  profile: posix\n  root: /srv/good\n\
         - name: NAME\n  address: ADDRESS\n  port: PORT\n  user: USER\n  profile: posix\n  root: /srv/bad\n",
        server.port
    );
    let cases: &[(&str, &str, u32, &str)] = &[
        ("PORT", "0", 10, "0 is not a TCP port"),
        ("PORT", "65536", 10, "65536 is not a TCP port"),
        ("PORT", "-22", 10, "-22 is not a TCP port"),
        ("PORT", "\"22; reboot\"", 10, "is not a TCP port"),
        ("ADDRESS", "\"10.0.0.6; reboot\"", 9, "is not an IP address or DNS name"),
        ("ADDRESS", "\"-oProxyCommand=touch /tmp/pwned\"", 9, "starts with `-`"),
        ("ADDRESS", "\"$(touch /tmp/pwned)\"", 9, "is not an IP address or DNS name"),
        ("ADDRESS", "\"win`id`.example.com\"", 9, "is not an IP address or DNS name"),
        ("ADDRESS", "\"win a.example.com\"", 9, "is not an IP address or DNS name"),
        ("ADDRESS", "10.0.0.300", 9, "is not a valid IPv4 address"),
        ("ADDRESS", "\"\"", 9, "is empty"),
        ("USER", "\"-oProxyCommand=touch /tmp/pwned\"", 11, "starts with `-`"),
        ("USER", "\"admin; reboot\"", 11, "a shell metacharacter"),
        ("USER", "\"admin|reboot\"", 11, "a shell metacharacter"),
        ("USER", "\"$(reboot)\"", 11, "a shell metacharacter"),
        ("USER", "\"a`id`\"", 11, "a shell metacharacter"),
        ("USER", "\"admin\\nreboot\"", 11, "control character"),
        ("USER", "\"admin -oX=y\"", 11, "after a space"),
        ("USER", "\"DOMAIN\\\\\"", 11, "ends with"),
        ("NAME", "\"bad name\"", 8, "contains ` `"),
        ("NAME", "\"-bad\"", 8, "does not start with a letter or digit"),
        ("NAME", "\"bad\\u0007\"", 8, "contains `\\u{7}`"),
    ];
    let field_of = |placeholder: &str| match placeholder {
        "NAME" => "nodes[1].name",
        "ADDRESS" => "nodes[1].address",
        "PORT" => "nodes[1].port",
        _ => "nodes[1].user",
    };
    for (placeholder, value, line, message) in cases {
        let text = template
            .replace(*placeholder, value)
            .replace("NAME", "bad")
            .replace("ADDRESS", "127.0.0.1")
            .replace("PORT", "22")
            .replace("USER", "root");
        let inv = work.path("nodes.yaml");
        std::fs::write(&inv, &text).unwrap();
        let o = work.sync(&["--inventory", s(&inv), "--identity", s(&key), "--known-hosts", s(&work.path("kh"))]);
        let err = stderr(&o);
        assert_eq!(code(&o), 2, "{placeholder}={value}: {err}");
        assert!(err.contains(&format!("nodes.yaml:{line}:")), "{placeholder}={value}: no file:line in\n{err}");
        assert!(err.contains(field_of(placeholder)), "{placeholder}={value}: no field in\n{err}");
        assert!(err.contains(message), "{placeholder}={value}: expected `{message}` in\n{err}");
        assert!(o.stdout.is_empty());
    }
    assert_eq!(server.connections(), 0, "a node was contacted before the inventory was checked");
    assert!(!Path::new("/tmp/pwned").exists());
}

#[test]
fn json_output_is_the_report_alone_and_human_output_tells_as_nodes_finish() {
    let sshd = Sshd::start();
    let work = Work::new();
    let inv = work.inventory(sshd.port);
    let known = sshd.path("known_hosts");
    let key = sshd.path("client_ed25519");
    let base = ["--inventory", s(&inv), "--known-hosts", s(&known), "--identity", s(&key)];

    // A dry run is asked for its plan, so the plan is shown on stderr, and only the plan.
    let o = work.sync(&[&base[..], &["--output", "json", "--dry-run"]].concat());
    assert_eq!(code(&o), 1);
    assert_eq!(report(&o)["nodes"][0]["status"], "would-change");
    let err = stderr(&o);
    assert!(err.starts_with("node-a would change:\n  add    C:\\k\\"), "{err}");
    assert!(err.lines().all(|l| l.is_empty() || l.starts_with("node-a would change:") || l.starts_with("  ")), "{err}");

    let o = work.sync(&[&base[..], &["--output", "json"]].concat());
    assert_eq!(code(&o), 0);
    assert_eq!(report(&o)["nodes"][0]["status"], "synced");
    assert_eq!(stderr(&o), "");

    // -v asks for the per-node line and the table on stderr; stdout stays the report.
    let o = work.sync(&[&base[..], &["--output", "json", "-v"]].concat());
    assert_eq!(report(&o)["nodes"][0]["status"], "unchanged");
    let err = stderr(&o);
    assert!(err.contains("node-a (127.0.0.1): unchanged") && err.contains("NODE "), "{err}");

    // Human output off a terminal: a line per finished node, then the table; nothing on stdout.
    let o = work.sync(&base);
    assert_eq!(code(&o), 0);
    assert!(o.stdout.is_empty());
    let err = stderr(&o);
    let line = err.find("node-a (127.0.0.1): unchanged").unwrap_or_else(|| panic!("{err}"));
    assert!(line < err.find("NODE ").unwrap(), "{err}");
}

#[test]
fn a_rendered_file_that_vanished_is_invalid_input() {
    let work = Work::new();
    let key = work.path("id");
    keygen(&["-q", "-t", "ed25519", "-N", "", "-f", s(&key)]);
    let server = FakeServer::start(|_| {});
    let inv = work.inventory(server.port);
    std::fs::remove_file(work.path("rendered/node/C/k/kubelet.conf")).unwrap();
    let o = work.sync(&["--inventory", s(&inv), "--identity", s(&key)]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("node/C/k/kubelet.conf is listed in manifest.json"), "{}", stderr(&o));
    assert_eq!(server.connections(), 0);
}

#[test]
fn a_server_that_is_not_ssh_is_called_so_and_not_retried() {
    let work = Work::new();
    let key = work.path("id");
    keygen(&["-q", "-t", "ed25519", "-N", "", "-f", s(&key)]);
    let web = FakeServer::start(|mut c| {
        let mut buf = [0u8; 256];
        let _ = c.read(&mut buf);
        let _ = c.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    });
    let inv = work.inventory(web.port);
    let o = work.sync(&["--inventory", s(&inv), "--identity", s(&key), "--output", "json", "--connect-timeout", "5"]);
    assert_eq!(code(&o), 3);
    let e = first_error(&o);
    assert!(e.contains("is not an SSH server") && e.contains("HTTP/1.1 400 Bad Request"), "{e}");
    assert_eq!(web.connections(), 1, "a wrong server is not asked again");
}

#[test]
fn a_silent_host_costs_one_time_out_and_a_dropped_connection_is_retried() {
    let work = Work::new();
    let key = work.path("id");
    keygen(&["-q", "-t", "ed25519", "-N", "", "-f", s(&key)]);
    // Accepts and never says a word (a firewall that swallows, a hung sshd).
    let silent = FakeServer::start(|c| {
        std::thread::sleep(std::time::Duration::from_secs(4));
        drop(c);
    });
    let inv = work.inventory(silent.port);
    let o = work.sync(&["--inventory", s(&inv), "--identity", s(&key), "--output", "json", "--connect-timeout", "1"]);
    assert_eq!(code(&o), 3);
    assert!(first_error(&o).contains("no SSH answer within 1s"), "{}", first_error(&o));
    assert_eq!(silent.connections(), 1, "a time-out is not retried");

    // Closes at once, as sshd does over MaxStartups: worth another try.
    let dropping = FakeServer::start(drop);
    let inv = work.inventory(dropping.port);
    let o = work.sync(&["--inventory", s(&inv), "--identity", s(&key), "--output", "json", "--connect-timeout", "2"]);
    assert_eq!(code(&o), 3);
    assert!(first_error(&o).contains("closed the connection without a word"), "{}", first_error(&o));
    assert_eq!(dropping.connections(), 3);
}

#[test]
fn zero_parallelism_and_zero_unavailability_are_refused() {
    let work = Work::new();
    let key = work.path("id");
    keygen(&["-q", "-t", "ed25519", "-N", "", "-f", s(&key)]);
    let server = FakeServer::start(|_| {});
    let inv = work.inventory(server.port);
    for flag in ["--parallel", "--max-unavailable", "--connect-timeout"] {
        let o = work.sync(&["--inventory", s(&inv), "--identity", s(&key), flag, "0"]);
        assert_eq!(code(&o), 2, "{flag} 0: {}", stderr(&o));
        assert!(stderr(&o).contains(flag), "{}", stderr(&o));
    }
    assert_eq!(server.connections(), 0);
}

#[test]
fn a_dry_run_with_accept_new_writes_nothing_and_a_pin_starts_no_blank_line() {
    let sshd = Sshd::start();
    let work = Work::new();
    let inv = work.inventory(sshd.port);
    let key = sshd.path("client_ed25519");
    for (name, before) in [("missing/.ssh/known_hosts", None), ("empty_known_hosts", Some(""))] {
        let known = work.path(name);
        if let Some(text) = before {
            std::fs::write(&known, text).unwrap();
        }
        let args = ["--inventory", s(&inv), "--known-hosts", s(&known), "--identity", s(&key), "--accept-new"];
        let o = work.sync(&[&args[..], &["--dry-run", "--output", "json"]].concat());
        assert_eq!(code(&o), 1, "{}", stderr(&o));
        assert_eq!(report(&o)["nodes"][0]["status"], "would-change");
        assert_eq!(std::fs::read_to_string(&known).ok().as_deref(), before, "{name}: a dry run writes nothing");
        if before.is_none() {
            assert!(!work.path("missing").exists(), "a dry run creates no directory either");
        }

        let o = work.sync(&[&args[..], &["--output", "json"]].concat());
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        assert_eq!(std::fs::read_to_string(&known).unwrap(), sshd.known_hosts_line("host_ed25519", sshd.port));
        std::fs::remove_dir_all(work.path(&format!("node-{}/C", sshd.port))).unwrap();
    }
}

#[test]
fn key_errors_say_what_is_wrong() {
    let work = Work::new();
    let server = FakeServer::start(|_| {});
    let inv = work.inventory(server.port);
    let k = |name: &str| work.path(name);
    keygen(&["-q", "-t", "ed25519", "-N", "", "-f", s(&k("plain"))]);
    keygen(&["-q", "-t", "ed25519", "-N", "secret", "-f", s(&k("openssh_encrypted"))]);
    keygen(&["-q", "-t", "rsa", "-b", "2048", "-m", "PEM", "-N", "secret", "-f", s(&k("pem_encrypted"))]);
    keygen(&["-q", "-t", "rsa", "-b", "2048", "-m", "PKCS8", "-N", "secret", "-f", s(&k("pkcs8_encrypted"))]);
    std::fs::write(k("garbage"), "this is not a key\n").unwrap();
    std::fs::create_dir(k("a_directory")).unwrap();
    let cases = [
        ("does-not-exist", "no such file"),
        ("plain.pub", "this is a public key; give the private key instead"),
        ("openssh_encrypted", "protected by a passphrase"),
        ("pem_encrypted", "protected by a passphrase"),
        ("pkcs8_encrypted", "protected by a passphrase"),
        ("garbage", "not a private key format wmrender reads"),
        ("a_directory", "is a directory"),
    ];
    for (name, message) in cases {
        let o = work.sync(&["--inventory", s(&inv), "--identity", s(&k(name))]);
        let err = stderr(&o);
        assert_eq!(code(&o), 2, "{name}: {err}");
        assert!(err.contains(&format!("cannot use the private key {}", s(&k(name)))), "{name}: {err}");
        assert!(err.contains(message), "{name}: expected `{message}` in {err}");
        assert_eq!(err.contains("passphrase"), message.contains("passphrase"), "{name}: {err}");
    }
    assert_eq!(server.connections(), 0);
}

#[test]
fn sync_help_shows_windows_paths_with_single_backslashes() {
    let o = wmrender(&["sync", "--help"]);
    assert_eq!(code(&o), 0);
    let help = String::from_utf8_lossy(&o.stdout);
    for path in [
        r"C:\k\kubelet.exe",
        r"C:\k\bootstrap-kubeconfig",
        r"C:\k\kubelet-ca.crt",
        r"C:\k\bootstrap-ca.crt",
        r"C:\k\tls\certs\tls.crt",
        r"C:\k\tls\certs\tls.key",
    ] {
        assert!(help.contains(path), "{path} missing from:\n{help}");
    }
    assert!(!help.contains(r"\\"), "{help}");
}

fn sha256(bytes: &[u8]) -> String {
    wmrender::hex(&Sha256::digest(bytes))
}

/// The SFTP layer on its own: one subsystem per connection, uploads of files and bytes with several writes in
/// flight whose sha256 is that of what arrived, reads, directories, the atomic replace and removal.
#[test]
fn sftp_uploads_hash_what_they_send_on_one_channel() {
    use wmrender::delivery::inventory::Node;
    use wmrender::delivery::plan::Source;
    use wmrender::delivery::profile::Profile;
    use wmrender::delivery::ssh::{ConnectOptions, Connection, load_identity};
    let sshd = Sshd::start();
    let dir = tempfile::tempdir().unwrap();
    let big: Vec<u8> = (0..3_000_017u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let local = dir.path().join("big.bin");
    std::fs::write(&local, &big).unwrap();
    let root = dir.path().join("node");
    let node = Node {
        name: "n".into(),
        address: "127.0.0.1".into(),
        port: sshd.port,
        user: "root".into(),
        profile: Profile::Posix { root: root.display().to_string() },
        machine: None,
        reach_only: false,
    };
    let opts = ConnectOptions {
        key: Arc::new(load_identity(&sshd.path("client_ed25519")).unwrap()),
        known_hosts: sshd.path("known_hosts"),
        accept_new: false,
        dry_run: false,
        connect_timeout: std::time::Duration::from_secs(5),
        idle_timeout: std::time::Duration::from_secs(30),
        attempts: 1,
        known_hosts_lock: Arc::new(std::sync::Mutex::new(())),
        host_keys: None,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let conn = Connection::open(&node, &opts).await.unwrap();
        let sftp = conn.sftp().await.unwrap();
        assert!(sftp.posix_rename);
        let d = format!("{}/C/k/deep/er", root.display());
        sftp.mkdir_p(&d).await.unwrap();
        sftp.mkdir_p(&d).await.unwrap();
        assert_eq!(sftp.read_if_exists(&format!("{d}/nothing")).await.unwrap(), None);

        let up = sftp.upload_hashed(&format!("{d}/big.tmp"), &Source::File(local.clone())).await.unwrap();
        assert_eq!((up.bytes, up.sha256.as_str()), (big.len() as u64, sha256(&big).as_str()));
        sftp.posix_rename(&format!("{d}/big.tmp"), &format!("{d}/big")).await.unwrap();
        assert_eq!(std::fs::read(root.join("C/k/deep/er/big")).unwrap(), big);
        assert_eq!(sftp.read_if_exists(&format!("{d}/big")).await.unwrap().as_deref(), Some(&big[..]));

        // Bytes replace the existing file atomically; an empty source makes an empty file.
        let small = Arc::new(b"hello".to_vec());
        let up = sftp.upload_hashed(&format!("{d}/big.tmp"), &Source::Bytes(small.clone())).await.unwrap();
        assert_eq!((up.bytes, up.sha256), (5, sha256(b"hello")));
        sftp.posix_rename(&format!("{d}/big.tmp"), &format!("{d}/big")).await.unwrap();
        assert_eq!(std::fs::read(root.join("C/k/deep/er/big")).unwrap(), b"hello");
        let up = sftp.upload_hashed(&format!("{d}/empty"), &Source::Bytes(Arc::new(vec![]))).await.unwrap();
        assert_eq!((up.bytes, up.sha256), (0, sha256(b"")));

        // A file that vanished locally is a local error, not a half-sent one.
        let gone = sftp.upload_hashed(&format!("{d}/x"), &Source::File(dir.path().join("gone"))).await;
        assert!(gone.unwrap_err().to_string().contains("gone"));

        assert!(!sftp.remove_dir_if_empty(&d).await.unwrap());
        for f in ["big", "empty", "x"] {
            sftp.remove_file(&format!("{d}/{f}")).await.unwrap();
        }
        sftp.remove_file(&format!("{d}/big")).await.unwrap();
        assert!(sftp.remove_dir_if_empty(&d).await.unwrap());
        assert!(!root.join("C/k/deep/er").exists());
        conn.close().await;
    });
    let log = sshd.log();
    assert_eq!(log.matches("Starting session: subsystem 'sftp'").count(), 1, "{log}");
}

#[test]
fn a_no_op_sync_opens_one_sftp_subsystem_per_connection() {
    let sshd = Sshd::start();
    let work = Work::new();
    let inv = work.inventory(sshd.port);
    let (known, key) = (sshd.path("known_hosts"), sshd.path("client_ed25519"));
    let args = ["--inventory", s(&inv), "--known-hosts", s(&known), "--identity", s(&key), "--output", "json"];
    assert_eq!(code(&work.sync(&args)), 0);
    let before = sshd.log().matches("Starting session: subsystem 'sftp'").count();
    let o = work.sync(&args);
    assert_eq!(report(&o)["nodes"][0]["status"], "unchanged");
    // sshd writes its log asynchronously; give it a moment.
    let mut after = 0;
    for _ in 0..100 {
        after = sshd.log().matches("Starting session: subsystem 'sftp'").count();
        if after > before {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    let after = sshd.log().matches("Starting session: subsystem 'sftp'").count().max(after);
    assert_eq!(after - before, 1, "{}", sshd.log());
}

/// How a proxied connection is cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cut {
    /// Both sides get a FIN.
    Close,
    /// Both sides get an RST.
    Reset,
}

/// A loopback proxy to `target` that cuts each connection once `budget` bytes have passed (both directions
/// together): with a FIN or with an RST, to both sides at once. Stops on drop.
struct CuttingProxy {
    port: u16,
    stop: Arc<AtomicBool>,
}

impl CuttingProxy {
    fn start(target: u16, budget: usize, how: Cut) -> CuttingProxy {
        use std::net::{Shutdown, TcpStream};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::spawn(move || {
            while !stopped.load(Ordering::SeqCst) {
                let Ok((client, _)) = listener.accept() else {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                    continue;
                };
                client.set_nonblocking(false).unwrap();
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else { continue };
                let passed = Arc::new(AtomicUsize::new(0));
                let cut = Arc::new(AtomicBool::new(false));
                let sockets = [client.try_clone().unwrap(), server.try_clone().unwrap()];
                for (mut from, mut to) in [(client.try_clone().unwrap(), server.try_clone().unwrap()), (server, client)]
                {
                    let (passed, cut) = (passed.clone(), cut.clone());
                    let sockets = [sockets[0].try_clone().unwrap(), sockets[1].try_clone().unwrap()];
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 4096];
                        loop {
                            let n = match from.read(&mut buf) {
                                Ok(0) | Err(_) => break,
                                Ok(n) => n,
                            };
                            let before = passed.fetch_add(n, Ordering::SeqCst);
                            let allowed = budget.saturating_sub(before).min(n);
                            if allowed > 0 && to.write_all(&buf[..allowed]).is_err() {
                                break;
                            }
                            if allowed < n && !cut.swap(true, Ordering::SeqCst) {
                                for s in &sockets {
                                    if how == Cut::Reset {
                                        set_linger_zero(s);
                                    }
                                    // FIN for a close; for a reset it wakes the other pump, and the last close of
                                    // each socket (linger 0) sends the RST.
                                    let _ = s.shutdown(if how == Cut::Close { Shutdown::Both } else { Shutdown::Read });
                                }
                                break;
                            }
                            if cut.load(Ordering::SeqCst) {
                                break;
                            }
                        }
                    });
                }
            }
        });
        CuttingProxy { port, stop }
    }
}

impl Drop for CuttingProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn set_linger_zero(s: &std::net::TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: a valid socket descriptor and a linger struct of the size given; setsockopt only reads it.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &linger as *const libc::linger as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// A connection cut (reset or closed) anywhere in a sync, from the handshake to the last upload, ends that node's
/// sync promptly with exit 3 and a message; the next sync over an unbroken connection finishes the job. Every run
/// has a deadline: a sync that outlives it is a hang.
#[test]
fn a_cut_connection_ends_the_sync_promptly_wherever_it_falls() {
    let sshd = Sshd::start();
    let work = Work::new();
    let payload = work.path("payload");
    std::fs::create_dir_all(payload.join("C/k")).unwrap();
    let exe: Vec<u8> = (0..400_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8).collect();
    std::fs::write(payload.join("C/k/tool.exe"), &exe).unwrap();
    let key = sshd.path("client_ed25519");
    let deadline = std::time::Duration::from_secs(20);
    let run = |port: u16, known: &Path| {
        let inv = work.inventory(port);
        let rendered = work.path("rendered");
        let mut child = Command::new(env!("CARGO_BIN_EXE_wmrender"))
            .args(["sync", "--rendered", s(&rendered), "--inventory", s(&inv), "--identity", s(&key)])
            .args(["--known-hosts", s(known), "--payload", s(&payload), "--connect-timeout", "3"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        while child.try_wait().unwrap().is_none() {
            if started.elapsed() > deadline {
                let _ = child.kill();
                let o = child.wait_with_output().unwrap();
                return (None, stderr(&o), started.elapsed());
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let o = child.wait_with_output().unwrap();
        (o.status.code(), stderr(&o), started.elapsed())
    };
    let mut hangs = Vec::new();
    // From inside the key exchange to the end of the payload's upload.
    let budgets = [1_500, 3_500, 6_000, 12_000, 40_000, 90_000, 160_000, 250_000, 330_000, 410_000];
    for how in [Cut::Reset, Cut::Close] {
        for budget in budgets {
            let proxy = CuttingProxy::start(sshd.port, budget, how);
            let known = work.path(&format!("known-{}", proxy.port));
            sshd.write_known_hosts(&known, proxy.port);
            let (status, err, took) = run(proxy.port, &known);
            match status {
                None => hangs.push(format!("{how:?} after {budget} bytes: still running after {took:?}\n{err}")),
                Some(3) => assert!(err.contains("node-a"), "{how:?} at {budget}: no message naming the node: {err}"),
                // The cut fell after the sync's last byte: it finished.
                Some(0) => {}
                Some(c) => panic!("{how:?} after {budget} bytes: exit {c}: {err}"),
            }
        }
    }
    assert!(hangs.is_empty(), "{} syncs hung:\n{}", hangs.len(), hangs.join("\n"));
    let (status, err, _) = run(sshd.port, &sshd.path("known_hosts"));
    assert_eq!(status, Some(0), "the next sync finishes the job: {err}");
    assert_eq!(std::fs::read(work.path(&format!("node-{}/C/k/tool.exe", sshd.port))).unwrap(), exe);
}
