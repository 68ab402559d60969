//! The command-line contract: exit codes, which stream carries what, `--check`, and the atomic output directory.

mod support;

use std::fs;
use support::{code, root, stderr, wmrender};

fn aws() -> String {
    root().join("examples/aws/wmrender.yaml").to_string_lossy().into_owned()
}

#[test]
fn check_is_0_when_current_and_1_with_a_diff_when_a_file_is_edited_removed_or_added() {
    let (_tmp, out) = support::render_to_temp(std::path::Path::new(&aws()));
    let dir = out.to_str().unwrap();
    let check = || wmrender(&["render", "-f", &aws(), "-o", dir, "--check"]);

    let o = check();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(o.stdout.is_empty());

    let rc = out.join("cluster/runtimeclass-windows2022.yaml");
    let original = fs::read_to_string(&rc).unwrap();
    fs::write(&rc, original.replace("runhcs-wcow-process", "runhcs-wcow-hypervisor")).unwrap();
    let o = check();
    assert_eq!(code(&o), 1);
    let err = stderr(&o);
    assert!(err.contains("--- a/cluster/runtimeclass-windows2022.yaml"), "{err}");
    assert!(err.contains("-handler: runhcs-wcow-hypervisor\n+handler: runhcs-wcow-process"), "{err}");
    assert!(err.contains("1 changed, 0 to add, 0 to remove"), "{err}");
    assert!(o.stdout.is_empty());

    fs::write(&rc, &original).unwrap();
    assert_eq!(code(&check()), 0);
    fs::remove_file(out.join("cluster/kustomization.yaml")).unwrap();
    let o = check();
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("0 changed, 1 to add, 0 to remove"));

    let (_tmp2, fresh) = support::render_to_temp(std::path::Path::new(&aws()));
    fs::write(fresh.join("cluster/stray.yaml"), "kind: ConfigMap\n").unwrap();
    let o = wmrender(&["render", "-f", &aws(), "-o", fresh.to_str().unwrap(), "--check"]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("0 changed, 0 to add, 1 to remove"));
}

#[test]
fn render_replaces_the_previous_output_and_drops_stale_files() {
    let tmp = tempfile::tempdir().unwrap();
    let inputs = tmp.path().join("wmrender.yaml");
    let text = fs::read_to_string(aws()).unwrap();
    fs::write(&inputs, &text).unwrap();
    let out = tmp.path().join("out");
    let render = || wmrender(&["render", "-f", inputs.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(code(&render()), 0);
    assert!(out.join("cluster/machineset-prod-east-7xk2p-win2025-b.yaml").exists());

    fs::write(&inputs, text.replace("prod-east-7xk2p-win2025-b", "prod-east-7xk2p-win2025-c")).unwrap();
    assert_eq!(code(&render()), 0);
    assert!(!out.join("cluster/machineset-prod-east-7xk2p-win2025-b.yaml").exists());
    assert!(out.join("cluster/machineset-prod-east-7xk2p-win2025-c.yaml").exists());
    // No temporary siblings are left behind.
    let leftovers: Vec<_> = fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(leftovers.len(), 2, "{leftovers:?}");
}

#[test]
fn render_refuses_to_replace_a_directory_it_did_not_write() {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("precious.txt"), "keep me").unwrap();
    let o = wmrender(&["render", "-f", &aws(), "-o", tmp.path().to_str().unwrap()]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("not written by wmrender"), "{}", stderr(&o));
    assert!(stderr(&o).contains("`precious.txt`"), "{}", stderr(&o));
    assert_eq!(fs::read_to_string(tmp.path().join("precious.txt")).unwrap(), "keep me");
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(code(&wmrender(&["render", "-f", &aws()])), 2, "neither -o nor --stdout");
    assert_eq!(code(&wmrender(&["render", "-f", &aws(), "-o", "x", "--stdout"])), 2);
    assert_eq!(code(&wmrender(&["render", "-f", &aws(), "--stdout", "--check"])), 2);
    let o = wmrender(&["validate", "-f", "/nonexistent/wmrender.yaml"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("cannot read the inputs file"));
}

#[test]
fn validate_reports_on_stderr_or_as_json_on_stdout() {
    let o = wmrender(&["validate", "-f", &aws()]);
    assert_eq!(code(&o), 0);
    assert!(o.stdout.is_empty());
    assert!(stderr(&o).contains("valid"));

    let o = wmrender(&["validate", "-f", &aws(), "--output", "json"]);
    assert_eq!(code(&o), 0);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["errors"], 0);
}

#[test]
fn warnings_go_to_stderr_and_do_not_fail_the_render() {
    let tmp = tempfile::tempdir().unwrap();
    let inputs = tmp.path().join("wmrender.yaml");
    let text = fs::read_to_string(aws()).unwrap().replace(
        "    image: ami-0fedcba9876543210       # the 2025 AMI: each Windows version needs its own image\n",
        "",
    );
    fs::write(&inputs, text).unwrap();
    let o = wmrender(&["render", "-f", inputs.to_str().unwrap(), "--stdout"]);
    assert_eq!(code(&o), 0);
    let err = stderr(&o);
    assert!(err.contains("warning: this MachineSet runs Windows Server 2025"), "{err}");
    assert!(!String::from_utf8_lossy(&o.stdout).contains("warning"));
}

/// The one Secret wmrender renders is `windows-user-data` without the operator, and it holds a public key only
/// (tests/user_data.rs); with WMCO that Secret is WMCO's.
#[test]
fn no_rendered_file_holds_a_secret_but_the_user_data_without_the_operator() {
    for path in support::valid_inputs() {
        let (_tmp, out) = support::render_to_temp(&path);
        let with_operator = fs::read_to_string(out.join("manifest.json")).unwrap().contains("\"with-operator\"");
        for (file, bytes) in support::read_tree(&out) {
            let text = String::from_utf8(bytes).unwrap();
            assert!(!text.contains("PRIVATE KEY"), "{file}");
            if file == "cluster/secret-windows-user-data.yaml" {
                assert!(!with_operator, "{}: the Secret is WMCO's", path.display());
                continue;
            }
            assert!(!text.contains("kind: Secret"), "{file}");
            assert!(!text.contains("userData:"), "{file}");
        }
    }
}

#[test]
fn mirror_warnings_are_reported_and_strict_turns_them_into_errors() {
    let inputs = root().join("fixtures/mirror-warnings/wmrender.yaml");
    let inputs = inputs.to_str().unwrap();
    let o = wmrender(&["render", "-f", inputs, "--stdout"]);
    assert_eq!(code(&o), 0);
    let err = stderr(&o);
    for expected in [
        "containerd would pull `registry.access.redhat.com/ubi9/ubi-minimal` from `example.io/example/ubi9/ubi-minimal`",
        "wildcard source `*.redhat.io` is left out",
        "NeverContactSource covers every image of `quay.io`",
        "none serves the pause image `mcr.microsoft.com/oss/kubernetes/pause:3.9`",
    ] {
        assert!(err.contains(expected), "missing warning {expected:?} in:\n{err}");
    }
    let o = wmrender(&["validate", "-f", inputs, "--output", "json"]);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["warnings"], 4, "{report}");
    assert_eq!(code(&o), 0);

    let o = wmrender(&["render", "-f", inputs, "--stdout", "--strict"]);
    assert_eq!(code(&o), 2);
    assert!(o.stdout.is_empty());
    assert_eq!(code(&wmrender(&["validate", "-f", inputs, "--strict"])), 2);
}

#[test]
fn only_writes_one_part_with_a_manifest_of_that_part() {
    let tmp = tempfile::tempdir().unwrap();
    let inputs = root().join("fixtures/proxy-mirrors/wmrender.yaml");
    let out = tmp.path().join("bundle");
    let o = wmrender(&["render", "-f", inputs.to_str().unwrap(), "-o", out.to_str().unwrap(), "--only", "node"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let files: Vec<String> = support::read_tree(&out).into_iter().map(|(p, _)| p).collect();
    assert!(files.iter().all(|p| p.starts_with("node/") || p == "manifest.json"), "{files:?}");
    assert!(files.contains(&"node/C/k/containerd/registries/registry.redhat.io/hosts.toml".to_string()));
    let manifest = fs::read_to_string(out.join("manifest.json")).unwrap();
    assert!(!manifest.contains("cluster/"));
    let check =
        wmrender(&["render", "-f", inputs.to_str().unwrap(), "-o", out.to_str().unwrap(), "--only", "node", "--check"]);
    assert_eq!(code(&check), 0, "{}", stderr(&check));
    assert_eq!(code(&wmrender(&["render", "-f", inputs.to_str().unwrap(), "--stdout", "--only", "node"])), 2);
}

#[test]
fn every_rendered_toml_file_parses_and_every_hosts_toml_has_a_host_table() {
    for path in support::valid_inputs() {
        let (_tmp, out) = support::render_to_temp(&path);
        for (file, bytes) in support::read_tree(&out) {
            if !file.ends_with(".toml") {
                continue;
            }
            let text = String::from_utf8(bytes).unwrap();
            let doc: toml::Table = text.parse().unwrap_or_else(|e| panic!("{file}: {e}"));
            if file.ends_with("/hosts.toml") {
                // containerd 1.6 ignores a hosts.toml without any [host] table and falls back to the source.
                let hosts = doc.get("host").and_then(|h| h.as_table()).expect("a [host] table");
                assert!(!hosts.is_empty(), "{file}");
                assert!(doc.get("server").and_then(|s| s.as_str()).is_some_and(|s| s.starts_with("https://")));
                assert!(!text.contains("authorization"), "{file}: no credentials in rendered files");
            }
        }
    }
}
