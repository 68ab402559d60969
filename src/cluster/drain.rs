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
//!   429 (a PodDisruptionBudget allows no disruption now) is tried again with a growing back-off, and the drain
//!   waits until each evicted pod is gone (404, or a new pod of the same name: another uid), all within one bounded
//!   time-out.
//!
//! Everything read from the cluster is untrusted: missing fields are treated as absent, never unwrapped.

use super::{Cluster, ClusterError, api_error};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The annotation that says wmrender cordoned a Node (its value: why). Only such a Node is uncordoned.
pub const CORDONED_BY: &str = "wmrender.dev/cordoned";
/// kubectl's `corev1.MirrorPodAnnotationKey`: the API's copy of a static pod, which the kubelet owns.
const MIRROR_POD: &str = "kubernetes.io/config.mirror";
/// Attempts at a cordon or uncordon patch when another writer keeps changing the Node (409 Conflict).
const PATCH_ATTEMPTS: u32 = 5;
/// How often an evicted pod is looked for while waiting for it to be gone.
const GONE_POLL: Duration = Duration::from_millis(500);
/// The first and the longest pause between evictions answered 429.
const BACKOFF_FIRST: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

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

fn api(method: &str, path: &str, e: kube::Error) -> ClusterError {
    api_error(format!("{method} {path}"), e)
}

/// One API call with a JSON body (or none), answered as JSON.
pub(crate) async fn call(
    cluster: &Cluster,
    method: http::Method,
    path: &str,
    body: Option<(&str, Value)>,
) -> Result<Value, kube::Error> {
    let builder = http::Request::builder().method(method).uri(path);
    let request = match body {
        Some((content_type, v)) => builder
            .header(http::header::CONTENT_TYPE, content_type)
            .body(serde_json::to_vec(&v).map_err(kube::Error::SerdeError)?),
        None => builder.body(Vec::new()),
    }
    .map_err(kube::Error::HttpError)?;
    cluster.client.request::<Value>(request).await
}

fn is_code(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

pub(crate) fn node_path(node: &str) -> String {
    format!("/api/v1/nodes/{node}")
}

/// Whether `name` can be a Node's name (a DNS-1123 subdomain), so that it can go into a URL path as it is. Names come
/// from the inventory or the BYOH list (addresses), not all of which are.
pub fn can_be_node_name(name: &str) -> bool {
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
    !name.is_empty()
        && name.len() <= 253
        && name.chars().all(ok_char)
        && name.split('.').all(|l| !l.is_empty() && l.len() <= 63 && !l.starts_with('-') && !l.ends_with('-'))
}

/// The Node, or `None` when the cluster has no Node of that name (or none can have it).
pub async fn get_node(cluster: &Cluster, node: &str) -> Result<Option<Value>, ClusterError> {
    if !can_be_node_name(node) {
        return Ok(None);
    }
    let path = node_path(node);
    match call(cluster, http::Method::GET, &path, None).await {
        Ok(v) => Ok(Some(v)),
        Err(e) if is_code(&e, 404) => Ok(None),
        Err(e) => Err(api("GET", &path, e)),
    }
}

/// Patches the Node with its current resourceVersion as a precondition, reading it again after a 409.
/// `change` sees the Node as read and returns the patch, or `None` when nothing is to be done.
async fn patch_node(
    cluster: &Cluster,
    node: &str,
    change: impl Fn(&Value) -> Option<Value>,
) -> Result<Option<Value>, ClusterError> {
    let path = node_path(node);
    let mut last = None;
    for _ in 0..PATCH_ATTEMPTS {
        let current = call(cluster, http::Method::GET, &path, None).await.map_err(|e| api("GET", &path, e))?;
        let Some(mut patch) = change(&current) else { return Ok(None) };
        patch["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
        match call(cluster, http::Method::PATCH, &path, Some(("application/merge-patch+json", patch))).await {
            Ok(v) => return Ok(Some(v)),
            Err(e) if is_code(&e, 409) => last = Some(e),
            Err(e) => return Err(api("PATCH", &path, e)),
        }
    }
    let why = last.map(|e| e.to_string()).unwrap_or_default();
    Err(ClusterError::Api {
        what: format!("PATCH {path}"),
        why: format!("the Node kept changing under {PATCH_ATTEMPTS} attempts (409 Conflict): {why}"),
    })
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
    patch_node(cluster, node, |current| {
        if unschedulable(current) {
            // A cordon of ours left by an earlier run that stopped is still ours to undo.
            ours.store(cordoned_by_us(current), Ordering::Relaxed);
            return None;
        }
        ours.store(true, Ordering::Relaxed);
        Some(json!({ "metadata": { "annotations": { CORDONED_BY: why } }, "spec": { "unschedulable": true } }))
    })
    .await?;
    Ok(Cordon { node: node.to_string(), ours: ours.into_inner() })
}

/// Undoes a cordon wmrender made (and only while the annotation says so: a user who took the Node over by removing
/// it keeps it as they left it).
pub async fn uncordon(cluster: &Cluster, cordon: &Cordon) -> Result<(), ClusterError> {
    if !cordon.ours {
        return Ok(());
    }
    patch_node(cluster, &cordon.node, |current| {
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
async fn verdict(cluster: &Cluster, pod: &Value, force: bool) -> Result<Verdict, ClusterError> {
    if let Some(owner) = controller(pod).filter(|o| o["kind"] == "DaemonSet")
        && !finished(pod)
    {
        let namespace = pod["metadata"]["namespace"].as_str().unwrap_or("");
        let name = owner["name"].as_str().unwrap_or("");
        let path = format!("/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}");
        return match call(cluster, http::Method::GET, &path, None).await {
            Ok(_) => Ok(Verdict::Skip("DaemonSet-managed")),
            Err(e) if is_code(&e, 404) && force => Ok(Verdict::Evict),
            Err(e) if is_code(&e, 404) => {
                Ok(Verdict::Refuse(format!("its DaemonSet {name} is gone (use --force to evict the orphan)")))
            }
            Err(e) => Err(api("GET", &path, e)),
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
    let list = call(cluster, http::Method::GET, &path, None).await.map_err(|e| api("GET", &path, e))?;
    let mut drained = Drained::default();
    let mut evict = Vec::new();
    let mut refused = Vec::new();
    for pod in list["items"].as_array().into_iter().flatten() {
        match verdict(cluster, pod, opts.force).await? {
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
    let mut pause = BACKOFF_FIRST;
    loop {
        match call(cluster, http::Method::POST, &path, Some(("application/json", body.clone()))).await {
            Ok(_) => break,
            Err(e) if is_code(&e, 404) => return Ok(()),
            Err(e) if is_code(&e, 429) => {
                let Some(left) = remaining(deadline) else {
                    let why = match &e {
                        kube::Error::Api(s) => s.message.clone(),
                        other => other.to_string(),
                    };
                    return Err(Failure::TimedOut(format!("{namespace}/{name} could not be evicted: {why}")));
                };
                tokio::time::sleep(pause.min(left)).await;
                pause = (pause * 2).min(BACKOFF_MAX);
            }
            Err(e) => return Err(Failure::Other(api("POST", &path, e))),
        }
    }
    loop {
        match call(cluster, http::Method::GET, &pod_path, None).await {
            Err(e) if is_code(&e, 404) => return Ok(()),
            Ok(p) if p["metadata"]["uid"].as_str().unwrap_or("") != uid => return Ok(()),
            Ok(_) => {}
            Err(e) => return Err(Failure::Other(api("GET", &pod_path, e))),
        }
        let Some(left) = remaining(deadline) else {
            return Err(Failure::TimedOut(format!("{namespace}/{name} was evicted but is still terminating")));
        };
        tokio::time::sleep(GONE_POLL.min(left)).await;
    }
}

/// The time left before `deadline`, `None` once it has passed (so the last try is made at the deadline itself).
pub(crate) fn remaining(deadline: Instant) -> Option<Duration> {
    deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero())
}

#[cfg(test)]
mod tests {
    use super::can_be_node_name;

    #[test]
    fn node_names() {
        for ok in ["win-a", "ip-10-0-0-5.ec2.internal", "10.0.0.5", "node-00"] {
            assert!(can_be_node_name(ok), "{ok}");
        }
        for bad in ["", "Win-A", "a/b", "a?watch=1", "fd00::5", "-a", "a..b", "a b"] {
            assert!(!can_be_node_name(bad), "{bad}");
        }
    }
}
