//! Snapshots of the whole rendered tree for every example and fixture: a change to any output byte shows up as a
//! reviewable diff of the snapshot, the way a user would review the config change.

mod support;

#[test]
fn rendered_tree_of_every_example_and_fixture() {
    let inputs = support::valid_inputs();
    assert!(inputs.len() >= 10, "expected the 6 examples and the fixtures, found {}", inputs.len());
    for path in inputs {
        let (_tmp, out) = support::render_to_temp(&path);
        let mut text = String::new();
        for (file, bytes) in support::read_tree(&out) {
            text.push_str(&format!("=== {file}\n{}", String::from_utf8(bytes).expect("utf-8 output")));
        }
        let name = support::case_name(&path).replace('/', "__");
        insta::assert_snapshot!(name, text);
    }
}

#[test]
fn stdout_stream_is_the_cluster_objects_in_apply_order_and_nothing_else() {
    for path in support::valid_inputs() {
        let o = support::wmrender(&["render", "-f", path.to_str().unwrap(), "--stdout"]);
        assert_eq!(support::code(&o), 0, "{}", support::stderr(&o));
        let stream = String::from_utf8(o.stdout).expect("utf-8");
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&stream).expect("a YAML stream");
        assert!(!docs.is_empty(), "{}: empty stream", path.display());
        let (_tmp, out) = support::render_to_temp(&path);
        let files = support::read_tree(&out);
        let objects = files.iter().filter(|(p, _)| p.starts_with("cluster/") && !p.ends_with("kustomization.yaml"));
        assert_eq!(docs.len(), objects.count(), "{}: the stream holds every object file", path.display());
        // Apply order: namespaces, node services' RBAC, the exporter's and the controller's Services and their
        // monitoring (without the operator), operator
        // objects, RuntimeClasses, the user-data Secret (without the operator), MachineSets, ConfigMaps, and the
        // controller's Deployment after the RBAC and the bundle ConfigMaps it reads.
        let rank = |kind: &str| {
            [
                &["Namespace"][..],
                &["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"],
                &["Service", "ServiceMonitor", "PrometheusRule"],
                &["OperatorGroup"],
                &["Subscription"],
                &["RuntimeClass"],
                &["Secret"],
                &["MachineSet"],
                &["ConfigMap"],
                &["Deployment"],
            ]
            .iter()
            .position(|ks| ks.contains(&kind))
            .expect("a known kind")
        };
        let ranks: Vec<usize> = docs.iter().map(|d| rank(d["kind"].as_str().expect("kind"))).collect();
        assert!(ranks.windows(2).all(|w| w[0] <= w[1]), "{}: out of order {ranks:?}", path.display());
        for d in &docs {
            assert_eq!(d["metadata"]["labels"]["app.kubernetes.io/managed-by"], "wmrender");
            assert!(d["metadata"]["labels"].get("app.kubernetes.io/version").is_none());
        }
    }
}
