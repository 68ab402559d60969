//! What wmrender renders for monitoring and log rotation, taken by its real consumers (tests/monitoring/setup.sh
//! fetches and builds them):
//!
//! - the ServiceMonitors and the PrometheusRule are accepted whole (strict field validation) by the real
//!   kube-apiserver with the prometheus-operator CRDs of its Go module loaded;
//! - kube-log-runner, built from its Go module, rotates kubelet's log at the size the node bundle renders and removes
//!   the rotated files older than the rendered age;
//! - the controller's metrics endpoint serves with the certificate the (played, tests/support/played.rs) service CA
//!   issues for its rendered Service, and refuses, as `openssl s_client` sees it, the TLS versions and ciphers the
//!   cluster's `APIServer` TLS profile excludes, following the profile as it changes.
//!
//! Prometheus and promtool reading the same objects: tests/monitoring_prometheus.rs.

mod support;

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::apiserver::ControlPlane;
use support::controller_rig::{Rig, free_port, inputs};

fn monitoring(name: &str) -> PathBuf {
    let path = support::root().join("target/monitoring").join(name);
    assert!(path.exists(), "{} is missing: run `bash tests/monitoring/setup.sh`", path.display());
    path
}

/// The rendered cluster objects, by file name.
fn objects(out: &Path) -> Vec<(String, Value)> {
    let mut objects = Vec::new();
    for entry in std::fs::read_dir(out.join("cluster")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name == "kustomization.yaml" || !name.ends_with(".yaml") {
            continue;
        }
        let value: Value = serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        objects.push((name, value));
    }
    objects.sort_by(|a, b| a.0.cmp(&b.0));
    objects
}

fn controller_fixture() -> PathBuf {
    support::root().join("fixtures/controller/wmrender.yaml")
}

#[test]
fn the_api_server_takes_every_monitoring_object_whole_with_the_prometheus_operator_crds() {
    let cp = ControlPlane::start();
    cp.install_crd_files(&[
        monitoring("crds/monitoring.coreos.com_servicemonitors.yaml"),
        monitoring("crds/monitoring.coreos.com_prometheusrules.yaml"),
    ]);
    let (_tmp, out) = support::render_to_temp(&controller_fixture());
    let objects = objects(&out);
    let namespace = objects.iter().find(|(_, o)| o["kind"] == "Namespace").expect("the wmrender namespace");
    assert_eq!(namespace.1["metadata"]["labels"]["openshift.io/cluster-monitoring"], "true");
    cp.admin().create("/api/v1/namespaces", &namespace.1).unwrap();

    let monitoring_kinds = ["ServiceMonitor", "PrometheusRule", "Service"];
    let prometheus_rbac = |o: &Value| o["metadata"]["name"] == "prometheus-k8s";
    let mut kinds = Vec::new();
    for (file, object) in objects
        .iter()
        .filter(|(_, o)| monitoring_kinds.contains(&o["kind"].as_str().unwrap_or("")) || prometheus_rbac(o))
    {
        // Strict: a field the CRD's schema does not have is refused, not dropped.
        let collection = support::apiserver::collection_path(object);
        let stored = cp
            .admin()
            .create(&format!("{collection}?fieldValidation=Strict"), object)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        for part in ["spec", "rules", "subjects", "roleRef"] {
            if object.get(part).is_some() && object["kind"] != "Service" {
                assert_eq!(stored[part], object[part], "{file}: the API server kept {part} as rendered");
            }
        }
        kinds.push(object["kind"].as_str().unwrap().to_string());
    }
    kinds.sort();
    assert_eq!(
        kinds,
        ["PrometheusRule", "Role", "RoleBinding", "Service", "Service", "ServiceMonitor", "ServiceMonitor"],
        "the exporter's and the controller's Service and ServiceMonitor, the rules, Prometheus' access"
    );

    // The check can fail: a field the schema does not have is refused.
    let (_, monitor) = objects.iter().find(|(_, o)| o["kind"] == "ServiceMonitor").unwrap();
    let mut wrong = monitor.clone();
    wrong["metadata"]["name"] = json!("misspelled");
    wrong["spec"]["endpoints"][0]["tlsConfig"]["serverNames"] = json!("x");
    let refused =
        cp.admin().create(&format!("{}?fieldValidation=Strict", support::apiserver::collection_path(&wrong)), &wrong);
    assert!(refused.is_err_and(|e| e.message.contains("serverNames")), "an unknown field is refused");
}

/// The flags the rendered `services.json` gives kube-log-runner for `service`.
fn log_runner_flags(out: &Path, service: &str) -> Vec<String> {
    let services: Value =
        serde_json::from_slice(&std::fs::read(out.join("node/C/k/wmrender/services.json")).unwrap()).unwrap();
    let command = services["services"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == service)
        .and_then(|s| s["command"].as_str())
        .unwrap_or_else(|| panic!("no {service} service"))
        .to_string();
    let mut words = command.split_whitespace();
    assert_eq!(words.next(), Some(r"C:\k\kube-log-runner.exe"), "{command}");
    words.take_while(|w| w.starts_with('-')).filter(|w| !w.starts_with("-log-file=")).map(str::to_string).collect()
}

/// The rotated copies kube-log-runner made of `kubelet.log` (`kubelet-YYYYMMDD-HHMMSS.log`), by name, and sizes.
fn rotated(dir: &Path) -> Vec<(String, u64)> {
    let mut files: Vec<(String, u64)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.metadata().unwrap().len()))
        .filter(|(n, _)| {
            let stamp = n.strip_prefix("kubelet-").and_then(|r| r.strip_suffix(".log")).unwrap_or("");
            stamp.len() == 15
                && stamp.as_bytes()[8] == b'-'
                && stamp.replace('-', "").bytes().all(|b| b.is_ascii_digit())
        })
        .collect();
    files.sort();
    files
}

#[test]
fn kube_log_runner_rotates_kubelets_log_at_the_rendered_size_and_removes_what_is_older_than_the_rendered_age() {
    let work = tempfile::tempdir().unwrap();
    let mut text = inputs("logs", &["10.0.0.21"]);
    text.push_str(
        "  kubernetesVersion: \"1.34\"\n  nodeLogs:\n    maxSize: 1Mi\n    maxAge: 1h\n    flushInterval: 1s\n",
    );
    std::fs::write(work.path().join("wmrender.yaml"), text).unwrap();
    let out = work.path().join("out");
    let o = support::wmrender(&[
        "render",
        "-f",
        work.path().join("wmrender.yaml").to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(support::code(&o), 0, "{}", support::stderr(&o));
    let flags = log_runner_flags(&out, "kubelet");
    assert_eq!(flags, ["-log-file-size=1Mi", "-log-file-age=1h", "-flush-interval=1s"]);
    assert_eq!(log_runner_flags(&out, "kube-proxy"), flags, "kube-proxy's log is rotated alike");

    let logs = work.path().join("log");
    std::fs::create_dir(&logs).unwrap();
    // A copy rotated long ago (removed at the next rotation: older than maxAge), and a file that only looks alike
    // (kept: its name is not kubelet-<timestamp>.log).
    std::fs::write(logs.join("kubelet-20200101-000000.log"), "old\n").unwrap();
    let touched = Command::new("touch")
        .args(["-d", "2020-01-01T00:00:00"])
        .arg(logs.join("kubelet-20200101-000000.log"))
        .status();
    assert!(touched.unwrap().success());
    std::fs::write(logs.join("kubelet-notes.log"), "mine\n").unwrap();

    // A child that writes 1 MiB a second, three times, then a last line: one rotation per MiB, each in a second
    // of its own (kube-log-runner names the copies by the second).
    let child = "for i in 1 2 3; do head -c 1048576 /dev/zero | tr '\\0' x; sleep 1.2; done; echo last line";
    let mut runner = Command::new(monitoring("bin/kube-log-runner"))
        .args(&flags)
        .arg(format!("-log-file={}", logs.join("kubelet.log").display()))
        .args(["sh", "-c", child])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = runner.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = runner.kill();
            panic!("kube-log-runner did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "kube-log-runner: {status}");

    let copies = rotated(&logs);
    assert_eq!(copies.len(), 3, "one copy per MiB written, the old one removed: {copies:?}");
    for (name, size) in &copies {
        // Rotated once a write reaches the size: at most one pipe read (64 KiB) past it.
        assert!((1 << 20..=(1 << 20) + 65536).contains(size), "{name}: {size} bytes");
        assert_ne!(name, "kubelet-20200101-000000.log");
    }
    assert_eq!(std::fs::read_to_string(logs.join("kubelet.log")).unwrap(), "last line\n");
    assert!(logs.join("kubelet-notes.log").exists(), "a file not named as a rotated copy is left alone");
}

/// A TLS handshake with the metrics endpoint by `openssl s_client` (these extra flags), verifying the certificate
/// against `ca` for the Service's name, and `GET /healthz` over it: (the handshake and verification succeeded and
/// the answer came, what s_client said).
fn s_client(port: u16, ca: &Path, extra: &[&str]) -> (bool, String) {
    let name = "wmrender-controller.wmrender.svc";
    let mut child = Command::new("openssl")
        .args(["s_client", "-connect", &format!("127.0.0.1:{port}"), "-servername", name, "-verify_hostname", name])
        .args(["-CAfile", ca.to_str().unwrap(), "-verify_return_error", "-ign_eof"])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        let _ = stdin.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = child.wait_with_output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    let ok = o.status.success() && said.contains("Verify return code: 0 (ok)") && said.contains("\r\n\r\nok\n");
    (ok, said)
}

/// Waits (bounded) until the endpoint accepts (`accepted`) or refuses a handshake with these flags.
fn until(port: u16, ca: &Path, extra: &[&str], accepted: bool, what: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let (ok, said) = s_client(port, ca, extra);
        if ok == accepted {
            return said;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: still {} with {extra:?}:\n{said}",
            if ok { "accepted" } else { "refused" }
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

const APISERVER: &str = "/apis/config.openshift.io/v1/apiservers/cluster";

fn set_profile(rig: &Rig, profile: Value) {
    let mut current = rig.cp.admin().get(APISERVER).expect("the APIServer cluster");
    current["spec"]["tlsSecurityProfile"] = profile;
    rig.cp.admin().put(APISERVER, &current).unwrap_or_else(|e| panic!("PUT {APISERVER}: {e}"));
}

#[test]
fn the_controllers_metrics_are_served_with_the_service_cas_certificate_under_the_clusters_tls_profile() {
    let rig = Rig::start(&[]);
    rig.render(&inputs("tls", &[]));
    std::fs::write(rig.path("nodes.yaml"), "nodes: []\n").unwrap();
    rig.cp.install_crd_files(&[monitoring("crds/0000_10_config-operator_01_apiservers-Default.crd.yaml")]);
    rig.cp
        .admin()
        .create(
            "/apis/config.openshift.io/v1/apiservers",
            &json!({"apiVersion": "config.openshift.io/v1", "kind": "APIServer", "metadata": {"name": "cluster"}, "spec": {}}),
        )
        .unwrap();

    // The rendered Service, and the certificate the service CA issues for it, as its Secret's volume mounts it.
    let service_ca = support::played::ServiceCa::start(&rig.cp);
    let ca = rig.path("service-ca.crt");
    std::fs::write(&ca, &service_ca.ca_pem).unwrap();
    let (_tmp, out) = support::render_to_temp(&controller_fixture());
    let service = objects(&out)
        .into_iter()
        .find(|(n, _)| n == "service-wmrender-controller.yaml")
        .expect("the controller's metrics Service")
        .1;
    rig.cp.admin().apply("/api/v1/namespaces/wmrender/services", "wmrender-controller", &service);
    let secret_path = "/api/v1/namespaces/wmrender/secrets/wmrender-controller-metrics-tls";
    let deadline = Instant::now() + Duration::from_secs(30);
    let secret = loop {
        if let Some(s) = rig.cp.admin().get(secret_path) {
            break s;
        }
        assert!(Instant::now() < deadline, "the service CA issued no certificate");
        std::thread::sleep(Duration::from_millis(100));
    };
    let mount = rig.path("metrics-tls");
    std::fs::create_dir(&mount).unwrap();
    for key in ["tls.crt", "tls.key"] {
        let data = secret["data"][key].as_str().unwrap();
        use base64::Engine;
        std::fs::write(mount.join(key), base64::engine::general_purpose::STANDARD.decode(data).unwrap()).unwrap();
    }

    let port = free_port();
    let (cert, key) = (mount.join("tls.crt"), mount.join("tls.key"));
    let _replica = rig.controller_with(
        "a",
        port,
        &["--accept-new", "--metrics-cert", cert.to_str().unwrap(), "--metrics-key", key.to_str().unwrap()],
    );

    // Intermediate (nothing set): TLS 1.2 and 1.3, never below; plain HTTP is not served.
    until(port, &ca, &["-tls1_3"], true, "Intermediate, TLS 1.3");
    until(port, &ca, &["-tls1_2"], true, "Intermediate, TLS 1.2");
    until(port, &ca, &["-tls1_1", "-cipher", "ALL:@SECLEVEL=0"], false, "Intermediate, TLS 1.1");
    let plain = support::controller_rig::http_get(port, "/healthz");
    assert!(!plain.contains("\r\n\r\nok\n"), "plain HTTP answered: {plain}");
    // Its certificate is the one the service CA issued for the Service (verified above against the CA).
    let (_, said) = s_client(port, &ca, &[]);
    assert!(said.contains("wmrender-controller.wmrender.svc"), "{said}");

    // Modern: TLS 1.3 only.
    set_profile(&rig, json!({"type": "Modern", "modern": {}}));
    until(port, &ca, &["-tls1_2"], false, "Modern, TLS 1.2");
    until(port, &ca, &["-tls1_3"], true, "Modern, TLS 1.3");

    // Custom: TLS 1.2 with one cipher (the certificate's key is ECDSA); another is refused.
    set_profile(
        &rig,
        json!({"type": "Custom", "custom": {"ciphers": ["ECDHE-ECDSA-AES256-GCM-SHA384"], "minTLSVersion": "VersionTLS12"}}),
    );
    until(port, &ca, &["-tls1_2", "-cipher", "ECDHE-ECDSA-AES256-GCM-SHA384"], true, "Custom, its cipher");
    until(port, &ca, &["-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-GCM-SHA256"], false, "Custom, another cipher");
    until(port, &ca, &["-tls1_2", "-cipher", "ECDHE-ECDSA-CHACHA20-POLY1305"], false, "Custom, another cipher");

    // A renewed certificate (the service CA writes a new one; the kubelet updates the mounted files) is served
    // without a restart.
    let before = support::openssl(&["x509", "-in", cert.to_str().unwrap(), "-noout", "-serial"]);
    rig.cp.admin().delete(secret_path).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let renewed = loop {
        if let Some(s) = rig.cp.admin().get(secret_path) {
            break s;
        }
        assert!(Instant::now() < deadline, "the service CA issued no new certificate");
        std::thread::sleep(Duration::from_millis(100));
    };
    for key in ["tls.crt", "tls.key"] {
        use base64::Engine;
        let data = base64::engine::general_purpose::STANDARD.decode(renewed["data"][key].as_str().unwrap()).unwrap();
        std::fs::write(mount.join(format!("{key}.new")), data).unwrap();
    }
    std::fs::rename(mount.join("tls.key.new"), &key).unwrap();
    std::fs::rename(mount.join("tls.crt.new"), &cert).unwrap();
    let after = support::openssl(&["x509", "-in", cert.to_str().unwrap(), "-noout", "-serial"]);
    assert_ne!(before, after);
    let serial = String::from_utf8(after).unwrap().trim().trim_start_matches("serial=").to_ascii_lowercase();
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let (ok, said) = s_client(port, &ca, &["-tls1_2", "-showcerts"]);
        let served = ok && {
            let pem_end = said.find("-----END CERTIFICATE-----").map(|i| i + 25).unwrap_or(0);
            let pem_start = said.find("-----BEGIN CERTIFICATE-----").unwrap_or(0);
            let pem = &said[pem_start..pem_end];
            let leaf = rig.path("served.crt");
            std::fs::write(&leaf, pem).unwrap();
            let served = support::openssl(&["x509", "-in", leaf.to_str().unwrap(), "-noout", "-serial"]);
            String::from_utf8(served).unwrap().trim().trim_start_matches("serial=").to_ascii_lowercase() == serial
        };
        if served {
            break;
        }
        assert!(Instant::now() < deadline, "the renewed certificate is not served:\n{said}");
        std::thread::sleep(Duration::from_millis(500));
    }
    let log = rig.logs();
    assert!(log.contains("metrics now served over HTTPS with: the Modern TLS profile, minimum VersionTLS13"), "{log}");
    assert!(log.contains("with: a new certificate, the Custom TLS profile"), "{log}");
}

#[test]
fn metrics_are_served_over_https_unless_plain_http_is_asked_for() {
    let o = support::wmrender(&[
        "controller",
        "--rendered",
        "/nonexistent",
        "--identity",
        "/nonexistent",
        "--metrics-address",
        "127.0.0.1:0",
    ]);
    assert_eq!(support::code(&o), 2, "{}", support::stderr(&o));
    assert!(support::stderr(&o).contains("--metrics-plain-http"), "{}", support::stderr(&o));
    let o = support::wmrender(&["controller", "--rendered", "/x", "--identity", "/x", "--metrics-cert", "/x"]);
    assert_eq!(support::code(&o), 2, "a certificate without its key: {}", support::stderr(&o));
}
