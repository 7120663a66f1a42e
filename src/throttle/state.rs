//! The gate-state seam: where a gate's tokens, adaptive rate, pauses and daily counts live,
//! and the vocabulary the facade and a state speak (an ask, a reservation, an outcome). The
//! fleet keeps them in Redis (`shared::RedisGates`, one script call per acquisition), one
//! process keeps them in memory (`embedded::EmbeddedGates`). `Gates` holds the one chosen at
//! start-up and never asks which it is (docs/design.md, "Gates: the facade and its state").
//!
//! What is the facade's (per-process slots, local holds, latency, the burn watch) a state sees
//! only through [`LocalGates`].

use super::embedded::EmbeddedGates;
use super::shared::RedisGates;
use super::{DayCalls, GateError, GateShare, GateSnapshot, Lane, RateChange};
use crate::config::GateConfig;
use crate::platform::{Api, Platform};
use futures::future::BoxFuture;
use futures::FutureExt;
use std::time::{Duration, SystemTime};

/// One outcome as a backend records it.
#[derive(Debug)]
pub(super) struct Noted {
    /// The call succeeded (counts for the measurement and the recovery).
    pub(super) success: bool,
    /// A rate-limit answer (not a spent quota).
    pub(super) hit: bool,
    /// A pause the answer asked for, and why.
    pub(super) pause: Option<(Duration, String)>,
}

/// Whether a reservation is a call's first, or a late waker's booking again: the call was
/// counted in the day's budgets when it was first booked, and must not be counted twice
/// (nor refused by a budget its own first booking spent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Booking {
    First,
    Again,
}

/// What a call asks of a backend's token step.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ask<'a> {
    /// The lane the call books in.
    pub(super) lane: Lane,
    /// The shop the call is for: a state shared by processes paces each shop at its part of
    /// the rate (one process's slots already take turns by shop).
    pub(super) share: Option<&'a GateShare>,
    /// The longest the call may wait for its token.
    pub(super) max_wait: Duration,
    /// Whether the call was booked (and counted in the day's budgets) already.
    pub(super) booking: Booking,
}

/// Internal answer of a backend's token step.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Reservation {
    Now,
    /// Go after the wait; a fleet gate says which clock second (server clock) it booked.
    After(Duration, Option<u64>),
    Refused(Duration),
    /// The call is ahead of its shop's pace at the gate: ask again after the wait (its
    /// shop's turn comes then).
    ShareWait(Duration),
    Paused(Duration, String),
    Unreachable(Duration, String, bool),
}

/// What a state that writes outcomes in batches needs of this process's gates when it flushes:
/// each gate's configuration and its measured latency, and where the day's count it learns
/// goes (the burn watch).
pub(super) trait LocalGates: Send + Sync {
    /// The gate's configuration in this process.
    fn config(&self, platform: Platform, api: Api) -> &GateConfig;
    /// This process's p95 call latency through the gate, once there are enough samples.
    fn p95_ms(&self, platform: Platform, api: Api) -> Option<u64>;
    /// The calls the gate counted today, as a write learned them.
    fn counted_today(&self, platform: Platform, api: Api, used: u64);
}

/// One home of gate state. Boxed futures, so `Gates` can hold it behind `dyn`.
pub(super) trait GateState: Send + Sync {
    /// Reserve a token for one call of (platform, api) as `ask` says.
    fn reserve<'a>(
        &'a self,
        platform: Platform,
        api: Api,
        cfg: &'a GateConfig,
        ask: Ask<'a>,
    ) -> BoxFuture<'a, Reservation>;

    /// After sleeping for a reservation booked in clock second `booked` (server clock): did
    /// the call wake too late for it (it would land on the next second's calls)?
    fn woke_late(&self, booked: Option<u64>, band_ms: u64) -> bool {
        let _ = (booked, band_ms);
        false
    }

    /// At the moment a reserved call leaves: how long to hold it for the next clock second
    /// when this second's calls are spent, if the state checks at send time.
    fn send_wait(&self, platform: Platform, api: Api, lane: Lane) -> Option<Duration> {
        let _ = (platform, api, lane);
        None
    }

    /// Record one outcome of a call that left at `sent`. Returns the calls counted today
    /// when they are known at once (for the burn check); a batched state reports them when
    /// it flushes.
    fn note(&self, platform: Platform, api: Api, noted: Noted, sent: SystemTime) -> Option<u64>;

    /// Pause a gate for `span` without a call to count (another gate of the app learned that
    /// the app's daily quota is spent).
    fn pause(&self, platform: Platform, api: Api, span: Duration, reason: String);

    /// Write what is batched now (every flush interval, and before exit).
    fn flush<'a>(&'a self, gates: &'a dyn LocalGates) -> BoxFuture<'a, ()> {
        let _ = gates;
        async {}.boxed()
    }

    /// The state of one gate.
    fn snapshot<'a>(
        &'a self,
        platform: Platform,
        api: Api,
        cfg: &'a GateConfig,
    ) -> BoxFuture<'a, Result<GateSnapshot, GateError>>;

    /// The calls every gate of `platform` booked today against the app's daily quota.
    fn app_booked<'a>(
        &'a self,
        platform: Platform,
        cfg: &'a GateConfig,
    ) -> BoxFuture<'a, Result<u64, GateError>>;

    /// Bring today's counters of a gate back to `calls` and the app's to `app_calls` (see
    /// [`DayCalls`]); returns how many were raised.
    fn floor_today<'a>(
        &'a self,
        platform: Platform,
        api: Api,
        cfg: &'a GateConfig,
        calls: DayCalls,
        app_calls: DayCalls,
    ) -> BoxFuture<'a, Result<u32, GateError>>;

    /// Set a gate's rate (and burst) where this state is shared.
    fn set_rate<'a>(
        &'a self,
        platform: Platform,
        api: Api,
        cfg: &'a GateConfig,
        rate: f64,
        burst: Option<f64>,
    ) -> BoxFuture<'a, Result<RateChange, GateError>>;
}

impl GateState for RedisGates {
    fn reserve<'a>(
        &'a self,
        platform: Platform,
        api: Api,
        cfg: &'a GateConfig,
        ask: Ask<'a>,
    ) -> BoxFuture<'a, Reservation> {
        RedisGates::reserve(self, platform, api, cfg, ask).boxed()
    }

    fn woke_late(&self, booked: Option<u64>, band_ms: u64) -> bool {
        booked.is_some_and(|second| self.missed_booking(second, band_ms))
    }

    fn note(&self, platform: Platform, api: Api, noted: Noted, sent: SystemTime) -> Option<u64> {
        RedisGates::note(self, platform, api, noted, sent);
        None
    }

    fn pause(&self, platform: Platform, api: Api, span: Duration, reason: String) {
        RedisGates::pause(self, platform, api, span, reason);
    }

    fn flush<'a>(&'a self, gates: &'a dyn LocalGates) -> BoxFuture<'a, ()> {
        self.flush_all(gates).boxed()
    }

    fn snapshot<'a>(
        &'a self,
        platform: Platform,
        api: Api,
        cfg: &'a GateConfig,
    ) -> BoxFuture<'a, Result<GateSnapshot, GateError>> {
        RedisGates::snapshot(self, platform, api, cfg).boxed()
    }

    fn app_booked<'a>(
        &'a self,
        platform: Platform,
        cfg: &'a GateConfig,
    ) -> BoxFuture<'a, Result<u64, GateError>> {
        RedisGates::app_booked(self, platform, cfg).boxed()
    }

    fn floor_today<'a>(
        &'a self,
        platform: Platform,
        api: Api,
        cfg: &'a GateConfig,
        calls: DayCalls,
        app_calls: DayCalls,
    ) -> BoxFuture<'a, Result<u32, GateError>> {
        RedisGates::floor_today(self, platform, api, cfg, calls, app_calls).boxed()
    }

    fn set_rate<'a>(
        &'a self,
        platform: Platform,
        api: Api,
        cfg: &'a GateConfig,
        rate: f64,
        burst: Option<f64>,
    ) -> BoxFuture<'a, Result<RateChange, GateError>> {
        RedisGates::set_rate(self, platform, api, cfg, rate, burst).boxed()
    }
}

impl GateState for EmbeddedGates {
    fn reserve<'a>(
        &'a self,
        platform: Platform,
        api: Api,
        _cfg: &'a GateConfig,
        ask: Ask<'a>,
    ) -> BoxFuture<'a, Reservation> {
        // In one process a call is booked once: only fleet calls wake late and book again.
        // Its slots take turns by shop, which is the whole of the shops' shares there.
        EmbeddedGates::reserve(self, platform, api, ask.lane, ask.max_wait).boxed()
    }

    fn send_wait(&self, platform: Platform, api: Api, lane: Lane) -> Option<Duration> {
        EmbeddedGates::send_wait(self, platform, api, lane)
    }

    fn note(&self, platform: Platform, api: Api, noted: Noted, sent: SystemTime) -> Option<u64> {
        Some(EmbeddedGates::note(self, platform, api, noted, sent))
    }

    fn pause(&self, platform: Platform, api: Api, span: Duration, reason: String) {
        EmbeddedGates::pause(self, platform, api, span, reason);
    }

    fn snapshot<'a>(
        &'a self,
        platform: Platform,
        api: Api,
        cfg: &'a GateConfig,
    ) -> BoxFuture<'a, Result<GateSnapshot, GateError>> {
        let snap = EmbeddedGates::snapshot(self, platform, api, cfg);
        async move { Ok(snap) }.boxed()
    }

    fn app_booked<'a>(
        &'a self,
        platform: Platform,
        cfg: &'a GateConfig,
    ) -> BoxFuture<'a, Result<u64, GateError>> {
        let n = EmbeddedGates::app_booked(self, platform, cfg.day);
        async move { Ok(n) }.boxed()
    }

    fn floor_today<'a>(
        &'a self,
        platform: Platform,
        api: Api,
        _cfg: &'a GateConfig,
        calls: DayCalls,
        app_calls: DayCalls,
    ) -> BoxFuture<'a, Result<u32, GateError>> {
        let n = EmbeddedGates::floor_today(self, platform, api, calls, app_calls);
        async move { Ok(n) }.boxed()
    }

    fn set_rate<'a>(
        &'a self,
        platform: Platform,
        api: Api,
        _cfg: &'a GateConfig,
        rate: f64,
        burst: Option<f64>,
    ) -> BoxFuture<'a, Result<RateChange, GateError>> {
        let change = EmbeddedGates::set_rate(self, platform, api, rate, burst);
        async move { Ok(change) }.boxed()
    }
}
