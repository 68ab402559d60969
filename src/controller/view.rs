//! The cluster as the controller sees it: the Windows Nodes, the Windows Machines and the CSRs, each kept by a
//! Kubernetes watch (kube-runtime's watcher: resumed from its last resource version when the connection drops,
//! listed again when the API server answers 410 Gone) into an in-memory store. Every change wakes the reconcile
//! loop; the loop reads the stores, so a quiet cluster costs the API server nothing but the open watches.

use crate::cluster::Cluster;
use crate::cluster::machines::{NAMESPACE, OS_LABEL};
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::reflector::{Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// The watched objects.
#[derive(Clone)]
pub struct View {
    nodes: Store<DynamicObject>,
    machines: Store<DynamicObject>,
    csrs: Store<DynamicObject>,
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    let api_version = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    ApiResource { group: group.into(), version: version.into(), api_version, kind: kind.into(), plural: plural.into() }
}

/// One watch into a store; every event notifies `changed`, a failed watch is retried with kube-runtime's back-off
/// (and counted in `failed`).
fn watch(
    api: Api<DynamicObject>,
    config: watcher::Config,
    ar: ApiResource,
    changed: Arc<Notify>,
    failed: Arc<dyn Fn(String) + Send + Sync>,
) -> (Store<DynamicObject>, JoinHandle<()>) {
    let writer = Writer::new(ar);
    let store = writer.as_reader();
    let task = tokio::spawn(async move {
        watcher(api, config)
            .default_backoff()
            .reflect(writer)
            .for_each(|event| {
                match event {
                    Ok(_) => changed.notify_one(),
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
        let (nodes, a) = watch(Api::all_with(client.clone(), &node), windows, node, changed.clone(), failed.clone());
        let (machines, b) = watch(
            Api::namespaced_with(client.clone(), NAMESPACE, &machine),
            watcher::Config::default().labels(&format!("{OS_LABEL}=Windows")),
            machine,
            changed.clone(),
            failed.clone(),
        );
        let (csrs, c) = watch(Api::all_with(client, &csr), watcher::Config::default(), csr, changed, failed);
        (View { nodes, machines, csrs }, vec![a, b, c])
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

    /// The CSRs, by name.
    pub fn csrs(&self) -> Vec<Value> {
        Self::values(&self.csrs)
    }
}
