//! Mirror sets: the inline `spec.mirrors` entries and the ImageDigestMirrorSet / ImageTagMirrorSet objects of the
//! files it references (one document, several `---` documents, or a `kind: List`), in the order the registries
//! spec fixes: digest sets before tag sets; within a kind the inline entries first, then objects by
//! `metadata.name`; entries in spec order.

use super::schema::{ClusterInputs, MirrorEntry};
use super::yaml::{self, Decode, Fields, Located, Node, Value};
use crate::diagnostics::{Diagnostic, Diagnostics};
use serde::Serialize;
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum MirrorKind {
    /// ImageDigestMirrorSet: mirrors serve pulls by digest only.
    Digest,
    /// ImageTagMirrorSet: mirrors also resolve tags.
    Tag,
}

#[derive(Clone, Debug, Serialize)]
pub struct MirrorSet {
    // Fields in key order, as the inputs digest writes them (see `digest`).
    pub entries: Vec<MirrorEntry>,
    pub kind: MirrorKind,
    /// `metadata.name` of the object; empty for the inline entries of the inputs file.
    pub name: String,
}

const API_VERSION: &str = "config.openshift.io/v1";
const IDMS: &str = "ImageDigestMirrorSet";
const ITMS: &str = "ImageTagMirrorSet";

/// A `spec.mirrors.files` entry, resolved.
pub struct MirrorFile {
    pub written: Located<String>,
    pub path: std::path::PathBuf,
    /// The path shown in messages.
    pub shown: String,
}

/// The mirror sets of the referenced files, in the order of `files`; [`take_inline`] adds the inline ones and
/// puts them all in merge order.
pub fn load_files(files: &[MirrorFile], diags: &mut Diagnostics) -> Vec<MirrorSet> {
    files.iter().flat_map(|f| load_file(f, diags)).collect()
}

/// Moves the inline entries of `inputs` into `sets` and sorts them all into merge order.
pub fn take_inline(inputs: &mut ClusterInputs, sets: &mut Vec<MirrorSet>) {
    let m = &mut inputs.spec.mirrors;
    let inline = [
        MirrorSet {
            kind: MirrorKind::Digest,
            name: String::new(),
            entries: std::mem::take(&mut m.image_digest_mirrors),
        },
        MirrorSet { kind: MirrorKind::Tag, name: String::new(), entries: std::mem::take(&mut m.image_tag_mirrors) },
    ];
    sets.splice(0..0, inline);
    sets.sort_by(|a, b| merge_key(a.kind, &a.name).cmp(&merge_key(b.kind, &b.name)));
    sets.retain(|s| !s.entries.is_empty());
}

/// What [`take_inline`] makes of `inputs` and `file_sets`, borrowed: the mirror sets as the inputs digest counts
/// them, taken before the inline entries move.
pub fn merge_order<'a>(inputs: &'a ClusterInputs, file_sets: &'a [MirrorSet]) -> Vec<MirrorSetRef<'a>> {
    let m = &inputs.spec.mirrors;
    let inline = [(MirrorKind::Digest, &m.image_digest_mirrors), (MirrorKind::Tag, &m.image_tag_mirrors)]
        .map(|(kind, entries)| MirrorSetRef { kind, name: "", entries });
    let files = file_sets.iter().map(|s| MirrorSetRef { kind: s.kind, name: &s.name, entries: &s.entries });
    let mut sets: Vec<MirrorSetRef> = inline.into_iter().chain(files).collect();
    sets.sort_by(|a, b| merge_key(a.kind, a.name).cmp(&merge_key(b.kind, b.name)));
    sets.retain(|s| !s.entries.is_empty());
    sets
}

/// A [`MirrorSet`] by reference; serialises the same.
#[derive(Serialize)]
pub struct MirrorSetRef<'a> {
    entries: &'a [MirrorEntry],
    kind: MirrorKind,
    name: &'a str,
}

/// Digest sets before tag sets; within a kind the inline entries (no name) first, then objects by name. Sorts
/// are stable: the files' own order breaks ties.
fn merge_key(kind: MirrorKind, name: &str) -> (MirrorKind, bool, &str) {
    (kind, !name.is_empty(), name)
}

fn load_file(mf: &MirrorFile, diags: &mut Diagnostics) -> Vec<MirrorSet> {
    let (written, file) = (&mf.written, Arc::<str>::from(mf.shown.as_str()));
    let text = match yaml::read_source(&mf.path, &file, diags) {
        Ok(t) => t,
        Err(e) => {
            let what = format!("`{}`", written.value);
            diags.push(e.diagnostic(&what, &written.loc, &written.field).expected("a readable YAML file"));
            return Vec::new();
        }
    };
    let docs = match yaml::parse_all(&file, &text) {
        Ok(d) => d,
        Err(e) => {
            diags.push(e);
            return Vec::new();
        }
    };
    let mut sets = Vec::new();
    for (i, doc) in docs.into_iter().enumerate() {
        if matches!(doc.value, Value::Null) {
            continue; // an empty document, e.g. after a trailing `---`
        }
        object(doc, &format!("document {}", i + 1), "", diags, &mut sets);
    }
    sets
}

/// One object: an IDMS, an ITMS, or a `List` of them.
fn object(node: Node, what: &str, field: &str, diags: &mut Diagnostics, out: &mut Vec<MirrorSet>) {
    let at = node.loc.clone();
    let Some(mut f) = Fields::new(node, field, diags) else { return };
    let kind: Option<String> = f.opt("kind", diags);
    let api_version: Option<Located<String>> = f.opt("apiVersion", diags);
    let expected = "an ImageDigestMirrorSet or ImageTagMirrorSet (config.openshift.io/v1), or a List of them";
    match kind.as_deref() {
        Some("List") => {
            let items: Option<Node> = f.node("items");
            f.ignore_rest();
            if let Some(Node { value: Value::Seq(items), .. }) = items {
                for (i, item) in items.into_iter().enumerate() {
                    object(item, &format!("{what}, items[{i}]"), &f_items(field, i), diags, out);
                }
            }
        }
        Some(k @ (IDMS | ITMS)) => {
            if let Some(v) = &api_version
                && v.value != API_VERSION
            {
                diags.push(
                    v.error(format!("{what}: unsupported apiVersion `{}` for {k}", v.value)).expected(API_VERSION),
                );
            }
            let (kind, list_key) = if k == IDMS {
                (MirrorKind::Digest, "imageDigestMirrors")
            } else {
                (MirrorKind::Tag, "imageTagMirrors")
            };
            let metadata = f.path("metadata");
            let name = f.node("metadata").and_then(|m| {
                let mut mf = Fields::new(m, &metadata, diags)?;
                let name: Option<String> = mf.req("name", "the object's name", diags);
                mf.ignore_rest();
                name
            });
            let spec = f.req::<SpecOf>("spec", &format!("a spec with `{list_key}`"), diags);
            f.node("status");
            f.finish(diags);
            let entries = spec.map(|s| if kind == MirrorKind::Digest { s.digest } else { s.tag }).unwrap_or_default();
            out.push(MirrorSet { kind, name: name.unwrap_or_default(), entries });
        }
        other => {
            let found = other.map(|k| format!("a {k}")).unwrap_or_else(|| "an object without `kind`".into());
            diags.push(Diagnostic::error(&at, &f.path("kind"), format!("{what} is {found}")).expected(expected));
        }
    }
}

fn f_items(field: &str, i: usize) -> String {
    if field.is_empty() { format!("items[{i}]") } else { format!("{field}.items[{i}]") }
}

/// `spec` of either kind; the key that does not belong to the kind is reported as unknown.
struct SpecOf {
    digest: Vec<MirrorEntry>,
    tag: Vec<MirrorEntry>,
}

impl Decode for SpecOf {
    fn decode(node: Node, field: &str, diags: &mut Diagnostics) -> Option<Self> {
        let mut f = Fields::new(node, field, diags)?;
        let digest = f.opt("imageDigestMirrors", diags).unwrap_or_default();
        let tag = f.opt("imageTagMirrors", diags).unwrap_or_default();
        f.finish(diags);
        Some(SpecOf { digest, tag })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inputs::schema;

    /// The digest is taken from [`merge_order`] before [`take_inline`] moves the inline entries: both must give
    /// the same sets in the same order, ties between same-named objects included.
    #[test]
    fn the_borrowed_order_is_the_moved_order() {
        let text = "apiVersion: wmrender.dev/v1alpha1\nkind: ClusterInputs\nmetadata: {name: t}\nspec:\n  mirrors:\n    \
                    imageDigestMirrors: [{source: a.io/x, mirrors: [m.io/x]}]\n    \
                    imageTagMirrors: [{source: b.io/y, mirrors: [m.io/y]}]\n";
        let file: Arc<str> = Arc::from("t.yaml");
        let mut diags = Diagnostics::default();
        let node = yaml::parse(&file, &Arc::from(text)).unwrap();
        let mut inputs = schema::decode_document(node, &mut diags).unwrap();
        let entry = |inputs: &ClusterInputs| inputs.spec.mirrors.image_digest_mirrors[0].clone();
        let set = |kind, name: &str, source: &str| {
            let mut e = entry(&inputs);
            e.source.value = source.to_string();
            MirrorSet { kind, name: name.to_string(), entries: vec![e] }
        };
        let mut sets = vec![
            set(MirrorKind::Tag, "z", "1"),
            set(MirrorKind::Digest, "b", "2"),
            set(MirrorKind::Digest, "", "3"),
            set(MirrorKind::Digest, "b", "4"),
            set(MirrorKind::Tag, "a", "5"),
            MirrorSet { kind: MirrorKind::Tag, name: "empty".into(), entries: Vec::new() },
        ];
        let borrowed = serde_json::to_string(&merge_order(&inputs, &sets)).unwrap();
        take_inline(&mut inputs, &mut sets);
        assert_eq!(borrowed, serde_json::to_string(&sets).unwrap());
        let order: Vec<(&str, &str)> = sets.iter().map(|s| (s.name.as_str(), s.entries[0].source.as_str())).collect();
        assert_eq!(order, [("", "a.io/x"), ("", "3"), ("b", "2"), ("b", "4"), ("", "b.io/y"), ("a", "5"), ("z", "1")]);
        assert!(
            inputs.spec.mirrors.image_digest_mirrors.is_empty() && inputs.spec.mirrors.image_tag_mirrors.is_empty()
        );
    }
}
