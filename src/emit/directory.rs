//! Writing the output tree atomically: render into a temporary sibling, then swap it in, so a failed or
//! interrupted render never leaves a half-written directory, and stale files from an older render disappear.

use crate::error::Error;
use crate::render::Artifact;
use std::fs;
use std::path::{Path, PathBuf};

/// Replaces `out` with exactly `files`. Refuses to replace a non-empty directory that wmrender did not write.
pub fn write(out: &Path, files: &[Artifact]) -> Result<(), Error> {
    let name =
        out.file_name().ok_or_else(|| Error::Usage(format!("`{}` cannot be an output directory", out.display())))?;
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    ensure_replaceable(out)?;
    fs::create_dir_all(&parent).map_err(|e| Error::io(format!("creating {}", parent.display()), e))?;

    let tag = format!(".{}.wmrender-{}", name.to_string_lossy(), std::process::id());
    let tmp = parent.join(format!("{tag}.new"));
    let old = parent.join(format!("{tag}.old"));
    let result = write_tree(&tmp, files).and_then(|()| swap(out, &tmp, &old));
    if result.is_err() {
        let _ = fs::remove_dir_all(&tmp);
    }
    result
}

fn ensure_replaceable(out: &Path) -> Result<(), Error> {
    match fs::metadata(out) {
        Err(_) => Ok(()),
        Ok(m) if !m.is_dir() => Err(Error::Usage(format!("`{}` exists and is not a directory", out.display()))),
        Ok(_) => {
            let empty =
                fs::read_dir(out).map_err(|e| Error::io(format!("reading {}", out.display()), e))?.next().is_none();
            if empty || out.join("manifest.json").is_file() {
                Ok(())
            } else {
                Err(Error::Usage(format!(
                    "`{}` is not empty and holds no manifest.json, so it was not written by wmrender; \
                     refusing to replace it (choose another -o directory)",
                    out.display()
                )))
            }
        }
    }
}

fn write_tree(root: &Path, files: &[Artifact]) -> Result<(), Error> {
    let _ = fs::remove_dir_all(root);
    fs::create_dir_all(root).map_err(|e| Error::io(format!("creating {}", root.display()), e))?;
    for f in files {
        let path = root.join(&f.path);
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        }
        fs::write(&path, &f.bytes).map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
    }
    Ok(())
}

/// Moves the old tree aside, the new one in, then deletes the old one; on failure puts the old one back.
fn swap(out: &Path, tmp: &Path, old: &Path) -> Result<(), Error> {
    let had_old = out.exists();
    if had_old {
        let _ = fs::remove_dir_all(old);
        fs::rename(out, old).map_err(|e| Error::io(format!("moving {} aside", out.display()), e))?;
    }
    if let Err(e) = fs::rename(tmp, out) {
        if had_old {
            let _ = fs::rename(old, out);
        }
        return Err(Error::io(format!("moving the new output into {}", out.display()), e));
    }
    if had_old {
        fs::remove_dir_all(old).map_err(|e| Error::io(format!("removing the previous output {}", old.display()), e))?;
    }
    Ok(())
}
