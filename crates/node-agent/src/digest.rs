//! sha256 of the files the services use, with a cache keyed on size and modification time so an unchanged node
//! does not re-read hundreds of megabytes of binaries every pass. An entry is trusted only when the file was last
//! modified well before it was hashed (git's "racy clean" rule), so a same-size rewrite right after hashing is seen.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use wmrender_contract::NodePath;

/// A modification this close to the hashing time might share its time stamp with a later write.
const RACY: Duration = Duration::from_secs(2);

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedDigest {
    pub size: u64,
    /// Modification time, nanoseconds since the Unix epoch.
    pub modified: u128,
    pub hashed_at: u128,
    pub sha256: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DigestCache(pub BTreeMap<NodePath, CachedDigest>);

fn nanos(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

/// Streams a file through sha256.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

impl CachedDigest {
    /// Whether the file, as `meta` describes it now, is the one hashed: same size and modification time, and
    /// modified well before it was hashed.
    fn still_describes(&self, meta: &std::fs::Metadata) -> bool {
        let modified = meta.modified().map(nanos).unwrap_or(0);
        self.size == meta.len()
            && self.modified == modified
            && modified != 0
            && modified + RACY.as_nanos() < self.hashed_at
    }
}

impl DigestCache {
    /// The file's sha256 when the cache holds it for the file as it is now; `None` otherwise (nothing is read).
    pub fn cached(&self, node: &NodePath, local: &Path) -> Option<String> {
        let meta = std::fs::metadata(local).ok()?;
        self.0.get(node).filter(|c| c.still_describes(&meta)).map(|c| c.sha256.clone())
    }

    /// The file's sha256, `None` when it does not exist.
    pub fn digest(&mut self, node: &NodePath, local: &Path) -> std::io::Result<Option<String>> {
        let meta = match std::fs::metadata(local) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.0.remove(node);
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        if let Some(c) = self.0.get(node)
            && c.still_describes(&meta)
        {
            return Ok(Some(c.sha256.clone()));
        }
        let modified = meta.modified().map(nanos).unwrap_or(0);
        let hashed_at = nanos(SystemTime::now());
        let sha256 = sha256_file(local)?;
        self.0.insert(node.clone(), CachedDigest { size: meta.len(), modified, hashed_at, sha256: sha256.clone() });
        Ok(Some(sha256))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_write_is_hashed_again_and_an_old_one_comes_from_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x");
        let node = NodePath::known(r"C:\k\x");
        std::fs::write(&f, "one").unwrap();
        let mut cache = DigestCache::default();
        let first = cache.digest(&node, &f).unwrap().unwrap();
        assert_eq!(first, wmrender_contract::sha256_hex(b"one"));
        // Same size, written right after hashing: the racy rule re-reads it.
        std::fs::write(&f, "two").unwrap();
        assert_eq!(cache.digest(&node, &f).unwrap().unwrap(), wmrender_contract::sha256_hex(b"two"));
        // An entry for an old file is trusted (proved by planting a wrong digest in it).
        let old = SystemTime::now() - Duration::from_secs(3600);
        std::fs::File::options().write(true).open(&f).unwrap().set_modified(old).unwrap();
        cache.digest(&node, &f).unwrap();
        cache.0.get_mut(&node).unwrap().sha256 = "planted".into();
        assert_eq!(cache.digest(&node, &f).unwrap().unwrap(), "planted");
        std::fs::remove_file(&f).unwrap();
        assert_eq!(cache.digest(&node, &f).unwrap(), None);
    }
}
