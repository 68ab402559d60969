//! The `windows-user-data` Secret rendered without the operator: present exactly when MachineSets need it, in the
//! layout of each platform's Machine actuator, applied before the MachineSets, a PowerShell script that parses
//! (tree-sitter-powershell), and nothing in it but the public key of the inputs. A private key given as the
//! public one is refused without being shown.

mod support;

use support::powershell::powershell_problems;

use std::path::Path;

const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEivnOQOwpFfgIiplCNH1jWkEmNppWw2KdSLHn7d3tKp";

/// The rendered Secret of an inputs file, parsed, if there is one.
fn secret(inputs: &Path) -> Option<serde_json::Value> {
    let (_tmp, out) = support::render_to_temp(inputs);
    let text = std::fs::read_to_string(out.join("cluster/secret-windows-user-data.yaml")).ok()?;
    Some(serde_saphyr::from_str(&text).expect("the Secret is YAML"))
}

fn user_data(secret: &serde_json::Value) -> String {
    secret["stringData"]["userData"].as_str().expect("stringData.userData").to_string()
}

/// The script inside the platform's wrapping, and whether it was wrapped.
fn script(user_data: &str) -> (&str, bool) {
    match user_data
        .strip_prefix("<powershell>\n")
        .and_then(|s| s.strip_suffix("</powershell>\n<persist>true</persist>\n"))
    {
        Some(s) => (s, true),
        None => (user_data, false),
    }
}

#[test]
fn every_machine_platform_without_the_operator_gets_a_parsing_script_with_only_the_public_key() {
    let mut seen = Vec::new();
    for inputs in support::valid_inputs() {
        let name = support::case_name(&inputs);
        let text = std::fs::read_to_string(&inputs).expect("inputs");
        let Some(secret) = secret(&inputs) else {
            assert!(!text.contains("sshPublicKey"), "{name}: a key but no Secret");
            continue;
        };
        assert_eq!(secret["metadata"]["name"], "windows-user-data");
        assert_eq!(secret["metadata"]["namespace"], "openshift-machine-api");
        assert_eq!(secret["type"], "Opaque");
        // Before the MachineSets (wave 3), which reference it.
        assert_eq!(secret["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"], "2");
        let data = user_data(&secret);
        let (script, wrapped) = script(&data);
        let gcp = text.contains("    gcp:");
        assert_eq!(wrapped, !gcp, "{name}: GCP's actuator takes the bare script, every other one the tags");
        assert_eq!(script.contains("run-task add-routes --persistent"), text.contains("    aws:"), "{name}");
        let problems = powershell_problems(script);
        assert!(problems.is_empty(), "{name}: {problems:?}\n{script}");

        // No private material: no PEM armour, no OpenSSH private-key magic, and the only key is the inputs' one.
        assert!(!data.contains("PRIVATE KEY") && !data.contains("b3BlbnNzaC1rZXktdjE"), "{name}");
        let keys: Vec<&str> = data.match_indices("ssh-ed25519 ").map(|(i, _)| &data[i..]).collect();
        assert_eq!(keys.len(), 1, "{name}: one key line");
        assert!(keys[0].starts_with(&format!("{KEY}'")), "{name}: the key without its comment, quoted");
        assert!(!data.contains("wmrender-example"), "{name}: the key's comment stays out");
        for step in
            ["OpenSSH.Server~~~~0.0.1.0", "administrators_authorized_keys", "OpenSSH-Server-In-TCP", "-LocalPort 22"]
        {
            assert!(script.contains(step), "{name}: {step}");
        }
        seen.push(name);
    }
    for expected in ["examples/azure", "examples/gcp", "examples/nutanix", "fixtures/aws-defaults"] {
        assert!(seen.iter().any(|s| s == expected), "{expected} renders the Secret: {seen:?}");
    }
}

#[test]
fn no_secret_with_the_operator_or_without_machines() {
    // AWS and vSphere run WMCO (the key is WMCO's to derive); platform none has no Machines.
    for example in ["examples/aws/wmrender.yaml", "examples/vsphere/wmrender.yaml", "examples/none/wmrender.yaml"] {
        assert!(secret(&support::root().join(example)).is_none(), "{example}");
    }
}

#[test]
fn a_key_that_is_not_used_is_a_warning() {
    let cases = [
        ("examples/aws/wmrender.yaml", "\n  operator:\n", "`sshPublicKey` is not used: with the operator"),
        ("fixtures/mirror-warnings/wmrender.yaml", "\n  network:\n", "`sshPublicKey` is not used: platform `none`"),
    ];
    for (inputs, before, warning) in cases {
        let tmp = tempfile::tempdir().expect("tempdir");
        let text = std::fs::read_to_string(support::root().join(inputs)).expect("inputs");
        let with_key = text.replacen(before, &format!("\n  sshPublicKey: {KEY}{before}"), 1);
        assert_ne!(with_key, text);
        let file = tmp.path().join("wmrender.yaml");
        std::fs::write(&file, with_key).expect("write");
        let o = support::wmrender(&[
            "render",
            "-f",
            file.to_str().unwrap(),
            "-o",
            tmp.path().join("out").to_str().unwrap(),
        ]);
        assert_eq!(support::code(&o), 0, "{inputs}");
        assert!(support::stderr(&o).contains(warning), "{inputs}: {}", support::stderr(&o));
        assert!(!tmp.path().join("out/cluster/secret-windows-user-data.yaml").exists(), "{inputs}");
    }
}

#[test]
fn a_private_key_is_refused_without_showing_it() {
    let file = support::root().join("fixtures/invalid/ssh-key-private.yaml");
    for format in ["human", "json"] {
        let o = support::wmrender(&["validate", "-f", file.to_str().unwrap(), "--output", format]);
        assert_eq!(support::code(&o), 2);
        let shown = format!("{}{}", support::stderr(&o), String::from_utf8_lossy(&o.stdout));
        assert!(shown.contains("this is a private key"), "{shown}");
        assert!(shown.contains("spec.sshPublicKey"), "{shown}");
        for secret in ["BEGIN OPENSSH", "b3BlbnNzaC1rZXktdjE", "SYNTHETIC-NOT-A-KEY"] {
            assert!(!shown.contains(secret), "{format}: {secret} shown:\n{shown}");
        }
    }
}
