//! Which kubelet CSRs `sync --kubeconfig` approves (src/cluster/csr.rs, src/cluster/join.rs). The requests are real
//! PKCS#10 requests made by `openssl req`; the cluster is the stand-in API server of crates/kube-standin (no real
//! kube-apiserver can be installed where these tests run), which accepts an approval only through the `/approval`
//! subresource.
#![cfg(feature = "cluster")]

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use kube_standin::ApiServer;
use serde_json::{Value, json};
use std::time::Duration;
use wmrender::cluster::csr::{BOOTSTRAPPER, CLIENT_SIGNER, Expected, Kind, SERVING_SIGNER, Spec, Verdict, judge};

/// A PEM CSR for `subject` (openssl's `/O=…/CN=…` form) with `san` (e.g. `DNS:a,IP:1.2.3.4`) if not empty.
fn request(subject: &str, san: &str) -> Vec<u8> {
    let mut cmd = std::process::Command::new("openssl");
    cmd.args(["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "/dev/null"]);
    cmd.args(["-subj", subject]);
    if !san.is_empty() {
        cmd.args(["-addext", &format!("subjectAltName={san}")]);
    }
    let out = cmd.output().expect("openssl runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

const CLIENT_USAGES: [&str; 3] = ["digital signature", "key encipherment", "client auth"];
const SERVING_USAGES: [&str; 3] = ["digital signature", "key encipherment", "server auth"];

fn node00() -> Vec<Expected> {
    vec![Expected { name: "node-00".into(), addresses: vec!["10.0.0.5".into()] }]
}

fn verdict(signer: &str, username: &str, usages: &[&str], pem: &[u8], node_exists: bool) -> Verdict {
    let spec = Spec {
        signer,
        username,
        groups: vec!["system:nodes", "system:authenticated"],
        usages: usages.to_vec(),
        request: pem,
    };
    judge(&spec, &node00(), &|_| node_exists, &|_| vec!["node-00.example.com".into()])
}

fn refused(v: Verdict, because: &str) {
    match v {
        Verdict::Refuse { node, why } => {
            assert_eq!(node, "node-00");
            assert!(why.contains(because), "{why}");
        }
        other => panic!("expected a refusal ({because}), got {other:?}"),
    }
}

#[test]
fn the_configured_nodes_client_and_serving_csrs_are_approved() {
    let client = request("/O=system:nodes/CN=system:node:node-00", "");
    assert_eq!(
        verdict(CLIENT_SIGNER, BOOTSTRAPPER, &CLIENT_USAGES, &client, false),
        Verdict::Approve { node: "node-00".into(), kind: Kind::Client }
    );
    // Non-RSA keys ask without key encipherment.
    assert!(matches!(
        verdict(CLIENT_SIGNER, BOOTSTRAPPER, &["digital signature", "client auth"], &client, false),
        Verdict::Approve { .. }
    ));
    // SANs: its name, the address sync reached, an address on its Node object.
    let serving = request("/O=system:nodes/CN=system:node:node-00", "DNS:node-00,IP:10.0.0.5,DNS:node-00.example.com");
    assert_eq!(
        verdict(SERVING_SIGNER, "system:node:node-00", &SERVING_USAGES, &serving, true),
        Verdict::Approve { node: "node-00".into(), kind: Kind::Serving }
    );
}

#[test]
fn a_csr_for_another_node_is_not_ours() {
    let other = request("/O=system:nodes/CN=system:node:node-99", "");
    assert_eq!(verdict(CLIENT_SIGNER, BOOTSTRAPPER, &CLIENT_USAGES, &other, false), Verdict::NotOurs);
    let serving = request("/O=system:nodes/CN=system:node:node-99", "DNS:node-99");
    assert_eq!(verdict(SERVING_SIGNER, "system:node:node-99", &SERVING_USAGES, &serving, true), Verdict::NotOurs);
    // A client renewal by node-00 itself is the cluster's own approver's (selfnodeclient), not sync's.
    let renewal = request("/O=system:nodes/CN=system:node:node-00", "");
    assert_eq!(verdict(CLIENT_SIGNER, "system:node:node-00", &CLIENT_USAGES, &renewal, true), Verdict::NotOurs);
    // Another node asking for a serving certificate in node-00's name is refused.
    let stolen = request("/O=system:nodes/CN=system:node:node-00", "DNS:node-00");
    refused(
        verdict(SERVING_SIGNER, "system:node:node-99", &SERVING_USAGES, &stolen, true),
        "not by system:node:node-00",
    );
}

#[test]
fn wrong_sans_signers_requesters_subjects_and_usages_are_refused() {
    let serving = request("/O=system:nodes/CN=system:node:node-00", "DNS:node-00,IP:10.9.9.9");
    refused(verdict(SERVING_SIGNER, "system:node:node-00", &SERVING_USAGES, &serving, true), "10.9.9.9");
    let dns = request("/O=system:nodes/CN=system:node:node-00", "DNS:evil.example.com");
    refused(verdict(SERVING_SIGNER, "system:node:node-00", &SERVING_USAGES, &dns, true), "evil.example.com");
    let email = request("/O=system:nodes/CN=system:node:node-00", "DNS:node-00,email:a@b.c");
    refused(verdict(SERVING_SIGNER, "system:node:node-00", &SERVING_USAGES, &email, true), "e-mail");

    let client = request("/O=system:nodes/CN=system:node:node-00", "");
    refused(verdict("kubernetes.io/kube-apiserver-client", BOOTSTRAPPER, &CLIENT_USAGES, &client, false), "signer");
    refused(verdict("example.com/anything", BOOTSTRAPPER, &CLIENT_USAGES, &client, false), "signer");
    refused(
        verdict(CLIENT_SIGNER, "system:serviceaccount:default:someone", &CLIENT_USAGES, &client, false),
        "bootstrapper",
    );
    refused(
        verdict(CLIENT_SIGNER, BOOTSTRAPPER, &["digital signature", "key encipherment", "server auth"], &client, false),
        "usages",
    );
    refused(verdict(CLIENT_SIGNER, BOOTSTRAPPER, &CLIENT_USAGES, &client, true), "already exists");
    let with_san = request("/O=system:nodes/CN=system:node:node-00", "DNS:node-00");
    refused(verdict(CLIENT_SIGNER, BOOTSTRAPPER, &CLIENT_USAGES, &with_san, false), "subject alternative names");
    let admin = request("/O=system:nodes/O=system:masters/CN=system:node:node-00", "");
    refused(verdict(CLIENT_SIGNER, BOOTSTRAPPER, &CLIENT_USAGES, &admin, false), "organizations");
    refused(verdict(SERVING_SIGNER, "system:node:node-00", &CLIENT_USAGES, &serving, true), "usages");
}

// ---- against the stand-in: kubelet's sequence, and exactly the right CSRs approved ----

fn csr(name: &str, signer: &str, username: &str, groups: &[&str], usages: &[&str], pem: &[u8]) -> Value {
    json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {"name": name},
           "spec": {"request": STANDARD.encode(pem), "signerName": signer, "username": username,
                    "groups": groups, "usages": usages}})
}

fn approved(s: &ApiServer, name: &str) -> bool {
    s.object("certificates.k8s.io/v1", "certificatesigningrequests", "", name).unwrap()["status"]["conditions"]
        .as_array()
        .is_some_and(|c| c.iter().any(|c| c["type"] == "Approved" && c["status"] == "True"))
}

/// Plays kubelet: the client CSR; once approved, the Node and the serving CSR.
fn kubelet(s: std::sync::Arc<ApiServer>, node: &'static str) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let subject = format!("/O=system:nodes/CN=system:node:{node}");
        s.put_object(csr(
            "csr-client",
            CLIENT_SIGNER,
            BOOTSTRAPPER,
            &["system:serviceaccounts", "system:authenticated"],
            &CLIENT_USAGES,
            &request(&subject, ""),
        ));
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !approved(&s, "csr-client") {
            assert!(std::time::Instant::now() < deadline, "the client CSR was never approved");
            std::thread::sleep(Duration::from_millis(100));
        }
        s.put_object(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node},
            "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.5"}, {"type": "Hostname", "address": node}],
                       "conditions": [{"type": "Ready", "status": "False"}]}}));
        let pem = request(&subject, &format!("DNS:{node},IP:10.0.0.5"));
        s.put_object(csr(
            "csr-serving",
            SERVING_SIGNER,
            &format!("system:node:{node}"),
            &["system:nodes", "system:authenticated"],
            &SERVING_USAGES,
            &pem,
        ));
    })
}

#[test]
fn join_approves_exactly_this_nodes_csrs_through_the_approval_subresource_and_labels_it() {
    let s = std::sync::Arc::new(ApiServer::start());
    // Decoys, there from the start: another node's client CSR, and CSRs naming node-00 that fail a check.
    let other = request("/O=system:nodes/CN=system:node:node-99", "");
    s.put_object(csr("csr-other-node", CLIENT_SIGNER, BOOTSTRAPPER, &[], &CLIENT_USAGES, &other));
    let wrong_sans = request("/O=system:nodes/CN=system:node:node-00", "DNS:node-00,IP:192.0.2.1");
    s.put_object(csr(
        "csr-wrong-sans",
        SERVING_SIGNER,
        "system:node:node-00",
        &["system:nodes", "system:authenticated"],
        &SERVING_USAGES,
        &wrong_sans,
    ));
    let client = request("/O=system:nodes/CN=system:node:node-00", "");
    s.put_object(csr(
        "csr-wrong-signer",
        "kubernetes.io/kube-apiserver-client",
        BOOTSTRAPPER,
        &[],
        &CLIENT_USAGES,
        &client,
    ));
    // Another writer touches the Node between read and patch, twice: the label patch must retry.
    s.inject(kube_standin::Fault::conflicts("PATCH", "nodes", "node-00", 2));

    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = tmp.path().join("kubeconfig");
    s.write_kubeconfig(&kubeconfig).unwrap();
    let kubelet = kubelet(s.clone(), "node-00");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let expected = vec![Expected { name: "node-00".into(), addresses: vec!["127.0.0.1".into()] }];
    let report = runtime
        .block_on(async {
            let cluster = wmrender::cluster::Cluster::connect(&kubeconfig).await?;
            wmrender::cluster::join::run(&cluster, &expected, Duration::from_secs(30)).await
        })
        .unwrap();
    kubelet.join().unwrap();

    let approved_names: Vec<&str> = report.approved.iter().map(|a| a.csr.as_str()).collect();
    assert_eq!(approved_names, ["csr-client", "csr-serving"]);
    assert!(approved(&s, "csr-client") && approved(&s, "csr-serving"));
    for decoy in ["csr-other-node", "csr-wrong-sans", "csr-wrong-signer"] {
        assert!(!approved(&s, decoy), "{decoy}");
    }
    let mut left: Vec<&str> = report.left_alone.iter().map(|l| l.csr.as_str()).collect();
    left.sort();
    assert_eq!(left, ["csr-wrong-sans", "csr-wrong-signer"], "the decoys naming node-00 are reported");
    assert!(report.timed_out.is_empty());
    let node = s.object("v1", "nodes", "", "node-00").unwrap();
    assert_eq!(
        node["metadata"]["labels"],
        json!({"node-role.kubernetes.io/worker": "", "wmrender.dev/managed": "true"})
    );
    let log = s.requests();
    let approvals: Vec<_> = log.iter().filter(|r| r.method == "PUT").collect();
    assert!(approvals.iter().all(|r| r.target.ends_with("/approval") && r.code == 200), "{approvals:?}");
    assert_eq!(log.iter().filter(|r| r.method == "PATCH" && r.code == 409).count(), 2, "the conflicts were retried");
}

#[test]
fn a_node_that_never_asks_times_out_within_the_bound() {
    let s = ApiServer::start();
    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = tmp.path().join("kubeconfig");
    s.write_kubeconfig(&kubeconfig).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let expected = vec![Expected { name: "node-00".into(), addresses: vec![] }];
    let start = std::time::Instant::now();
    let report = runtime
        .block_on(async {
            let cluster = wmrender::cluster::Cluster::connect(&kubeconfig).await?;
            wmrender::cluster::join::run(&cluster, &expected, Duration::from_secs(2)).await
        })
        .unwrap();
    assert!(start.elapsed() < Duration::from_secs(6), "{:?}", start.elapsed());
    assert_eq!(report.timed_out, ["node-00"]);
    assert!(report.approved.is_empty());
}
