//! Exit codes, pinned: 2 when the command line or an input the user handed over is wrong (with the file, and the
//! line where there is one), 3 when a node, the network or a task fails. No SSH server is needed: every case stops
//! before a node answers (the unreachable node is a closed port on 127.0.0.1).

mod support;

use sha2::{Digest, Sha256};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use support::{code, root, stderr, wmrender};

const INPUTS: &str = "apiVersion: wmrender.dev/v1alpha1
kind: ClusterInputs
metadata:
  name: exit-codes
spec:
  infrastructureID: exit-00000
  apiServerInternalURL: https://api-int.exit.example.com:6443
  platform:
    none: {}
  byoh:
  - address: 10.0.0.5
    username: Administrator
  network:
    hybridClusterNetwork: [10.132.0.0/14]
";

/// A rendered directory, a client key, an empty known_hosts and an inventory of one node on a closed port.
struct Setup {
    work: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let work = tempfile::tempdir().unwrap();
        let inputs = work.path().join("wmrender.yaml");
        std::fs::write(&inputs, INPUTS).unwrap();
        let out = work.path().join("rendered");
        let o = wmrender(&["render", "-f", inputs.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let key = work.path().join("id_ed25519");
        support::sshd::keygen(&["-q", "-t", "ed25519", "-N", "", "-f", key.to_str().unwrap()]);
        std::fs::write(work.path().join("known_hosts"), "").unwrap();
        let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port(); // nothing listens now
        let node_root = work.path().join("node");
        std::fs::create_dir_all(&node_root).unwrap();
        std::fs::write(
            work.path().join("nodes.yaml"),
            format!(
                "nodes:\n- name: gone\n  address: 127.0.0.1\n  port: {closed}\n  user: root\n  profile: posix\n  root: {}\n",
                node_root.display()
            ),
        )
        .unwrap();
        Setup { work }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.work.path().join(name)
    }

    /// `sync` of the rendered directory to the inventory (or the rendered BYOH host), with `extra` arguments.
    fn sync(&self, inventory: bool, extra: &[&str]) -> (i32, String) {
        let (rendered, key, known, nodes) =
            (self.path("rendered"), self.path("id_ed25519"), self.path("known_hosts"), self.path("nodes.yaml"));
        let mut args = vec![
            "sync",
            "--rendered",
            rendered.to_str().unwrap(),
            "--identity",
            key.to_str().unwrap(),
            "--known-hosts",
            known.to_str().unwrap(),
            "--connect-timeout",
            "2",
        ];
        if inventory {
            args.extend(["--inventory", nodes.to_str().unwrap()]);
        }
        args.extend_from_slice(extra);
        let o = wmrender(&args);
        (code(&o), stderr(&o))
    }
}

#[test]
fn sync_inputs_that_cannot_be_used_exit_2() {
    let s = Setup::new();
    let empty = s.path("empty-payload");
    std::fs::create_dir_all(&empty).unwrap();
    let (rc, err) = s.sync(true, &["--payload", empty.to_str().unwrap()]);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("has no C/ folder"), "{err}");

    let missing = s.path("no-such-agent.exe");
    let (rc, err) = s.sync(true, &["--agent", missing.to_str().unwrap()]);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("cannot open") && err.contains("no-such-agent.exe"), "{err}");

    let (rc, err) = s.sync(true, &["--pull-secret", s.path("no-such-pull-secret.json").to_str().unwrap()]);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("cannot read the pull secret"), "{err}");

    let bad = s.path("pull-secret.json");
    std::fs::write(&bad, "{not json: s3cr3t-value").unwrap();
    let (rc, err) = s.sync(true, &["--pull-secret", bad.to_str().unwrap()]);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("it is not JSON") && !err.contains("s3cr3t"), "named, never echoed: {err}");
}

/// A rendered ConfigMap entry that is not `username=<user>` (the file changed together with its manifest entry,
/// as an older or hand-made render would have it) is pointed at by file, line and entry.
#[test]
fn a_bad_rendered_byoh_entry_is_shown_at_its_line_and_exits_2() {
    let s = Setup::new();
    let rel = "cluster/configmap-windows-instances.yaml";
    let file = s.path("rendered").join(rel);
    let text = std::fs::read_to_string(&file).unwrap().replace("username=Administrator", "Administrator");
    std::fs::write(&file, &text).unwrap();
    let manifest_path = s.path("rendered/manifest.json");
    let mut manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    for entry in manifest["files"].as_array_mut().unwrap() {
        if entry["path"] == rel {
            entry["sha256"] =
                Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect::<String>().into();
            entry["size"] = text.len().into();
        }
    }
    std::fs::write(&manifest_path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    let line = text.lines().position(|l| l.contains("Administrator")).unwrap() + 1;
    let (rc, err) = s.sync(false, &[]);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains(&format!("{}:{line}:", file.display())), "file and line: {err}");
    assert!(err.contains("data[\"10.0.0.5\"]") && err.contains("username=<user>"), "{err}");
}

#[test]
fn a_node_that_cannot_be_reached_exits_3() {
    let s = Setup::new();
    let (rc, err) = s.sync(true, &["--output", "json"]);
    assert_eq!(rc, 3, "{err}");
}

#[test]
fn import_input_problems_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("wmrender.yaml");
    let o = wmrender(&["import", "--from-dir", tmp.path().join("nope").to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("no such directory"), "{}", stderr(&o));

    // A dump whose Infrastructure and workers give no AWS region: named, not written as an empty value.
    let dump = tmp.path().join("dump");
    std::fs::create_dir_all(&dump).unwrap();
    for f in std::fs::read_dir(root().join("fixtures/import/aws")).unwrap() {
        let f = f.unwrap().path();
        let text = std::fs::read_to_string(&f).unwrap();
        std::fs::write(dump.join(f.file_name().unwrap()), strip_region(&f, &text)).unwrap();
    }
    let o = wmrender(&[
        "import",
        "--from-dir",
        dump.to_str().unwrap(),
        "--image",
        "ami-0123456789abcdef0",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("give no region"), "{}", stderr(&o));
    assert!(!out.exists());
}

/// The fixture without any `region:` line.
fn strip_region(file: &Path, text: &str) -> String {
    let kept: Vec<&str> = text.lines().filter(|l| !l.trim_start().starts_with("region:")).collect();
    assert!(kept.len() < text.lines().count() || !file.ends_with("infrastructure.yaml"), "the fixture names a region");
    kept.join("\n") + "\n"
}
