//! Why a bundle could not be published. What the user named (a reference, a key, credentials) is input: exit 2. A
//! registry that cannot be reached or fails is an operational failure: exit 3.

use crate::error::io_reason;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("reading {}: {}", .file.display(), io_reason(source))]
    Read {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {why}", .file.display())]
    Key { file: PathBuf, why: String },
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Access(#[from] crate::oci::AccessError),
    /// The registry said no to what it was asked (credentials, permissions): the user's to fix.
    #[error("{reference}: {why}")]
    Refused { reference: String, why: String },
    /// The registry could not be reached or failed.
    #[error("{reference}: {why}")]
    Registry { reference: String, why: String },
    #[error("signing: {0}")]
    Sign(String),
}

impl PublishError {
    pub fn is_operational(&self) -> bool {
        matches!(self, PublishError::Registry { .. } | PublishError::Sign(_))
    }
}

impl From<PublishError> for crate::error::Error {
    fn from(e: PublishError) -> Self {
        if e.is_operational() {
            crate::error::Error::Operational(e.to_string())
        } else {
            crate::error::Error::Unusable(Box::new(e))
        }
    }
}
