//! The cluster-inputs file (`wmrender.yaml`) as typed values: ../shared/spec/inputs.md, field for field.
//!
//! Each struct is read by its [`Decode`] impl, which lists the keys it accepts (anything else is an unknown-field
//! error) and which are required. Values are kept [`Located`] where a later rule may need to point at them.
//! Defaults are not filled in here: that is the plan's job, so that "not written" stays visible to validation.
//! docs/inputs.md documents every field; keep the two in step.

use super::yaml::{Decode, Fields, Located, Node, Value};
use crate::diagnostics::{Diagnostic, Diagnostics};
use crate::windows::WindowsVersion;
use serde::Serialize;

pub const API_VERSION: &str = "wmrender.dev/v1alpha1";
pub const KIND: &str = "ClusterInputs";

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterInputs {
    pub metadata: Metadata,
    pub spec: Spec,
}

#[derive(Clone, Debug, Serialize)]
pub struct Metadata {
    pub name: Located<String>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Spec {
    #[serde(rename = "infrastructureID")]
    pub infrastructure_id: Located<String>,
    #[serde(rename = "apiServerInternalURL")]
    pub api_server_internal_url: Located<String>,
    /// Kubernetes minor version of the cluster (`"1.35"`): selects version-dependent kubelet and kube-proxy fields.
    pub kubernetes_version: Option<Located<String>>,
    pub platform: Located<Platform>,
    pub windows_version: Option<Located<WindowsVersion>>,
    pub machine_sets: Vec<MachineSetInput>,
    /// `None` when the key is absent; `Some(vec![])` renders an empty `windows-instances` ConfigMap, which is how
    /// a user deconfigures the last BYOH host.
    pub byoh: Option<Vec<ByohHost>>,
    pub network: Network,
    pub proxy: Option<Proxy>,
    pub mirrors: Mirrors,
    pub pause_image: Option<Located<String>>,
    pub operator: Operator,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Platform {
    Aws(Aws),
    Azure(Azure),
    Gcp(Gcp),
    Nutanix(Nutanix),
    Vsphere(Vsphere),
    None,
}

impl Platform {
    pub const NAMES: [&'static str; 6] = ["aws", "azure", "gcp", "nutanix", "vsphere", "none"];

    pub fn name(&self) -> &'static str {
        match self {
            Platform::Aws(_) => "aws",
            Platform::Azure(_) => "azure",
            Platform::Gcp(_) => "gcp",
            Platform::Nutanix(_) => "nutanix",
            Platform::Vsphere(_) => "vsphere",
            Platform::None => "none",
        }
    }
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Aws {
    pub region: Located<String>,
    pub ami: Option<Located<String>>,
    pub instance_type: Option<Located<String>>,
    pub volume_size: Option<Located<u32>>,
    pub volume_type: Option<Located<String>>,
    pub iam_instance_profile: Option<Located<String>>,
    pub security_groups: Option<Vec<Located<String>>>,
    pub subnet: Option<Located<String>>,
    pub tags: Vec<NameValue>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NameValue {
    pub name: Located<String>,
    pub value: Located<String>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Azure {
    pub location: Located<String>,
    pub resource_group: Option<Located<String>>,
    pub network_resource_group: Option<Located<String>>,
    pub vnet: Option<Located<String>>,
    pub subnet: Option<Located<String>>,
    pub vm_size: Option<Located<String>>,
    pub image: Option<Located<String>>,
    #[serde(rename = "osDiskSizeGB")]
    pub os_disk_size_gb: Option<Located<u32>>,
    pub os_disk_storage_account_type: Option<Located<String>>,
    pub public_load_balancer: Option<Located<String>>,
    pub managed_identity: Option<Located<String>>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Gcp {
    #[serde(rename = "projectID")]
    pub project_id: Located<String>,
    pub region: Located<String>,
    pub machine_type: Option<Located<String>>,
    pub image: Option<Located<String>>,
    pub disk_size_gb: Option<Located<u32>>,
    pub disk_type: Option<Located<String>>,
    pub network: Option<Located<String>>,
    pub subnetwork: Option<Located<String>>,
    pub service_account_email: Option<Located<String>>,
    pub tags: Option<Vec<Located<String>>>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Nutanix {
    pub cluster: NutanixId,
    /// Image name as uploaded to Prism.
    pub image: Option<Located<String>>,
    pub subnets: Located<Vec<NutanixId>>,
    pub project: Option<NutanixId>,
    pub vcpu_sockets: Option<Located<u32>>,
    pub vcpus_per_socket: Option<Located<u32>>,
    pub memory_size: Option<Located<String>>,
    pub system_disk_size: Option<Located<String>>,
    pub boot_type: Option<Located<String>>,
    pub categories: Vec<KeyValue>,
}

/// A Nutanix resource named by exactly one of `uuid` or `name`.
#[derive(Clone, Debug, Serialize)]
pub struct NutanixId {
    pub uuid: Option<Located<String>>,
    pub name: Option<Located<String>>,
    #[serde(skip)]
    pub at: Located<()>,
}

#[derive(Clone, Debug, Serialize)]
pub struct KeyValue {
    pub key: Located<String>,
    pub value: Located<String>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Vsphere {
    pub server: Located<String>,
    pub datacenter: Located<String>,
    pub datastore: Located<String>,
    pub folder: Option<Located<String>>,
    pub resource_pool: Option<Located<String>>,
    pub network: Located<String>,
    pub template: Option<Located<String>>,
    #[serde(rename = "numCPUs")]
    pub num_cpus: Option<Located<u32>>,
    pub num_cores_per_socket: Option<Located<u32>>,
    #[serde(rename = "memoryMiB")]
    pub memory_mib: Option<Located<u32>>,
    #[serde(rename = "diskGiB")]
    pub disk_gib: Option<Located<u32>>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineSetInput {
    pub name: Option<Located<String>>,
    pub zone: Option<Located<String>>,
    pub replicas: Option<Located<Replicas>>,
    pub windows_version: Option<Located<WindowsVersion>>,
    pub image: Option<Located<String>>,
    #[serde(skip)]
    pub at: Located<()>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ByohHost {
    pub address: Located<String>,
    pub username: Located<String>,
    pub windows_version: Option<Located<WindowsVersion>>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Network {
    pub service_network: Option<Vec<Located<String>>>,
    pub cluster_network: Option<Vec<Located<String>>>,
    pub hybrid_cluster_network: Option<Vec<Located<String>>>,
    #[serde(rename = "hybridOverlayVXLANPort")]
    pub hybrid_overlay_vxlan_port: Option<Located<u32>>,
    #[serde(skip)]
    pub at: Located<()>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Proxy {
    pub http_proxy: Option<Located<String>>,
    pub https_proxy: Option<Located<String>>,
    pub no_proxy: Vec<Located<String>>,
}

#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Mirrors {
    pub files: Vec<Located<String>>,
    pub image_digest_mirrors: Vec<MirrorEntry>,
    pub image_tag_mirrors: Vec<MirrorEntry>,
}

/// One entry of `imageDigestMirrors` / `imageTagMirrors`, same shape as the openshift/api type.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MirrorEntry {
    pub source: Located<String>,
    pub mirrors: Vec<Located<String>>,
    pub mirror_source_policy: Option<Located<String>>,
}

#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Operator {
    pub install: bool,
    pub namespace: Option<Located<String>>,
    pub package: Option<Located<String>>,
    pub channel: Option<Located<String>>,
    pub source: Option<Located<String>>,
    pub source_namespace: Option<Located<String>>,
    pub install_plan_approval: Option<Located<String>>,
}

/// Reads the whole document. `None` when any field could not be read; `diags` then says why.
pub fn decode_document(node: &Node, diags: &mut Diagnostics) -> Option<ClusterInputs> {
    let decoded = decode_fields(node, diags);
    if decoded.is_none() && !diags.has_errors() {
        // Every rule that drops a value says why; this is the net under that promise, so that exit code 2
        // never comes without a diagnostic.
        diags.push(
            Diagnostic::error(&node.loc, "(document)", "the inputs could not be read as a ClusterInputs document")
                .expected("a ClusterInputs document as in docs/inputs.md"),
        );
    }
    decoded
}

fn decode_fields(node: &Node, diags: &mut Diagnostics) -> Option<ClusterInputs> {
    let mut f = Fields::new(node, "", diags)?;
    let api_version: Option<Located<String>> = f.req("apiVersion", API_VERSION, diags);
    let kind: Option<Located<String>> = f.req("kind", KIND, diags);
    let metadata = f.req::<Metadata>("metadata", "a mapping with `name`", diags);
    let spec = f.req::<Spec>("spec", "a mapping", diags);
    f.finish(diags);
    if let Some(v) = &api_version
        && v.value != API_VERSION
    {
        diags.push(v.error(format!("unsupported apiVersion `{}`", v.value)).expected(API_VERSION));
    }
    if let Some(k) = &kind
        && k.value != KIND
    {
        diags.push(k.error(format!("unsupported kind `{}`", k.value)).expected(KIND));
    }
    Some(ClusterInputs { metadata: metadata?, spec: spec? })
}

impl Decode for Metadata {
    fn decode(node: &Node, field: &str, diags: &mut Diagnostics) -> Option<Self> {
        let mut f = Fields::new(node, field, diags)?;
        let name = f.req("name", "a short name for this cluster, e.g. prod-east", diags);
        // Tools that carry the inputs as a Kubernetes-style object (kustomize, kpt) add labels and annotations
        // such as config.kubernetes.io/local-config; they mean nothing to the render.
        f.node("labels");
        f.node("annotations");
        f.finish(diags);
        Some(Metadata { name: name? })
    }
}

impl Decode for Spec {
    fn decode(node: &Node, field: &str, diags: &mut Diagnostics) -> Option<Self> {
        let mut f = Fields::new(node, field, diags)?;
        let infrastructure_id = f.req("infrastructureID", "status.infrastructureName of infrastructure/cluster", diags);
        let api_server_internal_url = f.req(
            "apiServerInternalURL",
            "status.apiServerInternalURI of infrastructure/cluster, e.g. https://api-int.prod.example.com:6443",
            diags,
        );
        let kubernetes_version = f.opt("kubernetesVersion", diags);
        let platform =
            f.req("platform", "a mapping with exactly one of: aws, azure, gcp, nutanix, vsphere, none", diags);
        let windows_version = f.opt("windowsVersion", diags);
        let machine_sets = f.opt("machineSets", diags).unwrap_or_default();
        let byoh_written = f.has("byoh");
        let byoh: Option<Vec<ByohHost>> = f.opt("byoh", diags);
        let byoh = byoh_written.then(|| byoh.unwrap_or_default());
        let network = match f.node("network") {
            Some(n) => Network::decode(n, &f.path("network"), diags),
            None => Some(Network::empty(Located { field: f.path("network"), ..f.at() })),
        };
        let proxy = f.opt("proxy", diags);
        let mirrors = f.opt("mirrors", diags).unwrap_or_default();
        let pause_image = f.opt("pauseImage", diags);
        let operator = match f.node("operator") {
            Some(n) => Operator::decode(n, &f.path("operator"), diags),
            None => Some(Operator::default()),
        };
        f.finish(diags);
        Some(Spec {
            infrastructure_id: infrastructure_id?,
            api_server_internal_url: api_server_internal_url?,
            kubernetes_version,
            platform: platform?,
            windows_version,
            machine_sets,
            byoh,
            network: network?,
            proxy,
            mirrors,
            pause_image,
            operator: operator?,
        })
    }
}

/// `replicas` of a MachineSet: a count, or `auto`: `spec.replicas` is left out of the rendered MachineSet so that a
/// MachineAutoscaler (or a person) owns it and a GitOps sync never resets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replicas {
    Count(u32),
    Auto,
}

/// As written: a number, or the string `auto` (the inputs digest reads this).
impl Serialize for Replicas {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Replicas::Count(n) => s.serialize_u32(*n),
            Replicas::Auto => s.serialize_str("auto"),
        }
    }
}

impl Decode for Replicas {
    fn decode(node: &Node, field: &str, diags: &mut Diagnostics) -> Option<Self> {
        let expected = "a whole number of Machines from 0 to 4294967295, or `auto` (an autoscaler owns the count)";
        let problem = match &node.value {
            Value::Str(s) if s == "auto" => return Some(Replicas::Auto),
            Value::Int(i) => match u32::try_from(*i) {
                Ok(n) => return Some(Replicas::Count(n)),
                Err(_) => format!("{i} is out of range"),
            },
            Value::Str(s) => format!("`{s}` is not a number of Machines"),
            Value::Seq(_) => "expected a number or `auto`, found a list".to_string(),
            Value::Map(_) => "expected a number or `auto`, found a mapping".to_string(),
            Value::Null => "expected a number or `auto`, found null".to_string(),
            Value::Bool(_) | Value::Float(_) => {
                format!("`{}` is not a number of Machines", node.plain.as_deref().unwrap_or("?"))
            }
        };
        diags.push(Diagnostic::error(&node.loc, field, problem).expected(expected));
        None
    }
}

impl Decode for WindowsVersion {
    fn decode(node: &Node, field: &str, diags: &mut Diagnostics) -> Option<Self> {
        let s = String::decode(node, field, diags)?;
        let v = WindowsVersion::parse(&s);
        if v.is_none() {
            diags.push(
                Diagnostic::error(&node.loc, field, format!("unknown Windows Server version `{s}`"))
                    .expected("\"2019\", \"2022\" or \"2025\""),
            );
        }
        v
    }
}

impl Decode for Platform {
    fn decode(node: &Node, field: &str, diags: &mut Diagnostics) -> Option<Self> {
        let mut f = Fields::new(node, field, diags)?;
        let mut found: Vec<(&str, Option<Platform>)> = Vec::new();
        if f.has("aws") {
            // `aws:` with nothing after it is an empty mapping: its required fields are reported missing.
            let node = f.node_or_null("aws");
            found.push(("aws", node.and_then(|n| Aws::decode(n, &f.path("aws"), diags)).map(Platform::Aws)));
        }
        if f.has("azure") {
            // `azure:` with nothing after it is an empty mapping: its required fields are reported missing.
            let node = f.node_or_null("azure");
            found.push(("azure", node.and_then(|n| Azure::decode(n, &f.path("azure"), diags)).map(Platform::Azure)));
        }
        if f.has("gcp") {
            // `gcp:` with nothing after it is an empty mapping: its required fields are reported missing.
            let node = f.node_or_null("gcp");
            found.push(("gcp", node.and_then(|n| Gcp::decode(n, &f.path("gcp"), diags)).map(Platform::Gcp)));
        }
        if f.has("nutanix") {
            // `nutanix:` with nothing after it is an empty mapping: its required fields are reported missing.
            let node = f.node_or_null("nutanix");
            found.push((
                "nutanix",
                node.and_then(|n| Nutanix::decode(n, &f.path("nutanix"), diags)).map(Platform::Nutanix),
            ));
        }
        if f.has("vsphere") {
            // `vsphere:` with nothing after it is an empty mapping: its required fields are reported missing.
            let node = f.node_or_null("vsphere");
            found.push((
                "vsphere",
                node.and_then(|n| Vsphere::decode(n, &f.path("vsphere"), diags)).map(Platform::Vsphere),
            ));
        }
        if f.has("none") {
            // `none: {}` takes no settings; reading it as a mapping reports any keys under it.
            let ok = match f.node("none") {
                Some(n) => Fields::new(n, &f.path("none"), diags).map(|nf| nf.finish(diags)).is_some(),
                None => true,
            };
            found.push(("none", ok.then_some(Platform::None)));
        }
        for name in Platform::NAMES {
            f.node(name); // mark every platform key as known for the unknown-key check
        }
        let loc = f.loc().clone();
        f.finish(diags);
        match found.len() {
            1 => found.pop().and_then(|(_, p)| p),
            0 => {
                diags.push(
                    Diagnostic::error(&loc, field, "no platform given")
                        .expected("exactly one of: aws, azure, gcp, nutanix, vsphere, none"),
                );
                None
            }
            _ => {
                let names: Vec<&str> = found.iter().map(|(n, _)| *n).collect();
                diags.push(
                    Diagnostic::error(&loc, field, format!("more than one platform given: {}", names.join(", ")))
                        .expected("exactly one of: aws, azure, gcp, nutanix, vsphere, none"),
                );
                None
            }
        }
    }
}

impl Decode for Aws {
    fn decode(node: &Node, field: &str, diags: &mut Diagnostics) -> Option<Self> {
        let mut f = Fields::new(node, field, diags)?;
        let region = f.req("region", "the AWS region, e.g. us-east-1", diags);
        let ami = f.opt("ami", diags);
        let instance_type = f.opt("instanceType", diags);
        let volume_size = f.opt("volumeSize", diags);
        let volume_type = f.opt("volumeType", diags);
        let iam_instance_profile = f.opt("iamInstanceProfile", diags);
        let security_groups = f.opt("securityGroups", diags);
        let subnet = f.opt("subnet", diags);
        let tags = f.opt("tags", diags).unwrap_or_default();
        f.finish(diags);
        Some(Aws {
            region: region?,
            ami,
            instance_type,
            volume_size,
            volume_type,
            iam_instance_profile,
            security_groups,
            subnet,
            tags,
        })
    }
}

impl Decode for NameValue {
    fn decode(node: &Node, field: &str, diags: &mut Diagnostics) -> Option<Self> {
        let mut f = Fields::new(node, field, diags)?;
        let name = f.req("name", "a tag name", diags);
        let value = f.req("value", "a tag value", diags);
        f.finish(diags);
        Some(NameValue { name: name?, value: value? })
    }
}

impl Decode for Azure {
    fn decode(node: &Node, field: &str, diags: &mut Diagnostics) -> Option<Self> {
        let mut f = Fields::new(node, field, diags)?;
        let location = f.req("location", "the Azure region, e.g. centralus", diags);
        let resource_group = f.opt("resourceGroup", diags);
        let network_resource_group = f.opt("networkResourceGroup", diags);
        let vnet = f.opt("vnet", diags);
        let subnet = f.opt("subnet", diags);
        let vm_size = f.opt("vmSize", diags);
        let image = f.opt("image", diags);
        let os_disk_size_gb = f.opt("osDiskSizeGB", diags);
        let os_disk_storage_account_type = f.opt("osDiskStorageAccountType", diags);
        let public_load_balancer = f.opt("publicLoadBalancer", diags);
        let managed_identity = f.opt("managedIdentity", diags);
        f.finish(diags);
        Some(Azure {
            location: location?,
            resource_group,
            network_resource_group,
            vnet,
            subnet,
            vm_size,
            image,
            os_disk_size_gb,
            os_disk_storage_account_type,
            public_load_balancer,
            managed_identity,
        })
    }
}

impl Decode for Gcp {
    fn decode(node: &Node, field: &str, diags: &mut Diagnostics) -> Option<Self> {
        let mut f = Fields::new(node, field, diags)?;
        let project_id = f.req("projectID", "the GCP project ID", diags);
        let region = f.req("region", "the GCP region, e.g. us-central1", diags);
        let machine_type = f.opt("machineType", diags);
        let image = f.opt("image", diags);
        let disk_size_gb = f.opt("diskSizeGb", diags);
        let disk_type = f.opt("diskType", diags);
        let network = f.opt("network", diags);
        let subnetwork = f.opt("subnetwork", diags);
        let service_account_email = f.opt("serviceAccountEmail", diags);
        let tags = f.opt("tags", diags);
        f.finish(diags);
        Some(Gcp {
            project_id: project_id?,
            region: region?,
            machine_type,
            image,
            disk_size_gb,
            disk_type,
            network,
            subnetwork,
            service_account_email,
            tags,
        })
    }
}

impl Decode for Nutanix {
    fn decode(node: &Node, field: &str, diags: &mut Diagnostics) -> Option<Self> {
        let mut f = Fields::new(node, field, diags)?;
        let cluster = f.req("cluster", "the Prism Element cluster as {uuid: ...} or {name: ...}", diags);
        let image = f.opt("image", diags);
        let subnets = f.req("subnets", "a list with exactly one subnet, {uuid: ...} or {name: ...}", diags);
        let project = f.opt("project", diags);
        let vcpu_sockets = f.opt("vcpuSockets", diags);
        let vcpus_per_socket = f.opt("vcpusPerSocket", diags);
        let memory_size = f.opt("memorySize", diags);
        let system_disk_size = f.opt("systemDiskSize", diags);
        let boot_type = f.opt("bootType", diags);
        let categories = f.opt("categories", diags).unwrap_or_default();
        f.finish(diags);
        Some(Nutanix {
            cluster: cluster?,
            image,
            subnets: subnets?,
            project,
            vcpu_sockets,
            vcpus_per_socket,
            memory_size,
            system_disk_size,
            boot_type,
            categories,
        })
    }
}

impl Decode for NutanixId {
    fn decode(node: &Node, field: &str, diags: &mut Diagnostics) -> Option<Self> {
        let mut f = Fields::new(node, field, diags)?;
        let uuid = f.opt("uuid", diags);
        let name = f.opt("name", diags);
        let at = f.at();
        f.finish(diags);
        Some(NutanixId { uuid, name, at })
    }
}

impl Decode for KeyValue {
    fn decode(node: &Node, field: &str, diags: &mut Diagnostics) -> Option<Self> {
        let mut f = Fields::new(node, field, diags)?;
        let key = f.req("key", "a category key", diags);
        let value = f.req("value", "a category value", diags);
        f.finish(diags);
        Some(KeyValue { key: key?, value: value? })
    }
}

impl Decode for Vsphere {
    fn decode(node: &Node, field: &str, diags: &mut Diagnostics) -> Option<Self> {
        let mut f = Fields::new(node, field, diags)?;
        let server = f.req("server", "the vCenter server name or address", diags);
        let datacenter = f.req("datacenter", "the vCenter datacenter", diags);
        let datastore = f.req("datastore", "the vCenter datastore", diags);
        let folder = f.opt("folder", diags);
        let resource_pool = f.opt("resourcePool", diags);
        let network = f.req("network", "the VM network name of the Linux workers", diags);
        let template = f.opt("template", diags);
        let num_cpus = f.opt("numCPUs", diags);
        let num_cores_per_socket = f.opt("numCoresPerSocket", diags);
        let memory_mib = f.opt("memoryMiB", diags);
        let disk_gib = f.opt("diskGiB", diags);
        f.finish(diags);
        Some(Vsphere {
            server: server?,
            datacenter: datacenter?,
            datastore: datastore?,
            folder,
            resource_pool,
            network: network?,
            template,
            num_cpus,
            num_cores_per_socket,
            memory_mib,
            disk_gib,
        })
    }
}

impl Decode for MachineSetInput {
    fn decode(node: &Node, field: &str, diags: &mut Diagnostics) -> Option<Self> {
        let mut f = Fields::new(node, field, diags)?;
        let v = MachineSetInput {
            name: f.opt("name", diags),
            zone: f.opt("zone", diags),
            replicas: f.opt("replicas", diags),
            windows_version: f.opt("windowsVersion", diags),
            image: f.opt("image", diags),
            at: f.at(),
        };
        f.finish(diags);
        Some(v)
    }
}

impl Decode for ByohHost {
    fn decode(node: &Node, field: &str, diags: &mut Diagnostics) -> Option<Self> {
        let mut f = Fields::new(node, field, diags)?;
        let address = f.req("address", "an IPv4 address or DNS name the operator can reach", diags);
        let username = f.req("username", "the Windows administrator user, e.g. Administrator", diags);
        let windows_version = f.opt("windowsVersion", diags);
        f.finish(diags);
        Some(ByohHost { address: address?, username: username?, windows_version })
    }
}

impl Network {
    /// `network` left out: every field unset, reported at the enclosing `spec`.
    fn empty(at: Located<()>) -> Network {
        Network {
            service_network: None,
            cluster_network: None,
            hybrid_cluster_network: None,
            hybrid_overlay_vxlan_port: None,
            at,
        }
    }
}

impl Decode for Network {
    fn decode(node: &Node, field: &str, diags: &mut Diagnostics) -> Option<Self> {
        let mut f = Fields::new(node, field, diags)?;
        let v = Network {
            service_network: f.opt("serviceNetwork", diags),
            cluster_network: f.opt("clusterNetwork", diags),
            hybrid_cluster_network: f.opt("hybridClusterNetwork", diags),
            hybrid_overlay_vxlan_port: f.opt("hybridOverlayVXLANPort", diags),
            at: f.at(),
        };
        f.finish(diags);
        Some(v)
    }
}

impl Decode for Proxy {
    fn decode(node: &Node, field: &str, diags: &mut Diagnostics) -> Option<Self> {
        let mut f = Fields::new(node, field, diags)?;
        let v = Proxy {
            http_proxy: f.opt("httpProxy", diags),
            https_proxy: f.opt("httpsProxy", diags),
            no_proxy: f.opt("noProxy", diags).unwrap_or_default(),
        };
        f.finish(diags);
        Some(v)
    }
}

impl Decode for Mirrors {
    fn decode(node: &Node, field: &str, diags: &mut Diagnostics) -> Option<Self> {
        let mut f = Fields::new(node, field, diags)?;
        let v = Mirrors {
            files: f.opt("files", diags).unwrap_or_default(),
            image_digest_mirrors: f.opt("imageDigestMirrors", diags).unwrap_or_default(),
            image_tag_mirrors: f.opt("imageTagMirrors", diags).unwrap_or_default(),
        };
        f.finish(diags);
        Some(v)
    }
}

impl Decode for MirrorEntry {
    fn decode(node: &Node, field: &str, diags: &mut Diagnostics) -> Option<Self> {
        let mut f = Fields::new(node, field, diags)?;
        let source = f.req("source", "a registry or repository, e.g. registry.redhat.io/ubi9", diags);
        let mirrors = f.opt("mirrors", diags).unwrap_or_default();
        let mirror_source_policy = f.opt("mirrorSourcePolicy", diags);
        f.finish(diags);
        Some(MirrorEntry { source: source?, mirrors, mirror_source_policy })
    }
}

impl Decode for Operator {
    fn decode(node: &Node, field: &str, diags: &mut Diagnostics) -> Option<Self> {
        let mut f = Fields::new(node, field, diags)?;
        let v = Operator {
            install: f.opt("install", diags).unwrap_or(false),
            namespace: f.opt("namespace", diags),
            package: f.opt("package", diags),
            channel: f.opt("channel", diags),
            source: f.opt("source", diags),
            source_namespace: f.opt("sourceNamespace", diags),
            install_plan_approval: f.opt("installPlanApproval", diags),
        };
        f.finish(diags);
        Some(v)
    }
}
