//! Which window an order run reads, and when a shop's watermark counts as stalled: a pure
//! policy on unix milliseconds (docs/design.md, "Continuous sync").
//!
//! A run reads `[watermark - overlap, now)` and vouches for `now - lag`. A watermark far
//! behind (a shop paused for a week, a run that kept failing) would make that window grow
//! without bound: every run would re-read everything since the old watermark. So a run reads
//! at most `catch_up_max` past its start and vouches for its own end; the next run goes on from
//! there, and each run's cost stays bounded while the shop catches up.

/// The clock an order window is decided on: the ledger's, so every worker decides alike, but
/// never ahead of this host's nor of the platform's (as its answers' `Date` shows it:
/// `platform::clock`). A window vouches for `now - lag`; a clock ahead of the platform's by
/// more than lag + overlap would vouch for changes the platform has not stamped yet, and the
/// next run, starting at that watermark less the overlap, would never read them. A clock
/// behind only makes the window shorter (read again next run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WindowClock {
    /// The time windows are decided on (unix ms).
    pub(crate) now: i64,
    /// How far the ledger's clock is ahead of this host's (ms, 0 when not).
    pub(crate) ledger_ahead: i64,
    /// How far this host's clock is ahead of the platform's, as far as known (ms, 0 when not).
    pub(crate) host_ahead: i64,
}

/// The window clock from the ledger's and this host's clocks, and how far the platform's is
/// at least ahead of the host's (`None`: no recent answer to tell).
pub(crate) fn window_clock(
    ledger_ms: i64,
    host_ms: i64,
    platform_ahead_ms: Option<i64>,
) -> WindowClock {
    let platform_ms = platform_ahead_ms.map_or(host_ms, |a| host_ms.saturating_add(a));
    WindowClock {
        now: ledger_ms.min(host_ms).min(platform_ms),
        ledger_ahead: ledger_ms.saturating_sub(host_ms).max(0),
        host_ahead: host_ms.saturating_sub(platform_ms).max(0),
    }
}

/// A clock this far ahead of the next one (the ledger's of the host's, the host's of the
/// platform's) is warned about (ms); an answer's `Date` is whole seconds, so less is noise.
pub(crate) const CLOCK_AHEAD_WARN_MS: i64 = 5_000;

/// One order run's window, in unix ms: read `[since, until)`, move the watermark to `vouched`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OrderWindow {
    pub(crate) since: i64,
    pub(crate) until: i64,
    pub(crate) vouched: i64,
    /// The window was cut at `catch_up_max`: the shop is catching up.
    pub(crate) capped: bool,
}

/// The schedule's settings the window depends on, in ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WindowRule {
    pub(crate) lag: i64,
    pub(crate) overlap: i64,
    pub(crate) every: i64,
    /// The longest window one run reads (0: no cap).
    pub(crate) catch_up_max: i64,
    /// A watermark more than this many periods behind `now - lag` is stalled.
    pub(crate) stall_periods: i64,
}

impl WindowRule {
    /// The window of a run decided at `now` for a shop whose watermark is `watermark` (none:
    /// the last period). `None` when there is nothing to vouch for yet. Times are whole
    /// seconds: the platforms stamp `modified` to the second.
    pub(crate) fn window(&self, watermark: Option<i64>, now: i64) -> Option<OrderWindow> {
        let second = |ms: i64| ms.div_euclid(1000) * 1000;
        let vouched_at_most = now.saturating_sub(self.lag);
        let since = second(match watermark {
            Some(w) => w.saturating_sub(self.overlap),
            None => vouched_at_most.saturating_sub(self.every),
        });
        let mut until = second(now);
        let mut vouched = second(vouched_at_most);
        let mut capped = false;
        if self.catch_up_max > 0 {
            let end = since.saturating_add(second(self.catch_up_max).max(1000));
            if end < vouched {
                (until, vouched, capped) = (end, end, true);
            }
        }
        (vouched > since).then_some(OrderWindow {
            since,
            until,
            vouched,
            capped,
        })
    }

    /// How far the watermark is behind where a run would put it (ms, 0 when none is due).
    pub(crate) fn behind(&self, watermark: i64, now: i64) -> i64 {
        now.saturating_sub(self.lag)
            .saturating_sub(watermark)
            .max(0)
    }

    /// The watermark has not kept up for `stall_periods` periods: an operator should look.
    pub(crate) fn stalled(&self, watermark: i64, now: i64) -> bool {
        self.stall_periods > 0
            && self.behind(watermark, now) > self.every.saturating_mul(self.stall_periods)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = 60_000;
    const HOUR: i64 = 60 * MIN;

    fn rule(catch_up_max: i64) -> WindowRule {
        WindowRule {
            lag: MIN,
            overlap: 2 * MIN,
            every: 5 * MIN,
            catch_up_max,
            stall_periods: 3,
        }
    }

    #[test]
    fn a_shop_in_step_reads_from_its_watermark_to_now() {
        let now = 100 * HOUR + 1234;
        let w = rule(6 * HOUR)
            .window(Some(100 * HOUR - 6 * MIN), now)
            .unwrap();
        assert_eq!(w.since, 100 * HOUR - 8 * MIN);
        assert_eq!(w.until, 100 * HOUR + 1000);
        assert_eq!(w.vouched, 100 * HOUR - MIN + 1000);
        assert!(!w.capped);
    }

    #[test]
    fn a_new_shop_reads_its_last_period() {
        let now = 100 * HOUR;
        let w = rule(6 * HOUR).window(None, now).unwrap();
        assert_eq!(w.since, now - MIN - 5 * MIN);
        assert_eq!(w.vouched, now - MIN);
    }

    #[test]
    fn a_shop_far_behind_catches_up_in_bounded_runs() {
        let r = rule(6 * HOUR);
        let now = 1000 * HOUR;
        // A month behind: each run reads at most six hours, and the next starts where it
        // vouched (less the overlap), so the shop catches up.
        let mut watermark = now - 30 * 24 * HOUR;
        let mut runs = 0;
        while let Some(w) = r.window(Some(watermark), now) {
            assert!(w.until - w.since <= 6 * HOUR, "{w:?}");
            assert!(w.vouched > watermark, "each run moves the watermark on");
            watermark = w.vouched;
            runs += 1;
            if !w.capped {
                break;
            }
        }
        assert_eq!(watermark, now - MIN, "caught up to now - lag");
        assert!((120..=130).contains(&runs), "{runs} runs");
        // No cap: one run reads it all.
        let all = rule(0).window(Some(now - 30 * 24 * HOUR), now).unwrap();
        assert!(!all.capped);
        assert_eq!(all.vouched, now - MIN);
    }

    #[test]
    fn nothing_to_vouch_for_is_no_run() {
        let now = 100 * HOUR;
        // Already vouched for past now - lag, the overlap included.
        assert_eq!(rule(6 * HOUR).window(Some(now + MIN), now), None);
        assert!(rule(6 * HOUR).window(Some(now), now).is_some());
    }

    /// A ledger clock 5 minutes ahead, more than lag (1 min) + overlap (2 min): the window is
    /// decided on the host's clock, so the watermark never passes what the platform can have
    /// stamped.
    #[test]
    fn a_ledger_clock_ahead_never_vouches_for_the_future() {
        let host = 100 * HOUR;
        let ledger = host + 5 * MIN;
        let c = window_clock(ledger, host, None);
        assert_eq!((c.now, c.ledger_ahead, c.host_ahead), (host, 5 * MIN, 0));
        let r = rule(6 * HOUR);
        let w = r.window(Some(host - 2 * MIN), c.now).unwrap();
        assert!(w.vouched <= host - MIN, "{w:?}");
        // On the ledger's clock alone it vouched for 4 minutes the platform had not reached,
        // and the next run (from there less the 2 minute overlap) would skip 2 of them.
        let on_ledger = r.window(Some(host - 2 * MIN), ledger).unwrap();
        assert!(on_ledger.vouched - 2 * MIN > host, "{on_ledger:?}");
        // A ledger behind the host: its clock, nothing to warn about.
        let c = window_clock(host - MIN, host, None);
        assert_eq!((c.now, c.ledger_ahead), (host - MIN, 0));
    }

    /// The platform's clock 5 minutes behind the host's (and the ledger's): the window is
    /// decided on the platform's, as its answers showed it.
    #[test]
    fn a_platform_clock_behind_is_the_one_windows_are_decided_on() {
        let host = 100 * HOUR;
        let platform = host - 5 * MIN;
        let c = window_clock(host, host, Some(platform - host));
        assert_eq!(
            (c.now, c.ledger_ahead, c.host_ahead),
            (platform, 0, 5 * MIN)
        );
        let w = rule(6 * HOUR)
            .window(Some(platform - 2 * MIN), c.now)
            .unwrap();
        assert!(w.vouched <= platform - MIN, "{w:?}");
        // A platform ahead of the host changes nothing: the host's clock is the earlier one.
        let c = window_clock(host, host, Some(3_000));
        assert_eq!((c.now, c.host_ahead), (host, 0));
    }

    #[test]
    fn a_watermark_is_stalled_after_its_periods() {
        let r = rule(6 * HOUR);
        let now = 100 * HOUR;
        assert!(!r.stalled(now - MIN, now), "in step");
        assert!(
            !r.stalled(now - MIN - 15 * MIN, now),
            "three periods: not yet"
        );
        assert!(r.stalled(now - MIN - 15 * MIN - 1000, now));
        assert_eq!(r.behind(now, now), 0);
        let off = WindowRule {
            stall_periods: 0,
            ..r
        };
        assert!(!off.stalled(0, now), "0 turns the alert off");
    }
}
