//! What an OpenShift cluster holds that wmrender reads, written into the test control plane as the cluster's own
//! operators write it: each object valid under its real CRD, status through the status subresource.

use super::apiserver::ControlPlane;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

pub const INFRASTRUCTURES: &str = "/apis/config.openshift.io/v1/infrastructures";
pub const PROXIES: &str = "/apis/config.openshift.io/v1/proxies";
pub const CONTROLLER_CONFIGS: &str = "/apis/machineconfiguration.openshift.io/v1/controllerconfigs";

/// The Infrastructure `cluster`: its platform and the internal API server URL nodes use (`apiServerInternalURI`).
pub fn infrastructure(cp: &ControlPlane, platform: &str, api_int: &str) {
    let admin = cp.admin();
    admin.apply(
        INFRASTRUCTURES,
        "cluster",
        &json!({"apiVersion": "config.openshift.io/v1", "kind": "Infrastructure", "metadata": {"name": "cluster"},
                "spec": {"platformSpec": {"type": platform}}}),
    );
    admin.set_status(
        &format!("{INFRASTRUCTURES}/cluster"),
        &json!({"infrastructureName": "rig-x7k2p", "platform": platform, "platformStatus": {"type": platform},
                "apiServerURL": api_int.replace("api-int", "api"), "apiServerInternalURI": api_int,
                "controlPlaneTopology": "HighlyAvailable", "infrastructureTopology": "HighlyAvailable",
                "etcdDiscoveryDomain": ""}),
    );
}

/// The ControllerConfig the machine-config operator keeps: the kubelet CA and the image registry bundles.
pub fn controller_config(cp: &ControlPlane, kubelet_ca: &str, registry_bundles: &[(&str, &str)]) {
    let b64 = |s: &str| STANDARD.encode(s);
    let bundles: Vec<Value> = registry_bundles.iter().map(|(f, pem)| json!({"file": f, "data": b64(pem)})).collect();
    cp.admin().apply(
        CONTROLLER_CONFIGS,
        "machine-config-controller",
        &json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "ControllerConfig",
                "metadata": {"name": "machine-config-controller"},
                "spec": {"additionalTrustBundle": null, "baseOSContainerImage": "quay.io/openshift/rhcos:4",
                         "cloudProviderCAData": null, "cloudProviderConfig": "", "clusterDNSIP": "172.30.0.10",
                         "dns": null, "images": {}, "infra": null, "ipFamilies": "IPv4",
                         "kubeAPIServerServingCAData": b64(kubelet_ca), "network": null, "proxy": null,
                         "releaseImage": "quay.io/openshift-release-dev/ocp-release:4.21.0",
                         "rootCAData": b64(&cp.ca_pem()),
                         "imageRegistryBundleData": bundles, "imageRegistryBundleUserData": []}}),
    );
}

/// The cluster Proxy, naming `trusted_ca` (a ConfigMap in openshift-config holding `ca-bundle.crt`) if given.
pub fn proxy(cp: &ControlPlane, trusted_ca: Option<(&str, &str)>) {
    let admin = cp.admin();
    let mut spec = json!({});
    if let Some((name, pem)) = trusted_ca {
        spec["trustedCA"] = json!({"name": name});
        admin.apply(
            "/api/v1/namespaces/openshift-config/configmaps",
            name,
            &json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": "openshift-config"}, "data": {"ca-bundle.crt": pem}}),
        );
    }
    admin.apply(
        PROXIES,
        "cluster",
        &json!({"apiVersion": "config.openshift.io/v1", "kind": "Proxy", "metadata": {"name": "cluster"}, "spec": spec}),
    );
}

/// The pull secret `openshift-config/pull-secret`.
pub fn pull_secret(cp: &ControlPlane, dockerconfigjson: &str) {
    cp.admin().apply(
        "/api/v1/namespaces/openshift-config/secrets",
        "pull-secret",
        &json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
                "metadata": {"name": "pull-secret", "namespace": "openshift-config"},
                "data": {".dockerconfigjson": STANDARD.encode(dockerconfigjson)}}),
    );
}

/// Everything `sync --kubeconfig` reads, with the API server's own URL as api-int (so nodes can reach it) and
/// fresh CAs: returns the bootstrap token.
pub fn cluster(cp: &ControlPlane, platform: &str) -> String {
    infrastructure(cp, platform, &cp.url);
    controller_config(cp, &super::certificate("kubelet-ca"), &[]);
    proxy(cp, None);
    pull_secret(cp, r#"{"auths":{}}"#);
    super::played::bootstrap_token(cp)
}
