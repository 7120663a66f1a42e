//! Listing: `item_get` on the source platform (a read: cacheable, may degrade to stale),
//! then `item_add` on the target shop (a write whose idempotency key is the listing's identity:
//! source platform and item, target platform and shop). An item the ledger shows already
//! listed on that shop is skipped without a call (docs/design.md, "Listed once").

use super::item::{HandlerCtx, ItemRun, Stop, Useful};
use crate::platform::model::{ApiRequest, ApiResponse, Item};
use crate::platform::{Api, ErrorClass};
use crate::store::{ItemOutcome, Listed, ListingRoute};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The pending items of one listing task, and what earlier runs kept for them.
pub(crate) struct Chunk<'a> {
    pub(crate) target: Target<'a>,
    pub(crate) keys: &'a [String],
    pub(crate) carried: &'a HashMap<String, String>,
    /// Of `keys`, those the ledger shows already listed on the target shop (with the target
    /// item each became): skipped unless the job relists; done if this job listed it (a run
    /// that ended between the write and its outcome's record).
    pub(crate) listed: &'a HashMap<String, Listed>,
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
}

/// Run the pending items of one chunk, [`super::item::ITEM_PARALLELISM`] at a time; yields
/// each item's outcome as it finishes. An item starts only with a permit of `unrecorded`
/// (the runner returns permits as it records outcomes); a closed semaphore ends the chunk
/// without calling (the outcomes yielded then are discarded). Once `stop` says so, items
/// not started are handed back without calling, and items still calling when it expires
/// are abandoned (their write, if it went out, repeats with the same idempotency key).
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
        listed,
    } = chunk;
    futures::stream::iter(keys.iter().cloned())
        .map(move |key| async move {
            let handed_back = ItemRun::Later(std::time::Duration::ZERO);
            let run = match unrecorded.acquire().await {
                Ok(_) if stop.refuses_new_items() => handed_back,
                Ok(permit) => {
                    permit.forget();
                    match listed.get(&key).filter(|_| !target.relist) {
                        // This job made it, and its outcome was not recorded (the worker was
                        // killed, or the task's lease lost, between the two): done, no call.
                        Some(l) if l.job_id == target.job_id => {
                            ItemRun::Outcome(ItemOutcome::done(&key, Some(l.target_item.clone())))
                        }
                        Some(l) => ItemRun::Outcome(ItemOutcome::skipped(
                            &key,
                            format!(
                                "already listed on {} shop {} as item {} (job {})",
                                target.route.to, target.route.shop, l.target_item, l.job_id
                            ),
                        )),
                        None => {
                            let kept = carried.get(&key).and_then(|c| serde_json::from_str(c).ok());
                            stop.cut_short(list_one(runner, target, &key, useful, kept, stop))
                                .await
                                .unwrap_or(handed_back)
                        }
                    }
                }
                Err(_) => handed_back,
            };
            (key, run)
        })
        .buffer_unordered(super::item::ITEM_PARALLELISM)
}

/// The idempotency key of listing source `item` to the target shop: the listing's identity,
/// not the job's, so the platform answers a second job's write (or a second producer's) with
/// the product the first one made. A relisting job makes its own.
pub(crate) fn out_request_id(target: Target<'_>, item: &str) -> String {
    let ListingRoute { from, to, shop } = target.route;
    if target.relist {
        format!("R{}:{from}:{item}:{to}:{shop}", target.job_id)
    } else {
        format!("L:{from}:{item}:{to}:{shop}")
    }
}

/// A source read kept with an item whose write did not happen yet: the next run writes from
/// it instead of reading again (a deferred write no longer costs a second read).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SourceRead {
    item: Item,
    /// Why the read was served stale, when it was (the outcome stays flagged).
    stale: Option<String>,
}

async fn list_one(
    runner: &HandlerCtx,
    target: Target<'_>,
    key: &str,
    useful: &Useful,
    kept: Option<SourceRead>,
    stop: &Stop,
) -> ItemRun {
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
    let idem = out_request_id(target, key);
    let write_ctx = runner
        .shop_call_context_until(stop)
        .with_idempotency_key(idem.clone());
    let request = ApiRequest::ItemAdd {
        title: item.title.clone(),
        price: item.price.clone(),
        quantity: item.quantity,
        out_request_id: idem,
    };
    match runner.gateway.call(to, request, &write_ctx).await {
        Ok(reply) => match reply.response {
            ApiResponse::ItemAdded { item_id } => {
                // Both calls went into this outcome: useful means used.
                useful.add(from, Api::ItemGet, 1);
                useful.add(to, Api::ItemAdd, 1);
                match stale {
                    Some(reason) => {
                        ItemRun::Outcome(ItemOutcome::stale(key, Some(item_id), reason))
                    }
                    None => ItemRun::Outcome(ItemOutcome::done(key, Some(item_id))),
                }
            }
            other => ItemRun::Outcome(ItemOutcome::failed(
                key,
                ErrorClass::Unknown,
                format!("{to} item_add answered with {other:?}"),
            )),
        },
        // Not now, or a transient failure: keep the read for the next run.
        Err(e) => ItemRun::from_link_error(key, &e).carrying(carry),
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
    use crate::platform::Platform;

    fn target(job_id: i64, shop: &str, relist: bool) -> Target<'_> {
        Target {
            job_id,
            route: ListingRoute {
                from: Platform::Alibaba,
                to: Platform::Taobao,
                shop,
            },
            relist,
            allow_stale_s: None,
        }
    }

    #[test]
    fn the_idempotency_key_is_the_listing_not_the_job() {
        // Two jobs listing the same item to the same shop send the same key.
        assert_eq!(
            out_request_id(target(1, "main", false), "42"),
            out_request_id(target(2, "main", false), "42")
        );
        // Another shop, another item: another listing.
        assert_ne!(
            out_request_id(target(1, "main", false), "42"),
            out_request_id(target(1, "outlet", false), "42")
        );
        assert_ne!(
            out_request_id(target(1, "main", false), "42"),
            out_request_id(target(1, "main", false), "43")
        );
        // A relisting job makes its own products.
        assert_ne!(
            out_request_id(target(3, "main", true), "42"),
            out_request_id(target(1, "main", false), "42")
        );
        assert_ne!(
            out_request_id(target(3, "main", true), "42"),
            out_request_id(target(4, "main", true), "42")
        );
    }
}
