//! `wmrender-node run`: passes until told to stop, like WICD's loop. A converged node is checked again after the
//! interval (a killed service is started again, an every-boot step redone after a reboot); a pending or failed
//! pass is retried after 5 s, 10 s, 20 s … up to the back-off cap. A stop request ends the wait at once. When sync
//! has replaced the agent's program under the running service, the loop ends after its pass so the new program
//! takes over ([`crate::agent_service`]). With a watch on its Node ([`crate::node_watch`]) the passes read the Node
//! from it, and a new desired bundle ends the wait at once (the `wait` returns `false` early).

use crate::apply::apply_watched;
use crate::log;
use crate::node_watch::NodeWatch;
use crate::system::System;
use crate::timing::Timing;
use std::time::Duration;
use wmrender_contract::{ApplyStatus, NodePath};

const FIRST_BACKOFF: Duration = Duration::from_secs(5);

/// The pause after a pass; `failures` counts the passes since the last converged one.
pub fn next_pause(status: ApplyStatus, failures: &mut u32, timing: &Timing) -> Duration {
    if status == ApplyStatus::Converged {
        *failures = 0;
        return timing.interval;
    }
    let pause = FIRST_BACKOFF.saturating_mul(1u32 << (*failures).min(16)).min(timing.backoff_max);
    *failures = failures.saturating_add(1);
    pause
}

/// Why the loop ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// A stop or shutdown request.
    Stopped,
    /// Sync replaced the agent's program: the service ends so that the new one runs.
    HandOver,
}

/// Runs passes until `wait` reports a stop request (it waits up to the given time and returns `true` when asked
/// to stop), or until the program was replaced. Returns why it ended and the number of passes.
pub fn run_loop(
    sys: &mut dyn System,
    timing: &Timing,
    watch: Option<&NodeWatch>,
    wait: &mut dyn FnMut(Duration) -> bool,
) -> (Ended, u64) {
    let log_path = sys.local(&NodePath::known(log::LOG_FILE));
    let mut failures = 0;
    let mut passes = 0;
    // Kept from pass to pass: a pull after the first resumes its TLS session with the registry.
    let puller = crate::pull::Puller::default();
    loop {
        let result = apply_watched(sys, timing, watch, &puller);
        passes += 1;
        log::append(&log_path, &result.to_line());
        if crate::agent_service::replaced_under_me(sys) {
            log::append(
                &log_path,
                "run: sync replaced this agent's program; the service ends for the new one to start",
            );
            return (Ended::HandOver, passes);
        }
        if wait(next_pause(result.status, &mut failures, timing)) {
            return (Ended::Stopped, passes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_off_doubles_to_the_cap_and_resets_when_converged() {
        let t = Timing { backoff_max: Duration::from_secs(30), ..Timing::default() };
        let mut f = 0;
        let pauses: Vec<u64> = (0..5).map(|_| next_pause(ApplyStatus::Pending, &mut f, &t).as_secs()).collect();
        assert_eq!(pauses, [5, 10, 20, 30, 30]);
        assert_eq!(next_pause(ApplyStatus::Converged, &mut f, &t), t.interval);
        assert_eq!(next_pause(ApplyStatus::Failed, &mut f, &t), Duration::from_secs(5));
    }
}
