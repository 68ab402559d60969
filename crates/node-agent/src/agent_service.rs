//! The agent's own service, `wmrender-node`: installed by the first apply so the node finishes by itself (after
//! the Containers-feature reboot, once kubelet's certificate is approved) and stays converged. It is the one service
//! that starts at boot. Apply creates, updates and starts it, and never stops it while a pass runs: the pass may be
//! running inside it.
//!
//! When sync replaces the agent's executable, the running service goes on running the old program (Windows lets a
//! running program's file be renamed aside, not replaced). The agent hands over to its new version at once, the way
//! a service updates itself on Windows: the service records which program it runs when it starts
//! (`C:\k\wmrender\agent-running.json`); sync's `apply` (the new program) restarts the service once its own pass is
//! over and the lock released, and a pass of the service itself that finds its program replaced ends the service
//! with an error, which the SCM's recovery actions answer with a start of the new program. The old copy set aside is
//! removed once nothing runs it.

use crate::apply::Pass;
use crate::digest::sha256_file;
use crate::result::status_of;
use crate::scm;
use crate::state::AppliedState;
use crate::system::{RunState, ServiceConfig, System};
use crate::timing::Timing;
use serde::{Deserialize, Serialize};
use wmrender_contract::{ApplyResult, NodePath, paths};

pub const DESCRIPTION: &str = "wmrender node agent: keeps this node converged to the bundle wmrender sync delivered";

pub fn config() -> ServiceConfig {
    ServiceConfig {
        name: paths::AGENT_SERVICE.into(),
        command: format!("\"{}\" run", paths::AGENT_EXE),
        description: DESCRIPTION.into(),
        dependencies: vec![],
        automatic: true,
    }
}

/// What the running agent service recorded about itself when it started.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Running {
    pub pid: u32,
    /// sha256 of the program the service process runs.
    pub sha256: String,
}

/// Called by the service when it starts: records its process and the program it runs.
pub fn record_running(sys: &dyn System) {
    let (pid, program) = sys.current_process();
    let Ok(sha256) = sha256_file(&program) else { return };
    let path = sys.local(&NodePath::known(paths::AGENT_RUNNING));
    let tmp = path.with_extension("json.tmp");
    let bytes = serde_json::to_vec(&Running { pid, sha256 }).unwrap_or_default();
    if std::fs::write(&tmp, bytes).is_ok() {
        let _ = std::fs::rename(&tmp, &path);
    }
}

fn running_record(sys: &dyn System) -> Option<Running> {
    let bytes = std::fs::read(sys.local(&NodePath::known(paths::AGENT_RUNNING))).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// sha256 of the agent now at `C:\k\wmrender\wmrender-node.exe`: from the digest cache in applied.json, where each
/// pass puts it, while the file is unchanged since; read (8 MB) otherwise.
fn agent_program_sha256(sys: &dyn System) -> Option<String> {
    let node = NodePath::known(paths::AGENT_EXE);
    let local = sys.local(&node);
    let cached = AppliedState::load(&sys.local(&NodePath::known(paths::APPLIED_STATE)))
        .ok()
        .and_then(|state| state.digests.cached(&node, &local));
    cached.or_else(|| sha256_file(&local).ok())
}

/// Whether the agent service's process `pid` runs a program other than the agent now at `C:\k\wmrender\
/// wmrender-node.exe`. A service process that recorded nothing about itself is an agent from before the record:
/// an old one.
fn runs_replaced_program(sys: &dyn System, pid: u32) -> bool {
    let Some(current) = agent_program_sha256(sys) else { return false };
    match running_record(sys) {
        Some(r) if r.pid == pid => r.sha256 != current,
        _ => true,
    }
}

/// Whether this process is the agent service and sync has replaced its program since it started: its loop ends
/// and hands over.
pub fn replaced_under_me(sys: &dyn System) -> bool {
    let (me, _) = sys.current_process();
    running_record(sys).is_some_and(|r| r.pid == me) && runs_replaced_program(sys, me)
}

/// After a pass of sync's `apply` (another process than the service): a service that still runs an agent sync has
/// replaced is restarted, so the new agent takes over at once; then the old copy set aside goes.
pub fn hand_over(sys: &mut dyn System, timing: &Timing, result: &mut ApplyResult) {
    let name = paths::AGENT_SERVICE;
    let Ok(Some(service)) = sys.run_status(name) else { return };
    let (me, _) = sys.current_process();
    let Some(pid) = service.pid.filter(|p| *p != me && service.state == RunState::Running) else { return };
    if !runs_replaced_program(sys, pid) {
        return;
    }
    let restarted =
        scm::stop_and_wait(sys, timing, name, &mut result.killed).and_then(|_| scm::start_and_wait(sys, timing, name));
    match restarted {
        Ok(()) => {
            result.restarted.push(name.to_string());
            result.since_delivery.restarted.push(name.to_string());
            if let Ok(aside) = NodePath::known(paths::AGENT_EXE).with_suffix(wmrender_contract::ASIDE_SUFFIX)
                && sys.local(&aside).is_file()
            {
                let _ = sys.remove_file(&aside);
            }
        }
        Err(e) => result.errors.push(format!("the agent service still runs the agent sync replaced: {e}")),
    }
    result.status = status_of(result);
}

impl Pass<'_> {
    pub(crate) fn agent_service(&mut self) {
        let want = config();
        let name = want.name.clone();
        // Whether it runs now, from this one query of the SCM: an update changes the configuration in place.
        let running = match self.sys.service(&name) {
            Ok(None) => match self.sys.create_service(&want) {
                Ok(()) => {
                    self.result.created.push(name.clone());
                    false
                }
                Err(e) => return self.result.errors.push(format!("cannot create the agent service: {e}")),
            },
            Ok(Some(s)) if s.config != want => match self.sys.update_service(&want) {
                Ok(()) => {
                    self.result.updated.push(name.clone());
                    scm::is_running(s.state)
                }
                Err(e) => return self.result.errors.push(format!("cannot update the agent service: {e}")),
            },
            Ok(Some(s)) => scm::is_running(s.state),
            Err(e) => return self.result.errors.push(format!("cannot query the agent service: {e}")),
        };
        let exe = NodePath::known(paths::AGENT_EXE);
        let local = self.sys.local(&exe);
        if !local.is_file() {
            return self.result.errors.push(format!(
                "{} is not there, so the agent service cannot run: sync delivers it with the bundle",
                paths::AGENT_EXE
            ));
        }
        // Into the digest cache, so that the hand-over check after the pass and the service's loop need not read
        // the program again while it is unchanged. A failure only leaves them to read it.
        let _ = self.state.digests.digest(&exe, &local);
        if !running {
            match scm::start_and_wait(self.sys, self.timing, &name) {
                Ok(()) => self.result.started.push(name),
                Err(e) => self.result.errors.push(e),
            }
        }
    }
}
