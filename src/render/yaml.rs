//! The YAML text of a rendered cluster object.
//!
//! serde-saphyr's serializer decides each scalar's style by scanning it several times over, which made it the
//! largest cost of a large render: about 90 instructions per output byte, 12.8 M for the 2,000-host
//! `windows-instances` ConfigMap alone. The writer here produces the same bytes in one pass for the shapes cluster
//! objects have (block maps and compact sequences of short one-line scalars whose style is plain to see), and
//! hands anything else to serde-saphyr for the whole object: a multi-line or long string, a float, a nested
//! sequence, a string it cannot classify at a glance. Its output is serde-saphyr's by construction; the tests
//! hold the two equal over generated documents, and the fixtures' snapshots did not move when it came in.

use serde::Serialize;
use serde::ser::{self, Impossible};
use std::fmt;

/// `value` as YAML, byte for byte what `serde_saphyr::to_string` writes.
pub fn to_string<T: Serialize>(value: &T) -> Result<String, serde_saphyr::SerializeError> {
    match written_here(value) {
        Some(out) => Ok(out),
        None => serde_saphyr::to_string(value),
    }
}

/// `value` as YAML when this writer can tell every byte serde-saphyr would write; `None` otherwise.
fn written_here<T: Serialize + ?Sized>(value: &T) -> Option<String> {
    let mut out = String::with_capacity(1024);
    value.serialize(Node { out: &mut out, place: Place::Top }).ok()?;
    Some(out)
}

/// Longer one-line values are folded (`>`) by serde-saphyr; that is left to it.
const FOLD_AT: usize = 80;
/// Longer keys take serde-saphyr's explicit `? key` form.
const SIMPLE_KEY_MAX: usize = 1024;
/// Words YAML 1.1 or 1.2 reads as a boolean, null or float: serde-saphyr quotes them, in any letter case.
const WORDS_READ_AS_OTHER: [&str; 11] = ["y", "n", "yes", "no", "on", "off", "true", "false", "null", "nan", "inf"];

/// Something this writer leaves to serde-saphyr; the whole object is then written by it.
#[derive(Debug)]
struct Unsupported;

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("left to serde-saphyr")
    }
}

impl std::error::Error for Unsupported {}

impl ser::Error for Unsupported {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Unsupported
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Style {
    Plain,
    /// Double-quoted. Only strings that need no escape are ever given this style here.
    Quoted,
}

/// How serde-saphyr writes the one-line string `s`, when that is plain to see; `None` when it is not.
///
/// A string of printable ASCII that starts with a letter is plain, unless it ends in a space or `:`, holds `: `
/// or ` #` (a mapping or a comment to a reader), or is one of the words YAML reads as something else; a key may
/// not hold `:` or a flow indicator (`,[]{}`) either. A string of digits and dots that starts with a digit is a
/// number to YAML 1.1 (`3`, `10.0.0.1`): quoted. The empty string is quoted.
fn style(s: &str, key: bool) -> Option<Style> {
    let bytes = s.as_bytes();
    let Some(&first) = bytes.first() else { return Some(Style::Quoted) };
    if bytes.len() > if key { SIMPLE_KEY_MAX } else { FOLD_AT } {
        return None;
    }
    if first.is_ascii_digit() {
        return bytes.iter().all(|&b| b.is_ascii_digit() || b == b'.').then_some(Style::Quoted);
    }
    if !first.is_ascii_alphabetic() {
        return None;
    }
    // One pass: printable ASCII (less a key's `:` and flow indicators), no `: ` or ` #`.
    let mut prev = 0u8;
    for &b in bytes {
        let allowed = matches!(b, b' '..=b'~') && !(key && matches!(b, b':' | b',' | b'[' | b']' | b'{' | b'}'));
        if !allowed || (prev == b':' && b == b' ') || (prev == b' ' && b == b'#') {
            return None;
        }
        prev = b;
    }
    if matches!(prev, b' ' | b':') {
        return None;
    }
    // The longest of those words (`false`) has five letters.
    if bytes.len() <= 5 && WORDS_READ_AS_OTHER.iter().any(|w| w.eq_ignore_ascii_case(s)) {
        return Some(Style::Quoted);
    }
    Some(Style::Plain)
}

fn push_scalar(out: &mut String, s: &str, style: Style) {
    match style {
        Style::Plain => out.push_str(s),
        Style::Quoted => {
            out.push('"');
            out.push_str(s);
            out.push('"');
        }
    }
}

fn indent(out: &mut String, depth: usize) {
    const SPACES: &str = "                                ";
    let mut width = depth * 2;
    while width > 0 {
        let n = width.min(SPACES.len());
        out.push_str(&SPACES[..n]);
        width -= n;
    }
}

/// Where the node being written starts.
#[derive(Clone, Copy)]
enum Place {
    /// The document itself.
    Top,
    /// Right after `key:`, the key written at `depth`.
    Value { depth: usize },
    /// Right after `- `, the dash written at `depth`.
    Item { depth: usize },
}

/// One node, written at `place`.
struct Node<'a> {
    out: &'a mut String,
    place: Place,
}

impl<'a> Node<'a> {
    /// A one-line scalar ends the line it is on.
    fn scalar(self, text: &str, style: Style) -> Result<(), Unsupported> {
        match self.place {
            Place::Top => return Err(Unsupported),
            Place::Value { .. } => self.out.push(' '),
            Place::Item { .. } => {}
        }
        push_scalar(self.out, text, style);
        self.out.push('\n');
        Ok(())
    }

    fn map(self) -> Map<'a> {
        Map { out: self.out, place: self.place, entries: 0 }
    }

    fn int(self, v: impl itoa::Integer) -> Result<(), Unsupported> {
        let mut buf = itoa::Buffer::new();
        let text = buf.format(v);
        self.scalar(text, Style::Plain)
    }
}

/// A block mapping written at `place`.
struct Map<'a> {
    out: &'a mut String,
    place: Place,
    entries: usize,
}

impl Map<'_> {
    /// Where its keys sit: one level in from the key or dash it follows.
    fn depth(&self) -> usize {
        match self.place {
            Place::Top => 0,
            Place::Value { depth } | Place::Item { depth } => depth + 1,
        }
    }

    fn key(&mut self, key: &str) -> Result<(), Unsupported> {
        let style = style(key, true).ok_or(Unsupported)?;
        match (self.entries, self.place) {
            // The first key of a sequence item shares the dash's line.
            (0, Place::Item { .. }) => {}
            (0, Place::Value { .. }) => {
                self.out.push('\n');
                indent(self.out, self.depth());
            }
            _ => indent(self.out, self.depth()),
        }
        push_scalar(self.out, key, style);
        self.out.push(':');
        self.entries += 1;
        Ok(())
    }

    fn value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
        let depth = self.depth();
        value.serialize(Node { out: self.out, place: Place::Value { depth } })
    }

    fn finish(self) -> Result<(), Unsupported> {
        if self.entries > 0 {
            return Ok(());
        }
        match self.place {
            Place::Top => return Err(Unsupported),
            Place::Value { .. } => self.out.push_str(" {}\n"),
            Place::Item { .. } => self.out.push_str("{}\n"),
        }
        Ok(())
    }
}

/// A block sequence of a mapping's value, its dashes at the key's `depth` (serde-saphyr's compact lists).
struct Seq<'a> {
    out: &'a mut String,
    depth: usize,
    items: usize,
}

/// Serializer methods for what this writer leaves to serde-saphyr (scalars: `method(type)`).
macro_rules! unsupported_scalars {
    ($($method:ident($ty:ty)),* $(,)?) => {
        $(fn $method(self, _: $ty) -> Result<(), Unsupported> {
            Err(Unsupported)
        })*
    };
}

/// Serializer methods for the compound shapes cluster objects never have: tuples and enum variants with content.
macro_rules! unsupported_compounds {
    () => {
        fn serialize_newtype_variant<T: Serialize + ?Sized>(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: &T,
        ) -> Result<(), Unsupported> {
            Err(Unsupported)
        }
        fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Unsupported> {
            Err(Unsupported)
        }
        fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeTupleStruct, Unsupported> {
            Err(Unsupported)
        }
        fn serialize_tuple_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeTupleVariant, Unsupported> {
            Err(Unsupported)
        }
        fn serialize_struct_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeStructVariant, Unsupported> {
            Err(Unsupported)
        }
    };
}

/// Integers are written in decimal, as serde-saphyr writes them.
macro_rules! integers {
    ($($method:ident($ty:ty)),* $(,)?) => {
        $(fn $method(self, v: $ty) -> Result<(), Unsupported> {
            self.int(v)
        })*
    };
}

impl<'a> ser::Serializer for Node<'a> {
    type Ok = ();
    type Error = Unsupported;
    type SerializeSeq = Seq<'a>;
    type SerializeTuple = Impossible<(), Unsupported>;
    type SerializeTupleStruct = Impossible<(), Unsupported>;
    type SerializeTupleVariant = Impossible<(), Unsupported>;
    type SerializeMap = Map<'a>;
    type SerializeStruct = Map<'a>;
    type SerializeStructVariant = Impossible<(), Unsupported>;

    fn serialize_bool(self, v: bool) -> Result<(), Unsupported> {
        self.scalar(if v { "true" } else { "false" }, Style::Plain)
    }
    integers!(
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
    );
    unsupported_scalars!(serialize_f32(f32), serialize_f64(f64), serialize_bytes(&[u8]));
    fn serialize_char(self, v: char) -> Result<(), Unsupported> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<(), Unsupported> {
        let style = style(v, false).ok_or(Unsupported)?;
        self.scalar(v, style)
    }
    fn serialize_none(self) -> Result<(), Unsupported> {
        self.scalar("null", Style::Plain)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Unsupported> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Unsupported> {
        self.scalar("null", Style::Plain)
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Unsupported> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Result<(), Unsupported> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, name: &'static str, value: &T) -> Result<(), Unsupported> {
        // serde-saphyr gives newtypes whose names start with `__` a meaning of their own (flow style, block
        // strings, quoting); any other newtype is its content.
        if name.starts_with("__") {
            return Err(Unsupported);
        }
        value.serialize(self)
    }
    unsupported_compounds!();
    fn serialize_seq(self, _: Option<usize>) -> Result<Seq<'a>, Unsupported> {
        match self.place {
            Place::Value { depth } => Ok(Seq { out: self.out, depth, items: 0 }),
            Place::Top | Place::Item { .. } => Err(Unsupported),
        }
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Map<'a>, Unsupported> {
        Ok(self.map())
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Map<'a>, Unsupported> {
        Ok(self.map())
    }
}

impl ser::SerializeSeq for Seq<'_> {
    type Ok = ();
    type Error = Unsupported;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
        if self.items == 0 {
            self.out.push('\n');
        }
        indent(self.out, self.depth);
        self.out.push_str("- ");
        self.items += 1;
        value.serialize(Node { out: self.out, place: Place::Item { depth: self.depth } })
    }

    fn end(self) -> Result<(), Unsupported> {
        if self.items == 0 {
            self.out.push_str(" []\n");
        }
        Ok(())
    }
}

impl ser::SerializeMap for Map<'_> {
    type Ok = ();
    type Error = Unsupported;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Unsupported> {
        key.serialize(KeySink { map: self })
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
        self.value(value)
    }

    fn end(self) -> Result<(), Unsupported> {
        self.finish()
    }
}

impl ser::SerializeStruct for Map<'_> {
    type Ok = ();
    type Error = Unsupported;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<(), Unsupported> {
        self.key(key)?;
        self.value(value)
    }

    fn end(self) -> Result<(), Unsupported> {
        self.finish()
    }
}

/// A mapping key: a string, written by the map; any other key is left to serde-saphyr.
struct KeySink<'m, 'a> {
    map: &'m mut Map<'a>,
}

impl ser::Serializer for KeySink<'_, '_> {
    type Ok = ();
    type Error = Unsupported;
    type SerializeSeq = Impossible<(), Unsupported>;
    type SerializeTuple = Impossible<(), Unsupported>;
    type SerializeTupleStruct = Impossible<(), Unsupported>;
    type SerializeTupleVariant = Impossible<(), Unsupported>;
    type SerializeMap = Impossible<(), Unsupported>;
    type SerializeStruct = Impossible<(), Unsupported>;
    type SerializeStructVariant = Impossible<(), Unsupported>;

    unsupported_scalars!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_char(char),
        serialize_bytes(&[u8]),
        serialize_unit_struct(&'static str),
    );

    fn serialize_str(self, v: &str) -> Result<(), Unsupported> {
        self.map.key(v)
    }
    fn serialize_none(self) -> Result<(), Unsupported> {
        Err(Unsupported)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<(), Unsupported> {
        Err(Unsupported)
    }
    fn serialize_unit(self) -> Result<(), Unsupported> {
        Err(Unsupported)
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Result<(), Unsupported> {
        Err(Unsupported)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, name: &'static str, value: &T) -> Result<(), Unsupported> {
        if name.starts_with("__") {
            return Err(Unsupported);
        }
        value.serialize(self)
    }
    unsupported_compounds!();
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, Unsupported> {
        Err(Unsupported)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, Value, json};

    /// Holds the writer to serde-saphyr wherever it writes a document itself.
    fn same_as_serde_saphyr(value: &Value) -> bool {
        let ours = written_here(value);
        if let Some(ours) = &ours {
            let theirs = serde_saphyr::to_string(value).unwrap();
            assert_eq!(ours, &theirs, "for {value}");
        }
        ours.is_some()
    }

    /// Characters that decide a scalar's style: indicators, quotes, spaces, digits, letters of YAML's words.
    const ALPHABET: [&str; 24] = [
        "a", "Y", "n", "o", "e", "0", "7", ".", ":", " ", "#", "-", "'", "\"", ",", "[", "}", "~", "=", "<", "@", "_",
        "/", "\t",
    ];

    fn short_strings() -> Vec<String> {
        let mut all = vec![String::new()];
        for a in ALPHABET {
            all.push(a.to_string());
            for b in ALPHABET {
                all.push(format!("{a}{b}"));
                for c in ALPHABET {
                    all.push(format!("{a}{b}{c}"));
                }
            }
        }
        let words = [
            "yes",
            "No",
            "ON",
            "off",
            "True",
            "FALSE",
            "null",
            "Nan",
            "inf",
            "y",
            "<<",
            "=",
            "~",
            "0x1F",
            "1e3",
            "10.0.0.1",
            "1:20",
            "2026-11-25",
            "a: b",
            "a #b",
            "a#b",
            "-a",
            "--- a",
            "a",
            "Prune=false,Delete=false",
            "tag:Name",
            "registry.example.com/a/b@sha256:0123",
            "é",
        ];
        all.extend(words.iter().map(|w| w.to_string()));
        // Either side of the length serde-saphyr starts folding at.
        all.extend(["x".repeat(FOLD_AT), "x".repeat(FOLD_AT + 1), format!("a b{}", " c".repeat(FOLD_AT / 2))]);
        all
    }

    #[test]
    fn every_short_string_is_styled_as_serde_saphyr_styles_it_as_a_key_and_as_a_value() {
        let mut written = 0;
        for s in short_strings() {
            written += usize::from(same_as_serde_saphyr(&json!({ "key": s })));
            written += usize::from(same_as_serde_saphyr(&json!({ s.clone(): "value" })));
            written += usize::from(same_as_serde_saphyr(&json!({ "list": [s] })));
        }
        // Most of these strings hold a character the writer leaves to serde-saphyr; the rest must be many.
        assert!(written > 3_000, "the writer wrote only {written} documents itself");
    }

    /// A small deterministic generator, so a failure names a document that can be written again.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    /// Strings plain to see four times in five, so that whole documents reach the writer; any string otherwise.
    fn string(rng: &mut Rng, strings: &[String]) -> String {
        const PLAIN: [&str; 8] =
            ["name", "labels", "app.kubernetes.io/name", "win-0.example.com", "v1", "3", "", "a b"];
        match rng.below(5) {
            0 => strings[rng.below(strings.len())].clone(),
            _ => PLAIN[rng.below(PLAIN.len())].to_string(),
        }
    }

    fn scalar(rng: &mut Rng, strings: &[String]) -> Value {
        match rng.below(6) {
            0 => json!(rng.below(1000) as i64 - 500),
            1 => json!(rng.below(2) == 0),
            2 => Value::Null,
            _ => json!(string(rng, strings)),
        }
    }

    fn document(rng: &mut Rng, strings: &[String], depth: usize) -> Value {
        match if depth > 4 { 3 } else { rng.below(4) } {
            0 | 1 => {
                let mut map = Map::new();
                for _ in 0..rng.below(4) {
                    map.insert(string(rng, strings), document(rng, strings, depth + 1));
                }
                Value::Object(map)
            }
            2 => Value::Array((0..rng.below(4)).map(|_| document(rng, strings, depth + 1)).collect()),
            _ => scalar(rng, strings),
        }
    }

    #[test]
    fn generated_documents_are_written_as_serde_saphyr_writes_them() {
        let strings: Vec<String> = short_strings().into_iter().step_by(7).collect();
        let mut rng = Rng(0x5eed_1234_abcd_ef01);
        let mut written = 0;
        for _ in 0..20_000 {
            let mut map = Map::new();
            for _ in 0..1 + rng.below(4) {
                map.insert(string(&mut rng, &strings), document(&mut rng, &strings, 1));
            }
            written += usize::from(same_as_serde_saphyr(&Value::Object(map)));
        }
        assert!(written > 2_000, "the writer wrote only {written} documents itself");
    }

    #[test]
    fn what_it_cannot_tell_is_left_to_serde_saphyr() {
        let multi_line = json!({ "script": "line one\nline two\n" });
        assert_eq!(written_here(&multi_line), None);
        assert_eq!(to_string(&multi_line).unwrap(), serde_saphyr::to_string(&multi_line).unwrap());
        assert_eq!(written_here(&json!({ "ratio": 0.5 })), None);
        assert_eq!(written_here(&json!({ "nested": [[1]] })), None);
        assert_eq!(written_here(&json!("top-level scalar")), None);
    }
}
