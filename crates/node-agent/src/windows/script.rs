//! Steps: `powershell.exe -NoProfile -NonInteractive -ExecutionPolicy Bypass -File <script> <args…>`, each
//! argument passed as one literal argument (no shell in between, so `$(...)`, `&` or `%x%` in a value stay text).
//! A script that runs longer than the step time-out is ended and counts as failed.

use super::scm::{ERROR_INTERNAL_ERROR, START_AGAIN_AFTER};
use crate::system::{ScriptRun, SysError, SysResult};
use std::io::Read;
use std::os::windows::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CREATE_NO_WINDOW: u32 = 0x0800_0000;

pub fn run(script: &Path, args: &[String], timeout: Duration) -> SysResult<ScriptRun> {
    let mut command = Command::new("powershell.exe");
    command
        .args(["-NoProfile", "-NonInteractive", "-ExecutionPolicy", "Bypass", "-File"])
        .arg(script)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .creation_flags(CREATE_NO_WINDOW);
    // A start the system could not complete at the moment is tried once more, as a service start is.
    let mut child = match command.spawn() {
        Err(e) if e.raw_os_error() == Some(ERROR_INTERNAL_ERROR) => {
            std::thread::sleep(START_AGAIN_AFTER);
            command.spawn()
        }
        other => other,
    }
    .map_err(|e| SysError(format!("cannot start powershell.exe: {e}")))?;
    let read_all = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let stdout = child.stdout.take().map(|s| read_all(Box::new(s)));
    let stderr = child.stderr.take().map(|s| read_all(Box::new(s)));
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() < timeout => std::thread::sleep(Duration::from_millis(100)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(SysError(format!("{} ran longer than {timeout:?} and was ended", script.display())));
            }
            Err(e) => return Err(SysError(format!("cannot wait for powershell.exe: {e}"))),
        }
    };
    let join = |h: Option<std::thread::JoinHandle<String>>| h.and_then(|h| h.join().ok()).unwrap_or_default();
    Ok(ScriptRun { exit_code: status.code().unwrap_or(-1), stdout: join(stdout), stderr: join(stderr) })
}
