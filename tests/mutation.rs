//! A bounded, seeded mutation test: a few thousand inputs mutated from the examples and fixtures the way a careless
//! user or a hostile file would (lines dropped, doubled, swapped or re-indented, values replaced by hostile ones,
//! stray YAML characters, truncation, a second document). For each: no panic; the inputs are either valid (and then
//! render) or rejected with diagnostics that each have a file, a line and a field path, in wmrender's words, never
//! the YAML library's or Rust's. The library is called in-process (the same calls `wmrender validate` and `render`
//! make), and a sample also goes through the binary to check the exit code.

mod support;

use std::path::{Path, PathBuf};
use wmrender::error::Error;

const MUTANTS: usize = 3000;
/// Every this many mutants, the binary runs too: exit code 0 or 2, never another.
const THROUGH_THE_BINARY: usize = 60;

/// Words of the YAML library and of Rust that must never reach a user.
const LIBRARY_VOCABULARY: &[&str] = &[
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
    "weak recursion",
    "deserializ",
    "invalid type:",
    "unwrap",
    "panicked",
];

const HOSTILE: &[&str] = &[
    "\"\"",
    "null",
    "~",
    "-1",
    "0",
    "99999999999999999999999",
    ".inf",
    "-.nan",
    "yes",
    "\"true\"",
    "\"$(id)\"",
    "[a, b]",
    "{a: 1}",
    "&x [*x]",
    "*nope",
    "\"\\u202Eevil\"",
    "\"a\\u2028b\"",
    "\"\\uFEFFx\"",
    "0x1F",
    "1e400",
    "!!binary aGk=",
    "!custom x",
    "\"a\\nb\"",
    "' spaced '",
    "\"../../etc\"",
    "\"C:\\\\x\"",
    "\"a,b\"",
    "\"<x>\"",
    "4294967296",
    "65536",
    "\"10.0.0.0/33\"",
    "\"HOST.example.com\"",
    "|\n  block\n  text",
];

const STRAY: &[&str] =
    &[":", "-", "[", "]", "{", "}", "#", "&", "*", "!", "|", ">", "'", "\"", "%", "@", "\t", "? ", ",", "\\"];

/// xorshift64*: the same seed gives the same mutants on every run.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as usize % n.max(1)
    }
}

/// The valid inputs (examples and fixtures) and the bad-input table, each read once.
fn seeds() -> [Vec<(PathBuf, String)>; 2] {
    let mut invalid = Vec::new();
    for entry in std::fs::read_dir(support::root().join("fixtures/invalid")).expect("fixtures/invalid") {
        let p = entry.expect("entry").path();
        if p.extension().is_some_and(|e| e == "yaml") {
            invalid.push(p);
        }
    }
    [support::valid_inputs(), invalid].map(|mut paths| {
        paths.sort();
        paths.into_iter().map(|p| (p.clone(), std::fs::read_to_string(&p).expect("seed"))).collect()
    })
}

fn mutate(text: &str, rng: &mut Rng) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let n = lines.len().max(1);
    // One to three mutations on top of each other.
    for _ in 0..=rng.below(3) {
        if lines.is_empty() {
            lines.push("a: 1".into());
        }
        let i = rng.below(lines.len());
        match rng.below(9) {
            0 => {
                lines.remove(i);
            }
            1 => {
                let l = lines[i].clone();
                lines.insert(i, l);
            }
            2 => {
                let j = rng.below(lines.len());
                lines.swap(i, j);
            }
            3 | 4 => {
                // Replace the value after the first `: ` (or the list item) by a hostile one.
                let l = &lines[i];
                let at = l.find(": ").map(|p| p + 2).or_else(|| l.find("- ").map(|p| p + 2));
                if let Some(p) = at {
                    let indent = " ".repeat(l.len() - l.trim_start().len() + 2);
                    let value = HOSTILE[rng.below(HOSTILE.len())].replace('\n', &format!("\n{indent}"));
                    lines[i] = format!("{}{value}", &l[..p]);
                }
            }
            5 => {
                let l = &mut lines[i];
                let mut p = rng.below(l.len() + 1);
                while !l.is_char_boundary(p) {
                    p -= 1;
                }
                l.insert_str(p, STRAY[rng.below(STRAY.len())]);
            }
            6 => {
                if rng.below(2) == 0 {
                    lines[i].insert_str(0, "  ");
                } else if lines[i].starts_with("  ") {
                    lines[i].replace_range(..2, "");
                }
            }
            7 => {
                // Truncate, but keep at least a quarter (an empty file is its own, whole-file case).
                lines.truncate((n / 4).max(1) + rng.below(n - n / 4));
            }
            _ => lines.push(format!("---\nkind: {}", ["x", "ClusterInputs", "[", "*a"][rng.below(4)])),
        }
    }
    lines.join("\n") + "\n"
}

#[test]
fn mutated_inputs_are_valid_or_rejected_with_located_diagnostics_in_wmrenders_words() {
    let seeds = seeds();
    assert!(seeds[0].len() >= 6 && seeds[1].len() >= 40, "{} + {} seeds", seeds[0].len(), seeds[1].len());
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    let mut failures = Vec::new();
    let (mut valid, mut invalid) = (0, 0);
    for n in 0..MUTANTS {
        // Half from valid inputs, so that many mutants stay valid and go on to render.
        let pool = &seeds[n % 2];
        let (seed_path, seed) = &pool[rng.below(pool.len())];
        let text = mutate(seed, &mut rng);
        // Mutants live beside their seed's copy so that relative mirror files resolve as they did.
        let path = tmp.path().join(format!("m{}.yaml", n % 4));
        copy_mirror_files(seed_path, tmp.path());
        std::fs::write(&path, &text).expect("write");
        let outcome = std::panic::catch_unwind(|| check(&path));
        let problem = match outcome {
            Err(_) => Some("panicked".to_string()),
            Ok(Ok(true)) => {
                valid += 1;
                None
            }
            Ok(Ok(false)) => {
                invalid += 1;
                None
            }
            Ok(Err(p)) => Some(p),
        };
        let problem = problem.or_else(|| (n % THROUGH_THE_BINARY == 0).then(|| exit_code_problem(&path)).flatten());
        if let Some(p) = problem {
            failures.push(format!("mutant {n} of {}: {p}\n--- input ---\n{text}", seed_path.display()));
            if failures.len() >= 5 {
                break;
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // The mix must exercise both paths, or the test proves little.
    assert!(valid >= MUTANTS / 30 && invalid >= MUTANTS / 4, "{valid} valid, {invalid} invalid");
}

/// Whether the file holds nothing but whitespace.
fn nothing_written(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|t| t.trim().is_empty())
}

/// `Ok(true)` valid and rendered, `Ok(false)` rejected properly, `Err` what was wrong with the rejection.
fn check(path: &Path) -> Result<bool, String> {
    // A mutant with nothing left but whitespace is refused as a whole file (no line, no field).
    if nothing_written(path) {
        return match wmrender::check_inputs(path, false) {
            Err(Error::Invalid(diags)) if diags.render_human().contains("the inputs file is empty") => Ok(false),
            _ => Err("an empty file is not refused as empty".into()),
        };
    }
    match wmrender::check_inputs(path, false) {
        Ok(_) => {
            let compiled = wmrender::compile(path, false).map_err(|e| format!("valid, but compile failed: {e}"))?;
            let files = compiled.output_files(None);
            if files.is_empty() {
                return Err("valid, but rendered nothing".into());
            }
            Ok(true)
        }
        Err(Error::Invalid(diags)) => {
            if !diags.has_errors() {
                return Err("rejected without an error diagnostic".into());
            }
            let json: serde_json::Value = serde_json::from_str(&diags.render_json()).map_err(|e| e.to_string())?;
            for d in json["diagnostics"].as_array().into_iter().flatten() {
                let (line, field, message) = (&d["line"], &d["field"], d["message"].as_str().unwrap_or(""));
                if d["file"].as_str().is_none_or(str::is_empty) || line.as_u64().is_none_or(|l| l == 0) {
                    return Err(format!("a diagnostic without a place: {d}"));
                }
                if field.as_str().is_none_or(str::is_empty) {
                    return Err(format!("a diagnostic without a field path: {d}"));
                }
                // wmrender's own field names may contain a vocabulary word (mirrorSourcePolicy).
                let all = format!("{message} {} {}", d["expected"], d["help"]).replace("SourcePolicy", "");
                if let Some(w) = LIBRARY_VOCABULARY.iter().find(|w| all.contains(*w)) {
                    return Err(format!("library vocabulary `{w}` in: {d}"));
                }
            }
            let _ = diags.render_human();
            Ok(false)
        }
        Err(e) => Err(format!("rejected as something other than invalid input: {e}")),
    }
}

fn exit_code_problem(path: &Path) -> Option<String> {
    let o = support::wmrender(&["validate", "-f", path.to_str().expect("utf-8")]);
    match o.status.code() {
        Some(0 | 2) if !support::stderr(&o).contains("panicked") => None,
        c => Some(format!("validate exited with {c:?}: {}", support::stderr(&o))),
    }
}

/// Seeds that reference mirror files (`mirrors/…` beside them) get them copied beside the mutant.
fn copy_mirror_files(seed: &Path, to: &Path) {
    let Some(dir) = seed.parent().map(|d| d.join("mirrors")) else { return };
    let Ok(entries) = std::fs::read_dir(&dir) else { return };
    std::fs::create_dir_all(to.join("mirrors")).expect("mkdir");
    for e in entries.flatten() {
        if e.path().is_file() {
            let _ = std::fs::copy(e.path(), to.join("mirrors").join(e.file_name()));
        }
    }
}
