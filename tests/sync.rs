//! `wmrender sync` against a real OpenSSH server on 127.0.0.1, with posix-profile nodes (a root directory each)
//! so the whole protocol runs end to end: trust, plan, atomic upload, removal, manifest, apply, report.

mod support;

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use support::sshd::Sshd;
use support::{code, stderr, wmrender};

struct Rig {
    sshd: Sshd,
    work: tempfile::TempDir,
}

impl Rig {
    fn new() -> Rig {
        Rig { sshd: Sshd::start(), work: tempfile::tempdir().unwrap() }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.work.path().join(name)
    }

    /// Renders `inputs` text into `<work>/rendered`.
    fn render(&self, inputs: &str) -> PathBuf {
        let file = self.path("wmrender.yaml");
        std::fs::write(&file, inputs).unwrap();
        let out = self.path("rendered");
        let o = wmrender(&["render", "-f", file.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        out
    }

    /// An inventory of `n` posix nodes on this sshd (or on `port`), each with its own root.
    fn inventory(&self, n: usize, port: u16) -> PathBuf {
        let mut text = String::from("nodes:\n");
        for i in 0..n {
            let root = self.path(&format!("node-{i:02}"));
            std::fs::create_dir_all(&root).unwrap();
            text.push_str(&format!(
                "- name: node-{i:02}\n  address: 127.0.0.1\n  port: {port}\n  user: root\n  profile: posix\n  root: {}\n",
                root.display()
            ));
        }
        let file = self.path(&format!("nodes-{n}-{port}.yaml"));
        std::fs::write(&file, text).unwrap();
        file
    }

    fn sync(&self, inventory: &Path, extra: &[&str]) -> (i32, serde_json::Value, String) {
        self.sync_as(inventory, &self.sshd.path("client_ed25519"), extra)
    }

    fn sync_as(&self, inventory: &Path, identity: &Path, extra: &[&str]) -> (i32, serde_json::Value, String) {
        let rendered = self.path("rendered");
        let known = self.sshd.path("known_hosts");
        let mut args = vec![
            "sync",
            "--rendered",
            rendered.to_str().unwrap(),
            "--inventory",
            inventory.to_str().unwrap(),
            "--identity",
            identity.to_str().unwrap(),
            "--known-hosts",
            known.to_str().unwrap(),
            "--output",
            "json",
            "--connect-timeout",
            "5",
        ];
        args.extend_from_slice(extra);
        let o = wmrender(&args);
        let report = serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null);
        (code(&o), report, stderr(&o))
    }
}

/// With the operator installed, WMCO owns the BYOH host of the ConfigMap: sync only touches the inventory nodes.
const INPUTS: &str = "apiVersion: wmrender.dev/v1alpha1
kind: ClusterInputs
metadata:
  name: sync-test
spec:
  infrastructureID: sync-00000
  apiServerInternalURL: https://api-int.sync.example.com:6443
  platform:
    none: {}
  byoh:
  - address: 10.0.0.5
    username: Administrator
  network:
    hybridClusterNetwork: [10.132.0.0/14]
  operator:
    install: true
  mirrors:
    imageTagMirrors:
    - source: quay.io/openshift
      mirrors: [mirror.example.com:5000/quay/openshift]
    - source: registry.redhat.io/ubi9
      mirrors: [mirror.example.com:5000/redhat/ubi9]
";

fn node_files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let c = root.join("C");
    if !c.exists() {
        return BTreeMap::new();
    }
    support::read_tree(&c).into_iter().collect()
}

fn nodes(report: &serde_json::Value) -> &Vec<serde_json::Value> {
    report["nodes"].as_array().unwrap_or_else(|| panic!("no report: {report}"))
}

#[test]
fn first_sync_pushes_everything_second_nothing_and_a_mirror_change_only_its_file() {
    let rig = Rig::new();
    let rendered = rig.render(INPUTS);
    let inv = rig.inventory(1, rig.sshd.port);
    let (rc, report, err) = rig.sync(&inv, &[]);
    assert_eq!(rc, 0, "{err}");
    let n = &nodes(&report)[0];
    assert_eq!(n["status"], "synced", "{n}");
    assert_eq!(n["apply"]["errors"], serde_json::json!([]));
    // Every bundle file is on the node, byte for byte, plus the node manifest.
    let on_node = node_files(&rig.path("node-00"));
    let bundle: Vec<(String, Vec<u8>)> =
        support::read_tree(&rendered).into_iter().filter(|(p, _)| p.starts_with("node/C/")).collect();
    assert_eq!(n["added"].as_array().unwrap().len(), bundle.len());
    for (path, bytes) in &bundle {
        assert_eq!(on_node.get(path.trim_start_matches("node/C/")), Some(bytes), "{path}");
    }
    assert!(on_node.contains_key("k/wmrender/manifest.json"));
    assert!(!on_node.keys().any(|k| k.ends_with(".wmrender-tmp")));

    let (rc, report, err) = rig.sync(&inv, &[]);
    assert_eq!(rc, 0, "{err}");
    let n = &nodes(&report)[0];
    assert_eq!((n["status"].as_str(), n["bytesSent"].as_u64()), (Some("unchanged"), Some(0)), "{n}");
    assert_eq!(n["restarted"], serde_json::json!([]));

    rig.render(&INPUTS.replace("mirror.example.com:5000/redhat/ubi9", "mirror2.example.com/redhat/ubi9"));
    let (rc, report, err) = rig.sync(&inv, &[]);
    assert_eq!(rc, 0, "{err}");
    let n = &nodes(&report)[0];
    assert_eq!(
        n["changed"],
        serde_json::json!(["C:\\k\\containerd\\registries\\registry.redhat.io\\hosts.toml"]),
        "{n}"
    );
    assert_eq!((n["added"].as_array().unwrap().len(), n["removed"].as_array().unwrap().len()), (0, 0));
    // Only that file and the manifest travelled.
    let hosts =
        std::fs::read(rig.path("rendered/node/C/k/containerd/registries/registry.redhat.io/hosts.toml")).unwrap();
    let sent = n["bytesSent"].as_u64().unwrap();
    assert!(sent > hosts.len() as u64 && sent < hosts.len() as u64 + 20_000, "sent {sent}");

    // A registry host that leaves the inputs loses its file and directory on the node.
    rig.render(
        &INPUTS
            .replace("    - source: quay.io/openshift\n      mirrors: [mirror.example.com:5000/quay/openshift]\n", ""),
    );
    let (rc, report, _) = rig.sync(&inv, &[]);
    assert_eq!(rc, 0);
    assert_eq!(nodes(&report)[0]["removed"], serde_json::json!(["C:\\k\\containerd\\registries\\quay.io\\hosts.toml"]));
    assert!(!rig.path("node-00/C/k/containerd/registries/quay.io").exists());
}

#[test]
fn dry_run_shows_the_plan_changes_nothing_and_exits_1() {
    let rig = Rig::new();
    rig.render(INPUTS);
    let inv = rig.inventory(1, rig.sshd.port);
    let (rc, report, err) = rig.sync(&inv, &["--dry-run"]);
    assert_eq!(rc, 1, "{err}");
    assert_eq!(nodes(&report)[0]["status"], "would-change");
    assert!(err.contains("node-00 would change:") && err.contains("add    C:\\k\\kubelet.conf"), "{err}");
    assert!(node_files(&rig.path("node-00")).is_empty(), "a dry run writes nothing");
    assert_eq!(rig.sync(&inv, &[]).0, 0);
    let (rc, _, err) = rig.sync(&inv, &["--dry-run"]);
    assert_eq!(rc, 0, "{err}");
}

#[test]
fn host_keys_are_checked_strictly() {
    let rig = Rig::new();
    rig.render(INPUTS);
    let inv = rig.inventory(1, rig.sshd.port);
    let known = rig.sshd.path("known_hosts");

    std::fs::write(&known, "").unwrap();
    let (rc, report, err) = rig.sync(&inv, &[]);
    assert_eq!(rc, 3, "{err}");
    let e = nodes(&report)[0]["error"].as_str().unwrap().to_string();
    assert!(e.contains("is not known") && e.contains("--accept-new") && e.contains("SHA256:"), "{e}");

    let (rc, _, err) = rig.sync(&inv, &["--accept-new"]);
    assert_eq!(rc, 0, "{err}");
    let pinned = std::fs::read_to_string(&known).unwrap();
    let pinned = pinned.trim_start();
    assert!(pinned.starts_with(&format!("[127.0.0.1]:{} ssh-ed25519 ", rig.sshd.port)), "{pinned}");

    // A different key of the same type for this host: always refused, --accept-new or not.
    let stranger = std::fs::read_to_string(rig.sshd.path("stranger_ed25519.pub")).unwrap();
    let b64 = stranger.split_whitespace().nth(1).unwrap();
    std::fs::write(&known, format!("[127.0.0.1]:{} ssh-ed25519 {b64}\n", rig.sshd.port)).unwrap();
    let (rc, report, _) = rig.sync(&inv, &["--accept-new"]);
    assert_eq!(rc, 3);
    let e = nodes(&report)[0]["error"].as_str().unwrap().to_string();
    assert!(e.contains("HAS CHANGED") && e.matches("SHA256:").count() == 2, "{e}");
}

#[test]
fn a_wrong_client_key_is_a_clear_error() {
    let rig = Rig::new();
    rig.render(INPUTS);
    let inv = rig.inventory(1, rig.sshd.port);
    let stranger = rig.sshd.path("stranger_ed25519");
    let (rc, report, _) = rig.sync_as(&inv, &stranger, &[]);
    assert_eq!(rc, 3);
    let e = nodes(&report)[0]["error"].as_str().unwrap();
    assert!(e.contains("authentication as root@") && e.contains("--identity"), "{e}");
}

#[test]
fn a_pem_rsa_key_like_wmcos_cloud_private_key_works() {
    let rig = Rig::new();
    rig.render(INPUTS);
    let inv = rig.inventory(1, rig.sshd.port);
    let pem = rig.sshd.path("client_rsa_pem");
    assert!(std::fs::read_to_string(&pem).unwrap().starts_with("-----BEGIN RSA PRIVATE KEY-----"));
    let (rc, _, err) = rig.sync_as(&inv, &pem, &[]);
    assert_eq!(rc, 0, "{err}");
}

#[test]
fn an_unreachable_node_is_reported_while_the_others_finish_with_keep_going() {
    let rig = Rig::new();
    rig.render(INPUTS);
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port(); // nothing listens now
    let good = rig.inventory(3, rig.sshd.port);
    let mut text = std::fs::read_to_string(&good).unwrap();
    text = text.replacen(&format!("port: {}", rig.sshd.port), &format!("port: {closed}"), 1);
    let inv = rig.path("mixed.yaml");
    std::fs::write(&inv, text).unwrap();

    let (rc, report, _) = rig.sync(&inv, &["--keep-going", "--parallel", "1"]);
    assert_eq!(rc, 3);
    let statuses: Vec<&str> = nodes(&report).iter().map(|n| n["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["failed", "synced", "synced"]);
    assert!(nodes(&report)[0]["error"].as_str().unwrap().contains("unreachable"));

    // Without --keep-going no new node starts after the first failure.
    for i in 1..3 {
        std::fs::remove_dir_all(rig.path(&format!("node-{i:02}/C"))).unwrap();
    }
    let (rc, report, _) = rig.sync(&inv, &["--parallel", "1"]);
    assert_eq!(rc, 3);
    let statuses: Vec<&str> = nodes(&report).iter().map(|n| n["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["failed", "skipped", "skipped"]);
}

#[test]
fn twenty_nodes_with_parallel_8_all_converge() {
    let rig = Rig::new();
    rig.render(INPUTS);
    let inv = rig.inventory(20, rig.sshd.port);
    let (rc, report, err) = rig.sync(&inv, &["--parallel", "8", "--max-unavailable", "4"]);
    assert_eq!(rc, 0, "{err}");
    assert!(nodes(&report).iter().all(|n| n["status"] == "synced"), "{report}");
    let first = node_files(&rig.path("node-00"));
    for i in 1..20 {
        assert_eq!(node_files(&rig.path(&format!("node-{i:02}"))), first, "node-{i:02}");
    }
    let (rc, report, _) = rig.sync(&inv, &["--parallel", "8"]);
    assert_eq!(rc, 0);
    assert!(nodes(&report).iter().all(|n| n["status"] == "unchanged"));
}

#[test]
fn the_pull_secret_reaches_the_nodes_hosts_toml_and_nowhere_else() {
    let rig = Rig::new();
    let rendered = rig.render(INPUTS);
    let before = support::read_tree(&rendered);
    let secret = rig.path("pull-secret.json");
    // "c3luYy11c2VyOnN5bmMtcGFzcw==" is base64 of sync-user:sync-pass
    std::fs::write(&secret, r#"{"auths":{"mirror.example.com:5000":{"auth":"c3luYy11c2VyOnN5bmMtcGFzcw=="}}}"#)
        .unwrap();
    let ca = rig.path("kubelet-ca.crt");
    std::fs::write(&ca, "-----BEGIN CERTIFICATE-----\nKUBELET-CA-MARKER\n-----END CERTIFICATE-----\n").unwrap();
    let inv = rig.inventory(1, rig.sshd.port);
    let rendered_s = rendered.to_str().unwrap().to_string();
    let o = wmrender(&[
        "sync",
        "--rendered",
        &rendered_s,
        "--inventory",
        inv.to_str().unwrap(),
        "--identity",
        rig.sshd.path("client_ed25519").to_str().unwrap(),
        "--known-hosts",
        rig.sshd.path("known_hosts").to_str().unwrap(),
        "--pull-secret",
        secret.to_str().unwrap(),
        "--kubelet-ca",
        ca.to_str().unwrap(),
        "--output",
        "json",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let hosts = std::fs::read_to_string(rig.path("node-00/C/k/containerd/registries/quay.io/hosts.toml")).unwrap();
    assert!(
        hosts.contains("  [host.\"https://mirror.example.com:5000/v2/quay\".header]\n    authorization = \"Basic c3luYy11c2VyOnN5bmMtcGFzcw==\"\n"),
        "{hosts}"
    );
    assert!(std::fs::read_to_string(rig.path("node-00/C/k/kubelet-ca.crt")).unwrap().contains("KUBELET-CA-MARKER"));
    for (name, text) in [("stdout", String::from_utf8_lossy(&o.stdout)), ("stderr", String::from_utf8_lossy(&o.stderr))]
    {
        assert!(
            !text.contains("c3luYy11c2Vy") && !text.contains("sync-pass") && !text.contains("KUBELET-CA-MARKER"),
            "{name}"
        );
    }
    assert_eq!(support::read_tree(&rendered), before, "nothing local was written");
}

/// A loopback TCP proxy that forwards to `target` and cuts each connection after `budget` bytes from the client.
fn cutting_proxy(target: u16, budget: usize) -> (u16, Arc<AtomicBool>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        while !stop2.load(Ordering::SeqCst) {
            let Ok((client, _)) = listener.accept() else {
                std::thread::sleep(std::time::Duration::from_millis(5));
                continue;
            };
            client.set_nonblocking(false).unwrap();
            let server = TcpStream::connect(("127.0.0.1", target)).unwrap();
            let (mut c_read, mut s_write) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            let (mut s_read, mut c_write) = (server, client);
            std::thread::spawn(move || {
                let mut left = budget;
                let mut buf = [0u8; 4096];
                while left > 0 {
                    let n = match c_read.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n.min(left),
                    };
                    if s_write.write_all(&buf[..n]).is_err() {
                        break;
                    }
                    left -= n;
                }
                let _ = c_read.shutdown(std::net::Shutdown::Both);
                let _ = s_write.shutdown(std::net::Shutdown::Both);
            });
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut s_read, &mut c_write);
            });
        }
    });
    (port, stop)
}

fn sha(bytes: &[u8]) -> String {
    wmrender::hex(&Sha256::digest(bytes))
}

#[test]
fn connections_cut_mid_upload_leave_old_or_new_files_and_the_next_sync_converges() {
    let rig = Rig::new();
    rig.render(INPUTS);
    // A payload large enough that cuts land inside uploads.
    let payload = rig.path("payload");
    std::fs::create_dir_all(payload.join("C/k")).unwrap();
    let v1: Vec<u8> = (0..600_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(payload.join("C/k/kubelet.exe"), &v1).unwrap();
    let inv = rig.inventory(1, rig.sshd.port);
    let payload_s = payload.to_str().unwrap().to_string();
    assert_eq!(rig.sync(&inv, &["--payload", &payload_s]).0, 0);
    let old: BTreeMap<String, String> =
        node_files(&rig.path("node-00")).into_iter().map(|(p, b)| (p, sha(&b))).collect();

    // Version 2: the payload, the mirrors and the containerd config all change.
    let v2: Vec<u8> = (0..600_000u32).map(|i| (i % 241) as u8).collect();
    std::fs::write(payload.join("C/k/kubelet.exe"), &v2).unwrap();
    let new_inputs = INPUTS.replace("mirror.example.com:5000", "mirror-b.example.com:5000")
        + "  pauseImage: mirror-b.example.com:5000/pause:3.9\n";
    let rendered = rig.render(&new_inputs);
    let mut new: BTreeMap<String, String> = BTreeMap::new();
    for (p, b) in support::read_tree(&rendered) {
        if let Some(rest) = p.strip_prefix("node/C/") {
            new.insert(rest.to_string(), sha(&b));
        }
    }
    new.insert("k/kubelet.exe".into(), sha(&v2));

    // Cut the connection after more and more bytes: every file is always a complete old or new version.
    let mut cut_during_upload = 0;
    for budget in [3_000, 8_000, 20_000, 60_000, 120_000, 250_000, 400_000, 550_000, 700_000] {
        let (port, stop) = cutting_proxy(rig.sshd.port, budget);
        rig.sshd.write_known_hosts(&rig.path("known_proxy"), port);
        let inv_proxy = rig.inventory(1, port);
        let o = wmrender(&[
            "sync",
            "--rendered",
            rendered.to_str().unwrap(),
            "--inventory",
            inv_proxy.to_str().unwrap(),
            "--identity",
            rig.sshd.path("client_ed25519").to_str().unwrap(),
            "--known-hosts",
            rig.path("known_proxy").to_str().unwrap(),
            "--payload",
            &payload_s,
            // kubelet.exe changes: a binary upgrade, without a cluster to drain the node through.
            "--allow-undrained-upgrade",
            "--connect-timeout",
            "3",
        ]);
        stop.store(true, Ordering::SeqCst);
        let files = node_files(&rig.path("node-00"));
        // The node manifest is written last: it never claims a file that is not there as it says.
        let manifest: serde_json::Value = serde_json::from_slice(&files["k/wmrender/manifest.json"]).unwrap();
        for entry in manifest["files"].as_array().unwrap() {
            let rel = entry["path"].as_str().unwrap().trim_start_matches("C:\\").replace('\\', "/");
            assert_eq!(files.get(&rel).map(|b| sha(b)).as_deref(), entry["sha256"].as_str(), "budget {budget}: {rel}");
        }
        for (path, bytes) in files {
            if path.ends_with(".wmrender-tmp") {
                cut_during_upload += 1;
                continue;
            }
            if path == "k/wmrender/manifest.json" {
                continue;
            }
            let h = sha(&bytes);
            assert!(
                old.get(&path) == Some(&h) || new.get(&path) == Some(&h),
                "budget {budget}: {path} is neither the old nor the new version (exit {:?})",
                o.status.code()
            );
        }
    }
    assert!(cut_during_upload > 0, "no cut landed inside an upload; raise the budgets");

    // Even a revert to the old bundle right after an interrupted sync converges: the manifest never claimed the
    // half-pushed files, so they are pushed again.
    std::fs::write(payload.join("C/k/kubelet.exe"), &v1).unwrap();
    rig.render(INPUTS);
    let (rc, _, err) = rig.sync(&inv, &["--payload", &payload_s, "--allow-undrained-upgrade"]);
    assert_eq!(rc, 0, "{err}");
    for (path, bytes) in node_files(&rig.path("node-00")) {
        if !path.ends_with(".wmrender-tmp") && path != "k/wmrender/manifest.json" {
            assert_eq!(old.get(&path), Some(&sha(&bytes)), "after the revert: {path}");
        }
    }
    std::fs::write(payload.join("C/k/kubelet.exe"), &v2).unwrap();
    rig.render(&new_inputs);

    let (rc, _, err) = rig.sync(&inv, &["--payload", &payload_s, "--allow-undrained-upgrade"]);
    assert_eq!(rc, 0, "{err}");
    let now: BTreeMap<String, String> = node_files(&rig.path("node-00"))
        .into_iter()
        .filter(|(p, _)| !p.ends_with(".wmrender-tmp") && p != "k/wmrender/manifest.json")
        .map(|(p, b)| (p, sha(&b)))
        .collect();
    let mut expected = new.clone();
    expected.retain(|p, _| p != "k/wmrender/manifest.json");
    assert_eq!(now, expected, "the next sync converges to the new bundle");
    let (rc, report, _) = rig.sync(&inv, &["--payload", &payload_s]);
    assert_eq!((rc, nodes(&report)[0]["status"].as_str()), (0, Some("unchanged")));
}

/// The node's files that came from wmrender (everything but its manifest), as path → sha256.
/// The files a node holds, by sha256, but for its manifest and the update a one-file change leaves beside it.
fn delivered(root: &Path) -> BTreeMap<String, String> {
    let own = ["k/wmrender/manifest.json", "k/wmrender/manifest.json.wmrender-update"];
    node_files(root).into_iter().filter(|(p, _)| !own.contains(&p.as_str())).map(|(p, b)| (p, sha(&b))).collect()
}

/// What a node must hold after a clean sync of `rendered` with `payload`: the bundle's node files and the payload.
fn expected(rendered: &Path, payload: &Path) -> BTreeMap<String, String> {
    let mut want = BTreeMap::new();
    for (p, b) in support::read_tree(rendered) {
        if let Some(rest) = p.strip_prefix("node/C/") {
            want.insert(rest.to_string(), sha(&b));
        }
    }
    for (p, b) in support::read_tree(&payload.join("C")) {
        want.insert(p, sha(&b));
    }
    want
}

/// A one-file change writes its journal beside the manifest, the file, then the manifest's update
/// (`delivery::node`): cut anywhere, in either direction, the next sync finishes it whatever it pushes; a clean one
/// sends the file, the small journal and the update, at most the file and 2 KiB, and leaves the manifest as it was.
#[test]
fn a_one_file_change_sends_the_file_and_less_than_2_kib_and_a_cut_anywhere_in_it_is_finished_by_the_next_sync() {
    let rig = Rig::new();
    let empty_payload = rig.path("no-payload");
    std::fs::create_dir_all(empty_payload.join("C")).unwrap();
    let inv = rig.inventory(1, rig.sshd.port);
    let version = |v: u32| {
        let mirror = format!("mirror{v}.example.com/redhat/ubi9");
        rig.render(&INPUTS.replace("mirror.example.com:5000/redhat/ubi9", &mirror))
    };
    let hosts = "k/containerd/registries/registry.redhat.io/hosts.toml";
    let journal = "k/wmrender/manifest.json.wmrender-journal";
    let (manifest_file, update_file) = ("k/wmrender/manifest.json", "k/wmrender/manifest.json.wmrender-update");
    // What the node's manifest says, with its update: the one reader sync and the agent use.
    let node_manifest = |files: &BTreeMap<String, Vec<u8>>| {
        let update = files.get(update_file).map(Vec::as_slice);
        wmrender_contract::NodeManifest::read(&files[manifest_file], update).unwrap()
    };

    // Clean: only that file changes; the manifest stays as it was and the update beside it names the file.
    version(1);
    assert_eq!(rig.sync(&inv, &[]).0, 0);
    let before = node_files(&rig.path("node-00"));
    let rendered = version(2);
    let (rc, report, err) = rig.sync(&inv, &[]);
    assert_eq!(rc, 0, "{err}");
    let n = &nodes(&report)[0];
    assert_eq!(n["changed"], serde_json::json!([format!("C:\\{}", hosts.replace('/', "\\"))]), "{n}");
    let files = node_files(&rig.path("node-00"));
    let file = files[hosts].len() as u64;
    let sent = n["bytesSent"].as_u64().unwrap();
    eprintln!("a one-file change: {sent} bytes sent for a {file}-byte file");
    assert!(sent > file && sent <= file + 2048, "sent {sent} for a {file}-byte file");
    assert_eq!(files[manifest_file], before[manifest_file], "the manifest is not written again");
    let (read, update) = node_manifest(&files);
    let update = update.expect("the update applies over the manifest");
    assert_eq!(
        update.files.iter().map(|f| f.path.to_string()).collect::<Vec<_>>(),
        [format!("C:\\{}", hosts.replace('/', "\\"))]
    );
    assert!(read.applied);
    assert_eq!(delivered(&rig.path("node-00")), expected(&rendered, &empty_payload), "no journal left");

    // Another one-file change adds up over the same manifest; a change of more than one file writes the whole
    // manifest and removes the update.
    let rendered = version(3);
    let (rc, report, err) = rig.sync(&inv, &[]);
    assert_eq!(rc, 0, "{err}");
    assert!(nodes(&report)[0]["bytesSent"].as_u64().unwrap() <= file + 2048);
    let files = node_files(&rig.path("node-00"));
    assert_eq!(files[manifest_file], before[manifest_file]);
    assert_eq!(delivered(&rig.path("node-00")), expected(&rendered, &empty_payload));
    let rendered = rig.render(
        &INPUTS
            .replace("mirror.example.com:5000/redhat/ubi9", "mirror4.example.com/redhat/ubi9")
            .replace("    - source: quay.io/openshift\n      mirrors: [mirror.example.com:5000/quay/openshift]\n", ""),
    );
    assert_eq!(rig.sync(&inv, &[]).0, 0);
    let files = node_files(&rig.path("node-00"));
    assert!(!files.contains_key(update_file), "the whole manifest replaced the update");
    assert_eq!(delivered(&rig.path("node-00")), expected(&rendered, &empty_payload));

    let mut cut_with_journal = 0;
    for (from, to) in [(1, 2), (2, 1)] {
        for budget in (2_000..12_000).step_by(1_000) {
            for finish_with in [from, to] {
                version(from);
                assert_eq!(rig.sync(&inv, &[]).0, 0);
                // A push of `to` cut after `budget` bytes…
                let rendered_to = version(to);
                let (port, stop) = cutting_proxy(rig.sshd.port, budget);
                rig.sshd.write_known_hosts(&rig.path("known_proxy"), port);
                let _ = wmrender(&[
                    "sync",
                    "--rendered",
                    rendered_to.to_str().unwrap(),
                    "--inventory",
                    rig.inventory(1, port).to_str().unwrap(),
                    "--identity",
                    rig.sshd.path("client_ed25519").to_str().unwrap(),
                    "--known-hosts",
                    rig.path("known_proxy").to_str().unwrap(),
                    "--connect-timeout",
                    "3",
                ]);
                stop.store(true, Ordering::SeqCst);
                let files = node_files(&rig.path("node-00"));
                // The manifest claims no file that is not there as it says, unless the journal beside it names it.
                let uncertain: Vec<String> = match files.get(journal) {
                    Some(j) => {
                        cut_with_journal += 1;
                        let j: serde_json::Value = serde_json::from_slice(j).unwrap();
                        let named = j["pending"]["files"].as_array().unwrap().iter();
                        named.map(|f| f["path"].as_str().unwrap().to_string()).collect()
                    }
                    None => Vec::new(),
                };
                for entry in node_manifest(&files).0.files {
                    let path = entry.path.to_string();
                    let rel = path.trim_start_matches("C:\\").replace('\\', "/");
                    if !uncertain.contains(&path) {
                        let on_node = files.get(&rel).map(|b| sha(b));
                        assert_eq!(on_node.as_deref(), Some(entry.sha256.as_str()), "{budget}: {rel}");
                    }
                }
                // …then a clean sync of either version: the node holds exactly it, with no journal or temporary
                // file, and a sync after it changes nothing.
                let rendered = version(finish_with);
                let (rc, _, err) = rig.sync(&inv, &[]);
                let at = format!("v{from}→v{to} cut at {budget}, then v{finish_with}");
                assert_eq!(rc, 0, "{at}: {err}");
                assert_eq!(delivered(&rig.path("node-00")), expected(&rendered, &empty_payload), "{at}");
                let (rc, report, _) = rig.sync(&inv, &[]);
                assert_eq!((rc, nodes(&report)[0]["status"].as_str()), (0, Some("unchanged")), "{at}: then a no-op");
            }
        }
    }
    assert!(cut_with_journal > 0, "no cut landed while the one-file journal was there; move the budgets");
}

#[test]
fn a_node_manifest_naming_paths_outside_the_node_root_is_refused_and_nothing_there_is_deleted() {
    let rig = Rig::new();
    rig.render(INPUTS);
    let inv = rig.inventory(1, rig.sshd.port);
    assert_eq!(rig.sync(&inv, &[]).0, 0);
    // Victims outside C:\k: beside the node root (reached by `..`), and elsewhere on the node's drive.
    let victims = [rig.path("victim"), rig.path("node-00/C/Windows/win.ini")];
    for v in &victims {
        std::fs::create_dir_all(v.parent().unwrap()).unwrap();
        std::fs::write(v, "keep me").unwrap();
    }
    let manifest = rig.path("node-00/C/k/wmrender/manifest.json");
    let good = std::fs::read_to_string(&manifest).unwrap();
    for hostile in [r"C:\\k\\..\\..\\..\\victim", r"C:\\Windows\\win.ini", r"C:\\k\\..\\Windows\\win.ini"] {
        let entry = format!(r#"{{"path":"{hostile}","sha256":"00","size":1,"kind":"bundle"}}"#);
        for text in [
            good.replacen("\"files\": [", &format!("\"files\": [{entry},"), 1),
            good.replacen(
                "\"files\": [",
                &format!("\"pending\": {{\"files\": [], \"remove\": [\"{hostile}\"]}}, \"files\": ["),
                1,
            ),
        ] {
            std::fs::write(&manifest, &text).unwrap();
            let (rc, report, err) = rig.sync(&inv, &[]);
            assert_eq!(rc, 3, "{err}");
            let n = &nodes(&report)[0];
            assert_eq!(n["status"], "failed");
            let e = n["error"].as_str().unwrap();
            assert!(e.contains("manifest.json") && e.contains("refus") || e.contains(".."), "{e}");
            assert_eq!(n["name"], "node-00", "the node is named");
            for v in &victims {
                assert_eq!(std::fs::read_to_string(v).unwrap(), "keep me", "{}", v.display());
            }
        }
    }
}

#[test]
fn a_sync_without_payload_or_credentials_leaves_them_and_pruning_is_explicit() {
    let rig = Rig::new();
    rig.render(INPUTS);
    let payload = rig.path("payload");
    std::fs::create_dir_all(payload.join("C/k/cni")).unwrap();
    std::fs::write(payload.join("C/k/kubelet.exe"), b"kubelet v1").unwrap();
    std::fs::write(payload.join("C/k/cni/win-overlay.exe"), b"cni v1").unwrap();
    std::fs::write(payload.join("C/k/hns.psm1"), b"# hns").unwrap();
    let kubeconfig = rig.path("bootstrap-kubeconfig");
    std::fs::write(&kubeconfig, "token: BOOTSTRAP-MARKER\n").unwrap();
    let ca = rig.path("kubelet-ca.crt");
    std::fs::write(&ca, "CA-MARKER\n").unwrap();
    let inv = rig.inventory(1, rig.sshd.port);
    let (p, k, c) = (payload.to_str().unwrap(), kubeconfig.to_str().unwrap(), ca.to_str().unwrap());
    let (rc, _, err) = rig.sync(&inv, &["--payload", p, "--bootstrap-kubeconfig", k, "--kubelet-ca", c]);
    assert_eq!(rc, 0, "{err}");
    let full = delivered(&rig.path("node-00"));

    // A config-only sync (a mirror changes): payload and credentials stay, byte for byte.
    rig.render(&INPUTS.replace("mirror.example.com:5000/redhat/ubi9", "mirror2.example.com/redhat/ubi9"));
    let (rc, report, err) = rig.sync(&inv, &["--kubelet-ca", c]);
    assert_eq!(rc, 0, "{err}");
    let n = &nodes(&report)[0];
    assert_eq!(n["removed"], serde_json::json!([]), "{n}");
    let kept: Vec<&str> = n["kept"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(
        kept,
        [r"C:\k\bootstrap-kubeconfig", r"C:\k\cni\win-overlay.exe", r"C:\k\hns.psm1", r"C:\k\kubelet.exe"],
        "{n}"
    );
    let now = delivered(&rig.path("node-00"));
    for f in ["k/kubelet.exe", "k/cni/win-overlay.exe", "k/hns.psm1", "k/bootstrap-kubeconfig", "k/kubelet-ca.crt"] {
        assert_eq!(now.get(f), full.get(f), "{f}");
    }
    // The kept files stay in the node's manifest, so a later sync still knows them.
    let (rc, report, _) = rig.sync(&inv, &["--kubelet-ca", c]);
    assert_eq!((rc, nodes(&report)[0]["status"].as_str()), (0, Some("unchanged")));

    // Removing them is explicit, and a dry run shows it first.
    let (rc, report, err) = rig.sync(&inv, &["--prune-payload", "--dry-run"]);
    assert_eq!(rc, 1, "{err}");
    assert_eq!(
        nodes(&report)[0]["removed"],
        serde_json::json!([r"C:\k\cni\win-overlay.exe", r"C:\k\hns.psm1", r"C:\k\kubelet.exe"])
    );
    assert!(rig.path("node-00/C/k/kubelet.exe").exists(), "a dry run removes nothing");
    let (rc, _, err) = rig.sync(&inv, &["--prune-payload", "--kubelet-ca", c]);
    assert_eq!(rc, 0, "{err}");
    assert!(!rig.path("node-00/C/k/kubelet.exe").exists());
    assert!(rig.path("node-00/C/k/bootstrap-kubeconfig").exists(), "credentials are pruned on their own");
    let (rc, _, err) = rig.sync(&inv, &["--prune-credentials"]);
    assert_eq!(rc, 0, "{err}");
    assert!(!rig.path("node-00/C/k/bootstrap-kubeconfig").exists() && !rig.path("node-00/C/k/kubelet-ca.crt").exists());
}

#[test]
fn a_payload_path_with_spaces_is_applied() {
    let rig = Rig::new();
    rig.render(INPUTS);
    let payload = rig.path("pay load");
    std::fs::create_dir_all(payload.join("C/k/Program Files/tool  two")).unwrap();
    std::fs::write(payload.join("C/k/Program Files/tool  two/a b.exe"), b"spaced").unwrap();
    let inv = rig.inventory(1, rig.sshd.port);
    let (rc, report, err) = rig.sync(&inv, &["--payload", payload.to_str().unwrap()]);
    assert_eq!(rc, 0, "{err}");
    let n = &nodes(&report)[0];
    assert_eq!(n["status"], "synced", "{n}");
    assert_eq!(n["apply"]["status"], "converged", "{n}");
    assert_eq!(std::fs::read(rig.path("node-00/C/k/Program Files/tool  two/a b.exe")).unwrap(), b"spaced");
}

#[test]
fn cuts_in_either_direction_of_a_version_change_are_finished_by_the_next_sync() {
    let rig = Rig::new();
    let payload = rig.path("payload");
    std::fs::create_dir_all(payload.join("C/k")).unwrap();
    let (p, inv) = (payload.to_str().unwrap().to_string(), rig.inventory(1, rig.sshd.port));
    // kubelet.exe changes between versions: binary upgrades, without a cluster to drain the node through.
    let upgrade = ["--payload", &p, "--allow-undrained-upgrade"];
    // Version 2 has a registry (and its folder) and a payload file version 1 does not have, and changes others.
    let v2_inputs = INPUTS.replace("mirror.example.com:5000", "mirror-b.example.com:5000")
        + "    - source: registry.example.com/only-v2\n      mirrors: [mirror-b.example.com:5000/only-v2]\n";
    let write_v = |v: u32| {
        let exe: Vec<u8> = (0..400_000u32).map(|i| (i % (241 + v)) as u8).collect();
        std::fs::write(payload.join("C/k/kubelet.exe"), exe).unwrap();
        if v == 2 {
            std::fs::write(payload.join("C/k/only-v2.exe"), vec![7u8; 200_000]).unwrap();
        } else {
            let _ = std::fs::remove_file(payload.join("C/k/only-v2.exe"));
        }
        rig.render(if v == 1 { INPUTS } else { &v2_inputs })
    };
    for (from, to) in [(1, 2), (2, 1)] {
        for budget in [6_000, 40_000, 150_000, 350_000, 520_000] {
            // Start clean at `from`.
            let rendered = write_v(from);
            let (rc, _, err) = rig.sync(&inv, &upgrade);
            assert_eq!(rc, 0, "{err}");
            assert_eq!(delivered(&rig.path("node-00")), expected(&rendered, &payload), "at v{from}");
            // A push of `to` cut after `budget` bytes…
            let rendered_to = write_v(to);
            let (port, stop) = cutting_proxy(rig.sshd.port, budget);
            rig.sshd.write_known_hosts(&rig.path("known_proxy"), port);
            let o = wmrender(&[
                "sync",
                "--rendered",
                rendered_to.to_str().unwrap(),
                "--inventory",
                rig.inventory(1, port).to_str().unwrap(),
                "--identity",
                rig.sshd.path("client_ed25519").to_str().unwrap(),
                "--known-hosts",
                rig.path("known_proxy").to_str().unwrap(),
                "--payload",
                &p,
                "--allow-undrained-upgrade",
                "--connect-timeout",
                "3",
            ]);
            stop.store(true, Ordering::SeqCst);
            let _ = o;
            // …then a clean push of `from` again: the node holds exactly `from`, no temporary file, no leftover.
            let rendered = write_v(from);
            let (rc, _, err) = rig.sync(&inv, &upgrade);
            assert_eq!(rc, 0, "v{from}→v{to} cut at {budget}: {err}");
            assert_eq!(
                delivered(&rig.path("node-00")),
                expected(&rendered, &payload),
                "v{from}→v{to} cut at {budget}, then v{from}"
            );
            let (rc, report, _) = rig.sync(&inv, &upgrade);
            assert_eq!((rc, nodes(&report)[0]["status"].as_str()), (0, Some("unchanged")), "then a no-op");
        }
    }
}
