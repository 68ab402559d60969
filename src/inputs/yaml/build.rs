//! Building the located [`Node`] tree straight from the YAML parser's events (granit-parser, the parser under
//! serde-saphyr), so that wmrender decides what a tag, a comment or an alias means, not a deserializer made for
//! typed structs:
//!
//! - every tag is kept: a tag the YAML core schema gives a meaning to and that fits its node (`!!str`, `!!int 3`,
//!   `!!map`) is that plain value; any other (`!!binary`, `!!timestamp`, `!Ref`, `!!float 2`) wraps its node in
//!   [`Value::Tagged`], which no field of wmrender's accepts, so a tag on a field wmrender reads is refused by
//!   name, while objects wmrender only passes through (a KRM function's foreign items) are read whatever their tags;
//! - comments are skipped without being buffered, so any number of them may sit between a key and its value;
//! - plain scalars are resolved as YAML 1.2's core schema does (`yes` and `on` stay text), with the number forms
//!   serde-saphyr reads (`0x1F`, `1_000`); `.inf`, `.nan` and numbers too large for a float stay text;
//! - aliases are expanded, merge keys (`<<: *defaults`) merged, and both are bounded: a small file whose aliases
//!   multiply it ("billion laughs") is refused, however the multiplication is arranged.

use super::{Key, Node, Tagged, Value};
use crate::diagnostics::Loc;
use serde_saphyr::granit_parser::{self as granit, Event, Marker, ScalarStyle, ScanError, Span, Tag};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Collections may nest this deep.
pub const MAX_DEPTH: usize = 64;
/// The node and scalar-byte budgets never go below these (serde-saphyr's defaults); they grow with the text, since
/// every node of a file without aliases takes at least one byte of it.
const MIN_NODES: usize = 250_000;
const MIN_SCALAR_BYTES: usize = 64 * 1024 * 1024;

/// Why a text is not a tree wmrender can read.
#[derive(Debug)]
pub enum BuildError {
    /// The parser's own syntax error, in YAML's words.
    Syntax {
        at: Loc,
        message: String,
    },
    /// Aliases expand the text beyond the budget, or collections nest deeper than [`MAX_DEPTH`].
    TooLarge {
        at: Loc,
    },
    /// An alias inside the node its anchor names.
    RecursiveAlias {
        at: Loc,
    },
    UnknownAnchor {
        at: Loc,
    },
    /// A second document where one is expected; at its first node.
    MultipleDocuments {
        at: Loc,
    },
}

impl BuildError {
    pub fn loc(&self) -> &Loc {
        match self {
            BuildError::Syntax { at, .. }
            | BuildError::TooLarge { at }
            | BuildError::RecursiveAlias { at }
            | BuildError::UnknownAnchor { at }
            | BuildError::MultipleDocuments { at } => at,
        }
    }
}

/// The documents of `text`; with `single`, a second document is an error.
pub fn documents(file: &Arc<str>, text: &str, single: bool) -> Result<Vec<Node>, BuildError> {
    let mut options = granit::Options::default();
    // wmrender reads no comment's text; not emitting comments also means none is buffered while the parser looks
    // ahead, so no number of comment lines between a key and its value is "too many".
    options.emit_comments = false;
    options.block_nesting_limit = options.block_nesting_limit.max(MAX_DEPTH + 1);
    let mut parser = granit::Parser::new_from_str_with_options(text, options);
    let mut b = Builder {
        file: file.clone(),
        text,
        keys: HashSet::new(),
        anchors: HashMap::new(),
        open_anchors: HashSet::new(),
        stack: Vec::new(),
        nodes_left: MIN_NODES.max(text.len()),
        bytes_left: MIN_SCALAR_BYTES.max(text.len()),
        docs: Vec::new(),
        root: None,
    };
    let mut in_second_document = false;
    while let Some(event) = parser.next_event() {
        let (event, span) = event.map_err(|e| b.scan_error(&e))?;
        if in_second_document && is_node(&event) {
            return Err(BuildError::MultipleDocuments { at: b.loc(&span.start) });
        }
        match event {
            Event::DocumentStart(..) => {
                in_second_document = single && !b.docs.is_empty();
            }
            Event::DocumentEnd => {
                let root = b.root.take().unwrap_or_else(|| Node { value: Value::Null, loc: b.loc(&span.start) });
                b.docs.push(root);
            }
            Event::Scalar(value, style, anchor, tag) => {
                let range = span.start.byte_offset().zip(span.end.byte_offset());
                if anchor == 0 && tag.is_none() && b.awaits_key() {
                    // Most scalars are keys: named from their text, without building a node to read the name of.
                    b.key(&value, style, &span, range)?;
                } else {
                    let cost = (1, value.len());
                    let node = b.scalar(value, style, tag.as_deref(), &span);
                    b.finish_node(node, anchor, cost, range)?;
                }
            }
            Event::SequenceStart(_, anchor, tag) => b.open(Open::Seq(Vec::new()), anchor, tag.as_deref(), &span)?,
            Event::MappingStart(_, anchor, tag) => {
                b.open(Open::Map { entries: Vec::new(), key: None, merges: Vec::new() }, anchor, tag.as_deref(), &span)?
            }
            Event::SequenceEnd | Event::MappingEnd => b.close(&span)?,
            Event::Alias(id) => b.alias(id, &span)?,
            _ => {}
        }
    }
    Ok(b.docs)
}

/// Whether an event is (the start of) a node.
fn is_node(event: &Event) -> bool {
    matches!(event, Event::Scalar(..) | Event::SequenceStart(..) | Event::MappingStart(..) | Event::Alias(_))
}

enum Open {
    Seq(Vec<Node>),
    Map {
        entries: Vec<(Key, Node)>,
        /// A key read, waiting for its value.
        key: Option<Key>,
        /// The values of `<<` keys, merged when the mapping ends.
        merges: Vec<Node>,
    },
}

/// A collection being read.
struct Frame {
    open: Open,
    loc: Loc,
    start: Option<usize>,
    anchor: usize,
    tag: Option<Tag>,
    /// Nodes and scalar bytes below it, for what an alias to it would cost.
    cost: (usize, usize),
}

struct Builder<'t> {
    file: Arc<str>,
    text: &'t str,
    /// Key names, each held once: a long list of mappings repeats the same few keys.
    keys: HashSet<Arc<str>>,
    /// Complete anchored nodes by the parser's anchor id, with what repeating them costs.
    anchors: HashMap<usize, (Node, (usize, usize))>,
    /// Anchors of the collections still open: an alias to one of them would be endless.
    open_anchors: HashSet<usize>,
    stack: Vec<Frame>,
    nodes_left: usize,
    bytes_left: usize,
    docs: Vec<Node>,
    root: Option<Node>,
}

impl Builder<'_> {
    fn loc(&self, m: &Marker) -> Loc {
        Loc { file: self.file.clone(), line: m.line().max(1) as u32, column: m.col() as u32 + 1 }
    }

    fn scan_error(&self, e: &ScanError) -> BuildError {
        let at = self.loc(e.marker());
        match e.kind() {
            granit::ErrorKind::UnknownAnchor => BuildError::UnknownAnchor { at },
            _ => BuildError::Syntax { at, message: e.info() },
        }
    }

    /// The source text of a span, when the parser gave byte offsets for both ends.
    fn written(&self, span: &Span) -> Option<&str> {
        self.text.get(span.start.byte_offset()?..span.end.byte_offset()?)
    }

    /// Charges the budget for `cost` more nodes and scalar bytes.
    fn spend(&mut self, cost: (usize, usize), at: &Loc) -> Result<(), BuildError> {
        match (self.nodes_left.checked_sub(cost.0), self.bytes_left.checked_sub(cost.1)) {
            (Some(n), Some(b)) => {
                (self.nodes_left, self.bytes_left) = (n, b);
                Ok(())
            }
            _ => Err(BuildError::TooLarge { at: at.clone() }),
        }
    }

    fn scalar(&self, value: Cow<str>, style: ScalarStyle, tag: Option<&Tag>, span: &Span) -> Node {
        let loc = self.loc(&span.start);
        let written = || self.written(span).map(Box::from).unwrap_or_else(|| Box::from(&*value));
        let plain = style == ScalarStyle::Plain;
        let value = match tag.map(|t| (t, t.core_suffix())) {
            None if plain => match Plain::of(&value) {
                // Text, the common case, keeps the string the parser made when it made one.
                Plain::Text => Value::Str(value.into_owned()),
                resolved => resolved.value(&value, written),
            },
            None => Value::Str(value.into_owned()),
            // `!` asks for no resolution: text.
            Some((t, None)) if is_non_specific(t) => Value::Str(value.into_owned()),
            Some((_, Some("str"))) => Value::Str(value.into_owned()),
            Some((_, Some("null"))) if is_null_text(&value) => Value::Null,
            Some((_, Some("bool"))) if parse_bool(&value).is_some() => {
                Value::Bool(parse_bool(&value) == Some(true), written())
            }
            Some((_, Some("int"))) if parse_int(&value).is_some() => {
                int_value(parse_int(&value).unwrap_or(0), written())
            }
            Some((t, _)) => {
                let at = span.tag_start.as_ref().map_or(loc.clone(), |m| self.loc(m));
                return Node { value: tagged(t, Value::Str(value.into_owned())), loc: at };
            }
        };
        Node { value, loc }
    }

    fn open(&mut self, open: Open, anchor: usize, tag: Option<&Tag>, span: &Span) -> Result<(), BuildError> {
        let loc = self.loc(&span.start);
        if self.stack.len() >= MAX_DEPTH {
            return Err(BuildError::TooLarge { at: loc });
        }
        if anchor != 0 {
            self.open_anchors.insert(anchor);
        }
        let loc = span.tag_start.as_ref().filter(|_| tag.is_some()).map_or(loc, |m| self.loc(m));
        let start = span.start.byte_offset();
        self.stack.push(Frame { open, loc, start, anchor, tag: tag.cloned(), cost: (0, 0) });
        Ok(())
    }

    fn close(&mut self, span: &Span) -> Result<(), BuildError> {
        let Some(frame) = self.stack.pop() else { return Ok(()) };
        let value = match frame.open {
            Open::Seq(items) => {
                let mut items = items;
                items.shrink_to_fit();
                Value::Seq(items)
            }
            Open::Map { mut entries, merges, .. } => {
                merge(&mut entries, merges);
                entries.shrink_to_fit();
                Value::Map(entries)
            }
        };
        let (kind, value) = match &value {
            Value::Seq(_) => ("seq", value),
            _ => ("map", value),
        };
        let value = match &frame.tag {
            Some(t) if t.core_suffix() != Some(kind) => tagged(t, value),
            _ => value,
        };
        if frame.anchor != 0 {
            self.open_anchors.remove(&frame.anchor);
        }
        let node = Node { value, loc: frame.loc };
        let range = frame.start.zip(span.end.byte_offset());
        self.finish_collection(node, frame.anchor, (frame.cost.0 + 1, frame.cost.1), range)
    }

    fn alias(&mut self, id: usize, span: &Span) -> Result<(), BuildError> {
        let at = self.loc(&span.start);
        if self.open_anchors.contains(&id) {
            return Err(BuildError::RecursiveAlias { at });
        }
        let Some((node, cost)) = self.anchors.get(&id) else {
            return Err(BuildError::UnknownAnchor { at });
        };
        let (mut node, cost) = (node.clone(), *cost);
        self.spend(cost, &at)?;
        // The alias stands where it is written; what it repeats keeps the places of its definition.
        node.loc = at;
        self.place(node, cost, None)
    }

    fn finish_node(
        &mut self,
        node: Node,
        anchor: usize,
        cost: (usize, usize),
        range: Option<(usize, usize)>,
    ) -> Result<(), BuildError> {
        self.spend(cost, &node.loc)?;
        if anchor != 0 {
            self.anchors.insert(anchor, (node.clone(), cost));
        }
        self.place(node, cost, range)
    }

    fn finish_collection(
        &mut self,
        node: Node,
        anchor: usize,
        cost: (usize, usize),
        range: Option<(usize, usize)>,
    ) -> Result<(), BuildError> {
        self.spend((1, 0), &node.loc)?;
        if anchor != 0 {
            self.anchors.insert(anchor, (node.clone(), cost));
        }
        self.place(node, cost, range)
    }

    /// Whether the next node is a key of the innermost mapping.
    fn awaits_key(&self) -> bool {
        matches!(self.stack.last(), Some(Frame { open: Open::Map { key: None, .. }, .. }))
    }

    /// A scalar without anchor or tag as the key of the innermost mapping: named as [`key_text`] names the node
    /// [`Builder::scalar`] would build, and charged to the budget the same.
    fn key(
        &mut self,
        value: &str,
        style: ScalarStyle,
        span: &Span,
        range: Option<(usize, usize)>,
    ) -> Result<(), BuildError> {
        let loc = self.loc(&span.start);
        let cost = (1, value.len());
        self.spend(cost, &loc)?;
        let name = match style {
            ScalarStyle::Plain => match Plain::of(value) {
                Plain::Text => value,
                Plain::NonFinite(canonical) => canonical,
                _ => range
                    .and_then(|(s, e)| self.text.get(s..e))
                    .map(str::trim)
                    .filter(|w| !w.is_empty())
                    .unwrap_or("null"),
            },
            _ => value,
        };
        let name = self.shared_name(name);
        if let Some(frame) = self.stack.last_mut() {
            frame.cost = (frame.cost.0 + cost.0, frame.cost.1 + cost.1);
            if let Open::Map { key, .. } = &mut frame.open {
                *key = Some(Key { name, loc });
            }
        }
        Ok(())
    }

    /// The innermost mapping's key is `name`, at `loc`.
    fn set_key(&mut self, name: &str, loc: Loc) {
        let name = self.shared_name(name);
        if let Some(Frame { open: Open::Map { key, .. }, .. }) = self.stack.last_mut() {
            *key = Some(Key { name, loc });
        }
    }

    /// `name`, held once per parse.
    fn shared_name(&mut self, name: &str) -> Arc<str> {
        match self.keys.get(name) {
            Some(shared) => shared.clone(),
            None => {
                let shared: Arc<str> = Arc::from(name);
                self.keys.insert(shared.clone());
                shared
            }
        }
    }

    /// Puts a finished node where it belongs: the document's root, a list's next item, a mapping's key or value.
    /// `range`: where its text is, to name it should it be a key.
    fn place(&mut self, mut node: Node, cost: (usize, usize), range: Option<(usize, usize)>) -> Result<(), BuildError> {
        let written = range.and_then(|(s, e)| self.text.get(s..e));
        let Some(frame) = self.stack.last_mut() else {
            self.root = Some(node);
            return Ok(());
        };
        frame.cost = (frame.cost.0 + cost.0, frame.cost.1 + cost.1);
        match &mut frame.open {
            Open::Seq(items) => items.push(node),
            Open::Map { key: None, .. } => {
                let name = key_text(&node, written);
                self.set_key(&name, node.loc);
            }
            Open::Map { key: pending @ Some(_), entries, merges } => {
                let Some(key) = pending.take() else { return Ok(()) };
                // A mapping or list is reported at its key (`spec:`), not at its first entry.
                if matches!(node.value, Value::Map(_) | Value::Seq(_)) {
                    node.loc = key.loc.clone();
                }
                if &*key.name == "<<" && is_merge_source(&node) {
                    merges.push(node);
                } else {
                    entries.push((key, node));
                }
            }
        }
        Ok(())
    }
}

/// A key as a name: a string as it is; anything else (`~`, `1`, `[a, b]`, a tagged value) as the text written,
/// so that the field it stands for is reported as unknown in wmrender's words.
fn key_text(node: &Node, written: Option<&str>) -> String {
    let written = written.map(str::trim).filter(|w| !w.is_empty());
    match &node.value {
        Value::Str(s) => s.clone(),
        Value::Tagged(t) => format!("{} {}", t.tag, written.unwrap_or_default()),
        _ => written.unwrap_or("null").to_string(),
    }
}

/// `<<: *defaults` or `<<: [*a, *b]`: mappings to merge.
fn is_merge_source(node: &Node) -> bool {
    match &node.value {
        Value::Map(_) => true,
        Value::Seq(items) => !items.is_empty() && items.iter().all(|i| matches!(i.value, Value::Map(_))),
        _ => false,
    }
}

/// YAML's merge keys: the keys of the merged mappings that the mapping does not have itself, the earlier merged
/// mapping winning, added after its own.
fn merge(entries: &mut Vec<(Key, Node)>, merges: Vec<Node>) {
    if merges.is_empty() {
        return;
    }
    let mut present: HashSet<Arc<str>> = entries.iter().map(|(k, _)| k.name.clone()).collect();
    for source in merges {
        let maps = match source.value {
            Value::Map(m) => vec![m],
            Value::Seq(items) => items
                .into_iter()
                .filter_map(|i| match i.value {
                    Value::Map(m) => Some(m),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        for (k, v) in maps.into_iter().flatten() {
            if present.insert(k.name.clone()) {
                entries.push((k, v));
            }
        }
    }
}

fn tagged(tag: &Tag, value: Value) -> Value {
    Value::Tagged(Box::new(Tagged { tag: shown_tag(tag).into(), value }))
}

/// The non-specific tag `!`: "not resolved", which makes a scalar text.
fn is_non_specific(tag: &Tag) -> bool {
    tag.handle().is_empty() && tag.suffix() == "!"
}

/// A tag as a user writes it: `!!timestamp`, `!Ref`, `!<tag:example.com,2000:x>`.
fn shown_tag(tag: &Tag) -> String {
    if let Some(name) = tag.suffix_in_namespace("tag:yaml.org,2002:") {
        return format!("!!{name}");
    }
    match (tag.handle(), tag.original_handle()) {
        ("!", _) => format!("!{}", tag.suffix()),
        (handle, original) if !original.is_empty() && original != handle => format!("{original}{}", tag.suffix()),
        (handle, _) => format!("!<{handle}{}>", tag.suffix()),
    }
}

/// What an untagged plain scalar is, resolved as serde-saphyr does with strict (YAML 1.2) booleans and non-finite
/// floats kept as text: null, boolean, integer (decimal without a leading zero, `0x`, `0o`, `0b`, `_` between
/// digits), float, else text. An integer beyond 64 bits is a float, whose text a field can still read.
enum Plain {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    /// `.inf`, `-.Inf`, `.NaN`, or a numeral too large for a float (`1e400`): the canonical text.
    NonFinite(&'static str),
    Text,
}

impl Plain {
    fn of(text: &str) -> Plain {
        // Most plain scalars are names, addresses and keys: one that starts with none of the characters a null, a
        // boolean or a number can start with is text, without trying each. (`inf` and `nan`, which Rust's float
        // parser takes, are kept as text below anyway.)
        match text.as_bytes().first() {
            None => return Plain::Null,
            Some(b'~' | b'n' | b'N' | b't' | b'T' | b'f' | b'F' | b'0'..=b'9' | b'+' | b'-' | b'.') => {}
            Some(_) => return Plain::Text,
        }
        if is_null_text(text) {
            return Plain::Null;
        }
        if let Some(b) = parse_bool(text) {
            return Plain::Bool(b);
        }
        if let Some(i) = parse_int(text) {
            return Plain::Int(i);
        }
        if let Some(canonical) = non_finite(text) {
            return Plain::NonFinite(canonical);
        }
        match text.parse::<f64>() {
            Ok(f) if f.is_finite() => Plain::Float(f),
            // `1e400`: a numeral too large for a float, kept as text like `.inf`.
            Ok(f)
                if f.is_infinite() && text.trim_start_matches(['+', '-']).starts_with(|c: char| c.is_ascii_digit()) =>
            {
                Plain::NonFinite(if f > 0.0 { ".inf" } else { "-.inf" })
            }
            _ => Plain::Text,
        }
    }

    /// The value of `text`, with the text as written for booleans and numbers.
    fn value(self, text: &str, written: impl Fn() -> Box<str>) -> Value {
        match self {
            Plain::Null => Value::Null,
            Plain::Bool(b) => Value::Bool(b, written()),
            Plain::Int(i) => int_value(i, written()),
            Plain::Float(f) => Value::Float(f, written()),
            Plain::NonFinite(canonical) => Value::Str(canonical.into()),
            Plain::Text => Value::Str(text.to_string()),
        }
    }
}

fn int_value(i: i128, written: Box<str>) -> Value {
    match i64::try_from(i) {
        Ok(i) => Value::Int(i, written),
        Err(_) => Value::Float(i as f64, written),
    }
}

fn is_null_text(text: &str) -> bool {
    matches!(text, "" | "~" | "null" | "Null" | "NULL")
}

fn parse_bool(text: &str) -> Option<bool> {
    match text {
        "true" | "True" | "TRUE" => Some(true),
        "false" | "False" | "FALSE" => Some(false),
        _ => None,
    }
}

/// `.inf`, `-.Inf`, `.NAN`: YAML's spellings of the non-finite floats, as the canonical text.
fn non_finite(text: &str) -> Option<&'static str> {
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    match unsigned {
        ".nan" | ".NaN" | ".NAN" => Some(".nan"),
        ".inf" | ".Inf" | ".INF" if negative => Some("-.inf"),
        ".inf" | ".Inf" | ".INF" => Some(".inf"),
        _ => None,
    }
}

/// An integer in any of the forms serde-saphyr reads, within the range of u64 (and down to i64's minimum).
fn parse_int(text: &str) -> Option<i128> {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let (radix, digits) = [("0x", 16), ("0X", 16), ("0o", 8), ("0O", 8), ("0b", 2), ("0B", 2)]
        .iter()
        .find_map(|(prefix, radix)| rest.strip_prefix(prefix).map(|d| (*radix, d)))
        .unwrap_or((10, rest));
    // `0755` is not decimal 755 (YAML 1.1 read it as octal): not an integer at all.
    if radix == 10 && digits.starts_with('0') && digits != "0" {
        return None;
    }
    let bytes = digits.as_bytes();
    let mut value: i128 = 0;
    let mut any = false;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'_' {
            // Only between digits.
            if i == 0 || i + 1 == bytes.len() || bytes[i - 1] == b'_' || bytes[i + 1] == b'_' {
                return None;
            }
            continue;
        }
        let d = (b as char).to_digit(radix)?;
        value = value.checked_mul(i128::from(radix))?.checked_add(i128::from(d))?;
        any = true;
    }
    let value = if negative { -value } else { value };
    (any && value >= i128::from(i64::MIN) && value <= i128::from(u64::MAX)).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Node {
        documents(&Arc::from("t"), text, true).unwrap().pop().unwrap()
    }

    fn scalar(text: &str) -> Value {
        doc(&format!("v: {text}\n")).child("v").unwrap().value.clone()
    }

    #[test]
    fn plain_scalars_resolve_as_before() {
        assert!(matches!(scalar("~"), Value::Null));
        assert!(matches!(scalar("yes"), Value::Str(s) if s == "yes"));
        assert!(matches!(scalar("True"), Value::Bool(true, _)));
        assert!(matches!(scalar("0x1F"), Value::Int(31, w) if &*w == "0x1F"));
        assert!(matches!(scalar("1_000"), Value::Int(1000, _)));
        assert!(matches!(scalar("-12"), Value::Int(-12, _)));
        assert!(matches!(scalar("0755"), Value::Float(f, w) if f == 755.0 && &*w == "0755"));
        assert!(matches!(scalar("99999999999999999999"), Value::Float(..)));
        assert!(matches!(scalar("18446744073709551615"), Value::Float(..)));
        assert!(matches!(scalar("2.5"), Value::Float(f, _) if f == 2.5));
        assert!(matches!(scalar(".inf"), Value::Str(s) if s == ".inf"));
        assert!(matches!(scalar("1e400"), Value::Str(s) if s == ".inf"));
        assert!(matches!(scalar("nan"), Value::Str(s) if s == "nan"));
        assert!(matches!(scalar("'12'"), Value::Str(s) if s == "12"));
        for text in ["inf", "Infinity", "nan", "NaN", "e5", "_1", "x0", "on", "Yes", "0o", "0x", "+", ".", "-x", "~x"] {
            assert!(matches!(scalar(text), Value::Str(s) if s == text), "{text}");
        }
    }

    #[test]
    fn tags_that_fit_are_plain_values_and_the_others_are_kept() {
        assert!(matches!(scalar("!!str 12"), Value::Str(s) if s == "12"));
        assert!(matches!(scalar("!!int 3"), Value::Int(3, _)));
        assert!(matches!(scalar("! 3"), Value::Str(s) if s == "3"));
        for (written, tag) in [
            ("!!float 2", "!!float"),
            ("!!binary /wAA", "!!binary"),
            ("!!timestamp 2001-12-14", "!!timestamp"),
            ("!Ref x", "!Ref"),
            ("!!int abc", "!!int"),
            ("!!map [a]", "!!map"),
            ("!!set {a, b}", "!!set"),
        ] {
            match scalar(written) {
                Value::Tagged(t) => assert_eq!(&*t.tag, tag, "{written}"),
                other => panic!("{written}: {other:?}"),
            }
        }
        assert!(matches!(scalar("!!seq [a]"), Value::Seq(_)));
    }

    #[test]
    fn comments_between_a_key_and_its_value_are_any_number() {
        let text = format!("a:\n{}  - x\n", "  # retired host\n".repeat(500));
        assert!(matches!(doc(&text).child("a").unwrap().value, Value::Seq(_)));
    }

    #[test]
    fn aliases_merges_and_their_limits() {
        let d = doc("d: &d {x: 1, y: 2}\nm:\n  <<: *d\n  y: 3\n");
        let m = d.child("m").unwrap();
        assert!(matches!(m.child("x").unwrap().value, Value::Int(1, _)));
        assert!(matches!(m.child("y").unwrap().value, Value::Int(3, _)));
        assert!(matches!(documents(&Arc::from("t"), "a: &a [*a]\n", true), Err(BuildError::RecursiveAlias { .. })));
        let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 0..9 {
            let prev = if i == 0 { "a".to_string() } else { format!("b{}", i - 1) };
            bomb.push_str(&format!("b{i}: &b{i} [{}]\n", vec![format!("*{prev}"); 10].join(", ")));
        }
        assert!(matches!(documents(&Arc::from("t"), &bomb, true), Err(BuildError::TooLarge { .. })));
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert!(matches!(documents(&Arc::from("t"), &deep, true), Err(BuildError::TooLarge { .. })));
    }

    #[test]
    fn a_second_document_is_reported_at_its_first_node() {
        match documents(&Arc::from("t"), "a: 1\n---\nb: 2\n", true) {
            Err(BuildError::MultipleDocuments { at }) => assert_eq!((at.line, at.column), (3, 1)),
            other => panic!("{other:?}"),
        }
        assert_eq!(documents(&Arc::from("t"), "a: 1\n---\nb: 2\n", false).unwrap().len(), 2);
    }
}
