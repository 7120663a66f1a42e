//! The claims of a worker's listing writes, written to the ledger together: every item
//! claims its listing right before its write (docs/design.md, "Listed once"), and the items
//! of all the worker's running tasks that ask while a transaction is in flight go in the next
//! one. A claim a transaction apiece held SQLite's single writer 1,667 times a second in the
//! demo and cost a fifth of its throughput (BENCHMARKS.md, "The real listing").

use crate::store::{Claim, ClaimRequest, Store};
use std::sync::{Arc, OnceLock};
use tokio::sync::{mpsc, oneshot};

/// Claims in one transaction at most.
const BATCH_MAX: usize = 128;

/// The claim could not be written (the ledger failed; logged once per batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the listing claim could not be written to the ledger")]
pub(crate) struct ClaimFailed;

type Reply = oneshot::Sender<Result<Claim, ClaimFailed>>;

/// A worker's claim writer: cheap to clone, started at its first claim.
#[derive(Clone)]
pub(crate) struct Claims {
    store: Store,
    take_over_ms: i64,
    sender: Arc<OnceLock<mpsc::UnboundedSender<(ClaimRequest, Reply)>>>,
}

impl Claims {
    /// Claims written to `store`; another job's claim older than `take_over_ms` is taken over.
    pub(crate) fn new(store: Store, take_over_ms: i64) -> Claims {
        Claims {
            store,
            take_over_ms,
            sender: Arc::new(OnceLock::new()),
        }
    }

    /// Claim one listing before its write.
    pub(crate) async fn claim(&self, req: ClaimRequest) -> Result<Claim, ClaimFailed> {
        let sender = self.sender.get_or_init(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(write_batches(self.store.clone(), self.take_over_ms, rx));
            tx
        });
        let (reply, answer) = oneshot::channel();
        sender.send((req, reply)).map_err(|_| ClaimFailed)?;
        answer.await.unwrap_or(Err(ClaimFailed))
    }
}

/// Write what is waiting, up to [`BATCH_MAX`] at a time, until every sender is gone.
async fn write_batches(
    store: Store,
    take_over_ms: i64,
    mut rx: mpsc::UnboundedReceiver<(ClaimRequest, Reply)>,
) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        while batch.len() < BATCH_MAX {
            match rx.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        let (requests, replies): (Vec<_>, Vec<_>) = batch.into_iter().unzip();
        match store.claim_listings(&requests, take_over_ms).await {
            Ok(claims) => {
                for (reply, claim) in replies.into_iter().zip(claims) {
                    let _ = reply.send(Ok(claim));
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, claims = requests.len(), "listing claims not written; the items wait");
                for reply in replies {
                    let _ = reply.send(Err(ClaimFailed));
                }
            }
        }
    }
}
