//! The identity of the Windows cloud-node-manager on Azure, in the mode without the operator. OpenShift's Azure
//! cloud controller runs without its cloud-node controller, so the service on each Windows node initialises the
//! node (addresses, provider ID, the `uninitialized` taint). kubelet's identity cannot do that (NodeRestriction
//! forbids changing taints), so, as WMCO gives it its own identity, wmrender renders a ServiceAccount bound to a
//! ClusterRole with what cloud-provider-azure's cloud-node-manager needs: nodes get/list/watch/update/patch,
//! nodes/status patch/update, and events create/patch/update (its event recorder). sync mints a short-lived token
//! for it (TokenRequest) and pushes `C:\k\cloud-node-manager.kubeconfig`. With WMCO, this stays WMCO's.

use super::object::{ClusterObject, Order, annotations, labels, object_meta};
use crate::plan::{Plan, PlatformPlan};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use wmrender_contract::Mode;

/// Names agreed with sync ([`wmrender_contract::cluster_names`]). The namespace is rendered by exporter.rs, for every
/// platform without the operator.
pub use wmrender_contract::cluster_names::{CLOUD_NODE_MANAGER_SERVICE_ACCOUNT as SERVICE_ACCOUNT, NAMESPACE};
pub const CLUSTER_ROLE: &str = "wmrender:cloud-node-manager";

/// Whether the nodes' cloud-node-manager uses this identity: Azure, without the operator.
pub fn applies(plan: &Plan) -> bool {
    matches!(plan.platform, PlatformPlan::Azure(_)) && plan.operator.mode() == Mode::WithoutOperator
}

fn rule(resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(resources.iter().map(|r| r.to_string()).collect()),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        ..Default::default()
    }
}

pub fn render(plan: &Plan) -> Vec<ClusterObject> {
    if !applies(plan) {
        return Vec::new();
    }
    let account = ServiceAccount {
        metadata: object_meta(SERVICE_ACCOUNT, Some(NAMESPACE), labels([]), annotations(Order::Rbac, [])),
        ..Default::default()
    };
    let role = ClusterRole {
        metadata: object_meta(CLUSTER_ROLE, None, labels([]), annotations(Order::Rbac, [])),
        rules: Some(vec![
            rule(&["nodes"], &["get", "list", "watch", "update", "patch"]),
            rule(&["nodes/status"], &["patch", "update"]),
            rule(&["events"], &["create", "patch", "update"]),
        ]),
        aggregation_rule: None,
    };
    let binding = ClusterRoleBinding {
        metadata: object_meta(CLUSTER_ROLE, None, labels([]), annotations(Order::Rbac, [])),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: CLUSTER_ROLE.into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: SERVICE_ACCOUNT.into(),
            namespace: Some(NAMESPACE.into()),
            api_group: None,
        }]),
    };
    vec![
        ClusterObject::new("ServiceAccount", SERVICE_ACCOUNT, Order::Rbac, &account),
        ClusterObject::new("ClusterRole", CLUSTER_ROLE, Order::Rbac, &role),
        ClusterObject::new("ClusterRoleBinding", CLUSTER_ROLE, Order::Rbac, &binding),
    ]
}
