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
    let tmp = tempfile::tempdir().unwrap();
    let inputs = tmp.path().join("wmrender.yaml");
    let o = import(platform, image, &inputs);
    assert_eq!(code(&o), 0, "{platform}: {}", stderr(&o));
    let text = std::fs::read_to_string(&inputs).unwrap();
    let out = tmp.path().join("out");
    let o = wmrender(&["render", "-f", inputs.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{platform}: the imported inputs render: {}", stderr(&o));
    let specs = support::read_tree(&out)
        .into_iter()
        .filter(|(p, _)| p.starts_with("cluster/machineset-"))
        .map(|(_, b)| {
            let ms: serde_json::Value = serde_saphyr::from_slice(&b).unwrap();
            ms["spec"]["template"]["spec"]["providerSpec"]["value"].clone()
        })
        .collect();
    (specs, text)
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
