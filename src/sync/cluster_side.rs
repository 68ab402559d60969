//! Where `sync --kubeconfig` meets the cluster, in the order sync needs it: connect (before any node is touched),
//! fetch the node credentials, find the Windows Machines' nodes, mint the cloud-node-manager's token, and after the
//! nodes are synced: record how each was reached, let the configured nodes join (CSRs, labels) and prune the nodes
//! that left. Without the `cluster` build feature, [`ClusterSide`] has no value, so none of it can run and `connect`
//! says the feature is missing.

use super::inventory::Node;
use super::node::NodeReport;
#[cfg(feature = "cluster")]
use super::node::Status;
use super::secrets::{Fetched, Secrets};
use super::{Rendered, SyncOptions};
use crate::error::Error;
use serde::Serialize;
use std::path::Path;

/// What the cluster side did, for the report: merged into its top level (`machines`, `pruned`, `cluster`).
#[cfg(feature = "cluster")]
#[derive(Debug, Default, Serialize)]
pub struct ClusterReport {
    /// Windows Machines that are not sync targets (yet): waiting for a node or an address, or refused.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub machines: Vec<crate::cluster::machines::Skipped>,
    /// Nodes deconfigured and deleted, or that would be (`--dry-run`), or could not be.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pruned: Vec<crate::cluster::prune::Pruned>,
    /// The configured nodes' CSRs approved, CSRs left alone, labels set, nodes that did not join in time.
    #[serde(rename = "cluster", skip_serializing_if = "Option::is_none")]
    pub join: Option<crate::cluster::join::JoinReport>,
}

#[cfg(not(feature = "cluster"))]
#[derive(Debug, Default, Serialize)]
pub struct ClusterReport {}

#[cfg(feature = "cluster")]
pub struct ClusterSide {
    cluster: crate::cluster::Cluster,
    /// The Machines' nodes and the node names Machines claim, found once.
    found: crate::cluster::machines::Found,
}

#[cfg(not(feature = "cluster"))]
pub enum ClusterSide {}

/// Connects when a kubeconfig is given. A kubeconfig that does not work stops the sync here, before any node.
pub async fn connect(kubeconfig: Option<&Path>) -> Result<Option<ClusterSide>, Error> {
    match kubeconfig {
        None => Ok(None),
        #[cfg(feature = "cluster")]
        Some(path) => {
            Ok(Some(ClusterSide { cluster: crate::cluster::Cluster::connect(path).await?, found: Default::default() }))
        }
        #[cfg(not(feature = "cluster"))]
        Some(_) => Err(crate::cluster::ClusterError::NotBuilt("sync --kubeconfig").into()),
    }
}

#[cfg(feature = "cluster")]
impl ClusterSide {
    /// The client, for the steps that run beside the nodes' sync (drained upgrades, reboots).
    pub fn cluster(&self) -> &crate::cluster::Cluster {
        &self.cluster
    }

    /// The credentials nodes need (bootstrap kubeconfig, CAs, trusted CA bundle, pull secret), in memory.
    pub async fn credentials(&self) -> Result<Fetched, Error> {
        Ok(crate::cluster::credentials::fetch(&self.cluster).await?)
    }

    /// The nodes of the Windows Machines: wmrender's only without the operator (with it, WMCO configures them).
    pub async fn machine_nodes(&mut self, rendered: &Rendered) -> Result<Vec<Node>, Error> {
        if rendered.manifest.mode == Some(wmrender_contract::Mode::WithoutOperator) {
            self.found = crate::cluster::machines::find(&self.cluster).await?;
        }
        Ok(self.found.nodes.clone())
    }

    /// The Azure cloud-node-manager's kubeconfig with a fresh token, when the rendered services wait for it. A
    /// TokenRequest issues a credential: not for `--dry-run`, which keeps the node's kubeconfig as it is.
    pub async fn mint_tokens(&self, rendered: &Rendered, secrets: &mut Secrets, dry_run: bool) -> Result<(), Error> {
        use crate::render::node::paths::{
            BOOTSTRAP_KUBECONFIG, CLOUD_NODE_MANAGER_KUBECONFIG, CLOUD_NODE_MANAGER_TOKEN,
        };
        let path = wmrender_contract::NodePath::known(CLOUD_NODE_MANAGER_KUBECONFIG);
        let needed = rendered.manifest.mode == Some(wmrender_contract::Mode::WithoutOperator)
            && rendered.services.services.iter().any(|s| s.requires.contains(&path));
        if dry_run || !needed {
            return Ok(());
        }
        let endpoint = secrets
            .files
            .get(BOOTSTRAP_KUBECONFIG)
            .and_then(|b| crate::cluster::token::endpoint_from_bootstrap(b.bytes()))
            .ok_or_else(|| {
                Error::Usage(format!(
                    "the cloud-node-manager kubeconfig ({CLOUD_NODE_MANAGER_KUBECONFIG}) reaches the API server as \
                     kubelet does: give the bootstrap kubeconfig (--bootstrap-kubeconfig) with its server URL and \
                     inline CA (certificate-authority-data)"
                ))
            })?;
        let minted = crate::cluster::token::cloud_node_manager_credentials(&self.cluster, &endpoint).await?;
        secrets.files.insert(CLOUD_NODE_MANAGER_KUBECONFIG, minted.kubeconfig);
        secrets.files.insert(CLOUD_NODE_MANAGER_TOKEN, minted.token);
        Ok(())
    }

    /// After the nodes were synced: record how each reached node was reached, let the configured nodes join,
    /// prune the managed nodes that are no longer targets.
    pub async fn after_sync(
        self,
        nodes: &[Node],
        reports: &[NodeReport],
        opts: &SyncOptions,
        connect: &super::ssh::ConnectOptions,
    ) -> Result<ClusterReport, Error> {
        use crate::cluster::{join, prune};
        let mut report = ClusterReport { machines: self.found.skipped, ..Default::default() };
        if !opts.dry_run {
            let reached: Vec<Node> =
                (nodes.iter().zip(reports)).filter(|(_, r)| prune::reached(r.status)).map(|(n, _)| n.clone()).collect();
            prune::record_logins(&self.cluster, &reached).await?;
            // A node waiting for a reboot has no kubelet to ask yet: it joins after the reboot (`--reboot`, or the
            // next sync).
            let expected: Vec<crate::cluster::csr::Expected> = reports
                .iter()
                .filter(|r| matches!(r.status, Status::Synced | Status::Unchanged | Status::Pending))
                .filter(|r| !r.reboot_required || r.rebooted)
                .map(|r| crate::cluster::csr::Expected {
                    name: r.node_name(),
                    addresses: [Some(r.address.clone()), r.apply.as_ref().map(|a| a.node_ip.clone())]
                        .into_iter()
                        .flatten()
                        .filter(|a| !a.is_empty())
                        .collect(),
                })
                .collect();
            if !expected.is_empty() {
                if let Some(p) = &opts.progress {
                    p.note(&format!(
                        "waiting up to {}s for the kubelet CSRs of {} node(s)",
                        opts.csr_timeout.as_secs(),
                        expected.len()
                    ));
                }
                report.join = Some(join::run(&self.cluster, &expected, opts.csr_timeout).await?);
            }
        }
        if opts.prune_nodes {
            let leaving = prune::leaving(&self.cluster, nodes, &self.found.node_names).await?;
            report.pruned = prune::prune(&self.cluster, &leaving, connect, opts.dry_run).await;
        }
        Ok(report)
    }
}

#[cfg(not(feature = "cluster"))]
impl ClusterSide {
    pub async fn credentials(&self) -> Result<Fetched, Error> {
        match *self {}
    }
    pub async fn machine_nodes(&mut self, _: &Rendered) -> Result<Vec<Node>, Error> {
        match *self {}
    }
    pub async fn mint_tokens(&self, _: &Rendered, _: &mut Secrets, _: bool) -> Result<(), Error> {
        match *self {}
    }
    pub async fn after_sync(
        self,
        _: &[Node],
        _: &[NodeReport],
        _: &SyncOptions,
        _: &super::ssh::ConnectOptions,
    ) -> Result<ClusterReport, Error> {
        match self {}
    }
}

#[cfg(feature = "cluster")]
impl ClusterReport {
    /// A Machine was refused, a node could not be pruned, or a node did not join in time.
    pub fn failed(&self) -> bool {
        use crate::cluster::prune::PruneStatus;
        self.machines.iter().any(|m| m.refused)
            || self.pruned.iter().any(|p| p.status == PruneStatus::Failed)
            || self.join.as_ref().is_some_and(|j| !j.timed_out.is_empty())
    }

    /// `--dry-run` found nodes to prune.
    pub fn would_change(&self) -> bool {
        self.pruned.iter().any(|p| p.status == crate::cluster::prune::PruneStatus::WouldPrune)
    }

    /// The summary lines (stderr): Machines not synced, CSRs approved or left alone, labels, nodes pruned, and with
    /// `--dry-run` the nodes that would be; with `chatty` false only the errors: nodes that did not join (with the
    /// steps to finish by hand) and nodes that could not be pruned.
    pub fn lines(&self, csr_timeout: std::time::Duration, chatty: bool) -> String {
        use crate::cluster::prune::PruneStatus;
        let mut out = String::new();
        let mut say = |error: bool, line: String| {
            if chatty || error {
                out.push_str(&line);
            }
        };
        for m in &self.machines {
            let state = if m.refused { "refused" } else { "waiting" };
            say(m.refused, format!("machine {}: {state}: {}\n", m.machine, m.why));
        }
        if let Some(j) = &self.join {
            for a in &j.approved {
                say(false, format!("approved {} ({:?} certificate of {})\n", a.csr, a.kind, a.node));
            }
            for l in &j.left_alone {
                say(false, format!("left {} pending: it names {} but {}\n", l.csr, l.node, l.why));
            }
            for n in &j.labelled {
                let (worker, managed) = (crate::cluster::WORKER_ROLE, crate::cluster::MANAGED);
                say(false, format!("labelled {n} {worker}= {managed}=true\n"));
            }
            for n in &j.timed_out {
                say(
                    true,
                    format!(
                        "error: {n} did not finish joining within {}s; finish by hand:\n{}",
                        csr_timeout.as_secs(),
                        crate::cluster::manual_steps(n)
                    ),
                );
            }
        }
        for p in &self.pruned {
            match (&p.status, &p.error) {
                (PruneStatus::WouldPrune, _) => say(
                    false,
                    format!(
                        "{} ({}) would be pruned: deconfigured over SSH, then its Node deleted\n",
                        p.node, p.address
                    ),
                ),
                (_, None) => {
                    say(false, format!("pruned node {} ({}): deconfigured, Node deleted\n", p.node, p.address))
                }
                (_, Some(e)) => say(true, format!("node {} ({}) not pruned: {e}\n", p.node, p.address)),
            }
        }
        out
    }
}

#[cfg(not(feature = "cluster"))]
impl ClusterReport {
    pub fn failed(&self) -> bool {
        false
    }
    pub fn would_change(&self) -> bool {
        false
    }
    pub fn lines(&self, _: std::time::Duration, _: bool) -> String {
        String::new()
    }
}
