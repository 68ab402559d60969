//! `wmrender krm`: a KRM function (kpt, kustomize). A `config.kubernetes.io/v1` ResourceList comes in on stdin with a
//! ClusterInputs object as its `functionConfig`; the same ResourceList goes out on stdout with the rendered cluster
//! objects added to `items` and every diagnostic as a `results` entry (and on stderr, in the cargo style, since
//! kustomize shows only the function's stderr).
//!
//! The contract, from the KRM Functions Specification and from what kpt does with the output:
//! - items wmrender did not generate go back byte for byte (see [`super::resource_list_text`]), the functionConfig
//!   item included: kpt treats a missing item as a deleted file;
//! - generated items carry `internal.config.kubernetes.io/path` and `config.kubernetes.io/path`, named like
//!   `render -o` files (`cluster/<kind>-<name>.yaml` beside the functionConfig's file), and replace the items of an
//!   earlier run at those paths, so `kpt fn render` run twice changes nothing;
//! - results carry `resourceRef` with `field`, `file.path` from the functionConfig's path annotation, and lines
//!   counted in the user's file (read from the package-path and path annotations: kpt runs exec functions from its
//!   own working directory).

use super::field_location;
use super::resource_list_text::{ResourceListText, as_list_item};
use crate::diagnostics::{Diagnostic, Diagnostics, Loc, Severity};
use crate::inputs::yaml::{self, Node, Value};
use crate::render::ClusterObject;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const PATH: &str = "internal.config.kubernetes.io/path";
const LEGACY_PATH: &str = "config.kubernetes.io/path";
const INDEX: &str = "internal.config.kubernetes.io/index";
const LEGACY_INDEX: &str = "config.kubernetes.io/index";
const PACKAGE_PATH: &str = "internal.config.kubernetes.io/package-path";
/// How the ResourceList is named in messages that point into it.
const STDIN: &str = "<ResourceList on stdin>";
/// How the functionConfig is named when its file is unknown (kustomize): lines count from its first line.
const FUNCTION_CONFIG: &str = "<functionConfig>";

/// What one run of the function gives back.
pub struct Outcome {
    /// The ResourceList for stdout.
    pub stdout: String,
    /// Every diagnostic, cargo style, for stderr.
    pub stderr: String,
    /// Whether an error result was written (exit code 2).
    pub failed: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct KrmResult {
    message: String,
    severity: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    resource_ref: Option<ResourceRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<FieldRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<FileRef>,
}

#[derive(Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct ResourceRef {
    api_version: String,
    kind: String,
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
}

#[derive(Serialize)]
struct FieldRef {
    path: String,
}

#[derive(Serialize)]
struct FileRef {
    path: String,
}

/// Where the functionConfig came from, as the orchestrator told us in its annotations.
struct ConfigOrigin {
    /// `config.kubernetes.io/path`: relative to the package, `/`-separated; `None` when not given (kustomize).
    path: Option<String>,
    /// `internal.config.kubernetes.io/package-path`: the package directory on disk (kpt).
    package: Option<PathBuf>,
}

impl ConfigOrigin {
    fn of(config: &Node) -> ConfigOrigin {
        let path = annotation(config, PATH).or_else(|| annotation(config, LEGACY_PATH));
        let package = annotation(config, PACKAGE_PATH).map(PathBuf::from);
        ConfigOrigin { path, package }
    }

    /// The directory of the functionConfig's file, relative to the package (`""` for the package root).
    fn dir(&self) -> String {
        let path = self.path.as_deref().unwrap_or("");
        path.rsplit_once('/').map(|(d, _)| d.to_string()).unwrap_or_default()
    }

    /// The user's file on disk: in the package kpt names (`kpt fn render`), else under the working directory
    /// (`kpt fn eval` gives no package path; it is the working directory when run as `kpt fn eval .`). Only a file
    /// inside `root`: the annotations come with the input, and no input may make wmrender read the host's files.
    fn file_on_disk(&self, cwd: &Path, root: &Path) -> Option<PathBuf> {
        let path = self.path.as_ref()?;
        crate::inputs::inside_root(root, &self.package.as_deref().unwrap_or(cwd).join(path)).filter(|p| p.is_file())
    }

    /// Where paths written in the functionConfig (`spec.mirrors.files`) are relative to: the directory of the
    /// user's file, else the working directory.
    fn base(&self, cwd: &Path, root: &Path) -> PathBuf {
        match self.file_on_disk(cwd, root).and_then(|f| f.parent().map(Path::to_path_buf)) {
            Some(dir) if dir.is_dir() => dir,
            _ => cwd.to_path_buf(),
        }
    }
}

/// Runs the function on the bytes of stdin: a ResourceList that is not UTF-8 text is refused like any other that
/// cannot be read, with a results entry at its first bad byte.
pub fn run_bytes(input: Vec<u8>, cwd: &Path) -> Outcome {
    let file: Arc<str> = Arc::from(STDIN);
    let mut diags = Diagnostics::default();
    match yaml::utf8_text(&file, input, &mut diags) {
        Ok(text) => run(&text, cwd),
        Err(e) => {
            diags.push(e.diagnostic("the ResourceList", &Loc::file_only(&file), ""));
            refuse(diags)
        }
    }
}

/// Runs the function on one ResourceList, in the working directory `cwd`. The repository it may read from is
/// the one `cwd` is in: kpt and kustomize run the function there, and nothing in the input can move it.
pub fn run(input: &str, cwd: &Path) -> Outcome {
    let root = crate::inputs::repository_root(cwd);
    let rl_file: Arc<str> = Arc::from(STDIN);
    let mut diags = Diagnostics::default();
    let input: Arc<str> = Arc::from(input);
    diags.add_source(&rl_file, &input);
    let list = match yaml::parse(&rl_file, &input) {
        Ok(n) => n,
        Err(e) => {
            diags.push(e);
            return refuse(diags);
        }
    };
    let str_of = |k: &str| list.child(k).and_then(as_str);
    let api_ok = matches!(str_of("apiVersion"), Some("config.kubernetes.io/v1" | "config.kubernetes.io/v1beta1"));
    if !api_ok || str_of("kind") != Some("ResourceList") {
        diags.push(
            Diagnostic::error(&list.loc, "kind", "not a ResourceList")
                .expected("apiVersion: config.kubernetes.io/v1, kind: ResourceList"),
        );
        return refuse(diags);
    }
    let text = match ResourceListText::cut(&input, &list) {
        Ok(t) => t,
        Err(e) => {
            diags.push(
                Diagnostic::error(&list.loc, "items", e.0).expected("a ResourceList as kpt and kustomize write it"),
            );
            return refuse(diags);
        }
    };
    let items: &[Node] = match list.child("items").map(|n| n.value.untagged()) {
        Some(Value::Seq(items)) => items,
        _ => &[],
    };
    let Some(config) = list.child("functionConfig").filter(|c| !matches!(c.value, Value::Null)) else {
        diags.push(
            Diagnostic::error(&list.loc, "functionConfig", "no functionConfig")
                .expected("a ClusterInputs object (wmrender.dev/v1alpha1)"),
        );
        let origin = ConfigOrigin { path: None, package: None };
        return finish(&text, &|_| true, &[], None, diags, &origin, (cwd, &root));
    };
    // `kpt fn eval --fn-config FILE` leaves the functionConfig unannotated; the same ClusterInputs is then among
    // the items when FILE is inside the package, with its path.
    let origin = match ConfigOrigin::of(config) {
        ConfigOrigin { path: None, .. } => items
            .iter()
            .find(|i| {
                field_str(i, &["kind"]) == field_str(config, &["kind"])
                    && field_str(i, &["metadata", "name"]) == field_str(config, &["metadata", "name"])
                    && item_path(i).is_some()
            })
            .map_or(ConfigOrigin { path: None, package: None }, ConfigOrigin::of),
        known => known,
    };
    let compiled = compile(config, &origin.base(cwd, &root), &root, diags);
    let out_dir = join(&origin.dir(), "cluster");
    // Items of an earlier run: ours by label and by path. Anything else (a committed render elsewhere, a
    // user's object with our label) is not ours to replace.
    let earlier = |i: usize| {
        items.get(i).is_some_and(|item| {
            label(item, crate::render::MANAGED_BY.0).as_deref() == Some(crate::render::MANAGED_BY.1)
                && item_path(item).is_some_and(|p| p.rsplit_once('/').is_some_and(|(d, _)| d == out_dir))
        })
    };
    match compiled {
        Ok((objects, d)) => {
            let generated: Vec<String> =
                objects.iter().map(|o| with_path(o, &join(&out_dir, &o.file_name()))).collect();
            finish(&text, &|i| !earlier(i), &generated, Some(config), d, &origin, (cwd, &root))
        }
        // On errors the earlier items stay: exit 2 tells kpt and kustomize to write nothing anyway.
        Err(d) => finish(&text, &|_| true, &[], Some(config), d, &origin, (cwd, &root)),
    }
}

/// Decodes, validates and renders the functionConfig; the files it references are read from `base`, inside `root`.
pub(super) fn compile(
    config: &Node,
    base: &Path,
    root: &Path,
    diags: Diagnostics,
) -> Result<(Vec<ClusterObject>, Diagnostics), Diagnostics> {
    // Decoding takes its tree; the functionConfig is still needed to place messages in the user's file.
    let checked = crate::check_loaded(crate::inputs::from_node(config.clone(), base, root, diags), false)?;
    let plan = crate::plan::plan(&checked);
    Ok((crate::render::render(&plan).objects, checked.warnings))
}

/// An answer that returns nothing of the input: only when the input could not be read as a ResourceList at all.
fn refuse(diags: Diagnostics) -> Outcome {
    let results = results_text(&diags, None, &|_| false, &|_| None);
    let mut stdout = String::from("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n");
    if !results.is_empty() {
        stdout.push_str("results:\n");
        stdout.push_str(&results);
    }
    Outcome { stdout, stderr: diags.render_human(), failed: true }
}

fn finish(
    text: &ResourceListText,
    keep: &dyn Fn(usize) -> bool,
    generated: &[String],
    config: Option<&Node>,
    diags: Diagnostics,
    origin: &ConfigOrigin,
    (cwd, root): (&Path, &Path),
) -> Outcome {
    let (diags, user_file) = match config {
        Some(config) => to_user_file(diags, config, origin, cwd, root),
        None => (diags, None),
    };
    let resource = config.map(resource_ref);
    let in_config = |file: &str| file == STDIN || file == FUNCTION_CONFIG || user_file.as_deref() == Some(file);
    // file.path: the functionConfig's path annotation for the user's file; a mirror file inside the package by
    // its path there.
    let package = origin.package.as_ref().map(|p| p.display().to_string() + "/");
    let file_path = |file: &str| {
        if in_config(file) {
            origin.path.clone()
        } else {
            let rel = package.as_deref().and_then(|p| file.strip_prefix(p)).unwrap_or(file);
            (file != STDIN).then(|| rel.to_string())
        }
    };
    let results = results_text(&diags, resource.as_ref(), &in_config, &file_path);
    Outcome {
        stdout: text.rebuild(keep, generated, &results),
        stderr: diags.render_human(),
        failed: diags.has_errors(),
    }
}

/// Moves every diagnostic that points into the functionConfig (lines of the ResourceList) to the same field in
/// the user's file, when kpt's annotations name it and it holds the same ClusterInputs. Returns the diagnostics
/// and the user's file as shown in them.
fn to_user_file(
    diags: Diagnostics,
    config: &Node,
    origin: &ConfigOrigin,
    cwd: &Path,
    root: &Path,
) -> (Diagnostics, Option<String>) {
    let user = origin.file_on_disk(cwd, root).and_then(|path| {
        let shown: Arc<str> = Arc::from(path.display().to_string());
        let text: Arc<str> = Arc::from(std::fs::read_to_string(&path).ok()?);
        // The user's file may hold several documents (kpt allows it): the ClusterInputs is the one by that name.
        let docs = yaml::parse_all(&shown, &text).ok()?;
        let name = field_str(config, &["metadata", "name"]);
        let doc = docs.into_iter().find(|d| {
            field_str(d, &["kind"]).as_deref() == Some(crate::inputs::schema::KIND)
                && field_str(d, &["metadata", "name"]) == name
        })?;
        Some((shown, text, doc))
    });
    let placer = user.as_ref().map(|(_, _, doc)| field_location::Placer::new(config, doc));
    let mut diags = diags.map(|d| {
        if &*d.loc.file != STDIN {
            return d;
        }
        match &placer {
            Some(placer) => match placer.map(&d.field, &d.loc) {
                Some(loc) => Diagnostic { loc, ..d },
                None => d,
            },
            None => relative_to_config(d, config),
        }
    });
    let shown = user.map(|(shown, text, _)| {
        diags.add_source(&shown, &text);
        shown.to_string()
    });
    (diags, shown)
}

/// Without the user's file (kustomize gives no path), a line of the ResourceList is told as a line of the
/// functionConfig object: line 1 is its `apiVersion`, columns as if it were not indented.
fn relative_to_config(mut d: Diagnostic, config: &Node) -> Diagnostic {
    if d.loc.line == 0 {
        return d;
    }
    let first = match &config.value {
        Value::Map(entries) => entries.first().map(|(k, _)| k.loc.clone()),
        _ => None,
    };
    if let Some(first) = first
        && d.loc.line >= first.line
    {
        d.loc = Loc {
            file: Arc::from(FUNCTION_CONFIG),
            line: d.loc.line - first.line + 1,
            column: d.loc.column.saturating_sub(first.column - 1).max(1),
        };
    }
    d
}

fn results_text(
    diags: &Diagnostics,
    resource: Option<&ResourceRef>,
    in_config: &dyn Fn(&str) -> bool,
    file_path: &dyn Fn(&str) -> Option<String>,
) -> String {
    let mut out = String::new();
    for d in diags.sorted() {
        let at = match (d.loc.line, &*d.loc.file) {
            (0, _) => String::new(),
            // Without the user's file, lines count from the functionConfig's first line: say so.
            (line, FUNCTION_CONFIG) => format!("functionConfig line {line}, column {}: ", d.loc.column),
            (line, _) => format!("line {line}, column {}: ", d.loc.column),
        };
        let mut message = format!("{at}{}", d.message);
        if let Some(e) = &d.expected {
            message.push_str(&format!(" (expected {e})"));
        }
        if let Some(h) = &d.hint {
            message.push_str(&format!("; {h}"));
        }
        // resourceRef and field only for places in the functionConfig; a mirror file is named by file alone (the
        // spec's field is relative to a resource, so a field without resourceRef would mean nothing).
        let config = in_config(&d.loc.file);
        let r = KrmResult {
            message,
            severity: if d.severity == Severity::Error { "error" } else { "warning" },
            resource_ref: resource.filter(|_| config).cloned(),
            field: (config && !d.field.is_empty() && resource.is_some()).then(|| FieldRef { path: d.field.clone() }),
            file: file_path(&d.loc.file).map(|path| FileRef { path }),
        };
        out.push_str(&as_list_item(&serde_saphyr::to_string(&r).unwrap_or_default(), 0));
    }
    out
}

fn resource_ref(config: &Node) -> ResourceRef {
    ResourceRef {
        api_version: field_str(config, &["apiVersion"]).unwrap_or_default(),
        kind: field_str(config, &["kind"]).unwrap_or_default(),
        name: field_str(config, &["metadata", "name"]).unwrap_or_default(),
        namespace: field_str(config, &["metadata", "namespace"]),
    }
}

fn as_str(n: &Node) -> Option<&str> {
    match &n.value {
        Value::Str(s) => Some(s),
        _ => None,
    }
}

pub(super) fn field_str(n: &Node, path: &[&str]) -> Option<String> {
    let mut n = n;
    for key in path {
        n = n.child(key)?;
    }
    as_str(n).map(str::to_string)
}

fn annotation(item: &Node, key: &str) -> Option<String> {
    let annotations = item.child("metadata")?.child("annotations")?;
    annotations.child(key).and_then(as_str).map(str::to_string)
}

fn label(item: &Node, key: &str) -> Option<String> {
    let labels = item.child("metadata")?.child("labels")?;
    labels.child(key).and_then(as_str).map(str::to_string)
}

fn item_path(item: &Node) -> Option<String> {
    annotation(item, PATH).or_else(|| annotation(item, LEGACY_PATH))
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() { name.to_string() } else { format!("{dir}/{name}") }
}

/// The object's YAML with the path and index annotations kpt writes files by. Inserted as text under
/// `metadata.annotations` (every rendered object has that mapping: the sync wave), so the object reads exactly as
/// in `render -o` apart from these lines.
fn with_path(o: &ClusterObject, path: &str) -> String {
    let quoted = format!("'{}'", path.replace('\'', "''"));
    let added = [(LEGACY_INDEX, "'0'"), (LEGACY_PATH, quoted.as_str()), (INDEX, "'0'"), (PATH, quoted.as_str())];
    let extra: String = added.iter().map(|(k, v)| format!("    {k}: {v}\n")).collect();
    let mut out = String::with_capacity(o.yaml.len() + extra.len());
    let mut in_metadata = false;
    let mut inserted = false;
    for line in o.yaml.split_inclusive('\n') {
        if !line.starts_with(' ') {
            in_metadata = line.starts_with("metadata:");
        }
        out.push_str(line);
        if in_metadata && !inserted && line.trim_end() == "  annotations:" {
            out.push_str(&extra);
            inserted = true;
        }
    }
    if !inserted {
        // Not reached for wmrender's objects; kept so a new object kind cannot lose its path silently.
        out = o.yaml.replacen("metadata:\n", &format!("metadata:\n  annotations:\n{extra}"), 1);
    }
    out
}
