//! Fleet gates: state in Redis, one Lua script call per acquisition, on the server's clock.
//!
//! `redis::Script::invoke_async` sends EVALSHA and, on a NOSCRIPT error (script cache flushed,
//! failover to a replica without it), loads the script and retries once (redis 1.8
//! `ScriptInvocation::invoke_async`), so a SCRIPT FLUSH costs one extra round trip, not an error.

use super::admitted::SLOT_MS;
use super::aimd::AimdParams;
use super::state::{Ask, Booking, LocalGates, Noted, Reservation};
use super::{bulk_rate, GateError, GateLimits, GateSnapshot, Lane, RateChange, FLUSH_BATCH};
use crate::clock::{elapsed_since, monotonic_now, Clock};
use crate::config::GateConfig;
use crate::platform::{Api, Platform};
use redis::Script;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Key namespace of production gates.
pub const DEFAULT_NAMESPACE: &str = "sf";

/// How long after a rejection the flusher keeps writing (empty batches if need be), so the
/// measurement it opened settles on time although the gate is paused (settle_ms + margin).
const SETTLE_FLUSH: Duration = Duration::from_millis(1_500);
/// How long after a move to a new primary (Sentinel) a rejection is not taken as a reading of
/// the platform's limit: the seconds whose bookings and reports may be missing there.
const MOVE_SETTLE: Duration = Duration::from_secs(3);

/// Successes by send slot as report.lua reads them: `slot:count,...`.
fn slot_list(slots: &BTreeMap<u64, u32>) -> String {
    slots
        .iter()
        .map(|(slot, n)| format!("{slot}:{n}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Daily quota counters outlive their day by a day (late reports, `gate show` after midnight).
const QUOTA_TTL_S: u64 = 2 * 86_400;

/// How long a gate's command may take to answer. A reply lost to the timeout may still have
/// booked a token (counted, never used): safe, but the crate's 500 ms default made it happen
/// under an ordinary load.
const GATE_REPLY_TIMEOUT: Duration = Duration::from_secs(2);

/// The Redis keys of one gate. The `{platform:api}` hash tag puts them all in one cluster slot,
/// which a script touching several keys requires.
#[derive(Debug, Clone, PartialEq)]
pub struct GateKeys {
    /// GCRA bucket: hash {tat (us), iv (us per call)}.
    pub bucket: String,
    /// Adaptive state: hash {rate, ceiling, last_hit (us), succ}.
    pub aimd: String,
    /// Pause: hash {until (us), reason}, expiring with the pause.
    pub pause: String,
    /// Operator override from `gate set`: hash {rate, burst, at}.
    pub conf: String,
    /// Prefix of the daily quota counters: `<prefix><day>` (`time::QuotaDay::label`).
    pub(crate) quota_prefix: String,
    /// Prefix of the counters of calls booked each day (pacing, acquire.lua).
    pub(crate) booked_prefix: String,
    /// Prefix of the reporters' high-water marks of report.lua: one key per reporting
    /// process, holding the sequence number of its last batch applied.
    pub(crate) reporter_prefix: String,
    /// The shops booking bulk calls lately: sorted set, shop -> until when it counts (us,
    /// server clock).
    pub shares: String,
    /// Those shops' weights, their sum (field `_sum`) and each one's next turn (`t:<shop>`).
    pub share_weights: String,
}

impl GateKeys {
    /// Key of the daily quota counter (calls counted) of the day labelled `day`
    /// (`time::QuotaDay::label`).
    pub fn quota(&self, day: &str) -> String {
        format!("{}{day}", self.quota_prefix)
    }

    /// Key of the last batch of `reporter` that report.lua applied: a batch sent again after
    /// a lost reply is applied once, and a gate keeps one such key per reporting process (it
    /// expires 10 minutes after the process's last report), however long the fleet runs.
    pub fn reporter(&self, reporter: &str) -> String {
        format!("{}{reporter}", self.reporter_prefix)
    }

    /// Key of the counter of calls booked on the day labelled `day`.
    pub fn booked(&self, day: &str) -> String {
        format!("{}{day}", self.booked_prefix)
    }
}

/// Key of the counter of the calls every gate of `platform`'s app booked on the day labelled
/// `day` (the app's daily quota: one count over all its APIs). Outside any gate's hash tag, so
/// a Redis Cluster would need it in the same slot as every gate of the app (not supported).
pub fn app_booked_key(namespace: &str, platform: Platform, day: &str) -> String {
    format!("{namespace}:app:{platform}:booked:{day}")
}

/// The pub/sub channel on which a new pause of any gate of `namespace` is announced:
/// `gate|pause ms|reason`.
pub(crate) fn pause_channel(namespace: &str) -> String {
    format!("{namespace}:gates:pause")
}

/// Keys of the gate (platform, api) under `namespace`, e.g. `sf:{taobao:item_get}:tat`.
pub fn gate_keys(namespace: &str, platform: Platform, api: Api) -> GateKeys {
    let base = format!("{namespace}:{{{platform}:{api}}}");
    GateKeys {
        bucket: format!("{base}:tat"),
        aimd: format!("{base}:aimd"),
        pause: format!("{base}:pause"),
        conf: format!("{base}:conf"),
        quota_prefix: format!("{base}:quota:"),
        booked_prefix: format!("{base}:booked:"),
        reporter_prefix: format!("{base}:reported:"),
        shares: format!("{base}:shares"),
        share_weights: format!("{base}:share_weights"),
    }
}

const SET_SCRIPT: &str = include_str!("set.lua");

/// Outcomes of one gate not yet written.
#[derive(Debug, Default)]
struct Pending {
    successes: u32,
    calls: u64,
    /// Successes by the 100 ms slot their call left in, on the Redis server's clock.
    slots: BTreeMap<u64, u32>,
    /// When the first rejected call of the batch left (ms, server clock).
    hit_sent_ms: Option<u64>,
    /// Rejected calls in the batch (the gate tells a lone rejection from a run of them).
    hits: u32,
    /// Pause deadline (local clock) and reason.
    pause: Option<(Instant, String)>,
    /// A measurement may be open in Redis until then: flush even with nothing to say, so it
    /// settles while the gate is paused and no answers come.
    settle_by: Option<Instant>,
}

impl Pending {
    fn is_empty(&self) -> bool {
        self.calls == 0
            && self.hit_sent_ms.is_none()
            && self.pause.is_none()
            && self.settle_by.is_none_or(|t| t < monotonic_now())
    }
    fn merge(&mut self, other: Pending) {
        self.successes += other.successes;
        self.calls += other.calls;
        for (slot, n) in other.slots {
            *self.slots.entry(slot).or_default() += n;
        }
        self.hits = self.hits.saturating_add(other.hits);
        self.hit_sent_ms = match (self.hit_sent_ms, other.hit_sent_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.settle_by = self.settle_by.max(other.settle_by);
        if let Some((until, reason)) = other.pause {
            if self.pause.as_ref().is_none_or(|(u, _)| *u < until) {
                self.pause = Some((until, reason));
            }
        }
    }
}

pub(crate) struct RedisGates {
    conn: crate::redis_conn::Conn,
    namespace: String,
    acquire: Script,
    report: Script,
    set: Script,
    floor: Script,
    pending: Mutex<HashMap<(Platform, Api), Pending>>,
    /// Batches whose write failed after it may have run (a reply lost to a timeout or a
    /// broken connection): sent again under the same sequence number, which report.lua
    /// applies once. A gate with a batch in doubt sends no newer one until it is settled, so
    /// each gate applies this process's batches in order.
    in_doubt: Mutex<HashMap<(Platform, Api), (u64, Pending)>>,
    /// This process's name as a reporter (report.lua keeps its last applied batch).
    reporter: String,
    /// The next batch's sequence number (increasing for the process's life).
    next_batch: AtomicU64,
    /// One flush at a time (the flusher and an explicit [`super::Gates::flush`]): a
    /// reporter's batches must reach report.lua in the order of their numbers.
    flushing: tokio::sync::Mutex<()>,
    kick: mpsc::UnboundedSender<()>,
    kick_rx: Mutex<Option<mpsc::UnboundedReceiver<()>>>,
    client: crate::redis_conn::RedisTarget,
    /// On a Redis Cluster every script keeps to one gate's slot (the app's key is left out).
    cluster: bool,
    /// Last time (ms since start) an error of the gate state was logged: at most one per 10 s.
    last_error_log: AtomicU64,
    started: Instant,
    /// Where this host reads the time.
    clock: Clock,
    /// Redis server clock minus this host's, in ms (measured at connect and by snapshots):
    /// the quota day is the server's day, so hosts with skewed clocks count into one key.
    clock_offset_ms: std::sync::atomic::AtomicI64,
}

/// Milliseconds since the epoch of a Redis `TIME` answer.
fn time_ms((secs, micros): (u64, u64)) -> i64 {
    i64::try_from(secs * 1000 + micros / 1000).unwrap_or(i64::MAX)
}

impl RedisGates {
    /// Now on the Redis server's clock (this host's clock plus the measured offset).
    fn server_now(&self) -> chrono::DateTime<chrono::Utc> {
        let offset = self.clock_offset_ms.load(Ordering::Relaxed);
        self.clock.utc() + chrono::Duration::milliseconds(offset)
    }

    fn note_server_time(&self, server_ms: i64) {
        let local = self.clock.utc().timestamp_millis();
        self.clock_offset_ms
            .store(server_ms - local, Ordering::Relaxed);
    }

    pub(crate) async fn connect(
        url: &str,
        namespace: &str,
        clock: Clock,
    ) -> Result<RedisGates, GateError> {
        let client = crate::redis_conn::target(url).map_err(GateError::BadUrl)?;
        let mut conn = client
            .connect(GATE_REPLY_TIMEOUT)
            .await
            .map_err(GateError::Connect)?;
        let server: (u64, u64) = redis::cmd("TIME")
            .query_async(&mut conn)
            .await
            .map_err(GateError::Clock)?;
        let offset = time_ms(server) - clock.utc().timestamp_millis();
        let (kick, rx) = mpsc::unbounded_channel();
        Ok(RedisGates {
            clock,
            clock_offset_ms: std::sync::atomic::AtomicI64::new(offset),
            conn,
            namespace: namespace.to_string(),
            acquire: Script::new(include_str!("acquire.lua")),
            report: Script::new(include_str!("report.lua")),
            set: Script::new(SET_SCRIPT),
            floor: Script::new(include_str!("floor.lua")),
            pending: Mutex::new(HashMap::new()),
            in_doubt: Mutex::new(HashMap::new()),
            reporter: ulid::Ulid::new().to_string(),
            next_batch: AtomicU64::new(1),
            flushing: tokio::sync::Mutex::new(()),
            kick,
            kick_rx: Mutex::new(Some(rx)),
            cluster: client.is_cluster(),
            client,
            last_error_log: AtomicU64::new(0),
            started: monotonic_now(),
        })
    }

    fn keys(&self, platform: Platform, api: Api) -> GateKeys {
        gate_keys(&self.namespace, platform, api)
    }

    fn log_error(&self, what: &str, err: &redis::RedisError) {
        let now = elapsed_since(self.started).as_millis() as u64 + 10_000;
        let last = self.last_error_log.load(Ordering::Relaxed);
        if now.saturating_sub(last) >= 10_000
            && self
                .last_error_log
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tracing::warn!(error = %err, "gate state in redis: {what} failed");
        }
    }

    /// Whether the gates live on a Redis Cluster.
    pub(crate) fn is_cluster(&self) -> bool {
        self.cluster
    }

    /// The flusher's wake-up channel (taken once, by the flusher).
    pub(crate) fn take_kick(&self) -> Option<mpsc::UnboundedReceiver<()>> {
        self.kick_rx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// Where pause announcements are heard: the client and the channel.
    pub(crate) fn pause_feed(&self) -> (crate::redis_conn::RedisTarget, String) {
        (self.client.clone(), pause_channel(&self.namespace))
    }

    /// One script call: go now, go after T (reserved), refused with retry-at, or paused.
    pub(crate) async fn reserve(
        &self,
        platform: Platform,
        api: Api,
        cfg: &GateConfig,
        ask: Ask<'_>,
    ) -> Reservation {
        let Ask {
            lane,
            share: shop_share,
            max_wait,
            booking,
        } = ask;
        let k = self.keys(platform, api);
        let share = cfg.interactive_share;
        // With a share kept for interactive work each lane books in a bucket of its own
        // (acquire.lua); bulk work is also paced by the daily budgets (throttle::pacing).
        let (bucket, part) = match (share > 0.0, lane) {
            (false, _) => (k.bucket.clone(), 1.0),
            (true, Lane::Interactive) => (format!("{}:interactive", k.bucket), share),
            (true, Lane::Bulk) => (k.bucket.clone(), bulk_rate(1.0, share)),
        };
        let day = cfg.day.label(self.server_now());
        let mut inv = self.acquire.prepare_invoke();
        inv.key(&bucket)
            .key(&k.aimd)
            .key(&k.pause)
            .key(&k.conf)
            .key(k.quota(&day))
            .key(k.booked(&day));
        // Only with an app quota: the app's key lies outside the gate's slot (acquire.lua
        // reads KEYS[7] only then; a cluster refuses app quotas at start).
        let mut keys = 6;
        if cfg.app_quota.is_some() {
            inv.key(app_booked_key(&self.namespace, platform, &day));
            keys += 1;
        }
        // A bulk call for a shop books at its shop's pace (acquire.lua: the shops booking
        // lately, their weights and turns).
        let shares_at = match shop_share.filter(|_| lane == Lane::Bulk) {
            Some(_) => {
                inv.key(&k.shares).key(&k.share_weights);
                keys + 1
            }
            None => 0,
        };
        inv.arg(cfg.rate)
            .arg(cfg.burst)
            .arg(max_wait.as_micros() as u64)
            .arg("")
            .arg(cfg.boundary_band_ms)
            .arg(part)
            .arg(u8::from(lane == Lane::Bulk))
            .arg(cfg.pacing.code())
            .arg(cfg.daily_quota.unwrap_or(0))
            .arg(cfg.app_quota.unwrap_or(0))
            .arg(u64::from(cfg.day.seconds()) * 1000)
            .arg(share)
            .arg(QUOTA_TTL_S.max(2 * u64::from(cfg.day.seconds())))
            .arg(u8::from(booking == Booking::Again))
            .arg(shop_share.map_or("", |s| s.shop.as_str()))
            .arg(shop_share.map_or(1, |s| s.weight))
            .arg(shares_at);
        let mut conn = self.conn.clone();
        match inv
            .invoke_async::<(i64, i64, String, String, u64)>(&mut conn)
            .await
        {
            Ok((code, wait_us, reason, _rate, second)) => {
                let wait = Duration::from_micros(wait_us.max(0) as u64);
                match code {
                    0 => Reservation::Now,
                    1 => Reservation::After(wait, Some(second)),
                    2 => Reservation::Refused(wait),
                    4 => Reservation::ShareWait(wait.max(Duration::from_millis(1))),
                    _ => Reservation::Paused(wait, reason),
                }
            }
            Err(e) => {
                self.log_error("acquire", &e);
                // Without the shared state no worker may assume its share: hold the call back
                // briefly, like a pause, so the task is re-queued instead of failing.
                Reservation::Unreachable(Duration::from_secs(1), e.to_string(), e.is_timeout())
            }
        }
    }

    /// Whether a call booked in clock second `second` (server clock) would now leave in its
    /// last `band_ms` or later: it woke too late, and would land on the next second's calls.
    pub(crate) fn missed_booking(&self, second: u64, band_ms: u64) -> bool {
        let now = u64::try_from(self.server_now().timestamp_millis()).unwrap_or(0);
        now >= (second * 1000 + 1000).saturating_sub(band_ms.max(1))
    }

    /// Record one outcome of a call that left at `sent` for the next flush; a hit or a pause
    /// is flushed at once.
    pub(crate) fn note(
        &self,
        platform: Platform,
        api: Api,
        outcome: Noted,
        sent: std::time::SystemTime,
    ) {
        let Noted {
            success,
            hit,
            pause,
        } = outcome;
        // A rejection just after the connection moved to a new primary measures nothing: the
        // new primary may lack the old one's last bookings and reports (the burst that drew
        // the rejection, and the successes of its second), so a limit read from it would be
        // low and held for minutes. The ban still pauses the gate.
        let hit = hit && !self.conn.moved_within(MOVE_SETTLE);
        let urgent = hit || pause.is_some();
        let offset = self.clock_offset_ms.load(Ordering::Relaxed);
        let sent_ms = crate::time::wall_ms(sent).saturating_add_signed(offset);
        let kick = {
            let mut all = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            let p = all.entry((platform, api)).or_default();
            p.calls += 1;
            if success {
                p.successes += 1;
                *p.slots.entry(sent_ms / SLOT_MS).or_default() += 1;
            }
            p.merge(Pending {
                hit_sent_ms: hit.then_some(sent_ms),
                hits: u32::from(hit),
                pause: pause.map(|(d, r)| (monotonic_now() + d, r)),
                settle_by: hit.then(|| monotonic_now() + SETTLE_FLUSH),
                ..Pending::default()
            });
            urgent || p.successes == FLUSH_BATCH
        };
        if kick {
            // The flusher may be gone at shutdown; then nothing is left to do.
            let _ = self.kick.send(());
        }
    }

    /// Pause a gate fleet-wide at the next flush (at once), with no call to count.
    pub(crate) fn pause(&self, platform: Platform, api: Api, span: Duration, reason: String) {
        {
            let mut all = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            all.entry((platform, api)).or_default().merge(Pending {
                pause: Some((monotonic_now() + span, reason)),
                ..Pending::default()
            });
        }
        // The flusher may be gone at shutdown; then nothing is left to do.
        let _ = self.kick.send(());
    }

    fn take_pending(&self) -> Vec<((Platform, Api), Pending)> {
        let mut all = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let keys: Vec<_> = all
            .iter()
            .filter(|(_, p)| !p.is_empty())
            .map(|(k, _)| *k)
            .collect();
        keys.into_iter()
            .filter_map(|k| {
                let p = all.remove(&k)?;
                // Keep flushing (empty) until the measurement may have settled.
                if let Some(t) = p.settle_by.filter(|t| *t > monotonic_now()) {
                    all.entry(k).or_default().settle_by = Some(t);
                }
                Some((k, p))
            })
            .collect()
    }

    /// Write every gate's pending outcomes; a failed write is kept for the next flush under
    /// its sequence number, so a write that ran but whose reply was lost is not applied twice.
    pub(crate) async fn flush_all(&self, gates: &dyn LocalGates) {
        let _one_at_a_time = self.flushing.lock().await;
        let doubts: Vec<_> = self
            .in_doubt
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .collect();
        // Batches in doubt first: a gate whose batch is still in doubt afterwards keeps its
        // new outcomes pending (report.lua applies a reporter's batches only in order).
        for ((platform, api), (batch, p)) in doubts {
            if !self.send_batch(gates, platform, api, batch, &p).await {
                self.in_doubt
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert((platform, api), (batch, p));
            }
        }
        for ((platform, api), p) in self.take_pending() {
            let blocked = self
                .in_doubt
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains_key(&(platform, api));
            if blocked {
                let mut all = self.pending.lock().unwrap_or_else(|e| e.into_inner());
                all.entry((platform, api)).or_default().merge(p);
                continue;
            }
            let batch = self.next_batch.fetch_add(1, Ordering::Relaxed);
            if !self.send_batch(gates, platform, api, batch, &p).await {
                self.in_doubt
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert((platform, api), (batch, p));
            }
        }
    }

    /// Write one batch; false when the write failed (it may or may not have run).
    async fn send_batch(
        &self,
        gates: &dyn LocalGates,
        platform: Platform,
        api: Api,
        batch: u64,
        p: &Pending,
    ) -> bool {
        let cfg = gates.config(platform, api);
        let p95_ms = gates.p95_ms(platform, api);
        match self.write(platform, api, cfg, p, p95_ms, batch).await {
            Ok(out) => {
                gates.counted_today(platform, api, out.used);
                true
            }
            Err(e) => {
                self.log_error("report", &e);
                false
            }
        }
    }

    async fn write(
        &self,
        platform: Platform,
        api: Api,
        cfg: &GateConfig,
        p: &Pending,
        p95_ms: Option<u64>,
        batch: u64,
    ) -> redis::RedisResult<ReportOut> {
        let k = self.keys(platform, api);
        let params = AimdParams::new(cfg.rate, cfg.aimd_step, cfg.aimd_successes);
        let (pause_ms, reason) = match &p.pause {
            Some((until, reason)) => (
                until
                    .saturating_duration_since(monotonic_now())
                    .as_millis()
                    .max(1) as u64,
                reason.clone(),
            ),
            None => (0, String::new()),
        };
        let day = cfg.day.label(self.server_now());
        let mut inv = self.report.prepare_invoke();
        inv.key(&k.aimd)
            .key(&k.pause)
            .key(&k.conf)
            .key(k.quota(&day))
            .key(&k.bucket)
            .key(k.reporter(&self.reporter))
            .arg(p.successes)
            .arg(p.calls)
            .arg(p.hit_sent_ms.map(|t| t.to_string()).unwrap_or_default())
            .arg(pause_ms)
            .arg(reason)
            .arg(cfg.rate)
            .arg(params.step)
            .arg(params.successes)
            .arg(slot_list(&p.slots))
            .arg(params.ceiling_factor)
            .arg(params.hit_cooldown_ms)
            .arg(QUOTA_TTL_S)
            .arg("") // ARGV[13]: the server's clock
            .arg(cfg.burst)
            .arg(p95_ms.map(|v| v.to_string()).unwrap_or_default())
            .arg(pause_channel(&self.namespace))
            .arg(format!("{platform}:{api}"))
            .arg(params.decrease_margin)
            .arg(params.ceiling_hold_ms)
            .arg(super::aimd::MIN_MEASURED)
            .arg(params.settle_ms)
            .arg(params.probe_every_ms)
            .arg(p.hits)
            .arg(batch);
        let mut conn = self.conn.clone();
        let (used, rate, ceiling, effect): (i64, String, String, i64) =
            inv.invoke_async(&mut conn).await?;
        match effect {
            1 => tracing::info!(
                %platform, %api, rate = %rate,
                "rate limited: measuring the rejected second; rate cut fleet-wide to what it is known to have admitted"
            ),
            2 => tracing::info!(
                %platform, %api, rate = %rate,
                "rate limited: too few successes to measure; adaptive rate halved fleet-wide"
            ),
            3 => tracing::info!(
                %platform, %api, rate = %rate, ceiling = %ceiling,
                "the platform's limit measured from what it admitted in the rejected second; adaptive rate set just under it fleet-wide"
            ),
            _ => {}
        }
        Ok(ReportOut {
            used: used.max(0) as u64,
        })
    }

    pub(crate) async fn snapshot(
        &self,
        platform: Platform,
        api: Api,
        cfg: &GateConfig,
    ) -> Result<GateSnapshot, GateError> {
        let k = self.keys(platform, api);
        let day = cfg.day.label(self.server_now());
        let mut conn = self.conn.clone();
        type Row = (
            (u64, u64),
            (Option<f64>, Option<f64>),
            (Option<f64>, Option<f64>, Option<u64>, Option<f64>),
            (Option<String>, Option<String>),
            Option<u64>,
        );
        let (time, conf, aimd, pause, used): Row = redis::pipe()
            .cmd("TIME")
            .cmd("HMGET")
            .arg(&k.conf)
            .arg("rate")
            .arg("burst")
            .cmd("HMGET")
            .arg(&k.aimd)
            .arg("rate")
            .arg("ceiling")
            .arg("p95_ms")
            .arg("upper")
            .cmd("HMGET")
            .arg(&k.pause)
            .arg("until")
            .arg("reason")
            .cmd("GET")
            .arg(k.quota(&day))
            .query_async(&mut conn)
            .await
            .map_err(|error| GateError::Read {
                platform,
                api,
                error,
            })?;
        let now_us = time.0 * 1_000_000 + time.1;
        self.note_server_time(time_ms(time));
        let limits = GateLimits {
            rate: conf.0.unwrap_or(cfg.rate),
            burst: conf.1.unwrap_or(cfg.burst),
        };
        let min = super::aimd::min_rate_for(limits.rate);
        let adaptive_rate = aimd.0.unwrap_or(limits.rate).min(limits.rate).max(min);
        let pause = match (pause.0.and_then(|u| u.parse::<f64>().ok()), pause.1) {
            (Some(until), reason) if until > now_us as f64 => Some((
                Duration::from_micros((until - now_us as f64) as u64),
                reason.unwrap_or_default(),
            )),
            _ => None,
        };
        let used_today = used.unwrap_or(0);
        Ok(GateSnapshot {
            platform,
            api,
            limits,
            overridden: conf.0.is_some() || conf.1.is_some(),
            concurrency: cfg.concurrency,
            adaptive_rate,
            ceiling: aimd.1,
            upper: aimd.3,
            pause,
            used_today,
            daily_quota: cfg.daily_quota,
            burn: cfg
                .daily_quota
                .map(|q| cfg.day.burn_ratio(used_today, q, self.server_now())),
            p95_ms_measured: aimd.2,
        })
    }

    /// Bring today's counters of a gate (calls counted and booked) back to `calls`, and the
    /// app's booked counter to `app_calls` (floor.lua, [`super::DayCalls`]). Returns how many
    /// counters were raised.
    pub(crate) async fn floor_today(
        &self,
        platform: Platform,
        api: Api,
        cfg: &GateConfig,
        calls: super::DayCalls,
        app_calls: super::DayCalls,
    ) -> Result<u32, GateError> {
        let day = cfg.day.label(self.server_now());
        let k = self.keys(platform, api);
        let ttl = QUOTA_TTL_S.max(2 * u64::from(cfg.day.seconds()));
        let mut conn = self.conn.clone();
        let write = |error| GateError::Write {
            platform,
            api,
            error,
        };
        // The gate's counters in one call, the app's in another (another slot on a cluster).
        let mut raised: u32 = self
            .floor
            .key(k.quota(&day))
            .key(k.booked(&day))
            .arg(calls.all)
            .arg(calls.settled)
            .arg(calls.all)
            .arg(calls.settled)
            .arg(ttl)
            .invoke_async(&mut conn)
            .await
            .map_err(write)?;
        if cfg.app_quota.is_some() {
            let app: u32 = self
                .floor
                .key(app_booked_key(&self.namespace, platform, &day))
                .arg(app_calls.all)
                .arg(app_calls.settled)
                .arg(ttl)
                .invoke_async(&mut conn)
                .await
                .map_err(write)?;
            raised += app;
        }
        Ok(raised)
    }

    /// The calls every gate of `platform` booked today (the app's daily quota).
    pub(crate) async fn app_booked(
        &self,
        platform: Platform,
        cfg: &GateConfig,
    ) -> Result<u64, GateError> {
        let key = app_booked_key(&self.namespace, platform, &cfg.day.label(self.server_now()));
        let mut conn = self.conn.clone();
        let n: Option<u64> = redis::cmd("GET")
            .arg(key)
            .query_async(&mut conn)
            .await
            .map_err(|error| GateError::Read {
                platform,
                api: Api::ItemGet,
                error,
            })?;
        Ok(n.unwrap_or(0))
    }

    pub(crate) async fn set_rate(
        &self,
        platform: Platform,
        api: Api,
        cfg: &GateConfig,
        rate: f64,
        burst: Option<f64>,
    ) -> Result<RateChange, GateError> {
        let k = self.keys(platform, api);
        let mut inv = self.set.prepare_invoke();
        inv.key(&k.conf)
            .key(&k.aimd)
            .arg(rate)
            .arg(burst.map(|b| b.to_string()).unwrap_or_default())
            .arg(self.server_now().to_rfc3339());
        let mut conn = self.conn.clone();
        let (old_rate, old_burst): (String, String) =
            inv.invoke_async(&mut conn)
                .await
                .map_err(|error| GateError::Write {
                    platform,
                    api,
                    error,
                })?;
        let old = GateLimits {
            rate: old_rate.parse().unwrap_or(cfg.rate),
            burst: old_burst.parse().unwrap_or(cfg.burst),
        };
        Ok(RateChange {
            old,
            new: GateLimits {
                rate,
                burst: burst.unwrap_or(old.burst),
            },
        })
    }
}

struct ReportOut {
    used: u64,
}

/// Parse a pause announcement: `platform:api|ms|reason`.
fn parse_pause(payload: &str) -> Option<(Platform, Api, Duration, String)> {
    let mut parts = payload.splitn(3, '|');
    let (p, a) = parts.next()?.split_once(':')?;
    let ms: u64 = parts.next()?.parse().ok()?;
    let reason = parts.next().unwrap_or("paused").to_string();
    Some((
        p.parse().ok()?,
        a.parse().ok()?,
        Duration::from_millis(ms),
        reason,
    ))
}

/// Listens for pause announcements and hands each to `on_pause` (which holds the local gate,
/// so this process's reservations that are already granted and sleeping do not fire into a ban
/// another worker just met). Best effort (the script's pause check is the guarantee);
/// reconnects every second; ends once `gone` says the gates are gone.
pub(crate) fn spawn_pause_listener(
    (target, channel): (crate::redis_conn::RedisTarget, String),
    gone: impl Fn() -> bool + Send + 'static,
    on_pause: impl Fn(Platform, Api, Duration, String) + Send + 'static,
) {
    tokio::spawn(async move {
        use futures::StreamExt;
        while !gone() {
            // Through Sentinel, the primary of now (a failover ends the old subscription).
            let client = match target.client().await {
                Ok(c) => c,
                Err(_) => {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            let mut pubsub = match client.get_async_pubsub().await {
                Ok(p) => p,
                Err(_) => {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            if pubsub.subscribe(&channel).await.is_err() {
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            let mut messages = pubsub.into_on_message();
            loop {
                let msg = tokio::select! {
                    m = messages.next() => m,
                    // Wake up now and then to notice that the gates are gone.
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {
                        if gone() { return; }
                        continue;
                    }
                };
                let Some(msg) = msg else { break }; // connection lost: reconnect
                let Ok(payload) = msg.get_payload::<String>() else {
                    continue;
                };
                if gone() {
                    return;
                }
                if let Some((p, a, d, reason)) = parse_pause(&payload) {
                    on_pause(p, a, d, reason);
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pause_announcements_parse() {
        let (p, a, d, r) = parse_pause("taobao:item_get|1500|platform ban for 2 s").unwrap();
        assert_eq!(
            (p, a, d, r.as_str()),
            (
                Platform::Taobao,
                Api::ItemGet,
                Duration::from_millis(1500),
                "platform ban for 2 s"
            )
        );
        assert!(parse_pause("nope|1|x").is_none());
        assert!(parse_pause("taobao:item_get|x|y").is_none());
    }

    #[test]
    fn keys_share_one_hash_tag() {
        let k = gate_keys("sf", Platform::Jd, Api::OrderList);
        assert_eq!(k.bucket, "sf:{jd:order_list}:tat");
        for key in [
            &k.aimd,
            &k.pause,
            &k.conf,
            &k.quota_prefix,
            &k.booked_prefix,
            &k.shares,
            &k.share_weights,
        ] {
            assert!(key.starts_with("sf:{jd:order_list}:"), "{key}");
        }
    }
}
