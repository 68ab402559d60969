//! Nutanix providerSpec: NutanixMachineProviderConfig, machine.openshift.io/v1 (reference wmco-cluster-objects §1.5).

use super::{LocalRef, USER_DATA_SECRET};
use crate::plan::{MachineSetPlan, NutanixIdPlan, NutanixPlan};
use serde::Serialize;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NutanixProviderConfig {
    api_version: &'static str,
    kind: &'static str,
    /// "" means Legacy, the only boot type Windows nodes support.
    boot_type: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    categories: Vec<Category>,
    cluster: Identifier,
    credentials_secret: LocalRef,
    #[serde(skip_serializing_if = "Option::is_none")]
    failure_domain: Option<LocalRef>,
    image: Identifier,
    memory_size: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    project: Option<Identifier>,
    subnets: Vec<Identifier>,
    system_disk_size: String,
    user_data_secret: LocalRef,
    vcpu_sockets: u32,
    vcpus_per_socket: u32,
}

#[derive(Serialize)]
struct Category {
    key: String,
    value: String,
}

#[derive(Serialize)]
struct Identifier {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    uuid: Option<String>,
}

fn identifier(id: &NutanixIdPlan) -> Identifier {
    let value = Some(id.value.clone());
    match id.kind {
        "uuid" => Identifier { name: None, kind: "uuid", uuid: value },
        _ => Identifier { name: value, kind: "name", uuid: None },
    }
}

pub fn render(p: &NutanixPlan, m: &MachineSetPlan) -> NutanixProviderConfig {
    NutanixProviderConfig {
        api_version: "machine.openshift.io/v1",
        kind: "NutanixMachineProviderConfig",
        boot_type: p.boot_type.clone(),
        categories: p.categories.iter().map(|(k, v)| Category { key: k.clone(), value: v.clone() }).collect(),
        cluster: identifier(&p.cluster),
        credentials_secret: LocalRef::new("nutanix-credentials"),
        failure_domain: m.zone.as_deref().map(LocalRef::new),
        image: identifier(&NutanixIdPlan { kind: "name", value: m.image.clone() }),
        memory_size: p.memory_size.clone(),
        project: p.project.as_ref().map(identifier),
        subnets: vec![identifier(&p.subnet)],
        system_disk_size: p.system_disk_size.clone(),
        user_data_secret: LocalRef::new(USER_DATA_SECRET),
        vcpu_sockets: p.vcpu_sockets,
        vcpus_per_socket: p.vcpus_per_socket,
    }
}
