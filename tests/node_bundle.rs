//! The node bundle: every PowerShell file parses (tree-sitter-powershell), kubelet.conf and the kube-proxy
//! template use only upstream fields of their version, platform differences, proxy handling, no secrets.

mod support;

use support::powershell::powershell_problems;

use std::collections::BTreeMap;
use std::path::Path;

fn bundle(inputs: &Path) -> BTreeMap<String, String> {
    let (_tmp, out) = support::render_to_temp(inputs);
    support::read_tree(&out)
        .into_iter()
        .filter(|(p, _)| p.starts_with("node/"))
        .map(|(p, b)| (p, String::from_utf8(b).expect("utf-8")))
        .collect()
}

fn example(name: &str) -> std::path::PathBuf {
    support::root().join(format!("examples/{name}/wmrender.yaml"))
}

#[test]
fn the_parser_catches_broken_powershell() {
    assert!(!powershell_problems("if ($x) {\n  Write-Host 1\n").is_empty(), "unclosed brace");
    assert!(!powershell_problems("$a = 'unterminated\n").is_empty(), "unterminated string");
    assert!(powershell_problems("$a = @{ b = 1 }\nWrite-Host $a.b\n").is_empty());
}

#[test]
fn every_rendered_powershell_file_parses() {
    let mut checked = 0;
    for inputs in support::valid_inputs() {
        for (path, text) in bundle(&inputs) {
            if path.ends_with(".ps1") {
                let problems = powershell_problems(&text);
                assert!(problems.is_empty(), "{}: {path}: {problems:?}", support::case_name(&inputs));
                checked += 1;
            }
        }
    }
    assert!(checked >= 30, "only {checked} scripts checked");
}

#[test]
fn hostile_values_stay_one_string_literal_in_powershell() {
    for hostile in ["it's", "$(Remove-Item -Recurse C:\\)", "`whoami`", "a; exit 1", "x\ny", "\u{2019}; exit 1 #", "'@"]
    {
        let script = format!("$value = {}\n", wmrender::render::node::powershell::quote(hostile));
        assert!(powershell_problems(&script).is_empty(), "{hostile:?}: {script}");
        let mut parser = tree_sitter::Parser::new();
        parser.set_language(&tree_sitter_powershell::LANGUAGE.into()).unwrap();
        let tree = parser.parse(&script, None).unwrap();
        // Exactly one string literal, spanning the whole right-hand side.
        let literal = &script[script.find('\'').unwrap()..script.len() - 1];
        let mut strings = Vec::new();
        let mut stack = vec![tree.root_node()];
        let mut cursor = tree.walk();
        while let Some(node) = stack.pop() {
            if node.kind().contains("string") && node.child_count() == 0 || node.kind() == "verbatim_string_characters"
            {
                strings.push(node.utf8_text(script.as_bytes()).unwrap().to_string());
            }
            stack.extend(node.children(&mut cursor));
        }
        assert_eq!(strings, vec![literal.to_string()], "{hostile:?} parsed as {}", tree.root_node().to_sexp());
    }
}

fn field_list(minor: u32) -> Vec<String> {
    let text = std::fs::read_to_string(support::root().join("tests/data/kubelet-config-fields.txt")).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(' '))
        .filter(|(_, since)| since.parse::<u32>().unwrap() <= minor)
        .map(|(f, _)| f.to_string())
        .collect()
}

fn with_version(inputs: &Path, version: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(inputs).unwrap();
    let text = text.replace("spec:\n", &format!("spec:\n  kubernetesVersion: \"{version}\"\n"));
    let path = tmp.path().join("wmrender.yaml");
    std::fs::write(&path, text).unwrap();
    (tmp, path)
}

#[test]
fn kubelet_conf_uses_only_upstream_fields_of_each_supported_version() {
    for minor in 30..=36 {
        let (_tmp, inputs) = with_version(&example("aws"), &format!("1.{minor}"));
        let files = bundle(&inputs);
        let conf: serde_json::Value = serde_json::from_str(&files["node/C/k/kubelet.conf"]).unwrap();
        let allowed = field_list(minor);
        for key in conf.as_object().unwrap().keys() {
            if key == "kind" || key == "apiVersion" {
                continue;
            }
            assert!(allowed.contains(key), "1.{minor}: kubelet.conf field {key} is not in KubeletConfiguration");
        }
        // Version-dependent: `["none"]` passes validation only from 1.31.
        let expected = if minor >= 31 { serde_json::json!(["none"]) } else { serde_json::json!([]) };
        assert_eq!(conf["enforceNodeAllocatable"], expected, "1.{minor}");
        assert_eq!(conf["cgroupsPerQOS"], false);
        assert_eq!(conf["containerRuntimeEndpoint"], "npipe://./pipe/containerd-containerd");
        assert_eq!(conf["clusterDNS"], serde_json::json!(["172.30.0.10"]));
        assert_eq!(
            conf["registerWithTaints"],
            serde_json::json!([{"key": "os", "value": "Windows", "effect": "NoSchedule"}])
        );
    }
}

/// KubeProxyConfiguration v1alpha1 (kubernetes/kube-proxy config/v1alpha1/types.go): top-level and winkernel fields.
const KUBE_PROXY_FIELDS: &[&str] = &[
    "kind",
    "apiVersion",
    "featureGates",
    "clientConnection",
    "logging",
    "hostnameOverride",
    "bindAddress",
    "healthzBindAddress",
    "metricsBindAddress",
    "bindAddressHardFail",
    "enableProfiling",
    "showHiddenMetricsForVersion",
    "mode",
    "iptables",
    "ipvs",
    "nftables",
    "winkernel",
    "detectLocalMode",
    "detectLocal",
    "clusterCIDR",
    "nodePortAddresses",
    "oomScoreAdj",
    "conntrack",
    "configSyncPeriod",
    "portRange",
    "windowsRunAsService",
];
const WINKERNEL_FIELDS: &[&str] =
    &["networkName", "sourceVip", "enableDSR", "rootHnsEndpointName", "forwardHealthCheckVip"];

#[test]
fn kube_proxy_template_uses_only_upstream_fields_and_names_gates_only_while_they_exist() {
    for minor in 30..=36 {
        let (_tmp, inputs) = with_version(&example("vsphere"), &format!("1.{minor}"));
        let files = bundle(&inputs);
        let script = &files["node/C/k/wmrender/network-conf.ps1"];
        let start = script.find("$kubeProxy = @'\n").expect("the kube-proxy here-string") + "$kubeProxy = @'\n".len();
        let yaml = &script[start..start + script[start..].find("\n'@").unwrap()];
        let conf: serde_json::Value = serde_saphyr::from_str(yaml).unwrap();
        for key in conf.as_object().unwrap().keys() {
            assert!(KUBE_PROXY_FIELDS.contains(&key.as_str()), "1.{minor}: {key}");
        }
        for key in conf["winkernel"].as_object().unwrap().keys() {
            assert!(WINKERNEL_FIELDS.contains(&key.as_str()), "1.{minor}: winkernel.{key}");
        }
        assert_eq!(conf["mode"], "kernelspace");
        assert_eq!(conf["winkernel"]["enableDSR"], true);
        assert_eq!(conf["winkernel"]["networkName"], "OVNKubernetesHybridOverlayNetwork");
        assert_eq!(conf["featureGates"].is_null(), minor >= 34, "1.{minor}: WinDSR/WinOverlay are locked GA from 1.34");
    }
}

fn services(files: &BTreeMap<String, String>) -> Vec<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(&files["node/C/k/wmrender/services.json"]).unwrap();
    v["services"].as_array().unwrap().clone()
}

fn command<'a>(services: &'a [serde_json::Value], name: &str) -> &'a str {
    services.iter().find(|s| s["name"] == name).unwrap_or_else(|| panic!("no {name}"))["command"].as_str().unwrap()
}

#[test]
fn services_follow_wmco_dependencies_the_node_s_own_first_and_the_optional_ones_last() {
    let files = bundle(&example("azure"));
    let svcs = services(&files);
    let names: Vec<&str> = svcs.iter().map(|s| s["name"].as_str().unwrap()).collect();
    // What the node needs to join starts first; monitoring and storage helpers after, and they fail alone.
    assert_eq!(
        names,
        [
            "containerd",
            "kubelet",
            "hybrid-overlay-node",
            "kube-proxy",
            "cloud-node-manager",
            "windows_exporter",
            "csi-proxy"
        ]
    );
    let optional: Vec<&str> =
        svcs.iter().filter(|s| s["optional"] == true).map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(optional, ["windows_exporter", "csi-proxy"]);
    // What a service reloads by itself needs no restart when it is rotated; what it reads at start does.
    let list = |n: &str, key: &str| svcs.iter().find(|s| s["name"] == n).unwrap()[key].clone();
    assert_eq!(list("kubelet", "reloads"), serde_json::json!([r"C:\k\bootstrap-kubeconfig", r"C:\k\kubelet-ca.crt"]));
    assert!(list("kubelet", "secrets").as_array().unwrap().is_empty());
    assert_eq!(list("hybrid-overlay-node", "secrets"), serde_json::json!([r"C:\k\bootstrap-ca.crt"]));
    assert_eq!(
        list("windows_exporter", "reloads"),
        serde_json::json!([r"C:\k\tls\certs\tls.crt", r"C:\k\tls\certs\tls.key"])
    );
    let deps = |n: &str| svcs.iter().find(|s| s["name"] == n).unwrap()["dependencies"].clone();
    assert_eq!(deps("kubelet"), serde_json::json!(["containerd"]));
    assert_eq!(deps("hybrid-overlay-node"), serde_json::json!(["kubelet"]));
    assert_eq!(deps("kube-proxy"), serde_json::json!(["hybrid-overlay-node"]));
    let kubelet = command(&svcs, "kubelet");
    assert!(kubelet.contains("--windows-priorityclass=ABOVE_NORMAL_PRIORITY_CLASS"));
    assert!(kubelet.contains("--node-labels=node.openshift.io/os_id=Windows"));
    assert!(command(&svcs, "kube-proxy").contains("--windows-service"));
    // Every file a service names is in the bundle, or written on the node by a step the service runs first.
    let settings = settings(&files);
    for s in &svcs {
        let step_writes = s["preStart"].as_str().map(|step| {
            let script = settings["steps"].as_array().unwrap().iter().find(|x| x["name"] == step).unwrap();
            files[&bundle_path(script["script"].as_str().unwrap())].clone()
        });
        for f in s["files"].as_array().unwrap() {
            let f = f.as_str().unwrap();
            let by_step = step_writes.as_ref().is_some_and(|text| text.contains(&format!("'{f}'")));
            assert!(files.contains_key(&bundle_path(f)) || by_step, "{f}");
        }
    }
    // First boot in WMCO's stages: only containerd and kubelet start before kubelet's kubeconfig exists.
    for s in &svcs {
        let waits = s["requires"].as_array().is_some_and(|r| r.iter().any(|x| x == "C:\\k\\kubeconfig"));
        assert_eq!(!waits, ["containerd", "kubelet"].contains(&s["name"].as_str().unwrap()), "{}", s["name"]);
    }
    assert_eq!(svcs.iter().find(|s| s["name"] == "kube-proxy").unwrap()["preStart"], "network");
}

#[test]
fn every_bundle_keeps_the_node_contract() {
    for name in ["aws", "azure", "gcp", "nutanix", "vsphere", "none"] {
        let files = bundle(&example(name));
        let services = wmrender_contract::ServicesFile::parse(files["node/C/k/wmrender/services.json"].as_bytes())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let settings = wmrender_contract::NodeSettings::parse(files["node/C/k/wmrender/node.json"].as_bytes())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        // Every step script and pre-start step is in the bundle.
        for step in &settings.steps {
            assert!(files.contains_key(&step.script.bundle_path()), "{name}: {}", step.script);
        }
        for s in &services.services {
            if let Some(step) = &s.pre_start {
                assert!(settings.step(step).is_some(), "{name}: {} runs the unknown step {step}", s.name);
            }
        }
    }
}

fn bundle_path(node_path: &str) -> String {
    format!("node/C/{}", node_path.trim_start_matches("C:\\").replace('\\', "/"))
}

fn settings(files: &BTreeMap<String, String>) -> serde_json::Value {
    serde_json::from_str(&files["node/C/k/wmrender/node.json"]).unwrap()
}

fn step<'a>(settings: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    settings["steps"].as_array().unwrap().iter().find(|s| s["name"] == name).unwrap_or_else(|| panic!("no step {name}"))
}

#[test]
fn platform_differences() {
    let aws = bundle(&example("aws"));
    let s = services(&aws);
    assert!(command(&s, "kubelet").contains("--hostname-override=HOSTNAME_OVERRIDE"));
    assert!(
        command(&s, "kubelet").contains("--image-credential-provider-config=C:\\k\\credential-provider-config.yaml")
    );
    assert!(aws.contains_key("node/C/k/credential-provider-config.yaml"));
    let aws_settings = settings(&aws);
    assert_eq!(aws_settings["nodeName"], serde_json::json!({"from": "step", "step": "aws-hostname"}));
    assert!(
        aws[&bundle_path(step(&aws_settings, "aws-hostname")["script"].as_str().unwrap())]
            .contains("169.254.169.254/latest/meta-data/local-hostname")
    );
    let routes = step(&aws_settings, "aws-routes");
    assert_eq!(routes["when"], "every-boot", "Windows forgets the routes at every boot");
    let routes = &aws[&bundle_path(routes["script"].as_str().unwrap())];
    for prefix in ["169.254.169.254/32", "169.254.169.250/32", "169.254.169.251/32", "169.254.169.123/32"] {
        assert!(routes.contains(prefix), "metadata, KMS and time routes: {prefix}");
    }
    assert!(!command(&s, "hybrid-overlay-node").contains("--hybrid-overlay-vxlan-port"));
    assert!(!s.iter().any(|x| x["name"] == "cloud-node-manager"));

    let azure = bundle(&example("azure"));
    let s = services(&azure);
    assert!(!command(&s, "kubelet").contains("--hostname-override"));
    assert!(command(&s, "cloud-node-manager").contains("--node-name=NODE_NAME"));
    let azure_settings = settings(&azure);
    assert_eq!(azure_settings["nodeName"]["from"], "dns-host-name", "the DNS host name, not the NetBIOS name");
    assert!(!azure.values().any(|text| text.contains("169.254.169.254")));

    let gcp = bundle(&example("gcp"));
    assert!(gcp.contains_key("node/C/k/wmrender/gcp-get-hostname.ps1"));
    assert_eq!(settings(&gcp)["nodeName"], serde_json::json!({"from": "step", "step": "gcp-hostname"}));
    assert!(command(&services(&gcp), "kubelet").contains("--hostname-override=HOSTNAME_OVERRIDE"));

    let vsphere = bundle(&example("vsphere"));
    let s = services(&vsphere);
    assert!(command(&s, "hybrid-overlay-node").ends_with("--hybrid-overlay-vxlan-port 9898"));
    assert_eq!(settings(&vsphere)["nodeName"]["from"], "dns-fully-qualified", "vSphere names nodes by FQDN");

    for name in ["nutanix", "none"] {
        let files = bundle(&example(name));
        let s = services(&files);
        assert!(!command(&s, "kubelet").contains("--hostname-override"), "{name}");
        assert!(command(&s, "kubelet").contains("--node-ip=NODE_IP"), "{name}");
        assert!(!files.contains_key("node/C/k/credential-provider-config.yaml"), "{name}");
        assert_eq!(settings(&files)["nodeName"]["from"], "dns-host-name", "{name}");
    }
    let none = services(&bundle(&example("none")));
    assert!(!command(&none, "kubelet").contains("--cloud-provider"), "BYOH-only clusters have no cloud provider");
}

#[test]
fn proxy_values_arrive_unchanged_and_no_proxy_removes_them() {
    let with = settings(&bundle(&example("none")));
    let no_proxy = with["environment"]["NO_PROXY"].as_str().unwrap();
    for entry in [".cluster.local", ".svc", "10.0.0.0/16", "localhost", "127.0.0.1"] {
        assert!(no_proxy.split(',').any(|e| e == entry), "{entry} in {no_proxy}: commas stay commas");
    }
    assert_eq!(with["environment"]["HTTP_PROXY"], "http://proxy.metal-lab.example.com:3128");
    let without = settings(&bundle(&example("aws")));
    assert_eq!(
        without["environment"],
        serde_json::json!({"HTTPS_PROXY": "", "HTTP_PROXY": "", "NO_PROXY": ""}),
        "every variable is listed; an empty value removes it"
    );
}

/// NO_PROXY as the cluster network operator computes it, for every platform example (a proxy added where the
/// example has none): the rule is unit-tested in src/render/node/no_proxy.rs; this shows what each platform gets.
#[test]
fn no_proxy_is_the_clusters_for_every_platform_example() {
    let mut shown = String::new();
    for name in ["aws", "azure", "gcp", "nutanix", "vsphere", "none"] {
        let tmp = tempfile::tempdir().unwrap();
        let mut text = std::fs::read_to_string(example(name)).unwrap();
        if !text.contains("\n  proxy:\n") {
            text = text.replace("spec:\n", "spec:\n  proxy:\n    httpsProxy: http://proxy.example.com:3128\n");
        }
        let inputs = tmp.path().join("wmrender.yaml");
        std::fs::write(&inputs, text).unwrap();
        let env = &settings(&bundle(&inputs))["environment"];
        shown.push_str(&format!("{name}: {}\n", env["NO_PROXY"].as_str().unwrap()));
    }
    insta::assert_snapshot!(shown);
}

#[test]
fn the_bundle_holds_no_secret_material() {
    // Secret files beside the inputs, as a user keeps them for sync: nothing of them may reach the output.
    let tmp = tempfile::tempdir().unwrap();
    let markers = [
        (
            "pull-secret.json",
            r#"{"auths":{"mirror.example.com":{"auth":"U0VDUkVULVBVTEwtTUFSS0VS"}}}"#,
            "U0VDUkVULVBVTEwtTUFSS0VS",
        ),
        ("bootstrap-kubeconfig", "users: [{user: {token: SECRET-TOKEN-MARKER}}]", "SECRET-TOKEN-MARKER"),
        ("kubelet-ca.crt", "-----BEGIN CERTIFICATE-----\nSECRET-CA-MARKER\n", "SECRET-CA-MARKER"),
        ("id_ed25519", "-----BEGIN OPENSSH PRIVATE KEY-----\nSECRET-KEY-MARKER\n", "SECRET-KEY-MARKER"),
    ];
    for (name, content, _) in markers {
        std::fs::write(tmp.path().join(name), content).unwrap();
    }
    let inputs = tmp.path().join("wmrender.yaml");
    std::fs::copy(example("aws"), &inputs).unwrap();
    let out = tmp.path().join("out");
    let o = support::wmrender(&["render", "-f", inputs.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(support::code(&o), 0);
    for (file, bytes) in support::read_tree(&out) {
        let text = String::from_utf8_lossy(&bytes);
        for (_, _, marker) in markers {
            assert!(!text.contains(marker), "{file} contains {marker}");
        }
        assert!(!text.contains("PRIVATE KEY") && !text.contains("BEGIN CERTIFICATE"), "{file}");
        assert!(!text.contains("authorization ="), "{file}");
    }
}
