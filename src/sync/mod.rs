//! Stage 5b: `wmrender sync` pushes the rendered node bundle to Windows nodes over SSH and applies it.
//!
//! inventory (which nodes) → plan (what each should hold) → rollout (how many at once) → node (one node's
//! protocol over ssh) → report. Secrets enter here and only here, from files, into the bytes pushed.

pub mod cluster_side;
pub mod error;
pub mod inventory;
pub mod node;
pub mod plan;
pub mod profile;
pub mod secrets;
pub mod ssh;
pub mod upgrade;

use crate::error::Error;
use inventory::Node;
use node::{Job, NodeReport, Status};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::Semaphore;
use wmrender_contract::{BundleManifest, Mode, NodePath, ServicesFile};

/// Told what happens, for the progress display: the nodes once known, then each node as it starts and finishes.
pub trait Progress: Send + Sync {
    fn planned(&self, nodes: &[Node]);
    fn started(&self, node: &Node);
    fn finished(&self, report: &NodeReport);
    /// A line about the run as a whole (e.g. that sync now waits for the cluster).
    fn note(&self, _line: &str) {}
}

#[derive(Clone)]
pub struct SyncOptions {
    pub rendered: PathBuf,
    pub inventory: Option<PathBuf>,
    pub identity: PathBuf,
    pub known_hosts: PathBuf,
    pub accept_new: bool,
    pub payload: Option<PathBuf>,
    /// The agent executable (`wmrender-node.exe`), delivered to `C:\k\wmrender\wmrender-node.exe`.
    pub agent: Option<PathBuf>,
    pub secrets: secrets::SecretFiles,
    pub prune_payload: bool,
    pub prune_credentials: bool,
    pub parallel: usize,
    pub max_unavailable: usize,
    pub keep_going: bool,
    pub dry_run: bool,
    pub connect_timeout: Duration,
    pub progress: Option<Arc<dyn Progress>>,
    /// `--kubeconfig`: the cluster sync fetches credentials from, finds Machines in, and lets nodes join.
    pub kubeconfig: Option<PathBuf>,
    /// `--csr-timeout`: how long to wait for each configured node's kubelet CSRs and Node.
    pub csr_timeout: Duration,
    /// `--prune-nodes`: deconfigure the managed nodes that left the targets and delete their Nodes.
    pub prune_nodes: bool,
    /// `--reboot`: reboot gracefully the nodes whose apply asks for it.
    pub reboot: bool,
    /// `--allow-undrained-upgrade`.
    pub allow_undrained_upgrade: bool,
    pub drain: upgrade::DrainSettings,
}

/// What a sync did: each target's report and, with `--kubeconfig`, what happened in the cluster.
#[derive(Debug, Default, serde::Serialize)]
pub struct SyncReport {
    pub nodes: Vec<NodeReport>,
    #[serde(flatten)]
    pub cluster: cluster_side::ClusterReport,
}

impl SyncReport {
    /// A node failed, or the cluster side did (a Machine refused, a node not pruned, a node that did not join).
    pub fn failed(&self) -> bool {
        self.nodes.iter().any(|r| r.status == Status::Failed) || self.cluster.failed()
    }

    /// `--dry-run` found something to change (a node, or a node to prune).
    pub fn would_change(&self) -> bool {
        self.nodes.iter().any(|r| r.status == Status::WouldChange) || self.cluster.would_change()
    }
}

/// A rendered output directory, read for sync: its manifest and every file of it, checked against the manifest.
pub struct Rendered {
    /// The directory, for messages.
    pub dir: PathBuf,
    pub manifest: BundleManifest,
    /// Output-relative path → bytes.
    pub files: Vec<(String, Vec<u8>)>,
    /// The node bundle's services table.
    pub services: ServicesFile,
}

/// The rendered bundle, verified against the rendered manifest.json so a hand-edited or half-copied directory is
/// never pushed.
pub fn read_rendered(dir: &Path) -> Result<Rendered, Error> {
    let manifest_path = dir.join("manifest.json");
    let manifest: BundleManifest = crate::emit::special_files::read_file(&manifest_path)
        .map_err(|e| {
            let why = crate::error::io_reason(&e);
            Error::Usage(format!("{} is not a rendered directory ({}: {why})", dir.display(), manifest_path.display()))
        })
        .and_then(|b| {
            serde_json::from_slice(&b).map_err(|e| {
                Error::Usage(format!(
                    "{} is not a manifest this wmrender wrote ({e}); render the directory again",
                    manifest_path.display()
                ))
            })
        })?;
    if manifest.mode.is_none() {
        return Err(Error::Usage(format!(
            "{} was rendered by an older wmrender (its manifest.json does not say whether WMCO configures the nodes); render it again",
            dir.display()
        )));
    }
    let mut files = Vec::new();
    for entry in &manifest.files {
        let path = &entry.path;
        // A file missing or changed since the render is bad input, not a failure of the sync.
        let bytes = crate::emit::special_files::read_file(&dir.join(path)).map_err(|e| {
            let why = crate::error::io_reason(&e);
            Error::Usage(format!(
                "{}/{path} is listed in manifest.json but cannot be read ({why}); render again",
                dir.display()
            ))
        })?;
        let actual = wmrender_contract::sha256_hex(&bytes);
        if actual != entry.sha256 {
            return Err(Error::Usage(format!(
                "{}/{path} differs from the rendered manifest.json; render again instead of editing the output",
                dir.display()
            )));
        }
        files.push((path.clone(), bytes));
    }
    if !files.iter().any(|(p, _)| p.starts_with("node/")) {
        return Err(Error::Usage(format!("{} holds no node bundle (rendered with --only cluster?)", dir.display())));
    }
    let services_path = NodePath::known(wmrender_contract::paths::SERVICES_JSON).bundle_path();
    let services = match files.iter().find(|(p, _)| *p == services_path) {
        Some((_, bytes)) => {
            ServicesFile::parse(bytes).map_err(|e| Error::Usage(format!("{}/{services_path}: {e}", dir.display())))?
        }
        None => ServicesFile::default(),
    };
    Ok(Rendered { dir: dir.to_path_buf(), manifest, files, services })
}

/// The nodes to sync: the Windows Machines' nodes found in the cluster (`machines`, empty without
/// `--kubeconfig`), BYOH hosts from the rendered ConfigMap (unless WMCO manages them) and the inventory; a later
/// source wins for the same name or address.
pub fn nodes(rendered: &Rendered, inventory: Option<&Path>, machines: Vec<Node>) -> Result<Vec<Node>, Error> {
    // With the operator, WMCO configures the BYOH hosts; sync must not touch them.
    let operator_mode = rendered.manifest.mode == Some(Mode::WithOperator);
    let byoh = match rendered.files.iter().find(|(p, _)| p == "cluster/configmap-windows-instances.yaml") {
        Some((p, bytes)) => {
            let file = rendered.dir.join(p).display().to_string();
            inventory::from_configmap(&file, &String::from_utf8_lossy(bytes)).map_err(Error::Invalid)?
        }
        None => vec![],
    };
    let mut nodes = machines;
    if !operator_mode {
        for b in &byoh {
            nodes.retain(|n| n.name != b.name && n.address != b.address);
            nodes.push(b.clone());
        }
    }
    if let Some(path) = inventory {
        let mut listed = inventory::load(path).map_err(Error::Invalid)?;
        let mut reaches = vec![false; listed.len()];
        for (n, reaches) in listed.iter_mut().zip(&mut reaches) {
            if operator_mode && byoh.iter().any(|b| b.address == n.address) {
                return Err(Error::Usage(format!(
                    "{} is a BYOH host that WMCO manages (the rendered output installs the operator); sync leaves it to WMCO",
                    n.address
                )));
            }
            // An inventory entry says how to reach a host the cluster also names (a Machine's instance stays that
            // Machine's); several entries may share an address (posix staging hosts on one machine), so only the
            // other sources' entries give way.
            let (replaced, kept): (Vec<Node>, Vec<Node>) =
                nodes.into_iter().partition(|b| b.name == n.name || b.address == n.address);
            nodes = kept;
            *reaches = !replaced.is_empty();
            if n.machine.is_none() {
                n.machine = replaced.into_iter().find_map(|b| b.machine);
            }
        }
        // An entry only saying how to reach a host is no node when no other source names that host (yet, or any
        // more: a Machine not provisioned, a BYOH host removed from the render).
        let mut keep = reaches.into_iter();
        listed.retain(|n| keep.next().unwrap_or(false) || !n.reach_only);
        nodes.extend(listed);
    }
    if nodes.is_empty() {
        // Named by the files that were asked, so the user knows which one to fill.
        let manifest = rendered.dir.join("manifest.json");
        let listed = match inventory {
            Some(path) => format!("{} lists none", path.display()),
            None => "no --inventory lists any".to_string(),
        };
        return Err(Error::Usage(if operator_mode {
            format!(
                "no nodes to sync: WMCO manages the BYOH hosts of the render ({} says so) and {listed}; list other \
                 nodes with --inventory",
                manifest.display()
            )
        } else {
            format!("no nodes to sync: the render {} has no BYOH hosts and {listed}", rendered.dir.display())
        }));
    }
    Ok(nodes)
}

pub async fn run(mut opts: SyncOptions) -> Result<SyncReport, Error> {
    if opts.prune_nodes && opts.kubeconfig.is_none() {
        return Err(Error::Usage(
            "--prune-nodes needs --kubeconfig: the cluster's Nodes say which nodes sync configured".into(),
        ));
    }
    let rendered = read_rendered(&opts.rendered)?;
    if opts.parallel == 0 || opts.max_unavailable == 0 {
        return Err(Error::Usage("--parallel and --max-unavailable must be at least 1".into()));
    }
    let mut cluster = cluster_side::connect(opts.kubeconfig.as_deref()).await?;
    let machine_nodes = match &mut cluster {
        Some(c) => {
            opts.secrets.fetched = c.credentials(&rendered).await?;
            if let Some(p) = &opts.progress {
                for note in &opts.secrets.fetched.notes {
                    p.note(&format!("note: {note}"));
                }
            }
            c.machine_nodes(&rendered).await?
        }
        None => vec![],
    };
    let nodes = nodes(&rendered, opts.inventory.as_deref(), machine_nodes)?;
    let session = Arc::new(Session::prepare(opts, &rendered, cluster.as_ref()).await?);
    if let Some(p) = &session.opts.progress {
        p.planned(&nodes);
    }
    let mut node_reports = rollout(&session, &nodes).await?;
    session.guard.reboot(&mut node_reports, &nodes).await;
    let cluster = match &cluster {
        Some(side) => after_sync(side, &session, &rendered, &nodes, &mut node_reports).await?,
        None => Default::default(),
    };
    Ok(SyncReport { nodes: node_reports, cluster })
}

/// What every node's sync of one run shares: the files planned for every node (the bundle, the payload, the
/// credentials), what the run was given, the services table, how nodes are reached and trusted, the permits of
/// `--max-unavailable`, the options and the guard of disruptive changes. `sync` makes one per run; the controller
/// one per resync (the credentials may have rotated). [`Session::sync_node`] is the one per-node step of both.
pub struct Session {
    desired: Vec<plan::Desired>,
    given: plan::Given,
    services: ServicesFile,
    connect: ssh::ConnectOptions,
    /// `--max-unavailable`: a node holds a permit while it is being changed.
    unavailable: Arc<Semaphore>,
    opts: SyncOptions,
    guard: upgrade::Guard,
    /// When the cloud-node-manager's token this session pushes was minted, and how long it is valid.
    token: Option<MintedToken>,
}

/// A token a session pushes to every node it syncs: when it was minted and how long it is valid from then.
#[derive(Clone, Copy, Debug)]
pub struct MintedToken {
    pub minted: std::time::Instant,
    pub lifetime: std::time::Duration,
}

impl Session {
    /// Reads the key and the secrets (minting the cloud-node-manager's token with the cluster), and plans the files.
    pub async fn prepare(
        opts: SyncOptions,
        rendered: &Rendered,
        cluster: Option<&cluster_side::ClusterSide>,
    ) -> Result<Session, Error> {
        // Before the payload is hashed: a wrong key file should not wait for that.
        let key = ssh::load_identity(&opts.identity)?;
        let mut secrets = secrets::Secrets::load(&opts.secrets)?;
        let mut token = None;
        if let Some(c) = cluster {
            let minted = std::time::Instant::now();
            token = c
                .mint_tokens(rendered, &mut secrets, opts.dry_run)
                .await?
                .map(|lifetime| MintedToken { minted, lifetime });
        }
        let mut desired = plan::desired(&rendered.files, &secrets, opts.payload.as_deref(), opts.agent.as_deref())?;
        plan::mark_credentials(&mut desired, opts.secrets.has_pull_secret());
        let agent_path = NodePath::known(wmrender_contract::paths::AGENT_EXE);
        let given = plan::Given {
            payload: opts.payload.is_some(),
            agent: opts.agent.is_some() || desired.iter().any(|d| d.file.path == agent_path),
            credentials: secrets.files.keys().map(|p| NodePath::known(p)).collect(),
            pull_secret: opts.secrets.has_pull_secret(),
            prune_payload: opts.prune_payload,
            prune_credentials: opts.prune_credentials,
        };
        let connect = connect_options(key, &opts.known_hosts, opts.accept_new, opts.dry_run, opts.connect_timeout);
        let mut guard = upgrade::Guard::new(cluster, opts.allow_undrained_upgrade, &opts.drain);
        if opts.reboot && !opts.dry_run {
            guard = guard.with_reboots(&connect, opts.max_unavailable)?;
        }
        Ok(Session {
            desired,
            given,
            services: rendered.services.clone(),
            connect,
            unavailable: Arc::new(Semaphore::new(opts.max_unavailable.max(1))),
            opts,
            guard,
            token,
        })
    }

    /// The token this session pushes, if it mints one (the Azure cloud-node-manager's, without the operator).
    pub fn token(&self) -> Option<MintedToken> {
        self.token
    }

    pub fn opts(&self) -> &SyncOptions {
        &self.opts
    }

    pub fn connect(&self) -> &ssh::ConnectOptions {
        &self.connect
    }

    /// The digest of the rendered bundle this session delivers: what a configured node's agent reports it applied
    /// ([`wmrender_contract::node_status`]).
    pub fn bundle_digest(&self) -> String {
        let bundle = self.desired.iter().filter(|d| d.file.kind == wmrender_contract::FileKind::Bundle);
        wmrender_contract::node_status::bundle_digest(bundle.map(|d| (&d.file.path, d.file.sha256.as_str())))
    }

    /// One node's sync, told to the progress display unless it is a node's second sync of the run (its
    /// line is there already).
    pub async fn sync_node(&self, node: &Node, announce: bool) -> NodeReport {
        let opts = &self.opts;
        let progress = opts.progress.as_ref().filter(|_| announce);
        if let Some(p) = progress {
            p.started(node);
        }
        let job = Job {
            node,
            desired: &self.desired,
            given: &self.given,
            services: &self.services,
            connect: &self.connect,
            dry_run: opts.dry_run,
            unavailable: self.unavailable.clone(),
            guard: &self.guard,
        };
        let report = node::sync(job).await;
        if let Some(p) = progress {
            p.finished(&report);
        }
        report
    }
}

/// Syncs `nodes`, `--parallel` at a time in their order; after a failure (without `--keep-going`) the nodes not
/// started yet are skipped. The reports are in the nodes' order.
pub async fn rollout(run: &Arc<Session>, nodes: &[Node]) -> Result<Vec<NodeReport>, Error> {
    let connections = Arc::new(Semaphore::new(run.opts.parallel.max(1)));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = tokio::task::JoinSet::new();
    let mut reports: Vec<(usize, NodeReport)> = Vec::new();
    for (i, node) in nodes.iter().cloned().enumerate() {
        // Slots are taken here, in inventory order, so a node starts only after the ones before it did, and none
        // starts after a failure (without --keep-going).
        let slot = connections.clone().acquire_owned().await.map_err(|e| Error::Operational(e.to_string()))?;
        if stop.load(Ordering::SeqCst) && !run.opts.keep_going {
            let report = NodeReport::new(&node, Status::Skipped);
            if let Some(p) = &run.opts.progress {
                p.finished(&report);
            }
            reports.push((i, report));
            continue;
        }
        let (stop, run) = (stop.clone(), run.clone());
        tasks.spawn(async move {
            let _slot = slot;
            let report = run.sync_node(&node, true).await;
            if report.status == Status::Failed {
                stop.store(true, Ordering::SeqCst);
            }
            (i, report)
        });
    }
    while let Some(done) = tasks.join_next().await {
        reports.push(done.map_err(|e| Error::Operational(format!("a sync task failed: {e}")))?);
    }
    reports.sort_by_key(|(i, _)| *i);
    Ok(reports.into_iter().map(|(_, r)| r).collect())
}

/// With `--kubeconfig`, after the nodes' sync: the configured nodes join (CSRs, labels); a node that waited on the
/// cluster (kubelet's certificate) is synced once more now that it has joined, so its agent finishes at once; then
/// wmrender's taint follows each node's state, and the nodes that left are pruned.
#[cfg(feature = "cluster")]
async fn after_sync(
    side: &cluster_side::ClusterSide,
    run: &Session,
    rendered: &Rendered,
    nodes: &[Node],
    reports: &mut [NodeReport],
) -> Result<cluster_side::ClusterReport, Error> {
    let opts = &run.opts;
    let mut report = cluster_side::ClusterReport { machines: side.skipped_machines(), ..Default::default() };
    let joined = side.join(nodes, reports, opts, &mut report).await?;
    for (node, r) in nodes.iter().zip(reports.iter_mut()) {
        if r.status == Status::Pending && !r.reboot_required && joined.contains(&r.node_name()) {
            let again = run.sync_node(node, false).await;
            r.merge_later(again);
        }
    }
    if !opts.dry_run {
        side.settle_taints(rendered, reports, &mut report).await;
    }
    side.prune(nodes, reports, opts, &run.connect, &mut report).await?;
    Ok(report)
}

#[cfg(not(feature = "cluster"))]
async fn after_sync(
    side: &cluster_side::ClusterSide,
    _: &Session,
    _: &Rendered,
    _: &[Node],
    _: &mut [NodeReport],
) -> Result<cluster_side::ClusterReport, Error> {
    match *side {}
}

/// How to reach and trust nodes over SSH, for every connection of a run (sync's and reboot's).
pub fn connect_options(
    key: russh::keys::PrivateKey,
    known_hosts: &Path,
    accept_new: bool,
    dry_run: bool,
    connect_timeout: Duration,
) -> ssh::ConnectOptions {
    ssh::ConnectOptions {
        key: Arc::new(key),
        known_hosts: known_hosts.to_path_buf(),
        accept_new,
        dry_run,
        connect_timeout,
        idle_timeout: Duration::from_secs(60),
        attempts: 3,
        known_hosts_lock: Arc::new(std::sync::Mutex::new(())),
    }
}

/// The per-node summary table (stderr).
pub fn table(reports: &[NodeReport]) -> String {
    let mut out = format!(
        "{:<24} {:<22} {:<13} {:>5} {:>7} {:>7} {:>10}  restarted / reboot / error\n",
        "NODE", "ADDRESS", "RESULT", "ADDED", "CHANGED", "REMOVED", "SENT"
    );
    for r in reports {
        let result =
            serde_json::to_value(r.status).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
        let mut notes = r.restarted.join(",");
        if r.rebooted {
            notes.push_str(" rebooted");
        } else if r.reboot_required {
            notes.push_str(" REBOOT NEEDED");
        }
        for p in &r.pending {
            notes.push_str(&format!(" waiting: {p}"));
        }
        for d in &r.degraded {
            notes.push_str(&format!(" left out: {d}"));
        }
        if let Some(e) = &r.error {
            notes.push_str(&format!(" {e}"));
        }
        out.push_str(&format!(
            "{:<24} {:<22} {:<13} {:>5} {:>7} {:>7} {:>10}  {}\n",
            r.name,
            r.address,
            result,
            r.added.len(),
            r.changed.len(),
            r.removed.len(),
            r.bytes_sent,
            notes.trim()
        ));
    }
    out
}
