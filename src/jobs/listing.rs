//! Listing: `item_get` on the source platform (a read: cacheable, may degrade to stale),
//! then `item_add` on the target (a write with idempotency key `out_request_id = job:item`).

use super::runner::{ItemRun, JobRunner, Stop, Useful};
use crate::platform::model::{ApiRequest, ApiResponse, Item};
use crate::platform::{Api, ErrorClass, Platform};
use crate::store::ItemOutcome;
use futures::StreamExt;

/// Run the pending items of one chunk, [`super::runner::ITEM_PARALLELISM`] at a time; yields
/// each item's outcome as it finishes. An item starts only with a permit of `unrecorded`
/// (the runner returns permits as it records outcomes); a closed semaphore ends the chunk
/// without calling (the outcomes yielded then are discarded). Once `stop` says so, items
/// not started are handed back without calling, and items still calling when it expires
/// are abandoned (their write, if it went out, repeats with the same idempotency key).
pub(crate) fn stream_chunk<'a>(
    runner: &'a JobRunner,
    job_id: i64,
    (from, to): (Platform, Platform),
    keys: &'a [String],
    useful: &'a Useful,
    unrecorded: &'a tokio::sync::Semaphore,
    stop: &'a Stop,
) -> impl futures::Stream<Item = (String, ItemRun)> + 'a {
    futures::stream::iter(keys.iter().cloned())
        .map(move |key| async move {
            let handed_back = ItemRun::Later(std::time::Duration::ZERO);
            let run = match unrecorded.acquire().await {
                Ok(_) if stop.refuses_new_items() => handed_back,
                Ok(permit) => {
                    permit.forget();
                    stop.cut_short(list_one(runner, job_id, from, to, &key, useful))
                        .await
                        .unwrap_or(handed_back)
                }
                Err(_) => handed_back,
            };
            (key, run)
        })
        .buffer_unordered(super::runner::ITEM_PARALLELISM)
}

/// The idempotency key of copying `item` in `job_id`: repeats are answered with the first
/// result by the platform, so a re-run never lists an item twice.
pub fn out_request_id(job_id: i64, item: &str) -> String {
    format!("{job_id}:{item}")
}

async fn list_one(
    runner: &JobRunner,
    job_id: i64,
    from: Platform,
    to: Platform,
    key: &str,
    useful: &Useful,
) -> ItemRun {
    let read_ctx = runner.call_context();
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
    let (item, stale) = match source {
        Ok(reply) => match reply.response {
            ApiResponse::Item(item) => (item, reply.stale),
            other => {
                return ItemRun::Outcome(ItemOutcome::failed(
                    key,
                    ErrorClass::Unknown,
                    format!("{from} item_get answered with {other:?}"),
                ))
            }
        },
        Err(e) => return ItemRun::from_link_error(key, &e),
    };
    if let Some(missing) = missing_field(&item) {
        // A source item without a title or price would create a broken listing.
        return ItemRun::Outcome(ItemOutcome::failed(
            key,
            ErrorClass::Unknown,
            format!("{from} item {key} has an empty `{missing}`"),
        ));
    }
    useful.add(from, Api::ItemGet, 1);
    let idem = out_request_id(job_id, key);
    let write_ctx = runner.call_context().with_idempotency_key(idem.clone());
    let request = ApiRequest::ItemAdd {
        title: item.title,
        price: item.price,
        quantity: item.quantity,
        out_request_id: idem,
    };
    match runner.gateway.call(to, request, &write_ctx).await {
        Ok(reply) => match reply.response {
            ApiResponse::ItemAdded { item_id } => {
                useful.add(to, Api::ItemAdd, 1);
                match stale {
                    Some(info) => ItemRun::Outcome(ItemOutcome::stale(
                        key,
                        Some(item_id),
                        format!(
                            "source read stale ({} s old): {}",
                            info.age.as_secs(),
                            info.reason
                        ),
                    )),
                    None => ItemRun::Outcome(ItemOutcome::done(key, Some(item_id))),
                }
            }
            other => ItemRun::Outcome(ItemOutcome::failed(
                key,
                ErrorClass::Unknown,
                format!("{to} item_add answered with {other:?}"),
            )),
        },
        Err(e) => ItemRun::from_link_error(key, &e),
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
