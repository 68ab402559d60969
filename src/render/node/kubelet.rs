//! `C:\k\kubelet.conf`: WMCO's KubeletConfiguration (reference wmco-node-artifacts §3.3), as indented JSON so a
//! reviewer can read it. Fields are in the upstream struct's order; the Go zero durations WMCO's marshaller adds
//! ("0s") are left out, since kubelet defaults them anyway.

use super::paths;
use crate::plan::{Plan, PlatformPlan};
use crate::render::Artifact;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeletConfiguration {
    kind: &'static str,
    api_version: &'static str,
    rotate_certificates: bool,
    #[serde(rename = "serverTLSBootstrap")]
    server_tls_bootstrap: bool,
    authentication: Authentication,
    authorization: Authorization,
    cluster_domain: &'static str,
    #[serde(rename = "clusterDNS")]
    cluster_dns: Vec<String>,
    /// Windows has no QoS cgroups.
    #[serde(rename = "cgroupsPerQOS")]
    cgroups_per_qos: bool,
    runtime_request_timeout: &'static str,
    max_pods: u32,
    /// The Linux default /etc/resolv.conf means nothing on Windows.
    resolv_conf: &'static str,
    #[serde(rename = "kubeAPIQPS")]
    kube_api_qps: u32,
    #[serde(rename = "kubeAPIBurst")]
    kube_api_burst: u32,
    serialize_image_pulls: bool,
    eviction_hard: BTreeMap<&'static str, &'static str>,
    feature_gates: BTreeMap<&'static str, bool>,
    container_log_max_size: &'static str,
    /// On Windows reservations only reduce allocatable; there is no cgroup enforcement.
    system_reserved: BTreeMap<&'static str, &'static str>,
    enforce_node_allocatable: Vec<&'static str>,
    logging: Logging,
    enable_system_log_handler: bool,
    enable_system_log_query: bool,
    register_with_taints: Vec<Taint>,
    register_node: bool,
    /// Required on Windows: v1beta1 defaults it to the Linux socket on every OS.
    container_runtime_endpoint: &'static str,
}

#[derive(Serialize)]
struct Authentication {
    x509: X509,
    webhook: Enabled,
    anonymous: Enabled,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct X509 {
    #[serde(rename = "clientCAFile")]
    client_ca_file: &'static str,
}

#[derive(Serialize)]
struct Enabled {
    enabled: bool,
}

#[derive(Serialize)]
struct Authorization {
    mode: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Logging {
    flush_frequency: &'static str,
    verbosity: u32,
}

#[derive(Serialize)]
struct Taint {
    key: &'static str,
    #[serde(skip_serializing_if = "str::is_empty")]
    value: &'static str,
    effect: &'static str,
}

pub fn config(plan: &Plan) -> KubeletConfiguration {
    let node = &plan.node;
    KubeletConfiguration {
        kind: "KubeletConfiguration",
        api_version: "kubelet.config.k8s.io/v1beta1",
        rotate_certificates: true,
        server_tls_bootstrap: true,
        authentication: Authentication {
            x509: X509 { client_ca_file: paths::KUBELET_CA },
            // Both equal kubelet's v1beta1 defaults; written out so the review shows them.
            webhook: Enabled { enabled: true },
            anonymous: Enabled { enabled: false },
        },
        authorization: Authorization { mode: "Webhook" },
        cluster_domain: "cluster.local",
        cluster_dns: vec![node.cluster_dns.clone()],
        cgroups_per_qos: false,
        runtime_request_timeout: "10m0s",
        max_pods: 250,
        resolv_conf: "",
        kube_api_qps: 50,
        kube_api_burst: 100,
        serialize_image_pulls: false,
        eviction_hard: [("imagefs.available", "15%"), ("nodefs.available", "10%")].into(),
        feature_gates: [("NodeLogQuery", true), ("RotateKubeletServerCertificate", true)].into(),
        container_log_max_size: "50Mi",
        system_reserved: [("cpu", "500m"), ("ephemeral-storage", "1Gi"), ("memory", "2Gi")].into(),
        // Without QoS cgroups nothing can be enforced. `["none"]` is accepted from 1.31 on; before that only an
        // empty list passes validation.
        enforce_node_allocatable: if node.kubernetes.minor >= 31 { vec!["none"] } else { vec![] },
        logging: Logging { flush_frequency: "5s", verbosity: 0 },
        enable_system_log_handler: true,
        enable_system_log_query: true,
        register_with_taints: register_with_taints(plan),
        register_node: true,
        container_runtime_endpoint: "npipe://./pipe/containerd-containerd",
    }
}

/// WMCO's `os=Windows:NoSchedule`; without the operator also wmrender's taint, which keeps anything from being
/// scheduled on the node until its agent reports it configured (sync then removes it:
/// [`wmrender_contract::node_status`]). With WMCO the nodes get WMCO's configuration, without it.
fn register_with_taints(plan: &Plan) -> Vec<Taint> {
    use wmrender_contract::node_status::{TAINT_EFFECT, TAINT_KEY};
    let mut taints = vec![Taint { key: "os", value: "Windows", effect: "NoSchedule" }];
    if plan.operator.mode() == wmrender_contract::Mode::WithoutOperator {
        taints.push(Taint { key: TAINT_KEY, value: "", effect: TAINT_EFFECT });
    }
    taints
}

pub fn render(plan: &Plan) -> Artifact {
    // Plain structs of strings, numbers and maps: serialisation cannot fail.
    let json = serde_json::to_string_pretty(&config(plan)).unwrap_or_default() + "\n";
    Artifact { path: paths::bundle(paths::KUBELET_CONF), bytes: json.into_bytes() }
}

/// AWS: kubelet pulls from ECR with the node's instance role through `ecr-credential-provider.exe`.
pub fn credential_provider(plan: &Plan) -> Option<Artifact> {
    if !matches!(plan.platform, PlatformPlan::Aws(_)) {
        return None;
    }
    let text = "\
apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: ecr-credential-provider.exe
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  defaultCacheDuration: 12h
  matchImages:
  - '*.dkr.ecr.*.amazonaws.com'
  - '*.dkr.ecr.*.amazonaws.com.cn'
  - '*.dkr.ecr-fips.*.amazonaws.com'
  - '*.dkr.ecr.*.c2s.ic.gov'
  - '*.dkr.ecr.*.sc2s.sgov.gov'
";
    Some(Artifact { path: paths::bundle(paths::CREDENTIAL_PROVIDER_CONF), bytes: text.as_bytes().to_vec() })
}
