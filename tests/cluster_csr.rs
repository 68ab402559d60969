//! Which kubelet CSRs `sync --kubeconfig` approves (src/cluster/csr.rs, src/cluster/join.rs). The requests are real
//! PKCS#10 requests made by `openssl req`; the cluster is a real kube-apiserver (tests/support/apiserver.rs), where
//! a CSR's requester is whoever created it (the bootstrap token's ServiceAccount, a node's certificate) and an
//! approval goes only through the `/approval` subresource. kubelet is played (tests/support/played.rs); the CSR
//! signer is kube-controller-manager's. wmrender runs as the user holding the documented `wmrender-sync` role.
#![cfg(feature = "cluster")]

mod support;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::apiserver::{ControlPlane, Kube, WMRENDER_USER};
use support::controller_manager::{CSR_SIGNING, ControllerManager};
use support::played::{CSRS, Kubelet, Registration};
use wmrender::cluster::csr::{BOOTSTRAPPER, CLIENT_SIGNER, Expected, Kind, SERVING_SIGNER, Spec, Verdict, judge};

/// A PEM CSR for `subject` (openssl's `/O=…/CN=…` form) with `san` (e.g. `DNS:a,IP:1.2.3.4`) if not empty.
fn request(subject: &str, san: &str) -> Vec<u8> {
    support::request(std::path::Path::new("/dev/null"), subject, san)
}

const CLIENT_USAGES: [&str; 3] = ["digital signature", "key encipherment", "client auth"];
const SERVING_USAGES: [&str; 3] = ["digital signature", "key encipherment", "server auth"];

/// node-00 as the cluster and Git vouch for it: its Machine's InternalIP and InternalDNS (or its address in Git).
fn node00() -> Vec<Expected> {
    vec![Expected { name: "node-00".into(), addresses: vec!["10.0.0.5".into(), "node-00.example.com.".into()] }]
}

fn verdict(signer: &str, username: &str, usages: &[&str], pem: &[u8], node_exists: bool) -> Verdict {
    let spec = Spec {
        signer,
        username,
        groups: vec!["system:nodes", "system:authenticated"],
        usages: usages.to_vec(),
        request: pem,
    };
    judge(&spec, &node00(), &|_| node_exists)
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
    // SANs: its name and the names vouched for it (a DNS name matches without its trailing dot, in any case).
    let serving = request("/O=system:nodes/CN=system:node:node-00", "DNS:node-00,IP:10.0.0.5,DNS:Node-00.example.com");
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

// ---- against the real API server: kubelet's sequence, and exactly the right CSRs approved ----

fn csr(name: &str, signer: &str, usages: &[&str], pem: &[u8]) -> Value {
    json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {"name": name},
           "spec": {"request": STANDARD.encode(pem), "signerName": signer, "usages": usages}})
}

fn approved(admin: &Kube, name: &str) -> bool {
    admin.get(&format!("{CSRS}/{name}")).unwrap()["status"]["conditions"]
        .as_array()
        .is_some_and(|c| c.iter().any(|c| c["type"] == "Approved" && c["status"] == "True"))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

#[test]
fn join_approves_exactly_this_nodes_csrs_through_the_approval_subresource_and_labels_it() {
    let cp = ControlPlane::start();
    let token = support::openshift::cluster(&cp, "None");
    let _controllers = ControllerManager::start(&cp, &[CSR_SIGNING]);
    let admin = cp.admin();
    // Decoys, there from the start, each from whoever could send it: another node's client CSR (the bootstrap
    // token), a serving CSR naming node-00 with a SAN it does not have (node-00's own certificate), a client CSR
    // for another signer.
    let bootstrapper = support::apiserver::Kube::new(&{
        let p = cp.path("bootstrap.kubeconfig");
        support::played::token_kubeconfig(&cp, &token, &p);
        p
    });
    let other = request("/O=system:nodes/CN=system:node:node-99", "");
    bootstrapper.create(CSRS, &csr("csr-other-node", CLIENT_SIGNER, &CLIENT_USAGES, &other)).unwrap();
    let node00 = cp.client("system:node:node-00", &["system:nodes"]);
    let wrong_sans = request("/O=system:nodes/CN=system:node:node-00", "DNS:node-00,IP:192.0.2.1");
    node00.create(CSRS, &csr("csr-wrong-sans", SERVING_SIGNER, &SERVING_USAGES, &wrong_sans)).unwrap();
    let client = request("/O=system:nodes/CN=system:node:node-00", "");
    bootstrapper
        .create(CSRS, &csr("csr-wrong-signer", "kubernetes.io/kube-apiserver-client", &CLIENT_USAGES, &client))
        .unwrap();

    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = tmp.path().join("kubeconfig");
    cp.wmrender_kubeconfig(&kubeconfig, "wmrender-sync");
    // node-00's address, as its Machine says (TEST-NET-3: nothing here connects to it).
    let address = "203.0.113.10";
    let expected = vec![Expected { name: "node-00".into(), addresses: vec![address.into()] }];
    let report = std::thread::scope(|s| {
        // kubelet on node-00: its TLS bootstrap, then the Node and its serving certificate.
        let kubelet = s.spawn(|| {
            let k = Kubelet::bootstrap(&cp, &token, "node-00", &cp.path("node-00"), Duration::from_secs(30))?;
            let reg = Registration {
                addresses: vec![("InternalIP".into(), address.into()), ("Hostname".into(), "node-00".into())],
                boot_id: "b1".into(),
                ..Default::default()
            };
            k.register(&reg, Duration::from_secs(30))
        });
        let report = runtime()
            .block_on(async {
                let cluster = wmrender::cluster::Cluster::connect(&kubeconfig).await?;
                wmrender::cluster::join::run(&cluster, &expected, Duration::from_secs(60)).await
            })
            .unwrap();
        kubelet.join().unwrap().unwrap();
        report
    });

    let approved_names: Vec<&str> = report.approved.iter().map(|a| a.csr.as_str()).collect();
    assert_eq!(approved_names, ["csr-client-node-00", "csr-serving-node-00-b1"]);
    for decoy in ["csr-other-node", "csr-wrong-sans", "csr-wrong-signer"] {
        assert!(!approved(admin, decoy), "{decoy}");
    }
    let mut left: Vec<&str> = report.left_alone.iter().map(|l| l.csr.as_str()).collect();
    left.sort();
    assert_eq!(left, ["csr-wrong-sans", "csr-wrong-signer"], "the decoys naming node-00 are reported");
    assert!(report.timed_out.is_empty());
    let node = admin.get("/api/v1/nodes/node-00").unwrap();
    assert_eq!(node["metadata"]["labels"]["node-role.kubernetes.io/worker"], "");
    assert_eq!(node["metadata"]["labels"]["wmrender.dev/managed"], "true");
    // Approvals went through the subresource, each allowed by the documented role (approve on the signer).
    let log = cp.requests_by(WMRENDER_USER);
    let approvals: Vec<_> = log.iter().filter(|r| r.verb == "update").collect();
    assert!(approvals.iter().all(|r| r.uri.ends_with("/approval") && r.code == 200), "{approvals:?}");
    assert_eq!(approvals.len(), 2, "{approvals:?}");
}

#[test]
fn a_label_patch_that_meets_a_concurrent_writer_is_read_and_tried_again() {
    let cp = ControlPlane::start();
    let admin = cp.admin();
    admin.create("/api/v1/nodes", &json!({"metadata": {"name": "node-00"}})).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = tmp.path().join("kubeconfig");
    cp.wmrender_kubeconfig(&kubeconfig, "wmrender-sync");
    // Another writer changes the Node between each of the first two reads and their patches: the stale
    // resourceVersion makes the API server refuse the patch (409), and wmrender reads again.
    let writes = std::sync::atomic::AtomicUsize::new(0);
    let admin_kubeconfig = cp.path("admin.kubeconfig");
    // The other writer, from a thread of its own (the patch's closure runs inside wmrender's async runtime).
    let write_between = |n: usize| {
        let path = admin_kubeconfig.clone();
        std::thread::spawn(move || {
            Kube::new(&path)
                .merge_patch("/api/v1/nodes/node-00", &json!({"metadata": {"annotations": {"other": n.to_string()}}}))
                .unwrap();
        })
        .join()
        .unwrap();
    };
    let patched = runtime()
        .block_on(async {
            let cluster = wmrender::cluster::Cluster::connect(&kubeconfig).await?;
            wmrender::cluster::nodes::patch(&cluster, "node-00", Instant::now() + Duration::from_secs(30), |_| {
                let n = writes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if n < 2 {
                    write_between(n);
                }
                Some(json!({"metadata": {"labels": {"x": "y"}}}))
            })
            .await
        })
        .unwrap();
    assert_eq!(patched.unwrap()["metadata"]["labels"]["x"], "y");
    let patches: Vec<u16> =
        cp.requests_by(WMRENDER_USER).iter().filter(|r| r.verb == "patch").map(|r| r.code).collect();
    assert_eq!(patches, [409, 409, 200]);

    // A writer that never stops: a bounded number of tries, then an error that says so.
    let failed = runtime().block_on(async {
        let cluster = wmrender::cluster::Cluster::connect(&kubeconfig).await.unwrap();
        wmrender::cluster::nodes::patch(&cluster, "node-00", Instant::now() + Duration::from_secs(30), |_| {
            write_between(writes.fetch_add(1, std::sync::atomic::Ordering::SeqCst));
            Some(json!({"metadata": {"labels": {"x": "z"}}}))
        })
        .await
    });
    let e = failed.expect_err("a Node that keeps changing");
    assert!(e.to_string().contains("409 Conflict"), "{e}");
}

#[test]
fn a_node_that_never_asks_times_out_within_the_bound() {
    let cp = ControlPlane::start();
    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = tmp.path().join("kubeconfig");
    cp.wmrender_kubeconfig(&kubeconfig, "wmrender-sync");
    let expected = vec![Expected { name: "node-00".into(), addresses: vec![] }];
    let start = Instant::now();
    let report = runtime()
        .block_on(async {
            let cluster = wmrender::cluster::Cluster::connect(&kubeconfig).await?;
            wmrender::cluster::join::run(&cluster, &expected, Duration::from_secs(2)).await
        })
        .unwrap();
    assert!(start.elapsed() < Duration::from_secs(6), "{:?}", start.elapsed());
    assert_eq!(report.timed_out, ["node-00"]);
    assert!(report.approved.is_empty());
}
