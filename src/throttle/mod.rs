//! Gates: one per (platform, api), never global, never finer (docs/design.md, "Gates").
//!
//! An acquisition takes a per-process concurrency slot first (waiting at most about 1 s, then
//! [`GateRefusal::Busy`]), then a token from the gate's GCRA bucket. In fleet mode the bucket,
//! the adaptive rate (AIMD with ceiling memory), pauses, operator overrides and the daily quota
//! counter live in Redis next to each other under one hash tag per gate, and one Lua script call
//! per acquisition answers "go now", "go after T" (the caller sleeps once) or "not within your
//! max wait: retry at T". In embedded mode (no Redis) the same interface runs in-process on a
//! GCRA reservation bucket ([`gcra`]) and the pure [`aimd`] type. A pause (a platform ban, a
//! spent quota) is also announced on a pub/sub channel so every worker cancels reservations
//! it is already sleeping on.
//!
//! Outcomes come back through [`Gates::report`]: non-blocking, batched (successes flush every
//! 100 ms or 50 calls), a rate-limit answer flushed at once so every worker slows on its next
//! acquisition. Every outcome counts one call against the daily quota, failed ones too.

mod admitted;
pub mod aimd;
mod background;
pub(crate) mod burn;
mod embedded;
mod fair_slots;
pub(crate) mod gcra;
mod lane;
pub(crate) mod latency;
mod pacing;
mod second_guard;
mod shared;
mod shop_turns;
mod state;
mod verdicts;

use crate::clock::Clock;
use crate::config::{Config, GateConfig};
use crate::platform::{Api, Platform};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use fair_slots::GateShare;
use fair_slots::{FairSlot, FairSlots};
pub(crate) use lane::{bulk_quota, bulk_rate};
pub use lane::{Lane, UnknownLane};
pub use pacing::Pacing;
pub use shared::{gate_keys, GateKeys, DEFAULT_NAMESPACE};
use state::{Ask, Booking, Noted, Reservation};
pub use verdicts::{GateError, GateOutcome, GateRefusal};

/// How many times a fleet call that woke too late for its booked second books again.
const MAX_REBOOKS: u32 = 3;

/// Longest wait for a concurrency slot before failing fast as busy.
pub(crate) const SLOT_WAIT: Duration = Duration::from_secs(1);
/// How often batched successes are written (fleet mode). Short: a rate-limit answer measures
/// the platform's limit from the successes the fleet reported in the last second, so what is
/// still unreported is what the measurement misses.
pub(crate) const FLUSH_INTERVAL: Duration = Duration::from_millis(25);
/// Pending successes that trigger a flush before the interval.
pub(crate) const FLUSH_BATCH: u32 = 50;

/// A permission to make one call: holds the concurrency slot until dropped. How long it is
/// held is recorded as the gate's call latency (hold it for the call, drop it right after).
#[derive(Debug)]
pub struct Permit {
    _slot: FairSlot,
    waited: Duration,
    granted: Instant,
    clock: Clock,
    latency: Arc<Mutex<latency::LatencyWindow>>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let held = self.clock.now().saturating_duration_since(self.granted);
        let ms = held.as_millis().min(u32::MAX as u128) as u32;
        self.latency
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record(ms);
    }
}

impl Permit {
    /// How long the acquisition took (slot wait plus the reserved token wait).
    pub fn waited(&self) -> Duration {
        self.waited
    }
}

/// Rate and burst of a gate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GateLimits {
    /// Long-run rate, calls per second (fleet-wide).
    pub rate: f64,
    /// Instant burst, calls.
    pub burst: f64,
}

impl fmt::Display for GateLimits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rate {} burst {}", self.rate, self.burst)
    }
}

/// The app's daily quota on one platform, for `syncfleet gate show`.
#[derive(Debug, Clone, PartialEq)]
pub struct AppDay {
    /// The app's platform.
    pub platform: Platform,
    /// Calls a day over all its APIs.
    pub quota: u64,
    /// Calls its gates booked today.
    pub booked: u64,
    /// Share of the quota booked / share of the day gone.
    pub burn: f64,
}

/// The state of one gate, for `syncfleet gate show`.
#[derive(Debug, Clone, PartialEq)]
pub struct GateSnapshot {
    /// The gate's platform.
    pub platform: Platform,
    /// The gate's API.
    pub api: Api,
    /// Rate and burst in force: the operator's override if any, else the config.
    pub limits: GateLimits,
    /// Whether `limits` comes from `gate set` rather than the config file.
    pub overridden: bool,
    pub(crate) concurrency: u32,
    /// Adaptive rate (AIMD), never above `limits.rate`.
    pub adaptive_rate: f64,
    /// The platform's limit as last measured (or probed), if ever.
    pub ceiling: Option<f64>,
    /// How high the limit may be, as far as the last measurement can tell (probed up to while
    /// above the ceiling).
    pub upper: Option<f64>,
    /// Remaining pause and why.
    pub(crate) pause: Option<(Duration, String)>,
    /// Calls counted today (GMT+8), failed ones included.
    pub used_today: u64,
    pub(crate) daily_quota: Option<u64>,
    /// Burn ratio, when a daily quota is configured.
    pub(crate) burn: Option<f64>,
    /// Measured p95 call latency (ms) over recent calls (fleet: the last reporting process's).
    pub p95_ms_measured: Option<u64>,
}

/// Longest local hold of a gate after a pause (see `Local::hold_for`).
pub(crate) const HOLD_CAP: Duration = Duration::from_secs(10);

/// Samples before a measured p95 is trusted.
pub(crate) const P95_MIN_SAMPLES: usize = 50;

/// Gate settings before and after [`Gates::set_rate`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateChange {
    /// Rate and burst in force before the change.
    pub old: GateLimits,
    /// Rate and burst in force after it.
    pub new: GateLimits,
}

struct Local {
    cfg: GateConfig,
    /// Handed out shop by shop (docs/design.md, "Fair shares at the gate").
    slots: FairSlots,
    /// Interactive calls' own slots: they never wait behind bulk calls holding the others.
    interactive_slots: FairSlots,
    /// Latency of this process's recent calls through the gate.
    latency: Arc<Mutex<latency::LatencyWindow>>,
    /// When the slots were last checked against rate x measured p95, and last warned about.
    last_concurrency_warn: Mutex<(Option<Instant>, Option<Instant>)>,
    /// A pause this process reported: its own sleeping reservations must not fire into it
    /// (other processes learn of it on their next acquisition).
    /// (held until, the pause's own end, reason).
    hold: Mutex<Option<(Instant, Instant, String)>>,
}

impl Local {
    /// p95 of this process's recent calls, once there are enough of them.
    fn p95_ms(&self) -> Option<u64> {
        let w = self.latency.lock().unwrap_or_else(|e| e.into_inner());
        w.p95(P95_MIN_SAMPLES).map(u64::from)
    }

    /// Warn (at most once a minute) when the slots cannot carry the rate at the measured p95:
    /// in-flight = rate x latency, so fewer slots cap throughput silently.
    fn check_concurrency(&self, platform: Platform, api: Api, rate: f64, now: Instant) {
        let mut last = self
            .last_concurrency_warn
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // The p95 sorts the window: look at most every 5 s; say it at most once a minute.
        if last
            .0
            .is_some_and(|t| now.saturating_duration_since(t) < Duration::from_secs(5))
        {
            return;
        }
        last.0 = Some(now);
        let Some(p95) = self.p95_ms() else { return };
        let needed = latency::concurrency_for(rate, p95);
        if self.cfg.concurrency >= needed
            || last
                .1
                .is_some_and(|t| now.saturating_duration_since(t) < Duration::from_secs(60))
        {
            return;
        }
        last.1 = Some(now);
        tracing::warn!(
            %platform, %api, concurrency = self.cfg.concurrency, needed, p95_ms = p95,
            "concurrency {} is below rate {rate} x measured p95 {p95} ms = {needed}: throughput is capped at {:.1}/s",
            self.cfg.concurrency,
            self.cfg.concurrency as f64 * 1000.0 / p95.max(1) as f64
        );
    }

    fn held(&self, now: Instant) -> Option<GateRefusal> {
        let hold = self.hold.lock().unwrap_or_else(|e| e.into_inner());
        let (held_until, pause_end, reason) = hold.as_ref()?;
        (*held_until > now).then(|| GateRefusal::Paused {
            remaining: pause_end.saturating_duration_since(now),
            reason: reason.clone(),
        })
    }

    /// Hold the gate locally. Capped at [`HOLD_CAP`]: the hold only has to outlast the
    /// reservations already sleeping; a longer pause is the backend's to keep, so an operator
    /// who lifts it there is obeyed within the cap.
    fn hold_for(&self, now: Instant, span: Duration, reason: &str) {
        let until = now + span;
        let held = until.min(now + HOLD_CAP);
        let mut hold = self.hold.lock().unwrap_or_else(|e| e.into_inner());
        if hold.as_ref().is_none_or(|(_, end, _)| *end < until) {
            *hold = Some((held, until, reason.to_string()));
        }
    }
}

pub(crate) struct Inner {
    local: HashMap<(Platform, Api), Local>,
    /// Where the gates' state lives (Redis or this process), chosen at start-up.
    backend: Box<dyn state::GateState>,
    /// Burn lines, rate-limited per gate.
    burn: Mutex<HashMap<(Platform, Api), burn::BurnWatch>>,
    started: Instant,
    /// Platforms `snapshot` lists (the configured ones, or all three).
    platforms: Vec<Platform>,
    /// Where the gates read the time (docs/design.md, "Time you can pause").
    clock: Clock,
}

/// A gate's (or an app's) calls of today as the ledger counts them, for bringing lost counts
/// back: `all` of them, and the `settled` ones of minutes that ended long enough ago for
/// their outcomes to have been reported (a counter below `settled` lost writes; one between
/// the two may only be waiting for report batches still on their way).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DayCalls {
    /// Every call of today the ledger holds.
    pub all: u64,
    /// The calls of today's minutes that ended a while ago.
    pub settled: u64,
}

/// All gates of one process. Cheap to clone; clones share the gates.
#[derive(Clone)]
pub struct Gates {
    inner: Arc<Inner>,
}

impl fmt::Debug for Gates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gates").finish_non_exhaustive()
    }
}

fn locals(cfg: &Config) -> HashMap<(Platform, Api), Local> {
    let mut out = HashMap::new();
    for p in Platform::ALL {
        for a in Api::ALL {
            let g = cfg.gate(p, a);
            let slots = FairSlots::new(g.concurrency.max(1) as usize);
            let interactive = (f64::from(g.concurrency) * g.interactive_share.max(0.1)).ceil();
            let interactive_slots = FairSlots::new((interactive as usize).max(2));
            out.insert(
                (p, a),
                Local {
                    cfg: g,
                    slots,
                    interactive_slots,
                    hold: Mutex::new(None),
                    latency: Arc::new(Mutex::new(latency::LatencyWindow::new(512))),
                    last_concurrency_warn: Mutex::new((None, None)),
                },
            );
        }
    }
    out
}

fn listed_platforms(cfg: &Config) -> Vec<Platform> {
    if cfg.platforms.is_empty() {
        Platform::ALL.to_vec()
    } else {
        cfg.platforms.keys().copied().collect()
    }
}

impl Gates {
    /// Fleet gates on the Redis at `redis_url`, under the default key namespace `sf`.
    pub async fn redis(cfg: &Config, redis_url: &str) -> Result<Gates, GateError> {
        Gates::redis_with_namespace(cfg, redis_url, DEFAULT_NAMESPACE).await
    }

    /// Fleet gates under another key namespace (tests sharing one Redis; separate fleets).
    pub async fn redis_with_namespace(
        cfg: &Config,
        redis_url: &str,
        namespace: &str,
    ) -> Result<Gates, GateError> {
        Gates::redis_on(cfg, redis_url, namespace, Clock::system()).await
    }

    /// Fleet gates whose host-side readings (the Redis server's clock is this host's plus the
    /// offset measured at connect; pauses, settle deadlines) come from `clock`. Every booking
    /// still decides on the Redis server's own clock.
    pub async fn redis_on(
        cfg: &Config,
        redis_url: &str,
        namespace: &str,
        clock: Clock,
    ) -> Result<Gates, GateError> {
        let backend = shared::RedisGates::connect(redis_url, namespace, clock).await?;
        if backend.is_cluster() {
            // The app's daily count is one key over every gate of the app, so on a cluster it
            // would sit in another slot than the gate a script books (docs/design.md,
            // "Beyond one Redis").
            if let Some(p) = listed_platforms(cfg)
                .into_iter()
                .find(|p| cfg.platform(*p).and_then(|c| c.daily_quota).is_some())
            {
                return Err(GateError::AppQuotaOnCluster(p));
            }
        }
        let kick = backend.take_kick();
        let pauses = backend.pause_feed();
        let inner = Arc::new(Inner::new(cfg, locals(cfg), Box::new(backend), clock));
        background::start(&inner, kick, pauses);
        Ok(Gates { inner })
    }

    /// In-process gates (GCRA reservation + in-process AIMD): one process only, nothing shared.
    pub fn embedded(cfg: &Config) -> Gates {
        Gates::embedded_on(cfg, Clock::system())
    }

    /// In-process gates reading the time from `clock` (a test on paused time passes
    /// [`Clock::following_runtime`]).
    pub fn embedded_on(cfg: &Config, clock: Clock) -> Gates {
        let local = locals(cfg);
        let backend =
            embedded::EmbeddedGates::new(local.iter().map(|(k, l)| (*k, l.cfg.clone())), clock);
        Gates {
            inner: Arc::new(Inner::new(cfg, local, Box::new(backend), clock)),
        }
    }

    /// Where these gates read the time; what works through them (the gateway) reads it there
    /// too.
    pub(crate) fn clock(&self) -> Clock {
        self.inner.clock
    }

    /// Take a concurrency slot, then a token. `max_wait` bounds the whole wait (it is also
    /// capped by the gate's configured `max_wait`); a token further away is not taken and the
    /// refusal says when to come back. `lane` picks the slots and, when the gate keeps a
    /// share for interactive work, the part of the gate the call books in
    /// (docs/design.md, "Lanes"). A call of no shop: see [`Gates::acquire_as`].
    pub async fn acquire(
        &self,
        platform: Platform,
        api: Api,
        lane: Lane,
        max_wait: Duration,
    ) -> Result<Permit, GateRefusal> {
        self.acquire_as(platform, api, lane, None, max_wait).await
    }

    /// [`Gates::acquire`] for a call in `share`: the slots of this process go to the shops
    /// with callers waiting in turn, and a fleet gate paces each shop at its weighted part of
    /// the rate while other shops book too (docs/design.md, "Fair shares at the gate"). A
    /// call ahead of its shop's pace waits for its turn, without its slot.
    pub async fn acquire_as(
        &self,
        platform: Platform,
        api: Api,
        lane: Lane,
        share: Option<&GateShare>,
        max_wait: Duration,
    ) -> Result<Permit, GateRefusal> {
        let clock = self.inner.clock;
        let start = clock.now();
        let local = self.inner.local_gate(platform, api);
        let deadline = start + max_wait.min(local.cfg.max_wait);
        let slots = match lane {
            Lane::Interactive => &local.interactive_slots,
            Lane::Bulk => &local.slots,
        };
        let (shop, weight) = share.map_or(("", 1), |s| (s.shop.as_str(), s.weight));
        // A fleet call that wakes too late for the second it was booked in books again (at
        // most a few times; each is a round trip only for such a late waker).
        let mut rebooks = 0;
        let slot = 'booked: loop {
            // A call for a shop waits its turn in the shops' line as long as it may wait at
            // the gate, not a second: the line is the shops' fair order, and a caller that
            // left it early would hand its item back only to queue again.
            let left = deadline.saturating_duration_since(clock.now());
            let slot_wait = if share.is_some() {
                left
            } else {
                SLOT_WAIT.min(left)
            };
            let slot = match tokio::time::timeout(slot_wait, slots.acquire(shop, weight)).await {
                Ok(slot) => slot,
                Err(_) => return Err(GateRefusal::Busy),
            };
            if let Some(refusal) = local.held(clock.now()) {
                return Err(refusal);
            }
            loop {
                let left = deadline.saturating_duration_since(clock.now());
                let booking = if rebooks == 0 {
                    Booking::First
                } else {
                    Booking::Again
                };
                let answer = self
                    .inner
                    .backend
                    .reserve(
                        platform,
                        api,
                        &local.cfg,
                        Ask {
                            lane,
                            share,
                            max_wait: left,
                            booking,
                        },
                    )
                    .await;
                match answer {
                    Reservation::Now => break 'booked slot,
                    // Reserved: sleep exactly once, holding the slot (slot first, then token).
                    Reservation::After(wait, booked) => {
                        tokio::time::sleep(wait).await;
                        // Paused while asleep (reported here, or announced by another
                        // worker): the token is forfeit rather than spent into a ban.
                        if let Some(refusal) = local.held(clock.now()) {
                            return Err(refusal);
                        }
                        let late = self
                            .inner
                            .backend
                            .woke_late(booked, local.cfg.boundary_band_ms);
                        if !late || rebooks >= MAX_REBOOKS {
                            break 'booked slot;
                        }
                        rebooks += 1;
                    }
                    // Ahead of the shop's pace: the slot goes to the next shop's caller while
                    // this one waits for its shop's turn.
                    Reservation::ShareWait(wait) => {
                        drop(slot);
                        if wait > deadline.saturating_duration_since(clock.now()) {
                            return Err(GateRefusal::RetryAt(wait));
                        }
                        tokio::time::sleep(wait).await;
                        continue 'booked;
                    }
                    Reservation::Refused(retry) => return Err(GateRefusal::RetryAt(retry)),
                    Reservation::Paused(remaining, reason) => {
                        return Err(GateRefusal::Paused { remaining, reason })
                    }
                    Reservation::Unreachable(retry_in, error, timed_out) => {
                        return Err(GateRefusal::Unreachable {
                            retry_in,
                            error,
                            timed_out,
                        })
                    }
                }
            }
        };
        // In one process, late wakers must not put more than a second's worth of calls into
        // one clock second (second_guard.rs). A fleet gate made the same check when
        // acquire.lua booked the call, on the Redis server's clock.
        while let Some(wait) = self.inner.backend.send_wait(platform, api, lane) {
            tokio::time::sleep(wait).await;
            if let Some(refusal) = local.held(clock.now()) {
                return Err(refusal);
            }
        }
        Ok(Permit {
            _slot: slot,
            waited: clock.now().saturating_duration_since(start),
            granted: clock.now(),
            clock,
            latency: local.latency.clone(),
        })
    }

    /// Record how a call that left just now ended. See [`Gates::report_sent`].
    pub fn report(&self, platform: Platform, api: Api, outcome: GateOutcome) {
        self.report_sent(platform, api, outcome, self.inner.clock.wall());
    }

    /// Record how a call that left at `sent` (wall clock) ended. Never blocks: successes are
    /// batched; a rate-limit answer is written at once. Every outcome counts one call for the
    /// daily quota. The send time places the outcome in the platform's second it was counted
    /// in (docs/design.md, "Limit discovery").
    pub fn report_sent(
        &self,
        platform: Platform,
        api: Api,
        outcome: GateOutcome,
        sent: std::time::SystemTime,
    ) {
        let day = self.inner.local_gate(platform, api).cfg.day;
        let pause = match &outcome {
            GateOutcome::RateLimited {
                quota_spent: true,
                app_wide,
                ..
            } => {
                let now = self.inner.clock.utc();
                let until = day.next_reset(now);
                let d = (until - now).to_std().unwrap_or(Duration::from_secs(60));
                let whose = if *app_wide {
                    "the app's daily quota"
                } else {
                    "daily quota"
                };
                let reason = format!(
                    "{whose} spent; resets at {}",
                    until.format("%Y-%m-%d %H:%M:%SZ")
                );
                if *app_wide {
                    // The app's count is one for all its APIs: every other gate of the
                    // platform stops too, without a call of its own into the refusal.
                    for (&(p, a), local) in &self.inner.local {
                        if p == platform && a != api {
                            local.hold_for(self.inner.clock.now(), d, &reason);
                            self.inner.backend.pause(p, a, d, reason.clone());
                        }
                    }
                }
                Some((d, reason))
            }
            GateOutcome::RateLimited { ban: Some(d), .. } => {
                Some((*d, format!("platform ban for {} s", d.as_secs_f64().ceil())))
            }
            _ => None,
        };
        // A spent quota is not a rate signal; a ban or a plain limit answer is.
        let hit = matches!(
            outcome,
            GateOutcome::RateLimited {
                quota_spent: false,
                ..
            }
        );
        let success = matches!(outcome, GateOutcome::Success);
        if let Some((d, reason)) = &pause {
            self.inner
                .local_gate(platform, api)
                .hold_for(self.inner.clock.now(), *d, reason);
        }
        let noted = Noted {
            success,
            hit,
            pause,
        };
        if let Some(used) = self.inner.backend.note(platform, api, noted, sent) {
            self.inner.burn_check(platform, api, used);
        }
    }

    /// Write batched outcomes now (fleet mode; a no-op when embedded). Call before exit.
    pub async fn flush(&self) {
        self.inner.backend.flush(self.inner.as_ref()).await;
    }

    /// The state of every gate of the configured platforms.
    pub async fn snapshot(&self) -> Result<Vec<GateSnapshot>, GateError> {
        let mut out = Vec::new();
        for &p in &self.inner.platforms {
            for a in Api::ALL {
                out.push(self.snapshot_of(p, a).await?);
            }
        }
        Ok(out)
    }

    /// The app's daily quota on `platform` (`[platforms.P] daily_quota`), if set, with the
    /// calls every gate of the app booked today and the burn ratio.
    async fn app_day(&self, platform: Platform) -> Result<Option<AppDay>, GateError> {
        let Some(cfg) = self
            .inner
            .local
            .iter()
            .find(|((p, _), _)| *p == platform)
            .map(|(_, l)| &l.cfg)
        else {
            return Ok(None);
        };
        let Some(quota) = cfg.app_quota else {
            return Ok(None);
        };
        let booked = self.inner.backend.app_booked(platform, cfg).await?;
        Ok(Some(AppDay {
            platform,
            quota,
            booked,
            burn: cfg.day.burn_ratio(booked, quota, self.inner.clock.utc()),
        }))
    }

    /// Bring today's counts back to what the ledger counted: `calls` holds each (platform,
    /// api)'s calls of today's platform day (GMT+8), [`DayCalls`]. Gate state that lost writes
    /// (a Redis failover, a restart) would otherwise let the daily quota and pacing spend
    /// those calls again. Gates on a compressed test day are left as they are (the ledger
    /// counts whole minutes of the platform day). Returns how many counters were raised.
    pub async fn floor_today(&self, calls: &[(Platform, Api, DayCalls)]) -> Result<u32, GateError> {
        let mut raised = 0;
        for &(platform, api, n) in calls {
            let Some(local) = self.inner.local.get(&(platform, api)) else {
                continue;
            };
            if !local.cfg.day.is_platform() {
                continue;
            }
            let app = calls.iter().filter(|(p, _, _)| *p == platform).fold(
                DayCalls::default(),
                |a, (_, _, c)| DayCalls {
                    all: a.all + c.all,
                    settled: a.settled + c.settled,
                },
            );
            raised += self
                .inner
                .backend
                .floor_today(platform, api, &local.cfg, n, app)
                .await?;
        }
        Ok(raised)
    }

    /// [`Gates::app_day`] of every configured platform whose app has a daily quota.
    pub async fn app_days(&self) -> Result<Vec<AppDay>, GateError> {
        let mut out = Vec::new();
        for &p in &self.inner.platforms {
            out.extend(self.app_day(p).await?);
        }
        Ok(out)
    }

    /// The state of one gate (one read of its shared state).
    pub async fn snapshot_of(
        &self,
        platform: Platform,
        api: Api,
    ) -> Result<GateSnapshot, GateError> {
        let local = self.inner.local_gate(platform, api);
        let mut snap = self
            .inner
            .backend
            .snapshot(platform, api, &local.cfg)
            .await?;
        if snap.p95_ms_measured.is_none() {
            snap.p95_ms_measured = local.p95_ms();
        }
        Ok(snap)
    }

    /// Set a gate's rate (and burst) for the whole fleet: in Redis, every worker obeys it on its
    /// next acquisition; the adaptive state restarts from the new rate (ceiling forgotten).
    /// Embedded: this process only.
    pub async fn set_rate(
        &self,
        platform: Platform,
        api: Api,
        rate: f64,
        burst: Option<f64>,
    ) -> Result<RateChange, GateError> {
        if !(rate > 0.0 && rate.is_finite()) {
            return Err(GateError::BadRate(rate));
        }
        if let Some(b) = burst {
            if !(b >= 1.0 && b.is_finite()) {
                return Err(GateError::BadBurst(b));
            }
        }
        let cfg = &self.inner.local_gate(platform, api).cfg;
        self.inner
            .backend
            .set_rate(platform, api, cfg, rate, burst)
            .await
    }
}

impl state::LocalGates for Inner {
    fn config(&self, platform: Platform, api: Api) -> &GateConfig {
        &self.local_gate(platform, api).cfg
    }

    fn p95_ms(&self, platform: Platform, api: Api) -> Option<u64> {
        self.local_gate(platform, api).p95_ms()
    }

    fn counted_today(&self, platform: Platform, api: Api, used: u64) {
        self.burn_check(platform, api, used);
    }
}

impl Inner {
    fn new(
        cfg: &Config,
        local: HashMap<(Platform, Api), Local>,
        backend: Box<dyn state::GateState>,
        clock: Clock,
    ) -> Inner {
        Inner {
            local,
            backend,
            burn: Mutex::new(HashMap::new()),
            started: clock.now(),
            platforms: listed_platforms(cfg),
            clock,
        }
    }

    fn local_gate(&self, platform: Platform, api: Api) -> &Local {
        // Every (platform, api) pair is built in `locals`, so the lookup cannot miss.
        &self.local[&(platform, api)]
    }

    fn elapsed_ms(&self) -> u64 {
        self.clock
            .now()
            .saturating_duration_since(self.started)
            .as_millis() as u64
    }

    /// Log the burn ratio of a gate when it is out of the 0.5..=1.3 band (rate-limited).
    fn burn_check(&self, platform: Platform, api: Api, used: u64) {
        let local = self.local_gate(platform, api);
        local.check_concurrency(platform, api, local.cfg.rate, self.clock.now());
        let Some(quota) = self.local_gate(platform, api).cfg.daily_quota else {
            return;
        };
        let burn = local.cfg.day.burn_ratio(used, quota, self.clock.utc());
        let now = self.elapsed_ms();
        let alert = {
            let mut watches = self.burn.lock().unwrap_or_else(|e| e.into_inner());
            watches
                .entry((platform, api))
                .or_insert_with(|| burn::BurnWatch::new(60_000))
                .observe(burn, now)
        };
        match alert {
            Some(burn::BurnAlert::High(b)) => tracing::warn!(
                %platform, %api, used, quota, burn = b,
                "daily quota burn {b:.2} > 1.3: the quota will not last the day"
            ),
            Some(burn::BurnAlert::Low(b)) => tracing::info!(
                %platform, %api, used, quota, burn = b,
                "daily quota burn {b:.2} < 0.5: headroom exists"
            ),
            None => {}
        }
    }
}
