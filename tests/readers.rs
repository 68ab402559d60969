//! Every reader of YAML wmrender has, fed the same odd-but-valid and the same broken text: the inputs file
//! (`validate`), a mirror file it references, a KRM ResourceList (`krm` on stdin), kustomize's generator config
//! (`krm CONFIG`), a sync inventory and an import dump. Valid YAML is read whatever its comments and tags; what a
//! reader refuses it refuses with exit 2, naming the file and, where there is one, the line.

mod support;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use support::{code, root, stderr};

/// The inputs every case starts from: small, valid, BYOH only, with a mirror file.
const INPUTS: &str = "apiVersion: wmrender.dev/v1alpha1
kind: ClusterInputs
metadata:
  name: readers
spec:
  infrastructureID: readers-00000
  apiServerInternalURL: https://api-int.readers.example.com:6443
  platform:
    none: {}
  byoh:
  - address: 10.0.0.5
    username: Administrator
  network:
    hybridClusterNetwork: [10.132.0.0/14]
  mirrors:
    files: [idms.yaml]
";

const IDMS: &str = "apiVersion: config.openshift.io/v1
kind: ImageDigestMirrorSet
metadata:
  name: mirrors
spec:
  imageDigestMirrors:
  - source: quay.io/openshift-release-dev
    mirrors:
    - mirror.example.com:5000/openshift-release-dev
";

const INVENTORY: &str = "nodes:
- name: node-a
  address: 127.0.0.1
  port: 9
  user: root
  profile: posix
  root: /srv/staging/node-a
";

/// One reader: what it is called in messages, and how to feed it a text.
#[derive(Clone, Copy, Debug)]
enum Reader {
    Inputs,
    MirrorFile,
    KrmStdin,
    KrmConfig,
    Inventory,
    ImportDump,
}

const READERS: [Reader; 6] =
    [Reader::Inputs, Reader::MirrorFile, Reader::KrmStdin, Reader::KrmConfig, Reader::Inventory, Reader::ImportDump];

/// A scratch directory with everything the readers need besides the text under test.
struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Scratch {
        let s = Scratch { dir: tempfile::tempdir().unwrap() };
        std::fs::write(s.path("wmrender.yaml"), INPUTS).unwrap();
        std::fs::write(s.path("idms.yaml"), IDMS).unwrap();
        let o = s.run(&["render", "-f", "wmrender.yaml", "-o", "rendered"], None);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        support::sshd::keygen(&["-q", "-t", "ed25519", "-N", "", "-f", s.path("id").to_str().unwrap()]);
        std::fs::write(s.path("known_hosts"), "").unwrap();
        s
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn run(&self, args: &[&str], stdin: Option<&[u8]>) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_wmrender"));
        cmd.args(args).current_dir(self.dir.path()).stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
        let mut child = cmd.spawn().expect("running wmrender");
        if let Some(bytes) = stdin {
            use std::io::Write;
            let mut pipe = child.stdin.take().expect("stdin");
            let _ = pipe.write_all(bytes);
        }
        child.wait_with_output().expect("wmrender's output")
    }

    /// The file a reader reads, as its messages name it.
    fn file(&self, reader: Reader) -> &'static str {
        match reader {
            Reader::Inputs => "wmrender.yaml",
            Reader::MirrorFile => "idms.yaml",
            Reader::KrmStdin => "<ResourceList on stdin>",
            Reader::KrmConfig => "generator.yaml",
            Reader::Inventory => "nodes.yaml",
            Reader::ImportDump => "infrastructure.yaml",
        }
    }

    /// The reader's valid document, as text.
    fn valid(&self, reader: Reader) -> String {
        match reader {
            Reader::Inputs | Reader::KrmConfig => INPUTS.to_string(),
            Reader::MirrorFile => IDMS.to_string(),
            Reader::KrmStdin => resource_list(INPUTS, ""),
            Reader::Inventory => INVENTORY.to_string(),
            Reader::ImportDump => std::fs::read_to_string(root().join("fixtures/import/aws/infrastructure.yaml"))
                .expect("the import fixture"),
        }
    }

    /// Feeds `text` (bytes) to the reader.
    fn read(&self, reader: Reader, text: &[u8]) -> Output {
        match reader {
            Reader::Inputs => {
                std::fs::write(self.path("wmrender.yaml"), text).unwrap();
                self.run(&["validate", "-f", "wmrender.yaml"], None)
            }
            Reader::MirrorFile => {
                std::fs::write(self.path("wmrender.yaml"), INPUTS).unwrap();
                std::fs::write(self.path("idms.yaml"), text).unwrap();
                self.run(&["validate", "-f", "wmrender.yaml"], None)
            }
            Reader::KrmStdin => {
                std::fs::write(self.path("idms.yaml"), IDMS).unwrap();
                self.run(&["krm"], Some(text))
            }
            Reader::KrmConfig => {
                // kustomize's copy of the config is the argument; the user's file is the kustomization's generator.
                std::fs::write(self.path("idms.yaml"), IDMS).unwrap();
                std::fs::write(self.path("kustomization.yaml"), "generators:\n- generator.yaml\n").unwrap();
                std::fs::write(self.path("generator.yaml"), text).unwrap();
                self.run(&["krm", "generator.yaml"], None)
            }
            Reader::Inventory => {
                std::fs::write(self.path("nodes.yaml"), text).unwrap();
                self.run(
                    &[
                        "sync",
                        "--rendered",
                        "rendered",
                        "--inventory",
                        "nodes.yaml",
                        "--identity",
                        "id",
                        "--known-hosts",
                        "known_hosts",
                        "--dry-run",
                        "--connect-timeout",
                        "2",
                    ],
                    None,
                )
            }
            Reader::ImportDump => {
                let dump = self.path("dump");
                let _ = std::fs::remove_dir_all(&dump);
                std::fs::create_dir(&dump).unwrap();
                for f in std::fs::read_dir(root().join("fixtures/import/aws")).unwrap() {
                    let f = f.unwrap().path();
                    std::fs::copy(&f, dump.join(f.file_name().unwrap())).unwrap();
                }
                std::fs::write(dump.join("infrastructure.yaml"), text).unwrap();
                let _ = std::fs::remove_file(self.path("imported.yaml"));
                self.run(
                    &[
                        "import",
                        "--from-dir",
                        "dump",
                        "--image",
                        "ami-0123456789abcdef0",
                        "--ssh-public-key",
                        "id.pub",
                        "-o",
                        "imported.yaml",
                        "--force",
                    ],
                    None,
                )
            }
        }
    }
}

/// A ResourceList with `config` (a ClusterInputs document) as its functionConfig and `items` (a block sequence's
/// entries, or empty) as its items.
fn resource_list(config: &str, items: &str) -> String {
    let config: String = config.lines().map(|l| format!("  {l}\n")).collect();
    let items = if items.is_empty() { "items: []\n".to_string() } else { format!("items:\n{items}") };
    format!("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\n{items}functionConfig:\n{config}")
}

/// What a run says, for comparing two runs of the same reader: exit code, stdout without the reader's own file
/// name, and whether stderr speaks of YAML.
fn outcome(o: &Output) -> (i32, String, bool) {
    (code(o), String::from_utf8_lossy(&o.stdout).into_owned(), stderr(o).contains("YAML"))
}

/// Comments between a key and its value are any number: a commented-out block of retired hosts is this shape.
#[test]
fn comments_between_a_key_and_its_value_are_any_number_in_every_reader() {
    let s = Scratch::new();
    for reader in READERS {
        let valid = s.valid(reader);
        let plain = outcome(&s.read(reader, valid.as_bytes()));
        assert_ne!(plain.0, 2, "{reader:?}: the valid document is refused");
        // After the first key whose value is a block on the next lines (`metadata:`, `nodes:`, `spec:`).
        let mut lines: Vec<String> = valid.lines().map(str::to_string).collect();
        let at = lines.iter().position(|l| l.trim_end().ends_with(':') && !l.trim_start().starts_with('#')).unwrap();
        let indent = " ".repeat(lines[at + 1].len() - lines[at + 1].trim_start().len());
        for n in 0..40 {
            lines.insert(at + 1, format!("{indent}# retired-host-{n}: 10.0.0.{n}"));
        }
        let commented = lines.join("\n") + "\n";
        let o = s.read(reader, commented.as_bytes());
        assert_eq!(outcome(&o).0, plain.0, "{reader:?} with 40 comment lines:\n{}", stderr(&o));
        assert!(!stderr(&o).contains("comments"), "{reader:?}: {}", stderr(&o));
    }
}

/// Foreign items of a ResourceList pass through as they came, whatever their tags: a Secret another tool wrote with
/// `!!binary`, a timestamp, a CloudFormation-style local tag, a set.
#[test]
fn krm_passes_foreign_items_through_whatever_their_tags() {
    let s = Scratch::new();
    let items = [
        "- apiVersion: v1\n  kind: Secret\n  metadata:\n    name: bin\n  data:\n    key: !!binary /wAA//79\n",
        "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: when\n  data:\n    at: !!timestamp 2001-12-14t21:59:43.10-05:00\n",
        "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: ref\n    labels: !Labels {a: b}\n  data:\n    x: !Ref other\n    n: !!int not-a-number\n    s: !!set {a, b}\n",
    ];
    let input = resource_list(INPUTS, &items.concat());
    let o = s.run(&["krm"], Some(input.as_bytes()));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    for item in items {
        assert!(out.contains(item), "not passed through byte for byte:\n{item}\n--- output ---\n{out}");
    }
    assert!(out.contains("name: windows-instances"), "the render is added:\n{out}");
    // A tag on the items sequence itself, and on a whole item.
    let input = resource_list(INPUTS, &items.concat()).replace("items:\n", "items: !list\n");
    let input = input.replacen("- apiVersion: v1\n  kind: Secret", "- !Secret\n  apiVersion: v1\n  kind: Secret", 1);
    let o = s.run(&["krm"], Some(input.as_bytes()));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.contains("items: !list\n- !Secret\n  apiVersion: v1\n  kind: Secret"), "{out}");
    assert!(out.contains(items[1]) && out.contains(items[2]) && out.contains("name: windows-instances"), "{out}");
}

/// Every reader refuses a text that is not UTF-8 as bad input (exit 2), naming its file and the line and column of
/// the first byte that is not, never "stream did not contain valid UTF-8".
#[test]
fn text_that_is_not_utf8_is_placed_at_its_first_bad_byte_in_every_reader() {
    let s = Scratch::new();
    for reader in READERS {
        let valid = s.valid(reader);
        // The third line's value gets a byte that no UTF-8 character starts with.
        let mut lines: Vec<Vec<u8>> = valid.lines().map(|l| l.as_bytes().to_vec()).collect();
        let line = (2..lines.len()).find(|&i| lines[i].windows(2).any(|w| w == b": ")).unwrap();
        let column = lines[line].windows(2).position(|w| w == b": ").unwrap() + 3;
        lines[line].insert(column - 1, 0xff);
        let text: Vec<u8> = lines.join(&b'\n').into_iter().chain([b'\n']).collect();
        let o = s.read(reader, &text);
        let err = stderr(&o);
        assert_eq!(code(&o), 2, "{reader:?}: {err}");
        let at = format!(":{}:{}", line + 1, column);
        let placed = err.lines().any(|l| l.contains("--> ") && l.contains(s.file(reader)) && l.ends_with(&at));
        assert!(placed, "{reader:?}: not placed at {} line {} column {column}:\n{err}", s.file(reader), line + 1);
        assert!(err.contains("is not UTF-8 text") && !err.contains("stream did not"), "{reader:?}: {err}");
    }
}

/// An empty or blank inputs file is refused at its first line.
#[test]
fn an_empty_inputs_file_is_refused_at_its_first_line() {
    let s = Scratch::new();
    for text in ["", "\n\n  \n"] {
        let o = s.read(Reader::Inputs, text.as_bytes());
        assert_eq!(code(&o), 2, "{}", stderr(&o));
        assert!(stderr(&o).contains("wmrender.yaml:1:1") && stderr(&o).contains("empty"), "{}", stderr(&o));
    }
}

/// A name given to several inventory nodes is one error, at the line of its second entry, listing the others:
/// not one copy per duplicate, and never without a line.
#[test]
fn a_duplicate_inventory_name_is_one_error_at_its_line() {
    let s = Scratch::new();
    let mut inventory = String::from("nodes:\n");
    for i in 0..3000 {
        inventory.push_str(&format!("- name: same\n  address: 10.0.{}.{}\n", i / 250, i % 250));
    }
    inventory.push_str("- name: other\n  address: 10.9.0.1\n- name: other\n  address: 10.9.0.2\n");
    let o = s.read(Reader::Inventory, inventory.as_bytes());
    let err = stderr(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert_eq!(err.matches("error:").count(), 2, "{err}");
    assert!(err.contains("nodes.yaml:4:3") && err.contains("node name `same` is given to 3000 nodes"), "{err}");
    assert!(err.contains("nodes.yaml:6004:3") && err.contains("(lines 6002, 6004)"), "{err}");
}

/// "No nodes to sync" says which files were asked for nodes.
#[test]
fn no_nodes_to_sync_names_the_files() {
    let s = Scratch::new();
    // With the operator, WMCO configures the BYOH hosts: the render gives sync no node.
    let inputs = format!("{INPUTS}  operator:\n    install: true\n");
    std::fs::write(s.path("wmrender.yaml"), inputs).unwrap();
    let o = s.run(&["render", "-f", "wmrender.yaml", "-o", "rendered"], None);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = s.read(Reader::Inventory, b"nodes: []\n");
    let err = stderr(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert!(
        err.contains("no nodes to sync") && err.contains("rendered") && err.contains("nodes.yaml leaves none"),
        "{err}"
    );
}

/// Problems are told in wmrender's words: no Rust range syntax (`1..=3600`), no operating system's phrasing with its
/// error number, no Rust library's ("stream did not contain valid UTF-8").
#[test]
fn messages_are_in_wmrenders_words() {
    let s = Scratch::new();
    std::os::unix::fs::symlink("loop", s.path("loop")).unwrap();
    let cidr = INPUTS.replace("[10.132.0.0/14]", "[10.132.0.0/33]");
    std::fs::write(s.path("cidr.yaml"), &cidr).unwrap();
    std::fs::write(s.path("missing-mirror.yaml"), INPUTS.replace("idms.yaml", "gone.yaml")).unwrap();
    let sync = ["sync", "--rendered", "rendered", "--identity", "id", "--known-hosts", "known_hosts"];
    let cases: Vec<Vec<&str>> = vec![
        [&sync[..], &["--parallel", "0"]].concat(),
        [&sync[..], &["--connect-timeout", "0"]].concat(),
        [&sync[..], &["--max-unavailable", "-1"]].concat(),
        [&sync[..], &["--csr-timeout", "99999999"]].concat(),
        vec!["validate", "-f", "cidr.yaml"],
        vec!["validate", "-f", "missing-mirror.yaml"],
        vec!["validate", "-f", "no-such-file.yaml"],
        vec!["render", "-f", "wmrender.yaml", "-o", "loop"],
        vec!["sync", "--rendered", "no-such-dir", "--identity", "id"],
        vec!["import", "--from-dir", "no-such-dir", "-o", "x.yaml"],
    ];
    let library = regex::Regex::new(r"\d\.\.=?\d|os error|stream did not|No such file|Permission denied").unwrap();
    for args in cases {
        let o = s.run(&args, None);
        let err = stderr(&o);
        assert_eq!(code(&o), 2, "{args:?}: {err}");
        assert!(!library.is_match(&err), "{args:?}: {err}");
    }
}
