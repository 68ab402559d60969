//! Writing a payload directory all at once: everything is staged beside it (same file system) and moved into place
//! only when it checked out, so a refused image, a cut download or a full disk leave the directory as it was.

use super::error::PayloadError;
use std::path::{Path, PathBuf};
use wmrender_contract::payload::{PAYLOAD_LIST, PayloadList};

/// Whether `out` may be written: absent, empty, or a payload wmrender wrote before (it has `payload.json`), which is
/// replaced as a whole. Anything else is the user's and is left alone.
pub fn check_destination(out: &Path) -> Result<(), PayloadError> {
    match std::fs::read_dir(out) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(PayloadError::Read { file: out.to_path_buf(), source }),
        Ok(mut entries) => {
            if entries.next().is_none() || out.join(PAYLOAD_LIST).is_file() {
                Ok(())
            } else {
                Err(PayloadError::NotOurs { dir: out.to_path_buf() })
            }
        }
    }
}

/// Writes `dir/payload.json` in one step (a temporary file renamed over it): never a half-written list.
pub fn write_list(dir: &Path, list: &PayloadList) -> Result<(), PayloadError> {
    let file = dir.join(PAYLOAD_LIST);
    let failed = |source| PayloadError::Write { file: file.clone(), source };
    let mut tmp = tempfile::Builder::new().prefix(".payload.json.").tempfile_in(dir).map_err(failed)?;
    std::io::Write::write_all(&mut tmp, &list.to_json()).map_err(failed)?;
    tmp.persist(&file).map_err(|e| failed(e.error))?;
    Ok(())
}

/// A payload being made beside its destination.
pub struct Staging {
    dir: tempfile::TempDir,
    payload: PathBuf,
    scratch: PathBuf,
    out: PathBuf,
}

impl Staging {
    pub fn new(out: &Path) -> Result<Staging, PayloadError> {
        let parent = match out.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&parent).map_err(|source| PayloadError::Write { file: parent.clone(), source })?;
        let dir = tempfile::Builder::new()
            .prefix(".wmrender-payload-")
            .tempdir_in(&parent)
            .map_err(|source| PayloadError::Write { file: parent.clone(), source })?;
        for sub in ["payload", "scratch"] {
            let p = dir.path().join(sub);
            std::fs::create_dir(&p).map_err(|source| PayloadError::Write { file: p, source })?;
        }
        let (payload, scratch) = (dir.path().join("payload"), dir.path().join("scratch"));
        Ok(Staging { dir, payload, scratch, out: out.to_path_buf() })
    }

    /// Where the payload is laid out (`C/k/…`).
    pub fn payload(&self) -> &Path {
        &self.payload
    }

    /// Where unpacked layers go; removed with the staging.
    pub fn scratch(&self) -> &Path {
        &self.scratch
    }

    /// Writes `payload.json` and puts the payload where it belongs, replacing a payload there.
    pub fn finish(self, list: &PayloadList) -> Result<(), PayloadError> {
        let staged = &self.payload;
        write_list(staged, list)?;
        check_destination(&self.out)?;
        let old = self.dir.path().join("old");
        let had = self.out.exists();
        if had {
            std::fs::rename(&self.out, &old)
                .map_err(|source| PayloadError::Write { file: self.out.clone(), source })?;
        }
        if let Err(source) = std::fs::rename(staged, &self.out) {
            if had {
                let _ = std::fs::rename(&old, &self.out);
            }
            return Err(PayloadError::Write { file: self.out.clone(), source });
        }
        // The old payload and the scratch files go with the staging directory.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_replaces_only_a_payload() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("payload");
        check_destination(&out).unwrap();
        let s = Staging::new(&out).unwrap();
        std::fs::create_dir_all(s.payload().join("C/k")).unwrap();
        std::fs::write(s.payload().join("C/k/a.exe"), b"a").unwrap();
        s.finish(&PayloadList { source: None, files: vec![] }).unwrap();
        assert!(out.join("C/k/a.exe").is_file() && out.join(PAYLOAD_LIST).is_file());

        // Again: the old payload is replaced as a whole.
        let s = Staging::new(&out).unwrap();
        std::fs::create_dir_all(s.payload().join("C/k")).unwrap();
        std::fs::write(s.payload().join("C/k/b.exe"), b"b").unwrap();
        s.finish(&PayloadList { source: None, files: vec![] }).unwrap();
        assert!(!out.join("C/k/a.exe").exists() && out.join("C/k/b.exe").is_file());
        let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, ["payload"], "no staging left behind");

        let mine = tmp.path().join("mine");
        std::fs::create_dir(&mine).unwrap();
        std::fs::write(mine.join("notes.txt"), b"x").unwrap();
        assert!(matches!(check_destination(&mine), Err(PayloadError::NotOurs { .. })));
    }
}
