//! Every rendered MachineSet, and its providerSpec against its platform's definition, validated against the real
//! openshift/api schemas. The validator itself is tested to fail on bad objects, so a pass means something.

mod support;

use serde_json::Value;
use support::openapi::{Definitions, provider_spec_definition};

const MACHINESET: &str = "com.github.openshift.api.machine.v1beta1.MachineSet";

fn rendered_machinesets() -> Vec<(String, Value)> {
    let mut all = Vec::new();
    for inputs in support::valid_inputs() {
        let (_tmp, out) = support::render_to_temp(&inputs);
        for (path, bytes) in support::read_tree(&out) {
            if path.starts_with("cluster/machineset-") {
                let text = String::from_utf8(bytes).expect("utf-8");
                let value: Value = serde_saphyr::from_str(&text).expect("rendered YAML parses");
                all.push((format!("{}/{path}", support::case_name(&inputs)), value));
            }
        }
    }
    all
}

#[test]
fn every_machineset_and_provider_spec_matches_openshift_api() {
    let defs = Definitions::load();
    let sets = rendered_machinesets();
    let mut kinds = std::collections::BTreeSet::new();
    for (name, ms) in &sets {
        let errors = defs.validate(MACHINESET, ms);
        assert!(errors.is_empty(), "{name}: MachineSet does not match openshift/api:\n{}", errors.join("\n"));
        let spec = &ms["spec"]["template"]["spec"]["providerSpec"]["value"];
        let kind = spec["kind"].as_str().expect("providerSpec kind");
        kinds.insert(kind.to_string());
        let errors = defs.validate(provider_spec_definition(kind), spec);
        assert!(errors.is_empty(), "{name}: {kind} does not match openshift/api:\n{}", errors.join("\n"));
    }
    // Every platform's providerSpec was exercised.
    assert_eq!(kinds.len(), 5, "providerSpec kinds seen: {kinds:?}");
}

#[test]
fn the_validator_rejects_unknown_fields_wrong_types_and_missing_required_fields() {
    let defs = Definitions::load();
    let (name, ms) = rendered_machinesets().into_iter().find(|(n, _)| n.contains("examples/aws")).expect("aws example");
    let spec = ms["spec"]["template"]["spec"]["providerSpec"]["value"].clone();
    let aws = provider_spec_definition("AWSMachineProviderConfig");
    assert!(defs.validate(aws, &spec).is_empty(), "{name} should start valid");

    let mut unknown = spec.clone();
    unknown["userDataSecret"]["namespace"] = "openshift-machine-api".into(); // LocalObjectReference has no namespace
    assert!(defs.validate(aws, &unknown).iter().any(|e| e.contains("userDataSecret.namespace: unknown field")));

    let mut wrong_type = spec.clone();
    wrong_type["deviceIndex"] = "0".into();
    assert!(defs.validate(aws, &wrong_type).iter().any(|e| e.contains("deviceIndex: expected integer")));

    let mut missing = spec.clone();
    missing.as_object_mut().expect("object").remove("placement");
    assert!(defs.validate(aws, &missing).iter().any(|e| e.contains("missing required field `placement`")));

    let mut too_big = ms.clone();
    too_big["spec"]["replicas"] = (1u64 << 40).into(); // replicas is int32
    assert!(defs.validate(MACHINESET, &too_big).iter().any(|e| e.contains("spec.replicas")));

    let mut ms_unknown = ms;
    ms_unknown["spec"]["replicaz"] = 1.into();
    assert!(defs.validate(MACHINESET, &ms_unknown).iter().any(|e| e.contains("spec.replicaz: unknown field")));
}
