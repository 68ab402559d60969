//! The cluster as the controller sees it: the Windows Nodes, the Windows Machines and the CSRs, each kept by a
//! Kubernetes watch (kube-runtime's watcher: resumed from its last resource version when the connection drops,
//! listed again when the API server answers 410 Gone) into an in-memory store. Every change that can change a
//! decision wakes the reconcile loop; the loop reads the stores, so a quiet cluster costs the API server nothing
//! but the open watches. A Node's status report that only moves its heartbeat times (kubelet's, every few minutes
//! on every node) wakes nothing: at 500 nodes those alone would reconcile the fleet about twice a second.

use crate::cluster::Cluster;
use crate::cluster::machines::{NAMESPACE, OS_LABEL};
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::reflector::{Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// The watched objects.
#[derive(Clone)]
pub struct View {
    nodes: Store<DynamicObject>,
    machines: Store<DynamicObject>,
    csrs: Store<DynamicObject>,
    /// Why the Machines' watch last failed, until it delivers again: its store may then miss a change, so the
    /// desired state reads the Machines afresh meanwhile.
    machines_failing: Failing,
}

/// A watch's last error, cleared by its next event.
type Failing = Arc<std::sync::Mutex<Option<String>>>;

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    let api_version = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    ApiResource { group: group.into(), version: version.into(), api_version, kind: kind.into(), plural: plural.into() }
}

/// What of an object the controller's decisions read; `None`: all of it.
type Relevant = Option<fn(&DynamicObject) -> String>;

/// A Node as the decisions read it: its labels, annotations and spec (taints, cordon, provider ID), its addresses,
/// and its conditions without their times. Not its heartbeats, images, volumes or capacity.
fn node_relevant(node: &DynamicObject) -> String {
    let status = &node.data["status"];
    let conditions: Vec<Value> = status["conditions"]
        .as_array()
        .map(|l| l.iter().map(|c| serde_json::json!([c["type"], c["status"], c["reason"], c["message"]])).collect())
        .unwrap_or_default();
    let relevant = serde_json::json!([
        node.metadata.labels,
        node.metadata.annotations,
        node.metadata.deletion_timestamp,
        node.data["spec"],
        status["addresses"],
        conditions,
    ]);
    relevant.to_string()
}

/// One watch into a store. An event notifies `changed` unless `relevant` says nothing the decisions read changed;
/// a (re)listing always does. A failed watch is retried with kube-runtime's back-off (and counted in `failed`).
fn watch(
    api: Api<DynamicObject>,
    config: watcher::Config,
    ar: ApiResource,
    relevant: Relevant,
    changed: Arc<Notify>,
    failed: Arc<dyn Fn(String) + Send + Sync>,
    failing: Failing,
) -> (Store<DynamicObject>, JoinHandle<()>) {
    let writer = Writer::new(ar);
    let store = writer.as_reader();
    let task = tokio::spawn(async move {
        let set = |why: Option<String>| *failing.lock().unwrap_or_else(|p| p.into_inner()) = why;
        // What each object looked like to the decisions at the last notification, by name.
        let mut seen: HashMap<String, String> = HashMap::new();
        watcher(api, config)
            .default_backoff()
            .reflect(writer)
            .for_each(|event| {
                set(event.as_ref().err().map(|e| e.to_string()));
                match event {
                    Ok(watcher::Event::Apply(o)) | Ok(watcher::Event::InitApply(o)) => {
                        let name = o.metadata.name.clone().unwrap_or_default();
                        match relevant.map(|r| r(&o)) {
                            Some(now) if seen.get(&name) == Some(&now) => {}
                            Some(now) => {
                                seen.insert(name, now);
                                changed.notify_one();
                            }
                            None => changed.notify_one(),
                        }
                    }
                    Ok(watcher::Event::Delete(o)) => {
                        seen.remove(&o.metadata.name.clone().unwrap_or_default());
                        changed.notify_one();
                    }
                    Ok(watcher::Event::Init) | Ok(watcher::Event::InitDone) => changed.notify_one(),
                    Err(e) => failed(e.to_string()),
                }
                async {}
            })
            .await;
    });
    (store, task)
}

impl View {
    /// Starts the watches. `failed` hears of every watch error (the watch goes on after a back-off).
    pub fn start(
        cluster: &Cluster,
        changed: Arc<Notify>,
        failed: Arc<dyn Fn(String) + Send + Sync>,
    ) -> (View, Vec<JoinHandle<()>>) {
        let client = cluster.kube_client();
        let node = resource("", "v1", "Node", "nodes");
        let machine = resource("machine.openshift.io", "v1beta1", "Machine", "machines");
        let csr = resource("certificates.k8s.io", "v1", "CertificateSigningRequest", "certificatesigningrequests");
        let windows = watcher::Config::default().labels("kubernetes.io/os=windows");
        let nodes_api = Api::all_with(client.clone(), &node);
        let unwatched = || Failing::default();
        let (nodes, a) =
            watch(nodes_api, windows, node, Some(node_relevant), changed.clone(), failed.clone(), unwatched());
        let machines_failing = Failing::default();
        let (machines, b) = watch(
            Api::namespaced_with(client.clone(), NAMESPACE, &machine),
            watcher::Config::default().labels(&format!("{OS_LABEL}=Windows")),
            machine,
            None,
            changed.clone(),
            failed.clone(),
            machines_failing.clone(),
        );
        let (csrs, c) =
            watch(Api::all_with(client, &csr), watcher::Config::default(), csr, None, changed, failed, unwatched());
        (View { nodes, machines, csrs, machines_failing }, vec![a, b, c])
    }

    /// Waits until every watch has listed once.
    pub async fn ready(&self) {
        let _ = self.nodes.wait_until_ready().await;
        let _ = self.machines.wait_until_ready().await;
        let _ = self.csrs.wait_until_ready().await;
    }

    fn values(store: &Store<DynamicObject>) -> Vec<Value> {
        let mut all: Vec<Value> = store.state().iter().filter_map(|o| serde_json::to_value(o.as_ref()).ok()).collect();
        all.sort_by(|a, b| a["metadata"]["name"].as_str().cmp(&b["metadata"]["name"].as_str()));
        all
    }

    /// The Windows Nodes, by name.
    pub fn nodes(&self) -> Vec<Value> {
        Self::values(&self.nodes)
    }

    /// The Windows Machines, by name.
    pub fn machines(&self) -> Vec<Value> {
        Self::values(&self.machines)
    }

    /// Why the Machines' watch failed last, while it has not delivered since.
    pub fn machines_failing(&self) -> Option<String> {
        self.machines_failing.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The CSRs, by name.
    pub fn csrs(&self) -> Vec<Value> {
        Self::values(&self.csrs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(heartbeat: &str, ready: &str, taint: bool) -> DynamicObject {
        let mut n = json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "win-a", "resourceVersion": heartbeat, "labels": {"kubernetes.io/os": "windows"}},
            "spec": {},
            "status": {
                "conditions": [{"type": "Ready", "status": ready, "reason": "KubeletReady", "message": "ok",
                                "lastHeartbeatTime": heartbeat, "lastTransitionTime": "2026-11-25T10:00:00Z"}],
                "images": [{"names": [heartbeat], "sizeBytes": 1}],
            },
        });
        if taint {
            n["spec"]["taints"] = json!([{"key": "wmrender.dev/unconfigured", "effect": "NoSchedule"}]);
        }
        serde_json::from_value(n).unwrap()
    }

    #[test]
    fn a_heartbeat_is_not_a_change_a_condition_or_a_taint_is() {
        let before = node_relevant(&node("2026-11-25T10:05:00Z", "True", false));
        assert_eq!(before, node_relevant(&node("2026-11-25T10:10:00Z", "True", false)), "heartbeat, images");
        assert_ne!(before, node_relevant(&node("2026-11-25T10:10:00Z", "False", false)), "Ready changed");
        assert_ne!(before, node_relevant(&node("2026-11-25T10:05:00Z", "True", true)), "tainted");
    }
}
