//! Same inputs, same bytes: rendering twice, into different directories, or from a file whose mapping keys are
//! written in another order, gives byte-identical trees (manifest.json included).

mod support;

use std::path::Path;
use wmrender::inputs::yaml::{self, Node, Value};

#[test]
fn two_renders_into_different_directories_are_identical() {
    for path in support::valid_inputs() {
        let (_a, first) = support::render_to_temp(&path);
        let (_b, second) = support::render_to_temp(&path);
        assert_eq!(support::read_tree(&first), support::read_tree(&second), "{}", path.display());
    }
}

#[test]
fn reordering_the_inputs_mapping_keys_changes_no_byte() {
    for path in support::valid_inputs() {
        let text: std::sync::Arc<str> = std::fs::read_to_string(&path).expect("readable").into();
        let node = yaml::parse(&"inputs".into(), &text).expect("valid YAML");
        let mut reversed = String::new();
        write_reversed(&node, &mut reversed);
        assert_ne!(reversed, *text);
        // Beside the original, so relative paths (mirror files) resolve the same way.
        let copy = path.with_file_name("wmrender.reordered.tmp.yaml");
        std::fs::write(&copy, &reversed).expect("writable");
        let (_a, original) = support::render_to_temp(&path);
        let (_b, reordered) = support::render_to_temp(&copy);
        let _ = std::fs::remove_file(&copy);
        assert_eq!(support::read_tree(&original), support::read_tree(&reordered), "{}", path.display());
    }
}

/// Writes the node as flow-style YAML (JSON syntax) with every mapping's keys in reverse order.
fn write_reversed(node: &Node, out: &mut String) {
    match &node.value {
        Value::Null => out.push_str("null"),
        Value::Bool(b, _) => out.push_str(&b.to_string()),
        Value::Int(_, written) | Value::Float(_, written) => out.push_str(written),
        Value::Str(s) => out.push_str(&serde_json::to_string(s).expect("string")),
        Value::Seq(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_reversed(item, out);
            }
            out.push(']');
        }
        Value::Map(entries) => {
            out.push('{');
            for (i, (k, v)) in entries.iter().rev().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&serde_json::to_string(&k.name).expect("key"));
                out.push_str(": ");
                write_reversed(v, out);
            }
            out.push('}');
        }
        Value::Tagged(t) => panic!("the shipped inputs hold no tags, found `{}`", t.tag),
    }
}

#[test]
fn the_inputs_digest_ignores_comments_and_order_but_not_values() {
    let path = support::root().join("examples/aws/wmrender.yaml");
    let digest = |p: &Path| wmrender::inputs::load(p).expect("valid").digest();
    let text = std::fs::read_to_string(&path).expect("readable");
    let dir = tempfile::tempdir().expect("tempdir");
    let commented = dir.path().join("a.yaml");
    std::fs::write(&commented, format!("# a new comment\n{text}")).expect("writable");
    let changed = dir.path().join("b.yaml");
    std::fs::write(&changed, text.replace("replicas: 2", "replicas: 3")).expect("writable");
    assert_eq!(digest(&path), digest(&commented));
    assert_ne!(digest(&path), digest(&changed));
}
