//! Fleet mode: an apalis 1.0 backend over a Redis Stream with one consumer group.
//!
//! Keys (the `{name}` hash tag keeps them in one cluster slot):
//! - `{name}:stream`  — ready and in-flight tasks; fields `d` (JSON [`TaskMsg`]) and `a`
//!   (attempts consumed before this entry). Group `workers`; each worker is a consumer named
//!   host-pid-ulid. An entry's attempt is `a + delivery count`, so a recovered orphan
//!   (XAUTOCLAIM bumps the delivery count) counts one attempt.
//! - `{name}:delayed` — sorted set, score = due time in Redis-server ms, member
//!   `a:ulid:json`; due members are moved into the stream at most `promote_batch` per fetch.
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
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{RedisError, Script};
use tracing::{debug, info, warn};

use super::lease::LeaseWatch;
use super::{
    run_caught, worker_name, DeadEntry, DeadHook, LiveWorker, QueueError, QueueLen, QueueOptions,
    Shutdown, TaskCtx, TaskMsg, TaskResult, WorkerOptions, WorkerReport, WorkerStats,
};

const GROUP: &str = "workers";

/// Promote due delayed tasks (bounded), then read new entries for this consumer.
/// KEYS: stream, delayed. ARGV: group, consumer, count, promote_batch.
/// Returns flat [id, d, attempt, ...].
const FETCH_LUA: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, tonumber(ARGV[4]))
for _, m in ipairs(due) do
  local a, d = string.match(m, '^(%d+):%w+:(.*)$')
  if a then redis.call('XADD', KEYS[1], '*', 'd', d, 'a', a) end
  redis.call('ZREM', KEYS[2], m)
end
local r = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', tonumber(ARGV[3]), 'STREAMS', KEYS[1], '>')
local out = {}
if r then
  for _, e in ipairs(r[1][2]) do
    local f = e[2]
    local d, a = '', 0
    for i = 1, #f, 2 do
      if f[i] == 'd' then d = f[i + 1] elseif f[i] == 'a' then a = tonumber(f[i + 1]) or 0 end
    end
    out[#out + 1] = e[1]
    out[#out + 1] = d
    out[#out + 1] = tostring(a + 1)
  end
end
return out
"#;

/// Take over orphans (idle > min_idle) and count the recovery as an attempt; orphans past
/// max_attempts go to the dead stream instead. Scans from `cursor` and follows the cursor
/// XAUTOCLAIM returns (each call looks at most COUNT*10 entries), so an orphan behind many
/// live entries is still found; the next cursor is returned for the next sweep.
/// KEYS: stream, dead. ARGV: group, consumer, min_idle_ms, count, max_attempts, dead_max, cursor.
/// Returns flat [next_cursor, n_claimed, (id, d, attempt) * n_claimed, (d, attempts) * dead].
const CLAIM_LUA: &str = r#"
local max = tonumber(ARGV[5])
local want = tonumber(ARGV[4])
local cursor = ARGV[7]
local claimed, dead = {}, {}
for _ = 1, 10 do
  local r = redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], tonumber(ARGV[3]), cursor, 'COUNT', want - #claimed / 3)
  cursor = r[1]
  for _, e in ipairs(r[2]) do
    local id = e[1]
    local f = e[2]
    if f then
      local d, a = '', 0
      for i = 1, #f, 2 do
        if f[i] == 'd' then d = f[i + 1] elseif f[i] == 'a' then a = tonumber(f[i + 1]) or 0 end
      end
      local p = redis.call('XPENDING', KEYS[1], ARGV[1], id, id, 1)
      local dc = 1
      if p[1] then dc = tonumber(p[1][4]) end
      local attempt = a + dc
      if attempt > max then
        redis.call('XADD', KEYS[2], 'MAXLEN', '=', tonumber(ARGV[6]), '*', 'd', d, 'attempts', tostring(attempt - 1),
          'error', 'worker lost (no heartbeat) on every attempt', 'worker', ARGV[2])
        redis.call('XACK', KEYS[1], ARGV[1], id)
        redis.call('XDEL', KEYS[1], id)
        dead[#dead + 1] = d
        dead[#dead + 1] = tostring(attempt - 1)
      else
        claimed[#claimed + 1] = id
        claimed[#claimed + 1] = d
        claimed[#claimed + 1] = tostring(attempt)
      end
    end
  end
  if cursor == '0-0' or #claimed / 3 >= want then break end
end
local out = {cursor, tostring(#claimed / 3)}
for _, v in ipairs(claimed) do out[#out + 1] = v end
for _, v in ipairs(dead) do out[#out + 1] = v end
return out
"#;

/// Ack and delete an entry this consumer still owns (a worker whose claim was taken over
/// must not ack the new owner's delivery). KEYS: stream. ARGV: group, consumer, id.
const ACK_LUA: &str = r#"
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
if not p[1] or p[1][2] ~= ARGV[2] then return 0 end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
redis.call('XDEL', KEYS[1], ARGV[3])
return 1
"#;

/// The queue's fleet identity: bind it to `id` when unset; return the bound id.
/// KEYS: fleet key. ARGV: id.
const BIND_FLEET_LUA: &str = r#"
local cur = redis.call('GET', KEYS[1])
if cur then return cur end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]
"#;

/// Schedule a task (member `a:ulid:json`) and, when an entry id is given and this consumer
/// still owns it, ack and delete that entry in the same step.
/// KEYS: stream, delayed. ARGV: delay_ms, member, group, consumer, id-or-empty.
const RESCHEDULE_LUA: &str = r#"
if ARGV[5] ~= '' then
  local p = redis.call('XPENDING', KEYS[1], ARGV[3], ARGV[5], ARGV[5], 1)
  if not p[1] or p[1][2] ~= ARGV[4] then return 0 end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[1]), ARGV[2])
if ARGV[5] ~= '' then
  redis.call('XACK', KEYS[1], ARGV[3], ARGV[5])
  redis.call('XDEL', KEYS[1], ARGV[5])
end
return 1
"#;

/// Schedule many fresh tasks at once. KEYS: delayed. ARGV: delay_ms, members...
const PUSH_DELAYED_LUA: &str = r#"
local t = redis.call('TIME')
local due = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], due, ARGV[i]) end
return #ARGV - 1
"#;

/// Move an owned entry to the dead stream.
/// KEYS: stream, dead. ARGV: group, consumer, id, d, attempts, error, dead_max.
const DEAD_LUA: &str = r#"
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
if not p[1] or p[1][2] ~= ARGV[2] then return 0 end
redis.call('XADD', KEYS[2], 'MAXLEN', '=', tonumber(ARGV[7]), '*', 'd', ARGV[4], 'attempts', ARGV[5],
  'error', ARGV[6], 'worker', ARGV[2])
redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
redis.call('XDEL', KEYS[1], ARGV[3])
return 1
"#;

/// Refresh the idle time of entries this consumer still owns (JUSTID: delivery count kept).
/// KEYS: stream. ARGV: group, consumer, ids... Returns the ids that are no longer ours.
const HEARTBEAT_LUA: &str = r#"
local lost = {}
for i = 3, #ARGV do
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if p[1] and p[1][2] == ARGV[2] then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
  else
    lost[#lost + 1] = ARGV[i]
  end
end
return lost
"#;

/// Give back fetched-but-unstarted entries at shutdown: re-add them at the tail with their
/// attempts unchanged, then ack and delete the originals.
/// KEYS: stream. ARGV: group, consumer, then (id, d, a) triples.
const RELEASE_LUA: &str = r#"
local n = 0
for i = 3, #ARGV, 3 do
  local id = ARGV[i]
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], id, id, 1)
  if p[1] and p[1][2] == ARGV[2] then
    redis.call('XADD', KEYS[1], '*', 'd', ARGV[i + 1], 'a', ARGV[i + 2])
    redis.call('XACK', KEYS[1], ARGV[1], id)
    redis.call('XDEL', KEYS[1], id)
    n = n + 1
  end
end
return n
"#;

/// Remove consumers with nothing pending that have been idle for long (restarted workers).
/// KEYS: stream. ARGV: group, min_idle_ms, own name. Returns how many were removed.
const GC_CONSUMERS_LUA: &str = r#"
local cs = redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])
local n = 0
for _, c in ipairs(cs) do
  local name, pending, idle = nil, 1, 0
  for i = 1, #c, 2 do
    if c[i] == 'name' then name = c[i + 1]
    elseif c[i] == 'pending' then pending = c[i + 1]
    elseif c[i] == 'idle' then idle = c[i + 1] end
  end
  if name and name ~= ARGV[3] and pending == 0 and idle > tonumber(ARGV[2]) then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], name)
    n = n + 1
  end
end
return n
"#;

/// KEYS: stream, delayed, dead. ARGV: group. Returns [xlen, pending, delayed, dead].
const LEN_LUA: &str = r#"
local pending = 0
local p = redis.pcall('XPENDING', KEYS[1], ARGV[1])
if type(p) == 'table' and p.err == nil then pending = p[1] end
return {redis.call('XLEN', KEYS[1]), pending, redis.call('ZCARD', KEYS[2]), redis.call('XLEN', KEYS[3])}
"#;

struct Scripts {
    fetch: Script,
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
    dead: String,
    fleet: String,
}

impl Keys {
    fn new(name: &str) -> Keys {
        Keys {
            stream: format!("{{{name}}}:stream"),
            delayed: format!("{{{name}}}:delayed"),
            dead: format!("{{{name}}}:dead"),
            fleet: format!("{{{name}}}:fleet"),
        }
    }
}

/// `redis://user:pass@host:port/db` -> `redis://***@host:port/db`.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s + 3 => format!("{}***{}", &url[..s + 3], &url[at..]),
        _ => url.to_string(),
    }
}

/// The Redis Streams queue: producer side and worker runner.
#[derive(Clone)]
pub struct RedisQueue {
    conn: ConnectionManager,
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
        let client = redis::Client::open(url).map_err(err)?;
        // A 20k-task pipeline takes far longer than the 500 ms default response timeout;
        // a timed-out push would be retried and duplicated.
        let cfg = ConnectionManagerConfig::new()
            .set_response_timeout(Some(Duration::from_secs(10)))
            .set_connection_timeout(Some(Duration::from_secs(3)))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_secs(2));
        let conn = ConnectionManager::new_with_config(client, cfg)
            .await
            .map_err(err)?;
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
        if let Err(e) = redis::Client::open(url) {
            return Err(QueueError::Redis {
                url: redact(url),
                msg: e.to_string(),
            });
        }
        let mut backoff = Duration::from_millis(100);
        loop {
            match RedisQueue::connect(url, opts.clone()).await {
                Ok(q) => return Ok(q),
                Err(e) if shutdown.is_triggered() => return Err(e),
                Err(e) => {
                    warn!(error = %e, retry_in = ?backoff, "redis queue unreachable; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = shutdown.wait() => {}
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
    }

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
            let mut p = redis::pipe();
            for t in batch {
                let d = serde_json::to_string(t).map_err(|e| QueueError::Encode(e.to_string()))?;
                p.cmd("XADD")
                    .arg(&self.keys.stream)
                    .arg("*")
                    .arg("d")
                    .arg(d)
                    .arg("a")
                    .arg(0)
                    .ignore();
            }
            p.query_async::<()>(&mut c)
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
            .arg(GROUP)
            .invoke_async(&mut c)
            .await
            .map_err(|e| self.err(e))?;
        let g = |i: usize| v.get(i).copied().unwrap_or(0);
        Ok(QueueLen {
            ready: g(0).saturating_sub(g(1)),
            in_flight: g(1),
            delayed: g(2),
            dead: g(3),
        })
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

    /// Every ready, in-flight and delayed task (see [`super::Queue::live_tasks`]); read in
    /// pages so a large queue costs several short round trips, not one long one.
    pub async fn live_tasks(&self) -> Result<Vec<TaskMsg>, QueueError> {
        const PAGE: usize = 1000;
        let mut c = self.conn.clone();
        let mut out = Vec::new();
        let mut start = "-".to_string();
        loop {
            let page: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
                .arg(&self.keys.stream)
                .arg(&start)
                .arg("+")
                .arg("COUNT")
                .arg(PAGE)
                .query_async(&mut c)
                .await
                .map_err(|e| self.err(e))?;
            let n = page.len();
            for (id, fields) in page {
                if let Some((_, d)) = fields.iter().find(|(k, _)| k == "d") {
                    if let Ok(t) = serde_json::from_str::<TaskMsg>(d) {
                        out.push(t);
                    }
                }
                start = format!("({id}");
            }
            if n < PAGE {
                break;
            }
        }
        let mut from = 0isize;
        loop {
            let members: Vec<String> = redis::cmd("ZRANGE")
                .arg(&self.keys.delayed)
                .arg(from)
                .arg(from + PAGE as isize - 1)
                .query_async(&mut c)
                .await
                .map_err(|e| self.err(e))?;
            let n = members.len();
            for m in members {
                // member = attempts:ulid:json
                if let Some(json) = m.splitn(3, ':').nth(2) {
                    if let Ok(t) = serde_json::from_str::<TaskMsg>(json) {
                        out.push(t);
                    }
                }
            }
            if n < PAGE {
                break;
            }
            from += PAGE as isize;
        }
        Ok(out)
    }

    /// Consumers of the group idle less than `within` (see [`super::Queue::workers`]).
    pub async fn workers(&self, within: Duration) -> Result<Vec<LiveWorker>, QueueError> {
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

    /// Build the apalis backend for one worker start (used by [`RedisQueue::run_worker`];
    /// public for the benchmark and for callers composing their own apalis worker).
    pub fn backend(&self, worker: &str, concurrency: usize, shutdown: Shutdown) -> StreamsBackend {
        self.backend_with(worker, concurrency, shutdown, None)
    }

    fn backend_with(
        &self,
        worker: &str,
        concurrency: usize,
        shutdown: Shutdown,
        on_dead: Option<DeadHook>,
    ) -> StreamsBackend {
        StreamsBackend {
            shared: Arc::new(Shared {
                q: self.clone(),
                worker: Arc::from(worker),
                concurrency: concurrency.max(1),
                owned: Mutex::new(HashMap::new()),
                running: AtomicUsize::new(0),
                shutdown,
                stats: WorkerStats::default(),
                last_sweep: Mutex::new(None),
                claim_cursor: Mutex::new("0-0".to_string()),
                lease: Mutex::new(LeaseWatch::new(self.opts.claim_idle(), self.opts.heartbeat)),
                on_dead,
            }),
            buf: VecDeque::new(),
            fetch: None,
            close: None,
        }
    }

    /// Run an apalis worker over this queue until `shutdown`; then stop fetching, finish and
    /// ack in-flight tasks, give back fetched-but-unstarted ones, and return its counters.
    pub async fn run_worker<H, Fut>(
        &self,
        wopts: WorkerOptions,
        handler: H,
        shutdown: Shutdown,
    ) -> Result<WorkerReport, QueueError>
    where
        H: Fn(TaskMsg, TaskCtx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = TaskResult> + Send + 'static,
    {
        let name = wopts.name.clone().unwrap_or_else(worker_name);
        let backend = self.backend_with(
            &name,
            wopts.concurrency,
            shutdown.clone(),
            wopts.on_dead.clone(),
        );
        let shared = backend.shared.clone();
        let handler = Arc::new(handler);
        let svc_shared = shared.clone();
        let service = move |env: Envelope| {
            let sh = svc_shared.clone();
            let h = handler.clone();
            async move {
                sh.execute(env, &*h).await;
                Ok::<(), BoxDynError>(())
            }
            .boxed()
        };
        let worker = WorkerBuilder::new(name.clone())
            .backend(backend)
            .concurrency(shared.concurrency)
            .build(service);
        info!(worker = %name, concurrency = shared.concurrency, "queue worker starting");
        let stop = shutdown.clone();
        // Boxed here, where the types are concrete: spawning the unboxed future trips a
        // rustc higher-ranked `Send` inference bug on apalis's worker stream.
        let run = worker
            .run_until(async move {
                stop.wait().await;
                Ok::<(), std::io::Error>(())
            })
            .boxed();
        let hb = shared.clone().heartbeat_loop();
        let watch = shared.clone().lease_watchdog();
        // The heartbeat ends when the worker does: it must never outlive the worker's claim.
        let res = tokio::select! {
            r = run => r,
            _ = hb => Ok(()),
            _ = watch => Ok(()),
        };
        let report = shared.stats.report(&name);
        info!(worker = %name, ?report, "queue worker stopped");
        res.map(|_| report).map_err(|e| QueueError::Worker {
            worker: name,
            msg: e.to_string(),
        })
    }
}

fn member(prior_attempts: u32, d: &str) -> String {
    format!("{prior_attempts}:{}:{d}", ulid::Ulid::new())
}

/// One fetched stream entry, as handed to the apalis service.
#[derive(Debug, Clone)]
pub struct Envelope {
    id: String,
    raw: String,
    /// This delivery's attempt number (1-based).
    attempt: u32,
}

/// An entry this worker holds (buffered or running).
struct Owned {
    /// When the fetch that took it was sent: its first refresh.
    fetched_at: Instant,
    /// Fired when the claim is gone: the handler stops calling.
    lost: Shutdown,
}

struct Shared {
    q: RedisQueue,
    worker: Arc<str>,
    concurrency: usize,
    /// Entries this worker holds (buffered or running): refreshed every heartbeat.
    owned: Mutex<HashMap<String, Owned>>,
    /// Where the next orphan sweep resumes XAUTOCLAIM's scan.
    claim_cursor: Mutex<String>,
    /// Successful heartbeats: when the claims may be someone else's.
    lease: Mutex<LeaseWatch>,
    on_dead: Option<DeadHook>,
    /// Tasks handed to apalis and not finished.
    running: AtomicUsize,
    shutdown: Shutdown,
    stats: WorkerStats,
    last_sweep: Mutex<Option<Instant>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned set of ids is still a valid set of ids.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    fn parse(flat: &[String]) -> Vec<Envelope> {
        flat.chunks_exact(3)
            .map(|c| Envelope {
                id: c[0].clone(),
                raw: c[1].clone(),
                attempt: c[2].parse().unwrap_or(1),
            })
            .collect()
    }

    /// One fetch round: orphans first (at most once per heartbeat), then new entries.
    async fn try_fetch(&self, count: usize) -> Result<Vec<Envelope>, RedisError> {
        let q = &self.q;
        let mut c = q.conn.clone();
        let sweep_due = {
            let mut last = lock(&self.last_sweep);
            let due = last.is_none_or(|t| t.elapsed() >= q.opts.heartbeat);
            if due {
                *last = Some(Instant::now());
            }
            due
        };
        if sweep_due {
            let cursor = lock(&self.claim_cursor).clone();
            let flat: Vec<String> = q
                .scripts
                .claim
                .key(&q.keys.stream)
                .key(&q.keys.dead)
                .arg(GROUP)
                .arg(&*self.worker)
                .arg(q.opts.claim_idle().as_millis() as u64)
                .arg(count)
                .arg(q.opts.max_attempts)
                .arg(q.opts.dead_max)
                .arg(&cursor)
                .invoke_async(&mut c)
                .await?;
            if let Some(next) = flat.first() {
                *lock(&self.claim_cursor) = next.clone();
            }
            let n: usize = flat.get(1).and_then(|s| s.parse().ok()).unwrap_or(0);
            let rest = flat.get(2..).unwrap_or(&[]);
            let (claimed, dead) = rest.split_at((n * 3).min(rest.len()));
            if !dead.is_empty() {
                let count = dead.len() / 2;
                warn!(worker = %self.worker, dead = count, "orphaned tasks past max attempts moved to dead letters");
                self.stats
                    .dead
                    .fetch_add(count as u64, std::sync::atomic::Ordering::Relaxed);
                for pair in dead.chunks_exact(2) {
                    let attempts = pair[1].parse().unwrap_or(0);
                    self.dead_hook(
                        &pair[0],
                        attempts,
                        "worker lost (no heartbeat) on every attempt",
                    )
                    .await;
                }
            }
            let got = Self::parse(claimed);
            if !got.is_empty() {
                info!(worker = %self.worker, n = got.len(), "recovered orphaned tasks");
                self.stats
                    .recovered
                    .fetch_add(got.len() as u64, std::sync::atomic::Ordering::Relaxed);
                return Ok(got);
            }
        }
        let flat: Vec<String> = q
            .scripts
            .fetch
            .key(&q.keys.stream)
            .key(&q.keys.delayed)
            .arg(GROUP)
            .arg(&*self.worker)
            .arg(count)
            .arg(q.opts.promote_batch)
            .invoke_async(&mut c)
            .await?;
        Ok(Self::parse(&flat))
    }

    /// Fetch until there is work or shutdown (then an empty batch). Backend errors are
    /// logged and retried with backoff; they never reach apalis, whose worker would die.
    async fn fetch_batch(self: Arc<Self>) -> Vec<Envelope> {
        let mut backoff = Duration::from_millis(100);
        loop {
            if self.shutdown.is_triggered() {
                return Vec::new();
            }
            let free = self
                .concurrency
                .saturating_sub(self.running.load(Ordering::Acquire))
                .max(1);
            let sent = Instant::now();
            let wait = match self.try_fetch(free).await {
                Ok(got) if !got.is_empty() => {
                    let mut owned = lock(&self.owned);
                    for e in &got {
                        owned.insert(
                            e.id.clone(),
                            Owned {
                                fetched_at: sent,
                                lost: Shutdown::new(),
                            },
                        );
                    }
                    return got;
                }
                Ok(_) => {
                    backoff = Duration::from_millis(100);
                    self.q.opts.poll_interval
                }
                Err(e) => {
                    self.note_error("fetch", &e).await;
                    let w = backoff;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    w
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = self.shutdown.wait() => {}
            }
        }
    }

    async fn note_error(&self, what: &str, e: &RedisError) {
        WorkerStats::bump(&self.stats.backend_errors);
        warn!(worker = %self.worker, op = what, error = %e, "queue backend error; retrying");
        // A flushed or recreated Redis has no group: create it again.
        if e.code() == Some("NOGROUP") {
            if let Err(e) = self.q.ensure_group().await {
                warn!(worker = %self.worker, error = %e, "recreating consumer group failed");
            }
        }
    }

    /// Run a Redis operation until it succeeds, for at most the claim idle time (after that
    /// another worker owns the entry anyway).
    async fn settle<F, Fut>(&self, what: &str, mut op: F) -> bool
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<(), RedisError>>,
    {
        let deadline = Instant::now() + self.q.opts.claim_idle();
        let mut backoff = Duration::from_millis(50);
        loop {
            match op().await {
                Ok(()) => return true,
                Err(e) => {
                    self.note_error(what, &e).await;
                    if Instant::now() + backoff > deadline {
                        warn!(worker = %self.worker, op = what, "giving up; the entry will be recovered as an orphan");
                        return false;
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
            }
        }
    }

    async fn execute<H, Fut>(&self, env: Envelope, handler: &H)
    where
        H: Fn(TaskMsg, TaskCtx) -> Fut,
        Fut: Future<Output = TaskResult>,
    {
        let opts = &self.q.opts;
        if self.shutdown.is_triggered() {
            // Handed to apalis but not started before the stop: give it back uncharged.
            self.release(std::slice::from_ref(&env)).await;
            self.finish(&env);
            return;
        }
        let lost = lock(&self.owned)
            .get(&env.id)
            .map(|o| o.lost.clone())
            .unwrap_or_default();
        let (result, panicked) = match serde_json::from_str::<TaskMsg>(&env.raw) {
            Ok(msg) => {
                let ctx = TaskCtx {
                    attempt: env.attempt,
                    worker: self.worker.clone(),
                    stopping: self.shutdown.clone(),
                    lease_lost: lost.clone(),
                };
                run_caught(handler, msg, ctx).await
            }
            // Retrying cannot fix an undecodable payload.
            Err(e) => {
                self.dead(&env, &format!("undecodable task: {e}")).await;
                self.finish(&env);
                return;
            }
        };
        if panicked {
            WorkerStats::bump(&self.stats.panicked);
        }
        match result {
            TaskResult::Done => {
                let q = &self.q;
                self.settle("ack", || {
                    let mut c = q.conn.clone();
                    let mut inv = q.scripts.ack.prepare_invoke();
                    inv.key(&q.keys.stream)
                        .arg(GROUP)
                        .arg(&*self.worker)
                        .arg(&env.id);
                    async move { inv.invoke_async::<i64>(&mut c).await.map(|_| ()) }
                })
                .await;
                WorkerStats::bump(&self.stats.done);
            }
            TaskResult::RetryAfter(d) => {
                // The new entry carries the attempts consumed before this one.
                self.reschedule(&env, env.attempt.saturating_sub(1), d)
                    .await;
                WorkerStats::bump(&self.stats.retry_after);
            }
            TaskResult::Failed(msg) => {
                WorkerStats::bump(&self.stats.failed);
                if env.attempt >= opts.max_attempts {
                    warn!(worker = %self.worker, id = %env.id, attempt = env.attempt, error = %msg, "task dead after max attempts");
                    self.dead(&env, &msg).await;
                } else {
                    debug!(worker = %self.worker, id = %env.id, attempt = env.attempt, error = %msg, "task failed; retrying");
                    self.reschedule(&env, env.attempt, opts.retry_backoff(env.attempt))
                        .await;
                }
            }
        }
        self.finish(&env);
    }

    fn finish(&self, env: &Envelope) {
        lock(&self.owned).remove(&env.id);
        self.running.fetch_sub(1, Ordering::AcqRel);
    }

    async fn reschedule(&self, env: &Envelope, prior_attempts: u32, delay: Duration) {
        let q = &self.q;
        let m = member(prior_attempts, &env.raw);
        self.settle("reschedule", || {
            let mut c = q.conn.clone();
            let mut inv = q.scripts.reschedule.prepare_invoke();
            inv.key(&q.keys.stream)
                .key(&q.keys.delayed)
                .arg(delay.as_millis() as u64)
                .arg(&m)
                .arg(GROUP)
                .arg(&*self.worker)
                .arg(&env.id);
            async move { inv.invoke_async::<i64>(&mut c).await.map(|_| ()) }
        })
        .await;
    }

    async fn dead(&self, env: &Envelope, error: &str) {
        let q = &self.q;
        // DEAD_LUA moves the entry only while this consumer still owns it: a worker whose
        // claim was taken over must not report the new owner's task dead.
        let moved = std::sync::atomic::AtomicBool::new(false);
        let settled = self
            .settle("dead-letter", || {
                let mut c = q.conn.clone();
                let mut inv = q.scripts.dead.prepare_invoke();
                inv.key(&q.keys.stream)
                    .key(&q.keys.dead)
                    .arg(GROUP)
                    .arg(&*self.worker)
                    .arg(&env.id)
                    .arg(&env.raw)
                    .arg(env.attempt)
                    .arg(error)
                    .arg(q.opts.dead_max);
                let moved = &moved;
                async move {
                    let n = inv.invoke_async::<i64>(&mut c).await?;
                    moved.store(n == 1, Ordering::Relaxed);
                    Ok(())
                }
            })
            .await;
        if settled && moved.load(Ordering::Relaxed) {
            WorkerStats::bump(&self.stats.dead);
            self.dead_hook(&env.raw, env.attempt, error).await;
        }
    }

    /// Tell the worker's dead hook (the runner marks the task's items failed).
    async fn dead_hook(&self, raw: &str, attempts: u32, error: &str) {
        let Some(hook) = &self.on_dead else { return };
        match serde_json::from_str::<TaskMsg>(raw) {
            Ok(task) => hook(task, attempts, error.to_string()).await,
            Err(e) => {
                warn!(worker = %self.worker, error = %e, "dead task undecodable: its items stay pending until `reconcile`")
            }
        }
    }

    /// Give entries back to the queue with their attempts unchanged (RELEASE_LUA).
    async fn release(&self, envs: &[Envelope]) -> bool {
        if envs.is_empty() {
            return true;
        }
        let q = &self.q;
        self.settle("release", || {
            let mut c = q.conn.clone();
            let mut inv = q.scripts.release.prepare_invoke();
            inv.key(&q.keys.stream).arg(GROUP).arg(&*self.worker);
            for e in envs {
                inv.arg(&e.id).arg(&e.raw).arg(e.attempt.saturating_sub(1));
            }
            async move { inv.invoke_async::<i64>(&mut c).await.map(|_| ()) }
        })
        .await
    }

    /// Give up the claims the fleet may already have taken over: once the lease runs out
    /// (no successful heartbeat for nearly the claim idle time), every in-flight handler
    /// is told to stop calling, so a task is never worked on by two workers at once.
    async fn lease_watchdog(self: Arc<Self>) {
        let every = (self.q.opts.heartbeat / 4).max(Duration::from_millis(50));
        loop {
            tokio::time::sleep(every).await;
            let now = Instant::now();
            let lease = lock(&self.lease).clone();
            let mut gone = 0;
            for o in lock(&self.owned).values() {
                if !o.lost.is_triggered() && lease.expired(o.fetched_at, now) {
                    o.lost.trigger();
                    gone += 1;
                }
            }
            if gone > 0 {
                warn!(worker = %self.worker, tasks = gone, lost_after = ?lease.lost_after(),
                    "no heartbeat reached the queue for too long: stopping in-flight tasks (the fleet may reclaim them)");
            }
        }
    }

    /// Keep our claims fresh; now and then drop long-idle consumers of earlier starts.
    async fn heartbeat_loop(self: Arc<Self>) {
        let q = &self.q;
        let mut tick = tokio::time::interval(q.opts.heartbeat);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut n: u64 = 0;
        loop {
            tick.tick().await;
            n += 1;
            let ids: Vec<String> = lock(&self.owned).keys().cloned().collect();
            let mut c = q.conn.clone();
            let sent = Instant::now();
            if !ids.is_empty() {
                let mut inv = q.scripts.heartbeat.prepare_invoke();
                inv.key(&q.keys.stream).arg(GROUP).arg(&*self.worker);
                for id in &ids {
                    inv.arg(id);
                }
                match inv.invoke_async::<Vec<String>>(&mut c).await {
                    Ok(lost) => {
                        lock(&self.lease).renewed(sent);
                        if !lost.is_empty() {
                            let owned = lock(&self.owned);
                            for id in &lost {
                                if let Some(o) = owned.get(id) {
                                    o.lost.trigger();
                                }
                            }
                            warn!(worker = %self.worker, lost = lost.len(), "in-flight tasks were taken over by other workers (missed heartbeats): stopping them");
                        }
                    }
                    Err(e) => self.note_error("heartbeat", &e).await,
                }
            }
            if n % 60 == 1 {
                let r = q
                    .scripts
                    .gc
                    .key(&q.keys.stream)
                    .arg(GROUP)
                    .arg(q.opts.consumer_gc_idle.as_millis() as u64)
                    .arg(&*self.worker)
                    .invoke_async::<i64>(&mut c)
                    .await;
                match r {
                    Ok(0) => {}
                    Ok(removed) => {
                        debug!(removed, "removed idle consumers of earlier worker starts")
                    }
                    Err(e) => self.note_error("consumer gc", &e).await,
                }
            }
        }
    }

    /// Shutdown: give back buffered entries and leave the group if nothing is pending.
    async fn close(
        self: Arc<Self>,
        pending: Option<BoxFuture<'static, Vec<Envelope>>>,
        mut buf: Vec<Envelope>,
    ) {
        if let Some(f) = pending {
            buf.extend(f.await);
        }
        let q = &self.q;
        if !buf.is_empty() {
            let released = self.release(&buf).await;
            debug!(worker = %self.worker, n = buf.len(), released, "released unstarted tasks");
        }
        lock(&self.owned).clear();
        // Leave the group only with an empty PEL (DELCONSUMER drops pending entries).
        let mut c = q.conn.clone();
        let pend: Result<Vec<redis::Value>, RedisError> = redis::cmd("XPENDING")
            .arg(&q.keys.stream)
            .arg(GROUP)
            .arg("-")
            .arg("+")
            .arg(1)
            .arg(&*self.worker)
            .query_async(&mut c)
            .await;
        if let Ok(p) = pend {
            if p.is_empty() {
                let _: Result<i64, RedisError> = redis::cmd("XGROUP")
                    .arg("DELCONSUMER")
                    .arg(&q.keys.stream)
                    .arg(GROUP)
                    .arg(&*self.worker)
                    .query_async(&mut c)
                    .await;
            }
        }
    }
}

/// The apalis backend: yields fetched entries one by one; fetches again (up to the free
/// concurrency) when its buffer is empty; never yields an error.
pub struct StreamsBackend {
    shared: Arc<Shared>,
    buf: VecDeque<Envelope>,
    fetch: Option<BoxFuture<'static, Vec<Envelope>>>,
    close: Option<BoxFuture<'static, ()>>,
}

impl StreamsBackend {
    /// The worker (consumer) name this backend fetches as.
    pub fn worker(&self) -> &str {
        &self.shared.worker
    }
}

impl Backend for StreamsBackend {
    type Task = Task<Envelope>;
    type Error = QueueError;

    fn poll_ready(
        &mut self,
        _: &mut Context<'_>,
        _: &WorkerContext,
    ) -> Poll<Result<(), QueueError>> {
        Poll::Ready(Ok(()))
    }

    fn poll_next(
        &mut self,
        cx: &mut Context<'_>,
        _: &WorkerContext,
    ) -> Poll<Option<Result<Task<Envelope>, QueueError>>> {
        loop {
            if let Some(e) = self.buf.pop_front() {
                self.shared.running.fetch_add(1, Ordering::AcqRel);
                return Poll::Ready(Some(Ok(Task::new(e))));
            }
            let shared = self.shared.clone();
            let fut = self
                .fetch
                .get_or_insert_with(|| shared.fetch_batch().boxed());
            match fut.poll_unpin(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(got) => {
                    self.fetch = None;
                    if got.is_empty() {
                        // Only on shutdown: apalis then drains in-flight tasks and closes.
                        return Poll::Ready(None);
                    }
                    self.buf.extend(got);
                }
            }
        }
    }

    fn poll_close(
        &mut self,
        cx: &mut Context<'_>,
        _: &WorkerContext,
    ) -> Poll<Result<(), QueueError>> {
        if self.close.is_none() {
            let pending = self.fetch.take();
            let buf: Vec<Envelope> = self.buf.drain(..).collect();
            self.close = Some(self.shared.clone().close(pending, buf).boxed());
        }
        match self.close.as_mut() {
            Some(f) => f.poll_unpin(cx).map(|_| Ok(())),
            None => Poll::Ready(Ok(())),
        }
    }
}

impl BackendConfig for StreamsBackend {
    type Args = Envelope;
    type Id = RandomId;
    type Kind = Ephemeral;
    type Config = QueueOptions;
    type Layer = Identity;

    fn config(&self) -> &QueueOptions {
        &self.shared.q.opts
    }

    fn middleware(&mut self, _: &mut WorkerContext) -> Identity {
        Identity::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_hides_credentials() {
        assert_eq!(
            redact("redis://u:secret@127.0.0.1:1/0"),
            "redis://***@127.0.0.1:1/0"
        );
        assert_eq!(redact("redis://127.0.0.1:6380"), "redis://127.0.0.1:6380");
    }

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
