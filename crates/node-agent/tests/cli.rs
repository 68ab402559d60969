//! The binary's command line: help, version, usage errors (exit 2), and the Windows-only commands on Linux.

use std::process::Command;

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_wmrender-node")).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn help_version_and_usage_errors() {
    let (code, out, _) = run(&["--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("apply") && out.contains("WMRENDER_NODE_STOP_TIMEOUT"), "{out}");
    let (code, out, _) = run(&["--version"]);
    assert_eq!((code, out.trim()), (0, concat!("wmrender-node ", env!("CARGO_PKG_VERSION"))));
    for bad in [&[][..], &["frobnicate"], &["apply", "--root", "x"], &["run", "--bogus"]] {
        let (code, out, err) = run(bad);
        assert_eq!(code, 2, "{bad:?}");
        assert!(out.is_empty() && err.starts_with("wmrender-node: ") && err.contains("usage:"), "{bad:?}: {err}");
    }
}

#[cfg(not(windows))]
#[test]
fn apply_and_run_say_they_need_windows() {
    for cmd in [&["apply"][..], &["run"]] {
        let (code, _, err) = run(cmd);
        assert_eq!(code, 2);
        assert!(err.contains("work on Windows only"), "{err}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_wmrender-node"))
        .arg("apply")
        .env("WMRENDER_NODE_INTERVAL", "soon")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("WMRENDER_NODE_INTERVAL=\"soon\""));
}
