//! Scale: a large legitimate inputs file renders, and a small file whose aliases expand into a huge tree (an
//! "alias bomb") is refused quickly, in wmrender's words. The YAML limits grow with the size of the file, so the
//! first is not refused for its size, while the second, being small, still meets them.

mod support;

use std::fmt::Write;
use std::time::{Duration, Instant};
use support::{code, stderr, wmrender};

/// Inputs with `entries` inline mirror entries over 500 registry hosts, the last one on a host of its own.
fn mirrors_inputs(entries: usize) -> String {
    let mut text = String::from(
        "apiVersion: wmrender.dev/v1alpha1\nkind: ClusterInputs\nmetadata:\n  name: scale\nspec:\n  \
         infrastructureID: scale-1a2b3\n  apiServerInternalURL: https://api-int.scale.example.com:6443\n  \
         platform:\n    none: {}\n  byoh:\n  - address: 10.0.0.5\n    username: Administrator\n  network:\n    hybridClusterNetwork: [10.132.0.0/14]\n  mirrors:\n    \
         imageDigestMirrors:\n",
    );
    for i in 0..entries - 1 {
        let r = i % 500;
        writeln!(
            text,
            "    - source: registry-{r}.example.com/team{i}/app\n      \
             mirrors: [mirror.example.com:5000/r{r}/team{i}/app, backup-{}.example.com/team{i}/app]",
            r % 7
        )
        .unwrap();
    }
    text.push_str("    - source: last.example.com/team/app\n      mirrors: [mirror.example.com:5000/last/team/app]\n");
    text
}

#[test]
fn a_hundred_thousand_mirror_entries_render() {
    let tmp = tempfile::tempdir().unwrap();
    let inputs = tmp.path().join("wmrender.yaml");
    std::fs::write(&inputs, mirrors_inputs(100_000)).unwrap();
    let out = tmp.path().join("out");
    let o = wmrender(&["render", "-f", inputs.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let registries = out.join("node/C/k/containerd/registries");
    let hosts = std::fs::read_dir(&registries).unwrap().count();
    // 500 hosts of the bulk, and the last entry's own: every entry was read.
    assert_eq!(hosts, 501);
    let last = std::fs::read_to_string(registries.join("last.example.com/hosts.toml")).unwrap();
    assert!(last.contains("[host.\"https://mirror.example.com:5000/v2/last\"]"), "{last}");
}

#[test]
fn an_alias_bomb_is_refused_quickly() {
    // "Billion laughs": ten levels of ten aliases each, 10^10 strings from a file of under 1 KiB.
    let mut text = String::from("apiVersion: wmrender.dev/v1alpha1\nkind: ClusterInputs\nmetadata:\n  name: bomb\n");
    text.push_str("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..10 {
        writeln!(text, "a{i}: &a{i} [{}]", vec![format!("*a{}", i - 1); 10].join(", ")).unwrap();
    }
    text.push_str("spec: *a9\n");
    let tmp = tempfile::tempdir().unwrap();
    let inputs = tmp.path().join("wmrender.yaml");
    std::fs::write(&inputs, text).unwrap();
    let start = Instant::now();
    let o = wmrender(&["validate", "-f", inputs.to_str().unwrap()]);
    let took = start.elapsed();
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("the YAML expands to too much data to read safely"), "{}", stderr(&o));
    // Expanding it would take hours; stopping it takes well under a second in a release build.
    assert!(took < Duration::from_secs(60), "took {took:?}");
}
