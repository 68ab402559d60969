//! Bad inputs as data: every file in fixtures/invalid/ says in its header which field and line the error must
//! name (`# expect: <field> @ <line>`, `-` for no field). For each: exit code 2, no panic, the field and
//! `file:line:` in the message, the same in `validate --output json`, and an existing output directory untouched.
//! The human messages are snapshotted so a reviewer sees every wording change.

mod support;

use std::path::{Path, PathBuf};
use support::{code, stderr, wmrender};

struct Case {
    path: PathBuf,
    name: String,
    field: Option<String>,
    line: u32,
    /// The file the error is in, when it is a file the inputs reference (`@ <line> in <relative path>`).
    in_file: Option<PathBuf>,
}

fn cases() -> Vec<Case> {
    let dir = support::root().join("fixtures/invalid");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("fixtures/invalid") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue; // fixtures/invalid/mirrors/ holds files the cases reference
        }
        let text = std::fs::read_to_string(&path).expect("readable");
        let expect = text
            .lines()
            .find_map(|l| l.strip_prefix("# expect: "))
            .unwrap_or_else(|| panic!("{} has no `# expect:` line", path.display()));
        let (field, place) = expect.split_once(" @ ").expect("`field @ line`");
        let (line, in_file) = match place.split_once(" in ") {
            Some((line, rel)) => (line, Some(dir.join(rel.trim()))),
            None => (place, None),
        };
        out.push(Case {
            name: path.file_stem().expect("stem").to_string_lossy().into_owned(),
            field: (field != "-").then(|| field.to_string()),
            line: line.trim().parse().expect("a line number"),
            in_file,
            path,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

#[test]
fn there_are_at_least_thirty_bad_inputs() {
    assert!(cases().len() >= 30, "only {} cases", cases().len());
}

#[test]
fn every_bad_input_is_rejected_with_its_field_and_line_and_leaves_the_output_untouched() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("out");
    let good = support::root().join("examples/aws/wmrender.yaml");
    assert_eq!(code(&wmrender(&["render", "-f", good.to_str().unwrap(), "-o", out.to_str().unwrap()])), 0);
    let before = support::read_tree(&out);

    let mut failures = Vec::new();
    let mut messages = Vec::new();
    for case in cases() {
        let file = case.path.to_str().expect("utf-8");
        let o = wmrender(&["render", "-f", file, "-o", out.to_str().unwrap()]);
        let err = stderr(&o);
        let mut problems = Vec::new();
        if code(&o) != 2 {
            problems.push(format!("exit code {} instead of 2", code(&o)));
        }
        if err.contains("panicked") {
            problems.push("panicked".to_string());
        }
        if !o.stdout.is_empty() {
            problems.push("wrote to stdout".to_string());
        }
        let shown = case.in_file.as_deref().map(|p| p.to_string_lossy().into_owned()).unwrap_or(file.to_string());
        let place = format!("{shown}:{}:", case.line);
        if !err.contains(&place) {
            problems.push(format!("no `{place}` in the message"));
        }
        if let Some(field) = &case.field
            && !err.contains(&format!("field: {field}\n"))
        {
            problems.push(format!("no `field: {field}` in the message"));
        }
        if support::read_tree(&out) != before {
            problems.push("the output directory changed".to_string());
            // Restore it so the next case is judged on its own.
            wmrender(&["render", "-f", good.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        }
        check_json(&case, file, &shown, &mut problems);
        if !problems.is_empty() {
            failures.push(format!("{}: {}\n{err}", case.name, problems.join("; ")));
        }
        messages.push((case.name.clone(), normalise(&err, &case.path)));
    }
    assert!(failures.is_empty(), "{} bad inputs misbehaved:\n\n{}", failures.len(), failures.join("\n"));
    for (name, message) in messages {
        insta::assert_snapshot!(format!("invalid__{name}"), message);
    }
}

/// One file with independent errors of every kind (a wrong apiVersion, a missing field, an unknown key, a wrong
/// type, an unknown version, a version the platform does not run, a zone outside its region, a /33): all of them
/// in one run, each at its field and line.
#[test]
fn independent_errors_are_all_reported_in_one_run() {
    let file = support::root().join("fixtures/invalid/many-independent-errors.yaml");
    let o = wmrender(&["validate", "-f", file.to_str().unwrap(), "--output", "json"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let errors: Vec<(String, u64)> = report["diagnostics"]
        .as_array()
        .expect("diagnostics")
        .iter()
        .filter(|d| d["severity"] == "error")
        .map(|d| (d["field"].as_str().unwrap_or_default().to_string(), d["line"].as_u64().unwrap_or_default()))
        .collect();
    let expected = [
        ("apiVersion", 3),
        ("spec.apiServerInternalURL", 7),
        ("spec.windowsVersion", 13),
        ("spec.machineSets[0].zone", 15),
        ("spec.machineSets[0].windowsVersion", 16),
        ("spec.machineSets[0].replica", 17),
        ("spec.machineSets[1].replicas", 19),
        ("spec.network.serviceNetwork[0]", 21),
    ];
    for (field, line) in expected {
        assert!(errors.contains(&(field.to_string(), line)), "no error for {field} @ {line} in {errors:?}");
    }
    assert_eq!(errors.len(), expected.len(), "{errors:?}");
}

/// `validate --output json` reports the same field and line, machine-readably, on stdout.
fn check_json(case: &Case, file: &str, shown: &str, problems: &mut Vec<String>) {
    let o = wmrender(&["validate", "-f", file, "--output", "json"]);
    if code(&o) != 2 {
        problems.push(format!("validate exit code {}", code(&o)));
    }
    let report: serde_json::Value = match serde_json::from_slice(&o.stdout) {
        Ok(v) => v,
        Err(e) => return problems.push(format!("validate --output json is not JSON: {e}")),
    };
    let found = report["diagnostics"].as_array().into_iter().flatten().any(|d| {
        d["severity"] == "error"
            && d["line"] == case.line
            && d["file"] == shown
            && case.field.as_ref().is_none_or(|f| d["field"] == f.as_str())
    });
    if !found {
        problems.push(format!("validate --output json has no error at line {} for {:?}", case.line, case.field));
    }
}

/// Snapshots must not depend on where the checkout lives.
fn normalise(text: &str, path: &Path) -> String {
    let dir = path.parent().map(|d| d.display().to_string()).unwrap_or_default();
    text.replace(path.to_str().unwrap_or_default(), "INPUTS")
        .replace(&dir, "INPUTS_DIR")
        .replace(&support::root().display().to_string(), "ROOT")
}

/// `import --from-dir` with a dump that is not UTF-8: bad input (exit 2) naming the file, not a runtime failure.
#[test]
fn import_refuses_a_dump_that_is_not_text_as_bad_input() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dump = tmp.path().join("dump");
    std::fs::create_dir(&dump).expect("mkdir");
    std::fs::write(dump.join("infrastructure.yaml"), b"kind: Infrastructure\nname: \xff\xfe\n").expect("write");
    let out = tmp.path().join("wmrender.yaml");
    let o = wmrender(&["import", "--from-dir", dump.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("infrastructure.yaml is not UTF-8 text"), "{}", stderr(&o));
    assert!(!out.exists());
}

/// A large legitimate inputs file (more YAML nodes than the library's fixed default budget of 250,000) is read;
/// a small file that aliases expand into a huge tree is still refused, in wmrender's words.
#[test]
fn the_yaml_budget_grows_with_the_file_but_still_stops_alias_bombs() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let big = tmp.path().join("big.yaml");
    let aws = std::fs::read_to_string(support::root().join("examples/aws/wmrender.yaml")).expect("example");
    let mut text = aws.clone();
    text.push_str("  byoh:\n");
    for i in 0..60_000 {
        text.push_str(&format!(
            "  - address: 10.{}.{}.{}\n    username: Administrator\n",
            i >> 16,
            (i >> 8) & 255,
            i & 255
        ));
    }
    std::fs::write(&big, &text).expect("write");
    let o = wmrender(&["validate", "-f", big.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));

    let bomb = tmp.path().join("bomb.yaml");
    let mut text = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 0..9 {
        let prev = if i == 0 { "a".to_string() } else { format!("b{}", i - 1) };
        text.push_str(&format!("b{i}: &b{i} [{}]\n", vec![format!("*{prev}"); 10].join(", ")));
    }
    std::fs::write(&bomb, text).expect("write");
    let o = wmrender(&["validate", "-f", bomb.to_str().unwrap()]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("too much data to read safely"), "{err}");
    assert!(!err.to_lowercase().contains("budget"), "{err}");
}
