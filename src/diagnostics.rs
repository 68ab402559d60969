//! Diagnostics: what went wrong, where (file, line, column, field path), what was expected and what to do.
//!
//! Every stage that finds a problem in the inputs adds a [`Diagnostic`] here instead of returning early, so a user
//! sees every error of a run at once. Rendering to text (cargo style, with the source line) and to JSON lives here
//! too, so every command reports problems the same way.

use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
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

    /// Cargo-style text: the message, the place, the source line with a caret, what was expected, a hint.
    pub fn render_human(&self) -> String {
        let mut out = String::new();
        for d in self.sorted() {
            let label = match d.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
            };
            let _ = writeln!(out, "{label}: {}", d.message);
            // As rustc does: every line of one diagnostic is aligned on the width of its line number.
            let source = if d.hide_source { None } else { self.source_line(&d.loc) };
            let num = d.loc.line.to_string();
            let pad = " ".repeat(if source.is_some() { num.len() } else { 1 });
            let _ = writeln!(out, "{pad}--> {}", d.loc);
            if !d.field.is_empty() {
                let _ = writeln!(out, "{pad} = field: {}", d.field);
            }
            if let Some(line) = source {
                let caret = " ".repeat(d.loc.column.saturating_sub(1) as usize);
                let _ = writeln!(out, "{pad} |\n{num} | {line}\n{pad} | {caret}^");
            }
            if let Some(e) = &d.expected {
                let _ = writeln!(out, "{pad} = expected: {e}");
            }
            if let Some(h) = &d.hint {
                let _ = writeln!(out, "{pad} = help: {h}");
            }
            out.push('\n');
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

    fn source_line(&self, loc: &Loc) -> Option<String> {
        if loc.line == 0 {
            return None;
        }
        let text = self.sources.get(&loc.file)?;
        let line = text.lines().nth(loc.line as usize - 1)?;
        // Control characters would garble the terminal; show them escaped.
        Some(
            line.chars()
                .flat_map(
                    |c| {
                        if c.is_control() && c != '\t' { c.escape_default().collect::<Vec<_>>() } else { vec![c] }
                    },
                )
                .collect(),
        )
    }
}

impl std::fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render_human())
    }
}
