//! The controller's keyed work queue: each target's step (a sync, a prune) runs as a task of its own, at most one
//! per target at a time, so no target's work waits for another's — a new Machine is contacted while a rollout
//! drains other nodes. Tasks are bounded by `--parallel` (connections at once) and, for anything that can make a
//! node unavailable (a change to a host that may run pods, a prune's drain), by `--max-unavailable` across the
//! fleet; a task waiting for the latter holds no connection slot, so it never blocks a first contact. kube-runtime's
//! `Controller` keys its queue by object; a BYOH host from Git has none, hence this small one.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;

/// Whether a task may make a node unavailable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disruption {
    /// A first contact: nothing can run on the host yet.
    None,
    /// A host that may run pods: waits for a `--max-unavailable` permit first.
    MayDisrupt,
}

pub struct Queue<T> {
    parallel: Arc<Semaphore>,
    unavailable: Arc<Semaphore>,
    running: BTreeMap<String, JoinHandle<()>>,
    done_tx: mpsc::UnboundedSender<(String, T)>,
    done_rx: mpsc::UnboundedReceiver<(String, T)>,
}

impl<T: Send + 'static> Queue<T> {
    pub fn new(parallel: usize, max_unavailable: usize) -> Queue<T> {
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        Queue {
            parallel: Arc::new(Semaphore::new(parallel.max(1))),
            unavailable: Arc::new(Semaphore::new(max_unavailable.max(1))),
            running: BTreeMap::new(),
            done_tx,
            done_rx,
        }
    }

    /// The keys whose task is running.
    pub fn running(&self) -> BTreeSet<String> {
        self.running.keys().cloned().collect()
    }

    /// Starts `work` under `key` unless a task of that key is running; returns whether it started.
    pub fn start<F>(&mut self, key: String, disruption: Disruption, work: F) -> bool
    where
        F: Future<Output = T> + Send + 'static,
    {
        if self.running.contains_key(&key) {
            return false;
        }
        let (parallel, unavailable, done) = (self.parallel.clone(), self.unavailable.clone(), self.done_tx.clone());
        let task_key = key.clone();
        let task = tokio::spawn(async move {
            // The permit first: a task waiting for it holds no connection slot.
            let _permit = match disruption {
                Disruption::MayDisrupt => unavailable.acquire_owned().await.ok(),
                Disruption::None => None,
            };
            let _slot = parallel.acquire_owned().await.ok();
            let out = work.await;
            let _ = done.send((task_key, out));
        });
        self.running.insert(key, task);
        true
    }

    /// The next task that finished, waiting for one (pending forever while none runs).
    pub async fn finished(&mut self) -> (String, T) {
        match self.done_rx.recv().await {
            Some((key, out)) => {
                self.running.remove(&key);
                (key, out)
            }
            // The queue holds a sender itself: the channel never closes.
            None => std::future::pending().await,
        }
    }

    /// A task that finished, if one has.
    pub fn try_finished(&mut self) -> Option<(String, T)> {
        let (key, out) = self.done_rx.try_recv().ok()?;
        self.running.remove(&key);
        Some((key, out))
    }

    /// Cuts every running task off (the Lease was lost): sync's journal lets the next leader finish them.
    pub fn abort_all(&mut self) {
        for (_, task) in std::mem::take(&mut self.running) {
            task.abort();
        }
        while self.done_rx.try_recv().is_ok() {}
    }
}

impl<T> Drop for Queue<T> {
    fn drop(&mut self) {
        for task in self.running.values() {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_first_contact_starts_while_disruptive_work_waits_for_its_permit() {
        let mut q: Queue<&'static str> = Queue::new(2, 1);
        let (hold_tx, hold_rx) = tokio::sync::oneshot::channel::<()>();
        // A slow drain holds the one --max-unavailable permit; two more disruptive tasks wait for it.
        assert!(q.start("slow".into(), Disruption::MayDisrupt, async move {
            let _ = hold_rx.await;
            "slow"
        }));
        for key in ["wait-1", "wait-2"] {
            assert!(q.start(key.into(), Disruption::MayDisrupt, async move { key }));
        }
        assert!(!q.start("slow".into(), Disruption::MayDisrupt, async { "twice" }), "one task per key");
        assert!(q.start("new-machine".into(), Disruption::None, async { "new-machine" }));
        let first = tokio::time::timeout(Duration::from_secs(5), q.finished()).await.unwrap();
        assert_eq!(first.1, "new-machine", "the first contact is not behind the rollout");
        let _ = hold_tx.send(());
        let mut rest = Vec::new();
        for _ in 0..3 {
            rest.push(tokio::time::timeout(Duration::from_secs(5), q.finished()).await.unwrap().1);
        }
        assert_eq!(rest[0], "slow");
        assert!(q.running().is_empty());
    }
}
