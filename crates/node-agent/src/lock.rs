//! `C:\k\wmrender\agent.lock`: one pass at a time (sync's `apply` and the service's loop). An OS file lock, so a
//! crashed agent never leaves a stale lock behind.

use std::fs::{File, TryLockError};
use std::path::Path;
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("another wmrender-node pass held {path} for more than {waited:?}; try again later")]
    Busy { path: String, waited: Duration },
    #[error("cannot open {path}: {source}")]
    Open { path: String, source: std::io::Error },
}

/// Held while the value lives.
#[derive(Debug)]
pub struct AgentLock {
    _file: File,
}

impl AgentLock {
    /// Waits at most `timeout` for the lock, polling every 100 ms.
    pub fn acquire(path: &Path, timeout: Duration) -> Result<AgentLock, LockError> {
        let shown = path.display().to_string();
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| LockError::Open { path: shown.clone(), source })?;
        }
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|source| LockError::Open { path: shown.clone(), source })?;
        let start = Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(AgentLock { _file: file }),
                Err(TryLockError::WouldBlock) if start.elapsed() < timeout => {
                    std::thread::sleep(Duration::from_millis(100).min(timeout))
                }
                Err(TryLockError::WouldBlock) => return Err(LockError::Busy { path: shown, waited: timeout }),
                Err(TryLockError::Error(source)) => return Err(LockError::Open { path: shown, source }),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_waits_a_bounded_time_then_gets_it_once_released() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w").join("agent.lock");
        let first = AgentLock::acquire(&path, Duration::ZERO).unwrap();
        let t = Instant::now();
        let err = AgentLock::acquire(&path, Duration::from_millis(300)).unwrap_err();
        assert!(matches!(err, LockError::Busy { .. }), "{err}");
        assert!(t.elapsed() >= Duration::from_millis(300));
        drop(first);
        AgentLock::acquire(&path, Duration::ZERO).unwrap();
    }
}
