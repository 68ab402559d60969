//! One SSH connection to a node: strict host-key trust against known_hosts, key-file authentication, commands,
//! and SFTP with an atomic replace. Everything russh-specific lives here.

use super::error::SyncError;
use super::inventory::Node;
use russh::ChannelMsg;
use russh::client::{self, Handle};
use russh::keys::{HashAlg, PrivateKey, PrivateKeyWithHashAlg, PublicKey, PublicKeyOrCertificate, known_hosts};
use russh_sftp::client::{RawSftpSession, SftpSession};
use russh_sftp::protocol::{OpenFlags, Packet, StatusCode};
use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// How to reach and trust nodes; shared by every connection of a run.
#[derive(Clone)]
pub struct ConnectOptions {
    pub key: Arc<PrivateKey>,
    pub known_hosts: PathBuf,
    pub accept_new: bool,
    pub connect_timeout: Duration,
    pub idle_timeout: Duration,
    pub attempts: u32,
    /// Serialises reading and appending known_hosts across concurrent connections.
    pub known_hosts_lock: Arc<Mutex<()>>,
}

/// What the host-key check decided, kept for the error message (russh only reports "unknown key").
#[derive(Clone, Debug, Default)]
enum Verdict {
    #[default]
    Pending,
    Trusted,
    Unknown {
        offered: String,
    },
    Changed {
        known: String,
        offered: String,
    },
    Failed(String),
}

struct Trust {
    host: String,
    port: u16,
    opts: ConnectOptions,
    verdict: Arc<Mutex<Verdict>>,
}

fn fingerprint(key: &PublicKey) -> String {
    format!("{} {}", key.algorithm(), key.fingerprint(HashAlg::Sha256))
}

impl client::Handler for Trust {
    type Error = russh::Error;

    async fn check_server_key(&mut self, offered: &PublicKeyOrCertificate) -> Result<bool, Self::Error> {
        let PublicKeyOrCertificate::PublicKey { key, .. } = offered else {
            *self.verdict.lock().unwrap_or_else(|p| p.into_inner()) =
                Verdict::Failed("the server offered a certificate; wmrender pins plain host keys".into());
            return Ok(false);
        };
        let _guard = self.opts.known_hosts_lock.lock().unwrap_or_else(|p| p.into_inner());
        let verdict = match known_hosts::known_host_keys_path(&self.host, self.port, &self.opts.known_hosts) {
            Err(e) => Verdict::Failed(format!("cannot read {}: {e}", self.opts.known_hosts.display())),
            Ok(recorded) => {
                let same_type: Vec<&PublicKey> =
                    recorded.iter().map(|(_, k)| k).filter(|k| k.algorithm() == key.algorithm()).collect();
                if same_type.contains(&key) {
                    Verdict::Trusted
                } else if let Some(known) = same_type.first() {
                    Verdict::Changed { known: fingerprint(known), offered: fingerprint(key) }
                } else if self.opts.accept_new && recorded.is_empty() {
                    match known_hosts::learn_known_hosts_path(&self.host, self.port, key, &self.opts.known_hosts) {
                        Ok(()) => Verdict::Trusted,
                        Err(e) => Verdict::Failed(format!("cannot write {}: {e}", self.opts.known_hosts.display())),
                    }
                } else {
                    Verdict::Unknown { offered: fingerprint(key) }
                }
            }
        };
        let trusted = matches!(verdict, Verdict::Trusted);
        *self.verdict.lock().unwrap_or_else(|p| p.into_inner()) = verdict;
        Ok(trusted)
    }
}

pub struct Connection {
    handle: Handle<Trust>,
}

/// The output of one remote command.
pub struct Output {
    pub status: Option<u32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Connection {
    /// Connects and authenticates, retrying only what a retry can fix (the network), with a bounded count.
    pub async fn open(node: &Node, opts: &ConnectOptions) -> Result<Connection, SyncError> {
        let mut last = None;
        for attempt in 0..opts.attempts.max(1) {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(500 * u64::from(attempt))).await;
            }
            match Self::open_once(node, opts).await {
                Err(SyncError::Unreachable(why)) => last = Some(SyncError::Unreachable(why)),
                other => return other,
            }
        }
        Err(last.unwrap_or_else(|| SyncError::Unreachable("no attempt made".into())))
    }

    async fn open_once(node: &Node, opts: &ConnectOptions) -> Result<Connection, SyncError> {
        let recorded = {
            let _guard = opts.known_hosts_lock.lock().unwrap_or_else(|p| p.into_inner());
            known_hosts::known_host_keys_path(&node.address, node.port, &opts.known_hosts).unwrap_or_default()
        };
        let mut config = client::Config {
            nodelay: true,
            inactivity_timeout: Some(opts.idle_timeout),
            keepalive_interval: Some(opts.idle_timeout / 3),
            ..Default::default()
        };
        // AES-GCM first: with hardware AES it moves payload binaries faster than ChaCha20 (both are AEAD).
        use russh::cipher;
        config.preferred.cipher = Cow::Owned(vec![
            cipher::AES_256_GCM,
            cipher::CHACHA20_POLY1305,
            cipher::AES_256_CTR,
            cipher::AES_192_CTR,
            cipher::AES_128_CTR,
        ]);
        // Ask for the host-key types already pinned, so a host known by its RSA key is not refused for offering
        // Ed25519 first.
        let mut pinned: Vec<_> = recorded.iter().map(|(_, k)| k.algorithm()).collect();
        pinned.dedup();
        if !pinned.is_empty() {
            config.preferred.key = Cow::Owned(pinned);
        }
        let verdict = Arc::new(Mutex::new(Verdict::Pending));
        let trust = Trust { host: node.address.clone(), port: node.port, opts: opts.clone(), verdict: verdict.clone() };
        let addr = (node.address.as_str(), node.port);
        let tcp = match tokio::time::timeout(opts.connect_timeout, tokio::net::TcpStream::connect(addr)).await {
            Err(_) => return Err(SyncError::Unreachable(format!("no TCP answer within {:?}", opts.connect_timeout))),
            Ok(Err(e)) => return Err(SyncError::Unreachable(format!("{}:{}: {e}", node.address, node.port))),
            Ok(Ok(s)) => s,
        };
        let _ = tcp.set_nodelay(true);
        let connected =
            tokio::time::timeout(opts.connect_timeout, client::connect_stream(Arc::new(config), tcp, trust)).await;
        let mut handle = match connected {
            Err(_) => return Err(SyncError::Unreachable(format!("no SSH answer within {:?}", opts.connect_timeout))),
            Ok(Ok(h)) => h,
            Ok(Err(e)) => {
                let v = verdict.lock().unwrap_or_else(|p| p.into_inner()).clone();
                return Err(match v {
                    Verdict::Unknown { offered } => SyncError::HostKeyUnknown {
                        host: host_port(node),
                        offered,
                        known_hosts: opts.known_hosts.display().to_string(),
                    },
                    Verdict::Changed { known, offered } => {
                        SyncError::HostKeyChanged { host: host_port(node), known, offered }
                    }
                    Verdict::Failed(why) => SyncError::Trust(why),
                    Verdict::Pending | Verdict::Trusted => SyncError::Unreachable(e.to_string()),
                });
            }
        };
        let hash = handle.best_supported_rsa_hash().await.map_err(|e| SyncError::Unreachable(e.to_string()))?.flatten();
        let auth = handle
            .authenticate_publickey(node.user.clone(), PrivateKeyWithHashAlg::new(opts.key.clone(), hash))
            .await
            .map_err(|e| SyncError::Unreachable(e.to_string()))?;
        if !auth.success() {
            return Err(SyncError::Auth { user: node.user.clone(), host: host_port(node) });
        }
        Ok(Connection { handle })
    }

    pub async fn exec(&self, command: &str) -> Result<Output, SyncError> {
        let mut ch = self.handle.channel_open_session().await.map_err(remote)?;
        ch.exec(true, command).await.map_err(remote)?;
        let mut out = Output { status: None, stdout: Vec::new(), stderr: Vec::new() };
        while let Some(msg) = ch.wait().await {
            match msg {
                ChannelMsg::Data { data } => out.stdout.extend_from_slice(&data),
                ChannelMsg::ExtendedData { data, ext: 1 } => out.stderr.extend_from_slice(&data),
                ChannelMsg::ExitStatus { exit_status } => out.status = Some(exit_status),
                _ => {}
            }
        }
        Ok(out)
    }

    pub async fn sftp(&self) -> Result<Sftp, SyncError> {
        let ch = self.handle.channel_open_session().await.map_err(remote)?;
        ch.request_subsystem(true, "sftp").await.map_err(remote)?;
        let session = SftpSession::new(ch.into_stream()).await.map_err(remote)?;
        // SftpSession does not expose extensions; posix-rename goes through a raw session of its own.
        let ch = self.handle.channel_open_session().await.map_err(remote)?;
        ch.request_subsystem(true, "sftp").await.map_err(remote)?;
        let raw = RawSftpSession::new(ch.into_stream());
        let version = raw.init().await.map_err(remote)?;
        let posix_rename = version.extensions.contains_key("posix-rename@openssh.com");
        Ok(Sftp { session, raw, posix_rename })
    }

    pub async fn close(self) {
        let _ = self.handle.disconnect(russh::Disconnect::ByApplication, "", "en").await;
    }
}

fn host_port(node: &Node) -> String {
    if node.port == 22 { node.address.clone() } else { format!("[{}]:{}", node.address, node.port) }
}

fn remote(e: impl std::fmt::Display) -> SyncError {
    SyncError::Remote(e.to_string())
}

pub struct Sftp {
    pub session: SftpSession,
    raw: RawSftpSession,
    pub posix_rename: bool,
}

#[derive(serde::Serialize)]
struct TwoPaths {
    old: String,
    new: String,
}

impl Sftp {
    /// The file's bytes, or `None` when it does not exist.
    pub async fn read_if_exists(&self, path: &str) -> Result<Option<Vec<u8>>, SyncError> {
        if !self.session.try_exists(path).await.map_err(remote)? {
            return Ok(None);
        }
        self.session.read(path).await.map(Some).map_err(remote)
    }

    /// Creates `dir` and its missing parents.
    pub async fn mkdir_p(&self, dir: &str) -> Result<(), SyncError> {
        let mut path = String::new();
        for part in dir.split('/').filter(|p| !p.is_empty()) {
            path.push('/');
            path.push_str(part);
            if part.ends_with(':') {
                continue; // a Windows drive (/C:)
            }
            if !self.session.try_exists(path.as_str()).await.map_err(remote)? {
                self.session.create_dir(path.as_str()).await.map_err(remote)?;
            }
        }
        Ok(())
    }

    /// Writes `source` to `temp`, returning the bytes sent.
    pub async fn upload(&self, temp: &str, source: &super::plan::Source) -> Result<u64, SyncError> {
        let flags = OpenFlags::CREATE | OpenFlags::TRUNCATE | OpenFlags::WRITE;
        let mut file = self.session.open_with_flags(temp, flags).await.map_err(remote)?;
        let sent = match source {
            super::plan::Source::Bytes(bytes) => {
                file.write_all(bytes).await.map_err(remote)?;
                bytes.len() as u64
            }
            super::plan::Source::File(path) => {
                let f = tokio::fs::File::open(path)
                    .await
                    .map_err(|e| SyncError::Local(format!("{}: {e}", path.display())))?;
                let mut reader = tokio::io::BufReader::with_capacity(1 << 20, f);
                tokio::io::copy_buf(&mut reader, &mut file).await.map_err(remote)?
            }
        };
        file.flush().await.map_err(remote)?;
        file.shutdown().await.map_err(remote)?;
        Ok(sent)
    }

    /// Replaces `target` with `temp` in one step, if the server can (`posix-rename@openssh.com`).
    pub async fn posix_rename(&self, temp: &str, target: &str) -> Result<(), SyncError> {
        let payload = russh_sftp::ser::to_bytes(&TwoPaths { old: temp.into(), new: target.into() }).map_err(remote)?;
        match self.raw.extended("posix-rename@openssh.com", payload.to_vec()).await.map_err(remote)? {
            Packet::Status(s) if s.status_code == StatusCode::Ok => Ok(()),
            Packet::Status(s) => Err(SyncError::Remote(format!("renaming {temp} to {target}: {}", s.error_message))),
            other => Err(SyncError::Remote(format!("unexpected answer to posix-rename: {other:?}"))),
        }
    }

    /// Renames `from` to `to` (which must not exist) when `from` exists.
    pub async fn rename_if_exists(&self, from: &str, to: &str) -> Result<(), SyncError> {
        if self.session.try_exists(from).await.map_err(remote)? {
            self.session.rename(from, to).await.map_err(remote)?;
        }
        Ok(())
    }

    pub async fn remove_file(&self, path: &str) -> Result<(), SyncError> {
        if self.session.try_exists(path).await.map_err(remote)? {
            self.session.remove_file(path).await.map_err(remote)?;
        }
        Ok(())
    }

    /// Removes `dir` if it exists and is empty.
    pub async fn remove_dir_if_empty(&self, dir: &str) -> Result<bool, SyncError> {
        if !self.session.try_exists(dir).await.map_err(remote)? {
            return Ok(false);
        }
        let mut entries = self.session.read_dir(dir).await.map_err(remote)?;
        if entries.any(|e| e.file_name() != "." && e.file_name() != "..") {
            return Ok(false);
        }
        self.session.remove_dir(dir).await.map_err(remote)?;
        Ok(true)
    }
}
