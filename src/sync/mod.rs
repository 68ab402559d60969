//! Stage 5b: `wmrender sync` pushes the rendered node bundle to Windows nodes over SSH and applies it.
//!
//! inventory (which nodes) → plan (what each should hold) → rollout (how many at once) → node (one node's
//! protocol over ssh) → report. Secrets enter here and only here, from files, into the bytes pushed.

pub mod error;
pub mod inventory;
pub mod node;
pub mod plan;
pub mod profile;
pub mod secrets;
pub mod ssh;

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
}

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
    pub kubeconfig: Option<PathBuf>,
    /// `--prune-nodes`: deconfigure the managed nodes that left the targets and delete their Nodes.
    pub prune_nodes: bool,
}

/// What a sync did: each target's report and, with `--kubeconfig`, the Windows Machines it did not sync and the
/// nodes it pruned.
#[derive(Debug, Default, serde::Serialize)]
pub struct SyncReport {
    pub nodes: Vec<NodeReport>,
    #[cfg(feature = "cluster")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub machines: Vec<crate::cluster::machines::Skipped>,
    #[cfg(feature = "cluster")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pruned: Vec<crate::cluster::prune::Pruned>,
}

impl SyncReport {
    /// A node failed, a Machine was refused, or a node could not be pruned.
    pub fn failed(&self) -> bool {
        #[cfg(feature = "cluster")]
        {
            use crate::cluster::prune::PruneStatus;
            if self.machines.iter().any(|m| m.refused) || self.pruned.iter().any(|p| p.status == PruneStatus::Failed) {
                return true;
            }
        }
        self.nodes.iter().any(|r| r.status == Status::Failed)
    }

    /// `--dry-run` found something to change (a node, or a node to prune).
    pub fn would_change(&self) -> bool {
        #[cfg(feature = "cluster")]
        {
            use crate::cluster::prune::PruneStatus;
            if self.pruned.iter().any(|p| p.status == PruneStatus::WouldPrune) {
                return true;
            }
        }
        self.nodes.iter().any(|r| r.status == Status::WouldChange)
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
    let manifest: BundleManifest = std::fs::read(&manifest_path)
        .map_err(|e| {
            Error::Usage(format!("{} is not a rendered directory ({}: {e})", dir.display(), manifest_path.display()))
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
        let bytes = std::fs::read(dir.join(path)).map_err(|e| {
            Error::Usage(format!(
                "{}/{path} is listed in manifest.json but cannot be read ({e}); render again",
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
        let listed = inventory::load(path).map_err(Error::Invalid)?;
        for n in &listed {
            if operator_mode && byoh.iter().any(|b| b.address == n.address) {
                return Err(Error::Usage(format!(
                    "{} is a BYOH host that WMCO manages (the rendered output installs the operator); sync leaves it to WMCO",
                    n.address
                )));
            }
            // An inventory entry says how to reach a host the cluster also names; several entries may share an
            // address (posix staging hosts on one machine), so only the other sources' entries give way.
            nodes.retain(|b| b.name != n.name && b.address != n.address);
        }
        nodes.extend(listed);
    }
    if nodes.is_empty() {
        return Err(Error::Usage(if operator_mode {
            "no nodes to sync: WMCO manages the BYOH hosts; list other nodes with --inventory".into()
        } else {
            "no nodes to sync: the render has no BYOH hosts; list nodes with --inventory".into()
        }));
    }
    Ok(nodes)
}

/// Whether the rendered bundle's services wait for the cloud-node-manager kubeconfig sync mints (Azure, without
/// the operator: render/cloud_node_manager.rs).
#[cfg(feature = "cluster")]
fn needs_cloud_node_manager_kubeconfig(rendered: &Rendered) -> bool {
    let path = NodePath::known(crate::render::node::paths::CLOUD_NODE_MANAGER_KUBECONFIG);
    rendered.manifest.mode == Some(Mode::WithoutOperator)
        && rendered.services.services.iter().any(|s| s.requires.contains(&path))
}

pub async fn run(opts: SyncOptions) -> Result<SyncReport, Error> {
    if opts.prune_nodes && opts.kubeconfig.is_none() {
        return Err(Error::Usage(
            "--prune-nodes needs --kubeconfig: the cluster's Nodes say which nodes sync configured".into(),
        ));
    }
    #[cfg(not(feature = "cluster"))]
    if opts.kubeconfig.is_some() {
        return Err(crate::cluster::ClusterError::NotBuilt("sync --kubeconfig").into());
    }
    let rendered = read_rendered(&opts.rendered)?;
    if opts.parallel == 0 || opts.max_unavailable == 0 {
        return Err(Error::Usage("--parallel and --max-unavailable must be at least 1".into()));
    }
    #[cfg(feature = "cluster")]
    let cluster = match &opts.kubeconfig {
        Some(path) => Some(crate::cluster::Cluster::connect(path).await?),
        None => None,
    };
    // Machine-backed nodes are wmrender's only without the operator; with it, WMCO configures them.
    #[cfg(feature = "cluster")]
    let found = match &cluster {
        Some(c) if rendered.manifest.mode == Some(Mode::WithoutOperator) => crate::cluster::machines::find(c).await?,
        _ => Default::default(),
    };
    #[cfg(feature = "cluster")]
    let nodes = nodes(&rendered, opts.inventory.as_deref(), found.nodes.clone())?;
    #[cfg(not(feature = "cluster"))]
    let nodes = nodes(&rendered, opts.inventory.as_deref(), vec![])?;
    // Before the payload is hashed: a wrong key file should not wait for that.
    let key = ssh::load_identity(&opts.identity).map_err(Error::Usage)?;
    #[cfg_attr(not(feature = "cluster"), allow(unused_mut))]
    let mut secrets = secrets::Secrets::load(&opts.secrets)?;
    // A TokenRequest issues a credential: not for --dry-run, which then keeps the node's kubeconfig as it is.
    #[cfg(feature = "cluster")]
    if let Some(c) = &cluster
        && !opts.dry_run
        && needs_cloud_node_manager_kubeconfig(&rendered)
    {
        use crate::render::node::paths::{BOOTSTRAP_KUBECONFIG, CLOUD_NODE_MANAGER_KUBECONFIG};
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
        let kubeconfig = crate::cluster::token::cloud_node_manager_kubeconfig(c, &endpoint).await?;
        secrets.files.insert(CLOUD_NODE_MANAGER_KUBECONFIG, kubeconfig);
    }
    let mut desired = plan::desired(&rendered.files, &secrets, opts.payload.as_deref(), opts.agent.as_deref())?;
    plan::mark_credentials(&mut desired, opts.secrets.pull_secret.is_some());
    let agent_path = NodePath::known(wmrender_contract::paths::AGENT_EXE);
    let given = plan::Given {
        payload: opts.payload.is_some(),
        agent: opts.agent.is_some() || desired.iter().any(|d| d.file.path == agent_path),
        credentials: secrets.files.keys().map(|p| NodePath::known(p)).collect(),
        pull_secret: opts.secrets.pull_secret.is_some(),
        prune_payload: opts.prune_payload,
        prune_credentials: opts.prune_credentials,
    };
    let connect = ssh::ConnectOptions {
        key: Arc::new(key),
        known_hosts: opts.known_hosts.clone(),
        accept_new: opts.accept_new,
        dry_run: opts.dry_run,
        connect_timeout: opts.connect_timeout,
        idle_timeout: Duration::from_secs(60),
        attempts: 3,
        known_hosts_lock: Arc::new(std::sync::Mutex::new(())),
    };
    if let Some(p) = &opts.progress {
        p.planned(&nodes);
    }
    let connections = Arc::new(Semaphore::new(opts.parallel.max(1)));
    let unavailable = Arc::new(Semaphore::new(opts.max_unavailable.max(1)));
    let stop = Arc::new(AtomicBool::new(false));
    let shared = Arc::new((desired, given, rendered.services, connect, opts));
    let mut tasks = tokio::task::JoinSet::new();
    let mut reports: Vec<(usize, NodeReport)> = Vec::new();
    for (i, node) in nodes.iter().cloned().enumerate() {
        // Slots are taken here, in inventory order, so a node starts only after the ones before it did, and none
        // starts after a failure (without --keep-going).
        let slot = connections.clone().acquire_owned().await.map_err(|e| Error::Operational(e.to_string()))?;
        let opts = &shared.4;
        if stop.load(Ordering::SeqCst) && !opts.keep_going {
            let report = NodeReport::new(&node, Status::Skipped);
            if let Some(p) = &opts.progress {
                p.finished(&report);
            }
            reports.push((i, report));
            continue;
        }
        let (unavailable, stop, shared) = (unavailable.clone(), stop.clone(), shared.clone());
        tasks.spawn(async move {
            let _slot = slot;
            let (desired, given, services, connect, opts) = &*shared;
            if let Some(p) = &opts.progress {
                p.started(&node);
            }
            let job = Job { node: &node, desired, given, services, connect, dry_run: opts.dry_run, unavailable };
            let report = node::sync(job).await;
            if report.status == Status::Failed {
                stop.store(true, Ordering::SeqCst);
            }
            if let Some(p) = &opts.progress {
                p.finished(&report);
            }
            (i, report)
        });
    }
    while let Some(done) = tasks.join_next().await {
        reports.push(done.map_err(|e| Error::Operational(format!("a sync task failed: {e}")))?);
    }
    reports.sort_by_key(|(i, _)| *i);
    #[cfg_attr(not(feature = "cluster"), allow(unused_mut, clippy::needless_update))]
    let mut report = SyncReport { nodes: reports.into_iter().map(|(_, r)| r).collect(), ..Default::default() };
    #[cfg(feature = "cluster")]
    if let Some(c) = &cluster {
        use crate::cluster::prune;
        let opts = &shared.4;
        report.machines = found.skipped;
        if !opts.dry_run {
            let reached: Vec<Node> = (nodes.iter().zip(&report.nodes))
                .filter(|(_, r)| prune::reached(r.status))
                .map(|(n, _)| n.clone())
                .collect();
            prune::record_logins(c, &reached).await?;
        }
        if opts.prune_nodes {
            let leaving = prune::leaving(c, &nodes, &found.node_names).await?;
            report.pruned = prune::prune(c, &leaving, &shared.3, opts.dry_run).await;
        }
    }
    Ok(report)
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
        if r.reboot_required {
            notes.push_str(" REBOOT NEEDED");
        }
        for p in &r.pending {
            notes.push_str(&format!(" waiting: {p}"));
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

/// The cluster part of the summary (stderr): Windows Machines not synced, and nodes pruned or not.
pub fn cluster_lines(report: &SyncReport) -> String {
    #[cfg_attr(not(feature = "cluster"), allow(unused_mut))]
    let mut out = String::new();
    #[cfg(feature = "cluster")]
    {
        use crate::cluster::prune::PruneStatus;
        for m in &report.machines {
            let state = if m.refused { "refused" } else { "waiting" };
            out.push_str(&format!("machine {}: {state}: {}\n", m.machine, m.why));
        }
        for p in report.pruned.iter().filter(|p| p.status != PruneStatus::WouldPrune) {
            match &p.error {
                None => out.push_str(&format!("pruned node {} ({}): deconfigured, Node deleted\n", p.node, p.address)),
                Some(e) => out.push_str(&format!("node {} ({}) not pruned: {e}\n", p.node, p.address)),
            }
        }
    }
    #[cfg(not(feature = "cluster"))]
    let _ = report;
    out
}

/// `--dry-run --prune-nodes`: the nodes that would be deconfigured and deleted.
pub fn prune_plan(report: &SyncReport) -> String {
    #[cfg_attr(not(feature = "cluster"), allow(unused_mut))]
    let mut out = String::new();
    #[cfg(feature = "cluster")]
    for p in report.pruned.iter().filter(|p| p.status == crate::cluster::prune::PruneStatus::WouldPrune) {
        out.push_str(&format!(
            "{} ({}) would be pruned: deconfigured over SSH, then its Node deleted\n",
            p.node, p.address
        ));
    }
    #[cfg(not(feature = "cluster"))]
    let _ = report;
    out
}
