//! Where `sync --kubeconfig` meets the cluster, in the order sync needs it: connect (before any node is touched),
//! fetch the node credentials, find the Windows Machines' instances, mint the cloud-node-manager's token, and after
//! the nodes are synced: record how each was reached, let the configured nodes join (CSRs, labels), keep wmrender's
//! taint on the nodes that are not configured and take it off those that are, and prune the nodes that left.
//! Without the `cluster` build feature, [`ClusterSide`] has no value, so none of it can run and `connect` says the
//! feature is missing.

use super::Rendered;
#[cfg(feature = "cluster")]
use super::SyncOptions;
use super::inventory::Node;
#[cfg(feature = "cluster")]
use super::node::{NodeReport, Status};
use super::secrets::{Fetched, Secrets};
use crate::error::Error;
use serde::Serialize;
use std::path::Path;
#[cfg(feature = "cluster")]
use wmrender_contract::ApplyStatus;

/// What the cluster side did, for the report: merged into its top level (`machines`, `pruned`, `cluster`).
#[cfg(feature = "cluster")]
#[derive(Debug, Default, Serialize)]
pub struct ClusterReport {
    /// Windows Machines that are not sync targets (yet): waiting to be provisioned, or refused.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub machines: Vec<crate::lifecycle::machines::Skipped>,
    /// Nodes deconfigured and deleted, or that would be (`--dry-run`), or could not be.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pruned: Vec<crate::lifecycle::prune::Pruned>,
    /// The configured nodes' CSRs approved, CSRs left alone, labels set, nodes that did not join in time.
    #[serde(rename = "cluster", skip_serializing_if = "Option::is_none")]
    pub join: Option<crate::cluster::join::JoinReport>,
    /// Nodes whose taint wmrender took off (configured) or put on (not configured), with why.
    #[serde(skip_serializing_if = "Taints::is_empty")]
    pub taints: Taints,
}

#[cfg(feature = "cluster")]
#[derive(Debug, Default, Serialize)]
pub struct Taints {
    /// Configured now: the taint is off.
    pub untainted: Vec<String>,
    /// Not configured: the taint is on, nothing new is scheduled there (running pods stay).
    pub tainted: Vec<Tainted>,
}

#[cfg(feature = "cluster")]
impl Taints {
    fn is_empty(&self) -> bool {
        self.untainted.is_empty() && self.tainted.is_empty()
    }
}

#[cfg(feature = "cluster")]
#[derive(Debug, Serialize)]
pub struct Tainted {
    pub node: String,
    pub why: String,
}

#[cfg(not(feature = "cluster"))]
#[derive(Debug, Default, Serialize)]
pub struct ClusterReport {}

#[cfg(feature = "cluster")]
pub struct ClusterSide {
    cluster: crate::cluster::Cluster,
    /// The Windows Machines, found once.
    found: crate::lifecycle::machines::Found,
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
    /// The cluster side of a client already connected (the controller's).
    pub fn new(cluster: crate::cluster::Cluster) -> ClusterSide {
        ClusterSide { cluster, found: Default::default() }
    }

    /// The client, for the steps that run beside the nodes' sync (drained upgrades, reboots).
    pub fn cluster(&self) -> &crate::cluster::Cluster {
        &self.cluster
    }

    /// The credentials nodes need (bootstrap kubeconfig, CAs, trusted CA bundle, pull secret; without the
    /// operator the exporter's serving certificate), in memory.
    pub async fn credentials(&self, rendered: &Rendered) -> Result<Fetched, Error> {
        let without_operator = rendered.manifest.mode == Some(wmrender_contract::Mode::WithoutOperator);
        let c = crate::cluster::credentials::fetch(&self.cluster, without_operator).await?;
        Ok(Fetched { files: c.files, pull_secret: c.pull_secret, notes: c.notes })
    }

    /// The instances of the Windows Machines: wmrender's only without the operator (with it, WMCO configures them).
    pub async fn machine_nodes(&mut self, rendered: &Rendered) -> Result<Vec<Node>, Error> {
        if rendered.manifest.mode == Some(wmrender_contract::Mode::WithoutOperator) {
            let machines = crate::cluster::machines::list(&self.cluster).await?;
            self.found = crate::lifecycle::machines::targets(machines);
        }
        Ok(self.found.nodes.clone())
    }

    /// The Azure cloud-node-manager's kubeconfig with a fresh token, when the rendered services wait for it; returns
    /// the token's lifetime when one was minted. A TokenRequest issues a credential: not for `--dry-run`, which keeps
    /// the node's kubeconfig as it is.
    pub async fn mint_tokens(
        &self,
        rendered: &Rendered,
        secrets: &mut Secrets,
        dry_run: bool,
    ) -> Result<Option<std::time::Duration>, Error> {
        use wmrender_contract::paths::{BOOTSTRAP_KUBECONFIG, CLOUD_NODE_MANAGER_KUBECONFIG, CLOUD_NODE_MANAGER_TOKEN};
        let path = wmrender_contract::NodePath::known(CLOUD_NODE_MANAGER_KUBECONFIG);
        let needed = rendered.manifest.mode == Some(wmrender_contract::Mode::WithoutOperator)
            && rendered.services.services.iter().any(|s| s.requires.contains(&path));
        if dry_run || !needed {
            return Ok(None);
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
        Ok(Some(minted.lifetime))
    }

    /// After the nodes were synced: record on each reached node's Node how sync logged in, then let the configured
    /// nodes join (CSRs, labels), within `--csr-timeout`. Returns the names of the nodes that joined.
    pub async fn join(
        &self,
        nodes: &[Node],
        reports: &[NodeReport],
        opts: &SyncOptions,
        report: &mut ClusterReport,
    ) -> Result<Vec<String>, Error> {
        use crate::cluster::{csr, join};
        if opts.dry_run {
            return Ok(vec![]);
        }
        crate::lifecycle::prune::record_logins(&self.cluster, &reached(nodes, reports)).await?;
        // A node waiting for a reboot has no kubelet to ask yet: it joins after the reboot (`--reboot`, or the
        // next sync).
        let expected: Vec<csr::Expected> = reports
            .iter()
            .filter(|r| matches!(r.status, Status::Synced | Status::Unchanged | Status::Pending))
            .filter(|r| !r.reboot_required || r.rebooted)
            .map(|r| csr::Expected {
                name: r.node_name(),
                addresses: [Some(r.address.clone()), r.apply.as_ref().map(|a| a.node_ip.clone())]
                    .into_iter()
                    .flatten()
                    .filter(|a| !a.is_empty())
                    .collect(),
            })
            .collect();
        if expected.is_empty() {
            return Ok(vec![]);
        }
        if let Some(p) = &opts.progress {
            p.note(&format!(
                "waiting up to {}s for the kubelet CSRs of {} node(s)",
                opts.csr_timeout.as_secs(),
                expected.len()
            ));
        }
        let joined = join::run(&self.cluster, &expected, opts.csr_timeout).await?;
        let names = expected.iter().map(|e| e.name.clone()).filter(|n| !joined.timed_out.contains(n)).collect();
        report.join = Some(joined);
        Ok(names)
    }

    /// wmrender's taint after the nodes' sync ([`settle_taints`]).
    pub async fn settle_taints(&self, rendered: &Rendered, reports: &[NodeReport], report: &mut ClusterReport) {
        settle_taints(&self.cluster, rendered, reports, report).await;
    }

    /// `--prune-nodes`: the managed nodes that are no longer targets are deconfigured and their Nodes deleted.
    pub async fn prune(
        &self,
        nodes: &[Node],
        reports: &[NodeReport],
        opts: &SyncOptions,
        connect: &super::ssh::ConnectOptions,
        report: &mut ClusterReport,
    ) -> Result<(), Error> {
        use crate::lifecycle::prune;
        if !opts.prune_nodes {
            return Ok(());
        }
        let targets = targets(nodes, reports);
        let leaving = prune::leaving(&self.cluster, &targets, &self.found.machines).await?;
        let drain = crate::cluster::drain::DrainOptions { force: opts.drain.force, timeout: opts.drain.drain_timeout };
        report.pruned = prune::prune(&self.cluster, &leaving, connect, &drain, opts.dry_run).await;
        Ok(())
    }

    /// The Machines that are not targets, for the report.
    pub fn skipped_machines(&self) -> Vec<crate::lifecycle::machines::Skipped> {
        self.found.skipped.clone()
    }
}

#[cfg(feature = "cluster")]
/// wmrender's taint ([`wmrender_contract::node_status`]), without the operator: off the nodes whose agent
/// converged on the bundle (in this sync, or reported so on its Node), on the nodes whose agent failed (in this
/// sync, or reported so on its Node since). A node still pending keeps what it has.
pub async fn settle_taints(
    cluster: &crate::cluster::Cluster,
    rendered: &Rendered,
    reports: &[NodeReport],
    report: &mut ClusterReport,
) {
    use crate::cluster::nodes;
    if rendered.manifest.mode != Some(wmrender_contract::Mode::WithoutOperator) {
        return;
    }
    for r in reports {
        let name = r.node_name();
        let node = match nodes::get(cluster, &name, std::time::Instant::now() + crate::cluster::API_TIMEOUT).await {
            Ok(Some(n)) => n,
            Ok(None) => continue,
            Err(e) => {
                report.taints.tainted.push(Tainted { node: name, why: format!("could not be read: {e}") });
                continue;
            }
        };
        let agent = nodes::configured(&node);
        let failed_since = agent.as_ref().filter(|c| c.status == "False");
        let verdict = match r.status {
            Status::Synced => Some((false, String::new())),
            Status::Unchanged => match failed_since {
                Some(c) => Some((true, format!("the agent reports {}: {}", c.reason, c.message))),
                None => Some((false, String::new())),
            },
            // The agent's pass failed (not: the node could not be reached, which says nothing of its state).
            Status::Failed if r.apply.as_ref().is_some_and(|a| a.status == ApplyStatus::Failed) => {
                Some((true, r.error.clone().unwrap_or_else(|| "the agent's pass failed".into())))
            }
            _ => None,
        };
        let Some((on, why)) = verdict else { continue };
        if nodes::tainted(&node) == on {
            continue;
        }
        match nodes::set_taint(cluster, &name, on).await {
            Ok(_) if on => report.taints.tainted.push(Tainted { node: name, why }),
            Ok(_) => report.taints.untainted.push(name),
            Err(e) => {
                report.taints.tainted.push(Tainted { node: name, why: format!("the taint could not be changed: {e}") })
            }
        }
    }
}

/// Every target with the Kubernetes name of its node.
#[cfg(feature = "cluster")]
fn targets(nodes: &[Node], reports: &[NodeReport]) -> Vec<crate::lifecycle::prune::Target> {
    nodes
        .iter()
        .zip(reports)
        .map(|(n, r)| crate::lifecycle::prune::Target { node: n.clone(), node_name: r.node_name() })
        .collect()
}

/// The targets sync reached and changed or found right.
#[cfg(feature = "cluster")]
fn reached(nodes: &[Node], reports: &[NodeReport]) -> Vec<crate::lifecycle::prune::Target> {
    let ok = |r: &NodeReport| matches!(r.status, Status::Synced | Status::Unchanged | Status::Pending);
    targets(nodes, reports).into_iter().zip(reports).filter(|(_, r)| ok(r)).map(|(t, _)| t).collect()
}

#[cfg(feature = "cluster")]
impl ClusterReport {
    /// A Machine was refused, a node could not be pruned, a node did not join in time, or a node is left tainted.
    pub fn failed(&self) -> bool {
        use crate::lifecycle::prune::PruneStatus;
        self.machines.iter().any(|m| m.refused)
            || self.pruned.iter().any(|p| p.status == PruneStatus::Failed)
            || self.join.as_ref().is_some_and(|j| !j.timed_out.is_empty())
            || !self.taints.tainted.is_empty()
    }

    /// `--dry-run` found nodes to prune.
    pub fn would_change(&self) -> bool {
        self.pruned.iter().any(|p| p.status == crate::lifecycle::prune::PruneStatus::WouldPrune)
    }

    /// The summary lines (stderr): Machines not synced, CSRs approved or left alone, labels, taints, nodes pruned,
    /// and with `--dry-run` the nodes that would be; with `chatty` false only the errors: nodes that did not join
    /// (with the steps to finish by hand), nodes left tainted, and nodes that could not be pruned.
    pub fn lines(&self, csr_timeout: std::time::Duration, chatty: bool) -> String {
        use crate::lifecycle::prune::PruneStatus;
        use wmrender_contract::node_status::{TAINT_EFFECT, TAINT_KEY};
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
        for n in &self.taints.untainted {
            say(false, format!("configured {n}: taint {TAINT_KEY}:{TAINT_EFFECT} removed\n"));
        }
        for t in &self.taints.tainted {
            say(true, format!("error: {} is not configured, tainted {TAINT_KEY}:{TAINT_EFFECT}: {}\n", t.node, t.why));
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
impl ClusterSide {
    pub async fn credentials(&self, _: &Rendered) -> Result<Fetched, Error> {
        match *self {}
    }
    pub async fn machine_nodes(&mut self, _: &Rendered) -> Result<Vec<Node>, Error> {
        match *self {}
    }
    pub async fn mint_tokens(
        &self,
        _: &Rendered,
        _: &mut Secrets,
        _: bool,
    ) -> Result<Option<std::time::Duration>, Error> {
        match *self {}
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
