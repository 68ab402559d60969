//! `wmrender krm` as a hostile pipeline or a careless user would drive it: a functionConfig whose annotations point
//! out of the repository, input that is not text, a ResourceList written with old Mac line endings, and sizes that
//! would show time growing faster than the input. The function runs as kpt runs it: as a process, with the
//! repository as its working directory.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use support::{code, stderr};

const INPUTS: &str = "apiVersion: wmrender.dev/v1alpha1
kind: ClusterInputs
metadata:
  name: krm-hostile
spec:
  infrastructureID: krm-hostile-00000
  apiServerInternalURL: https://api-int.krm.example.com:6443
  platform:
    none: {}
  byoh:
  - address: 10.0.0.5
    username: Administrator
  network:
    hybridClusterNetwork: [10.132.0.0/14]
";

/// The content of files outside the repository: it must never reach stdout or stderr.
const SECRET: &str = "TOKEN-3f9a1c-never-print-me";

/// `<tmp>/repo` (with `.git`, the working directory) holding `pkg/`, and `<tmp>/outside` holding files that are
/// not the repository's.
struct Layout {
    tmp: tempfile::TempDir,
}

impl Layout {
    fn new() -> Layout {
        let l = Layout { tmp: tempfile::tempdir().unwrap() };
        std::fs::create_dir_all(l.repo().join(".git")).unwrap();
        std::fs::create_dir_all(l.repo().join("pkg")).unwrap();
        std::fs::create_dir_all(l.outside()).unwrap();
        std::fs::write(l.outside().join("token"), format!("{SECRET}\n")).unwrap();
        // A ClusterInputs of the same name outside: were it read to place messages, its lines would be shown.
        let evil = INPUTS.replace("username: Administrator", &format!("username: Administrator  # {SECRET}"));
        std::fs::write(l.outside().join("wmrender.yaml"), evil).unwrap();
        std::fs::write(l.repo().join("pkg/wmrender.yaml"), INPUTS).unwrap();
        l
    }

    fn repo(&self) -> PathBuf {
        self.tmp.path().join("repo")
    }

    fn outside(&self) -> PathBuf {
        self.tmp.path().join("outside")
    }
}

fn krm_in(dir: &Path, input: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_wmrender"))
        .arg("krm")
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let _ = child.stdin.take().unwrap().write_all(input);
    }
    child.wait_with_output().unwrap()
}

/// A ResourceList whose functionConfig is `config` with `annotations` (YAML lines at the annotations' indent).
fn resource_list(config: &str, annotations: &[(&str, &str)]) -> String {
    let mut config: String = config.lines().map(|l| format!("  {l}\n")).collect();
    if !annotations.is_empty() {
        let lines: String = annotations.iter().map(|(k, v)| format!("      {k}: '{v}'\n")).collect();
        config =
            config.replacen("    name: krm-hostile\n", &format!("    name: krm-hostile\n    annotations:\n{lines}"), 1);
    }
    format!("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\nfunctionConfig:\n{config}")
}

/// `spec.mirrors.files` set to `files`.
fn with_mirror_files(files: &str) -> String {
    INPUTS.replace("  network:\n", &format!("  mirrors:\n    files: [{files}]\n  network:\n"))
}

/// No annotation moves the repository: the repository is where the function runs. A path leaving it is refused
/// naming the field, and neither the file's content nor a line of a file outside it is ever printed.
#[test]
fn no_annotation_lets_the_function_read_outside_the_repository() {
    let l = Layout::new();
    let outside = l.outside();
    let outside_s = outside.to_str().unwrap();
    // (what the case is, the functionConfig, its annotations)
    type Case<'a> = (&'a str, String, Vec<(&'a str, String)>);
    let cases: Vec<Case> = vec![
        ("a relative path out of the repository", with_mirror_files("../outside/token"), vec![]),
        (
            "the path annotation climbing out",
            with_mirror_files("token"),
            vec![("config.kubernetes.io/path", "../outside/wmrender.yaml".into())],
        ),
        (
            "the internal path annotation climbing out",
            with_mirror_files("token"),
            vec![("internal.config.kubernetes.io/path", "../../outside/wmrender.yaml".into())],
        ),
        (
            "the package-path annotation outside",
            with_mirror_files("token"),
            vec![
                ("internal.config.kubernetes.io/package-path", outside_s.to_string()),
                ("config.kubernetes.io/path", "wmrender.yaml".into()),
            ],
        ),
        (
            "the package-path annotation at the file system's root",
            with_mirror_files(&format!("{}/token", outside_s.trim_start_matches('/'))),
            vec![
                ("internal.config.kubernetes.io/package-path", "/".into()),
                ("config.kubernetes.io/path", "wmrender.yaml".into()),
            ],
        ),
    ];
    for (name, config, annotations) in cases {
        let annotations: Vec<(&str, &str)> = annotations.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let o = krm_in(&l.repo(), resource_list(&config, &annotations).as_bytes());
        let (out, err) = (String::from_utf8_lossy(&o.stdout), stderr(&o));
        assert_eq!(code(&o), 2, "{name}: {err}");
        assert!(!out.contains(SECRET) && !err.contains(SECRET), "{name}: the outside file was shown:\n{out}\n{err}");
        assert!(err.contains("field: spec.mirrors.files[0]"), "{name}: the field is named: {err}");
        // Outside the repository, or (when the annotations' place is ignored) not found where the function runs.
        assert!(err.contains("outside the repository") || err.contains("it does not exist"), "{name}: {err}");
        assert!(out.contains("severity: error"), "{name}: a results entry: {out}");
    }
}

/// The user's file named by kpt's annotations is read to place messages only when it is inside the repository.
#[test]
fn messages_are_placed_in_the_users_file_only_inside_the_repository() {
    let l = Layout::new();
    let bad = INPUTS.replace("username: Administrator", "usrname: Administrator");
    std::fs::write(
        l.outside().join("wmrender.yaml"),
        bad.replace("usrname: Administrator", &format!("usrname: x  # {SECRET}")),
    )
    .unwrap();
    let o = krm_in(
        &l.repo(),
        resource_list(
            &bad,
            &[
                ("internal.config.kubernetes.io/package-path", l.outside().to_str().unwrap()),
                ("config.kubernetes.io/path", "wmrender.yaml"),
            ],
        )
        .as_bytes(),
    );
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    let (out, err) = (String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert!(!out.contains(SECRET) && !err.contains(SECRET), "{out}\n{err}");
    assert!(err.contains("unknown field `usrname`"), "{err}");
    // Inside the repository the same annotations place the message in the user's file.
    std::fs::write(l.repo().join("pkg/wmrender.yaml"), &bad).unwrap();
    let o = krm_in(
        &l.repo(),
        resource_list(
            &bad,
            &[
                ("internal.config.kubernetes.io/package-path", l.repo().join("pkg").to_str().unwrap()),
                ("config.kubernetes.io/path", "wmrender.yaml"),
            ],
        )
        .as_bytes(),
    );
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("pkg/wmrender.yaml:12:"), "{}", stderr(&o));
}

/// A ResourceList that is not UTF-8 is bad input like any other (exit 2), answered with a ResourceList whose
/// results entry says where the first bad byte is.
#[test]
fn a_resource_list_that_is_not_text_is_refused_with_a_result() {
    let l = Layout::new();
    let mut input = resource_list(INPUTS, &[]).into_bytes();
    let at = input.windows(13).position(|w| w == b"Administrator").unwrap();
    input[at] = 0xff;
    let o = krm_in(&l.repo(), &input);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    let out: serde_json::Value = serde_saphyr::from_slice(&o.stdout).expect("a ResourceList on stdout");
    assert_eq!(out["kind"], "ResourceList");
    let message = out["results"][0]["message"].as_str().unwrap_or_default();
    assert!(out["results"][0]["severity"] == "error" && message.contains("not UTF-8"), "{out}");
    assert!(message.starts_with("line 16, column 17:"), "{message}");
    assert!(stderr(&o).contains("<ResourceList on stdin>:16:17"), "{}", stderr(&o));
}

/// Old Mac line endings (`\r` alone) and Windows ones are line endings: the ResourceList comes back with one
/// `items` key holding the render, and the rest as it came.
#[test]
fn line_endings_of_every_kind_give_one_items_key() {
    let l = Layout::new();
    for eol in ["\r", "\r\n"] {
        let input = resource_list(INPUTS, &[]).replace('\n', eol);
        let o = krm_in(&l.repo(), input.as_bytes());
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let out = String::from_utf8(o.stdout).unwrap();
        let keys: Vec<&str> = out.split(['\n', '\r']).filter(|l| l.starts_with("items")).collect();
        assert_eq!(keys, ["items:"], "{out:?}");
        let list: serde_json::Value = serde_saphyr::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out:?}"));
        assert!(list["items"].as_array().is_some_and(|i| !i.is_empty()), "{out:?}");
        assert_eq!(list["functionConfig"]["metadata"]["name"], "krm-hostile");
        assert!(out.starts_with(&format!("apiVersion: config.kubernetes.io/v1{eol}kind: ResourceList{eol}")));
    }
}
