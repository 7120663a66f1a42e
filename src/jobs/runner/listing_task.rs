//! A listing task: its items claimed in one transaction, written as their runs land, and
//! recorded in small groups while the rest keep calling (docs/design.md, "Listed once" and "A
//! job, from enqueue to the ledger"). Orders and logistics run theirs in `jobs::orders` and
//! `jobs::logistics`.

use super::{JobRunner, Tally, TaskError, RECORD_EVERY, UNRECORDED_MAX, USEFUL_EVERY};
use crate::jobs::item::{ledger_write, HandlerCtx, Stop, Useful, ITEM_PARALLELISM};
use crate::jobs::listing;
use crate::queue::TaskMsg;
use crate::store::{Claim, ClaimRequest};
use futures::StreamExt;
use std::collections::{HashMap, HashSet};
use std::time::Instant;

/// What one run of a listing task works on.
pub(super) struct ListingTask<'a> {
    pub(super) task: &'a TaskMsg,
    /// This delivery of the task: the holder of its claims.
    pub(super) holder: &'a str,
    pub(super) hctx: &'a HandlerCtx,
    pub(super) target: listing::Target<'a>,
    /// The task's items the ledger still shows pending, and the source reads they carry.
    pub(super) keys: &'a [String],
    pub(super) carried: &'a HashMap<String, String>,
    pub(super) useful: &'a Useful,
    pub(super) stop: &'a Stop,
}

impl JobRunner {
    /// Claim, write and record `t`'s items; what is left to do goes into `tally`.
    pub(super) async fn run_listing(
        &self,
        t: ListingTask<'_>,
        tally: &mut Tally,
    ) -> Result<(), TaskError> {
        let ListingTask {
            task,
            holder,
            hctx,
            target,
            keys,
            carried,
            useful,
            stop,
        } = t;
        // One transaction per task claims its items before any is read: which are
        // listed already, which another job or run is writing, which an earlier run
        // of this queued task may have written (docs/design.md, "Listed once").
        let requests: Vec<ClaimRequest> = keys
            .iter()
            .map(|key| ClaimRequest {
                from: target.route.from,
                source_item: key.clone(),
                to: target.route.to,
                shop: target.route.shop.to_string(),
                job_id: task.job_id,
                holder: holder.to_string(),
                seller_code: listing::seller_code(target, key),
                relist: target.relist,
            })
            .collect();
        let take_over_ms = listing::claim_take_over_ms(&self.ctx.cfg.link);
        let lease = listing::claim_lease::ClaimLease::new(listing::CLAIM_FENCE, Instant::now());
        let claimed = ledger_write("claim_listings", || {
            self.ctx.store.claim_listings(&requests, take_over_ms)
        })
        .await?;
        let claims: HashMap<String, Claim> = keys.iter().cloned().zip(claimed).collect();
        // A claim whose earlier write may have made a product stays until a look-up
        // says no product carries its code.
        let unsure = std::sync::Mutex::new(
            claims
                .iter()
                .filter(|(_, c)| matches!(c, Claim::Unsure { .. }))
                .map(|(k, _)| k.clone())
                .collect::<HashSet<String>>(),
        );
        // Writes: outcomes go to the ledger as they land (small groups), so a killed
        // worker leaves only its last few items unrecorded; the recovered task finds
        // their claims and looks each up by its seller code before writing.
        // The items keep running while a group is written: a stream left unpolled
        // would starve its in-flight items, which may hold ledger connections (the
        // link layer's stale cache), and the pool would run dry. Instead an item
        // waits for a permit before it starts; permits come back once recorded, so
        // at most UNRECORDED_MAX items of a task are started and not yet recorded.
        let unrecorded = tokio::sync::Semaphore::new(UNRECORDED_MAX);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let produce = async {
            let chunk = listing::Chunk {
                target,
                keys,
                carried,
                claims: &claims,
                unsure: &unsure,
                lease: &lease,
            };
            let runs = listing::stream_chunk(hctx, chunk, useful, &unrecorded, stop);
            futures::pin_mut!(runs);
            while let Some(run) = runs.next().await {
                if tx.send(run).is_err() {
                    break; // recording failed: stop calling
                }
            }
            drop(tx);
        };
        let consume = async {
            let mut group = Vec::with_capacity(ITEM_PARALLELISM);
            let mut last = Instant::now();
            let mut last_useful = Instant::now();
            let mut last_renewed = Instant::now();
            let result = async {
                loop {
                    match tokio::time::timeout(RECORD_EVERY, rx.recv()).await {
                        Ok(Some(run)) => group.push(run),
                        Ok(None) => break,
                        Err(_) => {}
                    }
                    if group.len() >= ITEM_PARALLELISM
                        || (!group.is_empty() && last.elapsed() >= RECORD_EVERY)
                    {
                        let n = group.len();
                        self.record_listings(target, holder, &group, &unsure).await?;
                        self.record(task.job_id, std::mem::take(&mut group), tally)
                            .await?;
                        unrecorded.add_permits(n);
                        last = Instant::now();
                        // Usefulness follows the outcomes, not the task's end: a long
                        // task would otherwise show calls and no useful data.
                        if last_useful.elapsed() >= USEFUL_EVERY {
                            self.record_useful(task, useful).await;
                            last_useful = Instant::now();
                        }
                    }
                    // A run keeps its claims from being taken over while it goes;
                    // its writes stop when renewals do (`ClaimLease`).
                    if last_renewed.elapsed() >= listing::CLAIM_RENEW_EVERY {
                        let sent = Instant::now();
                        match self.ctx.store.renew_claims(task.job_id, holder).await {
                            Ok(_) => lease.renewed(sent),
                            Err(e) => tracing::warn!(job = task.job_id, error = %e, "could not renew the task's listing claims (its writes stop if this goes on)"),
                        }
                        last_renewed = Instant::now();
                    }
                }
                self.record_listings(target, holder, &group, &unsure).await?;
                self.record(task.job_id, std::mem::take(&mut group), tally)
                    .await
            }
            .await;
            if result.is_err() {
                // Waiting items give up instead of calling.
                unrecorded.close();
            }
            result
        };
        let ((), recorded) = futures::join!(produce, consume);
        // Every write of this run has ended: what it still holds (writes whose
        // outcome is unknown) is given up, so the next run of those items, in
        // whichever task, looks them up at once.
        if let Err(e) = self.ctx.store.disown_claims(task.job_id, holder).await {
            tracing::warn!(job = task.job_id, error = %e, "could not give up the task's unsure listing claims (another task waits the take-over time for them)");
        }
        recorded
    }
}
