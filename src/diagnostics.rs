//! Diagnostics: what went wrong, where (file, line, column, field path), what was expected and what to do.
//!
//! Every stage that finds a problem in the inputs adds a [`Diagnostic`] here instead of returning early, so a user
//! sees every error of a run at once. Rendering to text (cargo style, with the source line) and to JSON lives here
//! too, so every command reports problems the same way.

use annotate_snippets::{AnnotationKind, Element, Level, Origin, Renderer, Snippet};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::IsTerminal as _;
use std::sync::Arc;

/// A place in an input file. Lines and columns are 1-based and count characters, as editors do.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Loc {
    pub file: Arc<str>,
    pub line: u32,
    pub column: u32,
}

impl Loc {
    /// A location for problems that concern a whole file (it could not be read, it is empty).
    pub fn file_only(file: &Arc<str>) -> Loc {
        Loc { file: file.clone(), line: 0, column: 0 }
    }
}

impl std::fmt::Display for Loc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.file)
        } else {
            write!(f, "{}:{}:{}", self.file, self.line, self.column)
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    pub severity: Severity,
    #[serde(flatten)]
    pub loc: Loc,
    /// The field path in the inputs, e.g. `spec.machineSets[0].name`. Empty for whole-file problems.
    pub field: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    /// What to do about it; `help` in both the text and the JSON.
    #[serde(rename = "help", skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// The source line is not shown (the value there is secret, e.g. a private key pasted as a public one).
    #[serde(skip)]
    pub hide_source: bool,
}

impl Diagnostic {
    pub fn error(loc: &Loc, field: &str, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            loc: loc.clone(),
            field: field.to_string(),
            message: message.into(),
            expected: None,
            hint: None,
            hide_source: false,
        }
    }

    pub fn warning(loc: &Loc, field: &str, message: impl Into<String>) -> Diagnostic {
        Diagnostic { severity: Severity::Warning, ..Diagnostic::error(loc, field, message) }
    }

    pub fn expected(mut self, expected: impl Into<String>) -> Diagnostic {
        self.expected = Some(expected.into());
        self
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Diagnostic {
        self.hint = Some(hint.into());
        self
    }

    /// Keeps the source line out of the text report: the place and field are still given.
    pub fn without_source(mut self) -> Diagnostic {
        self.hide_source = true;
        self
    }
}

/// The diagnostics of one run, with the text of every file they point into (for the source snippets).
#[derive(Clone, Debug, Default)]
pub struct Diagnostics {
    items: Vec<Diagnostic>,
    sources: BTreeMap<Arc<str>, Arc<str>>,
}

impl Diagnostics {
    pub fn push(&mut self, d: Diagnostic) {
        self.items.push(d);
    }

    /// Remembers a file's text so that diagnostics pointing into it can show the offending line.
    pub fn add_source(&mut self, file: &Arc<str>, text: &Arc<str>) {
        self.sources.insert(file.clone(), text.clone());
    }

    pub fn extend(&mut self, other: Diagnostics) {
        self.items.extend(other.items);
        self.sources.extend(other.sources);
    }

    /// The same diagnostics, each passed through `f` (to point them into another copy of a file), sources kept.
    pub fn map(mut self, f: impl FnMut(Diagnostic) -> Diagnostic) -> Diagnostics {
        self.items = self.items.into_iter().map(f).collect();
        self
    }

    /// `--strict`: every warning becomes an error.
    pub fn promote_warnings(&mut self) {
        for d in &mut self.items {
            d.severity = Severity::Error;
        }
    }

    pub fn has_errors(&self) -> bool {
        self.items.iter().any(|d| d.severity == Severity::Error)
    }

    pub fn error_count(&self) -> usize {
        self.items.iter().filter(|d| d.severity == Severity::Error).count()
    }

    pub fn warning_count(&self) -> usize {
        self.items.iter().filter(|d| d.severity == Severity::Warning).count()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// In file order (then line, column), so the report reads top to bottom like the file.
    pub fn sorted(&self) -> Vec<&Diagnostic> {
        let mut v: Vec<&Diagnostic> = self.items.iter().collect();
        v.sort_by(|a, b| (&a.loc, a.severity, &a.field).cmp(&(&b.loc, b.severity, &b.field)));
        v
    }

    /// Cargo-style text without colour: the message, the place, the source line with a caret, the field, what
    /// was expected, a hint. For files, pipes and tests.
    pub fn render_human(&self) -> String {
        self.render_text(Renderer::plain())
    }

    /// The same for stderr: coloured when stderr is a terminal and `NO_COLOR` is not set, plain otherwise.
    pub fn render_for_stderr(&self) -> String {
        let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        self.render_text(if colour { Renderer::styled() } else { Renderer::plain() })
    }

    /// Each diagnostic through annotate-snippets (rustc's and cargo's renderer: carets placed by display width,
    /// tabs expanded, control characters shown as their Unicode pictures), then the count.
    fn render_text(&self, renderer: Renderer) -> String {
        // Whole lines, however long: the caret may point anywhere in a long key or URL.
        let renderer = renderer.term_width(usize::MAX / 2);
        let mut out = String::new();
        // Built once per file: finding each diagnostic's line by scanning the text from its start made a file with
        // thousands of errors (one per key of a huge mapping) take time quadratic in its size.
        let mut lines: BTreeMap<&str, LineIndex> = BTreeMap::new();
        for d in self.sorted() {
            let level = match d.severity {
                Severity::Error => Level::ERROR,
                Severity::Warning => Level::WARNING,
            };
            let file = d.loc.file.to_string();
            let source = self.sources.get(&d.loc.file).filter(|_| !d.hide_source);
            let line = source.and_then(|text| {
                let index = lines.entry(&d.loc.file).or_insert_with(|| LineIndex::new(text));
                index.line(text, d.loc.line)
            });
            let place: Element = match line {
                Some(line) => {
                    // Loc columns count characters; annotate-snippets takes a byte range.
                    let at = line.char_indices().nth(d.loc.column.saturating_sub(1) as usize);
                    let span = at.map_or(line.len()..line.len(), |(i, c)| i..i + c.len_utf8());
                    Snippet::source(line)
                        .line_start(d.loc.line as usize)
                        .path(file)
                        .annotation(AnnotationKind::Primary.span(span))
                        .into()
                }
                None if d.loc.line == 0 => Origin::path(file).into(),
                None => Origin::path(file).line(d.loc.line as usize).char_column(d.loc.column as usize).into(),
            };
            let notes = [("field", Some(&d.field).filter(|f| !f.is_empty())), ("expected", d.expected.as_ref())];
            let group = level
                .primary_title(d.message.as_str())
                .element(place)
                .elements(
                    notes
                        .into_iter()
                        .filter_map(|(name, text)| Some(Level::NOTE.with_name(name).message(text?.as_str()))),
                )
                .elements(d.hint.as_deref().map(|h| Level::HELP.message(h)));
            out.push_str(&renderer.render(&[group]));
            out.push_str("\n\n");
        }
        let (e, w) = (self.error_count(), self.warning_count());
        let counted = |n: usize, what: &str| if n == 1 { format!("1 {what}") } else { format!("{n} {what}s") };
        match (e, w) {
            (0, 0) => {}
            (_, 0) => {
                let _ = writeln!(out, "{}", counted(e, "error"));
            }
            (0, _) => {
                let _ = writeln!(out, "{}", counted(w, "warning"));
            }
            _ => {
                let _ = writeln!(out, "{}, {}", counted(e, "error"), counted(w, "warning"));
            }
        }
        out
    }

    /// Machine-readable form: `{"diagnostics": [...], "errors": N, "warnings": N}`.
    pub fn render_json(&self) -> String {
        #[derive(Serialize)]
        struct Report<'a> {
            diagnostics: Vec<&'a Diagnostic>,
            errors: usize,
            warnings: usize,
        }
        let report = Report { diagnostics: self.sorted(), errors: self.error_count(), warnings: self.warning_count() };
        // Serialising plain structs of strings and numbers cannot fail.
        serde_json::to_string_pretty(&report).unwrap_or_default() + "\n"
    }
}

/// Where each line of `text` starts, lines ending as YAML ends them: `\r\n`, `\r` or `\n` (the parser's line
/// numbers count a lone `\r`, as old Mac files have it, as a line break too).
pub fn line_starts(text: &str) -> Vec<usize> {
    let bytes = text.as_bytes();
    let mut starts = vec![0];
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'\n' || (b == b'\r' && bytes.get(i + 1) != Some(&b'\n')) {
            starts.push(i + 1);
        }
    }
    starts
}

/// Where each line of a text starts.
struct LineIndex(Vec<usize>);

impl LineIndex {
    /// Lines as the YAML parser counts them (`\r\n`, `\r` and `\n` end a line), so the line a diagnostic names is
    /// the line shown.
    fn new(text: &str) -> LineIndex {
        LineIndex(line_starts(text))
    }

    /// Line `number` (from 1) as written, without its line ending (the renderer makes control characters visible).
    fn line<'t>(&self, text: &'t str, number: u32) -> Option<&'t str> {
        let n = (number as usize).checked_sub(1)?;
        let start = *self.0.get(n).filter(|&&start| start < text.len())?;
        let end = self.0.get(n + 1).copied().unwrap_or(text.len());
        let line = text.get(start..end)?;
        Some(line.strip_suffix("\r\n").or_else(|| line.strip_suffix(['\n', '\r'])).unwrap_or(line))
    }
}

impl std::fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render_human())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The index gives the same lines as `str::lines` where `\n` ends lines, and also counts a lone `\r` as a line
    /// end, as YAML does; none past the last.
    #[test]
    fn line_index_reads_lines_as_yaml_counts_them() {
        for text in ["", "a", "a\n", "a\nb", "a\r\nb\r\n", "\n\n", "é\nü\r\n"] {
            let index = LineIndex::new(text);
            let expected: Vec<&str> = text.lines().collect();
            let read: Vec<&str> = (1..).map_while(|n| index.line(text, n)).collect();
            assert_eq!(read, expected, "{text:?}");
            assert_eq!(index.line(text, 0), None);
        }
        for (text, expected) in [("a\rb\r", vec!["a", "b"]), ("x\n\r\n\ry", vec!["x", "", "", "y"])] {
            let index = LineIndex::new(text);
            let read: Vec<&str> = (1..).map_while(|n| index.line(text, n)).collect();
            assert_eq!(read, expected, "{text:?}");
        }
    }

    fn one(text: &str, line: u32, column: u32) -> Diagnostics {
        let file: Arc<str> = Arc::from("w.yaml");
        let mut d = Diagnostics::default();
        d.add_source(&file, &Arc::from(text));
        let loc = Loc { file, line, column };
        d.push(Diagnostic::error(&loc, "spec.x", "bad value").expected("a good one").hint("fix it"));
        d
    }

    #[test]
    fn the_caret_sits_under_the_column_whatever_precedes_it() {
        // Column 14 is the `2` of "2023", after a tab and three double-width characters.
        let text = one("a:\t\"管理者\", v: 2023\n", 1, 14).render_human();
        let lines: Vec<&str> = text.lines().collect();
        let source = lines.iter().find(|l| l.starts_with("1 | ")).expect("the source line");
        let caret = lines.iter().find(|l| l.trim_end().ends_with('^')).expect("the caret line");
        let width =
            |s: &str| s.chars().map(|c| if ('\u{3000}'..'\u{9fff}').contains(&c) { 2 } else { 1 }).sum::<usize>();
        let under = &source[..source.find("2023").expect("value")];
        assert_eq!(width(under), caret.find('^').expect("caret"), "{text}");
        assert!(!source.contains('\t'), "tabs are expanded: {text}");
        assert!(text.contains("--> w.yaml:1:14") && text.contains("= field: spec.x"), "{text}");
        assert!(text.contains("= expected: a good one") && text.contains("= help: fix it"), "{text}");
    }

    #[test]
    fn control_characters_in_the_source_reach_the_terminal_as_pictures() {
        let text = one("name: a\u{1b}[31mb\n", 1, 7).render_human();
        assert!(!text.contains('\u{1b}'), "{text:?}");
        assert!(text.contains('\u{241b}'), "{text}");
    }

    #[test]
    fn a_hidden_source_keeps_the_place_and_drops_the_line() {
        let file: Arc<str> = Arc::from("w.yaml");
        let mut d = Diagnostics::default();
        d.add_source(&file, &Arc::from("key: SECRET-VALUE\n"));
        let loc = Loc { file, line: 1, column: 6 };
        d.push(Diagnostic::error(&loc, "spec.key", "refused").without_source());
        let text = d.render_human();
        assert!(!text.contains("SECRET-VALUE"), "{text}");
        assert!(text.contains("--> w.yaml:1:6") && text.contains("= field: spec.key"), "{text}");
    }

    #[test]
    fn colour_only_when_asked_for() {
        let d = one("a: 1\n", 1, 4);
        assert!(!d.render_human().contains('\u{1b}'));
        assert!(d.render_text(Renderer::styled()).contains('\u{1b}'));
    }
}
