//! The node bundle beyond containerd: kubelet and kube-proxy configuration, the Windows services (services.json),
//! the agent's settings (node.json) and the PowerShell steps it runs. The bundle is the same for every node of a
//! cluster: values that exist only on a node (its IP, name, HNS subnet, VIP) are computed there by the agent and
//! its steps, as WMCO's on-node agent does.

pub mod kubelet;
pub mod network;
pub mod paths;
pub mod powershell;
pub mod scripts;
pub mod services;
pub mod settings;

use super::Artifact;
use crate::plan::Plan;

pub fn render(plan: &Plan) -> Vec<Artifact> {
    let mut files = vec![
        kubelet::render(plan),
        services::render(services::services(plan)),
        settings::render(&settings::settings(plan)),
        scripts::network_conf(plan),
    ];
    files.extend(scripts::static_files(plan));
    files.extend(kubelet::credential_provider(plan));
    files
}
