//! Order sync: the window split into platform-sized slices (one item each); each slice walks
//! `order_list` pages until `has_next` is false and upserts only orders whose `modified`
//! advanced. A page that changes nothing is a call without useful data.

use super::item::{ledger_write, HandlerCtx, ItemRun, Stop, Useful};
use crate::platform::model::{ApiRequest, ApiResponse, Order as PlatformOrder};
use crate::platform::{Api, ErrorClass, Platform};
use crate::store::{ItemOutcome, Order};
use chrono::{DateTime, Duration as ChronoDuration, Utc};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};

/// Pages walked per slice at most: a guard against a platform that never says "no more".
const MAX_PAGES_PER_SLICE: u32 = 10_000;

/// The item key of a slice: `start/end` in RFC 3339 UTC.
pub(crate) fn slice_key(start: DateTime<Utc>, end: DateTime<Utc>) -> String {
    format!("{}/{}", start.to_rfc3339(), end.to_rfc3339())
}

/// Parse a slice key back into its window.
pub(crate) fn parse_slice_key(key: &str) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    let (a, b) = key.split_once('/')?;
    let start = DateTime::parse_from_rfc3339(a).ok()?.with_timezone(&Utc);
    let end = DateTime::parse_from_rfc3339(b).ok()?.with_timezone(&Utc);
    (start < end).then_some((start, end))
}

/// Split `[since, until)` into slices no longer than `slice` (the platform's max window).
pub(crate) fn slices(
    since: DateTime<Utc>,
    until: DateTime<Utc>,
    slice: std::time::Duration,
) -> Vec<String> {
    let step = ChronoDuration::from_std(slice).unwrap_or(ChronoDuration::days(1));
    let step = step.max(ChronoDuration::seconds(1));
    let mut out = Vec::new();
    let mut start = since;
    while start < until {
        let end = (start + step).min(until);
        out.push(slice_key(start, end));
        start = end;
    }
    out
}

/// Whether a platform order status means "shipped, not yet received": a logistics candidate.
/// Finished orders (received) are never candidates, which is what cuts logistics calls.
pub(crate) fn is_shipped(platform: Platform, status: &str) -> bool {
    match platform {
        Platform::Taobao => matches!(status, "WAIT_BUYER_CONFIRM_GOODS" | "SELLER_CONSIGNED_PART"),
        Platform::Jd => matches!(status, "WAIT_GOODS_RECEIVE_CONFIRM"),
        Platform::Alibaba => matches!(status, "waitbuyerreceive" | "waitlogisticstakein"),
    }
}

/// Decimal amount text ("99.00", "-5.50", "7") to fen; None when it is not a plain decimal
/// of at most two places (more places only as trailing zeros: "12.300"). The sign applies to
/// the whole amount: "-5.50" is -550 fen, "-0.50" is -50.
fn amount_cents(text: &str) -> Option<i64> {
    let text = text.trim();
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let (whole, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !all_digits(whole) || !all_digits(frac) {
        return None;
    }
    let (cents, rest) = frac.split_at(frac.len().min(2));
    if rest.bytes().any(|b| b != b'0') {
        return None;
    }
    let cents: i64 = format!("{cents:0<2}").parse().ok()?;
    let fen = whole
        .parse::<i64>()
        .ok()?
        .checked_mul(100)?
        .checked_add(cents)?;
    Some(if negative { -fen } else { fen })
}

/// The ledger's row of one order; `Err(amount)` when its amount cannot be read (the order is
/// not stored with a made-up amount).
fn to_ledger(platform: Platform, shop: &str, o: &PlatformOrder) -> Result<Order, String> {
    Ok(Order {
        platform,
        order_id: o.order_id.clone(),
        shop: shop.to_string(),
        status: o.status.clone(),
        shipped: is_shipped(platform, &o.status),
        modified: o.modified,
        amount_cents: amount_cents(&o.amount).ok_or_else(|| o.amount.clone())?,
    })
}

#[allow(clippy::too_many_arguments)]
pub(crate) async fn run_chunk(
    runner: &HandlerCtx,
    job_id: i64,
    platform: Platform,
    shop: &str,
    keys: &[String],
    useful: &Useful,
    carried: &HashMap<String, String>,
    stop: &Stop,
) -> Vec<(String, ItemRun)> {
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        // A stopping worker or a held job starts no new slice (its place, if any, is kept).
        if stop.refuses_new_items() {
            out.push((key.clone(), ItemRun::Later(std::time::Duration::ZERO)));
            continue;
        }
        let from = carried
            .get(key)
            .and_then(|c| serde_json::from_str::<SliceProgress>(c).ok())
            .unwrap_or_default();
        let slice = Slice { job_id, key };
        let run = sync_slice(runner, platform, shop, &slice, useful, from, stop).await;
        out.push((key.clone(), run));
    }
    out
}

/// How far a slice's page walk got: a deferred walk resumes at `next_page` instead of
/// reading (and paying for) the pages already stored.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
struct SliceProgress {
    next_page: u32,
    pages: u32,
    seen: u64,
    changed: u64,
}

/// The slice an order walk covers: its job's item.
struct Slice<'a> {
    job_id: i64,
    key: &'a str,
}

impl Slice<'_> {
    /// Keep the walk's place in the ledger after a page is stored: a walk cut off by a lost
    /// lease or a killed worker (nothing returned, nothing carried) resumes here too, not at
    /// page 1. A failed write loses only the shortcut: the walk goes on.
    async fn checkpoint(&self, runner: &HandlerCtx, progress: SliceProgress) {
        let Ok(json) = serde_json::to_string(&progress) else {
            return;
        };
        let carry = [(self.key.to_string(), json)];
        if let Err(e) = ledger_write("keep_carry", || {
            runner.store.keep_carry(self.job_id, &carry)
        })
        .await
        {
            tracing::warn!(slice = self.key, error = %e, "the order walk's place was not kept");
        }
    }
}

async fn sync_slice(
    runner: &HandlerCtx,
    platform: Platform,
    shop: &str,
    slice: &Slice<'_>,
    useful: &Useful,
    from: SliceProgress,
    stop: &Stop,
) -> ItemRun {
    let key = slice.key;
    let Some((start, end)) = parse_slice_key(key) else {
        return ItemRun::Outcome(ItemOutcome::failed(
            key,
            ErrorClass::Fatal,
            format!("bad slice key `{key}`"),
        ));
    };
    let page_size = runner.cfg.jobs.order_page_size.clamp(1, 100);
    let (mut pages, mut seen, mut changed) = (from.pages, from.seen, from.changed);
    // Orders of this walk's pages, to notice a platform that serves the same page again
    // while saying more follow (it would burn the page cap).
    let mut walked: HashSet<String> = HashSet::new();
    // Orders whose amount could not be read: not stored, and the slice does not end done.
    let mut unreadable: Vec<(String, String)> = Vec::new();
    let mut more = true;
    let first_page = from.next_page.max(1);
    for page in first_page..=MAX_PAGES_PER_SLICE {
        // A stopping worker (SIGTERM, a scale-in) or a held job ends the walk at a page
        // boundary, keeping its place: the next run resumes at this page instead of page 1.
        if page > first_page && stop.refuses_new_items() {
            let progress = SliceProgress {
                next_page: page,
                pages,
                seen,
                changed,
            };
            return ItemRun::Later(std::time::Duration::ZERO)
                .carrying(|| serde_json::to_string(&progress).ok());
        }
        // A paused or cancelled job's page waiting at its gate gives up; the walk keeps its
        // place (the pages stored so far are carried).
        let ctx = runner.shop_call_context_until(stop);
        let req = ApiRequest::OrderList {
            start,
            end,
            page,
            page_size,
        };
        let reply = match runner.gateway.call(platform, req, &ctx).await {
            Ok(r) => r,
            // Pages already stored are not read again: the re-run starts at this one.
            Err(e) => {
                let progress = SliceProgress {
                    next_page: page,
                    pages,
                    seen,
                    changed,
                };
                return ItemRun::from_link_error(key, &e).carrying(|| {
                    (page > 1)
                        .then(|| serde_json::to_string(&progress).ok())
                        .flatten()
                });
            }
        };
        let ApiResponse::OrderPage(p) = reply.response else {
            return ItemRun::Outcome(ItemOutcome::failed(
                key,
                ErrorClass::Unknown,
                "order_list answered with something else",
            ));
        };
        pages += 1;
        seen += p.orders.len() as u64;
        more = p.has_next && !p.orders.is_empty();
        let fresh = p
            .orders
            .iter()
            .filter(|o| walked.insert(o.order_id.clone()))
            .count();
        if more && fresh == 0 && page > first_page {
            return ItemRun::Outcome(ItemOutcome::failed(
                key,
                ErrorClass::Unknown,
                format!(
                    "order_list page {page} repeated the orders of the pages before it and still said more follow; the walk stopped after {pages} pages ({seen} orders, {changed} changed)"
                ),
            ));
        }
        let mut batch: Vec<Order> = Vec::with_capacity(p.orders.len());
        for o in &p.orders {
            match to_ledger(platform, shop, o) {
                Ok(order) => batch.push(order),
                Err(amount) => unreadable.push((o.order_id.clone(), amount)),
            }
        }
        let upsert = ledger_write("upsert_orders", || {
            runner.store.upsert_orders_if_advanced(&batch)
        })
        .await;
        let n = match upsert {
            Ok(n) => n,
            Err(e) => {
                return ItemRun::Outcome(ItemOutcome::attempted(
                    key,
                    ErrorClass::Retry,
                    e.to_string(),
                ))
            }
        };
        changed += n;
        if n > 0 {
            useful.add(platform, Api::OrderList, 1);
        }
        if !more {
            break;
        }
        slice
            .checkpoint(
                runner,
                SliceProgress {
                    next_page: page + 1,
                    pages,
                    seen,
                    changed,
                },
            )
            .await;
    }
    let result = format!("pages={pages} orders={seen} changed={changed}");
    if more {
        return ItemRun::Outcome(ItemOutcome::failed(
            key,
            ErrorClass::Unknown,
            format!(
                "stopped at the cap of {MAX_PAGES_PER_SLICE} pages with more to come ({result}): enqueue the window with shorter slices (jobs.order_slice_s)"
            ),
        ));
    }
    if let Some((order, amount)) = unreadable.first() {
        return ItemRun::Outcome(ItemOutcome::failed(
            key,
            ErrorClass::Unknown,
            format!(
                "{} order(s) not stored: their amount is not a decimal (first: order {order}, amount `{}`); the others are stored ({result})",
                unreadable.len(),
                amount.chars().take(40).collect::<String>()
            ),
        ));
    }
    if changed == 0 {
        ItemRun::Outcome(ItemOutcome::skipped(key, format!("unchanged ({result})")))
    } else {
        ItemRun::Outcome(ItemOutcome::done(key, Some(result)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_cover_the_window_without_gaps() {
        let since: DateTime<Utc> = "2026-11-01T00:00:00Z".parse().unwrap();
        let until: DateTime<Utc> = "2026-11-03T12:00:00Z".parse().unwrap();
        let keys = slices(since, until, std::time::Duration::from_secs(86_400));
        assert_eq!(keys.len(), 3);
        let windows: Vec<_> = keys.iter().map(|k| parse_slice_key(k).unwrap()).collect();
        assert_eq!(windows[0].0, since);
        assert_eq!(windows[2].1, until);
        assert!(windows.windows(2).all(|w| w[0].1 == w[1].0));
    }

    #[test]
    fn amounts_parse_to_cents() {
        assert_eq!(amount_cents("99.00"), Some(9900));
        assert_eq!(amount_cents("12.5"), Some(1250));
        assert_eq!(amount_cents("7"), Some(700));
        assert_eq!(amount_cents("x"), None);
        // The sign is the whole amount's, not the integer part's.
        assert_eq!(amount_cents("-5.50"), Some(-550));
        assert_eq!(amount_cents("-0.50"), Some(-50));
        assert_eq!(amount_cents("+3.1"), Some(310));
        assert_eq!(amount_cents(" 12.300 "), Some(1230));
        // Never a guess: fen beyond two places, stray signs, empty parts, text.
        assert_eq!(amount_cents("12.345"), None);
        assert_eq!(amount_cents("5.-5"), None);
        assert_eq!(amount_cents("--5"), None);
        assert_eq!(amount_cents(".5"), None);
        assert_eq!(amount_cents(""), None);
        assert_eq!(amount_cents("1e3"), None);
    }

    #[test]
    fn shipped_statuses_per_platform() {
        assert!(is_shipped(Platform::Taobao, "WAIT_BUYER_CONFIRM_GOODS"));
        assert!(!is_shipped(Platform::Taobao, "TRADE_FINISHED"));
        assert!(is_shipped(Platform::Jd, "WAIT_GOODS_RECEIVE_CONFIRM"));
        assert!(is_shipped(Platform::Alibaba, "waitbuyerreceive"));
        assert!(!is_shipped(Platform::Alibaba, "success"));
    }
}
