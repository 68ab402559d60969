//! Debian's `docker-registry` (the CNCF distribution registry) on 127.0.0.1 with TLS from a throwaway CA, and
//! optionally htpasswd authentication; stopped when dropped. Images are pushed to it with the real `skopeo`.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A CA and a serving certificate for 127.0.0.1, made with `openssl`.
pub struct Ca {
    pub dir: PathBuf,
}

impl Ca {
    pub fn new(dir: &Path) -> Ca {
        let run = |args: &[&str]| {
            let out = Command::new("openssl").args(args).current_dir(dir).output().expect("openssl runs");
            assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        };
        run(&["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=wmrender test CA"]
            .iter()
            .chain(&["-keyout", "ca.key", "-out", "ca.pem"])
            .copied()
            .collect::<Vec<_>>());
        run(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            "reg.key",
            "-out",
            "reg.csr",
        ]);
        // Also `localhost`: Wine 8's certificate chain policy matches no IP address (Go's verifier on Windows asks it:
        // "certificate is valid for 127.0.0.1, not 127.0.0.1"), so a Windows program under Wine names the registry so.
        std::fs::write(dir.join("san.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n").unwrap();
        run(&[
            "x509",
            "-req",
            "-in",
            "reg.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            "san.ext",
            "-out",
            "reg.pem",
        ]);
        Ca { dir: dir.to_path_buf() }
    }

    pub fn pem(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }
}

/// A test's folder with a throwaway CA in it: where its registries keep their data and its other files go.
pub struct Scratch {
    pub dir: tempfile::TempDir,
    pub ca: Ca,
}

impl Scratch {
    pub fn new() -> Scratch {
        let dir = tempfile::tempdir().unwrap();
        let ca = Ca::new(dir.path());
        Scratch { dir, ca }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// An ECDSA P-256 key pair made by openssl: (private PKCS#8 PEM, public PEM).
    pub fn key(&self, name: &str) -> (PathBuf, PathBuf) {
        let (private, public) = (self.path(&format!("{name}.pem")), self.path(&format!("{name}.pub")));
        let p = private.to_str().unwrap();
        super::openssl(&["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", p]);
        super::openssl(&["pkey", "-in", p, "-pubout", "-out", public.to_str().unwrap()]);
        (private, public)
    }
}

pub struct Registry {
    pub addr: String,
    pub data: PathBuf,
    pub log: PathBuf,
    child: Child,
    /// With token authentication: the realm's server (tests/cosign/token-server).
    token_server: Option<TokenServer>,
}

/// How a test registry asks for credentials.
#[derive(Clone, Copy)]
pub enum Auth<'a> {
    None,
    /// htpasswd: the Basic pair on every request.
    Basic((&'a str, &'a str)),
    /// Token authentication: a 401 with a Bearer challenge naming the token server, which gives this user a token
    /// for its Basic pair (the flow of Docker Hub, GHCR, Quay, Harbor).
    Token((&'a str, &'a str)),
}

impl Registry {
    /// A registry at a free port, its storage under `dir`; with `user` it asks for that user's password.
    pub fn start(dir: &Path, ca: &Ca, user: Option<(&str, &str)>) -> Registry {
        Registry::start_with(dir, ca, user.map(Auth::Basic).unwrap_or(Auth::None))
    }

    /// A registry at a free port, its storage under `dir`, asking for credentials as `auth` says.
    pub fn start_with(dir: &Path, ca: &Ca, auth: Auth) -> Registry {
        std::fs::create_dir_all(dir).unwrap();
        let mut token_server = None;
        let auth = match auth {
            Auth::Basic((name, password)) => {
                let hash = bcrypt::hash(password, 4).unwrap();
                std::fs::write(dir.join("htpasswd"), format!("{name}:{hash}\n")).unwrap();
                format!("auth: {{htpasswd: {{realm: test, path: {}}}}}\n", dir.join("htpasswd").display())
            }
            Auth::Token((name, password)) => {
                let server = TokenServer::start(dir, ca, name, password);
                let realm = server.realm.clone();
                token_server = Some(server);
                format!(
                    "auth: {{token: {{realm: \"{realm}\", service: {TOKEN_SERVICE}, issuer: {TOKEN_ISSUER}, \
                     rootcertbundle: {}}}}}\n",
                    dir.join("token-signing.pem").display()
                )
            }
            Auth::None => String::new(),
        };
        // The port is taken last: another test could take a free port while the token server starts.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let addr = format!("127.0.0.1:{port}");
        let data = dir.join("data");
        let config = format!(
            "version: 0.1\nlog: {{level: info, accesslog: {{disabled: false}}}}\n\
             storage: {{filesystem: {{rootdirectory: {}}}, delete: {{enabled: true}}}}\n\
             http: {{addr: {addr}, tls: {{certificate: {}, key: {}}}}}\n{auth}",
            data.display(),
            ca.dir.join("reg.pem").display(),
            ca.dir.join("reg.key").display()
        );
        std::fs::write(dir.join("config.yml"), config).unwrap();
        let log = dir.join("log");
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new("docker-registry")
            .args(["serve", dir.join("config.yml").to_str().unwrap()])
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("docker-registry runs (bash tests/setup.sh installs it)");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(&addr).is_err() {
            assert!(Instant::now() < deadline, "docker-registry did not listen on {addr}: {}", read(&log));
            std::thread::sleep(Duration::from_millis(50));
        }
        Registry { addr, data, log, child, token_server }
    }

    /// Pushes `oci:<layout>:<tag>` to `<addr>/<repository>`; returns the manifest's digest.
    pub fn push(&self, layout: &Path, tag: &str, repository: &str, user: Option<(&str, &str)>) -> String {
        let digest_file = self.data.with_file_name(format!("digest-{}", repository.replace('/', "_")));
        let mut cmd = Command::new("skopeo");
        cmd.args(["copy", "--quiet", "--dest-tls-verify=false", "--digestfile", digest_file.to_str().unwrap()]);
        if let Some((u, p)) = user {
            cmd.args(["--dest-creds", &format!("{u}:{p}")]);
        }
        cmd.arg(format!("oci:{}:{tag}", layout.display()));
        cmd.arg(format!("docker://{}/{repository}:{tag}", self.addr));
        let out = cmd.output().expect("skopeo runs");
        assert!(out.status.success(), "skopeo copy: {}", String::from_utf8_lossy(&out.stderr));
        std::fs::read_to_string(digest_file).unwrap().trim().to_string()
    }

    /// The requests the registry logged.
    pub fn requests(&self) -> Vec<String> {
        read(&self.log).lines().filter(|l| l.contains("\"GET ") || l.contains("\"HEAD ")).map(str::to_string).collect()
    }

    /// The token server's answers, one line each: `granted: user "NAME" scope "…"` for a token, `refused: …` for a
    /// refusal.
    pub fn token_log(&self) -> Vec<String> {
        let Some(server) = &self.token_server else { return Vec::new() };
        read(&server.log)
            .lines()
            .filter(|l| l.contains("granted:") || l.contains("refused:"))
            .map(str::to_string)
            .collect()
    }

    /// The stored blob of `digest` (`sha256:…`), as the filesystem driver lays it out.
    pub fn blob(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap();
        self.data.join("docker/registry/v2/blobs/sha256").join(&hex[..2]).join(hex).join("data")
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const TOKEN_SERVICE: &str = "wmrender-test-registry";
const TOKEN_ISSUER: &str = "wmrender-test-token-server";

/// The token server of a registry with token authentication, at a free port with TLS from the test CA, signing with
/// a key of its own whose certificate the registry trusts (`token-signing.pem` in the registry's folder). Stopped
/// when dropped.
struct TokenServer {
    realm: String,
    log: PathBuf,
    child: Child,
}

impl TokenServer {
    fn start(dir: &Path, ca: &Ca, name: &str, password: &str) -> TokenServer {
        let (key, cert) = (dir.join("token-signing.key"), dir.join("token-signing.pem"));
        super::self_signed_p256(&key, &cert, "/CN=wmrender test token signer", 1);
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let addr = format!("127.0.0.1:{port}");
        let log = dir.join("token-server.log");
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(super::cosign::test_server("token-server"))
            .args(["-addr", &addr, "-cert", ca.dir.join("reg.pem").to_str().unwrap()])
            .args(["-key", ca.dir.join("reg.key").to_str().unwrap()])
            .args(["-signing-key", key.to_str().unwrap(), "-signing-cert", cert.to_str().unwrap()])
            .args(["-issuer", TOKEN_ISSUER, "-service", TOKEN_SERVICE, "-user", &format!("{name}:{password}")])
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("token-server runs");
        let mut server = TokenServer { realm: format!("https://{addr}/token"), log, child };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(&addr).is_err() {
            let ended = server.child.try_wait().unwrap();
            assert!(ended.is_none() && Instant::now() < deadline, "token-server did not listen: {}", read(&server.log));
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }
}

impl Drop for TokenServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// go-containerregistry's registry (tests/cosign/oci-registry, built with cosign): in memory, with the OCI 1.1
/// referrers API that Debian's docker-registry lacks, TLS from the test CA, no authentication. Like ECR, it answers a
/// pushed manifest without its `Location`. Stopped when dropped.
pub struct ReferrersRegistry {
    pub addr: String,
    pub log: PathBuf,
    child: Child,
}

impl ReferrersRegistry {
    pub fn start(dir: &Path, ca: &Ca) -> ReferrersRegistry {
        std::fs::create_dir_all(dir).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let addr = format!("127.0.0.1:{port}");
        let log = dir.join("log");
        let out = std::fs::File::create(&log).unwrap();
        let (cert, key) = (ca.dir.join("reg.pem"), ca.dir.join("reg.key"));
        let child = Command::new(super::cosign::test_server("oci-registry"))
            .args(["-addr", &addr, "-cert", cert.to_str().unwrap(), "-key", key.to_str().unwrap()])
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("oci-registry runs");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(&addr).is_err() {
            assert!(Instant::now() < deadline, "oci-registry did not listen on {addr}: {}", read(&log));
            std::thread::sleep(Duration::from_millis(50));
        }
        ReferrersRegistry { addr, log, child }
    }
}

impl Drop for ReferrersRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// TLS for a ureq client that trusts only the CAs of `pem`.
pub fn trusting(pem: &[u8]) -> ureq::tls::TlsConfig {
    let certs: Vec<_> = ureq::tls::parse_pem(pem)
        .filter_map(|item| match item {
            Ok(ureq::tls::PemItem::Certificate(c)) => Some(c),
            _ => None,
        })
        .collect();
    ureq::tls::TlsConfig::builder().root_certs(ureq::tls::RootCerts::new_with_certs(&certs)).build()
}

/// A request to a test registry over TLS trusting only the test CA, as `user` when given: (status, body). `DELETE`
/// too, which skopeo and cosign do not offer for a tag or a referrer.
pub fn request(ca: &Ca, method: &str, url: &str, accept: &str, user: Option<(&str, &str)>) -> (u16, Vec<u8>) {
    let agent = ureq::Agent::config_builder()
        .tls_config(trusting(&std::fs::read(ca.pem()).unwrap()))
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .new_agent();
    let mut request = ureq::http::Request::builder().method(method).uri(url).header("Accept", accept);
    if let Some((name, password)) = user {
        use base64::Engine;
        let pair = base64::engine::general_purpose::STANDARD.encode(format!("{name}:{password}"));
        request = request.header("Authorization", format!("Basic {pair}"));
    }
    let request = request.body(()).unwrap();
    let mut response = agent.run(request).expect("the registry answers");
    let status = response.status().as_u16();
    (status, response.body_mut().read_to_vec().unwrap_or_default())
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// A TCP relay on 127.0.0.1 that counts the bytes both ways (TLS records, headers and bodies).
pub struct Relay {
    pub addr: String,
    bytes: Arc<AtomicU64>,
    /// Connections accepted so far.
    accepted: Arc<AtomicU64>,
    /// The client side of each open connection, by its number, to end them all at once.
    open: Arc<Mutex<BTreeMap<u64, TcpStream>>>,
    /// How many more bytes the server may send to clients before their connections are cut (`None`: no bound).
    budget: Arc<Mutex<Option<u64>>>,
}

impl Relay {
    pub fn start(to: &str) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let relay = Relay {
            addr,
            bytes: Arc::default(),
            accepted: Arc::default(),
            open: Arc::default(),
            budget: Arc::default(),
        };
        let (to, counter, accepted, open, budget) =
            (to.to_string(), relay.bytes.clone(), relay.accepted.clone(), relay.open.clone(), relay.budget.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(&to) else { continue };
                let number = accepted.fetch_add(1, Ordering::SeqCst);
                open.lock().unwrap().insert(number, client.try_clone().unwrap());
                for (i, (mut from, mut into)) in
                    [(client.try_clone().unwrap(), server.try_clone().unwrap()), (server, client)]
                        .into_iter()
                        .enumerate()
                {
                    let (counter, open, budget) = (counter.clone(), open.clone(), budget.clone());
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 16384];
                        while let Ok(read) = from.read(&mut buf) {
                            // The server's bytes to the client, within the budget: past it, the connection is cut
                            // in the middle of whatever it carries.
                            let mut n = read;
                            if i == 1
                                && let Some(left) = budget.lock().unwrap().as_mut()
                            {
                                n = n.min(*left as usize);
                                *left -= n as u64;
                            }
                            if n == 0 || into.write_all(&buf[..n]).is_err() {
                                break;
                            }
                            counter.fetch_add(n as u64, Ordering::SeqCst);
                            if n < read {
                                break;
                            }
                        }
                        if i == 1 {
                            let _ = from.shutdown(std::net::Shutdown::Both);
                        }
                        let _ = into.shutdown(std::net::Shutdown::Write);
                        // The client's side ended: the connection is not open any more.
                        if i == 0 {
                            open.lock().unwrap().remove(&number);
                        }
                    });
                }
            }
        });
        relay
    }

    /// The bytes relayed since the last call.
    pub fn take(&self) -> u64 {
        self.bytes.swap(0, Ordering::SeqCst)
    }

    /// From now on, cut every connection once the server has sent `bytes` more to the clients, as a link that
    /// drops in the middle of a download (`None`: no bound).
    pub fn cut_after(&self, bytes: Option<u64>) {
        *self.budget.lock().unwrap() = bytes;
    }

    /// The connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Ends every open connection, as the minutes between a node's pulls end its idle ones: the next request
    /// connects again.
    pub fn cut(&self) {
        for (_, stream) in std::mem::take(&mut *self.open.lock().unwrap()) {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// Inputs `text` with the bundle's registry (`bundles.example.com/fleet`) mirrored to `mirror` by tag (signatures
/// are found by tag) and `keys` (PEM files) as the keys nodes trust on a bundle they pull.
pub fn with_pull(text: &str, mirror: &str, keys: &[&Path]) -> String {
    let mut out = text.trim_end().to_string();
    out.push_str(&format!(
        "\n  mirrors:\n    imageTagMirrors:\n    - source: bundles.example.com/fleet\n      mirrors: [{mirror}/fleet]\n  bundleSigning:\n    publicKeys:\n"
    ));
    for key in keys {
        out.push_str("    - |\n");
        for line in std::fs::read_to_string(key).unwrap().lines() {
            out.push_str(&format!("      {line}\n"));
        }
    }
    out
}
