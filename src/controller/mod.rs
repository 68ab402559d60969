//! `wmrender controller`: the node lifecycle ([`crate::lifecycle`]) run as a reconciler, so that a Windows host is
//! configured when it appears (a MachineSet scaled, a Machine replaced, a BYOH host added in Git), tainted when its
//! agent fails, and pruned when it leaves — without anyone running `sync`. It delivers the same bundle, rendered
//! from Git, through the same steps as `sync`.
//!
//! - **One replica acts**: replicas elect a leader through a Lease ([`crate::cluster::lease`]); a replica that loses
//!   it stops acting at once (its steps in flight are cut off; delivery's journal lets the next leader finish them).
//! - **Level-triggered**: it watches the Windows Nodes, Machines and CSRs ([`view`]) and, on every change and at
//!   least every `--resync`, decides for every host from that state alone ([`decide`], pure) and acts
//!   ([`reconcile`]). Its memory only paces it; after a restart it reaches the same decisions.
//! - **Acts only on what it could read**: the desired state is read whole or the pass does nothing but say why.
//! - **No target waits for another**: each target's step is a task of its own ([`queue`]).
//! - **What a user sees**: a log line per decision, Events, metrics and probes on `--metrics-address`
//!   ([`metrics`]), and `wmrender status` (`--once --dry-run`): the fleet, each host's bundle applied and desired, its
//!   condition, what the controller would do next and why.

pub mod decide;
pub mod metrics;
pub mod queue;
pub mod reconcile;
pub mod tls;
pub mod view;

use crate::cluster::Cluster;
use crate::cluster::lease::{Holder, Lease};
use crate::delivery::DeliveryOptions;
use crate::delivery::ssh::HostKeyBook;
use crate::error::Error;
use crate::lifecycle::guard::DrainSettings;
use crate::lifecycle::login::Logins;
use crate::lifecycle::prune::MaxPrune;
pub use decide::{Action, Line};
use metrics::Metrics;
use reconcile::{Context, Leading, Prepared};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::Notify;
use wmrender_contract::Mode;

/// How the controller runs.
pub struct ControllerOptions {
    /// The rendered directory (in a pod, the bundle ConfigMaps' projected volume).
    pub rendered: PathBuf,
    pub inventory: Option<PathBuf>,
    /// Node access, the payload and agent, `--max-unavailable`; `dry_run` for `--dry-run` and `status`.
    pub delivery: DeliveryOptions,
    /// `--parallel`: syncs at once.
    pub parallel: usize,
    pub drain: DrainSettings,
    /// The cluster's kubeconfig (`None`: in a pod, its ServiceAccount).
    pub kubeconfig: Option<PathBuf>,
    /// Decide for every host at least this often, and fetch the cluster's credentials again (rotation).
    pub resync: Duration,
    pub metrics_address: Option<SocketAddr>,
    /// The serving certificate and key (PEM) the metrics are served over HTTPS with; `None`: plain HTTP.
    pub metrics_tls: Option<(PathBuf, PathBuf)>,
    /// The Lease replicas elect their leader through.
    pub lease_namespace: String,
    pub lease_name: String,
    pub lease_duration: Duration,
    /// This replica's identity in the Lease and in Events.
    pub replica: String,
    /// One reconcile, then exit (with `--dry-run`, `delivery.dry_run`: the fleet as it stands, what would be done;
    /// nothing done).
    pub once: bool,
    /// Prune the hosts that left, within this budget (`None`: `--no-prune`).
    pub prune: Option<MaxPrune>,
    /// `--pull-from`: the repository the rendered bundle is published to (`registry/repository`); nodes pull it.
    pub pull_from: Option<String>,
    /// `--pull-payload-from`: the repository the payload (`--payload`) is published to; nodes pull it.
    pub pull_payload_from: Option<String>,
}

/// Checks `--pull-from` or `--pull-payload-from` (`flag`): a repository without a tag or digest.
pub fn pull_from(flag: &str, text: &str) -> Result<String, String> {
    wmrender_contract::bundle_artifact::parse_repository(text).map_err(|why| format!("{flag} {why}"))
}

/// The rendered bundle as `wmrender publish --rendered` names it in `repository`: the digest of its artifact's
/// manifest, computed from the files' digests without publishing.
pub fn published_reference(rendered: &crate::delivery::Rendered, repository: &str) -> String {
    use wmrender_contract::bundle_artifact::{self, Entry, Kind};
    let entries: Vec<Entry> = rendered
        .manifest
        .files
        .iter()
        .filter_map(|e| {
            let path = e.path.strip_prefix("node/")?;
            Some(Entry { path: path.to_string(), sha256: e.sha256.clone(), size: e.size })
        })
        .collect();
    let manifest = bundle_artifact::manifest(Kind::NodeBundle, &entries);
    format!("{repository}@sha256:{}", wmrender_contract::sha256_hex(&manifest))
}

/// The payload directory `dir` as `wmrender publish --payload` names it in `repository`: the digest of its
/// artifact's manifest, from the same entries publish reads (refused as publish refuses it: no payload.json, files
/// that differ from it, a file nodes refuse to pull).
pub fn published_payload_reference(dir: &std::path::Path, repository: &str) -> Result<String, Error> {
    use wmrender_contract::bundle_artifact::{self, Kind};
    let entries = crate::publish::read::payload_entries(dir)?;
    let manifest = bundle_artifact::manifest(Kind::Payload, &entries);
    Ok(format!("{repository}@sha256:{}", wmrender_contract::sha256_hex(&manifest)))
}

/// The lines of one reconcile: what `--once` prints.
pub type Fleet = Vec<Line>;

async fn connect(kubeconfig: Option<&std::path::Path>) -> Result<Cluster, Error> {
    Ok(match kubeconfig {
        Some(path) => Cluster::connect(path).await?,
        None => Cluster::in_cluster()?,
    })
}

/// The metrics endpoint's TLS: the cluster's profile and the certificate, loaded now (neither readable: the
/// controller does not start, rather than serve weaker or not at all) and again every [`tls::RELOAD`]. A profile
/// that cannot be read later keeps the one served; each change is logged.
async fn serve_tls(cluster: &Cluster, cert: &std::path::Path, key: &std::path::Path) -> Result<Arc<tls::Tls>, Error> {
    let profile = crate::cluster::tls_profile::fetch(cluster).await?;
    let (tls, what) = tls::Tls::load(cert.to_path_buf(), key.to_path_buf(), &profile)
        .await
        .map_err(|why| Error::Operational(format!("the metrics endpoint's TLS: {why}")))?;
    reconcile::log("-", "metrics served over HTTPS with", &what);
    let tls = Arc::new(tls);
    let (cluster, reloading) = (cluster.clone(), tls.clone());
    tokio::spawn(async move {
        // The last failure said, so that one that lasts is said once.
        let mut said: Option<String> = None;
        loop {
            tokio::time::sleep(tls::RELOAD).await;
            let outcome = match crate::cluster::tls_profile::fetch(&cluster).await {
                Ok(profile) => reloading.reload(&profile).await,
                Err(e) => Err(e.to_string()),
            };
            match &outcome {
                Ok(Some(what)) => reconcile::log("-", "metrics now served over HTTPS with", what),
                Ok(None) => {}
                Err(why) if said.as_ref() != Some(why) => {
                    reconcile::log("-", "metrics TLS not reloaded (the last one loaded is served)", why)
                }
                Err(_) => {}
            }
            said = outcome.err();
        }
    });
    Ok(tls)
}

/// Runs the controller until it is stopped (SIGTERM or SIGINT: it lets the Lease go), or for one reconcile with
/// `once`.
pub async fn run(opts: ControllerOptions) -> Result<Fleet, Error> {
    let cluster = connect(opts.kubeconfig.as_deref()).await?;
    let metrics = Arc::new(Metrics::default());
    if let Some(addr) = opts.metrics_address {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| Error::io(format!("listening on --metrics-address {addr}"), e))?;
        let tls = match &opts.metrics_tls {
            Some((cert, key)) => Some(serve_tls(&cluster, cert, key).await?),
            None => None,
        };
        tokio::spawn(metrics::serve(listener, metrics.clone(), tls));
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
    let ctx = Context { opts: &opts, cluster: &cluster, view: &view, metrics: &metrics };

    if opts.once {
        let mut leading = Leading::new(&opts, prepare(&opts, &cluster).await);
        return Ok(leading.pass(&ctx).await);
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
        let mut inputs = Inputs::read(&opts);
        let mut leading = Leading::new(&opts, prepare(&opts, &cluster).await);
        let mut resync_at = tokio::time::Instant::now() + opts.resync;
        // A tick of its own, so that a busy cluster (a change every second) never keeps the inputs from being looked at.
        let mut inputs_check = tokio::time::interval(INPUTS_CHECK);
        inputs_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Reconcile on every change, every finished step, at least every --resync, until the Lease is lost.
        loop {
            let pass = leading.pass(&ctx);
            tokio::select! {
                _ = pass => {}
                _ = lost.notified() => {
                    leading.queue.abort_all();
                    reconcile::log("-", "following", "the Lease was lost: every step in flight is cut off");
                    break;
                }
                _ = &mut stop => return finish(&cluster, &lease, &mut election).await,
            }
            if !leader.load(Ordering::SeqCst) {
                leading.queue.abort_all();
                break;
            }
            // Wait for a change in the cluster, a finished step, the inputs, the Lease, or the resync.
            let prepare_again = loop {
                tokio::select! {
                    _ = changed.notified() => {
                        // Let a burst of changes settle into one reconcile.
                        tokio::time::sleep(Duration::from_millis(500)).await;
                        break false;
                    }
                    (_, done) = leading.queue.finished() => {
                        leading.finished(&ctx, done).await;
                        break false;
                    }
                    _ = tokio::time::sleep_until(resync_at) => break true,
                    _ = inputs_check.tick() => {
                        let now = Inputs::read(&opts);
                        // A render that changed, or one that could not be prepared, is prepared again; an inventory
                        // that changed is read by the next pass; while the state cannot be read, every check is one.
                        let blocked = leading.prepared.is_err() || metrics.ready().is_err();
                        if now.manifest != inputs.manifest || leading.prepared.is_err() {
                            inputs = now;
                            break true;
                        }
                        if now != inputs || blocked {
                            inputs = now;
                            break false;
                        }
                    }
                    _ = lost.notified() => {
                        leading.queue.abort_all();
                        break true;
                    }
                    _ = &mut stop => return finish(&cluster, &lease, &mut election).await,
                }
            };
            if !leader.load(Ordering::SeqCst) {
                leading.queue.abort_all();
                break;
            }
            if prepare_again {
                // Steps in flight go on with the session they started with.
                leading.prepared = prepare(&opts, &cluster).await;
                resync_at = tokio::time::Instant::now() + opts.resync;
            }
        }
    }
}

/// How often the rendered directory and the inventory are looked at for a change.
const INPUTS_CHECK: Duration = Duration::from_secs(2);

/// The inputs' files as last looked at: a changed one is read again at once, not at the next resync.
#[derive(PartialEq, Eq)]
struct Inputs {
    manifest: Option<Vec<u8>>,
    inventory: Option<Vec<u8>>,
}

impl ControllerOptions {
    /// Decide and report, change nothing (`--dry-run`, `wmrender status`).
    pub fn dry_run(&self) -> bool {
        self.delivery.dry_run
    }
}

impl Inputs {
    fn read(opts: &ControllerOptions) -> Inputs {
        Inputs {
            manifest: std::fs::read(opts.rendered.join("manifest.json")).ok(),
            inventory: opts.inventory.as_ref().and_then(|p| std::fs::read(p).ok()),
        }
    }
}

/// What one resync prepares, or why it could not (a render that does not verify, credentials or records the
/// cluster did not give): then every pass says so and does nothing.
async fn prepare(opts: &ControllerOptions, cluster: &Cluster) -> Result<Prepared, String> {
    let rendered = crate::delivery::read_rendered(&opts.rendered).map_err(|e| e.to_string())?;
    if rendered.mode() != Some(Mode::WithoutOperator) {
        return Err(format!(
            "{} installs WMCO, which configures the nodes: the controller runs only without the operator",
            opts.rendered.display()
        ));
    }
    let platform =
        crate::cluster::machines::list(cluster).await.map_err(|e| format!("the Windows Machines: {e}"))?.platform;
    let logins = Logins::load(cluster).await.map_err(|e| format!("the login records: {e}"))?;
    for name in &logins.unreadable {
        reconcile::log(name, "login record set aside", "it is not a record wmrender wrote");
    }
    // The host keys of every recorded host: verified, not trusted anew, after a restart or a move.
    let book = Arc::new(HostKeyBook::default());
    for l in logins.all() {
        book.set(&l.address, l.port, l.host_keys.clone());
    }
    let (session, notes) = crate::lifecycle::session(
        &opts.delivery,
        Default::default(),
        &rendered,
        Some(cluster),
        opts.drain.clone(),
        false,
        Some(book),
    )
    .await
    .map_err(|e| e.to_string())?;
    let pull = opts.pull_from.as_deref().map(|repository| published_reference(&rendered, repository));
    // The payload the session delivers at first contact, named as published: read again at each resync, as the
    // session reads it.
    let pull_payload = match (&opts.pull_payload_from, &opts.delivery.payload) {
        (Some(repository), Some(dir)) => {
            Some(published_payload_reference(dir, repository).map_err(|e| format!("--pull-payload-from: {e}"))?)
        }
        _ => None,
    };
    Ok(Prepared { notes, rendered, session: Arc::new(session), platform, logins: Arc::new(logins), pull, pull_payload })
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

/// The fleet as a table (stderr): one line per host, what the controller does (or would do) next and why.
pub fn table(fleet: &[Line]) -> String {
    let short =
        |d: &str| -> String { d.strip_prefix("sha256:").map(|h| h.chars().take(12).collect()).unwrap_or_default() };
    let mut out = format!(
        "{:<28} {:<32} {:<13} {:<13} {:<10} {:<8} {:<11} WHY\n",
        "TARGET", "NODE", "APPLIED", "DESIRED", "CONFIGURED", "TAINTED", "NEXT"
    );
    for l in fleet {
        let target = if l.target.is_empty() { "-" } else { &l.target };
        out.push_str(&format!(
            "{:<28} {:<32} {:<13} {:<13} {:<10} {:<8} {:<11} {}\n",
            reconcile::one_line(target),
            reconcile::one_line(l.node.as_deref().unwrap_or("-")),
            short(&l.applied),
            short(&l.desired),
            if l.configured.is_empty() { "-" } else { &l.configured },
            l.tainted,
            l.next.to_string(),
            reconcile::one_line(&l.why)
        ));
    }
    out
}
