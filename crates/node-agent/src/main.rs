//! `wmrender-node`: `apply` (one convergence pass, one JSON line on stdout, exit 0 converged / 1 failed /
//! 3 pending), `deconfigure` (undo it; exit 0 done / 1 failed), `run` (the Windows service that repeats it), `--help`, `--version`. Exit 2 for usage errors.

use wmrender_node::timing::{self, Timing};

const USAGE: &str = "\
usage: wmrender-node <command>

commands:
  apply               one convergence pass to the bundle sync staged in C:\\k\\wmrender; prints one JSON line;
                      exit 0 converged, 1 failed, 3 pending (waiting on a reboot or the cluster), 2 usage
  deconfigure         undo what the agent set up (its services, dependents first; the HNS networks; the trusted
                      CAs and machine variables it set; the bundle, payload and credentials; its own service
                      last); prints one JSON line; exit 0 done, 1 failed (run it again)
  run                 the agent's Windows service (started by the SCM): a pass, then again every 2 minutes,
                      or with back-off (5 s doubling to 2 minutes) while pending or failed
  run --foreground    the same loop in this console, for trying it out
  --help, --version

environment (seconds): WMRENDER_NODE_STOP_TIMEOUT (60), WMRENDER_NODE_INTERVAL (120),
  WMRENDER_NODE_BACKOFF_MAX (120), WMRENDER_NODE_LOCK_TIMEOUT (600), WMRENDER_NODE_STEP_TIMEOUT (600)
";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(cli(&args));
}

fn usage_error(what: &str) -> i32 {
    eprintln!("wmrender-node: {what}\n\n{USAGE}");
    2
}

fn cli(args: &[String]) -> i32 {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["--help" | "-h" | "help"] => {
            print!("{USAGE}");
            0
        }
        ["--version" | "-V"] => {
            println!("wmrender-node {}", env!("CARGO_PKG_VERSION"));
            0
        }
        ["apply"] => with_timing(platform::apply),
        ["deconfigure"] => with_timing(platform::deconfigure),
        ["run"] => with_timing(|t| platform::run(t, false)),
        ["run", "--foreground"] => with_timing(|t| platform::run(t, true)),
        [] => usage_error("a command is needed"),
        [cmd, ..] if ["apply", "deconfigure", "run"].contains(cmd) => {
            usage_error(&format!("unexpected arguments after `{cmd}`"))
        }
        [other, ..] => usage_error(&format!("unknown command `{other}`")),
    }
}

fn with_timing(f: impl FnOnce(&Timing) -> i32) -> i32 {
    match Timing::from_env() {
        Ok(t) => f(&t),
        Err(e) => usage_error(&format!("{e} (variables: {})", timing::VARIABLES.join(", "))),
    }
}

#[cfg(windows)]
mod platform {
    use wmrender_contract::NodePath;
    use wmrender_node::timing::Timing;
    use wmrender_node::windows::{WindowsSystem, service};
    use wmrender_node::{apply, log, system::Files};

    pub fn apply(timing: &Timing) -> i32 {
        let mut sys = WindowsSystem::new(timing.clone());
        let result = apply::apply(&mut sys, timing);
        let line = result.to_line();
        log::append(&sys.local(&NodePath::known(log::LOG_FILE)), &format!("apply {line}"));
        println!("{line}");
        result.status.exit_code()
    }

    pub fn deconfigure(timing: &Timing) -> i32 {
        let mut sys = WindowsSystem::new(timing.clone());
        let result = wmrender_node::deconfigure::deconfigure(&mut sys, timing);
        let line = result.to_line();
        log::append(&sys.local(&NodePath::known(log::LOG_FILE)), &format!("deconfigure {line}"));
        println!("{line}");
        result.status.exit_code()
    }

    pub fn run(timing: &Timing, foreground: bool) -> i32 {
        if foreground {
            let mut sys = WindowsSystem::new(timing.clone());
            let (wake, woken) = std::sync::mpsc::channel::<()>();
            let watch = wmrender_node::node_watch::NodeWatch::of_node(&sys, move || {
                let _ = wake.send(());
            });
            let _ = wmrender_node::run::run_loop(&mut sys, timing, Some(&watch), &mut |d| {
                let _ = woken.recv_timeout(d);
                false
            });
            return 0;
        }
        match service::dispatch(timing.clone()) {
            Ok(()) => 0,
            Err(e @ service::DispatchError::NotAService) => crate::usage_error(&e.to_string()),
            Err(e) => {
                eprintln!("wmrender-node: {e}");
                3
            }
        }
    }
}

#[cfg(not(windows))]
mod platform {
    use wmrender_node::timing::Timing;

    fn windows_only() -> i32 {
        eprintln!(
            "wmrender-node: `apply`, `deconfigure` and `run` manage a Windows node and work on Windows only (this build is for {})",
            std::env::consts::OS
        );
        2
    }

    pub fn apply(_: &Timing) -> i32 {
        windows_only()
    }

    pub fn deconfigure(_: &Timing) -> i32 {
        windows_only()
    }

    pub fn run(_: &Timing, _: bool) -> i32 {
        windows_only()
    }
}
