//! One node's delivery, shared by `wmrender sync` and `wmrender controller`: the rendered bundle read and verified
//! ([`read_rendered`]), the files every node should hold planned once per run ([`Session`]), and the per-node
//! protocol over SSH ([`node`]): read the node's manifest (untrusted), plan, journal, upload atomically, run the
//! agent, read its result. Secrets enter here, from files or from the cluster, into the bytes pushed.
//!
//! Delivery knows nothing of the cluster. What it must ask the cluster (may this binary be replaced, may this node
//! be rebooted now) it asks through a [`guard::Guard`] that the caller hands it; [`crate::lifecycle`] above it runs
//! everything that needs both the cluster and the node.

pub mod error;
pub mod guard;
pub mod inventory;
pub mod node;
pub mod plan;
pub mod profile;
pub mod secrets;
pub mod ssh;

use crate::error::Error;
use inventory::Node;
use node::{Job, NodeReport};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use wmrender_contract::{BundleManifest, NodePath, ServicesFile};

/// Told what happens, for the progress display: the nodes once known, then each node as it starts and finishes.
pub trait Progress: Send + Sync {
    fn planned(&self, nodes: &[Node]);
    fn started(&self, node: &Node);
    fn finished(&self, report: &NodeReport);
    /// A line about the run as a whole (e.g. that sync now waits for the cluster).
    fn note(&self, _line: &str) {}
}

/// How nodes are reached and trusted: `--identity`, `--known-hosts`, `--accept-new`, `--connect-timeout`. The
/// lowest layer of the options, shared by `sync`, `reboot` and `controller`.
#[derive(Clone, Debug)]
pub struct Access {
    pub identity: PathBuf,
    pub known_hosts: PathBuf,
    pub accept_new: bool,
    pub connect_timeout: Duration,
}

/// What a run delivers besides the bundle, and how.
#[derive(Clone)]
pub struct DeliveryOptions {
    pub access: Access,
    pub payload: Option<PathBuf>,
    /// The agent executable (`wmrender-node.exe`), delivered to `C:\k\wmrender\wmrender-node.exe`.
    pub agent: Option<PathBuf>,
    pub prune_payload: bool,
    pub prune_credentials: bool,
    /// `--max-unavailable`: how many nodes that may run pods are changed at once.
    pub max_unavailable: usize,
    /// Plan and report, change nothing (known_hosts included).
    pub dry_run: bool,
    pub progress: Option<Arc<dyn Progress>>,
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

impl Rendered {
    /// Who configures the nodes, as the render says.
    pub fn mode(&self) -> Option<wmrender_contract::Mode> {
        self.manifest.mode
    }

    /// The rendered file at an output-relative path.
    pub fn file(&self, path: &str) -> Option<&[u8]> {
        self.files.iter().find(|(p, _)| p == path).map(|(_, b)| b.as_slice())
    }
}

/// The rendered bundle, verified against the rendered manifest.json so a hand-edited, half-copied or cut-short
/// directory is never pushed. Every error names the file (and, for a manifest that does not parse, its line).
pub fn read_rendered(dir: &Path) -> Result<Rendered, Error> {
    let manifest_path = dir.join("manifest.json");
    let bytes = crate::emit::special_files::read_file(&manifest_path).map_err(|e| {
        let why = crate::error::io_reason(&e);
        Error::Usage(format!("{} is not a rendered directory ({}: {why})", dir.display(), manifest_path.display()))
    })?;
    let manifest: BundleManifest = serde_json::from_slice(&bytes).map_err(|e| {
        Error::Usage(format!(
            "{}:{}:{}: not a manifest this wmrender wrote ({}); render the directory again",
            manifest_path.display(),
            e.line(),
            e.column(),
            crate::error::json_reason(&e)
        ))
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

/// The credentials a run pushes: the secret files (given, fetched, minted) and whether hosts.toml carry mirror
/// credentials.
pub struct Credentials {
    pub secrets: secrets::Secrets,
    /// A pull secret was given or fetched.
    pub pull_secret: bool,
    /// The cloud-node-manager's token among the secrets, when one was minted for this run.
    pub token: Option<MintedToken>,
}

/// A token a session pushes to every node it syncs: when it was minted and how long it is valid from then.
#[derive(Clone, Copy, Debug)]
pub struct MintedToken {
    pub minted: std::time::Instant,
    pub lifetime: std::time::Duration,
}

/// Whether a node's change waits for a `--max-unavailable` permit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Permit {
    /// Take one before anything on the node changes: it may run pods.
    Take,
    /// Take none: the caller holds one, or nothing can run on the node yet (no Node may be this host's).
    NotNeeded,
}

/// What every node's delivery of one run shares: the files planned for every node (the bundle, the payload, the
/// credentials), what the run was given, the services table, how nodes are reached and trusted, the permits of
/// `--max-unavailable` and the guard of disruptive changes. `sync` makes one per run; the controller one per resync
/// (the credentials may have rotated). [`Session::sync_node`] is the one per-node step of both.
pub struct Session {
    desired: Vec<plan::Desired>,
    given: plan::Given,
    services: ServicesFile,
    connect: ssh::ConnectOptions,
    /// `--max-unavailable`: a node that may run pods holds a permit while it is being changed.
    unavailable: Arc<Semaphore>,
    dry_run: bool,
    progress: Option<Arc<dyn Progress>>,
    guard: Arc<dyn guard::Guard>,
    token: Option<MintedToken>,
}

impl Session {
    /// Plans the files every node should hold; `connect` is how nodes are reached and trusted.
    pub fn prepare(
        opts: &DeliveryOptions,
        rendered: &Rendered,
        credentials: Credentials,
        connect: ssh::ConnectOptions,
        guard: Arc<dyn guard::Guard>,
    ) -> Result<Session, Error> {
        let Credentials { secrets, pull_secret, token } = credentials;
        let mut desired = plan::desired(&rendered.files, &secrets, opts.payload.as_deref(), opts.agent.as_deref())?;
        plan::mark_credentials(&mut desired, pull_secret);
        let agent_path = NodePath::known(wmrender_contract::paths::AGENT_EXE);
        let given = plan::Given {
            payload: opts.payload.is_some(),
            agent: opts.agent.is_some() || desired.iter().any(|d| d.file.path == agent_path),
            credentials: secrets.files.keys().map(|p| NodePath::known(p)).collect(),
            pull_secret,
            prune_payload: opts.prune_payload,
            prune_credentials: opts.prune_credentials,
        };
        Ok(Session {
            desired,
            given,
            services: rendered.services.clone(),
            connect,
            unavailable: Arc::new(Semaphore::new(opts.max_unavailable.max(1))),
            dry_run: opts.dry_run,
            progress: opts.progress.clone(),
            guard,
            token,
        })
    }

    /// The token this session pushes, if it mints one (the Azure cloud-node-manager's, without the operator).
    pub fn token(&self) -> Option<MintedToken> {
        self.token
    }

    pub fn connect(&self) -> &ssh::ConnectOptions {
        &self.connect
    }

    pub fn dry_run(&self) -> bool {
        self.dry_run
    }

    pub fn progress(&self) -> Option<&Arc<dyn Progress>> {
        self.progress.as_ref()
    }

    /// The `--max-unavailable` permits, for the steps besides delivery that make a node unavailable (a drain
    /// before a prune, a reboot).
    pub fn unavailable(&self) -> &Arc<Semaphore> {
        &self.unavailable
    }

    /// The digest of the rendered bundle this session delivers: what a configured node's agent reports it applied
    /// ([`wmrender_contract::node_status`]).
    pub fn bundle_digest(&self) -> String {
        let bundle = self.desired.iter().filter(|d| d.file.kind == wmrender_contract::FileKind::Bundle);
        wmrender_contract::node_status::bundle_digest(bundle.map(|d| (&d.file.path, d.file.sha256.as_str())))
    }

    /// The digest of the payload this session delivers (the programs and the agent), what a node's agent reports
    /// running ([`wmrender_contract::node_status::payload_digest`]); `None` when it was given no `--payload`.
    pub fn payload_digest(&self) -> Option<String> {
        let payload = self.desired.iter().filter(|d| d.file.kind == wmrender_contract::FileKind::Payload);
        self.given.payload.then(|| {
            wmrender_contract::node_status::payload_digest(payload.map(|d| (&d.file.path, d.file.sha256.as_str())))
        })
    }

    /// The sha256 (hex) of the agent's executable this session delivers, if it delivers one: what a node's agent
    /// reports running (`wmrender.dev/agent`).
    pub fn agent_digest(&self) -> Option<String> {
        let agent = |d: &&plan::Desired| d.file.path.as_str().eq_ignore_ascii_case(wmrender_contract::paths::AGENT_EXE);
        self.desired.iter().find(agent).map(|d| d.file.sha256.clone())
    }

    /// One node's delivery, told to the progress display unless it is a node's second sync of the run (its
    /// line is there already).
    pub async fn sync_node(&self, node: &Node, node_name: &str, permit: Permit, announce: bool) -> NodeReport {
        let progress = self.progress.as_ref().filter(|_| announce);
        if let Some(p) = progress {
            p.started(node);
        }
        let job = Job {
            node,
            node_name,
            desired: &self.desired,
            given: &self.given,
            services: &self.services,
            connect: &self.connect,
            dry_run: self.dry_run,
            unavailable: (permit == Permit::Take).then(|| self.unavailable.clone()),
            guard: self.guard.as_ref(),
        };
        let report = node::sync(job).await;
        if let Some(p) = progress {
            p.finished(&report);
        }
        report
    }
}

/// How to reach and trust nodes over SSH, for every connection of a run (sync's, reboot's, the controller's).
pub fn connect_options(
    key: russh::keys::PrivateKey,
    access: &Access,
    dry_run: bool,
    host_keys: Option<Arc<ssh::HostKeyBook>>,
) -> ssh::ConnectOptions {
    ssh::ConnectOptions {
        key: Arc::new(key),
        known_hosts: access.known_hosts.clone(),
        accept_new: access.accept_new,
        dry_run,
        connect_timeout: access.connect_timeout,
        idle_timeout: Duration::from_secs(60),
        attempts: 3,
        known_hosts_lock: Arc::new(std::sync::Mutex::new(())),
        host_keys,
    }
}
