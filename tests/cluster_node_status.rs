//! The agent's report on its own Node (crates/node-agent/src/node_status.rs, the code the Windows agent runs) against
//! a real kube-apiserver with the Node authorizer and the NodeRestriction admission plugin: with the credentials
//! kubelet's TLS bootstrap gives a node, the agent may set its condition and its bundle annotation on its own Node —
//! and nothing more: not its taints, not another Node, not a label kubelet may not set. The kubelet is played
//! (tests/support/played.rs), the CSR signer is kube-controller-manager's; the CSRs are approved by the cluster's
//! admin.
#![cfg(feature = "cluster")]

mod support;

use serde_json::{Value, json};
use std::time::Duration;
use support::apiserver::ControlPlane;
use support::controller_manager::{CSR_SIGNING, ControllerManager};
use support::played::joined;
use wmrender_contract::node_status::{BUNDLE_ANNOTATION, CONDITION_TYPE, PAYLOAD_ANNOTATION, TAINT_EFFECT, TAINT_KEY};
use wmrender_contract::{ApplyResult, ApplyStatus};
use wmrender_node::node_status::{Client, report};

fn condition(node: &Value) -> Value {
    node["status"]["conditions"]
        .as_array()
        .and_then(|l| l.iter().find(|c| c["type"] == CONDITION_TYPE))
        .cloned()
        .unwrap_or(Value::Null)
}

#[test]
fn the_agent_reports_on_its_own_node_and_node_restriction_allows_nothing_more() {
    let cp = ControlPlane::start();
    let token = support::openshift::cluster(&cp, "None");
    let _controllers = ControllerManager::start(&cp, &[CSR_SIGNING]);
    let a = joined(&cp, &token, "win-a", "10.0.0.5");
    let _b = joined(&cp, &token, "win-b", "10.0.0.6");
    let admin = cp.admin();

    // A converged pass: the condition True and the bundle and payload annotations, kubelet's Ready kept.
    let mut result = ApplyResult {
        status: ApplyStatus::Converged,
        node_name: "win-a".into(),
        bundle: "sha256:1111".into(),
        payload: "sha256:9999".into(),
        ..Default::default()
    };
    assert_eq!(report(&a.kubeconfig, &result), "reported");
    let node = admin.get("/api/v1/nodes/win-a").unwrap();
    let c = condition(&node);
    assert_eq!((c["status"].as_str(), c["reason"].as_str()), (Some("True"), Some("Converged")), "{node}");
    assert_eq!(node["metadata"]["annotations"][BUNDLE_ANNOTATION], "sha256:1111");
    assert_eq!(node["metadata"]["annotations"][PAYLOAD_ANNOTATION], "sha256:9999");
    assert!(node["status"]["conditions"].as_array().unwrap().iter().any(|c| c["type"] == "Ready"), "{node}");
    let first_transition = c["lastTransitionTime"].clone();

    // Nothing changed: nothing written.
    let writes = |cp: &ControlPlane| cp.requests_by("system:node:win-a").iter().filter(|r| r.verb == "patch").count();
    let before = writes(&cp);
    assert_eq!(report(&a.kubeconfig, &result), "reported");
    assert_eq!(writes(&cp), before, "an unchanged report writes nothing");

    // A failed pass: False with the errors; the annotation still names the bundle last applied.
    std::thread::sleep(Duration::from_millis(1100));
    result.status = ApplyStatus::Failed;
    result.errors = vec!["kube-proxy: the service stopped".into()];
    result.bundle = "sha256:2222".into();
    assert_eq!(report(&a.kubeconfig, &result), "reported");
    let node = admin.get("/api/v1/nodes/win-a").unwrap();
    let c = condition(&node);
    assert_eq!((c["status"].as_str(), c["reason"].as_str()), (Some("False"), Some("ApplyFailed")));
    assert_eq!(c["message"], "kube-proxy: the service stopped");
    assert_ne!(c["lastTransitionTime"], first_transition, "the status changed: a new transition time");
    assert_eq!(node["metadata"]["annotations"][BUNDLE_ANNOTATION], "sha256:1111");

    // Every request the agent made carried its User-Agent.
    let agent: Vec<_> = cp
        .requests_by("system:node:win-a")
        .into_iter()
        .filter(|r| r.user_agent.starts_with("wmrender-node/"))
        .collect();
    assert!(agent.len() >= 4, "{agent:?}");

    // And nothing more, with the same credentials.
    let node = Client::from_kubeconfig(&a.kubeconfig).unwrap();
    let forbidden = |method: &str, path: &str, ct: &str, body: Value| {
        let e = node.request(method, path, ct, Some(&body)).expect_err(&format!("{method} {path} must be refused"));
        assert!(e.contains("403"), "{method} {path}: {e}");
        e
    };
    let e = forbidden("PATCH", "/api/v1/nodes/win-a", "application/merge-patch+json", json!({"spec": {"taints": []}}));
    assert!(e.contains("taints"), "{e}");
    forbidden(
        "PATCH",
        "/api/v1/nodes/win-b/status",
        "application/strategic-merge-patch+json",
        json!({"status": {"conditions": [{"type": CONDITION_TYPE, "status": "True"}]}}),
    );
    forbidden(
        "PATCH",
        "/api/v1/nodes/win-b",
        "application/merge-patch+json",
        json!({"metadata": {"annotations": {BUNDLE_ANNOTATION: "x"}}}),
    );
    let e = forbidden(
        "PATCH",
        "/api/v1/nodes/win-a",
        "application/merge-patch+json",
        json!({"metadata": {"labels": {"node-role.kubernetes.io/worker": ""}}}),
    );
    assert!(e.contains("labels"), "{e}");
    let e = node.request("GET", "/api/v1/namespaces/openshift-config/secrets/pull-secret", "application/json", None);
    assert!(e.unwrap_err().contains("403"));
    let still = admin.get("/api/v1/nodes/win-a").unwrap();
    let ours = json!({"key": TAINT_KEY, "effect": TAINT_EFFECT});
    assert!(still["spec"]["taints"].as_array().unwrap().contains(&ours), "the taint stays: {still}");
}

#[test]
fn the_agents_watch_on_its_node_wakes_it_for_a_new_desired_bundle_and_asks_nothing_at_rest() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use wmrender_contract::node_status::DESIRED_BUNDLE_ANNOTATION;
    use wmrender_node::node_watch::NodeWatch;
    let cp = ControlPlane::start();
    let token = support::openshift::cluster(&cp, "None");
    let _controllers = ControllerManager::start(&cp, &[CSR_SIGNING]);
    let a = joined(&cp, &token, "win-a", "10.0.0.5");
    let admin = cp.admin();
    let wakes = Arc::new(AtomicUsize::new(0));
    let counter = wakes.clone();
    let watch = NodeWatch::start(
        a.kubeconfig.clone(),
        || Some("win-a".to_string()),
        move || {
            counter.fetch_add(1, Ordering::SeqCst);
        },
    );
    let wait = |what: &str, done: &dyn Fn() -> bool| {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !done() {
            assert!(std::time::Instant::now() < deadline, "waited 20 s for {what}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    wait("the first sight of the Node", &|| watch.node().is_some());
    assert_eq!(wakes.load(Ordering::SeqCst), 0, "the first sight is no change");

    // At rest: the passes' reads and reports come from the watch; nothing is asked.
    let asked = |cp: &ControlPlane| cp.requests_by("system:node:win-a").iter().filter(|r| r.verb != "watch").count();
    let result = ApplyResult {
        status: ApplyStatus::Converged,
        node_name: "win-a".into(),
        bundle: "sha256:1111".into(),
        ..Default::default()
    };
    assert_eq!(wmrender_node::node_status::report_on(&a.kubeconfig, &result, watch.node().as_ref()), "reported");
    wait("the report seen by the watch", &|| {
        watch.node().is_some_and(|n| n["metadata"]["annotations"][BUNDLE_ANNOTATION] == "sha256:1111")
    });
    let before = asked(&cp);
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(wmrender_node::node_status::report_on(&a.kubeconfig, &result, watch.node().as_ref()), "reported");
    assert_eq!(asked(&cp), before, "an unchanged report from the watch asks nothing");

    // A new desired bundle wakes the agent at once; another change of the Node does not.
    let reference = format!("registry.example.com/fleet/b@sha256:{}", "2".repeat(64));
    admin
        .merge_patch(
            "/api/v1/nodes/win-a",
            &json!({"metadata": {"annotations": {DESIRED_BUNDLE_ANNOTATION: reference}}}),
        )
        .unwrap();
    wait("the wake", &|| wakes.load(Ordering::SeqCst) == 1);
    assert_eq!(watch.node().unwrap()["metadata"]["annotations"][DESIRED_BUNDLE_ANNOTATION], reference.as_str());
    admin.merge_patch("/api/v1/nodes/win-a", &json!({"metadata": {"labels": {"example.com/other": "x"}}})).unwrap();
    wait("the label seen", &|| watch.node().is_some_and(|n| n["metadata"]["labels"]["example.com/other"] == "x"));
    assert_eq!(wakes.load(Ordering::SeqCst), 1, "only the desired bundle wakes it");
}
