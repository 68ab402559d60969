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
}
