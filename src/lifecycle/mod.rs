//! A Windows node's life without the operator, one set of steps for `wmrender sync` and `wmrender controller`:
//!
//! ```text
//! a Machine is Provisioned (an address, no Node yet)  or  a BYOH host is in the rendered set
//!   → targets: the desired state read whole (Machines, Git's BYOH hosts, the inventory), or an error   targets.rs
//!   → its login record written (how wmrender logs in), before the first contact                       login.rs
//!   → delivery over SSH: bundle, agent, credentials; the agent's pass ([`deliver`]);                   delivery/
//!     the first boot's reboot when nothing runs there yet                                               guard.rs
//!   → the record completed: the node name the agent reported, the host key verified
//!   → kubelet registers (with wmrender's taint): its CSRs approved for the names vouched for it       join.rs
//!   → the agent reports on its own Node; one rule puts the taint on or takes it off                     taint.rs
//!   → changes later: files by hash, a binary upgrade on a drained node (guard.rs), reboots              reboot.rs
//!   → a host that leaves Git: drained, deconfigured at its recorded login, its Node deleted, within
//!     the prune budget                                                                                  prune.rs
//! ```
//!
//! The decisions are pure functions of what was read; the steps that carry them out sit beside them. `sync` runs
//! them once over every target ([`crate::sync`]); the controller runs them per target as the cluster changes
//! ([`crate::controller`]). Identity comes only from what a node cannot write: its Machine, Git, and its login
//! record; never its Node's own addresses or annotations.

pub mod guard;
#[cfg(feature = "cluster")]
pub mod join;
pub mod login;
pub mod machines;
pub mod prune;
#[cfg(feature = "cluster")]
pub mod reboot;
pub mod taint;
pub mod targets;

use crate::cluster::Cluster;
#[cfg(feature = "cluster")]
use crate::delivery::MintedToken;
use crate::delivery::node::{NodeReport, Status};
#[cfg(feature = "cluster")]
use crate::delivery::secrets::Fetched;
use crate::delivery::secrets::{SecretFiles, Secrets};
use crate::delivery::{Credentials, DeliveryOptions, Permit, Rendered, Session, ssh};
use crate::error::Error;
#[cfg(feature = "cluster")]
use login::Login;
use login::Logins;
use std::sync::Arc;
#[cfg(feature = "cluster")]
use std::time::Instant;
use targets::Target;
use wmrender_contract::Mode;

/// Prepares a run's delivery: the SSH key (first: a wrong key file should not wait for anything), the credentials
/// (from `files`, and from the cluster when there is one: fetched, and the cloud-node-manager's token minted), the
/// guard of disruptive changes, and the files every node should hold. Returns the session and the notes the
/// credentials left (what could not be fetched without failing).
#[cfg_attr(not(feature = "cluster"), allow(unused_mut, unused_variables))]
pub async fn session(
    opts: &DeliveryOptions,
    mut files: SecretFiles,
    rendered: &Rendered,
    cluster: Option<&Cluster>,
    guard: guard::DrainSettings,
    allow_undrained: bool,
    host_keys: Option<Arc<ssh::HostKeyBook>>,
) -> Result<(Session, Vec<String>), Error> {
    let key = ssh::load_identity(&opts.access.identity)?;
    let without_operator = rendered.mode() == Some(Mode::WithoutOperator);
    #[cfg(feature = "cluster")]
    if let Some(c) = cluster {
        let fetched = crate::cluster::credentials::fetch(c, without_operator).await?;
        files.fetched = Fetched { files: fetched.files, pull_secret: fetched.pull_secret, notes: fetched.notes };
    }
    let mut notes = files.fetched.notes.clone();
    if let Some(dir) = &opts.payload {
        // The payload as its list says, and fit for the cluster the bundle is rendered for: refused before any node
        // is contacted.
        let list = crate::payload::list::checked(dir)?;
        if let Some(minor) = rendered.manifest.kubernetes_minor() {
            notes.extend(crate::payload::list::fits(&list, minor, dir)?);
        }
    }
    let pull_secret = files.has_pull_secret();
    let mut secrets = Secrets::load(&files)?;
    #[cfg(feature = "cluster")]
    let token = match cluster {
        Some(c) if without_operator && !opts.dry_run => mint_token(c, rendered, &mut secrets).await?,
        _ => None,
    };
    #[cfg(not(feature = "cluster"))]
    let (token, _) = (None, without_operator);
    let connect = crate::delivery::connect_options(key, &opts.access, opts.dry_run, host_keys);
    let guard: Arc<dyn crate::delivery::guard::Guard> = match cluster {
        #[cfg(feature = "cluster")]
        Some(c) => Arc::new(guard::ClusterGuard { cluster: c.clone(), settings: guard }),
        #[cfg(not(feature = "cluster"))]
        Some(c) => match *c {},
        None => Arc::new(crate::delivery::guard::NoCluster { allow_undrained }),
    };
    let session = Session::prepare(opts, rendered, Credentials { secrets, pull_secret, token }, connect, guard)?;
    Ok((session, notes))
}

/// The Azure cloud-node-manager's kubeconfig with a fresh token, when the rendered services wait for it. A
/// TokenRequest issues a credential: never for a dry run, which keeps the node's kubeconfig as it is.
#[cfg(feature = "cluster")]
async fn mint_token(
    cluster: &Cluster,
    rendered: &Rendered,
    secrets: &mut Secrets,
) -> Result<Option<MintedToken>, Error> {
    use wmrender_contract::paths::{BOOTSTRAP_KUBECONFIG, CLOUD_NODE_MANAGER_KUBECONFIG, CLOUD_NODE_MANAGER_TOKEN};
    let path = wmrender_contract::NodePath::known(CLOUD_NODE_MANAGER_KUBECONFIG);
    if !rendered.services.services.iter().any(|s| s.requires.contains(&path)) {
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
    let minted_at = Instant::now();
    let minted = crate::cluster::token::cloud_node_manager_credentials(cluster, &endpoint).await?;
    secrets.files.insert(CLOUD_NODE_MANAGER_KUBECONFIG, minted.kubeconfig);
    secrets.files.insert(CLOUD_NODE_MANAGER_TOKEN, minted.token);
    Ok(Some(MintedToken { minted: minted_at, lifetime: minted.lifetime }))
}

/// Whether a sync reached the node and left it configured or on its way (its files are there).
pub fn reached(report: &NodeReport) -> bool {
    matches!(report.status, Status::Synced | Status::Unchanged | Status::Pending)
}

/// What one target's delivery came to.
pub struct Delivered {
    pub report: NodeReport,
    /// The Kubernetes name of its node after the delivery: the one its agent reported when it could be taken, else
    /// the target's.
    pub node_name: String,
}

/// One target's delivery with its login record around it: written before the first contact (a host that cannot be
/// recorded is not contacted: it could not be undone), and completed once the contact learned the node name and
/// the host key. Without a cluster (`logins` `None`) and in a dry run, only the delivery.
#[cfg_attr(not(feature = "cluster"), allow(unused_mut))]
pub async fn deliver(
    cluster: Option<&Cluster>,
    logins: Option<&Logins>,
    session: &Session,
    target: &Target,
    permit: Permit,
    announce: bool,
) -> Delivered {
    let logins = logins.filter(|_| !session.dry_run());
    #[cfg(feature = "cluster")]
    if let Some(logins) = logins {
        let before = Login::of(&target.name, &target.reach, logins.get(&target.name).as_ref());
        if let Err(e) = logins.write(before).await {
            let mut report = NodeReport::new(&target.reach, Status::Failed);
            report.error = Some(format!(
                "not contacted: its login record (how wmrender reaches it, so that it can be undone) could not be \
                 written: {e}"
            ));
            return Delivered { report, node_name: target.node_name.clone() };
        }
    }
    let mut report = session.sync_node(&target.reach, &target.node_name, permit, announce).await;
    let reported = report.apply.as_ref().map(|a| a.node_name.clone()).filter(|n| !n.is_empty());
    let mut node_name = target.node_name.clone();
    match (logins, cluster) {
        #[cfg(feature = "cluster")]
        (Some(logins), Some(cluster)) if reached(&report) => {
            match learned(cluster, logins, session, target, &report).await {
                Ok(name) => node_name = name,
                Err(e) => report.degraded.push(format!("its login record was not completed: {e}")),
            }
        }
        // Without the cluster nothing acts on the name: what the agent said is shown as it is.
        (None, _) => node_name = reported.unwrap_or(node_name),
        _ => {}
    }
    Delivered { report, node_name }
}

/// Completes a target's login record after a sync reached it: the host keys the connection verified, and the node
/// name its agent reported (else its own name) — taken only when it can be a Node's name and no Node has it, or the
/// Node that has it is one wmrender manages (a host cannot name itself after a Node that is not wmrender's, such as a
/// control-plane node), and never over its Machine's `nodeRef`. Returns the node name recorded.
#[cfg(feature = "cluster")]
async fn learned(
    cluster: &Cluster,
    logins: &Logins,
    session: &Session,
    target: &Target,
    report: &NodeReport,
) -> Result<String, String> {
    let mut login = Login::of(&target.name, &target.reach, logins.get(&target.name).as_ref());
    login.host_keys = ssh::pinned_host_keys(&target.reach, session.connect());
    use crate::cluster::nodes::{self, can_be_node_name};
    use crate::cluster::{API_TIMEOUT, MANAGED};
    // What the agent reported, else (an agent that reports none: a posix staging host) the target's own name, as the
    // inventory names its Node.
    let reported = report
        .apply
        .as_ref()
        .map(|a| a.node_name.as_str())
        .filter(|n| !n.is_empty())
        .or(login.node_name.is_none().then_some(target.node_name.as_str()));
    let linked = target.machine().and_then(|m| m.node_ref.clone());
    let mut refused = None;
    match (reported, linked) {
        (_, Some(node_ref)) => login.node_name = Some(node_ref),
        (Some(name), None) if login.node_name.as_deref() != Some(name) => {
            if !can_be_node_name(name) {
                refused = Some(format!("its agent reported `{}`, which cannot be a Node's name", name.escape_debug()));
            } else {
                let existing =
                    nodes::get(cluster, name, Instant::now() + API_TIMEOUT).await.map_err(|e| e.to_string())?;
                if existing.as_ref().is_some_and(|n| n["metadata"]["labels"][MANAGED] != "true") {
                    refused = Some(format!(
                        "its agent reported the node name {name}, which a Node wmrender does not manage has; not taken"
                    ));
                } else {
                    login.node_name = Some(name.to_string());
                }
            }
        }
        _ => {}
    }
    let name = login.node_name.clone().unwrap_or_else(|| target.node_name.clone());
    logins.write(login).await.map_err(|e| e.to_string())?;
    match refused {
        Some(why) => Err(why),
        None => Ok(name),
    }
}
