//! Editing a ResourceList as text, so that everything wmrender did not generate goes back out byte for byte.
//!
//! The KRM Functions Specification asks a function to return the items it does not touch unchanged. Re-serialising
//! them (through JSON or a YAML library) changes values and types (`0400` → `400`, `on` → `true`), key order,
//! comments and quoting. So the ResourceList is cut into text sections instead: each top-level key (from the parsed
//! tree, which knows the line of every key) and each entry of the `items` block sequence. Sections are kept, dropped
//! or appended to; none is ever rewritten.
//!
//! Why the line scan of `items` is sound: in a block sequence at indent `c`, every line of an entry's content is
//! indented more than `c` (block scalars, continued plain and quoted scalars and multi-line flow collections all must
//! be), so a line whose first character sits at column `c` or less is either the next `- ` entry, a comment, or the
//! end of the sequence.

use crate::inputs::yaml::{Node, Value, line_starts};

/// A ResourceList cut into sections of its source text.
pub struct ResourceListText<'t> {
    text: &'t str,
    /// Text before the first top-level key (a `---`, comments).
    head: &'t str,
    /// Top-level keys in order, with their full text (key line to the next key).
    sections: Vec<(String, &'t str)>,
    /// The `items` entries, when `items` is a non-empty block sequence.
    items: Option<Items<'t>>,
}

struct Items<'t> {
    /// The `items:` line and anything before the first entry (comments).
    lead: &'t str,
    /// Each entry's text, from its `-` line to the next entry.
    entries: Vec<&'t str>,
    indent: usize,
}

/// Why the text could not be cut (the parsed tree and the text disagree: a layout this module does not handle).
#[derive(Debug)]
pub struct LayoutError(pub String);

impl<'t> ResourceListText<'t> {
    /// Cuts `text`, whose parsed form is `root` (a mapping).
    pub fn cut(text: &'t str, root: &Node) -> Result<ResourceListText<'t>, LayoutError> {
        let Value::Map(entries) = &root.value else {
            return Err(LayoutError("the ResourceList is not a mapping".into()));
        };
        let starts = line_starts(text);
        let offset_of_line = |line: u32| starts.get(line as usize - 1).copied().unwrap_or(text.len());
        let mut keys: Vec<(String, usize)> = Vec::new();
        for (k, _) in entries {
            if k.loc.column != 1 {
                return Err(LayoutError(format!("top-level key `{}` is not at the start of its line", k.name)));
            }
            keys.push((k.name.to_string(), offset_of_line(k.loc.line)));
        }
        let head_end = keys.first().map_or(text.len(), |k| k.1);
        let mut sections = Vec::new();
        for (i, (name, start)) in keys.iter().enumerate() {
            let end = keys.get(i + 1).map_or(text.len(), |k| k.1);
            sections.push((name.clone(), &text[*start..end]));
        }
        let mut items = None;
        if let Some(node) = root.child("items")
            && let Value::Seq(list) = node.value.untagged()
            && !list.is_empty()
        {
            let section = sections.iter().find(|(n, _)| n == "items").map(|(_, s)| *s).unwrap_or_default();
            let cut = cut_block_sequence(section).ok_or_else(|| {
                LayoutError(
                    "`items` is not a block sequence (one `- ` entry per item); flow style is not supported".into(),
                )
            })?;
            if cut.entries.len() != list.len() {
                return Err(LayoutError(format!(
                    "found {} `- ` entries under `items` in the text but {} items in the parsed list",
                    cut.entries.len(),
                    list.len()
                )));
            }
            items = Some(cut);
        }
        Ok(ResourceListText { text, head: &text[..head_end], sections, items })
    }

    /// The text of the item at `index` of the parsed `items` list, exactly as it came (with its `- `).
    #[cfg(test)]
    pub fn item(&self, index: usize) -> Option<&'t str> {
        self.items.as_ref().and_then(|i| i.entries.get(index).copied())
    }

    /// Rebuilds the ResourceList: items whose index `keep` accepts stay as they came, `generated` items (YAML
    /// documents) are appended to `items`, `results` (a YAML block sequence, or empty for none) replaces any
    /// incoming results. Every other top-level key is returned unchanged, in its place.
    pub fn rebuild(&self, keep: &dyn Fn(usize) -> bool, generated: &[String], results: &str) -> String {
        let mut out = String::with_capacity(self.text.len() * 2);
        out.push_str(self.head);
        let mut wrote_items = false;
        for (name, section) in &self.sections {
            match name.as_str() {
                "results" => {}
                "items" => {
                    wrote_items = true;
                    self.write_items(&mut out, section, keep, generated);
                }
                _ => push_section(&mut out, section),
            }
        }
        if !wrote_items {
            self.write_items(&mut out, "", keep, generated);
        }
        if !results.is_empty() {
            out.push_str("results:\n");
            out.push_str(results);
        }
        out
    }

    fn write_items(&self, out: &mut String, section: &str, keep: &dyn Fn(usize) -> bool, generated: &[String]) {
        let (lead, entries, indent) = match &self.items {
            Some(i) => (i.lead, i.entries.as_slice(), i.indent),
            None => ("", &[][..], 0),
        };
        let kept: Vec<&str> = entries.iter().enumerate().filter(|(i, _)| keep(*i)).map(|(_, e)| *e).collect();
        if kept.is_empty() && generated.is_empty() {
            // Nothing at all: an explicit empty list (also what came in as `items: []` or no items key).
            if self.items.is_none() && !section.is_empty() {
                push_section(out, section);
            } else {
                out.push_str("items: []\n");
            }
            return;
        }
        if self.items.is_some() {
            push_section(out, lead);
        } else {
            out.push_str("items:\n");
        }
        for entry in kept {
            push_section(out, entry);
        }
        for doc in generated {
            out.push_str(&as_list_item(doc, indent));
        }
    }
}

/// Appends a section, ending it with a newline if the input's last line had none.
fn push_section(out: &mut String, section: &str) {
    out.push_str(section);
    if !section.is_empty() && !section.ends_with(['\n', '\r']) {
        out.push('\n');
    }
}

/// A YAML document as one entry of a block sequence at `indent`.
pub fn as_list_item(doc: &str, indent: usize) -> String {
    let pad = " ".repeat(indent);
    let mut out = String::new();
    for (i, line) in doc.lines().enumerate() {
        if line.is_empty() {
            out.push('\n');
            continue;
        }
        out.push_str(&pad);
        out.push_str(if i == 0 { "- " } else { "  " });
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Cuts the section of a `items:` key holding a block sequence into its entries.
fn cut_block_sequence(section: &str) -> Option<Items<'_>> {
    let starts = line_starts(section);
    let line_at = |i: usize| {
        let end = starts.get(i + 1).copied().unwrap_or(section.len());
        &section[starts[i]..end]
    };
    // The key line itself must end after the colon (or a comment), a tag or an anchor aside: `items: [...]` is
    // flow style.
    let first = line_at(0);
    let mut after_colon = first.split_once(':').map(|(_, rest)| rest.trim()).unwrap_or("");
    while after_colon.starts_with(['!', '&']) {
        after_colon = after_colon.split_once(char::is_whitespace).map_or("", |(_, rest)| rest.trim_start());
    }
    if !(after_colon.is_empty() || after_colon.starts_with('#')) {
        return None;
    }
    let mut indent = None;
    let mut entry_starts = Vec::new();
    for (i, &start) in starts.iter().enumerate().skip(1) {
        if start >= section.len() {
            break;
        }
        let line = line_at(i);
        let content = line.trim_start_matches(' ');
        let col = line.len() - content.len();
        if content.trim().is_empty() || content.starts_with('#') {
            continue;
        }
        let is_dash = content.starts_with("- ") || content.trim_end() == "-";
        match indent {
            None if is_dash => {
                indent = Some(col);
                entry_starts.push(start);
            }
            None => return None,
            Some(c) if col == c && is_dash => entry_starts.push(start),
            Some(c) if col <= c => return None,
            Some(_) => {}
        }
    }
    let indent = indent?;
    let entries = entry_starts
        .iter()
        .enumerate()
        .map(|(i, s)| &section[*s..entry_starts.get(i + 1).copied().unwrap_or(section.len())])
        .collect();
    Some(Items { lead: &section[..entry_starts[0]], entries, indent })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn parse(text: &str) -> Node {
        crate::inputs::yaml::parse(&Arc::from("t"), &Arc::from(text)).unwrap()
    }

    #[test]
    fn items_come_back_byte_for_byte_with_new_ones_appended() {
        let text = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n# lead\n- a: 0400 # octal\n  b: on\n  s: |\n    x\n\n- [1, 2]\nfunctionConfig:\n  k: v\nresults:\n- message: old\n";
        let rl = ResourceListText::cut(text, &parse(text)).unwrap();
        assert_eq!(rl.item(1), Some("- [1, 2]\n"));
        let out = rl.rebuild(&|_| true, &["x: 1\ny: 2\n".into()], "- message: new\n");
        assert_eq!(
            out,
            "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n# lead\n- a: 0400 # octal\n  b: on\n  s: |\n    x\n\n- [1, 2]\n- x: 1\n  y: 2\nfunctionConfig:\n  k: v\nresults:\n- message: new\n"
        );
    }

    #[test]
    fn indented_sequences_and_dropped_items() {
        let text = "kind: ResourceList\nitems:\n  - a: 1\n  - b: 2\n  - c: 3";
        let rl = ResourceListText::cut(text, &parse(text)).unwrap();
        let out = rl.rebuild(&|i| i != 1, &["d: 4\n".into()], "");
        assert_eq!(out, "kind: ResourceList\nitems:\n  - a: 1\n  - c: 3\n  - d: 4\n");
    }

    #[test]
    fn empty_or_missing_items() {
        for text in ["kind: ResourceList\nitems: []\n", "kind: ResourceList\n"] {
            let rl = ResourceListText::cut(text, &parse(text)).unwrap();
            assert_eq!(rl.rebuild(&|_| true, &["a: 1\n".into()], ""), "kind: ResourceList\nitems:\n- a: 1\n");
        }
        let text = "kind: ResourceList\nitems: []\n";
        let rl = ResourceListText::cut(text, &parse(text)).unwrap();
        assert_eq!(rl.rebuild(&|_| true, &[], ""), text);
    }

    /// Lines ending in `\r` alone or in `\r\n` are lines: each key is cut at its own line, so an `items: []`
    /// that gets items is replaced, never written twice.
    #[test]
    fn old_mac_and_windows_line_endings() {
        for eol in ["\r", "\r\n"] {
            let text = ["kind: ResourceList", "items: []", "functionConfig:", "  k: v", ""].join(eol);
            let rl = ResourceListText::cut(&text, &parse(&text)).unwrap();
            let out = rl.rebuild(&|_| true, &["a: 1\n".into()], "");
            assert_eq!(out.matches("items").count(), 1, "{out:?}");
            assert_eq!(out, format!("kind: ResourceList{eol}items:\n- a: 1\nfunctionConfig:{eol}  k: v{eol}"));
            let text = ["kind: ResourceList", "items:", "- a: 1", "  b: 2", "- c: 3", ""].join(eol);
            let rl = ResourceListText::cut(&text, &parse(&text)).unwrap();
            assert_eq!(rl.item(1), Some(format!("- c: 3{eol}").as_str()));
            assert_eq!(rl.rebuild(&|i| i == 1, &[], ""), format!("kind: ResourceList{eol}items:{eol}- c: 3{eol}"));
        }
    }

    /// A tag or an anchor on the `items` sequence itself: the items are still cut one by one and kept.
    #[test]
    fn a_tagged_items_sequence() {
        let text = "kind: ResourceList\nitems: !custom &all\n- a: 1\n- b: 2\n";
        let rl = ResourceListText::cut(text, &parse(text)).unwrap();
        assert_eq!(rl.rebuild(&|_| true, &["c: 3\n".into()], ""), format!("{text}- c: 3\n"));
    }

    #[test]
    fn flow_items_are_refused_not_rewritten() {
        let text = "kind: ResourceList\nitems: [{a: 1}]\n";
        assert!(ResourceListText::cut(text, &parse(text)).is_err());
    }
}
