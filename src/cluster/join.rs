//! After wmrender applied the bundle: the nodes it configured join. For each, bounded by a time-out (`sync
//! --csr-timeout`; one look for the controller), it approves kubelet's client CSR, labels the Node once kubelet
//! registers it, and approves the serving CSR that follows ([`super::csr`] decides which CSRs). The cluster is polled
//! (no watch), once a second.

use super::csr::{self, Expected, Kind, Spec, Verdict};
use super::nodes::{self, ready};
use super::{Body, Cluster, ClusterError, label};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

const CSRS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
const POLL: Duration = Duration::from_secs(1);

#[derive(Debug, Default, Serialize)]
pub struct JoinReport {
    pub approved: Vec<Approved>,
    /// CSRs naming a node this sync configured that failed a check, left pending.
    #[serde(rename = "leftAlone")]
    pub left_alone: Vec<LeftAlone>,
    pub labelled: Vec<String>,
    /// Nodes that did not finish joining within the time-out.
    #[serde(rename = "timedOut")]
    pub timed_out: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct Approved {
    pub csr: String,
    pub node: String,
    pub kind: Kind,
}

#[derive(Debug, Serialize)]
pub struct LeftAlone {
    pub csr: String,
    pub node: String,
    pub why: String,
}

#[derive(Default)]
struct NodeState {
    /// The Node existed, Ready, when the wait began: joined by an earlier sync.
    joined_before: bool,
    serving_approved: bool,
    labelled: bool,
}

fn pending(csr: &Value) -> bool {
    !csr["status"]["conditions"]
        .as_array()
        .is_some_and(|c| c.iter().any(|c| matches!(c["type"].as_str(), Some("Approved" | "Denied"))))
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array().into_iter().flatten().filter_map(Value::as_str).collect()
}

async fn approve(cluster: &Cluster, csr: &Value, node: &str, deadline: Instant) -> Result<bool, ClusterError> {
    let name = csr["metadata"]["name"].as_str().unwrap_or("");
    let mut approved = csr.clone();
    let condition = json!({
        "type": "Approved", "status": "True", "reason": "WmrenderApprove",
        "message": format!("Approved by wmrender sync for node {node}, which it configured."),
    });
    match approved["status"]["conditions"].as_array_mut() {
        Some(list) => list.push(condition),
        None => approved["status"] = json!({"conditions": [condition]}),
    }
    let path = format!("{CSRS}/{name}/approval");
    match cluster.call(http::Method::PUT, &path, Some(Body::json(&approved)), deadline).await {
        Ok(_) => Ok(true),
        // Changed since it was read: judged again on the next poll.
        Err(e) if e.is(409) => Ok(false),
        Err(e) => Err(cluster.failed(&http::Method::PUT, &path, e)),
    }
}

pub async fn run(cluster: &Cluster, expected: &[Expected], timeout: Duration) -> Result<JoinReport, ClusterError> {
    let mut report = JoinReport::default();
    let mut state: BTreeMap<String, NodeState> =
        expected.iter().map(|n| (n.name.clone(), NodeState::default())).collect();
    let mut reported: BTreeSet<String> = BTreeSet::new();
    let deadline = Instant::now() + timeout;
    let mut first = true;
    loop {
        // The bound of each call: the wait's own deadline, and at least a short while for its last pass.
        let calls = deadline.max(Instant::now() + Duration::from_secs(5));
        let mut existing: BTreeMap<String, Value> = BTreeMap::new();
        for n in expected {
            if let Some(node) = nodes::get(cluster, &n.name, calls).await? {
                existing.insert(n.name.clone(), node);
            }
        }
        if first {
            for (name, node) in &existing {
                if let Some(s) = state.get_mut(name) {
                    s.joined_before = ready(node);
                }
            }
            first = false;
        }
        let list = cluster.get_until(CSRS, calls).await?.unwrap_or(Value::Null);
        for item in list["items"].as_array().into_iter().flatten().filter(|c| pending(c)) {
            let name = item["metadata"]["name"].as_str().unwrap_or("").to_string();
            let request = item["spec"]["request"].as_str().and_then(|r| STANDARD.decode(r).ok()).unwrap_or_default();
            let spec = Spec {
                signer: item["spec"]["signerName"].as_str().unwrap_or(""),
                username: item["spec"]["username"].as_str().unwrap_or(""),
                groups: strings(&item["spec"]["groups"]),
                usages: strings(&item["spec"]["usages"]),
                request: &request,
            };
            match csr::judge(&spec, expected, &|n| existing.contains_key(n)) {
                Verdict::Approve { node, kind } => {
                    if approve(cluster, item, &node, calls).await? {
                        if kind == Kind::Serving
                            && let Some(s) = state.get_mut(&node)
                        {
                            s.serving_approved = true;
                        }
                        report.approved.push(Approved { csr: name, node, kind });
                    }
                }
                Verdict::Refuse { node, why } => {
                    if reported.insert(name.clone()) {
                        report.left_alone.push(LeftAlone { csr: name, node, why });
                    }
                }
                Verdict::NotOurs => {}
            }
        }
        for (name, s) in state.iter_mut().filter(|(n, s)| !s.labelled && existing.contains_key(*n)) {
            if label::label(cluster, name).await? {
                s.labelled = true;
                report.labelled.push(name.clone());
            }
        }
        let done = |s: &NodeState| s.labelled && (s.serving_approved || s.joined_before);
        if state.values().all(done) {
            return Ok(report);
        }
        let Some(left) = nodes::remaining(deadline) else {
            report.timed_out = state.iter().filter(|(_, s)| !done(s)).map(|(n, _)| n.clone()).collect();
            return Ok(report);
        };
        tokio::time::sleep(POLL.min(left)).await;
    }
}
