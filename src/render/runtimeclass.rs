//! One RuntimeClass per Windows Server version in use (reference wmco-cluster-objects §3).

use super::object::{ClusterObject, Order, annotations, labels, object_meta};
use crate::plan::Plan;
use k8s_openapi::api::core::v1::Toleration;
use k8s_openapi::api::node::v1::{RuntimeClass, Scheduling};
use std::collections::BTreeMap;

pub fn render(plan: &Plan) -> Vec<ClusterObject> {
    plan.windows_versions
        .iter()
        .map(|v| {
            let name = v.runtime_class_name();
            let node_selector: BTreeMap<String, String> = [
                ("kubernetes.io/arch", "amd64"),
                ("kubernetes.io/os", "windows"),
                ("node.kubernetes.io/windows-build", v.build()),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
            // WMCO taints nodes `os=Windows:NoSchedule`; the documented samples also tolerate `windows`.
            let tolerations = ["windows", "Windows"]
                .into_iter()
                .map(|value| Toleration {
                    effect: Some("NoSchedule".into()),
                    key: Some("os".into()),
                    operator: Some("Equal".into()),
                    value: Some(value.into()),
                    ..Default::default()
                })
                .collect();
            let rc = RuntimeClass {
                metadata: object_meta(&name, None, labels([]), annotations(Order::RuntimeClass, [])),
                handler: "runhcs-wcow-process".into(),
                overhead: None,
                scheduling: Some(Scheduling { node_selector: Some(node_selector), tolerations: Some(tolerations) }),
            };
            ClusterObject::new("RuntimeClass", &name, Order::RuntimeClass, &rc)
        })
        .collect()
}
