//! The graceful-shutdown signal the whole worker watches: a leaf, so every layer may use it.

use std::sync::Arc;
use tokio::sync::watch;

/// Graceful-shutdown signal: once triggered, workers stop fetching, finish and ack their
/// in-flight tasks, and return. Cheap to clone. The worker's life (`app::worker`) triggers it
/// on SIGTERM or SIGINT; the queue's workers, the job runner and the demo all watch it.
#[derive(Debug, Clone)]
pub struct Shutdown {
    tx: Arc<watch::Sender<bool>>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Shutdown::new()
    }
}

impl Shutdown {
    /// A signal not yet triggered.
    pub fn new() -> Shutdown {
        Shutdown {
            tx: Arc::new(watch::Sender::new(false)),
        }
    }
    /// Trigger the shutdown; every clone sees it. Triggering again does nothing more.
    pub fn trigger(&self) {
        self.tx.send_replace(true);
    }
    /// Whether [`Shutdown::trigger`] was called.
    pub fn is_triggered(&self) -> bool {
        *self.tx.borrow()
    }
    /// Resolves once [`Shutdown::trigger`] was called (immediately if it already was).
    pub async fn wait(&self) {
        let mut rx = self.tx.subscribe();
        // The sender lives in `self`, so `wait_for` cannot fail while we hold it.
        let _ = rx.wait_for(|v| *v).await;
    }

    /// The rounds of a background loop: one at once, then one every `every` (a late round
    /// delays the next, none is made up), until the shutdown.
    pub(crate) fn every(&self, every: std::time::Duration) -> Rounds {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Rounds {
            tick,
            shutdown: self.clone(),
        }
    }
}

/// See [`Shutdown::every`].
#[derive(Debug)]
pub(crate) struct Rounds {
    tick: tokio::time::Interval,
    shutdown: Shutdown,
}

impl Rounds {
    /// Wait for the next round: `false` once the shutdown is triggered.
    pub(crate) async fn next(&mut self) -> bool {
        tokio::select! {
            _ = self.shutdown.wait() => false,
            _ = self.tick.tick() => !self.shutdown.is_triggered(),
        }
    }
}
