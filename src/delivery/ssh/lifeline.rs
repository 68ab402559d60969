//! Whether a connection is still there. The SSH session task owns the sending half (inside its handler) and drops
//! it when the session ends, whatever ended it: a reset, a close, the inactivity time-out. Everything waiting on
//! the connection (an SFTP request, a command's output, a channel) races against [`Lifeline::cut`], so a dead
//! connection ends them at once rather than each after its own time-out, or never: an SFTP request sent after the
//! session ended would otherwise wait for an answer no one will give.

use tokio::sync::watch;

/// The receiving half: cloned into every operation on the connection.
#[derive(Clone)]
pub struct Lifeline(watch::Receiver<()>);

/// The sending half: held by the session's handler, dropped with it. Never sent on: its drop is the signal.
pub struct Pulse {
    _sender: watch::Sender<()>,
}

pub fn new() -> (Pulse, Lifeline) {
    let (tx, rx) = watch::channel(());
    (Pulse { _sender: tx }, Lifeline(rx))
}

impl Lifeline {
    /// Resolves once the session has ended.
    pub async fn cut(&self) {
        let mut rx = self.0.clone();
        while rx.changed().await.is_ok() {}
    }

    /// Whether the session has ended already.
    pub fn is_cut(&self) -> bool {
        self.0.has_changed().is_err()
    }

    /// `op`, unless the connection goes first: then `Err(None)`.
    pub async fn guard<T, E>(&self, op: impl Future<Output = Result<T, E>>) -> Result<T, Option<E>> {
        if self.is_cut() {
            return Err(None);
        }
        let mut op = std::pin::pin!(op);
        let mut cut = std::pin::pin!(self.cut());
        std::future::poll_fn(|cx| {
            if let std::task::Poll::Ready(r) = op.as_mut().poll(cx) {
                return std::task::Poll::Ready(r.map_err(Some));
            }
            cut.as_mut().poll(cx).map(|()| Err(None))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropping_the_pulse_ends_what_waits() {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(async {
            let (pulse, lifeline) = new();
            assert!(!lifeline.is_cut());
            assert_eq!(lifeline.guard(async { Ok::<_, ()>(1) }).await, Ok(1));
            let waiting = lifeline.clone();
            let handle = tokio::spawn(async move { waiting.guard(std::future::pending::<Result<(), ()>>()).await });
            tokio::task::yield_now().await;
            drop(pulse);
            assert_eq!(handle.await.unwrap(), Err(None));
            assert!(lifeline.is_cut());
            assert_eq!(lifeline.guard(async { Ok::<_, ()>(1) }).await, Err(None));
        });
    }
}
