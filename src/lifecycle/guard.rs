//! The cluster's answers to what delivery asks before it disturbs a node ([`crate::delivery::guard`]): a binary
//! upgrade happens on a cordoned, drained node (`oc adm drain`'s steps, [`crate::cluster::drain`]), which is
//! uncordoned once it is Ready again; a node whose agent asks for a reboot before it ever joined is rebooted at once
//! only while the cluster has no Node that may be this host's (none of its node name or its reach name, none at its
//! address) — its first boot, when nothing runs there yet.

#[cfg(feature = "cluster")]
use crate::cluster::drain::{self, Cordon, DrainError, DrainOptions};
#[cfg(feature = "cluster")]
use crate::cluster::nodes::{self, wait_back};
#[cfg(feature = "cluster")]
use crate::cluster::{API_TIMEOUT, Cluster, ClusterError, access};
#[cfg(feature = "cluster")]
use crate::delivery::error::SyncError;
#[cfg(feature = "cluster")]
use crate::delivery::guard::{BoxFuture, Guard, Held};
#[cfg(feature = "cluster")]
use crate::delivery::inventory::Node;
use std::time::Duration;
#[cfg(feature = "cluster")]
use std::time::Instant;
#[cfg(feature = "cluster")]
use wmrender_contract::NodePath;

/// `--force`, `--drain-timeout`, `--reboot-timeout`.
#[derive(Clone, Debug)]
pub struct DrainSettings {
    pub force: bool,
    pub drain_timeout: Duration,
    pub reboot_timeout: Duration,
}

#[cfg(feature = "cluster")]
impl DrainSettings {
    pub fn drain(&self) -> DrainOptions {
        DrainOptions { force: self.force, timeout: self.drain_timeout }
    }
}

#[cfg(feature = "cluster")]
/// Disruptive changes through the cluster.
pub struct ClusterGuard {
    pub cluster: Cluster,
    pub settings: DrainSettings,
}

#[cfg(feature = "cluster")]
impl Guard for ClusterGuard {
    fn before_upgrade<'a>(
        &'a self,
        node: &'a Node,
        node_name: &'a str,
        replaced: &'a [&'a NodePath],
    ) -> BoxFuture<'a, Result<Option<Held>, SyncError>> {
        Box::pin(async move {
            if replaced.is_empty() {
                return Ok(None);
            }
            let list = replaced.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ");
            let held = before_upgrade(&self.cluster, node_name, &self.settings.drain())
                .await
                .map_err(|e| SyncError::Local(format!("before replacing {list} on {}: {e}", node.name)))?;
            Ok(held.map(|(cordon, drained)| {
                let (cluster, timeout) = (self.cluster.clone(), self.settings.reboot_timeout);
                let release: BoxFuture<'static, Result<(), SyncError>> = Box::pin(async move {
                    after_upgrade(&cluster, &cordon, timeout).await.map_err(|e| SyncError::Remote(e.to_string()))
                });
                Held { evicted: drained.evicted, release }
            }))
        })
    }

    fn first_boot_reboot<'a>(
        &'a self,
        node: &'a Node,
        node_name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Duration>, SyncError>> {
        Box::pin(async move {
            let fresh = has_no_node(&self.cluster, node, node_name)
                .await
                .map_err(|e| SyncError::Remote(format!("looking for this host's Node before its reboot: {e}")))?;
            Ok(fresh.then_some(self.settings.reboot_timeout))
        })
    }
}

#[cfg(feature = "cluster")]
/// Before a running service's binary is replaced: cordon and drain the node if it is a cluster Node (`None` when
/// the cluster has no Node of that name: nothing runs there to protect).
async fn before_upgrade(
    cluster: &Cluster,
    name: &str,
    opts: &DrainOptions,
) -> Result<Option<(Cordon, drain::Drained)>, String> {
    if nodes::get(cluster, name, Instant::now() + API_TIMEOUT).await.map_err(|e| e.to_string())?.is_none() {
        return Ok(None);
    }
    access::require(cluster, &access::DRAIN, "draining a node for an upgrade", "wmrender-sync")
        .await
        .map_err(|e| e.to_string())?;
    let cordon = drain::cordon(cluster, name, "upgrade").await.map_err(|e| e.to_string())?;
    match drain::drain(cluster, name, opts).await {
        Ok(drained) => Ok(Some((cordon, drained))),
        Err(e) => {
            let refused = matches!(e, DrainError::Refused { .. });
            if refused {
                let _ = drain::uncordon(cluster, &cordon).await;
            }
            Err(format!("{e}{}", if refused { "" } else { " (the node stays cordoned)" }))
        }
    }
}

#[cfg(feature = "cluster")]
/// After the upgrade was applied: wait for the Node to be Ready (bounded), then uncordon it.
async fn after_upgrade(cluster: &Cluster, cordon: &Cordon, timeout: Duration) -> Result<(), ClusterError> {
    let what = || format!("waiting for {} to be Ready after the upgrade", cordon.node);
    wait_back(cluster, &cordon.node, None, Instant::now() + timeout)
        .await
        .map_err(|why| ClusterError::Api { what: what(), why: format!("{why} (the node stays cordoned)") })?;
    drain::uncordon(cluster, cordon).await
}

#[cfg(feature = "cluster")]
/// Whether the cluster has no Node that may be this host's: none named as its node or as its reach, none with its
/// address. A Node that claims the address (Nodes write their own) only ever prevents the reboot.
async fn has_no_node(cluster: &Cluster, node: &Node, node_name: &str) -> Result<bool, ClusterError> {
    let all = cluster.list("/api/v1/nodes").await?;
    Ok(!all.iter().any(|n| {
        let name = nodes::name_of(n);
        name == node_name || name == node.name || nodes::addresses(n).any(|(_, a)| a == node.address)
    }))
}
