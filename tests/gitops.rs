//! GitOps contracts: the Argo CD plugin run as the CMP server runs it, the Flux CI check, KRM exchanges,
//! `wmrender diff` for reviews, completions, and Flux's substitution opt-out.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use support::{code, root, stderr, wmrender};

fn bin_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_wmrender")).parent().unwrap().to_path_buf()
}

/// A copy of the repository's examples, as the repo-server unpacks a repository for the sidecar.
fn repo_copy() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let status = Command::new("cp").arg("-r").arg(root().join("examples")).arg(tmp.path()).status().unwrap();
    assert!(status.success());
    tmp
}

/// Runs a CMP command (`command` + `args` of plugin.yaml; `step` is a path such as `generate` or
/// `discover/find`) the way the sidecar does: exec'd directly, in the application directory, with only Argo CD's
/// build environment and the Application's plugin env, stdin closed.
fn run_cmp(step: &str, app_dir: &Path, env: &[(&str, &str)]) -> std::process::Output {
    let plugin: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(root().join("examples/argocd/plugin.yaml")).unwrap()).unwrap();
    let section = step.split('/').fold(&plugin["spec"], |v, k| &v[k]);
    let mut argv: Vec<String> = Vec::new();
    for part in ["command", "args"] {
        for a in section[part].as_array().into_iter().flatten() {
            argv.push(a.as_str().unwrap().to_string());
        }
    }
    assert!(!argv.is_empty(), "plugin.yaml has a command for {step}");
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .current_dir(app_dir)
        .env_clear()
        .env("PATH", format!("{}:/usr/bin:/bin", bin_dir().display()))
        .env("HOME", "/home/argocd")
        .env("ARGOCD_APP_NAME", "windows-nodes")
        .env("ARGOCD_APP_NAMESPACE", "openshift-machine-api")
        .env("ARGOCD_APP_REVISION", "0123456789abcdef0123456789abcdef01234567")
        .env("ARGOCD_APP_SOURCE_PATH", "examples/aws")
        .env("ARGOCD_APP_SOURCE_REPO_URL", "https://git.example.com/platform/clusters.git")
        .env("KUBE_VERSION", "1.35")
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

#[test]
fn argo_cd_generate_prints_only_objects_and_fails_loudly() {
    let repo = repo_copy();
    let plugin: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(root().join("examples/argocd/plugin.yaml")).unwrap()).unwrap();
    assert!(plugin["spec"]["discover"]["fileName"].is_null(), "discovery by a fixed file name refuses WMRENDER_FILE");
    let discovered = |app: &Path, env: &[(&str, &str)]| {
        let o = run_cmp("discover/find", app, env);
        assert_eq!(code(&o), 0, "discovery never fails: {}", stderr(&o));
        !o.stdout.is_empty()
    };
    for platform in ["aws", "azure", "gcp", "nutanix", "vsphere", "none"] {
        let app = repo.path().join("examples").join(platform);
        assert!(discovered(&app, &[]), "discovery finds {platform}");
        let init = run_cmp("init", &app, &[]);
        assert_eq!(code(&init), 0, "{platform} init: {}", stderr(&init));
        assert!(init.stdout.is_empty(), "init prints nothing on stdout");
        let o = run_cmp("generate", &app, &[]);
        assert_eq!(code(&o), 0, "{platform}: {}", stderr(&o));
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&String::from_utf8(o.stdout).unwrap()).unwrap();
        assert!(!docs.is_empty(), "{platform}: never empty with exit 0");
        for d in &docs {
            assert!(
                d["apiVersion"].is_string() && d["kind"].is_string() && d["metadata"]["name"].is_string(),
                "{platform}: {d}"
            );
        }
    }

    // Parameters through plugin.env: another inputs file, strict mode.
    let app = repo.path().join("examples/none");
    std::fs::rename(app.join("wmrender.yaml"), app.join("cluster.yaml")).unwrap();
    assert_ne!(code(&run_cmp("generate", &app, &[])), 0, "no wmrender.yaml: the default file is missing");
    let o = run_cmp("generate", &app, &[("ARGOCD_ENV_WMRENDER_FILE", "cluster.yaml")]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    // Discovery accepts the directory: by the parameter, and by the kind when the parameter is not passed to it.
    assert!(discovered(&app, &[("ARGOCD_ENV_WMRENDER_FILE", "cluster.yaml")]));
    assert!(discovered(&app, &[]));
    // A directory with no inputs at all (the argocd example itself) is not a wmrender application.
    assert!(!discovered(&repo.path().join("examples/argocd"), &[]));
    assert!(!discovered(&repo.path().join("examples/argocd"), &[("ARGOCD_ENV_WMRENDER_FILE", "missing.yaml")]));

    // Invalid inputs: non-zero, diagnostics on stderr, nothing on stdout.
    let app = repo.path().join("examples/aws");
    let text = std::fs::read_to_string(app.join("wmrender.yaml")).unwrap();
    std::fs::write(app.join("wmrender.yaml"), text.replace("region: us-east-1", "regoin: us-east-1")).unwrap();
    for step in ["init", "generate"] {
        let o = run_cmp(step, &app, &[]);
        assert_eq!(code(&o), 2, "{step}");
        assert!(o.stdout.is_empty(), "{step}: nothing on stdout");
        assert!(
            stderr(&o).contains("wmrender.yaml:") && stderr(&o).contains("did you mean `region`?"),
            "{}",
            stderr(&o)
        );
    }

    // Warnings pass, unless WMRENDER_STRICT is set.
    let warn = repo.path().join("examples/gcp");
    let text = std::fs::read_to_string(warn.join("wmrender.yaml")).unwrap();
    let text = text
        + "  mirrors:\n    imageDigestMirrors:\n    - source: \"*.redhat.io\"\n      mirrors: [mirror.example.com/redhat]\n";
    std::fs::write(warn.join("wmrender.yaml"), text).unwrap();
    let o = run_cmp("generate", &warn, &[]);
    assert_eq!(code(&o), 0);
    assert!(stderr(&o).contains("warning: wildcard source"));
    // Only `true` turns strict mode on; `false`, empty and unset leave it off; anything else is an error.
    for step in ["init", "generate"] {
        let o = run_cmp(step, &warn, &[("ARGOCD_ENV_WMRENDER_STRICT", "true")]);
        assert_eq!(code(&o), 2, "{step}");
        assert!(o.stdout.is_empty());
        for off in ["false", ""] {
            let o = run_cmp(step, &warn, &[("ARGOCD_ENV_WMRENDER_STRICT", off)]);
            assert_eq!(code(&o), 0, "{step} with WMRENDER_STRICT={off:?}: {}", stderr(&o));
            assert!(stderr(&o).contains("warning: wildcard source"));
        }
        for bad in ["yes", "TRUE", "1", "ture"] {
            let o = run_cmp(step, &warn, &[("ARGOCD_ENV_WMRENDER_STRICT", bad)]);
            assert_eq!(code(&o), 2, "{step} with WMRENDER_STRICT={bad:?}");
            assert!(o.stdout.is_empty());
            assert!(stderr(&o).contains("expected true or false"), "{}", stderr(&o));
        }
    }
}

#[test]
fn argo_cd_application_respects_ignored_replicas() {
    let app: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(root().join("examples/argocd/application.yaml")).unwrap())
            .unwrap();
    let options: Vec<&str> =
        app["spec"]["syncPolicy"]["syncOptions"].as_array().unwrap().iter().filter_map(|o| o.as_str()).collect();
    let ignores_replicas = app["spec"]["ignoreDifferences"].as_array().into_iter().flatten().any(|d| {
        d["kind"] == "MachineSet" && d["jsonPointers"].as_array().unwrap().iter().any(|p| p == "/spec/replicas")
    });
    assert!(ignores_replicas);
    assert!(options.contains(&"RespectIgnoreDifferences=true"), "ignoreDifferences alone does not stop a sync");
    // The sidecar claims no time-out setting it does not need.
    let patch = std::fs::read_to_string(root().join("examples/argocd/repo-server-patch.yaml")).unwrap();
    assert!(!patch.contains("value: 90s"));
}

#[test]
fn flux_check_script_passes_on_current_output_and_fails_on_stale() {
    let repo = repo_copy();
    let flux = repo.path().join("examples/flux");
    let run = || {
        Command::new("sh")
            .arg(flux.join("check-rendered.sh"))
            .arg(&flux)
            .env("PATH", format!("{}:/usr/bin:/bin", bin_dir().display()))
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let o = run();
    assert_eq!(
        code(&o),
        0,
        "the committed example render is current: {}{}",
        String::from_utf8_lossy(&o.stdout),
        stderr(&o)
    );
    let inputs = flux.join("clusters/prod-east/wmrender.yaml");
    let text = std::fs::read_to_string(&inputs).unwrap();
    std::fs::write(&inputs, text.replace("replicas: 2", "replicas: 5")).unwrap();
    let o = run();
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("+  replicas: 5") && stderr(&o).contains("STALE"), "{}", stderr(&o));
}

#[test]
fn krm_exchanges() {
    let dir = root().join("fixtures/krm");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    cases.sort();
    assert!(cases.len() >= 4);
    for case in cases {
        let name = case.file_name().unwrap().to_string_lossy().trim_end_matches(".in.yaml").to_string();
        let o = Command::new(env!("CARGO_BIN_EXE_wmrender"))
            .arg("krm")
            .current_dir(&dir)
            .stdin(std::fs::File::open(&case).unwrap())
            .output()
            .unwrap();
        let out = String::from_utf8(o.stdout.clone()).unwrap();
        let list: serde_json::Value = serde_saphyr::from_str(&out).unwrap_or_else(|e| panic!("{name}: {e}\n{out}"));
        assert_eq!(
            (list["apiVersion"].as_str(), list["kind"].as_str()),
            (Some("config.kubernetes.io/v1"), Some("ResourceList"))
        );
        let errors = list["results"].as_array().into_iter().flatten().filter(|r| r["severity"] == "error").count();
        assert_eq!(code(&o) != 0, errors > 0, "{name}: exit code follows error results");
        // Items that came in go out unchanged and first (the functionConfig kustomize echoes among them too).
        let input: serde_json::Value = serde_saphyr::from_str(&std::fs::read_to_string(&case).unwrap()).unwrap();
        let given = input["items"].as_array().cloned().unwrap_or_default();
        let returned = list["items"].as_array().cloned().unwrap_or_default();
        assert_eq!(returned[..given.len().min(returned.len())], given[..], "{name}: input items pass through");
        insta::assert_snapshot!(format!("krm__{name}"), out);
    }
}

#[test]
fn diff_summarises_objects_and_node_files_then_shows_diffs() {
    let (_tmp, out) = support::render_to_temp(&root().join("examples/aws/wmrender.yaml"));
    let aws = root().join("examples/aws/wmrender.yaml");
    let o = wmrender(&["diff", "-f", aws.to_str().unwrap(), "--against", out.to_str().unwrap()]);
    assert_eq!(code(&o), 0);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "wmrender diff: no changes\n");

    let tmp = tempfile::tempdir().unwrap();
    let changed = tmp.path().join("wmrender.yaml");
    let text = std::fs::read_to_string(&aws).unwrap().replace("replicas: 2", "replicas: 3").replace(
        "  operator:\n    install: true",
        "  pauseImage: mirror.example.com/oss/kubernetes/pause:3.9\n  operator:\n    install: true",
    );
    std::fs::write(&changed, text).unwrap();
    let o = wmrender(&["diff", "-f", changed.to_str().unwrap(), "--against", out.to_str().unwrap()]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    insta::assert_snapshot!("diff__aws_replicas_and_pause_image", String::from_utf8_lossy(&o.stdout));

    let o =
        wmrender(&["diff", "-f", changed.to_str().unwrap(), "--against", out.to_str().unwrap(), "--output", "json"]);
    assert_eq!(code(&o), 1);
    let review: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(review["objects"][0]["kind"], "MachineSet");
    assert_eq!(review["objects"][0]["change"], "changed");
    assert_eq!(review["nodeFiles"][0]["path"], "C:\\k\\containerd\\containerd_conf.toml");
}

#[test]
fn completions_for_every_shell() {
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let o = wmrender(&["completions", shell]);
        assert_eq!(code(&o), 0, "{shell}");
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.contains("wmrender") && text.contains("render") && text.contains("sync"), "{shell}");
    }
    for sub in ["render", "validate", "diff", "sync", "reboot", "krm", "import", "completions"] {
        let o = wmrender(&[sub, "--help"]);
        assert!(String::from_utf8_lossy(&o.stdout).contains("Examples:"), "{sub} --help has examples");
    }
}

#[test]
fn objects_carrying_substitution_syntax_opt_out_of_flux_substitution() {
    // `${VAR}` would be substituted; `$$` is Flux's escape and would become `$`. A lone `$` is left alone by Flux.
    for (value, flagged_kind) in [("${TEAM}", "MachineSet"), ("team$$cost", "MachineSet"), ("cost$5", "none")] {
        let tmp = tempfile::tempdir().unwrap();
        let inputs = tmp.path().join("wmrender.yaml");
        let text = std::fs::read_to_string(root().join("examples/aws/wmrender.yaml")).unwrap().replace(
            "      instanceType: m5a.large\n",
            &format!("      instanceType: m5a.large\n      tags:\n      - name: owner\n        value: \"{value}\"\n"),
        );
        std::fs::write(&inputs, text).unwrap();
        let o = wmrender(&["render", "-f", inputs.to_str().unwrap(), "--stdout"]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&String::from_utf8(o.stdout).unwrap()).unwrap();
        for d in docs {
            let flagged = d["metadata"]["annotations"]["kustomize.toolkit.fluxcd.io/substitute"] == "disabled";
            assert_eq!(flagged, d["kind"] == flagged_kind, "{value}: {}", d["metadata"]["name"]);
        }
    }
}
