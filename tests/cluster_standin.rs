//! The stand-in API server (crates/kube-standin) enforces the API rules wmrender's cluster code relies on. No real
//! kube-apiserver can be installed where these tests run, so the stand-in is what the cluster tests talk to; these
//! tests speak raw HTTP to it, so they prove the rules themselves, independently of any client library.

use kube_standin::{ApiServer, Fault};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

/// One request on a fresh connection: (code, body).
fn call(
    s: &ApiServer,
    method: &str,
    path: &str,
    token: Option<&str>,
    content_type: &str,
    body: &Value,
) -> (u16, Value) {
    let mut stream = TcpStream::connect(s.addr()).unwrap();
    stream.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    let body = if body.is_null() { String::new() } else { body.to_string() };
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    let code: u16 = status.split_whitespace().nth(1).unwrap().parse().unwrap();
    let mut len = 0;
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).unwrap();
        if h == "\r\n" {
            break;
        }
        if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap();
        }
    }
    let mut buf = vec![0; len];
    reader.read_exact(&mut buf).unwrap();
    (code, serde_json::from_slice(&buf).unwrap())
}

fn get(s: &ApiServer, path: &str) -> (u16, Value) {
    call(s, "GET", path, Some(s.token()), "application/json", &Value::Null)
}

fn node(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}, "status": {"phase": "x"}})
}

#[test]
fn requests_without_a_known_bearer_token_are_unauthorized() {
    let s = ApiServer::start();
    s.put_object(node("win-a", json!({})));
    for token in [None, Some("wrong")] {
        let (code, body) = call(&s, "GET", "/api/v1/nodes/win-a", token, "application/json", &Value::Null);
        assert_eq!(code, 401);
        assert_eq!(
            (body["kind"].as_str(), body["reason"].as_str(), body["code"].as_u64()),
            (Some("Status"), Some("Unauthorized"), Some(401))
        );
    }
    assert_eq!(get(&s, "/api/v1/nodes/win-a").0, 200);
}

#[test]
fn missing_objects_and_unknown_resources_are_404_statuses() {
    let s = ApiServer::start();
    let (code, body) = get(&s, "/api/v1/nodes/nope");
    assert_eq!(code, 404);
    assert_eq!(body["reason"], "NotFound");
    assert_eq!(body["message"], "nodes \"nope\" not found");
    let (code, body) = get(&s, "/apis/certificates.k8s.io/v1/certificatesigningrequests/csr-1");
    assert_eq!(code, 404);
    assert_eq!(body["message"], "certificatesigningrequests.certificates.k8s.io \"csr-1\" not found");
    assert_eq!(get(&s, "/apis/example.com/v1/widgets").0, 404);
    // A namespaced kind without a namespace, a cluster-scoped one with one.
    assert_eq!(get(&s, "/api/v1/pods/p").0, 404);
    assert_eq!(get(&s, "/api/v1/namespaces/default/nodes/win-a").0, 404);
}

#[test]
fn create_twice_is_409_already_exists_and_writes_bump_the_resource_version() {
    let s = ApiServer::start();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}});
    let (code, created) =
        call(&s, "POST", "/api/v1/namespaces/ns/configmaps", Some(s.token()), "application/json", &cm);
    assert_eq!(code, 201);
    assert_eq!(created["metadata"]["namespace"], "ns");
    let rv1 = created["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let (code, body) = call(&s, "POST", "/api/v1/namespaces/ns/configmaps", Some(s.token()), "application/json", &cm);
    assert_eq!((code, body["reason"].as_str()), (409, Some("AlreadyExists")));
    // The body's namespace must match the URL's.
    let other = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d", "namespace": "elsewhere"}});
    assert_eq!(
        call(&s, "POST", "/api/v1/namespaces/ns/configmaps", Some(s.token()), "application/json", &other).0,
        400
    );
    let patch = json!({"data": {"k": "w"}});
    let (code, patched) = call(
        &s,
        "PATCH",
        "/api/v1/namespaces/ns/configmaps/c",
        Some(s.token()),
        "application/merge-patch+json",
        &patch,
    );
    assert_eq!(code, 200);
    let rv2 = patched["metadata"]["resourceVersion"].as_str().unwrap();
    assert!(rv2.parse::<u64>().unwrap() > rv1.parse::<u64>().unwrap(), "{rv1} → {rv2}");
    assert_eq!(patched["metadata"]["uid"], created["metadata"]["uid"]);
}

#[test]
fn a_stale_resource_version_is_409_conflict_for_put_patch_and_delete() {
    let s = ApiServer::start();
    let stored = s.put_object(node("win-a", json!({})));
    let old_rv = stored["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let mut fresh = stored.clone();
    fresh["metadata"]["labels"] = json!({"a": "1"});
    let (code, updated) = call(&s, "PUT", "/api/v1/nodes/win-a", Some(s.token()), "application/json", &fresh);
    assert_eq!(code, 200);
    // The same PUT again carries the old resourceVersion: someone else wrote in between.
    let (code, body) = call(&s, "PUT", "/api/v1/nodes/win-a", Some(s.token()), "application/json", &fresh);
    assert_eq!((code, body["reason"].as_str()), (409, Some("Conflict")));
    assert!(body["message"].as_str().unwrap().contains("the object has been modified"), "{body}");
    let patch = json!({"metadata": {"resourceVersion": old_rv, "labels": {"b": "2"}}});
    let (code, _) = call(&s, "PATCH", "/api/v1/nodes/win-a", Some(s.token()), "application/merge-patch+json", &patch);
    assert_eq!(code, 409, "a resourceVersion in a patch is a precondition");
    let delete = json!({"preconditions": {"resourceVersion": old_rv}});
    assert_eq!(call(&s, "DELETE", "/api/v1/nodes/win-a", Some(s.token()), "application/json", &delete).0, 409);
    // A PUT without a resourceVersion is unconditional.
    let mut unconditional = updated.clone();
    unconditional["metadata"].as_object_mut().unwrap().remove("resourceVersion");
    assert_eq!(call(&s, "PUT", "/api/v1/nodes/win-a", Some(s.token()), "application/json", &unconditional).0, 200);
    assert_eq!(call(&s, "DELETE", "/api/v1/nodes/win-a", Some(s.token()), "application/json", &Value::Null).0, 200);
    assert!(s.object("v1", "nodes", "", "win-a").is_none());
}

#[test]
fn writes_to_an_object_leave_its_status_alone() {
    let s = ApiServer::start();
    s.put_object(node("win-a", json!({})));
    let patch = json!({"status": {"phase": "changed"}, "metadata": {"labels": {"a": "1"}}});
    let (code, body) =
        call(&s, "PATCH", "/api/v1/nodes/win-a", Some(s.token()), "application/merge-patch+json", &patch);
    assert_eq!(code, 200);
    assert_eq!((body["status"]["phase"].as_str(), body["metadata"]["labels"]["a"].as_str()), (Some("x"), Some("1")));
    let (code, body) =
        call(&s, "PATCH", "/api/v1/nodes/win-a/status", Some(s.token()), "application/merge-patch+json", &patch);
    assert_eq!(code, 200);
    assert_eq!(body["status"]["phase"], "changed");
}

#[test]
fn label_and_field_selectors_filter_lists() {
    let s = ApiServer::start();
    s.put_object(node("win-a", json!({"wmrender.dev/managed": "true", "kubernetes.io/os": "windows"})));
    s.put_object(node("win-b", json!({"kubernetes.io/os": "windows"})));
    s.put_object(node("linux-a", json!({"kubernetes.io/os": "linux"})));
    let names = |path: &str| -> Vec<String> {
        let (code, body) = get(&s, path);
        assert_eq!(code, 200, "{path}: {body}");
        assert_eq!(body["kind"], "NodeList");
        body["items"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(names("/api/v1/nodes"), ["linux-a", "win-a", "win-b"]);
    assert_eq!(names("/api/v1/nodes?labelSelector=wmrender.dev%2Fmanaged%3Dtrue"), ["win-a"]);
    assert_eq!(
        names("/api/v1/nodes?labelSelector=kubernetes.io%2Fos%3D%3Dwindows%2C%21wmrender.dev%2Fmanaged"),
        ["win-b"]
    );
    assert_eq!(names("/api/v1/nodes?labelSelector=kubernetes.io%2Fos!%3Dwindows"), ["linux-a"]);
    assert_eq!(names("/api/v1/nodes?fieldSelector=metadata.name%3Dwin-b"), ["win-b"]);
    // A field the kind does not support, and a set-based selector, are refused rather than ignored.
    assert_eq!(get(&s, "/api/v1/nodes?fieldSelector=spec.nodeName%3Dx").0, 400);
    assert_eq!(get(&s, "/api/v1/nodes?labelSelector=a%20in%20(b)").0, 400);
}

#[test]
fn strategic_merge_and_json_patches_apply_as_the_api_does() {
    let s = ApiServer::start();
    s.put_object(
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "labels": {"keep": "1", "drop": "1"}},
        "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}}),
    );
    let smp = json!({"metadata": {"labels": {"drop": null, "new": ""}}});
    let (code, body) =
        call(&s, "PATCH", "/api/v1/nodes/n", Some(s.token()), "application/strategic-merge-patch+json", &smp);
    assert_eq!(code, 200);
    assert_eq!(body["metadata"]["labels"], json!({"keep": "1", "new": ""}));
    let jp = json!([{"op": "test", "path": "/metadata/labels/keep", "value": "1"},
                    {"op": "add", "path": "/spec/unschedulable", "value": true}]);
    let (code, body) = call(&s, "PATCH", "/api/v1/nodes/n", Some(s.token()), "application/json-patch+json", &jp);
    assert_eq!(code, 200);
    assert_eq!(body["spec"]["unschedulable"], true);
    let failing = json!([{"op": "test", "path": "/metadata/labels/keep", "value": "2"}]);
    assert_eq!(call(&s, "PATCH", "/api/v1/nodes/n", Some(s.token()), "application/json-patch+json", &failing).0, 422);
    assert_eq!(call(&s, "PATCH", "/api/v1/nodes/n", Some(s.token()), "application/apply-patch+yaml", &smp).0, 415);
}

#[test]
fn injected_faults_answer_the_next_n_matching_requests_then_stop() {
    let s = ApiServer::start();
    s.put_object(node("win-a", json!({})));
    s.inject(Fault::conflicts("PATCH", "nodes", "win-a", 2));
    let patch = json!({"metadata": {"labels": {"a": "1"}}});
    let codes: Vec<u16> = (0..3)
        .map(|_| call(&s, "PATCH", "/api/v1/nodes/win-a", Some(s.token()), "application/merge-patch+json", &patch).0)
        .collect();
    assert_eq!(codes, [409, 409, 200]);
    assert_eq!(get(&s, "/api/v1/nodes/win-a").0, 200, "GETs were never affected");
    let log = s.requests();
    assert_eq!(log.iter().filter(|r| r.method == "PATCH").count(), 3);
    assert!(log.iter().all(|r| r.user == "system:admin"));
}

fn csr(name: &str) -> Value {
    json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {"name": name},
           "spec": {"request": "", "signerName": "kubernetes.io/kubelet-serving", "usages": ["server auth"], "username": "system:node:n"}})
}

#[test]
fn a_csr_is_approved_through_the_approval_subresource_only() {
    let s = ApiServer::start();
    s.put_object(csr("csr-1"));
    let approved = |status: &str| json!({"status": {"conditions": [{"type": "Approved", "status": status, "reason": "R", "message": "m"}]}});
    let path = "/apis/certificates.k8s.io/v1/certificatesigningrequests/csr-1";
    let conditions = || {
        s.object("certificates.k8s.io/v1", "certificatesigningrequests", "", "csr-1").unwrap()["status"]["conditions"]
            .clone()
    };
    // Through the object or its status, the approval does not take.
    for p in [path.to_string(), format!("{path}/status")] {
        let (code, _) = call(&s, "PATCH", &p, Some(s.token()), "application/merge-patch+json", &approved("True"));
        assert_eq!(code, 200, "{p}");
        assert!(conditions().as_array().is_none_or(|c| c.is_empty()), "{p}: {}", conditions());
    }
    let approval = format!("{path}/approval");
    assert_eq!(
        call(&s, "PATCH", &approval, Some(s.token()), "application/merge-patch+json", &approved("False")).0,
        422
    );
    let (code, body) = call(&s, "PATCH", &approval, Some(s.token()), "application/merge-patch+json", &approved("True"));
    assert_eq!(code, 200, "{body}");
    assert_eq!(conditions()[0]["type"], "Approved");
    // Approved and Denied exclude each other, and an approval cannot be taken back.
    let both = json!({"status": {"conditions": [{"type": "Approved", "status": "True"}, {"type": "Denied", "status": "True"}]}});
    assert_eq!(call(&s, "PATCH", &approval, Some(s.token()), "application/merge-patch+json", &both).0, 422);
    let none = json!({"status": {"conditions": []}});
    assert_eq!(call(&s, "PATCH", &approval, Some(s.token()), "application/merge-patch+json", &none).0, 422);
}

#[test]
fn a_created_csr_records_who_asked_and_starts_without_status() {
    let s = ApiServer::start();
    s.add_token("bootstrap-token", "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper");
    let mut forged = csr("csr-2");
    forged["spec"]["username"] = "system:admin".into();
    forged["status"] = json!({"conditions": [{"type": "Approved", "status": "True"}]});
    let (code, body) = call(
        &s,
        "POST",
        "/apis/certificates.k8s.io/v1/certificatesigningrequests",
        Some("bootstrap-token"),
        "application/json",
        &forged,
    );
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["spec"]["username"], "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper");
    assert_eq!(
        body["spec"]["groups"],
        json!([
            "system:serviceaccounts",
            "system:serviceaccounts:openshift-machine-config-operator",
            "system:authenticated"
        ])
    );
    assert!(body.get("status").is_none(), "{body}");
}
