//! vSphere providerSpec: VSphereMachineProviderSpec (reference wmco-cluster-objects §1.6).

use super::{LocalRef, USER_DATA_SECRET};
use crate::plan::{MachineSetPlan, VspherePlan};
use serde::Serialize;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VsphereProviderSpec {
    api_version: &'static str,
    kind: &'static str,
    credentials_secret: LocalRef,
    #[serde(rename = "diskGiB")]
    disk_gib: u32,
    #[serde(rename = "memoryMiB")]
    memory_mib: u32,
    network: Network,
    #[serde(rename = "numCPUs")]
    num_cpus: u32,
    num_cores_per_socket: u32,
    snapshot: &'static str,
    template: String,
    user_data_secret: LocalRef,
    workspace: Workspace,
}

/// Exactly one NIC: Windows nodes do not support dual NICs.
#[derive(Serialize)]
struct Network {
    devices: Vec<Device>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Device {
    network_name: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Workspace {
    datacenter: String,
    datastore: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    folder: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resource_pool: Option<String>,
    server: String,
}

pub fn render(p: &VspherePlan, m: &MachineSetPlan) -> VsphereProviderSpec {
    VsphereProviderSpec {
        api_version: "vsphereprovider.openshift.io/v1beta1",
        kind: "VSphereMachineProviderSpec",
        credentials_secret: LocalRef::new("vsphere-cloud-credentials"),
        disk_gib: p.disk_gib,
        memory_mib: p.memory_mib,
        network: Network { devices: vec![Device { network_name: p.network.clone() }] },
        num_cpus: p.num_cpus,
        num_cores_per_socket: p.num_cores_per_socket,
        snapshot: "",
        template: m.image.clone(),
        user_data_secret: LocalRef::new(USER_DATA_SECRET),
        workspace: Workspace {
            datacenter: p.datacenter.clone(),
            datastore: p.datastore.clone(),
            folder: p.folder.clone(),
            resource_pool: p.resource_pool.clone(),
            server: p.server.clone(),
        },
    }
}
