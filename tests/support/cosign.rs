//! The real `cosign` v2.6.5, built from its Go module by tests/cosign/build.sh (once per test run), run against a
//! test's registry: it trusts the test CA (Go reads SSL_CERT_FILE) and reaches no transparency log. Its experimental
//! features are on (`COSIGN_EXPERIMENTAL=1`), for `--registry-referrers-mode=oci-1-1`.

use super::registry::Scratch;
use std::path::PathBuf;
use std::process::{Command, Output};

/// The password of the cosign key pairs the tests generate.
pub const PASSWORD: &str = "cosign-test-password";

pub fn binary() -> PathBuf {
    static BUILD: std::sync::Once = std::sync::Once::new();
    BUILD.call_once(|| {
        let out = Command::new("bash").arg(super::root().join("tests/cosign/build.sh")).output().expect("bash");
        assert!(out.status.success(), "tests/cosign/build.sh: {}", String::from_utf8_lossy(&out.stderr));
    });
    super::root().join("target/cosign/cosign")
}

/// A test server built beside cosign (tests/cosign/build.sh): `oci-registry` or `token-server`
/// (tests/support/registry.rs starts them).
pub fn test_server(name: &str) -> PathBuf {
    binary();
    super::root().join("target/cosign").join(name)
}

/// `cosign ARGS` in the scratch folder (its key pairs land there).
pub fn run(scratch: &Scratch, args: &[&str]) -> Output {
    Command::new(binary())
        .args(args)
        .env("SSL_CERT_FILE", scratch.ca.pem())
        .env("COSIGN_PASSWORD", PASSWORD)
        .env("COSIGN_YES", "true")
        .env("COSIGN_EXPERIMENTAL", "1")
        .env("HOME", scratch.dir.path())
        .env("DOCKER_CONFIG", scratch.dir.path().join(".docker"))
        .current_dir(scratch.dir.path())
        .output()
        .expect("cosign runs")
}
