//! The shape DESIGN.md gives the crate, held as data: which top-level module may use which. Each module of
//! `src/` (a file or a folder) is read for the `crate::<module>` paths its code names (comments aside), and
//!
//! - no two modules use each other, directly or through others (no circle);
//! - `cluster/` (the API access) uses none of the steps above it: delivery, lifecycle, sync, controller, render;
//! - `delivery/` (one node's delivery over SSH) knows nothing of the cluster and of the steps above it;
//! - `lifecycle/` (one node's life, shared by `sync` and the controller) uses neither of them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `path` (or `path` itself).
fn sources(path: &Path) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    let mut out = Vec::new();
    for entry in std::fs::read_dir(path).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            out.extend(sources(&p));
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
    out
}

/// Top-level module → the other top-level modules its code names.
fn uses() -> BTreeMap<String, BTreeSet<String>> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut modules: BTreeMap<String, PathBuf> = BTreeMap::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_stem().unwrap().to_string_lossy().to_string();
        if !["main", "lib", "cli", "progress"].contains(&name.as_str()) && (p.is_dir() || name != "mod") {
            modules.insert(name, p);
        }
    }
    let mut uses = BTreeMap::new();
    for (name, path) in &modules {
        let mut used = BTreeSet::new();
        for file in sources(path) {
            let text = std::fs::read_to_string(&file).unwrap();
            for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
                for (i, _) in line.match_indices("crate::") {
                    let rest = &line[i + "crate::".len()..];
                    let other: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                    if other != *name && modules.contains_key(&other) {
                        used.insert(other);
                    }
                }
            }
        }
        uses.insert(name.clone(), used);
    }
    uses
}

#[test]
fn no_two_top_level_modules_use_each_other() {
    let uses = uses();
    let reaches = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(m) = todo.pop() {
            for next in uses.get(&m).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let circles: Vec<String> = uses
        .iter()
        .flat_map(|(m, used)| used.iter().filter(|u| reaches(u).contains(m)).map(move |u| format!("{m} ⇄ {u}")))
        .collect();
    assert!(circles.is_empty(), "modules in a circle: {circles:?}\n{uses:#?}");
}

#[test]
fn each_layer_uses_only_what_is_below_it() {
    let uses = uses();
    for (module, forbidden) in [
        ("cluster", &["delivery", "lifecycle", "sync", "controller", "render"][..]),
        ("delivery", &["cluster", "lifecycle", "sync", "controller"][..]),
        ("lifecycle", &["sync", "controller"][..]),
        ("sync", &["controller"][..]),
    ] {
        let used = &uses[module];
        let wrong: Vec<&&str> = forbidden.iter().filter(|f| used.contains(**f)).collect();
        assert!(wrong.is_empty(), "{module}/ uses {wrong:?}");
    }
}
