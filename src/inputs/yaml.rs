//! YAML with source locations, and decoding it into typed inputs while collecting every problem.
//!
//! The text is parsed into a tree of [`Node`]s that remember where they came from ([`build`], from the YAML
//! parser's events). Typed input structs are then read from that tree by hand ([`Decode`], [`Fields`]) rather than
//! by `#[derive(Deserialize)]`: serde stops at the first unknown key or wrong type, while the inputs contract asks
//! for every error in one run, each with its file, line, column and field path.

mod build;

use crate::diagnostics::{Diagnostic, Diagnostics, Loc};
use build::BuildError;
use serde::Serialize;
use std::sync::Arc;

/// One YAML node with the place it starts at.
#[derive(Clone, Debug)]
pub struct Node {
    pub value: Value,
    pub loc: Loc,
}

impl Node {
    /// The value under `key` when this is a mapping, for reading a document wmrender does not decode whole.
    pub fn child(&self, key: &str) -> Option<&Node> {
        match &self.value {
            Value::Map(entries) => entries.iter().find(|(k, _)| *k.name == *key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The source text of a plain (unquoted) number or boolean, so a string field given `2022` or `1` reads the
    /// digits the user wrote rather than a re-printed number.
    pub fn plain(&self) -> Option<&str> {
        match &self.value {
            Value::Bool(_, written) | Value::Int(_, written) | Value::Float(_, written) => Some(written),
            _ => None,
        }
    }
}

/// A YAML value. Booleans and numbers keep the text written (see [`Node::plain`]).
#[derive(Clone, Debug)]
pub enum Value {
    Null,
    Bool(bool, Box<str>),
    Int(i64, Box<str>),
    Float(f64, Box<str>),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(Key, Node)>),
    /// A node with a tag that gives it a meaning of its own (`!!binary`, `!!timestamp`, `!Ref`, `!!float 2`):
    /// kept for documents wmrender passes through, refused by every field wmrender reads.
    Tagged(Box<Tagged>),
}

#[derive(Clone, Debug)]
pub struct Tagged {
    /// As a user writes it: `!!timestamp`, `!Ref`.
    pub tag: Box<str>,
    /// The node without its tag: a scalar's text, or the list or mapping.
    pub value: Value,
}

#[derive(Clone, Debug)]
pub struct Key {
    /// Shared by every key of the same name in one parse: a long list of mappings repeats the same few keys.
    pub name: Arc<str>,
    pub loc: Loc,
}

impl Value {
    /// The value without its tag, for documents wmrender passes through and only looks into.
    pub fn untagged(&self) -> &Value {
        match self {
            Value::Tagged(t) => t.value.untagged(),
            v => v,
        }
    }

    fn type_name(&self) -> String {
        match self {
            Value::Null => "null".into(),
            Value::Bool(..) => "a boolean".into(),
            Value::Int(..) => "an integer".into(),
            Value::Float(..) => "a number".into(),
            Value::Str(_) => "a string".into(),
            Value::Seq(_) => "a list".into(),
            Value::Map(_) => "a mapping".into(),
            Value::Tagged(t) => format!("a value tagged `{}`", t.tag),
        }
    }
}

/// A whole number that YAML does not read as an integer, as written: too large for 64 bits
/// (`99999999999999999999`), or with a leading zero (`0400`, which YAML 1.1 read as octal). Both arrive as floats.
pub enum OddWholeNumber<'a> {
    TooLarge(&'a str),
    LeadingZero(&'a str),
}

impl<'a> OddWholeNumber<'a> {
    pub fn of(value: &'a Value) -> Option<OddWholeNumber<'a>> {
        let Value::Float(_, written) = value else { return None };
        let digits = written.trim_start_matches(['+', '-']);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some(if digits.len() > 1 && digits.starts_with('0') {
            OddWholeNumber::LeadingZero(written)
        } else {
            OddWholeNumber::TooLarge(written)
        })
    }

    /// What is wrong, given what "too large" means for the field.
    pub fn problem(&self, too_large: &str) -> String {
        match self {
            OddWholeNumber::TooLarge(w) => format!("{w} {too_large}"),
            OddWholeNumber::LeadingZero(w) => {
                let digits = w.trim_start_matches(['+', '-']).trim_start_matches('0');
                let sign = if w.starts_with('-') { "-" } else { "" };
                let digits = if digits.is_empty() { "0" } else { digits };
                format!("`{w}` starts with a 0, which YAML 1.1 reads as octal; write `{sign}{digits}`")
            }
        }
    }
}

pub use crate::diagnostics::line_starts;

/// Why a file could not be read as text.
#[derive(Debug)]
pub enum NotRead {
    Io(std::io::Error),
    /// Not UTF-8: where the first byte that is not part of a UTF-8 character is, and that byte.
    NotUtf8 {
        at: Loc,
        byte: u8,
    },
}

impl NotRead {
    /// The diagnostic, for a file described as `what` ("the inventory", "`mirrors/idms.yaml`"): a file that cannot
    /// be opened is named as a whole (`at` a file-level place, or the field that names it); one that is not text
    /// at the line and column of its first bad byte.
    pub fn diagnostic(&self, what: &str, at: &Loc, field: &str) -> Diagnostic {
        match self {
            NotRead::Io(e) => {
                Diagnostic::error(at, field, format!("cannot read {what}: {}", crate::error::io_reason(e)))
            }
            NotRead::NotUtf8 { at, byte } => not_utf8(at, what, *byte),
        }
    }
}

/// `what` is not UTF-8 text: the diagnostic at the first byte that is not.
pub fn not_utf8(at: &Loc, what: &str, byte: u8) -> Diagnostic {
    Diagnostic::error(
        at,
        "",
        format!("{what} is not UTF-8 text: the byte 0x{byte:02x} here is not part of a UTF-8 character"),
    )
    .expected("UTF-8 text (YAML and JSON files are)")
    .hint("save the file as UTF-8; a file from Windows may be UTF-16, which `iconv -f UTF-16 -t UTF-8` converts")
}

/// `bytes` as text, or where the first byte that is not UTF-8 is (line and column, as the text before it counts
/// them). The file's text, made readable, is registered with `diags` either way, so the message shows the line.
pub fn utf8_text(file: &Arc<str>, bytes: Vec<u8>, diags: &mut Diagnostics) -> Result<Arc<str>, NotRead> {
    match String::from_utf8(bytes) {
        Ok(text) => {
            let text: Arc<str> = Arc::from(text);
            diags.add_source(file, &text);
            Ok(text)
        }
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let bytes = e.into_bytes();
            let before = std::str::from_utf8(&bytes[..valid]).unwrap_or_default();
            let starts = line_starts(before);
            let line = starts.len() as u32;
            let column = before[starts[starts.len() - 1]..].chars().count() as u32 + 1;
            diags.add_source(file, &Arc::from(String::from_utf8_lossy(&bytes).as_ref()));
            Err(NotRead::NotUtf8 { at: Loc { file: file.clone(), line, column }, byte: bytes[valid] })
        }
    }
}

/// Reads a UTF-8 file and registers its text with `diags`, so diagnostics pointing into it show the offending
/// line. The caller words the error ([`NotRead::diagnostic`]): it knows what the file is for.
pub fn read_source(path: &std::path::Path, shown: &Arc<str>, diags: &mut Diagnostics) -> Result<Arc<str>, NotRead> {
    utf8_text(shown, std::fs::read(path).map_err(NotRead::Io)?, diags)
}

/// Parses one YAML document. A syntax error comes back as a diagnostic pointing at the offending place.
pub fn parse(file: &Arc<str>, text: &Arc<str>) -> Result<Node, Diagnostic> {
    parse_one(file, text).map_err(|e| yaml_error(file, text, &e))
}

/// [`parse`] with the builder's error, for reading what precedes a syntax error without wording another one.
fn parse_one(file: &Arc<str>, text: &str) -> Result<Node, BuildError> {
    let docs = build::documents(file, text, true)?;
    Ok(docs
        .into_iter()
        .next()
        .unwrap_or(Node { value: Value::Null, loc: Loc { file: file.clone(), line: 1, column: 1 } }))
}

/// Parses every document of a multi-document stream (`---` separated), as `oc get -o yaml` and kustomize write.
pub fn parse_all(file: &Arc<str>, text: &Arc<str>) -> Result<Vec<Node>, Diagnostic> {
    build::documents(file, text, false).map_err(|e| yaml_error(file, text, &e))
}

/// The builder's error in wmrender's words, at its place, with the field being written there.
fn yaml_error(file: &Arc<str>, text: &str, e: &BuildError) -> Diagnostic {
    let loc = e.loc().clone();
    let field = match e {
        // The line belongs to another document, not to a field of this one.
        BuildError::MultipleDocuments { .. } => "(document)".to_string(),
        _ => field_at(file, text, loc.line),
    };
    let (message, expected, hint): (String, &str, Option<&str>) = match e {
        BuildError::TooLarge { .. } => (
            "the YAML expands to too much data to read safely (aliases repeating anchors, or nesting too deep)".into(),
            "an inputs file without alias chains that multiply its size, nested at most 64 levels",
            Some("write the values out instead of repeating large anchors through aliases"),
        ),
        BuildError::RecursiveAlias { .. } => (
            "an alias refers to the anchor it is inside of, which would make an endless value".into(),
            "aliases (*name) only to anchors (&name) that are complete before the alias",
            None,
        ),
        BuildError::MultipleDocuments { .. } => (
            "more than one YAML document (`---`) in a file that holds one".into(),
            "a single document",
            Some("remove the extra `---` and what follows it, or move it to its own file"),
        ),
        BuildError::UnknownAnchor { .. } => (
            "an alias (*name) refers to an anchor (&name) that is not defined before it".into(),
            "every *name after its &name",
            None,
        ),
        BuildError::Syntax { message, .. } => {
            // The parser's own syntax messages ("did not find expected ':'") are YAML's words; anything that
            // speaks of the library's types instead is replaced.
            let first = message.lines().next().unwrap_or("").trim_start_matches("error: ");
            let first = if speaks_library(first) || first.is_empty() {
                "this is not YAML that wmrender can read"
            } else {
                first
            };
            (format!("invalid YAML: {first}"), "a well-formed YAML document", None)
        }
    };
    let d = Diagnostic::error(&loc, &field, message).expected(expected);
    match hint {
        Some(h) => d.hint(h),
        None => d,
    }
}

/// Words that belong to the YAML library or to Rust, not to a user's YAML.
fn speaks_library(message: &str) -> bool {
    const VOCABULARY: &[&str] = &[
        "Option<",
        "from_str",
        "Policy",
        "budget",
        "Budget",
        "serde",
        "String",
        "Vec<",
        "u64",
        "i64",
        "f64",
        "usize",
        "Options",
        "weak",
        "deserializ",
        "visitor",
        "struct",
        "enum",
        "variant",
    ];
    VOCABULARY.iter().any(|w| message.contains(w))
}

/// The field path being written at `line`, for errors found before the tree exists: the last key above it that
/// is not indented deeper than the line, read from the text before the line (which usually still parses).
fn field_at(file: &Arc<str>, text: &str, line: u32) -> String {
    let written = text.lines().nth(line.saturating_sub(1) as usize).unwrap_or("");
    let indent = written.len() - written.trim_start().len();
    // A line that starts a key (`  network:`) is that key's field, below the last key left of it.
    let key =
        written.trim().split_once(':').map(|(k, _)| k.trim()).filter(|k| {
            !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        });
    if let Some(key) = key {
        let parent = field_before(file, text, line, indent as u32);
        return match parent.as_deref() {
            None | Some("") => key.to_string(),
            Some(p) => format!("{p}.{key}"),
        };
    }
    field_before(file, text, line, indent as u32 + 1).filter(|f| !f.is_empty()).unwrap_or_else(|| "(document)".into())
}

/// The path of the last key before `line` that starts at or left of `column`, read from the text above `line`.
fn field_before(file: &Arc<str>, text: &str, line: u32, column: u32) -> Option<String> {
    let mut end: usize = text.lines().take(line.saturating_sub(1) as usize).map(|l| l.len() + 1).sum();
    for _ in 0..4 {
        let prefix = text.get(..end.min(text.len())).unwrap_or("");
        if let Ok(node) = parse_one(file, prefix) {
            let mut best = None;
            last_key_at_most(&node, "", column, &mut best);
            return best.or(Some(String::new()));
        }
        // Drop one more line and try again.
        end = prefix.trim_end_matches('\n').rfind('\n').map_or(0, |i| i + 1);
    }
    None
}

fn last_key_at_most(node: &Node, path: &str, column: u32, best: &mut Option<String>) {
    match &node.value {
        Value::Map(entries) => {
            for (k, v) in entries {
                let p = if path.is_empty() { k.name.to_string() } else { format!("{path}.{}", k.name) };
                if k.loc.column <= column {
                    *best = Some(p.clone());
                }
                last_key_at_most(v, &p, column, best);
            }
        }
        Value::Seq(items) => {
            for (i, item) in items.iter().enumerate() {
                let p = format!("{path}[{i}]");
                // A block item starts two columns right of its `- `.
                if item.loc.column <= column + 2 {
                    *best = Some(p.clone());
                }
                last_key_at_most(item, &p, column, best);
            }
        }
        _ => {}
    }
}

/// A value from the inputs together with where it was written and its field path, so that validation, which
/// runs after decoding, can still point at the exact place.
#[derive(Clone, Debug)]
pub struct Located<T> {
    pub value: T,
    pub loc: Loc,
    pub field: Box<str>,
}

impl<T> Located<T> {
    pub fn error(&self, message: impl Into<String>) -> Diagnostic {
        Diagnostic::error(&self.loc, &self.field, message)
    }
    pub fn warning(&self, message: impl Into<String>) -> Diagnostic {
        Diagnostic::warning(&self.loc, &self.field, message)
    }
}

impl<T> std::ops::Deref for Located<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

/// Located values serialise as the bare value: the inputs digest must not change when only positions do.
impl<T: Serialize> Serialize for Located<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.value.serialize(s)
    }
}

/// A type that can be read from a [`Node`]. On a problem it records a diagnostic and returns `None`.
///
/// Decoding takes the node: strings move into the decoded value instead of being copied, and each part of the
/// tree is freed as soon as it is read, so a long list is never held twice.
pub trait Decode: Sized {
    fn decode(node: Node, field: &str, diags: &mut Diagnostics) -> Option<Self>;
}

fn wrong_type(node: &Node, field: &str, expected: &str) -> Diagnostic {
    let field = if field.is_empty() { "(document)" } else { field };
    let d = Diagnostic::error(&node.loc, field, format!("expected {expected}, found {}", node.value.type_name()))
        .expected(expected.to_string());
    match &node.value {
        Value::Tagged(t) => d.hint(tag_hint(&t.tag)),
        _ => d,
    }
}

/// What to do about a tag on a field wmrender reads.
pub fn tag_hint(tag: &str) -> String {
    format!(
        "wmrender reads plain YAML values; remove the tag `{tag}` (only !!str, !!int, !!bool, !!null, !!seq and \
         !!map are read, where they fit)"
    )
}

impl Decode for String {
    fn decode(node: Node, field: &str, diags: &mut Diagnostics) -> Option<String> {
        match node.value {
            Value::Str(s) => Some(s),
            // `windowsVersion: 2022`, Azure `zone: 1` or a network named `n` (a YAML 1.1 boolean) mean the text
            // the user typed.
            Value::Int(_, written) | Value::Float(_, written) | Value::Bool(_, written) => Some(written.into()),
            _ => {
                diags.push(wrong_type(&node, field, "a string"));
                None
            }
        }
    }
}

impl Decode for bool {
    fn decode(node: Node, field: &str, diags: &mut Diagnostics) -> Option<bool> {
        match &node.value {
            Value::Bool(b, _) => Some(*b),
            Value::Str(s) => {
                let lower = s.to_ascii_lowercase();
                let hint = match lower.as_str() {
                    "true" | "false" => format!("remove the quotes: `{lower}` without quotes is a boolean"),
                    "yes" | "y" | "on" => "YAML 1.2 booleans are `true` and `false`; write `true`".to_string(),
                    "no" | "n" | "off" => "YAML 1.2 booleans are `true` and `false`; write `false`".to_string(),
                    _ => "write `true` or `false`".to_string(),
                };
                diags.push(wrong_type(&node, field, "true or false").hint(hint));
                None
            }
            _ => {
                diags.push(wrong_type(&node, field, "true or false"));
                None
            }
        }
    }
}

macro_rules! decode_int {
    ($($t:ty),*) => {$(
        impl Decode for $t {
            fn decode(node: Node, field: &str, diags: &mut Diagnostics) -> Option<$t> {
                let expected = format!("a whole number from {} to {}", <$t>::MIN, <$t>::MAX);
                let expected = expected.as_str();
                match node.value {
                    Value::Int(i, _) => match <$t>::try_from(i) {
                        Ok(v) => Some(v),
                        Err(_) => {
                            diags.push(Diagnostic::error(&node.loc, field, format!("{i} is out of range")).expected(expected));
                            None
                        }
                    },
                    // A whole number beyond 64 bits is read as a float; say it is out of range, not a fraction.
                    ref v if OddWholeNumber::of(v).is_some() => {
                        let problem = OddWholeNumber::of(v).map(|o| o.problem("is out of range")).unwrap_or_default();
                        diags.push(Diagnostic::error(&node.loc, field, problem).expected(expected));
                        None
                    }
                    _ => {
                        diags.push(wrong_type(&node, field, expected));
                        None
                    }
                }
            }
        }
    )*};
}
decode_int!(u16, u32, i32, i64);

impl<T: Decode> Decode for Vec<T> {
    fn decode(node: Node, field: &str, diags: &mut Diagnostics) -> Option<Vec<T>> {
        let Value::Seq(items) = node.value else {
            diags.push(wrong_type(&node, field, "a list"));
            return None;
        };
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        for (i, item) in items.into_iter().enumerate() {
            match T::decode(item, &item_path(field, i), diags) {
                Some(v) => out.push(v),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }
}

/// `field[i]`: the path of a list's item. Asked for every item of every list, so the number is written digit by
/// digit: the formatting machinery of `format!` costs several times as much as the rest.
pub fn item_path(field: &str, i: usize) -> String {
    let mut digits = [0u8; 20];
    let (mut n, mut start) = (i, digits.len());
    loop {
        start -= 1;
        digits[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let mut path = String::with_capacity(field.len() + 2 + digits.len() - start);
    path.push_str(field);
    path.push('[');
    path.extend(digits[start..].iter().map(|&d| char::from(d)));
    path.push(']');
    path
}

/// For a field that is rarely written, boxed so that a long list of its mappings does not hold room for it.
impl<T: Decode> Decode for Box<T> {
    fn decode(node: Node, field: &str, diags: &mut Diagnostics) -> Option<Box<T>> {
        T::decode(node, field, diags).map(Box::new)
    }
}

impl<T: Decode> Decode for Located<T> {
    fn decode(node: Node, field: &str, diags: &mut Diagnostics) -> Option<Located<T>> {
        let loc = node.loc.clone();
        let value = T::decode(node, field, diags)?;
        Some(Located { value, loc, field: field.into() })
    }
}

/// Reads the fields of one mapping, taking each value as it is read. Every key asked for is remembered;
/// [`Fields::finish`] reports the keys nobody asked for as unknown, with the nearest known name as a hint.
pub struct Fields<'f> {
    loc: Loc,
    /// The mapping's field path, borrowed from the caller (a mapping is read for every item of a long list).
    field: &'f str,
    entries: Vec<(Key, Node)>,
    known: Vec<&'static str>,
}

impl<'f> Fields<'f> {
    /// `None` (with a diagnostic) when the node is not a mapping. `null` reads as an empty mapping.
    pub fn new(node: Node, field: &'f str, diags: &mut Diagnostics) -> Option<Fields<'f>> {
        let entries = match node.value {
            Value::Map(entries) => entries,
            Value::Null => Vec::new(),
            _ => {
                diags.push(wrong_type(&node, field, "a mapping"));
                return None;
            }
        };
        // Room for the keys a schema mapping asks for, so that asking does not grow the list key by key.
        let fields = Fields { loc: node.loc, field, entries, known: Vec::with_capacity(16) };
        for (k, first) in fields.repeated_keys() {
            diags.push(
                Diagnostic::error(
                    &k.loc,
                    &fields.path(&k.name),
                    format!("`{}` is given twice in this mapping (first at line {})", k.name, first.line),
                )
                .expected("each key once"),
            );
        }
        Some(fields)
    }

    /// Each key written again in this mapping (YAML forbids it; which value would count is anyone's guess), with
    /// where it was first. A schema mapping has a handful of keys, compared with those before them; a mapping from
    /// an untrusted file may hold thousands, so beyond a few each key's first place is looked up by name instead.
    fn repeated_keys(&self) -> Vec<(&Key, &Loc)> {
        const FEW: usize = 16;
        let keys = self.entries.iter().map(|(k, _)| k);
        if self.entries.len() <= FEW {
            return keys
                .enumerate()
                .filter_map(|(i, k)| {
                    let first = self.entries[..i].iter().find(|(before, _)| before.name == k.name)?;
                    Some((k, &first.0.loc))
                })
                .collect();
        }
        let mut first_at: std::collections::HashMap<&str, &Loc> = std::collections::HashMap::new();
        keys.filter_map(|k| match first_at.entry(&k.name) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(&k.loc);
                None
            }
            std::collections::hash_map::Entry::Occupied(o) => Some((k, *o.get())),
        })
        .collect()
    }

    /// The node under `key` even when it is written as `null` (`aws:` with nothing after it). A key is read once:
    /// its value is taken, and reading it again gives `null`.
    pub fn node_or_null(&mut self, key: &'static str) -> Option<Node> {
        self.known.push(key);
        let (_, node) = self.entries.iter_mut().find(|(k, _)| *k.name == *key)?;
        let loc = node.loc.clone();
        Some(std::mem::replace(node, Node { value: Value::Null, loc }))
    }

    pub fn path(&self, key: &str) -> String {
        if self.field.is_empty() {
            return key.to_string();
        }
        // Asked for every field read, so built directly rather than through the formatting machinery.
        let mut path = String::with_capacity(self.field.len() + 1 + key.len());
        path.push_str(self.field);
        path.push('.');
        path.push_str(key);
        path
    }

    /// The node under `key`, unless absent or `null`.
    pub fn node(&mut self, key: &'static str) -> Option<Node> {
        self.node_or_null(key).filter(|v| !matches!(v.value, Value::Null))
    }

    /// Whether `key` is written at all (even as `null` or an empty list).
    pub fn has(&self, key: &str) -> bool {
        self.entries.iter().any(|(k, _)| *k.name == *key)
    }

    pub fn opt<T: Decode>(&mut self, key: &'static str, diags: &mut Diagnostics) -> Option<T> {
        let node = self.node(key)?;
        T::decode(node, &self.path(key), diags)
    }

    pub fn req<T: Decode>(&mut self, key: &'static str, expected: &str, diags: &mut Diagnostics) -> Option<T> {
        match self.node(key) {
            Some(node) => T::decode(node, &self.path(key), diags),
            None => {
                diags.push(
                    Diagnostic::error(&self.loc, &self.path(key), format!("missing required field `{key}`"))
                        .expected(expected.to_string()),
                );
                None
            }
        }
    }

    pub fn loc(&self) -> &Loc {
        &self.loc
    }

    /// Where this mapping is, for rules about the mapping as a whole ("no image for this MachineSet").
    pub fn at(&self) -> Located<()> {
        Located { value: (), loc: self.loc.clone(), field: self.field.into() }
    }

    /// Accepts every key not read so far: for objects copied from a cluster (`oc get -o yaml`), whose metadata and
    /// status carry fields wmrender has no use for.
    pub fn ignore_rest(self) {}

    pub fn finish(self, diags: &mut Diagnostics) {
        for (k, _) in &self.entries {
            if self.known.contains(&&*k.name) {
                continue;
            }
            let mut d = Diagnostic::error(&k.loc, &self.path(&k.name), format!("unknown field `{}`", k.name))
                .expected(format!("one of: {}", self.known.join(", ")));
            if let Some(near) = nearest(&k.name, &self.known) {
                d = d.hint(format!("did you mean `{near}`?"));
            }
            diags.push(d);
        }
    }
}

/// The known name closest to a typo, if it is close enough to be a plausible intent.
fn nearest<'a>(typo: &str, known: &[&'a str]) -> Option<&'a str> {
    let typo = typo.to_ascii_lowercase();
    known
        .iter()
        .map(|k| (strsim::levenshtein(&typo, &k.to_ascii_lowercase()), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 4))
        .min()
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> Arc<str> {
        Arc::from("t.yaml")
    }

    #[test]
    fn plain_numbers_read_as_the_text_written() {
        let node = parse(&file(), &Arc::from("v: 2022\nz: 1\n")).unwrap();
        let mut d = Diagnostics::default();
        let mut f = Fields::new(node, "", &mut d).unwrap();
        let v: Located<String> = f.opt("v", &mut d).unwrap();
        let z: String = f.opt("z", &mut d).unwrap();
        f.finish(&mut d);
        assert_eq!((v.value.as_str(), v.loc.line, v.loc.column, z.as_str()), ("2022", 1, 4, "1"));
        assert!(d.is_empty());
    }

    #[test]
    fn unknown_keys_are_all_reported_with_a_suggestion() {
        let node = parse(&file(), &Arc::from("replica: 1\nzonee: a\nname: x\n")).unwrap();
        let mut d = Diagnostics::default();
        let mut f = Fields::new(node, "spec.machineSets[0]", &mut d).unwrap();
        let _: Option<u32> = f.opt("replicas", &mut d);
        let _: Option<String> = f.opt("zone", &mut d);
        let _: Option<String> = f.opt("name", &mut d);
        f.finish(&mut d);
        let all = d.sorted();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].field, "spec.machineSets[0].replica");
        assert_eq!(all[0].hint.as_deref(), Some("did you mean `replicas`?"));
        assert_eq!((all[1].loc.line, all[1].loc.column), (2, 1));
    }

    #[test]
    fn wrong_types_name_what_was_expected() {
        let node = parse(&file(), &Arc::from("replicas: two\n")).unwrap();
        let mut d = Diagnostics::default();
        let mut f = Fields::new(node, "x", &mut d).unwrap();
        assert_eq!(f.opt::<u32>("replicas", &mut d), None);
        assert!(d.sorted()[0].message.contains("found a string"));
    }

    #[test]
    fn keys_are_names_shared_within_a_parse() {
        let node = parse(&file(), &Arc::from("- {name: a, 1: x, ~: y}\n- {name: b}\n")).unwrap();
        let Value::Seq(items) = &node.value else { panic!("a list") };
        let keys: Vec<Vec<&Key>> = items
            .iter()
            .map(|i| match &i.value {
                Value::Map(entries) => entries.iter().map(|(k, _)| k).collect(),
                _ => panic!("a mapping"),
            })
            .collect();
        let names: Vec<&str> = keys[0].iter().map(|k| &*k.name).collect();
        // A key that is not a string is named by the text written, `~` included.
        assert_eq!(names, ["name", "1", "~"]);
        assert!(Arc::ptr_eq(&keys[0][0].name, &keys[1][0].name));
        assert_eq!((keys[1][0].loc.line, keys[1][0].loc.column), (2, 4));
    }

    #[test]
    fn a_list_decodes_item_by_item_and_keeps_each_place() {
        let node = parse(&file(), &Arc::from("v: [a, 2022, true]\n")).unwrap();
        let mut d = Diagnostics::default();
        let mut f = Fields::new(node, "", &mut d).unwrap();
        let v: Vec<Located<String>> = f.req("v", "a list", &mut d).unwrap();
        f.finish(&mut d);
        let read: Vec<(&str, u32, &str)> = v.iter().map(|l| (l.value.as_str(), l.loc.column, &*l.field)).collect();
        assert_eq!(read, [("a", 5, "v[0]"), ("2022", 8, "v[1]"), ("true", 14, "v[2]")]);
        assert!(d.is_empty());
    }

    #[test]
    fn item_paths_are_the_index_in_brackets() {
        for i in [0, 7, 10, 99, 12345, usize::MAX] {
            assert_eq!(item_path("spec.byoh", i), format!("spec.byoh[{i}]"));
        }
    }

    #[test]
    fn syntax_errors_point_at_the_place() {
        let e = parse(&file(), &Arc::from("a: [1\nb: 2\n")).unwrap_err();
        assert_eq!(e.loc.line, 2);
        assert!(e.message.starts_with("invalid YAML"));
    }
}
