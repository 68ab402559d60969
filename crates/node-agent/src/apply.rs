//! One convergence pass (`wmrender-node apply`), in the order of the design: lock, read, reboot wait,
//! directories, machine environment, trusted CAs, steps, node values, missing files, staged binaries, services,
//! deletions, the agent's own service, record. Each part stops the pass where going on would be wrong (nothing is stopped before
//! the files are known to be there; containerd never starts before the Containers-feature reboot).

use crate::desired::Desired;
use crate::lock::AgentLock;
use crate::node_vars;
use crate::result::{failed, push_once, status_of};
use crate::state::{AppliedState, RebootWait};
use crate::steps::{StepOutcome, run_step};
use crate::system::System;
use crate::timing::Timing;
use crate::trusted_cas;
use crate::{digest::sha256_file, env};
use wmrender_contract::{ApplyResult, NodePath, When, paths};

/// The state of one pass, shared by the parts in apply.rs, services.rs and agent_service.rs.
pub(crate) struct Pass<'a> {
    pub sys: &'a mut dyn System,
    pub timing: &'a Timing,
    pub state: AppliedState,
    pub result: ApplyResult,
    pub boot: String,
}

/// One pass under the agent lock.
pub fn apply(sys: &mut dyn System, timing: &Timing) -> ApplyResult {
    let lock_path = sys.local(&NodePath::known(paths::AGENT_LOCK));
    let lock = match AgentLock::acquire(&lock_path, timing.lock_timeout) {
        Ok(l) => l,
        Err(e) => return failed(e.to_string()),
    };
    let mut result = apply_locked(sys, timing);
    drop(lock);
    result.node_report = crate::node_status::report(&sys.local(&NodePath::known(paths::KUBECONFIG)), &result);
    result
}

/// One pass; the caller holds the lock.
pub fn apply_locked(sys: &mut dyn System, timing: &Timing) -> ApplyResult {
    let state_path = sys.local(&NodePath::known(paths::APPLIED_STATE));
    let mut result = ApplyResult::default();
    let state = AppliedState::load(&state_path).unwrap_or_else(|e| {
        result.errors.push(e.to_string());
        AppliedState::default()
    });
    let mut pass = Pass { sys, timing, state, result, boot: String::new() };
    pass.converge();
    pass.agent_service();
    pass.result.boot_id = pass.boot.clone();
    if let Err(e) = pass.state.save(&state_path) {
        pass.result.errors.push(e.to_string());
    }
    pass.result.status = status_of(&pass.result);
    pass.result
}

impl Pass<'_> {
    fn converge(&mut self) {
        let desired = match Desired::read(self.sys) {
            Ok(d) => d,
            Err(e) => return self.result.errors.push(e.to_string()),
        };
        self.result.bundle = desired.manifest.bundle_digest();
        if desired.manifest.pending.is_some() {
            return self.result.pending.push(format!(
                "{} has an open journal: a sync is delivering files or was cut off, and the next sync finishes it",
                paths::NODE_MANIFEST
            ));
        }
        self.boot = match self.sys.boot_id() {
            Ok(b) => b,
            Err(e) => return self.result.errors.push(format!("cannot tell which boot this is: {e}")),
        };
        if !self.reboot_wait()
            || !self.directories(&desired)
            || !self.environment(&desired)
            || !self.trusted_cas()
            || !self.steps(&desired)
        {
            return;
        }
        let vars = match node_vars::compute(self.sys, &desired.settings, &mut self.result.steps) {
            Ok(v) => v,
            Err(node_vars::VarsError::Pending(p)) => return self.result.pending.push(p),
            Err(node_vars::VarsError::Failed(e)) => return self.result.errors.push(e),
        };
        self.result.node_ip = vars.node_ip.clone();
        self.result.node_name = vars.node_name.clone();
        self.services(&desired, &vars);
    }

    /// A reboot asked for in this boot is still due: report it, and stop when nothing can go on before it.
    fn reboot_wait(&mut self) -> bool {
        let Some(wait) = self.state.reboot.clone() else { return true };
        if wait.boot_id != self.boot {
            self.state.reboot = None;
            return true;
        }
        self.result.reboot_required = true;
        for r in wait.reasons {
            push_once(&mut self.result.pending, r);
        }
        !wait.blocks
    }

    pub(crate) fn ask_reboot(&mut self, reason: String, blocks: bool) {
        self.result.reboot_required = true;
        push_once(&mut self.result.pending, reason.clone());
        let wait =
            self.state.reboot.get_or_insert_with(|| RebootWait { boot_id: self.boot.clone(), ..RebootWait::default() });
        wait.boot_id = self.boot.clone();
        push_once(&mut wait.reasons, reason);
        wait.blocks |= blocks;
    }

    fn directories(&mut self, desired: &Desired) -> bool {
        let mut ok = true;
        for dir in &desired.settings.directories {
            if let Err(e) = std::fs::create_dir_all(self.sys.local(dir)) {
                self.result.errors.push(format!("cannot create folder {dir}: {e}"));
                ok = false;
            }
        }
        ok
    }

    fn environment(&mut self, desired: &Desired) -> bool {
        match env::converge(self.sys, &desired.settings, &mut self.state.environment) {
            Ok(changed) if changed.is_empty() => true,
            Ok(changed) => {
                self.result.environment = changed;
                self.ask_reboot("reboot to give services the new proxy variables".into(), false);
                true
            }
            Err(e) => {
                self.result.errors.push(e);
                false
            }
        }
    }

    /// The bundle's CAs in the LocalMachine Root store before any service starts (kubelet may reach the API
    /// server through a TLS-inspecting proxy). A bad bundle fails the pass.
    fn trusted_cas(&mut self) -> bool {
        match trusted_cas::converge(self.sys, &mut self.state.trusted_cas) {
            Ok(changes) => {
                self.result.trusted_cas_added = changes.added;
                self.result.trusted_cas_removed = changes.removed;
                true
            }
            Err(e) => {
                self.result.errors.push(e);
                false
            }
        }
    }

    /// `once` steps not yet done for their script's content and `every-boot` steps not yet run in this boot, in
    /// node.json's order. The first that is not done ends the pass: what follows may depend on it.
    fn steps(&mut self, desired: &Desired) -> bool {
        for step in &desired.settings.steps {
            let script_sha = match step.when {
                When::OnDemand => continue,
                When::Once => match sha256_file(&self.sys.local(&step.script)) {
                    Ok(sha) if self.state.steps_done.get(&step.name) == Some(&sha) => continue,
                    Ok(sha) => Some(sha),
                    Err(e) => {
                        self.result.errors.push(format!("step `{}`: cannot read {}: {e}", step.name, step.script));
                        return false;
                    }
                },
                When::EveryBoot if self.state.boot_steps.get(&step.name) == Some(&self.boot) => continue,
                When::EveryBoot => None,
            };
            self.result.steps.push(step.name.clone());
            match run_step(self.sys, step, &[]) {
                StepOutcome::Done { reboot_required, .. } => {
                    match script_sha {
                        Some(sha) => self.state.steps_done.insert(step.name.clone(), sha),
                        None => self.state.boot_steps.insert(step.name.clone(), self.boot.clone()),
                    };
                    if reboot_required {
                        self.ask_reboot(
                            format!("step `{}` needs Windows to restart before the services can run", step.name),
                            true,
                        );
                        return false;
                    }
                }
                StepOutcome::Pending(p) => {
                    self.result.pending.push(format!("step `{}`: {p}", step.name));
                    return false;
                }
                StepOutcome::Failed(e) => {
                    self.result.errors.push(format!("step `{}`: {e}", step.name));
                    return false;
                }
            }
        }
        true
    }
}
