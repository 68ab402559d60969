//! Cordon, drain and uncordon one Node, as `oc adm cordon`, `oc adm drain --ignore-daemonsets
//! --delete-emptydir-data` and `oc adm uncordon` do (k8s.io/kubectl pkg/drain: drain.go and filters.go).
//!
//! - **Cordon** sets `spec.unschedulable` with a merge patch that carries the Node's `metadata.resourceVersion` as a
//!   precondition (a concurrent writer makes it 409, and it is read and tried again, a bounded number of times), and
//!   records in the annotation [`CORDONED_BY`] that wmrender did it. A Node that was already unschedulable without
//!   that annotation was cordoned by someone else: it is left alone, and never uncordoned.
//! - **Drain** lists the pods bound to the Node and applies kubectl's filters in kubectl's order: a pod controlled by
//!   a DaemonSet that exists is skipped (`--ignore-daemonsets`; a finished one is removed, an orphaned one only with
//!   `--force`), a mirror (static) pod is skipped, a pod with emptyDir volumes is evicted (`--delete-emptydir-data`),
//!   a running pod that declares no controller is refused unless `--force`. Any refusal stops the drain before
//!   anything is evicted. Every other pod is evicted through the Eviction API (policy/v1, `pods/{name}/eviction`);
//!   429 (a PodDisruptionBudget allows no disruption now) is tried again with the client's back-off
//!   ([`super::client`]: 0.5 s doubling to 5 s), and the drain waits until each evicted pod is gone (404, or a new
//!   pod of the same name: another uid), every call within one bounded time-out (`--drain-timeout`).
//!
//! Everything read from the cluster is untrusted: missing fields are treated as absent, never unwrapped.

use super::nodes::{self, remaining};
use super::{API_TIMEOUT, Body, CallError, Cluster, ClusterError};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The annotation that says wmrender cordoned a Node (its value: why). Only such a Node is uncordoned.
pub const CORDONED_BY: &str = "wmrender.dev/cordoned";
/// kubectl's `corev1.MirrorPodAnnotationKey`: the API's copy of a static pod, which the kubelet owns.
const MIRROR_POD: &str = "kubernetes.io/config.mirror";
/// How often an evicted pod is looked for while waiting for it to be gone.
const GONE_POLL: Duration = Duration::from_millis(500);

#[derive(Clone, Debug)]
pub struct DrainOptions {
    /// `--force`: also evict pods that declare no controller (nothing recreates them) and orphaned DaemonSet pods.
    pub force: bool,
    /// The bound on evicting every pod and waiting for them to be gone.
    pub timeout: Duration,
}

/// A cordon: the Node, and whether wmrender made it (so that uncordon undoes only its own).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cordon {
    pub node: String,
    pub ours: bool,
}

/// What a drain did.
#[derive(Clone, Debug, Default)]
pub struct Drained {
    /// `namespace/name` of every evicted pod, now gone.
    pub evicted: Vec<String>,
    /// `namespace/name` of the pods left on the Node, with why (DaemonSet, mirror pod).
    pub skipped: Vec<String>,
}

/// Why a Node could not be drained.
#[derive(Debug, thiserror::Error)]
pub enum DrainError {
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// kubectl's filter errors: pods a drain may not remove without `--force`. Nothing was evicted.
    #[error("cannot drain {node}: {pods}")]
    Refused { node: String, pods: String },
    #[error("draining {node} did not finish within {secs}s: {why}")]
    TimedOut { node: String, secs: u64, why: String },
}

fn unschedulable(node: &Value) -> bool {
    node["spec"]["unschedulable"].as_bool() == Some(true)
}

fn cordoned_by_us(node: &Value) -> bool {
    node["metadata"]["annotations"][CORDONED_BY].is_string()
}

/// Cordons the Node (`why` goes into the annotation). A Node someone else cordoned stays theirs.
pub async fn cordon(cluster: &Cluster, node: &str, why: &str) -> Result<Cordon, ClusterError> {
    // Atomic only because the future must be Send: the closure runs on this task, one call at a time.
    let ours = AtomicBool::new(false);
    nodes::patch(cluster, node, Instant::now() + API_TIMEOUT, |current| {
        if unschedulable(current) {
            // A cordon of ours left by an earlier run that stopped is still ours to undo.
            ours.store(cordoned_by_us(current), Ordering::Relaxed);
            return None;
        }
        ours.store(true, Ordering::Relaxed);
        Some(json!({ "metadata": { "annotations": { CORDONED_BY: why } }, "spec": { "unschedulable": true } }))
    })
    .await?
    .ok_or_else(|| ClusterError::Api {
        what: format!("cordoning {node}"),
        why: "the cluster has no Node of that name".into(),
    })?;
    Ok(Cordon { node: node.to_string(), ours: ours.into_inner() })
}

/// Undoes a cordon wmrender made (and only while the annotation says so: a user who took the Node over by removing
/// it keeps it as they left it).
pub async fn uncordon(cluster: &Cluster, cordon: &Cordon) -> Result<(), ClusterError> {
    if !cordon.ours {
        return Ok(());
    }
    nodes::patch(cluster, &cordon.node, Instant::now() + API_TIMEOUT, |current| {
        cordoned_by_us(current)
            .then(|| json!({ "metadata": { "annotations": { CORDONED_BY: null } }, "spec": { "unschedulable": null } }))
    })
    .await?;
    Ok(())
}

fn pod_name(pod: &Value) -> String {
    format!(
        "{}/{}",
        pod["metadata"]["namespace"].as_str().unwrap_or(""),
        pod["metadata"]["name"].as_str().unwrap_or("")
    )
}

fn finished(pod: &Value) -> bool {
    matches!(pod["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
}

/// metav1.GetControllerOf: the owner reference with `controller: true`.
fn controller(pod: &Value) -> Option<&Value> {
    pod["metadata"]["ownerReferences"].as_array()?.iter().find(|r| r["controller"].as_bool() == Some(true))
}

/// kubectl's verdict on one pod.
enum Verdict {
    Evict,
    Skip(&'static str),
    Refuse(String),
}

/// kubectl's filters (filters.go makeFilters) with IgnoreAllDaemonSets and DeleteEmptyDirData set, in its order:
/// daemonSet, mirrorPod, localStorage (always allowed here), unreplicated.
async fn verdict(cluster: &Cluster, pod: &Value, force: bool, deadline: Instant) -> Result<Verdict, ClusterError> {
    if let Some(owner) = controller(pod).filter(|o| o["kind"] == "DaemonSet")
        && !finished(pod)
    {
        let namespace = pod["metadata"]["namespace"].as_str().unwrap_or("");
        let name = owner["name"].as_str().unwrap_or("");
        let path = format!("/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}");
        return match cluster.get_until(&path, deadline).await? {
            Some(_) => Ok(Verdict::Skip("DaemonSet-managed")),
            None if force => Ok(Verdict::Evict),
            None => Ok(Verdict::Refuse(format!("its DaemonSet {name} is gone (use --force to evict the orphan)"))),
        };
    }
    if pod["metadata"]["annotations"][MIRROR_POD].is_string() {
        return Ok(Verdict::Skip("mirror pod"));
    }
    if finished(pod) || controller(pod).is_some() || force {
        return Ok(Verdict::Evict);
    }
    Ok(Verdict::Refuse("it declares no controller (use --force to delete it for good)".into()))
}

/// Evicts every pod of the Node that a drain removes, and waits until they are gone.
pub async fn drain(cluster: &Cluster, node: &str, opts: &DrainOptions) -> Result<Drained, DrainError> {
    let deadline = Instant::now() + opts.timeout;
    let path = format!("/api/v1/pods?fieldSelector=spec.nodeName%3D{node}");
    let list = cluster.get_until(&path, deadline).await?.unwrap_or(Value::Null);
    let mut drained = Drained::default();
    let mut evict = Vec::new();
    let mut refused = Vec::new();
    for pod in list["items"].as_array().into_iter().flatten() {
        match verdict(cluster, pod, opts.force, deadline).await? {
            Verdict::Evict => evict.push(pod.clone()),
            Verdict::Skip(why) => drained.skipped.push(format!("{} ({why})", pod_name(pod))),
            Verdict::Refuse(why) => refused.push(format!("{}: {why}", pod_name(pod))),
        }
    }
    if !refused.is_empty() {
        return Err(DrainError::Refused { node: node.to_string(), pods: refused.join("; ") });
    }
    // All at once, as kubectl does: one pod waiting on its budget does not hold up the others.
    let mut tasks = tokio::task::JoinSet::new();
    for pod in evict {
        let cluster = cluster.clone();
        tasks.spawn(async move { evict_and_wait(&cluster, &pod, deadline).await.map(|()| pod_name(&pod)) });
    }
    let (mut errors, mut timeouts) = (Vec::new(), Vec::new());
    while let Some(done) = tasks.join_next().await {
        match done {
            Ok(Ok(name)) => drained.evicted.push(name),
            Ok(Err(Failure::TimedOut(why))) => timeouts.push(why),
            Ok(Err(Failure::Other(e))) => errors.push(e),
            Err(e) => errors.push(ClusterError::Api { what: "an eviction".into(), why: e.to_string() }),
        }
    }
    drained.evicted.sort();
    // An API failure says more than a time-out.
    if let Some(e) = errors.into_iter().next() {
        return Err(e.into());
    }
    if !timeouts.is_empty() {
        timeouts.sort();
        return Err(DrainError::TimedOut {
            node: node.to_string(),
            secs: opts.timeout.as_secs(),
            why: timeouts.join("; "),
        });
    }
    Ok(drained)
}

enum Failure {
    TimedOut(String),
    Other(ClusterError),
}

async fn evict_and_wait(cluster: &Cluster, pod: &Value, deadline: Instant) -> Result<(), Failure> {
    let namespace = pod["metadata"]["namespace"].as_str().unwrap_or("");
    let name = pod["metadata"]["name"].as_str().unwrap_or("");
    let uid = pod["metadata"]["uid"].as_str().unwrap_or("");
    let pod_path = format!("/api/v1/namespaces/{namespace}/pods/{name}");
    let path = format!("{pod_path}/eviction");
    let body = json!({
        "apiVersion": "policy/v1", "kind": "Eviction", "metadata": { "name": name, "namespace": namespace },
    });
    // A 429 (a PodDisruptionBudget allows no disruption now) is transient: the client tries again with its
    // back-off until the drain's deadline, then answers the last 429.
    match cluster.call(http::Method::POST, &path, Some(Body::json(&body)), deadline).await {
        Ok(_) => {}
        Err(e) if e.is(404) => return Ok(()),
        Err(CallError::Status { code: 429, message, .. }) => {
            return Err(Failure::TimedOut(format!("{namespace}/{name} could not be evicted: {message}")));
        }
        Err(e @ CallError::NoAnswer(_)) if remaining(deadline).is_none() => {
            return Err(Failure::TimedOut(format!("{namespace}/{name} could not be evicted: {e}")));
        }
        Err(e) => return Err(Failure::Other(cluster.failed(&http::Method::POST, &path, e))),
    }
    loop {
        match cluster.call(http::Method::GET, &pod_path, None, deadline).await {
            Err(e) if e.is(404) => return Ok(()),
            Ok(p) if p["metadata"]["uid"].as_str().unwrap_or("") != uid => return Ok(()),
            Ok(_) => {}
            Err(CallError::NoAnswer(_)) if remaining(deadline).is_none() => {}
            Err(e) => return Err(Failure::Other(cluster.failed(&http::Method::GET, &pod_path, e))),
        }
        let Some(left) = remaining(deadline) else {
            return Err(Failure::TimedOut(format!("{namespace}/{name} was evicted but is still terminating")));
        };
        tokio::time::sleep(GONE_POLL.min(left)).await;
    }
}
