//! The permissions docs/without-operator.md lists, applied as a user applies them: the YAML block below the line
//! `<!-- rbac: the cluster tests apply this block as it is -->` in that file, each ClusterRole and Role bound to the
//! test's user. Every cluster test runs wmrender with exactly these, so a permission the docs forget fails a test.

use super::apiserver::Kube;
use serde_json::{Value, json};

const MARKER: &str = "<!-- rbac: the cluster tests apply this block as it is -->";

/// The objects of the documented block, in order.
pub fn documented() -> Vec<Value> {
    let doc =
        std::fs::read_to_string(super::root().join("docs/without-operator.md")).expect("docs/without-operator.md");
    let after = doc.split_once(MARKER).unwrap_or_else(|| panic!("docs/without-operator.md has no `{MARKER}`")).1;
    let block = after
        .split_once("```yaml\n")
        .and_then(|(_, rest)| rest.split_once("\n```"))
        .map(|(b, _)| b)
        .expect("a ```yaml block after the marker");
    block
        .split("\n---\n")
        .map(|d| serde_saphyr::from_str::<Value>(d).unwrap_or_else(|e| panic!("the documented RBAC: {e}\n{d}")))
        .filter(|v| !v.is_null())
        .collect()
}

/// Applies the documented roles named `role` (`wmrender-sync`, `wmrender-reboot`, `wmrender-import`) and binds each
/// to `user`. A Role in a namespace the cluster does not have (the Azure-only `wmrender`) is skipped, as applying it
/// would fail for the user too.
pub fn grant(admin: &Kube, role: &str, user: &str) {
    let mut granted = 0;
    for object in documented().into_iter().filter(|o| o["metadata"]["name"] == role) {
        let subject = json!([{ "kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user }]);
        let binding_name = format!("{role}-{}", user.replace(':', "-"));
        match object["kind"].as_str() {
            Some("ClusterRole") => {
                admin.apply("/apis/rbac.authorization.k8s.io/v1/clusterroles", role, &object);
                let binding = json!({
                    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                    "metadata": { "name": binding_name },
                    "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role },
                    "subjects": subject,
                });
                admin.apply("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", &binding_name, &binding);
            }
            Some("Role") => {
                let ns = object["metadata"]["namespace"].as_str().expect("a Role's namespace").to_string();
                if admin.get(&format!("/api/v1/namespaces/{ns}")).is_none() {
                    continue;
                }
                admin.apply(&format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles"), role, &object);
                let binding = json!({
                    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                    "metadata": { "name": binding_name, "namespace": ns },
                    "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role },
                    "subjects": subject,
                });
                admin.apply(
                    &format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings"),
                    &binding_name,
                    &binding,
                );
            }
            other => panic!("the documented RBAC holds a {other:?}; only ClusterRoles and Roles are bound"),
        }
        granted += 1;
    }
    assert!(granted > 0, "docs/without-operator.md documents no role named {role}");
}
