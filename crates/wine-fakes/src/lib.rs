//! Windows programs for wmrender's Wine test rig (tests/support/wine.rs). They stand in for what a Windows node runs
//! and cannot run under Wine on a Linux CI machine, and they record what they were asked to do, so a test can check
//! the agent's work from the outside:
//!
//! - `fake-service.exe`: a real Windows service (it answers the Service Control Manager's protocol) copied to every
//!   path a service binary names (kubelet.exe, containerd.exe, kube-log-runner.exe, …). It logs every start and
//!   stop with its command line, its pid and the sha256 of its own executable and of the executables its command
//!   line names, and it can be told to misbehave (stall on stop, crash after start).
//! - `fake-powershell.exe`: replaces Wine's `powershell.exe` (a stub that prints nothing and exits 0). It records
//!   its arguments and answers from a table the test writes. It stands in for PowerShell; it does not parse it.
//! - `wine-probe.exe`: reads the SCM and the registry back for the test, stops and deletes services between tests
//!   and kills processes.
//! - `ssh-exec.exe`: runs an SSH client's command through `cmd.exe /c`, as Win32-OpenSSH does.
//!
//! Everything they record goes below one control folder, `<drive of the executable>\wine-fakes` (the
//! `WINE_FAKES_DIR` environment variable overrides it), as JSON lines.

pub mod powershell;

use serde::Serialize;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The environment variable that overrides the control folder.
pub const DIR_ENV: &str = "WINE_FAKES_DIR";
/// The services' event log in the control folder.
pub const SERVICE_LOG: &str = "services.jsonl";
/// Per-service behaviour switches: `modes\<service name>` holds one word (see `fake-service`).
pub const MODES_DIR: &str = "modes";

/// The control folder for a program at `exe`: `WINE_FAKES_DIR`, else `wine-fakes` at the root of the executable's
/// drive (the fakes sit at many paths; they all report to one place).
pub fn control_dir(exe: &Path) -> PathBuf {
    if let Some(dir) = std::env::var_os(DIR_ENV) {
        return PathBuf::from(dir);
    }
    let root = exe.ancestors().last().unwrap_or(exe);
    // On Windows the last ancestor of `C:\k\x.exe` is `C:\`; elsewhere `/`.
    root.join("wine-fakes")
}

/// Lower-case hex sha256 of a file's bytes, `None` when it cannot be read.
pub fn sha256_file(path: &Path) -> Option<String> {
    let bytes = std::fs::read(path).ok()?;
    Some(Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect())
}

/// Milliseconds since the Unix epoch: orders events from different processes.
pub fn now_ms() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0)
}

/// Appends one JSON line to `file`, creating its folder. One `write` call per line, so lines from concurrent
/// processes do not interleave.
pub fn append_json_line(file: &Path, value: &impl Serialize) -> std::io::Result<()> {
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut line = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    line.push(b'\n');
    std::fs::OpenOptions::new().create(true).append(true).open(file)?.write_all(&line)
}

/// The behaviour switch for a service: the first word of `modes\<service>`, if the test wrote one.
pub fn mode(dir: &Path, service: &str) -> Option<String> {
    let text = std::fs::read_to_string(dir.join(MODES_DIR).join(service)).ok()?;
    text.split_whitespace().next().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_append_and_modes_read() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("sub").join("log.jsonl");
        append_json_line(&log, &serde_json::json!({"a": 1})).unwrap();
        append_json_line(&log, &serde_json::json!({"a": 2})).unwrap();
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "{\"a\":1}\n{\"a\":2}\n");
        assert_eq!(mode(dir.path(), "kubelet"), None);
        std::fs::create_dir_all(dir.path().join(MODES_DIR)).unwrap();
        std::fs::write(dir.path().join(MODES_DIR).join("kubelet"), "stall-stop\n").unwrap();
        assert_eq!(mode(dir.path(), "kubelet").as_deref(), Some("stall-stop"));
        assert_eq!(
            sha256_file(&log).unwrap().len(),
            64,
            "hex sha256 of an existing file; None for a missing one: {:?}",
            sha256_file(&dir.path().join("none"))
        );
    }
}
