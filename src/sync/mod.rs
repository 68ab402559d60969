//! `wmrender sync`: the node lifecycle ([`crate::lifecycle`]) run once over every target: the desired state read
//! whole, each target delivered `--parallel` at a time in its order (stopping after a failure unless
//! `--keep-going`), then, with `--kubeconfig`, the nodes join, the taint follows each node's state, and the hosts
//! that left are pruned (`--prune-nodes`, within `--max-prune`). Secrets enter at delivery and only there.

#[cfg(feature = "cluster")]
mod cluster;
pub mod report;

use crate::delivery::node::{NodeReport, Status};
use crate::delivery::secrets::SecretFiles;
use crate::delivery::{DeliveryOptions, Permit, Rendered, Session};
use crate::error::Error;
use crate::lifecycle;
use crate::lifecycle::guard::DrainSettings;
use crate::lifecycle::prune::MaxPrune;
use crate::lifecycle::targets::{self, DesiredError, Target, Targets};
#[cfg(feature = "cluster")]
use cluster::Side;
pub use report::{ClusterReport, SyncReport, Tainted, table};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::Semaphore;
use wmrender_contract::Mode;

/// What `sync` is asked to do: the delivery below it, and what happens around it.
#[derive(Clone)]
pub struct SyncOptions {
    pub rendered: PathBuf,
    pub inventory: Option<PathBuf>,
    pub delivery: DeliveryOptions,
    /// The secret files given on the command line.
    pub secrets: SecretFiles,
    pub parallel: usize,
    pub keep_going: bool,
    /// `--kubeconfig`: the cluster sync fetches credentials from, finds Machines in, and lets nodes join.
    pub kubeconfig: Option<PathBuf>,
    /// `--csr-timeout`: how long to wait for each configured node's kubelet CSRs and Node.
    pub csr_timeout: Duration,
    /// `--prune-nodes`: deconfigure the recorded hosts that left the targets and delete their Nodes.
    pub prune_nodes: bool,
    pub max_prune: MaxPrune,
    /// `--reboot`: reboot gracefully the nodes whose apply asks for it.
    pub reboot: bool,
    pub allow_undrained_upgrade: bool,
    pub drain: DrainSettings,
}

/// A desired state that could not be read, as the command line says it: the inventory's and the rendered
/// ConfigMap's problems with their file and line (exit 2), the rendered directory (exit 2), the cluster (exit 3).
pub fn desired_error(e: DesiredError) -> Error {
    match e {
        DesiredError::Invalid(diags) => Error::Invalid(diags),
        DesiredError::Rendered(why) | DesiredError::Conflict(why) => Error::Usage(why),
        DesiredError::Cluster(why) => Error::Operational(why),
    }
}

/// Without the `cluster` feature no run has a cluster side.
#[cfg(not(feature = "cluster"))]
enum Side {}

#[cfg(not(feature = "cluster"))]
impl Side {
    fn parts(&self) -> (Option<&crate::cluster::Cluster>, Option<&crate::lifecycle::login::Logins>) {
        match *self {}
    }
}

#[cfg(feature = "cluster")]
impl Side {
    fn parts(&self) -> (Option<&crate::cluster::Cluster>, Option<&crate::lifecycle::login::Logins>) {
        (Some(&self.cluster), self.logins.as_ref())
    }
}

#[cfg_attr(not(feature = "cluster"), allow(unused_mut, unused_variables))]
pub async fn run(opts: SyncOptions) -> Result<SyncReport, Error> {
    let needs_cluster = [
        (
            opts.prune_nodes,
            "--prune-nodes needs --kubeconfig: the login records in the cluster say which hosts sync configured and how to reach them",
        ),
        (opts.reboot, "sync --reboot needs --kubeconfig: the reboots cordon and drain through the cluster"),
    ];
    if let Some((_, why)) = needs_cluster.iter().find(|(asked, _)| *asked && opts.kubeconfig.is_none()) {
        return Err(Error::Usage(why.to_string()));
    }
    if opts.parallel == 0 || opts.delivery.max_unavailable == 0 {
        return Err(Error::Usage("--parallel and --max-unavailable must be at least 1".into()));
    }
    let rendered = crate::delivery::read_rendered(&opts.rendered)?;
    let without_operator = rendered.mode() == Some(Mode::WithoutOperator);
    // A kubeconfig that does not work stops the sync here, before any node.
    let side: Option<Side> = match &opts.kubeconfig {
        None => None,
        #[cfg(feature = "cluster")]
        Some(path) => Some(Side::connect(path, without_operator).await?),
        #[cfg(not(feature = "cluster"))]
        Some(_) => return Err(crate::cluster::ClusterError::NotBuilt("sync --kubeconfig").into()),
    };
    #[cfg(feature = "cluster")]
    let (machines, reported) = match &side {
        Some(s) => (s.machines(without_operator).await?, s.reported()),
        None => (None, Default::default()),
    };
    #[cfg(not(feature = "cluster"))]
    let (machines, reported) = (None, Default::default());
    let desired = targets::read(&targets::Sources {
        rendered: &rendered,
        inventory: opts.inventory.as_deref(),
        machines: machines.as_ref(),
        reported: &reported,
    })
    .map_err(desired_error)?;
    if desired.targets.is_empty() && !(opts.prune_nodes && desired.refused.is_empty()) {
        return Err(nothing_to_sync(&opts, &rendered, &desired));
    }
    let (session, notes) = lifecycle::session(
        &opts.delivery,
        opts.secrets.clone(),
        &rendered,
        side.as_ref().and_then(|s| s.parts().0),
        opts.drain.clone(),
        opts.allow_undrained_upgrade,
        None,
    )
    .await?;
    let session = Arc::new(session);
    if let Some(p) = session.progress() {
        for note in notes {
            p.note(&format!("note: {note}"));
        }
        p.planned(&desired.targets.iter().map(|t| t.reach.clone()).collect::<Vec<_>>());
    }
    let side = side.map(Arc::new);
    let (mut reports, mut names) = rollout(&session, side.clone(), &desired.targets, &opts).await?;
    let mut out = ClusterReport { refused: desired.refused.clone(), ..Default::default() };
    #[cfg(feature = "cluster")]
    if let Some(side) = &side {
        if opts.reboot && !session.dry_run() {
            cluster::reboot(&side.cluster, &session, &desired.targets, &names, &mut reports, &opts).await;
        }
        cluster::after(side, &session, &rendered, &desired, &mut reports, &mut names, &opts, &mut out).await?;
    }
    #[cfg(not(feature = "cluster"))]
    let _ = (&mut names, &rendered);
    Ok(SyncReport { nodes: reports, cluster: out })
}

/// No target: named by the files that were asked, so the user knows which one to fill.
fn nothing_to_sync(opts: &SyncOptions, rendered: &Rendered, desired: &Targets) -> Error {
    let listed = match &opts.inventory {
        Some(path) => format!(
            "the inventory {} leaves none (an entry with `reachOnly: true` only says how to reach a host the render or the cluster names)",
            path.display()
        ),
        None => "no --inventory lists any".to_string(),
    };
    let refused = if desired.refused.is_empty() {
        String::new()
    } else {
        let names: Vec<&str> = desired.refused.iter().map(|r| r.target.as_str()).collect();
        format!("; not contacted: {} (see why with --dry-run)", names.join(", "))
    };
    let byoh = if rendered.mode() == Some(Mode::WithOperator) {
        format!("WMCO manages the BYOH hosts of the render ({} says so)", rendered.dir.join("manifest.json").display())
    } else {
        format!("the render {} has no BYOH hosts", rendered.dir.display())
    };
    Error::Usage(format!("no nodes to sync: {byoh} and {listed}{refused}"))
}

/// Delivers every target, `--parallel` at a time in their order; after a failure (without `--keep-going`) the
/// targets not started yet are skipped. The reports (and each target's node name after it) are in target order.
async fn rollout(
    session: &Arc<Session>,
    side: Option<Arc<Side>>,
    targets: &[Target],
    opts: &SyncOptions,
) -> Result<(Vec<NodeReport>, Vec<String>), Error> {
    let connections = Arc::new(Semaphore::new(opts.parallel.max(1)));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = tokio::task::JoinSet::new();
    let mut done: Vec<(usize, NodeReport, String)> = Vec::new();
    for (i, target) in targets.iter().cloned().enumerate() {
        // Slots are taken here, in order, so a node starts only after the ones before it did, and none starts after
        // a failure (without --keep-going).
        let slot = connections.clone().acquire_owned().await.map_err(|e| Error::Operational(e.to_string()))?;
        if stop.load(Ordering::SeqCst) && !opts.keep_going {
            let report = NodeReport::new(&target.reach, Status::Skipped);
            if let Some(p) = session.progress() {
                p.finished(&report);
            }
            done.push((i, report, target.node_name.clone()));
            continue;
        }
        let (stop, session, side) = (stop.clone(), session.clone(), side.clone());
        tasks.spawn(async move {
            let _slot = slot;
            let (cluster, logins) = side.as_ref().map(|s| s.parts()).unwrap_or_default();
            let d = lifecycle::deliver(cluster, logins, &session, &target, Permit::Take, true).await;
            if d.report.status == Status::Failed {
                stop.store(true, Ordering::SeqCst);
            }
            (i, d.report, d.node_name)
        });
    }
    while let Some(finished) = tasks.join_next().await {
        done.push(finished.map_err(|e| Error::Operational(format!("a sync task failed: {e}")))?);
    }
    done.sort_by_key(|(i, _, _)| *i);
    Ok(done.into_iter().map(|(_, r, n)| (r, n)).unzip())
}
