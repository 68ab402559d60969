//! Writing the output tree atomically: render into a temporary sibling, then swap it in, so a failed or
//! interrupted render never leaves a half-written directory, and stale files from an older render disappear.
//!
//! The steps, in order, each before anything is moved:
//! 1. resolve `-o` to a real path (through `..`, `.` and symbolic links: a link's target is what the user means);
//! 2. lock the parent directory, so two renders into it take turns, and remove the temporary trees that killed
//!    runs left behind (under the lock, no live render is using them);
//! 3. check that the existing directory is wmrender's ([`super::ownership`]);
//! 4. write the new tree beside it and exchange the two in one step (`renameat2(RENAME_EXCHANGE)` on Linux; two
//!    renames elsewhere or where the file system lacks it), then delete the old tree.

use crate::error::Error;
use crate::render::Artifact;
use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fs;
use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};

/// Replaces `out` with exactly `files`. Refuses (a usage error) to replace a directory holding anything wmrender
/// did not write, unless `force` and the directory has a wmrender manifest.
pub fn write(out: &Path, files: &[Artifact], force: bool) -> Result<(), Error> {
    let target = resolve(out)?;
    let (Some(parent), Some(name)) = (target.parent(), target.file_name()) else {
        return Err(Error::Usage(format!("`{}` cannot be an output directory", out.display())));
    };
    let _lock = lock::Lock::take(parent)?;
    // Only under a real lock can a leftover be known to belong to no live render.
    if cfg!(unix) {
        remove_stale_temporaries(parent, name)?;
    }
    let exists = match fs::metadata(&target) {
        Ok(m) if m.is_dir() => true,
        Ok(_) => {
            return Err(Error::Usage(format!(
                "`{}` exists and is not a directory; choose another -o directory",
                out.display()
            )));
        }
        Err(e) if e.kind() == ErrorKind::NotFound => false,
        Err(e) => return Err(Error::io(format!("reading {}", target.display()), e)),
    };
    if exists {
        super::ownership::check_replaceable(&target, force)?;
    }

    let tag = temporary_prefix(name);
    let pid = std::process::id();
    let new = parent.join(format!("{tag}{pid}.new"));
    let old = parent.join(format!("{tag}{pid}.old"));
    let result = write_tree(&new, files).and_then(|()| swap(&target, exists, &new, &old));
    if result.is_err() {
        let _ = fs::remove_dir_all(&new);
    }
    result
}

/// The absolute path `out` names, with `.`, `..` and symbolic links resolved the way the kernel resolves them.
/// A missing directory's parent is created. A dangling link is refused: its target is missing, and replacing the
/// link with a directory would silently leave the place it points to stale.
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
            _ => Error::io(format!("resolving {}", out.display()), e),
        }),
        Err(e) if e.kind() == ErrorKind::NotFound => {
            let Some(Component::Normal(name)) = out.components().next_back() else {
                return Err(Error::Usage(format!("`{}` cannot be an output directory", out.display())));
            };
            let parent = match out.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            fs::create_dir_all(parent).map_err(|e| parent_error(parent, e))?;
            let parent = fs::canonicalize(parent).map_err(|e| parent_error(parent, e))?;
            Ok(parent.join(name))
        }
        Err(e) if e.kind() == ErrorKind::NotADirectory => Err(not_a_directory(out)),
        Err(e) => Err(Error::io(format!("reading {}", out.display()), e)),
    }
}

fn parent_error(parent: &Path, e: std::io::Error) -> Error {
    match e.kind() {
        ErrorKind::NotADirectory | ErrorKind::AlreadyExists => not_a_directory(parent),
        _ => Error::io(format!("creating {}", parent.display()), e),
    }
}

fn not_a_directory(path: &Path) -> Error {
    Error::Usage(format!("`{}` runs through a file where a directory should be; choose another -o", path.display()))
}

/// `.NAME.wmrender-`: the temporary trees of a render into NAME are `.NAME.wmrender-PID.new` and `.old`.
fn temporary_prefix(name: &OsStr) -> String {
    format!(".{}.wmrender-", name.to_string_lossy())
}

/// Deletes the temporary trees of earlier renders into `name` that were killed before they could clean up.
/// Called with the parent locked: every render holds the lock while its temporaries exist, so none is in use.
fn remove_stale_temporaries(parent: &Path, name: &OsStr) -> Result<(), Error> {
    let prefix = temporary_prefix(name);
    let entries = fs::read_dir(parent).map_err(|e| Error::io(format!("reading {}", parent.display()), e))?;
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(rest) = file_name.to_str().and_then(|n| n.strip_prefix(&prefix)) else { continue };
        let Some(pid) = rest.strip_suffix(".new").or_else(|| rest.strip_suffix(".old")) else { continue };
        let ours = !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit());
        if ours && entry.file_type().is_ok_and(|t| t.is_dir()) {
            let path = entry.path();
            fs::remove_dir_all(&path)
                .map_err(|e| Error::io(format!("removing a killed render's leftover {}", path.display()), e))?;
        }
    }
    Ok(())
}

fn write_tree(root: &Path, files: &[Artifact]) -> Result<(), Error> {
    // Every directory once, parents first (a path sorts before the paths under it), rather than a
    // `create_dir_all` per file that mostly finds its directory already there.
    let dirs: BTreeSet<&Path> = files
        .iter()
        .flat_map(|f| Path::new(&f.path).ancestors().skip(1))
        .filter(|d| !d.as_os_str().is_empty())
        .collect();
    for dir in std::iter::once(root.to_path_buf()).chain(dirs.into_iter().map(|d| root.join(d))) {
        fs::create_dir(&dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    }
    for f in files {
        let path = root.join(&f.path);
        fs::write(&path, &f.bytes).map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
    }
    Ok(())
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
        Ok(()) => {
            fs::remove_dir_all(new).map_err(|e| Error::io(format!("removing the previous output {}", new.display()), e))
        }
        Err(e) if exchange_unsupported(&e) => two_step_swap(target, new, old),
        Err(e) => Err(Error::io(format!("moving the new output into {}", target.display()), e)),
    }
}

/// Moves the old tree aside, the new one in, then deletes the old one; on failure puts the old one back. A kill
/// between the two renames leaves `target` missing (the old tree stays in `old` until the next render).
fn two_step_swap(target: &Path, new: &Path, old: &Path) -> Result<(), Error> {
    fs::rename(target, old).map_err(|e| Error::io(format!("moving {} aside", target.display()), e))?;
    if let Err(e) = fs::rename(new, target) {
        let _ = fs::rename(old, target);
        return Err(Error::io(format!("moving the new output into {}", target.display()), e));
    }
    fs::remove_dir_all(old).map_err(|e| Error::io(format!("removing the previous output {}", old.display()), e))
}

/// Swaps two directory entries atomically.
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let a = CString::new(a.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    let b = CString::new(b.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    // SAFETY: both paths are valid NUL-terminated strings that outlive the call; renameat2 only reads them.
    let rc = unsafe { libc::renameat2(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), libc::RENAME_EXCHANGE) };
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
