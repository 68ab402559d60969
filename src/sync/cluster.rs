//! `sync --kubeconfig`: what a run does with the cluster around the nodes' delivery — the Windows Machines and the
//! login records read before, and after it the graceful reboots (`--reboot`), the join (CSRs, labels), the taint,
//! and the prune of the hosts that left (`--prune-nodes`, within `--max-prune`). Built with the `cluster` feature.

use super::{ClusterReport, SyncOptions, Tainted};
use crate::cluster::Cluster;
use crate::cluster::machines::WindowsMachines;
use crate::delivery::node::{NodeReport, Status};
use crate::delivery::{Permit, Rendered, Session};
use crate::error::Error;
use crate::lifecycle::login::Logins;
use crate::lifecycle::prune::{self, PruneStatus, Pruned};
use crate::lifecycle::targets::{Target, Targets};
use crate::lifecycle::{self, join, taint};
use std::sync::Arc;
use wmrender_contract::Mode;

/// The run's view of the cluster: the client, and the login records (without the operator).
pub struct Side {
    pub cluster: Cluster,
    pub logins: Option<Logins>,
}

impl Side {
    /// Connects (a kubeconfig that does not work stops the sync here, before any node) and reads the records.
    pub async fn connect(kubeconfig: &std::path::Path, without_operator: bool) -> Result<Side, Error> {
        let cluster = Cluster::connect(kubeconfig).await?;
        let logins = if without_operator { Some(Logins::load(&cluster).await?) } else { None };
        Ok(Side { cluster, logins })
    }

    /// The Windows Machines, wmrender's to configure only without the operator (with it, WMCO's).
    pub async fn machines(&self, without_operator: bool) -> Result<Option<WindowsMachines>, Error> {
        if !without_operator {
            return Ok(None);
        }
        Ok(Some(crate::cluster::machines::list(&self.cluster).await?))
    }

    pub fn reported(&self) -> std::collections::BTreeMap<String, String> {
        self.logins.as_ref().map(Logins::reported_node_names).unwrap_or_default()
    }
}

/// `--reboot`: the nodes whose apply asked for a reboot (and did not fail, and were not rebooted already) are
/// rebooted gracefully, in target order, `--max-unavailable` at a time; the reports say which were rebooted, and
/// which failed or were not started.
pub async fn reboot(
    cluster: &Cluster,
    session: &Session,
    targets: &[Target],
    names: &[String],
    reports: &mut [NodeReport],
    opts: &SyncOptions,
) {
    use crate::lifecycle::reboot::{self, Outcome};
    // The Node's name is the one the agent computed: a Machine's instance is not named after its Machine.
    let wanted: Vec<(usize, crate::delivery::inventory::Node)> = targets
        .iter()
        .enumerate()
        .filter(|(i, _)| {
            let r = &reports[*i];
            r.reboot_required && !r.rebooted && r.status != Status::Failed
        })
        .map(|(i, t)| (i, crate::delivery::inventory::Node { name: names[i].clone(), ..t.reach.clone() }))
        .collect();
    let rebooting: Vec<_> = wanted.iter().map(|(_, n)| n.clone()).collect();
    let reboot_opts = reboot::RebootOptions {
        drain: opts.drain.drain(),
        reboot_timeout: opts.drain.reboot_timeout,
        max_unavailable: opts.delivery.max_unavailable,
        connect: session.connect().clone(),
    };
    for ((i, _), done) in wanted.iter().zip(reboot::rollout(cluster, &rebooting, &reboot_opts).await) {
        let r = &mut reports[*i];
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

/// With `--kubeconfig`, after the nodes' delivery: the configured nodes join (CSRs, labels); a node that waited on
/// the cluster (kubelet's certificate) is delivered once more now that it has joined, so its agent finishes at once;
/// then wmrender's taint follows each node's state, and the hosts that left are pruned.
#[allow(clippy::too_many_arguments)]
pub async fn after(
    side: &Arc<Side>,
    session: &Arc<Session>,
    rendered: &Rendered,
    desired: &Targets,
    reports: &mut [NodeReport],
    names: &mut [String],
    opts: &SyncOptions,
    out: &mut ClusterReport,
) -> Result<(), Error> {
    let cluster = &side.cluster;
    // The targets as they stand after their delivery: under the node name their agent gave.
    let joined_as: Vec<Target> =
        desired.targets.iter().zip(names.iter()).map(|(t, n)| Target { node_name: n.clone(), ..t.clone() }).collect();
    if !session.dry_run() {
        // A node waiting for a reboot has no kubelet to ask yet: it joins after the reboot.
        let joining: Vec<&Target> = joined_as
            .iter()
            .zip(reports.iter())
            .filter(|(_, r)| lifecycle::reached(r) && (!r.reboot_required || r.rebooted))
            .map(|(t, _)| t)
            .collect();
        if !joining.is_empty() {
            if let Some(p) = session.progress() {
                p.note(&format!(
                    "waiting up to {}s for the kubelet CSRs of {} node(s)",
                    opts.csr_timeout.as_secs(),
                    joining.len()
                ));
            }
            let joined = join::run(cluster, &joining, opts.csr_timeout).await?;
            for (i, t) in joined_as.iter().enumerate() {
                let r = &reports[i];
                if r.status == Status::Pending
                    && !r.reboot_required
                    && !joined.timed_out.contains(&t.node_name)
                    && joining.iter().any(|j| j.name == t.name)
                {
                    let again =
                        lifecycle::deliver(Some(cluster), side.logins.as_ref(), session, t, Permit::Take, false).await;
                    names[i] = again.node_name;
                    reports[i].merge_later(again.report);
                }
            }
            out.join = Some(joined);
        }
        if rendered.mode() == Some(Mode::WithoutOperator) {
            settle_taints(cluster, session, &joined_as, reports, out).await;
        }
    }
    if opts.prune_nodes {
        prune(side, session, desired, opts, out).await?;
    }
    Ok(())
}

/// wmrender's taint after the nodes' delivery, by the one rule ([`taint::verdict`]).
async fn settle_taints(
    cluster: &Cluster,
    session: &Session,
    targets: &[Target],
    reports: &[NodeReport],
    out: &mut ClusterReport,
) {
    use crate::cluster::{API_TIMEOUT, nodes};
    let desired = session.bundle_digest();
    for (t, r) in targets.iter().zip(reports) {
        let node = match nodes::get(cluster, &t.node_name, std::time::Instant::now() + API_TIMEOUT).await {
            Ok(Some(n)) => n,
            Ok(None) => continue,
            Err(e) => {
                out.taints.failed.push(Tainted { node: t.node_name.clone(), why: format!("could not be read: {e}") });
                continue;
            }
        };
        let verdict = taint::verdict(&node, &desired, &taint::Fresh::of(r), false);
        match taint::apply(cluster, &node, &verdict).await {
            Ok(Some(taint::Change::Tainted(why))) => {
                out.taints.tainted.push(Tainted { node: t.node_name.clone(), why })
            }
            Ok(Some(taint::Change::Untainted)) => out.taints.untainted.push(t.node_name.clone()),
            Ok(None) if matches!(verdict, taint::Verdict::On(_)) && nodes::tainted(&node) => {
                // Still failing: said again, as the run's error.
                if let taint::Verdict::On(why) = verdict {
                    out.taints.tainted.push(Tainted { node: t.node_name.clone(), why });
                }
            }
            Ok(None) => {}
            Err(e) => out
                .taints
                .failed
                .push(Tainted { node: t.node_name.clone(), why: format!("the taint could not be changed: {e}") }),
        }
    }
}

/// `--prune-nodes`: the recorded hosts that left the targets, within the budget.
async fn prune(
    side: &Side,
    session: &Session,
    desired: &Targets,
    opts: &SyncOptions,
    out: &mut ClusterReport,
) -> Result<(), Error> {
    let windows = crate::cluster::nodes::list(&side.cluster, "kubernetes.io/os%3Dwindows").await?;
    let logins = side.logins.as_ref().map(Logins::all).unwrap_or_default();
    let plan = prune::plan(&logins, desired, &windows);
    out.orphans = plan.orphans.clone();
    out.held = plan.held.clone();
    if let Err(why) = prune::budget(plan.leaving.len(), logins.len(), opts.max_prune) {
        out.pruned = plan.leaving.iter().map(|l| Pruned::new(l, PruneStatus::Failed, Some(why.clone()))).collect();
        out.prune_refused = Some(why);
        return Ok(());
    }
    let Some(records) = &side.logins else { return Ok(()) };
    for gone in &plan.gone {
        if !session.dry_run() {
            records.remove(&gone.target).await?;
        }
    }
    for leaving in &plan.leaving {
        out.pruned.push(if session.dry_run() {
            Pruned::new(leaving, PruneStatus::WouldPrune, None)
        } else {
            prune::prune(&side.cluster, records, leaving, session.connect(), &opts.drain.drain()).await
        });
    }
    Ok(())
}
