//! A listing task: its items claimed in one transaction, written as their runs land, and
//! recorded in small groups while the rest keep calling (docs/design.md, "Listed once" and "A
//! job, from enqueue to the ledger"). Orders and logistics run theirs in `jobs::orders` and
//! `jobs::logistics`.

use super::{JobRunner, Tally, TaskError, RECORD_EVERY, UNRECORDED_MAX, USEFUL_EVERY};
use crate::clock::{elapsed_since, monotonic_now};
use crate::jobs::item::ItemRun;
use crate::jobs::item::{ledger_write, HandlerCtx, Stop, Useful, ITEM_PARALLELISM};
use crate::jobs::listing;
use crate::queue::TaskMsg;
use crate::store::{CallRecord, Claim, ClaimRequest, ItemStatus, ListingsRecord};
use futures::StreamExt;
use std::collections::{HashMap, HashSet};

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
        let lease = listing::claim_lease::ClaimLease::new(listing::CLAIM_FENCE, monotonic_now());
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
            let mut last = monotonic_now();
            let mut last_useful = monotonic_now();
            let mut last_renewed = monotonic_now();
            let result = async {
                loop {
                    match tokio::time::timeout(RECORD_EVERY, rx.recv()).await {
                        Ok(Some(run)) => group.push(run),
                        Ok(None) => break,
                        Err(_) => {}
                    }
                    if group.len() >= ITEM_PARALLELISM
                        || (!group.is_empty() && elapsed_since(last) >= RECORD_EVERY)
                    {
                        let n = group.len();
                        // Usefulness follows the outcomes, not the task's end: a long
                        // task would otherwise show calls and no useful data.
                        let calls = if elapsed_since(last_useful) >= USEFUL_EVERY {
                            last_useful = monotonic_now();
                            useful.drain(self.ctx.gateway.clock().utc())
                        } else {
                            Vec::new()
                        };
                        let group = Group {
                            runs: &mut group,
                            calls: &calls,
                            last: false,
                        };
                        self.record_listing_group(target, holder, group, &unsure, tally)
                            .await?;
                        unrecorded.add_permits(n);
                        last = monotonic_now();
                    }
                    // A run keeps its claims from being taken over while it goes;
                    // its writes stop when renewals do (`ClaimLease`).
                    if elapsed_since(last_renewed) >= listing::CLAIM_RENEW_EVERY {
                        let sent = monotonic_now();
                        match self.ctx.store.renew_claims(task.job_id, holder).await {
                            Ok(_) => lease.renewed(sent),
                            Err(e) => tracing::warn!(job = task.job_id, error = %e, "could not renew the task's listing claims (its writes stop if this goes on)"),
                        }
                        last_renewed = monotonic_now();
                    }
                }
                // Every write of this run has ended: the last group also gives up what the
                // run still holds (writes whose outcome is unknown), so the next run of those
                // items, in whichever task, looks them up at once.
                let calls = useful.drain(self.ctx.gateway.clock().utc());
                let group = Group {
                    runs: &mut group,
                    calls: &calls,
                    last: true,
                };
                self.record_listing_group(target, holder, group, &unsure, tally)
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
        if recorded.is_err() {
            // The last group was not recorded: its claims are given up on their own.
            if let Err(e) = self.ctx.store.disown_claims(task.job_id, holder).await {
                tracing::warn!(job = task.job_id, error = %e, "could not give up the task's unsure listing claims (another task waits the take-over time for them)");
            }
        }
        recorded
    }

    /// Record a group of the task's items (emptied) in one transaction with what a later job
    /// looks at before it writes: the products the group's writes made, so a run that ends
    /// after it finds each item listed, and the claims of the items that surely made nothing
    /// released, so the next run claims them afresh (those in `unsure` stay: a write of
    /// theirs may have made a product).
    async fn record_listing_group(
        &self,
        target: listing::Target<'_>,
        holder: &str,
        group: Group<'_>,
        unsure: &std::sync::Mutex<HashSet<String>>,
        tally: &mut Tally,
    ) -> Result<(), TaskError> {
        // A poisoned lock still holds what it held: treating it as empty would release the
        // claims of writes that may have made products.
        let (made, released) = listing_parts(
            group.runs,
            &unsure.lock().unwrap_or_else(|e| e.into_inner()),
        );
        let listings = ListingsRecord {
            route: target.route,
            relist: target.relist,
            holder,
            made: &made,
            released: &released,
            last: group.last,
        };
        let runs = std::mem::take(group.runs);
        self.record(target.job_id, runs, tally, Some(listings), group.calls)
            .await
    }
}

/// A group of a listing task's items to record, with what goes into the same transaction.
struct Group<'a> {
    /// The items' runs (taken).
    runs: &'a mut Vec<(String, ItemRun)>,
    /// Useful calls tallied since the last record.
    calls: &'a [CallRecord],
    /// The run's last group (see [`ListingsRecord::last`]).
    last: bool,
}

/// The products a group's writes made (source item, target item), and the items whose
/// claims it gives up: not made, and not `unsure`.
fn listing_parts(
    group: &[(String, ItemRun)],
    unsure: &HashSet<String>,
) -> (Vec<(String, String)>, Vec<String>) {
    let mut made = Vec::new();
    let mut released = Vec::new();
    for (key, run) in group {
        let product = match run {
            ItemRun::Outcome(o) if matches!(o.status, ItemStatus::Done | ItemStatus::Stale) => {
                Some(o.result.as_ref())
            }
            _ => None,
        };
        match product {
            Some(Some(item)) => made.push((key.clone(), item.clone())),
            // Made, its product unnamed: nothing to record, and its claim is not given up.
            Some(None) => {}
            None if !unsure.contains(key) => released.push(key.clone()),
            None => {}
        }
    }
    (made, released)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::ErrorClass;
    use crate::store::ItemOutcome;
    use std::time::Duration;

    #[test]
    fn a_group_records_what_it_made_and_gives_up_only_sure_nothings() {
        let group = vec![
            (
                "made".to_string(),
                ItemRun::Outcome(ItemOutcome::done("made", Some("T-1".into()))),
            ),
            (
                "stale".to_string(),
                ItemRun::Outcome(ItemOutcome::stale("stale", Some("T-2".into()), "old")),
            ),
            (
                "refused".to_string(),
                ItemRun::Outcome(ItemOutcome::failed("refused", ErrorClass::Fatal, "no")),
            ),
            ("later".to_string(), ItemRun::Later(Duration::ZERO)),
            ("lost".to_string(), ItemRun::Later(Duration::ZERO)),
            (
                "unnamed".to_string(),
                ItemRun::Outcome(ItemOutcome::done("unnamed", None)),
            ),
        ];
        let unsure: HashSet<String> = ["lost".to_string()].into();
        let (made, released) = listing_parts(&group, &unsure);
        assert_eq!(
            made,
            vec![
                ("made".to_string(), "T-1".to_string()),
                ("stale".to_string(), "T-2".to_string())
            ]
        );
        // A write that may have made a product keeps its claim; so does a made item whose
        // product the answer did not name.
        assert_eq!(released, vec!["refused".to_string(), "later".to_string()]);
    }
}
