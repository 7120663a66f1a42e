//! Logistics: one `logistics_trace` call per shipped order that is not signed and was not
//! queried within the minimum interval. Events are stored with INSERT OR IGNORE, so only new
//! steps count as useful data; a signed parcel is never queried again. An order is marked
//! queried in the same transaction that stores its trace, so a trace that failed to store is
//! queried again by the next run instead of being skipped as "queried recently".
//!
//! Each platform's trace is asked by its own id (docs/wire-formats.md): TOP's by the order
//! id, JD's by the carrier's waybill number that the order list gave, 1688's by the parcel's
//! `logisticsId`, which one logistics info call learns and the ledger keeps.

use super::item::{ledger_write, HandlerCtx, ItemRun, Stop, Useful};
use crate::platform::model::{ApiRequest, ApiResponse, Parcel};
use crate::platform::wire::{trace_key, TraceKey};
use crate::platform::{Api, ErrorClass, Platform};
use crate::store::{ItemOutcome, LogisticsEvent, StoreError};
use futures::StreamExt;
use std::time::Duration;

pub(crate) async fn run_chunk(
    runner: &HandlerCtx,
    platform: Platform,
    keys: &[String],
    useful: &Useful,
    stop: &Stop,
) -> Result<Vec<(String, ItemRun)>, StoreError> {
    let min_interval = Duration::from_secs(runner.cfg.jobs.logistics_min_interval_s);
    let mut to_call = Vec::with_capacity(keys.len());
    let mut out = Vec::with_capacity(keys.len());
    // Cut before calling: the ledger may have learned since the enqueue that an order is
    // signed or was just queried (overlapping jobs, a re-delivered task).
    for key in keys {
        let order = runner.store.get_order(platform, key).await?;
        let skip = match &order {
            Some(o) if o.signed => Some("signed"),
            // Unshipped or already received (e.g. TRADE_FINISHED): no parcel to follow. The
            // candidates query filters these, but a job's keys may be older than the ledger.
            Some(o) if !o.order.shipped => Some("not shipped or received"),
            // "Recently" on the database's clock, which stamped `last_queried_at` (hosts'
            // clocks disagree).
            Some(o)
                if o.last_queried_at.is_some()
                    && runner
                        .store
                        .queried_within(platform, key, min_interval)
                        .await? =>
            {
                Some("queried recently")
            }
            // A trace asked by the waybill the order list gives: none before the list gave one
            // (and none for an order the ledger does not hold).
            _ if trace_key(platform) == TraceKey::Waybill
                && order.as_ref().is_none_or(|o| o.order.tracking.is_none()) =>
            {
                Some("no waybill yet (the order list gave none)")
            }
            _ => None,
        };
        match skip {
            Some(reason) => out.push((
                key.clone(),
                ItemRun::Outcome(ItemOutcome::skipped(key, reason)),
            )),
            None => to_call.push((key.clone(), order.and_then(|o| o.order.tracking))),
        }
    }
    // Each trace marks its order queried when (and only when) it is stored: see trace_one.
    let traced: Vec<(String, ItemRun)> = futures::stream::iter(to_call)
        .map(|(key, tracking)| async move {
            let run = trace_one(runner, platform, &key, tracking, useful, stop).await;
            (key, run)
        })
        .buffer_unordered(super::item::ITEM_PARALLELISM)
        .collect()
        .await;
    out.extend(traced);
    Ok(out)
}

/// 1688: the order's first parcel, from its logistics info call (a call like any other,
/// through its gate), its `logisticsId` kept in the ledger so later runs trace it at once.
/// `Ok(None)`: the order has no parcel yet.
async fn learn_parcel(
    runner: &HandlerCtx,
    platform: Platform,
    key: &str,
    stop: &Stop,
) -> Result<Option<Parcel>, ItemRun> {
    let ctx = runner.shop_call_context_until(stop);
    let req = ApiRequest::LogisticsInfo {
        order_id: key.to_string(),
    };
    let reply = match runner.gateway.call(platform, req, &ctx).await {
        Ok(r) => r,
        Err(e) => return Err(ItemRun::from_link_error(key, &e)),
    };
    let ApiResponse::Parcels { parcels } = reply.response else {
        return Err(ItemRun::Outcome(ItemOutcome::failed(
            key,
            ErrorClass::Unknown,
            "logistics_info answered with something else",
        )));
    };
    let Some(parcel) = parcels.into_iter().next() else {
        return Ok(None);
    };
    let kept = ledger_write("set_order_tracking", || {
        runner
            .store
            .set_order_tracking(platform, key, &parcel.tracking)
    })
    .await;
    if let Err(e) = kept {
        return Err(ItemRun::Outcome(ItemOutcome::attempted(
            key,
            ErrorClass::Retry,
            e.to_string(),
        )));
    }
    Ok(Some(parcel))
}

async fn trace_one(
    runner: &HandlerCtx,
    platform: Platform,
    key: &str,
    tracking: Option<String>,
    useful: &Useful,
    stop: &Stop,
) -> ItemRun {
    // 1688 without the parcel's id: learn it first; its state may already say signed.
    let mut signed_by_parcel = false;
    let tracking = match (trace_key(platform), tracking) {
        (TraceKey::ParcelId, None) => match learn_parcel(runner, platform, key, stop).await {
            Ok(Some(parcel)) => {
                signed_by_parcel = parcel.signed;
                Some(parcel.tracking)
            }
            Ok(None) => {
                return ItemRun::Outcome(ItemOutcome::skipped(key, "no parcel yet"));
            }
            Err(run) => return run,
        },
        (_, tracking) => tracking,
    };
    // A paused or cancelled job's trace waiting at its gate gives up.
    let ctx = runner.shop_call_context_until(stop);
    let reply = match runner
        .gateway
        .call(
            platform,
            ApiRequest::LogisticsTrace {
                order_id: key.to_string(),
                tracking,
            },
            &ctx,
        )
        .await
    {
        Ok(r) => r,
        Err(e) => return ItemRun::from_link_error(key, &e),
    };
    let ApiResponse::Trace(trace) = reply.response else {
        return ItemRun::Outcome(ItemOutcome::failed(
            key,
            ErrorClass::Unknown,
            "logistics_trace answered with something else",
        ));
    };
    let events: Vec<LogisticsEvent> = trace
        .events
        .iter()
        .map(|e| LogisticsEvent {
            event_time: e.time.clone(),
            status: e.status.clone(),
            description: e.description.clone(),
        })
        .collect();
    let signed = trace.signed || signed_by_parcel;
    // Events, last status and the "queried" mark in one transaction: a failure leaves the
    // order as it was (un-marked), so the item's re-run queries it again.
    let stored = ledger_write("record_trace", || {
        runner.store.record_trace(platform, key, &events, signed)
    })
    .await;
    match stored {
        Ok(new) => {
            if new > 0 {
                useful.add(platform, Api::LogisticsTrace, 1);
            }
            let result = format!("new_events={new} signed={signed}");
            match reply.stale {
                Some(info) => ItemRun::Outcome(ItemOutcome::stale(key, Some(result), info.reason)),
                None => ItemRun::Outcome(ItemOutcome::done(key, Some(result))),
            }
        }
        Err(e) => ItemRun::Outcome(ItemOutcome::attempted(
            key,
            ErrorClass::Retry,
            e.to_string(),
        )),
    }
}
