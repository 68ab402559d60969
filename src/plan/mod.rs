//! Stage 3: the [`Plan`] the renderers read, as an infallible function of the [`Checked`] inputs. Every default
//! and derived value was resolved by validation; this stage only arranges them for the renderers. No I/O here.

mod no_proxy;

use crate::validate::Checked;
use crate::windows::WindowsVersion;
use std::collections::BTreeSet;

pub use crate::registries::RegistryHost;
pub use crate::validate::checked::{
    AuthorizedKey, AwsPlan, AzurePlan, ByohPlan, ControllerPlan, GcpPlan, KubernetesVersion, MachineSetPlan,
    NutanixIdPlan, NutanixPlan, OperatorPlan, PlatformPlan, VspherePlan,
};

pub const MACHINE_API_NAMESPACE: &str = "openshift-machine-api";

/// What the node bundle needs besides the platform: cluster endpoints, networks, proxy, versions.
#[derive(Clone, Debug)]
pub struct NodePlan {
    pub kubernetes: KubernetesVersion,
    /// `https://api-int.<cluster>:6443`, for hybrid-overlay.
    pub api_server_url: String,
    /// First service network; the CNI OutBoundNAT exception and route.
    pub service_network: String,
    /// 10th address of the first service network.
    pub cluster_dns: String,
    /// The cluster's custom hybrid-overlay VXLAN port, when it has one (vSphere always does).
    pub vxlan_port: Option<u32>,
    pub proxy: ProxyPlan,
    /// How the services' log files are rotated.
    pub logs: crate::validate::checked::NodeLogs,
    /// The keys whose signatures a node accepts on a bundle it pulls (PEM each).
    pub bundle_keys: Vec<String>,
}

/// Machine-level proxy variables; `None` removes the variable from the node.
#[derive(Clone, Debug, Default)]
pub struct ProxyPlan {
    pub http: Option<String>,
    pub https: Option<String>,
    /// The cluster's NO_PROXY (the network operator's rule, in plan/no_proxy.rs), joined with commas.
    pub no_proxy: Option<String>,
}

#[derive(Clone, Debug)]
pub struct Plan {
    pub infrastructure_id: String,
    pub platform: PlatformPlan,
    pub machine_sets: Vec<MachineSetPlan>,
    /// Every Windows version in use, sorted: one RuntimeClass each.
    pub windows_versions: Vec<WindowsVersion>,
    /// `None`: no `windows-instances` ConfigMap. `Some(empty)`: an empty one (deconfigures every BYOH host).
    pub byoh: Option<Vec<ByohPlan>>,
    pub operator: OperatorPlan,
    /// containerd's sandbox image on the nodes.
    pub pause_image: String,
    /// One containerd host configuration per mirrored registry host, sorted by host.
    pub registries: Vec<RegistryHost>,
    pub node: NodePlan,
    /// The key the `windows-user-data` Secret authorises; `Some` exactly when that Secret is rendered.
    pub ssh_public_key: Option<AuthorizedKey>,
    /// `wmrender controller`'s Deployment, when the inputs ask for it.
    pub controller: Option<ControllerPlan>,
    /// The inputs digest: the controller's bundle ConfigMaps carry a `manifest.json` of their own.
    pub inputs_digest: String,
}

/// Builds the plan.
pub fn plan(checked: &Checked) -> Plan {
    let versions: BTreeSet<WindowsVersion> = checked
        .machine_sets
        .iter()
        .map(|m| m.windows_version)
        .chain(checked.byoh.iter().flatten().map(|h| h.windows_version))
        .collect();
    let proxy = checked.proxy.as_ref().map(|p| ProxyPlan {
        http: p.http.clone(),
        https: p.https.clone(),
        no_proxy: no_proxy::from_checked(checked, p),
    });
    Plan {
        infrastructure_id: checked.infrastructure_id.clone(),
        platform: checked.platform.clone(),
        machine_sets: checked.machine_sets.clone(),
        windows_versions: versions.into_iter().collect(),
        byoh: checked.byoh.clone(),
        operator: checked.operator.clone(),
        pause_image: checked.pause_image.clone(),
        registries: checked.registries.clone(),
        node: NodePlan {
            kubernetes: checked.kubernetes,
            api_server_url: checked.api_server_url.clone(),
            service_network: checked.service_network.to_string(),
            cluster_dns: checked.cluster_dns.to_string(),
            vxlan_port: checked.vxlan_port,
            proxy: proxy.unwrap_or_default(),
            logs: checked.node_logs,
            bundle_keys: checked.bundle_keys.clone(),
        },
        ssh_public_key: checked.ssh_public_key.clone(),
        controller: checked.controller.clone(),
        inputs_digest: checked.loaded.digest(),
    }
}
