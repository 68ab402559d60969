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
    #[error("{context}: {}", io_reason(source))]
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

/// What an I/O error means, in wmrender's words: the operating system's message carries its error number and
/// phrasing ("No such file or directory (os error 2)"), and Rust's its own ("stream did not contain valid UTF-8").
pub fn io_reason(e: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    #[cfg(unix)]
    match e.raw_os_error() {
        Some(libc::ELOOP) => return "its symbolic links form a loop".into(),
        Some(libc::ENAMETOOLONG) => return "the name is too long for the file system".into(),
        Some(libc::EROFS) => return "the file system is read-only".into(),
        Some(libc::ENOSPC) => return "the disk is full".into(),
        Some(libc::EDQUOT) => return "the disk quota is used up".into(),
        Some(libc::EXDEV) => return "it is on another file system".into(),
        Some(libc::ETXTBSY) => return "a running program holds it".into(),
        _ => {}
    }
    match e.kind() {
        K::NotFound => "it does not exist".into(),
        K::PermissionDenied => "permission denied".into(),
        K::InvalidData => "it is not UTF-8 text".into(),
        K::NotADirectory => "a part of the path is a file, not a directory".into(),
        K::IsADirectory => "it is a directory".into(),
        K::AlreadyExists => "it already exists".into(),
        K::DirectoryNotEmpty => "the directory is not empty".into(),
        K::InvalidFilename => "the name is too long for the file system".into(),
        K::ConnectionRefused => "the connection was refused".into(),
        K::ConnectionReset => "the connection was reset".into(),
        K::ConnectionAborted => "the connection was aborted".into(),
        K::NotConnected | K::BrokenPipe => "the connection is closed".into(),
        K::TimedOut => "it timed out".into(),
        K::UnexpectedEof => "it ended before its end".into(),
        K::HostUnreachable => "the host is unreachable".into(),
        K::NetworkUnreachable | K::NetworkDown => "the network is unreachable".into(),
        K::AddrNotAvailable => "the address is not available here".into(),
        K::OutOfMemory => "out of memory".into(),
        // Anything rarer: the system's sentence without its error number, in lower case.
        _ => {
            let text = e.to_string();
            let text = match text.rfind(" (os error ") {
                Some(i) => &text[..i],
                None => &text,
            };
            let mut chars = text.chars();
            chars.next().map(|c| c.to_lowercase().chain(chars).collect()).unwrap_or_default()
        }
    }
}

/// What a JSON error means, in wmrender's words, without serde_json's position (the caller says where, as
/// `file:line:column`): a file cut short, one that is not JSON, or a field that is not what wmrender writes.
pub fn json_reason(e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    let text = e.to_string();
    let detail = match text.rfind(" at line ") {
        Some(i) => &text[..i],
        None => &text,
    };
    match e.classify() {
        Category::Eof => "it ends before its JSON does (cut short?)".into(),
        Category::Syntax => "it is not valid JSON".into(),
        Category::Data => format!("a value is not what wmrender writes: {detail}"),
        Category::Io => "it could not be read".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_errors_say_what_is_wrong_without_serdes_position() {
        let cut = serde_json::from_str::<serde_json::Value>("{\"files\": [").unwrap_err();
        assert_eq!(json_reason(&cut), "it ends before its JSON does (cut short?)");
        let bad = serde_json::from_str::<serde_json::Value>("{x}").unwrap_err();
        assert_eq!(json_reason(&bad), "it is not valid JSON");
        let wrong = serde_json::from_str::<Vec<u8>>("\"a\"").unwrap_err();
        assert!(json_reason(&wrong).starts_with("a value is not") && !json_reason(&wrong).contains(" line "));
    }

    #[test]
    fn io_errors_are_said_without_the_systems_words() {
        let reasons = [
            std::io::Error::from_raw_os_error(2),
            std::io::Error::from_raw_os_error(13),
            std::io::Error::from_raw_os_error(36),
            std::io::Error::from_raw_os_error(40),
            std::io::Error::from_raw_os_error(16),
            std::fs::read_to_string("/proc/self/exe").unwrap_err(),
        ]
        .map(|e| io_reason(&e));
        for r in &reasons {
            assert!(!r.contains("os error") && !r.contains("stream did not"), "{r}");
            assert!(r.chars().next().is_some_and(char::is_lowercase), "{r}");
        }
        assert_eq!(reasons[0], "it does not exist");
        assert_eq!(reasons[3], "its symbolic links form a loop");
        assert_eq!(reasons[5], "it is not UTF-8 text");
    }
}
