//! `wmrender krm`: a KRM function (kustomize / kpt). A `config.kubernetes.io/v1` ResourceList comes in on stdin
//! with a ClusterInputs object as its `functionConfig`; the same ResourceList goes out on stdout with the rendered
//! cluster objects appended to `items` and every diagnostic as a `results` entry.

use crate::diagnostics::{Diagnostic, Diagnostics, Severity};
use crate::inputs::yaml::{self, Node, Value};
use crate::render::ClusterObject;
use serde::Serialize;
use std::path::Path;
use std::sync::Arc;

#[derive(Serialize)]
struct KrmResult {
    message: String,
    severity: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<FieldRef>,
    file: FileRef,
}

#[derive(Serialize)]
struct FieldRef {
    path: String,
}

#[derive(Serialize)]
struct FileRef {
    path: String,
}

/// Reads the ResourceList; returns the output ResourceList and whether an error occurred.
pub fn run(input: &str, base: &Path) -> (String, bool) {
    let file: Arc<str> = Arc::from("stdin");
    let mut diags = Diagnostics::default();
    let list = match yaml::parse(&file, input) {
        Ok(n) => n,
        Err(e) => {
            diags.push(e);
            return (output(&[], &[], &diags), true);
        }
    };
    let Value::Map(entries) = &list.value else {
        diags.push(Diagnostic::error(&list.loc, "", "expected a ResourceList object").expected("kind: ResourceList"));
        return (output(&[], &[], &diags), true);
    };
    let get = |k: &str| entries.iter().find(|(key, _)| key.name == k).map(|(_, v)| v);
    let kind_ok = get("kind").is_some_and(|k| matches!(&k.value, Value::Str(s) if s == "ResourceList"));
    let api_ok = get("apiVersion").is_some_and(
        |k| matches!(&k.value, Value::Str(s) if s == "config.kubernetes.io/v1" || s == "config.kubernetes.io/v1beta1"),
    );
    if !kind_ok || !api_ok {
        diags.push(
            Diagnostic::error(&list.loc, "kind", "not a ResourceList")
                .expected("apiVersion: config.kubernetes.io/v1, kind: ResourceList"),
        );
        return (output(&[], &[], &diags), true);
    }
    // Input items pass through, except the ClusterInputs itself: kustomize echoes the functionConfig among the
    // items (marked local-config); it is not a cluster object.
    let items: Vec<&Node> = match get("items").map(|n| &n.value) {
        Some(Value::Seq(items)) => items.iter().filter(|i| !is_cluster_inputs(i)).collect(),
        _ => vec![],
    };
    let Some(config) = get("functionConfig") else {
        diags.push(
            Diagnostic::error(&list.loc, "functionConfig", "no functionConfig")
                .expected("a ClusterInputs object (wmrender.dev/v1alpha1)"),
        );
        return (output(&items, &[], &diags), true);
    };
    let compiled =
        crate::inputs::from_node(config, base, diags).map_err(crate::error::Error::Invalid).and_then(|loaded| {
            let mut d = loaded.diagnostics.clone();
            d.extend(crate::validate::validate(&loaded));
            if d.has_errors() {
                return Err(crate::error::Error::Invalid(d));
            }
            let plan = crate::plan::plan(&loaded);
            Ok((crate::render::render(&plan), d))
        });
    match compiled {
        Ok((artifacts, warnings)) => (output(&items, &artifacts.objects, &warnings), false),
        Err(crate::error::Error::Invalid(d)) => (output(&items, &[], &d), true),
        Err(other) => {
            let mut d = Diagnostics::default();
            d.push(Diagnostic::error(&list.loc, "", other.to_string()));
            (output(&items, &[], &d), true)
        }
    }
}

fn is_cluster_inputs(n: &Node) -> bool {
    let Value::Map(entries) = &n.value else { return false };
    entries
        .iter()
        .any(|(k, v)| k.name == "kind" && matches!(&v.value, Value::Str(s) if s == crate::inputs::schema::KIND))
}

fn to_json(n: &Node) -> serde_json::Value {
    match &n.value {
        Value::Null => serde_json::Value::Null,
        Value::Bool(b) => (*b).into(),
        Value::Int(i) => (*i).into(),
        Value::Float(f) => serde_json::Number::from_f64(*f).map(serde_json::Value::Number).unwrap_or_default(),
        Value::Str(s) => s.clone().into(),
        Value::Seq(items) => items.iter().map(to_json).collect(),
        Value::Map(entries) => {
            entries.iter().map(|(k, v)| (k.name.clone(), to_json(v))).collect::<serde_json::Map<_, _>>().into()
        }
    }
}

/// A YAML block as one item of a block sequence.
fn as_list_item(yaml: &str) -> String {
    let mut out = String::new();
    for (i, line) in yaml.lines().enumerate() {
        out.push_str(if i == 0 { "- " } else { "  " });
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn output(items: &[&Node], objects: &[ClusterObject], diags: &Diagnostics) -> String {
    let mut out = String::from("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\n");
    if items.is_empty() && objects.is_empty() {
        out.push_str("items: []\n");
    } else {
        out.push_str("items:\n");
        for item in items {
            out.push_str(&as_list_item(&serde_saphyr::to_string(&to_json(item)).unwrap_or_default()));
        }
        for o in objects {
            out.push_str(&as_list_item(&o.yaml));
        }
    }
    let results: Vec<KrmResult> = diags
        .sorted()
        .into_iter()
        .map(|d: &Diagnostic| KrmResult {
            message: {
                let at = if d.loc.line > 0 {
                    format!("line {}, column {}: ", d.loc.line, d.loc.column)
                } else {
                    String::new()
                };
                match &d.expected {
                    Some(e) => format!("{at}{} (expected {e})", d.message),
                    None => format!("{at}{}", d.message),
                }
            },
            severity: if d.severity == Severity::Error { "error" } else { "warning" },
            field: (!d.field.is_empty()).then(|| FieldRef { path: d.field.clone() }),
            file: FileRef { path: d.loc.file.to_string() },
        })
        .collect();
    if !results.is_empty() {
        out.push_str("results:\n");
        for r in &results {
            out.push_str(&as_list_item(&serde_saphyr::to_string(r).unwrap_or_default()));
        }
    }
    out
}
