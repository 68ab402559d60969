//! Helpers shared by the integration tests: running the real binary and finding the test inputs.
#![allow(dead_code)] // each test file uses a different subset

#[cfg(feature = "cluster")]
pub mod apiserver;
#[cfg(feature = "cluster")]
pub mod controller_manager;
#[cfg(feature = "cluster")]
pub mod controller_rig;
pub mod cosign;
#[cfg(feature = "cluster")]
pub mod kubelet;
#[cfg(feature = "cluster")]
pub mod netns;
pub mod openapi;
#[cfg(feature = "cluster")]
pub mod openshift;
#[cfg(feature = "cluster")]
pub mod played;
pub mod powershell;
#[cfg(feature = "cluster")]
pub mod rbac;
pub mod registry;
#[cfg(feature = "cluster")]
pub mod scheduler;
pub mod sshd;
pub mod wine;
pub mod wine_bundle;
pub mod wine_sshd;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every valid inputs file shipped: the examples and the extra fixtures.
pub fn valid_inputs() -> Vec<PathBuf> {
    let mut v = Vec::new();
    for dir in ["examples", "fixtures"] {
        for entry in std::fs::read_dir(root().join(dir)).expect("listing inputs") {
            let p = entry.expect("dir entry").path().join("wmrender.yaml");
            if p.is_file() {
                v.push(p);
            }
        }
    }
    v.sort();
    v
}

/// A readable name for an inputs file: `examples/aws`.
pub fn case_name(inputs: &Path) -> String {
    let rel = inputs.strip_prefix(root()).unwrap_or(inputs);
    rel.parent().unwrap_or(rel).to_string_lossy().replace('\\', "/")
}

/// Runs the wmrender binary with stdin closed, as Argo CD and CI do.
pub fn wmrender(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wmrender")).args(args).stdin(Stdio::null()).output().expect("running wmrender")
}

pub fn code(o: &Output) -> i32 {
    o.status.code().expect("exited, not killed by a signal (a panic aborts with 101, a crash has no code)")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Every file below `dir` with its bytes, by relative path.
pub fn read_tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for entry in std::fs::read_dir(dir).expect("reading output") {
            let p = entry.expect("entry").path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).expect("below root").to_string_lossy().replace('\\', "/");
                out.push((rel, std::fs::read(&p).expect("reading file")));
            }
        }
    }
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// Renders `inputs` into a fresh directory and returns it (kept alive by the TempDir).
pub fn render_to_temp(inputs: &Path) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("out");
    let o = wmrender(&["render", "-f", inputs.to_str().expect("utf-8 path"), "-o", out.to_str().expect("utf-8 path")]);
    assert_eq!(code(&o), 0, "render {} failed:\n{}", inputs.display(), stderr(&o));
    (tmp, out)
}

/// Runs openssl; its stdout.
/// Whether process `pid` (a decimal string, from the name of something a test process left) is gone.
pub fn process_gone(pid: &str) -> bool {
    !pid.is_empty() && !Path::new("/proc").join(pid).exists()
}

/// `umoci ARGS`, which must succeed (bash tests/setup.sh installs it).
pub fn umoci(args: &[&str]) {
    let out = Command::new("umoci").args(args).output().expect("umoci (bash tests/setup.sh)");
    assert!(out.status.success(), "umoci {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A self-signed ECDSA P-256 certificate and its key (PKCS#8 PEM), made by openssl: a test's CA or signer.
pub fn self_signed_p256(key: &Path, cert: &Path, subject: &str, days: u32) {
    let days = days.to_string();
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-days",
        &days,
        "-subj",
        subject,
        "-keyout",
        key.to_str().unwrap(),
        "-out",
        cert.to_str().unwrap(),
    ]);
}

pub fn openssl(args: &[&str]) -> Vec<u8> {
    let out = Command::new("openssl").args(args).output().expect("openssl runs");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

/// `openssl req` with a new P-256 key written to `key`: the rest of the arguments follow.
fn new_key_request(key: &Path, rest: &[&str]) -> Vec<u8> {
    let key = key.to_str().expect("UTF-8 path");
    let mut args = vec!["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key];
    args.extend_from_slice(rest);
    openssl(&args)
}

/// A self-signed certificate (PEM) for `subject` (`/CN=…`), its new key written to `key`, valid `days`.
pub fn self_signed(key: &Path, subject: &str, days: u32) -> String {
    let days = days.to_string();
    String::from_utf8(new_key_request(key, &["-x509", "-days", &days, "-subj", subject])).expect("PEM")
}

/// A certificate signing request (PEM) for `subject` (`/O=…/CN=…`) with `san` (e.g. `DNS:a,IP:1.2.3.4`, none if
/// empty), its new key written to `key`.
pub fn request(key: &Path, subject: &str, san: &str) -> Vec<u8> {
    let ext = format!("subjectAltName={san}");
    let mut rest = vec!["-new", "-subj", subject];
    if !san.is_empty() {
        rest.extend(["-addext", ext.as_str()]);
    }
    new_key_request(key, &rest)
}

/// A self-signed certificate (PEM) with this common name, valid one day: test data.
pub fn certificate(cn: &str) -> String {
    self_signed(Path::new("/dev/null"), &format!("/CN={cn}"), 1)
}
