//! `wmrender controller` in the cluster (mode without the operator, when the inputs ask for it with `controller`):
//! its ServiceAccount, the least RBAC it needs (the same rules docs/without-operator.md lists as the role
//! `wmrender-controller`), the node bundle as ConfigMaps, its Deployment, and its metrics: a Service whose
//! annotation has the service CA issue the endpoint's serving certificate (mounted from the Secret it writes, the
//! endpoint served over HTTPS under the cluster's TLS profile), and a ServiceMonitor that scrapes it.
//!
//! The bundle reaches the controller the GitOps way: the rendered node files (no secret, no binary: neither is
//! ever rendered) and the BYOH ConfigMap it reads its hosts from, with a `manifest.json` of exactly those files, in
//! ConfigMaps of at most [`CONFIG_MAP_BYTES`] each, which a projected volume puts back together as the rendered
//! directory `--rendered` reads. The controller checks every file against that manifest, so a volume that kubelet
//! has updated only in part is refused until it is whole. The SSH key comes from the Secret the user creates
//! (`cloud-private-key`, as WMCO's); the payload from an image the inputs name, copied into the pod at start.

use super::Artifact;
use super::cloud_node_manager::NAMESPACE;
use super::exporter::SERVING_CERT_ANNOTATION;
use super::object::{ClusterObject, Order, annotations, labels, object_meta};
use crate::plan::{ControllerPlan, Plan};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMap, ConfigMapProjection, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource,
    HTTPGetAction, KeyToPath, ObjectFieldSelector, PodSecurityContext, PodSpec, PodTemplateSpec, Probe,
    ProjectedVolumeSource, ResourceRequirements, SeccompProfile, SecretVolumeSource, SecurityContext, Service,
    ServiceAccount, ServicePort, ServiceSpec, Volume, VolumeMount, VolumeProjection,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeMap;
use wmrender_contract::Mode;

/// The controller's name: its ServiceAccount, ClusterRole, Roles, Deployment and Lease.
pub use wmrender_contract::cluster_names::CONTROLLER as NAME;
/// The Secret with the SSH private key (`private-key.pem`), which the user creates in [`NAMESPACE`].
pub const SSH_KEY_SECRET: &str = "cloud-private-key";
pub const SSH_KEY_FILE: &str = "private-key.pem";
/// Each bundle ConfigMap holds at most this many bytes of files: the API server takes 1 MiB of data.
pub const CONFIG_MAP_BYTES: usize = 900 * 1024;
/// The bundle ConfigMaps' annotation: the sha256 of the bundle's `manifest.json`, the same on every ConfigMap of one
/// render (so a mix of two renders shows). Not the bundle digest a Node reports (`wmrender.dev/bundle`): that one
/// also reads what sync adds at delivery (a pull secret's credentials in hosts.toml).
pub const BUNDLE_MANIFEST_ANNOTATION: &str = "wmrender.dev/bundle-manifest";

const RENDERED_DIR: &str = "/etc/wmrender/rendered";
const SSH_DIR: &str = "/etc/wmrender/ssh";
const STATE_DIR: &str = "/var/lib/wmrender";
const METRICS_PORT: i32 = 8443;
/// The metrics port's name, on the container, the Service and in the ServiceMonitor.
const METRICS_PORT_NAME: &str = "https";
/// The Secret the service CA writes the metrics endpoint's serving certificate to (`tls.crt`, `tls.key`).
pub const METRICS_TLS_SECRET: &str = "wmrender-controller-metrics-tls";
const METRICS_TLS_DIR: &str = "/etc/wmrender/metrics-tls";

/// What one namespace (or, with `None`, the whole cluster) grants the controller: (API group, resources, resource
/// names, verbs). docs/without-operator.md lists the same rules; a test holds the two equal.
type Rules = &'static [(&'static str, &'static [&'static str], &'static [&'static str], &'static [&'static str])];

const CLUSTER_RULES: Rules = &[
    ("config.openshift.io", &["infrastructures", "proxies"], &["cluster"], &["get"]),
    // The TLS security profile the metrics endpoint serves by.
    ("config.openshift.io", &["apiservers"], &["cluster"], &["get"]),
    ("machineconfiguration.openshift.io", &["controllerconfigs"], &[], &["list"]),
    ("", &["nodes"], &[], &["get", "list", "watch", "patch", "delete"]),
    ("certificates.k8s.io", &["certificatesigningrequests"], &[], &["get", "list", "watch"]),
    ("certificates.k8s.io", &["certificatesigningrequests/approval"], &[], &["update"]),
    (
        "certificates.k8s.io",
        &["signers"],
        &["kubernetes.io/kube-apiserver-client-kubelet", "kubernetes.io/kubelet-serving"],
        &["approve"],
    ),
    ("", &["pods"], &[], &["get", "list"]),
    ("", &["pods/eviction"], &[], &["create"]),
    ("apps", &["daemonsets"], &[], &["get"]),
    ("", &["events"], &[], &["create"]),
];

const NAMESPACE_RULES: &[(&str, Rules)] = &[
    ("openshift-machine-config-operator", &[("", &["secrets"], &["node-bootstrapper-token"], &["get"])]),
    ("openshift-config", &[("", &["secrets"], &["pull-secret"], &["get"]), ("", &["configmaps"], &[], &["get"])]),
    ("openshift-machine-api", &[("machine.openshift.io", &["machines"], &[], &["list", "watch"])]),
    (
        NAMESPACE,
        &[
            ("", &["secrets"], &["windows-exporter-tls"], &["get"]),
            // The login records: one Secret per configured host (lifecycle/login.rs).
            ("", &["secrets"], &[], &["get", "list", "create", "update", "delete"]),
            ("", &["serviceaccounts/token"], &["cloud-node-manager"], &["create"]),
            ("coordination.k8s.io", &["leases"], &[], &["create"]),
            ("coordination.k8s.io", &["leases"], &[NAME], &["get", "update"]),
        ],
    ),
];

fn rules(rules: Rules) -> Vec<PolicyRule> {
    let strings = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    rules
        .iter()
        .map(|(group, resources, names, verbs)| PolicyRule {
            api_groups: Some(vec![group.to_string()]),
            resources: Some(strings(resources)),
            resource_names: (!names.is_empty()).then(|| strings(names)),
            verbs: strings(verbs),
            ..Default::default()
        })
        .collect()
}

fn subject() -> Vec<Subject> {
    vec![Subject {
        kind: "ServiceAccount".into(),
        name: NAME.into(),
        namespace: Some(NAMESPACE.into()),
        api_group: None,
    }]
}

fn role_ref(kind: &str) -> RoleRef {
    RoleRef { api_group: Some("rbac.authorization.k8s.io".into()), kind: kind.into(), name: NAME.into() }
}

/// The controller's objects; `files` are the rendered files (the node bundle among them). Nothing without
/// `controller` in the inputs, or with the operator.
pub fn render(plan: &Plan, files: &[Artifact]) -> Vec<ClusterObject> {
    let Some(controller) = plan.controller.as_ref().filter(|_| plan.operator.mode() == Mode::WithoutOperator) else {
        return Vec::new();
    };
    let mut objects = Vec::new();
    let account = ServiceAccount {
        metadata: object_meta(NAME, Some(NAMESPACE), labels([]), annotations(Order::Rbac, [])),
        ..Default::default()
    };
    objects.push(ClusterObject::new("ServiceAccount", NAME, Order::Rbac, &account));
    let role = ClusterRole {
        metadata: object_meta(NAME, None, labels([]), annotations(Order::Rbac, [])),
        rules: Some(rules(CLUSTER_RULES)),
        aggregation_rule: None,
    };
    objects.push(ClusterObject::new("ClusterRole", NAME, Order::Rbac, &role));
    let binding = ClusterRoleBinding {
        metadata: object_meta(NAME, None, labels([]), annotations(Order::Rbac, [])),
        role_ref: role_ref("ClusterRole"),
        subjects: Some(subject()),
    };
    objects.push(ClusterObject::new("ClusterRoleBinding", NAME, Order::Rbac, &binding));
    for (namespace, granted) in NAMESPACE_RULES {
        let role = Role {
            metadata: object_meta(NAME, Some(namespace), labels([]), annotations(Order::Rbac, [])),
            rules: Some(rules(granted)),
        };
        objects.push(ClusterObject::new("Role", NAME, Order::Rbac, &role).in_namespace(namespace));
        let binding = RoleBinding {
            metadata: object_meta(NAME, Some(namespace), labels([]), annotations(Order::Rbac, [])),
            role_ref: role_ref("Role"),
            subjects: Some(subject()),
        };
        objects.push(ClusterObject::new("RoleBinding", NAME, Order::Rbac, &binding).in_namespace(namespace));
    }
    let bundle = bundle(plan, files);
    let digest = format!("sha256:{}", wmrender_contract::sha256_hex(&bundle.manifest));
    let maps = config_maps(&bundle, &digest);
    let deployment = deployment(controller, &maps);
    for (name, map, _) in &maps {
        objects.push(ClusterObject::new("ConfigMap", name, Order::ConfigMap, map));
    }
    objects.push(ClusterObject::new("Deployment", NAME, Order::Controller, &deployment));
    objects.push(ClusterObject::new("Service", NAME, Order::Service, &metrics_service()));
    let monitor = super::monitoring::service_monitor(NAME, METRICS_PORT_NAME);
    objects.push(ClusterObject::new("ServiceMonitor", NAME, Order::Service, &monitor));
    objects.extend(super::monitoring::prometheus_access());
    objects
}

/// The Service of the controller's metrics: what Prometheus finds the replicas by, and what the service CA issues
/// the endpoint's certificate for (`wmrender-controller.wmrender.svc`).
fn metrics_service() -> Service {
    let selector = BTreeMap::from([("app.kubernetes.io/name".to_string(), NAME.to_string())]);
    Service {
        metadata: object_meta(
            NAME,
            Some(NAMESPACE),
            labels([("app.kubernetes.io/name", NAME)]),
            annotations(Order::Service, [(SERVING_CERT_ANNOTATION, METRICS_TLS_SECRET)]),
        ),
        spec: Some(ServiceSpec {
            selector: Some(selector),
            ports: Some(vec![ServicePort {
                name: Some(METRICS_PORT_NAME.into()),
                port: METRICS_PORT,
                protocol: Some("TCP".into()),
                target_port: Some(IntOrString::String(METRICS_PORT_NAME.into())),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    }
}

/// The files the controller reads as its rendered directory, and their manifest.
struct Bundle<'a> {
    files: Vec<&'a Artifact>,
    manifest: Vec<u8>,
}

/// The node bundle and the BYOH ConfigMap (the hosts it configures), with a `manifest.json` that lists exactly them.
fn bundle<'a>(plan: &Plan, files: &'a [Artifact]) -> Bundle<'a> {
    let byoh = super::byoh::PATH;
    let files: Vec<&Artifact> = files.iter().filter(|f| f.path.starts_with("node/") || f.path == byoh).collect();
    let stamp = super::manifest::Stamp {
        inputs_digest: plan.inputs_digest.clone(),
        mode: Mode::WithoutOperator,
        kubernetes_minor: plan.node.kubernetes.minor,
    };
    let manifest = super::manifest::of(files.iter().copied(), &stamp);
    Bundle { files, manifest: manifest.to_json() }
}

/// A ConfigMap key for a file's path: the path with every character a key cannot hold as `_` (`/` as `.`), or,
/// when that is taken or too long, `file-` and the first 16 hex digits of the path's sha256.
fn key_for(path: &str, taken: &std::collections::BTreeSet<String>) -> String {
    let key: String = path
        .chars()
        .map(|c| match c {
            '/' => '.',
            c if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') => c,
            _ => '_',
        })
        .collect();
    if key.len() <= 253 && !taken.contains(&key) && key != "." && key != ".." {
        key
    } else {
        format!("file-{}", &wmrender_contract::sha256_hex(path.as_bytes())[..16])
    }
}

/// The bundle in ConfigMaps `wmrender-bundle-0`, `-1`, … (in path order, `manifest.json` first), each under
/// [`CONFIG_MAP_BYTES`], with the items that put each file back at its path.
fn config_maps(bundle: &Bundle, digest: &str) -> Vec<(String, ConfigMap, Vec<KeyToPath>)> {
    let manifest = Artifact { path: "manifest.json".into(), bytes: bundle.manifest.clone() };
    let mut maps: Vec<(String, ConfigMap, Vec<KeyToPath>)> = Vec::new();
    let mut taken = std::collections::BTreeSet::new();
    let mut size = 0;
    for file in std::iter::once(&manifest).chain(bundle.files.iter().copied()) {
        let key = key_for(&file.path, &taken);
        taken.insert(key.clone());
        let bytes = key.len() + file.bytes.len();
        if maps.is_empty() || size + bytes > CONFIG_MAP_BYTES {
            let name = format!("wmrender-bundle-{}", maps.len());
            let meta = object_meta(
                &name,
                Some(NAMESPACE),
                labels([("app.kubernetes.io/name", NAME)]),
                annotations(Order::ConfigMap, [(BUNDLE_MANIFEST_ANNOTATION, digest)]),
            );
            maps.push((name, ConfigMap { metadata: meta, ..Default::default() }, Vec::new()));
            size = 0;
        }
        size += bytes;
        let Some((_, map, items)) = maps.last_mut() else { break };
        match std::str::from_utf8(&file.bytes) {
            Ok(text) => {
                map.data.get_or_insert_with(BTreeMap::new).insert(key.clone(), text.to_string());
            }
            Err(_) => {
                map.binary_data.get_or_insert_with(BTreeMap::new).insert(key.clone(), ByteString(file.bytes.clone()));
            }
        }
        items.push(KeyToPath { key, path: file.path.clone(), ..Default::default() });
    }
    maps
}

fn deployment(controller: &ControllerPlan, maps: &[(String, ConfigMap, Vec<KeyToPath>)]) -> Deployment {
    let selector = BTreeMap::from([("app.kubernetes.io/name".to_string(), NAME.to_string())]);
    let mount = |name: &str, path: &str, read_only: bool| VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        read_only: read_only.then_some(true),
        ..Default::default()
    };
    let restricted = SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities { drop: Some(vec!["ALL".into()]), add: None }),
        read_only_root_filesystem: Some(true),
        ..Default::default()
    };
    let payload = format!("{STATE_DIR}/payload");
    let mut args: Vec<String> = [
        "controller",
        "--rendered",
        RENDERED_DIR,
        "--identity",
        &format!("{SSH_DIR}/{SSH_KEY_FILE}"),
        // A new host's key is learned on first contact and kept with its login record in the cluster, so a
        // restarted or rescheduled pod verifies it (no known_hosts file: the pod's file system is not kept).
        "--accept-new",
        "--metrics-address",
        &format!("0.0.0.0:{METRICS_PORT}"),
        "--metrics-cert",
        &format!("{METRICS_TLS_DIR}/tls.crt"),
        "--metrics-key",
        &format!("{METRICS_TLS_DIR}/tls.key"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Some(repository) = &controller.pull_from {
        args.extend(["--pull-from".to_string(), repository.clone()]);
    }
    let mut init = Vec::new();
    if let Some(image) = &controller.payload_image {
        args.extend(["--payload".to_string(), payload.clone()]);
        if let Some(repository) = &controller.pull_payload_from {
            args.extend(["--pull-payload-from".to_string(), repository.clone()]);
        }
        init.push(Container {
            name: "payload".into(),
            image: Some(image.clone()),
            command: Some(["cp", "-R", "/payload/.", &payload].iter().map(|s| s.to_string()).collect()),
            volume_mounts: Some(vec![mount("state", STATE_DIR, false)]),
            security_context: Some(restricted.clone()),
            resources: Some(resources("10m", "32Mi", "128Mi")),
            ..Default::default()
        });
    }
    let probe = |path: &str| Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::Int(METRICS_PORT),
            // The kubelet does not verify a probe's certificate: the probes answer as soon as the endpoint serves.
            scheme: Some("HTTPS".into()),
            ..Default::default()
        }),
        period_seconds: Some(10),
        ..Default::default()
    };
    let container = Container {
        name: "controller".into(),
        image: Some(controller.image.clone()),
        command: Some(vec!["wmrender".into()]),
        args: Some(args),
        env: Some(vec![EnvVar {
            name: "POD_NAME".into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector { field_path: "metadata.name".into(), api_version: None }),
                ..Default::default()
            }),
            value: None,
        }]),
        ports: Some(vec![ContainerPort {
            name: Some(METRICS_PORT_NAME.into()),
            container_port: METRICS_PORT,
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        liveness_probe: Some(probe("/healthz")),
        readiness_probe: Some(probe("/readyz")),
        resources: Some(resources("20m", "64Mi", "512Mi")),
        security_context: Some(restricted),
        volume_mounts: Some(vec![
            mount("bundle", RENDERED_DIR, true),
            mount("ssh-key", SSH_DIR, true),
            mount("metrics-tls", METRICS_TLS_DIR, true),
            mount("state", STATE_DIR, false),
        ]),
        ..Default::default()
    };
    let sources = maps
        .iter()
        .map(|(name, _, items)| VolumeProjection {
            config_map: Some(ConfigMapProjection { name: name.clone(), items: Some(items.clone()), optional: None }),
            ..Default::default()
        })
        .collect();
    let volumes = vec![
        Volume {
            name: "bundle".into(),
            projected: Some(ProjectedVolumeSource { sources: Some(sources), ..Default::default() }),
            ..Default::default()
        },
        Volume {
            name: "ssh-key".into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(SSH_KEY_SECRET.into()),
                items: Some(vec![KeyToPath {
                    key: SSH_KEY_FILE.into(),
                    path: SSH_KEY_FILE.into(),
                    ..Default::default()
                }]),
                // Read by the pod's user through its group: OpenShift's fsGroup, or, where no fsGroup is given,
                // group 0 (root's group owns the files), which the image's user (999:0) and OpenShift's arbitrary
                // UIDs are in.
                default_mode: Some(0o440),
                ..Default::default()
            }),
            ..Default::default()
        },
        Volume {
            name: "metrics-tls".into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(METRICS_TLS_SECRET.into()),
                default_mode: Some(0o440),
                ..Default::default()
            }),
            ..Default::default()
        },
        Volume { name: "state".into(), empty_dir: Some(EmptyDirVolumeSource::default()), ..Default::default() },
    ];
    Deployment {
        metadata: object_meta(NAME, Some(NAMESPACE), labels([]), annotations(Order::Controller, [])),
        spec: DeploymentSpec {
            replicas: Some(controller.replicas as i32),
            selector: LabelSelector { match_labels: Some(selector.clone()), match_expressions: None },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(selector), ..Default::default() }),
                spec: Some(PodSpec {
                    service_account_name: Some(NAME.into()),
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: Some(true),
                        seccomp_profile: Some(SeccompProfile {
                            type_: "RuntimeDefault".into(),
                            localhost_profile: None,
                        }),
                        ..Default::default()
                    }),
                    // Its Lease term: a stopped leader lets the Lease go; a killed one is replaced within a term.
                    termination_grace_period_seconds: Some(30),
                    init_containers: (!init.is_empty()).then_some(init),
                    containers: vec![container],
                    volumes: Some(volumes),
                    ..Default::default()
                }),
            },
            ..Default::default()
        },
        status: None,
    }
}

fn resources(cpu: &str, memory: &str, memory_limit: &str) -> ResourceRequirements {
    ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_string(), Quantity(cpu.into())),
            ("memory".to_string(), Quantity(memory.into())),
        ])),
        limits: Some(BTreeMap::from([("memory".to_string(), Quantity(memory_limit.into()))])),
        claims: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn a_key_is_the_path_made_a_key_or_its_hash_when_that_is_taken_or_too_long() {
        let none = BTreeSet::new();
        assert_eq!(
            key_for("node/C/k/containerd/registries/quay.io:443/hosts.toml", &none),
            "node.C.k.containerd.registries.quay.io_443.hosts.toml"
        );
        let taken: BTreeSet<String> = ["node.C.k.a.b".to_string()].into();
        let other = key_for("node/C/k/a/b", &taken);
        assert!(other.starts_with("file-") && other.len() == 21, "{other}");
        let long = format!("node/C/k/{}/hosts.toml", "r".repeat(260));
        let key = key_for(&long, &none);
        assert!(key.starts_with("file-") && key.len() <= 253, "{key}");
        assert_ne!(key_for("node/C/k/x", &taken), key_for("node/C/k/y", &taken));
    }

    #[test]
    fn a_config_map_never_holds_more_than_its_share() {
        let files: Vec<Artifact> =
            (0..40).map(|i| Artifact { path: format!("node/C/k/f{i:02}"), bytes: vec![b'x'; 100 * 1024] }).collect();
        let bundle = Bundle { files: files.iter().collect(), manifest: b"{}".to_vec() };
        let maps = config_maps(&bundle, "sha256:00");
        assert!(maps.len() >= 5, "{}", maps.len());
        for (name, map, items) in &maps {
            let bytes: usize = map.data.iter().flatten().map(|(k, v)| k.len() + v.len()).sum();
            assert!(bytes <= CONFIG_MAP_BYTES, "{name}: {bytes}");
            assert_eq!(items.len(), map.data.as_ref().map_or(0, |d| d.len()));
        }
        let placed: usize = maps.iter().map(|(_, _, items)| items.len()).sum();
        assert_eq!(placed, 41, "every file and the manifest, once");
    }
}
