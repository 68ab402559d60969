//! The cloud-node-manager identity rendered for Azure without the operator: Namespace, ServiceAccount,
//! ClusterRole and ClusterRoleBinding under the agreed names, each a valid object of its Kubernetes type.
//! /work/shared/schemas holds OpenShift's API definitions only (no io.k8s.api.rbac.v1 or core/v1 Namespace), so each
//! file is deserialised into its k8s-openapi type (which requires the required fields: a binding's roleRef, a
//! rule's verbs, a subject's kind and name) and must serialise back to the same value: a field the type does not
//! know would be dropped and fail the comparison.

mod support;

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use std::collections::BTreeMap;

fn cluster_files(inputs: &std::path::Path) -> BTreeMap<String, String> {
    let (_tmp, out) = support::render_to_temp(inputs);
    support::read_tree(&out)
        .into_iter()
        .filter_map(|(p, b)| p.strip_prefix("cluster/").map(|p| (p.to_string(), String::from_utf8(b).unwrap())))
        .collect()
}

fn strict<T: serde::de::DeserializeOwned + serde::Serialize>(file: &str, yaml: &str) -> T {
    let value: serde_json::Value = serde_saphyr::from_str(yaml).unwrap_or_else(|e| panic!("{file}: {e}"));
    let typed: T = serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("{file} is not its type: {e}"));
    assert_eq!(serde_json::to_value(&typed).unwrap(), value, "{file} holds fields its type does not know");
    typed
}

fn example(name: &str) -> std::path::PathBuf {
    support::root().join(format!("examples/{name}/wmrender.yaml"))
}

fn services_command(inputs: &std::path::Path, service: &str) -> String {
    let (_tmp, out) = support::render_to_temp(inputs);
    let text = std::fs::read_to_string(out.join("node/C/k/wmrender/services.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let s = v["services"].as_array().unwrap().iter().find(|s| s["name"] == service).unwrap().clone();
    format!("{} requires={}", s["command"].as_str().unwrap(), s["requires"])
}

#[test]
fn azure_without_the_operator_gets_the_cloud_node_manager_identity() {
    let files = cluster_files(&example("azure"));
    let ns: Namespace = strict("namespace", &files["namespace-wmrender.yaml"]);
    assert_eq!(ns.metadata.name.as_deref(), Some("wmrender"));
    let sa: ServiceAccount = strict("serviceaccount", &files["serviceaccount-cloud-node-manager.yaml"]);
    assert_eq!(
        (sa.metadata.name.as_deref(), sa.metadata.namespace.as_deref()),
        (Some("cloud-node-manager"), Some("wmrender"))
    );
    let role: ClusterRole = strict("clusterrole", &files["clusterrole-wmrender-cloud-node-manager.yaml"]);
    assert_eq!(role.metadata.name.as_deref(), Some("wmrender:cloud-node-manager"));
    let allowed = |resource: &str| -> Vec<String> {
        let rules = role.rules.as_ref().unwrap();
        let mut verbs: Vec<String> = rules
            .iter()
            .filter(|r| r.api_groups.as_ref().is_some_and(|g| g == &[String::new()]))
            .filter(|r| r.resources.as_ref().is_some_and(|rs| rs.iter().any(|x| x == resource)))
            .flat_map(|r| r.verbs.clone())
            .collect();
        verbs.sort();
        verbs
    };
    assert_eq!(allowed("nodes"), ["get", "list", "patch", "update", "watch"]);
    assert_eq!(allowed("nodes/status"), ["patch", "update"]);
    assert_eq!(allowed("events"), ["create", "patch", "update"]);
    assert!(allowed("secrets").is_empty() && allowed("pods").is_empty(), "nothing more");
    let binding: ClusterRoleBinding =
        strict("clusterrolebinding", &files["clusterrolebinding-wmrender-cloud-node-manager.yaml"]);
    assert_eq!(binding.role_ref.name, "wmrender:cloud-node-manager");
    assert_eq!(binding.role_ref.kind, "ClusterRole");
    let subjects = binding.subjects.unwrap();
    assert_eq!(subjects.len(), 1);
    assert_eq!(
        (subjects[0].kind.as_str(), subjects[0].name.as_str(), subjects[0].namespace.as_deref()),
        ("ServiceAccount", "cloud-node-manager", Some("wmrender"))
    );
    let kustomization = &files["kustomization.yaml"];
    for f in ["namespace-wmrender.yaml", "clusterrolebinding-wmrender-cloud-node-manager.yaml"] {
        assert!(kustomization.contains(f), "{f} is in the kustomization");
    }
    let cnm = services_command(&example("azure"), "cloud-node-manager");
    assert!(cnm.contains(r"--kubeconfig=C:\k\cloud-node-manager.kubeconfig"), "{cnm}");
    assert!(cnm.contains("cloud-node-manager.kubeconfig\"") && cnm.contains(r#"C:\\k\\kubeconfig""#), "{cnm}");
}

#[test]
fn other_platforms_and_the_operator_mode_render_no_such_identity() {
    for name in ["aws", "gcp", "vsphere", "nutanix", "none"] {
        let files = cluster_files(&example(name));
        assert!(!files.keys().any(|f| f.contains("cloud-node-manager")), "{name}");
        // Without the operator, wmrender's namespace holds the exporter's Service on every platform; with WMCO the
        // exporter's certificate is WMCO's.
        let with_operator = files.keys().any(|f| f.starts_with("subscription-"));
        for f in ["namespace-wmrender.yaml", "service-windows-exporter.yaml"] {
            assert_eq!(files.contains_key(f), !with_operator, "{name}: {f}");
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(example("azure")).unwrap();
    let inputs = tmp.path().join("wmrender.yaml");
    std::fs::write(&inputs, text.replace("spec:\n", "spec:\n  operator:\n    install: true\n")).unwrap();
    let files = cluster_files(&inputs);
    assert!(!files.keys().any(|f| f.contains("cloud-node-manager")), "with WMCO the identity is WMCO's: {files:?}");
    let cnm = services_command(&inputs, "cloud-node-manager");
    assert!(cnm.contains(r"--kubeconfig=C:\k\kubeconfig") && !cnm.contains("cloud-node-manager.kubeconfig"), "{cnm}");
}
