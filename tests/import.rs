//! `wmrender import --from-dir`: realistic `oc get -o yaml` dumps → inputs → render, and the rendered Windows
//! MachineSets follow the cluster's own conventions (copied from its Linux worker MachineSets).

mod support;

use std::path::Path;
use support::{code, root, stderr, wmrender};

const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEivnOQOwpFfgIiplCNH1jWkEmNppWw2KdSLHn7d3tKp";

fn import(platform: &str, image: &str, out: &Path) -> std::process::Output {
    let dump = root().join("fixtures/import").join(platform);
    let key = out.with_extension("pub");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    std::fs::write(&key, format!("{KEY} ops@example\n")).unwrap();
    wmrender(&[
        "import",
        "--from-dir",
        dump.to_str().unwrap(),
        "--image",
        image,
        "--ssh-public-key",
        key.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ])
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

/// The public key is the one value no cluster object holds: import needs it, reads the key line of a `.pub` file,
/// and refuses a private key without echoing it or writing anything.
#[test]
fn import_needs_the_public_key_and_refuses_a_private_one() {
    let tmp = tempfile::tempdir().unwrap();
    let dump = root().join("fixtures/import/aws");
    let out = tmp.path().join("wmrender.yaml");
    let run = |extra: &[&str]| {
        let mut args = vec!["import", "--from-dir", dump.to_str().unwrap(), "--image", "ami-0123456789abcdef0"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["-o", out.to_str().unwrap()]);
        wmrender(&args)
    };
    let o = run(&[]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("needs --ssh-public-key"), "{}", stderr(&o));
    assert!(!out.exists());

    let private = tmp.path().join("id_ed25519");
    let secret = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW";
    std::fs::write(
        &private,
        format!("-----BEGIN OPENSSH PRIVATE KEY-----\n{secret}\n-----END OPENSSH PRIVATE KEY-----\n"),
    )
    .unwrap();
    let o = run(&["--ssh-public-key", private.to_str().unwrap()]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("private key"), "{}", stderr(&o));
    assert!(!stderr(&o).contains(secret) && !String::from_utf8_lossy(&o.stdout).contains(secret));
    assert!(!out.exists());

    let public = tmp.path().join("id_ed25519.pub");
    std::fs::write(&public, format!("# ops key\n\n{KEY} ops@example\n")).unwrap();
    let o = run(&["--ssh-public-key", public.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains(&format!("sshPublicKey: {KEY} ops@example\n")), "{text}");
}
