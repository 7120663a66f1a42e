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
}
