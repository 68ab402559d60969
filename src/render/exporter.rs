//! windows_exporter's serving certificate, in the mode without the operator: issued by the cluster the way
//! OpenShift issues serving certificates. wmrender renders a headless Service `wmrender/windows-exporter` (the
//! exporter's port, 9182) annotated `service.beta.openshift.io/serving-cert-secret-name`; the service CA operator
//! answers with the Secret `wmrender/windows-exporter-tls` (`tls.crt`, `tls.key`, for
//! `windows-exporter.wmrender.svc`), renews it before it expires, and `sync --kubeconfig` fetches it and pushes it
//! to `C:\k\tls\certs\`. With WMCO, WMCO delivers its own (`windows-machine-config-operator-tls`).
//!
//! The Service has no selector: it names the certificate's identity, and a scrape configuration may list the
//! nodes' addresses under it.

use super::cloud_node_manager::NAMESPACE;
use super::object::{ClusterObject, Order, annotations, labels, object_meta};
use crate::plan::Plan;
use k8s_openapi::api::core::v1::{Namespace, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use wmrender_contract::Mode;

pub const SERVICE: &str = "windows-exporter";
/// The Secret the service CA writes, which sync fetches (src/cluster/credentials.rs).
pub use wmrender_contract::cluster_names::EXPORTER_TLS_SECRET as SECRET;
/// The service CA operator's annotation asking for a serving certificate in that Secret.
pub const SERVING_CERT_ANNOTATION: &str = "service.beta.openshift.io/serving-cert-secret-name";
/// windows_exporter's port (`--web.listen-address` default), opened by the firewall step.
pub const PORT: i32 = 9182;

pub fn applies(plan: &Plan) -> bool {
    plan.operator.mode() == Mode::WithoutOperator
}

/// wmrender's namespace (`wmrender`), which holds what the nodes' services need from the cluster without the
/// operator: the exporter's certificate, and on Azure the cloud-node-manager's identity.
pub fn namespace(plan: &Plan) -> Vec<ClusterObject> {
    if !applies(plan) {
        return Vec::new();
    }
    // Platform monitoring reads the ServiceMonitors and PrometheusRules of the namespaces labelled so
    // (render/monitoring.rs).
    let namespace = Namespace {
        metadata: object_meta(
            NAMESPACE,
            None,
            labels([super::monitoring::NAMESPACE_LABEL]),
            annotations(Order::Namespace, []),
        ),
        ..Default::default()
    };
    vec![ClusterObject::new("Namespace", NAMESPACE, Order::Namespace, &namespace)]
}

pub fn render(plan: &Plan) -> Vec<ClusterObject> {
    if !applies(plan) {
        return Vec::new();
    }
    let service = Service {
        metadata: object_meta(
            SERVICE,
            Some(NAMESPACE),
            labels([]),
            annotations(Order::Service, [(SERVING_CERT_ANNOTATION, SECRET)]),
        ),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            ports: Some(vec![ServicePort {
                name: Some("metrics".into()),
                port: PORT,
                protocol: Some("TCP".into()),
                target_port: Some(IntOrString::Int(PORT)),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    };
    vec![ClusterObject::new("Service", SERVICE, Order::Service, &service)]
}
