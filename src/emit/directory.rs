//! Writing the output tree atomically: render into a temporary sibling, then swap it in, so a failed or
//! interrupted render never leaves a half-written directory, and stale files from an older render disappear.
//!
//! The steps, in order, each before anything is moved:
//! 1. resolve `-o` to a real path (through `..`, `.` and symbolic links: a link's target is what the user means);
//! 2. lock the parent directory, so two renders into it take turns, and remove the temporary trees that killed
//!    runs left behind (under the lock, no live render is using them), but only those that are wmrender's: a
//!    tree carrying the mark a render writes first, a complete rendered tree, or an empty directory;
//! 3. check that the existing directory is wmrender's ([`super::ownership`]) and that it can be removed once
//!    replaced (no read-only directory in it): otherwise refuse, before anything changes;
//! 4. write the new tree beside it and exchange the two in one step (`renameat2(RENAME_EXCHANGE)` on Linux; two
//!    renames elsewhere or where the file system lacks it), then delete the old tree, its mark last.

use crate::error::Error;
use crate::render::Artifact;
use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fs;
use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};

/// The mark of a render's temporary tree: written first into a new tree (and removed just before it is swapped
/// in), and into the old tree as soon as it is swapped out (and removed last). A killed render's leftover is
/// removed by the next render only if it carries it, or is a complete rendered tree, or is empty.
const MARK: &str = ".wmrender-temporary";
const MARK_TEXT: &str =
    "a temporary tree of `wmrender render`; the next render into the directory beside it removes it\n";
/// The longest file name most file systems take (NAME_MAX).
const NAME_MAX: usize = 255;

/// Replaces `out` with exactly `files`. Refuses (a usage error) to replace a directory holding anything wmrender
/// did not write, unless `force` and the directory has a wmrender manifest. Returns notes for the user: temporary
/// trees beside `out` that were left alone.
pub fn write(out: &Path, files: &[Artifact], force: bool) -> Result<Vec<String>, Error> {
    let target = resolve(out)?;
    let (Some(parent), Some(name)) = (target.parent(), target.file_name()) else {
        return Err(Error::Usage(format!("`{}` cannot be an output directory", out.display())));
    };
    let _lock = lock::Lock::take(parent)?;
    // Only under a real lock can a leftover be known to belong to no live render.
    let notes = if cfg!(unix) { remove_stale_temporaries(parent, name)? } else { Vec::new() };
    let exists = match fs::metadata(&target) {
        Ok(m) if m.is_dir() => true,
        Ok(_) => {
            return Err(Error::Usage(format!(
                "`{}` exists and is not a directory; choose another -o directory",
                out.display()
            )));
        }
        Err(e) if e.kind() == ErrorKind::NotFound => false,
        Err(e) => return Err(unusable(out, e, "reading")),
    };
    if exists {
        super::ownership::check_replaceable(&target, force)?;
    }
    check_writable(out, parent, exists.then_some(target.as_path()))?;

    let (new, old) = temporary_names(parent, name);
    let result = write_tree(&new, files).and_then(|()| swap(&target, exists, &new, &old));
    if result.is_err() && new.exists() && is_ours(&new) {
        let _ = remove_marked(&new);
    }
    result.map(|()| notes)
}

/// The absolute path `out` names, with `.`, `..` and symbolic links resolved the way the kernel resolves them.
/// A missing directory's parent is created. A dangling link is refused: its target is missing, and replacing the
/// link with a directory would silently leave the place it points to stale. So is a path no directory can have
/// (a link loop, a name too long): what `-o` names is input like any other.
fn resolve(out: &Path) -> Result<PathBuf, Error> {
    match fs::symlink_metadata(out) {
        Ok(_) => fs::canonicalize(out).map_err(|e| match e.kind() {
            ErrorKind::NotFound => {
                let to = fs::read_link(out).map(|t| t.display().to_string()).unwrap_or_default();
                Error::Usage(format!(
                    "`{}` is a symbolic link to `{to}`, which does not exist; create the directory it points to, \
                     or give -o a directory",
                    out.display()
                ))
            }
            _ => unusable(out, e, "resolving"),
        }),
        Err(e) if e.kind() == ErrorKind::NotFound => {
            let Some(Component::Normal(name)) = out.components().next_back() else {
                return Err(Error::Usage(format!("`{}` cannot be an output directory", out.display())));
            };
            // Refused before its parents are created: a name no file system takes.
            if name.len() > NAME_MAX {
                return Err(Error::Usage(format!(
                    "`{}` cannot be an output directory: its name is {} bytes long, and a file name holds at most \
                     {NAME_MAX}; choose another -o",
                    out.display(),
                    name.len()
                )));
            }
            let parent = match out.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            fs::create_dir_all(parent).map_err(|e| parent_error(parent, e))?;
            let parent = fs::canonicalize(parent).map_err(|e| parent_error(parent, e))?;
            Ok(parent.join(name))
        }
        Err(e) => Err(unusable(out, e, "reading")),
    }
}

fn parent_error(parent: &Path, e: std::io::Error) -> Error {
    match e.kind() {
        ErrorKind::AlreadyExists => not_a_directory(parent),
        _ => unusable(parent, e, "creating"),
    }
}

/// An error about the path `-o` names: a path that cannot name a directory is a usage error (exit 2), anything else
/// (permissions, a full disk) an operational one.
fn unusable(path: &Path, e: std::io::Error, doing: &str) -> Error {
    #[cfg(unix)]
    let cannot_name = matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENAMETOOLONG));
    #[cfg(not(unix))]
    let cannot_name = false;
    if e.kind() == ErrorKind::NotADirectory {
        not_a_directory(path)
    } else if cannot_name || e.kind() == ErrorKind::InvalidFilename {
        Error::Usage(format!(
            "`{}` cannot be an output directory: {}; choose another -o",
            path.display(),
            crate::error::io_reason(&e)
        ))
    } else {
        Error::io(format!("{doing} {}", path.display()), e)
    }
}

fn not_a_directory(path: &Path) -> Error {
    Error::Usage(format!("`{}` runs through a file where a directory should be; choose another -o", path.display()))
}

/// `.NAME.wmrender-`: the temporary trees of a render into NAME are `.NAME.wmrender-PID.new` and `.old` (`PID-2`
/// and so on should those names be taken). A NAME too long for the whole to fit in a file name, or not UTF-8, is
/// shortened and followed by a hash of it, so every render into NAME finds the same names.
fn temporary_prefix(name: &OsStr) -> String {
    // Room for the widest PID, a counter and `.new`.
    const TAIL: usize = 24;
    match name.to_str() {
        Some(n) if n.len() + ".".len() + ".wmrender-".len() + TAIL <= NAME_MAX => format!(".{n}.wmrender-"),
        _ => {
            let lossy = name.to_string_lossy();
            let mut cut = lossy.len().min(120);
            while !lossy.is_char_boundary(cut) {
                cut -= 1;
            }
            let hash = &wmrender_contract::sha256_hex(name.as_encoded_bytes())[..16];
            format!(".{}~{hash}.wmrender-", &lossy[..cut])
        }
    }
}

/// The temporary names of this render: free ones, so that a leftover that could not be removed is no obstacle.
fn temporary_names(parent: &Path, name: &OsStr) -> (PathBuf, PathBuf) {
    let prefix = temporary_prefix(name);
    let pid = std::process::id();
    (1u32..)
        .map(|n| if n == 1 { format!("{prefix}{pid}") } else { format!("{prefix}{pid}-{n}") })
        .map(|stem| (parent.join(format!("{stem}.new")), parent.join(format!("{stem}.old"))))
        .find(|(new, old)| fs::symlink_metadata(new).is_err() && fs::symlink_metadata(old).is_err())
        .unwrap_or_else(|| (parent.join(format!("{prefix}{pid}.new")), parent.join(format!("{prefix}{pid}.old"))))
}

/// Deletes the temporary trees of earlier renders into `name` that were killed before they could clean up: those
/// that are wmrender's ([`is_ours`]). Called with the parent locked: every render holds the lock while its
/// temporaries exist, so none is in use. Returns a note for each one left alone.
fn remove_stale_temporaries(parent: &Path, name: &OsStr) -> Result<Vec<String>, Error> {
    let prefix = temporary_prefix(name);
    let entries = fs::read_dir(parent).map_err(|e| Error::io(format!("reading {}", parent.display()), e))?;
    let mut notes = Vec::new();
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(rest) = file_name.to_str().and_then(|n| n.strip_prefix(&prefix)) else { continue };
        let Some(stem) = rest.strip_suffix(".new").or_else(|| rest.strip_suffix(".old")) else { continue };
        let (pid, n) = stem.split_once('-').unwrap_or((stem, "1"));
        let numbered = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !(numbered(pid) && numbered(n) && entry.file_type().is_ok_and(|t| t.is_dir())) {
            continue;
        }
        let path = entry.path();
        if !is_ours(&path) {
            notes.push(format!(
                "left {} alone: it is named like a render's temporary tree but does not carry wmrender's mark",
                path.display()
            ));
            continue;
        }
        if let Err(e) = remove_marked(&path) {
            notes.push(format!(
                "could not remove {}, a killed render's temporary tree: {}",
                path.display(),
                crate::error::io_reason(&e)
            ));
        }
    }
    Ok(notes)
}

/// Whether a directory named like a temporary tree is one of wmrender's: it carries the mark, or it is a complete
/// rendered tree (between the mark's removal and the swap, or an old tree before its mark was written), or it is
/// empty (created, or emptied, by a render killed at that moment).
fn is_ours(dir: &Path) -> bool {
    // The mark's text, or the start of it: a render killed while writing the mark leaves it cut short.
    let marked = fs::read(dir.join(MARK)).is_ok_and(|b| MARK_TEXT.as_bytes().starts_with(&b));
    let empty = fs::read_dir(dir).is_ok_and(|mut d| d.next().is_none());
    marked || empty || super::ownership::is_rendered_tree(dir)
}

/// Deletes a temporary tree, its mark last, so that a deletion cut short still leaves it recognisable.
fn remove_marked(dir: &Path) -> std::io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name() == MARK {
            continue;
        }
        if entry.file_type()?.is_dir() { fs::remove_dir_all(entry.path())? } else { fs::remove_file(entry.path())? }
    }
    match fs::remove_file(dir.join(MARK)) {
        Err(e) if e.kind() != ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    fs::remove_dir(dir)
}

/// Refuses, before anything changes, a render that could not finish: one whose temporary tree cannot be made
/// beside `out`, or whose previous tree could not be removed once replaced (a directory in it, or the tree itself,
/// that this user may not change, as a read-only subdirectory makes it).
fn check_writable(out: &Path, parent: &Path, target: Option<&Path>) -> Result<(), Error> {
    let refused = |dir: &Path, what: &str| {
        Error::Operational(format!(
            "cannot render into {}: this user may not change {} (it is read-only, or another user's), {what}; \
             nothing was changed. Make it writable (`chmod u+w`) or choose another -o",
            out.display(),
            dir.display(),
        ))
    };
    if !writable(parent) {
        return Err(refused(parent, "so the new tree cannot be written beside the output directory"));
    }
    let Some(target) = target else { return Ok(()) };
    let dirs =
        walkdir::WalkDir::new(target).follow_links(false).into_iter().flatten().filter(|e| e.file_type().is_dir());
    match dirs.map(walkdir::DirEntry::into_path).find(|dir| !writable(dir)) {
        Some(dir) => Err(refused(&dir, "so the previous render could not be removed once replaced")),
        None => Ok(()),
    }
}

/// Whether this process may add and remove entries in `dir`.
#[cfg(unix)]
fn writable(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(path) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else { return false };
    // SAFETY: a valid NUL-terminated path that outlives the call; faccessat only reads it.
    unsafe { libc::faccessat(libc::AT_FDCWD, path.as_ptr(), libc::W_OK | libc::X_OK, libc::AT_EACCESS) == 0 }
}

#[cfg(not(unix))]
fn writable(_: &Path) -> bool {
    true
}

fn write_tree(root: &Path, files: &[Artifact]) -> Result<(), Error> {
    // Every directory once, parents first (a path sorts before the paths under it), rather than a
    // `create_dir_all` per file that mostly finds its directory already there. Compared as the `/`-separated text
    // artifact paths are, which orders them the same: `Path` compares component by component, at several times
    // the cost, for every file's every folder.
    let dirs: BTreeSet<&str> = files.iter().flat_map(|f| folders(&f.path)).collect();
    fs::create_dir(root).map_err(|e| Error::io(format!("creating {}", root.display()), e))?;
    // The mark first: a render killed from here on leaves a tree the next render knows as its own.
    let mark = root.join(MARK);
    fs::write(&mark, MARK_TEXT).map_err(|e| Error::io(format!("writing {}", mark.display()), e))?;
    for dir in dirs.into_iter().map(|d| root.join(d)) {
        fs::create_dir(&dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    }
    for f in files {
        let path = root.join(&f.path);
        fs::write(&path, &f.bytes).map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
    }
    // Complete: from here it is a rendered tree, known as one by its manifest.
    fs::remove_file(&mark).map_err(|e| Error::io(format!("removing {}", mark.display()), e))
}

/// The folders holding an artifact path, innermost first: `a/b/c` is in `a/b` and `a`.
fn folders(path: &str) -> impl Iterator<Item = &str> {
    fn parent(p: &str) -> Option<&str> {
        p.rfind('/').map(|i| &p[..i])
    }
    std::iter::successors(parent(path), |p| parent(p))
}

/// Puts the tree at `new` in place of `target`, then deletes the previous tree. At every instant `target` is
/// either the complete old tree or the complete new one (on Linux; elsewhere, see [`two_step_swap`]).
fn swap(target: &Path, exists: bool, new: &Path, old: &Path) -> Result<(), Error> {
    if !exists {
        return fs::rename(new, target)
            .map_err(|e| Error::io(format!("moving the new output into {}", target.display()), e));
    }
    match exchange(new, target) {
        // `new` now holds the previous tree.
        Ok(()) => remove_previous(new),
        Err(e) if exchange_unsupported(&e) => two_step_swap(target, new, old),
        Err(e) => Err(Error::io(format!("moving the new output into {}", target.display()), e)),
    }
}

/// Deletes the previous tree, swapped out to `at`: marked first, so that a render killed while deleting it leaves
/// a tree the next render removes.
fn remove_previous(at: &Path) -> Result<(), Error> {
    let _ = fs::write(at.join(MARK), MARK_TEXT);
    remove_marked(at).map_err(|e| {
        Error::io(format!("the new output is in place, but removing the previous one ({}) failed", at.display()), e)
    })
}

/// Moves the old tree aside, the new one in, then deletes the old one; on failure puts the old one back. A kill
/// between the two renames leaves `target` missing (the old tree stays in `old` until the next render).
fn two_step_swap(target: &Path, new: &Path, old: &Path) -> Result<(), Error> {
    fs::rename(target, old).map_err(|e| Error::io(format!("moving {} aside", target.display()), e))?;
    if let Err(e) = fs::rename(new, target) {
        let _ = fs::rename(old, target);
        return Err(Error::io(format!("moving the new output into {}", target.display()), e));
    }
    remove_previous(old)
}

/// Swaps two directory entries atomically.
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let a = CString::new(a.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    let b = CString::new(b.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    // The system call, not libc's wrapper: the musl that Rust links static binaries with has no renameat2().
    // SAFETY: both paths are valid NUL-terminated strings that outlive the call; renameat2 only reads them.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

#[cfg(not(target_os = "linux"))]
fn exchange(_: &Path, _: &Path) -> std::io::Result<()> {
    Err(std::io::Error::from(ErrorKind::Unsupported))
}

/// The kernel or file system has no atomic exchange (old kernels, some network and FUSE file systems).
fn exchange_unsupported(e: &std::io::Error) -> bool {
    #[cfg(target_os = "linux")]
    if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP)) {
        return true;
    }
    e.kind() == ErrorKind::Unsupported
}

mod lock {
    use crate::error::Error;
    use std::path::Path;

    /// An exclusive `flock` on a directory, released when dropped or when the process dies (even by SIGKILL).
    pub struct Lock {
        #[cfg(unix)]
        _dir: std::fs::File,
    }

    impl Lock {
        #[cfg(unix)]
        pub fn take(dir: &Path) -> Result<Lock, Error> {
            use std::os::fd::AsRawFd;
            let file = std::fs::File::open(dir).map_err(|e| Error::io(format!("opening {}", dir.display()), e))?;
            loop {
                // SAFETY: the descriptor belongs to `file`, which is open for the whole call.
                if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
                    return Ok(Lock { _dir: file });
                }
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(Error::io(format!("locking {}", dir.display()), e));
                }
            }
        }

        /// Without `flock`, renders into one directory are not serialised.
        #[cfg(not(unix))]
        pub fn take(_dir: &Path) -> Result<Lock, Error> {
            Ok(Lock {})
        }
    }
}
