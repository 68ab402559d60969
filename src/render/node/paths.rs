//! Where things live on the Windows node. `node/C/k/x` in the bundle is `C:\k\x` on the node: the mapping and
//! the contract's own files are in [`wmrender_contract`]; this file names the rest.

use wmrender_contract::NodePath;
pub use wmrender_contract::paths::{
    AGENT_EXE, BOOTSTRAP_CA, BOOTSTRAP_KUBECONFIG, CLOUD_NODE_MANAGER_KUBECONFIG, CLOUD_NODE_MANAGER_TOKEN,
    EXPORTER_TLS_CERT, EXPORTER_TLS_KEY, KUBECONFIG, KUBELET_CA, NODE_MANIFEST, SERVICES_JSON, SETTINGS_JSON,
    TRUSTED_CA_BUNDLE,
};

/// The bundle path (under the output directory) of one of the node path constants below.
pub fn bundle(node_path: &str) -> String {
    NodePath::known(node_path).bundle_path()
}

pub const KUBELET_CONF: &str = r"C:\k\kubelet.conf";
pub const KUBE_PROXY_CONF: &str = r"C:\k\kube-proxy.conf";
pub const CNI_CONF: &str = r"C:\k\cni\config\cni.conf";
pub const CONTAINERD_CONF: &str = r"C:\k\containerd\containerd_conf.toml";
pub const CONTAINERD_EXE: &str = r"C:\k\containerd\containerd.exe";
pub const REGISTRIES: &str = r"C:\k\containerd\registries";
pub const NETWORK_CONF_PS1: &str = r"C:\k\wmrender\network-conf.ps1";
pub const CONTAINERS_FEATURE_PS1: &str = r"C:\k\wmrender\containers-feature.ps1";
pub const FIREWALL_PS1: &str = r"C:\k\wmrender\firewall.ps1";
pub const DEFENDER_PS1: &str = r"C:\k\wmrender\windows-defender-exclusion.ps1";
pub const GCP_HOSTNAME_PS1: &str = r"C:\k\wmrender\gcp-get-hostname.ps1";
pub const AWS_HOSTNAME_PS1: &str = r"C:\k\wmrender\aws-get-hostname.ps1";
pub const AWS_ROUTES_PS1: &str = r"C:\k\wmrender\aws-routes.ps1";
/// vSphere and Nutanix only: renames a Machine's host to the Machine's name.
pub const RENAME_HOST_PS1: &str = r"C:\k\wmrender\rename-host.ps1";
/// Run only by `wmrender-node deconfigure`.
pub const REMOVE_HNS_NETWORKS_PS1: &str = r"C:\k\wmrender\remove-hns-networks.ps1";
pub const EXPORTER_WEBCONFIG: &str = r"C:\k\tls\windows-exporter-webconfig.yaml";
pub const CREDENTIAL_PROVIDER_CONF: &str = r"C:\k\credential-provider-config.yaml";
pub const HNS_MODULE: &str = r"C:\k\hns.psm1";

/// Folders the agent creates (WMCO's list, with wmrender's own folder).
pub const DIRECTORIES: &[&str] = &[
    r"C:\k",
    r"C:\k\cni",
    r"C:\k\cni\config",
    r"C:\k\containerd",
    r"C:\k\containerd\registries",
    r"C:\k\etc\kubernetes\manifests",
    r"C:\k\tls",
    r"C:\k\tls\certs",
    r"C:\k\wmrender",
    r"C:\var\log",
    r"C:\var\log\containerd",
    r"C:\var\log\csi-proxy",
    r"C:\var\log\hybrid-overlay",
    r"C:\var\log\kube-proxy",
    r"C:\var\log\kubelet",
    r"C:\var\log\windows_exporter",
    r"C:\var\log\wmrender-node",
];

/// A node path constant as the checked type.
pub fn node(path: &str) -> NodePath {
    NodePath::known(path)
}

#[cfg(test)]
mod tests {
    #[test]
    fn bundle_paths() {
        assert_eq!(super::bundle(super::KUBELET_CONF), "node/C/k/kubelet.conf");
        assert_eq!(super::bundle(super::REGISTRIES), "node/C/k/containerd/registries");
    }

    #[test]
    fn every_constant_is_a_node_path() {
        for d in super::DIRECTORIES {
            super::node(d);
        }
        for p in [super::KUBECONFIG, super::HNS_MODULE, super::AWS_ROUTES_PS1, super::CONTAINERD_EXE] {
            wmrender_contract::NodePath::parse_delivered(p).unwrap();
        }
    }
}
