//! What every rendered cluster object shares: its identity, apply order, common labels and YAML encoding.

use serde::Serialize;
use std::collections::BTreeMap;

pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "wmrender");
pub const SYNC_WAVE: &str = "argocd.argoproj.io/sync-wave";
/// Flux's post-build substitution rewrites `${var}` (and fails on unset ones) and turns its escape `$$` into `$`;
/// an object whose text holds either (a user's tag, path or password-like value, say) opts out with this
/// annotation.
pub const FLUX_NO_SUBSTITUTE: (&str, &str) = ("kustomize.toolkit.fluxcd.io/substitute", "disabled");

/// Whether any string of `value` contains text Flux's substitution would change: `${` or `$$`.
pub fn has_substitution_syntax<T: Serialize>(value: &T) -> bool {
    serde_json::to_string(value).is_ok_and(|s| has_substitution_text(&s))
}

/// Whether `text` holds what Flux's substitution would change: `${` or `$$`.
pub fn has_substitution_text(text: &str) -> bool {
    text.contains("${") || text.contains("$$")
}

/// Apply order: the WMCO install objects first, then RuntimeClasses, then what creates nodes. The number is
/// both the position in the `--stdout` stream and the Argo CD sync wave.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Order {
    Namespace = 1,
    /// ServiceAccounts, ClusterRoles and their bindings for node services (mode without the operator).
    Rbac = 2,
    /// The Service whose serving certificate windows_exporter uses (mode without the operator).
    Service = 3,
    OperatorGroup = 4,
    Subscription = 5,
    RuntimeClass = 6,
    /// The `windows-user-data` Secret (mode without the operator): a Machine created before it exists fails.
    UserData = 7,
    MachineSet = 8,
    ConfigMap = 9,
    /// `wmrender controller`'s Deployment: after its RBAC and the bundle ConfigMaps it reads.
    Controller = 10,
}

impl Order {
    /// Argo CD sync wave: operator (1) → RuntimeClasses and the user-data Secret (2) → MachineSets and the BYOH
    /// ConfigMap (3).
    pub fn wave(self) -> &'static str {
        match self {
            Order::Namespace | Order::Rbac | Order::Service | Order::OperatorGroup | Order::Subscription => "1",
            Order::RuntimeClass | Order::UserData => "2",
            Order::MachineSet | Order::ConfigMap => "3",
            Order::Controller => "4",
        }
    }
}

#[derive(Clone, Debug)]
pub struct ClusterObject {
    pub kind: &'static str,
    pub name: String,
    pub order: Order,
    pub yaml: String,
    /// Set for objects that share a kind and name across namespaces (the controller's Roles): in the file name.
    pub namespace: Option<String>,
}

impl ClusterObject {
    /// Serialises a typed object. Our own structs and k8s-openapi types hold only strings, numbers, lists and
    /// BTreeMaps, which always serialise; the fallback is never reached.
    pub fn new<T: Serialize>(kind: &'static str, name: &str, order: Order, object: &T) -> ClusterObject {
        let yaml = super::yaml::to_string(object).unwrap_or_else(|e| format!("# serialisation failed: {e}\n"));
        ClusterObject { kind, name: name.to_string(), order, yaml, namespace: None }
    }

    /// Names the namespace in the file name: `<kind>-<namespace>-<name>.yaml`.
    pub fn in_namespace(self, namespace: &str) -> ClusterObject {
        ClusterObject { namespace: Some(namespace.to_string()), ..self }
    }

    /// `<kind>-<name>.yaml`, lower case; `:` (RBAC names) becomes `-`, which Windows file names cannot hold.
    pub fn file_name(&self) -> String {
        let name = match &self.namespace {
            Some(ns) => format!("{ns}-{}", self.name),
            None => self.name.clone(),
        };
        format!("{}-{}.yaml", self.kind.to_ascii_lowercase(), name.to_ascii_lowercase().replace(':', "-"))
    }
}

/// Labels every object carries: `app.kubernetes.io/managed-by: wmrender`, never a version (it would churn every
/// object on upgrade).
pub fn labels<const N: usize>(extra: [(&str, &str); N]) -> BTreeMap<String, String> {
    std::iter::once(MANAGED_BY).chain(extra).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

pub fn annotations<const N: usize>(order: Order, extra: [(&str, &str); N]) -> BTreeMap<String, String> {
    std::iter::once((SYNC_WAVE, order.wave())).chain(extra).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// `metadata` in the form k8s-openapi types take.
pub fn object_meta(
    name: &str,
    namespace: Option<&str>,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        name: Some(name.to_string()),
        namespace: namespace.map(str::to_string),
        labels: Some(labels),
        annotations: Some(annotations),
        ..Default::default()
    }
}
