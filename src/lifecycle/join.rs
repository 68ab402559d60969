//! The nodes wmrender configured join: their kubelet CSRs are approved ([`crate::cluster::join`], WMCO's checks
//! and cluster-machine-approver's serving-name rule) for the names vouched for each target
//! ([`super::targets::Target::vouched_names`]). A BYOH or inventory host that Git names by a DNS name is vouched for
//! at the addresses that name resolves to here, as the name's owner (DNS) says, not the node.

use super::targets::Target;
use crate::cluster::csr::Expected;
use crate::cluster::join::{self, JoinReport};
use crate::cluster::nodes::can_be_node_name;
use crate::cluster::{Cluster, ClusterError};
use std::time::Duration;

/// How long a DNS name from Git may take to resolve.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(2);

/// What each target's CSRs must name.
pub async fn expected(targets: &[&Target]) -> Vec<Expected> {
    let mut out = Vec::new();
    for t in targets.iter().filter(|t| can_be_node_name(&t.node_name)) {
        let mut addresses = t.vouched_names();
        if t.machine().is_none() && t.reach.address.parse::<std::net::IpAddr>().is_err() {
            addresses.extend(resolve(&t.reach.address).await);
        }
        out.push(Expected { name: t.node_name.clone(), addresses });
    }
    out
}

async fn resolve(name: &str) -> Vec<String> {
    match tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host((name, 0))).await {
        Ok(Ok(found)) => found.map(|a| a.ip().to_string()).collect(),
        _ => vec![],
    }
}

/// Approves the CSRs of `targets` and labels their Nodes, waiting up to `timeout` for them (zero: one look).
pub async fn run(cluster: &Cluster, targets: &[&Target], timeout: Duration) -> Result<JoinReport, ClusterError> {
    let expected = expected(targets).await;
    if expected.is_empty() {
        return Ok(JoinReport::default());
    }
    join::run(cluster, &expected, timeout).await
}
