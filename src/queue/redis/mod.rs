//! Fleet mode: an apalis 1.0 backend over a Redis Stream with one consumer group.
//!
//! Keys (the `{name}` hash tag keeps them in one cluster slot):
//! - `{name}:ready`   — sorted set of tasks waiting for a worker, score = start tag in the
//!   shops' weighted fair order ([`super::fair`]), member `a:ulid:json`; a fetch moves the
//!   smallest tags into the stream, so the stream's FIFO never decides whose task is next.
//! - `{name}:fair`    — hash: the fair order's virtual time `V`, each shop's finish tag
//!   `f:<shop>` and weight `w:<shop>`.
//! - `{name}:stream`  — handed-out and in-flight tasks; fields `d` (JSON [`TaskMsg`]) and `a`
//!   (attempts consumed before this entry). Group `workers`; each worker is a consumer named
//!   host-pid-ulid. An entry's attempt is `a + delivery count`, so a recovered orphan
//!   (XAUTOCLAIM bumps the delivery count) counts one attempt.
//! - `{name}:delayed` — sorted set, score = due time in Redis-server ms, member
//!   `a:ulid:json`; due members are moved into the ready set at most `promote_batch` per
//!   fetch.
//! - `{name}:dead`    — dead-letter stream, trimmed to `dead_max` entries.
//!
//! Acked entries are `XDEL`eted, so the stream holds only ready and in-flight tasks.
//! Each worker refreshes the idle time of its in-flight entries every heartbeat (`XCLAIM
//! JUSTID`, which leaves the delivery count alone); entries idle longer than
//! `heartbeat * missed_heartbeats` are taken over by any live worker.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use apalis::prelude::{BoxDynError, Task, WorkerBuilder, WorkerBuilderExt, WorkerContext};
use apalis_core::backend::finalize::Ephemeral;
use apalis_core::backend::{Backend, BackendConfig};
use apalis_core::layers::Identity;
use apalis_core::task::task_id::RandomId;
use futures::future::BoxFuture;
use futures::FutureExt;
use redis::{RedisError, Script};
use tracing::{debug, info, warn};

use super::lease::LeaseWatch;
use super::{
    run_caught, worker_name, DeadEntry, DeadHook, LiveWorker, QueueError, QueueLen, QueueOptions,
    Shutdown, TaskCtx, TaskMsg, TaskResult, WorkerOptions, WorkerReport, WorkerStats,
};
use crate::link::backoff::Backoff;
use crate::secret::redact_url as redact;

mod worker;

const GROUP: &str = "workers";

/// Reconnecting to an unreachable Redis: 100 ms doubling to 5 s.
const CONNECT_RETRY: Backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
/// A failed fetch: 100 ms doubling to 5 s, back to 100 ms after a success.
const FETCH_RETRY: Backoff = CONNECT_RETRY;
/// Acks and reschedules retried until the claim idle time: 50 ms doubling to 2 s.
const SETTLE_RETRY: Backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(2));

/// Promote due delayed tasks (bounded) into the ready set, move the `count` smallest start
/// tags to the stream, then read new entries for this consumer.
/// KEYS: stream, delayed, ready, fair. ARGV: group, consumer, count, promote_batch, interactive
/// only (`1`: a worker whose slots are all held takes an interactive task or nothing).
/// Returns flat [id, d, attempt, ...].
const FETCH_LUA: &str = include_str!("lua/fetch.lua");

/// Make fresh tasks ready, tagged in the shops' fair order, interactive ones first.
/// KEYS: ready, fair. ARGV: (shop, weight, interactive 0/1, member) quadruples.
const PUSH_LUA: &str = include_str!("lua/push.lua");

/// Take over orphans (idle > min_idle) and count the recovery as an attempt; orphans past
/// max_attempts go to the dead stream instead. Scans from `cursor` and follows the cursor
/// XAUTOCLAIM returns (each call looks at most COUNT*10 entries), so an orphan behind many
/// live entries is still found; the next cursor is returned for the next sweep.
/// KEYS: stream, dead. ARGV: group, consumer, min_idle_ms, count, max_attempts, dead_max, cursor.
/// Returns flat [next_cursor, n_claimed, (id, d, attempt) * n_claimed, (d, attempts) * dead].
const CLAIM_LUA: &str = include_str!("lua/claim.lua");

/// Ack and delete an entry this consumer still owns (a worker whose claim was taken over
/// must not ack the new owner's delivery). KEYS: stream. ARGV: group, consumer, id.
const ACK_LUA: &str = include_str!("lua/ack.lua");

/// The queue's fleet identity: bind it to `id` when unset; return the bound id.
/// KEYS: fleet key. ARGV: id.
const BIND_FLEET_LUA: &str = include_str!("lua/bind_fleet.lua");

/// Schedule a task (member `a:ulid:json`) and, when an entry id is given and this consumer
/// still owns it, ack and delete that entry in the same step.
/// KEYS: stream, delayed. ARGV: delay_ms, member, group, consumer, id-or-empty.
const RESCHEDULE_LUA: &str = include_str!("lua/reschedule.lua");

/// Schedule many fresh tasks at once. KEYS: delayed. ARGV: delay_ms, members...
const PUSH_DELAYED_LUA: &str = include_str!("lua/push_delayed.lua");

/// Move an owned entry to the dead stream.
/// KEYS: stream, dead. ARGV: group, consumer, id, d, attempts, error, dead_max.
const DEAD_LUA: &str = include_str!("lua/dead.lua");

/// Refresh the idle time of entries this consumer still owns (JUSTID: delivery count kept).
/// KEYS: stream. ARGV: group, consumer, ids... Returns the ids that are no longer ours.
const HEARTBEAT_LUA: &str = include_str!("lua/heartbeat.lua");

/// Give back fetched-but-unstarted entries at shutdown: re-add them at the tail with their
/// attempts unchanged, then ack and delete the originals.
/// KEYS: stream. ARGV: group, consumer, then (id, d, a) triples.
const RELEASE_LUA: &str = include_str!("lua/release.lua");

/// Remove consumers with nothing pending that have been idle for long (restarted workers).
/// KEYS: stream. ARGV: group, min_idle_ms, own name. Returns how many were removed.
const GC_CONSUMERS_LUA: &str = include_str!("lua/gc_consumers.lua");

/// KEYS: stream, delayed, dead, ready. ARGV: group.
/// Returns [xlen, pending, delayed, dead, ready].
const LEN_LUA: &str = include_str!("lua/len.lua");

struct Scripts {
    fetch: Script,
    push: Script,
    claim: Script,
    ack: Script,
    bind_fleet: Script,
    reschedule: Script,
    push_delayed: Script,
    dead: Script,
    heartbeat: Script,
    release: Script,
    gc: Script,
    len: Script,
}

impl Scripts {
    fn new() -> Scripts {
        Scripts {
            fetch: Script::new(FETCH_LUA),
            push: Script::new(PUSH_LUA),
            claim: Script::new(CLAIM_LUA),
            ack: Script::new(ACK_LUA),
            bind_fleet: Script::new(BIND_FLEET_LUA),
            reschedule: Script::new(RESCHEDULE_LUA),
            push_delayed: Script::new(PUSH_DELAYED_LUA),
            dead: Script::new(DEAD_LUA),
            heartbeat: Script::new(HEARTBEAT_LUA),
            release: Script::new(RELEASE_LUA),
            gc: Script::new(GC_CONSUMERS_LUA),
            len: Script::new(LEN_LUA),
        }
    }
}

#[derive(Debug, Clone)]
struct Keys {
    stream: String,
    delayed: String,
    /// Fresh and promoted tasks waiting for a worker, scored by start tag (`queue::fair`).
    ready: String,
    /// The fair order's state: virtual time `V`, each shop's finish tag and weight.
    fair: String,
    dead: String,
    fleet: String,
}

impl Keys {
    fn new(name: &str) -> Keys {
        Keys {
            stream: format!("{{{name}}}:stream"),
            delayed: format!("{{{name}}}:delayed"),
            ready: format!("{{{name}}}:ready"),
            fair: format!("{{{name}}}:fair"),
            dead: format!("{{{name}}}:dead"),
            fleet: format!("{{{name}}}:fleet"),
        }
    }
}

/// The Redis Streams queue: producer side and worker runner.
#[derive(Clone)]
pub struct RedisQueue {
    conn: crate::redis_conn::Conn,
    keys: Keys,
    opts: QueueOptions,
    url: String,
    scripts: Arc<Scripts>,
}

impl RedisQueue {
    /// Connect and create the stream and its consumer group if missing. The connection
    /// reconnects by itself after errors.
    pub async fn connect(url: &str, opts: QueueOptions) -> Result<RedisQueue, QueueError> {
        let red = redact(url);
        let err = |e: RedisError| QueueError::Redis {
            url: red.clone(),
            msg: e.to_string(),
        };
        let client = crate::redis_conn::target(url).map_err(|source| QueueError::Setup {
            url: red.clone(),
            source,
        })?;
        // A 20k-task pipeline takes far longer than the 500 ms default response timeout;
        // a timed-out push would be retried and duplicated.
        let conn = client.connect(Duration::from_secs(10)).await.map_err(err)?;
        let q = RedisQueue {
            conn,
            keys: Keys::new(&opts.name),
            opts,
            url: red,
            scripts: Arc::new(Scripts::new()),
        };
        q.ensure_group().await.map_err(|e| q.err(e))?;
        Ok(q)
    }

    /// [`RedisQueue::connect`], retried with backoff (100 ms doubling to 5 s, logged) while
    /// Redis is unreachable, until it answers or `shutdown` is triggered. For workers
    /// started before Redis is up. A malformed URL fails at once.
    pub async fn connect_retrying(
        url: &str,
        opts: QueueOptions,
        shutdown: &Shutdown,
    ) -> Result<RedisQueue, QueueError> {
        if let Err(source) = crate::redis_conn::target(url) {
            return Err(QueueError::Setup {
                url: redact(url),
                source,
            });
        }
        let mut backoff = CONNECT_RETRY.doubling();
        loop {
            match RedisQueue::connect(url, opts.clone()).await {
                Ok(q) => return Ok(q),
                Err(e) if shutdown.is_triggered() => return Err(e),
                Err(e) => {
                    let wait = backoff.next_delay();
                    warn!(error = %e, retry_in = ?wait, "redis queue unreachable; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = shutdown.wait() => {}
                    }
                }
            }
        }
    }

    /// The options the queue was opened with.
    pub fn options(&self) -> &QueueOptions {
        &self.opts
    }

    fn err(&self, e: RedisError) -> QueueError {
        QueueError::Redis {
            url: self.url.clone(),
            msg: e.to_string(),
        }
    }

    /// Names of the keys (stream, delayed set, dead stream), for tests and operators.
    pub fn key_names(&self) -> (String, String, String) {
        (
            self.keys.stream.clone(),
            self.keys.delayed.clone(),
            self.keys.dead.clone(),
        )
    }

    async fn ensure_group(&self) -> Result<(), RedisError> {
        let mut c = self.conn.clone();
        let r: Result<(), RedisError> = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(&self.keys.stream)
            .arg(GROUP)
            .arg("0")
            .arg("MKSTREAM")
            .query_async(&mut c)
            .await;
        match r {
            // The group exists already (another worker created it): fine.
            Err(e) if e.code() == Some("BUSYGROUP") => Ok(()),
            other => other,
        }
    }

    /// Push tasks with one pipelined round trip per `push_batch` tasks. On error the tasks
    /// of earlier batches are confirmed (`QueueError::Push::pushed`); the failed batch may be
    /// partly in the queue, so retrying it can duplicate tasks, which handlers tolerate
    /// (they skip items the ledger shows terminal).
    pub async fn push_bulk(&self, tasks: &[TaskMsg]) -> Result<usize, QueueError> {
        let mut c = self.conn.clone();
        let mut pushed = 0usize;
        for batch in tasks.chunks(self.opts.push_batch.max(1)) {
            let mut inv = self.scripts.push.prepare_invoke();
            inv.key(&self.keys.ready).key(&self.keys.fair);
            for t in batch {
                let d = serde_json::to_string(t).map_err(|e| QueueError::Encode(e.to_string()))?;
                inv.arg(&t.shop)
                    .arg(self.opts.weight(&t.shop))
                    .arg(u8::from(t.lane == super::Lane::Interactive))
                    .arg(member(0, &d));
            }
            inv.invoke_async::<i64>(&mut c)
                .await
                .map_err(|e| QueueError::Push {
                    url: self.url.clone(),
                    pushed,
                    msg: e.to_string(),
                })?;
            pushed += batch.len();
        }
        Ok(pushed)
    }

    /// Schedule a fresh task (attempts start at 1) to become ready after `delay`.
    pub async fn push_delayed(&self, task: &TaskMsg, delay: Duration) -> Result<(), QueueError> {
        let d = serde_json::to_string(task).map_err(|e| QueueError::Encode(e.to_string()))?;
        let mut c = self.conn.clone();
        self.scripts
            .reschedule
            .key(&self.keys.stream)
            .key(&self.keys.delayed)
            .arg(delay.as_millis() as u64)
            .arg(member(0, &d))
            .arg(GROUP)
            .arg("")
            .arg("")
            .invoke_async::<i64>(&mut c)
            .await
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Schedule fresh tasks (attempts start at 1) to become ready after `delay`, one round
    /// trip per `push_batch` tasks. Same retry caveat as [`RedisQueue::push_bulk`].
    pub async fn push_delayed_bulk(
        &self,
        tasks: &[TaskMsg],
        delay: Duration,
    ) -> Result<usize, QueueError> {
        let mut c = self.conn.clone();
        let mut pushed = 0usize;
        for batch in tasks.chunks(self.opts.push_batch.max(1)) {
            let mut inv = self.scripts.push_delayed.prepare_invoke();
            inv.key(&self.keys.delayed).arg(delay.as_millis() as u64);
            for t in batch {
                let d = serde_json::to_string(t).map_err(|e| QueueError::Encode(e.to_string()))?;
                inv.arg(member(0, &d));
            }
            inv.invoke_async::<i64>(&mut c)
                .await
                .map_err(|e| QueueError::Push {
                    url: self.url.clone(),
                    pushed,
                    msg: e.to_string(),
                })?;
            pushed += batch.len();
        }
        Ok(pushed)
    }

    /// Ready, in-flight, delayed and dead counts.
    pub async fn len(&self) -> Result<QueueLen, QueueError> {
        let mut c = self.conn.clone();
        let v: Vec<u64> = self
            .scripts
            .len
            .key(&self.keys.stream)
            .key(&self.keys.delayed)
            .key(&self.keys.dead)
            .key(&self.keys.ready)
            .arg(GROUP)
            .invoke_async(&mut c)
            .await
            .map_err(|e| self.err(e))?;
        let g = |i: usize| v.get(i).copied().unwrap_or(0);
        Ok(QueueLen {
            ready: g(0).saturating_sub(g(1)) + g(4),
            in_flight: g(1),
            delayed: g(2),
            dead: g(3),
        })
    }

    /// See [`super::Queue::check_eviction`]. A Redis that does not answer `CONFIG GET`
    /// (managed services rename it) is let through with a warning.
    pub async fn check_eviction(&self) -> Result<(), QueueError> {
        let mut c = self.conn.clone();
        let answer: Result<Vec<String>, RedisError> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("maxmemory-policy")
            .query_async(&mut c)
            .await;
        let policy = match answer {
            Ok(v) => v.get(1).cloned().unwrap_or_default(),
            Err(e) => {
                warn!(url = %self.url, error = %e, "cannot read redis maxmemory-policy: make sure it is noeviction");
                return Ok(());
            }
        };
        if policy.starts_with("allkeys") {
            return Err(QueueError::Evicting {
                url: self.url.clone(),
                policy,
            });
        }
        if policy.starts_with("volatile") {
            warn!(
                url = %self.url,
                policy = %policy,
                "redis evicts keys with an expiry first under memory pressure: gate bans, \
                 bucket state and quota counters would go before anything else; \
                 maxmemory-policy noeviction is safer"
            );
        }
        Ok(())
    }

    /// See [`super::Queue::bind_fleet`].
    pub async fn bind_fleet(&self, ledger_fleet: &str, ledger: &str) -> Result<(), QueueError> {
        let mut c = self.conn.clone();
        let bound: String = self
            .scripts
            .bind_fleet
            .key(&self.keys.fleet)
            .arg(ledger_fleet)
            .invoke_async(&mut c)
            .await
            .map_err(|e| self.err(e))?;
        if bound == ledger_fleet {
            return Ok(());
        }
        Err(QueueError::FleetMismatch {
            queue: format!("{} ({})", self.url, self.keys.stream),
            queue_fleet: bound,
            ledger: ledger.to_string(),
            ledger_fleet: ledger_fleet.to_string(),
        })
    }

    /// Every ready, in-flight and delayed task (see [`super::Queue::live_tasks`]), read in
    /// one transaction: workers move entries between the ready set, the stream and the
    /// delayed set all the time, and a read in pages could miss one in transit and call its
    /// items lost (`reconcile` and the heal loop would push them twice). The cost is one
    /// longer command on a large backlog (about 10 ms for 20,000 tasks).
    pub(crate) async fn live_tasks(&self) -> Result<Vec<TaskMsg>, QueueError> {
        let mut out = Vec::new();
        self.each_live_task(|t| out.push(t)).await?;
        Ok(out)
    }

    /// The shops of the first `limit` tasks of the ready set (see
    /// [`super::Queue::waiting_shops`]).
    pub(crate) async fn waiting_shops(&self, limit: usize) -> Result<Vec<String>, QueueError> {
        let mut c = self.conn.clone();
        let ready: Vec<String> = redis::cmd("ZRANGE")
            .arg(&self.keys.ready)
            .arg(0)
            .arg(limit.max(1) - 1)
            .query_async(&mut c)
            .await
            .map_err(|e| self.err(e))?;
        Ok(ready
            .iter()
            .filter_map(|m| member_json(m))
            .filter_map(|json| serde_json::from_str::<super::TaskShop>(json).ok())
            .map(|t| t.shop)
            .collect())
    }

    /// [`RedisQueue::live_tasks`] folded into a [`super::LiveCover`] as each task is read.
    pub(crate) async fn live_cover(
        &self,
        mut cover: super::LiveCover,
    ) -> Result<super::LiveCover, QueueError> {
        self.each_live_task(|t| cover.add(&t)).await?;
        Ok(cover)
    }

    /// One consistent snapshot of the stream, the ready set and the delayed set, each task
    /// handed to `each` as it is parsed.
    async fn each_live_task(&self, mut each: impl FnMut(TaskMsg)) -> Result<(), QueueError> {
        let mut c = self.conn.clone();
        type Snapshot = (
            Vec<(String, Vec<(String, String)>)>,
            Vec<String>,
            Vec<String>,
        );
        let (stream, ready, delayed): Snapshot = redis::pipe()
            .atomic()
            .cmd("XRANGE")
            .arg(&self.keys.stream)
            .arg("-")
            .arg("+")
            .cmd("ZRANGE")
            .arg(&self.keys.ready)
            .arg(0)
            .arg(-1)
            .cmd("ZRANGE")
            .arg(&self.keys.delayed)
            .arg(0)
            .arg(-1)
            .query_async(&mut c)
            .await
            .map_err(|e| self.err(e))?;
        for (_, fields) in stream {
            if let Some((_, d)) = fields.iter().find(|(k, _)| k == "d") {
                if let Ok(t) = serde_json::from_str::<TaskMsg>(d) {
                    each(t);
                }
            }
        }
        for m in ready.into_iter().chain(delayed) {
            if let Some(json) = member_json(&m) {
                if let Ok(t) = serde_json::from_str::<TaskMsg>(json) {
                    each(t);
                }
            }
        }
        Ok(())
    }

    /// Consumers of the group idle less than `within` (see [`super::Queue::workers`]).
    pub(crate) async fn workers(&self, within: Duration) -> Result<Vec<LiveWorker>, QueueError> {
        let mut c = self.conn.clone();
        let raw: Vec<redis::Value> = match redis::cmd("XINFO")
            .arg("CONSUMERS")
            .arg(&self.keys.stream)
            .arg(GROUP)
            .query_async(&mut c)
            .await
        {
            Ok(v) => v,
            // No stream or group yet (nothing enqueued since Redis started): no workers.
            Err(e) if e.code() == Some("NOGROUP") => return Ok(Vec::new()),
            Err(e) => return Err(self.err(e)),
        };
        let mut out = Vec::new();
        for consumer in raw {
            let Ok(fields) = redis::from_redis_value::<HashMap<String, redis::Value>>(consumer)
            else {
                continue;
            };
            let int = |k: &str| {
                fields
                    .get(k)
                    .and_then(|v| redis::from_redis_value::<u64>(v.clone()).ok())
                    .unwrap_or(0)
            };
            let name = fields
                .get("name")
                .and_then(|v| redis::from_redis_value::<String>(v.clone()).ok())
                .unwrap_or_default();
            let idle_ms = int("idle");
            if u128::from(idle_ms) < within.as_millis() {
                out.push(LiveWorker {
                    name,
                    pending: int("pending"),
                    idle_ms,
                });
            }
        }
        Ok(out)
    }

    /// The dead-letter stream, oldest first.
    pub async fn dead_entries(&self, limit: usize) -> Result<Vec<DeadEntry>, QueueError> {
        let mut c = self.conn.clone();
        let page: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
            .arg(&self.keys.dead)
            .arg("-")
            .arg("+")
            .arg("COUNT")
            .arg(limit.max(1))
            .query_async(&mut c)
            .await
            .map_err(|e| self.err(e))?;
        Ok(page
            .into_iter()
            .map(|(id, fields)| {
                let get = |k: &str| {
                    fields
                        .iter()
                        .find(|(f, _)| f == k)
                        .map(|(_, v)| v.clone())
                        .unwrap_or_default()
                };
                DeadEntry {
                    id,
                    task: serde_json::from_str(&get("d")).ok(),
                    attempts: get("attempts").parse().unwrap_or(0),
                    error: get("error"),
                    worker: get("worker"),
                }
            })
            .collect())
    }

    /// Push `task` as a fresh task, then delete dead entry `id` (in that order: a failure in
    /// between leaves the entry listed, never lost).
    pub async fn requeue_dead(&self, id: &str, task: Option<&TaskMsg>) -> Result<(), QueueError> {
        if let Some(task) = task {
            self.push_bulk(std::slice::from_ref(task)).await?;
        }
        let mut c = self.conn.clone();
        redis::cmd("XDEL")
            .arg(&self.keys.dead)
            .arg(id)
            .query_async::<i64>(&mut c)
            .await
            .map_err(|e| self.err(e))?;
        Ok(())
    }
}

fn member(prior_attempts: u32, d: &str) -> String {
    format!("{prior_attempts}:{}:{d}", ulid::Ulid::new())
}

/// The task JSON of a ready or delayed set's [`member`].
fn member_json(m: &str) -> Option<&str> {
    m.splitn(3, ':').nth(2)
}

impl super::TaskQueue for RedisQueue {
    fn push_bulk<'a>(
        &'a self,
        tasks: &'a [TaskMsg],
    ) -> futures::future::BoxFuture<'a, Result<usize, QueueError>> {
        RedisQueue::push_bulk(self, tasks).boxed()
    }
    fn push_delayed<'a>(
        &'a self,
        task: &'a TaskMsg,
        delay: Duration,
    ) -> futures::future::BoxFuture<'a, Result<(), QueueError>> {
        RedisQueue::push_delayed(self, task, delay).boxed()
    }
    fn lengths(&self) -> futures::future::BoxFuture<'_, Result<super::QueueLen, QueueError>> {
        RedisQueue::len(self).boxed()
    }
    fn live_tasks(&self) -> futures::future::BoxFuture<'_, Result<Vec<TaskMsg>, QueueError>> {
        RedisQueue::live_tasks(self).boxed()
    }
    fn live_cover(
        &self,
        cover: super::LiveCover,
    ) -> futures::future::BoxFuture<'_, Result<super::LiveCover, QueueError>> {
        RedisQueue::live_cover(self, cover).boxed()
    }
    fn waiting_shops(
        &self,
        limit: usize,
    ) -> futures::future::BoxFuture<'_, Result<Vec<String>, QueueError>> {
        RedisQueue::waiting_shops(self, limit).boxed()
    }
    fn workers(
        &self,
        within: Duration,
    ) -> futures::future::BoxFuture<'_, Result<Vec<super::LiveWorker>, QueueError>> {
        RedisQueue::workers(self, within).boxed()
    }
    fn dead_entries(
        &self,
        limit: usize,
    ) -> futures::future::BoxFuture<'_, Result<Vec<super::DeadEntry>, QueueError>> {
        RedisQueue::dead_entries(self, limit).boxed()
    }
    fn requeue_dead<'a>(
        &'a self,
        id: &'a str,
        task: Option<&'a TaskMsg>,
    ) -> futures::future::BoxFuture<'a, Result<(), QueueError>> {
        RedisQueue::requeue_dead(self, id, task).boxed()
    }
    fn bind_fleet<'a>(
        &'a self,
        ledger_fleet: &'a str,
        ledger: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<(), QueueError>> {
        RedisQueue::bind_fleet(self, ledger_fleet, ledger).boxed()
    }
    fn check_eviction(&self) -> futures::future::BoxFuture<'_, Result<(), QueueError>> {
        RedisQueue::check_eviction(self).boxed()
    }
    fn run_worker(
        &self,
        wopts: WorkerOptions,
        handler: super::TaskHandler,
        shutdown: Shutdown,
    ) -> futures::future::BoxFuture<'_, Result<WorkerReport, QueueError>> {
        RedisQueue::run_worker(self, wopts, move |m, c| handler(m, c), shutdown).boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_format_matches_lua_pattern() {
        let m = member(3, r#"{"a":"x:y"}"#);
        let mut parts = m.splitn(3, ':');
        assert_eq!(parts.next(), Some("3"));
        assert!(parts
            .next()
            .is_some_and(|u| u.chars().all(|c| c.is_ascii_alphanumeric())));
        assert_eq!(parts.next(), Some(r#"{"a":"x:y"}"#));
    }

    #[test]
    fn keys_share_a_hash_tag() {
        let k = Keys::new("q");
        assert_eq!(k.stream, "{q}:stream");
        assert_eq!(k.delayed, "{q}:delayed");
        assert_eq!(k.dead, "{q}:dead");
    }
}
