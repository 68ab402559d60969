//! The inputs digest: sha256 of the inputs as canonical JSON (compact, object keys sorted), streamed into the
//! hash as it is written. The inputs schema writes every object's keys in order, so [`InOrder`] holds nothing; a
//! value that does not is written again through [`SortedKeys`], which holds one object at a time. It used to go
//! through a `serde_json::Value` and a `String`; the bytes hashed are the same, so digests recorded in existing
//! `manifest.json` files stay valid.

use serde::Serialize;
use serde_json::ser::{CharEscape, CompactFormatter, Formatter};
use sha2::{Digest, Sha256};
use std::cell::Cell;
use std::io::{self, BufWriter, Write};

/// `sha256:<hex>` of `{"inputs":…,"mirrorSets":…}` in canonical JSON.
pub fn inputs_digest(inputs: &impl Serialize, mirror_sets: &impl Serialize) -> String {
    // Serialising the inputs (strings, numbers, lists, structs) cannot fail, nor can hashing; should it ever,
    // the digest of what was written still changes with the inputs.
    let out_of_order = Cell::new(false);
    let mut hasher = hashing();
    let written = write_canonical(&mut hasher, inputs, mirror_sets, || InOrder::new(&out_of_order));
    debug_assert!(written.is_ok());
    if out_of_order.get() {
        // Some object did not list its keys in order: write it all again, sorting as it goes.
        hasher = hashing();
        let written = write_canonical(&mut hasher, inputs, mirror_sets, SortedKeys::default);
        debug_assert!(written.is_ok());
    }
    let flushed = hasher.flush();
    debug_assert!(flushed.is_ok());
    let (Hasher(sha), _) = hasher.into_parts();
    format!("sha256:{}", crate::hex(&sha.finalize()))
}

/// A hasher fed in 64 KiB pieces: serde_json writes a few bytes at a time (a quote, a key, a comma), and each
/// `update` of the hash costs a fixed overhead besides its bytes.
fn hashing() -> BufWriter<Hasher> {
    BufWriter::with_capacity(64 * 1024, Hasher(Sha256::new()))
}

fn write_canonical<F: Formatter>(
    out: &mut impl Write,
    inputs: &impl Serialize,
    mirror_sets: &impl Serialize,
    formatter: impl Fn() -> F,
) -> io::Result<()> {
    // The two top-level keys are written in order by hand.
    out.write_all(b"{\"inputs\":")?;
    inputs.serialize(&mut serde_json::Serializer::with_formatter(&mut *out, formatter()))?;
    out.write_all(b",\"mirrorSets\":")?;
    mirror_sets.serialize(&mut serde_json::Serializer::with_formatter(&mut *out, formatter()))?;
    out.write_all(b"}")
}

struct Hasher(Sha256);

impl Write for Hasher {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// serde_json's compact output, written as it comes, for values whose objects list their keys in byte order (the
/// inputs schema's `Serialize` impls do): then nothing is held, however long the mirror lists. A key that is not
/// after the one before it in its object sets `out_of_order`, and the caller writes everything again through
/// [`SortedKeys`].
///
/// Everything goes straight to the writer (the `Formatter` trait's own methods are the compact format); a key's
/// text is also copied, unescaped, into one buffer that is reused, never allocated per key or per object, and
/// compared there with the key before it.
struct InOrder<'a> {
    out_of_order: &'a Cell<bool>,
    /// The last key (unescaped) of each open object, one after the other, the innermost object's last: an object
    /// opens where the keys of those around it end, and takes its keys with it when it closes.
    keys: Vec<u8>,
    /// For each open object, innermost last: where its last key starts in `keys`, and whether it has one yet.
    open: Vec<(usize, bool)>,
    /// While a key is written: where it starts in `keys`, after the last key of its object.
    key_start: Option<usize>,
}

impl<'a> InOrder<'a> {
    fn new(out_of_order: &'a Cell<bool>) -> InOrder<'a> {
        InOrder { out_of_order, keys: Vec::new(), open: Vec::new(), key_start: None }
    }
}

/// A key as written (a JSON string; map keys that are numbers are written quoted too), unescaped for comparing.
fn key_text(written: &[u8]) -> io::Result<String> {
    match written.strip_prefix(b"\"").and_then(|k| k.strip_suffix(b"\"")) {
        Some(plain) if !plain.contains(&b'\\') => Ok(String::from_utf8_lossy(plain).into_owned()),
        _ => serde_json::from_slice(written).map_err(io::Error::other),
    }
}

/// Value writers that need no sorting: the compact formatter's own, into the current sink.
macro_rules! forward {
    ($($name:ident($t:ty)),*) => {$(
        fn $name<W: ?Sized + Write>(&mut self, writer: &mut W, value: $t) -> io::Result<()> {
            CompactFormatter.$name(&mut self.sink(writer), value)
        }
    )*};
}

/// The writers of [`SortedKeys`] that need no sorting: into the current sink.
macro_rules! forward_all {
    () => {
        forward!(
            write_bool(bool),
            write_i8(i8),
            write_i16(i16),
            write_i32(i32),
            write_i64(i64),
            write_i128(i128),
            write_u8(u8),
            write_u16(u16),
            write_u32(u32),
            write_u64(u64),
            write_u128(u128),
            write_f32(f32),
            write_f64(f64),
            write_number_str(&str),
            write_byte_array(&[u8]),
            write_raw_fragment(&str),
            write_string_fragment(&str),
            write_char_escape(CharEscape)
        );

        fn write_null<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
            CompactFormatter.write_null(&mut self.sink(writer))
        }

        fn begin_string<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
            CompactFormatter.begin_string(&mut self.sink(writer))
        }

        fn end_string<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
            CompactFormatter.end_string(&mut self.sink(writer))
        }

        fn begin_array<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
            CompactFormatter.begin_array(&mut self.sink(writer))
        }

        fn end_array<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
            CompactFormatter.end_array(&mut self.sink(writer))
        }

        fn begin_array_value<W: ?Sized + Write>(&mut self, writer: &mut W, first: bool) -> io::Result<()> {
            CompactFormatter.begin_array_value(&mut self.sink(writer), first)
        }

        fn begin_object_value<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
            CompactFormatter.begin_object_value(&mut self.sink(writer))
        }
    };
}

/// Scalar writers for [`InOrder`]: to the writer, and into the key being written when there is one (a map key
/// that is a number or a boolean is written as a string of its text).
macro_rules! to_writer_and_key {
    ($($name:ident($t:ty)),*) => {$(
        fn $name<W: ?Sized + Write>(&mut self, writer: &mut W, value: $t) -> io::Result<()> {
            if self.key_start.is_some() {
                CompactFormatter.$name(&mut self.keys, value)?;
            }
            CompactFormatter.$name(writer, value)
        }
    )*};
}

impl Formatter for InOrder<'_> {
    to_writer_and_key!(
        write_bool(bool),
        write_i8(i8),
        write_i16(i16),
        write_i32(i32),
        write_i64(i64),
        write_i128(i128),
        write_u8(u8),
        write_u16(u16),
        write_u32(u32),
        write_u64(u64),
        write_u128(u128),
        write_f32(f32),
        write_f64(f64),
        write_number_str(&str),
        write_byte_array(&[u8]),
        write_raw_fragment(&str),
        write_string_fragment(&str)
    );

    /// An escaped character: written escaped, and into the key as the character itself.
    fn write_char_escape<W: ?Sized + Write>(&mut self, writer: &mut W, escape: CharEscape) -> io::Result<()> {
        if self.key_start.is_some() {
            self.keys.push(match escape {
                CharEscape::Quote => b'"',
                CharEscape::ReverseSolidus => b'\\',
                CharEscape::Solidus => b'/',
                CharEscape::Backspace => b'\x08',
                CharEscape::FormFeed => b'\x0c',
                CharEscape::LineFeed => b'\n',
                CharEscape::CarriageReturn => b'\r',
                CharEscape::Tab => b'\t',
                CharEscape::AsciiControl(byte) => byte,
            });
        }
        CompactFormatter.write_char_escape(writer, escape)
    }

    fn begin_object<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.open.push((self.keys.len(), false));
        CompactFormatter.begin_object(writer)
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, writer: &mut W, first: bool) -> io::Result<()> {
        self.key_start = Some(self.keys.len());
        CompactFormatter.begin_object_key(writer, first)
    }

    fn end_object_key<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        if let (Some(key_start), Some((last_start, has_key))) = (self.key_start.take(), self.open.last_mut()) {
            let (last, key) = self.keys[*last_start..].split_at(key_start - *last_start);
            if *has_key && last >= key {
                self.out_of_order.set(true);
            }
            // The new key becomes the object's last.
            self.keys.drain(*last_start..key_start);
            *has_key = true;
        }
        CompactFormatter.end_object_key(writer)
    }

    fn end_object<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        if let Some((start, _)) = self.open.pop() {
            self.keys.truncate(start);
        }
        CompactFormatter.end_object(writer)
    }
}

/// serde_json's compact output with every object's keys in byte order, as `serde_json::Value`'s sorted map
/// writes them. An object is collected entry by entry and written, sorted, when it ends; everything outside
/// objects goes straight to the writer.
#[derive(Default)]
struct SortedKeys {
    objects: Vec<Object>,
}

#[derive(Default)]
struct Object {
    /// The finished entries: the key (unescaped, for sorting) and `"key":value` as written.
    entries: Vec<(String, Vec<u8>)>,
    key: String,
    current: Vec<u8>,
}

impl SortedKeys {
    /// Where the next bytes go: the innermost open object's current entry, or the writer.
    fn sink<'a, W: ?Sized + Write>(&'a mut self, writer: &'a mut W) -> Sink<'a, W> {
        match self.objects.last_mut() {
            Some(o) => Sink::Held(&mut o.current),
            None => Sink::Out(writer),
        }
    }
}

enum Sink<'a, W: ?Sized> {
    Held(&'a mut Vec<u8>),
    Out(&'a mut W),
}

impl<W: ?Sized + Write> Write for Sink<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::Held(v) => v.write(buf),
            Sink::Out(w) => w.write(buf),
        }
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Sink::Held(v) => v.write_all(buf),
            Sink::Out(w) => w.write_all(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Formatter for SortedKeys {
    forward_all!();

    fn begin_object<W: ?Sized + Write>(&mut self, _writer: &mut W) -> io::Result<()> {
        self.objects.push(Object::default());
        Ok(())
    }

    /// The separating comma is written when the sorted object is.
    fn begin_object_key<W: ?Sized + Write>(&mut self, _writer: &mut W, _first: bool) -> io::Result<()> {
        Ok(())
    }

    fn end_object_key<W: ?Sized + Write>(&mut self, _writer: &mut W) -> io::Result<()> {
        // The entry so far is the key as a JSON string (map keys that are numbers are written quoted too).
        if let Some(o) = self.objects.last_mut() {
            o.key = key_text(&o.current)?;
        }
        Ok(())
    }

    fn end_object_value<W: ?Sized + Write>(&mut self, _writer: &mut W) -> io::Result<()> {
        if let Some(o) = self.objects.last_mut() {
            let entry = (std::mem::take(&mut o.key), std::mem::take(&mut o.current));
            o.entries.push(entry);
        }
        Ok(())
    }

    fn end_object<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        let Some(mut object) = self.objects.pop() else { return Ok(()) };
        // A map keeps the last value given for a key; a stable sort leaves it last among its equals.
        object.entries.sort_by(|a, b| a.0.cmp(&b.0));
        let mut entries = object.entries.iter().peekable();
        let mut out = self.sink(writer);
        out.write_all(b"{")?;
        let mut first = true;
        while let Some((key, bytes)) = entries.next() {
            if entries.peek().is_some_and(|(next, _)| next == key) {
                continue;
            }
            if !first {
                out.write_all(b",")?;
            }
            first = false;
            out.write_all(bytes)?;
        }
        out.write_all(b"}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inputs::{mirrors, schema, yaml};
    use std::collections::BTreeMap;

    /// The canonical JSON as it was written before streaming: through a `serde_json::Value`, whose map sorts its
    /// keys.
    fn through_value(inputs: &impl Serialize, mirror_sets: &impl Serialize) -> String {
        let value = serde_json::json!({ "inputs": inputs, "mirrorSets": mirror_sets });
        serde_json::to_string(&value).unwrap()
    }

    /// What each formatter writes, and whether the one that streams found every object's keys in order.
    fn streamed(inputs: &impl Serialize, mirror_sets: &impl Serialize) -> (String, bool) {
        let mut out = Vec::new();
        let out_of_order = Cell::new(false);
        write_canonical(&mut out, inputs, mirror_sets, || InOrder::new(&out_of_order)).unwrap();
        let mut sorted = Vec::new();
        write_canonical(&mut sorted, inputs, mirror_sets, SortedKeys::default).unwrap();
        if !out_of_order.get() {
            assert_eq!(out, sorted, "keys in order: both formatters write the same");
        }
        (String::from_utf8(sorted).unwrap(), !out_of_order.get())
    }

    #[derive(Serialize)]
    struct Entry {
        zeta: Vec<String>,
        alpha: Option<f64>,
        #[serde(rename = "Mid\"dle\n")]
        middle: BTreeMap<String, (u64, i8, bool)>,
        numbered: BTreeMap<u32, u8>,
        nested: Vec<Entry>,
    }

    #[test]
    fn the_same_bytes_as_through_a_json_value() {
        let leaf = |i: u64| Entry {
            zeta: vec![format!("z{i}\u{1}\\"), "é/ü".into()],
            alpha: [Some(0.1 * i as f64), None, Some(f64::NAN), Some(1e300)][i as usize % 4],
            middle: [("b".to_string(), (i, -3, true)), ("a\t".to_string(), (u64::MAX, 0, false))].into(),
            numbered: if i == 3 { BTreeMap::new() } else { [(10, 1), (9, 2)].into() },
            nested: Vec::new(),
        };
        let inputs = Entry { nested: (0..6).map(leaf).collect(), ..leaf(7) };
        let sets = vec![leaf(1), leaf(2)];
        // `Entry` lists its keys out of order: the digest is written again, sorted.
        assert_eq!(streamed(&inputs, &sets), (through_value(&inputs, &sets), false));
        assert_eq!(streamed(&(), &Vec::<u8>::new()), (through_value(&(), &Vec::<u8>::new()), true));
        let canonical = through_value(&inputs, &sets);
        let expected = format!("sha256:{}", crate::hex(&Sha256::digest(canonical.as_bytes())));
        assert_eq!(inputs_digest(&inputs, &sets), expected);
    }

    /// Keys compared as their text: escaped ones unescaped, numbers as their digits. In order, they stream.
    #[test]
    fn escaped_and_numbered_keys_are_compared_as_their_text() {
        let escaped: BTreeMap<String, u8> = [("a\n", 1), ("a\"", 2), ("a\\", 3), ("a\u{1}", 4), ("é", 5)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        let numbered: BTreeMap<u32, u8> = [(1, 1), (2, 2), (3, 3)].into();
        assert_eq!(streamed(&escaped, &numbered), (through_value(&escaped, &numbered), true));
        let out_of_order: BTreeMap<u32, u8> = [(9, 1), (10, 2)].into();
        assert_eq!(streamed(&escaped, &out_of_order), (through_value(&escaped, &out_of_order), false));
    }

    /// The inputs schema writes every object's keys in order, so a real digest streams and holds nothing: a
    /// large mirror list is never copied into a buffer.
    #[test]
    fn the_inputs_stream_in_key_order() {
        let text = "apiVersion: wmrender.dev/v1alpha1\nkind: ClusterInputs\nmetadata: {name: t}\nspec:\n  \
                    infrastructureID: x-1\n  apiServerInternalURL: https://api-int.x:6443\n  \
                    platform: {aws: {region: us-east-1, ami: ami-1}}\n  windowsVersion: \"2022\"\n  \
                    machineSets: [{name: x-1-w, zone: us-east-1a, replicas: auto}]\n  \
                    byoh: [{address: h.example.com, username: Administrator}]\n  \
                    network: {hybridClusterNetwork: [10.132.0.0/14], hybridOverlayVXLANPort: 9898}\n  \
                    proxy: {httpProxy: http://p:3128, noProxy: [a.example.com]}\n  \
                    operator: {install: true, channel: stable}\n  \
                    mirrors:\n    imageDigestMirrors: [{source: a.io/x, mirrors: [m.io/x], mirrorSourcePolicy: \
                    NeverContactSource}]\n    imageTagMirrors: [{source: b.io/y, mirrors: [m.io/y]}]\n";
        let examples = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/examples")).unwrap();
        let examples = examples.map(|e| e.unwrap().path().join("wmrender.yaml")).filter(|p| p.is_file());
        let mut texts: Vec<(String, String)> =
            examples.map(|p| (p.display().to_string(), std::fs::read_to_string(&p).unwrap())).collect();
        assert!(!texts.is_empty());
        texts.push(("every section".into(), text.into()));
        for (name, text) in texts {
            let file: std::sync::Arc<str> = std::sync::Arc::from(name.as_str());
            let node = yaml::parse(&file, &std::sync::Arc::from(text)).unwrap();
            let mut diags = crate::diagnostics::Diagnostics::default();
            let inputs = schema::decode_document(node, &mut diags).unwrap();
            assert!(!diags.has_errors(), "{}", diags.render_human());
            let sets = mirrors::merge_order(&inputs, &[]);
            let (written, in_order) = streamed(&inputs, &sets);
            assert!(in_order, "{name}: an object of the inputs lists its keys out of order: {written}");
            assert_eq!(written, through_value(&inputs, &sets));
        }
    }

    /// A field left unset is not in the canonical JSON: inputs that do not use a field a later wmrender learns
    /// keep their digest. Set, it is.
    #[test]
    fn unset_fields_are_left_out() {
        let digest_of = |text: &str| {
            let file: std::sync::Arc<str> = std::sync::Arc::from("t");
            let node = yaml::parse(&file, &std::sync::Arc::from(text)).unwrap();
            let mut diags = crate::diagnostics::Diagnostics::default();
            let inputs = schema::decode_document(node, &mut diags).unwrap();
            through_value(&inputs, &mirrors::merge_order(&inputs, &[]))
        };
        let base = "apiVersion: wmrender.dev/v1alpha1\nkind: ClusterInputs\nmetadata: {name: t}\nspec:\n  \
                    infrastructureID: x-1\n  apiServerInternalURL: https://api-int.x:6443\n  platform: {none: {}}\n  \
                    byoh: []\n";
        let json = digest_of(base);
        for absent in ["controller", "proxy", "sshPublicKey", "pauseImage", "machineSets", "operator", "null"] {
            assert!(!json.contains(&format!("\"{absent}\"")), "{absent} in {json}");
        }
        assert!(json.contains("\"byoh\":[]"), "an empty BYOH list means something: {json}");
        let with = digest_of(&format!("{base}  controller: {{image: quay.io/x/wmrender:1}}\n"));
        assert!(with.contains("\"controller\":{\"image\":\"quay.io/x/wmrender:1\"}"), "{with}");
    }
}
