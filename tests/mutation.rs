//! Bounded, seeded mutation tests: inputs mutated from the examples and fixtures the way a careless user or a
//! hostile file would (lines dropped, doubled, swapped or re-indented, values replaced by hostile ones, stray YAML
//! characters, truncation, a second document; bytes that are not UTF-8, old Mac line endings, blocks of comments,
//! tags). For each: no panic; the input is either read or refused as input (exit 2, never 3), every refusal naming a
//! file and, where there is one, a line, in wmrender's words, never the YAML library's or Rust's. The library is
//! called in-process (the same calls the commands make), and a sample also goes through the binary to check the exit
//! code and what it prints.
//!
//! The first test mutates inputs files; the second every other reader (mirror files, KRM ResourceLists, kustomize's
//! generator config, inventories, import dumps, `diff --base` revisions, `-o` paths): 11,000 mutants together. A
//! file outside the scratch repository holds a secret the mutants point at (`../outside/secret.yaml`, its absolute
//! path); it must never be read into anything printed, and nothing outside the output may be written.

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
    "../outside/secret.yaml",
    "\"../../outside/secret.yaml\"",
    "!!timestamp 2001-12-14",
    "!!float 2",
    "!Ref x",
    "\"a(b)c\"",
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
                // wmrender's own field names may contain a vocabulary word (mirrorSourcePolicy), and what it quotes
                // in backticks is the user's own text (a mutated key such as `mirrorSource-Policy`).
                let all = unquoted(&format!("{message} {} {}", d["expected"], d["help"])).replace("SourcePolicy", "");
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

/// What the secret file outside the repository holds: it must never appear in anything wmrender prints.
const SECRET: &str = "SECRET-7f3c9a-outside-the-repository";

/// The mutations of [`mutate`] and, sometimes, what text cannot show: a byte that is not UTF-8, old Mac or Windows
/// line endings, a block of comment lines between a key and its value.
fn mutate_bytes(text: &str, rng: &mut Rng) -> Vec<u8> {
    let mut text = mutate(text, rng);
    match rng.below(12) {
        0 => {
            let at = rng.below(text.len() + 1);
            let mut bytes = text.into_bytes();
            bytes.insert(at, [0xff, 0xc3, 0x80][rng.below(3)]);
            return bytes;
        }
        1 => text = text.replace('\n', "\r"),
        2 => text = text.replace('\n', "\r\n"),
        3 => {
            let lines: Vec<&str> = text.lines().collect();
            let at = rng.below(lines.len() + 1);
            let comments = "# retired\n".repeat(40);
            text = format!("{}\n{comments}{}", lines[..at].join("\n"), lines[at..].join("\n"));
        }
        _ => {}
    }
    text.into_bytes()
}

/// A reader of YAML other than the inputs file, and how many mutants it gets.
#[derive(Clone, Copy, Debug)]
enum Reader {
    MirrorFile,
    KrmStdin,
    KrmConfig,
    Inventory,
    ImportDump,
}

const READERS: [(Reader, usize); 5] = [
    (Reader::MirrorFile, 1200),
    (Reader::KrmStdin, 2400),
    (Reader::KrmConfig, 1200),
    (Reader::Inventory, 1200),
    (Reader::ImportDump, 1200),
];

/// Every this many mutants of a reader, the binary runs too.
const READER_THROUGH_THE_BINARY: usize = 40;

/// The scratch repository every reader's mutants live in, and the secret beside it.
struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        let b = Sandbox { dir: tempfile::tempdir().expect("tempdir") };
        std::fs::create_dir_all(b.repo().join(".git")).expect("repo");
        std::fs::create_dir_all(b.root().join("outside")).expect("outside");
        std::fs::write(b.root().join("outside/secret.yaml"), format!("{SECRET}: {SECRET}\n")).expect("secret");
        let key = b.repo().join("id");
        support::sshd::keygen(&["-q", "-t", "ed25519", "-N", "", "-f", key.to_str().expect("utf-8")]);
        b
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn repo(&self) -> PathBuf {
        self.dir.path().join("repo")
    }
}

/// The seeds of each reader: (name, text).
fn reader_seeds(reader: Reader) -> Vec<(String, String)> {
    let root = support::root();
    let read = |p: PathBuf| (p.display().to_string(), std::fs::read_to_string(&p).expect("seed"));
    let files = |dir: &str| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
            .map(|d| d.flatten().map(|e| e.path()).filter(|p| p.is_file()).collect())
            .unwrap_or_default();
        v.sort();
        v
    };
    match reader {
        Reader::MirrorFile => ["fixtures/proxy-mirrors/mirrors", "fixtures/invalid/mirrors"]
            .iter()
            .flat_map(|d| files(d))
            .chain([root.join("fixtures/import/aws/mirrors.yaml")])
            .map(read)
            .collect(),
        Reader::KrmStdin => files("fixtures/krm").into_iter().map(read).collect(),
        Reader::KrmConfig => {
            let mut v: Vec<(String, String)> = support::valid_inputs().into_iter().map(read).collect();
            v.push(read(root.join("examples/kustomize/app/wmrender.yaml")));
            v
        }
        Reader::Inventory => vec![
            ("inventory".into(), INVENTORY.to_string()),
            ("inventory, windows".into(), "nodes:\n- address: win-a.example.com\n  user: Administrator\n".into()),
        ],
        Reader::ImportDump => {
            ["aws", "azure", "vsphere"].iter().flat_map(|p| files(&format!("fixtures/import/{p}"))).map(read).collect()
        }
    }
}

const INVENTORY: &str = "nodes:
- name: node-a
  address: 127.0.0.1
  port: 2222
  user: root
  profile: posix
  root: /srv/staging/node-a
- address: win-b.example.com
  name: win-b
  user: Administrator
  port: 22
";

/// The inputs the mirror-file mutants are referenced from.
const MIRROR_INPUTS: &str = "apiVersion: wmrender.dev/v1alpha1
kind: ClusterInputs
metadata:
  name: fuzz
spec:
  infrastructureID: fuzz-00000
  apiServerInternalURL: https://api-int.fuzz.example.com:6443
  platform:
    none: {}
  byoh:
  - address: 10.0.0.5
    username: Administrator
  network:
    hybridClusterNetwork: [10.132.0.0/14]
  mirrors:
    files: [mirror.yaml]
";

/// Checks that every diagnostic names a file and a line, says nothing of the secret and nothing in the library's
/// words.
fn located(diags: &wmrender::diagnostics::Diagnostics) -> Result<(), String> {
    let json: serde_json::Value = serde_json::from_str(&diags.render_json()).map_err(|e| e.to_string())?;
    for d in json["diagnostics"].as_array().into_iter().flatten() {
        if d["file"].as_str().is_none_or(str::is_empty) || d["line"].as_u64().is_none_or(|l| l == 0) {
            return Err(format!("a diagnostic without a file and line: {d}"));
        }
        let all = unquoted(&format!("{} {} {}", d["message"], d["expected"], d["help"])).replace("SourcePolicy", "");
        if let Some(w) = LIBRARY_VOCABULARY.iter().find(|w| all.contains(*w)) {
            return Err(format!("library vocabulary `{w}` in: {d}"));
        }
    }
    secret_free(&diags.render_human())
}

/// The text without its backtick-quoted spans: those quote the input (a key, a value), not wmrender's words.
fn unquoted(text: &str) -> String {
    text.split('`').step_by(2).collect::<Vec<_>>().join(" ")
}

fn secret_free(text: &str) -> Result<(), String> {
    if text.contains(SECRET) { Err(format!("the file outside the repository was shown:\n{text}")) } else { Ok(()) }
}

/// Every `-->` place in a cargo-style report has a line and column.
fn places_have_lines(stderr: &str) -> Result<(), String> {
    let place = regex::Regex::new(r":\d+:\d+$").expect("pattern");
    match stderr.lines().map(str::trim).find(|l| l.starts_with("--> ") && !place.is_match(l)) {
        Some(l) => Err(format!("a place without a line: `{l}` in\n{stderr}")),
        None => Ok(()),
    }
}

/// `Ok(true)` read, `Ok(false)` refused properly, `Err` what was wrong.
fn check_reader(reader: Reader, sandbox: &Sandbox, bytes: &[u8]) -> Result<bool, String> {
    use wmrender::error::Error;
    let repo = sandbox.repo();
    match reader {
        Reader::MirrorFile => {
            std::fs::write(repo.join("mirror-inputs.yaml"), MIRROR_INPUTS).map_err(|e| e.to_string())?;
            std::fs::write(repo.join("mirror.yaml"), bytes).map_err(|e| e.to_string())?;
            match wmrender::check_inputs(&repo.join("mirror-inputs.yaml"), false) {
                Ok(_) => Ok(true),
                Err(Error::Invalid(d)) => located(&d).map(|()| false),
                Err(e) => Err(format!("refused as something other than input: {e}")),
            }
        }
        Reader::KrmStdin => {
            let out = wmrender::emit::krm::run_bytes(bytes.to_vec(), &repo);
            secret_free(&out.stdout)?;
            secret_free(&out.stderr)?;
            places_have_lines(&out.stderr)?;
            let file: std::sync::Arc<str> = std::sync::Arc::from("stdout");
            let list = wmrender::inputs::yaml::parse(&file, &std::sync::Arc::from(out.stdout.as_str()))
                .map_err(|e| format!("stdout is not YAML ({}):\n{}", e.message, out.stdout))?;
            let kind = list.child("kind").map(|k| format!("{:?}", k.value)).unwrap_or_default();
            if !kind.contains("ResourceList") {
                return Err(format!("stdout is not a ResourceList:\n{}", out.stdout));
            }
            if out.failed && !out.stdout.contains("severity: error") {
                return Err(format!("failed without an error result:\n{}", out.stdout));
            }
            Ok(!out.failed)
        }
        Reader::KrmConfig => {
            let app = repo.join("app");
            std::fs::create_dir_all(&app).map_err(|e| e.to_string())?;
            std::fs::write(app.join("kustomization.yaml"), "generators:\n- wmrender.yaml\n")
                .map_err(|e| e.to_string())?;
            std::fs::write(app.join("wmrender.yaml"), bytes).map_err(|e| e.to_string())?;
            match wmrender::emit::kustomize_plugin::run(&app.join("wmrender.yaml"), &app) {
                Ok((stream, warnings)) => secret_free(&stream).and_then(|()| located(&warnings)).map(|()| true),
                Err(d) => located(&d).map(|()| false),
            }
        }
        Reader::Inventory => {
            std::fs::write(repo.join("nodes.yaml"), bytes).map_err(|e| e.to_string())?;
            match wmrender::delivery::inventory::load(&repo.join("nodes.yaml")) {
                Ok(_) => Ok(true),
                Err(d) => located(&d).map(|()| false),
            }
        }
        Reader::ImportDump => {
            let dump = repo.join("dump");
            let _ = std::fs::remove_dir_all(&dump);
            std::fs::create_dir_all(&dump).map_err(|e| e.to_string())?;
            for f in ["network-config.yaml", "network-operator.yaml", "worker-machinesets.yaml", "proxy.yaml"] {
                let _ = std::fs::copy(support::root().join("fixtures/import/aws").join(f), dump.join(f));
            }
            std::fs::write(dump.join("mutant.yaml"), bytes).map_err(|e| e.to_string())?;
            let opts = wmrender::import::ImportOptions {
                source: "dump".into(),
                image: Some("ami-0123456789abcdef0".into()),
                ssh_public_key: Some(
                    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEivnOQOwpFfgIiplCNH1jWkEmNppWw2KdSLHn7d3tKp".into(),
                ),
            };
            let imported = wmrender::import::objects_from_dir(&dump).and_then(|o| wmrender::import::import(&o, &opts));
            match imported {
                Ok(i) => secret_free(&i.inputs).map(|()| true),
                Err(Error::Invalid(d)) => located(&d).map(|()| false),
                Err(Error::Usage(m)) if m.contains("dump") || m.contains("--image") => secret_free(&m).map(|()| false),
                Err(Error::Usage(m)) => Err(format!("a refusal that names no file: {m}")),
                Err(e) => Err(format!("refused as something other than input: {e}")),
            }
        }
    }
}

/// The reader's command, run by the binary in the sandbox on what the in-process check just wrote: the exit code
/// is 0 or 2 (never 3, a panic or a signal), a refusal prints nothing on stdout where a plugin reads it, every place
/// has a line, and the secret never shows.
fn reader_through_the_binary(reader: Reader, sandbox: &Sandbox, bytes: &[u8]) -> Option<String> {
    let repo = sandbox.repo();
    let (args, cwd, stdin): (Vec<&str>, PathBuf, Option<&[u8]>) = match reader {
        Reader::MirrorFile => (vec!["render", "-f", "mirror-inputs.yaml", "--stdout"], repo.clone(), None),
        Reader::KrmStdin => (vec!["krm"], repo.clone(), Some(bytes)),
        Reader::KrmConfig => (vec!["krm", "wmrender.yaml"], repo.join("app"), None),
        // Valid inventories would go on to connect to the nodes; only a refusal is the reader's.
        Reader::Inventory => (
            vec!["sync", "--rendered", "no-render", "--inventory", "nodes.yaml", "--identity", "id"],
            repo.clone(),
            None,
        ),
        Reader::ImportDump => (
            vec![
                "import",
                "--from-dir",
                "dump",
                "--image",
                "ami-0123456789abcdef0",
                "--ssh-public-key",
                "id.pub",
                "-o",
                "imported/wmrender.yaml",
                "--force",
            ],
            repo.clone(),
            None,
        ),
    };
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_wmrender"));
    cmd.args(&args).current_dir(&cwd).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    cmd.stdin(if stdin.is_some() { std::process::Stdio::piped() } else { std::process::Stdio::null() });
    let mut child = cmd.spawn().expect("running wmrender");
    if let Some(bytes) = stdin {
        use std::io::Write;
        let _ = child.stdin.take().expect("stdin").write_all(bytes);
    }
    let o = child.wait_with_output().expect("output");
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    let code = o.status.code();
    let problem = match code {
        Some(0 | 2) if !err.contains("panicked") => None,
        _ => Some(format!("exit {code:?}")),
    }
    .or_else(|| {
        let plugin = matches!(reader, Reader::KrmConfig | Reader::MirrorFile);
        (plugin && code == Some(2) && !out.is_empty()).then(|| "a refusal printed on stdout".to_string())
    })
    .or_else(|| places_have_lines(&err).err())
    .or_else(|| secret_free(&format!("{out}{err}")).err());
    problem.map(|p| format!("{args:?}: {p}\n{err}"))
}

#[test]
fn every_reader_is_read_or_refuses_as_input_with_located_diagnostics() {
    let sandbox = Sandbox::new();
    let started = std::time::Instant::now();
    let mut rng = Rng(0x0bad_5eed_c0ff_ee42);
    let mut failures = Vec::new();
    let mut total = 0;
    for (reader, count) in READERS {
        let seeds = reader_seeds(reader);
        assert!(!seeds.is_empty(), "{reader:?} has no seeds");
        let (mut read, mut refused) = (0, 0);
        for n in 0..count {
            let (seed_name, seed) = &seeds[rng.below(seeds.len())];
            let bytes = mutate_bytes(seed, &mut rng);
            total += 1;
            let outcome = std::panic::catch_unwind(|| check_reader(reader, &sandbox, &bytes));
            let problem = match outcome {
                Err(_) => Some("panicked".to_string()),
                Ok(Ok(true)) => {
                    read += 1;
                    None
                }
                Ok(Ok(false)) => {
                    refused += 1;
                    None
                }
                Ok(Err(p)) => Some(p),
            };
            let through_binary = n % READER_THROUGH_THE_BINARY == 0 && !matches!(reader, Reader::Inventory)
                || matches!(reader, Reader::Inventory) && n % 10 == 0 && problem.is_none() && refused > 0;
            let problem = problem
                .or_else(|| through_binary.then(|| reader_through_the_binary(reader, &sandbox, &bytes)).flatten());
            if let Some(p) = problem {
                failures.push(format!(
                    "{reader:?} mutant {n} of {seed_name}: {p}\n--- input ---\n{}",
                    String::from_utf8_lossy(&bytes)
                ));
                if failures.len() >= 5 {
                    break;
                }
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n\n"));
        // The mix must exercise both paths, or the test proves little.
        assert!(read >= count / 50 && refused >= count / 10, "{reader:?}: {read} read, {refused} refused");
        eprintln!("{reader:?}: {count} mutants, {read} read, {refused} refused");
    }
    eprintln!("{total} mutants of the readers in {:?}", started.elapsed());
}

/// Hostile `diff --base` revisions and `-o` paths, through the binary: exit 0, 1 (a difference) or 2, never 3; a
/// refusal prints nothing on stdout; nothing is written outside the output (no temporary tree left, nothing in the
/// repository or beside it), and the secret beside the repository is never shown.
#[test]
fn revisions_and_output_paths_are_read_or_refused_as_input() {
    let sandbox = Sandbox::new();
    let repo = sandbox.repo();
    std::fs::remove_dir_all(repo.join(".git")).expect("a real repository instead");
    let git = |args: &[&str]| {
        let o = std::process::Command::new("git").args(args).current_dir(&repo).output().expect("git");
        assert!(o.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    };
    let example = std::fs::read_to_string(support::root().join("examples/aws/wmrender.yaml")).expect("example");
    std::fs::write(repo.join("wmrender.yaml"), &example).expect("inputs");
    git(&["init", "-q", "-b", "main"]);
    git(&["-c", "user.name=t", "-c", "user.email=t@example.com", "add", "wmrender.yaml"]);
    git(&["-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "inputs"]);
    std::fs::write(repo.join("wmrender.yaml"), example.replace("replicas: 2", "replicas: 3")).expect("change");
    std::os::unix::fs::symlink("loop", repo.join("loop")).expect("link");
    std::fs::write(repo.join("a-file"), "x").expect("file");
    let listing = |dir: &Path| -> Vec<String> {
        let mut v: Vec<String> = walkdir::WalkDir::new(dir)
            .follow_links(false)
            .into_iter()
            .flatten()
            .filter(|e| !e.path().components().any(|c| c.as_os_str() == ".git" || c.as_os_str() == "out-ok"))
            .map(|e| e.path().display().to_string())
            .collect();
        v.sort();
        v
    };
    let before = listing(sandbox.root());
    let revisions = [
        "HEAD",
        "HEAD~1",
        "HEAD~999",
        "main",
        "--output=../outside/x",
        "-x",
        "",
        "HEAD:../..",
        "../../outside/secret.yaml",
        ":/",
        "HEAD^{tree}",
        "@{-1}",
        "a b",
        "\u{1b}[31m",
        "$(touch pwned)",
        "refs/heads/../../x",
        "HEAD;id",
        "main..HEAD",
    ];
    let paths = [
        "out-ok",
        "out-ok/../out-ok",
        "",
        ".",
        "..",
        "/",
        "loop",
        "loop/x",
        "a-file",
        "a-file/x",
        "-x",
        "--force",
        "\u{202e}gnp",
        "../outside/secret.yaml",
        "../outside",
        "out\nnewline",
    ];
    let mut rng = Rng(0x07e5_70f0_ba5e);
    let mut failures = Vec::new();
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_wmrender"))
            .args(args)
            .current_dir(&repo)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("running wmrender")
    };
    for n in 0..120 {
        let mut rev = revisions[rng.below(revisions.len())].to_string();
        if n % 3 == 1 {
            let at = (0..=rev.len()).filter(|i| rev.is_char_boundary(*i)).nth(rng.below(rev.len() + 1)).unwrap_or(0);
            rev.insert_str(at, STRAY[rng.below(STRAY.len())]);
        }
        let o = run(&["diff", "-f", "wmrender.yaml", "--base", &rev]);
        let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        match o.status.code() {
            Some(0 | 1) => {}
            Some(2) if out.is_empty() => {}
            c => failures.push(format!("diff --base {rev:?}: exit {c:?}, stdout {out:?}\n{err}")),
        }
        let mut path = paths[rng.below(paths.len())].to_string();
        if n % 4 == 2 {
            path = format!("{path}{}", "n".repeat(200 + rng.below(80)));
        }
        let o = run(&["render", "-f", "wmrender.yaml", "-o", &path]);
        let err = String::from_utf8_lossy(&o.stderr);
        if !matches!(o.status.code(), Some(0 | 2)) || err.contains(SECRET) {
            failures.push(format!("render -o {path:?}: exit {:?}\n{err}", o.status.code()));
        }
        // A temporary tree left beside an output, or anything a hostile argument made, is written outside it.
        let stray = listing(sandbox.root()).into_iter().find(|p| p.contains(".wmrender-") || p.contains("pwned"));
        if let Some(p) = stray {
            failures.push(format!("render -o {path:?} or diff --base {rev:?} left {p}"));
        }
        // What a render wrote is its output directory, wherever -o put it: cleared, so that the final listing
        // compares everything else.
        let fixed = ["wmrender.yaml", "loop", "a-file", ".git", "id", "id.pub", "repo", "outside", "secret.yaml"];
        for dir in [sandbox.root().to_path_buf(), repo.clone(), sandbox.root().join("outside")] {
            for entry in std::fs::read_dir(&dir).expect("listing").flatten() {
                if !fixed.contains(&entry.file_name().to_string_lossy().as_ref()) {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
        if failures.len() >= 5 {
            break;
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    let after = listing(sandbox.root());
    assert_eq!(after, before, "files were written outside the output");
}
