//! The task queue: transport between producers and workers (docs/design.md, "The queue").
//!
//! Two modes behind one interface, [`Queue`]:
//! - fleet mode ([`RedisQueue`]): an apalis 1.0 backend of our own over Redis Streams consumer
//!   groups (`XADD`, `XREADGROUP`, `XACK`+`XDEL`, `XAUTOCLAIM` with delivery count -> attempts,
//!   a delayed sorted set promoted in bounded batches, a `MAXLEN`-bounded dead-letter stream).
//!   apalis-redis 1.0.0 is not used: its defects (docs/design.md, "The queue") sit in its Lua scripts and
//!   worker loop, out of reach of thin guards.
//! - embedded mode ([`EmbeddedQueue`]): apalis-sqlite 1.0 in a SQLite file of its own, one
//!   worker process.
//!
//! The ledger is the source of truth; the queue is transport. A task may run more than once
//! (a lost ack, an orphan recovered while its first worker was only slow, a retried push):
//! job handlers skip items the ledger already shows terminal, which makes that harmless.

pub(crate) mod embedded;
pub(crate) mod fair;
pub(crate) mod lease;
pub(crate) mod redis;
mod seam;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::QueueConfig;
use crate::link::backoff::Backoff;
pub use crate::throttle::Lane;

pub use self::embedded::EmbeddedQueue;
pub use self::redis::RedisQueue;
pub use crate::shutdown::Shutdown;
pub use seam::{Queue, TaskHandler, TaskQueue};

/// One task: a chunk of items of one job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskMsg {
    /// The job in the ledger.
    pub job_id: i64,
    /// The job's kind: picks the handler (checked against the job's spec).
    pub kind: crate::store::JobKind,
    /// Index of this chunk within the job, from 0.
    pub chunk: u32,
    /// Keys of the chunk's items in the ledger.
    pub keys: Vec<String>,
    /// The shop the job works for: the queue hands out tasks in the shops' weighted fair
    /// order, not first come first served (docs/design.md, "Shops"). Empty for tasks
    /// written before shops had a share (they form one flow of their own).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub shop: String,
    /// Interactive tasks are handed out before every bulk one (docs/design.md, "Lanes").
    #[serde(default, skip_serializing_if = "Lane::is_bulk")]
    pub lane: Lane,
}

/// Which of a set of pending items the queue's live tasks (ready, in flight, delayed) carry,
/// per job, as hashes of their keys. The pending items are named first ([`LiveCover::want`]);
/// the queue's snapshot then marks each one a task carries ([`LiveCover::add`]), so a check
/// of a million pending items holds their 8-byte hashes and a flag each, not a second set of
/// every key the tasks carry (a million-item job's tasks were ~200 MB as `TaskMsg`s, and a
/// set of their hashes ~30 MB more; docs/design.md, "Self-healing queue"). Hashes are of
/// this process only (never stored).
#[derive(Debug, Default)]
pub struct LiveCover {
    by_job: std::collections::HashMap<i64, Wanted>,
}

/// One job's wanted hashes, sorted, and whether a live task carries each.
#[derive(Debug, Default)]
struct Wanted {
    hashes: Vec<u64>,
    covered: Vec<bool>,
}

impl Wanted {
    fn position(&self, hash: u64) -> Option<usize> {
        self.hashes.binary_search(&hash).ok()
    }
}

impl LiveCover {
    /// The hash a key is kept as.
    pub fn key_hash(key: &str) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        key.hash(&mut h);
        h.finish()
    }

    /// Look for the keys of `job_id` whose hashes are `hashes` (any order; a repeat counts
    /// once); replaces what was wanted of the job before.
    pub fn want(&mut self, job_id: i64, mut hashes: Vec<u64>) {
        hashes.sort_unstable();
        hashes.dedup();
        let covered = vec![false; hashes.len()];
        self.by_job.insert(job_id, Wanted { hashes, covered });
    }

    /// Count `task`'s wanted items as carried (the rest of its keys are not kept).
    pub fn add(&mut self, task: &TaskMsg) {
        let Some(wanted) = self.by_job.get_mut(&task.job_id) else {
            return;
        };
        for key in &task.keys {
            if let Some(i) = wanted.position(Self::key_hash(key)) {
                wanted.covered[i] = true;
            }
        }
    }

    /// Whether a live task of `job_id` carries `key` (false for a key not wanted).
    #[cfg(test)]
    fn covers(&self, job_id: i64, key: &str) -> bool {
        self.covers_hash(job_id, Self::key_hash(key))
    }

    /// Whether a live task of `job_id` carries the key of hash `hash` ([`LiveCover::key_hash`]).
    #[cfg(test)]
    fn covers_hash(&self, job_id: i64, hash: u64) -> bool {
        self.by_job
            .get(&job_id)
            .and_then(|w| w.position(hash).map(|i| w.covered[i]))
            .unwrap_or(false)
    }

    /// The wanted hashes of `job_id` that no live task carries.
    pub fn uncovered(&self, job_id: i64) -> std::collections::HashSet<u64> {
        self.by_job
            .get(&job_id)
            .map(|w| {
                w.hashes
                    .iter()
                    .zip(&w.covered)
                    .filter(|(_, covered)| !**covered)
                    .map(|(h, _)| *h)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Whether nothing is wanted: no queue read can find anything uncovered.
    pub fn wants_nothing(&self) -> bool {
        self.by_job.values().all(|w| w.hashes.is_empty())
    }
}

/// What the handler learns about the delivery it runs.
#[derive(Debug, Clone)]
pub struct TaskCtx {
    /// 1 on the first delivery; bumped by failures, panics and orphan recovery, never by
    /// `RetryAfter`.
    pub attempt: u32,
    /// Name of the worker running the task (host-pid-ulid).
    pub worker: Arc<str>,
    /// The queued entry this run delivers: the same on every re-delivery of that entry (a
    /// dead worker's task taken over, a failed run retried), another for a task queued anew
    /// (`reconcile`, `dead --requeue`). The queue never runs one entry twice at once, so what
    /// an earlier run of the same entry left behind is this run's to settle
    /// (docs/design.md, "Listed once").
    pub delivery: Arc<str>,
    /// The worker is stopping (SIGTERM, idle exit): start no new item; items already
    /// calling may finish within the shutdown grace, the rest go back uncharged.
    pub stopping: Shutdown,
    /// This delivery's claim is gone (the worker could not heartbeat for as long as the
    /// fleet takes to reclaim it, or another worker took it over): stop calling at once,
    /// the new owner runs the task.
    pub lease_lost: Shutdown,
}

impl TaskCtx {
    /// A context for running a handler outside a queue worker (tests).
    #[cfg(test)]
    pub(crate) fn detached(attempt: u32) -> TaskCtx {
        TaskCtx {
            attempt,
            worker: Arc::from("detached"),
            delivery: Arc::from("detached"),
            stopping: Shutdown::new(),
            lease_lost: Shutdown::new(),
        }
    }
}

/// Called when a task goes to the dead-letter stream (its attempts are exhausted), with the
/// task, the attempts it used and the last error: the runner marks its items `failed`.
pub type DeadHook =
    Arc<dyn Fn(TaskMsg, u32, String) -> futures::future::BoxFuture<'static, ()> + Send + Sync>;

/// A worker as the queue sees it (fleet mode: a consumer of the group).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LiveWorker {
    /// host-pid-ulid.
    pub(crate) name: String,
    /// Tasks it holds.
    pub(crate) pending: u64,
    /// Since its last fetch or heartbeat, ms.
    pub(crate) idle_ms: u64,
}

/// One entry of the dead-letter stream.
#[derive(Debug, Clone)]
pub struct DeadEntry {
    /// Stream entry id (Redis) or row id (embedded).
    pub id: String,
    /// The task, when its payload decodes.
    pub task: Option<TaskMsg>,
    /// Attempts the task used.
    pub attempts: u32,
    /// The error of its last attempt.
    pub error: String,
    /// The worker that ran its last attempt (empty when unknown).
    pub worker: String,
}

/// Outcome of one handler run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskResult {
    /// Finished: acked and deleted.
    Done,
    /// Re-queue the task to run again after at least this long; no attempt is consumed.
    RetryAfter(Duration),
    /// Counts an attempt: retried with backoff, dead after `max_attempts`.
    Failed(String),
}

/// The one field of a task a look at the waiting shops needs: the rest of a task (its keys)
/// is skipped by the parser, not built.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct TaskShop {
    pub(crate) shop: String,
}

/// Queue tuning, usually from `[queue]` of the config file ([`QueueOptions::from_config`]).
#[derive(Debug, Clone)]
pub struct QueueOptions {
    /// Queue name: Redis key prefix `{name}:` / apalis-sqlite queue name.
    pub name: String,
    /// Tasks per pipelined push round trip.
    pub push_batch: usize,
    /// Idle wait between empty fetches.
    pub poll_interval: Duration,
    /// How often a worker refreshes the claim on its in-flight tasks.
    pub heartbeat: Duration,
    /// A task whose claim was not refreshed for `heartbeat * missed_heartbeats` is an orphan.
    pub missed_heartbeats: u32,
    /// Attempts per task (failures, panics, orphan recoveries) before it is dead.
    pub max_attempts: u32,
    /// Backoff after a failed attempt: `retry_base * 2^(attempt-1)`, capped at `retry_cap`.
    pub retry_base: Duration,
    /// Longest backoff after a failed attempt.
    pub retry_cap: Duration,
    /// Dead-letter entries kept (oldest trimmed).
    pub dead_max: usize,
    /// Due delayed tasks moved to the stream per fetch (keeps every Lua call small).
    pub promote_batch: usize,
    /// Consumers with nothing pending and idle this long are removed from the group.
    pub consumer_gc_idle: Duration,
    /// The weight of each shop (`[shops.<name>] weight`, or the ledger's directory): its
    /// share of the tasks handed out among the shops with tasks ready. Unnamed shops weigh 1.
    pub shop_weights: ShopWeights,
}

/// Shops' weights in the queue's fair order: shared by the clones of a queue, replaced when
/// the ledger's directory changes (a shop added while the fleet runs).
#[derive(Debug, Clone, Default)]
pub struct ShopWeights(Arc<std::sync::RwLock<Arc<BTreeMap<String, u32>>>>);

impl ShopWeights {
    /// These weights.
    pub fn new(weights: BTreeMap<String, u32>) -> ShopWeights {
        ShopWeights(Arc::new(std::sync::RwLock::new(Arc::new(weights))))
    }

    /// The weight of `shop`, if it has one.
    pub(crate) fn get(&self, shop: &str) -> Option<u32> {
        self.0
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(shop)
            .copied()
    }

    /// Replace them all.
    pub(crate) fn replace(&self, weights: BTreeMap<String, u32>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(weights);
    }
}

impl FromIterator<(String, u32)> for ShopWeights {
    fn from_iter<I: IntoIterator<Item = (String, u32)>>(iter: I) -> Self {
        ShopWeights::new(iter.into_iter().collect())
    }
}

impl Default for QueueOptions {
    fn default() -> Self {
        QueueOptions::from_config(&QueueConfig::default())
    }
}

impl QueueOptions {
    /// Options from `[queue]` of the config, clamped to their bounds (`promote_batch`, an
    /// internal size, is fixed).
    pub fn from_config(c: &QueueConfig) -> QueueOptions {
        QueueOptions {
            name: c.name.clone(),
            push_batch: c.push_batch.clamp(1, 20_000),
            poll_interval: Duration::from_millis(c.poll_interval_ms.max(1)),
            heartbeat: Duration::from_secs(c.heartbeat_s.max(1)),
            missed_heartbeats: c.missed_heartbeats.max(2),
            max_attempts: c.max_attempts.max(1),
            retry_base: Duration::from_millis(c.retry_base_ms.max(1)),
            // Never below the first backoff.
            retry_cap: Duration::from_secs(c.retry_cap_s)
                .max(Duration::from_millis(c.retry_base_ms.max(1))),
            dead_max: c.dead_max.max(1),
            promote_batch: 1_000,
            // Below a minute a consumer between two polls of a slow task could be removed.
            consumer_gc_idle: Duration::from_secs(c.consumer_gc_idle_s.max(60)),
            shop_weights: ShopWeights::default(),
        }
    }

    /// The weight of `shop` in the queue's fair order.
    pub(crate) fn weight(&self, shop: &str) -> u32 {
        self.shop_weights
            .get(shop)
            .unwrap_or(crate::config::DEFAULT_WEIGHT)
            .max(1)
    }

    /// Idle time after which another worker takes over an in-flight task.
    pub(crate) fn claim_idle(&self) -> Duration {
        self.heartbeat * self.missed_heartbeats.max(2)
    }

    /// Backoff before the retry that follows failed attempt `attempt` (1-based).
    pub(crate) fn retry_backoff(&self, attempt: u32) -> Duration {
        Backoff::new(self.retry_base, self.retry_cap).ceiling(attempt.saturating_sub(1))
    }
}

/// Worker settings for one process start.
#[derive(Clone)]
pub struct WorkerOptions {
    /// Tasks run at once.
    pub concurrency: usize,
    /// Worker (consumer) name; default [`worker_name`]. Must be unique per process start.
    pub name: Option<String>,
    /// Told about every task this worker moves to the dead-letter stream.
    pub on_dead: Option<DeadHook>,
}

impl std::fmt::Debug for WorkerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerOptions")
            .field("concurrency", &self.concurrency)
            .field("name", &self.name)
            .field("on_dead", &self.on_dead.is_some())
            .finish()
    }
}

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions {
            concurrency: 8,
            name: None,
            on_dead: None,
        }
    }
}

/// A unique worker name per process start: `host-pid-ulid`.
pub(crate) fn worker_name() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| "host".into());
    format!("{host}-{}-{}", std::process::id(), ulid::Ulid::new())
}

/// Queue lengths. `total()` (ready + in flight + delayed) is what status and autoscaling use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueLen {
    /// Waiting to be fetched.
    pub ready: u64,
    /// Fetched by a worker and not yet acked.
    pub in_flight: u64,
    /// Scheduled for later (RetryAfter, failure backoff, push_delayed).
    pub delayed: u64,
    /// Dead-letter entries kept (bounded by `dead_max`).
    pub dead: u64,
}

impl QueueLen {
    /// Tasks that will still run: ready + in flight + delayed (dead entries not counted).
    pub fn total(&self) -> u64 {
        self.ready + self.in_flight + self.delayed
    }
}

/// Counters of one worker run.
#[derive(Debug, Default)]
pub(crate) struct WorkerStats {
    pub(crate) done: AtomicU64,
    pub(crate) retry_after: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) panicked: AtomicU64,
    pub(crate) dead: AtomicU64,
    pub(crate) recovered: AtomicU64,
    pub(crate) backend_errors: AtomicU64,
}

/// Snapshot of [`WorkerStats`] returned when a worker exits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerReport {
    /// The worker's name.
    pub worker: String,
    /// Tasks finished and acked.
    pub done: u64,
    /// Tasks re-queued by [`TaskResult::RetryAfter`] (no attempt charged).
    pub retry_after: u64,
    /// Failed attempts (including panics) that were re-queued or went dead.
    pub failed: u64,
    /// Handler runs that panicked (also counted in `failed`).
    pub panicked: u64,
    /// Tasks this worker moved to the dead-letter stream.
    pub dead: u64,
    /// Orphans this worker took over.
    pub recovered: u64,
    /// Backend errors survived (logged, retried with backoff).
    pub backend_errors: u64,
}

impl WorkerStats {
    fn report(&self, worker: &str) -> WorkerReport {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        WorkerReport {
            worker: worker.to_string(),
            done: g(&self.done),
            retry_after: g(&self.retry_after),
            failed: g(&self.failed),
            panicked: g(&self.panicked),
            dead: g(&self.dead),
            recovered: g(&self.recovered),
            backend_errors: g(&self.backend_errors),
        }
    }
    fn bump(a: &AtomicU64) {
        a.fetch_add(1, Ordering::Relaxed);
    }
}

/// Queue errors. Messages never contain credentials (URLs are redacted).
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// The Redis URL (or a certificate file the environment names) cannot be used: the
    /// operator's to fix, nothing to retry.
    #[error("redis queue at {url}: {source}")]
    Setup {
        /// The Redis URL, password redacted.
        url: String,
        /// What is wrong with it.
        #[source]
        source: crate::redis_conn::RedisOpenError,
    },
    /// Redis could not be reached, or failed or refused a command.
    #[error("redis queue at {url}: {msg}")]
    Redis {
        /// The Redis URL, password redacted.
        url: String,
        /// Redis's error.
        msg: String,
    },
    /// A bulk push failed after `pushed` tasks were confirmed; the failed batch may be partly
    /// enqueued, so a retry can duplicate some tasks (harmless: handlers skip finished items).
    #[error("redis queue at {url}: push failed after {pushed} tasks confirmed: {msg}")]
    Push {
        /// The Redis URL, password redacted.
        url: String,
        /// Tasks confirmed before the failure.
        pushed: usize,
        /// Redis's error.
        msg: String,
    },
    /// The embedded queue's SQLite file could not be opened, read or written.
    #[error("embedded queue {path}: {msg}")]
    Embedded {
        /// The queue file.
        path: String,
        /// The error.
        msg: String,
    },
    /// A task could not be encoded as JSON.
    #[error("task encoding: {0}")]
    Encode(String),
    /// A worker's run ended with an error (including the loss of the embedded-worker lock).
    #[error("worker {worker}: {msg}")]
    Worker {
        /// The worker's name.
        worker: String,
        /// The error.
        msg: String,
    },
    /// A second embedded worker on the same ledger (its limits would not be shared).
    #[error("worker {worker}: another embedded worker is running ({held}); start Redis and pass its URL to run several workers")]
    EmbeddedBusy {
        /// The worker that could not start.
        worker: String,
        /// Why the ledger's embedded-worker lock could not be taken (names the holder).
        held: String,
    },
    /// The queue serves another ledger than the one this process opened.
    #[error("the queue at {queue} serves the ledger with fleet id {queue_fleet}, but {ledger} has fleet id {ledger_fleet}: this process was given another ledger than the fleet's (check --db / SYNCFLEET_DB and --redis / SYNCFLEET_REDIS_URL)")]
    FleetMismatch {
        /// The queue: Redis URL (password redacted) and stream key.
        queue: String,
        /// The fleet id the queue is bound to.
        queue_fleet: String,
        /// The ledger this process opened (as named in messages).
        ledger: String,
        /// That ledger's fleet id.
        ledger_fleet: String,
    },
    /// The queue's Redis evicts any key under memory pressure: the stream, the consumer
    /// group or a gate's state could vanish (docs/design.md, "Redis memory").
    #[error(
        "redis at {url} evicts keys under memory pressure (maxmemory-policy {policy}): the \
         fleet's tasks and gate state could be dropped; set `maxmemory-policy noeviction` \
         (and size maxmemory for the queue) before running workers on it"
    )]
    Evicting {
        /// The Redis URL, password redacted.
        url: String,
        /// The policy in force.
        policy: String,
    },
    /// An operation the queue of this mode does not offer.
    #[error("{what} is not supported by the {mode} queue")]
    Unsupported {
        /// The operation.
        what: &'static str,
        /// The queue's mode.
        mode: &'static str,
    },
}

/// Run one handler future, turning a panic (while building or polling it) into a failure.
pub(crate) async fn run_caught<H, Fut>(
    handler: &H,
    msg: TaskMsg,
    ctx: TaskCtx,
) -> (TaskResult, bool)
where
    H: Fn(TaskMsg, TaskCtx) -> Fut,
    Fut: std::future::Future<Output = TaskResult>,
{
    use futures::FutureExt;
    use std::panic::AssertUnwindSafe;
    let fut = match std::panic::catch_unwind(AssertUnwindSafe(|| handler(msg, ctx))) {
        Ok(f) => f,
        Err(p) => return (TaskResult::Failed(panic_text(&*p)), true),
    };
    match AssertUnwindSafe(fut).catch_unwind().await {
        Ok(r) => (r, false),
        Err(p) => (TaskResult::Failed(panic_text(&*p)), true),
    }
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    let s = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string payload".into());
    format!("handler panicked: {s}")
}

#[cfg(test)]
mod tests;
