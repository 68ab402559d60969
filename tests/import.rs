//! `wmrender import --from-dir`: realistic `oc get -o yaml` dumps → inputs → render, and the rendered Windows
//! MachineSets follow the cluster's own conventions (copied from its Linux worker MachineSets).

mod support;

use std::path::Path;
use support::{code, root, stderr, wmrender};

fn import(platform: &str, image: &str, out: &Path) -> std::process::Output {
    let dump = root().join("fixtures/import").join(platform);
    wmrender(&["import", "--from-dir", dump.to_str().unwrap(), "--image", image, "-o", out.to_str().unwrap()])
}

/// Imports, renders, and returns the providerSpec of every rendered Windows MachineSet and the inputs text.
fn round_trip(platform: &str, image: &str) -> (Vec<serde_json::Value>, String) {
    let (tree, text) = import_and_render(platform, image);
    let specs = tree
        .into_iter()
        .filter(|(p, _)| p.starts_with("cluster/machineset-"))
        .map(|(_, b)| {
            let ms: serde_json::Value = serde_saphyr::from_slice(&b).unwrap();
            ms["spec"]["template"]["spec"]["providerSpec"]["value"].clone()
        })
        .collect();
    (specs, text)
}

/// Imports, renders, and returns the rendered files and the inputs text.
fn import_and_render(platform: &str, image: &str) -> (Vec<(String, Vec<u8>)>, String) {
    let tmp = tempfile::tempdir().unwrap();
    let inputs = tmp.path().join("wmrender.yaml");
    let o = import(platform, image, &inputs);
    assert_eq!(code(&o), 0, "{platform}: {}", stderr(&o));
    let text = std::fs::read_to_string(&inputs).unwrap();
    let out = tmp.path().join("out");
    let o = wmrender(&["render", "-f", inputs.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{platform}: the imported inputs render: {}", stderr(&o));
    (support::read_tree(&out), text)
}

/// The Proxy's status already holds the cluster's own addresses, which the render adds again as the network
/// operator does: the node's NO_PROXY then holds each entry once and is exactly the cluster's status list.
#[test]
fn an_imported_proxy_status_is_the_nodes_no_proxy_without_duplicates() {
    let (tree, text) = import_and_render("aws", "ami-0123456789abcdef0");
    let proxy: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(root().join("fixtures/import/aws/proxy.yaml")).unwrap())
            .unwrap();
    let status = proxy["status"]["noProxy"].as_str().unwrap();
    assert_ne!(status, proxy["spec"]["noProxy"].as_str().unwrap(), "the fixture's status and spec differ");
    for entry in status.split(',') {
        assert!(
            text.contains(&format!("\n    - {entry}\n")) || text.contains(&format!("\n    - \"{entry}\"\n")),
            "{entry}"
        );
    }
    assert!(text.contains("# proxy: from the cluster Proxy's status"), "the difference is said in the file: {text}");
    let settings = tree.iter().find(|(p, _)| p.ends_with("/node.json")).expect("the node settings");
    let settings: serde_json::Value = serde_json::from_slice(&settings.1).unwrap();
    let no_proxy = settings["environment"]["NO_PROXY"].as_str().unwrap();
    let entries: Vec<&str> = no_proxy.split(',').collect();
    let unique: std::collections::BTreeSet<&str> = entries.iter().copied().collect();
    assert_eq!(entries.len(), unique.len(), "no entry twice: {no_proxy}");
    assert_eq!(no_proxy, status, "the node gets the cluster's own list");
}

#[test]
fn aws_windows_machinesets_follow_the_linux_workers() {
    let (specs, text) = round_trip("aws", "ami-0123456789abcdef0");
    assert_eq!(specs.len(), 2, "one per worker zone");
    for spec in &specs {
        let zone = spec["placement"]["availabilityZone"].as_str().unwrap();
        assert_eq!(spec["placement"]["region"], "us-east-1");
        assert_eq!(spec["subnet"]["filters"][0]["values"][0], format!("prod-east-7xk2p-subnet-private-{zone}"));
        assert_eq!(spec["securityGroups"][0]["filters"][0]["values"][0], "prod-east-7xk2p-node");
        assert_eq!(spec["securityGroups"][1]["filters"][0]["values"][0], "prod-east-7xk2p-lb");
        assert_eq!(spec["iamInstanceProfile"]["id"], "prod-east-7xk2p-worker-profile");
        assert_eq!(spec["ami"]["id"], "ami-0123456789abcdef0", "the Windows image, not the workers' RHCOS AMI");
        assert_eq!(spec["userDataSecret"]["name"], "windows-user-data");
    }
    insta::assert_snapshot!("import__aws", text);
}

#[test]
fn azure_windows_machinesets_follow_the_linux_workers() {
    let (specs, text) = round_trip("azure", "MicrosoftWindowsServer:WindowsServer:2022-datacenter:latest");
    let spec = &specs[0];
    for (key, value) in [
        ("location", "centralus"),
        ("resourceGroup", "azprod-q8w2d-rg"),
        ("networkResourceGroup", "azprod-network-rg"),
        ("vnet", "azprod-vnet"),
        ("subnet", "azprod-worker-subnet"),
        ("publicLoadBalancer", "azprod-q8w2d"),
        ("managedIdentity", "azprod-q8w2d-identity"),
        ("zone", "1"),
    ] {
        assert_eq!(spec[key], value, "{key}");
    }
    assert_eq!(spec["osDisk"]["osType"], "Windows");
    assert_eq!(spec["image"]["sku"], "2022-datacenter");
    insta::assert_snapshot!("import__azure", text);
}

#[test]
fn vsphere_windows_machinesets_follow_the_linux_workers() {
    let (specs, text) = round_trip("vsphere", "windows-golden-images/windows-server-2022-template");
    let spec = &specs[0];
    assert_eq!(
        spec["workspace"],
        serde_json::json!({"datacenter": "dc1", "datastore": "/dc1/datastore/datastore1", "folder": "/dc1/vm/vs-dc1-5ddjd",
                           "resourcePool": "/dc1/host/cluster1/Resources", "server": "vcenter.example.com"})
    );
    assert_eq!(spec["network"]["devices"][0]["networkName"], "VM Network");
    assert_eq!(spec["template"], "windows-golden-images/windows-server-2022-template");
    assert!(text.contains("hybridOverlayVXLANPort: 9898"), "the custom VXLAN port comes from the operator config");
    insta::assert_snapshot!("import__vsphere", text);
}

#[test]
fn import_explains_what_is_missing_and_never_overwrites() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("wmrender.yaml");
    let dump = root().join("fixtures/import/aws");
    let o = wmrender(&["import", "--from-dir", dump.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("needs --image"), "{}", stderr(&o));
    assert!(!out.exists());

    assert_eq!(code(&import("aws", "ami-0123456789abcdef0", &out)), 0);
    let o = import("aws", "ami-0123456789abcdef0", &out);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("--force"));

    let empty = tempfile::tempdir().unwrap();
    let o = wmrender(&["import", "--from-dir", empty.path().to_str().unwrap(), "-o", out.to_str().unwrap(), "--force"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("no Infrastructure object"));
}

/// A stand-in for the Kubernetes API on 127.0.0.1: serves the AWS dump objects at their API paths, 404 elsewhere,
/// and records every request line so the test can check that import only reads.
fn fake_api() -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufRead, BufReader, Write};
    let dump = root().join("fixtures/import/aws");
    let mut objects: Vec<serde_json::Value> = Vec::new();
    for f in [
        "infrastructure.yaml",
        "network-config.yaml",
        "network-operator.yaml",
        "proxy.yaml",
        "mirrors.yaml",
        "worker-machinesets.yaml",
    ] {
        let doc: serde_json::Value = serde_saphyr::from_str(&std::fs::read_to_string(dump.join(f)).unwrap()).unwrap();
        match doc["items"].as_array() {
            Some(items) => objects.extend(items.iter().cloned()),
            None => objects.push(doc),
        }
    }
    let of = |api: &str, kind: &str| {
        objects
            .iter()
            .filter(|o| o["kind"] == kind && o["apiVersion"].as_str().unwrap().starts_with(api))
            .cloned()
            .collect::<Vec<_>>()
    };
    let list = |api_version: &str, kind: &str, items: Vec<serde_json::Value>| {
        // API lists carry apiVersion and kind on the list, not on each item.
        let items: Vec<serde_json::Value> = items
            .into_iter()
            .map(|mut i| {
                i.as_object_mut().unwrap().remove("kind");
                i.as_object_mut().unwrap().remove("apiVersion");
                i
            })
            .collect();
        serde_json::json!({"apiVersion": api_version, "kind": format!("{kind}List"), "items": items})
    };
    let mut routes: std::collections::BTreeMap<&str, serde_json::Value> = std::collections::BTreeMap::new();
    routes.insert(
        "/apis/config.openshift.io/v1/infrastructures/cluster",
        of("config.openshift.io", "Infrastructure")[0].clone(),
    );
    routes.insert("/apis/config.openshift.io/v1/networks/cluster", of("config.openshift.io", "Network")[0].clone());
    routes.insert("/apis/operator.openshift.io/v1/networks/cluster", of("operator.openshift.io", "Network")[0].clone());
    routes.insert("/apis/config.openshift.io/v1/proxies/cluster", of("config.openshift.io", "Proxy")[0].clone());
    routes.insert(
        "/apis/config.openshift.io/v1/imagedigestmirrorsets",
        list("config.openshift.io/v1", "ImageDigestMirrorSet", of("config.openshift.io", "ImageDigestMirrorSet")),
    );
    routes.insert(
        "/apis/config.openshift.io/v1/imagetagmirrorsets",
        list("config.openshift.io/v1", "ImageTagMirrorSet", of("config.openshift.io", "ImageTagMirrorSet")),
    );
    routes.insert(
        "/apis/machine.openshift.io/v1beta1/namespaces/openshift-machine-api/machinesets",
        list("machine.openshift.io/v1beta1", "MachineSet", of("machine.openshift.io", "MachineSet")),
    );
    let routes: std::collections::BTreeMap<String, String> =
        routes.into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).is_err() || header == "\r\n" || header.is_empty() {
                    break;
                }
            }
            log.lock().unwrap().push(line.trim().to_string());
            let path = line.split_whitespace().nth(1).unwrap_or("").split('?').next().unwrap_or("").to_string();
            let (status, body) = match routes.get(&path) {
                Some(b) => ("200 OK", b.clone()),
                None => ("404 Not Found", r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"not found","reason":"NotFound","code":404}"#.to_string()),
            };
            let mut s = stream;
            let _ = write!(
                s,
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (port, seen)
}

#[test]
fn import_from_a_live_cluster_reads_the_same_objects_and_only_reads() {
    let (port, seen) = fake_api();
    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = tmp.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:{port}\n\
             users:\n- name: u\n  user:\n    token: not-a-real-token\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n\
             current-context: x\n"
        ),
    )
    .unwrap();
    let live = tmp.path().join("live/wmrender.yaml");
    let o = wmrender(&[
        "import",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--image",
        "ami-0123456789abcdef0",
        "-o",
        live.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let dumped = tmp.path().join("dumped/wmrender.yaml");
    assert_eq!(code(&import("aws", "ami-0123456789abcdef0", &dumped)), 0);
    let body = |p: &Path| std::fs::read_to_string(p).unwrap().lines().skip(2).collect::<Vec<_>>().join("\n");
    assert_eq!(body(&live), body(&dumped), "the live import equals the import of the dumps");
    for rel in ["mirrors/imagedigestmirrorset-release-mirrors.yaml", "mirrors/imagetagmirrorset-windows-pause.yaml"] {
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("live").join(rel)).unwrap(),
            std::fs::read_to_string(tmp.path().join("dumped").join(rel)).unwrap()
        );
    }
    let requests = seen.lock().unwrap().clone();
    assert!(requests.len() >= 7, "{requests:?}");
    assert!(requests.iter().all(|r| r.starts_with("GET ")), "read-only: {requests:?}");
}
