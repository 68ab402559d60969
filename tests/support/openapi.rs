//! A strict validator for objects against the openshift/api OpenAPI v2 definitions in ../shared/schemas.
//!
//! Strict like `kubeconform -strict`: a field the definition does not list is an error (the Machine API webhook
//! would drop it and Argo CD would show a permanent diff), as are wrong types, values outside an enum, and
//! missing required fields. Objects without listed properties (RawExtension, the providerSpec holder) accept
//! anything; providerSpecs are validated against their own kind separately.

use serde_json::Value;
use std::path::PathBuf;

pub struct Definitions {
    defs: serde_json::Map<String, Value>,
}

pub fn shared_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared")
}

impl Definitions {
    pub fn load() -> Definitions {
        let path = shared_dir().join("schemas/openshift-api-definitions.json");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let doc: Value = serde_json::from_str(&text).expect("definitions are JSON");
        let defs = doc["definitions"].as_object().expect("a definitions object").clone();
        Definitions { defs }
    }

    /// Every problem of `value` against definition `name`, as `path: message` lines.
    pub fn validate(&self, name: &str, value: &Value) -> Vec<String> {
        let mut errors = Vec::new();
        let schema = self.defs.get(name).unwrap_or_else(|| panic!("no definition {name}"));
        self.check(schema, value, "", &mut errors);
        errors
    }

    fn resolve<'a>(&'a self, schema: &'a Value) -> &'a Value {
        match schema.get("$ref").and_then(Value::as_str) {
            Some(r) => {
                let name = r.trim_start_matches("#/definitions/");
                self.defs.get(name).unwrap_or_else(|| panic!("dangling $ref {r}"))
            }
            None => schema,
        }
    }

    fn check(&self, schema: &Value, value: &Value, path: &str, errors: &mut Vec<String>) {
        let schema = self.resolve(schema);
        if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
            && !allowed.contains(value)
        {
            errors.push(format!("{path}: {value} is not one of {allowed:?}"));
        }
        let ty = schema.get("type").and_then(Value::as_str).unwrap_or(if schema.get("properties").is_some() {
            "object"
        } else {
            ""
        });
        match (ty, value) {
            ("object", Value::Object(map)) => self.check_object(schema, map, path, errors),
            ("array", Value::Array(items)) => {
                if let Some(item_schema) = schema.get("items") {
                    for (i, item) in items.iter().enumerate() {
                        self.check(item_schema, item, &format!("{path}[{i}]"), errors);
                    }
                }
            }
            ("string", Value::String(_)) | ("boolean", Value::Bool(_)) | ("number", Value::Number(_)) => {}
            ("integer", Value::Number(n)) => match (n.as_i64(), schema.get("format").and_then(Value::as_str)) {
                (None, _) => errors.push(format!("{path}: {n} is not an integer")),
                (Some(i), Some("int32")) if i32::try_from(i).is_err() => {
                    errors.push(format!("{path}: {i} is not int32"))
                }
                _ => {}
            },
            ("", _) => {}
            (ty, v) => errors.push(format!("{path}: expected {ty}, found {v}")),
        }
    }

    fn check_object(&self, schema: &Value, map: &serde_json::Map<String, Value>, path: &str, errors: &mut Vec<String>) {
        let props = schema.get("properties").and_then(Value::as_object);
        let additional = schema.get("additionalProperties");
        if props.is_none() && additional.is_none() {
            return; // free-form (RawExtension and the like)
        }
        for req in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
            let req = req.as_str().unwrap_or_default();
            if !map.contains_key(req) {
                errors.push(format!("{path}: missing required field `{req}`"));
            }
        }
        for (key, v) in map {
            let sub = format!("{path}.{key}");
            match (props.and_then(|p| p.get(key)), additional) {
                (Some(s), _) => self.check(s, v, &sub, errors),
                (None, Some(Value::Bool(true))) => {}
                (None, Some(s)) if s.is_object() => self.check(s, v, &sub, errors),
                _ => errors.push(format!("{sub}: unknown field")),
            }
        }
    }
}

/// The definition a providerSpec `kind` is checked against.
pub fn provider_spec_definition(kind: &str) -> &'static str {
    match kind {
        "AWSMachineProviderConfig" => "com.github.openshift.api.machine.v1beta1.AWSMachineProviderConfig",
        "AzureMachineProviderSpec" => "com.github.openshift.api.machine.v1beta1.AzureMachineProviderSpec",
        "GCPMachineProviderSpec" => "com.github.openshift.api.machine.v1beta1.GCPMachineProviderSpec",
        "VSphereMachineProviderSpec" => "com.github.openshift.api.machine.v1beta1.VSphereMachineProviderSpec",
        "NutanixMachineProviderConfig" => "com.github.openshift.api.machine.v1.NutanixMachineProviderConfig",
        other => panic!("unknown providerSpec kind {other}"),
    }
}
