//! What sync does around changes that disturb a node: a binary upgrade (a changed file that a service runs, which
//! the agent swaps by stopping the service) is done on a cordoned, drained node; nodes whose apply asks for a reboot
//! are rebooted gracefully with `--reboot`; and a node that asks for a reboot before it ever joined (its first boot:
//! the Containers feature) is rebooted at once, without a drain — nothing runs there yet. All of them go through
//! [`crate::lifecycle::reboot`]. Without the cluster (`--kubeconfig`), a binary upgrade is refused unless
//! `--allow-undrained-upgrade`, and a reboot is left to the user.

use super::cluster_side::ClusterSide;
use super::error::SyncError;
use super::inventory::Node;
use super::node::NodeReport;
use crate::error::Error;
use std::time::Duration;
use wmrender_contract::NodePath;

/// `--force`, `--drain-timeout`, `--reboot-timeout`.
#[derive(Clone, Debug)]
pub struct DrainSettings {
    pub force: bool,
    pub drain_timeout: Duration,
    pub reboot_timeout: Duration,
}

/// How a sync treats disruptive changes.
pub enum Guard {
    /// No cluster: a binary upgrade is refused.
    Refuse,
    /// `--allow-undrained-upgrade`.
    Undrained,
    #[cfg(feature = "cluster")]
    Cluster(Box<WithCluster>),
}

/// `--kubeconfig`: upgrades are drained, and `--reboot` reboots through the cluster.
#[cfg(feature = "cluster")]
pub struct WithCluster {
    cluster: crate::cluster::Cluster,
    settings: DrainSettings,
    /// `--reboot`, with the SSH options to reboot through and `--max-unavailable`.
    reboot: Option<(super::ssh::ConnectOptions, usize)>,
}

/// A node wmrender cordoned and drained for an upgrade, to uncordon once it is Ready again.
pub struct Held {
    #[cfg(feature = "cluster")]
    cordon: crate::cluster::drain::Cordon,
    /// `namespace/name` of the pods evicted.
    pub evicted: Vec<String>,
}

impl Guard {
    /// The guard for these options: through the cluster sync connected to (`--kubeconfig`), if any.
    #[cfg_attr(not(feature = "cluster"), allow(unused_variables))]
    pub fn new(cluster: Option<&ClusterSide>, allow_undrained: bool, settings: &DrainSettings) -> Guard {
        match cluster {
            None if allow_undrained => Guard::Undrained,
            None => Guard::Refuse,
            #[cfg(feature = "cluster")]
            Some(side) => Guard::Cluster(Box::new(WithCluster {
                cluster: side.cluster().clone(),
                settings: settings.clone(),
                reboot: None,
            })),
            #[cfg(not(feature = "cluster"))]
            Some(side) => match *side {},
        }
    }

    /// Asks for the reboots of `--reboot` (through these SSH options, `max_unavailable` at a time).
    #[cfg_attr(not(feature = "cluster"), allow(unused_variables))]
    pub fn with_reboots(self, connect: &super::ssh::ConnectOptions, max_unavailable: usize) -> Result<Guard, Error> {
        match self {
            #[cfg(feature = "cluster")]
            Guard::Cluster(mut with) => {
                with.reboot = Some((connect.clone(), max_unavailable));
                Ok(Guard::Cluster(with))
            }
            _ => Err(Error::Usage(
                "sync --reboot needs --kubeconfig: the reboots cordon and drain through the cluster".into(),
            )),
        }
    }

    /// Before `replaced` (binaries of running services) are swapped on `node`: cordon and drain it if it is a cluster
    /// Node; refuse without the cluster unless allowed.
    pub async fn before_upgrade(&self, node: &Node, replaced: &[&NodePath]) -> Result<Option<Held>, SyncError> {
        if replaced.is_empty() {
            return Ok(None);
        }
        let list = replaced.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ");
        match self {
            Guard::Undrained => Ok(None),
            Guard::Refuse => Err(SyncError::Local(format!(
                "refusing to replace {list} under running pods: give --kubeconfig so that sync cordons and drains {} \
                 first, or --allow-undrained-upgrade",
                node.name
            ))),
            #[cfg(feature = "cluster")]
            Guard::Cluster(with) => {
                let WithCluster { cluster, settings, .. } = &**with;
                let opts =
                    crate::cluster::drain::DrainOptions { force: settings.force, timeout: settings.drain_timeout };
                crate::lifecycle::reboot::before_upgrade(cluster, &node.name, &opts)
                    .await
                    .map(|c| c.map(|(cordon, drained)| Held { cordon, evicted: drained.evicted }))
                    .map_err(|e| SyncError::Local(format!("before replacing {list}: {e}")))
            }
        }
    }

    /// After the upgrade is applied: wait for the Node to be Ready, then uncordon it.
    #[cfg_attr(not(feature = "cluster"), allow(unused_variables))]
    pub async fn after_upgrade(&self, held: Option<Held>) -> Result<(), SyncError> {
        let Some(held) = held else { return Ok(()) };
        match self {
            #[cfg(feature = "cluster")]
            Guard::Cluster(with) => {
                let WithCluster { cluster, settings, .. } = &**with;
                crate::lifecycle::reboot::after_upgrade(cluster, &held.cordon, settings.reboot_timeout)
                    .await
                    .map_err(|e| SyncError::Remote(e.to_string()))
            }
            _ => Ok(()),
        }
    }

    /// Whether `node`, whose agent asks for a reboot, may be rebooted at once without a drain, and within how
    /// long it must come back: only with the cluster, and only while the cluster has no Node that may be this
    /// host's (none of its name, none at its address) — its first boot, when nothing runs there yet.
    #[cfg_attr(not(feature = "cluster"), allow(unused_variables))]
    pub async fn first_boot_reboot(&self, node: &Node) -> Result<Option<Duration>, SyncError> {
        match self {
            #[cfg(feature = "cluster")]
            Guard::Cluster(with) => {
                let fresh = crate::lifecycle::reboot::has_no_node(&with.cluster, node)
                    .await
                    .map_err(|e| SyncError::Remote(format!("looking for this host's Node before its reboot: {e}")))?;
                Ok(fresh.then_some(with.settings.reboot_timeout))
            }
            _ => Ok(None),
        }
    }

    /// `--reboot`: the nodes whose apply asked for a reboot (and did not fail, and were not rebooted already) are
    /// rebooted gracefully, in inventory order; the reports say which were rebooted, and which failed or were not
    /// started.
    #[cfg_attr(not(feature = "cluster"), allow(unused_variables))]
    pub async fn reboot(&self, reports: &mut [NodeReport], nodes: &[Node]) {
        #[cfg(feature = "cluster")]
        if let Guard::Cluster(with) = self
            && let WithCluster { cluster, settings, reboot: Some((connect, max_unavailable)) } = &**with
        {
            use super::node::Status;
            use crate::lifecycle::reboot::{self, Outcome};
            // The Node's name is the one the agent computed: a Machine's instance is not named after its Machine.
            let wanted: Vec<Node> = nodes
                .iter()
                .filter_map(|n| {
                    let r = reports.iter().find(|r| r.name == n.name)?;
                    (r.reboot_required && !r.rebooted && r.status != Status::Failed)
                        .then(|| Node { name: r.node_name(), ..n.clone() })
                })
                .collect();
            let opts = reboot::RebootOptions {
                drain: crate::cluster::drain::DrainOptions { force: settings.force, timeout: settings.drain_timeout },
                reboot_timeout: settings.reboot_timeout,
                max_unavailable: *max_unavailable,
                connect: connect.clone(),
            };
            for done in reboot::rollout(cluster, &wanted, &opts).await {
                let Some(r) = reports.iter_mut().find(|r| r.node_name() == done.name) else { continue };
                r.evicted = done.evicted;
                match done.outcome {
                    Outcome::Rebooted => r.rebooted = true,
                    Outcome::Skipped => r.error = Some("not rebooted: an earlier node's reboot failed".into()),
                    Outcome::Failed | Outcome::NotBack => {
                        r.status = Status::Failed;
                        r.error = done.error.map(|e| format!("reboot: {e}"));
                    }
                }
            }
        }
    }
}
