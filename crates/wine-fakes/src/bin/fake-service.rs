//! fake-service.exe: a real Windows service for the Wine rig, copied to every path a service binary names
//! (kubelet.exe, containerd.exe, kube-log-runner.exe, …) so that the command lines the agent registers run it.
//!
//! It answers the Service Control Manager's protocol and appends one JSON line per event to
//! `<control dir>\services.jsonl`: `starting` (before it reports Running), `start` (service name, pid, the full command line and argv, the sha256 of its own
//! executable and of every `.exe` its command line names, the proxy variables it sees), `stop-requested`,
//! `stalling`, `stop`, `crash`. The hashes are read at the moment of the event, so a binary swapped while the
//! service still ran shows up as a new hash in the `stop` line.
//!
//! Run outside the SCM with `--linger`, it is a process that is no service's, as a pod's containerd shim is: it logs
//! `linger` (with its pid) and waits ten minutes, until someone ends it.
//!
//! `<control dir>\modes\<service name>` makes it misbehave:
//! - `stall-stop`: acknowledges a stop request (StopPending) and never stops: whoever stops it must kill it;
//! - `crash`: reports Running, logs `start`, then exits with code 3 half a second later without telling the SCM.

#[cfg(windows)]
mod service {
    use serde_json::{Value, json};
    use std::collections::BTreeMap;
    use std::ffi::OsString;
    use std::path::{Path, PathBuf};
    use std::sync::mpsc;
    use std::time::Duration;
    use windows_service::service::{
        ServiceControl, ServiceControlAccept, ServiceExitCode, ServiceState, ServiceStatus, ServiceType,
    };
    use windows_service::service_control_handler::{self, ServiceControlHandlerResult};
    use windows_service::{define_windows_service, service_dispatcher};

    #[link(name = "kernel32")]
    unsafe extern "system" {
        fn GetCommandLineW() -> *const u16;
    }

    /// The process's command line exactly as the SCM passed it (`BinaryPathName`).
    fn command_line() -> String {
        // SAFETY: GetCommandLineW returns a pointer to the process's NUL-terminated command line, valid for the
        // life of the process.
        unsafe {
            let p = GetCommandLineW();
            if p.is_null() {
                return String::new();
            }
            let mut len = 0;
            while *p.add(len) != 0 {
                len += 1;
            }
            String::from_utf16_lossy(std::slice::from_raw_parts(p, len))
        }
    }

    fn exe() -> PathBuf {
        std::env::current_exe().unwrap_or_default()
    }

    /// Every argument that names an existing `.exe` (kube-log-runner's child, say), with its current sha256.
    fn named_executables(argv: &[String]) -> BTreeMap<String, Option<String>> {
        argv.iter()
            .skip(1)
            .filter(|a| a.to_ascii_lowercase().ends_with(".exe") && Path::new(a).is_file())
            .map(|a| (a.clone(), wine_fakes::sha256_file(Path::new(a))))
            .collect()
    }

    fn log(service: &str, event: &str, extra: Value) {
        let argv: Vec<String> = std::env::args().collect();
        let mut line = json!({
            "t": wine_fakes::now_ms(),
            "event": event,
            "service": service,
            "pid": std::process::id(),
            "exe": exe().display().to_string(),
            "exeSha256": wine_fakes::sha256_file(&exe()),
            "binaries": named_executables(&argv),
        });
        if let (Value::Object(l), Value::Object(e)) = (&mut line, extra) {
            l.extend(e);
        }
        let file = wine_fakes::control_dir(&exe()).join(wine_fakes::SERVICE_LOG);
        // A fake that cannot report would make every test pass or fail for the wrong reason: die loudly.
        if let Err(e) = wine_fakes::append_json_line(&file, &line) {
            eprintln!("fake-service: cannot write {}: {e}", file.display());
            std::process::exit(70);
        }
    }

    fn mode(service: &str) -> Option<String> {
        wine_fakes::mode(&wine_fakes::control_dir(&exe()), service)
    }

    fn status(state: ServiceState, accept: ServiceControlAccept, exit: u32) -> ServiceStatus {
        ServiceStatus {
            service_type: ServiceType::OWN_PROCESS,
            current_state: state,
            controls_accepted: accept,
            exit_code: ServiceExitCode::Win32(exit),
            checkpoint: 0,
            wait_hint: if state == ServiceState::StopPending { Duration::from_secs(2) } else { Duration::default() },
            process_id: None,
        }
    }

    define_windows_service!(ffi_service_main, service_main);

    fn service_main(args: Vec<OsString>) {
        // The SCM passes the service's name first.
        let name = args
            .first()
            .map(|a| a.to_string_lossy().into_owned())
            .unwrap_or_else(|| exe().file_stem().unwrap_or_default().to_string_lossy().into_owned());
        let (tx, rx) = mpsc::channel();
        let handler = move |control| match control {
            ServiceControl::Stop | ServiceControl::Shutdown => {
                let _ = tx.send(control);
                ServiceControlHandlerResult::NoError
            }
            ServiceControl::Interrogate => ServiceControlHandlerResult::NoError,
            _ => ServiceControlHandlerResult::NotImplemented,
        };
        let handle = match service_control_handler::register(&name, handler) {
            Ok(h) => h,
            Err(e) => {
                log(&name, "register-failed", json!({ "error": e.to_string() }));
                return;
            }
        };
        // Logged before the SCM hears "running": whoever waits for that to start the next service orders the lines.
        log(&name, "starting", json!({}));
        let running = status(ServiceState::Running, ServiceControlAccept::STOP | ServiceControlAccept::SHUTDOWN, 0);
        if let Err(e) = handle.set_service_status(running) {
            log(&name, "status-failed", json!({ "error": e.to_string() }));
            return;
        }
        let env: BTreeMap<&str, Option<String>> =
            ["HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"].into_iter().map(|v| (v, std::env::var(v).ok())).collect();
        log(
            &name,
            "start",
            json!({
                "commandLine": command_line(),
                "argv": std::env::args().collect::<Vec<_>>(),
                "serviceArgs": args.iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>(),
                "env": env,
            }),
        );
        if mode(&name).as_deref() == Some("crash") {
            std::thread::sleep(Duration::from_millis(500));
            log(&name, "crash", json!({}));
            std::process::exit(3);
        }
        let control = rx.recv().unwrap_or(ServiceControl::Stop);
        log(&name, "stop-requested", json!({ "control": format!("{control:?}") }));
        if mode(&name).as_deref() == Some("stall-stop") {
            let _ = handle.set_service_status(status(ServiceState::StopPending, ServiceControlAccept::empty(), 0));
            log(&name, "stalling", json!({}));
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        log(&name, "stop", json!({}));
        let _ = handle.set_service_status(status(ServiceState::Stopped, ServiceControlAccept::empty(), 0));
    }

    pub fn main() {
        if std::env::args().nth(1).as_deref() == Some("--linger") {
            let name = exe().file_name().unwrap_or_default().to_string_lossy().into_owned();
            log(&name, "linger", json!({}));
            std::thread::sleep(Duration::from_secs(600));
            std::process::exit(0);
        }
        if let Err(e) = service_dispatcher::start("fake-service", ffi_service_main) {
            // Not started by the SCM (someone ran the binary by hand): say so, and leave a trace for the test.
            log("", "not-a-service", json!({ "error": e.to_string(), "argv": std::env::args().collect::<Vec<_>>() }));
            eprintln!("fake-service: not started by the Service Control Manager: {e}");
            std::process::exit(1);
        }
    }
}

#[cfg(windows)]
fn main() {
    service::main()
}

#[cfg(not(windows))]
fn main() {
    eprintln!("fake-service is a Windows service (build with --target x86_64-pc-windows-gnu)");
    std::process::exit(2)
}
