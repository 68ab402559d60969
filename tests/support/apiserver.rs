//! A real Kubernetes control plane for the cluster tests, in the spirit of controller-runtime's envtest: etcd and
//! kube-apiserver built from source at pinned releases (tests/apiserver: `k8s.io/kubernetes` and
//! `go.etcd.io/etcd/server`), found through `KUBEBUILDER_ASSETS` (envtest's convention; default
//! `target/kube-assets`), started on 127.0.0.1 with their own certificates for one test and stopped when it ends.
//!
//! The API server runs as a cluster's does where it matters to wmrender: `--authorization-mode=Node,RBAC`, the
//! NodeRestriction admission plugin with the default ones, service-account token signing (TokenRequest), client
//! certificates signed by the rig's CA as the way users and nodes authenticate, an audit log of every request
//! (what a test reads to see what a client sent, with its User-Agent), and the OpenShift and OLM CRDs wmrender reads
//! and writes (../shared/schemas/crds: openshift/api and operator-framework/api at pinned commits).
//!
//! kube-controller-manager runs beside it with the controllers a test asks for (tests/support/controller_manager.rs),
//! and kube-scheduler where a test places pods (tests/support/scheduler.rs). No kubelet or Machine API runs: the
//! tests play what they need of them, faithfully and only as far as the real ones go: tests/support/played.rs.

use serde_json::{Value, json};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Once;
use std::time::{Duration, Instant};

/// How long etcd and the API server may take to answer `/readyz` (they take 2–3 s on an idle 2-core machine).
const START_LIMIT: Duration = Duration::from_secs(90);

/// The user wmrender runs as in the tests, holding exactly the permissions docs/without-operator.md lists.
pub const WMRENDER_USER: &str = "wmrender-ops";

/// Where the control plane's binaries are: `KUBEBUILDER_ASSETS`, else `target/kube-assets`, built on first use by
/// tests/apiserver/build.sh (a no-op when they are current).
pub fn assets() -> PathBuf {
    static BUILD: Once = Once::new();
    let dir = match std::env::var_os("KUBEBUILDER_ASSETS") {
        Some(d) => PathBuf::from(d),
        None => super::root().join("target/kube-assets"),
    };
    BUILD.call_once(|| {
        let status = Command::new("bash")
            .arg(super::root().join("tests/apiserver/build.sh"))
            .env("KUBEBUILDER_ASSETS", &dir)
            .status()
            .expect("bash runs tests/apiserver/build.sh");
        assert!(
            status.success(),
            "tests/apiserver/build.sh could not build kube-apiserver and etcd (it needs Go and the Go module proxy; \
             `bash tests/setup.sh` installs what the tests need)"
        );
    });
    for program in ["etcd", "kube-apiserver"] {
        assert!(dir.join(program).is_file(), "{} has no {program}: run tests/apiserver/build.sh", dir.display());
    }
    dir
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("a free port on 127.0.0.1").local_addr().expect("its address").port()
}

/// Starts a process that dies with the thread that started it (a test that panics or is killed leaves no server
/// behind), its output in `log`.
pub fn spawn(program: &Path, args: &[String], log: &Path) -> Child {
    let out = std::fs::File::create(log).expect("log file");
    let err = out.try_clone().expect("log file");
    let mut cmd = Command::new(program);
    cmd.args(args).stdin(Stdio::null()).stdout(out).stderr(err);
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    cmd.spawn().unwrap_or_else(|e| panic!("starting {}: {e}", program.display()))
}

/// A user's credentials: a client certificate of the rig's CA (CN = user, O = each group), as `kubectl` and
/// kubelet authenticate to a real cluster.
#[derive(Clone, Debug)]
pub struct Credentials {
    pub cert: PathBuf,
    pub key: PathBuf,
}

pub struct ControlPlane {
    pub dir: tempfile::TempDir,
    pub url: String,
    pub port: u16,
    etcd: Child,
    /// Behind a lock so that a test sharing the rig among threads can stop and start it.
    apiserver: std::sync::Mutex<Child>,
    api_args: Vec<String>,
    admin: Kube,
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        let apiserver = self.apiserver.get_mut().unwrap_or_else(|e| e.into_inner());
        for child in [apiserver, &mut self.etcd] {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl ControlPlane {
    /// etcd and kube-apiserver for one test, with the OpenShift and OLM CRDs established and the namespaces an
    /// OpenShift cluster has.
    pub fn start() -> ControlPlane {
        let assets = assets();
        let dir = tempfile::Builder::new().prefix("apiserver-").tempdir().expect("tempdir");
        let d = dir.path().to_path_buf();
        let p = |name: &str| d.join(name).to_string_lossy().into_owned();
        // One CA: it signs the API server's serving certificate, every client certificate (users, and the nodes'
        // certificates that kube-controller-manager's CSR signer issues) and is the CA kubelets and wmrender trust.
        let ca = super::self_signed(&d.join("ca.key"), "/CN=wmrender-test-rig-ca", 2);
        std::fs::write(d.join("ca.crt"), ca).expect("ca.crt");
        sign(&d, "serving", "/CN=kube-apiserver", "serverAuth", "IP:127.0.0.1,DNS:localhost,IP:10.96.0.1");
        super::openssl(&["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", &p("sa.key")]);
        super::openssl(&["pkey", "-in", &p("sa.key"), "-pubout", "-out", &p("sa.pub")]);
        std::fs::write(d.join("audit-policy.yaml"), AUDIT_POLICY).expect("audit policy");

        let mut last_log = String::new();
        for _ in 0..3 {
            let (etcd_port, peer_port, port) = (free_port(), free_port(), free_port());
            let etcd_args: Vec<String> = vec![
                format!("--data-dir={}", p("etcd")),
                format!("--listen-client-urls=http://127.0.0.1:{etcd_port}"),
                format!("--advertise-client-urls=http://127.0.0.1:{etcd_port}"),
                format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"),
                format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"),
                format!("--initial-cluster=default=http://127.0.0.1:{peer_port}"),
                "--unsafe-no-fsync".into(),
                "--log-level=warn".into(),
            ];
            let mut etcd = spawn(&assets.join("etcd"), &etcd_args, &d.join("etcd.log"));
            let api_args: Vec<String> = vec![
                format!("--etcd-servers=http://127.0.0.1:{etcd_port}"),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={port}"),
                "--advertise-address=127.0.0.1".into(),
                "--endpoint-reconciler-type=none".into(),
                format!("--tls-cert-file={}", p("serving.crt")),
                format!("--tls-private-key-file={}", p("serving.key")),
                format!("--client-ca-file={}", p("ca.crt")),
                "--authorization-mode=Node,RBAC".into(),
                "--enable-admission-plugins=NodeRestriction".into(),
                "--service-account-issuer=https://kubernetes.default.svc".into(),
                format!("--service-account-key-file={}", p("sa.pub")),
                format!("--service-account-signing-key-file={}", p("sa.key")),
                "--service-cluster-ip-range=10.96.0.0/24".into(),
                format!("--audit-log-path={}", p("audit.log")),
                format!("--audit-policy-file={}", p("audit-policy.yaml")),
                "--audit-log-mode=blocking".into(),
                format!("--cert-dir={}", p("certs")),
            ];
            let mut apiserver = spawn(&assets.join("kube-apiserver"), &api_args, &d.join("apiserver.log"));
            let url = format!("https://127.0.0.1:{port}");
            let admin_creds = issue(&d, "admin", &["system:masters"]);
            let admin_kubeconfig = d.join("admin.kubeconfig");
            std::fs::write(&admin_kubeconfig, kubeconfig_text(&url, &d.join("ca.crt"), &admin_creds))
                .expect("kubeconfig");
            let admin = Kube::new(&admin_kubeconfig);
            let deadline = Instant::now() + START_LIMIT;
            let mut ready = false;
            while Instant::now() < deadline {
                if apiserver.try_wait().ok().flatten().is_some() || etcd.try_wait().ok().flatten().is_some() {
                    break;
                }
                if admin.raw_get("/readyz").is_some_and(|(code, body)| code == 200 && body.trim() == "ok") {
                    ready = true;
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            if ready {
                let apiserver = std::sync::Mutex::new(apiserver);
                let cp = ControlPlane { dir, url, port, etcd, apiserver, api_args, admin };
                cp.install_crds();
                cp.openshift_namespaces();
                return cp;
            }
            last_log = format!(
                "etcd:\n{}\nkube-apiserver:\n{}",
                std::fs::read_to_string(d.join("etcd.log")).unwrap_or_default(),
                tail(&std::fs::read_to_string(d.join("apiserver.log")).unwrap_or_default(), 40)
            );
            for child in [&mut apiserver, &mut etcd] {
                let _ = child.kill();
                let _ = child.wait();
            }
            let _ = std::fs::remove_dir_all(d.join("etcd"));
        }
        panic!("the control plane did not become ready within {START_LIMIT:?} (three tries):\n{last_log}");
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Stops kube-apiserver (etcd keeps the cluster): clients meet a refused connection, and every watch ends.
    pub fn stop_apiserver(&self) {
        let mut child = self.apiserver.lock().unwrap_or_else(|e| e.into_inner());
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Starts kube-apiserver again, on the same port over the same etcd, and returns once it is ready.
    pub fn start_apiserver(&self) {
        let mut child = self.apiserver.lock().unwrap_or_else(|e| e.into_inner());
        let log = self.path("apiserver-restarted.log");
        *child = spawn(&assets().join("kube-apiserver"), &self.api_args, &log);
        let deadline = Instant::now() + START_LIMIT;
        while Instant::now() < deadline {
            if self.admin.raw_get("/readyz").is_some_and(|(code, body)| code == 200 && body.trim() == "ok") {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "kube-apiserver did not come back within {START_LIMIT:?}:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
    }

    /// The CA every server and client certificate of the rig chains to (PEM).
    /// The kube-apiserver's process id (a benchmark reads its memory).
    pub fn apiserver_pid(&self) -> u32 {
        self.apiserver.lock().unwrap_or_else(|e| e.into_inner()).id()
    }

    pub fn ca_pem(&self) -> String {
        std::fs::read_to_string(self.path("ca.crt")).expect("ca.crt")
    }

    /// A cluster-admin client for the test's own reads and writes (seeding, checking, playing controllers).
    pub fn admin(&self) -> &Kube {
        &self.admin
    }

    /// Credentials for `user` in `groups`, issued by the rig's CA.
    pub fn credentials(&self, user: &str, groups: &[&str]) -> Credentials {
        issue(self.dir.path(), user, groups)
    }

    /// A kubeconfig for `user` in `groups` at `path`.
    pub fn write_kubeconfig(&self, path: &Path, user: &str, groups: &[&str]) {
        let creds = self.credentials(user, groups);
        std::fs::write(path, kubeconfig_text(&self.url, &self.path("ca.crt"), &creds)).expect("kubeconfig");
    }

    /// A client acting as `user` in `groups`.
    pub fn client(&self, user: &str, groups: &[&str]) -> Kube {
        let path = self.path(&format!("{}.kubeconfig", user.replace(':', "_")));
        self.write_kubeconfig(&path, user, groups);
        Kube::new(&path)
    }

    /// The kubeconfig wmrender runs with: user [`WMRENDER_USER`], bound to the roles named `role` that
    /// docs/without-operator.md lists (`wmrender-sync`, `wmrender-reboot`, `wmrender-import`), applied here as a
    /// user would apply them.
    pub fn wmrender_kubeconfig(&self, path: &Path, role: &str) {
        self.role_kubeconfig(path, WMRENDER_USER, role);
    }

    /// A kubeconfig at `path` for `user`, holding the documented roles named `role` and nothing else.
    pub fn role_kubeconfig(&self, path: &Path, user: &str, role: &str) {
        super::rbac::grant(self.admin(), role, user);
        self.write_kubeconfig(path, user, &[]);
    }

    /// Every request the API server completed, in order, from its audit log.
    pub fn audit(&self) -> Vec<Audit> {
        let text = std::fs::read_to_string(self.path("audit.log")).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["stage"] == "ResponseComplete")
            .map(|e| Audit {
                verb: e["verb"].as_str().unwrap_or("").into(),
                uri: e["requestURI"].as_str().unwrap_or("").into(),
                user: e["user"]["username"].as_str().unwrap_or("").into(),
                user_agent: e["userAgent"].as_str().unwrap_or("").into(),
                code: e["responseStatus"]["code"].as_u64().unwrap_or(0) as u16,
                at: e["stageTimestamp"].as_str().and_then(|t| t.parse().ok()),
            })
            .collect()
    }

    /// The requests `user` made, as `VERB uri code`.
    pub fn requests_by(&self, user: &str) -> Vec<Audit> {
        self.audit().into_iter().filter(|a| a.user == user).collect()
    }

    fn install_crds(&self) {
        let dir = super::root().join("../shared/schemas/crds");
        let mut files: Vec<PathBuf> =
            std::fs::read_dir(&dir).expect("../shared/schemas/crds").map(|e| e.expect("entry").path()).collect();
        files.sort();
        self.install_crd_files(&files);
    }

    /// Creates the CRDs of these YAML files and waits until the API server serves each (Established).
    pub fn install_crd_files(&self, files: &[PathBuf]) {
        let mut names = Vec::new();
        for file in files {
            let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let crd: Value = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            names.push(crd["metadata"]["name"].as_str().expect("CRD name").to_string());
            self.admin
                .create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", &crd)
                .unwrap_or_else(|e| panic!("installing {}: {e}", file.display()));
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        for name in names {
            loop {
                let crd = self.admin.get(&format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"));
                let established = crd.as_ref().is_some_and(|c| {
                    c["status"]["conditions"]
                        .as_array()
                        .is_some_and(|l| l.iter().any(|c| c["type"] == "Established" && c["status"] == "True"))
                });
                if established {
                    break;
                }
                assert!(Instant::now() < deadline, "CRD {name} was not established");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// The namespaces of an OpenShift cluster that wmrender reads from, each with the `default` ServiceAccount the
    /// service account controller would create (pods need it).
    fn openshift_namespaces(&self) {
        for ns in ["openshift-config", "openshift-machine-api", "openshift-machine-config-operator"] {
            self.namespace(ns);
        }
    }

    /// Creates namespace `name` (and its `default` ServiceAccount, as the service account controller does).
    pub fn namespace(&self, name: &str) {
        let _ = self.admin.create("/api/v1/namespaces", &json!({"metadata": {"name": name}}));
        let _ = self
            .admin
            .create(&format!("/api/v1/namespaces/{name}/serviceaccounts"), &json!({"metadata": {"name": "default"}}));
    }
}

/// The API path of an object's collection, from its apiVersion, kind and namespace (plural: the kind in lower case
/// with `s`, `y` → `ies`, as every kind the tests seed is named).
pub fn collection_path(object: &Value) -> String {
    let api_version = object["apiVersion"].as_str().expect("apiVersion");
    let kind = object["kind"].as_str().expect("kind").to_ascii_lowercase();
    let plural = match kind.strip_suffix('y') {
        Some(stem) => format!("{stem}ies"),
        None => format!("{kind}s"),
    };
    let group = if api_version.contains('/') { format!("/apis/{api_version}") } else { format!("/api/{api_version}") };
    match object["metadata"]["namespace"].as_str() {
        Some(ns) => format!("{group}/namespaces/{ns}/{plural}"),
        None => format!("{group}/{plural}"),
    }
}

pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Every request at Metadata level: who, what, with which User-Agent, and the answer.
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
";

/// One completed request of the audit log.
#[derive(Clone, Debug)]
pub struct Audit {
    pub verb: String,
    pub uri: String,
    pub user: String,
    pub user_agent: String,
    pub code: u16,
    /// When the API server answered (`stageTimestamp`).
    pub at: Option<k8s_openapi::jiff::Timestamp>,
}

impl std::fmt::Display for Audit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {}", self.verb, self.uri, self.code)
    }
}

/// Signs a certificate `name.crt` (key `name.key`) with the rig's CA.
fn sign(dir: &Path, name: &str, subject: &str, usage: &str, san: &str) {
    let p = |n: &str| dir.join(n).to_string_lossy().into_owned();
    let csr = p(&format!("{name}.csr"));
    std::fs::write(&csr, super::request(&dir.join(format!("{name}.key")), subject, "")).expect("csr");
    let mut ext = format!("extendedKeyUsage={usage}\n");
    if !san.is_empty() {
        ext.push_str(&format!("subjectAltName={san}\n"));
    }
    let ext_file = p(&format!("{name}.ext"));
    std::fs::write(&ext_file, ext).expect("extensions");
    let ca = (p("ca.crt"), p("ca.key"));
    let cert = super::openssl(&[
        "x509",
        "-req",
        "-in",
        &csr,
        "-CA",
        &ca.0,
        "-CAkey",
        &ca.1,
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        &ext_file,
    ]);
    std::fs::write(p(&format!("{name}.crt")), cert).expect("certificate");
}

/// A client certificate for `user` in `groups`.
fn issue(dir: &Path, user: &str, groups: &[&str]) -> Credentials {
    let name = format!("user-{}", user.replace(':', "_"));
    let mut subject: String = groups.iter().map(|g| format!("/O={g}")).collect();
    subject.push_str(&format!("/CN={user}"));
    sign(dir, &name, &subject, "clientAuth", "");
    Credentials { cert: dir.join(format!("{name}.crt")), key: dir.join(format!("{name}.key")) }
}

/// A kubeconfig (YAML, as `kubectl config` writes it) for the API server at `url`, with the CA and the credentials
/// inline (`*-data`), so it outlives the files it was made from.
pub fn kubeconfig_text(url: &str, ca: &Path, creds: &Credentials) -> String {
    use base64::Engine;
    let data = |p: &Path| base64::engine::general_purpose::STANDARD.encode(std::fs::read(p).expect("PEM file"));
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: rig\n  cluster:\n    server: {url}\n    certificate-authority-data: {}\n\
         users:\n- name: user\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\n\
         contexts:\n- name: rig\n  context:\n    cluster: rig\n    user: user\ncurrent-context: rig\n",
        data(ca),
        data(&creds.cert),
        data(&creds.key)
    )
}

/// A blocking client for the tests' own calls, through kube-rs (no retries: a test sees each answer).
pub struct Kube {
    client: kube::Client,
    runtime: tokio::runtime::Runtime,
}

/// An API answer that was not a success: the HTTP code and the server's message.
#[derive(Debug)]
pub struct Refused {
    pub code: u16,
    pub message: String,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl Kube {
    pub fn new(kubeconfig: &Path) -> Kube {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        let client = runtime.block_on(async {
            let file = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
            let mut config =
                kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default()).await.unwrap();
            config.default_retry = false;
            config.read_timeout = Some(Duration::from_secs(30));
            kube::Client::try_from(config).expect("client")
        });
        Kube { client, runtime }
    }

    fn send(&self, method: http::Method, path: &str, body: Option<(&str, &Value)>) -> Result<Value, Refused> {
        let builder = http::Request::builder().method(method).uri(path);
        let request = match body {
            Some((ct, v)) => builder.header("Content-Type", ct).body(serde_json::to_vec(v).unwrap()),
            None => builder.body(Vec::new()),
        }
        .unwrap();
        self.runtime.block_on(self.client.request::<Value>(request)).map_err(|e| match e {
            kube::Error::Api(s) => Refused { code: s.code, message: s.message },
            other => Refused { code: 0, message: other.to_string() },
        })
    }

    /// GET of a non-resource path (`/readyz`): the code and the body, `None` when the server cannot be reached.
    fn raw_get(&self, path: &str) -> Option<(u16, String)> {
        let request = http::Request::get(path).body(Vec::new()).unwrap();
        let fut =
            async { tokio::time::timeout(Duration::from_secs(5), self.client.request_text(request)).await.ok()?.ok() };
        self.runtime.block_on(fut).map(|body| (200, body))
    }

    /// The object at `path`, `None` when it does not exist. Any other failure fails the test.
    pub fn get(&self, path: &str) -> Option<Value> {
        match self.send(http::Method::GET, path, None) {
            Ok(v) => Some(v),
            Err(r) if r.code == 404 => None,
            Err(r) => panic!("GET {path}: {r}"),
        }
    }

    pub fn try_get(&self, path: &str) -> Result<Value, Refused> {
        self.send(http::Method::GET, path, None)
    }

    /// The items of a list.
    pub fn list(&self, path: &str) -> Vec<Value> {
        self.get(path).and_then(|l| l["items"].as_array().cloned()).unwrap_or_default()
    }

    pub fn create(&self, path: &str, body: &Value) -> Result<Value, Refused> {
        self.send(http::Method::POST, path, Some(("application/json", body)))
    }

    pub fn put(&self, path: &str, body: &Value) -> Result<Value, Refused> {
        self.send(http::Method::PUT, path, Some(("application/json", body)))
    }

    pub fn merge_patch(&self, path: &str, patch: &Value) -> Result<Value, Refused> {
        self.send(http::Method::PATCH, path, Some(("application/merge-patch+json", patch)))
    }

    pub fn strategic_patch(&self, path: &str, patch: &Value) -> Result<Value, Refused> {
        self.send(http::Method::PATCH, path, Some(("application/strategic-merge-patch+json", patch)))
    }

    pub fn delete(&self, path: &str) -> Result<Value, Refused> {
        self.send(http::Method::DELETE, path, None)
    }

    pub fn delete_with(&self, path: &str, options: &Value) -> Result<Value, Refused> {
        self.send(http::Method::DELETE, path, Some(("application/json", options)))
    }

    /// Creates the object, or replaces it (resourceVersion taken from the stored one) when it exists.
    pub fn apply(&self, path: &str, name: &str, body: &Value) -> Value {
        match self.create(path, body) {
            Ok(v) => v,
            Err(r) if r.code == 409 => {
                let item = format!("{path}/{name}");
                let current = self.get(&item).expect("the object that exists");
                let mut body = body.clone();
                body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
                self.put(&item, &body).unwrap_or_else(|e| panic!("PUT {item}: {e}"))
            }
            Err(r) => panic!("POST {path}: {r}"),
        }
    }

    /// Creates an object as `oc get -o yaml` dumped it: the server's own metadata dropped, the status written
    /// through the status subresource afterwards (as the object's controller would). Returns its path.
    pub fn seed(&self, object: &Value) -> String {
        let mut object = object.clone();
        let status = object.as_object_mut().and_then(|o| o.remove("status"));
        if let Some(meta) = object["metadata"].as_object_mut() {
            for k in ["uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"] {
                meta.remove(k);
            }
        }
        let collection = collection_path(&object);
        let name = object["metadata"]["name"].as_str().expect("a name").to_string();
        self.apply(&collection, &name, &object);
        let path = format!("{collection}/{name}");
        if let Some(status) = status.filter(|s| !s.is_null()) {
            // Objects whose kind has no status subresource keep it from the create; a 404 here means that.
            let _ = self.merge_patch(&format!("{path}/status"), &json!({ "status": status }));
        }
        path
    }

    /// Writes `status` of the object at `path` through its status subresource (as its controller does).
    pub fn set_status(&self, path: &str, status: &Value) -> Value {
        self.merge_patch(&format!("{path}/status"), &json!({ "status": status }))
            .unwrap_or_else(|e| panic!("PATCH {path}/status: {e}"))
    }
}
