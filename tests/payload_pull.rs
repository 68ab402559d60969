//! `wmrender payload pull` against real parts: Debian's `docker-registry` on 127.0.0.1 with TLS from a throwaway CA
//! and htpasswd authentication, images pushed by the real `skopeo`, laid out as the WMCO operator image by
//! tests/payload/wmco-image.sh (in both of WMCO's layouts: plain files up to 10.21.0, gzipped files with
//! /payload/sha256sum from 10.21.1). kubelet.exe, kube-proxy.exe, kube-log-runner.exe and the three CNI plugins in
//! them are the real Windows programs, built from their Go modules by tests/payload/build.sh (Kubernetes v1.36.3,
//! stamped as its release builds are); containerd, its shim, hybrid-overlay, windows_exporter, csi-proxy and the
//! cloud providers' programs are stand-in files (their builds would add minutes to CI; the pull treats every file
//! alike, and the version checks read the real Kubernetes programs).

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use support::registry::{Registry, Scratch};

const USER: (&str, &str) = ("ci", "s3cret-pull");
const REPOSITORY: &str = "openshift4-wincw/windows-machine-config-rhel9-operator";

/// The two image layouts, made once per run (about 30 s; the programs' Go build is cached by tests/setup.sh).
fn images() -> &'static Path {
    static LAYOUT: OnceLock<PathBuf> = OnceLock::new();
    LAYOUT.get_or_init(|| {
        let layout = support::root().join("target/payload-test-image");
        let script = support::root().join("tests/payload/wmco-image.sh");
        for args in [vec!["v10.21.0"], vec!["v10.21.1", "--compressed"]] {
            let out = Command::new("bash").arg(&script).arg(&layout).args(&args).output().expect("bash runs");
            assert!(out.status.success(), "wmco-image.sh {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
        layout
    })
}

/// A CA, registries and files for one test.
struct World(Scratch);

impl std::ops::Deref for World {
    type Target = Scratch;
    fn deref(&self) -> &Scratch {
        &self.0
    }
}

impl World {
    fn new() -> World {
        World(Scratch::new())
    }

    fn registry(&self, name: &str, auth: bool) -> Registry {
        Registry::start(&self.path(name), &self.ca, auth.then_some(USER))
    }

    /// A pull secret with the test user's credentials for each of `registries`.
    fn pull_secret(&self, registries: &[&Registry]) -> PathBuf {
        use base64::Engine;
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", USER.0, USER.1));
        let auths: serde_json::Map<String, Value> =
            registries.iter().map(|r| (r.addr.clone(), serde_json::json!({ "auth": auth }))).collect();
        let file = self.path("pull-secret.json");
        std::fs::write(&file, serde_json::json!({ "auths": auths }).to_string()).unwrap();
        file
    }

    /// An inputs file: a BYOH cluster on Kubernetes `1.<minor>`, with `mirrors` (YAML under spec.mirrors).
    fn inputs(&self, name: &str, minor: u32, mirrors: &str) -> PathBuf {
        let file = self.path(&format!("{name}.yaml"));
        std::fs::write(
            &file,
            format!(
                "apiVersion: wmrender.dev/v1alpha1\nkind: ClusterInputs\nmetadata: {{name: payload}}\nspec:\n  \
                 infrastructureID: payload-00000\n  apiServerInternalURL: https://api-int.payload.example.com:6443\n  \
                 kubernetesVersion: \"1.{minor}\"\n  platform: {{none: {{}}}}\n  \
                 byoh: [{{address: 10.0.0.5, username: Administrator}}]\n  \
                 network: {{hybridClusterNetwork: [10.132.0.0/14]}}\n{mirrors}"
            ),
        )
        .unwrap();
        file
    }

    fn pull(&self, image: &str, out: &Path, extra: &[&str]) -> Output {
        let mut args = vec!["payload", "pull", image, "-o", out.to_str().unwrap()];
        let ca = self.ca.pem();
        args.extend(["--registry-ca", ca.to_str().unwrap()]);
        args.extend(extra);
        // No auth file of the machine's is read: HOME and the variables point nowhere.
        Command::new(env!("CARGO_BIN_EXE_wmrender"))
            .args(&args)
            .env("HOME", self.dir.path())
            .env_remove("REGISTRY_AUTH_FILE")
            .env_remove("DOCKER_CONFIG")
            .env_remove("XDG_RUNTIME_DIR")
            .output()
            .unwrap()
    }

    /// Nothing of a refused pull is left: no payload, no staging beside it.
    fn nothing_written(&self, out: &Path) {
        assert!(!out.exists(), "{} was written", out.display());
        let parent = out.parent().unwrap();
        let left: Vec<String> = std::fs::read_dir(parent)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".wmrender-payload-"))
            .collect();
        assert!(left.is_empty(), "staging left behind: {left:?}");
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn list(dir: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(dir.join("payload.json")).unwrap()).unwrap()
}

fn version_of(list: &Value, path: &str) -> Option<String> {
    let files = list["files"].as_array().unwrap();
    files.iter().find(|f| f["path"] == path).and_then(|f| f["version"].as_str().map(str::to_string))
}

/// The node paths of the payload on platform `none`: every program and hns.psm1, nothing of WMCO's configuration,
/// scripts or WICD, no other platform's programs.
const EXPECTED: &[&str] = &[
    "C/k/cni/host-local.exe",
    "C/k/cni/win-bridge.exe",
    "C/k/cni/win-overlay.exe",
    "C/k/containerd/containerd-shim-runhcs-v1.exe",
    "C/k/containerd/containerd.exe",
    "C/k/csi-proxy.exe",
    "C/k/hns.psm1",
    "C/k/hybrid-overlay-node.exe",
    "C/k/kube-log-runner.exe",
    "C/k/kube-proxy.exe",
    "C/k/kubelet.exe",
    "C/k/windows_exporter.exe",
];

#[test]
fn pulls_the_payload_by_digest_through_the_mirror_with_the_pull_secret() {
    let layout = images();
    let w = World::new();
    let source = w.registry("source", true);
    let mirror = w.registry("mirror", true);
    let digest = source.push(layout, "v10.21.1", REPOSITORY, Some(USER));
    assert_eq!(mirror.push(layout, "v10.21.1", &format!("mirror/{REPOSITORY}"), Some(USER)), digest);
    let secret = w.pull_secret(&[&source, &mirror]);
    let inputs = w.inputs(
        "mirrored",
        36,
        &format!(
            "  mirrors:\n    imageDigestMirrors:\n    - source: {}/openshift4-wincw\n      mirrors: [{}/mirror/openshift4-wincw]\n      \
             mirrorSourcePolicy: NeverContactSource\n",
            source.addr, mirror.addr
        ),
    );
    let image = format!("{}/{REPOSITORY}@{digest}", source.addr);
    let out = w.path("payload");
    let asked_before = source.requests().len();
    let o = w.pull(&image, &out, &["--registry-config", secret.to_str().unwrap(), "-f", inputs.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("pulled {image} (from the mirror {}/mirror/{REPOSITORY}@{digest})", mirror.addr)),
        "{err}"
    );
    assert!(!err.contains(USER.1), "the password is never printed");
    assert_eq!(source.requests().len(), asked_before, "NeverContactSource: the source is asked nothing");
    assert!(mirror.requests().iter().any(|l| l.contains(&format!("/v2/mirror/{REPOSITORY}/manifests/{digest}"))));

    // Exactly the programs and hns.psm1, byte for byte the real ones, with their list.
    let listed = list(&out);
    let paths: Vec<&str> = listed["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(paths, EXPECTED);
    assert_eq!(listed["source"], image);
    let programs = support::root().join("target/payload-programs");
    for (node, built) in [("C/k/kubelet.exe", "kubelet.exe"), ("C/k/cni/win-overlay.exe", "win-overlay.exe")] {
        assert!(std::fs::read(out.join(node)).unwrap() == std::fs::read(programs.join(built)).unwrap(), "{node}");
    }
    for p in ["C/k/kubelet.exe", "C/k/kube-proxy.exe", "C/k/kube-log-runner.exe"] {
        assert_eq!(version_of(&listed, p).as_deref(), Some("v1.36.3"), "{p}");
    }
    assert_eq!(version_of(&listed, "C/k/cni/host-local.exe").as_deref(), Some("v1.9.1"));
    assert_eq!(version_of(&listed, "C/k/hns.psm1"), None);

    // The list is what `payload list` writes of the directory; validate and a second pull accept it.
    let before = std::fs::read(out.join("payload.json")).unwrap();
    let o = support::wmrender(&["payload", "list", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read(out.join("payload.json")).unwrap(), before);
    let o = support::wmrender(&["validate", "-f", inputs.to_str().unwrap(), "--payload", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = w.pull(&image, &out, &["--pull-secret", secret.to_str().unwrap(), "-f", inputs.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "a payload written before is replaced: {}", stderr(&o));
}

#[test]
fn an_image_from_before_the_checksums_is_checked_by_its_layer_digests() {
    let layout = images();
    let w = World::new();
    let registry = w.registry("open", false);
    let digest = registry.push(layout, "v10.21.0", REPOSITORY, None);
    let out = w.path("payload");
    let o = w.pull(&format!("{}/{REPOSITORY}:v10.21.0", registry.addr), &out, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("carries no /payload/sha256sum") && err.contains(&format!("@{digest}")), "{err}");
    // Without inputs the platform is not known: its own programs come too (Azure's, AWS's).
    let listed = list(&out);
    let paths: Vec<&str> = listed["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    let mut expected = EXPECTED.to_vec();
    expected.extend(["C/k/azure-cloud-node-manager.exe", "C/k/ecr-credential-provider.exe"]);
    expected.sort();
    assert_eq!(paths, expected);
    assert_eq!(listed["source"], format!("{}/{REPOSITORY}@{digest}", registry.addr), "a tag is recorded by digest");
}

#[test]
fn a_refused_pull_writes_nothing_and_says_why() {
    let layout = images();
    let w = World::new();
    let registry = w.registry("source", true);
    let digest = registry.push(layout, "v10.21.1", REPOSITORY, Some(USER));
    let secret = w.pull_secret(&[&registry]);
    let creds = ["--registry-config", secret.to_str().unwrap()];
    let image = format!("{}/{REPOSITORY}@{digest}", registry.addr);
    let out = w.path("payload");
    let refused = |o: &Output, code: i32, says: &[&str]| {
        let err = stderr(o);
        assert_eq!(o.status.code(), Some(code), "{err}");
        for s in says {
            assert!(err.contains(s), "expected `{s}` in: {err}");
        }
        assert!(!err.contains("panicked") && !err.contains(USER.1), "{err}");
        w.nothing_written(&out);
    };

    // No credentials for a registry that asks for them.
    refused(&w.pull(&image, &out, &[]), 2, &["refused the credentials"]);
    // A digest the registry does not have.
    let wrong = format!("{}/{REPOSITORY}@sha256:{}", registry.addr, "0".repeat(64));
    refused(&w.pull(&wrong, &out, &creds), 2, &["no such image"]);
    // Not an image reference at all.
    refused(&w.pull("Not A Reference!", &out, &creds), 2, &["is not an image reference"]);
    // The payload's kubelet is newer than the cluster (the skew policy), said with the versions.
    let old_cluster = w.inputs("old", 30, "");
    refused(
        &w.pull(&image, &out, &[creds[0], creds[1], "-f", old_cluster.to_str().unwrap()]),
        2,
        &["Kubernetes 1.30", "C/k/kubelet.exe: kubelet is 1.36.3; this cluster takes Kubernetes 1.27 to 1.30"],
    );
    // An image that is no WMCO operator image.
    let (tiny, bundle) = (w.path("tiny"), w.path("tiny-bundle"));
    let image_arg = format!("{}:1", tiny.display());
    support::umoci(&["init", "--layout", tiny.to_str().unwrap()]);
    support::umoci(&["new", "--image", &image_arg]);
    support::umoci(&["unpack", "--rootless", "--image", &image_arg, bundle.to_str().unwrap()]);
    std::fs::write(bundle.join("rootfs/hello.txt"), "hello").unwrap();
    support::umoci(&["repack", "--image", &image_arg, bundle.to_str().unwrap()]);
    let tiny_digest = registry.push(&tiny, "1", "tiny", Some(USER));
    let o = w.pull(&format!("{}/tiny@{tiny_digest}", registry.addr), &out, &creds);
    refused(&o, 2, &["is not a WMCO operator image with a payload", "/payload/kube-node/kubelet.exe"]);
    // A directory that holds the user's files is never replaced.
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    let o = w.pull(&image, &out, &creds);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("is not a payload wmrender wrote"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(out.join("notes.txt")).unwrap(), "mine");
    std::fs::remove_dir_all(&out).unwrap();

    // A layer altered in the registry's storage: its bytes no longer have the manifest's digest.
    let manifest = Command::new("skopeo")
        .args(["inspect", "--raw", "--tls-verify=false", "--creds", &format!("{}:{}", USER.0, USER.1)])
        .arg(format!("docker://{image}"))
        .output()
        .unwrap();
    let manifest: Value = serde_json::from_slice(&manifest.stdout).unwrap();
    let layer = manifest["layers"][0]["digest"].as_str().unwrap();
    let blob = registry.blob(layer);
    let mut bytes = std::fs::read(&blob).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&blob, &bytes).unwrap();
    refused(&w.pull(&image, &out, &creds), 2, &["layer 1", "the content was altered"]);

    // No registry there: nothing to refuse, a failure to reach it (exit 3).
    let addr = registry.addr.clone();
    drop(registry);
    refused(&w.pull(&format!("{addr}/{REPOSITORY}@{digest}"), &out, &creds), 3, &["cannot pull", "cannot reach it"]);
}

#[test]
fn sync_and_validate_refuse_a_payload_outside_the_skew_policy_before_any_node() {
    let w = World::new();
    // A payload whose list says what a hand-assembled one would: kubelet 1.31 for a cluster on 1.35.
    let payload = w.path("payload");
    std::fs::create_dir_all(payload.join("C/k")).unwrap();
    std::fs::write(payload.join("C/k/kubelet.exe"), b"a kubelet built elsewhere").unwrap();
    let o = support::wmrender(&["payload", "list", payload.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mut listed = list(&payload);
    assert_eq!(version_of(&listed, "C/k/kubelet.exe"), None, "a file that is no Go program has no version");
    listed["files"][0]["version"] = "v1.31.4".into();
    std::fs::write(payload.join("payload.json"), listed.to_string()).unwrap();

    let inputs = w.inputs("cluster", 35, "");
    let o = support::wmrender(&["validate", "-f", inputs.to_str().unwrap(), "--payload", payload.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("kubelet is 1.31.4; this cluster takes Kubernetes 1.32 to 1.35"), "{}", stderr(&o));

    let rendered = w.path("out");
    let o = support::wmrender(&["render", "-f", inputs.to_str().unwrap(), "-o", rendered.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let manifest: Value = serde_json::from_slice(&std::fs::read(rendered.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["kubernetes"], "1.35");
    let key = w.path("id");
    assert!(
        Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f", key.to_str().unwrap()])
            .status()
            .unwrap()
            .success()
    );
    let sync = |payload: &Path| {
        support::wmrender(&[
            "sync",
            "--rendered",
            rendered.to_str().unwrap(),
            "--identity",
            key.to_str().unwrap(),
            "--payload",
            payload.to_str().unwrap(),
            "--connect-timeout",
            "2",
        ])
    };
    let o = sync(&payload);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("does not go with a cluster on Kubernetes 1.35 (OpenShift 4.22, WMCO 10.22)"), "{err}");
    assert!(!err.contains("10.0.0.5:"), "no node was contacted: {err}");

    // A file changed after the list was written is refused as well.
    listed["files"][0]["version"] = "v1.35.0".into();
    std::fs::write(payload.join("payload.json"), listed.to_string()).unwrap();
    std::fs::write(payload.join("C/k/kubelet.exe"), b"swapped").unwrap();
    let o = sync(&payload);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("C/k/kubelet.exe has sha256"), "{}", stderr(&o));
}
