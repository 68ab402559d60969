//! GCP providerSpec: GCPMachineProviderSpec (reference wmco-cluster-objects §1.4).

use super::{LocalRef, USER_DATA_SECRET};
use crate::plan::{GcpPlan, MachineSetPlan};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GcpProviderSpec {
    api_version: &'static str,
    kind: &'static str,
    #[serde(rename = "canIPForward")]
    can_ip_forward: bool,
    credentials_secret: LocalRef,
    deletion_protection: bool,
    disks: Vec<Disk>,
    machine_type: String,
    network_interfaces: Vec<NetworkInterface>,
    #[serde(rename = "projectID")]
    project_id: String,
    region: String,
    service_accounts: Vec<ServiceAccount>,
    tags: Vec<String>,
    user_data_secret: LocalRef,
    zone: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Disk {
    auto_delete: bool,
    boot: bool,
    image: String,
    labels: BTreeMap<String, String>,
    size_gb: u32,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Serialize)]
struct NetworkInterface {
    network: String,
    subnetwork: String,
}

#[derive(Serialize)]
struct ServiceAccount {
    email: String,
    scopes: Vec<&'static str>,
}

pub fn render(p: &GcpPlan, m: &MachineSetPlan) -> GcpProviderSpec {
    GcpProviderSpec {
        api_version: "machine.openshift.io/v1beta1",
        kind: "GCPMachineProviderSpec",
        can_ip_forward: false,
        credentials_secret: LocalRef::new("gcp-cloud-credentials"),
        deletion_protection: false,
        disks: vec![Disk {
            auto_delete: true,
            boot: true,
            image: m.image.clone(),
            labels: BTreeMap::new(),
            size_gb: p.disk_size_gb,
            kind: p.disk_type.clone(),
        }],
        machine_type: p.machine_type.clone(),
        network_interfaces: vec![NetworkInterface { network: p.network.clone(), subnetwork: p.subnetwork.clone() }],
        project_id: p.project_id.clone(),
        region: p.region.clone(),
        service_accounts: vec![ServiceAccount {
            email: p.service_account_email.clone(),
            scopes: vec!["https://www.googleapis.com/auth/cloud-platform"],
        }],
        tags: p.tags.clone(),
        user_data_secret: LocalRef::new(USER_DATA_SECRET),
        zone: m.zone.clone().unwrap_or_default(),
    }
}
