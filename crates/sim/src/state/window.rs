//! The per-second limit of one slot, by kind: the fixed window, the sliding window and the
//! token bucket (governor), with the quota day and peak kept beside them.

use super::Admit;
use chrono::{DateTime, Utc};
use governor::clock::{Clock, FakeRelativeClock};
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use std::collections::VecDeque;
use std::num::NonZeroU32;
use std::time::Duration;

/// A ban as the platforms answer it: whole seconds, rounded up, at least 1.
pub(super) fn ban_seconds(left: Duration) -> u64 {
    u64::try_from(left.as_nanos().div_ceil(1_000_000_000))
        .unwrap_or(u64::MAX)
        .max(1)
}

/// The `sliding` window's length.
const SLIDE: chrono::TimeDelta = chrono::TimeDelta::milliseconds(1000);

type Governor = RateLimiter<NotKeyed, InMemoryState, FakeRelativeClock, NoOpMiddleware<Nanos>>;

/// The `bucket` kind: a token bucket of rate `per_second` and size `burst`.
///
/// Why governor here while the client's gates (src/throttle) do not use it: a client must
/// reserve its slot and then sleep exactly once until it, which governor cannot express; a
/// platform only admits or rejects, which is exactly what governor's `check` does.
///
/// Its clock is advanced to the `now` handed to [`Slot::admit`](super::Slot::admit), so all
/// three kinds read the same time and tests drive them with explicit instants.
pub(super) struct Bucket {
    /// (per_second, burst) it was built for; a drill changing either builds a new (full) one.
    shape: (u64, u64),
    limiter: Governor,
    clock: FakeRelativeClock,
    /// The `now` the clock stands at; earlier instants (racing handlers) do not move it back.
    at: DateTime<Utc>,
}

impl std::fmt::Debug for Bucket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bucket")
            .field("shape", &self.shape)
            .field("at", &self.at)
            .finish_non_exhaustive()
    }
}

impl Bucket {
    fn new(per_second: u64, burst: u64, now: DateTime<Utc>) -> Bucket {
        let n =
            |v: u64| NonZeroU32::new(v.min(u64::from(u32::MAX)) as u32).unwrap_or(NonZeroU32::MIN);
        let clock = FakeRelativeClock::default();
        let quota = Quota::per_second(n(per_second)).allow_burst(n(burst));
        Bucket {
            shape: (per_second, burst),
            limiter: RateLimiter::direct_with_clock(quota, clock.clone()),
            clock,
            at: now,
        }
    }

    /// Take a token at `now`, or the time until the next one.
    fn take(&mut self, now: DateTime<Utc>) -> Result<(), Duration> {
        if let Ok(step) = (now - self.at).to_std() {
            self.clock.advance(step);
            self.at = now;
        }
        self.limiter
            .check()
            .map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }
}

#[derive(Debug, Default)]
pub(super) struct Window {
    pub(super) second: i64,
    pub(super) seen: u64,
    pub(super) admitted: u64,
    /// The quota day (`QuotaDay::index`) `quota_used` counts in.
    pub(super) day: Option<i64>,
    pub(super) quota_used: u64,
    pub(super) peak: u64,
    /// `sliding`: instants of the calls admitted in the last 1,000 ms, oldest first.
    pub(super) admitted_at: VecDeque<DateTime<Utc>>,
    /// `bucket`: built on first use.
    pub(super) bucket: Option<Bucket>,
    /// Every call is refused until then (a ban after a rejection).
    pub(super) banned_until: Option<DateTime<Utc>>,
    /// The last wall-clock second with a refused call.
    pub(super) last_limited_second: Option<i64>,
}

impl Window {
    /// `fixed`: at most `per_second` per wall-clock second.
    pub(super) fn admit_fixed(&mut self, per_second: u64, now: DateTime<Utc>) -> Admit {
        if self.admitted >= per_second {
            // The window is the wall-clock second: it frees at the next second boundary.
            let left = 1000 - now.timestamp_subsec_millis().min(999) as u64;
            return Admit::Limited {
                ban_s: left.div_ceil(1000).max(1),
            };
        }
        self.admitted += 1;
        Admit::Ok
    }

    /// `sliding`: at most `per_second` in any 1,000 ms ending now.
    pub(super) fn admit_sliding(&mut self, per_second: u64, now: DateTime<Utc>) -> Admit {
        let q = &mut self.admitted_at;
        while q.front().is_some_and(|t| *t <= now - SLIDE) {
            q.pop_front();
        }
        let n = q.len() as u64;
        if n >= per_second {
            // Room opens when the call at this index leaves (the oldest, unless a drill
            // lowered the limit below what the window holds).
            let freeing = q[usize::try_from(n - per_second).unwrap_or(0)];
            let left = (freeing + SLIDE - now).to_std().unwrap_or_default();
            return Admit::Limited {
                ban_s: ban_seconds(left),
            };
        }
        // Handlers take `now` before the lock, so one may arrive slightly out of order.
        let at = q.partition_point(|t| *t <= now);
        q.insert(at, now);
        Admit::Ok
    }

    /// `bucket`: a token bucket of rate `per_second` and size `burst`.
    pub(super) fn admit_bucket(
        &mut self,
        per_second: u64,
        burst: u64,
        now: DateTime<Utc>,
    ) -> Admit {
        let shape = (per_second, burst);
        let bucket = match &mut self.bucket {
            Some(b) if b.shape == shape => b,
            slot => slot.insert(Bucket::new(per_second, burst, now)),
        };
        match bucket.take(now) {
            Ok(()) => Admit::Ok,
            Err(wait) => Admit::Limited {
                ban_s: ban_seconds(wait),
            },
        }
    }
}
