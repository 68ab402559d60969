//! SFTP on one channel per connection: reads, directory creation, pipelined uploads hashed on the way, and the
//! atomic replace through `posix-rename@openssh.com`. Built on russh-sftp's raw session, because its high-level
//! session hides the extensions the server announced and cannot send extended requests.

use super::super::error::SyncError;
use super::super::plan::Source;
use super::lifeline::Lifeline;
use russh_sftp::client::RawSftpSession;
use russh_sftp::client::error::Error as SftpError;
use russh_sftp::protocol::{FileAttributes, OpenFlags, Packet, StatusCode};
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use tokio::io::AsyncReadExt;

const POSIX_RENAME: &str = "posix-rename@openssh.com";
const LIMITS: &str = "limits@openssh.com";
/// The write size every SFTP server must take (draft-ietf-secsh-filexfer-02 §3: packets of at least 34000 bytes).
const SAFE_WRITE: u64 = 32 * 1024;
/// The largest write asked for even when the server allows more (OpenSSH allows 255 KiB).
const MAX_WRITE: u64 = 255 * 1024;
/// Bytes of writes awaiting the server's answer: enough to keep a LAN busy, little enough that a slow link answers
/// each one well within the request time-out.
const IN_FLIGHT_BYTES: u64 = 4 * 1024 * 1024;

pub struct Sftp {
    raw: Arc<RawSftpSession>,
    /// Ends every request once the connection is gone (see [`super::lifeline`]).
    lifeline: Lifeline,
    /// Whether the server replaces files in one step (`posix-rename@openssh.com`).
    pub posix_rename: bool,
    write_len: u64,
    read_len: u32,
    /// Directories known to exist on this connection, so each is checked once.
    dirs: Mutex<BTreeSet<String>>,
}

/// What an upload sent: the byte count and the sha256 of exactly those bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Uploaded {
    pub bytes: u64,
    pub sha256: String,
}

fn remote(e: impl std::fmt::Display) -> SyncError {
    SyncError::Remote(e.to_string())
}

fn on(path: &str, e: SftpError) -> SyncError {
    SyncError::Remote(format!("{path}: {}", describe(&e)))
}

/// What a request cut short by the connection's end fails with.
const LOST: &str = "the connection was lost";

fn describe(e: &SftpError) -> String {
    match e {
        SftpError::UnexpectedBehavior(m) if m == LOST => LOST.into(),
        SftpError::Status(s) if s.error_message.is_empty() => format!("{:?}", s.status_code),
        SftpError::Status(s) => s.error_message.clone(),
        SftpError::Timeout => "the node did not answer in time".into(),
        other => other.to_string(),
    }
}

fn is(e: &SftpError, code: StatusCode) -> bool {
    matches!(e, SftpError::Status(s) if s.status_code == code)
}

impl Sftp {
    /// Starts SFTP on an open session channel's stream and reads what the server supports.
    pub(super) async fn start<S>(
        stream: S,
        request_timeout_secs: u64,
        lifeline: Lifeline,
        at: String,
    ) -> Result<Sftp, SyncError>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let cfg = russh_sftp::client::Config { request_timeout_secs, ..Default::default() };
        let mut raw = RawSftpSession::new_with_config(stream, cfg);
        let version =
            live(&lifeline, raw.init()).await.map_err(|e| remote(format!("{at}: starting SFTP: {}", describe(&e))))?;
        let has = |name: &str| version.extensions.contains_key(name);
        let (mut write_len, mut read_len) = (SAFE_WRITE, SAFE_WRITE);
        if has(LIMITS) {
            let limits = live(&lifeline, raw.limits())
                .await
                .map_err(|e| remote(format!("{at}: reading SFTP limits: {}", describe(&e))))?;
            if limits.max_write_len > 0 {
                write_len = limits.max_write_len.min(MAX_WRITE);
            }
            if limits.max_read_len > 0 {
                read_len = limits.max_read_len.min(MAX_WRITE);
            }
            raw.set_limits(limits.into());
        }
        Ok(Sftp {
            raw: Arc::new(raw),
            lifeline,
            posix_rename: has(POSIX_RENAME),
            write_len,
            read_len: read_len as u32,
            dirs: Mutex::new(BTreeSet::new()),
        })
    }

    /// `op`, or an error as soon as the connection is gone.
    async fn live<T>(&self, op: impl Future<Output = Result<T, SftpError>>) -> Result<T, SftpError> {
        live(&self.lifeline, op).await
    }

    /// The file's bytes, or `None` when it does not exist.
    pub async fn read_if_exists(&self, path: &str) -> Result<Option<Vec<u8>>, SyncError> {
        let handle = match self.live(self.raw.open(path, OpenFlags::READ, FileAttributes::empty())).await {
            Ok(h) => h.handle,
            Err(e) if is(&e, StatusCode::NoSuchFile) => return Ok(None),
            Err(e) => return Err(on(path, e)),
        };
        let mut bytes = Vec::new();
        let read = async {
            loop {
                match self.live(self.raw.read(handle.as_str(), bytes.len() as u64, self.read_len)).await {
                    Ok(data) if data.data.is_empty() => return Ok(()),
                    Ok(data) => bytes.extend_from_slice(&data.data),
                    Err(e) if is(&e, StatusCode::Eof) => return Ok(()),
                    Err(e) => return Err(on(path, e)),
                }
            }
        }
        .await;
        let closed = self.live(self.raw.close(handle.as_str())).await;
        read?;
        closed.map_err(|e| on(path, e))?;
        Ok(Some(bytes))
    }

    /// Creates `dir` and its missing parents.
    pub async fn mkdir_p(&self, dir: &str) -> Result<(), SyncError> {
        if self.known_dir(dir) {
            return Ok(());
        }
        // Usually the directory is there already: one round trip.
        if self.live(self.raw.stat(dir)).await.is_ok() {
            self.remember_dir(dir);
            return Ok(());
        }
        let mut path = String::new();
        for part in dir.split('/').filter(|p| !p.is_empty()) {
            path.push('/');
            path.push_str(part);
            if part.ends_with(':') || self.known_dir(&path) {
                continue; // a Windows drive (/C:), or checked before
            }
            match self.live(self.raw.stat(path.as_str())).await {
                Ok(_) => {}
                Err(e) if is(&e, StatusCode::NoSuchFile) => {
                    if let Err(e) = self.live(self.raw.mkdir(path.as_str(), FileAttributes::empty())).await {
                        // Another connection may have created it meanwhile.
                        if self.live(self.raw.stat(path.as_str())).await.is_err() {
                            return Err(on(&path, e));
                        }
                    }
                }
                Err(e) => return Err(on(&path, e)),
            }
            self.remember_dir(&path);
        }
        Ok(())
    }

    fn known_dir(&self, dir: &str) -> bool {
        self.dirs.lock().unwrap_or_else(|p| p.into_inner()).contains(dir)
    }

    fn remember_dir(&self, dir: &str) {
        self.dirs.lock().unwrap_or_else(|p| p.into_inner()).insert(dir.to_string());
    }

    /// Writes `source` to `temp` (created or truncated), returning the bytes sent. For callers that hashed the
    /// source already: hashing is CPU the upload competes for.
    pub async fn upload(&self, temp: &str, source: &Source) -> Result<u64, SyncError> {
        self.upload_with(temp, source, None).await
    }

    /// Writes `source` to `temp` (created or truncated) with several writes in flight, hashing the bytes as they
    /// leave: the sha256 returned is that of what the node received, even if a local file changed since it was
    /// planned, so the caller can record the truth or refuse.
    pub async fn upload_hashed(&self, temp: &str, source: &Source) -> Result<Uploaded, SyncError> {
        let mut hasher = Sha256::new();
        let bytes = self.upload_with(temp, source, Some(&mut hasher)).await?;
        Ok(Uploaded { bytes, sha256: crate::hex(&hasher.finalize()) })
    }

    async fn upload_with(&self, temp: &str, source: &Source, hasher: Option<&mut Sha256>) -> Result<u64, SyncError> {
        let flags = OpenFlags::CREATE | OpenFlags::TRUNCATE | OpenFlags::WRITE;
        let handle =
            self.live(self.raw.open(temp, flags, FileAttributes::empty())).await.map_err(|e| on(temp, e))?.handle;
        let sent = self.write_all(temp, &handle, source, hasher).await;
        let closed = self.live(self.raw.close(handle.as_str())).await;
        let sent = sent?;
        closed.map_err(|e| on(temp, e))?;
        Ok(sent)
    }

    async fn write_all(
        &self,
        temp: &str,
        handle: &str,
        source: &Source,
        mut hasher: Option<&mut Sha256>,
    ) -> Result<u64, SyncError> {
        let mut chunks = Chunks::open(source, self.write_len as usize).await?;
        let mut in_flight = tokio::task::JoinSet::new();
        let max_in_flight = (IN_FLIGHT_BYTES / self.write_len).max(4) as usize;
        let mut offset = 0u64;
        while let Some(chunk) = chunks.next().await? {
            if let Some(h) = hasher.as_deref_mut() {
                h.update(&chunk);
            }
            let len = chunk.len() as u64;
            while in_flight.len() >= max_in_flight {
                settle(temp, in_flight.join_next().await)?;
            }
            let (raw, handle, lifeline) = (self.raw.clone(), handle.to_string(), self.lifeline.clone());
            in_flight.spawn(async move { live(&lifeline, raw.write(handle, offset, chunk)).await });
            offset += len;
        }
        while let Some(done) = in_flight.join_next().await {
            settle(temp, Some(done))?;
        }
        Ok(offset)
    }

    /// Replaces `target` with `temp` in one step, if the server can (`posix-rename@openssh.com`).
    pub async fn posix_rename(&self, temp: &str, target: &str) -> Result<(), SyncError> {
        #[derive(serde::Serialize)]
        struct TwoPaths<'a> {
            old: &'a str,
            new: &'a str,
        }
        let payload = russh_sftp::ser::to_bytes(&TwoPaths { old: temp, new: target }).map_err(remote)?;
        match self.live(self.raw.extended(POSIX_RENAME, payload.to_vec())).await.map_err(|e| on(target, e))? {
            Packet::Status(s) if s.status_code == StatusCode::Ok => Ok(()),
            Packet::Status(s) => Err(SyncError::Remote(format!("renaming {temp} to {target}: {}", s.error_message))),
            other => Err(SyncError::Remote(format!("unexpected answer to posix-rename: {other:?}"))),
        }
    }

    /// Renames `from` to `to` (which must not exist); a `from` that does not exist is fine.
    pub async fn rename_if_exists(&self, from: &str, to: &str) -> Result<(), SyncError> {
        match self.live(self.raw.rename(from, to)).await {
            Ok(_) => Ok(()),
            Err(e) if is(&e, StatusCode::NoSuchFile) => Ok(()),
            Err(e) => Err(on(from, e)),
        }
    }

    /// Removes `path`; a file that is already gone is fine.
    pub async fn remove_file(&self, path: &str) -> Result<(), SyncError> {
        match self.live(self.raw.remove(path)).await {
            Ok(_) => Ok(()),
            Err(e) if is(&e, StatusCode::NoSuchFile) => Ok(()),
            Err(e) => Err(on(path, e)),
        }
    }

    /// Removes `dir` if it exists and is empty.
    pub async fn remove_dir_if_empty(&self, dir: &str) -> Result<bool, SyncError> {
        let handle = match self.live(self.raw.opendir(dir)).await {
            Ok(h) => h.handle,
            Err(e) if is(&e, StatusCode::NoSuchFile) => return Ok(false),
            Err(e) => return Err(on(dir, e)),
        };
        let listed = self.live(self.raw.readdir(handle.as_str())).await;
        let _ = self.live(self.raw.close(handle.as_str())).await;
        let empty = match listed {
            Ok(name) => name.files.iter().all(|f| f.filename == "." || f.filename == ".."),
            Err(e) if is(&e, StatusCode::Eof) => true,
            Err(e) => return Err(on(dir, e)),
        };
        if !empty {
            return Ok(false);
        }
        self.live(self.raw.rmdir(dir)).await.map_err(|e| on(dir, e))?;
        self.dirs.lock().unwrap_or_else(|p| p.into_inner()).remove(dir);
        Ok(true)
    }
}

/// `op`, or an error as soon as the connection is gone: a request sent after the session ended would wait for an
/// answer no one gives (the SFTP layer's own time-out aside).
async fn live<T>(lifeline: &Lifeline, op: impl Future<Output = Result<T, SftpError>>) -> Result<T, SftpError> {
    lifeline.guard(op).await.map_err(|e| e.unwrap_or_else(|| SftpError::UnexpectedBehavior(LOST.into())))
}

fn settle(
    temp: &str,
    done: Option<Result<Result<russh_sftp::protocol::Status, SftpError>, tokio::task::JoinError>>,
) -> Result<(), SyncError> {
    match done {
        None | Some(Ok(Ok(_))) => Ok(()),
        Some(Ok(Err(e))) => Err(on(temp, e)),
        Some(Err(e)) => Err(SyncError::Local(format!("writing {temp}: {e}"))),
    }
}

/// The bytes of a [`Source`] in pieces of at most one write.
enum Chunks<'a> {
    Bytes { bytes: &'a [u8], at: usize, size: usize },
    File { file: tokio::fs::File, shown: String, size: usize },
}

impl<'a> Chunks<'a> {
    async fn open(source: &'a Source, size: usize) -> Result<Chunks<'a>, SyncError> {
        Ok(match source {
            Source::Bytes(bytes) => Chunks::Bytes { bytes, at: 0, size },
            Source::File(path) => {
                let shown = path.display().to_string();
                let file = tokio::fs::File::open(path)
                    .await
                    .map_err(|e| SyncError::Local(format!("{shown}: {}", crate::error::io_reason(&e))))?;
                Chunks::File { file, shown, size }
            }
        })
    }

    async fn next(&mut self) -> Result<Option<Vec<u8>>, SyncError> {
        match self {
            Chunks::Bytes { bytes, at, size } => {
                let end = (*at + *size).min(bytes.len());
                let chunk = bytes[*at..end].to_vec();
                *at = end;
                Ok((!chunk.is_empty()).then_some(chunk))
            }
            Chunks::File { file, shown, size } => {
                let mut chunk = Vec::with_capacity(*size);
                // Fill the whole write (a read may return less) so the server sees few, large writes.
                while chunk.len() < *size {
                    let n = (&mut *file)
                        .take((*size - chunk.len()) as u64)
                        .read_to_end(&mut chunk)
                        .await
                        .map_err(|e| SyncError::Local(format!("{shown}: {}", crate::error::io_reason(&e))))?;
                    if n == 0 {
                        break;
                    }
                }
                Ok((!chunk.is_empty()).then_some(chunk))
            }
        }
    }
}
