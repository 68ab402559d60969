//! The Wine test rig: a Windows "machine" for the node agent's tests (recipe: ../shared/reference/wine-rig).
//!
//! One Wine prefix per test binary (creating one costs 7–17 s), shared by its tests through a mutex and reset
//! between them. The rig builds the Windows programs (`wmrender-node` and the `wine-fakes` crate) with cargo into
//! its own target folder, `<target>/wine`, so it never waits on the lock of the cargo that runs the tests; installs
//! the `ProcessPrng` shim Rust needs under Wine 8 (tests/wine/bcryptprimitives.c); replaces Wine's
//! `powershell.exe` stub with the recording fake; keeps the machine up with `wineserver -p`; and leaves a watchdog
//! that stops the wineserver and deletes the prefix when the test process ends, however it ends.
//!
//! Wine is required, never skipped: without it the tests fail and say how to install it.

use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};
use wmrender_contract::{ApplyResult, NodePath};

/// The Windows target the rig builds for.
pub const TARGET: &str = "x86_64-pc-windows-gnu";
/// Machine-level settings of the agent that every test starts from (the agent reads them from its environment;
/// services see machine variables after a reboot): a stalled service is killed after 3 s, a converged run loop
/// waits an hour (so it never races a test's own `apply`), a pending one at most 5 s.
pub const KNOBS: [(&str, &str); 3] =
    [("WMRENDER_NODE_STOP_TIMEOUT", "3"), ("WMRENDER_NODE_INTERVAL", "3600"), ("WMRENDER_NODE_BACKOFF_MAX", "5")];
/// Machine variables a test may set; the reset removes them.
pub const PROXY_VARS: [&str; 3] = ["HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"];
/// The rig's own folder in the prefix: fakes' logs, the probe, the powershell answers.
pub const FAKES_DIR: &str = r"C:\wine-fakes";

/// What a Windows program printed and how it ended.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn text(&self) -> String {
        format!("exit {}\n--- stdout\n{}\n--- stderr\n{}", self.code, self.stdout, self.stderr)
    }
}

pub struct Wine {
    /// WINEPREFIX.
    pub prefix: PathBuf,
    /// The built Windows programs (`wmrender-node.exe`, `fake-service.exe`, …).
    pub exes: PathBuf,
    /// Whether a test set a machine variable of [`KNOBS`]: services.exe may hold it (from a reboot since) until the
    /// reset restores the variables and reboots.
    knobs_changed: bool,
}

static RIG: OnceLock<Mutex<Wine>> = OnceLock::new();

/// The shared Wine machine, reset to a clean state (no wmrender services, no `C:\k`, no proxy variables, empty
/// logs). Holding the guard serialises the tests of one binary.
pub fn rig() -> MutexGuard<'static, Wine> {
    let mut guard =
        RIG.get_or_init(|| Mutex::new(Wine::start())).lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    guard.reset();
    guard
}

/// Runs `cmd` with a deadline and its output thrown away; its exit code. For commands that may leave a process
/// behind holding their output (`wineserver -p` daemonises; the first Wine process after a boot starts
/// services.exe), which piped output would wait for.
pub fn run_quiet(cmd: &mut Command, limit: Duration) -> i32 {
    let what = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    let deadline = Instant::now() + limit;
    loop {
        if let Some(st) = child.try_wait().expect("waiting for a child") {
            return st.code().unwrap_or(-1);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `cmd` with a deadline; on time-out kills it and panics with what it printed so far.
pub fn run_bounded(cmd: &mut Command, limit: Duration) -> Run {
    let what = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    let mut out = child.stdout.take().expect("piped stdout");
    let mut err = child.stderr.take().expect("piped stderr");
    let out_reader = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = out.read_to_end(&mut b);
        b
    });
    let err_reader = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = err.read_to_end(&mut b);
        b
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(st) = child.try_wait().expect("waiting for a child") {
            break Some(st);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // A wine process can leave a grandchild holding the pipes (its console host, which on a busy machine lingers
    // for seconds); read what is there without waiting on it forever, and say so when the output was not read.
    let join = |h: std::thread::JoinHandle<Vec<u8>>| {
        let until = Instant::now() + Duration::from_secs(20);
        while !h.is_finished() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        if h.is_finished() {
            String::from_utf8_lossy(&h.join().unwrap_or_default()).into_owned()
        } else {
            "[not read: a process it left behind still held the pipe 20 s after it ended]".to_string()
        }
    };
    let run =
        Run { code: status.and_then(|s| s.code()).unwrap_or(-1), stdout: join(out_reader), stderr: join(err_reader) };
    if status.is_none() {
        panic!("{what} did not finish within {limit:?}\n{}", run.text());
    }
    run
}

fn require_tools() {
    for tool in ["wine", "wineserver", "wineboot", "x86_64-w64-mingw32-gcc", "setsid"] {
        let found = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
            .unwrap_or(false);
        assert!(
            found,
            "the Wine tests need `{tool}` on PATH: run `bash tests/e2e/wine-setup.sh` (as root; it installs wine, \
             wine64 and gcc-mingw-w64-x86-64 without recommends and adds the {TARGET} Rust target), or `bash .ci/run`"
        );
    }
}

/// The cargo target folder the tests were built into.
fn target_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).parent().expect("target/tmp has a parent").to_path_buf()
}

/// Builds the Windows programs (release: small, fast to hash) and the shim; returns the folder holding them.
pub fn build_windows_programs() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            require_tools();
            let target = target_dir().join("wine");
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let run = run_bounded(
                Command::new(cargo)
                    .current_dir(super::root())
                    .args([
                        "build",
                        "--release",
                        "--locked",
                        "--target",
                        TARGET,
                        "-p",
                        "wmrender-node",
                        "-p",
                        "wine-fakes",
                    ])
                    .arg("--target-dir")
                    .arg(&target)
                    .env_remove("CARGO_TARGET_DIR")
                    .env_remove("RUSTFLAGS"),
                Duration::from_secs(1800),
            );
            assert_eq!(
                run.code,
                0,
                "building the Windows programs failed (is the target installed? `rustup target add {TARGET}`)\n{}",
                run.text()
            );
            let exes = target.join(TARGET).join("release");
            let shim = run_bounded(
                Command::new("x86_64-w64-mingw32-gcc")
                    .args(["-shared", "-O2", "-s", "-o"])
                    .arg(exes.join("bcryptprimitives.dll"))
                    .arg(super::root().join("tests/wine/bcryptprimitives.c"))
                    .arg("-ladvapi32"),
                Duration::from_secs(120),
            );
            assert_eq!(shim.code, 0, "building the ProcessPrng shim failed\n{}", shim.text());
            exes
        })
        .clone()
}

impl Wine {
    fn start() -> Wine {
        let exes = build_windows_programs();
        let dir = tempfile::Builder::new()
            .prefix("wmrender-wine-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .expect("a folder for the Wine prefix")
            .keep();
        let mut wine = Wine { prefix: dir.join("prefix"), exes, knobs_changed: false };
        wine.leave_watchdog(&dir);
        let boot = run_quiet(wine.command("wineboot").arg("-i"), Duration::from_secs(180));
        assert_eq!(boot, 0, "wineboot -i failed (run it by hand with WINEPREFIX set to see why)");
        wine.server(&["-w"]);
        wine.install_programs();
        wine.server(&["-p"]);
        let knobs: Vec<String> = KNOBS.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut args = vec!["reset"];
        args.extend(knobs.iter().map(String::as_str));
        wine.probe(&args);
        // The machine variables reach services.exe at its next start.
        wine.reboot();
        wine
    }

    /// A process that outlives the test binary by at most a second: then it stops the wineserver (and every
    /// service in it) and deletes the prefix. `setsid` keeps it out of the test's process group, so a Ctrl-C of
    /// `cargo test` still gets cleaned up.
    #[allow(clippy::zombie_processes)] // it must outlive this process, which therefore never waits for it
    fn leave_watchdog(&self, dir: &Path) {
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; \
             WINEPREFIX='{prefix}' timeout 30 wineserver -k; WINEPREFIX='{prefix}' timeout 30 wineserver -w; \
             rm -rf '{dir}'",
            pid = std::process::id(),
            prefix = self.prefix.display(),
            dir = dir.display()
        );
        Command::new("setsid")
            .args(["sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting the Wine rig's watchdog");
    }

    fn install_programs(&self) {
        let sys32 = self.prefix.join("drive_c/windows/system32");
        copy(&self.exes.join("bcryptprimitives.dll"), &sys32.join("bcryptprimitives.dll"));
        // Wine's powershell.exe prints nothing and exits 0; every step would look successful. Replace it, and make
        // sure it is the only one.
        let stub = sys32.join("WindowsPowerShell/v1.0/powershell.exe");
        assert!(stub.is_file(), "Wine's powershell.exe is not where Wine 8 puts it: {}", stub.display());
        copy(&self.exes.join("fake-powershell.exe"), &stub);
        let others: Vec<PathBuf> = walk(&self.prefix.join("drive_c"))
            .into_iter()
            .filter(|p| p.file_name().is_some_and(|n| n.eq_ignore_ascii_case("powershell.exe")) && *p != stub)
            .collect();
        assert!(others.is_empty(), "another powershell.exe in the prefix would bypass the fake: {others:?}");
        let fakes = self.c(FAKES_DIR);
        std::fs::create_dir_all(&fakes).expect("C:\\wine-fakes");
        copy(&self.exes.join("wine-probe.exe"), &fakes.join("wine-probe.exe"));
        copy(&self.exes.join("ssh-exec.exe"), &fakes.join("ssh-exec.exe"));
    }

    /// A command for a Wine tool with this prefix; no display, no debug chatter, no Mono/Gecko prompts.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("WINEPREFIX", &self.prefix)
            .env("WINEDEBUG", "-all")
            .env("WINEDLLOVERRIDES", "mscoree,mshtml=")
            .env_remove("DISPLAY")
            .env_remove("WAYLAND_DISPLAY");
        c
    }

    /// `wine <args>` with a deadline.
    pub fn wine(&self, args: &[&str], limit: Duration) -> Run {
        run_bounded(self.command("wine").args(args), limit)
    }

    fn server(&self, args: &[&str]) {
        let code = run_quiet(self.command("wineserver").args(args), Duration::from_secs(60));
        assert!(code == 0 || args == ["-k"], "wineserver {args:?} failed with exit code {code}");
    }

    /// The local path of a Windows path on drive C: (`C:\k\x` → `<prefix>/drive_c/k/x`).
    pub fn c(&self, windows_path: &str) -> PathBuf {
        let rest =
            windows_path.strip_prefix("C:\\").or_else(|| windows_path.strip_prefix("c:\\")).unwrap_or_else(|| {
                panic!("not a C: path: {windows_path}");
            });
        let mut p = self.prefix.join("drive_c");
        for part in rest.split('\\').filter(|s| !s.is_empty()) {
            p.push(part);
        }
        p
    }

    pub fn node(&self, path: &NodePath) -> PathBuf {
        self.c(path.as_str())
    }

    /// Runs the probe; its JSON answer. Its own steps are bounded (`exec` by the seconds it is given, at most 150 in
    /// the tests): the bound here is longer, so that the probe, not this, ends what runs too long, and says what ran.
    pub fn probe(&self, args: &[&str]) -> Value {
        let mut all = vec![r"C:\wine-fakes\wine-probe.exe"];
        all.extend_from_slice(args);
        let limit = Duration::from_secs(180);
        let mut r = self.wine(&all, limit);
        // The probe says why whenever it fails; an exit with nothing said is Wine's own, not the probe's (seen once
        // in a CI run, as the first process after a test's simulated reboots): asked once more, and said.
        if r.code != 0 && r.stdout.trim().is_empty() && r.stderr.trim().is_empty() {
            eprintln!("wine-probe {args:?}: Wine ended it with exit {} and no word; asking once more", r.code);
            std::thread::sleep(Duration::from_secs(1));
            r = self.wine(&all, limit);
        }
        assert_eq!(r.code, 0, "wine-probe {args:?}\n{}", r.text());
        serde_json::from_str(r.stdout.trim()).unwrap_or_else(|e| panic!("wine-probe {args:?}: {e}\n{}", r.text()))
    }

    /// A simulated reboot: the wineserver and every process in it die without notice (no stop request), then the
    /// machine comes up again and services.exe starts the automatic services.
    pub fn reboot(&mut self) {
        self.server(&["-k"]);
        self.server(&["-w"]);
        self.server(&["-p"]);
        let code = run_quiet(self.command("wine").args(["cmd", "/c", "exit"]), Duration::from_secs(60));
        assert_eq!(code, 0, "the first process after the reboot failed");
    }

    /// Sets a machine variable of the agent's (a [`KNOBS`] name); it reaches the agent service after a reboot.
    /// The next reset restores the rig's value and reboots.
    pub fn set_knob(&mut self, name: &str, value: &str) {
        self.probe(&["setenv", name, value]);
        self.knobs_changed = true;
    }

    /// Back to a clean machine: no services below C:\k and no agent service (stopped, stalled ones killed,
    /// deleted), no `C:\k`, no proxy variables, the rig's knobs, empty logs and no powershell answers.
    pub fn reset(&mut self) {
        let mut args = vec!["reset".to_string()];
        args.extend(PROXY_VARS.iter().map(|v| format!("{v}=")));
        args.extend(KNOBS.iter().map(|(k, v)| format!("{k}={v}")));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let answer = self.probe(&args);
        if answer["removed"].as_object().is_some_and(|m| m.values().any(|v| v == "stuck")) {
            // A killed service process Wine's SCM did not notice: a reboot forgets it (deleted services go at
            // boot), and the second reset finds nothing left.
            self.reboot();
            let again = self.probe(&args);
            assert!(
                again["removed"].as_object().is_some_and(|m| m.values().all(|v| v != "stuck")),
                "services survive a reboot after their deletion: {again}"
            );
        }
        for dir in [r"C:\k", r"C:\var", r"C:\wine-fakes\modes"] {
            let p = self.c(dir);
            if p.exists() {
                std::fs::remove_dir_all(&p).unwrap_or_else(|e| panic!("removing {}: {e}", p.display()));
            }
        }
        for file in ["services.jsonl", "powershell.jsonl", "powershell-responses.json"] {
            let _ = std::fs::remove_file(self.c(FAKES_DIR).join(file));
        }
        // A knob a test set reached services.exe at its reboot: the machine variables are the rig's again now, and
        // services.exe sees them once it restarts.
        if self.knobs_changed {
            self.reboot();
            self.knobs_changed = false;
        }
    }

    /// Every event the fake services logged, in order.
    pub fn service_events(&self) -> Vec<ServiceEvent> {
        let text = std::fs::read_to_string(self.c(FAKES_DIR).join("services.jsonl")).unwrap_or_default();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad fake-service line {l}: {e}")))
            .collect()
    }

    /// Waits (bounded) until `done` holds for the fake services' events; returns them.
    pub fn wait_events(
        &self,
        what: &str,
        limit: Duration,
        done: impl Fn(&[ServiceEvent]) -> bool,
    ) -> Vec<ServiceEvent> {
        let deadline = Instant::now() + limit;
        loop {
            let events = self.service_events();
            if done(&events) {
                return events;
            }
            if Instant::now() > deadline {
                panic!("waited {limit:?} for {what}; the fake services logged:\n{}", describe(&events));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Makes a fake service misbehave: `stall-stop` or `crash` (see fake-service); `None` clears it.
    pub fn set_mode(&self, service: &str, mode: Option<&str>) {
        let dir = self.c(FAKES_DIR).join("modes");
        std::fs::create_dir_all(&dir).expect("modes folder");
        match mode {
            Some(m) => std::fs::write(dir.join(service), m).expect("mode file"),
            None => {
                let _ = std::fs::remove_file(dir.join(service));
            }
        }
    }

    /// The answers of the fake powershell, by script file name (lower case): each a sequence of
    /// `(stdout, exit code)`, the last repeating.
    pub fn set_powershell(&self, table: &BTreeMap<String, Vec<(String, i32)>>) {
        let json: BTreeMap<&String, Vec<Value>> = table
            .iter()
            .map(|(k, seq)| {
                (k, seq.iter().map(|(out, code)| serde_json::json!({"stdout": out, "exit": code})).collect())
            })
            .collect();
        std::fs::write(
            self.c(FAKES_DIR).join("powershell-responses.json"),
            serde_json::to_vec_pretty(&json).expect("json"),
        )
        .expect("powershell answers");
    }

    /// Every call the fake powershell recorded: `(script file name, arguments)`.
    pub fn powershell_calls(&self) -> Vec<(String, Vec<String>)> {
        let text = std::fs::read_to_string(self.c(FAKES_DIR).join("powershell.jsonl")).unwrap_or_default();
        text.lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).expect("a powershell log line");
                let args =
                    v["args"].as_array().map(|a| a.iter().filter_map(|x| x.as_str()).map(String::from).collect());
                (v["key"].as_str().unwrap_or_default().to_string(), args.unwrap_or_default())
            })
            .collect()
    }

    /// Every call the fake powershell recorded, with its time: `(milliseconds since the epoch, script file name,
    /// arguments)`.
    pub fn powershell_calls_timed(&self) -> Vec<(u128, String, Vec<String>)> {
        let text = std::fs::read_to_string(self.c(FAKES_DIR).join("powershell.jsonl")).unwrap_or_default();
        text.lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).expect("a powershell log line");
                let args =
                    v["args"].as_array().map(|a| a.iter().filter_map(|x| x.as_str()).map(String::from).collect());
                let t = v["t"].as_u64().unwrap_or_default() as u128;
                (t, v["key"].as_str().unwrap_or_default().to_string(), args.unwrap_or_default())
            })
            .collect()
    }

    /// Whether a process runs (wine-probe `alive`).
    pub fn process_alive(&self, pid: u32) -> bool {
        self.probe(&["alive", &pid.to_string()])["alive"] == true
    }

    /// **A stand-in for Windows' file locking**, which Wine does not have for what the rig's SFTP server (a Linux
    /// program) does: Windows refuses to delete or overwrite the file of a running program. While process `pid`
    /// runs, `file` (its program) is made immutable (`chattr +i`: no delete, no rename onto it, no write), until the
    /// guard is dropped. Nothing is held when the process has ended or the file is not there.
    pub fn hold_while_running(&self, pid: u32, file: &Path) -> Held {
        let held = file.is_file() && self.process_alive(pid);
        if held {
            let o = Command::new("chattr").arg("+i").arg(file).output().expect("chattr runs");
            assert!(o.status.success(), "chattr +i {}: {}", file.display(), String::from_utf8_lossy(&o.stderr));
        }
        Held { file: file.to_path_buf(), held }
    }

    /// The SCM's and the registry's view of services (see wine-probe `services`).
    pub fn services(&self, names: &[&str]) -> BTreeMap<String, Value> {
        let mut args = vec!["services"];
        args.extend_from_slice(names);
        let v = self.probe(&args);
        v.as_array()
            .expect("a list")
            .iter()
            .map(|s| (s["name"].as_str().unwrap_or_default().to_string(), s.clone()))
            .collect()
    }

    /// The names of every service whose binary lies below C:\k, and the agent's.
    pub fn listed_services(&self) -> Vec<String> {
        serde_json::from_value(self.probe(&["list"])).expect("names")
    }

    pub fn machine_env(&self, names: &[&str]) -> BTreeMap<String, Option<String>> {
        let mut args = vec!["env"];
        args.extend_from_slice(names);
        serde_json::from_value(self.probe(&args)).expect("variables")
    }

    /// Ends a running service's process at once, as a crash would; returns its pid.
    pub fn kill_service_process(&self, service: &str) -> u32 {
        let s = &self.services(&[service])[service];
        let pid = s["pid"].as_u64().unwrap_or_else(|| panic!("{service} has no process: {s}")) as u32;
        self.kill_pid(pid);
        pid
    }

    /// Ends a process at once. (Wine's SCM reports no pid for a service in StopPending: take it from the fake's
    /// `start` line then.) A probe that fails is not the end of it: the process may be gone all the same (the
    /// probe's answer lost on a busy machine), or the kill may need a second try; whether the process still runs
    /// decides, and a process that survives two kills fails the test with both answers.
    pub fn kill_pid(&self, pid: u32) {
        let kill = || {
            let r = self.wine(&[r"C:\wine-fakes\wine-probe.exe", "kill", &pid.to_string()], Duration::from_secs(90));
            (r.code == 0, r)
        };
        let (done, first) = kill();
        // The pid of a process that ended may already be another program's: only one below C:\k counts.
        let still_runs = || {
            let a = self.probe(&["alive", &pid.to_string()]);
            a["alive"] == true && a["image"].as_str().is_some_and(|i| i.to_ascii_lowercase().starts_with(r"c:\k\"))
        };
        if done || !still_runs() {
            return;
        }
        let (done, second) = kill();
        assert!(
            done || !still_runs(),
            "wine-probe kill {pid} failed twice and the process still runs\n{}\n{}",
            first.text(),
            second.text()
        );
    }

    /// `C:\k\wmrender\wmrender-node.exe <args>`; its result line (panics with everything it printed when there
    /// is none).
    pub fn agent(&self, args: &[&str], limit: Duration) -> (Run, ApplyResult) {
        let mut all = vec![wmrender_contract::paths::AGENT_EXE];
        all.extend_from_slice(args);
        let run = self.wine(&all, limit);
        let result = ApplyResult::from_stdout(&run.stdout)
            .unwrap_or_else(|| panic!("wmrender-node {args:?} printed no result line\n{}", run.text()));
        (run, result)
    }

    /// One pass of `wmrender-node apply`. When the pass started the agent's own service, waits for that
    /// service's first pass too, so the test's next change is not picked up by the loop instead.
    pub fn apply(&self) -> (Run, ApplyResult) {
        let before = self.agent_passes().len();
        let (run, result) = self.agent(&["apply"], Duration::from_secs(300));
        if result.started.iter().any(|s| s == wmrender_contract::paths::AGENT_SERVICE) {
            self.wait_agent_passes(before + 1, Duration::from_secs(120));
        }
        (run, result)
    }

    /// The passes the agent's service logged (`C:\var\log\wmrender-node\wmrender-node.log`: a time stamp and the
    /// result line).
    pub fn agent_passes(&self) -> Vec<ApplyResult> {
        let text = std::fs::read_to_string(self.c(r"C:\var\log\wmrender-node\wmrender-node.log")).unwrap_or_default();
        text.lines().filter_map(|l| l.split_once(' ')).filter_map(|(_, json)| serde_json::from_str(json).ok()).collect()
    }

    pub fn wait_agent_passes(&self, count: usize, limit: Duration) -> Vec<ApplyResult> {
        let deadline = Instant::now() + limit;
        loop {
            let passes = self.agent_passes();
            if passes.len() >= count {
                return passes;
            }
            if Instant::now() > deadline {
                panic!("the agent service logged {} passes in {limit:?}, expected {count}: {passes:?}", passes.len());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// A file held as Windows holds a running program's ([`Wine::hold_while_running`]); released when dropped.
pub struct Held {
    file: PathBuf,
    /// Whether the file is held (the process ran).
    pub held: bool,
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.held {
            let _ = Command::new("chattr").arg("-i").arg(&self.file).output();
        }
    }
}

/// One line of the fake services' log.
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceEvent {
    pub t: u128,
    pub event: String,
    pub service: String,
    pub pid: u32,
    pub exe: String,
    pub exe_sha256: Option<String>,
    #[serde(default)]
    pub binaries: BTreeMap<String, Option<String>>,
    #[serde(default)]
    pub command_line: Option<String>,
    #[serde(default)]
    pub argv: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, Option<String>>,
}

/// The events, one per line, for a failure message.
pub fn describe(events: &[ServiceEvent]) -> String {
    events.iter().map(|e| format!("  {} {:<14} {} pid {}\n", e.t, e.event, e.service, e.pid)).collect()
}

/// `(service, event)` pairs in order, for comparisons.
pub fn sequence(events: &[ServiceEvent]) -> Vec<(String, String)> {
    events.iter().map(|e| (e.service.clone(), e.event.clone())).collect()
}

fn copy(from: &Path, to: &Path) {
    std::fs::copy(from, to).unwrap_or_else(|e| panic!("copying {} to {}: {e}", from.display(), to.display()));
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    for e in entries.flatten() {
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => out.extend(walk(&p)),
            Ok(t) if t.is_file() => out.push(p),
            _ => {}
        }
    }
    out
}
