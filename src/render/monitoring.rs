//! The Windows nodes in OpenShift's monitoring, without the operator, as WMCO sets them up (its
//! `controllers/metric_controller.go` and `bundle/manifests/windows-prometheus-k8s-rules_…prometheusrule.yaml`):
//!
//! - a **ServiceMonitor** `wmrender/windows-exporter` over the kubelet's endpoints (`kube-system/kubelet`, which the
//!   cluster's monitoring keeps for every node): only the Windows nodes (the node's `kubernetes.io/os` label, with
//!   `attachMetadata.node`), port 10250 moved to windows_exporter's 9182, `job="windows-exporter"`,
//!   `instance` = the node's name, over TLS verified against the cluster's service CA for
//!   `windows-exporter.wmrender.svc` (the certificate `sync` delivers to every node), discovered through
//!   EndpointSlices as WMCO does since it moved to them;
//! - a **PrometheusRule** `wmrender/windows-prometheus-k8s-rules` whose recording rules turn windows_exporter's series
//!   into the node and pod series the console's dashboards read, WMCO's rules as they are (the newest: CPU
//!   utilisation as `1 - idle`, total memory from `windows_memory_physical_total_bytes`);
//! - the namespace label `openshift.io/cluster-monitoring: "true"` ([`NAMESPACE_LABEL`]), which lets the platform
//!   Prometheus read them, and, with the controller, a Role letting it discover the controller's metrics Service
//!   there ([`prometheus_access`]).
//!
//! Where WMCO's objects live in its operator's namespace, these live in `wmrender`, the namespace the exporter's
//! certificate is named after. Each object is typed below; the prometheus-operator CRDs are not in k8s-openapi.

use super::cloud_node_manager::NAMESPACE;
use super::exporter::{PORT, SERVICE};
use super::object::{ClusterObject, Order, annotations, labels, object_meta};
use crate::plan::Plan;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use std::collections::BTreeMap;

/// The label that lets OpenShift's platform monitoring read a namespace's ServiceMonitors and PrometheusRules.
pub const NAMESPACE_LABEL: (&str, &str) = ("openshift.io/cluster-monitoring", "true");
/// The service CA bundle the platform Prometheus mounts, which verifies certificates the service CA issued.
pub const SERVICE_CA_FILE: &str = "/etc/prometheus/configmaps/serving-certs-ca-bundle/service-ca.crt";
/// Prometheus' own ServiceAccount token, sent as a bearer token as WMCO's ServiceMonitor sends it.
pub const TOKEN_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";
/// The platform Prometheus' ServiceAccount, which the Role below is bound to.
const PROMETHEUS: (&str, &str) = ("openshift-monitoring", "prometheus-k8s");
pub const RULES: &str = "windows-prometheus-k8s-rules";

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceMonitor {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub metadata: ObjectMeta,
    pub spec: ServiceMonitorSpec,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceMonitorSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attach_metadata: Option<AttachMetadata>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_discovery_role: Option<&'static str>,
    pub endpoints: Vec<Endpoint>,
    pub namespace_selector: NamespaceSelector,
    pub selector: LabelSelector,
}

#[derive(Clone, Debug, Serialize)]
pub struct AttachMetadata {
    pub node: bool,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    pub port: String,
    pub path: &'static str,
    pub scheme: &'static str,
    pub interval: &'static str,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub honor_labels: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bearer_token_file: Option<&'static str>,
    pub tls_config: TlsConfig,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub relabelings: Vec<Relabeling>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TlsConfig {
    pub ca_file: &'static str,
    pub server_name: String,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Relabeling {
    pub action: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub source_labels: Vec<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regex: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replacement: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_label: Option<&'static str>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceSelector {
    pub match_names: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    pub match_labels: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PrometheusRule {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub metadata: ObjectMeta,
    pub spec: RuleSpec,
}

#[derive(Clone, Debug, Serialize)]
pub struct RuleSpec {
    pub groups: Vec<RuleGroup>,
}

#[derive(Clone, Debug, Serialize)]
pub struct RuleGroup {
    pub name: &'static str,
    pub rules: Vec<Rule>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Rule {
    pub record: &'static str,
    /// The expression and a line end, as WMCO writes them (`expr: |`): a block YAML tools keep as it is, where a
    /// long plain line would be folded, and folded again differently by the next tool (kpt).
    pub expr: String,
}

/// WMCO's recording rules (record, expression), as its newest bundle has them. Two quirks are kept, so that the
/// series mean what they mean on a WMCO cluster: `mode!="iowait"` matches nothing Windows reports (a no-op), and
/// `container_memory_working_set_bytes` drops the `container` label.
pub const RECORDING_RULES: [(&str, &str); 14] = [
    (
        "instance:node_cpu_utilisation:rate1m",
        r#"1 - avg without (core, mode)(rate(windows_cpu_time_total{mode="idle"}[1m]))"#,
    ),
    (
        "instance:node_cpu:rate:sum",
        r#"sum(rate(windows_cpu_time_total{mode="idle",mode!="iowait"}[3m])) BY (instance)"#,
    ),
    ("node_filesystem_size_bytes", "windows_logical_disk_size_bytes"),
    ("node_filesystem_avail_bytes", "windows_logical_disk_free_bytes"),
    ("node_network_receive_bytes_total", "rate(windows_net_bytes_received_total[1m])"),
    ("node_network_transmit_bytes_total", "rate(windows_net_bytes_sent_total[1m])"),
    ("node_filesystem_free_bytes", "windows_logical_disk_free_bytes"),
    ("node_memory_MemAvailable_bytes", "windows_memory_available_bytes"),
    ("node_memory_MemTotal_bytes", "windows_memory_physical_total_bytes"),
    ("node_cpu_info", "windows_cpu_info"),
    (
        "pod:container_cpu_usage:sum",
        r#"sum(rate(windows_container_cpu_usage_seconds_total[5m]) * on(container_id) group_left(namespace, pod, container) kube_pod_container_info{container_id!=""}) by (pod,namespace)"#,
    ),
    (
        "container_memory_working_set_bytes",
        r#"label_replace(windows_container_memory_usage_private_working_set_bytes * on(container_id) group_left(namespace, pod, container) kube_pod_container_info{container_id!=""},"container","","","")"#,
    ),
    (
        "pod_interface_network:container_network_receive_bytes:irate5m",
        r#"sum(irate(windows_container_network_receive_bytes_total[5m]) * on(container_id) group_left(namespace, pod, interface) kube_pod_container_info{container_id!=""}) by (pod,namespace)"#,
    ),
    (
        "pod_interface_network:container_network_transmit_bytes_total:irate5m",
        r#"sum(irate(windows_container_network_transmit_bytes_total[5m]) * on(container_id) group_left(namespace, pod, interface) kube_pod_container_info{container_id!=""}) by (pod,namespace)"#,
    ),
];

fn relabel(
    action: &'static str,
    source: &[&'static str],
    regex: Option<&'static str>,
    replacement: Option<&str>,
    target: Option<&'static str>,
) -> Relabeling {
    let replacement = replacement.map(str::to_string);
    Relabeling { action, source_labels: source.to_vec(), regex, replacement, target_label: target }
}

/// The service name a certificate the service CA issued for `service` in wmrender's namespace carries.
pub fn server_name(service: &str) -> String {
    format!("{service}.{NAMESPACE}.svc")
}

/// The ServiceMonitor of every Windows node's windows_exporter.
pub fn exporter_monitor() -> ServiceMonitor {
    let endpoint = Endpoint {
        // The kubelet Service's port (10250), replaced by the exporter's below.
        port: "https-metrics".into(),
        path: "/metrics",
        scheme: "https",
        interval: "30s",
        honor_labels: true,
        bearer_token_file: Some(TOKEN_FILE),
        tls_config: TlsConfig { ca_file: SERVICE_CA_FILE, server_name: server_name(SERVICE) },
        relabelings: vec![
            relabel(
                "replace",
                &["__meta_kubernetes_endpointslice_address_target_name"],
                Some("(.*)"),
                Some("$1"),
                Some("instance"),
            ),
            // Only the Windows nodes: the kubelet Service lists every node.
            relabel("keep", &["__meta_kubernetes_node_label_kubernetes_io_os"], Some("windows"), None, None),
            relabel("replace", &["__address__"], Some(r"(.+)(?::\d+)"), Some(&exporter_address()), Some("__address__")),
            relabel("replace", &[], None, Some("windows-exporter"), Some("job")),
        ],
    };
    ServiceMonitor {
        api_version: "monitoring.coreos.com/v1",
        kind: "ServiceMonitor",
        metadata: object_meta(SERVICE, Some(NAMESPACE), labels([("name", SERVICE)]), annotations(Order::Service, [])),
        spec: ServiceMonitorSpec {
            attach_metadata: Some(AttachMetadata { node: true }),
            service_discovery_role: Some("EndpointSlice"),
            endpoints: vec![endpoint],
            namespace_selector: NamespaceSelector { match_names: vec!["kube-system".into()] },
            selector: LabelSelector { match_labels: [("k8s-app".to_string(), "kubelet".to_string())].into() },
        },
    }
}

/// The ServiceMonitor of a Service of wmrender's namespace that serves metrics over HTTPS on its port `port`, with a
/// serving certificate the service CA issued for it (the controller's). Its endpoint asks for no token: it sends
/// nothing but numbers, and a token sent there would be one more place Prometheus' credentials go.
pub fn service_monitor(service: &str, port: &str) -> ServiceMonitor {
    let endpoint = Endpoint {
        port: port.into(),
        path: "/metrics",
        scheme: "https",
        interval: "30s",
        honor_labels: false,
        bearer_token_file: None,
        tls_config: TlsConfig { ca_file: SERVICE_CA_FILE, server_name: server_name(service) },
        relabelings: Vec::new(),
    };
    let selected = [("app.kubernetes.io/name".to_string(), service.to_string())].into();
    ServiceMonitor {
        api_version: "monitoring.coreos.com/v1",
        kind: "ServiceMonitor",
        metadata: object_meta(service, Some(NAMESPACE), labels([]), annotations(Order::Service, [])),
        spec: ServiceMonitorSpec {
            attach_metadata: None,
            service_discovery_role: Some("EndpointSlice"),
            endpoints: vec![endpoint],
            namespace_selector: NamespaceSelector { match_names: vec![NAMESPACE.into()] },
            selector: LabelSelector { match_labels: selected },
        },
    }
}

/// The node's address (the relabeling regex's first group) with windows_exporter's port.
fn exporter_address() -> String {
    format!("$1:{PORT}")
}

/// WMCO's recording rules.
pub fn rules() -> PrometheusRule {
    PrometheusRule {
        api_version: "monitoring.coreos.com/v1",
        kind: "PrometheusRule",
        metadata: object_meta(
            RULES,
            Some(NAMESPACE),
            labels([("prometheus", "k8s"), ("role", "alert-rules")]),
            annotations(Order::Service, []),
        ),
        spec: RuleSpec {
            groups: vec![RuleGroup {
                name: "windows.rules",
                rules: RECORDING_RULES
                    .iter()
                    .map(|(record, expr)| Rule { record, expr: format!("{expr}\n") })
                    .collect(),
            }],
        },
    }
}

/// The Role that lets the platform Prometheus discover the Services of wmrender's namespace (the controller's
/// metrics), bound to its ServiceAccount, as OpenShift's operators grant it in theirs.
pub fn prometheus_access() -> Vec<ClusterObject> {
    let name = PROMETHEUS.1;
    let strings = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let role = Role {
        metadata: object_meta(name, Some(NAMESPACE), labels([]), annotations(Order::Rbac, [])),
        rules: Some(vec![
            PolicyRule {
                api_groups: Some(vec![String::new()]),
                resources: Some(strings(&["services", "endpoints", "pods"])),
                verbs: strings(&["get", "list", "watch"]),
                ..Default::default()
            },
            PolicyRule {
                api_groups: Some(vec!["discovery.k8s.io".into()]),
                resources: Some(strings(&["endpointslices"])),
                verbs: strings(&["get", "list", "watch"]),
                ..Default::default()
            },
        ]),
    };
    let binding = RoleBinding {
        metadata: object_meta(name, Some(NAMESPACE), labels([]), annotations(Order::Rbac, [])),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: name.into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: name.into(),
            namespace: Some(PROMETHEUS.0.into()),
            api_group: None,
        }]),
    };
    vec![
        ClusterObject::new("Role", name, Order::Rbac, &role).in_namespace(NAMESPACE),
        ClusterObject::new("RoleBinding", name, Order::Rbac, &binding).in_namespace(NAMESPACE),
    ]
}

/// The monitoring objects, without the operator (with it, WMCO creates its own).
pub fn render(plan: &Plan) -> Vec<ClusterObject> {
    if !super::exporter::applies(plan) {
        return Vec::new();
    }
    vec![
        ClusterObject::new("ServiceMonitor", SERVICE, Order::Service, &exporter_monitor()),
        ClusterObject::new("PrometheusRule", RULES, Order::Service, &rules()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exporter_is_scraped_on_its_port_at_each_windows_nodes_address_under_its_certificates_name() {
        let m = exporter_monitor();
        let e = &m.spec.endpoints[0];
        assert_eq!(e.tls_config.server_name, "windows-exporter.wmrender.svc");
        let port = e.relabelings.iter().find(|r| r.target_label == Some("__address__")).unwrap();
        assert_eq!(port.replacement.as_deref(), Some("$1:9182"));
        assert!(e.relabelings.iter().any(|r| r.action == "keep" && r.regex == Some("windows")));
    }
}
