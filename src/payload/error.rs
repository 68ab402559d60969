//! Why a payload could not be read, checked, pulled or written. What the user named (a directory, an image, a list)
//! is input: a refusal exits 2. A registry that cannot be reached or a disk that fails is an operational failure
//! (exit 3).

use crate::error::io_reason;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    #[error("{} has no C/ folder: a payload is laid out by node path, e.g. C/k/kubelet.exe", .dir.display())]
    NoRoot { dir: PathBuf },
    #[error("reading the payload {}: {why}", .dir.display())]
    Walk { dir: PathBuf, why: String },
    #[error("{} is not a regular file; a payload holds files and directories only", .file.display())]
    NotAFile { file: PathBuf },
    #[error("reading {}: {}", .file.display(), io_reason(source))]
    Read {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("writing {}: {}", .file.display(), io_reason(source))]
    Write {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {why}", .file.display())]
    List { file: PathBuf, why: String },
    #[error("{}: lists {path}, which is not in the payload", .file.display())]
    Missing { file: PathBuf, path: String },
    #[error("{}: {path} has sha256 {found}, the list says {listed}: the file changed since the list was written", .file.display())]
    Changed { file: PathBuf, path: String, listed: String, found: String },
    #[error(
        "{}: {path} is in the payload but not in the list (run `wmrender payload list` on the directory to list it)",
        .file.display()
    )]
    Unlisted { file: PathBuf, path: String },
    #[error("the payload {} does not go with a cluster on {cluster}:\n  {}", .dir.display(), .problems.join("\n  "))]
    DoesNotFit { dir: PathBuf, cluster: String, problems: Vec<String> },
    #[error("{image}: {why}")]
    Image { image: String, why: String },
    #[error("{0}")]
    Reference(String),
    #[error("{} exists and is not a payload wmrender wrote (it has no payload.json); give an empty or new directory", .dir.display())]
    NotOurs { dir: PathBuf },
    #[error("{} {}: {why}", .what, .image)]
    Registry { what: &'static str, image: String, why: String },
    #[error("{what}: {why}")]
    Credentials { what: String, why: String },
    #[error("wmrender was built without `{0}`: rebuild with the default features (`cargo install wmrender`)")]
    NotBuilt(&'static str),
}

impl PayloadError {
    /// A failure of something outside the user's inputs (a registry that cannot be reached, a disk): exit 3.
    pub fn is_operational(&self) -> bool {
        matches!(self, PayloadError::Registry { .. } | PayloadError::Write { .. })
    }
}

impl From<PayloadError> for crate::error::Error {
    fn from(e: PayloadError) -> Self {
        if e.is_operational() {
            crate::error::Error::Operational(e.to_string())
        } else {
            crate::error::Error::Unusable(Box::new(e))
        }
    }
}

#[cfg(feature = "registry")]
impl From<crate::oci::AccessError> for PayloadError {
    fn from(e: crate::oci::AccessError) -> Self {
        match e {
            crate::oci::AccessError::Read { file, source } => PayloadError::Read { file, source },
            crate::oci::AccessError::Credentials { what, why } => PayloadError::Credentials { what, why },
        }
    }
}
