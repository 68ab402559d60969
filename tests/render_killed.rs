//! A render killed (SIGKILL) at any moment leaves the output directory exactly the old tree or the new one, and
//! the next render leaves no temporary sibling behind.
//!
//! The input is generated large enough (hundreds of files) that kills land while the new tree is written, swapped
//! in and the old one deleted. The kill moments are drawn from a seeded generator over the measured duration of a
//! whole render, and their number is bounded so the test takes about half a minute at most.

mod support;

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{code, read_tree, stderr};

const KILLS: usize = 25;
/// On a loaded machine, stop early rather than run long: the kills made until then still count.
const BUDGET: Duration = Duration::from_secs(15);
/// Renders of a small input watched for a moment without the directory.
const SWAPS_WATCHED: usize = 60;

/// Inputs with many MachineSets, BYOH hosts and mirrored registries (one hosts.toml each); `generation` changes
/// every MachineSet, so the two renders differ in most files.
fn generate(path: &Path, generation: u32) {
    let zones = ["us-east-1a", "us-east-1b", "us-east-1c"];
    let mut s = String::from(
        "apiVersion: wmrender.dev/v1alpha1\nkind: ClusterInputs\nmetadata:\n  name: kill\nspec:\n  \
         infrastructureID: kill-1a2b3\n  apiServerInternalURL: https://api-int.kill.example.com:6443\n  \
         sshPublicKey: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEivnOQOwpFfgIiplCNH1jWkEmNppWw2KdSLHn7d3tKp\n  \
         platform:\n    aws:\n      region: us-east-1\n",
    );
    s += &format!("      ami: ami-{:017x}\n  machineSets:\n", 0xabc0 + generation);
    for i in 0..100 {
        s += &format!("  - name: kill-1a2b3-w{generation}-{i:03}\n    zone: {}\n    replicas: 1\n", zones[i % 3]);
    }
    s += "  byoh:\n";
    for i in 0..100 {
        s += &format!("  - address: win-{i:05}.hosts.example.com\n    username: Administrator\n");
    }
    s += "  network:\n    hybridClusterNetwork: [10.132.0.0/14]\n  mirrors:\n    imageDigestMirrors:\n";
    for i in 0..300 {
        let r = i % 150;
        s += &format!(
            "    - source: registry-{r}.example.com/team{i}/app\n      mirrors: [mirror.example.com:5000/r{r}/g{generation}/team{i}/app]\n"
        );
    }
    fs::write(path, s).unwrap();
}

/// xorshift64*: a fixed seed gives the same kill moments on every run.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }
}

fn render(inputs: &Path, out: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_wmrender"));
    c.args(["render", "-f", inputs.to_str().unwrap(), "-o", out.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c
}

#[test]
fn a_killed_render_leaves_the_old_or_the_new_tree_and_no_leftovers_after_the_next() {
    let tmp = tempfile::tempdir().unwrap();
    let inputs = [tmp.path().join("a.yaml"), tmp.path().join("b.yaml")];
    generate(&inputs[0], 0);
    generate(&inputs[1], 1);
    let work = tmp.path().join("work");
    fs::create_dir(&work).unwrap();
    let out = work.join("out");

    // The two possible trees, and how long a whole render takes here.
    let mut trees = Vec::new();
    let mut longest = Duration::ZERO;
    for (i, f) in inputs.iter().enumerate() {
        let reference = tmp.path().join(format!("ref{i}"));
        let started = Instant::now();
        let o = render(f, &reference).output().unwrap();
        longest = longest.max(started.elapsed());
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        trees.push(read_tree(&reference));
    }
    eprintln!("a whole render takes up to {longest:?} here, {} files", trees[0].len());
    assert_ne!(trees[0], trees[1]);
    assert!(trees[0].len() > 250, "the generated render is too small to kill mid-write: {}", trees[0].len());

    let o = render(&inputs[0], &out).output().unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let mut current = 0;
    let mut rng = Rng(0x5eed_1234_abcd_0042);
    let mut killed_mid_render = 0;
    let started = Instant::now();
    let mut kills = 0;
    for kill in 0..KILLS {
        if started.elapsed() > BUDGET && kill >= 8 {
            break;
        }
        kills += 1;
        let next = 1 - current;
        let delay = Duration::from_micros(rng.below(longest.as_micros() as u64));
        let mut child = render(&inputs[next], &out).spawn().unwrap();
        std::thread::sleep(delay);
        let _ = child.kill(); // SIGKILL on Unix
        let status = child.wait().unwrap();
        match status.code() {
            Some(0) => current = next,
            Some(c) => panic!("kill {kill}: the render failed on its own with exit code {c}"),
            None => killed_mid_render += 1, // killed by the signal
        }
        let now = read_tree(&out);
        if now == trees[next] {
            current = next;
        } else {
            assert!(
                now == trees[current],
                "kill {kill} after {delay:?}: {} is neither the old nor the new tree ({} files)",
                out.display(),
                now.len()
            );
        }
    }
    // While whole renders replace a directory, a watcher looks at it as fast as it can: it must never find it
    // missing, not even for the moment between two renames, which a kill rarely hits but a watcher does, given
    // many swaps (small renders, so that there are many).
    let small = tmp.path().join("small");
    let example = support::root().join("examples/aws/wmrender.yaml");
    let variant = tmp.path().join("variant.yaml");
    fs::write(&variant, fs::read_to_string(&example).unwrap().replace("replicas: 2", "replicas: 3")).unwrap();
    let o = render(&example, &small).output().unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (stop, small) = (stop.clone(), small.clone());
        std::thread::spawn(move || {
            let mut missing = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if fs::symlink_metadata(&small).is_err() {
                    missing += 1;
                }
            }
            missing
        })
    };
    for i in 0..SWAPS_WATCHED {
        let o = render(if i % 2 == 0 { &variant } else { &example }, &small).output().unwrap();
        assert_eq!(code(&o), 0, "{}", stderr(&o));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let missing = watcher.join().unwrap();
    assert_eq!(missing, 0, "{} was missing {missing} times while renders replaced it", small.display());
    assert!(killed_mid_render >= kills / 4, "only {killed_mid_render} of {kills} kills hit a running render");

    let o = render(&inputs[0], &out).output().unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(read_tree(&out), trees[0]);
    let siblings: Vec<_> = fs::read_dir(&work).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(siblings, vec![std::ffi::OsString::from("out")], "temporary trees were left behind");
}
