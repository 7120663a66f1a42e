//! Order sync: the window split into platform-sized slices (one item each); each slice walks
//! `order_list` pages until `has_next` is false and upserts only orders whose `modified`
//! advanced. A page that changes nothing is a call without useful data.

use super::item::{ledger_write, HandlerCtx, ItemRun, Stop, Useful};
use crate::platform::model::{
    ApiRequest, ApiResponse, MessageOrder, Order as PlatformOrder, Unreadable,
};
use crate::platform::wire::{lists_newest_first, order_page_size_max};
use crate::platform::{Api, ErrorClass, Platform};
use crate::store::{ItemOutcome, Order, OrderNotice, Quarantined};
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
        Platform::Alibaba => matches!(
            status,
            "waitbuyerreceive" | "waitlogisticstakein" | "waitbuyersign"
        ),
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
pub(crate) fn to_ledger(
    platform: Platform,
    shop: &str,
    o: &PlatformOrder,
) -> Result<Order, String> {
    Ok(Order {
        platform,
        order_id: o.order_id.clone(),
        shop: shop.to_string(),
        status: o.status.clone(),
        shipped: is_shipped(platform, &o.status),
        modified: o.modified,
        amount_cents: amount_cents(&o.amount).ok_or_else(|| o.amount.clone())?,
        tracking: o.tracking.clone(),
    })
}

/// A change message's order state in the ledger's terms; `Err(amount)` as [`to_ledger`].
pub(crate) fn to_notice(
    platform: Platform,
    shop: &str,
    o: &MessageOrder,
    born: DateTime<Utc>,
) -> Result<OrderNotice, String> {
    Ok(OrderNotice {
        platform,
        order_id: o.order_id.clone(),
        shop: shop.to_string(),
        status: o.status.clone(),
        shipped: is_shipped(platform, &o.status),
        modified: o.modified,
        amount_cents: amount_cents(&o.amount).ok_or_else(|| o.amount.clone())?,
        born,
    })
}

/// Count records set aside in `syncfleet_quarantined_total` (by source), once they are kept.
pub(crate) fn count_quarantined(records: &[Quarantined]) {
    for q in records {
        metrics::counter!(crate::metric_names::QUARANTINED, "source" => q.source.clone())
            .increment(1);
    }
}

/// An order list's entry that could not be read, as the quarantine keeps it.
fn quarantined_order(platform: Platform, shop: &str, u: &Unreadable) -> Quarantined {
    Quarantined {
        source: "order".into(),
        platform,
        record_id: u.record_id(),
        shop: shop.to_string(),
        reason: u.reason.clone(),
        raw: u.raw.clone(),
    }
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
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
struct SliceProgress {
    next_page: u32,
    pages: u32,
    seen: u64,
    changed: u64,
    /// The window's total as last read. Set: the walk goes from the last page back to page 2
    /// (see [`Walk`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    total: Option<u64>,
    /// Set while a page is read again after the window grew: the walk then goes on back from
    /// this page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    resume: Option<u32>,
    /// The window lost orders during the walk: page 1 is read again at its end.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    shrunk: bool,
}

/// The order a window's pages are read in (docs/design.md, "Continuous sync").
///
/// Page 1 first, for the window's total; then, when the platform gives a total, from the
/// last page back to page 2, as TOP's documentation asks. An order that changes while the
/// window is walked leaves it (its new `modified` is later than the window's end) and every
/// order behind it moves one place forward: walking back, the order that moves crosses onto a
/// page not read yet. Every answer carries the window's total, so the walk sees the window
/// change under it and pays one page for it:
/// - it shrank: page 1 once more at the end (an order may have moved from page 2 onto it);
/// - it grew (an order came into the window late): the page the newcomer pushed an order onto
///   is read again: the page after this one when the platform lists newest first (the order at
///   this page's end was pushed onto the page read before it), the last page when it lists
///   oldest first (the newcomer sits at the end).
///
/// A platform that gives no total is walked forward while it says more follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Walk {
    /// Forward from this page while the platform says more follow.
    Forward(u32),
    /// Back from this page to page 2; the window held `total` orders at the last answer.
    Back { page: u32, total: u64, shrunk: bool },
    /// This page again, after the window grew; then back from `resume`.
    Recheck {
        page: u32,
        resume: u32,
        total: u64,
        shrunk: bool,
    },
    /// Page 1 once more, after the window lost orders during the walk.
    Reread,
}

impl Walk {
    /// Where a walk with this progress goes next.
    fn resume(p: &SliceProgress) -> Walk {
        match (p.total, p.resume) {
            (Some(total), Some(resume)) if p.next_page >= 1 => Walk::Recheck {
                page: p.next_page,
                resume,
                total,
                shrunk: p.shrunk,
            },
            (Some(total), None) if p.next_page >= 2 => Walk::Back {
                page: p.next_page,
                total,
                shrunk: p.shrunk,
            },
            (Some(_), _) => Walk::Reread,
            (None, _) => Walk::Forward(p.next_page.max(1)),
        }
    }

    fn page(self) -> u32 {
        match self {
            Walk::Forward(p) | Walk::Back { page: p, .. } | Walk::Recheck { page: p, .. } => p,
            Walk::Reread => 1,
        }
    }

    /// The back walk after a page: on to `page` while it is 2 or more, then page 1 again if
    /// the window shrank, else the end.
    fn back_from(page: u32, total: u64, shrunk: bool) -> Option<Walk> {
        if page >= 2 {
            Some(Walk::Back {
                page,
                total,
                shrunk,
            })
        } else {
            shrunk.then_some(Walk::Reread)
        }
    }

    /// After reading this walk's page, which reported `total` and `has_next`: the next step,
    /// or `None` when the window is read.
    fn next(
        self,
        page_size: u32,
        newest_first: bool,
        total: Option<u64>,
        has_next: bool,
    ) -> Option<Walk> {
        let last_page =
            |t: u64| u32::try_from(t.div_ceil(u64::from(page_size.max(1)))).unwrap_or(u32::MAX);
        match self {
            Walk::Forward(1) => match total {
                Some(t) => Walk::back_from(last_page(t), t, false),
                None => has_next.then_some(Walk::Forward(2)),
            },
            Walk::Forward(p) => has_next.then_some(Walk::Forward(p + 1)),
            Walk::Back {
                page,
                total: before,
                shrunk,
            } => {
                let now = total.unwrap_or(before);
                let shrunk = shrunk || now < before;
                if now > before {
                    let again = if newest_first {
                        page + 1
                    } else {
                        last_page(now)
                    };
                    if again != page && again <= last_page(now) {
                        return Some(Walk::Recheck {
                            page: again,
                            resume: page - 1,
                            total: now,
                            shrunk,
                        });
                    }
                }
                Walk::back_from(page - 1, now, shrunk)
            }
            Walk::Recheck {
                resume,
                total: before,
                shrunk,
                ..
            } => {
                let now = total.unwrap_or(before);
                Walk::back_from(resume, now, shrunk || now < before)
            }
            Walk::Reread => None,
        }
    }

    /// The progress that resumes at this step.
    fn progress(self, pages: u32, seen: u64, changed: u64) -> SliceProgress {
        let (next_page, total, resume, shrunk) = match self {
            Walk::Forward(p) => (p, None, None, false),
            Walk::Back {
                page,
                total,
                shrunk,
            } => (page, Some(total), None, shrunk),
            Walk::Recheck {
                page,
                resume,
                total,
                shrunk,
            } => (page, Some(total), Some(resume), shrunk),
            Walk::Reread => (1, Some(0), None, false),
        };
        SliceProgress {
            next_page,
            pages,
            seen,
            changed,
            total,
            resume,
            shrunk,
        }
    }
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
    let page_size = runner
        .cfg
        .order_page_size(platform)
        .clamp(1, order_page_size_max(platform));
    let newest_first = lists_newest_first(platform);
    let (mut pages, mut seen, mut changed) = (from.pages, from.seen, from.changed);
    // Orders of this walk's forward pages, to notice a platform that serves the same page
    // again while saying more follow (it would burn the page cap).
    let mut walked: HashSet<String> = HashSet::new();
    // Orders that could not be read: quarantined, and the walk goes on without them.
    let mut quarantined = 0usize;
    let mut step = Some(Walk::resume(&from));
    let first = step;
    while let Some(walk) = step {
        let page = walk.page();
        // A stopping worker (SIGTERM, a scale-in) or a held job ends the walk at a page
        // boundary, keeping its place: the next run resumes at this page instead of page 1.
        if Some(walk) != first && stop.refuses_new_items() {
            let progress = walk.progress(pages, seen, changed);
            return ItemRun::Later(std::time::Duration::ZERO)
                .carrying(|| serde_json::to_string(&progress).ok());
        }
        if pages >= MAX_PAGES_PER_SLICE || page > MAX_PAGES_PER_SLICE {
            return ItemRun::Outcome(ItemOutcome::failed(
                key,
                ErrorClass::Unknown,
                format!(
                    "stopped at the cap of {MAX_PAGES_PER_SLICE} pages with more to come (pages={pages} orders={seen} changed={changed}): enqueue the window with shorter slices (jobs.order_slice_s)"
                ),
            ));
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
                let progress = walk.progress(pages, seen, changed);
                return ItemRun::from_link_error(key, &e).carrying(|| {
                    (pages > 0)
                        .then(|| serde_json::to_string(&progress).ok())
                        .flatten()
                });
            }
        };
        // A page from the stale cache is what the list said earlier, not now: a slice walked
        // on it would count as coverage and move the watermark past changes it never saw.
        // It is a failed attempt, like the error behind it (docs/design.md, "Degraded input never feeds a write").
        if let Some(info) = &reply.stale {
            let progress = walk.progress(pages, seen, changed);
            return ItemRun::Outcome(ItemOutcome::attempted(
                key,
                ErrorClass::Retry,
                format!(
                    "order_list page {page} could only be answered from the stale cache ({}): not counted as read",
                    info.reason
                ),
            ))
            .carrying(|| {
                (pages > 0)
                    .then(|| serde_json::to_string(&progress).ok())
                    .flatten()
            });
        }
        let ApiResponse::OrderPage(p) = reply.response else {
            return ItemRun::Outcome(ItemOutcome::failed(
                key,
                ErrorClass::Unknown,
                "order_list answered with something else",
            ));
        };
        pages += 1;
        seen += p.orders.len() as u64;
        if let Walk::Forward(_) = walk {
            let more = p.has_next && !p.orders.is_empty();
            let fresh = p
                .orders
                .iter()
                .filter(|o| walked.insert(o.order_id.clone()))
                .count();
            if more && fresh == 0 && page > 1 {
                return ItemRun::Outcome(ItemOutcome::failed(
                    key,
                    ErrorClass::Unknown,
                    format!(
                        "order_list page {page} repeated the orders of the pages before it and still said more follow; the walk stopped after {pages} pages ({seen} orders, {changed} changed)"
                    ),
                ));
            }
        }
        let mut batch: Vec<Order> = Vec::with_capacity(p.orders.len());
        let mut bad: Vec<Quarantined> = p
            .unreadable
            .iter()
            .map(|u| quarantined_order(platform, shop, u))
            .collect();
        for o in &p.orders {
            match to_ledger(platform, shop, o) {
                Ok(order) => batch.push(order),
                Err(amount) => bad.push(Quarantined {
                    source: "order".into(),
                    platform,
                    record_id: o.order_id.clone(),
                    shop: shop.to_string(),
                    reason: format!("amount `{amount}` is not a decimal"),
                    raw: serde_json::to_string(o).unwrap_or_default(),
                }),
            }
        }
        if !bad.is_empty() {
            quarantined += bad.len();
            tracing::warn!(%platform, shop, orders = bad.len(), "orders that could not be read were quarantined (syncfleet quarantine lists them)");
            if let Err(e) = ledger_write("quarantine", || runner.store.quarantine(&bad)).await {
                return ItemRun::Outcome(ItemOutcome::attempted(
                    key,
                    ErrorClass::Retry,
                    e.to_string(),
                ));
            }
            count_quarantined(&bad);
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
        // An empty forward page ends the walk whatever it says about more.
        let has_next = p.has_next && !p.orders.is_empty();
        step = walk.next(page_size, newest_first, p.total, has_next);
        if let Some(next) = step {
            slice
                .checkpoint(runner, next.progress(pages, seen, changed))
                .await;
        }
    }
    let result = format!("pages={pages} orders={seen} changed={changed}");
    let result = if quarantined > 0 {
        format!("{result} quarantined={quarantined}")
    } else {
        result
    };
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

    /// Every page a walk reads, with the totals each answer gives.
    fn pages_read(
        totals: &[Option<u64>],
        page_size: u32,
        has_next: impl Fn(u32) -> bool,
    ) -> Vec<u32> {
        pages_read_listing(totals, page_size, true, has_next)
    }

    fn pages_read_listing(
        totals: &[Option<u64>],
        page_size: u32,
        newest_first: bool,
        has_next: impl Fn(u32) -> bool,
    ) -> Vec<u32> {
        let mut out = Vec::new();
        let mut step = Some(Walk::resume(&SliceProgress::default()));
        let mut i = 0;
        while let Some(w) = step {
            out.push(w.page());
            let total = totals[i.min(totals.len() - 1)];
            i += 1;
            step = w.next(page_size, newest_first, total, has_next(w.page()));
            // Resuming from the kept progress goes the same way.
            if let Some(n) = step {
                assert_eq!(Walk::resume(&n.progress(0, 0, 0)), n);
            }
        }
        out
    }

    #[test]
    fn a_window_is_walked_from_its_last_page_back() {
        // 250 orders, 100 a page: page 1 for the total, then 3 and 2.
        assert_eq!(pages_read(&[Some(250)], 100, |_| true), vec![1, 3, 2]);
        // One page: one call.
        assert_eq!(pages_read(&[Some(40)], 100, |_| false), vec![1]);
        assert_eq!(pages_read(&[Some(0)], 100, |_| false), vec![1]);
        // Orders left the window during the walk: page 1 again.
        assert_eq!(
            pages_read(&[Some(250), Some(249), Some(248)], 100, |_| true),
            vec![1, 3, 2, 1]
        );
        // No total: forward while more follow.
        assert_eq!(pages_read(&[None], 100, |p| p < 3), vec![1, 2, 3]);
    }

    #[test]
    fn a_window_that_grows_under_the_walk_costs_one_page() {
        // Newest first (TOP, JD): 250 orders; one arrives before page 2 is read. The order at
        // page 2's end was pushed onto page 3, read before: page 3 once more, then on.
        assert_eq!(
            pages_read_listing(&[Some(250), Some(250), Some(251)], 100, true, |_| true),
            vec![1, 3, 2, 3]
        );
        // ... while page 4 of 5 is read: page 5 again, then 3 and 2.
        assert_eq!(
            pages_read_listing(
                &[Some(450), Some(450), Some(451), Some(451)],
                100,
                true,
                |_| true
            ),
            vec![1, 5, 4, 5, 3, 2]
        );
        // Oldest first: the newcomer is at the end; its page is read again.
        assert_eq!(
            pages_read_listing(&[Some(250), Some(250), Some(251)], 100, false, |_| true),
            vec![1, 3, 2, 3]
        );
        assert_eq!(
            pages_read_listing(&[Some(300), Some(301)], 100, false, |_| true),
            vec![1, 3, 4, 2]
        );
        // Grown and shrunk in one walk: one page for each.
        assert_eq!(
            pages_read_listing(&[Some(250), Some(249), Some(250)], 100, true, |_| true),
            vec![1, 3, 2, 3, 1]
        );
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
