//! Syncing one node: read its manifest, plan, upload changed files atomically, remove what left the bundle, write
//! the manifest last, run the install step with the changed files, and read its JSON result line.

use super::error::SyncError;
use super::inventory::Node;
use super::plan::{self, Changes, Desired, NODE_MANIFEST, NodeManifest};
use super::profile::{Profile, strip_clixml};
use super::ssh::{ConnectOptions, Connection, Sftp};
use crate::render::node::paths;
use serde::Serialize;
use std::sync::Arc;
use tokio::sync::Semaphore;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Files were pushed and the install step succeeded.
    Synced,
    /// Nothing differed; nothing was pushed or run.
    Unchanged,
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
    pub status: Status,
    pub added: Vec<String>,
    pub changed: Vec<String>,
    pub removed: Vec<String>,
    pub bytes_sent: u64,
    /// Services the change restarts (from the install step; planned ones with `--dry-run`).
    pub restarted: Vec<String>,
    pub reboot_required: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The install step's JSON result line, as it printed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub apply: Option<serde_json::Value>,
}

impl NodeReport {
    pub fn new(node: &Node, status: Status) -> NodeReport {
        NodeReport {
            name: node.name.clone(),
            address: node.address.clone(),
            status,
            added: vec![],
            changed: vec![],
            removed: vec![],
            bytes_sent: 0,
            restarted: vec![],
            reboot_required: false,
            error: None,
            apply: None,
        }
    }
}

pub struct Job<'a> {
    pub node: &'a Node,
    pub desired: &'a [Desired],
    pub bundle: &'a [(String, Vec<u8>)],
    pub connect: &'a ConnectOptions,
    pub dry_run: bool,
    /// `--max-unavailable`: a node holds a permit while it is being changed.
    pub unavailable: Arc<Semaphore>,
}

pub async fn sync(job: Job<'_>) -> NodeReport {
    let mut report = NodeReport::new(job.node, Status::Failed);
    if let Err(e) = run(&job, &mut report).await {
        report.status = Status::Failed;
        report.error = Some(e.to_string());
    }
    report
}

async fn run(job: &Job<'_>, report: &mut NodeReport) -> Result<(), SyncError> {
    let profile = &job.node.profile;
    let conn = Connection::open(job.node, job.connect).await?;
    let sftp = conn.sftp().await?;
    let on_node = match sftp.read_if_exists(&profile.sftp_path(NODE_MANIFEST)).await? {
        // A manifest that does not parse is treated as absent: everything is pushed again.
        Some(bytes) => serde_json::from_slice::<NodeManifest>(&bytes).unwrap_or_default(),
        None => NodeManifest::default(),
    };
    let changes = plan::diff(job.desired, &on_node);
    report.added = changes.add.clone();
    report.changed = changes.change.clone();
    report.removed = changes.remove.clone();
    if changes.is_empty() {
        report.status = Status::Unchanged;
        conn.close().await;
        return Ok(());
    }
    if job.dry_run {
        report.status = Status::WouldChange;
        report.restarted = plan::services_to_restart(job.bundle, &changes.touched());
        conn.close().await;
        return Ok(());
    }
    let _permit = job.unavailable.clone().acquire_owned().await.map_err(|e| SyncError::Local(e.to_string()))?;
    report.bytes_sent = push(job, &conn, &sftp, &on_node, &changes).await?;
    let result = apply(&conn, profile, &changes.touched()).await?;
    report.restarted = strings(&result["restarted"]);
    report.reboot_required = result["rebootRequired"].as_bool().unwrap_or(false);
    report.apply = Some(result);
    report.status = Status::Synced;
    conn.close().await;
    Ok(())
}

/// Uploads every added or changed file to a temporary name beside it and swaps it in, removes what left the
/// bundle, and writes the node manifest last. A connection cut at any point leaves every file either old or new,
/// and the manifest never claims a file that is not as it says: before anything is touched, the entries of the
/// files about to change are dropped from it, so an interrupted sync is finished by the next one whatever it pushes.
async fn push(
    job: &Job<'_>,
    conn: &Connection,
    sftp: &Sftp,
    on_node: &NodeManifest,
    changes: &Changes,
) -> Result<u64, SyncError> {
    let profile = &job.node.profile;
    let manifest_path = profile.sftp_path(NODE_MANIFEST);
    let touched = changes.touched();
    let interim = NodeManifest {
        wmrender: on_node.wmrender.clone(),
        files: on_node.files.iter().filter(|e| !touched.contains(&e.path)).cloned().collect(),
    };
    let mut sent = 0;
    if !on_node.files.is_empty() {
        let bytes = serde_json::to_vec_pretty(&interim).map_err(|e| SyncError::Local(e.to_string()))?;
        sent += replace(conn, sftp, profile, &manifest_path, &plan::Source::Bytes(Arc::new(bytes))).await?;
    }
    let wanted: std::collections::BTreeSet<&String> = changes.add.iter().chain(&changes.change).collect();
    for d in job.desired.iter().filter(|d| wanted.contains(&d.node_path)) {
        let target = profile.sftp_path(&d.node_path);
        sent += replace(conn, sftp, profile, &target, &d.source).await?;
    }
    for path in &changes.remove {
        let target = profile.sftp_path(path);
        sftp.remove_file(&target).await?;
        // A registry host whose last file left the bundle loses its directory too.
        if path.starts_with(paths::REGISTRIES) {
            let dir = &target[..target.rfind('/').unwrap_or(0)];
            sftp.remove_dir_if_empty(dir).await?;
        }
    }
    let manifest =
        serde_json::to_vec_pretty(&plan::manifest_of(job.desired)).map_err(|e| SyncError::Local(e.to_string()))?;
    sent += replace(conn, sftp, profile, &manifest_path, &plan::Source::Bytes(Arc::new(manifest))).await?;
    Ok(sent)
}

async fn replace(
    conn: &Connection,
    sftp: &Sftp,
    profile: &Profile,
    target: &str,
    source: &plan::Source,
) -> Result<u64, SyncError> {
    let dir = &target[..target.rfind('/').unwrap_or(0)];
    sftp.mkdir_p(dir).await?;
    let temp = format!("{target}.wmrender-tmp");
    let sent = sftp.upload(&temp, source).await?;
    if sftp.posix_rename {
        sftp.posix_rename(&temp, target).await?;
    } else {
        let out = conn.exec(&profile.replace_command(&temp, target)).await?;
        if out.status != Some(0) {
            return Err(SyncError::Remote(format!(
                "replacing {target}: {}",
                strip_clixml(&String::from_utf8_lossy(&out.stderr)).trim()
            )));
        }
    }
    Ok(sent)
}

/// Runs the install step and returns its JSON result line (the last stdout line that is a JSON object).
async fn apply(conn: &Connection, profile: &Profile, touched: &[String]) -> Result<serde_json::Value, SyncError> {
    let out = conn.exec(&profile.apply_command(touched)).await?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let result = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<serde_json::Value>(l.trim()).ok().filter(|v| v.is_object()));
    let stderr = strip_clixml(&String::from_utf8_lossy(&out.stderr));
    match (out.status, result) {
        (Some(0), Some(r)) if strings(&r["errors"]).is_empty() => Ok(r),
        (_, Some(r)) => {
            let mut why = strings(&r["errors"]).join("; ");
            let missing = strings(&r["missing"]);
            if !missing.is_empty() {
                why = format!("{why} (missing on the node: {})", missing.join(", "));
            }
            Err(SyncError::Apply(why))
        }
        (status, None) => Err(SyncError::Apply(format!(
            "no result line (exit status {}): {}",
            status.map(|s| s.to_string()).unwrap_or_else(|| "none".into()),
            stderr.trim()
        ))),
    }
}

fn strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array().into_iter().flatten().filter_map(|s| s.as_str().map(str::to_string)).collect()
}
