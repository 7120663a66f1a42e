//! The gate-state seam: where a gate's tokens, adaptive rate, pauses and daily counts live.
//! The fleet keeps them in Redis (`shared::RedisGates`, one script call per acquisition), one
//! process keeps them in memory (`embedded::EmbeddedGates`). `Gates` holds the one chosen at
//! start-up and never asks which it is (docs/design.md, "Layers").

use super::embedded::EmbeddedGates;
use super::shared::RedisGates;
use super::{Ask, DayCalls, GateError, GateSnapshot, Inner, Lane, Noted, RateChange, Reservation};
use crate::config::GateConfig;
use crate::platform::{Api, Platform};
use futures::future::BoxFuture;
use futures::FutureExt;
use std::time::{Duration, SystemTime};

/// One home of gate state. Boxed futures, so `Gates` can hold it behind `dyn`.
pub(super) trait GateState: Send + Sync {
    /// `"redis"` or `"embedded"`, for `gate show` and the logs.
    fn mode(&self) -> &'static str;

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

    /// Write what is batched now (before exit).
    fn flush<'a>(&'a self, inner: &'a Inner) -> BoxFuture<'a, ()> {
        let _ = inner;
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
    fn mode(&self) -> &'static str {
        "redis"
    }

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

    fn flush<'a>(&'a self, inner: &'a Inner) -> BoxFuture<'a, ()> {
        self.flush_all(inner).boxed()
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
    fn mode(&self) -> &'static str {
        "embedded"
    }

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
