//! Why a node could not be synced, or a sync could not start. Messages say what happened and what to do; they
//! never carry secret bytes.

use crate::error::Error;
use crate::error::io_reason;
use std::path::PathBuf;
use wmrender_contract::NodePath;
use wmrender_contract::path::PathError;

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("unreachable: {0}")]
    Unreachable(String),
    #[error(
        "host key of {host} is not known ({offered}); pin it in {known_hosts}: `ssh-keyscan` it into that file after checking the fingerprint out of band, or run once with --accept-new"
    )]
    HostKeyUnknown { host: String, offered: String, known_hosts: String },
    #[error(
        "HOST KEY OF {host} HAS CHANGED: known_hosts has {known}, the server offered {offered}; refusing to connect (if the node was rebuilt, remove its old line from known_hosts)"
    )]
    HostKeyChanged { host: String, known: String, offered: String },
    #[error("host key check failed: {0}")]
    Trust(String),
    #[error("authentication as {user}@{host} failed: {why}")]
    Auth { user: String, host: String, why: String },
    #[error("{host} is not an SSH server: it answered `{said}`")]
    NotSsh { host: String, said: String },
    #[error("{0}")]
    Remote(String),
    #[error("{0}")]
    Local(String),
    #[error("the agent's pass failed: {0}")]
    Apply(String),
}

/// Why the files to push could not be put together (`--payload`, `--agent`). A file or directory the user named
/// that is not there or not readable is their input (exit 2); a read that fails part-way is a failure (exit 3).
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("{} has no C/ folder: lay the payload out by node path, e.g. C/k/kubelet.exe", .dir.display())]
    NoPayloadRoot { dir: PathBuf },
    #[error("reading the payload {}: {}", .dir.display(), walk_reason(source))]
    Walk {
        dir: PathBuf,
        #[source]
        source: walkdir::Error,
    },
    #[error("{}: {source}", .file.display())]
    NotANodePath {
        file: PathBuf,
        #[source]
        source: PathError,
    },
    #[error("{} would overwrite the rendered {path}", .file.display())]
    Overwrites { file: PathBuf, path: NodePath },
    /// Never opened: a named pipe would wait for a writer.
    #[error("{} is {kind}; a payload holds files and directories only", .file.display())]
    Special { file: PathBuf, kind: &'static str },
    #[error("cannot open {}: {}", .file.display(), io_reason(source))]
    Open {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("reading {} failed: {}", .file.display(), io_reason(source))]
    Read {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Why the secret files given to `sync` cannot be used. Messages name the file, never its content: exit 2.
#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    #[error("cannot read the {what} {}: {}", .file.display(), io_reason(source))]
    Read {
        what: &'static str,
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot use the pull secret {}: {problem}", .file.display())]
    PullSecret { file: PathBuf, problem: PullSecretProblem },
    /// The cluster's `openshift-config/pull-secret` is not one: a cluster-side problem, not the command line's.
    #[error("cannot use the cluster's pull secret (openshift-config/pull-secret): {0}")]
    FetchedPullSecret(PullSecretProblem),
    #[error("{}: {why}", .file.display())]
    CaBundle { file: PathBuf, why: String },
}

pub use crate::secret::PullSecretProblem;

/// The one place that says which of these is the user's input (exit 2) and which a failure (exit 3).
impl From<PlanError> for Error {
    fn from(e: PlanError) -> Error {
        match &e {
            PlanError::Read { .. } => Error::Operational(e.to_string()),
            PlanError::Walk { source, .. } if source.io_error().is_some_and(|io| !is_input(io)) => {
                Error::Operational(e.to_string())
            }
            PlanError::Open { source, .. } if !is_input(source) => Error::Operational(e.to_string()),
            _ => Error::Usage(e.to_string()),
        }
    }
}

impl From<SecretsError> for Error {
    fn from(e: SecretsError) -> Error {
        match &e {
            SecretsError::Read { source, .. } if !is_input(source) => Error::Operational(e.to_string()),
            SecretsError::FetchedPullSecret(_) => Error::Operational(e.to_string()),
            _ => Error::Usage(e.to_string()),
        }
    }
}

/// A walk's error in wmrender's words.
fn walk_reason(e: &walkdir::Error) -> String {
    match e.io_error() {
        Some(io) => io_reason(io),
        None => "its symbolic links form a loop".into(),
    }
}

/// A path named on the command line that is not there, not a file or not readable: the command line is wrong.
fn is_input(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(e.kind(), NotFound | PermissionDenied | IsADirectory | NotADirectory | InvalidInput)
}
