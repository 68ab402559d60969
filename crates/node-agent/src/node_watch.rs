//! The agent service's watch on its own Node, as kubelet watches it: one list of the Node, then one watch
//! (`fieldSelector=metadata.name=<node>`, resumed from the last resource version, bookmarks on), held up to an hour
//! and renewed. The passes read the Node from here instead of asking for it, and a change of the desired bundle
//! (`wmrender.dev/desired-bundle`) or payload (`wmrender.dev/desired-payload`) starts a pass at once. At rest a node costs the API server about one request an
//! hour, and its report writes only what changed.
//!
//! The Node read here is the cluster's, not the node's own: untrusted like any answer, and only ever a cache. A pass
//! that finds no Node here asks for it as before.

use crate::node_status::Client;
use serde_json::Value;
use std::io::BufRead;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wmrender_contract::node_status::{DESIRED_BUNDLE_ANNOTATION, DESIRED_PAYLOAD_ANNOTATION};

/// How long one watch is held before it is renewed (the API server honours a watch's own timeout).
pub const WATCH_SECONDS: u64 = 3600;
/// The pauses after a failure: 5 s doubling to 5 minutes.
const BACKOFF_FIRST: Duration = Duration::from_secs(5);
const BACKOFF_MAX: Duration = Duration::from_secs(300);
/// How often the thread looks for kubelet's kubeconfig and the node's name before it can watch (files only).
const NOT_JOINED_PAUSE: Duration = Duration::from_secs(15);

/// The Node as last seen, shared with the passes.
#[derive(Clone, Default)]
pub struct NodeWatch {
    latest: Arc<Mutex<Option<Value>>>,
}

impl NodeWatch {
    /// The Node as the watch last saw it.
    pub fn node(&self) -> Option<Value> {
        self.latest.lock().ok().and_then(|l| l.clone())
    }

    fn set(&self, node: Option<Value>) {
        if let Ok(mut l) = self.latest.lock() {
            *l = node;
        }
    }

    /// The service's watch: kubelet's kubeconfig (`C:\k\kubeconfig`) once the node joined, the node's name once a
    /// pass computed it (`applied.json`).
    pub fn of_node(files: &dyn crate::system::Files, changed: impl Fn() + Send + 'static) -> NodeWatch {
        use wmrender_contract::{NodePath, paths};
        let state = files.local(&NodePath::known(paths::APPLIED_STATE));
        let name = move || crate::state::AppliedState::load(&state).ok().map(|s| s.node_name).filter(|n| !n.is_empty());
        NodeWatch::start(files.local(&NodePath::known(paths::KUBECONFIG)), name, changed)
    }

    /// Starts the watch on a thread of its own: `kubeconfig` is kubelet's, `node_name` gives the node's name once the
    /// passes know it, and `changed` is called when the Node's desired bundle changes (and at first sight, when it
    /// names one).
    pub fn start(
        kubeconfig: PathBuf,
        node_name: impl Fn() -> Option<String> + Send + 'static,
        changed: impl Fn() + Send + 'static,
    ) -> NodeWatch {
        let watch = NodeWatch::default();
        let shared = watch.clone();
        std::thread::spawn(move || {
            let mut failures = 0u32;
            let mut desired: Option<[Option<String>; 2]> = None;
            loop {
                let Some(name) = node_name().filter(|_| kubeconfig.exists()) else {
                    std::thread::sleep(NOT_JOINED_PAUSE);
                    continue;
                };
                let outcome = Client::from_kubeconfig(&kubeconfig).and_then(|client| {
                    shared.follow(&client, &name, &mut |node| {
                        let now = [DESIRED_BUNDLE_ANNOTATION, DESIRED_PAYLOAD_ANNOTATION]
                            .map(|key| node["metadata"]["annotations"][key].as_str().map(str::to_string));
                        // A change, or a desired bundle or payload at first sight (it may have been set while the
                        // node was not watching): a pass now.
                        if desired.as_ref().map_or(now.iter().any(Option::is_some), |before| *before != now) {
                            changed();
                        }
                        desired = Some(now);
                    })
                });
                match outcome {
                    Ok(()) => failures = 0,
                    Err(_) => {
                        shared.set(None);
                        let pause = BACKOFF_FIRST.saturating_mul(1 << failures.min(6)).min(BACKOFF_MAX);
                        failures = failures.saturating_add(1);
                        std::thread::sleep(pause);
                    }
                }
            }
        });
        watch
    }

    /// One list and the watches that follow it, until the API server says to list again (`410 Gone`) or a watch
    /// fails; `seen` gets every version of the Node.
    fn follow(&self, client: &Client, name: &str, seen: &mut dyn FnMut(&Value)) -> Result<(), String> {
        let node = client.request("GET", &format!("/api/v1/nodes/{name}"), "application/json", None)?;
        let mut version = node["metadata"]["resourceVersion"].as_str().unwrap_or("").to_string();
        // Kept before it is told: the pass it may start reads the Node from here.
        self.set(Some(node.clone()));
        seen(&node);
        loop {
            let path = format!(
                "/api/v1/nodes?fieldSelector=metadata.name%3D{name}&watch=true&allowWatchBookmarks=true\
                 &resourceVersion={version}&timeoutSeconds={WATCH_SECONDS}"
            );
            let events = client.watch(&path)?;
            for line in events.lines() {
                let line = line.map_err(|e| format!("the watch was cut: {e}"))?;
                let Ok(event) = serde_json::from_str::<Value>(&line) else { continue };
                let object = &event["object"];
                match event["type"].as_str() {
                    Some("ADDED" | "MODIFIED") if object["metadata"]["name"] == name => {
                        version = object["metadata"]["resourceVersion"].as_str().unwrap_or(&version).to_string();
                        self.set(Some(object.clone()));
                        seen(object);
                    }
                    Some("BOOKMARK") => {
                        version = object["metadata"]["resourceVersion"].as_str().unwrap_or(&version).to_string();
                    }
                    Some("DELETED") => self.set(None),
                    // 410 Gone: too old a version; list again.
                    Some("ERROR") => return Ok(()),
                    _ => {}
                }
            }
            // The watch ended (its timeout): resumed from the last version.
        }
    }
}
