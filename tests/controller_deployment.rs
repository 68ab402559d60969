//! The controller's rendered Deployment (inputs `controller`): the bundle it reads comes back whole from its
//! ConfigMaps, put together as the Deployment's projected volume puts it (in several ConfigMaps when it is large, each
//! under the API server's 1 MiB); its RBAC is the role docs/without-operator.md lists; and the real API server takes
//! every object, and the controller, as its ServiceAccount with the rendered RBAC alone, reads the fleet; the real
//! Deployment and ReplicaSet controllers and kube-scheduler make and place its pods under the `restricted` Pod Security
//! level, off the Windows nodes; and a real Linux kubelet runs them, from the images `image/build.sh` builds
//! (tests/support/kubelet.rs) and configures a BYOH host. Played in that test (tests/support/played.rs): kube-proxy's
//! one NAT rule for the `kubernetes` Service, the host's kubelet and the service CA (the metrics certificate); the
//! pause image is busybox sleeping, built by the test; the host's posix profile comes from an inventory the test
//! mounts.

mod support;

use base64::Engine;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use support::apiserver::ControlPlane;

fn fixture() -> std::path::PathBuf {
    support::root().join("fixtures/controller/wmrender.yaml")
}

/// The rendered `cluster/` objects, parsed, by file name.
fn objects(out: &Path) -> BTreeMap<String, Value> {
    std::fs::read_dir(out.join("cluster"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap() != "kustomization.yaml")
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p.file_name().unwrap().to_string_lossy().into_owned(), serde_saphyr::from_str(&text).unwrap())
        })
        .collect()
}

/// The directory the Deployment's `bundle` volume shows the controller: each item of each ConfigMap at its path.
fn projected(objects: &BTreeMap<String, Value>, into: &Path) {
    let deployment = &objects["deployment-wmrender-controller.yaml"];
    let volumes = deployment["spec"]["template"]["spec"]["volumes"].as_array().unwrap();
    let bundle = volumes.iter().find(|v| v["name"] == "bundle").unwrap();
    for source in bundle["projected"]["sources"].as_array().unwrap() {
        let name = source["configMap"]["name"].as_str().unwrap();
        let map = &objects[&format!("configmap-{name}.yaml")];
        for item in source["configMap"]["items"].as_array().unwrap() {
            let key = item["key"].as_str().unwrap();
            let bytes = match map["data"][key].as_str() {
                Some(text) => text.as_bytes().to_vec(),
                None => base64::engine::general_purpose::STANDARD
                    .decode(map["binaryData"][key].as_str().unwrap_or_else(|| panic!("{name} has no key {key}")))
                    .unwrap(),
            };
            let path = into.join(item["path"].as_str().unwrap());
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, bytes).unwrap();
        }
    }
}

/// The files of `dir` that the controller's bundle holds: the node bundle and the BYOH ConfigMap.
fn bundle_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    support::read_tree(dir)
        .into_iter()
        .filter(|(p, _)| p.starts_with("node/") || p == "cluster/configmap-windows-instances.yaml")
        .collect()
}

fn data_bytes(map: &Value) -> usize {
    let sum = |field: &str| -> usize {
        map[field].as_object().map(|m| m.iter().map(|(k, v)| k.len() + v.as_str().unwrap().len()).sum()).unwrap_or(0)
    };
    sum("data") + sum("binaryData")
}

#[test]
fn the_controller_reads_back_exactly_the_rendered_bundle_from_its_config_maps() {
    let (_tmp, out) = support::render_to_temp(&fixture());
    let objects = objects(&out);
    let rebuilt = tempfile::tempdir().unwrap();
    projected(&objects, rebuilt.path());
    let rendered =
        wmrender::delivery::read_rendered(rebuilt.path()).expect("the controller reads the projected bundle");
    assert_eq!(rendered.manifest.mode, Some(wmrender_contract::Mode::WithoutOperator));
    assert_eq!(bundle_files(rebuilt.path()), bundle_files(&out), "the node bundle and the BYOH hosts, byte for byte");
    // The same inputs digest as the render's own manifest: the controller names the render it applies.
    let main: Value = serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(rendered.manifest.inputs, main["inputs"].as_str().unwrap());
    let digest = format!(
        "sha256:{}",
        wmrender_contract::sha256_hex(&std::fs::read(rebuilt.path().join("manifest.json")).unwrap())
    );
    assert_eq!(
        objects["configmap-wmrender-bundle-0.yaml"]["metadata"]["annotations"]["wmrender.dev/bundle-manifest"],
        digest.as_str()
    );
}

#[test]
fn a_large_bundle_is_split_into_config_maps_under_the_api_servers_limit() {
    // 3,000 registry hosts: a hosts.toml each, some 1.2 MB of node files.
    let mut inputs = std::fs::read_to_string(fixture()).unwrap();
    inputs.push_str("  mirrors:\n    imageDigestMirrors:\n");
    for i in 0..3000 {
        inputs.push_str(&format!(
            "    - source: registry-{i}.example.com/team/app\n      mirrors: [mirror-{i}.example.net/team/app]\n"
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wmrender.yaml");
    std::fs::write(&path, inputs).unwrap();
    let (_tmp, out) = support::render_to_temp(&path);
    let objects = objects(&out);
    let maps: Vec<&Value> =
        objects.iter().filter(|(n, _)| n.starts_with("configmap-wmrender-bundle-")).map(|(_, v)| v).collect();
    assert!(maps.len() >= 2, "{} ConfigMaps", maps.len());
    for map in &maps {
        assert!(data_bytes(map) <= 1024 * 1024, "{}: {} bytes", map["metadata"]["name"], data_bytes(map));
    }
    let rebuilt = tempfile::tempdir().unwrap();
    projected(&objects, rebuilt.path());
    wmrender::delivery::read_rendered(rebuilt.path()).expect("the controller reads the projected bundle");
    assert_eq!(bundle_files(rebuilt.path()), bundle_files(&out));
}

/// A rule as a comparable value: API groups, resources, resource names and verbs, each sorted.
fn rule_set(role: &Value) -> Vec<Value> {
    let sorted = |v: &Value| {
        let mut l: Vec<String> =
            v.as_array().map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect()).unwrap_or_default();
        l.sort();
        l
    };
    let mut rules: Vec<Value> = role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            serde_json::json!([
                sorted(&r["apiGroups"]),
                sorted(&r["resources"]),
                sorted(&r["resourceNames"]),
                sorted(&r["verbs"])
            ])
        })
        .collect();
    rules.sort_by_key(|r| r.to_string());
    rules
}

#[test]
fn the_rendered_rbac_is_the_documented_controller_role() {
    let (_tmp, out) = support::render_to_temp(&fixture());
    let objects = objects(&out);
    let rendered: BTreeMap<(String, String), Vec<Value>> = objects
        .values()
        .filter(|o| {
            (o["kind"] == "ClusterRole" || o["kind"] == "Role") && o["metadata"]["name"] == "wmrender-controller"
        })
        .map(|o| {
            let scope = o["metadata"]["namespace"].as_str().unwrap_or("").to_string();
            ((o["kind"].as_str().unwrap().to_string(), scope), rule_set(o))
        })
        .collect();
    let documented: BTreeMap<(String, String), Vec<Value>> = support::rbac::documented()
        .into_iter()
        .filter(|o| o["metadata"]["name"] == "wmrender-controller")
        .map(|o| {
            let scope = o["metadata"]["namespace"].as_str().unwrap_or("").to_string();
            ((o["kind"].as_str().unwrap().to_string(), scope), rule_set(&o))
        })
        .collect();
    assert_eq!(rendered, documented);
    // Each role bound to the ServiceAccount the Deployment runs as.
    for (kind, ns) in rendered.keys() {
        let file = if ns.is_empty() {
            "clusterrolebinding-wmrender-controller.yaml".to_string()
        } else {
            format!("rolebinding-{ns}-wmrender-controller.yaml")
        };
        let binding = &objects[&file];
        assert_eq!(binding["roleRef"]["kind"], kind.as_str());
        assert_eq!(binding["subjects"][0]["kind"], "ServiceAccount");
        assert_eq!(binding["subjects"][0]["name"], "wmrender-controller");
        assert_eq!(binding["subjects"][0]["namespace"], "wmrender");
    }
    let pod = &objects["deployment-wmrender-controller.yaml"]["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "wmrender-controller");
}

/// The collection a rendered object is applied to.
fn collection(object: &Value) -> String {
    let ns = object["metadata"]["namespace"].as_str().unwrap_or("");
    match object["kind"].as_str().unwrap() {
        "Namespace" => "/api/v1/namespaces".into(),
        "ClusterRole" => "/apis/rbac.authorization.k8s.io/v1/clusterroles".into(),
        "ClusterRoleBinding" => "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings".into(),
        "Role" => format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles"),
        "RoleBinding" => format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings"),
        "ServiceAccount" => format!("/api/v1/namespaces/{ns}/serviceaccounts"),
        "ConfigMap" => format!("/api/v1/namespaces/{ns}/configmaps"),
        "Deployment" => format!("/apis/apps/v1/namespaces/{ns}/deployments"),
        "Service" => format!("/api/v1/namespaces/{ns}/services"),
        other => panic!("not the controller's: {other}"),
    }
}

/// Applies the controller's objects in the order Argo CD's sync waves give (its ServiceMonitor needs the
/// prometheus-operator CRDs: tests/monitoring.rs applies it); how many.
fn apply_controller_objects(cp: &ControlPlane, objects: &BTreeMap<String, Value>) -> usize {
    let ours = |o: &&Value| {
        let name = o["metadata"]["name"].as_str().unwrap_or("");
        (name == "wmrender-controller" || name.starts_with("wmrender-bundle-") || o["kind"] == "Namespace")
            && o["kind"] != "ServiceMonitor"
    };
    let mut applied = 0;
    for order in [
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "Deployment",
        "Service",
    ] {
        for object in objects.values().filter(ours).filter(|o| o["kind"] == order) {
            let name = object["metadata"]["name"].as_str().unwrap();
            let stored = cp.admin().apply(&collection(object), name, object);
            assert_eq!(stored["metadata"]["name"], name, "{stored}");
            applied += 1;
        }
    }
    applied
}

/// An OpenShift cluster on AWS with the namespaces the controller's Roles are in.
fn cluster() -> ControlPlane {
    let cp = ControlPlane::start();
    support::openshift::cluster(&cp, "AWS");
    for ns in ["openshift-machine-config-operator", "openshift-config", "openshift-machine-api"] {
        cp.namespace(ns);
    }
    cp
}

/// [`cluster`], and the fixture rendered.
fn cluster_and_render() -> (ControlPlane, tempfile::TempDir, std::path::PathBuf) {
    let cp = cluster();
    let (tmp, out) = support::render_to_temp(&fixture());
    (cp, tmp, out)
}

/// A Node as its kubelet registers it (played: no kubelet runs here), Ready, with room for pods.
fn node(cp: &ControlPlane, name: &str, os: &str, taints: &Value) {
    let path = cp.admin().seed(&serde_json::json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/os": os, "kubernetes.io/hostname": name,
                                              "node-role.kubernetes.io/worker": ""}},
        "spec": {"taints": taints},
    }));
    let now = support::played::now();
    let capacity = serde_json::json!({"cpu": "4", "memory": "16Gi", "pods": "110"});
    cp.admin().set_status(
        &path,
        &serde_json::json!({
            "capacity": capacity, "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
                            "lastHeartbeatTime": now, "lastTransitionTime": now}],
        }),
    );
}

/// The pods of the controller's Deployment: (name, node it is bound to, its scheduling condition's message).
fn controller_pods(cp: &ControlPlane) -> Vec<(String, String, String)> {
    cp.admin()
        .list("/api/v1/namespaces/wmrender/pods?labelSelector=app.kubernetes.io%2Fname%3Dwmrender-controller")
        .iter()
        .map(|p| {
            let scheduled = p["status"]["conditions"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["type"] == "PodScheduled"))
                .map(|c| c["message"].as_str().unwrap_or("").to_string())
                .unwrap_or_default();
            let on = p["spec"]["nodeName"].as_str().unwrap_or("").to_string();
            (p["metadata"]["name"].as_str().unwrap_or("").to_string(), on, scheduled)
        })
        .collect()
}

fn wait_for<T>(what: &str, limit: std::time::Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(std::time::Instant::now() < deadline, "{what}: not within {limit:?}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// The rendered Deployment as a cluster runs it, up to the kubelet: the real Deployment and ReplicaSet controllers
/// make its pods in a namespace the API server holds to the `restricted` Pod Security level, and the real scheduler
/// places them. A Windows node, registered with the taints the rendered kubelet configuration gives it, takes none
/// of them; a Linux worker takes them all. A pod template that is not `restricted` (a container that keeps its
/// capabilities) gets no pod. (No kubelet runs: the Nodes are played, and the pods go no further than bound.)
#[test]
fn the_rendered_deployment_passes_restricted_pod_security_and_is_scheduled_off_the_windows_nodes() {
    use support::controller_manager::{ControllerManager, DEPLOYMENT, NODE_LIFECYCLE, REPLICA_SET};
    let (cp, _tmp, out) = cluster_and_render();
    let mut objects = objects(&out);
    // The namespace held to `restricted`, as OpenShift's label synchronisation holds one whose pods need nothing more.
    let ns = &mut objects.get_mut("namespace-wmrender.yaml").unwrap()["metadata"]["labels"];
    ns["pod-security.kubernetes.io/enforce"] = "restricted".into();
    ns["pod-security.kubernetes.io/enforce-version"] = "latest".into();
    let kubelet: Value = serde_json::from_slice(&std::fs::read(out.join("node/C/k/kubelet.conf")).unwrap()).unwrap();
    let windows_taints = kubelet["registerWithTaints"].clone();
    assert!(windows_taints.as_array().is_some_and(|t| !t.is_empty()), "{kubelet}");
    node(&cp, "win-0", "windows", &windows_taints);

    let _controllers = ControllerManager::start(&cp, &[DEPLOYMENT, REPLICA_SET, NODE_LIFECYCLE]);
    let _scheduler = support::scheduler::Scheduler::start(&cp);
    // Ready: the node lifecycle controller takes off the not-ready taint the API server put on; what is left is
    // the kubelet configuration's.
    wait_for("win-0 with the rendered taints alone", std::time::Duration::from_secs(60), || {
        let taints = cp.admin().get("/api/v1/nodes/win-0")?["spec"]["taints"].clone();
        let keys = |t: &Value| -> Vec<String> {
            t.as_array().into_iter().flatten().map(|t| t["key"].as_str().unwrap_or("").to_string()).collect()
        };
        (keys(&taints) == keys(&windows_taints)).then_some(())
    });
    apply_controller_objects(&cp, &objects);
    let replicas = objects["deployment-wmrender-controller.yaml"]["spec"]["replicas"].as_u64().unwrap() as usize;

    // Only the Windows node: the pods are made (admitted as restricted) and none is bound; the scheduler says why.
    let pending = wait_for("the controller's pods, unschedulable", std::time::Duration::from_secs(60), || {
        let pods = controller_pods(&cp);
        (pods.len() == replicas && pods.iter().all(|(_, _, why)| !why.is_empty())).then_some(pods)
    });
    for (name, on, why) in &pending {
        assert!(on.is_empty(), "{name} was bound to {on}");
        assert!(why.contains("1 node(s) had untolerated taint(s)"), "{name}: {why}");
    }

    // A Linux worker: every pod is bound there.
    node(&cp, "worker-0", "linux", &serde_json::json!([]));
    let bound = wait_for("the controller's pods, bound", std::time::Duration::from_secs(60), || {
        let pods = controller_pods(&cp);
        (pods.len() == replicas && pods.iter().all(|(_, on, _)| !on.is_empty())).then_some(pods)
    });
    assert!(bound.iter().all(|(_, on, _)| on == "worker-0"), "{bound:?}");

    // The same Deployment with a container that keeps its capabilities: its ReplicaSet is refused every pod, and
    // says why.
    let mut loose = objects["deployment-wmrender-controller.yaml"].clone();
    loose["metadata"]["name"] = "loose".into();
    let labels = serde_json::json!({"app.kubernetes.io/name": "loose"});
    loose["spec"]["selector"]["matchLabels"] = labels.clone();
    loose["spec"]["template"]["metadata"]["labels"] = labels;
    loose["spec"]["template"]["spec"]["containers"][0]["securityContext"]
        .as_object_mut()
        .unwrap()
        .remove("capabilities");
    cp.admin().apply(&collection(&loose), "loose", &loose);
    let refused = wait_for("the loose pods refused", std::time::Duration::from_secs(60), || {
        let events = cp.admin().list("/api/v1/namespaces/wmrender/events");
        events
            .iter()
            .find(|e| {
                e["reason"] == "FailedCreate" && e["involvedObject"]["name"].as_str().unwrap_or("").starts_with("loose")
            })
            .map(|e| e["message"].as_str().unwrap_or("").to_string())
    });
    assert!(
        refused.contains("violates PodSecurity \"restricted:latest\"") && refused.contains("capabilities"),
        "{refused}"
    );
    let made = cp.admin().list("/api/v1/namespaces/wmrender/pods?labelSelector=app.kubernetes.io%2Fname%3Dloose");
    assert!(made.is_empty(), "{made:?}");
}

#[test]
fn the_api_server_takes_the_controllers_objects_and_its_rbac_is_enough_to_read_the_fleet() {
    let (cp, _tmp, out) = cluster_and_render();
    let objects = objects(&out);
    let applied = apply_controller_objects(&cp, &objects);
    assert!(applied >= 14, "{applied} objects");

    // The controller as its ServiceAccount (RBAC matches the account by its user name), reading its bundle as the
    // Deployment mounts it: one reconcile, deciding and changing nothing.
    let work = tempfile::tempdir().unwrap();
    let rendered = work.path().join("rendered");
    projected(&objects, &rendered);
    let user = "system:serviceaccount:wmrender:wmrender-controller";
    let kubeconfig = work.path().join("kubeconfig");
    cp.write_kubeconfig(&kubeconfig, user, &["system:serviceaccounts", "system:serviceaccounts:wmrender"]);
    let key = work.path().join("key");
    let keygen = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f", key.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(keygen.success());
    let o = support::wmrender(&[
        "status",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--rendered",
        rendered.to_str().unwrap(),
        "--identity",
        key.to_str().unwrap(),
        "--known-hosts",
        work.path().join("known_hosts").to_str().unwrap(),
    ]);
    let err = support::stderr(&o);
    assert!(support::code(&o) <= 1, "{err}");
    assert!(err.contains("10.0.0.21"), "the BYOH host of the bundle: {err}");
    let requests = cp.requests_by(user);
    assert!(requests.iter().any(|r| r.uri.contains("/nodes") && r.code == 200), "it read the Nodes as itself");
    let refused: Vec<String> = requests.iter().filter(|r| r.code == 403).map(|r| r.to_string()).collect();
    assert!(refused.is_empty(), "{refused:?}");
}

/// `registry.example/path/name:tag` as (registry, repository path, tag).
fn image_name(image: &str) -> (&str, &str, &str) {
    let (name, tag) = image.rsplit_once(':').expect("an image with a tag");
    let (registry, path) = name.split_once('/').expect("an image with a registry");
    (registry, path, tag)
}

/// The images the Deployment names, built as users build them (image/build.sh) and pushed, under the repositories and
/// tags the Deployment names, to a TLS registry on 127.0.0.1, which the node's containerd reaches as the mirror of
/// their registries; the pause image too. The manifests' digests: (wmrender, payload).
fn push_images(work: &Path, registry: &support::registry::Registry, deployment: &Value) -> (String, String) {
    let build = |args: &[&str]| {
        let o = std::process::Command::new("bash")
            .arg(support::root().join("image/build.sh"))
            .args(args)
            .output()
            .expect("bash runs");
        assert!(o.status.success(), "image/build.sh {args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap().trim().to_string()
    };
    // Pushed by the tag the build gives, then tagged as the Deployment names it (skopeo, registry to registry).
    let push = |layout: &Path, built_tag: &str, image: &str| {
        let (_, repository, tag) = image_name(image);
        let digest = registry.push(layout, built_tag, repository, None);
        let o = std::process::Command::new("skopeo")
            .args(["copy", "--quiet", "--src-tls-verify=false", "--dest-tls-verify=false"])
            .arg(format!("docker://{}/{repository}:{built_tag}", registry.addr))
            .arg(format!("docker://{}/{repository}:{tag}", registry.addr))
            .output()
            .unwrap();
        assert!(o.status.success(), "skopeo: {}", String::from_utf8_lossy(&o.stderr));
        digest
    };
    let spec = &deployment["spec"]["template"]["spec"];
    let layout = work.join("wmrender-image");
    let built = build(&["wmrender", layout.to_str().unwrap()]);
    assert_eq!(push(&layout, env!("CARGO_PKG_VERSION"), spec["containers"][0]["image"].as_str().unwrap()), built);
    // A payload as `wmrender payload list` accepts it (the programs are not run: the controller copies them).
    let payload = work.join("payload");
    std::fs::create_dir_all(payload.join("C/k")).unwrap();
    std::fs::write(payload.join("C/k/kubelet.exe"), b"MZ kubelet").unwrap();
    let o = support::wmrender(&["payload", "list", payload.to_str().unwrap()]);
    assert_eq!(support::code(&o), 0, "{}", support::stderr(&o));
    let payload_layout = work.join("payload-image");
    let payload_built = build(&["payload", payload.to_str().unwrap(), payload_layout.to_str().unwrap()]);
    push(&payload_layout, "payload", spec["initContainers"][0]["image"].as_str().unwrap());
    let pause = work.join("pause-image");
    support::kubelet::pause_image(&pause);
    push(&pause, "3.10", support::kubelet::PAUSE_IMAGE);
    (built, payload_built)
}

/// The SSH key the Deployment mounts (`cloud-private-key`), as a user makes it: the key its hosts trust. (The
/// metrics endpoint's certificate is the service CA's, for the rendered Service.)
fn ssh_key_secret(cp: &ControlPlane, key: &Path) {
    let pem = base64::engine::general_purpose::STANDARD.encode(std::fs::read(key).unwrap());
    let secret = serde_json::json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                                    "metadata": {"name": "cloud-private-key", "namespace": "wmrender"},
                                    "data": {"private-key.pem": pem}});
    cp.admin().create("/api/v1/namespaces/wmrender/secrets", &secret).unwrap();
}

/// What a pod's containers wrote, from kubelet's log folder, for a failure message.
fn pod_logs(kubelet: &support::kubelet::RealKubelet) -> String {
    let mut out = String::new();
    for (path, bytes) in support::read_tree(&kubelet.dir.join("pod-logs")) {
        let text = String::from_utf8_lossy(&bytes);
        out.push_str(&format!("--- {path}\n{}\n", support::apiserver::tail(&text, 15)));
    }
    out
}

/// The rendered Deployment, run by a real kubelet: the pods of `kubectl apply` of the rendered objects (the
/// namespace held to `restricted`) are placed on a Linux node whose kubelet (k8s.io/kubernetes v1.36.3) runs them
/// with Debian's containerd and runc, on the CNI bridge plugin's network in a namespace the test makes. Each pod's
/// images come, by the names the Deployment gives, from the TLS registry as containerd's mirror; the init
/// container copies the payload; the projected volume gives `--rendered` the directory `render` wrote; the
/// readiness probe (HTTPS, /readyz) passes; one replica takes the Lease as the controller's ServiceAccount, with the
/// rendered RBAC alone, and configures the render's BYOH host (a posix-profile root behind the rig's sshd, in a
/// namespace of its own the pods' network reaches), whose kubelet joins with what it delivered; deleting the
/// leader's pod hands over; a new render reaches the leader through the ConfigMap, refused while half applied.
/// (Played: kube-proxy's one NAT rule for the `kubernetes` Service, `played::kube_proxy_rule`; the host's kubelet,
/// see below. The test's inventory says the host's posix profile.)
#[test]
fn a_real_kubelet_runs_the_rendered_deployment_and_its_pods_become_ready_and_elect_a_leader() {
    use support::controller_manager::{
        CSR_SIGNING, ControllerManager, DEPLOYMENT, NODE_LIFECYCLE, REPLICA_SET, ROOT_CA_PUBLISHER,
    };
    use support::kubelet::{Credential, Join, Mirror, RealKubelet};
    use support::netns::NetNs;
    let cp = cluster();
    let work = tempfile::tempdir().unwrap();
    let ca = support::registry::Ca::new(work.path());
    let registry = support::registry::Registry::start(&work.path().join("registry"), &ca, None);

    // The Linux worker the pods run on, and the BYOH host they configure: a network namespace each, linked as two
    // hosts of one network. The host is a posix-profile root behind the rig's sshd, reached at its address's port 22.
    let ns = NetNs::create();
    let host_ns = NetNs::create();
    let (_, host) = ns.link(&host_ns, 0);
    let sshd = support::sshd::Sshd::start();
    let _ssh = host_ns.forward(&format!("{host}:22"), ([127, 0, 0, 1], sshd.port).into());
    let host_root = work.path().join("host-0");
    std::fs::create_dir_all(&host_root).unwrap();
    let inputs = std::fs::read_to_string(fixture()).unwrap().replace("10.0.0.21", &host);
    let rendered_inputs = work.path().join("wmrender.yaml");
    std::fs::write(&rendered_inputs, &inputs).unwrap();
    let (_tmp, out) = support::render_to_temp(&rendered_inputs);
    let objects = objects(&out);
    let deployment = objects["deployment-wmrender-controller.yaml"].clone();
    let (wmrender_digest, payload_digest) = push_images(work.path(), &registry, &deployment);
    let mirrored: Vec<&str> = [
        &deployment["spec"]["template"]["spec"]["containers"][0],
        &deployment["spec"]["template"]["spec"]["initContainers"][0],
    ]
    .iter()
    .map(|c| image_name(c["image"].as_str().unwrap()).0)
    .chain([image_name(support::kubelet::PAUSE_IMAGE).0])
    .collect();

    let _controllers =
        ControllerManager::start(&cp, &[DEPLOYMENT, REPLICA_SET, NODE_LIFECYCLE, ROOT_CA_PUBLISHER, CSR_SIGNING]);
    let _scheduler = support::scheduler::Scheduler::start(&cp);
    // The metrics endpoint's certificate, written by the service CA for the rendered Service (played: OpenShift's).
    let _service_ca = support::played::ServiceCa::start(&cp);
    let service = cp.admin().get("/api/v1/namespaces/default/services/kubernetes").unwrap();
    let cluster_ip = service["spec"]["clusterIP"].as_str().unwrap();
    let _kubernetes_service = support::played::kube_proxy_rule(
        &ns,
        format!("{cluster_ip}:443").parse().unwrap(),
        cp.url.trim_start_matches("https://").parse().unwrap(),
    );
    let join = Join {
        name: "worker-0",
        address: &ns.node,
        credential: Credential::Node,
        taints: vec![],
        mirror: Some(Mirror { registry: registry.addr.parse().unwrap(), ca: &ca.pem(), hosts: &mirrored }),
    };
    let kubelet = RealKubelet::start(&cp, &join, &work.path().join("kubelet"), &ns);
    wait_for("worker-0 Ready", std::time::Duration::from_secs(90), || {
        let node = cp.admin().get("/api/v1/nodes/worker-0")?;
        let ready =
            node["status"]["conditions"].as_array()?.iter().any(|c| c["type"] == "Ready" && c["status"] == "True");
        ready.then_some(())
    });

    // `kubectl apply -k` of an overlay on the rendered cluster/, as a user applies it with what their cluster adds:
    // the namespace held to `restricted`, and (the test's) an inventory that says the host's posix profile, mounted
    // from a ConfigMap and given with `--inventory` (`reachOnly`: the render names the host). The cluster has the
    // CRDs of every rendered kind (the prometheus-operator's, besides OpenShift's) and their namespaces.
    cp.install_crd_files(&[
        support::root().join("target/monitoring/crds/monitoring.coreos.com_servicemonitors.yaml"),
        support::root().join("target/monitoring/crds/monitoring.coreos.com_prometheusrules.yaml"),
    ]);
    cp.namespace("openshift-windows-machine-config-operator");
    let app = work.path().join("app");
    std::fs::create_dir_all(app.join("overlay")).unwrap();
    let status = std::process::Command::new("cp").arg("-r").arg(out.join("cluster")).arg(app.join("base")).status();
    assert!(status.unwrap().success());
    std::fs::write(
        app.join("overlay/nodes.yaml"),
        format!(
            "nodes:\n- name: host-0\n  address: {host}\n  user: root\n  profile: posix\n  root: {}\n  reachOnly: true\n",
            host_root.display()
        ),
    )
    .unwrap();
    std::fs::write(
        app.join("overlay/kustomization.yaml"),
        r#"apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../base
configMapGenerator:
- name: test-inventory
  namespace: wmrender
  files:
  - nodes.yaml
  options:
    disableNameSuffixHash: true
patches:
- target: {kind: Namespace, name: wmrender}
  patch: |-
    - {op: add, path: /metadata/labels/pod-security.kubernetes.io~1enforce, value: restricted}
    - {op: add, path: /metadata/labels/pod-security.kubernetes.io~1enforce-version, value: latest}
- target: {kind: Deployment, name: wmrender-controller}
  patch: |-
    - {op: add, path: /spec/template/spec/volumes/-, value: {name: inventory, configMap: {name: test-inventory}}}
    - op: add
      path: /spec/template/spec/containers/0/volumeMounts/-
      value: {name: inventory, mountPath: /etc/wmrender/inventory, readOnly: true}
    - {op: add, path: /spec/template/spec/containers/0/args/-, value: --inventory}
    - {op: add, path: /spec/template/spec/containers/0/args/-, value: /etc/wmrender/inventory/nodes.yaml}
"#,
    )
    .unwrap();
    let o = std::process::Command::new(support::apiserver::assets().join("kubectl"))
        .arg("--kubeconfig")
        .arg(cp.path("admin.kubeconfig"))
        .arg("apply")
        .arg("-k")
        .arg(app.join("overlay"))
        .output()
        .expect("kubectl (tests/apiserver/build.sh builds it)");
    assert!(
        o.status.success(),
        "kubectl apply -k: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    ssh_key_secret(&cp, &sshd.path("client_ed25519"));
    let replicas = objects["deployment-wmrender-controller.yaml"]["spec"]["replicas"].as_u64().unwrap() as usize;

    let selector = "/api/v1/namespaces/wmrender/pods?labelSelector=app.kubernetes.io%2Fname%3Dwmrender-controller";
    let limit = std::time::Duration::from_secs(180);
    let deadline = std::time::Instant::now() + limit;
    let ready = |p: &Value| {
        p["status"]["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
    };
    let pods = loop {
        let pods = cp.admin().list(selector);
        if pods.len() == replicas && pods.iter().all(ready) {
            break pods;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the controller's pods not Ready within {limit:?}:\n{}\nkubelet:\n{}\n{}",
            serde_json::to_string_pretty(&pods.iter().map(|p| &p["status"]).collect::<Vec<_>>()).unwrap(),
            kubelet.log_tail(),
            pod_logs(&kubelet)
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    };
    let names: Vec<&str> = pods.iter().map(|p| p["metadata"]["name"].as_str().unwrap()).collect();
    for pod in &pods {
        assert_eq!(pod["spec"]["nodeName"], "worker-0");
        // The images by the names the Deployment gives, as the registry serves them.
        let controller = &pod["status"]["containerStatuses"][0];
        assert!(controller["imageID"].as_str().unwrap().ends_with(&wmrender_digest), "{controller}");
        let init = &pod["status"]["initContainerStatuses"][0];
        assert_eq!(init["state"]["terminated"]["exitCode"], 0, "{init}");
        assert!(init["imageID"].as_str().unwrap().ends_with(&payload_digest), "{init}");
    }

    // One replica leads, holding the Lease under its pod's name. A leader is ready only once its desired state
    // reads: every file of the projected bundle with the digest manifest.json gives it.
    let holder = wait_for("the Lease held", std::time::Duration::from_secs(60), || {
        let lease = cp.admin().get("/apis/coordination.k8s.io/v1/namespaces/wmrender/leases/wmrender-controller")?;
        lease["spec"]["holderIdentity"].as_str().map(str::to_string)
    });
    assert!(names.contains(&holder.as_str()), "{holder} is not one of {names:?}");

    // The leader configures the BYOH host over SSH; the host's kubelet (played: a Linux kubelet sets its Node's
    // `kubernetes.io/os` to linux at every status update, so none can stand in for the Windows one) joins with the
    // bootstrap token the controller delivered, its client CSR approved by the controller and signed by
    // kube-controller-manager; the controller labels and untaints its Node.
    let delivered = host_root.join("C/k/bootstrap-kubeconfig");
    let conf = host_root.join("C/k/kubelet.conf");
    wait_for("the host's bootstrap kubeconfig delivered", limit, || {
        (delivered.exists() && conf.exists()).then_some(())
    });
    let bootstrap: Value = serde_json::from_str(&std::fs::read_to_string(&delivered).unwrap()).unwrap();
    let config: Value = serde_json::from_str(&std::fs::read_to_string(&conf).unwrap()).unwrap();
    let token = bootstrap["users"][0]["user"]["token"].as_str().unwrap();
    let host_kubelet =
        support::played::Kubelet::bootstrap(&cp, token, "host-0", &work.path().join("host-kubelet"), limit)
            .unwrap_or_else(|e| panic!("host-0's TLS bootstrap: {e}\n{}", pod_logs(&kubelet)));
    let registration = support::played::Registration {
        addresses: vec![("InternalIP".into(), host.clone()), ("Hostname".into(), "host-0".into())],
        taints: config["registerWithTaints"].as_array().cloned().unwrap_or_default(),
        provider_id: None,
        boot_id: "host-0-boot-1".into(),
    };
    host_kubelet.register(&registration, limit).unwrap();
    let deadline = std::time::Instant::now() + limit;
    while !cp.admin().get("/api/v1/nodes/host-0").is_some_and(|n| support::controller_rig::configured(&n)) {
        assert!(
            std::time::Instant::now() < deadline,
            "host-0 not configured within {limit:?}: {:?}\n{}",
            cp.admin().get("/api/v1/nodes/host-0").map(|n| (n["metadata"]["labels"].clone(), n["spec"].clone())),
            pod_logs(&kubelet)
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }

    // Deleting the leader's pod hands over: kubelet stops it (SIGTERM), it lets the Lease go and is gone well within
    // its grace period, and another replica leads; the ReplicaSet's new pod becomes ready beside it.
    let lease_path = "/apis/coordination.k8s.io/v1/namespaces/wmrender/leases/wmrender-controller";
    let term = cp.admin().get(lease_path).unwrap()["spec"]["leaseDurationSeconds"].as_i64().unwrap();
    let pod_path = format!("/api/v1/namespaces/wmrender/pods/{holder}");
    let deleted = k8s_openapi::jiff::Timestamp::now();
    cp.admin().delete(&pod_path).unwrap();
    // Released (no holder, a one-second term: what a stopping leader writes) is seen, unless the successor took it
    // at once; a Lease left to run out would be taken no sooner than a term after the leader's last renewal, which
    // was at most a third of a term before the deletion.
    let mut released = false;
    let (next, acquired) = wait_for("another replica leading", std::time::Duration::from_secs(60), || {
        let lease = cp.admin().get(lease_path)?;
        let h = lease["spec"]["holderIdentity"].as_str().unwrap_or("");
        released |= h.is_empty() && lease["spec"]["leaseDurationSeconds"] == 1;
        let acquired: k8s_openapi::jiff::Timestamp = lease["spec"]["acquireTime"].as_str()?.parse().ok()?;
        (!h.is_empty() && h != holder).then(|| (h.to_string(), acquired))
    });
    let taken_after = acquired.duration_since(deleted).as_secs_f64();
    assert!(
        released || taken_after < (term * 2 / 3) as f64,
        "the Lease was not let go: taken {taken_after:.1} s after the leader's pod was deleted (term {term} s)"
    );
    let template = &objects["deployment-wmrender-controller.yaml"]["spec"]["template"]["spec"];
    let grace = template["terminationGracePeriodSeconds"].as_u64().unwrap();
    wait_for("the leader's pod gone before its grace period ends", std::time::Duration::from_secs(grace - 5), || {
        cp.admin().get(&pod_path).is_none().then_some(())
    });
    let after = wait_for("the controller's pods ready again", limit, || {
        let pods = cp.admin().list(selector);
        (pods.len() == replicas && pods.iter().all(ready)).then_some(pods)
    });
    let now: Vec<&str> = after.iter().map(|p| p["metadata"]["name"].as_str().unwrap()).collect();
    assert!(now.contains(&next.as_str()) && !now.contains(&holder.as_str()), "{next} leads; pods {now:?}");

    // A new render reaches the running leader through kubelet's update of the projected volume (the render changes
    // the bundle ConfigMap alone: its Deployment is the same). A bundle ConfigMap whose manifest.json does not match
    // its files (the new manifest over the old files, as a bundle of several ConfigMaps looks while they are applied
    // one by one) is refused: the leader says so on its Lease and the host keeps what it has; the whole new bundle
    // reads again, and the host gets it.
    let changed = work.path().join("changed.yaml");
    std::fs::write(&changed, inputs.replace("maxSize: 50Mi", "maxSize: 60Mi")).unwrap();
    let (_tmp_b, out_b) = support::render_to_temp(&changed);
    let new = crate::objects(&out_b);
    let deployment = "deployment-wmrender-controller.yaml";
    assert_eq!(new[deployment], objects[deployment], "a new bundle, the same Deployment");
    let map = "configmap-wmrender-bundle-0.yaml";
    assert_ne!(new[map]["data"]["manifest.json"], objects[map]["data"]["manifest.json"], "the render changed");
    let services = "C/k/wmrender/services.json";
    let (had, wanted) = (
        std::fs::read(out.join("node").join(services)).unwrap(),
        std::fs::read(out_b.join("node").join(services)).unwrap(),
    );
    assert_ne!(had, wanted, "the render changed the services");
    let mut half = objects[map].clone();
    half["data"]["manifest.json"] = new[map]["data"]["manifest.json"].clone();
    let maps = "/api/v1/namespaces/wmrender/configmaps";
    // The Events on the Lease (the leader's word on its desired state), and their names, to tell new ones.
    let lease_events = || -> Vec<Value> {
        let all = cp.admin().list("/api/v1/namespaces/wmrender/events");
        all.into_iter().filter(|e| e["involvedObject"]["kind"] == "Lease").collect()
    };
    let event_names = |events: &[Value]| -> Vec<String> {
        events.iter().map(|e| e["metadata"]["name"].as_str().unwrap_or("").to_string()).collect()
    };
    let seen = event_names(&lease_events());
    cp.admin().apply(maps, "wmrender-bundle-0", &half);
    let refused = wait_for("the half-applied bundle refused", std::time::Duration::from_secs(90), || {
        lease_events().into_iter().find(|e| {
            e["reason"] == "DesiredStateUnreadable" && !seen.contains(&event_names(std::slice::from_ref(e))[0])
        })
    });
    let message = refused["message"].as_str().unwrap_or("");
    assert!(message.contains("differs from the rendered manifest.json"), "{refused}\n{}", pod_logs(&kubelet));
    // Refused, and nothing done: a few of the leader's looks at its inputs (every 2 s) later, the host has the old
    // file.
    std::thread::sleep(std::time::Duration::from_secs(5));
    assert_eq!(std::fs::read(host_root.join(services)).unwrap(), had, "the host was synced from a half-applied bundle");
    let seen = event_names(&lease_events());
    cp.admin().apply(maps, "wmrender-bundle-0", &new[map]);
    wait_for("the whole new bundle read", std::time::Duration::from_secs(90), || {
        lease_events()
            .into_iter()
            .find(|e| e["reason"] == "DesiredStateRead" && !seen.contains(&event_names(std::slice::from_ref(e))[0]))
    });
    // And the leader acts on it: the host gets the new render's file (the services' log rotation changed).
    wait_for("the new render on the host", limit, || {
        (std::fs::read(host_root.join(services)).ok()? == wanted).then_some(())
    });

    // All as its ServiceAccount, never refused.
    let user = "system:serviceaccount:wmrender:wmrender-controller";
    let requests = cp.requests_by(user);
    assert!(requests.iter().any(|r| r.uri.contains("/nodes") && r.code == 200), "it read the Nodes as itself");
    let refused: Vec<String> = requests.iter().filter(|r| r.code == 403).map(|r| r.to_string()).collect();
    assert!(refused.is_empty(), "{refused:?}\n{}", pod_logs(&kubelet));
}
