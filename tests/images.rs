//! The images, built as users build them (`image/build.sh`: OCI image layouts, no container daemon) and checked
//! with the real tools that handle them: umoci unpacks them, skopeo pushes them to Debian's `docker-registry` on
//! 127.0.0.1 (TLS) and reads them back, and the rendered controller Deployment's own commands run in their root file
//! systems (`chroot`, as the images' user 999): the controller container's `wmrender`, found on the image's PATH,
//! and the payload init container's `cp`, which copies exactly the payload directory; and the Argo CD plugin's
//! discover and generate scripts, run as the sidecar runs them, print what the host's wmrender prints.
//!
//! Reproducible: built twice from the same commit, in other folders, with another umask and other file times, the
//! images are byte for byte the same; another SOURCE_DATE_EPOCH gives another digest.
//!
//! The static wmrender is built as users build it (x86_64-unknown-linux-musl, release, `target/image`): the first
//! build takes about 4½ minutes on 2 cores, later ones reuse it. Needs root (chroot), the musl target, musl-tools, busybox-static, umoci, skopeo and docker-registry
//! (`bash tests/setup.sh`).

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::registry::{Ca, Registry};

/// The version the wmrender image is tagged with.
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// `bash image/build.sh ARGS` with `env`; the digest it prints.
fn build(args: &[&str], env: &[(&str, &str)], umask: &str) -> String {
    let script = support::root().join("image/build.sh");
    let line = format!("umask {umask} && exec bash \"$0\" \"$@\"");
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &line]).arg(&script).args(args).envs(env.iter().copied());
    let out = cmd.output().expect("sh runs");
    assert!(
        out.status.success(),
        "image/build.sh {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    let digest = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(digest.starts_with("sha256:") && digest.len() == 71, "{digest}");
    digest
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The image's root file system, as umoci unpacks it.
fn unpack(layout: &Path, tag: &str, into: &Path) -> PathBuf {
    run(Command::new("umoci").args(["unpack", "--image"]).arg(format!("{}:{tag}", layout.display())).arg(into));
    into.join("rootfs")
}

/// `chroot ROOT ARGV` as the images' user, 999:0, with the image's PATH.
fn in_image(root: &Path, argv: &[&str]) -> std::process::Output {
    Command::new("/usr/sbin/chroot")
        .arg("--userspec=999:0")
        .arg(root)
        .args(argv)
        .env_clear()
        .env("PATH", "/usr/local/bin:/bin")
        .output()
        .expect("chroot runs")
}

/// A container of the rendered controller Deployment, by name (init containers too).
fn container(deployment: &Value, name: &str) -> Value {
    let spec = &deployment["spec"]["template"]["spec"];
    let all = spec["containers"].as_array().into_iter().chain(spec["initContainers"].as_array()).flatten();
    all.into_iter().find(|c| c["name"] == name).cloned().unwrap_or_else(|| panic!("no container {name}: {deployment}"))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().into_iter().flatten().map(|s| s.as_str().unwrap().to_string()).collect()
}

#[test]
fn the_images_are_reproducible_valid_and_run_what_the_rendered_deployment_runs() {
    let work = tempfile::tempdir().unwrap();
    let w = |n: &str| work.path().join(n);
    let epoch = [("SOURCE_DATE_EPOCH", "1767225600")];

    // wmrender: the same twice, from other folders, umasks and file times; another time, another digest.
    let first = build(&["wmrender", w("a").to_str().unwrap()], &epoch, "022");
    let binary = support::root().join("target/image/x86_64-unknown-linux-musl/release/wmrender");
    let copy = w("wmrender");
    std::fs::copy(&binary, &copy).unwrap();
    run(Command::new("touch").args(["-d", "2001-02-03"]).arg(&copy));
    let second = build(&["wmrender", w("b").to_str().unwrap(), "--binary", copy.to_str().unwrap()], &epoch, "077");
    assert_eq!(first, second, "the same image from the same inputs");
    assert_eq!(support::read_tree(&w("a")), support::read_tree(&w("b")), "byte for byte");
    let later = build(
        &["wmrender", w("c").to_str().unwrap(), "--binary", copy.to_str().unwrap()],
        &[("SOURCE_DATE_EPOCH", "1767225601")],
        "022",
    );
    assert_ne!(first, later, "the time is in the image");

    // What its config says, as skopeo reads it.
    let inspected: Value = serde_json::from_str(&run(Command::new("skopeo")
        .args(["inspect", "--config"])
        .arg(format!("oci:{}:{VERSION}", w("a").display()))))
    .unwrap();
    assert_eq!(inspected["config"]["User"], "999:0", "a numeric user (runAsNonRoot can check it) in group 0");
    assert_eq!(inspected["config"]["Entrypoint"], serde_json::json!(["/usr/local/bin/wmrender", "krm"]));
    assert_eq!(inspected["created"], "2026-01-01T00:00:00Z");

    // The rendered controller Deployment's commands, in the images.
    let rendered = w("rendered");
    let inputs = support::root().join("fixtures/controller/wmrender.yaml");
    let o = support::wmrender(&["render", "-f", inputs.to_str().unwrap(), "-o", rendered.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let deployment: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(rendered.join("cluster/deployment-wmrender-controller.yaml")).unwrap(),
    )
    .unwrap();
    let root = unpack(&w("a"), VERSION, &w("unpacked"));
    let controller = container(&deployment, "controller");
    let command = strings(&controller["command"]);
    let mut argv: Vec<&str> = command.iter().map(String::as_str).collect();
    argv.extend(["controller", "--help"]);
    let o = in_image(&root, &argv);
    assert!(o.status.success(), "{argv:?} in the image: {}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("--rendered"), "wmrender controller's help");
    let o = in_image(&root, &["wmrender", "--version"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), format!("wmrender {VERSION}"));
    // The Argo CD sidecar: the plugin's discover and generate scripts (sh, grep, head), as user 999 in the
    // application's directory, print what the host's wmrender prints.
    let plugin: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(support::root().join("examples/argocd/plugin.yaml")).unwrap())
            .unwrap();
    let app = root.join("tmp/app");
    std::fs::create_dir_all(&app).unwrap();
    let example = support::root().join("examples/aws/wmrender.yaml");
    std::fs::copy(&example, app.join("wmrender.yaml")).unwrap();
    let in_app = |script: &str| {
        let o = in_image(&root, &["sh", "-c", &format!("cd /tmp/app || exit 9\n{script}")]);
        assert!(o.status.success(), "{script}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    assert_eq!(in_app(plugin["spec"]["discover"]["find"]["args"][0].as_str().unwrap()), "wmrender.yaml\n");
    let generated = in_app(plugin["spec"]["generate"]["args"][0].as_str().unwrap());
    let host = support::wmrender(&["render", "--stdout", "--only", "cluster", "-f", example.to_str().unwrap()]);
    assert!(!generated.is_empty() && generated.as_bytes() == host.stdout, "the sidecar's render is the host's");

    // The payload image: a payload directory (with its payload.json), copied by the init container's command.
    let payload = w("payload");
    std::fs::create_dir_all(payload.join("C/k/cni")).unwrap();
    std::fs::write(payload.join("C/k/kubelet.exe"), b"MZ kubelet").unwrap();
    std::fs::write(payload.join("C/k/cni/host-local.exe"), b"MZ host-local").unwrap();
    std::fs::write(payload.join("C/k/hns.psm1"), b"# hns\n").unwrap();
    let o = support::wmrender(&["payload", "list", payload.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let p1 = build(&["payload", payload.to_str().unwrap(), w("p1").to_str().unwrap()], &epoch, "022");
    let p2 = build(&["payload", payload.to_str().unwrap(), w("p2").to_str().unwrap()], &epoch, "077");
    assert_eq!(p1, p2, "the payload image is reproducible too");
    let proot = unpack(&w("p1"), "payload", &w("punpacked"));
    let init = container(&deployment, "payload");
    let copy_command = strings(&init["command"]);
    let target = copy_command.last().unwrap().clone();
    // The volume the init container writes to, mounted where the Deployment mounts it, owned by the pod's user.
    let volume = proot.join(target.trim_start_matches('/'));
    std::fs::create_dir_all(&volume).unwrap();
    run(Command::new("chown").arg("999:0").arg(&volume));
    let argv: Vec<&str> = copy_command.iter().map(String::as_str).collect();
    let o = in_image(&proot, &argv);
    assert!(o.status.success(), "{argv:?} in the payload image: {}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        support::read_tree(&volume),
        support::read_tree(&payload),
        "the init container copies exactly the payload directory"
    );

    // Pushed and read back through a TLS registry: the digest the build printed is the digest it serves.
    let ca = Ca::new(work.path());
    let registry = Registry::start(&w("registry"), &ca, None);
    let pushed = registry.push(&w("a"), VERSION, "wmrender", None);
    assert_eq!(pushed, first, "the registry keeps the manifest as built");
    let remote: Value = serde_json::from_str(&run(Command::new("skopeo")
        .args(["inspect", "--tls-verify=false"])
        .arg(format!("docker://{}/wmrender:{VERSION}", registry.addr))))
    .unwrap();
    assert_eq!(remote["Digest"], first.as_str());
}
