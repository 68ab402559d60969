//! One service at a time against the SCM: its resolved configuration, and stops and starts with bounded waits.
//! A stop that the service ignores ends with its process killed; a start waits until the SCM reports it running,
//! because Wine's SCM does not start dependencies first and the agent must start in order itself.

use crate::node_vars::{NodeVars, substitute};
use crate::system::{RunState, ServiceConfig, System};
use crate::timing::Timing;
use std::time::Duration;
use wmrender_contract::{NodeVariable, Service};

/// How long the SCM gets to notice a killed process.
const AFTER_KILL: Duration = Duration::from_secs(10);

/// The first pause of a wait; each next one doubles, up to `Timing::poll`. Most services stop or start within tens
/// of milliseconds: a first pause of the full 250 ms made a one-file change (a stop and a start) cost half a second
/// of waiting for services that were long done. A slow one is still asked only every `Timing::poll`.
const FIRST_POLL: Duration = Duration::from_millis(10);

/// The configuration a service must have: its command with the node values put in, and demand start. Only the
/// agent's own service starts at boot; it starts the others in table order once its every-boot steps ran (WICD
/// creates its services demand-start too): Windows starting kube-proxy at boot, before the network step and
/// before hybrid-overlay rebuilt the HNS network, would run it with the last boot's source VIP.
pub fn desired_config(service: &Service, vars: &NodeVars) -> Result<ServiceConfig, String> {
    if service.node_variables.contains(&NodeVariable::HostnameOverride) && vars.hostname_override.is_empty() {
        return Err(format!(
            "service `{}` uses HOSTNAME_OVERRIDE, but node.json's node name source does not override the host name",
            service.name
        ));
    }
    Ok(ServiceConfig {
        name: service.name.clone(),
        command: substitute(&service.command, &vars.pairs(&service.node_variables)),
        description: service.description.clone(),
        dependencies: service.dependencies.clone(),
        automatic: false,
    })
}

pub fn is_running(state: RunState) -> bool {
    !matches!(state, RunState::Stopped)
}

/// The state now; a service that does not exist counts as stopped.
pub fn state(sys: &dyn System, name: &str) -> Result<RunState, String> {
    match sys.run_status(name) {
        Ok(Some(s)) => Ok(s.state),
        Ok(None) => Ok(RunState::Stopped),
        Err(e) => Err(format!("cannot query service `{name}`: {e}")),
    }
}

/// Stops a service and waits for it: at most `timing.stop_timeout`, then its process is killed (its name goes
/// to `killed`). Returns whether it was running.
pub fn stop_and_wait(
    sys: &mut dyn System,
    timing: &Timing,
    name: &str,
    killed: &mut Vec<String>,
) -> Result<bool, String> {
    let Some(status) = sys.run_status(name).map_err(|e| format!("cannot query service `{name}`: {e}"))? else {
        return Ok(false);
    };
    if status.state == RunState::Stopped {
        return Ok(false);
    }
    // The pid before the stop request: Wine's SCM reports none while a service is stop-pending.
    let pid_before = status.pid;
    if status.state != RunState::StopPending
        && let Err(e) = sys.stop_service(name)
        && state(sys, name)? != RunState::Stopped
    {
        return Err(format!("cannot stop service `{name}`: {e}"));
    }
    if wait_for(sys, timing, name, timing.stop_timeout, |_, s| s == RunState::Stopped)? {
        return Ok(true);
    }
    // It ignored the stop request: end its process, as WMCO does with a stalled service.
    let pid = sys.run_status(name).ok().flatten().and_then(|s| s.pid).or(pid_before);
    let Some(pid) = pid else {
        return Err(format!(
            "service `{name}` did not stop within {:?} and has no process to end",
            timing.stop_timeout
        ));
    };
    sys.kill_process(pid).map_err(|e| format!("service `{name}` did not stop; ending process {pid} failed: {e}"))?;
    killed.push(name.to_string());
    // Wine's SCM may go on reporting stop-pending after the process ended (Windows reports stopped): the process
    // having ended is what counts, and the SCM starts such a service again on request.
    if wait_for(sys, timing, name, AFTER_KILL, |sys, s| s == RunState::Stopped || !sys.process_alive(pid))? {
        Ok(true)
    } else {
        Err(format!("service `{name}` is still not stopped after its process {pid} was ended"))
    }
}

/// Starts a service and waits until it runs (at most `timing.stop_timeout`).
pub fn start_and_wait(sys: &mut dyn System, timing: &Timing, name: &str) -> Result<(), String> {
    sys.start_service(name).map_err(|e| format!("cannot start service `{name}`: {e}"))?;
    let mut seen_stopped_twice = 0;
    let running = wait_for(sys, timing, name, timing.stop_timeout, |_, s| {
        // Stopped right after a start request: it ended at once (a crash or a bad command line).
        if s == RunState::Stopped {
            seen_stopped_twice += 1;
        }
        s == RunState::Running || seen_stopped_twice >= 2
    })?;
    match state(sys, name)? {
        RunState::Running if running => Ok(()),
        RunState::Stopped => Err(format!("service `{name}` stopped right after it was started")),
        s => Err(format!("service `{name}` did not reach running within {:?} (now {s:?})", timing.stop_timeout)),
    }
}

/// Polls until `done` holds, at most `limit`; the time is counted in polls, so a slow SCM only makes it longer. The
/// pauses start at [`FIRST_POLL`] and double up to `timing.poll`.
fn wait_for(
    sys: &mut dyn System,
    timing: &Timing,
    name: &str,
    limit: Duration,
    mut done: impl FnMut(&dyn System, RunState) -> bool,
) -> Result<bool, String> {
    let mut waited = Duration::ZERO;
    let mut pause = FIRST_POLL.min(timing.poll);
    loop {
        let now = state(sys, name)?;
        if done(&*sys, now) {
            return Ok(true);
        }
        if waited >= limit {
            return Ok(false);
        }
        let step = pause.min(limit - waited).max(Duration::from_millis(1));
        sys.sleep(step);
        waited += step;
        pause = pause.saturating_mul(2).min(timing.poll);
    }
}
