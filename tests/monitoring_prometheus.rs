//! The monitoring objects wmrender renders without the operator (inputs `controller`), run by the real consumers:
//!
//! - **promtool** (Prometheus 2.42, Debian's, `bash tests/monitoring/setup.sh`) checks the rendered PrometheusRule's
//!   rules and proves every recording rule on windows_exporter's series, label for label as the exporter writes them,
//!   against values worked out by hand (tests/data/monitoring/windows-rules.test.yaml); a rule without a test there
//!   fails, and the tests are shown able to fail (a wrong value is caught, every one of them).
//! - **Prometheus** (3.5, upstream's, built from its Go module on first use by
//!   tests/monitoring/prometheus/build.sh: Debian's has no Kubernetes service discovery at all, and 2.42's
//!   EndpointSlice discovery cannot start against the rig's unversioned kube-apiserver; see the go.mod there) runs
//!   the scrape job prometheus-operator makes of the rendered ServiceMonitor against the real kube-apiserver of the
//!   test rig (tests/support/apiserver.rs): it discovers the kubelet's EndpointSlice, as the operator keeps it, with a
//!   Windows and a Linux node, keeps the Windows node alone through the node metadata the ServiceMonitor attaches,
//!   and scrapes its exporter on port 9182 over TLS, verified against the service CA for the name of the rendered
//!   Service, with the certificate the (played) service CA issued for that Service. The exporter is `openssl
//!   s_server` serving a recorded windows_exporter page (tests/data/monitoring/windows-exporter.prom). The rendered
//!   rules then turn what Prometheus scraped into the node series.

mod support;

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The rules file the test writes from the rendered PrometheusRule, as windows-rules.test.yaml names it.
const RULES_FILE: &str = "windows-rules.yaml";
const RULE_TESTS: &str = "windows-rules.test.yaml";

fn fixture() -> PathBuf {
    support::root().join("fixtures/controller/wmrender.yaml")
}

fn data(name: &str) -> PathBuf {
    support::root().join("tests/data/monitoring").join(name)
}

/// A binary tests/monitoring/setup.sh installs (Debian's Prometheus 2.42 and promtool).
fn setup_tool(name: &str) -> PathBuf {
    let path = support::root().join("target/monitoring/bin").join(name);
    assert!(path.is_file(), "{} is missing: run `bash tests/monitoring/setup.sh`", path.display());
    path
}

/// A rendered `cluster/` object, parsed.
fn object(out: &Path, file: &str) -> Value {
    let text = std::fs::read_to_string(out.join("cluster").join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// The rendered PrometheusRule as a Prometheus rules file (its `spec`: `groups:`), written at `path`.
fn write_rules(out: &Path, path: &Path) -> Vec<String> {
    let rule = object(out, "prometheusrule-windows-prometheus-k8s-rules.yaml");
    assert_eq!(rule["apiVersion"], "monitoring.coreos.com/v1");
    let file = json!({ "groups": rule["spec"]["groups"] });
    std::fs::write(path, serde_saphyr::to_string(&file).unwrap()).unwrap();
    let groups = file["groups"].as_array().expect("groups");
    groups.iter().flat_map(|g| g["rules"].as_array().unwrap()).map(|r| r["record"].as_str().unwrap().into()).collect()
}

/// Runs `program` in `dir`: whether it succeeded, and its stdout and stderr together.
fn run(program: &Path, args: &[&str], dir: &Path) -> (bool, String) {
    let out = Command::new(program).args(args).current_dir(dir).output().expect("runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// The names a PromQL expression reads (metric names, recording rules' names among them).
fn names(expr: &str) -> Vec<&str> {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':')).filter(|t| !t.is_empty()).collect()
}

/// Every `promql_expr_test` of a promtool test file, in order.
fn expr_tests(tests: &Value) -> Vec<&Value> {
    let groups = tests["tests"].as_array().expect("tests");
    groups.iter().flat_map(|g| g["promql_expr_test"].as_array().map(|l| l.iter()).into_iter().flatten()).collect()
}

/// The test file with expected values moved by one: those of the `which` expression tests (by index).
fn with_wrong_values(tests: &Value, which: impl Fn(usize) -> bool) -> Value {
    let mut wrong = tests.clone();
    let mut i = 0;
    for group in wrong["tests"].as_array_mut().unwrap() {
        for test in group["promql_expr_test"].as_array_mut().into_iter().flatten() {
            if which(i) {
                for sample in test["exp_samples"].as_array_mut().unwrap() {
                    sample["value"] = json!(sample["value"].as_f64().expect("a number") + 1.0);
                }
            }
            i += 1;
        }
    }
    wrong
}

#[test]
fn promtool_checks_the_rendered_rules_and_proves_every_recording_rule_on_windows_exporters_series() {
    let promtool = setup_tool("promtool");
    let (_tmp, out) = support::render_to_temp(&fixture());
    let dir = tempfile::tempdir().unwrap();
    let records = write_rules(&out, &dir.path().join(RULES_FILE));
    assert!(!records.is_empty());

    let (ok, text) = run(&promtool, &["check", "rules", RULES_FILE], dir.path());
    let found = format!("SUCCESS: {} rules found", records.len());
    assert!(ok && text.contains(&found), "promtool check rules:\n{text}");

    // Every recorded series has a test that reads it and expects samples of it.
    let tests_text = std::fs::read_to_string(data(RULE_TESTS)).unwrap();
    let tests: Value = serde_saphyr::from_str(&tests_text).unwrap();
    assert_eq!(tests["rule_files"], json!([RULES_FILE]), "the tests read the rules the test writes");
    let exprs = expr_tests(&tests);
    for record in &records {
        let proven = exprs.iter().any(|t| {
            names(t["expr"].as_str().unwrap()).contains(&record.as_str())
                && t["exp_samples"].as_array().is_some_and(|s| !s.is_empty())
        });
        assert!(proven, "{record} is recorded but no test of {RULE_TESTS} expects a sample of it");
    }

    std::fs::write(dir.path().join(RULE_TESTS), &tests_text).unwrap();
    let (ok, text) = run(&promtool, &["test", "rules", RULE_TESTS], dir.path());
    assert!(ok && text.contains("SUCCESS"), "promtool test rules:\n{text}");

    // The tests can fail: one wrong value is caught, alone. (The changed copies are written as JSON, which is YAML.)
    std::fs::write(dir.path().join("one-wrong.test.yaml"), with_wrong_values(&tests, |i| i == 0).to_string()).unwrap();
    let (ok, text) = run(&promtool, &["test", "rules", "one-wrong.test.yaml"], dir.path());
    let first = exprs[0]["expr"].as_str().unwrap();
    assert!(!ok, "promtool passed a wrong value:\n{text}");
    assert!(text.contains(&format!("expr: {first:?}")) && text.matches("expr: ").count() == 1, "{text}");

    // And so is each of them: every expression test reports its own failure.
    std::fs::write(dir.path().join("all-wrong.test.yaml"), with_wrong_values(&tests, |_| true).to_string()).unwrap();
    let (ok, text) = run(&promtool, &["test", "rules", "all-wrong.test.yaml"], dir.path());
    assert!(!ok, "promtool passed wrong values:\n{text}");
    assert_eq!(text.matches("expr: ").count(), exprs.len(), "one failure per expression test:\n{text}");
    for record in &records {
        assert!(text.contains(&format!("expr: {record:?}")), "no failure reported for {record}:\n{text}");
    }
}

#[cfg(feature = "cluster")]
mod scrape {
    use super::*;
    use base64::Engine;
    use std::io::{Read, Write};
    use std::os::unix::process::CommandExt;
    use std::process::{Child, Stdio};
    use std::sync::Once;
    use std::time::{Duration, Instant};
    use support::apiserver::ControlPlane;
    use support::netns::NetNs;
    use support::played::ServiceCa;
    use wmrender::render::monitoring::{SERVICE_CA_FILE, TOKEN_FILE};

    /// The Windows node and the Linux node, by name.
    const WINDOWS_NODE: &str = "win-0";
    const LINUX_NODE: &str = "lin-0";
    /// How long Prometheus may take to discover, scrape and record: about 5 s here, its discovery manager handing
    /// targets to the scrapes every 5 s.
    const LIMIT: Duration = Duration::from_secs(60);
    /// The control job's name (and label `job`).
    const CONTROL: &str = "control-wrong-server-name";

    /// Prometheus 3.5 with Kubernetes service discovery, built on first use (a no-op when current).
    fn prometheus() -> PathBuf {
        static BUILD: Once = Once::new();
        BUILD.call_once(|| {
            let status = Command::new("bash")
                .arg(support::root().join("tests/monitoring/prometheus/build.sh"))
                .status()
                .expect("bash runs tests/monitoring/prometheus/build.sh");
            assert!(
                status.success(),
                "tests/monitoring/prometheus/build.sh could not build Prometheus (it needs Go and the Go module \
                 proxy; `bash tests/setup.sh` installs what the tests need)"
            );
        });
        support::root().join("target/monitoring-k8s/prometheus")
    }

    /// A process killed when the test ends however it ends (and with the thread that started it).
    struct Process(Child);

    impl Process {
        fn start(program: &Path, args: &[&str], dir: &Path, log: &Path) -> Process {
            let out = std::fs::File::create(log).unwrap();
            let mut cmd = Command::new(program);
            cmd.args(args).current_dir(dir).stdin(Stdio::null()).stdout(out.try_clone().unwrap()).stderr(out);
            // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
            unsafe {
                cmd.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    Ok(())
                });
            }
            Process(cmd.spawn().unwrap_or_else(|e| panic!("starting {}: {e}", program.display())))
        }
    }

    impl Process {
        /// Fails the test, with the end of `log`, if the process has exited.
        fn alive(&mut self, log: &Path) {
            if let Ok(Some(status)) = self.0.try_wait() {
                panic!("the process exited ({status}); {} ends:\n{}", log.display(), tail(log));
            }
        }
    }

    /// The last 40 lines of a log.
    fn tail(log: &Path) -> String {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    impl Drop for Process {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    fn percent_encoded(s: &str) -> String {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect()
    }

    /// `GET path` of Prometheus' API: its `data`, `None` while it does not answer.
    fn api(port: u16, path: &str) -> Option<Value> {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        // HTTP/1.0: the server closes the connection after its answer, which ends the read.
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes()).ok()?;
        let mut answer = String::new();
        s.read_to_string(&mut answer).ok()?;
        let body: Value = serde_json::from_str(answer.split_once("\r\n\r\n")?.1).ok()?;
        (body["status"] == "success").then(|| body["data"].clone())
    }

    /// The instant vector `promql` selects, `[]` while Prometheus does not answer.
    fn query(port: u16, promql: &str) -> Vec<Value> {
        let data = api(port, &format!("/api/v1/query?query={}", percent_encoded(promql)));
        data.and_then(|d| d["result"].as_array().cloned()).unwrap_or_default()
    }

    /// The scrape job prometheus-operator (v0.94, pkg/prometheus/promcfg.go `generateServiceMonitorConfig`) makes of
    /// the ServiceMonitor's endpoint `i`, for one unsharded Prometheus (`$(SHARD)` = 0) with the default selector
    /// mechanism (relabeling). The files the ServiceMonitor names are the platform Prometheus pod's; `files` maps each
    /// to the test's copy. Every field of the endpoint is translated or refused, so none is lost unnoticed.
    fn scrape_job(monitor: &Value, i: usize, kubeconfig: &Path, files: &[(&str, &Path)]) -> Value {
        let local = |v: &Value| -> String {
            let path = v.as_str().expect("a path");
            let (_, copy) = files.iter().find(|(p, _)| *p == path).unwrap_or_else(|| panic!("no copy of {path}"));
            copy.to_str().unwrap().into()
        };
        let sanitized = |name: &str| name.replace(|c: char| !c.is_ascii_alphanumeric(), "_");
        let spec = &monitor["spec"];
        let ep = &spec["endpoints"][i];
        let (namespace, name) =
            (monitor["metadata"]["namespace"].as_str().unwrap(), monitor["metadata"]["name"].as_str().unwrap());

        let (role, meta) = match spec["serviceDiscoveryRole"].as_str() {
            Some("EndpointSlice") => ("endpointslice", "endpointslice"),
            None | Some("Endpoints") => ("endpoints", "endpoint"),
            Some(other) => panic!("serviceDiscoveryRole {other}"),
        };
        let mut sd = json!({
            "role": role,
            "kubeconfig_file": kubeconfig,
            "namespaces": {"names": spec["namespaceSelector"]["matchNames"]},
        });
        if let Some(node) = spec["attachMetadata"]["node"].as_bool() {
            sd["attach_metadata"] = json!({ "node": node });
        }

        let target = [
            format!("__meta_kubernetes_{meta}_address_target_kind"),
            format!("__meta_kubernetes_{meta}_address_target_name"),
        ];
        let mut relabel = vec![json!({"source_labels": ["job"], "target_label": "__tmp_prometheus_job_name"})];
        let selected = spec["selector"]["matchLabels"].as_object().expect("matchLabels");
        for (k, v) in selected {
            let k = sanitized(k);
            relabel.push(json!({
                "action": "keep",
                "source_labels": [
                    format!("__meta_kubernetes_service_label_{k}"),
                    format!("__meta_kubernetes_service_labelpresent_{k}"),
                ],
                "regex": format!("({});true", v.as_str().unwrap()),
            }));
        }
        assert!(spec["selector"].get("matchExpressions").is_none(), "matchExpressions are not translated here");
        let port = ep["port"].as_str().expect("the endpoint names its port");
        relabel.extend([
            json!({"action": "keep", "source_labels": [format!("__meta_kubernetes_{meta}_port_name")], "regex": port}),
            json!({"source_labels": target, "separator": ";", "regex": "Node;(.*)", "replacement": "${1}",
                   "target_label": "node"}),
            json!({"source_labels": target, "separator": ";", "regex": "Pod;(.*)", "replacement": "${1}",
                   "target_label": "pod"}),
            json!({"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"}),
            json!({"source_labels": ["__meta_kubernetes_service_name"], "target_label": "service"}),
            json!({"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"}),
            json!({"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"}),
            json!({"action": "drop", "source_labels": ["__meta_kubernetes_pod_phase"], "regex": "(Failed|Succeeded)"}),
            json!({"source_labels": ["__meta_kubernetes_service_name"], "target_label": "job", "replacement": "${1}"}),
            json!({"target_label": "endpoint", "replacement": port}),
        ]);
        // The ServiceMonitor's own relabelings, field by field.
        for r in ep["relabelings"].as_array().into_iter().flatten() {
            let mut out = serde_json::Map::new();
            for (k, v) in r.as_object().unwrap() {
                let (key, value) = match k.as_str() {
                    "sourceLabels" => ("source_labels", v.clone()),
                    "separator" => ("separator", v.clone()),
                    "targetLabel" => ("target_label", v.clone()),
                    "regex" => ("regex", v.clone()),
                    "modulus" => ("modulus", v.clone()),
                    "replacement" => ("replacement", v.clone()),
                    "action" => ("action", json!(v.as_str().unwrap().to_lowercase())),
                    other => panic!("relabeling field {other} is not translated here"),
                };
                out.insert(key.into(), value);
            }
            relabel.push(Value::Object(out));
        }
        // Sharding, with one shard.
        relabel.extend([
            json!({"source_labels": ["__address__", "__tmp_hash"], "target_label": "__tmp_hash", "regex": "(.+);",
                   "replacement": "$1", "action": "replace"}),
            json!({"source_labels": ["__tmp_hash"], "target_label": "__tmp_hash", "modulus": 1, "action": "hashmod"}),
            json!({"source_labels": ["__tmp_hash", "__tmp_disable_sharding"], "regex": "0;|.+;.+", "action": "keep"}),
        ]);

        let mut job = json!({
            "job_name": format!("serviceMonitor/{namespace}/{name}/{i}"),
            "kubernetes_sd_configs": [sd],
            "relabel_configs": relabel,
        });
        for (k, v) in ep.as_object().unwrap() {
            match k.as_str() {
                "port" | "relabelings" => {}
                "honorLabels" => job["honor_labels"] = v.clone(),
                // The ServiceMonitor's 30s, shortened so that the test sees scrapes within seconds.
                "interval" => job["scrape_interval"] = json!("1s"),
                "path" => job["metrics_path"] = v.clone(),
                "scheme" => job["scheme"] = v.clone(),
                "bearerTokenFile" => job["bearer_token_file"] = json!(local(v)),
                "tlsConfig" => {
                    let mut tls = serde_json::Map::new();
                    for (k, v) in v.as_object().unwrap() {
                        match k.as_str() {
                            "caFile" => tls.insert("ca_file".into(), json!(local(v))),
                            "serverName" => tls.insert("server_name".into(), v.clone()),
                            other => panic!("tlsConfig field {other} is not translated here"),
                        };
                    }
                    job["tls_config"] = Value::Object(tls);
                }
                other => panic!("endpoint field {other} is not translated here"),
            }
        }
        job
    }

    /// The kubelet Service and EndpointSlice prometheus-operator's kubelet controller keeps in kube-system
    /// (pkg/kubelet/controller.go): one endpoint per node, its address, node name and a reference to the Node; of
    /// address type IPv4, as the operator's (the API server refuses that type for 127.0.0.0/8, "may not be in the
    /// loopback range", so the nodes' addresses are in network namespaces the test makes).
    fn kubelet_endpoints(cp: &ControlPlane, nodes: &[(&str, &str)]) {
        let admin = cp.admin();
        let labels = json!({
            "k8s-app": "kubelet",
            "app.kubernetes.io/name": "kubelet",
            "app.kubernetes.io/managed-by": "prometheus-operator",
        });
        let service = admin
            .create(
                "/api/v1/namespaces/kube-system/services",
                &json!({
                    "metadata": {"name": "kubelet", "labels": labels},
                    "spec": {"clusterIP": "None", "ports": [
                        {"name": "https-metrics", "port": 10250},
                        {"name": "cadvisor", "port": 4194},
                    ]},
                }),
            )
            .unwrap();
        let endpoints: Vec<Value> = nodes
            .iter()
            .map(|(name, address)| {
                let node = admin.get(&format!("/api/v1/nodes/{name}")).expect("the Node");
                json!({
                    "addresses": [address],
                    "conditions": {"ready": true},
                    "nodeName": name,
                    "targetRef": {"kind": "Node", "name": name, "uid": node["metadata"]["uid"], "apiVersion": "v1"},
                })
            })
            .collect();
        let mut slice_labels = labels.clone();
        slice_labels["kubernetes.io/service-name"] = json!("kubelet");
        slice_labels["endpointslice.kubernetes.io/managed-by"] = json!("prometheus-operator");
        admin
            .create(
                "/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices",
                &json!({
                    "metadata": {
                        "generateName": "kubelet-",
                        "labels": slice_labels,
                        "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": "kubelet",
                                             "uid": service["metadata"]["uid"], "controller": true,
                                             "blockOwnerDeletion": true}],
                    },
                    "addressType": "IPv4",
                    "ports": [{"name": "https-metrics", "port": 10250}, {"name": "cadvisor", "port": 4194}],
                    "endpoints": endpoints,
                }),
            )
            .unwrap();
    }

    /// A user that may discover what the scrape job reads, as the platform Prometheus may: nodes (for their
    /// metadata), and services, endpoints, EndpointSlices and pods.
    fn discovery_kubeconfig(cp: &ControlPlane, path: &Path) {
        let admin = cp.admin();
        let verbs = json!(["get", "list", "watch"]);
        admin
            .create(
                "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                &json!({"metadata": {"name": "prometheus-discovery"}, "rules": [
                    {"apiGroups": [""], "resources": ["nodes", "services", "endpoints", "pods"], "verbs": verbs},
                    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": verbs},
                ]}),
            )
            .unwrap();
        admin
            .create(
                "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                &json!({"metadata": {"name": "prometheus-discovery"},
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                    "name": "prometheus-discovery"},
                        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                                      "name": "prometheus-k8s"}]}),
            )
            .unwrap();
        cp.write_kubeconfig(path, "prometheus-k8s", &[]);
    }

    /// The serving certificate and key the service CA issued for the rendered `windows-exporter` Service, written
    /// in `dir` (the Secret its annotation names, as `sync` delivers it to each node).
    fn exporter_certificate(cp: &ControlPlane, out: &Path, dir: &Path) -> (PathBuf, PathBuf) {
        let service = object(out, "service-windows-exporter.yaml");
        let secret = service["metadata"]["annotations"]["service.beta.openshift.io/serving-cert-secret-name"]
            .as_str()
            .expect("the Service asks the service CA for a certificate");
        cp.admin().create("/api/v1/namespaces/wmrender/services", &service).expect("the rendered Service is created");
        let path = format!("/api/v1/namespaces/wmrender/secrets/{secret}");
        let deadline = Instant::now() + Duration::from_secs(30);
        let secret = loop {
            if let Some(s) = cp.admin().get(&path) {
                break s;
            }
            assert!(Instant::now() < deadline, "the service CA issued no {path}");
            std::thread::sleep(Duration::from_millis(100));
        };
        let decode = |key: &str| {
            base64::engine::general_purpose::STANDARD.decode(secret["data"][key].as_str().unwrap()).unwrap()
        };
        let (crt, key) = (dir.join("tls.crt"), dir.join("tls.key"));
        std::fs::write(&crt, decode("tls.crt")).unwrap();
        std::fs::write(&key, decode("tls.key")).unwrap();
        (crt, key)
    }

    /// Polls `done` until it gives a value, while `process` runs; past [`LIMIT`], fails with the end of its `log`.
    fn wait_for<T>(what: &str, process: &mut Process, log: &Path, mut done: impl FnMut() -> Option<T>) -> T {
        let deadline = Instant::now() + LIMIT;
        loop {
            process.alive(log);
            if let Some(v) = done() {
                return v;
            }
            assert!(Instant::now() < deadline, "{what}: not within {LIMIT:?}; {} ends:\n{}", log.display(), tail(log));
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// A sample's labels, without its name.
    fn labels(sample: &Value) -> Value {
        let mut m = sample["metric"].clone();
        m.as_object_mut().unwrap().remove("__name__");
        m
    }

    #[test]
    fn prometheus_scrapes_the_windows_nodes_exporter_over_tls_as_the_rendered_service_monitor_asks() {
        let prometheus = prometheus();
        let (_tmp, out) = support::render_to_temp(&fixture());
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();

        let cp = ControlPlane::start();
        cp.namespace("wmrender");
        cp.namespace("kube-system");
        let service_ca = ServiceCa::start(&cp);
        let (crt, key) = exporter_certificate(&cp, &out, d);
        // Each node at an address of a network namespace the test makes, as a real kubelet's (not loopback).
        let (windows_ns, linux_ns) = (NetNs::create(), NetNs::create());
        let (windows_address, linux_address) = (windows_ns.node.as_str(), linux_ns.node.as_str());
        for (name, os) in [(WINDOWS_NODE, "windows"), (LINUX_NODE, "linux")] {
            let labels = json!({"kubernetes.io/os": os, "beta.kubernetes.io/os": os, "kubernetes.io/hostname": name});
            cp.admin().create("/api/v1/nodes", &json!({"metadata": {"name": name, "labels": labels}})).unwrap();
        }
        kubelet_endpoints(&cp, &[(WINDOWS_NODE, windows_address), (LINUX_NODE, linux_address)]);

        // The Windows node's exporter: a recorded windows_exporter page at /metrics, over TLS with the service CA's
        // certificate, on the node's address and the exporter's port (forwarded there from 127.0.0.1).
        let site = d.join("site");
        std::fs::create_dir(&site).unwrap();
        std::fs::copy(data("windows-exporter.prom"), site.join("metrics")).unwrap();
        let exporter_address = format!("{windows_address}:{}", wmrender::render::exporter::PORT);
        let listen = format!("127.0.0.1:{}", support::controller_rig::free_port());
        let (crt_s, key_s) = (crt.to_str().unwrap(), key.to_str().unwrap());
        let exporter_log = d.join("exporter.log");
        let mut exporter = Process::start(
            Path::new("openssl"),
            &["s_server", "-WWW", "-accept", &listen, "-cert", crt_s, "-key", key_s],
            &site,
            &exporter_log,
        );
        let _forward = windows_ns.forward(&exporter_address, listen.parse().unwrap());
        wait_for("the exporter listens", &mut exporter, &exporter_log, || {
            std::net::TcpStream::connect(listen.as_str()).ok()
        });

        // Prometheus: the operator's job for the rendered ServiceMonitor, the rendered rules, evaluated every second.
        let ca = d.join("service-ca.crt");
        std::fs::write(&ca, &service_ca.ca_pem).unwrap();
        let token = d.join("token");
        std::fs::write(&token, "a-service-account-token").unwrap();
        let kubeconfig = d.join("prometheus.kubeconfig");
        discovery_kubeconfig(&cp, &kubeconfig);
        let monitor = object(&out, "servicemonitor-windows-exporter.yaml");
        let job = scrape_job(&monitor, 0, &kubeconfig, &[(SERVICE_CA_FILE, &ca), (TOKEN_FILE, &token)]);
        // A control: the same job expecting another name of the exporter, which its certificate does not carry. It
        // fails, so the certificate is verified, and under the rendered name.
        let mut control = job.clone();
        control["job_name"] = json!(CONTROL);
        control["tls_config"]["server_name"] = json!("windows-exporter.elsewhere.svc");
        control["relabel_configs"].as_array_mut().unwrap().push(json!({"target_label": "job", "replacement": CONTROL}));
        write_rules(&out, &d.join(RULES_FILE));
        let config = json!({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [d.join(RULES_FILE)],
            "scrape_configs": [job, control],
        });
        std::fs::write(d.join("prometheus.yaml"), serde_saphyr::to_string(&config).unwrap()).unwrap();
        let port = support::controller_rig::free_port();
        let log = d.join("prometheus.log");
        let (config_arg, storage_arg, listen_arg) = (
            format!("--config.file={}", d.join("prometheus.yaml").display()),
            format!("--storage.tsdb.path={}", d.join("data").display()),
            format!("--web.listen-address=127.0.0.1:{port}"),
        );
        let mut prometheus = Process::start(&prometheus, &[&config_arg, &storage_arg, &listen_arg], d, &log);

        // The exporter is up, under the node's name, as the job the ServiceMonitor names.
        let target_labels = json!({
            "endpoint": "https-metrics", "instance": "win-0", "job": "windows-exporter", "namespace": "kube-system",
            "node": "win-0", "service": "kubelet",
        });
        let up = wait_for("up{job=\"windows-exporter\",instance=\"win-0\"}", &mut prometheus, &log, || {
            query(port, r#"up{job="windows-exporter",instance="win-0"}"#).pop()
        });
        if up["value"][1] != "1" {
            panic!("the scrape failed: {up}\ntargets: {:#}", api(port, "/api/v1/targets").unwrap_or_default());
        }
        assert_eq!(labels(&up), target_labels);

        // One target: the Windows node's exporter. The Linux node's kubelet, and the cadvisor port, were discovered
        // and dropped.
        let targets = api(port, "/api/v1/targets").expect("the targets");
        let (active, control): (Vec<&Value>, Vec<&Value>) =
            targets["activeTargets"].as_array().unwrap().iter().partition(|t| t["scrapePool"] != CONTROL);
        assert_eq!(active.len(), 1, "{active:#?}");
        assert_eq!(active[0]["scrapePool"], "serviceMonitor/wmrender/windows-exporter/0");
        assert_eq!(active[0]["discoveredLabels"]["__address__"], format!("{windows_address}:10250"));
        assert_eq!(active[0]["scrapeUrl"], format!("https://{exporter_address}/metrics"));
        assert_eq!(active[0]["labels"], target_labels);
        assert_eq!(active[0]["health"], "up", "{}", active[0]);
        let dropped: Vec<(String, String)> = targets["droppedTargets"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["scrapePool"] != CONTROL)
            .map(|t| {
                let l = &t["discoveredLabels"];
                let os = l["__meta_kubernetes_node_label_kubernetes_io_os"].as_str().unwrap_or("").to_string();
                (l["__address__"].as_str().unwrap().to_string(), os)
            })
            .collect();
        for (address, os) in [
            (format!("{linux_address}:10250"), "linux"),
            (format!("{linux_address}:4194"), "linux"),
            (format!("{windows_address}:4194"), "windows"),
        ] {
            assert!(dropped.contains(&(address.clone(), os.into())), "{address} ({os}) not dropped: {dropped:?}");
        }

        // The page's series, with the target's labels; a label the exporter sends itself wins (honorLabels).
        let total = query(port, r#"windows_memory_physical_total_bytes{instance="win-0"}"#);
        assert_eq!(total.len(), 1, "{total:?}");
        assert_eq!(total[0]["value"][1], "8469557248");
        assert_eq!(labels(&total[0]), target_labels);
        let api_cpu = query(port, r#"windows_container_cpu_usage_seconds_total{pod="legacy-api-0"}"#);
        assert_eq!(api_cpu.len(), 1, "{api_cpu:?}");
        assert_eq!(api_cpu[0]["metric"]["namespace"], "payments");
        assert_eq!(api_cpu[0]["value"][1], "9285");

        // The rendered rules record the node's series from them.
        let recorded = wait_for("node_memory_MemTotal_bytes{instance=\"win-0\"}", &mut prometheus, &log, || {
            query(port, r#"node_memory_MemTotal_bytes{instance="win-0"}"#).pop()
        });
        assert_eq!(recorded["value"][1], "8469557248");
        assert_eq!(labels(&recorded), target_labels);
        let sizes = wait_for("node_filesystem_size_bytes", &mut prometheus, &log, || {
            Some(query(port, r#"node_filesystem_size_bytes{instance="win-0"}"#)).filter(|v| v.len() == 2)
        });
        let c = sizes.iter().find(|s| s["metric"]["volume"] == "C:").expect("C:");
        assert_eq!(c["value"][1], "128293273600");

        // The control found the same exporter and could not scrape it: the certificate is not for that name.
        assert_eq!(control.len(), 1, "{control:#?}");
        let error = wait_for("the control's scrape", &mut prometheus, &log, || {
            let targets = api(port, "/api/v1/targets")?;
            let t = targets["activeTargets"].as_array()?.iter().find(|t| t["scrapePool"] == CONTROL)?.clone();
            (t["health"] == "down").then(|| t["lastError"].as_str().unwrap_or("").to_string())
        });
        assert!(error.contains("x509") && error.contains("windows-exporter.elsewhere.svc"), "{error}");
        let up = query(port, &format!(r#"up{{job="{CONTROL}"}}"#));
        assert_eq!(up.len(), 1, "{up:?}");
        assert_eq!(up[0]["value"][1], "0");
    }
}
