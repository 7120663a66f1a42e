//! Listing: `item_get` on the source platform (a read: cacheable, may degrade to stale),
//! mapped by the user's listing map onto the target ([`mapping`]), then `item_add` on the
//! target shop. No platform deduplicates a write, so the listing's identity (source platform
//! and item, target platform and shop) is claimed in the ledger before the write, the write
//! carries it as the seller's code, and a write whose outcome is unknown is looked up by that
//! code before it is ever sent again (docs/design.md, "Listed once").

pub(crate) mod claim_lease;
pub(crate) mod mapping;

use super::item::{HandlerCtx, ItemRun, Stop, Useful};
use crate::config::listing_map::ListingMap;
use crate::platform::model::{ApiRequest, ApiResponse, Item};
use crate::platform::{Api, ErrorClass, Platform, ShopListing};
use crate::store::{Claim, ItemOutcome, Listed, ListingRoute};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

/// The pending items of one listing task, and what earlier runs kept for them.
pub(crate) struct Chunk<'a> {
    pub(crate) target: Target<'a>,
    pub(crate) keys: &'a [String],
    pub(crate) carried: &'a HashMap<String, String>,
    /// What the task's claim of each of `keys` found (docs/design.md, "Listed once").
    pub(crate) claims: &'a HashMap<String, Claim>,
    /// The items whose write may have made a product without the answer saying so: their
    /// claims stay when their outcomes are recorded (the rest are released).
    pub(crate) unsure: &'a Mutex<HashSet<String>>,
    /// Whether the task's claims are still surely its own: no write starts otherwise.
    pub(crate) lease: &'a claim_lease::ClaimLease,
}

/// Where one listing job writes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Target<'a> {
    pub(crate) job_id: i64,
    /// Read on `route.from`, written to `route.shop` on `route.to`.
    pub(crate) route: ListingRoute<'a>,
    /// The job asked for new products even where the item is listed already.
    pub(crate) relist: bool,
    /// A source read served stale may feed a write when at most this old (s).
    pub(crate) allow_stale_s: Option<u64>,
    /// How source items become target items; `None` for a job enqueued before jobs carried
    /// one (its items are skipped).
    pub(crate) map: Option<&'a ListingMap>,
    /// What the target shop's items say of it (location, item type).
    pub(crate) shop: &'a ShopListing,
}

/// Run the pending items of one chunk, [`super::item::ITEM_PARALLELISM`] at a time; yields
/// each item's outcome as it finishes. An item starts only with a permit of `unrecorded`
/// (the runner returns permits as it records outcomes); a closed semaphore ends the chunk
/// without calling (the outcomes yielded then are discarded). Once `stop` says so, items
/// not started are handed back without calling, and items still calling when it expires
/// are abandoned (their claim stays: the next run looks the code up before writing).
pub(crate) fn stream_chunk<'a>(
    runner: &'a HandlerCtx,
    chunk: Chunk<'a>,
    useful: &'a Useful,
    unrecorded: &'a tokio::sync::Semaphore,
    stop: &'a Stop,
) -> impl futures::Stream<Item = (String, ItemRun)> + 'a {
    let Chunk {
        target,
        keys,
        carried,
        claims,
        unsure,
        lease,
    } = chunk;
    futures::stream::iter(keys.iter().cloned())
        .map(move |key| async move {
            let handed_back = ItemRun::Later(std::time::Duration::ZERO);
            let run = match unrecorded.acquire().await {
                Ok(_) if stop.refuses_new_items() => handed_back,
                Ok(permit) => {
                    permit.forget();
                    match claims.get(&key) {
                        // This job made it and its outcome was not recorded (the worker was
                        // killed, or the task's lease lost, between the two): done, no call.
                        // Another job made it: skipped.
                        Some(Claim::Listed(l)) => listed_already(target, &key, l),
                        // Another holder's write of it may be on its way: its outcome decides.
                        Some(Claim::Held { job_id, .. }) => {
                            tracing::debug!(item = %key, holder = ?job_id, "another job or run is writing this listing");
                            ItemRun::Later(CLAIM_WAIT)
                        }
                        Some(claim) => {
                            let kept = carried.get(&key).and_then(|c| serde_json::from_str(c).ok());
                            let item = ItemRef {
                                key: &key,
                                claim,
                                unsure,
                                lease,
                            };
                            match stop
                                .cut_short(list_one(runner, target, item, useful, kept, stop))
                                .await
                            {
                                Some(run) => run,
                                None => {
                                    // Abandoned: its write may be on the wire.
                                    mark_unsure(unsure, &key);
                                    handed_back
                                }
                            }
                        }
                        None => ItemRun::Later(CLAIM_WAIT),
                    }
                }
                Err(_) => handed_back,
            };
            (key, run)
        })
        .buffer_unordered(super::item::ITEM_PARALLELISM)
}

/// The seller's code a listing's write carries: the listing's identity on the target shop
/// (the source platform and item; the shop is the one whose items are searched), so the
/// product a lost answer made is found by it. A relisting job's products carry codes of its
/// own. At most 64 bytes (TOP's `outer_id`).
pub(crate) fn seller_code(target: Target<'_>, item: &str) -> String {
    let from = match target.route.from {
        Platform::Taobao => "TB",
        Platform::Jd => "JD",
        Platform::Alibaba => "1688",
    };
    if target.relist {
        format!("SF{from}-{item}-R{}", target.job_id)
    } else {
        format!("SF{from}-{item}")
    }
}

/// After how long without renewal another holder's claim is taken over (ms): the holder
/// starts no write past [`CLAIM_FENCE`] after its last renewal, every write ends within its
/// item's budget, and 5 s of margin (80 s with the default 60 s budget).
pub(crate) fn claim_take_over_ms(link: &crate::config::LinkConfig) -> i64 {
    let fence = u64::try_from(CLAIM_FENCE.as_millis()).unwrap_or(u64::MAX);
    let ms = link
        .task_budget_ms
        .saturating_add(fence)
        .saturating_add(5_000);
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// How often a running listing task renews its claims.
pub(crate) const CLAIM_RENEW_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// How long after its last renewal that succeeded a task still starts writes: three renewals.
pub(crate) const CLAIM_FENCE: std::time::Duration = std::time::Duration::from_secs(15);

/// How long an item waits for another job's write of the same listing before it looks again.
const CLAIM_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// A source read kept with an item whose write did not happen yet: the next run writes from
/// it instead of reading again (a deferred write no longer costs a second read).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SourceRead {
    item: Item,
    /// Why the read was served stale, when it was (the outcome stays flagged).
    stale: Option<String>,
}

/// One item of a chunk, with what its claim found.
struct ItemRef<'a> {
    key: &'a str,
    claim: &'a Claim,
    unsure: &'a Mutex<HashSet<String>>,
    lease: &'a claim_lease::ClaimLease,
}

fn mark_unsure(unsure: &Mutex<HashSet<String>>, key: &str) {
    if let Ok(mut u) = unsure.lock() {
        u.insert(key.to_string());
    }
}

async fn list_one(
    runner: &HandlerCtx,
    target: Target<'_>,
    item_ref: ItemRef<'_>,
    useful: &Useful,
    kept: Option<SourceRead>,
    stop: &Stop,
) -> ItemRun {
    let ItemRef {
        key,
        claim,
        unsure,
        lease,
    } = item_ref;
    let ListingRoute { from, to, .. } = target.route;
    let read_now = kept.is_none();
    let SourceRead { item, stale } = match kept {
        Some(read) => read,
        None => match read_source(runner, target, key, stop).await {
            Ok(read) => read,
            Err(run) => return run,
        },
    };
    let carry = || {
        read_now
            .then(|| {
                serde_json::to_string(&SourceRead {
                    item: item.clone(),
                    stale: stale.clone(),
                })
                .ok()
            })
            .flatten()
    };
    if let Some(missing) = missing_field(&item) {
        // A source item without a title or price would create a broken listing.
        return ItemRun::Outcome(ItemOutcome::failed(
            key,
            ErrorClass::Unknown,
            format!("{from} item {key} has an empty `{missing}`"),
        ));
    }
    let Some(map) = target.map else {
        return ItemRun::Outcome(ItemOutcome::skipped(
            key,
            "the job carries no listing map (enqueued by an older version): enqueue it again with --map".to_string(),
        ));
    };
    let code = seller_code(target, key);
    let mapping = mapping::Mapping {
        map,
        shop: target.shop,
        target: to,
    };
    let new_item = match mapping.map(&item, &code) {
        Ok(new_item) => new_item,
        // Nothing the target would take: no claim, no write.
        Err(reason) => return ItemRun::Outcome(ItemOutcome::skipped(key, reason)),
    };
    let useful_write = || {
        // Both calls went into this outcome: useful means used.
        useful.add(from, Api::ItemGet, 1);
        useful.add(to, Api::ItemAdd, 1);
    };
    let made = |item_id: String| match &stale {
        Some(reason) => ItemRun::Outcome(ItemOutcome::stale(key, Some(item_id), reason.clone())),
        None => ItemRun::Outcome(ItemOutcome::done(key, Some(item_id))),
    };
    match claim {
        Claim::Listed(l) => return listed_already(target, key, l),
        Claim::Held { .. } => return ItemRun::Later(CLAIM_WAIT).carrying(carry),
        Claim::Unsure { seller_code } => {
            match find_by_code(runner, target, key, seller_code, stop).await {
                Ok(Some(item_id)) => {
                    useful.add(to, Api::ItemFind, 1);
                    useful_write();
                    return made(item_id);
                }
                // No product carries the code: the claim is as good as fresh.
                Ok(None) => {
                    if let Ok(mut u) = unsure.lock() {
                        u.remove(key);
                    }
                }
                Err(run) => return run.carrying(carry),
            }
        }
        Claim::Fresh => {}
    }
    // The claims may be another holder's soon (not renewed for a while: the ledger stalls):
    // no write starts; the item goes back, its claim released.
    if !lease.holds(crate::clock::monotonic_now()) {
        return ItemRun::Later(std::time::Duration::ZERO).carrying(carry);
    }
    let write_ctx = runner.shop_call_context_until(stop);
    let request = ApiRequest::ItemAdd {
        item: Box::new(new_item),
    };
    match runner.gateway.call(to, request, &write_ctx).await {
        Ok(reply) => match reply.response {
            ApiResponse::ItemAdded { item_id } => {
                useful_write();
                made(item_id)
            }
            other => ItemRun::Outcome(ItemOutcome::failed(
                key,
                ErrorClass::Unknown,
                format!("{to} item_add answered with {other:?}"),
            )),
        },
        Err(e) => {
            if !e.write_made_nothing() {
                // Its claim stays when the outcome is recorded: the next attempt looks the
                // code up first. (A write that surely made nothing has its claim released.)
                mark_unsure(unsure, key);
            }
            // Not now, or a transient failure: keep the read for the next run.
            ItemRun::from_link_error(key, &e).carrying(carry)
        }
    }
}

/// The outcome of an item the ledger shows listed: done when this job listed it (its outcome
/// was not recorded), else skipped.
fn listed_already(target: Target<'_>, key: &str, l: &Listed) -> ItemRun {
    if l.job_id == target.job_id {
        return ItemRun::Outcome(ItemOutcome::done(key, Some(l.target_item.clone())));
    }
    ItemRun::Outcome(ItemOutcome::skipped(
        key,
        format!(
            "already listed on {} shop {} as item {} (job {})",
            target.route.to, target.route.shop, l.target_item, l.job_id
        ),
    ))
}

/// Look `code` up on the target shop: the item an earlier write made, if it made one.
async fn find_by_code(
    runner: &HandlerCtx,
    target: Target<'_>,
    key: &str,
    code: &str,
    stop: &Stop,
) -> Result<Option<String>, ItemRun> {
    let to = target.route.to;
    let ctx = runner.shop_call_context_until(stop);
    let request = ApiRequest::ItemFind {
        seller_code: code.to_string(),
    };
    match runner.gateway.call(to, request, &ctx).await {
        Ok(reply) => match reply.response {
            ApiResponse::Found { item_ids } => {
                if item_ids.len() > 1 {
                    tracing::warn!(
                        item = key,
                        code,
                        found = item_ids.len(),
                        "more than one target item carries this listing's code"
                    );
                }
                Ok(item_ids.into_iter().next())
            }
            other => Err(ItemRun::Outcome(ItemOutcome::failed(
                key,
                ErrorClass::Unknown,
                format!("{to} item_find answered with {other:?}"),
            ))),
        },
        Err(e) => Err(ItemRun::from_link_error(key, &e)),
    }
}

/// `item_get` on the source: the item, and why it is stale when it was served stale.
async fn read_source(
    runner: &HandlerCtx,
    target: Target<'_>,
    key: &str,
    stop: &Stop,
) -> Result<SourceRead, ItemRun> {
    let from = target.route.from;
    let read_ctx = runner.call_context_until(stop);
    let source = runner
        .gateway
        .call(
            from,
            ApiRequest::ItemGet {
                item_id: key.to_string(),
            },
            &read_ctx,
        )
        .await;
    match source {
        Ok(reply) => match reply.response {
            // Degraded input never feeds a write unless the job allows it, and only as old
            // as it allows: the item is retried (its rounds) for a fresh read instead.
            ApiResponse::Item(_)
                if reply.stale.as_ref().is_some_and(|info| {
                    target
                        .allow_stale_s
                        .is_none_or(|max| info.age.as_secs() > max)
                }) =>
            {
                let age = reply.stale.as_ref().map_or(0, |i| i.age.as_secs());
                Err(ItemRun::Again(ItemOutcome::failed(
                    key,
                    ErrorClass::Retry,
                    format!(
                        "{from} item_get could only be served from the stale cache ({age} s old); no write is made from degraded input (enqueue with --allow-stale-source to allow it)"
                    ),
                )))
            }
            ApiResponse::Item(item) => Ok(SourceRead {
                item,
                stale: reply.stale.map(|info| {
                    format!(
                        "source read stale ({} s old): {}",
                        info.age.as_secs(),
                        info.reason
                    )
                }),
            }),
            other => Err(ItemRun::Outcome(ItemOutcome::failed(
                key,
                ErrorClass::Unknown,
                format!("{from} item_get answered with {other:?}"),
            ))),
        },
        Err(e) => Err(ItemRun::from_link_error(key, &e)),
    }
}

fn missing_field(item: &Item) -> Option<&'static str> {
    if item.title.trim().is_empty() {
        Some("title")
    } else if item.price.trim().is_empty() {
        Some("price")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(job_id: i64, from: Platform, relist: bool) -> Target<'static> {
        static SHOP: std::sync::OnceLock<ShopListing> = std::sync::OnceLock::new();
        Target {
            job_id,
            route: ListingRoute {
                from,
                to: Platform::Taobao,
                shop: "main",
            },
            relist,
            allow_stale_s: None,
            map: None,
            shop: SHOP.get_or_init(ShopListing::default),
        }
    }

    #[test]
    fn the_seller_code_is_the_listing_not_the_job() {
        // Two jobs listing the same item send the same code.
        assert_eq!(
            seller_code(target(1, Platform::Alibaba, false), "42"),
            seller_code(target(2, Platform::Alibaba, false), "42")
        );
        assert_eq!(
            seller_code(target(1, Platform::Alibaba, false), "42"),
            "SF1688-42"
        );
        // Another source, another item: another listing.
        assert_ne!(
            seller_code(target(1, Platform::Alibaba, false), "42"),
            seller_code(target(1, Platform::Jd, false), "42")
        );
        assert_ne!(
            seller_code(target(1, Platform::Alibaba, false), "42"),
            seller_code(target(1, Platform::Alibaba, false), "43")
        );
        // A relisting job makes its own products.
        assert_ne!(
            seller_code(target(3, Platform::Alibaba, true), "42"),
            seller_code(target(4, Platform::Alibaba, true), "42")
        );
        // Within TOP's 64 bytes for the longest ids.
        assert!(
            seller_code(target(i64::MAX, Platform::Alibaba, true), &"9".repeat(20)).len() <= 64
        );
    }
}
