//! The services table against the SCM (steps 9 to 13 of a pass, docs/agent.md): files present, staged binaries swapped with
//! their services stopped, each service created or updated, restarted when its definition or any of the files it
//! reads at start changed, started in table order (dependencies first), and services dropped from the table
//! deleted. An optional service's own problem (a file missing, a failed start) leaves the others alone: it is
//! reported in `degraded`, and the pass still converges.

use crate::apply::Pass;
use crate::desired::Desired;
use crate::node_vars::NodeVars;
use crate::result::push_once;
use crate::scm;
use crate::state::AppliedService;
use crate::steps::{StepOutcome, run_step};
use crate::swap;
use crate::system::{RunState, ServiceConfig};
use std::collections::{BTreeMap, BTreeSet};
use wmrender_contract::{NodePath, NodeVariable, Service, ServicesFile};

/// What the pass decided per service.
#[derive(Default)]
struct Plan {
    /// Running when the pass began: a start of these is a restart.
    was_running: BTreeSet<String>,
    /// Whether each service ran as step 11 left it (it queried the SCM then): step 12 starts those that did not
    /// without asking again. A service stopped after that by this pass is in `marked`.
    running_after_check: BTreeMap<String, bool>,
    /// Stopped or changed by this pass: started again in step 12.
    marked: BTreeSet<String>,
    /// Not started in this pass (waiting, or a failure on the way).
    skipped: BTreeSet<String>,
    /// Optional services left out for a problem of their own (a subset of `skipped`).
    degraded: BTreeSet<String>,
    /// Services whose pre-start step runs right before they start, in step 12.
    pre_start_due: BTreeSet<String>,
    configs: BTreeMap<String, ServiceConfig>,
    files: BTreeMap<String, BTreeMap<NodePath, String>>,
}

/// How the SCM's configuration of a service differs from the wanted one.
#[derive(Debug, PartialEq, Eq)]
enum ConfigChange {
    None,
    /// Only the start type: changed in place, the service keeps running (a node set up by an agent that started
    /// every service at boot).
    StartType,
    /// The command, description or dependencies: the service stops first, as WICD does.
    Restart,
}

/// Wine's SCM stores dependencies but reads back none: an empty list read back counts as the dependencies the
/// agent recorded setting.
fn config_change(actual: &ServiceConfig, want: &ServiceConfig, recorded: Option<&AppliedService>) -> ConfigChange {
    let deps_match = actual.dependencies == want.dependencies
        || (actual.dependencies.is_empty() && recorded.is_some_and(|r| r.dependencies == want.dependencies));
    if !deps_match
        || actual.command != want.command
        || actual.description != want.description
        || actual.name != want.name
    {
        ConfigChange::Restart
    } else if actual.automatic != want.automatic {
        ConfigChange::StartType
    } else {
        ConfigChange::None
    }
}

/// A file of a service that nothing delivers and its pre-start step writes on the node.
fn written_by_step(s: &Service, p: &NodePath, delivered: &BTreeSet<&NodePath>) -> bool {
    s.pre_start.is_some() && s.files.contains(p) && !delivered.contains(p)
}

impl Pass<'_> {
    pub(crate) fn services(&mut self, desired: &Desired, vars: &NodeVars) {
        let table = &desired.services;
        let mut plan = Plan::default();
        // Step 9: everything the services need is there (or staged), before anything is stopped.
        let staged = swap::check(self.sys, &desired.manifest, &mut self.state.digests);
        if !self.needed_files(desired, &staged, &mut plan) {
            return;
        }
        let staged_paths: BTreeSet<&NodePath> = staged.ready.iter().map(|s| &s.path).collect();

        // Step 10: staged binaries, with every service that runs them (and their dependents) stopped.
        if !staged.ready.is_empty() {
            // Which services run before the swap stops some (a start of these is a restart). Without a swap, step 11
            // sees it in the query it makes of each service anyway.
            for s in &table.services {
                match scm::state(self.sys, &s.name) {
                    Ok(state) if scm::is_running(state) => {
                        plan.was_running.insert(s.name.clone());
                    }
                    Ok(_) => {}
                    Err(e) => self.result.errors.push(e),
                }
            }
            let users: BTreeSet<String> = table
                .services
                .iter()
                .filter(|s| s.binaries.iter().any(|b| staged_paths.contains(b)))
                .map(|s| s.name.clone())
                .collect();
            if let Err(e) = self.stop_with_dependents(table, &users, &mut plan) {
                self.result.errors.push(e);
                // Start again what was stopped, with the old binaries; the next pass tries again.
                self.start_all(desired, vars, &mut plan);
                return;
            }
            for s in &staged.ready {
                match swap::swap(self.sys, s) {
                    Ok(()) => self.result.replaced.push(s.path.to_string()),
                    Err(e) => self.result.errors.push(e),
                }
            }
        }

        // Step 11: each service's definition and files.
        for s in &table.services {
            if plan.skipped.contains(&s.name) {
                continue;
            }
            if let Err(e) = self.converge_service(desired, s, vars, &mut plan) {
                self.fail(s, e, &mut plan);
            }
        }
        // Step 12: start in table order.
        self.start_all(desired, vars, &mut plan);
        // Step 13: services the agent created that left the table.
        self.delete_dropped(table);
    }

    /// A service's own failure: the pass fails for a service the node needs; an optional one is left out alone.
    fn fail(&mut self, s: &Service, error: String, plan: &mut Plan) {
        plan.skipped.insert(s.name.clone());
        if s.optional {
            plan.degraded.insert(s.name.clone());
            let why = error.strip_prefix(&format!("service `{}` ", s.name)).unwrap_or(&error).to_string();
            push_once(&mut self.result.degraded, format!("{}: {why}", s.name));
        } else {
            self.result.errors.push(error);
        }
    }

    /// Step 9: every file, binary and credential each service names is there (or staged, or its pre-start step's to
    /// write). What a service the node needs lacks fails the pass before anything is stopped; what an optional
    /// service lacks leaves that service (and the optional ones that depend on it) out. Returns whether the pass
    /// goes on.
    fn needed_files(&mut self, desired: &Desired, staged: &swap::StagedCheck, plan: &mut Plan) -> bool {
        let table = &desired.services;
        let staged_paths: BTreeSet<&NodePath> = staged.ready.iter().map(|s| &s.path).collect();
        let delivered: BTreeSet<&NodePath> = desired.manifest.files.iter().map(|f| &f.path).collect();
        // Whether a staged entry's trouble is only optional services' (each of its users is optional).
        let only_optional = |path: &NodePath| {
            let mut users = table.services.iter().filter(|s| s.binaries.contains(path)).peekable();
            users.peek().is_some() && users.all(|s| s.optional)
        };
        let mut ok = true;
        for problem in staged.problems.iter().filter(|p| !only_optional(&p.path)) {
            ok = false;
            if problem.missing {
                push_once(&mut self.result.missing, problem.text.clone());
            } else {
                self.result.errors.push(problem.text.clone());
            }
        }
        for s in &table.services {
            let mut lacks: Vec<String> = Vec::new();
            for p in s.needed_paths() {
                // A file that sync does not deliver, of a service with a pre-start step, is the step's to write
                // (the network step writes kube-proxy.conf): it is checked once the step ran.
                if written_by_step(s, p, &delivered) {
                    continue;
                }
                if !staged_paths.contains(p) && !self.sys.local(p).is_file() {
                    lacks.push(p.to_string());
                }
            }
            if !s.optional {
                for l in lacks {
                    push_once(&mut self.result.missing, l);
                }
                continue;
            }
            let staged_trouble: Vec<&str> =
                staged.problems.iter().filter(|p| s.binaries.contains(&p.path)).map(|p| p.text.as_str()).collect();
            if let Some(dep) = s.dependencies.iter().find(|d| plan.degraded.contains(*d)) {
                self.fail(s, format!("waits for `{dep}`, which is left out"), plan);
            } else if !lacks.is_empty() {
                let verb = if lacks.len() == 1 { "is" } else { "are" };
                self.fail(s, format!("{} {verb} not on the node", lacks.join(", ")), plan);
            } else if !staged_trouble.is_empty() {
                self.fail(s, staged_trouble.join("; "), plan);
            }
        }
        ok && self.result.missing.is_empty()
    }

    /// Step 11 for one service.
    fn converge_service(
        &mut self,
        desired: &Desired,
        s: &Service,
        vars: &NodeVars,
        plan: &mut Plan,
    ) -> Result<(), String> {
        let (table, name) = (&desired.services, &s.name);
        if let Some(dep) = s.dependencies.iter().find(|d| plan.degraded.contains(*d)) {
            return Err(format!("service `{name}` waits for `{dep}`, which is left out"));
        }
        if let Some(dep) = s.dependencies.iter().find(|d| plan.skipped.contains(*d)) {
            plan.skipped.insert(name.clone());
            self.result.pending.push(format!("{name} waits for `{dep}`"));
            return Ok(());
        }
        if let Some(req) = s.requires.iter().find(|p| !self.sys.local(p).exists()) {
            plan.skipped.insert(name.clone());
            self.result.pending.push(format!(
                "{name} waits for {req}, which appears once the cluster approves the node's certificate signing requests"
            ));
            return Ok(());
        }
        let want = crate::scm::desired_config(s, vars)?;
        // Whether it runs now: from this one query of the SCM, and what this pass did to the service since.
        let running = match self.sys.service(name).map_err(|e| format!("cannot query service `{name}`: {e}"))? {
            None => {
                self.sys.create_service(&want).map_err(|e| format!("cannot create service `{name}`: {e}"))?;
                self.result.created.push(name.clone());
                self.state.owned.insert(name.clone());
                plan.marked.insert(name.clone());
                false
            }
            Some(current) => {
                if scm::is_running(current.state) {
                    plan.was_running.insert(name.clone());
                }
                // A service wmrender made before the agent existed carries its description: the agent adopts it,
                // and marks it as its own on the service itself.
                if current.config.description == want.description {
                    if !current.marked {
                        self.sys.mark_service(name).map_err(|e| format!("cannot mark service `{name}`: {e}"))?;
                    }
                    self.state.owned.insert(name.clone());
                }
                let recorded = self.state.services.get(name);
                match config_change(&current.config, &want, recorded) {
                    ConfigChange::None => scm::is_running(current.state),
                    // Changed in place: it runs on as it did.
                    ConfigChange::StartType => {
                        self.sys.update_service(&want).map_err(|e| format!("cannot update service `{name}`: {e}"))?;
                        self.result.updated.push(name.clone());
                        scm::is_running(current.state)
                    }
                    ConfigChange::Restart => {
                        self.stop_with_dependents(table, &BTreeSet::from([name.clone()]), plan)?;
                        self.sys.update_service(&want).map_err(|e| format!("cannot update service `{name}`: {e}"))?;
                        self.result.updated.push(name.clone());
                        plan.marked.insert(name.clone());
                        false
                    }
                }
            }
        };
        // Before the pre-start step, a file it writes may not be there yet: that counts as a change.
        let mut files = self.digests(s, s.pre_start.is_some())?;
        let recorded = self.state.services.get(name).map(|r| r.files.clone());
        let mut changed = recorded.as_ref() != Some(&files);
        if let Some(step_name) = &s.pre_start {
            let due = plan.marked.contains(name)
                || !running
                || changed
                || self.state.boot_steps.get(step_name) != Some(&self.boot);
            if due && running && !plan.marked.contains(name) {
                self.pre_start(desired, s, step_name, vars, plan)?;
                if plan.skipped.contains(name) {
                    return Ok(());
                }
                // The step may have written a file the service reads.
                files = self.digests(s, false)?;
                changed = recorded.as_ref() != Some(&files);
            } else if due {
                // The service starts in this pass: its step runs right before, once its dependencies run (the
                // network step needs the HNS network hybrid-overlay-node makes).
                plan.pre_start_due.insert(name.clone());
            }
        }
        if changed && running && !plan.marked.contains(name) {
            self.stop_with_dependents(table, &BTreeSet::from([name.clone()]), plan)?;
        }
        plan.running_after_check.insert(name.clone(), running && !plan.marked.contains(name));
        plan.configs.insert(name.clone(), want);
        plan.files.insert(name.clone(), files);
        Ok(())
    }

    fn pre_start(
        &mut self,
        desired: &Desired,
        s: &Service,
        step_name: &str,
        vars: &NodeVars,
        plan: &mut Plan,
    ) -> Result<(), String> {
        let Some(step) = desired.settings.step(step_name) else {
            return Err(format!("service `{}`: step `{step_name}` is not in node.json", s.name));
        };
        self.result.steps.push(step.name.clone());
        match run_step(self.sys, step, &vars.pairs(&NodeVariable::ALL)) {
            StepOutcome::Done { .. } => {
                self.state.boot_steps.insert(step.name.clone(), self.boot.clone());
                Ok(())
            }
            StepOutcome::Pending(p) => {
                plan.skipped.insert(s.name.clone());
                self.result.pending.push(format!("{} waits for step `{step_name}`: {p}", s.name));
                Ok(())
            }
            StepOutcome::Failed(e) => Err(format!("{}: step `{step_name}`: {e}", s.name)),
        }
    }

    /// sha256 of each file, binary and credential a service reads at start (what a change of restarts it); with
    /// `lenient`, a file that is not there is left out instead of failing.
    fn digests(&mut self, s: &Service, lenient: bool) -> Result<BTreeMap<NodePath, String>, String> {
        let mut out = BTreeMap::new();
        for p in s.restart_paths() {
            match self.state.digests.digest(p, &self.sys.local(p)) {
                Ok(Some(sha)) => {
                    out.insert(p.clone(), sha);
                }
                Ok(None) if lenient => {}
                Ok(None) => return Err(format!("service `{}`: {p} is not on the node", s.name)),
                Err(e) => return Err(format!("service `{}`: cannot read {p}: {e}", s.name)),
            }
        }
        Ok(out)
    }

    /// Stops `names` and every service that depends on them, dependents first (Windows refuses to stop a
    /// service whose dependents run). Those that ran are marked to start again.
    fn stop_with_dependents(
        &mut self,
        table: &ServicesFile,
        names: &BTreeSet<String>,
        plan: &mut Plan,
    ) -> Result<(), String> {
        let mut set = names.clone();
        for n in names {
            set.extend(table.dependents(n).into_iter().map(|s| s.name.clone()));
        }
        for s in table.services.iter().rev().filter(|s| set.contains(&s.name)) {
            let was_running = scm::stop_and_wait(self.sys, self.timing, &s.name, &mut self.result.killed)?;
            if was_running {
                // Nothing but this pass stops it: it ran when the pass began (a dependent stopped before step 11
                // queried it).
                plan.was_running.insert(s.name.clone());
            }
            if was_running || names.contains(&s.name) {
                plan.marked.insert(s.name.clone());
            }
        }
        Ok(())
    }

    /// Step 12: every service not skipped that is stopped or marked, in table order, each after its
    /// dependencies run and its pre-start step (when due); then what it runs with is recorded.
    fn start_all(&mut self, desired: &Desired, vars: &NodeVars, plan: &mut Plan) {
        let table = &desired.services;
        for s in &table.services {
            let name = &s.name;
            if plan.skipped.contains(name) {
                continue;
            }
            // Step 11 asked the SCM about it moments ago; only a service it did not reach (a swap that failed) is
            // asked now.
            let running = match plan.running_after_check.get(name) {
                Some(running) => *running,
                None => match scm::state(self.sys, name) {
                    Ok(st) => scm::is_running(st),
                    Err(e) => {
                        self.result.errors.push(e);
                        plan.skipped.insert(name.clone());
                        continue;
                    }
                },
            };
            if plan.marked.contains(name) || !running {
                let waiting = s.dependencies.iter().find(|d| !matches!(scm::state(self.sys, d), Ok(RunState::Running)));
                if let Some(dep) = waiting {
                    self.fail(s, format!("service `{name}` not started: its dependency `{dep}` is not running"), plan);
                    continue;
                }
                if plan.pre_start_due.contains(name)
                    && let Some(step_name) = &s.pre_start
                {
                    let ran = self.pre_start(desired, s, step_name, vars, plan).and_then(|()| {
                        // The step may have written a file the service reads: what it starts with.
                        if !plan.skipped.contains(name) {
                            plan.files.insert(name.clone(), self.digests(s, false)?);
                        }
                        Ok(())
                    });
                    if let Err(e) = ran {
                        self.fail(s, e, plan);
                        continue;
                    }
                    if plan.skipped.contains(name) {
                        continue;
                    }
                }
                if let Err(e) = scm::start_and_wait(self.sys, self.timing, name) {
                    self.fail(s, e, plan);
                    continue;
                }
                if plan.was_running.contains(name) {
                    self.result.restarted.push(name.clone());
                } else {
                    self.result.started.push(name.clone());
                }
            }
            if let (Some(config), Some(files)) = (plan.configs.get(name), plan.files.get(name)) {
                let applied = AppliedService {
                    command: config.command.clone(),
                    description: config.description.clone(),
                    dependencies: config.dependencies.clone(),
                    files: files.clone(),
                };
                self.state.services.insert(name.clone(), applied);
            }
        }
    }

    /// Step 13: stop and delete the services the agent created that services.json no longer lists. Its record
    /// alone is not enough: the service must carry wmrender's mark too, so that an edited applied.json cannot have
    /// the agent delete a service it never made (such a name is only taken off the record).
    fn delete_dropped(&mut self, table: &ServicesFile) {
        let dropped: Vec<String> = self.state.owned.iter().filter(|n| table.get(n).is_none()).cloned().collect();
        for name in dropped {
            let step = (|| -> Result<bool, String> {
                match self.sys.service(&name).map_err(|e| format!("cannot query service `{name}`: {e}"))? {
                    None => return Ok(false),
                    Some(s) if !s.marked => return Ok(false),
                    Some(_) => {}
                }
                scm::stop_and_wait(self.sys, self.timing, &name, &mut self.result.killed)?;
                self.sys.delete_service(&name).map_err(|e| format!("cannot delete service `{name}`: {e}"))?;
                Ok(true)
            })();
            match step {
                Ok(deleted) => {
                    if deleted {
                        self.result.deleted.push(name.clone());
                    }
                    self.state.owned.remove(&name);
                    self.state.services.remove(&name);
                }
                Err(e) => self.result.errors.push(e),
            }
        }
    }
}
