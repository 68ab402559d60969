//! Steps: rendered PowerShell scripts for what Windows offers only through PowerShell (the Containers feature,
//! the Defender exclusion, the HNS network, routes, platform host names). A step counts as done only when the
//! script exits 0 AND its last JSON line says `ok: true`: Wine's `powershell.exe` stub, or a script that dies
//! before printing, never passes for a success.

use crate::node_vars::substitute;
use crate::system::System;
use wmrender_contract::{Step, StepOutput};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepOutcome {
    Done {
        value: Option<String>,
        reboot_required: bool,
    },
    /// Not done, and not an error: the cluster or Windows must act first.
    Pending(String),
    Failed(String),
}

/// Runs a step with its arguments (placeholders of `pairs` replaced as plain text, each argument passed as one
/// literal argument) and reads its result line.
pub fn run_step(sys: &mut dyn System, step: &Step, pairs: &[(&str, &str)]) -> StepOutcome {
    if !sys.local(&step.script).is_file() {
        return StepOutcome::Failed(format!("script {} is not on the node", step.script));
    }
    let args: Vec<String> = step.args.iter().map(|a| substitute(a, pairs)).collect();
    let run = match sys.run_script(&step.script, &args) {
        Ok(r) => r,
        Err(e) => return StepOutcome::Failed(format!("could not run {}: {e}", step.script)),
    };
    let Some(out) = StepOutput::from_stdout(&run.stdout) else {
        return StepOutcome::Failed(format!(
            "{} printed no result line (exit code {}){}",
            step.script,
            run.exit_code,
            stderr_tail(&run.stderr)
        ));
    };
    if run.exit_code != 0 {
        let why = out.error.unwrap_or_else(|| "no error given".into());
        return StepOutcome::Failed(format!("{} exited with code {}: {why}", step.script, run.exit_code));
    }
    if out.ok {
        return StepOutcome::Done { value: out.value, reboot_required: out.reboot_required };
    }
    match (out.pending, out.error) {
        (Some(p), _) => StepOutcome::Pending(p),
        (None, Some(e)) => StepOutcome::Failed(e),
        (None, None) => StepOutcome::Failed(format!("{} reported ok: false without a reason", step.script)),
    }
}

fn stderr_tail(stderr: &str) -> String {
    match stderr.lines().rev().find(|l| !l.trim().is_empty()) {
        Some(l) => format!(": {}", l.trim().chars().take(200).collect::<String>()),
        None => String::new(),
    }
}
