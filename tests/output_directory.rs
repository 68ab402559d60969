//! `render -o` never destroys what it does not own: a table of odd output paths and directories, each run in a
//! fresh scratch directory whose whole tree (files, directories, symbolic links) is compared before and after.
//! Only the output directory itself may change, and only when the render succeeds.

mod support;

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use support::{code, root, stderr};

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Dir,
    File(Vec<u8>),
    Link(PathBuf),
    /// A named pipe or other special file: never opened.
    Special,
}

/// Every entry below `dir` (links not followed), by relative path.
fn tree(dir: &Path) -> Vec<(String, Kind)> {
    let mut out = Vec::new();
    for e in walkdir::WalkDir::new(dir).min_depth(1).follow_links(false).sort_by_file_name() {
        let e = e.expect("walking the scratch directory");
        let rel = e.path().strip_prefix(dir).expect("below").to_string_lossy().into_owned();
        let kind = if e.file_type().is_symlink() {
            Kind::Link(fs::read_link(e.path()).expect("link"))
        } else if e.file_type().is_dir() {
            Kind::Dir
        } else if e.file_type().is_file() {
            Kind::File(fs::read(e.path()).expect("file"))
        } else {
            Kind::Special
        };
        out.push((rel, kind));
    }
    out
}

/// `before` with the subtree at `dir` (relative) replaced by `render`.
fn replaced(before: &[(String, Kind)], dir: &str, render: &[(String, Kind)]) -> Vec<(String, Kind)> {
    let mut out: Vec<_> =
        before.iter().filter(|(p, _)| p != dir && !p.starts_with(&format!("{dir}/"))).cloned().collect();
    // The directory and any parents the render had to create.
    for (i, _) in dir.match_indices('/').chain([(dir.len(), "")]) {
        let ancestor = (dir[..i].to_string(), Kind::Dir);
        if !out.contains(&ancestor) {
            out.push(ancestor);
        }
    }
    out.extend(render.iter().map(|(p, k)| (format!("{dir}/{p}"), k.clone())));
    out.sort();
    out
}

fn inputs() -> PathBuf {
    root().join("examples/aws/wmrender.yaml")
}

fn render_in(cwd: &Path, out: &str, extra: &[&str]) -> Output {
    let inputs = inputs();
    let mut args = vec!["render", "-f", inputs.to_str().unwrap(), "-o", out];
    args.extend_from_slice(extra);
    Command::new(env!("CARGO_BIN_EXE_wmrender"))
        .args(&args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .expect("running wmrender")
}

/// The tree a fresh render writes.
fn fresh_render() -> Vec<(String, Kind)> {
    let (_tmp, out) = support::render_to_temp(&inputs());
    tree(&out)
}

fn rendered_dir(at: &Path) {
    fs::create_dir_all(at.parent().unwrap()).unwrap();
    let o = render_in(at.parent().unwrap(), at.to_str().unwrap(), &[]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

struct Case {
    name: &'static str,
    /// Builds the scratch directory.
    setup: fn(&Path),
    /// The -o argument, relative to the scratch directory (the working directory).
    out: &'static str,
    extra: &'static [&'static str],
    code: i32,
    /// Every one of these must be in stderr.
    says: &'static [&'static str],
    /// On success: the directory (relative, links resolved) that must now hold exactly the fresh render.
    replaced: Option<&'static str>,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "a foreign directory with a manifest.json",
            setup: |s| {
                fs::create_dir_all(s.join("u/src")).unwrap();
                fs::write(s.join("u/manifest.json"), "{}\n").unwrap();
                fs::write(s.join("u/src/app.js"), "x\n").unwrap();
            },
            out: "u",
            extra: &[],
            code: 2,
            says: &["not written by wmrender", "`src/app.js`", "`manifest.json`"],
            replaced: None,
        },
        Case {
            name: "a foreign directory with a manifest.json, even with --force",
            setup: |s| {
                fs::create_dir_all(s.join("u/src")).unwrap();
                fs::write(s.join("u/manifest.json"), r#"{"files": []}"#).unwrap();
                fs::write(s.join("u/src/app.js"), "x\n").unwrap();
            },
            out: "u",
            extra: &["--force"],
            code: 2,
            says: &["not written by wmrender", "`src/app.js`"],
            replaced: None,
        },
        Case {
            name: "a foreign directory without a manifest",
            setup: |s| {
                fs::create_dir_all(s.join("u")).unwrap();
                fs::write(s.join("u/notes.txt"), "keep\n").unwrap();
            },
            out: "u",
            extra: &[],
            code: 2,
            says: &["not written by wmrender", "`notes.txt`"],
            replaced: None,
        },
        Case {
            name: "a user file in a rendered directory",
            setup: |s| {
                rendered_dir(&s.join("d"));
                fs::write(s.join("d/README.md"), "ours\n").unwrap();
            },
            out: "d",
            extra: &[],
            code: 2,
            says: &["`README.md` (not in manifest.json)", "--force"],
            replaced: None,
        },
        Case {
            name: "an empty directory added to a rendered directory",
            setup: |s| {
                rendered_dir(&s.join("d"));
                fs::create_dir(s.join("d/keep")).unwrap();
            },
            out: "d",
            extra: &[],
            code: 2,
            says: &["`keep/` (an empty directory)"],
            replaced: None,
        },
        Case {
            name: "an edited file in a rendered directory",
            setup: |s| {
                rendered_dir(&s.join("d"));
                fs::write(s.join("d/cluster/kustomization.yaml"), "# mine\n").unwrap();
            },
            out: "d",
            extra: &[],
            code: 2,
            says: &["`cluster/kustomization.yaml` (changed since wmrender wrote it)"],
            replaced: None,
        },
        Case {
            name: "a user file in a rendered directory with --force",
            setup: |s| {
                rendered_dir(&s.join("d"));
                fs::write(s.join("d/README.md"), "ours\n").unwrap();
            },
            out: "d",
            extra: &["--force"],
            code: 0,
            says: &["wrote"],
            replaced: Some("d"),
        },
        Case {
            name: "d/../d over a render",
            setup: |s| rendered_dir(&s.join("d")),
            out: "d/../d",
            extra: &[],
            code: 0,
            says: &["wrote"],
            replaced: Some("d"),
        },
        Case {
            name: "d/. over a render",
            setup: |s| rendered_dir(&s.join("d")),
            out: "d/.",
            extra: &[],
            code: 0,
            says: &["wrote"],
            replaced: Some("d"),
        },
        Case {
            name: "a new directory below a new parent",
            setup: |_| {},
            out: "a/b/d",
            extra: &[],
            code: 0,
            says: &["wrote"],
            replaced: Some("a/b/d"),
        },
        Case {
            name: "a symbolic link to a rendered directory is written through",
            setup: |s| {
                rendered_dir(&s.join("real"));
                symlink("real", s.join("link")).unwrap();
            },
            out: "link",
            extra: &[],
            code: 0,
            says: &["wrote"],
            replaced: Some("real"),
        },
        Case {
            name: "a symbolic link to an empty directory is written through",
            setup: |s| {
                fs::create_dir(s.join("real")).unwrap();
                symlink(s.join("real"), s.join("link")).unwrap();
            },
            out: "link",
            extra: &[],
            code: 0,
            says: &["wrote"],
            replaced: Some("real"),
        },
        Case {
            name: "a symbolic link to a foreign directory",
            setup: |s| {
                fs::create_dir(s.join("real")).unwrap();
                fs::write(s.join("real/x"), "x").unwrap();
                symlink("real", s.join("link")).unwrap();
            },
            out: "link",
            extra: &[],
            code: 2,
            says: &["not written by wmrender", "`x`"],
            replaced: None,
        },
        Case {
            name: "a dangling symbolic link",
            setup: |s| symlink("nowhere", s.join("link")).unwrap(),
            out: "link",
            extra: &[],
            code: 2,
            says: &["symbolic link to `nowhere`, which does not exist"],
            replaced: None,
        },
        Case {
            name: "a file where DIR should be",
            setup: |s| fs::write(s.join("d"), "a file").unwrap(),
            out: "d",
            extra: &[],
            code: 2,
            says: &["exists and is not a directory"],
            replaced: None,
        },
        Case {
            name: "a file where a parent of DIR should be",
            setup: |s| fs::write(s.join("f"), "a file").unwrap(),
            out: "f/d",
            extra: &[],
            code: 2,
            says: &["runs through a file where a directory should be"],
            replaced: None,
        },
        Case {
            name: "the parent of a directory holding the render",
            setup: |s| rendered_dir(&s.join("p/d")),
            out: "p/d/..",
            extra: &[],
            code: 2,
            says: &["not written by wmrender"],
            replaced: None,
        },
        Case {
            name: "temporary trees of killed renders are removed, nothing else",
            setup: |s| {
                rendered_dir(&s.join("d"));
                // A render killed while writing: its tree carries the mark it writes first.
                fs::create_dir_all(s.join(".d.wmrender-4242.new/cluster")).unwrap();
                fs::write(s.join(".d.wmrender-4242.new/cluster/x.yaml"), "x").unwrap();
                fs::write(s.join(".d.wmrender-4242.new/.wmrender-temporary"), MARK).unwrap();
                // Killed between writing and swapping: a complete render.
                rendered_dir(&s.join(".d.wmrender-55-2.old"));
                // Killed having just created its directory.
                fs::create_dir(s.join(".d.wmrender-77.old")).unwrap();
                // Named like a temporary tree, but someone's files: kept, said so.
                fs::create_dir_all(s.join(".d.wmrender-99.new/src")).unwrap();
                fs::write(s.join(".d.wmrender-99.new/src/app.js"), "mine\n").unwrap();
                // Another directory's, or not a tree at all.
                fs::create_dir(s.join(".e.wmrender-77.old")).unwrap();
                fs::write(s.join(".d.wmrender-notes"), "mine").unwrap();
            },
            out: "d",
            extra: &[],
            code: 0,
            says: &["wrote", ".d.wmrender-99.new alone", "does not carry wmrender's mark"],
            replaced: Some("d"),
        },
        Case {
            name: "-o is a symbolic link loop",
            setup: |s| {
                symlink("b", s.join("a")).unwrap();
                symlink("a", s.join("b")).unwrap();
            },
            out: "a",
            extra: &[],
            code: 2,
            says: &["`a` cannot be an output directory", "symbolic links form a loop"],
            replaced: None,
        },
        Case {
            name: "-o runs through a symbolic link loop",
            setup: |s| {
                symlink("b", s.join("a")).unwrap();
                symlink("a", s.join("b")).unwrap();
            },
            out: "a/d",
            extra: &[],
            code: 2,
            says: &["symbolic links form a loop"],
            replaced: None,
        },
        Case {
            name: "a 250-character -o name over a render",
            setup: |s| rendered_dir(&s.join(long_name(250))),
            out: long_name(250),
            extra: &[],
            code: 0,
            says: &["wrote"],
            replaced: Some(long_name(250)),
        },
        Case {
            name: "a new 255-character -o name",
            setup: |_| {},
            out: long_name(255),
            extra: &[],
            code: 0,
            says: &["wrote"],
            replaced: Some(long_name(255)),
        },
        Case {
            name: "a 256-character -o name",
            setup: |_| {},
            out: long_name(256),
            extra: &[],
            code: 2,
            says: &["cannot be an output directory", "too long"],
            replaced: None,
        },
        Case {
            name: "a named pipe in place of a rendered file",
            setup: |s| {
                rendered_dir(&s.join("d"));
                fs::remove_file(s.join("d/cluster/kustomization.yaml")).unwrap();
                mkfifo(&s.join("d/cluster/kustomization.yaml"));
            },
            out: "d",
            extra: &[],
            code: 2,
            says: &["`cluster/kustomization.yaml` (a named pipe"],
            replaced: None,
        },
    ]
}

/// What a render writes first into its temporary tree (src/emit/directory.rs).
const MARK: &str = "a temporary tree of `wmrender render`; the next render into the directory beside it removes it\n";

/// A directory name of `n` characters.
fn long_name(n: usize) -> &'static str {
    Box::leak(format!("out-{}", "n".repeat(n - 4)).into_boxed_str())
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo only reads it.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo {}", path.display());
}

#[test]
fn render_changes_nothing_but_its_own_directory() {
    let fresh = fresh_render();
    let mut failures = Vec::new();
    for case in cases() {
        let scratch = tempfile::tempdir().unwrap();
        let s = scratch.path();
        (case.setup)(s);
        let before = tree(s);
        let o = render_in(s, case.out, case.extra);
        let err = stderr(&o);
        let mut problems = Vec::new();
        if code(&o) != case.code {
            problems.push(format!("exit code {} instead of {}", code(&o), case.code));
        }
        for phrase in case.says {
            if !err.contains(phrase) {
                problems.push(format!("no `{phrase}` in the message"));
            }
        }
        let mut expected = match case.replaced {
            Some(dir) => replaced(&before, dir, &fresh),
            None => before.clone(),
        };
        if case.name.starts_with("temporary trees") {
            expected.retain(|(p, _)| {
                ![".d.wmrender-4242", ".d.wmrender-77", ".d.wmrender-55-2"].iter().any(|t| p.starts_with(t))
            });
        }
        let after = tree(s);
        if after != expected {
            let added: Vec<_> = after.iter().filter(|e| !expected.contains(e)).map(|e| &e.0).collect();
            let lost: Vec<_> = expected.iter().filter(|e| !after.contains(e)).map(|e| &e.0).collect();
            problems.push(format!("the tree changed: unexpected {added:?}, missing or different {lost:?}"));
        }
        if !problems.is_empty() {
            failures.push(format!("{}: {}\n{err}", case.name, problems.join("; ")));
        }
    }
    assert!(failures.is_empty(), "{} cases failed:\n\n{}", failures.len(), failures.join("\n"));
}

/// A read-only parent: the render is refused before anything changes (exit 3, saying why) and the old render stays. As root, permissions do
/// not apply, so the render runs as `nobody` through util-linux's setpriv: the kernel, not a stand-in, refuses.
#[test]
fn a_read_only_parent_fails_cleanly_and_keeps_the_old_render() {
    let scratch = tempfile::tempdir().unwrap();
    fs::set_permissions(scratch.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let parent = scratch.path().join("ro");
    rendered_dir(&parent.join("d"));
    // The old render must differ from the new one, so that "kept" is observable.
    let rc = parent.join("d/cluster/kustomization.yaml");
    let manifest = fs::read_to_string(parent.join("d/manifest.json")).unwrap();
    fs::remove_file(&rc).unwrap();
    fs::write(parent.join("d/manifest.json"), without_entry(&manifest, "cluster/kustomization.yaml")).unwrap();
    fs::set_permissions(&parent, fs::Permissions::from_mode(0o555)).unwrap();
    let before = tree(scratch.path());

    let out = parent.join("d");
    let mut cmd = if is_root() {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", env!("CARGO_BIN_EXE_wmrender")]);
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_wmrender"))
    };
    let o = cmd
        .args(["render", "-f", inputs().to_str().unwrap(), "-o", out.to_str().unwrap()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    fs::set_permissions(&parent, fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    let says = format!("this user may not change {} (it is read-only, or another user's)", parent.display());
    assert!(stderr(&o).contains(&says), "{}", stderr(&o));
    assert!(stderr(&o).contains("nothing was changed") && !stderr(&o).contains("os error"), "{}", stderr(&o));
    assert_eq!(tree(scratch.path()), before);
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The manifest without one file, so the directory is still a consistent render.
fn without_entry(manifest: &str, path: &str) -> String {
    let mut m: serde_json::Value = serde_json::from_str(manifest).unwrap();
    m["files"].as_array_mut().unwrap().retain(|f| f["path"] != path);
    serde_json::to_string_pretty(&m).unwrap() + "\n"
}

/// A render in progress holds a lock on the parent; another render waits for it and never removes its temporary
/// tree. The test holds the same lock itself, with a temporary tree named like a live render's.
#[test]
fn a_live_renders_temporary_tree_is_left_alone() {
    use std::os::fd::AsRawFd;
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    rendered_dir(&s.join("d"));
    let live = s.join(format!(".d.wmrender-{}.new", std::process::id()));
    fs::create_dir(&live).unwrap();
    let parent = fs::File::open(s).unwrap();
    // SAFETY: a plain flock on a descriptor this test owns.
    assert_eq!(unsafe { libc::flock(parent.as_raw_fd(), libc::LOCK_EX) }, 0);

    let mut child = Command::new(env!("CARGO_BIN_EXE_wmrender"))
        .args(["render", "-f", inputs().to_str().unwrap(), "-o", "d"])
        .current_dir(s)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700));
    assert!(child.try_wait().unwrap().is_none(), "the render did not wait for the lock");
    assert!(live.is_dir(), "a live render's temporary tree was removed");

    drop(parent); // the "live render" ends (here: without cleaning up, as if killed)
    let o = child.wait_with_output().unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(!live.exists(), "the leftover of a finished render stays");
    let names: Vec<_> = fs::read_dir(s).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, vec![std::ffi::OsString::from("d")]);
}

/// A symbolic link to `..` inside a rendered directory: `--check` reports it (it is not wmrender's) without
/// following it into a loop, and a render refuses to delete it.
#[test]
fn a_symbolic_link_loop_in_the_output_is_reported_not_followed() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    rendered_dir(&s.join("d"));
    symlink("..", s.join("d/loop")).unwrap();
    let o = render_in(s, "d", &["--check"]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert!(stderr(&o).contains("0 changed, 0 to add, 1 to remove"), "{}", stderr(&o));
    let o = render_in(s, "d", &[]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("`loop` (not in manifest.json)"), "{}", stderr(&o));
    assert!(s.join("d/loop").symlink_metadata().unwrap().file_type().is_symlink());
}

/// Runs `cmd` and waits at most `secs` for it; a run still going then is killed and reported as hanging.
fn output_within(cmd: &mut Command, secs: u64) -> Output {
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running after {secs} s: {cmd:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// `render --check` and `diff --against` report a named pipe (or socket) in the directory by what it is, and never
/// open it: a pipe nobody writes to would make them wait forever.
#[test]
fn check_and_diff_report_special_files_without_reading_them() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    rendered_dir(&s.join("d"));
    mkfifo(&s.join("d/pipe"));
    fs::remove_file(s.join("d/cluster/kustomization.yaml")).unwrap();
    mkfifo(&s.join("d/cluster/kustomization.yaml"));
    let _socket = std::os::unix::net::UnixListener::bind(s.join("d/socket")).unwrap();
    let bin = env!("CARGO_BIN_EXE_wmrender");
    let inputs = inputs();
    let o = output_within(
        Command::new(bin).args(["render", "-f", inputs.to_str().unwrap(), "-o", "d", "--check"]).current_dir(s),
        30,
    );
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("1 changed, 0 to add, 2 to remove"), "{err}");
    assert!(err.contains("(a named pipe, not read)") && err.contains("(a socket, not read)"), "{err}");
    let o = output_within(
        Command::new(bin).args(["diff", "-f", inputs.to_str().unwrap(), "--against", "d"]).current_dir(s),
        30,
    );
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("pipe"), "{}", String::from_utf8_lossy(&o.stdout));
}

/// A rendered directory holding a read-only subdirectory, or read-only itself, as a user who owns it: the render
/// is refused before anything changes, saying which directory and why, every time; once it is writable again, the
/// render completes and leaves nothing beside it.
#[test]
fn a_read_only_tree_is_refused_before_anything_changes() {
    let scratch = tempfile::tempdir().unwrap();
    let work = scratch.path().join("w");
    fs::create_dir(&work).unwrap();
    fs::set_permissions(scratch.path(), fs::Permissions::from_mode(0o755)).unwrap();
    if is_root() {
        std::os::unix::fs::chown(&work, Some(65534), Some(65534)).unwrap();
    }
    let example = inputs();
    let variant = scratch.path().join("variant.yaml");
    fs::write(&variant, fs::read_to_string(&example).unwrap().replace("replicas: 2", "replicas: 3")).unwrap();
    fs::set_permissions(&variant, fs::Permissions::from_mode(0o644)).unwrap();
    let render = |inputs: &Path| {
        let mut cmd = if is_root() {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", env!("CARGO_BIN_EXE_wmrender")]);
            c
        } else {
            Command::new(env!("CARGO_BIN_EXE_wmrender"))
        };
        cmd.args(["render", "-f", inputs.to_str().unwrap(), "-o", "d"]).current_dir(&work);
        output_within(&mut cmd, 60)
    };
    let o = render(&example);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    for locked in ["d/node/C/k", "d"] {
        let dir = work.join(locked);
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o555)).unwrap();
        let before = tree(&work);
        for attempt in 0..2 {
            let o = render(&variant);
            let err = stderr(&o);
            assert_eq!(code(&o), 3, "{locked}, attempt {attempt}: {err}");
            assert!(err.contains(&format!("may not change {}", dir.display())), "{locked}: {err}");
            assert!(err.contains("nothing was changed") && !err.contains("leftover"), "{locked}: {err}");
            assert_eq!(tree(&work), before, "{locked}, attempt {attempt}: something changed");
        }
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
    }
    let o = render(&variant);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let names: Vec<_> = fs::read_dir(&work).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, vec![std::ffi::OsString::from("d")], "nothing is left beside the output");
}
