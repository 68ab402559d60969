//! One convergence pass (`wmrender-node apply`), in the order of the design: lock, read, reboot wait,
//! directories, machine environment, trusted CAs, the host's name, steps, node values, missing files, staged
//! binaries, services, deletions, tidying, the agent's own service, record; then, without the lock, the hand-over to
//! a new agent, the report on the Node and the result file. Each part stops the pass where going on would be wrong
//! (nothing is stopped before the files are known to be there; containerd never starts before the
//! Containers-feature reboot, kubelet never before the host has its Machine's name).

use crate::desired::Desired;
use crate::lock::AgentLock;
use crate::result::{failed, push_once, status_of};
use crate::state::{AppliedState, Delivery, RebootWait};
use crate::steps::{StepOutcome, run_step};
use crate::system::System;
use crate::timing::Timing;
use crate::{agent_service, last_pass, node_vars, swap, tidy, trusted_cas};
use crate::{digest::sha256_file, env};
use wmrender_contract::settings::MACHINE_NAME;
use wmrender_contract::{Actions, ApplyResult, NodeMachine, NodePath, When, paths};

/// The state of one pass, shared by the parts in apply.rs, services.rs and agent_service.rs.
pub(crate) struct Pass<'a> {
    pub sys: &'a mut dyn System,
    pub timing: &'a Timing,
    pub state: AppliedState,
    pub result: ApplyResult,
    pub boot: String,
    /// The delivery this pass works on ([`wmrender_contract::NodeManifest::delivery_digest`]), once known.
    pub delivery: Option<String>,
}

/// One pass under the agent lock.
pub fn apply(sys: &mut dyn System, timing: &Timing) -> ApplyResult {
    apply_watched(sys, timing, None, &crate::pull::Puller::default())
}

/// One pass, reading the Node from the service's watch on it where there is one, pulling with the service's
/// registry client.
pub fn apply_watched(
    sys: &mut dyn System,
    timing: &Timing,
    watch: Option<&crate::node_watch::NodeWatch>,
    puller: &crate::pull::Puller,
) -> ApplyResult {
    let lock_path = sys.local(&NodePath::known(paths::AGENT_LOCK));
    let lock = match AgentLock::acquire(&lock_path, timing.lock_timeout) {
        Ok(l) => l,
        Err(e) => return failed(e.to_string()),
    };
    // The Node's desired bundle and payload, when it names them, are pulled and staged before the pass that
    // applies them. The Node is read once for both (a read that fails is tried again by each, to say why).
    let node = crate::pull::node(sys, watch.and_then(|w| w.node()).as_ref()).and_then(Result::ok);
    // The payload first: it settles a payload pull cut off with its journal open, which would hold the bundle's
    // back.
    let payload_pull = crate::pull::payload::pull(sys, node.as_ref(), puller);
    let pull = crate::pull::pull(sys, node.as_ref(), puller);
    let mut result = apply_locked(sys, timing);
    result.pull = pull;
    result.payload_pull = payload_pull;
    drop(lock);
    // Without the lock: the service's own pass may be waiting on it, and must end before its service can stop.
    agent_service::hand_over(sys, timing, &mut result);
    let kubeconfig = sys.local(&NodePath::known(paths::KUBECONFIG));
    result.node_report = crate::node_status::report_on(&kubeconfig, &result, watch.and_then(|w| w.node()).as_ref());
    last_pass::write(sys, &result);
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
    let mut pass = Pass { sys, timing, state, result, boot: String::new(), delivery: None };
    pass.converge();
    pass.agent_service();
    pass.result.boot_id = pass.boot.clone();
    // The node's name, as far as this pass got: the last one computed when it stopped before (so its failure is
    // still reported on its Node).
    if pass.result.node_name.is_empty() {
        pass.result.node_name = pass.state.node_name.clone();
    } else {
        pass.state.node_name = pass.result.node_name.clone();
    }
    pass.record_delivery();
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
        self.result.payload = desired.manifest.payload_digest();
        self.result.agent = desired.manifest.agent_digest();
        if desired.manifest.pending.is_some() {
            return self.result.pending.push(format!(
                "{} has an open journal: a sync is delivering files or was cut off, and the next sync finishes it",
                paths::NODE_MANIFEST
            ));
        }
        self.delivery = Some(desired.manifest.delivery_digest());
        self.converge_delivered(&desired);
        tidy::rotated_files(self.sys, &desired.settings);
        swap::remove_set_aside(self.sys, &desired.manifest);
    }

    /// What this pass did, added to what the passes did since the files now on the node were delivered.
    fn record_delivery(&mut self) {
        let Some(digest) = self.delivery.clone() else { return };
        if self.state.delivery.manifest != digest {
            self.state.delivery = Delivery { manifest: digest, actions: Actions::default() };
        }
        self.state.delivery.actions.merge(&Actions::of(&self.result));
        self.result.since_delivery = self.state.delivery.actions.clone();
    }

    fn converge_delivered(&mut self, desired: &Desired) {
        self.boot = match self.sys.boot_id() {
            Ok(b) => b,
            Err(e) => return self.result.errors.push(format!("cannot tell which boot this is: {e}")),
        };
        if !self.reboot_wait()
            || !self.directories(desired)
            || !self.environment(desired)
            || !self.trusted_cas()
            || !self.rename_to_machine(desired)
            || !self.steps(desired)
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
        self.services(desired, &vars);
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

    /// Where the platform names a Machine's host after the Machine (vSphere, Nutanix) and sync said which Machine
    /// this host is: the rename step, with the Machine's name, until it succeeded for that name and script. Its
    /// reboot holds everything back: kubelet must register under the new name. A host that is no Machine's
    /// (no `machine.json`: BYOH) keeps its name.
    fn rename_to_machine(&mut self, desired: &Desired) -> bool {
        let Some(step) = desired.settings.rename_to_machine.as_ref().and_then(|n| desired.settings.step(n)) else {
            return true;
        };
        let file = NodePath::known(paths::MACHINE);
        let machine = match std::fs::read(self.sys.local(&file)) {
            Ok(bytes) => match NodeMachine::parse(&bytes) {
                Ok(m) => m.machine,
                Err(e) => {
                    self.result.errors.push(format!("{}: {e}", paths::MACHINE));
                    return false;
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return true,
            Err(e) => {
                self.result.errors.push(format!("cannot read {}: {e}", paths::MACHINE));
                return false;
            }
        };
        let done_for = match sha256_file(&self.sys.local(&step.script)) {
            Ok(sha) => format!("{sha} {machine}"),
            Err(e) => {
                self.result.errors.push(format!("step `{}`: cannot read {}: {e}", step.name, step.script));
                return false;
            }
        };
        if self.state.steps_done.get(&step.name) == Some(&done_for) {
            return true;
        }
        self.result.steps.push(step.name.clone());
        match run_step(self.sys, step, &[(MACHINE_NAME, machine.as_str())]) {
            StepOutcome::Done { reboot_required, .. } => {
                self.state.steps_done.insert(step.name.clone(), done_for);
                if reboot_required {
                    self.ask_reboot(
                        format!("the host takes its Machine's name `{machine}` when Windows restarts"),
                        true,
                    );
                    return false;
                }
                true
            }
            StepOutcome::Pending(p) => {
                self.result.pending.push(format!("step `{}`: {p}", step.name));
                false
            }
            StepOutcome::Failed(e) => {
                self.result.errors.push(format!("step `{}`: {e}", step.name));
                false
            }
        }
    }

    /// `once` steps not yet done for their script's content, `every-boot` steps not yet run in this boot and
    /// `every-pass` steps, in node.json's order. The first that is not done ends the pass: what follows may depend
    /// on it.
    fn steps(&mut self, desired: &Desired) -> bool {
        /// What records a step as done.
        enum Done {
            Script(String),
            Boot,
            Nothing,
        }
        for step in &desired.settings.steps {
            let done = match step.when {
                When::OnDemand => continue,
                When::Once => match sha256_file(&self.sys.local(&step.script)) {
                    Ok(sha) if self.state.steps_done.get(&step.name) == Some(&sha) => continue,
                    Ok(sha) => Done::Script(sha),
                    Err(e) => {
                        self.result.errors.push(format!("step `{}`: cannot read {}: {e}", step.name, step.script));
                        return false;
                    }
                },
                When::EveryBoot if self.state.boot_steps.get(&step.name) == Some(&self.boot) => continue,
                When::EveryBoot => Done::Boot,
                When::EveryPass => Done::Nothing,
            };
            self.result.steps.push(step.name.clone());
            match run_step(self.sys, step, &[]) {
                StepOutcome::Done { reboot_required, .. } => {
                    match done {
                        Done::Script(sha) => {
                            self.state.steps_done.insert(step.name.clone(), sha);
                        }
                        Done::Boot => {
                            self.state.boot_steps.insert(step.name.clone(), self.boot.clone());
                        }
                        Done::Nothing => {}
                    }
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
