//! A real OpenSSH server on 127.0.0.1 for the sync tests, started and stopped by the test (recipe:
//! ../shared/reference/ssh-and-test-rigs.md §1). Needs root and openssh-server, which `.ci/run` installs.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Sshd {
    pub dir: tempfile::TempDir,
    pub port: u16,
    /// The host key files' base names (`host_ed25519`, `host_rsa`), in the order sshd_config lists them.
    pub host_keys: Vec<String>,
    child: Child,
}

/// How to set up the server beyond the defaults (an Ed25519 host key, OpenSSH's default algorithms).
#[derive(Clone, Debug)]
pub struct SshdOptions {
    /// Host key types, each `ed25519` or `rsa` (3072 bits).
    pub host_keys: Vec<&'static str>,
    /// More sshd_config lines, e.g. `HostKeyAlgorithms rsa-sha2-512,rsa-sha2-256`.
    pub extra_config: String,
}

impl Default for SshdOptions {
    fn default() -> SshdOptions {
        SshdOptions { host_keys: vec!["ed25519"], extra_config: String::new() }
    }
}

pub fn keygen(args: &[&str]) {
    let st = Command::new("ssh-keygen")
        .args(args)
        .stdout(Stdio::null())
        .status()
        .expect("ssh-keygen (apt install openssh-client)");
    assert!(st.success(), "ssh-keygen {args:?}");
}

impl Sshd {
    pub fn start() -> Sshd {
        Sshd::start_with(SshdOptions::default())
    }

    pub fn start_with(opts: SshdOptions) -> Sshd {
        Sshd::start_full(opts, |_| {
            "Subsystem sftp internal-sftp
"
            .into()
        })
    }

    /// An sshd whose configuration ends with what `tail` returns; `tail` gets the server's folder (to write
    /// wrapper scripts there) and must name the sftp subsystem.
    pub fn start_with_tail(tail: impl Fn(&Path) -> String) -> Sshd {
        Sshd::start_full(SshdOptions::default(), tail)
    }

    fn start_full(opts: SshdOptions, tail: impl Fn(&Path) -> String) -> Sshd {
        assert!(
            Path::new("/usr/sbin/sshd").exists(),
            "the sync tests need /usr/sbin/sshd: apt-get install openssh-server"
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        let p = |name: &str| d.join(name).to_string_lossy().into_owned();
        let mut host_keys = Vec::new();
        for kind in &opts.host_keys {
            let name = format!("host_{kind}");
            let bits: &[&str] = if *kind == "rsa" { &["-b", "3072"] } else { &[] };
            keygen(&[&["-q", "-t", kind, "-N", "", "-f", &p(&name)], bits].concat());
            host_keys.push(name);
        }
        let host_key_lines: String = host_keys.iter().map(|k| format!("HostKey {}\n", p(k))).collect();
        keygen(&["-q", "-t", "ed25519", "-N", "", "-f", &p("client_ed25519")]);
        keygen(&["-q", "-t", "rsa", "-b", "2048", "-m", "PEM", "-N", "", "-f", &p("client_rsa_pem")]);
        keygen(&["-q", "-t", "ed25519", "-N", "", "-f", &p("stranger_ed25519")]);
        let authorized = [p("client_ed25519.pub"), p("client_rsa_pem.pub")]
            .iter()
            .map(|f| std::fs::read_to_string(f).expect("pub key"))
            .collect::<String>();
        std::fs::write(d.join("authorized_keys"), authorized).expect("authorized_keys");
        std::fs::create_dir_all("/run/sshd").expect("mkdir /run/sshd (the sync tests run as root)");
        for _ in 0..20 {
            let port = TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("addr").port();
            std::fs::write(
                d.join("sshd_config"),
                format!(
                    "Port {port}\nListenAddress 127.0.0.1\n{host_key_lines}PidFile {pid}\nAuthorizedKeysFile {ak}\n\
                     PasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\n\
                     PermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\n\
                     LogLevel VERBOSE\nMaxStartups 100:30:200\nMaxSessions 64\n{extra}{tail}",
                    extra = opts.extra_config,
                    pid = p("sshd.pid"),
                    ak = p("authorized_keys"),
                    tail = tail(d),
                ),
            )
            .expect("sshd_config");
            let mut child = Command::new("/usr/sbin/sshd")
                .args(["-D", "-f", &p("sshd_config"), "-E", &p("sshd.log")])
                .stdin(Stdio::null())
                .spawn()
                .expect("starting sshd");
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break; // port taken between our probe and sshd's bind: try another
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    let s = Sshd { dir, port, host_keys, child };
                    s.write_known_hosts(&s.path("known_hosts"), port);
                    return s;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("sshd did not start; see its log in {}", d.join("sshd.log").display());
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A known_hosts file that pins this server's first host key for `127.0.0.1:port` (the port may be a proxy's).
    pub fn write_known_hosts(&self, file: &Path, port: u16) {
        std::fs::write(file, self.known_hosts_line(&self.host_keys[0], port)).expect("known_hosts");
    }

    /// The known_hosts line of one host key (`host_rsa`) for `127.0.0.1:port`.
    pub fn known_hosts_line(&self, host_key: &str, port: u16) -> String {
        self.known_hosts_line_at(host_key, "127.0.0.1", port)
    }

    /// The known_hosts line of one host key for `address:port` (OpenSSH writes port 22 without brackets).
    pub fn known_hosts_line_at(&self, host_key: &str, address: &str, port: u16) -> String {
        let pub_key = std::fs::read_to_string(self.path(&format!("{host_key}.pub"))).expect("host key");
        let mut parts = pub_key.split_whitespace();
        let (kind, b64) = (parts.next().unwrap(), parts.next().unwrap());
        let host = if port == 22 { address.to_string() } else { format!("[{address}]:{port}") };
        format!("{host} {kind} {b64}\n")
    }

    /// Makes a client key (`ssh-keygen ARGS -f <dir>/NAME`) and lets it log in; returns the private key's path.
    pub fn add_client_key(&self, name: &str, args: &[&str]) -> PathBuf {
        let path = self.path(name);
        let path_s = path.to_string_lossy().into_owned();
        keygen(&[&["-q", "-N", ""], args, &["-f", &path_s]].concat());
        let public = std::fs::read_to_string(self.path(&format!("{name}.pub"))).expect("pub key");
        let mut authorized = std::fs::read_to_string(self.path("authorized_keys")).expect("authorized_keys");
        authorized.push_str(&public);
        std::fs::write(self.path("authorized_keys"), authorized).expect("authorized_keys");
        path
    }

    /// Cuts every open connection, as a host going down does: each connection's own sshd process (a child of the
    /// listening one) is killed; the server goes on listening.
    pub fn drop_connections(&self) {
        let master = self.child.id().to_string();
        for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            // `pid (comm) state ppid …`: the parent pid is the second field after the command name.
            let parent = stat.rsplit_once(") ").and_then(|(_, rest)| rest.split(' ').nth(1));
            if parent == Some(master.as_str()) {
                let _ = Command::new("kill").args(["-KILL", &entry.file_name().to_string_lossy()]).status();
            }
        }
    }

    /// sshd's log so far (LogLevel VERBOSE): accepted and refused keys, connections.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.path("sshd.log")).unwrap_or_default()
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        // SIGTERM, then reap: a killed but unreaped sshd would linger as a zombie.
        let _ = Command::new("kill").arg(self.child.id().to_string()).status();
        let _ = self.child.wait();
    }
}
