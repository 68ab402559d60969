//! The BYOH `windows-instances` ConfigMap (reference wmco-cluster-objects §4).

use super::object::{
    ClusterObject, FLUX_NO_SUBSTITUTE, Order, annotations, has_substitution_text, labels, object_meta,
};
use crate::plan::Plan;
use k8s_openapi::api::core::v1::ConfigMap;

/// Where it is rendered: sync and the controller read the BYOH hosts from it.
pub const PATH: &str = "cluster/configmap-windows-instances.yaml";

/// Deleting this ConfigMap deconfigures every BYOH node, so neither Argo CD nor Flux may ever prune or delete it:
/// removing a host from the inputs removes its key, which deconfigures just that host.
const NEVER_PRUNE: [(&str, &str); 2] = [
    ("argocd.argoproj.io/sync-options", "Prune=false,Delete=false"),
    ("kustomize.toolkit.fluxcd.io/prune", "disabled"),
];

pub fn render(plan: &Plan) -> Vec<ClusterObject> {
    let Some(hosts) = &plan.byoh else {
        return Vec::new();
    };
    // WMCO splits on the first `=` and keeps the rest verbatim: no trailing newline.
    let data: std::collections::BTreeMap<String, String> =
        hosts.iter().map(|h| (h.address.clone(), ["username=", &h.username].concat())).collect();
    let mut notes = annotations(Order::ConfigMap, NEVER_PRUNE);
    // The strings themselves, rather than the map written out as JSON: a long host list is read once.
    if data.iter().any(|(address, user)| has_substitution_text(address) || has_substitution_text(user)) {
        notes.insert(FLUX_NO_SUBSTITUTE.0.into(), FLUX_NO_SUBSTITUTE.1.into());
    }
    let cm = ConfigMap {
        metadata: object_meta("windows-instances", Some(&plan.operator.namespace), labels([]), notes),
        data: Some(data),
        ..Default::default()
    };
    vec![ClusterObject::new("ConfigMap", "windows-instances", Order::ConfigMap, &cm)]
}
