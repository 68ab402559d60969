//! `wmrender-node deconfigure`: undo what the agent set up, as WMCO does when a node leaves (its BYOH entry goes):
//! stop and delete the services the agent created (dependents first), end the processes that still run their
//! programs (the containers' shims, which outlive containerd: WMCO's cleanup ends `containerd-shim-runhcs-v1`),
//! clear host-local IPAM's state (`C:\var\lib\cni`), remove the HNS networks (the rendered `remove-hns-networks`
//! step, once nothing uses them), the trusted CAs and machine variables it set, the bundle files, payload and
//! credentials, and its own service last. Only what the agent recorded as its own, and marked as its own on the
//! service, is touched. The node should be cordoned and drained first (sync's `--prune-nodes` does it): what still
//! runs there is ended here.
//! Idempotent: each part is taken off the record when done, so a second run (or one after a failure) does what is
//! left and reports nothing for what is gone.

use crate::desired::Desired;
use crate::lock::AgentLock;
use crate::result::status_of;
use crate::state::AppliedState;
use crate::steps::{StepOutcome, run_step};
use crate::system::System;
use crate::timing::Timing;
use crate::{agent_service, scm, trusted_cas};
use std::collections::BTreeSet;
use wmrender_contract::settings::REMOVE_HNS_NETWORKS_STEP;
use wmrender_contract::{
    ASIDE_SUFFIX, ApplyResult, ApplyStatus, NodePath, PULLING_SUFFIX, STAGED_SUFFIX, TEMP_SUFFIX, paths,
};

/// Deconfigures the node under the agent lock. `Converged` means done (exit 0); `Failed` says what is left.
pub fn deconfigure(sys: &mut dyn System, timing: &Timing) -> ApplyResult {
    let lock_path = sys.local(&NodePath::known(paths::AGENT_LOCK));
    let lock = match AgentLock::acquire(&lock_path, timing.lock_timeout) {
        Ok(l) => l,
        Err(e) => return crate::result::failed(e.to_string()),
    };
    let state_path = sys.local(&NodePath::known(paths::APPLIED_STATE));
    let mut result = ApplyResult::default();
    let mut state = match AppliedState::load(&state_path) {
        Ok(s) => s,
        // Without the record the agent cannot tell its own services and certificates from others': stop.
        Err(e) => return crate::result::failed(format!("{e}; nothing was deconfigured")),
    };
    // What the bundle names, while it is still there (a second run finds none, and needs none).
    let desired = Desired::read(sys).ok();

    let services_stopped = delete_services(sys, timing, &mut state, &mut result);
    if services_stopped {
        end_leftover_processes(sys, timing, desired.as_ref(), &mut result);
        clear_cni_state(sys, &mut result);
        remove_hns_networks(sys, desired.as_ref(), &mut result);
    }
    match trusted_cas::remove_all(sys, &mut state.trusted_cas) {
        Ok(changes) => result.trusted_cas_removed = changes.removed,
        Err(e) => result.errors.push(e),
    }
    for name in state.environment.clone() {
        match sys.set_machine_env(&name, None) {
            Ok(()) => {
                state.environment.remove(&name);
                result.environment.push(name);
            }
            Err(e) => result.errors.push(format!("cannot remove machine variable {name}: {e}")),
        }
    }
    if result.errors.is_empty() {
        remove_files(sys, desired.as_ref(), &mut result);
    }
    if result.errors.is_empty() {
        delete_agent_service(sys, timing, &mut result);
    }
    state.services.clear();
    state.steps_done.clear();
    state.boot_steps.clear();
    state.reboot = None;
    state.digests = Default::default();
    if let Err(e) = state.save(&state_path) {
        result.errors.push(e.to_string());
    }
    drop(lock);
    result.status = match status_of(&result) {
        ApplyStatus::Failed => ApplyStatus::Failed,
        _ => ApplyStatus::Converged,
    };
    result
}

/// The agent's services (not its own), each once no other remaining one depends on it. Returns whether all went.
fn delete_services(sys: &mut dyn System, timing: &Timing, state: &mut AppliedState, result: &mut ApplyResult) -> bool {
    let mut left: BTreeSet<String> = state.owned.iter().filter(|n| *n != paths::AGENT_SERVICE).cloned().collect();
    while !left.is_empty() {
        // Dependencies as recorded and as the SCM holds them (Wine's SCM reads back none: the record covers it).
        let depends_on = |sys: &dyn System, state: &AppliedState, name: &str| -> BTreeSet<String> {
            let mut deps: BTreeSet<String> =
                state.services.get(name).map(|s| s.dependencies.iter().cloned().collect()).unwrap_or_default();
            if let Ok(Some(s)) = sys.service(name) {
                deps.extend(s.config.dependencies);
            }
            deps
        };
        let next = left
            .iter()
            .find(|n| !left.iter().any(|other| other != *n && depends_on(sys, state, other).contains(*n)))
            .or_else(|| left.iter().next())
            .cloned();
        let Some(name) = next else { break };
        left.remove(&name);
        let step = (|| -> Result<bool, String> {
            // The record alone does not make a service the agent's: it must carry wmrender's mark too.
            match sys.service(&name).map_err(|e| format!("cannot query service `{name}`: {e}"))? {
                None => return Ok(false),
                Some(s) if !s.marked => return Ok(false),
                Some(_) => {}
            }
            scm::stop_and_wait(sys, timing, &name, &mut result.killed)?;
            sys.delete_service(&name).map_err(|e| format!("cannot delete service `{name}`: {e}"))?;
            Ok(true)
        })();
        match step {
            Ok(deleted) => {
                if deleted {
                    result.deleted.push(name.clone());
                }
                state.owned.remove(&name);
                state.services.remove(&name);
            }
            Err(e) => result.errors.push(e),
        }
    }
    result.errors.is_empty()
}

/// Ends every process that still runs a program of the services once they stopped: the shims containerd started
/// for the pods (`containerd-shim-runhcs-v1.exe`) outlive it and keep their containers running. Each ended
/// process is listed in `killed` as `program (pid N)`.
fn end_leftover_processes(sys: &mut dyn System, timing: &Timing, desired: Option<&Desired>, result: &mut ApplyResult) {
    let Some(desired) = desired else { return };
    let programs: Vec<NodePath> = desired.services.binaries().into_iter().cloned().collect();
    let running = match sys.processes_running(&programs) {
        Ok(r) => r,
        Err(e) => return result.errors.push(format!("cannot list the processes still running: {e}")),
    };
    let mut ended = Vec::new();
    for (pid, program) in running {
        match sys.kill_process(pid) {
            Ok(()) => {
                result.killed.push(format!("{} (pid {pid})", program.file_name()));
                ended.push((pid, program));
            }
            // It ended by itself meanwhile.
            Err(_) if !sys.process_alive(pid) => {}
            Err(e) => result.errors.push(format!("cannot end {program} (pid {pid}): {e}")),
        }
    }
    // Windows ends a process after TerminateProcess returns: wait (bounded) until each is gone, as its program's
    // file stays held until then.
    let mut waited = std::time::Duration::ZERO;
    while ended.iter().any(|(pid, _)| sys.process_alive(*pid)) && waited < PROCESS_END {
        sys.sleep(timing.poll);
        waited += timing.poll;
    }
    for (pid, program) in ended.iter().filter(|(pid, _)| sys.process_alive(*pid)) {
        result.errors.push(format!("{program} (pid {pid}) did not end within {PROCESS_END:?}"));
    }
}

/// How long an ended process gets to go.
const PROCESS_END: std::time::Duration = std::time::Duration::from_secs(10);

/// host-local IPAM's state: the addresses it handed to containers that are gone (WMCO deletes it at every
/// bootstrap and deconfigure).
fn clear_cni_state(sys: &mut dyn System, result: &mut ApplyResult) {
    let dir = sys.local(&NodePath::known(paths::CNI_STATE_DIR));
    match std::fs::remove_dir_all(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => result.errors.push(format!("cannot remove {}: {e}", paths::CNI_STATE_DIR)),
    }
}

fn remove_hns_networks(sys: &mut dyn System, desired: Option<&Desired>, result: &mut ApplyResult) {
    let Some(step) = desired.and_then(|d| d.settings.steps.iter().find(|s| s.name == REMOVE_HNS_NETWORKS_STEP)) else {
        return;
    };
    result.steps.push(step.name.clone());
    match run_step(sys, step, &[]) {
        StepOutcome::Done { .. } => {}
        StepOutcome::Pending(p) => result.errors.push(format!("step `{}`: {p}", step.name)),
        StepOutcome::Failed(e) => result.errors.push(format!("step `{}`: {e}", step.name)),
    }
}

/// Every file sync delivered (the manifest's), every file, binary, credential and required file the services
/// name (kubelet's kubeconfig, the network step's output), the steps' scripts, the CA bundle and the bundle's own
/// files, and the record of the last pull with the parts of programs it was fetching. The agent's executable stays
/// (Windows does not let a running program delete itself; the next sync replaces it), with `applied.json`, its lock
/// and its log.
fn remove_files(sys: &mut dyn System, desired: Option<&Desired>, result: &mut ApplyResult) {
    // Parts of programs a pull was fetching, which the manifest may not name: before pulled.json, which lists them
    // (and stays while one cannot be removed, for the next run to remove).
    let parts_left = crate::pull::parts::remove_all(sys);
    let keep_pulled_state = !parts_left.is_empty();
    result.errors.extend(parts_left);
    // Removed here, not with the bundle's files below: a run after one that failed may find no bundle to list them
    // by, and a record left behind would give the node's next first contact an old rollback floor.
    if !keep_pulled_state && let Err(why) = sys.remove_if_there(&NodePath::known(paths::PULLED_STATE)) {
        result.errors.push(why);
    }
    let Some(desired) = desired else { return };
    let mut files: BTreeSet<NodePath> = desired.manifest.files.iter().map(|f| f.path.clone()).collect();
    for s in &desired.services.services {
        files.extend(s.needed_paths().chain(&s.requires).cloned());
    }
    files.extend(desired.settings.steps.iter().map(|s| s.script.clone()));
    for p in [
        paths::TRUSTED_CA_BUNDLE,
        paths::LAST_PASS,
        paths::AGENT_RUNNING,
        paths::SERVICES_JSON,
        paths::SETTINGS_JSON,
        paths::NODE_MANIFEST,
        paths::NODE_MANIFEST_UPDATE,
    ] {
        files.insert(NodePath::known(p));
    }
    files.remove(&NodePath::known(paths::AGENT_EXE));
    files.remove(&NodePath::known(paths::APPLIED_STATE));
    // The bundle's own files last: until they go, a failed run can be repeated with the same list.
    let (last, first): (Vec<NodePath>, Vec<NodePath>) = files.into_iter().partition(|p| {
        [paths::SERVICES_JSON, paths::SETTINGS_JSON, paths::NODE_MANIFEST, paths::NODE_MANIFEST_UPDATE]
            .iter()
            .any(|b| p.as_str() == *b)
    });
    for path in first.iter().chain(&last) {
        let local = sys.local(path);
        for candidate in [
            local.clone(),
            local.with_file_name(format!("{}{STAGED_SUFFIX}", file_name(&local))),
            local.with_file_name(format!("{}{TEMP_SUFFIX}", file_name(&local))),
            local.with_file_name(format!("{}{STAGED_SUFFIX}{TEMP_SUFFIX}", file_name(&local))),
            local.with_file_name(format!("{}{PULLING_SUFFIX}", file_name(&local))),
            local.with_file_name(format!("{}{ASIDE_SUFFIX}", file_name(&local))),
        ] {
            match std::fs::remove_file(&candidate) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => result.errors.push(format!("cannot remove {path}: {e}")),
            }
        }
    }
}

fn file_name(p: &std::path::Path) -> String {
    p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// The agent's own service, last: stopped (a pass of it waits on the lock this run holds, so a stop may end in
/// its process being killed after the bounded wait) and deleted.
fn delete_agent_service(sys: &mut dyn System, timing: &Timing, result: &mut ApplyResult) {
    let name = agent_service::config().name;
    let step = (|| -> Result<bool, String> {
        if sys.service(&name).map_err(|e| format!("cannot query the agent service: {e}"))?.is_none() {
            return Ok(false);
        }
        scm::stop_and_wait(sys, timing, &name, &mut result.killed)?;
        sys.delete_service(&name).map_err(|e| format!("cannot delete the agent service: {e}"))?;
        Ok(true)
    })();
    match step {
        Ok(true) => result.deleted.push(name),
        Ok(false) => {}
        Err(e) => result.errors.push(e),
    }
}
