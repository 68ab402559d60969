//! wmrender's taint (`wmrender.dev/unconfigured:NoSchedule`, [`wmrender_contract::node_status`]): one rule, for
//! `sync` and the controller. kubelet registers the Node with it; it comes off once the node is known configured and
//! goes back on when the node is known failing. A node may not change its own taints (NodeRestriction), so the taint
//! is wmrender's to manage; it is changed only on Nodes wmrender labelled as its own (`wmrender.dev/managed`).

use crate::cluster::node_object::configured;
#[cfg(feature = "cluster")]
use crate::cluster::{Cluster, ClusterError, MANAGED, nodes};
use crate::delivery::node::{NodeReport, Status};
use serde_json::Value;
use wmrender_contract::ApplyStatus;

/// What the taint should be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// On, for this reason: the node is known failing.
    On(String),
    /// Off: the node is known configured.
    Off,
    /// As it is: nothing is known yet (the agent has not reported, the host could not be reached).
    Keep,
}

/// What a sync that just ran says of the node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fresh {
    /// The agent's pass converged on the bundle it was just given.
    Converged,
    /// The files were current and the agent's last pass had converged.
    Unchanged,
    /// The agent's pass failed, for this reason.
    Failed(String),
    /// Nothing to say of its state: it waits (a reboot, the cluster), or the host could not be reached.
    Unknown,
}

impl Fresh {
    pub fn of(report: &NodeReport) -> Fresh {
        match report.status {
            Status::Synced => Fresh::Converged,
            Status::Unchanged => Fresh::Unchanged,
            // The agent's pass failed (not: the node could not be reached, which says nothing of its state).
            Status::Failed if report.apply.as_ref().is_some_and(|a| a.status == ApplyStatus::Failed) => {
                Fresh::Failed(report.error.clone().unwrap_or_else(|| "the agent's pass failed".into()))
            }
            _ => Fresh::Unknown,
        }
    }
}

/// The taint of `node`, the rendered bundle being `desired`: what a sync just found (`fresh`) first, then what the
/// agent reports on its Node (condition `wmrender.dev/Configured`, annotation `wmrender.dev/bundle`), then whether an
/// earlier sync converged on this bundle (`converged_before`: a host whose agent cannot report, a posix staging
/// host, counts as configured on it until its agent says otherwise).
pub fn verdict(node: &Value, desired: &str, fresh: &Fresh, converged_before: bool) -> Verdict {
    match fresh {
        Fresh::Converged => return Verdict::Off,
        Fresh::Failed(why) => return Verdict::On(why.clone()),
        Fresh::Unchanged | Fresh::Unknown => {}
    }
    let agent = configured(node);
    match agent {
        Some(c) if c.status == "False" => Verdict::On(format!("the agent reports {}: {}", c.reason, c.message)),
        Some(c) if c.status == "True" && c.bundle == desired => Verdict::Off,
        _ if converged_before || *fresh == Fresh::Unchanged => Verdict::Off,
        _ => Verdict::Keep,
    }
}

/// What was changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    Tainted(String),
    Untainted,
}

#[cfg(feature = "cluster")]
/// Puts the taint on or takes it off `node` (as read) as the verdict says; `None` when it already is as it should
/// be, or the Node is not one wmrender manages.
pub async fn apply(cluster: &Cluster, node: &Value, verdict: &Verdict) -> Result<Option<Change>, ClusterError> {
    let on = match verdict {
        Verdict::On(_) => true,
        Verdict::Off => false,
        Verdict::Keep => return Ok(None),
    };
    if nodes::tainted(node) == on || node["metadata"]["labels"][MANAGED] != "true" {
        return Ok(None);
    }
    nodes::set_taint(cluster, nodes::name_of(node), on).await?;
    Ok(Some(match verdict {
        Verdict::On(why) => Change::Tainted(why.clone()),
        _ => Change::Untainted,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use wmrender_contract::node_status::{BUNDLE_ANNOTATION, CONDITION_TYPE};

    fn node(status: Option<&str>, bundle: &str) -> Value {
        let mut n = json!({"metadata": {"name": "win-a", "annotations": {BUNDLE_ANNOTATION: bundle}},
                           "status": {"conditions": []}});
        if let Some(s) = status {
            n["status"]["conditions"] = json!([{"type": CONDITION_TYPE, "status": s, "reason": "ApplyFailed",
                                                 "message": "kube-proxy stopped"}]);
        }
        n
    }

    #[test]
    fn a_fresh_sync_says_first_then_the_agent_then_an_earlier_sync() {
        let failing = node(Some("False"), "sha256:1");
        assert_eq!(verdict(&failing, "sha256:1", &Fresh::Converged, false), Verdict::Off, "it just converged");
        assert_eq!(verdict(&node(None, ""), "sha256:1", &Fresh::Failed("x".into()), true), Verdict::On("x".into()));
        assert!(
            matches!(verdict(&failing, "sha256:1", &Fresh::Unchanged, true), Verdict::On(w) if w.contains("kube-proxy"))
        );
        assert_eq!(verdict(&node(Some("True"), "sha256:1"), "sha256:1", &Fresh::Unknown, false), Verdict::Off);
        assert_eq!(verdict(&node(Some("True"), "sha256:0"), "sha256:1", &Fresh::Unknown, false), Verdict::Keep);
        assert_eq!(verdict(&node(None, ""), "sha256:1", &Fresh::Unknown, true), Verdict::Off);
        assert_eq!(verdict(&node(None, ""), "sha256:1", &Fresh::Unchanged, false), Verdict::Off);
        assert_eq!(verdict(&node(Some("Unknown"), ""), "sha256:1", &Fresh::Unknown, false), Verdict::Keep);
    }
}
