//! Fleet-wide link state in Redis: breaker trips, retry-budget counters, the stale cache and
//! the probe lease. Every worker of a fleet points at the same Redis and namespace.
//!
//! - Breaker: a trip is published as a key `{ns}:link:{platform:api}:open` that expires with
//!   the open period (`SET PX`, only ever lengthened). The period is the tripping breaker's
//!   *current* open time (short at first, doubled by each failed probe), never `open_s`:
//!   other workers must not stay open longer than the worker that saw the outage. Its PTTL,
//!   on Redis's clock, is the time left; workers read it at most every [`BREAKER_CHECK`]
//!   per (platform, api), so a trip reaches every worker within that plus one round trip.
//!   Half-open runs locally in each worker once the key has expired (so a fleet of N sends
//!   at most N x probes).
//! - Retry budget: per-window INCR counters of calls and retries (window index from the
//!   worker's clock; a skew of a few hundred ms against a 10 s window does not matter).
//! - Stale cache: one string per (platform, api, key) holding JSON {stored_at_ms, body},
//!   expiring at the API's max stale age.
//! - Probe lease: `SET NX PX`, renewed only by its holder (compare in a script).
//!
//! When Redis cannot be reached the callers fall back to local state (see the gateway): a
//! fleet that loses Redis degrades to per-process breakers and budgets, not to no breakers.

use super::retry_budget::RetryBudgetPolicy;
use crate::clock::monotonic_now;
use crate::clock::Clock;
use crate::platform::{Api, Platform};
use chrono::{DateTime, TimeZone, Utc};
use redis::{AsyncCommands, Script};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How stale a worker's view of a fleet breaker may be.
pub(crate) const BREAKER_CHECK: Duration = Duration::from_millis(200);

const TRIP_SCRIPT: &str = include_str!("breaker_trip.lua");

const LEASE_SCRIPT: &str = include_str!("lease.lua");

const RELEASE_SCRIPT: &str = include_str!("lease_release.lua");

/// When a breaker key was read, and the open time it had left then.
type Seen = (Instant, Option<Duration>);

/// Logical calls not yet sent to Redis, and when the count was last sent.
type Uncounted = (u64, Instant);

/// A handle on the fleet's link state. Cheap to clone.
#[derive(Clone)]
pub struct FleetLink {
    conn: crate::redis_conn::Conn,
    namespace: String,
    trip: std::sync::Arc<Script>,
    lease: std::sync::Arc<Script>,
    release: std::sync::Arc<Script>,
    /// Last breaker reading per (platform, api): when, and the open time left then.
    seen: std::sync::Arc<Mutex<HashMap<(Platform, Api), Seen>>>,
    /// Logical calls not yet counted in Redis per (platform, api), and when the count was
    /// last sent ([`FleetLink::budget_record_call`]).
    uncounted: std::sync::Arc<Mutex<HashMap<(Platform, Api), Uncounted>>>,
    /// Where the retry budget's windows are read (wall-clock aligned, so every host counts
    /// into the same window).
    clock: Clock,
}

/// How long logical calls are counted locally before one `INCRBY` sends them: the retry
/// budget judges windows of seconds, and a count sent per call was a Redis round trip per
/// platform call (BENCHMARKS.md, "What a call costs in Redis"). Calls still uncounted when a
/// worker stops are lost, which only makes the budget stricter.
const BUDGET_COUNT_EVERY: Duration = Duration::from_millis(250);

impl std::fmt::Debug for FleetLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetLink")
            .field("namespace", &self.namespace)
            .finish()
    }
}

fn unix_ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Why the link layer's fleet state (Redis) could not be reached. Redis's error is part of
/// the message, never the URL's password (redis-rs does not print it).
#[derive(Debug, thiserror::Error)]
pub enum FleetLinkError {
    /// The Redis URL does not parse.
    #[error("bad redis url: {0}")]
    BadUrl(String),
    /// No connection to Redis.
    #[error("cannot connect to redis for the link layer: {0}")]
    Connect(String),
}

/// How long a breaker, lease or stale-cache command may take to answer (the crate's 500 ms
/// default is shorter than a loaded server's pauses).
const FLEET_REPLY_TIMEOUT: Duration = Duration::from_secs(2);

impl FleetLink {
    /// Connect to the fleet's Redis; keys live under `namespace` (the gates' namespace, `sf`).
    pub async fn connect(url: &str, namespace: &str) -> Result<FleetLink, FleetLinkError> {
        let client =
            crate::redis_conn::target(url).map_err(|e| FleetLinkError::BadUrl(e.to_string()))?;
        let conn = client
            .connect(FLEET_REPLY_TIMEOUT)
            .await
            .map_err(|e| FleetLinkError::Connect(e.to_string()))?;
        Ok(FleetLink {
            conn,
            namespace: namespace.to_string(),
            trip: std::sync::Arc::new(Script::new(TRIP_SCRIPT)),
            lease: std::sync::Arc::new(Script::new(LEASE_SCRIPT)),
            release: std::sync::Arc::new(Script::new(RELEASE_SCRIPT)),
            seen: Default::default(),
            uncounted: Default::default(),
            clock: Clock::system(),
        })
    }

    /// The same link reading the time from `clock`.
    pub fn on_clock(mut self, clock: Clock) -> FleetLink {
        self.clock = clock;
        self
    }

    fn key(&self, platform: Platform, api: Api, what: &str) -> String {
        format!("{}:link:{{{platform}:{api}}}:{what}", self.namespace)
    }

    /// Time left on a fleet-published trip, read at most every [`BREAKER_CHECK`].
    pub async fn breaker_open(
        &self,
        platform: Platform,
        api: Api,
    ) -> redis::RedisResult<Option<Duration>> {
        let now = monotonic_now();
        if let Ok(seen) = self.seen.lock() {
            if let Some(&(at, left)) = seen.get(&(platform, api)) {
                if now.duration_since(at) < BREAKER_CHECK {
                    return Ok(left
                        .map(|l| l.saturating_sub(now.duration_since(at)))
                        .filter(|l| !l.is_zero()));
                }
            }
        }
        let mut conn = self.conn.clone();
        let pttl: i64 = conn.pttl(self.key(platform, api, "open")).await?;
        let left = (pttl > 0).then(|| Duration::from_millis(pttl as u64));
        if let Ok(mut seen) = self.seen.lock() {
            seen.insert((platform, api), (now, left));
        }
        Ok(left)
    }

    /// Publish a trip: every worker refuses calls to (platform, api) for `open_for`, the
    /// breaker's current open time.
    pub(crate) async fn publish_trip(
        &self,
        platform: Platform,
        api: Api,
        open_for: Duration,
        holder: &str,
    ) -> redis::RedisResult<()> {
        let mut conn = self.conn.clone();
        let ms = open_for.as_millis().max(1) as u64;
        let left: i64 = self
            .trip
            .key(self.key(platform, api, "open"))
            .arg(ms)
            .arg(holder)
            .invoke_async(&mut conn)
            .await?;
        if let Ok(mut seen) = self.seen.lock() {
            seen.insert(
                (platform, api),
                (
                    monotonic_now(),
                    Some(Duration::from_millis(left.max(0) as u64)),
                ),
            );
        }
        Ok(())
    }

    fn window_keys(&self, platform: Platform, api: Api, window: Duration) -> [String; 4] {
        let idx = unix_ms(self.clock.wall()) as u128 / window.as_millis().max(1);
        let k = |i: u128, what: &str| self.key(platform, api, &format!("rb:{i}:{what}"));
        [
            k(idx, "calls"),
            k(idx, "retries"),
            k(idx.saturating_sub(1), "calls"),
            k(idx.saturating_sub(1), "retries"),
        ]
    }

    /// Count one logical call for the retry budget: counted here, sent to Redis with the
    /// others of the last [`BUDGET_COUNT_EVERY`] by the first call after it.
    pub(crate) async fn budget_record_call(
        &self,
        platform: Platform,
        api: Api,
        window: Duration,
    ) -> redis::RedisResult<()> {
        let due = {
            let Ok(mut uncounted) = self.uncounted.lock() else {
                return Ok(());
            };
            let now = monotonic_now();
            let entry = uncounted.entry((platform, api)).or_insert((0, now));
            entry.0 += 1;
            if now.duration_since(entry.1) < BUDGET_COUNT_EVERY {
                return Ok(());
            }
            let n = entry.0;
            *entry = (0, now);
            n
        };
        let [calls, ..] = self.window_keys(platform, api, window);
        let mut conn = self.conn.clone();
        let ttl = (window.as_millis() as i64) * 3;
        redis::pipe()
            .incr(&calls, due)
            .ignore()
            .pexpire(&calls, ttl)
            .ignore()
            .query_async::<()>(&mut conn)
            .await
    }

    /// Ask the fleet for one retry; counted when granted.
    pub(crate) async fn budget_try_retry(
        &self,
        platform: Platform,
        api: Api,
        policy: &RetryBudgetPolicy,
    ) -> redis::RedisResult<bool> {
        let [calls, retries, prev_calls, prev_retries] =
            self.window_keys(platform, api, policy.window);
        let mut conn = self.conn.clone();
        let ttl = (policy.window.as_millis() as i64) * 3;
        // The calls counted here but not yet sent go with the question, so the judgement
        // sees them (no round trip of their own).
        let uncounted = self
            .uncounted
            .lock()
            .ok()
            .and_then(|mut u| {
                u.get_mut(&(platform, api))
                    .map(|e| std::mem::replace(e, (0, monotonic_now())).0)
            })
            .unwrap_or(0);
        // Take the retry first, then judge: two workers deciding at once cannot both slip
        // past the limit.
        let (_, _, mine, _, c, pc, pr): (u64, (), u64, (), Option<u64>, Option<u64>, Option<u64>) =
            redis::pipe()
                .incr(&calls, uncounted)
                .pexpire(&calls, ttl)
                .incr(&retries, 1)
                .pexpire(&retries, ttl)
                .get(&calls)
                .get(&prev_calls)
                .get(&prev_retries)
                .query_async(&mut conn)
                .await?;
        let total_calls = c.unwrap_or(0) + pc.unwrap_or(0);
        let earlier = mine.saturating_sub(1) + pr.unwrap_or(0);
        if policy.allows(total_calls, earlier) {
            Ok(true)
        } else {
            let _: i64 = conn.decr(&retries, 1).await?;
            Ok(false)
        }
    }

    /// Keep the last good response of (platform, api, key) for `max_age`.
    pub(crate) async fn stale_put(
        &self,
        platform: Platform,
        api: Api,
        key: &str,
        body_json: &str,
        stored_at: DateTime<Utc>,
        max_age: Duration,
    ) -> redis::RedisResult<()> {
        let value =
            serde_json::json!({ "stored_at_ms": stored_at.timestamp_millis(), "body": body_json })
                .to_string();
        let mut conn = self.conn.clone();
        let ms = max_age.as_millis().max(1) as u64;
        conn.pset_ex(self.key(platform, api, &format!("stale:{key}")), value, ms)
            .await
    }

    /// The last good response of (platform, api, key) and when it was stored.
    pub(crate) async fn stale_get(
        &self,
        platform: Platform,
        api: Api,
        key: &str,
    ) -> redis::RedisResult<Option<(String, DateTime<Utc>)>> {
        let mut conn = self.conn.clone();
        let raw: Option<String> = conn
            .get(self.key(platform, api, &format!("stale:{key}")))
            .await?;
        Ok(raw.and_then(|text| {
            let v: serde_json::Value = serde_json::from_str(&text).ok()?;
            let at = Utc
                .timestamp_millis_opt(v.get("stored_at_ms")?.as_i64()?)
                .single()?;
            Some((v.get("body")?.as_str()?.to_string(), at))
        }))
    }

    fn lease_key(&self, name: &str) -> String {
        format!("{}:link:lease:{name}", self.namespace)
    }

    /// Take or renew the lease `name` for `ttl`; true when `holder` holds it afterwards.
    pub async fn lease(&self, name: &str, holder: &str, ttl: Duration) -> redis::RedisResult<bool> {
        let mut conn = self.conn.clone();
        let got: i64 = self
            .lease
            .key(self.lease_key(name))
            .arg(holder)
            .arg(ttl.as_millis().max(1) as u64)
            .invoke_async(&mut conn)
            .await?;
        Ok(got == 1)
    }

    /// Give the lease up if `holder` has it.
    pub async fn release(&self, name: &str, holder: &str) -> redis::RedisResult<()> {
        let mut conn = self.conn.clone();
        let _: i64 = self
            .release
            .key(self.lease_key(name))
            .arg(holder)
            .invoke_async(&mut conn)
            .await?;
        Ok(())
    }
}
