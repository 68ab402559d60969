//! Azure providerSpec: AzureMachineProviderSpec (reference wmco-cluster-objects §1.3). Secret references here are
//! SecretReferences and carry a namespace; on every other platform they must not.

use super::USER_DATA_SECRET;
use crate::plan::{AzurePlan, MACHINE_API_NAMESPACE, MachineSetPlan};
use serde::Serialize;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AzureProviderSpec {
    api_version: &'static str,
    kind: &'static str,
    credentials_secret: SecretRef,
    image: Image,
    location: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    managed_identity: Option<String>,
    network_resource_group: String,
    os_disk: OsDisk,
    #[serde(rename = "publicIP")]
    public_ip: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    public_load_balancer: Option<String>,
    resource_group: String,
    subnet: String,
    user_data_secret: SecretRef,
    vm_size: String,
    vnet: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    zone: Option<String>,
}

#[derive(Serialize)]
struct SecretRef {
    name: &'static str,
    namespace: &'static str,
}

/// Either the four marketplace fields with an empty resourceID, or only the resourceID (the webhook's rule).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Image {
    offer: String,
    publisher: String,
    #[serde(rename = "resourceID")]
    resource_id: String,
    sku: String,
    version: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OsDisk {
    #[serde(rename = "diskSizeGB")]
    disk_size_gb: u32,
    managed_disk: ManagedDisk,
    os_type: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ManagedDisk {
    storage_account_type: String,
}

fn image(spec: &str) -> Image {
    let empty = || String::new();
    if spec.starts_with('/') {
        return Image {
            offer: empty(),
            publisher: empty(),
            resource_id: spec.to_string(),
            sku: empty(),
            version: empty(),
        };
    }
    let mut parts = spec.splitn(4, ':').map(str::to_string);
    let mut next = || parts.next().unwrap_or_default();
    let (publisher, offer, sku, version) = (next(), next(), next(), next());
    Image { offer, publisher, resource_id: empty(), sku, version }
}

pub fn render(p: &AzurePlan, m: &MachineSetPlan) -> AzureProviderSpec {
    AzureProviderSpec {
        api_version: "azureproviderconfig.openshift.io/v1beta1",
        kind: "AzureMachineProviderSpec",
        credentials_secret: SecretRef { name: "azure-cloud-credentials", namespace: MACHINE_API_NAMESPACE },
        image: image(&m.image),
        location: p.location.clone(),
        managed_identity: p.managed_identity.clone(),
        network_resource_group: p.network_resource_group.clone(),
        os_disk: OsDisk {
            disk_size_gb: p.os_disk_size_gb,
            managed_disk: ManagedDisk { storage_account_type: p.os_disk_storage_account_type.clone() },
            os_type: "Windows",
        },
        public_ip: false,
        public_load_balancer: p.public_load_balancer.clone(),
        resource_group: p.resource_group.clone(),
        subnet: p.subnet.clone(),
        user_data_secret: SecretRef { name: USER_DATA_SECRET, namespace: MACHINE_API_NAMESPACE },
        vm_size: p.vm_size.clone(),
        vnet: p.vnet.clone(),
        zone: m.zone.clone().filter(|z| !z.is_empty()),
    }
}
