//! The cluster side of the sync tests: what a stand-in API server must hold for `sync --kubeconfig` to fetch the
//! node credentials (as src/cluster/credentials.rs reads them), with real certificates made by openssl.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::json;

/// A self-signed certificate (PEM) with this common name, valid one day.
pub fn certificate(cn: &str) -> String {
    let out = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            "/dev/null",
        ])
        .args(["-days", "1", "-subj", &format!("/CN={cn}")])
        .output()
        .expect("openssl runs");
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

/// The bootstrap token Secret, the ControllerConfig (kubelet CA) and the pull secret, without additional CAs.
pub fn seed_credentials(api: &kube_standin::ApiServer, bootstrap_token: &str) {
    let b64 = |s: &str| STANDARD.encode(s);
    api.put_object(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "node-bootstrapper-token", "namespace": "openshift-machine-config-operator"},
        "type": "kubernetes.io/service-account-token",
        "data": {"token": b64(bootstrap_token), "ca.crt": b64(&certificate("bootstrap-ca"))}}));
    api.put_object(json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "ControllerConfig",
        "metadata": {"name": "machine-config-controller"},
        "spec": {"kubeAPIServerServingCAData": b64(&certificate("kubelet-ca"))}}));
    api.put_object(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "pull-secret", "namespace": "openshift-config"},
        "type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": b64(r#"{"auths":{}}"#)}}));
}
