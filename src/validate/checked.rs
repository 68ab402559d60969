//! The value validation produces: the inputs with every default resolved and every derived value computed
//! (names, versions, images, parsed networks, canonical sizes, merged registry hosts), and the warnings.
//! [`crate::plan`] is an infallible function of it; nothing after this point re-reads the raw inputs' options.

use super::machinesets::derived_machine_set_name;
pub use super::ssh_key::AuthorizedKey;
use crate::diagnostics::Diagnostics;
use crate::duration::Duration;
use crate::inputs::Loaded;
use crate::inputs::schema::{self, Platform, PlatformKind, Replicas};
use crate::inputs::yaml::Located;
use crate::quantity::Quantity;
use crate::registries::RegistryHost;
use crate::windows::WindowsVersion;
use ipnet::IpNet;
use std::net::IpAddr;

pub const DEFAULT_WMCO_NAMESPACE: &str = "openshift-windows-machine-config-operator";
pub const DEFAULT_WINDOWS_VERSION: WindowsVersion = WindowsVersion::V2022;
pub const DEFAULT_SERVICE_NETWORK: &str = "172.30.0.0/16";
pub const DEFAULT_CLUSTER_NETWORK: &str = "10.128.0.0/14";
pub const DEFAULT_PAUSE_IMAGE: &str = "mcr.microsoft.com/oss/kubernetes/pause:3.9";
/// Nutanix sizes left out: what the installer gives Linux workers' peers.
pub const DEFAULT_NUTANIX_MEMORY: &str = "16Gi";
pub const DEFAULT_NUTANIX_SYSTEM_DISK: &str = "120Gi";

/// The Kubernetes minor version of the cluster, which decides version-dependent kubelet and kube-proxy fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct KubernetesVersion {
    pub minor: u32,
}

impl KubernetesVersion {
    /// OpenShift 4.22 (WMCO 10.22) runs Kubernetes 1.35.
    pub const DEFAULT: KubernetesVersion = KubernetesVersion { minor: 35 };
    pub const SUPPORTED: &'static str = "\"1.30\" to \"1.36\" (a patch version is ignored)";

    /// `1.35`, `v1.35` or `1.35.2`.
    pub fn parse(s: &str) -> Option<KubernetesVersion> {
        let s = s.strip_prefix('v').unwrap_or(s);
        let mut parts = s.split('.');
        let (major, minor) = (parts.next()?, parts.next()?);
        if major != "1" || parts.clone().count() > 1 || parts.any(|p| p.parse::<u32>().is_err()) {
            return None;
        }
        let minor: u32 = minor.parse().ok()?;
        (30..=36).contains(&minor).then_some(KubernetesVersion { minor })
    }
}

/// Validated inputs, ready for the plan.
#[derive(Clone, Debug)]
pub struct Checked {
    /// The inputs as read, for the inputs digest.
    pub loaded: Loaded,
    pub infrastructure_id: String,
    pub platform: PlatformPlan,
    pub machine_sets: Vec<MachineSetPlan>,
    /// `None`: no `windows-instances` ConfigMap. `Some(empty)`: an empty one (deconfigures every BYOH host).
    pub byoh: Option<Vec<ByohPlan>>,
    pub operator: OperatorPlan,
    pub pause_image: String,
    /// One containerd host configuration per mirrored registry host, sorted by host: the merge's only run.
    pub registries: Vec<RegistryHost>,
    pub kubernetes: KubernetesVersion,
    pub api_server_url: String,
    /// The first service network.
    pub service_network: IpNet,
    /// Its 10th address: the cluster DNS service.
    pub cluster_dns: IpAddr,
    /// The pod networks (`clusterNetwork`), for NO_PROXY.
    pub cluster_networks: Vec<IpNet>,
    /// The cluster's custom hybrid-overlay VXLAN port, if it has one.
    pub vxlan_port: Option<u32>,
    pub proxy: Option<ProxySettings>,
    /// The key the `windows-user-data` Secret authorises; `Some` exactly when that Secret is rendered (without
    /// the operator, on a platform with Machines).
    pub ssh_public_key: Option<AuthorizedKey>,
    /// `wmrender controller` in the cluster, when the inputs ask for it.
    pub controller: Option<ControllerPlan>,
    pub node_logs: NodeLogs,
    /// The public keys (PEM, one key each) a node trusts on a bundle it pulls, in the inputs' order.
    pub bundle_keys: Vec<String>,
    pub warnings: Diagnostics,
}

/// How the node services' log files are rotated (`nodeLogs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeLogs {
    /// A log file is rotated once it reaches this size; zero: never.
    pub max_size: Quantity,
    /// Rotated files older than this are removed; zero: kept.
    pub max_age: Duration,
    /// How often kube-log-runner flushes what it wrote.
    pub flush_interval: Duration,
}

impl NodeLogs {
    /// WMCO's suggestion (docs/log-rotation-managed-services.md): 100M, a week, 5 s.
    pub const DEFAULT_SIZE: &str = "100M";
    pub const DEFAULT_AGE: &str = "7d";
    pub const DEFAULT_FLUSH: &str = "5s";
}

/// The in-cluster controller's Deployment: its image, where the node payload comes from, how many replicas.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerPlan {
    pub image: String,
    /// An image holding the payload (the tree `--payload` takes) under `/payload`, copied into the pod at start.
    pub payload_image: Option<String>,
    pub replicas: u32,
    /// The repository CI publishes the bundle to: the controller points nodes at it (`--pull-from`).
    pub pull_from: Option<String>,
    /// The repository CI publishes the payload to: the controller points nodes at it (`--pull-payload-from`).
    pub pull_payload_from: Option<String>,
}

/// Two: one leads, the other takes over within a Lease term when its node goes.
pub const DEFAULT_CONTROLLER_REPLICAS: u32 = 2;

#[derive(Clone, Debug)]
pub struct ProxySettings {
    pub http: Option<String>,
    pub https: Option<String>,
    pub no_proxy: Vec<String>,
}

#[derive(Clone, Debug)]
pub struct MachineSetPlan {
    pub name: String,
    pub zone: Option<String>,
    /// `None`: `replicas: auto`, left out of the MachineSet for an autoscaler.
    pub replicas: Option<u32>,
    pub windows_version: WindowsVersion,
    /// AMI ID, Azure image, GCP image, Nutanix image name or vSphere template, as the platform reads it.
    pub image: String,
}

#[derive(Clone, Debug)]
pub struct ByohPlan {
    pub address: String,
    pub username: String,
    pub windows_version: WindowsVersion,
}

#[derive(Clone, Debug)]
pub struct OperatorPlan {
    pub install: bool,
    pub namespace: String,
    pub package: String,
    pub channel: String,
    pub source: String,
    pub source_namespace: String,
    pub install_plan_approval: String,
}

impl OperatorPlan {
    /// Who configures the nodes: the one setting sync follows (DESIGN: "Two ways to run").
    pub fn mode(&self) -> wmrender_contract::Mode {
        if self.install { wmrender_contract::Mode::WithOperator } else { wmrender_contract::Mode::WithoutOperator }
    }
}

#[derive(Clone, Debug)]
pub enum PlatformPlan {
    Aws(AwsPlan),
    Azure(AzurePlan),
    Gcp(GcpPlan),
    Nutanix(NutanixPlan),
    Vsphere(VspherePlan),
    None,
}

impl PlatformPlan {
    pub fn kind(&self) -> PlatformKind {
        match self {
            PlatformPlan::Aws(_) => PlatformKind::Aws,
            PlatformPlan::Azure(_) => PlatformKind::Azure,
            PlatformPlan::Gcp(_) => PlatformKind::Gcp,
            PlatformPlan::Nutanix(_) => PlatformKind::Nutanix,
            PlatformPlan::Vsphere(_) => PlatformKind::Vsphere,
            PlatformPlan::None => PlatformKind::None,
        }
    }

    pub fn name(&self) -> &'static str {
        self.kind().key()
    }
}

#[derive(Clone, Debug)]
pub struct AwsPlan {
    pub region: String,
    pub instance_type: String,
    pub volume_size: u32,
    pub volume_type: String,
    pub iam_instance_profile: String,
    pub security_groups: Vec<String>,
    /// Subnet `tag:Name` value; `{zone}` is replaced by each MachineSet's zone.
    pub subnet: String,
    pub tags: Vec<(String, String)>,
}

#[derive(Clone, Debug)]
pub struct AzurePlan {
    pub location: String,
    pub resource_group: String,
    pub network_resource_group: String,
    pub vnet: String,
    pub subnet: String,
    pub vm_size: String,
    pub os_disk_size_gb: u32,
    pub os_disk_storage_account_type: String,
    pub public_load_balancer: Option<String>,
    pub managed_identity: Option<String>,
}

#[derive(Clone, Debug)]
pub struct GcpPlan {
    pub project_id: String,
    pub region: String,
    pub machine_type: String,
    pub disk_size_gb: u32,
    pub disk_type: String,
    pub network: String,
    pub subnetwork: String,
    pub service_account_email: String,
    pub tags: Vec<String>,
}

#[derive(Clone, Debug)]
pub struct NutanixPlan {
    pub cluster: NutanixIdPlan,
    pub subnet: NutanixIdPlan,
    pub project: Option<NutanixIdPlan>,
    pub vcpu_sockets: u32,
    pub vcpus_per_socket: u32,
    /// Canonical quantities (see [`crate::quantity`]).
    pub memory_size: String,
    pub system_disk_size: String,
    pub boot_type: String,
    pub categories: Vec<(String, String)>,
}

/// `type` is `uuid` or `name`; `value` is the one that type names.
#[derive(Clone, Debug)]
pub struct NutanixIdPlan {
    pub kind: &'static str,
    pub value: String,
}

#[derive(Clone, Debug)]
pub struct VspherePlan {
    pub server: String,
    pub datacenter: String,
    pub datastore: String,
    pub folder: Option<String>,
    pub resource_pool: Option<String>,
    pub network: String,
    pub num_cpus: u32,
    pub num_cores_per_socket: u32,
    pub memory_mib: u32,
    pub disk_gib: u32,
}

fn text(v: &Option<Located<String>>, default: impl Into<String>) -> String {
    v.as_ref().map(|l| l.value.clone()).unwrap_or_else(|| default.into())
}

fn num(v: &Option<Located<u32>>, default: u32) -> u32 {
    v.as_ref().map(|l| l.value).unwrap_or(default)
}

/// `nodeLogs` with its defaults; validation has read every value, so a value it refused cannot reach here.
fn node_logs(logs: Option<&crate::inputs::schema::NodeLogs>) -> NodeLogs {
    let text = |v: Option<&Option<Located<String>>>, default: &str| {
        v.and_then(|v| v.as_ref()).map(|l| l.value.clone()).unwrap_or_else(|| default.to_string())
    };
    let duration = |v, default: &str| {
        Duration::parse(&text(v, default)).or_else(|_| Duration::parse(default)).unwrap_or(Duration::from_seconds(0))
    };
    let size = Quantity::parse(&text(logs.map(|l| &l.max_size), NodeLogs::DEFAULT_SIZE))
        .unwrap_or(Quantity::from_bytes(100_000_000, false));
    NodeLogs {
        max_size: size,
        max_age: duration(logs.map(|l| &l.max_age), NodeLogs::DEFAULT_AGE),
        flush_interval: duration(logs.map(|l| &l.flush_interval), NodeLogs::DEFAULT_FLUSH),
    }
}

/// A size as the API server stores it; validation has read it already, so a value it refused cannot reach here
/// (the default stands in, never an empty string).
fn size(v: &Option<Located<String>>, default: &str) -> String {
    let written = v.as_ref().and_then(|l| Quantity::parse(l).ok());
    written.or_else(|| Quantity::parse(default).ok()).map(|q| q.canonical()).unwrap_or_else(|| default.to_string())
}

/// A Nutanix resource reference. Validation has checked it names exactly one of `uuid` or `name`.
fn nutanix_id(id: &schema::NutanixId) -> NutanixIdPlan {
    match (&id.uuid, &id.name) {
        (Some(u), _) => NutanixIdPlan { kind: "uuid", value: u.value.clone() },
        (None, n) => NutanixIdPlan { kind: "name", value: text(n, "") },
    }
}

/// What the network rules parsed, handed on so nothing parses twice.
pub(super) struct Networks {
    pub service: IpNet,
    pub cluster_dns: IpAddr,
    pub cluster: Vec<IpNet>,
}

/// Resolves every default. Called by [`super::check`] only on inputs without errors.
pub(super) fn resolve(
    loaded: Loaded,
    registries: Vec<RegistryHost>,
    networks: Networks,
    ssh_public_key: Option<AuthorizedKey>,
    bundle_keys: Vec<String>,
    warnings: Diagnostics,
) -> Checked {
    let spec = &loaded.inputs.spec;
    let infra = spec.infrastructure_id.value.clone();
    let default_version = spec.windows_version.as_ref().map(|v| v.value).unwrap_or(DEFAULT_WINDOWS_VERSION);
    let platform_input = &spec.platform.value;

    let platform = match platform_input {
        Platform::Aws(a) => PlatformPlan::Aws(AwsPlan {
            region: a.region.value.clone(),
            instance_type: text(&a.instance_type, "m5a.large"),
            volume_size: num(&a.volume_size, 120),
            volume_type: text(&a.volume_type, "gp2"),
            iam_instance_profile: text(&a.iam_instance_profile, format!("{infra}-worker-profile")),
            security_groups: a
                .security_groups
                .as_ref()
                .map(|v| v.iter().map(|s| s.value.clone()).collect())
                .unwrap_or_else(|| vec![format!("{infra}-node"), format!("{infra}-lb")]),
            subnet: text(&a.subnet, format!("{infra}-subnet-private-{{zone}}")),
            tags: a.tags.iter().map(|t| (t.name.value.clone(), t.value.value.clone())).collect(),
        }),
        Platform::Azure(a) => {
            let rg = text(&a.resource_group, format!("{infra}-rg"));
            PlatformPlan::Azure(AzurePlan {
                location: a.location.value.clone(),
                network_resource_group: text(&a.network_resource_group, rg.clone()),
                resource_group: rg,
                vnet: text(&a.vnet, format!("{infra}-vnet")),
                subnet: text(&a.subnet, format!("{infra}-worker-subnet")),
                vm_size: text(&a.vm_size, "Standard_D2s_v3"),
                os_disk_size_gb: num(&a.os_disk_size_gb, 128),
                os_disk_storage_account_type: text(&a.os_disk_storage_account_type, "Premium_LRS"),
                public_load_balancer: a.public_load_balancer.as_ref().map(|v| v.value.clone()),
                managed_identity: a.managed_identity.as_ref().map(|v| v.value.clone()),
            })
        }
        Platform::Gcp(g) => PlatformPlan::Gcp(GcpPlan {
            project_id: g.project_id.value.clone(),
            region: g.region.value.clone(),
            machine_type: text(&g.machine_type, "n1-standard-4"),
            disk_size_gb: num(&g.disk_size_gb, 128),
            disk_type: text(&g.disk_type, "pd-ssd"),
            network: text(&g.network, format!("{infra}-network")),
            subnetwork: text(&g.subnetwork, format!("{infra}-worker-subnet")),
            service_account_email: text(
                &g.service_account_email,
                format!("{infra}-w@{}.iam.gserviceaccount.com", g.project_id.value),
            ),
            // `tags: []` renders the default too: the Machine API webhook replaces an empty list with it, and
            // rendering what the cluster stores keeps Argo CD from showing a diff.
            tags: match &g.tags {
                Some(tags) if !tags.is_empty() => tags.iter().map(|s| s.value.clone()).collect(),
                _ => vec![format!("{infra}-worker")],
            },
        }),
        Platform::Nutanix(n) => PlatformPlan::Nutanix(NutanixPlan {
            cluster: nutanix_id(&n.cluster),
            // Validation has checked there is exactly one.
            subnet: nutanix_id(&n.subnets.value[0]),
            project: n.project.as_ref().map(nutanix_id),
            vcpu_sockets: num(&n.vcpu_sockets, 4),
            vcpus_per_socket: num(&n.vcpus_per_socket, 1),
            memory_size: size(&n.memory_size, DEFAULT_NUTANIX_MEMORY),
            system_disk_size: size(&n.system_disk_size, DEFAULT_NUTANIX_SYSTEM_DISK),
            boot_type: text(&n.boot_type, ""),
            categories: n.categories.iter().map(|c| (c.key.value.clone(), c.value.value.clone())).collect(),
        }),
        Platform::Vsphere(v) => PlatformPlan::Vsphere(VspherePlan {
            server: v.server.value.clone(),
            datacenter: v.datacenter.value.clone(),
            datastore: v.datastore.value.clone(),
            folder: v.folder.as_ref().map(|f| f.value.clone()),
            resource_pool: v.resource_pool.as_ref().map(|f| f.value.clone()),
            network: v.network.value.clone(),
            num_cpus: num(&v.num_cpus, 4),
            num_cores_per_socket: num(&v.num_cores_per_socket, 1),
            memory_mib: num(&v.memory_mib, 16384),
            disk_gib: num(&v.disk_gib, 128),
        }),
        Platform::None => PlatformPlan::None,
    };

    let machine_sets: Vec<MachineSetPlan> = spec
        .machine_sets
        .iter()
        .filter_map(|m| {
            let zone = m.zone.as_ref().map(|z| z.value.clone());
            let windows_version = m.windows_version.as_ref().map(|v| v.value).unwrap_or(default_version);
            // Validation has refused a set without a name on platforms that derive none.
            let name = match &m.name {
                Some(n) => n.value.clone(),
                None => derived_machine_set_name(&infra, platform_input, zone.as_deref())?,
            };
            Some(MachineSetPlan {
                name,
                replicas: match m.replicas.as_ref().map(|r| r.value) {
                    None => Some(1),
                    Some(Replicas::Count(n)) => Some(n),
                    Some(Replicas::Auto) => None,
                },
                image: m
                    .image
                    .as_ref()
                    .map(|i| i.value.clone())
                    .unwrap_or_else(|| default_image(platform_input, windows_version)),
                zone,
                windows_version,
            })
        })
        .collect();

    let byoh = spec.byoh.as_ref().map(|hosts| {
        hosts
            .iter()
            .map(|h| ByohPlan {
                address: h.address.value.clone(),
                username: h.username.value.clone(),
                windows_version: h.windows_version.as_ref().map(|v| v.value).unwrap_or(default_version),
            })
            .collect()
    });

    let op = &spec.operator;
    let operator = OperatorPlan {
        install: op.install,
        namespace: text(&op.namespace, DEFAULT_WMCO_NAMESPACE),
        package: text(&op.package, "windows-machine-config-operator"),
        channel: text(&op.channel, "stable"),
        source: text(&op.source, "redhat-operators"),
        source_namespace: text(&op.source_namespace, "openshift-marketplace"),
        install_plan_approval: text(&op.install_plan_approval, "Automatic"),
    };

    Checked {
        infrastructure_id: infra,
        platform,
        machine_sets,
        byoh,
        operator,
        pause_image: text(&spec.pause_image, DEFAULT_PAUSE_IMAGE),
        registries,
        kubernetes: spec
            .kubernetes_version
            .as_ref()
            .and_then(|v| KubernetesVersion::parse(v))
            .unwrap_or(KubernetesVersion::DEFAULT),
        api_server_url: spec.api_server_internal_url.value.clone(),
        service_network: networks.service,
        cluster_dns: networks.cluster_dns,
        cluster_networks: networks.cluster,
        vxlan_port: spec.network.hybrid_overlay_vxlan_port.as_ref().map(|p| p.value),
        proxy: spec.proxy.as_ref().map(|p| ProxySettings {
            http: p.http_proxy.as_ref().map(|v| v.value.clone()),
            https: p.https_proxy.as_ref().map(|v| v.value.clone()),
            no_proxy: p.no_proxy.iter().map(|v| v.value.clone()).collect(),
        }),
        ssh_public_key,
        controller: spec.controller.as_ref().map(|c| ControllerPlan {
            image: c.image.value.clone(),
            payload_image: c.payload_image.as_ref().map(|p| p.value.clone()),
            pull_from: c.pull_from.as_ref().map(|p| p.value.clone()),
            pull_payload_from: c.pull_payload_from.as_ref().map(|p| p.value.clone()),
            replicas: c.replicas.as_ref().map(|r| r.value).unwrap_or(DEFAULT_CONTROLLER_REPLICAS),
        }),
        node_logs: node_logs(spec.node_logs.as_ref()),
        bundle_keys,
        warnings,
        loaded,
    }
}

/// The image a MachineSet uses when it names none: the platform-wide setting, else a public image for the version.
/// Validation has refused a MachineSet without one on the platforms that have no public image.
fn default_image(platform: &Platform, version: WindowsVersion) -> String {
    match platform {
        Platform::Aws(a) => text(&a.ami, ""),
        Platform::Azure(a) => text(&a.image, version.azure_marketplace_image()),
        Platform::Gcp(g) => text(&g.image, version.gcp_image_family()),
        Platform::Nutanix(n) => text(&n.image, ""),
        Platform::Vsphere(v) => text(&v.template, ""),
        Platform::None => String::new(),
    }
}
