//! What delivery asks before it disturbs a node, answered by whoever can see the cluster. Delivery itself knows
//! nothing of the cluster: a binary upgrade (a changed file that a service runs, which the agent swaps by stopping
//! the service) needs the node cordoned and drained first, and a node that asks for a reboot before it ever joined
//! (its first boot: the Containers feature) may be rebooted at once only when no Node can be this host's. Without
//! a cluster (`sync` without `--kubeconfig`) a binary upgrade is refused unless `--allow-undrained-upgrade`, and a
//! reboot is left to the user; with it, [`crate::lifecycle::guard`] answers.

use super::error::SyncError;
use super::inventory::Node;
use std::time::Duration;
use wmrender_contract::NodePath;

/// A future the guard answers with (its own type alias: the `futures` crate comes with the `cluster` feature only).
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// A node cordoned and drained for an upgrade: the pods evicted, and the step that lets it take pods again once
/// the upgrade is applied (waits for it to be Ready, then uncordons it).
pub struct Held {
    /// `namespace/name` of the pods evicted.
    pub evicted: Vec<String>,
    pub release: BoxFuture<'static, Result<(), SyncError>>,
}

/// How a sync treats the changes that disturb a node.
pub trait Guard: Send + Sync {
    /// Before `replaced` (binaries of running services) are swapped on `node`, whose Kubernetes node is
    /// `node_name`: cordon and drain it, or refuse.
    fn before_upgrade<'a>(
        &'a self,
        node: &'a Node,
        node_name: &'a str,
        replaced: &'a [&'a NodePath],
    ) -> BoxFuture<'a, Result<Option<Held>, SyncError>>;

    /// Whether `node`, whose agent asks for a reboot, may be rebooted at once without a drain (its first boot,
    /// nothing runs there yet), and within how long it must come back.
    fn first_boot_reboot<'a>(
        &'a self,
        node: &'a Node,
        node_name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Duration>, SyncError>>;
}

/// Without the cluster: a binary upgrade is refused (unless `allow_undrained`, `--allow-undrained-upgrade`), and no
/// reboot is done by wmrender.
pub struct NoCluster {
    pub allow_undrained: bool,
}

impl Guard for NoCluster {
    fn before_upgrade<'a>(
        &'a self,
        node: &'a Node,
        _: &'a str,
        replaced: &'a [&'a NodePath],
    ) -> BoxFuture<'a, Result<Option<Held>, SyncError>> {
        Box::pin(async move {
            if replaced.is_empty() || self.allow_undrained {
                return Ok(None);
            }
            let list = replaced.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ");
            Err(SyncError::Local(format!(
                "refusing to replace {list} under running pods: give --kubeconfig so that sync cordons and drains {} \
                 first, or --allow-undrained-upgrade",
                node.name
            )))
        })
    }

    fn first_boot_reboot<'a>(&'a self, _: &'a Node, _: &'a str) -> BoxFuture<'a, Result<Option<Duration>, SyncError>> {
        Box::pin(async { Ok(None) })
    }
}

/// After the upgrade was applied: let the node take pods again.
pub async fn after_upgrade(held: Option<Held>) -> Result<(), SyncError> {
    match held {
        Some(held) => held.release.await,
        None => Ok(()),
    }
}
