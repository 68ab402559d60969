//! Why a node could not be synced. Messages say what happened and what to do; they never carry secret bytes.

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
    #[error("the install step failed: {0}")]
    Apply(String),
}
