//! AWS providerSpec: AWSMachineProviderConfig (reference wmco-cluster-objects §1.2).

use super::{LocalRef, USER_DATA_SECRET};
use crate::plan::{AwsPlan, MachineSetPlan};
use serde::Serialize;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AwsProviderConfig {
    api_version: &'static str,
    kind: &'static str,
    ami: Id,
    block_devices: Vec<BlockDevice>,
    credentials_secret: LocalRef,
    device_index: u32,
    iam_instance_profile: Id,
    instance_type: String,
    metadata_service_options: MetadataServiceOptions,
    placement: Placement,
    security_groups: Vec<FilterRef>,
    subnet: FilterRef,
    tags: Vec<Tag>,
    user_data_secret: LocalRef,
}

#[derive(Serialize)]
struct Id {
    id: String,
}

#[derive(Serialize)]
struct BlockDevice {
    ebs: Ebs,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Ebs {
    iops: u32,
    volume_size: u32,
    volume_type: String,
}

#[derive(Serialize)]
struct MetadataServiceOptions {
    authentication: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Placement {
    availability_zone: String,
    region: String,
}

#[derive(Serialize)]
struct FilterRef {
    filters: Vec<Filter>,
}

#[derive(Serialize)]
struct Filter {
    name: &'static str,
    values: Vec<String>,
}

#[derive(Serialize)]
struct Tag {
    name: String,
    value: String,
}

fn by_name_tag(value: String) -> FilterRef {
    FilterRef { filters: vec![Filter { name: "tag:Name", values: vec![value] }] }
}

pub fn render(infra: &str, p: &AwsPlan, m: &MachineSetPlan) -> AwsProviderConfig {
    let zone = m.zone.clone().unwrap_or_default();
    let mut tags = vec![Tag { name: format!("kubernetes.io/cluster/{infra}"), value: "owned".into() }];
    tags.extend(p.tags.iter().map(|(n, v)| Tag { name: n.clone(), value: v.clone() }));
    AwsProviderConfig {
        api_version: "awsproviderconfig.openshift.io/v1beta1",
        kind: "AWSMachineProviderConfig",
        ami: Id { id: m.image.clone() },
        block_devices: vec![BlockDevice {
            ebs: Ebs { iops: 0, volume_size: p.volume_size, volume_type: p.volume_type.clone() },
        }],
        credentials_secret: LocalRef::new("aws-cloud-credentials"),
        device_index: 0,
        iam_instance_profile: Id { id: p.iam_instance_profile.clone() },
        instance_type: p.instance_type.clone(),
        // WMCO reads the node's host name through IMDSv1.
        metadata_service_options: MetadataServiceOptions { authentication: "Optional" },
        placement: Placement { availability_zone: zone.clone(), region: p.region.clone() },
        security_groups: p.security_groups.iter().map(|g| by_name_tag(g.clone())).collect(),
        subnet: by_name_tag(p.subnet.replace("{zone}", &zone)),
        tags,
        user_data_secret: LocalRef::new(USER_DATA_SECRET),
    }
}
