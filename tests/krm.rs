//! `wmrender krm` with the real tools: kpt (`fn eval --exec`, a Kptfile pipeline under `fn render`) and kubectl's
//! embedded kustomize (legacy exec generator plugin), plus the byte-for-byte pass-through of foreign items.
//! kubectl is the one the cluster tests build (tests/apiserver/build.sh, Kubernetes v1.36.3 with kustomize v5.8.1).
//! kpt cannot be built here (the Go module proxy does not serve what it needs): each kpt test is skipped, with the
//! reason printed, when kpt is not installed.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use support::{code, root, stderr};

fn wmrender_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_wmrender"))
}

/// The installed tool, or `None` with the reason printed.
fn tool(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/local/bin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file());
    if found.is_none() {
        eprintln!("SKIPPED: `{name}` is not installed on this machine");
    }
    found
}

fn run(cmd: &mut Command) -> Output {
    cmd.stdin(Stdio::null()).output().expect("running a tool")
}

fn krm(input: &str, dir: &Path) -> Output {
    let mut child = Command::new(wmrender_bin())
        .arg("krm")
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), input.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// Every file under `dir` (but `.git`), by relative path.
fn tree(dir: &Path) -> BTreeMap<String, String> {
    support::read_tree(dir)
        .into_iter()
        .filter(|(p, _)| !p.starts_with(".git/"))
        .map(|(p, b)| (p, String::from_utf8(b).unwrap()))
        .collect()
}

/// `render -o`'s cluster objects, by file name (without the kustomization.yaml, which is not a KRM item).
fn render_o_cluster_files(inputs: &Path) -> BTreeMap<String, String> {
    let (_tmp, out) = support::render_to_temp(inputs);
    tree(&out.join("cluster")).into_iter().filter(|(p, _)| p != "kustomization.yaml").collect()
}

const INPUTS: &str = "apiVersion: wmrender.dev/v1alpha1
kind: ClusterInputs
metadata:
  name: krm-pkg
  annotations:
    config.kubernetes.io/local-config: \"true\"
spec:
  # The cluster's identity, from infrastructure/cluster.
  infrastructureID: krm-pkg-1
  apiServerInternalURL: https://api-int.krm.example.com:6443
  platform:
    aws:
      region: us-east-1
      ami: ami-0123456789abcdef0
  machineSets:
  - zone: us-east-1a
  sshPublicKey: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEivnOQOwpFfgIiplCNH1jWkEmNppWw2KdSLHn7d3tKp
  network:
    hybridClusterNetwork: [10.132.0.0/14]
";

/// A package with foreign files in awkward YAML and the ClusterInputs; `pipeline` is the Kptfile's mutator list
/// (empty: no pipeline).
fn package(dir: &Path, pipeline: &str) {
    std::fs::create_dir_all(dir.join("apps")).unwrap();
    std::fs::write(
        dir.join("Kptfile"),
        match pipeline {
            "" => "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: windows\n".to_string(),
            _ => format!(
                "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: windows\npipeline:\n  mutators:\n{pipeline}"
            ),
        },
    )
    .unwrap();
    std::fs::write(dir.join("wmrender.yaml"), INPUTS).unwrap();
    std::fs::write(
        dir.join("apps/config.yaml"),
        "# owned by the app team\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  mode: 0400\n  \
         flag: on\n  answer: NO   # YAML 1.1 would say false\n  text: |\n    two\n    lines\n---\napiVersion: v1\n\
         kind: Secret\nmetadata: {name: s, labels: {tier: \"1\"}}\ntype: Opaque\n",
    )
    .unwrap();
}

#[test]
fn foreign_items_and_the_function_config_come_back_byte_for_byte() {
    let case = root().join("fixtures/krm/passthrough-corpus.in.yaml");
    let input = std::fs::read_to_string(&case).unwrap();
    let o = krm(&input, &root().join("fixtures/krm"));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    let (items, config) = input.split_at(input.find("functionConfig:").unwrap());
    assert!(out.starts_with(items), "the items section (comments, anchors, octal, YAML 1.1 booleans) is a prefix");
    assert!(out.contains(config), "the functionConfig section comes back as it came");
    let list: serde_json::Value = serde_saphyr::from_str(&out).unwrap();
    let kinds: Vec<&str> = list["items"].as_array().unwrap().iter().map(|i| i["kind"].as_str().unwrap()).collect();
    assert_eq!(&kinds[..3], ["ConfigMap", "Secret", "Deployment"]);
    assert!(kinds[3..].contains(&"ConfigMap") && kinds.len() > 3, "the render is appended: {kinds:?}");
    // A second pass over the first answer replaces the generated items instead of adding copies.
    let o2 = krm(&out, &root().join("fixtures/krm"));
    assert_eq!(String::from_utf8(o2.stdout).unwrap(), out, "krm over its own output is a fixed point");
}

#[test]
fn generated_items_carry_paths_named_like_render_files() {
    let tmp = tempfile::tempdir().unwrap();
    let config = INPUTS.replace('\n', "\n  ");
    let input = format!(
        "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\nfunctionConfig:\n  {}\n",
        config.trim_end()
    );
    let o = krm(&input, tmp.path());
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let list: serde_json::Value = serde_saphyr::from_str(&String::from_utf8(o.stdout).unwrap()).unwrap();
    std::fs::write(tmp.path().join("wmrender.yaml"), INPUTS).unwrap();
    let expected = render_o_cluster_files(&tmp.path().join("wmrender.yaml"));
    let mut paths = Vec::new();
    for item in list["items"].as_array().unwrap() {
        let a = &item["metadata"]["annotations"];
        assert_eq!(a["internal.config.kubernetes.io/path"], a["config.kubernetes.io/path"]);
        let path = a["config.kubernetes.io/path"].as_str().unwrap();
        paths.push(path.strip_prefix("cluster/").expect("under cluster/").to_string());
    }
    paths.sort();
    assert_eq!(paths, expected.into_keys().collect::<Vec<_>>());
}

#[test]
fn kpt_fn_eval_exec_adds_the_render_and_changes_nothing_else() {
    let Some(kpt) = tool("kpt") else { return };
    let tmp = tempfile::tempdir().unwrap();
    let (noop, fun) = (tmp.path().join("noop"), tmp.path().join("fun"));
    package(&noop, "");
    package(&fun, "");
    // What kpt writes with a function that changes nothing: kpt itself reformats some YAML.
    let o = run(Command::new(&kpt).args(["fn", "eval", "--exec", "/bin/cat", "."]).current_dir(&noop));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let exec = format!("{} krm", wmrender_bin().display());
    let o = run(Command::new(&kpt)
        .args(["fn", "eval", "--exec", &exec, "--fn-config", "wmrender.yaml", "."])
        .current_dir(&fun));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let (before, after) = (tree(&noop), tree(&fun));
    for (path, text) in &before {
        assert_eq!(after.get(path), Some(text), "{path} is what kpt writes with a no-op function");
    }
    let added: BTreeMap<String, String> = after
        .iter()
        .filter(|(p, _)| !before.contains_key(*p))
        .map(|(p, t)| (p.strip_prefix("cluster/").unwrap_or(p).to_string(), t.clone()))
        .collect();
    assert_eq!(added, render_o_cluster_files(&fun.join("wmrender.yaml")), "the same files as `render -o`");
}

#[test]
fn kpt_fn_render_pipeline_twice_is_a_no_op_and_renames_replace() {
    let Some(kpt) = tool("kpt") else { return };
    let tmp = tempfile::tempdir().unwrap();
    let pkg = tmp.path().join("windows");
    package(&pkg, &format!("  - exec: {} krm\n    configPath: wmrender.yaml\n", wmrender_bin().display()));
    // kpt runs exec functions from its own working directory: run it from elsewhere, as a user would.
    let render = || run(Command::new(&kpt).args(["fn", "render", "--allow-exec"]).arg(&pkg).current_dir(tmp.path()));
    let o = render();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let first = tree(&pkg);
    assert_eq!(first.get("wmrender.yaml").map(String::as_str), Some(INPUTS), "the functionConfig file is kept");
    let generated: BTreeMap<String, String> =
        first.iter().filter_map(|(p, t)| p.strip_prefix("cluster/").map(|p| (p.to_string(), t.clone()))).collect();
    assert_eq!(generated, render_o_cluster_files(&pkg.join("wmrender.yaml")));
    let o = render();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(tree(&pkg), first, "a second render changes nothing");

    // A new zone renames the MachineSet: the old file goes, no copy is left behind.
    std::fs::write(pkg.join("wmrender.yaml"), INPUTS.replace("us-east-1a", "us-east-1b")).unwrap();
    let o = render();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let files: Vec<String> = tree(&pkg).into_keys().filter(|p| p.starts_with("cluster/machineset")).collect();
    assert_eq!(files, ["cluster/machineset-krm-pkg-1-windows-worker-us-east-1b.yaml"]);
}

#[test]
fn kpt_shows_errors_at_the_line_of_the_users_file() {
    let Some(kpt) = tool("kpt") else { return };
    let tmp = tempfile::tempdir().unwrap();
    let pkg = tmp.path().join("windows");
    package(&pkg, &format!("  - exec: {} krm\n    configPath: wmrender.yaml\n", wmrender_bin().display()));
    let bad = INPUTS.replace("      region: us-east-1", "      regoin: us-east-1");
    std::fs::write(pkg.join("wmrender.yaml"), &bad).unwrap();
    let line = bad.lines().position(|l| l.contains("regoin")).unwrap() + 1;
    let results = tmp.path().join("results");
    std::fs::create_dir(&results).unwrap();
    let before = tree(&pkg);
    let o = run(Command::new(&kpt)
        .args(["fn", "render", "--allow-exec", "--truncate-output=false", "--results-dir"])
        .arg(&results)
        .arg(&pkg)
        .current_dir(tmp.path()));
    assert_ne!(code(&o), 0);
    assert_eq!(tree(&pkg), before, "nothing written on errors");
    let shown = format!("{}:{line}:7", pkg.join("wmrender.yaml").display());
    assert!(stderr(&o).contains(&shown), "cargo-style diagnostics name the user's file: {}", stderr(&o));
    let list: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(results.join("results.yaml")).unwrap()).unwrap();
    let r = list["items"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["field"]["path"] == "spec.platform.aws.regoin")
        .expect("a result for the unknown field");
    assert_eq!(r["severity"], "error");
    assert_eq!(r["resourceRef"]["kind"], "ClusterInputs");
    assert_eq!(r["resourceRef"]["name"], "krm-pkg");
    assert_eq!(r["file"]["path"], "wmrender.yaml");
    assert!(r["message"].as_str().unwrap().starts_with(&format!("line {line}, column 7: unknown field")), "{r}");
}

#[test]
fn kubectl_kustomize_runs_the_legacy_generator_plugin() {
    // The kubectl the cluster tests build (tests/apiserver/build.sh), at their Kubernetes release: always there.
    let kubectl = support::apiserver::assets().join("kubectl");
    assert!(kubectl.is_file(), "{} is missing: run `bash tests/apiserver/build.sh` (Go)", kubectl.display());
    let tmp = tempfile::tempdir().unwrap();
    let status = Command::new("cp").arg("-r").arg(root().join("examples/kustomize")).arg(tmp.path()).status().unwrap();
    assert!(status.success());
    let dir = tmp.path().join("kustomize");
    let path = format!("{}:/usr/bin:/bin", wmrender_bin().parent().unwrap().display());
    let build = || {
        run(Command::new(&kubectl)
            .args(["kustomize", "--enable-alpha-plugins", "app"])
            .current_dir(&dir)
            .env("PATH", &path)
            .env("KUSTOMIZE_PLUGIN_HOME", dir.join("plugin")))
    };
    let o = build();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let ours = support::wmrender(&["render", "--stdout", "-f", dir.join("app/wmrender.yaml").to_str().unwrap()]);
    let parse = |b: &[u8]| {
        let mut docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(std::str::from_utf8(b).unwrap()).unwrap();
        docs.sort_by_key(|d| (d["kind"].to_string(), d["metadata"]["name"].to_string()));
        docs
    };
    assert_eq!(parse(&o.stdout), parse(&ours.stdout), "kustomize builds the objects `render --stdout` prints");

    let inputs = dir.join("app/wmrender.yaml");
    let text = std::fs::read_to_string(&inputs).unwrap();
    std::fs::write(&inputs, text.replace("username: Administrator", "usrname: Administrator")).unwrap();
    let line = text.lines().position(|l| l.contains("username: Administrator")).unwrap() + 1;
    let o = build();
    assert_ne!(code(&o), 0);
    assert!(o.stdout.is_empty());
    assert!(
        stderr(&o).contains(&format!("wmrender.yaml:{line}:")) && stderr(&o).contains("did you mean `username`?"),
        "kustomize shows the plugin's stderr, lines in the user's file: {}",
        stderr(&o)
    );
}

#[test]
fn kpt_reads_referenced_files_beside_the_function_config() {
    let Some(kpt) = tool("kpt") else { return };
    let tmp = tempfile::tempdir().unwrap();
    let pkg = tmp.path().join("windows");
    package(&pkg, &format!("  - exec: {} krm\n    configPath: wmrender.yaml\n", wmrender_bin().display()));
    // kpt reads every YAML file of the package as resources: the mirror file is one ImageTagMirrorSet (a `kind:
    // List` would be refused by kpt itself), with a mirror given as a URL where a registry path is expected.
    std::fs::create_dir(pkg.join("mirrors")).unwrap();
    std::fs::write(
        pkg.join("mirrors/tags.yaml"),
        "apiVersion: config.openshift.io/v1\nkind: ImageTagMirrorSet\nmetadata:\n  name: tags\nspec:\n  \
         imageTagMirrors:\n  - source: quay.io/openshift\n    mirrors:\n    - https://mirror.example.com/openshift\n",
    )
    .unwrap();
    let inputs = INPUTS.replace("  network:\n", "  mirrors:\n    files: [mirrors/tags.yaml]\n  network:\n");
    std::fs::write(pkg.join("wmrender.yaml"), inputs).unwrap();
    let results = tmp.path().join("results");
    std::fs::create_dir(&results).unwrap();
    // Run from outside the package: the referenced file is found beside wmrender.yaml, not in kpt's directory.
    let o = run(Command::new(&kpt)
        .args(["fn", "render", "--allow-exec", "--results-dir"])
        .arg(&results)
        .arg(&pkg)
        .current_dir(tmp.path()));
    assert_ne!(code(&o), 0);
    let list: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(results.join("results.yaml")).unwrap()).unwrap();
    let all = list["items"][0]["results"].as_array().unwrap();
    let r = all.iter().find(|r| r["file"]["path"] == "mirrors/tags.yaml").expect("a result in the mirror file");
    assert!(r["message"].as_str().unwrap().starts_with("line 9, "), "{r}");
    assert!(r["resourceRef"].is_null() && r["field"].is_null(), "a field path only with the resource it is in: {r}");
}
