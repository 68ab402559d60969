//! What the controller does next for one Windows instance, from the state of the cluster alone (level-triggered:
//! after a restart it reaches the same decision), plus a little memory that only paces it (when it last synced the
//! instance, how many times in a row that did not configure it). Pure: no I/O, no clock of its own.
//!
//! In order:
//! 1. no Node yet: sync the instance (first contact: bundle, agent, credentials; its first boot's reboot), again
//!    after a back-off while its Node does not appear;
//! 2. the Node's agent applied another bundle than the one rendered (annotation `wmrender.dev/bundle`), or the
//!    cloud-node-manager's token is due ([`token_due`]: half its life gone): sync it;
//! 3. the agent reports it failing (condition `wmrender.dev/Configured` = `False`): taint it (nothing new lands there,
//!    its pods stay) and sync it again after a back-off;
//! 4. the agent has not reported it configured yet: unless the controller's own last sync of it converged on this
//!    bundle, sync it again after a back-off (its service also goes on by itself);
//! 5. configured: untaint it if it is tainted; else nothing.

use crate::cluster::nodes::{Configured, configured, tainted};
use crate::sync::MintedToken;
use serde_json::Value;
use std::time::{Duration, Instant};

/// The first pause before the same instance is synced again while it is not configured; it doubles up to
/// [`BACKOFF_MAX`].
pub const BACKOFF_FIRST: Duration = Duration::from_secs(30);
pub const BACKOFF_MAX: Duration = Duration::from_secs(600);

/// What the controller remembers of one instance (lost on a restart, which costs at most one early sync).
#[derive(Clone, Debug, Default)]
pub struct Memory {
    /// When it was last synced.
    pub synced_at: Option<Instant>,
    /// Syncs in a row after which it was still not configured.
    pub failures: u32,
    /// The bundle its last sync converged on: a host whose agent does not report on its Node (it cannot yet, or a
    /// posix staging host) counts as configured on it until its agent says otherwise.
    pub converged: Option<String>,
    /// The cloud-node-manager's token its last sync pushed.
    pub token: Option<MintedToken>,
}

/// Whether an instance's token must be renewed now, the session pushing `pushing` (none: the bundle needs no
/// token, or this is a dry run). Once half its life is gone, so that a failed sync and its back-off still leave it
/// hours. A token the controller did not push itself (it restarted since) is of unknown age: renewed once.
pub fn token_due(memory: &Memory, pushing: Option<MintedToken>, now: Instant) -> bool {
    pushing.is_some() && memory.token.is_none_or(|t| now.saturating_duration_since(t.minted) >= t.lifetime / 2)
}

impl Memory {
    /// The pause before the next sync of a not-configured instance.
    pub fn backoff(&self) -> Duration {
        BACKOFF_FIRST.saturating_mul(1 << self.failures.min(5)).min(BACKOFF_MAX)
    }

    fn due(&self, now: Instant) -> bool {
        self.synced_at.is_none_or(|t| now.saturating_duration_since(t) >= self.backoff())
    }
}

/// The next step for an instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next {
    /// Nothing to do: configured and schedulable.
    Nothing,
    /// Push and apply the bundle (one sync of the instance), for this reason.
    Sync(String),
    /// Take wmrender's taint off: configured.
    Untaint,
    /// Put the taint on (the agent reports failing), then sync again once the back-off allows.
    Taint(String),
    /// Not configured, synced recently: wait for the back-off (or for the agent's service, which goes on by itself).
    Wait(String),
}

/// The decision for an instance whose Node is `node` (none yet), the rendered bundle being `desired` (its digest),
/// `token_due` when its credentials must be renewed now.
pub fn decide(node: Option<&Value>, desired: &str, token_due: bool, memory: &Memory, now: Instant) -> Next {
    let Some(node) = node else {
        return if memory.due(now) {
            Next::Sync("no Node yet: first contact".into())
        } else {
            Next::Wait("no Node yet; synced, waiting for kubelet to register".into())
        };
    };
    let agent = configured(node);
    let applied = agent.as_ref().map(|c| c.bundle.as_str()).unwrap_or("");
    if !applied.is_empty() && applied != desired {
        return Next::Sync(format!("the agent applied {applied}; the rendered bundle is {desired}"));
    }
    if token_due && memory.due(now) {
        return Next::Sync("the cloud-node-manager's token is due for renewal".into());
    }
    match agent {
        Some(Configured { status, reason, message, .. }) if status == "False" => {
            let why = format!("the agent reports {reason}: {message}");
            if !tainted(node) {
                Next::Taint(why)
            } else if memory.due(now) {
                Next::Sync(why)
            } else {
                Next::Wait(why)
            }
        }
        Some(Configured { status, .. }) if status == "True" && applied == desired => {
            if tainted(node) {
                Next::Untaint
            } else {
                Next::Nothing
            }
        }
        _ if memory.converged.as_deref() == Some(desired) => {
            if tainted(node) {
                Next::Untaint
            } else {
                Next::Nothing
            }
        }
        _ if memory.due(now) => Next::Sync("the agent has not reported the bundle configured yet".into()),
        _ => Next::Wait("the agent has not reported the bundle configured yet".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use wmrender_contract::node_status::{BUNDLE_ANNOTATION, CONDITION_TYPE, TAINT_EFFECT, TAINT_KEY};

    const DESIRED: &str = "sha256:11";

    fn node(status: Option<&str>, bundle: &str, taint: bool) -> Value {
        let mut n = json!({"metadata": {"name": "win-a", "annotations": {BUNDLE_ANNOTATION: bundle}},
                           "spec": {}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        if let Some(s) = status {
            n["status"]["conditions"].as_array_mut().unwrap().push(json!({
                "type": CONDITION_TYPE, "status": s, "reason": "ApplyFailed", "message": "kube-proxy stopped"}));
        }
        if taint {
            n["spec"]["taints"] = json!([{"key": TAINT_KEY, "effect": TAINT_EFFECT}]);
        }
        n
    }

    fn synced(ago: u64, failures: u32, now: Instant) -> Memory {
        Memory { synced_at: Some(now - Duration::from_secs(ago)), failures, ..Default::default() }
    }

    #[test]
    fn an_instance_without_a_node_is_synced_then_waited_for() {
        let now = Instant::now() + Duration::from_secs(3600);
        assert!(matches!(decide(None, DESIRED, false, &Memory::default(), now), Next::Sync(_)));
        assert!(matches!(decide(None, DESIRED, false, &synced(10, 0, now), now), Next::Wait(_)));
        assert!(matches!(decide(None, DESIRED, false, &synced(31, 0, now), now), Next::Sync(_)));
        assert!(matches!(decide(None, DESIRED, false, &synced(100, 3, now), now), Next::Wait(_)), "back-off 240 s");
    }

    #[test]
    fn a_configured_node_is_untainted_and_then_left_alone() {
        let now = Instant::now();
        let m = Memory::default();
        assert_eq!(decide(Some(&node(Some("True"), DESIRED, true)), DESIRED, false, &m, now), Next::Untaint);
        assert_eq!(decide(Some(&node(Some("True"), DESIRED, false)), DESIRED, false, &m, now), Next::Nothing);
    }

    #[test]
    fn another_bundle_is_synced_at_once_a_due_token_after_the_back_off() {
        let now = Instant::now() + Duration::from_secs(3600);
        let recent = synced(1, 4, now);
        let old = node(Some("True"), "sha256:00", false);
        assert!(matches!(decide(Some(&old), DESIRED, false, &recent, now), Next::Sync(w) if w.contains("sha256:00")));
        let current = node(Some("True"), DESIRED, false);
        assert!(
            matches!(decide(Some(&current), DESIRED, true, &synced(3600, 0, now), now), Next::Sync(w) if w.contains("token"))
        );
        // A renewal that just failed is not tried again on every change in the cluster.
        assert_eq!(decide(Some(&current), DESIRED, true, &recent, now), Next::Nothing);
    }

    #[test]
    fn a_token_is_renewed_once_half_its_life_is_gone_or_when_its_age_is_unknown() {
        let now = Instant::now() + Duration::from_secs(48 * 3600);
        let day = Duration::from_secs(24 * 3600);
        let minted =
            |hours_ago: u64| MintedToken { minted: now - Duration::from_secs(hours_ago * 3600), lifetime: day };
        let holding = |hours_ago| Memory { token: Some(minted(hours_ago)), ..Default::default() };
        let pushing = Some(minted(0));
        assert!(!token_due(&holding(11), pushing, now));
        assert!(token_due(&holding(12), pushing, now));
        assert!(token_due(&Memory::default(), pushing, now), "pushed before a restart: of unknown age");
        assert!(!token_due(&Memory::default(), None, now), "the bundle needs no token");
        let short = Memory {
            token: Some(MintedToken { lifetime: Duration::from_secs(3600), ..minted(0) }),
            ..Default::default()
        };
        assert!(token_due(&short, pushing, now + Duration::from_secs(1800)), "the server shortened it");
    }

    #[test]
    fn a_failing_agent_is_tainted_then_synced_again_after_the_back_off() {
        let now = Instant::now() + Duration::from_secs(3600);
        let failing = node(Some("False"), DESIRED, false);
        assert!(
            matches!(decide(Some(&failing), DESIRED, false, &synced(1, 0, now), now), Next::Taint(w) if w.contains("kube-proxy"))
        );
        let tainted = node(Some("False"), DESIRED, true);
        assert!(matches!(decide(Some(&tainted), DESIRED, false, &synced(1, 0, now), now), Next::Wait(_)));
        assert!(matches!(decide(Some(&tainted), DESIRED, false, &synced(60, 0, now), now), Next::Sync(_)));
    }

    #[test]
    fn a_node_whose_agent_has_not_reported_is_synced_again_only_after_the_back_off() {
        let now = Instant::now() + Duration::from_secs(3600);
        let silent = node(None, "", true);
        assert!(matches!(decide(Some(&silent), DESIRED, false, &synced(5, 1, now), now), Next::Wait(_)));
        assert!(matches!(decide(Some(&silent), DESIRED, false, &synced(61, 1, now), now), Next::Sync(_)));
        assert_eq!(Memory { failures: 30, ..Default::default() }.backoff(), BACKOFF_MAX);
        // Its last sync converged on the bundle: configured until the agent says otherwise.
        let converged = Memory { converged: Some(DESIRED.into()), ..synced(600, 0, now) };
        assert_eq!(decide(Some(&silent), DESIRED, false, &converged, now), Next::Untaint);
        let untainted = node(None, "", false);
        assert_eq!(decide(Some(&untainted), DESIRED, false, &converged, now), Next::Nothing);
        let failing = node(Some("False"), DESIRED, true);
        assert!(matches!(decide(Some(&failing), DESIRED, false, &converged, now), Next::Sync(_)));
    }
}
