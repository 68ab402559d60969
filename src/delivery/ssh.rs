//! One SSH connection to a node: strict host-key trust against known_hosts, key-file authentication, commands,
//! and SFTP on one channel. Everything russh-specific lives here and in the files below `ssh/`.

mod greeting;
mod identity;
mod lifeline;
mod sftp;
mod trust;

pub use identity::{IdentityError, IdentityProblem, load_identity};
pub use sftp::{Sftp, Uploaded};
pub use trust::HostKeyBook;

use super::error::SyncError;
use super::inventory::Node;
use greeting::{Greeting, Recorded};
use lifeline::Lifeline;
use russh::ChannelMsg;
use russh::client::{self, Handle};
use russh::keys::{HashAlg, PrivateKey, PrivateKeyWithHashAlg};
use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use trust::{Trust, Verdict};

/// How to reach and trust nodes; shared by every connection of a run.
#[derive(Clone)]
pub struct ConnectOptions {
    pub key: Arc<PrivateKey>,
    pub known_hosts: PathBuf,
    pub accept_new: bool,
    /// A dry run: `--accept-new` trusts a new host for this look but writes nothing to known_hosts.
    pub dry_run: bool,
    pub connect_timeout: Duration,
    pub idle_timeout: Duration,
    /// Attempts for failures a retry can cure (a refused or dropped connection); time-outs, trust and
    /// authentication failures are never retried.
    pub attempts: u32,
    /// Serialises reading and appending known_hosts across concurrent connections.
    pub known_hosts_lock: Arc<Mutex<()>>,
    /// Host keys kept elsewhere than known_hosts (the controller's, in the cluster): trusted beside the file's, and
    /// where `accept_new` pins a new host's key instead of the file.
    pub host_keys: Option<Arc<HostKeyBook>>,
}

/// The host keys pinned for a node (its known_hosts lines and those kept in the book), as OpenSSH text: what a
/// login record keeps once a connection verified one of them.
pub fn pinned_host_keys(node: &Node, opts: &ConnectOptions) -> Vec<String> {
    trust::pinned_keys(&node.address, node.port, opts)
        .unwrap_or_default()
        .iter()
        .filter_map(|k| k.to_openssh().ok())
        .collect()
}

pub struct Connection {
    handle: Handle<Trust>,
    idle_timeout: Duration,
    /// Ends every wait on this connection once it is gone.
    lifeline: Lifeline,
    /// `host` or `[host]:port`, for messages.
    at: String,
}

/// The output of one remote command.
pub struct Output {
    pub status: Option<u32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// A failed attempt, and whether another attempt could go differently.
struct Failed {
    error: SyncError,
    retry: bool,
}

impl Failed {
    fn final_(error: SyncError) -> Failed {
        Failed { error, retry: false }
    }
}

impl Connection {
    /// Connects and authenticates. Only a refused or dropped connection is tried again (a restarting sshd, an
    /// sshd over its MaxStartups); a host that stays silent costs one time-out, not one per attempt.
    pub async fn open(node: &Node, opts: &ConnectOptions) -> Result<Connection, SyncError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match Self::open_once(node, opts).await {
                Ok(c) => return Ok(c),
                Err(failed) if failed.retry && attempt < opts.attempts.max(1) => {
                    tokio::time::sleep(Duration::from_millis(500 * u64::from(attempt))).await;
                }
                Err(failed) => return Err(failed.error),
            }
        }
    }

    async fn open_once(node: &Node, opts: &ConnectOptions) -> Result<Connection, Failed> {
        let at = host_port(node);
        let pinned =
            trust::pinned_keys(&node.address, node.port, opts).map_err(|e| Failed::final_(SyncError::Trust(e)))?;
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
        config.preferred.key = Cow::Owned(trust::host_key_algorithms(&pinned));
        let verdict = Arc::new(Mutex::new(Verdict::Pending));
        let (pulse, lifeline) = lifeline::new();
        let trust = Trust {
            host: node.address.clone(),
            port: node.port,
            opts: opts.clone(),
            verdict: verdict.clone(),
            _pulse: pulse,
        };
        let tcp = match tokio::time::timeout(
            opts.connect_timeout,
            tokio::net::TcpStream::connect((node.address.as_str(), node.port)),
        )
        .await
        {
            Err(_) => {
                return Err(Failed::final_(SyncError::Unreachable(format!(
                    "{at}: no TCP answer within {}s",
                    opts.connect_timeout.as_secs_f32()
                ))));
            }
            Ok(Err(e)) => {
                use std::io::ErrorKind::*;
                let retry = matches!(e.kind(), ConnectionRefused | ConnectionReset | ConnectionAborted);
                let why = crate::error::io_reason(&e);
                return Err(Failed { error: SyncError::Unreachable(format!("{at}: {why}")), retry });
            }
            Ok(Ok(s)) => s,
        };
        let _ = tcp.set_nodelay(true);
        let (stream, seen) = Recorded::new(tcp);
        let connected =
            tokio::time::timeout(opts.connect_timeout, client::connect_stream(Arc::new(config), stream, trust)).await;
        let greeting = || greeting::classify(&seen.lock().unwrap_or_else(|p| p.into_inner()));
        let mut handle = match connected {
            Ok(Ok(h)) => h,
            Err(_) => {
                return Err(Failed::final_(match greeting() {
                    Greeting::Other(said) => SyncError::NotSsh { host: at, said },
                    _ => SyncError::Unreachable(format!(
                        "{at}: no SSH answer within {}s",
                        opts.connect_timeout.as_secs_f32()
                    )),
                }));
            }
            Ok(Err(e)) => {
                let v = verdict.lock().unwrap_or_else(|p| p.into_inner()).clone();
                return Err(match v {
                    Verdict::Unknown { offered } => Failed::final_(SyncError::HostKeyUnknown {
                        host: at,
                        offered,
                        known_hosts: opts.known_hosts.display().to_string(),
                    }),
                    Verdict::Changed { known, offered } => {
                        Failed::final_(SyncError::HostKeyChanged { host: at, known, offered })
                    }
                    Verdict::Failed(why) => Failed::final_(SyncError::Trust(why)),
                    Verdict::Pending | Verdict::Trusted => match greeting() {
                        Greeting::Other(said) => Failed::final_(SyncError::NotSsh { host: at, said }),
                        Greeting::Silent => Failed {
                            error: SyncError::Unreachable(format!(
                                "{at} closed the connection without a word (is it an SSH server? sshd drops \
                                 connections over its MaxStartups)"
                            )),
                            retry: true,
                        },
                        Greeting::Ssh => Failed::final_(SyncError::Unreachable(handshake_failure(&at, &e))),
                    },
                });
            }
        };
        match lifeline.guard(authenticate(&mut handle, node, &opts.key)).await {
            Ok(()) => {}
            Err(Some(e)) => return Err(Failed::final_(e)),
            Err(None) => return Err(Failed::final_(lost(&at, "while logging in"))),
        }
        Ok(Connection { handle, idle_timeout: opts.idle_timeout, lifeline, at })
    }

    /// `op` on this connection, or an error as soon as the connection is gone.
    async fn live<T, E: std::fmt::Display>(
        &self,
        doing: &str,
        op: impl Future<Output = Result<T, E>>,
    ) -> Result<T, SyncError> {
        self.lifeline.guard(op).await.map_err(|e| match e {
            Some(e) => remote(e),
            None => lost(&self.at, doing),
        })
    }

    pub async fn exec(&self, command: &str) -> Result<Output, SyncError> {
        let doing = "while running a command";
        let mut ch = self.live(doing, self.handle.channel_open_session()).await?;
        self.live(doing, ch.exec(true, command)).await?;
        let mut out = Output { status: None, stdout: Vec::new(), stderr: Vec::new() };
        while let Some(msg) = self.live(doing, async { Ok::<_, SyncError>(ch.wait().await) }).await? {
            match msg {
                ChannelMsg::Data { data } => out.stdout.extend_from_slice(&data),
                ChannelMsg::ExtendedData { data, ext: 1 } => out.stderr.extend_from_slice(&data),
                ChannelMsg::ExitStatus { exit_status } => out.status = Some(exit_status),
                _ => {}
            }
        }
        Ok(out)
    }

    /// SFTP on one channel, for everything this connection reads and writes.
    pub async fn sftp(&self) -> Result<Sftp, SyncError> {
        let doing = "while starting SFTP";
        let ch = self.live(doing, self.handle.channel_open_session()).await?;
        self.live(doing, ch.request_subsystem(true, "sftp")).await?;
        let timeout = self.idle_timeout.as_secs().max(10);
        Sftp::start(ch.into_stream(), timeout, self.lifeline.clone(), self.at.clone()).await
    }

    pub async fn close(self) {
        let _ = self.live("", self.handle.disconnect(russh::Disconnect::ByApplication, "", "en")).await;
    }
}

/// The error of an operation the connection's end cut short.
fn lost(at: &str, doing: &str) -> SyncError {
    SyncError::Unreachable(format!("{at}: the connection was lost {doing}").trim_end().to_string())
}

/// Public-key authentication. An RSA key signs with rsa-sha2-512 or rsa-sha2-256 as the server's
/// `server-sig-algs` allows, like OpenSSH's client; a server that does not say is tried with both. SHA-1
/// (`ssh-rsa`) signatures are never made, as OpenSSH has not since 8.8.
async fn authenticate(handle: &mut Handle<Trust>, node: &Node, key: &Arc<PrivateKey>) -> Result<(), SyncError> {
    let hashes: Vec<Option<HashAlg>> = if key.algorithm().is_rsa() {
        match handle.best_supported_rsa_hash().await.map_err(|e| SyncError::Unreachable(e.to_string()))? {
            Some(Some(hash)) => vec![Some(hash)],
            Some(None) => {
                return Err(SyncError::Auth {
                    user: node.user.clone(),
                    host: host_port(node),
                    why: "the node takes RSA keys only with SHA-1 signatures (ssh-rsa), which wmrender, like \
                          OpenSSH since 8.8, does not make; allow rsa-sha2-256 or rsa-sha2-512 on the node or use \
                          an ed25519 key"
                        .into(),
                });
            }
            None => vec![Some(HashAlg::Sha512), Some(HashAlg::Sha256)],
        }
    } else {
        vec![None]
    };
    for hash in hashes {
        let auth = handle
            .authenticate_publickey(node.user.clone(), PrivateKeyWithHashAlg::new(key.clone(), hash))
            .await
            .map_err(|e| SyncError::Unreachable(format!("{}: {e}", host_port(node))))?;
        if auth.success() {
            return Ok(());
        }
    }
    Err(SyncError::Auth {
        user: node.user.clone(),
        host: host_port(node),
        why: "the node does not accept the key given with --identity".into(),
    })
}

/// A failed handshake with a server that does speak SSH, in words a user can act on.
fn handshake_failure(at: &str, e: &russh::Error) -> String {
    match e {
        russh::Error::NoCommonAlgo { kind, theirs, .. } => {
            let kind = match kind {
                russh::AlgorithmKind::Kex => "key-exchange",
                russh::AlgorithmKind::Key => "host-key",
                russh::AlgorithmKind::Cipher => "cipher",
                russh::AlgorithmKind::Compression => "compression",
                russh::AlgorithmKind::Mac => "MAC",
            };
            format!("{at}: no {kind} algorithm in common with the node (it offers {})", theirs.join(", "))
        }
        other => format!("{at}: SSH handshake failed: {other}"),
    }
}

fn host_port(node: &Node) -> String {
    if node.port == 22 { node.address.clone() } else { format!("[{}]:{}", node.address, node.port) }
}

fn remote(e: impl std::fmt::Display) -> SyncError {
    SyncError::Remote(e.to_string())
}
