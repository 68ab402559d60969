//! Syncing one node: read its manifest (untrusted), plan, record the journal, upload changed files atomically
//! (service binaries on Windows are staged for the agent), remove what left the bundle, write the manifest, run the
//! apply step and read its result. The node counts as converged only once the apply step said so; until then
//! every sync runs it again, so a cut anywhere is finished by the next sync. A node whose files are all current is
//! `unchanged` only while the agent's last pass (`C:\k\wmrender\last-pass.json`, written by every pass of the
//! agent service too) converged: a pass that failed or waits since (a step after a reboot) makes sync run the agent
//! again and report what it says.
//!
//! A change is delivered one of two ways:
//!
//! - **journaled** (any change): the manifest is written with the journal first (the agent waits while the
//!   manifest holds one), then the files, then the manifest without it, then the apply step runs, and the manifest
//!   is marked applied once it converged: three writes of the manifest;
//! - **one file** (one file replaced in place, nothing removed, not the agent itself; [`plan::Changes::one_file`]):
//!   one rename, which neither the agent nor anyone else can see half done, so the agent need not wait. The journal
//!   goes into a small file of its own beside the manifest ([`ONE_FILE_JOURNAL`]), then the file, then the
//!   manifest's update ([`ManifestUpdate`]: the changed entries over the manifest as it is, not the whole manifest
//!   again), already marked applied; the journal file is removed when the apply step converged. Until then it stands
//!   for the journal and for "not applied": a sync that finds it reads the manifest as holding that journal,
//!   unapplied. Updates add up over one manifest until they would be half its size; then, or when the manifest
//!   holds a journal, the change is journaled, which writes the whole manifest and removes the update.

use super::error::SyncError;
use super::inventory::Node;
use super::plan::{self, Changes, Desired, Given};
use super::profile::{Profile, strip_clixml};
use super::ssh::{ConnectOptions, Connection, Sftp};
use serde::Serialize;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use wmrender_contract::paths::{AGENT_EXE, KUBECONFIG, LAST_PASS, NODE_MANIFEST, NODE_MANIFEST_UPDATE};
use wmrender_contract::{
    ASIDE_SUFFIX, Actions, ApplyResult, ApplyStatus, FileKind, Journal, ManifestUpdate, NodeFile, NodeManifest,
    NodePath, STAGED_SUFFIX, ServicesFile, TEMP_SUFFIX, UpdateError,
};

/// Beside the node manifest (`manifest.json.wmrender-journal`): the journal of a one-file change, as a node manifest
/// holding only its journal. The agent does not read it; sync does, on every run.
const ONE_FILE_JOURNAL: &str = ".wmrender-journal";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Files were pushed (or an unfinished apply was run again) and the node converged.
    Synced,
    /// Nothing differed and the last apply had succeeded; nothing was pushed or run.
    Unchanged,
    /// The bundle is delivered; the agent waits on a reboot or on the cluster and finishes by itself.
    Pending,
    /// `--dry-run`: this node would change.
    WouldChange,
    Failed,
    /// Not attempted: an earlier node failed (without `--keep-going`).
    Skipped,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeReport {
    pub name: String,
    pub address: String,
    /// The Windows Machine whose instance this is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    pub status: Status,
    pub added: Vec<String>,
    pub changed: Vec<String>,
    pub removed: Vec<String>,
    /// Files of kinds this sync was not given (payload, credentials), left as they are on the node.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kept: Vec<String>,
    pub bytes_sent: u64,
    /// Services the change restarts (from the agent; planned ones with `--dry-run`).
    pub restarted: Vec<String>,
    /// Services the change creates (from the agent; planned ones with `--dry-run`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub created: Vec<String>,
    pub reboot_required: bool,
    /// The node was rebooted: its first boot's reboot, or a graceful one with `sync --reboot`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub rebooted: bool,
    /// `namespace/name` of the pods evicted before an upgrade or a reboot.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub evicted: Vec<String>,
    /// Why the node is not converged yet (`pending`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<String>,
    /// Optional services that are not running, and why (the node converged without them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub degraded: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The apply step's result line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub apply: Option<ApplyResult>,
}

impl NodeReport {
    /// The Kubernetes node name: what the agent reported kubelet runs as, else the inventory's name.
    pub fn node_name(&self) -> String {
        self.apply.as_ref().map(|a| a.node_name.clone()).filter(|n| !n.is_empty()).unwrap_or_else(|| self.name.clone())
    }

    /// Takes in a later sync of the same node in the same run (the one after it joined): its outcome, and what it
    /// sent and did besides what this one did.
    pub fn merge_later(&mut self, later: NodeReport) {
        let merge = |a: &mut Vec<String>, b: Vec<String>| {
            for x in b {
                if !a.contains(&x) {
                    a.push(x);
                }
            }
        };
        self.status = later.status;
        self.bytes_sent += later.bytes_sent;
        merge(&mut self.added, later.added);
        merge(&mut self.changed, later.changed);
        merge(&mut self.removed, later.removed);
        merge(&mut self.restarted, later.restarted);
        merge(&mut self.created, later.created);
        merge(&mut self.evicted, later.evicted);
        self.reboot_required = later.reboot_required;
        self.rebooted |= later.rebooted;
        self.pending = later.pending;
        self.degraded = later.degraded;
        self.error = later.error;
        if later.apply.is_some() {
            self.apply = later.apply;
        }
    }

    pub fn new(node: &Node, status: Status) -> NodeReport {
        NodeReport {
            name: node.name.clone(),
            address: node.address.clone(),
            machine: node.machine.clone(),
            status,
            added: vec![],
            changed: vec![],
            removed: vec![],
            kept: vec![],
            bytes_sent: 0,
            restarted: vec![],
            created: vec![],
            reboot_required: false,
            rebooted: false,
            evicted: vec![],
            pending: vec![],
            degraded: vec![],
            error: None,
            apply: None,
        }
    }
}

pub struct Job<'a> {
    pub node: &'a Node,
    /// The Kubernetes name of its node, as the caller knows it (for the drain before an upgrade).
    pub node_name: &'a str,
    pub desired: &'a [Desired],
    pub given: &'a Given,
    /// The bundle's services table: which files are service binaries, and which services a change restarts.
    pub services: &'a ServicesFile,
    pub connect: &'a ConnectOptions,
    pub dry_run: bool,
    /// `--max-unavailable`: a node that may run pods holds a permit while it is being changed (`None`: the caller
    /// holds one, or nothing runs there yet).
    pub unavailable: Option<Arc<Semaphore>>,
    /// What to do before replacing a running service's binary (cordon and drain, or refuse), and whether the first
    /// boot's reboot may be done at once.
    pub guard: &'a dyn super::guard::Guard,
}

pub async fn sync(job: Job<'_>) -> NodeReport {
    let mut report = NodeReport::new(job.node, Status::Failed);
    if let Err(e) = run(&job, &mut report).await {
        report.status = Status::Failed;
        report.error = Some(e.to_string());
    }
    report
}

fn strings(paths: &[NodePath]) -> Vec<String> {
    paths.iter().map(|p| p.to_string()).collect()
}

async fn run(job: &Job<'_>, report: &mut NodeReport) -> Result<(), SyncError> {
    let profile = &job.node.profile;
    let mut conn = Connection::open(job.node, job.connect).await?;
    let mut sftp = conn.sftp().await?;
    let manifest_path = NodePath::known(NODE_MANIFEST);
    let (journal_path, update_path) = (one_file_journal()?, NodePath::known(NODE_MANIFEST_UPDATE));
    // The one-file journal and the manifest's update are read with the manifest, at once: they cost no round trip
    // of their own.
    let (at_manifest, at_journal, at_update) =
        (profile.sftp_path(&manifest_path), profile.sftp_path(&journal_path), profile.sftp_path(&update_path));
    let (manifest, journal, update) = tokio::try_join!(
        sftp.read_if_exists(&at_manifest),
        sftp.read_if_exists(&at_journal),
        sftp.read_if_exists(&at_update)
    )?;
    let (mut on_node, applied_update) = match &manifest {
        Some(bytes) => NodeManifest::read(bytes, update.as_deref()).map_err(|e| match e {
            UpdateError::Manifest(e) => {
                SyncError::Remote(format!("the node's {NODE_MANIFEST} {e} (remove it to have everything pushed again)"))
            }
            UpdateError::Update(e) => SyncError::Remote(format!(
                "the node's {NODE_MANIFEST_UPDATE} {e} (remove it and {NODE_MANIFEST} to have everything pushed again)"
            )),
        })?,
        None => (NodeManifest::default(), None),
    };
    // A one-file change may add its entries to an update over the manifest only while the manifest holds no journal.
    let base = manifest.filter(|_| on_node.pending.is_none());
    let stale_update = update.is_some() && applied_update.is_none();
    // A one-file change not seen to converge: cut off, or its apply step did not converge.
    let journal_found = journal.is_some();
    if let Some(bytes) = journal {
        let journal = NodeManifest::parse(&bytes).map_err(|e| {
            SyncError::Remote(format!(
                "the node's {journal_path} {e} (remove it and {NODE_MANIFEST} to have everything pushed again)"
            ))
        })?;
        take_journal(&mut on_node, journal);
    }
    // A cut while the manifest, the journal or the update was written leaves its temporary file even when nothing
    // else changed; an update over an earlier manifest (a cut after the manifest replaced it) says nothing any more.
    if !job.dry_run {
        let (manifest_temp, journal_temp, update_temp) = (
            profile.sftp_path(&temp(&manifest_path)?),
            profile.sftp_path(&temp(&journal_path)?),
            profile.sftp_path(&temp(&update_path)?),
        );
        tokio::try_join!(
            sftp.remove_file(&manifest_temp),
            sftp.remove_file(&journal_temp),
            sftp.remove_file(&update_temp)
        )?;
        if stale_update {
            sftp.remove_file(&at_update).await?;
        }
    }
    // Only Windows nodes run services; elsewhere (posix staging hosts) every file is replaced in place.
    let binaries = job.services.binaries();
    let staged = |p: &NodePath| *profile == Profile::Windows && binaries.contains(p);
    // The bundle, payload and credentials every node gets, and what this node alone gets (its Machine).
    let mut desired = job.desired.to_vec();
    desired.extend(plan::identity(job.node.machine.as_deref()));
    desired.sort_by(|a, b| a.path().cmp(b.path()));
    let changes = plan::diff(&desired, &on_node, job.given, &staged);
    report.added = strings(&changes.added);
    report.changed = strings(&changes.changed);
    report.removed = strings(&changes.remove);
    report.kept = changes.kept.iter().map(|f| f.path.to_string()).collect();
    // A delivery is under way until an apply confirmed it: files differ, an earlier sync was cut, or its apply did
    // not converge yet.
    let delivering = changes.files_differ() || on_node.pending.is_some() || !on_node.applied;
    if !delivering && last_pass_converged(&sftp, profile).await? {
        report.status = Status::Unchanged;
        conn.close().await;
        return Ok(());
    }
    if *profile == Profile::Windows && !changes.result.iter().any(|f| f.path.as_str() == AGENT_EXE) {
        return Err(SyncError::Local(format!(
            "the node has no agent: give --agent PATH (wmrender-node.exe) or put it in the payload at C/k/wmrender/wmrender-node.exe (it lands at {AGENT_EXE})"
        )));
    }
    if job.dry_run {
        report.status = Status::WouldChange;
        plan_services(job, &changes, &on_node, report);
        conn.close().await;
        return Ok(());
    }
    let _permit = match &job.unavailable {
        Some(permits) => Some(permits.clone().acquire_owned().await.map_err(|e| SyncError::Local(e.to_string()))?),
        None => None,
    };
    // A changed service binary is an upgrade: the agent stops the service to swap it, under the node's pods. So is
    // a new credential a service reads only at start (hybrid-overlay-node's CA: a networking restart); one the
    // services reload by themselves (kubelet's client CA) restarts nothing.
    let disruptive: Vec<&NodePath> = changes
        .write
        .iter()
        .filter(|d| changes.changed.contains(&d.file.path))
        .filter(|d| {
            binaries.contains(&d.file.path)
                || (d.file.kind == FileKind::Credential && job.services.restarts_for(&d.file.path))
        })
        .map(|d| &d.file.path)
        .collect();
    let held = job.guard.before_upgrade(job.node, job.node_name, &disruptive).await?;
    report.evicted = held.as_ref().map(|h| h.evicted.clone()).unwrap_or_default();
    // The agent's own executable is set aside, not replaced in one rename: never a one-file change.
    let one_file = changes.one_file() && !changes.write.iter().any(|d| d.file.path.as_str() == AGENT_EXE);
    // The manifest's update is read by this wmrender's agent and apply step: on Windows only when this sync delivers
    // the agent (unchanged, or it would not be a one-file change); an agent kept from an older wmrender would not see
    // the update's entries.
    let reads_updates = *profile != Profile::Windows || job.given.agent;
    let one_file = match (one_file && reads_updates, &base) {
        (true, Some(base)) => next_update(base, &on_node, applied_update.as_ref(), &changes),
        _ => None,
    };
    report.bytes_sent = match &one_file {
        Some(update) => push_one_file(profile, &conn, &sftp, &on_node, &changes, update).await?,
        None => push(profile, &conn, &sftp, &on_node, &changes, journal_found, applied_update.is_some()).await?,
    };
    let mut result = apply(&conn, profile).await?;
    // A host that holds kubelet's credentials joined before: whatever the cluster says, pods may run there.
    if failure(&result).is_none()
        && result.reboot_required
        && sftp.read_if_exists(&profile.sftp_path(&NodePath::known(KUBECONFIG))).await?.is_none()
        && let Some(timeout) = job.guard.first_boot_reboot(job.node, job.node_name).await?
    {
        conn.close().await;
        result = first_boot(job, &result.boot_id, timeout).await?;
        report.rebooted = true;
        // The restart cut the connection: the rest of the sync goes over a new one.
        conn = Connection::open(job.node, job.connect).await?;
        sftp = conn.sftp().await?;
    }
    // What the agent did for the delivery, its service's passes since the push included (one may have applied the
    // change before sync's own `apply` ran); for a node whose delivery was already confirmed, this pass's work.
    let done = if delivering { result.since_delivery.clone() } else { Actions::of(&result) };
    report.restarted = done.restarted;
    report.created = done.created;
    report.reboot_required = result.reboot_required;
    report.pending = result.pending.clone();
    report.degraded = result.degraded.clone();
    let status = result.status;
    let failed = failure(&result);
    // Kept in the report when the pass failed too: it names the node (for its taint) and says what failed.
    report.apply = Some(result);
    let converged = status == ApplyStatus::Converged;
    report.bytes_sent += record_apply(profile, &conn, &sftp, &changes, one_file.is_some(), converged).await?;
    if let Some(e) = failed {
        return Err(e);
    }
    match status {
        ApplyStatus::Converged => report.status = Status::Synced,
        ApplyStatus::Pending => report.status = Status::Pending,
        ApplyStatus::Failed => return Err(SyncError::Apply("the agent's pass failed".into())),
    }
    super::guard::after_upgrade(held).await?;
    conn.close().await;
    Ok(())
}

/// Whether the agent's last pass on the node converged: what sync reports as `unchanged`. No record (a node
/// synced before the agent wrote one, or a posix host) counts as converged; a record that does not parse as the
/// agent's result (untrusted input) does not.
async fn last_pass_converged(sftp: &Sftp, profile: &Profile) -> Result<bool, SyncError> {
    let Some(bytes) = sftp.read_if_exists(&profile.sftp_path(&NodePath::known(LAST_PASS))).await? else {
        return Ok(true);
    };
    let text = String::from_utf8_lossy(&bytes);
    Ok(ApplyResult::from_stdout(&text).is_some_and(|r| r.status == ApplyStatus::Converged))
}

/// Asks the node to restart over SSH (the profile's command; it returns before the node goes down).
pub async fn restart(node: &Node, connect: &ConnectOptions) -> Result<(), String> {
    let conn = Connection::open(node, connect).await.map_err(|e| e.to_string())?;
    let out = conn.exec(&node.profile.reboot_command()).await.map_err(|e| e.to_string())?;
    conn.close().await;
    match out.status {
        Some(0) => Ok(()),
        status => Err(format!(
            "exit status {}: {}",
            status.map(|s| s.to_string()).unwrap_or_else(|| "none".into()),
            strip_clixml(&String::from_utf8_lossy(&out.stderr)).trim()
        )),
    }
}

/// How often a node rebooting for its first boot is tried over SSH.
const REBOOT_POLL: Duration = Duration::from_secs(2);

/// The first-boot reboot (the agent asked for one before the host ever joined: nothing runs there yet, so there
/// is nothing to drain): restarts the host over SSH, waits until it answers again from a new boot (`bootId` of the
/// agent's result) within `timeout` (`--reboot-timeout`), and returns the agent's pass in that boot.
async fn first_boot(job: &Job<'_>, old_boot: &str, timeout: Duration) -> Result<ApplyResult, SyncError> {
    restart(job.node, job.connect).await.map_err(|e| SyncError::Remote(format!("the first-boot reboot: {e}")))?;
    let deadline = Instant::now() + timeout;
    let mut last = String::from("no answer yet");
    loop {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            return Err(SyncError::Remote(format!(
                "the node did not come back from its first-boot reboot within --reboot-timeout {}s ({last})",
                timeout.as_secs()
            )));
        };
        tokio::time::sleep(REBOOT_POLL.min(left)).await;
        match Connection::open(job.node, job.connect).await {
            Ok(conn) => {
                let pass = apply(&conn, &job.node.profile).await;
                conn.close().await;
                match pass {
                    Ok(r) if !r.boot_id.is_empty() && r.boot_id != old_boot => return Ok(r),
                    Ok(_) => last = "it has not restarted yet".into(),
                    Err(e) => last = e.to_string(),
                }
            }
            Err(e) => last = e.to_string(),
        }
    }
}

/// `--dry-run`: the services the agent would create (on a fresh node) or restart: those that use a changed file,
/// and their dependents, which Windows stops first.
fn plan_services(job: &Job<'_>, changes: &Changes, on_node: &NodeManifest, report: &mut NodeReport) {
    let services = job.services;
    if on_node.files.is_empty() && on_node.pending.is_none() {
        report.created = services.services.iter().map(|s| s.name.clone()).collect();
        return;
    }
    let touched = changes.touched();
    let mut restart: BTreeSet<&str> = BTreeSet::new();
    for s in services.affected_by(&touched) {
        restart.insert(&s.name);
        restart.extend(services.dependents(&s.name).iter().map(|d| d.name.as_str()));
    }
    // In table order: the order they start in.
    report.restarted =
        services.services.iter().filter(|s| restart.contains(s.name.as_str())).map(|s| s.name.clone()).collect();
}

/// Records the journal, uploads every file to write to a temporary name beside it and swaps it in (or stages it
/// for the agent), removes what left the bundle, and writes the manifest. A connection cut at any point leaves
/// every file old or new and the journal naming every file that may differ from the manifest, so the next sync
/// finishes the job whatever it pushes.
///
/// The manifest's update (`update_found`) goes once the whole manifest holding the journal replaced the one it was
/// written over, and before the manifest loses its journal: never does the node show the manifest without the
/// update's entries, nor an update over a manifest written after it.
async fn push(
    profile: &Profile,
    conn: &Connection,
    sftp: &Sftp,
    on_node: &NodeManifest,
    changes: &Changes,
    journal_found: bool,
    update_found: bool,
) -> Result<u64, SyncError> {
    let manifest_path = NodePath::known(NODE_MANIFEST);
    let mut sent = 0;
    remove_leftovers(profile, sftp, changes).await?;
    // The agent's executable steps aside before the new one goes in (Windows lets a running program be renamed, not
    // overwritten). The copy the last upgrade set aside must go first; while a process still runs it, Windows keeps
    // it, and the sync stops here, before its journal, so the agent goes on maintaining the node.
    let agent = NodePath::known(AGENT_EXE);
    if *profile == Profile::Windows && changes.write.iter().any(|d| d.file.path == agent) {
        let aside = agent.with_suffix(ASIDE_SUFFIX).map_err(local)?;
        sftp.remove_file(&profile.sftp_path(&aside)).await.map_err(|e| {
            SyncError::Remote(format!(
                "{aside}, the agent the last upgrade set aside, cannot be removed ({e}): a process still runs it; \
                 nothing was changed on the node, sync again once the agent service runs the current agent"
            ))
        })?;
    }
    if changes.files_differ() || update_found {
        sent += replace_bytes(conn, sftp, profile, &manifest_path, changes.journal(on_node).to_json()).await?;
    }
    if update_found {
        sftp.remove_file(&profile.sftp_path(&NodePath::known(NODE_MANIFEST_UPDATE))).await?;
    }
    for d in &changes.write {
        let target =
            if d.file.staged { d.file.path.with_suffix(STAGED_SUFFIX).map_err(local)? } else { d.file.path.clone() };
        sent += replace(conn, sftp, profile, &target, &d.source, Some(&d.file.sha256)).await?;
    }
    for path in &changes.remove {
        sftp.remove_file(&profile.sftp_path(path)).await?;
        sftp.remove_file(&profile.sftp_path(&path.with_suffix(STAGED_SUFFIX).map_err(local)?)).await?;
        // A registry host whose last file left the bundle loses its folder too.
        if plan::is_hosts_toml(path)
            && let Some(dir) = path.parent()
        {
            sftp.remove_dir_if_empty(&profile.sftp_path(&dir)).await?;
        }
    }
    sent += replace_bytes(conn, sftp, profile, &manifest_path, changes.done(false).to_json()).await?;
    if journal_found {
        // A one-file change's journal was part of this sync's plan, and the manifest now says "not applied".
        sftp.remove_file(&profile.sftp_path(&one_file_journal()?)).await?;
    }
    Ok(sent)
}

/// The manifest's update for a one-file change over the manifest `base` (its bytes, holding no journal): the
/// update already there with every entry of the result that differs from the node's (the changed file's). Only
/// `staged` marks left from an upgrade the agent finished are not cleared: a `staged` entry whose file is in place
/// is one the agent checks and leaves, and the next whole manifest drops the mark. `None` when a file leaves the
/// manifest, when the update would be half the manifest's size or more (the change is journaled instead, which
/// writes the whole manifest), or when it would not say what the whole manifest would.
fn next_update(
    base: &[u8],
    on_node: &NodeManifest,
    found: Option<&ManifestUpdate>,
    changes: &Changes,
) -> Option<ManifestUpdate> {
    // What an entry says about the file, its `staged` mark aside.
    let key = |f: &NodeFile| (f.path.clone(), f.sha256.clone(), f.size, f.kind);
    let keys = |files: &[NodeFile]| files.iter().map(key).collect::<BTreeSet<_>>();
    let kept: BTreeSet<&NodePath> = changes.result.iter().map(|r| &r.path).collect();
    if on_node.files.iter().any(|f| !kept.contains(&f.path)) {
        return None;
    }
    let known = keys(&on_node.files);
    let mut files: Vec<NodeFile> = found.map(|u| u.files.clone()).unwrap_or_default();
    for r in changes.result.iter().filter(|r| !known.contains(&key(r))) {
        files.retain(|f| f.path != r.path);
        files.push(r.clone());
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    let update = ManifestUpdate::over(base, files, true);
    let bytes = update.to_json();
    if bytes.len() * 2 > base.len() {
        return None;
    }
    let (read, _) = NodeManifest::read(base, Some(&bytes)).ok()?;
    (keys(&read.files) == keys(&changes.result)).then_some(update)
}

/// A one-file change ([`plan::Changes::one_file`]): its journal into [`ONE_FILE_JOURNAL`], the file, and the
/// manifest's update, marked applied; [`record_apply`] removes the journal once the apply step converged. A cut at
/// any point leaves the journal naming the file, which the next sync writes again whatever it pushes, and then
/// runs the apply step.
async fn push_one_file(
    profile: &Profile,
    conn: &Connection,
    sftp: &Sftp,
    on_node: &NodeManifest,
    changes: &Changes,
    update: &ManifestUpdate,
) -> Result<u64, SyncError> {
    remove_leftovers(profile, sftp, changes).await?;
    let journal = NodeManifest { files: Vec::new(), ..changes.journal(on_node) };
    let mut sent = replace_bytes(conn, sftp, profile, &one_file_journal()?, journal.to_json()).await?;
    for d in &changes.write {
        sent += replace(conn, sftp, profile, &d.file.path, &d.source, Some(&d.file.sha256)).await?;
    }
    sent += replace_bytes(conn, sftp, profile, &NodePath::known(NODE_MANIFEST_UPDATE), update.to_json()).await?;
    Ok(sent)
}

/// Records what the apply step said. A journaled change's manifest is marked applied once it converged. A one-file
/// change's update already says so: its journal is removed once that is true, else the journal stays and stands for
/// "not applied" (the next sync writes the file again and runs the apply step again). The update is not written
/// again after the apply step: a pass may have replaced the manifest it was written over meanwhile (a pull).
async fn record_apply(
    profile: &Profile,
    conn: &Connection,
    sftp: &Sftp,
    changes: &Changes,
    one_file: bool,
    converged: bool,
) -> Result<u64, SyncError> {
    let manifest_path = NodePath::known(NODE_MANIFEST);
    match (one_file, converged) {
        (_, false) => Ok(0),
        (false, true) => replace_bytes(conn, sftp, profile, &manifest_path, changes.done(true).to_json()).await,
        (true, true) => {
            sftp.remove_file(&profile.sftp_path(&one_file_journal()?)).await?;
            Ok(0)
        }
    }
}

/// Temporary files a cut left behind: those of every file the last journal named.
async fn remove_leftovers(profile: &Profile, sftp: &Sftp, changes: &Changes) -> Result<(), SyncError> {
    for p in &changes.leftovers {
        sftp.remove_file(&profile.sftp_path(&temp(p)?)).await?;
    }
    Ok(())
}

fn one_file_journal() -> Result<NodePath, SyncError> {
    NodePath::known(NODE_MANIFEST).with_suffix(ONE_FILE_JOURNAL).map_err(local)
}

/// Reads a one-file change's journal into the manifest read from the node: its files are uncertain (written again,
/// their temporary files removed) and its apply step not yet seen to converge, as if the manifest held it.
fn take_journal(on_node: &mut NodeManifest, one_file: NodeManifest) {
    on_node.applied = false;
    let journal = one_file.pending.unwrap_or_default();
    let pending = on_node.pending.get_or_insert_with(Journal::default);
    pending.files.retain(|f| !journal.files.iter().any(|j| j.path == f.path));
    pending.files.extend(journal.files);
    for path in journal.remove {
        if !pending.remove.contains(&path) {
            pending.remove.push(path);
        }
    }
}

fn local(e: impl std::fmt::Display) -> SyncError {
    SyncError::Local(e.to_string())
}

fn temp(path: &NodePath) -> Result<NodePath, SyncError> {
    path.with_suffix(TEMP_SUFFIX).map_err(local)
}

async fn replace_bytes(
    conn: &Connection,
    sftp: &Sftp,
    profile: &Profile,
    target: &NodePath,
    bytes: Vec<u8>,
) -> Result<u64, SyncError> {
    replace(conn, sftp, profile, target, &plan::Source::Bytes(Arc::new(bytes)), None).await
}

async fn replace(
    conn: &Connection,
    sftp: &Sftp,
    profile: &Profile,
    target: &NodePath,
    source: &plan::Source,
    planned_sha256: Option<&str>,
) -> Result<u64, SyncError> {
    if let Some(dir) = target.parent() {
        sftp.mkdir_p(&profile.sftp_path(&dir)).await?;
    }
    let (temp_path, target_path) = (profile.sftp_path(&temp(target)?), profile.sftp_path(target));
    // The bytes are hashed as they leave: the node's manifest records what was planned, so a local file that
    // changed since (a payload rebuilt during the sync) is refused rather than recorded wrongly.
    let uploaded = sftp.upload_hashed(&temp_path, source).await?;
    if let Some(want) = planned_sha256
        && uploaded.sha256 != want
    {
        sftp.remove_file(&temp_path).await?;
        return Err(SyncError::Local(format!(
            "{target} changed on this machine while it was being synced; sync again"
        )));
    }
    let sent = uploaded.bytes;
    // The agent's own executable may be running as a service: Windows lets a running program be renamed, not
    // overwritten, so the old one steps aside first (push removed an older copy; the new agent restarts its
    // service and then removes this one).
    if *profile == Profile::Windows && target.as_str() == AGENT_EXE {
        let aside = profile.sftp_path(&target.with_suffix(ASIDE_SUFFIX).map_err(local)?);
        sftp.rename_if_exists(&target_path, &aside).await?;
    }
    if sftp.posix_rename {
        sftp.posix_rename(&temp_path, &target_path).await?;
    } else {
        let out = conn.exec(&profile.replace_command(&temp(target)?, target)).await?;
        if out.status != Some(0) {
            return Err(SyncError::Remote(format!(
                "replacing {target}: {}",
                strip_clixml(&String::from_utf8_lossy(&out.stderr)).trim()
            )));
        }
    }
    Ok(sent)
}

/// The error of a pass that failed (its errors, and the files missing on the node); `None` for a converged or
/// pending one.
fn failure(r: &ApplyResult) -> Option<SyncError> {
    if r.status != ApplyStatus::Failed && r.errors.is_empty() {
        return None;
    }
    let mut why = r.errors.join("; ");
    if !r.missing.is_empty() {
        why = format!("{why} (missing on the node: {})", r.missing.join(", "));
    }
    let why = if why.trim().is_empty() { "it said so without a reason".to_string() } else { why.trim().to_string() };
    Some(SyncError::Apply(why))
}

/// Runs the apply step and reads its result line, failed or not ([`failure`] says which); no result line is an
/// error.
async fn apply(conn: &Connection, profile: &Profile) -> Result<ApplyResult, SyncError> {
    let out = conn.exec(&profile.apply_command()).await?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = strip_clixml(&String::from_utf8_lossy(&out.stderr));
    match ApplyResult::from_stdout(&stdout) {
        Some(mut r) => {
            // Errors make a pass failed whatever its status says.
            if !r.errors.is_empty() {
                r.status = ApplyStatus::Failed;
            }
            Ok(r)
        }
        None => Err(SyncError::Apply(format!(
            "no result line (exit status {}): {}",
            out.status.map(|s| s.to_string()).unwrap_or_else(|| "none".into()),
            stderr.trim()
        ))),
    }
}
