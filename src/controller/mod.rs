//! `wmrender controller`: the cluster side of `sync --kubeconfig`, run as a reconciler, so that a Windows instance
//! is configured when it appears (a MachineSet scaled, a Machine replaced, a BYOH host added in Git), tainted when
//! its agent fails, and pruned when it leaves — without anyone running `sync`. It applies the same bundle, rendered
//! from Git, through the same per-node step as `sync` ([`crate::sync::Session::sync_node`]).
//!
//! - **One replica acts**: replicas elect a leader through a Lease ([`crate::cluster::lease`]); a replica that loses
//!   it stops acting at once (its steps in flight are cut off; sync's journal lets the next leader finish them).
//! - **Level-triggered**: it watches the Windows Nodes, Machines and CSRs ([`view`]) and, on every change and at
//!   least every `--resync`, judges every instance from that state alone ([`decide`]) and acts ([`reconcile`]).
//!   Its memory only paces it; after a restart it reaches the same decisions.
//! - **What a user sees**: a log line per decision, Events on the Nodes and Machines, metrics and probes on
//!   `--metrics-address` ([`metrics`]), and `--once --dry-run` (`wmrender status`): the fleet, each instance's
//!   bundle applied and desired, its condition, what the controller would do next.

pub mod decide;
pub mod metrics;
pub mod reconcile;
pub mod view;

use crate::cluster::Cluster;
use crate::cluster::lease::{Holder, Lease};
use crate::error::Error;
use crate::sync::{Session, SyncOptions, cluster_side};
use metrics::Metrics;
use reconcile::{Context, Line, Memories};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::Notify;

/// How the controller runs.
pub struct ControllerOptions {
    /// The sync it runs for each instance: the rendered directory, inventory, SSH identity, payload and agent,
    /// `--parallel`, `--max-unavailable`, the drain settings. Its `kubeconfig` is the cluster's (`None`: in a pod).
    pub sync: SyncOptions,
    /// Judge every instance at least this often, and fetch the cluster's credentials again (rotation).
    pub resync: Duration,
    pub metrics_address: Option<SocketAddr>,
    /// The Lease replicas elect their leader through.
    pub lease_namespace: String,
    pub lease_name: String,
    pub lease_duration: Duration,
    /// This replica's identity in the Lease and in Events.
    pub replica: String,
    /// One reconcile, then exit (with `--dry-run`: the fleet as it stands, what would be done; nothing done).
    pub once: bool,
    pub dry_run: bool,
    /// Prune the managed Nodes that are no target's any more.
    pub prune: bool,
}

/// The lines of one reconcile: what `--once` prints.
pub type Fleet = Vec<Line>;

async fn connect(kubeconfig: Option<&std::path::Path>) -> Result<Cluster, Error> {
    Ok(match kubeconfig {
        Some(path) => Cluster::connect(path).await?,
        None => Cluster::in_cluster()?,
    })
}

/// Runs the controller until it is stopped (SIGTERM or SIGINT: it lets the Lease go), or for one reconcile with
/// `once`.
pub async fn run(opts: ControllerOptions) -> Result<Fleet, Error> {
    let cluster = connect(opts.sync.kubeconfig.as_deref()).await?;
    let metrics = Arc::new(Metrics::default());
    if let Some(addr) = opts.metrics_address {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| Error::io(format!("listening on --metrics-address {addr}"), e))?;
        tokio::spawn(metrics::serve(listener, metrics.clone()));
    }
    let changed = Arc::new(Notify::new());
    let failed_metrics = metrics.clone();
    let failed: Arc<dyn Fn(String) + Send + Sync> = Arc::new(move |e| {
        failed_metrics.step("watch", false);
        reconcile::log("-", "watch failed (resumed after a back-off)", &e);
    });
    let (view, watches) = view::View::start(&cluster, changed.clone(), failed);
    let _watches = AbortOnDrop(watches);
    view.ready().await;
    metrics.set_ready();

    if opts.once {
        let mut memories = Memories::default();
        let prepared = prepare(&opts, &cluster).await?;
        return Ok(reconcile_once(&opts, &cluster, &view, &prepared, &metrics, &mut memories).await);
    }

    let lease = Lease {
        namespace: opts.lease_namespace.clone(),
        name: opts.lease_name.clone(),
        identity: opts.replica.clone(),
        duration: opts.lease_duration,
    };
    let leader = Arc::new(AtomicBool::new(false));
    let lost = Arc::new(Notify::new());
    let elected = Arc::new(Notify::new());
    let mut election = AbortOnDrop(vec![tokio::spawn(elect(
        cluster.clone(),
        lease.clone(),
        leader.clone(),
        lost.clone(),
        elected.clone(),
        metrics.clone(),
    ))]);
    let stop = stop_signal();
    tokio::pin!(stop);
    let mut memories = Memories::default();
    loop {
        // A follower waits to be elected.
        while !leader.load(Ordering::SeqCst) {
            tokio::select! {
                _ = elected.notified() => {}
                _ = &mut stop => return finish(&cluster, &lease, &mut election).await,
            }
        }
        reconcile::log(
            "-",
            "leading",
            &format!("{} holds the Lease {}/{}", lease.identity, lease.namespace, lease.name),
        );
        let prepared = match prepare(&opts, &cluster).await {
            Ok(p) => p,
            Err(e) => {
                reconcile::log("-", "cannot prepare the bundle", &e.to_string());
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(30)) => continue,
                    _ = &mut stop => return finish(&cluster, &lease, &mut election).await,
                }
            }
        };
        let resync_at = tokio::time::Instant::now() + opts.resync;
        // Reconcile on every change, at least every --resync, until the Lease is lost or the session is due anew.
        loop {
            let pass = reconcile_once(&opts, &cluster, &view, &prepared, &metrics, &mut memories);
            tokio::select! {
                _ = pass => {}
                _ = lost.notified() => {
                    reconcile::log("-", "following", "the Lease was lost: every step in flight is cut off");
                    break;
                }
                _ = &mut stop => return finish(&cluster, &lease, &mut election).await,
            }
            if !leader.load(Ordering::SeqCst) || rendered_changed(&opts, &prepared) {
                break;
            }
            // Wait for a change in the cluster, the render, the Lease, or the resync.
            let next = loop {
                tokio::select! {
                    _ = changed.notified() => {
                        // Let a burst of changes settle into one reconcile.
                        tokio::time::sleep(Duration::from_millis(500)).await;
                        break Wake::Reconcile;
                    }
                    _ = tokio::time::sleep_until(resync_at) => break Wake::Prepare,
                    _ = tokio::time::sleep(RENDER_CHECK) => {
                        if rendered_changed(&opts, &prepared) {
                            break Wake::Prepare;
                        }
                    }
                    _ = lost.notified() => break Wake::Prepare,
                    _ = &mut stop => return finish(&cluster, &lease, &mut election).await,
                }
            };
            if next == Wake::Prepare {
                break;
            }
        }
    }
}

/// How often the rendered directory is looked at for a new render.
const RENDER_CHECK: Duration = Duration::from_secs(5);

/// What ends a wait of the reconcile loop.
#[derive(PartialEq, Eq)]
enum Wake {
    /// Something in the cluster changed: reconcile.
    Reconcile,
    /// The resync is due, the render changed or the Lease went: prepare the session anew (or follow).
    Prepare,
}

/// Whether the rendered directory holds another render than the one prepared (Git moved on): then the session is
/// prepared anew at once, not at the next resync.
fn rendered_changed(opts: &ControllerOptions, prepared: &Prepared) -> bool {
    let path = opts.sync.rendered.join("manifest.json");
    let now: Option<wmrender_contract::BundleManifest> =
        std::fs::read(&path).ok().and_then(|b| serde_json::from_slice(&b).ok());
    now.is_some_and(|m| m != prepared.rendered.manifest)
}

/// What one resync prepares: the rendered bundle, the cluster's credentials, the Session, the platform.
struct Prepared {
    rendered: crate::sync::Rendered,
    session: Arc<Session>,
    platform: String,
}

async fn prepare(opts: &ControllerOptions, cluster: &Cluster) -> Result<Prepared, Error> {
    let rendered = crate::sync::read_rendered(&opts.sync.rendered)?;
    let side = cluster_side::ClusterSide::new(cluster.clone());
    let mut sync = opts.sync.clone();
    sync.dry_run = opts.dry_run;
    sync.secrets.fetched = side.credentials(&rendered).await?;
    let platform = crate::cluster::machines::list(cluster).await?.platform;
    let session = Arc::new(Session::prepare(sync, &rendered, Some(&side)).await?);
    Ok(Prepared { rendered, session, platform })
}

async fn reconcile_once(
    opts: &ControllerOptions,
    cluster: &Cluster,
    view: &view::View,
    prepared: &Prepared,
    metrics: &Metrics,
    memories: &mut Memories,
) -> Fleet {
    let ctx = Context {
        cluster,
        view,
        rendered: &prepared.rendered,
        session: &prepared.session,
        platform: &prepared.platform,
        metrics,
        replica: &opts.replica,
        prune: opts.prune,
        dry_run: opts.dry_run,
    };
    reconcile::reconcile(&ctx, memories).await
}

/// The election: renews (or takes) the Lease every third of its term; says when this replica becomes leader and
/// when it stops being one (a failed renewal counts as lost once the term may have run out).
async fn elect(
    cluster: Cluster,
    lease: Lease,
    leader: Arc<AtomicBool>,
    lost: Arc<Notify>,
    elected: Arc<Notify>,
    metrics: Arc<Metrics>,
) {
    let mut last_held = None::<tokio::time::Instant>;
    loop {
        let held = match lease.acquire_or_renew(&cluster).await {
            Ok(Holder::Me) => true,
            Ok(Holder::Other { .. }) => false,
            Err(e) => {
                reconcile::log("-", "the Lease could not be renewed", &e.to_string());
                // Still ours until the term could have run out on the API server's side.
                last_held.is_some_and(|t| t.elapsed() < lease.duration - lease.renew_every())
            }
        };
        if held {
            last_held = Some(tokio::time::Instant::now());
        }
        let was = leader.swap(held, Ordering::SeqCst);
        metrics.set_leader(held);
        if held && !was {
            elected.notify_one();
        }
        if !held && was {
            lost.notify_one();
        }
        tokio::time::sleep(lease.renew_every()).await;
    }
}

/// A clean stop: the Lease goes at once, so the next replica need not wait for the term. The election is stopped
/// first: left running, its next renewal could land between the release's read and write (the release refused
/// with a conflict) or just after it (the freed Lease taken again by this stopping replica).
async fn finish(cluster: &Cluster, lease: &Lease, election: &mut AbortOnDrop) -> Result<Fleet, Error> {
    election.stop().await;
    match lease.release(cluster).await {
        Ok(()) => reconcile::log("-", "stopped", "the Lease is released"),
        Err(e) => reconcile::log("-", "stopped; the Lease could not be released (it runs out)", &e.to_string()),
    }
    Ok(vec![])
}

async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => std::future::pending().await,
    }
}

/// Tasks that end with their owner.
struct AbortOnDrop(Vec<tokio::task::JoinHandle<()>>);

impl AbortOnDrop {
    /// Aborts the tasks and waits until they have ended, so none of them writes anything afterwards.
    async fn stop(&mut self) {
        for t in self.0.drain(..) {
            t.abort();
            let _ = t.await;
        }
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

/// This replica's default identity: the pod's name in a Deployment (`POD_NAME`, from the downward API), else the
/// host's name and the process id.
pub fn default_replica() -> String {
    if let Ok(pod) = std::env::var("POD_NAME")
        && !pod.is_empty()
    {
        return pod;
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    format!("{}-{}", host.trim(), std::process::id())
}

/// Where the controller's bundle comes from when it runs in a pod (the rendered directory mounted there).
pub fn default_rendered() -> PathBuf {
    PathBuf::from("/etc/wmrender/rendered")
}

/// The fleet as a table (stderr): one line per instance, what the controller does (or would do) next and why.
pub fn table(fleet: &[Line]) -> String {
    let short =
        |d: &str| -> String { d.strip_prefix("sha256:").map(|h| h.chars().take(12).collect()).unwrap_or_default() };
    let mut out = format!(
        "{:<28} {:<32} {:<13} {:<13} {:<10} {:<8} {:<8} WHY\n",
        "TARGET", "NODE", "APPLIED", "DESIRED", "CONFIGURED", "TAINTED", "NEXT"
    );
    for l in fleet {
        let target = if l.target.is_empty() { "-" } else { &l.target };
        out.push_str(&format!(
            "{:<28} {:<32} {:<13} {:<13} {:<10} {:<8} {:<8} {}\n",
            reconcile::one_line(target),
            reconcile::one_line(l.node.as_deref().unwrap_or("-")),
            short(&l.applied),
            short(&l.desired),
            if l.configured.is_empty() { "-" } else { &l.configured },
            l.tainted,
            l.next,
            reconcile::one_line(&l.why)
        ));
    }
    out
}
