//! The real Windows programs read what wmrender renders. kubelet.exe, kube-proxy.exe and kube-log-runner.exe
//! v1.36.3 and containerd.exe v1.7.27 (WMCO's pins) and windows_exporter.exe v0.27.2 (the release the Go module proxy
//! serves; WMCO builds its fork), built from their Go modules (tests/payload/build.sh), run under Wine (the rig of
//! tests/support/wine.rs) on the node bundle of every shipped example and every fixture:
//!
//! - **Every flag** of every service that runs them passes the program's own parser: the service's command line,
//!   exactly as the SCM hands it to CreateProcess (its node variables substituted as the agent does), with
//!   `--version` added at the end, which each acts on right after parsing (print, exit 0) and before anything else
//!   runs; through kube-log-runner, whose flags come first, the version lands in its log file.
//! - **kubelet.conf**: kubelet loads it strictly (an unknown field, which kubelet only warns about and then ignores,
//!   fails here), validates it, and starts its TLS bootstrap with the bootstrap kubeconfig and kubelet CA that
//!   `sync --kubeconfig` delivers (fetched by wmrender's own code from a real kube-apiserver): its client CSR
//!   arrives at that API server as the bootstrap token's user, and wmrender's join would approve it (its checks,
//!   WMCO's, judge the real request, not a played one). Outside the SCM `--windows-service` would stop it
//!   (the flag itself passed above), and without a CRI server kubelet stops right after starting the bootstrap;
//!   Wine 8 breaks kubelet's gRPC over containerd's named pipe on some runs (docs/wine-rig.md quotes the error), so
//!   a loopback TCP endpoint that accepts and never answers is the one change to its command: kubelet waits there
//!   while the bootstrap goes on.
//! - **containerd_conf.toml**: containerd ignores keys it does not know, so every rendered key and value must be in
//!   what containerd made of the file (`config dump`); started with the service's command, containerd serves CRI on
//!   the pipe kubelet.conf names (asked by containerd's own `ctr`, whose dialer works under Wine).
//! - **hosts.toml**: containerd pulls as kubelet asks (CRI PullImage, by the rig's `cri-pull`, a client on
//!   containerd's own dialer) an image named by its source registry from the mirror the rendered `hosts.toml` names,
//!   a TLS registry whose CA is in the node's Root store; without that file it goes to the source.
//! - **containerd as the node's service**: the agent creates and starts the containerd service in Wine's SCM with the
//!   rendered command; the real containerd it runs reads the rendered configuration, writes its `--log-file` and
//!   serves CRI, but Wine's SCM never hears that it runs (error 1053: see the test), so the agent starts none of its
//!   dependents, and deconfigure leaves no containerd behind.
//! - **kubelet as the node's service**: the agent creates and starts the kubelet service with the rendered command;
//!   the real kube-log-runner runs the real kubelet, which tells Wine's SCM it runs, posts its bootstrap CSR (the
//!   join approves it) and goes on until Wine stops it (the test says where).
//! - **windows_exporter's web configuration**: started with the service's command (outside the SCM, which it would
//!   ask `IsWindowsService` as containerd does), windows_exporter reads the rendered web configuration and serves TLS
//!   on 9182 with the certificate and key at the paths it names, where sync delivers the service CA's pair. As the
//!   node's service, started by the agent in Wine's SCM, it serves TLS but never tells the SCM it runs (error 1053,
//!   as containerd), and the agent leaves the optional service out.
//! - **kube-proxy's configuration**, as the network step (`network-conf.ps1`) writes it with a node's values,
//!   loads strictly and validates: `kube-proxy --write-config-to` loads, validates and writes it, then exits.
//! - **Controls**: a misspelt kubelet field, a kubelet value out of range, unknown flags (kubelet's, kube-log-runner's,
//!   containerd's, windows_exporter's), a misspelt containerd key, a misspelt key of the exporter's web
//!   configuration, a pipe containerd does not serve, the real CSR with another usage or for another node, and an
//!   invalid kube-proxy mode are each refused by the same checks, so the checks can fail.
//!
//! Not run here: hybrid-overlay-node.exe, csi-proxy.exe and Azure's cloud-node-manager.exe are not built by
//! tests/payload/build.sh: the Go module proxy here refuses their modules (`github.com/kubernetes-csi/csi-proxy`,
//! `github.com/ovn-org/ovn-kubernetes/go-controller` and OpenShift's fork, `sigs.k8s.io/cloud-provider-azure`: "403
//! Forbidden: This module version is not available"). Their services are listed in [`NOT_BUILT`], and a service
//! running any other program fails this test until it is decided.
//!
//! Needs Wine and the Windows target (`bash tests/setup.sh`), Go for the programs and the API server.
#![cfg(feature = "cluster")]

mod support;

use serde_json::Value;
use std::time::{Duration, Instant};
use support::apiserver::ControlPlane;
use support::wine::{Wine, rig};
use support::wine_bundle::{
    Bundle, Delivery, approve_csrs, example_bundle, network_step_output, step_answers, write_whole,
};
use wmrender::cluster::credentials::{self, NodeCredentials};
use wmrender::cluster::{Cluster, csr};
use wmrender::secret::Secret;
use wmrender_contract::{ApplyStatus, FileKind, NodePath, NodeVariable, ServicesFile, paths};

/// What each built program prints for `--version`.
fn version_said(program: &str) -> &'static str {
    match program {
        "containerd.exe" => "containerd github.com/containerd/containerd v1.7.27",
        "windows_exporter.exe" => "windows_exporter, version 0.27.2",
        _ => "Kubernetes v1.36.3",
    }
}
/// containerd's own client, the rig's way to ask containerd what it serves (it is no part of the payload).
const CTR: &str = r"C:\wine-fakes\ctr.exe";
/// Programs this test runs for real, and where the payload puts them.
const BUILT: [(&str, &str); 5] = [
    ("kubelet.exe", r"C:\k\kubelet.exe"),
    ("kube-proxy.exe", r"C:\k\kube-proxy.exe"),
    ("kube-log-runner.exe", r"C:\k\kube-log-runner.exe"),
    ("containerd.exe", r"C:\k\containerd\containerd.exe"),
    ("windows_exporter.exe", r"C:\k\windows_exporter.exe"),
];
/// Services whose program is not built here (see the header).
const NOT_BUILT: [&str; 3] = ["hybrid-overlay-node", "csi-proxy", "cloud-node-manager"];
/// The node's values, as the agent would compute them and the network step would find them.
const NODE_NAME: &str = "win-real-programs";
const NODE_IP: &str = "10.0.128.7";
const NODE_SUBNET: &str = "10.132.1.0/24";
const SOURCE_VIP: &str = "10.132.1.2";

/// A real API server as OpenShift's holds the nodes' credentials, and those credentials as `sync --kubeconfig`
/// pushes them, fetched by its own code.
fn cluster() -> (ControlPlane, NodeCredentials) {
    let cp = ControlPlane::start();
    support::openshift::infrastructure(&cp, "AWS", &cp.url);
    support::openshift::controller_config(&cp, &support::certificate("kubelet-ca"), &[]);
    support::openshift::proxy(&cp, None);
    support::openshift::pull_secret(&cp, r#"{"auths":{}}"#);
    support::played::bootstrap_token(&cp);
    let admin_kubeconfig = cp.path("admin.kubeconfig");
    let credentials = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let cluster = Cluster::connect(&admin_kubeconfig).await.expect("the API server");
        credentials::fetch(&cluster, false).await.expect("the node credentials")
    });
    (cp, credentials)
}

/// A fresh `C:\k` and `C:\var` holding the node bundle, the credentials sync pushes, the built programs and the
/// folders node.json lists (the agent creates them before any service starts).
fn install(wine: &Wine, bundle: &Bundle, credentials: &NodeCredentials) -> ServicesFile {
    for dir in [r"C:\k", r"C:\var"] {
        let _ = std::fs::remove_dir_all(wine.c(dir));
    }
    for (path, bytes) in &bundle.files {
        write_whole(&wine.node(path), bytes);
    }
    for (program, at) in BUILT {
        write_whole(&wine.c(at), &built(program));
    }
    write_whole(&wine.c(CTR), &built("ctr.exe"));
    for (path, secret) in &credentials.files {
        write_whole(&wine.c(path), secret.bytes());
    }
    for dir in bundle.settings().directories {
        std::fs::create_dir_all(wine.node(&dir)).unwrap();
    }
    bundle.services()
}

/// Values a test adds to the prefix's registry (REG_DWORD), deleted again when dropped: the prefix is shared by this
/// file's tests.
struct RegistryValues<'a> {
    wine: &'a Wine,
    key: &'a str,
    names: Vec<&'a str>,
}

impl<'a> RegistryValues<'a> {
    fn add(wine: &'a Wine, key: &'a str, values: &[(&'a str, u32)]) -> RegistryValues<'a> {
        let mut added = RegistryValues { wine, key, names: Vec::new() };
        for (name, value) in values {
            let v = value.to_string();
            let r =
                wine.wine(&["reg", "add", key, "/v", name, "/t", "REG_DWORD", "/d", &v, "/f"], Duration::from_secs(60));
            assert_eq!(r.code, 0, "reg add {key} {name}\n{}", r.text());
            added.names.push(name);
        }
        added
    }
}

impl Drop for RegistryValues<'_> {
    fn drop(&mut self) {
        for name in &self.names {
            let _ = self.wine.wine(&["reg", "delete", self.key, "/v", name, "/f"], Duration::from_secs(60));
        }
    }
}

/// Writes a stop file for the probe's `exec` when dropped, so a program the probe runs until that file appears ends
/// however the test does (a failed assertion too): else the thread scope waits for the probe's whole bound.
struct StopFile<'a> {
    wine: &'a Wine,
    path: &'a str,
}

impl<'a> StopFile<'a> {
    fn new(wine: &'a Wine, path: &'a str) -> StopFile<'a> {
        let _ = std::fs::remove_file(wine.c(path));
        StopFile { wine, path }
    }
}

impl Drop for StopFile<'_> {
    fn drop(&mut self) {
        write_whole(&self.wine.c(self.path), b"");
    }
}

/// A program tests/payload/build.sh built for Windows.
fn built(program: &str) -> Vec<u8> {
    let path = support::root().join("target/payload-programs").join(program);
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!("{}: {e} (tests/payload/build.sh builds it; tests/setup.sh runs it)", path.display())
    })
}

/// The word after `flag` in a service's command.
fn flag_value<'a>(command: &'a str, flag: &str) -> &'a str {
    let words: Vec<&str> = command.split_whitespace().collect();
    words
        .iter()
        .position(|w| *w == flag)
        .and_then(|i| words.get(i + 1))
        .unwrap_or_else(|| panic!("{flag} in `{command}`"))
}

/// The Windows path of a named pipe endpoint (`npipe://./pipe/x` is `\\.\pipe\x`).
fn npipe_path(endpoint: &str) -> Option<String> {
    endpoint.strip_prefix("npipe://").map(|p| format!("\\\\{}", p.replace('/', "\\")))
}

/// The node variables, substituted by the agent's own code.
fn with_node_values(command: &str) -> String {
    let value = |v: NodeVariable| match v {
        NodeVariable::NodeIp => NODE_IP,
        NodeVariable::NodeName | NodeVariable::HostnameOverride => NODE_NAME,
    };
    let pairs: Vec<(&str, &str)> = NodeVariable::ALL.iter().map(|v| (v.placeholder(), value(*v))).collect();
    wmrender_node::node_vars::substitute(command, &pairs)
}

/// What a command line did under Wine, run by the rig's probe as the SCM would start it.
struct Ran {
    code: Option<i64>,
    ended: bool,
    stdout: String,
    /// stdout and stderr.
    output: String,
}

/// Wine's CreateProcess answers ERROR_INTERNAL_ERROR now and then on a busy machine; a program starting another
/// then says so (kube-log-runner: `starting command: fork/exec C:\k\kubelet.exe: Internal error.`). Such a run is
/// made once more: it says nothing about the rendered flags.
const WINE_START_FAILED: &str = ": Internal error.";

fn exec(wine: &Wine, seconds: u64, line: &str, until: Option<&str>) -> Ran {
    let mut args = vec!["exec".to_string(), seconds.to_string(), line.to_string()];
    args.extend(until.map(str::to_string));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = || {
        let v = wine.probe(&refs);
        Ran {
            code: v["code"].as_i64(),
            ended: v["ended"].as_bool().unwrap_or(false),
            stdout: v["stdout"].as_str().unwrap_or("").to_string(),
            output: format!("{}{}", v["stdout"].as_str().unwrap_or(""), v["stderr"].as_str().unwrap_or("")),
        }
    };
    let ran = run();
    let log_file = line.split_whitespace().find_map(|w| w.strip_prefix("-log-file=")).map(|p| wine.c(p));
    let logged = log_file.and_then(|l| std::fs::read_to_string(l).ok()).unwrap_or_default();
    if ran.code == Some(1) && (ran.output.contains(WINE_START_FAILED) || logged.contains(WINE_START_FAILED)) {
        eprintln!("Wine could not start a process ({line}); running it once more");
        return run();
    }
    ran
}

/// The program a command line runs (its first word), by file name.
fn program(command: &str) -> String {
    let first = command.split_whitespace().next().unwrap_or("");
    first.rsplit('\\').next().unwrap_or(first).to_ascii_lowercase()
}

/// Check 1: the whole command line parses, with `--version` added. Through kube-log-runner the child's output
/// goes to the file its `-log-file=` names.
fn flags_pass(wine: &Wine, command: &str) -> Result<(), String> {
    let line = format!("{} --version", with_node_values(command));
    let log = command
        .split_whitespace()
        .find_map(|w| w.strip_prefix("-log-file="))
        .filter(|_| program(command) == "kube-log-runner.exe")
        .map(|p| wine.c(p));
    if let Some(log) = &log {
        let _ = std::fs::remove_file(log);
    }
    // The program asked: kube-log-runner hands `--version` to the program it runs, the first other one named.
    let asked = command.split_whitespace().map(program).find(|p| p.ends_with(".exe") && p != "kube-log-runner.exe");
    let version = version_said(&asked.unwrap_or_default());
    let ran = exec(wine, 60, &line, None);
    let logged = log.as_ref().and_then(|l| std::fs::read_to_string(l).ok()).unwrap_or_default();
    if ran.code == Some(0) && (ran.output.contains(version) || logged.contains(version)) {
        Ok(())
    } else {
        Err(format!("`{line}` was refused (exit {:?}):\n{}{logged}", ran.code, ran.output))
    }
}

/// Check 2: kubelet loads kubelet.conf strictly, validates it and posts its bootstrap CSR to the API server.
fn kubelet_bootstraps(wine: &Wine, cp: &ControlPlane, command: &str) -> Result<Value, String> {
    let csrs = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
    for csr in cp.admin().list(csrs) {
        let _ = cp.admin().delete(&format!("{csrs}/{}", csr["metadata"]["name"].as_str().unwrap()));
    }
    let stop = r"C:\wine-fakes\stop-kubelet";
    let _ = std::fs::remove_file(wine.c(stop));
    // kubelet checks its CRI endpoint right after it starts the bootstrap in the background, and stops when
    // nothing answers there. No containerd runs here, so a TCP endpoint on loopback that accepts and never answers
    // stands in for the rendered named pipe; kubelet waits on it (up to its runtime request timeout) while the
    // bootstrap goes on. This is the only change to the rendered command (a flag overrides the file).
    let cri = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let line = format!(
        "{} --container-runtime-endpoint=tcp://{}",
        outside_the_scm(command, r"\kubelet.exe"),
        cri.local_addr().unwrap()
    );
    cri.set_nonblocking(true).unwrap();
    let over = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut held = Vec::new();
            while !over.load(std::sync::atomic::Ordering::SeqCst) {
                if let Ok((c, _)) = cri.accept() {
                    held.push(c);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        // The accepting thread ends however this one does (a failed probe panics below): else the scope waits on it
        // for ever.
        let _over = support::controller_rig::StopOnDrop(&over);
        let run = s.spawn(|| exec(wine, 90, &line, Some(stop)));
        let deadline = Instant::now() + Duration::from_secs(80);
        let posted = loop {
            let found = cp.admin().list(csrs).into_iter().find(|c| c["spec"]["username"] == csr::BOOTSTRAPPER);
            if found.is_some() || run.is_finished() || Instant::now() > deadline {
                break found;
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        write_whole(&wine.c(stop), b"");
        let ran = run.join().unwrap();
        over.store(true, std::sync::atomic::Ordering::SeqCst);
        let strict = ran.output.lines().find(|l| l.contains("strict decoding error")).map(str::to_string);
        // kubelet prints every flag's value first; what matters comes after.
        let said: Vec<&str> = ran.output.lines().filter(|l| !l.contains("] FLAG: --")).collect();
        match (posted, strict) {
            (_, Some(warning)) => Err(format!("kubelet did not read kubelet.conf strictly: {warning}")),
            (Some(csr), None) => approved_by_join(&csr, &node_name(command)).map(|()| csr),
            (None, None) => Err(format!(
                "kubelet posted no CSR (exit {:?}, ended by the test: {}):\n`{line}`\n{}",
                ran.code,
                ran.ended,
                said.join("\n")
            )),
        }
    })
}

/// The words of a service's command from its program on, `--windows-service`/`--run-service` left out (outside the
/// SCM both programs stop at connecting to it; the flags themselves pass check 1), node values substituted.
fn outside_the_scm(command: &str, exe: &str) -> String {
    let words: Vec<&str> = command.split_whitespace().collect();
    let start = words
        .iter()
        .position(|w| w.to_ascii_lowercase().ends_with(exe))
        .unwrap_or_else(|| panic!("{exe} in `{command}`"));
    let kept: Vec<&str> =
        words[start..].iter().copied().filter(|w| *w != "--windows-service" && *w != "--run-service").collect();
    with_node_values(&kept.join(" "))
}

/// Every key of `rendered` with its value in `understood` (containerd's `config dump`), by dotted path; what is not.
fn not_understood(rendered: &toml::Table, understood: &toml::Table, at: &str, out: &mut Vec<String>) {
    for (key, value) in rendered {
        let path = if at.is_empty() { key.clone() } else { format!("{at}.{key}") };
        match (value, understood.get(key)) {
            (toml::Value::Table(r), Some(toml::Value::Table(u))) => not_understood(r, u, &path, out),
            (_, None) => out.push(format!("{path} (containerd does not know it)")),
            (r, Some(u)) if r != u => out.push(format!("{path} = {r} (containerd read {u})")),
            _ => {}
        }
    }
}

/// Check 4: containerd reads its configuration as rendered, and serves CRI where kubelet looks for it. containerd
/// ignores a key it does not know; `config dump` prints what it made of the file, so every rendered key and value
/// must be there. Then the service's command starts it, and containerd's own client dials the pipe kubelet.conf
/// names (`containerRuntimeEndpoint`) and finds the CRI plugin loaded.
fn containerd_serves(wine: &Wine, command: &str, kubelet_endpoint: &str) -> Result<(), String> {
    let base = outside_the_scm(command, r"\containerd.exe");
    let config = flag_value(command, "--config");
    let rendered: toml::Table =
        std::fs::read_to_string(wine.c(config)).unwrap().parse().map_err(|e| format!("{config}: {e}"))?;
    let dump = exec(wine, 60, &format!("{base} config dump"), None);
    let understood: toml::Table = dump
        .stdout
        .parse()
        .map_err(|e| format!("`{base} config dump` (exit {:?}): {e}\n{}", dump.code, dump.output))?;
    let mut wrong = Vec::new();
    not_understood(&rendered, &understood, "", &mut wrong);
    if !wrong.is_empty() {
        return Err(format!("containerd does not read {config} as rendered:\n{}", wrong.join("\n")));
    }

    let pipe = npipe_path(kubelet_endpoint)
        .ok_or_else(|| format!("kubelet's runtime endpoint is not a named pipe: {kubelet_endpoint}"))?;
    let stop = r"C:\wine-fakes\stop-containerd";
    let _ = std::fs::remove_file(wine.c(stop));
    std::thread::scope(|s| {
        let run = s.spawn(|| exec(wine, 90, &base, Some(stop)));
        // containerd boots in well under a second (outside the SCM it logs to stderr, not to --log-file).
        let deadline = Instant::now() + Duration::from_secs(20);
        let (cri, asked) = loop {
            let (cri, answer) = cri_served(wine, &pipe);
            if cri || run.is_finished() || Instant::now() > deadline {
                break (cri, answer);
            }
            std::thread::sleep(Duration::from_millis(300));
        };
        write_whole(&wine.c(stop), b"");
        let ran = run.join().unwrap();
        if cri {
            Ok(())
        } else {
            Err(format!("containerd serves no CRI at {pipe} (exit {:?}):\n{}\nctr: {asked}", ran.code, ran.output))
        }
    })
}

/// wmrender's join approves the real kubelet's bootstrap CSR: its decision ([`csr::judge`], WMCO's checks) for the node
/// `name` is "approve, client".
fn approved_by_join(csr: &Value, name: &str) -> Result<(), String> {
    use base64::Engine;
    let spec = &csr["spec"];
    let request =
        base64::engine::general_purpose::STANDARD.decode(spec["request"].as_str().unwrap_or("")).unwrap_or_default();
    let strings = |v: &Value| -> Vec<String> {
        v.as_array().into_iter().flatten().filter_map(|s| s.as_str().map(str::to_string)).collect()
    };
    let (groups, usages) = (strings(&spec["groups"]), strings(&spec["usages"]));
    let claimed = csr::claimed(&request, spec["username"].as_str().unwrap_or(""));
    if claimed != [name] {
        return Err(format!("kubelet's CSR names {claimed:?}, not the node {name}"));
    }
    let spec = csr::Spec {
        signer: spec["signerName"].as_str().unwrap_or(""),
        username: spec["username"].as_str().unwrap_or(""),
        groups: groups.iter().map(String::as_str).collect(),
        usages: usages.iter().map(String::as_str).collect(),
        request: &request,
    };
    // Addresses count for serving certificates only; this is a client one.
    let expected = [csr::Expected { name: name.to_string(), addresses: vec![] }];
    match csr::judge(&spec, &expected, &|_| false) {
        csr::Verdict::Approve { kind: csr::Kind::Client, .. } => Ok(()),
        other => Err(format!("wmrender's join would not approve kubelet's client CSR for {name}: {other:?}")),
    }
}

/// The name kubelet gives its node here: the `--hostname-override` the agent fills in, else the host's own name.
fn node_name(command: &str) -> String {
    if command.contains("--hostname-override=HOSTNAME_OVERRIDE") { NODE_NAME.to_string() } else { hostname() }
}

/// This machine's host name, lowercased as kubelet makes a node name of it.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default().trim().to_ascii_lowercase()
}

/// The configuration the network step writes: its template, with the values the step finds on a node.
fn kube_proxy_conf(network_conf: &str) -> String {
    let start =
        network_conf.find("$kubeProxy = @'\n").expect("network-conf.ps1 writes kube-proxy's configuration") + 16;
    let len = network_conf[start..].find("\n'@").expect("the here-string ends");
    let replaced = network_conf[start + len..]
        .lines()
        .find(|l| l.starts_with("$kubeProxy = $kubeProxy.Replace("))
        .expect("the values are put in");
    let mut text = network_conf[start..start + len].to_string();
    for (placeholder, value) in
        [("__NODE_NAME__", NODE_NAME), ("__NODE_SUBNET__", NODE_SUBNET), ("__SOURCE_VIP__", SOURCE_VIP)]
    {
        if text.contains(placeholder) {
            assert!(replaced.contains(&format!("'{placeholder}'")), "{placeholder} is never replaced: {replaced}");
            text = text.replace(placeholder, value);
        }
    }
    assert!(!text.contains("__"), "a placeholder this test does not know:\n{text}");
    text + "\n"
}

/// Check 3: kube-proxy loads its configuration strictly and validates it (the service's own flags, with
/// `--write-config-to`: load, validate, write, exit).
fn kube_proxy_accepts(wine: &Wine, command: &str, conf: &str) -> Result<(), String> {
    write_whole(&wine.c(r"C:\k\kube-proxy.conf"), conf.as_bytes());
    let written = r"C:\var\log\kube-proxy\written.yaml";
    let _ = std::fs::remove_file(wine.c(written));
    let line = format!("{} --write-config-to={written}", outside_the_scm(command, r"\kube-proxy.exe"));
    let ran = exec(wine, 60, &line, None);
    let lenient = ran.output.lines().find(|l| l.contains("lenient decoding")).map(str::to_string);
    match (ran.code, lenient) {
        (_, Some(warning)) => Err(format!("kube-proxy did not read its configuration strictly: {warning}")),
        (Some(0), None) if wine.c(written).is_file() => Ok(()),
        (code, None) => Err(format!("`{line}` was refused (exit {code:?}):\n{}\n{conf}", ran.output)),
    }
}

#[test]
fn the_real_kubelet_kube_proxy_kube_log_runner_and_containerd_accept_every_rendered_flag_and_configuration() {
    let wine = rig();
    let (cp, credentials) = cluster();

    let mut checked = 0;
    for inputs in support::valid_inputs() {
        let name = support::case_name(&inputs);
        let services = install(&wine, &Bundle::rendered(&inputs), &credentials);
        let mut failures = Vec::new();
        for service in &services.services {
            let runs = program(&service.command);
            if !BUILT.iter().any(|(p, _)| *p == runs) {
                assert!(
                    NOT_BUILT.contains(&service.name.as_str()),
                    "{name}: service {} runs {runs}, which this test neither builds nor lists as not built",
                    service.name
                );
                continue;
            }
            if let Err(e) = flags_pass(&wine, &service.command) {
                failures.push(format!("service {}: {e}", service.name));
            }
        }
        let kubelet = services.get("kubelet").expect("a kubelet service");
        if let Err(e) = kubelet_bootstraps(&wine, &cp, &kubelet.command) {
            failures.push(e);
        }
        let containerd = services.get("containerd").expect("a containerd service");
        if let Err(e) = containerd_serves(&wine, &containerd.command, &kubelet_cri_endpoint(&wine)) {
            failures.push(e);
        }
        let network = std::fs::read_to_string(wine.c(r"C:\k\wmrender\network-conf.ps1")).unwrap();
        let proxy = services.get("kube-proxy").expect("a kube-proxy service");
        if let Err(e) = kube_proxy_accepts(&wine, &proxy.command, &kube_proxy_conf(&network)) {
            failures.push(e);
        }
        assert!(failures.is_empty(), "{name}:\n{}", failures.join("\n\n"));
        checked += 1;
    }
    assert!(checked >= 8, "every example and fixture: {checked}");
}

/// The checks above refuse what the real programs refuse, or what they would only warn about.
#[test]
fn misspelt_fields_bad_values_unknown_flags_a_wrong_pipe_and_a_bad_mode_are_caught() {
    let wine = rig();
    let (cp, credentials) = cluster();
    let services = install(&wine, &example_bundle(), &credentials);
    let kubelet = services.get("kubelet").unwrap().command.clone();
    let proxy = services.get("kube-proxy").unwrap().command.clone();
    let conf_path = wine.c(r"C:\k\kubelet.conf");
    let conf: Value = serde_json::from_slice(&std::fs::read(&conf_path).unwrap()).unwrap();

    let unknown = flags_pass(&wine, &kubelet.replace("--v=2", "--v=2 --node-lables=a=b")).unwrap_err();
    assert!(unknown.contains("unknown flag: --node-lables"), "{unknown}");
    let runner = flags_pass(&wine, &kubelet.replace("-flush-interval=", "-flush-intervall=")).unwrap_err();
    assert!(runner.contains("flag provided but not defined: -flush-intervall"), "{runner}");

    for (field, value, expected) in [
        ("maxPodz", serde_json::json!(3), "unknown field \\\"maxPodz\\\""),
        ("maxPods", serde_json::json!(-3), "must not be a negative number"),
    ] {
        let mut bad = conf.clone();
        bad[field] = value;
        std::fs::write(&conf_path, serde_json::to_vec(&bad).unwrap()).unwrap();
        let e = kubelet_bootstraps(&wine, &cp, &kubelet).unwrap_err();
        assert!(e.contains(expected), "{field}: {e}");
    }

    // The join's decision on the real CSR: another usage, or a node it does not name, and it is not approved.
    std::fs::write(&conf_path, serde_json::to_vec(&conf).unwrap()).unwrap();
    let csr = kubelet_bootstraps(&wine, &cp, &kubelet).expect("the rendered kubelet.conf");
    let mut serving = csr.clone();
    serving["spec"]["usages"] = serde_json::json!(["digital signature", "key encipherment", "server auth"]);
    let e = approved_by_join(&serving, &node_name(&kubelet)).unwrap_err();
    assert!(e.contains("would not approve"), "{e}");
    let without_override = kubelet.replace("--hostname-override=HOSTNAME_OVERRIDE", "");
    let e = approved_by_join(&csr, &node_name(&without_override)).unwrap_err();
    assert!(e.contains("not the node"), "{e}");

    let containerd = services.get("containerd").unwrap().command.clone();
    let e = flags_pass(&wine, &containerd.replace("--log-level", "--log-levle")).unwrap_err();
    assert!(e.contains("flag provided but not defined: -log-levle"), "{e}");
    let toml_path = wine.c(r"C:\k\containerd\containerd_conf.toml");
    let toml = std::fs::read_to_string(&toml_path).unwrap();
    std::fs::write(&toml_path, toml.replace("max_concurrent_downloads", "max_concurent_downloads")).unwrap();
    let e = containerd_serves(&wine, &containerd, &kubelet_cri_endpoint(&wine)).unwrap_err();
    assert!(e.contains("max_concurent_downloads (containerd does not know it)"), "{e}");
    std::fs::write(&toml_path, &toml).unwrap();
    let e = containerd_serves(&wine, &containerd, "npipe://./pipe/containerd-elsewhere").unwrap_err();
    assert!(e.contains("serves no CRI"), "{e}");

    let exporter = services.get("windows_exporter").unwrap().command.clone();
    let e = flags_pass(&wine, &exporter.replace("--log.level", "--log.levle")).unwrap_err();
    assert!(e.contains("unknown long flag '--log.levle'"), "{e}");

    let network = std::fs::read_to_string(wine.c(r"C:\k\wmrender\network-conf.ps1")).unwrap();
    let good = kube_proxy_conf(&network);
    let e = kube_proxy_accepts(&wine, &proxy, &good.replace("mode: kernelspace", "mode: userspace")).unwrap_err();
    assert!(e.contains("must be kernelspace"), "{e}");
    let e = kube_proxy_accepts(&wine, &proxy, &good.replace("enableDSR:", "enableDsr:")).unwrap_err();
    assert!(e.contains("unknown field \\\"winkernel.enableDsr\\\""), "{e}");
}

/// containerd's own CRI client of the rig ([`CRI_PULL`]): PullImage over a runtime endpoint, as kubelet asks.
const CRI_PULL: &str = r"C:\wine-fakes\cri-pull.exe";

/// A Windows image with no layer (its config says windows/amd64, what containerd on Windows matches), as an OCI
/// layout at `layout`, tag `v1`.
fn windows_image(layout: &std::path::Path) {
    let l = layout.display().to_string();
    support::umoci(&["init", "--layout", &l]);
    support::umoci(&["new", "--image", &format!("{l}:v1")]);
    support::umoci(&["config", "--image", &format!("{l}:v1"), "--os", "windows", "--architecture", "amd64"]);
}

/// The config digest of the image tagged `tag` in an OCI layout: the image ID CRI reports for it.
fn config_digest(layout: &std::path::Path, tag: &str) -> String {
    let blob = |digest: &str| -> Value {
        let path = layout.join("blobs/sha256").join(digest.trim_start_matches("sha256:"));
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    };
    let index: Value = serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    let manifest = index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["annotations"]["org.opencontainers.image.ref.name"] == tag)
        .expect("the tag in the layout");
    blob(manifest["digest"].as_str().unwrap())["config"]["digest"].as_str().unwrap().to_string()
}

/// containerd pulls as kubelet asks (CRI PullImage) through the rendered `hosts.toml`: an image named by its source
/// registry (`localhost:1`, where nothing listens; with a port, so the folder is containerd's Windows name for it,
/// `host_port_`) comes from the mirror an ImageDigestMirrorSet names, a registry with TLS from a CA in the node's Root
/// store (where the agent puts the cluster's trusted CAs). Without that folder the same pull fails and the mirror is
/// not asked. (The image has no layer: unpacking one needs the Windows snapshotter's HCS, which Wine has not.)
#[test]
fn containerd_pulls_an_image_through_the_rendered_hosts_toml_from_the_mirror() {
    use support::registry::{Registry, Scratch};
    let wine = rig();
    let (_cp, credentials) = cluster();
    let scratch = Scratch::new();
    let registry = Registry::start(&scratch.path("registry"), &scratch.ca, None);
    let layout = scratch.path("layout");
    windows_image(&layout);
    let digest = registry.push(&layout, "v1", "mirror/team/app", None);

    // The mirror named `localhost` (its certificate's other name): Wine's chain policy matches no IP address.
    let mirror = registry.addr.replace("127.0.0.1", "localhost");
    let text = std::fs::read_to_string(support::root().join("fixtures/aws-defaults/wmrender.yaml")).unwrap();
    let inputs = scratch.path("wmrender.yaml");
    std::fs::write(
        &inputs,
        format!(
            "{text}  mirrors:\n    imageDigestMirrors:\n    - source: localhost:1/team\n      \
             mirrors: [{mirror}/mirror/team]\n      mirrorSourcePolicy: NeverContactSource\n"
        ),
    )
    .unwrap();
    let services = install(&wine, &Bundle::rendered(&inputs), &credentials);
    let hosts_dir = wine.c(r"C:\k\containerd\registries\localhost_1_");
    assert!(hosts_dir.join("hosts.toml").exists(), "the rendered hosts.toml, by containerd's name for the host");
    let ca = r"C:\wine-fakes\mirror-ca.der";
    let der = support::openssl(&["x509", "-outform", "der", "-in", scratch.ca.pem().to_str().unwrap()]);
    write_whole(&wine.c(ca), &der);
    wine.probe(&["add-root", ca]);
    let cri_pull = support::root().join("target/payload-programs/cri-pull.exe");
    write_whole(&wine.c(CRI_PULL), &std::fs::read(&cri_pull).expect("cri-pull.exe (tests/payload/build.sh)"));

    let endpoint = kubelet_cri_endpoint(&wine);
    let containerd = outside_the_scm(&services.get("containerd").unwrap().command, r"\containerd.exe");
    let image = format!("localhost:1/team/app@{digest}");
    let asked = || registry.requests().iter().filter(|r| r.contains("/v2/mirror/team/app/")).count();
    // containerd started afresh (its content store emptied), then one pull.
    let pull = || {
        let _ = std::fs::remove_dir_all(wine.c(r"C:\ProgramData\containerd"));
        let stop = r"C:\wine-fakes\stop-containerd";
        let _ = std::fs::remove_file(wine.c(stop));
        std::thread::scope(|s| {
            let run = s.spawn(|| exec(&wine, 150, &containerd, Some(stop)));
            let deadline = Instant::now() + Duration::from_secs(60);
            let pulled = loop {
                let pull = exec(&wine, 90, &format!("{CRI_PULL} {endpoint} {image}"), None);
                if !pull.output.contains("cri-pull: dialling") || run.is_finished() || Instant::now() > deadline {
                    break pull;
                }
                std::thread::sleep(Duration::from_millis(500));
            };
            write_whole(&wine.c(stop), b"");
            (pulled, run.join().unwrap())
        })
    };

    let (pulled, ran) = pull();
    assert_eq!(pulled.code, Some(0), "{}\ncontainerd:\n{}", pulled.output, ran.output);
    assert_eq!(pulled.stdout.trim(), config_digest(&layout, "v1"), "the image CRI reports is the one pushed");
    let requests = registry.requests();
    assert!(
        requests.iter().any(|r| r.contains(&format!("/v2/mirror/team/app/manifests/{digest}?ns=localhost%3A1"))),
        "the mirror was asked for the manifest on the source's behalf: {requests:#?}"
    );

    // Control: the folder under another name (the host without its port), and containerd does not find it: it goes to
    // the source, where nothing listens.
    let asked_before = asked();
    std::fs::rename(&hosts_dir, hosts_dir.with_file_name("localhost")).unwrap();
    let (refused, _) = pull();
    assert_ne!(refused.code, Some(0), "{}", refused.output);
    assert!(refused.output.contains("https://localhost:1/v2/team/app/manifests/"), "{}", refused.output);
    assert_eq!(asked(), asked_before, "without its hosts.toml the mirror is not asked");
}

/// What a containerd service wrote to the log file its `--log-file` names (as a service it writes there).
fn containerd_log(wine: &Wine, command: &str) -> String {
    std::fs::read_to_string(wine.c(flag_value(command, "--log-file"))).unwrap_or_default()
}

/// Whether containerd serves CRI on `pipe`, asked by its own client (`ctr plugins ls`); the answer too.
fn cri_served(wine: &Wine, pipe: &str) -> (bool, String) {
    let ls = exec(wine, 30, &format!("{CTR} --address {pipe} --connect-timeout 3s plugins ls"), None);
    let cri = ls.output.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.first() == Some(&"io.containerd.grpc.v1") && f.get(1) == Some(&"cri") && f.last() == Some(&"ok")
    });
    (cri, ls.output)
}

/// The CRI endpoint the installed kubelet.conf names (`containerRuntimeEndpoint`).
fn kubelet_cri_endpoint(wine: &Wine) -> String {
    let conf: Value = serde_json::from_slice(&std::fs::read(wine.c(r"C:\k\kubelet.conf")).unwrap()).unwrap();
    conf["containerRuntimeEndpoint"].as_str().expect("kubelet's runtime endpoint").to_string()
}

/// That endpoint's pipe, as a Windows path.
fn cri_pipe(wine: &Wine) -> String {
    let endpoint = kubelet_cri_endpoint(wine);
    npipe_path(&endpoint).unwrap_or_else(|| panic!("kubelet's runtime endpoint is not a named pipe: {endpoint}"))
}

/// The real containerd.exe as the node's containerd service, started by the agent through Wine's SCM with the rendered
/// command (`--run-service`, `--log-file`), as far as Wine lets it run: it reads the rendered configuration, writes the
/// log file its command names and serves CRI on the pipe kubelet.conf names. It never tells the SCM it runs: containerd
/// asks `svc.IsWindowsService()` (golang.org/x/sys) whether its parent is `services.exe` in session 0, and under Wine
/// every process is in session 1 and a service's parent pid reads 0, so it takes its console path (`debug.Run`), and
/// Wine's SCM gives the start up at its time-out (error 1053) and ends the process. CRI is asked for while the SCM
/// waits. The agent says so and starts none of its dependents; deconfigure deletes the service and leaves no
/// containerd serving. The agent's services therefore run the fake service in the other Wine tests (see
/// docs/wine-rig.md); when Wine answers as Windows does, this test fails and the rig can run containerd for real.
#[test]
fn the_real_containerd_started_by_wines_scm_serves_cri_but_never_reports_running() {
    let wine = rig();
    write_whole(&wine.c(CTR), &built("ctr.exe"));
    let mut d = Delivery::example(&wine);
    let exe = NodePath::known(r"C:\k\containerd\containerd.exe");
    d.payload.get_mut(&exe).expect("the payload holds containerd.exe").1 = built("containerd.exe");
    let containerd = d.bundle.services().get("containerd").expect("a containerd service").clone();
    d.stage(&wine);
    wine.set_powershell(&step_answers());
    approve_csrs(&wine);
    network_step_output(&wine);
    let pipe = cri_pipe(&wine);
    // While the SCM waits for containerd to say it runs, containerd's own client asks it for CRI.
    let started = Instant::now();
    let ((run, result), served) = std::thread::scope(|s| {
        let apply = s.spawn(|| wine.apply());
        let mut served = None;
        while served.is_none() && !apply.is_finished() {
            if cri_served(&wine, &pipe).0 {
                served = Some(started.elapsed());
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        (apply.join().unwrap(), served)
    });
    let log = containerd_log(&wine, &containerd.command);
    let errors = result.errors.join("\n");
    assert_eq!((run.code, result.status), (1, ApplyStatus::Failed), "{}\ncontainerd's log:\n{log}", run.text());
    assert!(
        errors.contains("cannot start service `containerd`") && errors.contains("(os error 1053)"),
        "the SCM's start timed out: {errors}\ncontainerd's log:\n{log}"
    );
    assert!(errors.contains("service `kubelet` not started: its dependency `containerd` is not running"), "{errors}");
    assert!(!result.started.contains(&"kubelet".to_string()), "{result:?}");
    assert!(
        !wine.service_events().iter().any(|e| e.service == "containerd"),
        "the containerd service ran containerd, not the fake"
    );
    // As far as it got: the rendered configuration read, the log file its command names written, CRI served.
    assert!(log.contains("containerd successfully booted"), "the service's log file:\n{log}");
    assert!(log.contains(r#"ConfigPath:C:\\k\\containerd\\registries"#), "the rendered registry folder:\n{log}");
    let served = served.unwrap_or_else(|| panic!("containerd never served CRI at {pipe} while the SCM waited\n{log}"));
    eprintln!("containerd served CRI {served:?} after the apply began, which ended after {:?}", started.elapsed());

    // Deconfigure deletes the service; no containerd is left behind.
    let (run, _) = wine.agent(&["deconfigure"], Duration::from_secs(300));
    assert_eq!(run.code, 0, "{}", run.text());
    assert_eq!(wine.services(&["containerd"])["containerd"]["exists"], false, "the service is deleted");
    let (cri, answer) = cri_served(&wine, &pipe);
    assert!(!cri, "no containerd is left serving {pipe}: {answer}");
}

/// The real kubelet.exe and kube-log-runner.exe as the node's kubelet service, created and started by the agent in
/// Wine's SCM with the rendered command on a node's first boot (the bootstrap kubeconfig and kubelet CA that `sync
/// --kubeconfig` delivers, from a real kube-apiserver; no kubeconfig yet). kubelet, a child of kube-log-runner, tells
/// the SCM it runs (`Service running`; unlike containerd it does not ask `IsWindowsService`), reads kubelet.conf and
/// posts its bootstrap CSR, which wmrender's join approves, and then stops where Wine stops it: on some runs its gRPC
/// over containerd's pipe (`failed to write client preface`), else, once CRI answered and the prefix was given the
/// version values Windows keeps, a performance counter Wine lacks (docs/wine-rig.md). containerd serves that pipe as
/// the real program outside the SCM (its service start times out under Wine: the test above), so the containerd
/// service is the fake from the exact point where Wine stops the real one.
#[test]
fn the_agent_runs_the_real_kubelet_as_the_kubelet_service_until_wine_stops_it() {
    let wine = rig();
    let (cp, credentials) = cluster();
    write_whole(&wine.c(CTR), &built("ctr.exe"));
    let mut d = Delivery::example(&wine);
    for (program, at) in BUILT.iter().filter(|(p, _)| ["kubelet.exe", "kube-log-runner.exe"].contains(p)) {
        d.payload.get_mut(&NodePath::known(at)).expect("the payload holds it").1 = built(program);
    }
    for (path, secret) in &credentials.files {
        d.payload.insert(NodePath::known(path), (FileKind::Credential, secret.bytes().to_vec()));
    }
    let kubelet = d.bundle.services().get("kubelet").expect("a kubelet service").clone();
    let containerd = d.bundle.services().get("containerd").expect("a containerd service").clone();
    d.stage(&wine);
    wine.set_powershell(&step_answers());
    network_step_output(&wine);

    // Rig-only: the version values Windows keeps and Wine's prefix lacks, which kubelet reads once CRI answers.
    let key = r"HKLM\SOFTWARE\Microsoft\Windows NT\CurrentVersion";
    let _version = RegistryValues::add(
        &wine,
        key,
        &[("CurrentMajorVersionNumber", 10), ("CurrentMinorVersionNumber", 0), ("UBR", 0)],
    );
    // The real containerd, from a copy beside the fake service's program, with the service's command.
    let real = r"C:\k\containerd\real-containerd.exe";
    write_whole(&wine.c(real), &built("containerd.exe"));
    let line =
        outside_the_scm(&containerd.command, r"\containerd.exe").replacen(r"C:\k\containerd\containerd.exe", real, 1);
    let pipe = cri_pipe(&wine);
    let stop = r"C:\wine-fakes\stop-containerd";
    let log_file = wine.c(r"C:\var\log\kubelet\kubelet.log");
    assert!(kubelet.command.contains(r"-log-file=C:\var\log\kubelet\kubelet.log"), "{}", kubelet.command);
    let log = || std::fs::read_to_string(&log_file).unwrap_or_default();
    let csrs = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
    let (applied, posted, said, containerd_said) = std::thread::scope(|s| {
        // Ended by the stop file when this closure ends (or panics); 170 s stays below the probe's own bound.
        let stop = StopFile::new(&wine, stop);
        let served = s.spawn(|| exec(&wine, 170, &line, Some(stop.path)));
        let deadline = Instant::now() + Duration::from_secs(30);
        while !cri_served(&wine, &pipe).0 {
            assert!(Instant::now() < deadline && !served.is_finished(), "containerd serves no CRI at {pipe}");
            std::thread::sleep(Duration::from_millis(300));
        }
        let (run, result) = wine.apply();
        // kubelet's bootstrap and its end, bounded.
        let deadline = Instant::now() + Duration::from_secs(60);
        let posted = loop {
            let found = cp.admin().list(csrs).into_iter().find(|c| c["spec"]["username"] == csr::BOOTSTRAPPER);
            if (found.is_some() && log().contains("\"command failed\"")) || Instant::now() > deadline {
                break found;
            }
            std::thread::sleep(Duration::from_millis(300));
        };
        let kubelet_log = log();
        drop(stop);
        let containerd = served.join().unwrap();
        ((run, result), posted, kubelet_log, containerd.output)
    });
    let (run, result) = applied;
    // First boot: kubelet started; hybrid-overlay-node waits for the kubeconfig an approved node gets.
    assert_eq!((run.code, result.status), (3, ApplyStatus::Pending), "{}", run.text());
    assert!(result.started.contains(&"kubelet".to_string()), "{result:?}");
    assert!(
        !wine.service_events().iter().any(|e| e.service == "kubelet"),
        "the kubelet service ran kubelet, not the fake"
    );
    // The first kubelet's lines, up to its end: the agent's own service starts it again (with nothing to answer for
    // CRI once the test stopped containerd), and those runs write to the same file.
    let mut said: Vec<&str> = said.lines().filter(|l| !l.contains("] FLAG: --")).collect();
    if let Some(end) = said.iter().position(|l| l.contains("\"command failed\"")) {
        said.truncate(end + 1);
    }
    let said = format!("{}\ncontainerd:\n{containerd_said}", said.join("\n"));
    assert!(said.contains("Running kubelet as a Windows service!") && said.contains("Service running"), "{said}");
    let csr = posted.unwrap_or_else(|| panic!("kubelet posted no bootstrap CSR:\n{said}"));
    approved_by_join(&csr, &result.node_name).unwrap_or_else(|e| panic!("{e}\n{said}"));
    // Where Wine stops it: its gRPC over containerd's pipe, which fails on some runs and not on others, else a
    // performance counter Wine lacks, after CRI answered.
    let stopped =
        said.lines().find(|l| l.contains("\"command failed\"")).unwrap_or_else(|| panic!("kubelet runs on:\n{said}"));
    let at_the_pipe =
        stopped.contains("validate CRI v1 runtime API") && stopped.contains("failed to write client preface");
    let at_a_counter =
        said.contains("Validated CRI v1 runtime API") && stopped.contains("unable to add process counter");
    eprintln!("kubelet stopped: {stopped}");
    assert!(at_the_pipe || at_a_counter, "kubelet stops where docs/wine-rig.md says Wine stops it:\n{said}");
}

/// The exporter's serving pair where sync delivers it (the service CA's; here the test CA's for `localhost`).
fn exporter_pair(scratch: &support::registry::Scratch) -> [(&'static str, Vec<u8>); 2] {
    let read = |file: &str| std::fs::read(scratch.ca.dir.join(file)).unwrap();
    [(paths::EXPORTER_TLS_CERT, read("reg.pem")), (paths::EXPORTER_TLS_KEY, read("reg.key"))]
}

/// What windows_exporter answers at `https://localhost:9182<path>` to a client that trusts only `ca` (PEM): the status
/// and body, or why there is none.
fn exporter_get(ca: &[u8], path: &str) -> Result<(u16, String), String> {
    let agent = ureq::Agent::config_builder()
        .tls_config(support::registry::trusting(ca))
        .timeout_global(Some(Duration::from_secs(20)))
        .http_status_as_error(false)
        .build()
        .new_agent();
    let mut response = agent.get(format!("https://localhost:9182{path}")).call().map_err(|e| e.to_string())?;
    let body = response.body_mut().read_to_string().map_err(|e| e.to_string())?;
    Ok((response.status().as_u16(), body))
}

/// windows_exporter started with the service's command (outside the SCM: as a service it asks `IsWindowsService`,
/// which Wine answers as it does for containerd), with the serving certificate and key where sync delivers them: once
/// `/health` answers over TLS, checked against `ca`, its `/metrics` answer; what it said.
fn exporter_serves(wine: &Wine, command: &str, ca: &[u8]) -> Result<((u16, String), String), String> {
    let stop = StopFile::new(wine, r"C:\wine-fakes\stop-exporter");
    let log = wine.c(flag_value(command, "--log.file"));
    let _ = std::fs::remove_file(&log);
    std::thread::scope(|s| {
        let run = s.spawn(|| exec(wine, 120, &with_node_values(command), Some(stop.path)));
        let deadline = Instant::now() + Duration::from_secs(60);
        let health = loop {
            let health = exporter_get(ca, "/health");
            if health.as_ref().is_ok_and(|(status, _)| *status == 200) || run.is_finished() || Instant::now() > deadline
            {
                break health;
            }
            std::thread::sleep(Duration::from_millis(500));
        };
        let metrics = health.as_ref().is_ok_and(|(status, _)| *status == 200).then(|| exporter_get(ca, "/metrics"));
        drop(stop);
        let ran = run.join().unwrap();
        let said = format!("{}{}", ran.output, std::fs::read_to_string(&log).unwrap_or_default());
        match (health, metrics) {
            (Ok(_), Some(Ok(metrics))) => Ok((metrics, said)),
            (Ok(_), Some(Err(e))) => Err(format!("windows_exporter's /metrics: {e}\n{said}")),
            (health, _) => {
                Err(format!("windows_exporter serves no TLS on 9182 ({health:?}), exit {:?}:\n{said}", ran.code))
            }
        }
    })
}

/// The real windows_exporter.exe reads the rendered web configuration and serves TLS on its port with the certificate
/// and key at the paths that configuration names (where sync delivers the service CA's pair); a client that trusts
/// only the CA that issued them reads `/health`. Its `/metrics` answers 500 where Wine stops it: its collectors find no
/// performance counter (docs/wine-rig.md). A misspelt key in the web configuration is refused by the same check.
#[test]
fn the_real_windows_exporter_serves_tls_with_the_rendered_web_config() {
    let wine = rig();
    // The exporter's serving pair as sync delivers it (the service CA's, here issued by the test CA for `localhost`).
    let scratch = support::registry::Scratch::new();
    let mut credentials = NodeCredentials::default();
    for (path, bytes) in exporter_pair(&scratch) {
        credentials.files.insert(path, Secret::new(bytes));
    }
    let services = install(&wine, &example_bundle(), &credentials);
    let exporter = services.get("windows_exporter").expect("a windows_exporter service").command.clone();
    let config_path = wine.c(flag_value(&exporter, "--web.config.file"));
    let config = std::fs::read_to_string(&config_path).unwrap();
    let ca = std::fs::read(scratch.ca.pem()).unwrap();

    let ((status, body), said) = exporter_serves(&wine, &exporter, &ca).unwrap_or_else(|e| panic!("{e}"));
    assert!(said.contains("TLS is enabled"), "{said}");
    // Where Wine stops it: no performance counter for its collectors.
    assert_eq!(status, 500, "{body}\n{said}");
    assert!(body.contains("An error has occurred while serving metrics"), "{body}");
    assert!(said.contains("counter not found"), "{said}");

    // Control: a key the exporter does not know is refused, and nothing is served.
    std::fs::write(&config_path, config.replace("key_file:", "key_fil:")).unwrap();
    let e = exporter_serves(&wine, &exporter, &ca).unwrap_err();
    assert!(e.contains("field key_fil not found") && e.contains("exit Some(1)"), "{e}");
    std::fs::write(&config_path, &config).unwrap();
}

/// The real windows_exporter.exe as the node's windows_exporter service, created and started by the agent in Wine's
/// SCM with the rendered command and the pair sync delivers: while the SCM waits it serves TLS (`/health`), but it asks
/// `IsWindowsService` as containerd does, so it never tells the SCM it runs and Wine's SCM gives the start up (error
/// 1053) and ends its process. The service is optional: the agent reports it left out and the node converges without
/// it; deconfigure deletes the service.
#[test]
fn the_real_windows_exporter_as_the_nodes_service_serves_tls_but_never_reports_running() {
    let wine = rig();
    let scratch = support::registry::Scratch::new();
    let mut d = Delivery::example(&wine);
    let exe = NodePath::known(r"C:\k\windows_exporter.exe");
    d.payload.get_mut(&exe).expect("the payload holds windows_exporter.exe").1 = built("windows_exporter.exe");
    for (path, bytes) in exporter_pair(&scratch) {
        d.payload.insert(NodePath::known(path), (FileKind::Credential, bytes));
    }
    d.stage(&wine);
    wine.set_powershell(&step_answers());
    approve_csrs(&wine);
    network_step_output(&wine);
    let ca = std::fs::read(scratch.ca.pem()).unwrap();
    let started = Instant::now();
    let ((run, result), served) = std::thread::scope(|s| {
        let apply = s.spawn(|| wine.apply());
        let mut served = None;
        while served.is_none() && !apply.is_finished() {
            if exporter_get(&ca, "/health").is_ok_and(|(status, _)| status == 200) {
                served = Some(started.elapsed());
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        (apply.join().unwrap(), served)
    });
    let degraded = result.degraded.join("\n");
    assert_eq!((run.code, result.status), (0, ApplyStatus::Converged), "{}", run.text());
    assert!(
        degraded.contains("windows_exporter") && degraded.contains("(os error 1053)"),
        "the SCM's start timed out, and the optional service is left out: {degraded}\n{}",
        run.text()
    );
    let served = served
        .unwrap_or_else(|| panic!("windows_exporter served no /health over TLS while the SCM waited\n{}", run.text()));
    eprintln!(
        "windows_exporter served /health {served:?} after the apply began, which ended after {:?}",
        started.elapsed()
    );
    assert_eq!(degraded.matches("cannot start service `windows_exporter`").count(), 1, "said once: {degraded}");
    assert!(exporter_get(&ca, "/health").is_err(), "Wine's SCM ended the exporter whose start it gave up on");
    assert!(
        !wine.service_events().iter().any(|e| e.service == "windows_exporter"),
        "the windows_exporter service ran windows_exporter, not the fake"
    );

    let (run, _) = wine.agent(&["deconfigure"], Duration::from_secs(300));
    assert_eq!(run.code, 0, "{}", run.text());
    assert_eq!(wine.services(&["windows_exporter"])["windows_exporter"]["exists"], false, "the service is deleted");
}
