//! The first bytes a server sends, kept so that a failed handshake can say what answered: nothing at all (a
//! server that closed at once, e.g. sshd over MaxStartups), or something that is not SSH (a web server, a TLS
//! port). russh only reports the I/O error that followed.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// How much of the start of the stream is kept: enough for an SSH version line and a few banner lines.
const KEPT: usize = 1024;

/// A stream that copies the first [`KEPT`] bytes it reads into a shared buffer.
pub(super) struct Recorded<S> {
    inner: S,
    seen: Arc<Mutex<Vec<u8>>>,
}

impl<S> Recorded<S> {
    pub fn new(inner: S) -> (Recorded<S>, Arc<Mutex<Vec<u8>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        (Recorded { inner, seen: seen.clone() }, seen)
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Recorded<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            if seen.len() < KEPT {
                let new = &buf.filled()[before..];
                let take = new.len().min(KEPT - seen.len());
                seen.extend_from_slice(&new[..take]);
            }
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Recorded<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// What the start of the stream says about the server.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Greeting {
    /// Not a byte: the server closed (or reset) the connection before its version line.
    Silent,
    /// An SSH version line was among the first lines: the server speaks SSH.
    Ssh,
    /// Bytes that are not SSH; the first line, made printable and short, to show the user.
    Other(String),
}

pub(super) fn classify(seen: &[u8]) -> Greeting {
    if seen.is_empty() {
        return Greeting::Silent;
    }
    // RFC 4253 §4.2: other lines may come before the version line; a partial first line may be SSH too.
    let text = String::from_utf8_lossy(seen);
    if text.lines().any(|l| l.starts_with("SSH-")) || "SSH-".starts_with(text.as_ref()) {
        return Greeting::Ssh;
    }
    let first = text.lines().next().unwrap_or("");
    let mut shown: String =
        first.chars().map(|c| if c.is_control() || c == '\u{fffd}' { '.' } else { c }).take(60).collect();
    if first.chars().count() > 60 {
        shown.push('…');
    }
    Greeting::Other(shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greetings() {
        assert_eq!(classify(b""), Greeting::Silent);
        assert_eq!(classify(b"SSH-2.0-OpenSSH_9.2p1 Debian\r\n"), Greeting::Ssh);
        assert_eq!(classify(b"a banner\r\nSSH-2.0-x\r\n"), Greeting::Ssh);
        assert_eq!(classify(b"SS"), Greeting::Ssh);
        assert_eq!(classify(b"HTTP/1.1 400 Bad Request\r\n\r\n"), Greeting::Other("HTTP/1.1 400 Bad Request".into()));
        assert_eq!(classify(b"\x16\x03\x01\x00"), Greeting::Other("....".into()));
    }
}
