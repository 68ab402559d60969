//! wine-probe.exe: the Wine rig's eyes and hands inside the prefix. Prints one JSON value on stdout per call.
//!
//! - `services NAME…`: per service its SCM state and pid, and its configuration as stored in the registry
//!   (`HKLM\SYSTEM\CurrentControlSet\Services\<name>`). The registry, not `QueryServiceConfig`: Wine's SCM stores
//!   `DependOnService` but reports no dependencies.
//! - `list`: the services whose binary lies below `C:\k`, and `wmrender-node`.
//! - `remove NAME…`: stops each (bounded wait, then kills its process) and deletes it; `stuck` when the SCM
//!   still knows it 5 s later (Wine's SCM does not notice a killed service process; a reboot clears it).
//! - `reset [NAME=VALUE|NAME=]…`: the reset between tests in one process: removes the agent's service first (its
//!   loop would recreate the others), then every service `list` shows; sets or removes machine variables.
//! - `kill PID`: ends a process at once, as a crash would (only a live process of a program below `C:\k`).
//! - `alive PID`: whether that process runs, and its program.
//! - `env NAME…`, `setenv NAME VALUE`, `unsetenv NAME`: machine-level environment variables (HKLM).
//! - `roots`: the sha256 (of the DER) of every certificate in the LocalMachine Root store, through crypt32 as the
//!   agent reads it; `add-root FILE`: adds a DER certificate there, as an administrator would (not the agent).
//! - `exec SECONDS COMMANDLINE [UNTIL]`: runs a command line as the SCM runs a service's (one string, handed to
//!   CreateProcess as it is: the program is its first word, or its first quoted string), ends it after SECONDS or
//!   once the file UNTIL exists; its exit code (null when it was ended), whether it was ended, what it printed.

#[cfg(windows)]
mod probe {
    use serde_json::{Value, json};
    use std::time::{Duration, Instant};
    use windows_service::service::{ServiceAccess, ServiceState};
    use windows_service::service_manager::{ServiceManager, ServiceManagerAccess};
    use winreg::RegKey;
    use winreg::enums::{HKEY_LOCAL_MACHINE, KEY_READ, KEY_WRITE};

    const SERVICES_KEY: &str = r"SYSTEM\CurrentControlSet\Services";
    const ENV_KEY: &str = r"SYSTEM\CurrentControlSet\Control\Session Manager\Environment";

    type Res<T> = Result<T, String>;

    #[link(name = "kernel32")]
    unsafe extern "system" {
        fn OpenProcess(access: u32, inherit: i32, pid: u32) -> isize;
        fn TerminateProcess(process: isize, code: u32) -> i32;
        fn CloseHandle(handle: isize) -> i32;
        fn QueryFullProcessImageNameW(process: isize, flags: u32, name: *mut u16, size: *mut u32) -> i32;
        fn GetExitCodeProcess(process: isize, code: *mut u32) -> i32;
    }

    /// Whether process `pid` runs: it can be opened and has not ended (an ended process stays known while someone
    /// holds a handle on it).
    fn running(pid: u32) -> bool {
        const PROCESS_QUERY_LIMITED_INFORMATION: u32 = 0x1000;
        const STILL_ACTIVE: u32 = 259;
        // SAFETY: plain Win32 calls on a handle this function opens and closes.
        unsafe {
            let h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid);
            if h == 0 {
                return false;
            }
            let mut code = 0u32;
            let ok = GetExitCodeProcess(h, &mut code);
            CloseHandle(h);
            ok != 0 && code == STILL_ACTIVE
        }
    }

    /// The executable of a live process, `None` when there is no such process. Wine's SCM keeps reporting the pid
    /// of a service whose process was killed, and pids are reused quickly: check before killing.
    fn process_image(pid: u32) -> Option<String> {
        const PROCESS_QUERY_LIMITED_INFORMATION: u32 = 0x1000;
        // SAFETY: plain Win32 calls on a handle this function opens and closes, with a buffer of the size given.
        unsafe {
            let h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid);
            if h == 0 {
                return None;
            }
            let mut buf = [0u16; 1024];
            let mut len = buf.len() as u32;
            let ok = QueryFullProcessImageNameW(h, 0, buf.as_mut_ptr(), &mut len);
            CloseHandle(h);
            (ok != 0).then(|| String::from_utf16_lossy(&buf[..len as usize]))
        }
    }

    /// Kills `pid` only when it is a live process running a program below C:\k (a service wmrender manages, or
    /// a fake standing in for one), never this probe.
    fn kill_service_process(pid: u32) -> Res<bool> {
        if pid == 0 || pid == std::process::id() {
            return Ok(false);
        }
        match process_image(pid) {
            Some(image) if image.to_ascii_lowercase().starts_with(r"c:\k\") => kill(pid).map(|()| true),
            _ => Ok(false),
        }
    }

    fn kill(pid: u32) -> Res<()> {
        const PROCESS_TERMINATE: u32 = 0x0001;
        // SAFETY: plain Win32 calls on a handle this function opens and closes.
        unsafe {
            let h = OpenProcess(PROCESS_TERMINATE, 0, pid);
            if h == 0 {
                return Err(format!("OpenProcess({pid}): {}", std::io::Error::last_os_error()));
            }
            let ok = TerminateProcess(h, 1);
            let err = std::io::Error::last_os_error();
            CloseHandle(h);
            if ok == 0 { Err(format!("TerminateProcess({pid}): {err}")) } else { Ok(()) }
        }
    }

    fn scm() -> Res<ServiceManager> {
        ServiceManager::local_computer(None::<&str>, ServiceManagerAccess::CONNECT)
            .map_err(|e| format!("SCM: {}", describe(&e)))
    }

    fn state_name(s: ServiceState) -> &'static str {
        match s {
            ServiceState::Stopped => "stopped",
            ServiceState::StartPending => "start-pending",
            ServiceState::StopPending => "stop-pending",
            ServiceState::Running => "running",
            ServiceState::ContinuePending => "continue-pending",
            ServiceState::PausePending => "pause-pending",
            ServiceState::Paused => "paused",
        }
    }

    /// A REG_MULTI_SZ value: strings up to the first empty one (the list ends with two NULs; what lies after them
    /// is not part of the value, and Wine's sc.exe stores such bytes).
    fn multi_sz(key: &RegKey, name: &str) -> Vec<String> {
        let Ok(raw) = key.get_raw_value(name) else { return vec![] };
        let units: Vec<u16> = raw.bytes.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
        units.split(|u| *u == 0).take_while(|s| !s.is_empty()).map(String::from_utf16_lossy).collect()
    }

    fn registry(name: &str) -> Value {
        let Ok(key) =
            RegKey::predef(HKEY_LOCAL_MACHINE).open_subkey_with_flags(format!(r"{SERVICES_KEY}\{name}"), KEY_READ)
        else {
            return Value::Null;
        };
        json!({
            "imagePath": key.get_value::<String, _>("ImagePath").ok(),
            "displayName": key.get_value::<String, _>("DisplayName").ok(),
            "description": key.get_value::<String, _>("Description").ok(),
            "dependOnService": multi_sz(&key, "DependOnService"),
            "start": key.get_value::<u32, _>("Start").ok(),
            "type": key.get_value::<u32, _>("Type").ok(),
            "objectName": key.get_value::<String, _>("ObjectName").ok(),
        })
    }

    fn service(manager: &ServiceManager, name: &str) -> Value {
        let access = ServiceAccess::QUERY_STATUS | ServiceAccess::QUERY_CONFIG;
        let svc = match manager.open_service(name, access) {
            Ok(s) => s,
            Err(e) => {
                return json!({ "name": name, "exists": false, "openError": describe(&e), "registry": registry(name) });
            }
        };
        let status = svc.query_status();
        let failure = svc.get_failure_actions().map(|f| {
            json!({
                "resetPeriod": format!("{:?}", f.reset_period),
                "actions": f.actions.unwrap_or_default().iter()
                    .map(|a| json!({ "type": format!("{:?}", a.action_type), "delayMs": a.delay.as_millis() as u64 }))
                    .collect::<Vec<_>>(),
            })
        });
        json!({
            "name": name,
            "exists": true,
            "state": status.as_ref().map(|s| state_name(s.current_state)).ok(),
            "pid": status.as_ref().ok().and_then(|s| s.process_id),
            "statusError": status.as_ref().err().map(describe),
            "failureActions": failure.as_ref().ok(),
            "failureActionsError": failure.as_ref().err().map(describe),
            "registry": registry(name),
        })
    }

    fn list() -> Res<Vec<String>> {
        let services = RegKey::predef(HKEY_LOCAL_MACHINE)
            .open_subkey_with_flags(SERVICES_KEY, KEY_READ)
            .map_err(|e| format!("{SERVICES_KEY}: {e}"))?;
        let mut out = Vec::new();
        for name in services.enum_keys().filter_map(Result::ok) {
            let path: String = services.open_subkey(&name).and_then(|k| k.get_value("ImagePath")).unwrap_or_default();
            let p = path.trim_start_matches('"').to_ascii_lowercase();
            if p.starts_with(r"c:\k\") || name.eq_ignore_ascii_case("wmrender-node") {
                out.push(name);
            }
        }
        Ok(out)
    }

    fn wait_state(manager: &ServiceManager, name: &str, want: ServiceState, limit: Duration) -> Res<Option<u32>> {
        let svc =
            manager.open_service(name, ServiceAccess::QUERY_STATUS).map_err(|e| format!("{name}: {}", describe(&e)))?;
        let deadline = Instant::now() + limit;
        loop {
            let s = svc.query_status().map_err(|e| format!("{name}: {}", describe(&e)))?;
            if s.current_state == want {
                return Ok(None);
            }
            if Instant::now() > deadline {
                return Ok(Some(s.process_id.unwrap_or(0)));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    const ERROR_SERVICE_MARKED_FOR_DELETE: i32 = 1072;

    /// The Windows error code under a windows-service error, if there is one.
    fn os_error(e: &windows_service::Error) -> Option<i32> {
        match e {
            windows_service::Error::Winapi(io) => io.raw_os_error(),
            _ => None,
        }
    }

    /// A windows-service error with its cause (its own text is only "IO error in winapi call").
    fn describe(e: &windows_service::Error) -> String {
        match std::error::Error::source(e) {
            Some(cause) => format!("{e}: {cause}"),
            None => e.to_string(),
        }
    }

    /// Stops (bounded; kills a stalled process) and deletes one service; waits until the SCM forgets it.
    fn remove(manager: &ServiceManager, name: &str) -> Res<&'static str> {
        let access = ServiceAccess::STOP | ServiceAccess::QUERY_STATUS | ServiceAccess::DELETE;
        let svc = match manager.open_service(name, access) {
            Ok(s) => s,
            Err(_) => return Ok("absent"),
        };
        // The pid before the stop request: Wine reports none for a service in StopPending.
        let pid = svc.query_status().ok().and_then(|s| s.process_id).unwrap_or(0);
        let _ = svc.stop(); // fails when it is not running: fine
        if wait_state(manager, name, ServiceState::Stopped, Duration::from_secs(10))?.is_some() {
            // Stalled. Wine's SCM will not notice the kill (it goes on reporting the old state): the caller
            // reboots the machine when a service stays known after its deletion.
            kill_service_process(pid)?;
        }
        match svc.delete() {
            Ok(()) => {}
            // Marked for deletion already (by the agent's own removal, whose handle had not closed yet): it goes as
            // this one would, or stays `stuck` until a reboot.
            Err(e) if os_error(&e) == Some(ERROR_SERVICE_MARKED_FOR_DELETE) => {}
            Err(e) => return Err(format!("delete {name}: {}", describe(&e))),
        }
        drop(svc);
        let deadline = Instant::now() + Duration::from_secs(5);
        while manager.open_service(name, ServiceAccess::QUERY_STATUS).is_ok() {
            if Instant::now() > deadline {
                return Ok("stuck");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok("removed")
    }

    fn env_key(write: bool) -> Res<RegKey> {
        let flags = if write { KEY_READ | KEY_WRITE } else { KEY_READ };
        RegKey::predef(HKEY_LOCAL_MACHINE).open_subkey_with_flags(ENV_KEY, flags).map_err(|e| format!("{ENV_KEY}: {e}"))
    }

    fn run(args: &[String]) -> Res<Value> {
        let rest = args.get(1..).unwrap_or_default();
        match args.first().map(String::as_str) {
            Some("services") => {
                let m = scm()?;
                Ok(Value::Array(rest.iter().map(|n| service(&m, n)).collect()))
            }
            Some("list") => Ok(json!(list()?)),
            Some("remove") => {
                let m = scm()?;
                let mut out = serde_json::Map::new();
                for name in rest {
                    out.insert(name.clone(), json!(remove(&m, name)?));
                }
                Ok(Value::Object(out))
            }
            Some("reset") => {
                let m = scm()?;
                let mut removed = serde_json::Map::new();
                removed.insert("wmrender-node".into(), json!(remove(&m, "wmrender-node")?));
                for name in list()? {
                    removed.insert(name.clone(), json!(remove(&m, &name)?));
                }
                let key = env_key(true)?;
                for assignment in rest {
                    let (name, value) = assignment.split_once('=').ok_or("reset takes NAME=VALUE")?;
                    if value.is_empty() {
                        let _ = key.delete_value(name);
                    } else {
                        key.set_value(name, &value).map_err(|e| format!("set {name}: {e}"))?;
                    }
                }
                Ok(json!({ "removed": removed }))
            }
            Some("kill") => {
                let pid = rest.first().and_then(|p| p.parse().ok()).ok_or("usage: kill PID")?;
                if !kill_service_process(pid)? {
                    return Err(format!("pid {pid} is not a live process of a program below C:\\k"));
                }
                Ok(json!({ "killed": pid }))
            }
            Some("alive") => {
                let pid: u32 = rest.first().and_then(|p| p.parse().ok()).ok_or("usage: alive PID")?;
                let image = process_image(pid);
                Ok(json!({ "alive": running(pid), "image": image }))
            }
            Some("env") => {
                let key = env_key(false)?;
                Ok(Value::Object(rest.iter().map(|n| (n.clone(), json!(key.get_value::<String, _>(n).ok()))).collect()))
            }
            Some("setenv") if rest.len() == 2 => {
                env_key(true)?.set_value(&rest[0], &rest[1]).map_err(|e| format!("set {}: {e}", rest[0]))?;
                Ok(json!({ "set": rest[0] }))
            }
            Some("unsetenv") if rest.len() == 1 => {
                let _ = env_key(true)?.delete_value(&rest[0]); // absent already: fine
                Ok(json!({ "unset": rest[0] }))
            }
            Some("roots") => Ok(json!(roots::list()?)),
            Some("add-root") if rest.len() == 1 => {
                let der = std::fs::read(&rest[0]).map_err(|e| format!("{}: {e}", rest[0]))?;
                roots::add(&der)?;
                Ok(json!({ "added": rest[0] }))
            }
            Some("exec") if rest.len() == 2 || rest.len() == 3 => {
                let seconds = rest[0].parse().map_err(|_| "usage: exec SECONDS COMMANDLINE [UNTIL]")?;
                exec(Duration::from_secs(seconds), &rest[1], rest.get(2).map(std::path::Path::new))
            }
            _ => Err("usage: wine-probe services NAME… | list | remove NAME… | reset [NAME=VALUE]… | kill PID | alive PID | env NAME… | setenv NAME VALUE | unsetenv NAME | roots | add-root FILE | exec SECONDS COMMANDLINE [UNTIL]".into()),
        }
    }

    /// A service's command line, run as CreateProcess runs it: the program is the first quoted string or the first
    /// word, and the rest reaches the program's own parser exactly as written (`raw_arg`, no quoting added).
    fn exec(limit: Duration, line: &str, until: Option<&std::path::Path>) -> Res<Value> {
        use std::io::Read;
        use std::os::windows::process::CommandExt;
        use std::process::{Command, Stdio};
        let line = line.trim_start();
        let (program, args) = match line.strip_prefix('"') {
            Some(quoted) => quoted.split_once('"').ok_or("the program's quote is not closed")?,
            None => line.split_once([' ', '\t']).unwrap_or((line, "")),
        };
        let mut child = Command::new(program)
            .raw_arg(args.trim_start())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {program}: {e}"))?;
        // Each pipe is read as it comes, so what was said can be taken even while a process the program started
        // still holds the pipe open (windows_exporter's collectors make Wine start such helpers).
        let reader = |mut pipe: Box<dyn Read + Send>| {
            let said = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let into = said.clone();
            let thread = std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                while let Ok(n) = pipe.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    into.lock().map(|mut v| v.extend_from_slice(&buf[..n])).ok();
                }
            });
            (thread, said)
        };
        let out = reader(Box::new(child.stdout.take().ok_or("no stdout")?));
        let err = reader(Box::new(child.stderr.take().ok_or("no stderr")?));
        let deadline = Instant::now() + limit;
        let (code, ended) = loop {
            if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
                break (status.code(), false);
            }
            if Instant::now() > deadline || until.is_some_and(|f| f.exists()) {
                let _ = child.kill();
                let _ = child.wait();
                break (None, true);
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // The pipes end with the program, unless something it started holds them: wait a little, then take what came.
        let drained = Instant::now() + Duration::from_secs(2);
        while !(out.0.is_finished() && err.0.is_finished()) && Instant::now() < drained {
            std::thread::sleep(Duration::from_millis(20));
        }
        let take = |said: &std::sync::Arc<std::sync::Mutex<Vec<u8>>>| {
            said.lock().map(|v| String::from_utf8_lossy(&v).into_owned()).unwrap_or_default()
        };
        let (stdout, stderr) = (take(&out.1), take(&err.1));
        Ok(json!({ "code": code, "ended": ended, "stdout": stdout, "stderr": stderr }))
    }

    /// The LocalMachine Root store through crypt32 (the same calls as the agent's, written again here so the
    /// probe checks the store independently of the agent's code).
    mod roots {
        use sha2::{Digest, Sha256};
        use std::ffi::c_void;
        use windows_sys::Win32::Security::Cryptography::{
            CERT_CONTEXT, CERT_STORE_ADD_NEW, CERT_STORE_PROV_SYSTEM_W, CERT_SYSTEM_STORE_LOCAL_MACHINE,
            CertAddEncodedCertificateToStore, CertCloseStore, CertEnumCertificatesInStore, CertOpenStore, HCERTSTORE,
            X509_ASN_ENCODING,
        };

        fn open() -> Result<HCERTSTORE, String> {
            let name: Vec<u16> = "ROOT\0".encode_utf16().collect();
            // SAFETY: a constant provider and a NUL-terminated name that outlives the call.
            let h = unsafe {
                CertOpenStore(
                    CERT_STORE_PROV_SYSTEM_W,
                    0,
                    0,
                    CERT_SYSTEM_STORE_LOCAL_MACHINE,
                    name.as_ptr() as *const c_void,
                )
            };
            if h.is_null() { Err(format!("CertOpenStore: {}", std::io::Error::last_os_error())) } else { Ok(h) }
        }

        pub fn list() -> Result<Vec<String>, String> {
            let store = open()?;
            let mut all = Vec::new();
            let mut prev: *const CERT_CONTEXT = std::ptr::null();
            loop {
                // SAFETY: `prev` is null or the last context returned, which this call frees.
                let cur = unsafe { CertEnumCertificatesInStore(store, prev) };
                if cur.is_null() {
                    break;
                }
                // SAFETY: a context from the enumeration points at its encoded bytes.
                let der = unsafe { std::slice::from_raw_parts((*cur).pbCertEncoded, (*cur).cbCertEncoded as usize) };
                all.push(Sha256::digest(der).iter().map(|b| format!("{b:02x}")).collect());
                prev = cur;
            }
            // SAFETY: opened above, closed once.
            unsafe { CertCloseStore(store, 0) };
            Ok(all)
        }

        pub fn add(der: &[u8]) -> Result<(), String> {
            let store = open()?;
            // SAFETY: the bytes outlive the call; no context is asked back.
            let ok = unsafe {
                CertAddEncodedCertificateToStore(
                    store,
                    X509_ASN_ENCODING,
                    der.as_ptr(),
                    der.len() as u32,
                    CERT_STORE_ADD_NEW,
                    std::ptr::null_mut(),
                )
            };
            let err = std::io::Error::last_os_error();
            // SAFETY: opened above, closed once.
            unsafe { CertCloseStore(store, 0) };
            if ok == 0 { Err(format!("CertAddEncodedCertificateToStore: {err}")) } else { Ok(()) }
        }
    }

    pub fn main() {
        let args: Vec<String> = std::env::args().skip(1).collect();
        match run(&args) {
            Ok(v) => println!("{v}"),
            Err(e) => {
                eprintln!("wine-probe: {e}");
                std::process::exit(1)
            }
        }
    }
}

#[cfg(windows)]
fn main() {
    probe::main()
}

#[cfg(not(windows))]
fn main() {
    eprintln!("wine-probe is a Windows program (build with --target x86_64-pc-windows-gnu)");
    std::process::exit(2)
}
