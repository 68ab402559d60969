//! Where things live on the Windows node. `node/C/k/x` in the bundle is `C:\k\x` on the node.

/// The bundle path (under the output directory) of a node path such as `C:\k\kubelet.conf`.
pub fn bundle(node_path: &str) -> String {
    let rest = node_path.strip_prefix("C:\\").unwrap_or(node_path);
    format!("node/C/{}", rest.replace('\\', "/"))
}

pub const KUBELET_CONF: &str = r"C:\k\kubelet.conf";
pub const KUBE_PROXY_CONF: &str = r"C:\k\kube-proxy.conf";
pub const CNI_CONF: &str = r"C:\k\cni\config\cni.conf";
pub const CONTAINERD_CONF: &str = r"C:\k\containerd\containerd_conf.toml";
pub const REGISTRIES: &str = r"C:\k\containerd\registries";
pub const SERVICES_JSON: &str = r"C:\k\wmrender\services.json";
pub const INSTALL_PS1: &str = r"C:\k\wmrender\install.ps1";
pub const NETWORK_CONF_PS1: &str = r"C:\k\wmrender\network-conf.ps1";
pub const DEFENDER_PS1: &str = r"C:\k\wmrender\windows-defender-exclusion.ps1";
pub const GCP_HOSTNAME_PS1: &str = r"C:\k\wmrender\gcp-get-hostname.ps1";
pub const AWS_ROUTE_PS1: &str = r"C:\k\wmrender\aws-metadata-route.ps1";
pub const EXPORTER_WEBCONFIG: &str = r"C:\k\tls\windows-exporter-webconfig.yaml";
pub const CREDENTIAL_PROVIDER_CONF: &str = r"C:\k\credential-provider-config.yaml";
pub const HNS_MODULE: &str = r"C:\k\hns.psm1";

/// Delivered by `sync` at push time, never rendered: cluster credentials and CAs.
pub const BOOTSTRAP_KUBECONFIG: &str = r"C:\k\bootstrap-kubeconfig";
pub const KUBELET_CA: &str = r"C:\k\kubelet-ca.crt";
pub const BOOTSTRAP_CA: &str = r"C:\k\bootstrap-ca.crt";
pub const EXPORTER_TLS_CERT: &str = r"C:\k\tls\certs\tls.crt";
pub const EXPORTER_TLS_KEY: &str = r"C:\k\tls\certs\tls.key";
/// Written by kubelet's TLS bootstrap; hybrid-overlay, kube-proxy and Azure's cloud-node-manager use it.
pub const KUBECONFIG: &str = r"C:\k\kubeconfig";

/// Directories the install script creates (WMCO's list, with wmrender's own folder).
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
];

#[cfg(test)]
mod tests {
    #[test]
    fn bundle_paths() {
        assert_eq!(super::bundle(r"C:\k\kubelet.conf"), "node/C/k/kubelet.conf");
        assert_eq!(super::bundle(super::REGISTRIES), "node/C/k/containerd/registries");
    }
}
