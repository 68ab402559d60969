//! The WMCO install objects: Namespace, OperatorGroup and Subscription (reference wmco-cluster-objects §6).

use super::object::{ClusterObject, Order, annotations, labels, object_meta};
use crate::plan::Plan;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OperatorGroup {
    api_version: &'static str,
    kind: &'static str,
    metadata: ObjectMeta,
    spec: OperatorGroupSpec,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OperatorGroupSpec {
    target_namespaces: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Subscription {
    api_version: &'static str,
    kind: &'static str,
    metadata: ObjectMeta,
    spec: SubscriptionSpec,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SubscriptionSpec {
    channel: String,
    install_plan_approval: String,
    name: String,
    source: String,
    source_namespace: String,
}

pub fn render(plan: &Plan) -> Vec<ClusterObject> {
    let op = &plan.operator;
    if !op.install {
        return Vec::new();
    }
    let ns = &op.namespace;
    let namespace = Namespace {
        metadata: object_meta(
            ns,
            None,
            // The operator pod uses hostNetwork, which needs the privileged pod-security level; the monitoring label
            // lets the cluster's Prometheus scrape its metrics.
            labels([
                ("openshift.io/cluster-monitoring", "true"),
                ("pod-security.kubernetes.io/enforce", "privileged"),
                ("security.openshift.io/scc.podSecurityLabelSync", "true"),
            ]),
            annotations(Order::Namespace, []),
        ),
        ..Default::default()
    };
    // WMCO supports only the OwnNamespace install mode: the group targets exactly its own namespace.
    let group = OperatorGroup {
        api_version: "operators.coreos.com/v1",
        kind: "OperatorGroup",
        metadata: object_meta(&op.package, Some(ns), labels([]), annotations(Order::OperatorGroup, [])),
        spec: OperatorGroupSpec { target_namespaces: vec![ns.clone()] },
    };
    let subscription = Subscription {
        api_version: "operators.coreos.com/v1alpha1",
        kind: "Subscription",
        metadata: object_meta(&op.package, Some(ns), labels([]), annotations(Order::Subscription, [])),
        spec: SubscriptionSpec {
            channel: op.channel.clone(),
            install_plan_approval: op.install_plan_approval.clone(),
            name: op.package.clone(),
            source: op.source.clone(),
            source_namespace: op.source_namespace.clone(),
        },
    };
    vec![
        ClusterObject::new("Namespace", ns, Order::Namespace, &namespace),
        ClusterObject::new("OperatorGroup", &op.package, Order::OperatorGroup, &group),
        ClusterObject::new("Subscription", &op.package, Order::Subscription, &subscription),
    ]
}
