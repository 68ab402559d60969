//! `wmrender diff` as a pull-request review: destructive changes first, node files that need `sync`, `--base REF`
//! against a real git repository, GitHub-flavoured Markdown, `--fail-on-delete`.

mod support;

use std::path::Path;
use std::process::Command;
use support::{code, root, stderr, wmrender};

/// A git repository holding one example's inputs, committed; returns it with the inputs path.
fn repo_with(example: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("clusters/prod");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(root().join("examples").join(example).join("wmrender.yaml"), dir.join("wmrender.yaml")).unwrap();
    git(tmp.path(), &["init", "-q", "-b", "main"]);
    git(tmp.path(), &["add", "-A"]);
    git(tmp.path(), &["-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "base"]);
    (tmp, dir.join("wmrender.yaml"))
}

fn git(dir: &Path, args: &[&str]) {
    let o = Command::new("git").arg("-C").arg(dir).args(args).output().unwrap();
    assert!(o.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{from}");
    std::fs::write(path, text.replace(from, to)).unwrap();
}

/// `diff --base main` in the working tree; returns exit code and stdout.
fn review(inputs: &Path, extra: &[&str]) -> (i32, String) {
    let mut args = vec!["diff", "-f", inputs.to_str().unwrap(), "--base", "main"];
    args.extend(extra);
    let o = wmrender(&args);
    assert!(code(&o) < 2, "{}", stderr(&o));
    (code(&o), String::from_utf8(o.stdout).unwrap())
}

/// The destructive block comes before every table and diff.
fn assert_deletions_first(text: &str) {
    let caution = text.find("> [!CAUTION]").expect("a caution block");
    let table = text.find("| Change |").expect("a table");
    assert!(caution < table && caution < text.find("```diff").unwrap(), "{text}");
}

#[test]
fn a_new_default_windows_version_warns_that_the_runtime_class_goes() {
    let (_repo, inputs) = repo_with("aws");
    edit(
        &inputs,
        "windowsVersion: \"2022\"               # default",
        "windowsVersion: \"2025\"               # default",
    );
    let (exit, text) = review(&inputs, &[]);
    assert_eq!(exit, 1);
    assert_deletions_first(&text);
    assert!(text.contains("**RuntimeClass `windows2022` (deleted)**: pods that set `runtimeClassName: windows2022`"));
    insta::assert_snapshot!("review__default_windows_version", text);
    assert_eq!(review(&inputs, &["--fail-on-delete"]).0, 1);
}

#[test]
fn a_new_zone_is_a_rename_that_deletes_the_machines() {
    let (_repo, inputs) = repo_with("aws");
    edit(&inputs, "  - zone: us-east-1a ", "  - zone: us-east-1c ");
    edit(&inputs, "    replicas: 1\n", "    replicas: 3\n");
    let (exit, text) = review(&inputs, &[]);
    assert_eq!(exit, 1);
    assert_deletions_first(&text);
    assert!(text.contains(
        "**MachineSet `prod-east-7xk2p-windows-worker-us-east-1a` → `prod-east-7xk2p-windows-worker-us-east-1c` \
         (renamed: deleted and re-created)**: prune deletes the MachineSet and its 1 Machine with it"
    ));
    insta::assert_snapshot!("review__zone_rename", text);

    let o = wmrender(&["diff", "-f", inputs.to_str().unwrap(), "--base", "main", "--output", "json"]);
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(json["destructive"][0]["change"], "renamed");
    assert_eq!(json["destructive"][0]["renamedTo"], "prod-east-7xk2p-windows-worker-us-east-1c");
}

#[test]
fn scaling_down_and_dropping_byoh_hosts_are_destructive_too() {
    let (_repo, inputs) = repo_with("aws");
    edit(&inputs, "    replicas: 2\n", "    replicas: 1\n");
    let (_, text) = review(&inputs, &[]);
    assert!(
        text.contains("**MachineSet `prod-east-7xk2p-win2025-b` (scaled down)**: scaled from 2 to 1: 1 Machine(s)")
    );

    let (_repo, inputs) = repo_with("none");
    edit(&inputs, "  - address: 10.1.42.1\n    username: Administrator\n", "");
    let (exit, text) = review(&inputs, &["--fail-on-delete"]);
    assert_eq!(exit, 1);
    assert!(text.contains("(hosts removed)**: WMCO deconfigures `10.1.42.1`"), "{text}");
    insta::assert_snapshot!("review__byoh_host_removed", text);
}

#[test]
fn node_only_changes_say_sync_must_deliver_them() {
    let (_repo, inputs) = repo_with("aws");
    edit(
        &inputs,
        "  operator:\n    install: true",
        "  pauseImage: mirror.example.com/oss/kubernetes/pause:3.9\n  operator:\n    install: true",
    );
    let (exit, text) = review(&inputs, &[]);
    assert_eq!(exit, 1);
    assert!(!text.contains("[!CAUTION]"), "nothing is deleted: {text}");
    assert!(text.contains("> [!IMPORTANT]\n> **Node files change: Argo CD and Flux do not deliver these.**"));
    insta::assert_snapshot!("review__node_only", text);
    assert_eq!(review(&inputs, &["--fail-on-delete"]).0, 0, "a gate on deletions lets this through");
}

#[test]
fn markdown_marks_changes_with_words_not_bullets() {
    let (_repo, inputs) = repo_with("aws");
    edit(&inputs, "  - zone: us-east-1a ", "  - zone: us-east-1c ");
    let (_, text) = review(&inputs, &[]);
    // Outside the fenced diff, no line starts with the -/+/~ markers GitHub would turn into identical bullets.
    let prose = &text[..text.find("```diff").unwrap()];
    for line in prose.lines() {
        let t = line.trim_start();
        assert!(!(t.starts_with("+ ") || t.starts_with("~ ") || t.starts_with("  - ")), "{line}");
    }
    assert!(prose.contains("| **removed** | MachineSet | `prod-east-7xk2p-windows-worker-us-east-1a` |"));
    assert!(prose.contains("| added | MachineSet | `prod-east-7xk2p-windows-worker-us-east-1c` |"));
}

#[test]
fn base_ref_errors_and_new_files() {
    let (repo, inputs) = repo_with("aws");
    let o = wmrender(&["diff", "-f", inputs.to_str().unwrap(), "--base", "no-such-branch"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("--base `no-such-branch`: no such commit"), "{}", stderr(&o));
    // Inputs that did not exist at the base: everything is added, nothing deleted.
    let new = repo.path().join("clusters/new/wmrender.yaml");
    std::fs::create_dir_all(new.parent().unwrap()).unwrap();
    std::fs::copy(&inputs, &new).unwrap();
    let (exit, text) = review(&new, &["--fail-on-delete"]);
    assert_eq!(exit, 0);
    assert!(text.contains("removed; node files") && !text.contains("[!CAUTION]"));
    // The user's index and working tree are untouched.
    let status = Command::new("git").arg("-C").arg(repo.path()).args(["status", "--porcelain"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&status.stdout), "?? clusters/new/\n");
}
