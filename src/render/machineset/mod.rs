//! Windows MachineSets: the structure every platform shares (reference wmco-cluster-objects §1.1). Each platform's
//! providerSpec is in its own file.
//!
//! Objects are written the way the Machine API webhooks store them, so Argo CD never shows a permanent diff:
//! secret references explicit, `namespace` on them only where the API type has it (Azure), quantities canonical.

mod aws;
mod azure;
mod gcp;
mod nutanix;
mod vsphere;

use super::object::{ClusterObject, FLUX_NO_SUBSTITUTE, MANAGED_BY, Order, SYNC_WAVE, has_substitution_syntax};
use crate::plan::{MACHINE_API_NAMESPACE, MachineSetPlan, Plan, PlatformPlan};
use serde::Serialize;
use std::collections::BTreeMap;

pub const USER_DATA_SECRET: &str = "windows-user-data";
const CLUSTER_LABEL: &str = "machine.openshift.io/cluster-api-cluster";
const MACHINESET_LABEL: &str = "machine.openshift.io/cluster-api-machineset";

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineSet {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub metadata: Metadata,
    pub spec: MachineSetSpec,
}

#[derive(Serialize)]
pub struct Metadata {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    pub labels: BTreeMap<String, String>,
    pub name: String,
    pub namespace: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineSetSpec {
    /// Left out for `replicas: auto`: whoever scales the set (a MachineAutoscaler) owns the field.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas: Option<u32>,
    pub selector: Selector,
    pub template: Template,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Selector {
    pub match_labels: BTreeMap<String, String>,
}

#[derive(Serialize)]
pub struct Template {
    pub metadata: Labels,
    pub spec: MachineSpec,
}

#[derive(Serialize)]
pub struct Labels {
    pub labels: BTreeMap<String, String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineSpec {
    pub metadata: Labels,
    pub provider_spec: ProviderSpecHolder,
}

#[derive(Serialize)]
pub struct ProviderSpecHolder {
    pub value: ProviderSpec,
}

#[derive(Serialize)]
#[serde(untagged)]
pub enum ProviderSpec {
    Aws(aws::AwsProviderConfig),
    Azure(azure::AzureProviderSpec),
    Gcp(gcp::GcpProviderSpec),
    Nutanix(nutanix::NutanixProviderConfig),
    Vsphere(vsphere::VsphereProviderSpec),
}

/// `{name}`: a secret reference on platforms whose API type is a LocalObjectReference.
#[derive(Serialize)]
pub struct LocalRef {
    pub name: String,
}

impl LocalRef {
    pub fn new(name: &str) -> LocalRef {
        LocalRef { name: name.to_string() }
    }
}

fn map<const N: usize>(pairs: [(&str, &str); N]) -> BTreeMap<String, String> {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// The MachineSet objects, one per `machineSets[]` entry. `None` platform has none.
pub fn render(plan: &Plan) -> Vec<ClusterObject> {
    plan.machine_sets
        .iter()
        .filter_map(|m| {
            let value = provider_spec(plan, m)?;
            let ms = machine_set(plan, m, value);
            Some(ClusterObject::new("MachineSet", &m.name, Order::MachineSet, &ms))
        })
        .collect()
}

pub fn provider_spec(plan: &Plan, m: &MachineSetPlan) -> Option<ProviderSpec> {
    let infra = &plan.infrastructure_id;
    Some(match &plan.platform {
        PlatformPlan::Aws(p) => ProviderSpec::Aws(aws::render(infra, p, m)),
        PlatformPlan::Azure(p) => ProviderSpec::Azure(azure::render(p, m)),
        PlatformPlan::Gcp(p) => ProviderSpec::Gcp(gcp::render(p, m)),
        PlatformPlan::Nutanix(p) => ProviderSpec::Nutanix(nutanix::render(p, m)),
        PlatformPlan::Vsphere(p) => ProviderSpec::Vsphere(vsphere::render(p, m)),
        PlatformPlan::None => return None,
    })
}

fn machine_set(plan: &Plan, m: &MachineSetPlan, value: ProviderSpec) -> MachineSet {
    let infra = plan.infrastructure_id.as_str();
    let name = m.name.as_str();
    let mut annotations = map([(SYNC_WAVE, Order::MachineSet.wave())]);
    if has_substitution_syntax(&value) {
        annotations.insert(FLUX_NO_SUBSTITUTE.0.into(), FLUX_NO_SUBSTITUTE.1.into());
    }
    MachineSet {
        api_version: "machine.openshift.io/v1beta1",
        kind: "MachineSet",
        metadata: Metadata {
            annotations,
            // managed-by goes on the MachineSet only: template labels end up on every Machine.
            labels: map([(CLUSTER_LABEL, infra), MANAGED_BY]),
            name: name.to_string(),
            namespace: MACHINE_API_NAMESPACE.to_string(),
        },
        spec: MachineSetSpec {
            replicas: m.replicas,
            selector: Selector { match_labels: map([(CLUSTER_LABEL, infra), (MACHINESET_LABEL, name)]) },
            template: Template {
                metadata: Labels {
                    labels: map([
                        (CLUSTER_LABEL, infra),
                        ("machine.openshift.io/cluster-api-machine-role", "worker"),
                        ("machine.openshift.io/cluster-api-machine-type", "worker"),
                        (MACHINESET_LABEL, name),
                        // WMCO configures only Machines with exactly this label (capital W).
                        ("machine.openshift.io/os-id", "Windows"),
                    ]),
                },
                spec: MachineSpec {
                    metadata: Labels { labels: map([("node-role.kubernetes.io/worker", "")]) },
                    provider_spec: ProviderSpecHolder { value },
                },
            },
        },
    }
}
