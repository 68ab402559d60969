//! The library's errors. `main.rs` maps each to an exit code: invalid input or usage 2, operational failure 3.

use crate::diagnostics::Diagnostics;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The inputs broke one or more rules; the diagnostics say which and where.
    #[error("invalid inputs")]
    Invalid(Diagnostics),
    /// The command line asked for something that cannot be done.
    #[error("{0}")]
    Usage(String),
    /// Something outside the inputs failed (a network, a task, a node).
    #[error("{0}")]
    Operational(String),
    /// A file the user named cannot be used (the `--identity` key, say): the stage that read it says why, in its own
    /// typed error, which converts into this one.
    #[error(transparent)]
    Unusable(Box<dyn std::error::Error + Send + Sync>),
    /// The cluster could not be used (a kubeconfig, a build without the `cluster` feature, the API).
    #[error(transparent)]
    Cluster(#[from] crate::cluster::ClusterError),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io { context: context.into(), source }
    }
}
