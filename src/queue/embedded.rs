//! Embedded mode: apalis-sqlite 1.0 in a SQLite file of its own (never the ledger file:
//! its `Jobs` table would collide with the ledger's `jobs`), one worker process.
//!
//! Guards over apalis-sqlite 1.0.0 (docs/design.md, "The queue"):
//! - it sets `synchronous=OFF` on one pooled connection during `setup()`: we run setup on a
//!   throw-away pool, then open the working pool with our own pragmas (WAL, NORMAL, busy
//!   timeout), so no connection of ours runs with `synchronous=OFF`;
//! - `RetryAfterError` leaves a task stuck forever and failures retry immediately: the
//!   handler wrapper never returns an error for those; it pushes a fresh task with `run_at`
//!   in the future (carrying the attempts consumed so far) and acks the current one;
//! - every task is pushed with `max_attempts = 1`, so the only error we return (attempts
//!   exhausted) marks the row `Failed` for good: that row is the dead letter.
//!
//! Tasks are handed out in the shops' weighted fair order ([`super::fair`]): each row's
//! apalis-sqlite priority is its start tag, and the clock lives in a table of our own in the
//! same file (`syncfleet_fair`).
//!
//! Interactive tasks have a queue of their own in the same file (`<name>:interactive`) and a
//! second apalis worker, of as many slots as the first, that takes only those: with every slot
//! of the bulk worker held by bulk tasks, an interactive one still starts at once
//! (docs/design.md, "Lanes"). apalis-sqlite fetches one queue in priority order and cannot
//! fetch by lane, so the slots cannot be kept inside one worker as the fleet's are.
//!
//! apalis-sqlite schedules in whole seconds: a `RetryAfter` shorter than 1 s waits up to 1 s.
//! A second embedded worker process is refused through the ledger's embedded-worker lock
//! ([`EmbeddedQueue::with_ledger_lock`]).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use apalis::prelude::{
    Attempt, BackendExt, BoxDynError, Metrics, TaskBuilder, TaskSink, WorkerBuilder,
    WorkerBuilderExt,
};
use apalis_sqlite::{Config as SqliteConfig, SqliteStorage};
use futures::FutureExt;
use serde::{Deserialize, Serialize};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::SqlitePool;
use tracing::{info, warn};

use super::fair;
use super::{
    run_caught, worker_name, DeadEntry, DeadHook, Lane, QueueError, QueueLen, QueueOptions,
    Shutdown, TaskCtx, TaskMsg, TaskResult, WorkerOptions, WorkerReport, WorkerStats,
};
use crate::store::{Store, EMBEDDED_LOCK_STALE_AFTER};

/// The fair order's clock in the queue file: each shop's finish tag, and the virtual time in
/// the row named [`FAIR_CLOCK_ROW`] (no shop name can be empty with a control character).
const FAIR_TABLE: &str =
    "CREATE TABLE IF NOT EXISTS syncfleet_fair (shop TEXT PRIMARY KEY, finish REAL NOT NULL)";
const FAIR_CLOCK_ROW: &str = "\u{1}virtual_time";

/// Each lane has a queue of its own in the file.
const LANES: [Lane; 2] = [Lane::Bulk, Lane::Interactive];

/// The one field of a stored row a look at the waiting shops needs (the rest is skipped).
#[derive(Deserialize)]
struct StoredShop {
    msg: super::TaskShop,
}

/// What the SQLite queue stores: the task and the attempts consumed before this row.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Stored {
    pub(crate) msg: TaskMsg,
    pub(crate) prior_attempts: u32,
    /// The entry's identity, kept when the row is pushed again after a failed run or
    /// recovered from a dead worker ([`TaskCtx::delivery`]).
    #[serde(default = "new_delivery")]
    pub(crate) delivery: String,
}

/// A new queued entry's identity.
fn new_delivery() -> String {
    ulid::Ulid::new().to_string()
}

/// A failed row: id, payload, apalis attempts, last result, worker.
type DeadRow = (String, Vec<u8>, i64, Option<String>, Option<String>);

/// The longest an idle lane waits between fetches: a task queued to an idle embedded worker
/// starts within this (docs/design.md, "Idle costs nothing").
const IDLE_POLL_MAX: Duration = Duration::from_millis(500);

/// Aborts the tasks it holds when dropped.
struct AbortOnDrop(Vec<tokio::task::AbortHandle>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// What one handler run needs from its worker.
struct Run<'a> {
    stats: &'a WorkerStats,
    worker: Arc<str>,
    stopping: Shutdown,
    on_dead: Option<DeadHook>,
}

/// The embedded queue. Cheap to clone.
#[derive(Clone)]
pub struct EmbeddedQueue {
    pool: SqlitePool,
    path: PathBuf,
    opts: QueueOptions,
    lock: Option<Store>,
}

impl EmbeddedQueue {
    /// Open (creating if needed) the queue file and run apalis-sqlite's migrations.
    pub async fn open(path: &Path, opts: QueueOptions) -> Result<EmbeddedQueue, QueueError> {
        let shown = path.display().to_string();
        let err = |e: &dyn std::fmt::Display| QueueError::Embedded {
            path: shown.clone(),
            msg: e.to_string(),
        };
        let base = SqliteConnectOptions::from_str("sqlite:")
            .map_err(|e| err(&e))?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(5));
        // setup() leaves `synchronous=OFF` on whichever connection ran it: use a pool we close.
        let setup_pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(base.clone())
            .await
            .map_err(|e| err(&e))?;
        let setup = SqliteStorage::setup(&setup_pool).await;
        setup_pool.close().await;
        setup.map_err(|e| err(&e))?;
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(base)
            .await
            .map_err(|e| err(&e))?;
        sqlx::query(FAIR_TABLE)
            .execute(&pool)
            .await
            .map_err(|e| err(&e))?;
        Ok(EmbeddedQueue {
            pool,
            path: path.to_path_buf(),
            opts,
            lock: None,
        })
    }

    /// Refuse to run a worker while another process holds the ledger's embedded-worker lock;
    /// hold it (with heartbeats) while the worker runs.
    pub fn with_ledger_lock(mut self, store: Store) -> EmbeddedQueue {
        self.lock = Some(store);
        self
    }

    fn err(&self, e: impl std::fmt::Display) -> QueueError {
        QueueError::Embedded {
            path: self.path.display().to_string(),
            msg: e.to_string(),
        }
    }

    /// The queue (apalis-sqlite's `job_type`) holding a lane's tasks.
    fn queue_name(&self, lane: Lane) -> String {
        match lane {
            Lane::Bulk => self.opts.name.clone(),
            Lane::Interactive => format!("{}:interactive", self.opts.name),
        }
    }

    /// Both lanes' queue names (bulk, interactive), for the reads that span them.
    fn queue_names(&self) -> (String, String) {
        (
            self.queue_name(Lane::Bulk),
            self.queue_name(Lane::Interactive),
        )
    }

    fn storage(&self, lane: Lane) -> SqliteStorage<Stored> {
        let cfg = SqliteConfig::default()
            .queue(self.queue_name(lane))
            // Rows fetched but not started when a worker stops are re-enqueued as orphans
            // with an attempt charged: fetch one at a time, only when a slot is free.
            .batch_size(1)
            .heartbeat_interval(self.opts.heartbeat)
            .missed_heartbeats(self.opts.missed_heartbeats as usize);
        SqliteStorage::new(&self.pool).with_config(cfg)
    }

    /// Start tags for `tasks` in the shops' fair order ([`super::fair`]), as apalis-sqlite
    /// priorities. The clock lives in the queue file; its virtual time is the smallest tag
    /// still waiting (the next to be handed out), or every shop's latest finish when
    /// nothing waits. One transaction, so a producer and the worker pushing at once do not
    /// hand out the same tags. `BEGIN IMMEDIATE`: a read transaction that later writes cannot
    /// wait for a writer (SQLite answers "locked" at once); one that starts as a writer waits
    /// its busy timeout.
    async fn priorities(&self, tasks: &[&TaskMsg]) -> Result<Vec<i64>, QueueError> {
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(|e| self.err(e))?;
        let rows: Vec<(String, f64)> = sqlx::query_as("SELECT shop, finish FROM syncfleet_fair")
            .fetch_all(&mut *tx)
            .await
            .map_err(|e| self.err(e))?;
        let mut clock = fair::FairClock::default();
        for (shop, finish) in rows {
            if shop == FAIR_CLOCK_ROW {
                clock.virtual_time = finish;
            } else {
                clock.finish.insert(shop, finish);
            }
        }
        // Rows of an older version have priority 0: not tagged, handed out after the rest.
        let next: Option<i64> = sqlx::query_scalar(
            "SELECT MAX(priority) FROM Jobs WHERE job_type = ? AND status = 'Pending'
             AND priority > 0 AND priority <= ?",
        )
        .bind(&self.opts.name)
        .bind(fair::PRIORITY_TOP)
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| self.err(e))?;
        match next {
            Some(p) => clock.served(fair::tag_of(p)),
            None => clock.idle(),
        }
        let out = tasks
            .iter()
            .map(|t| {
                let p = fair::priority_of(clock.tag(&t.shop, self.opts.weight(&t.shop)));
                // Interactive tasks above every bulk one (docs/design.md, "Lanes").
                match t.lane {
                    super::Lane::Interactive => p + fair::PRIORITY_TOP,
                    super::Lane::Bulk => p,
                }
            })
            .collect();
        // Only the pushed tasks' shops moved (and the virtual time).
        let mut touched: Vec<&str> = tasks.iter().map(|t| t.shop.as_str()).collect();
        touched.sort_unstable();
        touched.dedup();
        let rows = touched
            .into_iter()
            .filter_map(|s| clock.finish.get(s).map(|f| (s, *f)))
            .chain(std::iter::once((FAIR_CLOCK_ROW, clock.virtual_time)));
        for (shop, finish) in rows {
            sqlx::query("INSERT OR REPLACE INTO syncfleet_fair (shop, finish) VALUES (?, ?)")
                .bind(shop)
                .bind(finish)
                .execute(&mut *tx)
                .await
                .map_err(|e| self.err(e))?;
        }
        tx.commit().await.map_err(|e| self.err(e))?;
        Ok(out)
    }

    fn task(
        &self,
        s: Stored,
        delay: Option<Duration>,
        priority: i64,
    ) -> apalis::prelude::Task<Stored> {
        let b = TaskBuilder::new(s)
            .max_attempts(1)
            .priority(usize::try_from(priority).unwrap_or(0));
        match delay {
            // apalis-sqlite compares whole seconds: round the due time up, never down.
            Some(d) if !d.is_zero() => {
                // The system's clock, not an injected one: apalis-sqlite compares the due
                // time with SQLite's `now`, which is the system's.
                #[allow(clippy::disallowed_methods)]
                let due = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default()
                    + d;
                let secs = due.as_secs() + u64::from(due.subsec_nanos() > 0);
                b.run_at_timestamp(secs).build()
            }
            _ => b.build(),
        }
    }

    /// Push fresh tasks in batches of `push_batch`; returns the number pushed.
    pub async fn push_bulk(&self, tasks: &[TaskMsg]) -> Result<usize, QueueError> {
        let (mut bulk_st, mut interactive_st) =
            (self.storage(Lane::Bulk), self.storage(Lane::Interactive));
        let mut pushed = 0;
        for batch in tasks.chunks(self.opts.push_batch.max(1)) {
            let priorities = self.priorities(&batch.iter().collect::<Vec<_>>()).await?;
            let (mut bulk, mut interactive) = (Vec::new(), Vec::new());
            for (m, priority) in batch.iter().zip(priorities) {
                let stored = Stored {
                    msg: m.clone(),
                    prior_attempts: 0,
                    delivery: new_delivery(),
                };
                match m.lane {
                    Lane::Bulk => bulk.push(self.task(stored, None, priority)),
                    Lane::Interactive => interactive.push(self.task(stored, None, priority)),
                }
            }
            for (st, tasks) in [(&mut bulk_st, bulk), (&mut interactive_st, interactive)] {
                if !tasks.is_empty() {
                    st.push_all(futures::stream::iter(tasks))
                        .await
                        .map_err(|e| self.err(e))?;
                }
            }
            pushed += batch.len();
        }
        Ok(pushed)
    }

    pub(crate) async fn push_delayed(
        &self,
        task: &TaskMsg,
        delay: Duration,
    ) -> Result<(), QueueError> {
        self.push_stored(
            Stored {
                msg: task.clone(),
                prior_attempts: 0,
                delivery: new_delivery(),
            },
            delay,
        )
        .await
    }

    async fn push_stored(&self, s: Stored, delay: Duration) -> Result<(), QueueError> {
        let priority = self
            .priorities(&[&s.msg])
            .await?
            .first()
            .copied()
            .unwrap_or(0);
        let lane = s.msg.lane;
        let t = self.task(s, Some(delay), priority);
        self.storage(lane)
            .push_task(t)
            .await
            .map_err(|e| self.err(e))
    }

    /// Ready + delayed are both `Pending` rows in apalis-sqlite: reported as `ready`. Both
    /// lanes' queues together.
    /// The one worker of this queue: the holder of the ledger's worker lock, with every
    /// task in flight (a process alone has no other).
    async fn workers(&self) -> Result<Vec<super::LiveWorker>, QueueError> {
        let Some(store) = &self.lock else {
            return Ok(Vec::new());
        };
        let Some(held) = store
            .embedded_lock_holder()
            .await
            .map_err(|e| self.err(e))?
        else {
            return Ok(Vec::new());
        };
        Ok(vec![super::LiveWorker {
            name: held.holder,
            pending: self.len().await?.in_flight,
            idle_ms: 0,
        }])
    }

    pub(crate) async fn len(&self) -> Result<QueueLen, QueueError> {
        let mut stats = Vec::new();
        for lane in LANES {
            let of_lane = self
                .storage(lane)
                .fetch_by_queue()
                .await
                .map_err(|e| self.err(e))?;
            stats.extend(of_lane);
        }
        let get = |t: &str| {
            stats
                .iter()
                .filter(|s| s.title == t)
                .filter_map(|s| s.value.parse::<f64>().ok())
                .sum::<f64>() as u64
        };
        Ok(QueueLen {
            ready: get("PENDING_JOBS"),
            // ACTIVE = Pending + Queued (fetched, not started) + Running.
            in_flight: get("ACTIVE_JOBS").saturating_sub(get("PENDING_JOBS")),
            delayed: 0,
            dead: get("FAILED_JOBS") + get("KILLED_JOBS"),
        })
    }

    // The three reads below are SQL on the queue's own file (apalis-sqlite's `Jobs` table),
    // not on the ledger, so they live with the queue rather than in `src/store`: apalis 1.0
    // can list one status a page at a time but cannot delete a dead row.

    /// Pending, fetched and running rows (see [`super::Queue::live_tasks`]).
    pub(crate) async fn live_tasks(&self) -> Result<Vec<TaskMsg>, QueueError> {
        let (bulk, interactive) = self.queue_names();
        let rows: Vec<Vec<u8>> = sqlx::query_scalar(
            "SELECT job FROM Jobs WHERE job_type IN (?, ?)
             AND status IN ('Pending', 'Queued', 'Running')",
        )
        .bind(bulk)
        .bind(interactive)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.err(e))?;
        Ok(rows
            .iter()
            .filter_map(|b| serde_json::from_slice::<Stored>(b).ok())
            .map(|s| s.msg)
            .collect())
    }

    /// The shops of the first `limit` pending rows, in the order workers take them (see
    /// [`super::Queue::waiting_shops`]).
    pub(crate) async fn waiting_shops(&self, limit: usize) -> Result<Vec<String>, QueueError> {
        let (bulk, interactive) = self.queue_names();
        let rows: Vec<Vec<u8>> = sqlx::query_scalar(
            "SELECT job FROM Jobs WHERE job_type IN (?, ?) AND status = 'Pending'
             AND run_at <= CAST(strftime('%s', 'now') AS INTEGER)
             ORDER BY priority DESC, run_at LIMIT ?",
        )
        .bind(bulk)
        .bind(interactive)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.err(e))?;
        Ok(rows
            .iter()
            .filter_map(|b| serde_json::from_slice::<StoredShop>(b).ok())
            .map(|s| s.msg.shop)
            .collect())
    }

    /// Failed rows (the dead letters) not yet removed by the worker's vacuum at start and
    /// exit; the ledger keeps their items as `failed` with class `dead` either way.
    pub(crate) async fn dead_entries(&self, limit: usize) -> Result<Vec<DeadEntry>, QueueError> {
        let (bulk, interactive) = self.queue_names();
        let rows: Vec<DeadRow> = sqlx::query_as(
            "SELECT id, job, attempts, last_result, lock_by FROM Jobs
             WHERE job_type IN (?, ?) AND status IN ('Failed', 'Killed')
             ORDER BY done_at LIMIT ?",
        )
        .bind(bulk)
        .bind(interactive)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.err(e))?;
        Ok(rows
            .into_iter()
            .map(|(id, job, attempts, error, worker)| {
                let stored = serde_json::from_slice::<Stored>(&job).ok();
                DeadEntry {
                    id,
                    attempts: stored
                        .as_ref()
                        .map_or(0, |s| s.prior_attempts)
                        .saturating_add(u32::try_from(attempts).unwrap_or(0)),
                    task: stored.map(|s| s.msg),
                    error: error.unwrap_or_default(),
                    worker: worker.unwrap_or_default(),
                }
            })
            .collect())
    }

    /// Push `task` as a fresh task, then delete the dead row `id`.
    pub(crate) async fn requeue_dead(
        &self,
        id: &str,
        task: Option<&TaskMsg>,
    ) -> Result<(), QueueError> {
        if let Some(task) = task {
            self.push_bulk(std::slice::from_ref(task)).await?;
        }
        sqlx::query("DELETE FROM Jobs WHERE id = ? AND status IN ('Failed', 'Killed')")
            .bind(id)
            .execute(&self.pool)
            .await
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Run an apalis worker over this queue until `shutdown`, and return its counters. With a
    /// ledger lock ([`EmbeddedQueue::with_ledger_lock`]) it refuses to start while another
    /// process holds the lock, and stops with an error if the lock is taken over.
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
        if let Some(store) = &self.lock {
            store
                .try_acquire_embedded_lock(&name, EMBEDDED_LOCK_STALE_AFTER)
                .await
                .map_err(|e| QueueError::EmbeddedBusy {
                    worker: name.clone(),
                    held: e.to_string(),
                })?;
        }
        let stats = Arc::new(WorkerStats::default());
        let handler = Arc::new(handler);
        let me = self.clone();
        let (svc_stats, svc_name) = (stats.clone(), Arc::<str>::from(name.as_str()));
        let (svc_stop, svc_dead) = (shutdown.clone(), wopts.on_dead.clone());
        // apalis-sqlite bumps a row's attempts when it re-enqueues an orphan (its worker
        // stopped heartbeating): those runs count as attempts too.
        let service = move |s: Stored, runs: Attempt| {
            let (q, h, st, w) = (
                me.clone(),
                handler.clone(),
                svc_stats.clone(),
                svc_name.clone(),
            );
            let (stop, dead) = (svc_stop.clone(), svc_dead.clone());
            let attempt = s.prior_attempts + (runs.current().max(1) as u32);
            async move {
                let run = Run {
                    stats: &st,
                    worker: w,
                    stopping: stop,
                    on_dead: dead,
                };
                q.execute(s, attempt, &*h, run).await
            }
            .boxed()
        };
        // Finished rows are only deleted by vacuum; do it at start and exit.
        self.vacuum().await;
        // A worker per lane, each of `concurrency` slots (apalis-sqlite cannot fetch by lane;
        // docs/design.md, "Lanes").
        let slots = wopts.concurrency.max(1);
        let lanes = [
            (Lane::Bulk, name.clone()),
            (Lane::Interactive, format!("{name}:interactive")),
        ];
        let mut runs = Vec::new();
        for (lane, apalis_name) in lanes {
            let worker = WorkerBuilder::new(apalis_name.clone())
                // Without an interval an idle worker only fetches on heartbeat. An idle
                // lane's fetches back off from `poll_interval` to `IDLE_POLL_MAX` (a busy one
                // fetches whenever a slot frees, not on the timer).
                .backend(self.storage(lane).poll_with_backoff(
                    self.opts.poll_interval,
                    apalis_core::backend::ext::poll_strategy::BackoffConfig::new(
                        IDLE_POLL_MAX.max(self.opts.poll_interval),
                    ),
                ))
                .concurrency(slots)
                .build(service.clone());
            let stop = shutdown.clone();
            // Boxed here, where the types are concrete: spawning the unboxed future trips a
            // rustc higher-ranked `Send` inference bug on apalis's worker stream.
            let run = worker
                .run_until(async move {
                    stop.wait().await;
                    Ok::<(), std::io::Error>(())
                })
                .map(move |r| {
                    r.map_err(|e| QueueError::Worker {
                        worker: apalis_name,
                        msg: e.to_string(),
                    })
                })
                .boxed();
            // The first lane to fail stops the other.
            let stop_all = shutdown.clone();
            let run = run.inspect(move |r| {
                if r.is_err() {
                    stop_all.trigger();
                }
            });
            // Each lane on a task of its own: apalis's worker fetches whenever it is polled
            // in its ready state, and in one task every wake of one lane (its fetch's reply)
            // polled the other, which fetched, whose reply polled the first: an idle worker
            // ran ~450 empty fetches a second (docs/design.md, "Idle costs nothing").
            runs.push(tokio::spawn(run));
        }
        // Dropping this worker (its caller gave up on it) ends its lanes too.
        let _lanes = AbortOnDrop(runs.iter().map(|r| r.abort_handle()).collect());
        info!(worker = %name, "embedded queue worker starting");
        let both = futures::future::join_all(runs).map(|results| {
            results
                .into_iter()
                .map(|joined| {
                    joined.unwrap_or_else(|e| {
                        Err(QueueError::Worker {
                            worker: name.clone(),
                            msg: format!("a lane's worker task ended abnormally: {e}"),
                        })
                    })
                })
                .collect::<Result<Vec<()>, QueueError>>()
        });
        let lock_loop = self.lock_heartbeat(&name, shutdown.clone());
        let res = tokio::select! {
            r = both => r.map(|_| ()),
            e = lock_loop => Err(e),
        };
        self.vacuum().await;
        if let Some(store) = &self.lock {
            if let Err(e) = store.release_embedded_lock(&name).await {
                warn!(worker = %name, error = %e, "releasing the embedded-worker lock failed");
            }
        }
        res.map(|_| stats.report(&name))
    }

    /// Delete finished rows of both lanes' queues (apalis keeps them until a vacuum).
    async fn vacuum(&self) {
        for lane in LANES {
            let _ = apalis_core::backend::Vacuum::vacuum(&mut self.storage(lane)).await;
        }
    }

    /// Keep the ledger lock; if it is lost (another process took it over), stop working.
    async fn lock_heartbeat(&self, name: &str, shutdown: Shutdown) -> QueueError {
        let Some(store) = &self.lock else {
            return std::future::pending().await;
        };
        let mut tick = tokio::time::interval(EMBEDDED_LOCK_STALE_AFTER / 4);
        loop {
            tick.tick().await;
            if let Err(e) = store.heartbeat_embedded_lock(name).await {
                // Transient database errors are retried next tick; a takeover is final.
                if matches!(e, crate::store::StoreError::LockLost { .. }) {
                    shutdown.trigger();
                    return QueueError::Worker {
                        worker: name.to_string(),
                        msg: e.to_string(),
                    };
                }
                warn!(worker = %name, error = %e, "embedded-worker lock heartbeat failed");
            }
        }
    }

    async fn execute<H, Fut>(
        &self,
        s: Stored,
        attempt: u32,
        handler: &H,
        run: Run<'_>,
    ) -> Result<(), BoxDynError>
    where
        H: Fn(TaskMsg, TaskCtx) -> Fut,
        Fut: Future<Output = TaskResult>,
    {
        let Run {
            stats,
            worker,
            stopping,
            on_dead,
        } = run;
        if attempt > self.opts.max_attempts {
            // Its worker died on every allowed attempt: do not run it again.
            warn!(worker = %worker, attempt, "orphaned task dead after max attempts");
            WorkerStats::bump(&stats.dead);
            let error = "worker lost (no heartbeat) on every attempt";
            if let Some(hook) = &on_dead {
                hook(s.msg.clone(), attempt - 1, error.to_string()).await;
            }
            return Err(error.into());
        }
        if stopping.is_triggered() {
            // Fetched but not started before the stop: back to the queue, uncharged.
            self.push_stored(s, Duration::ZERO).await.map_err(|e| {
                warn!(worker = %worker, error = %e, "giving back an unstarted task failed");
                BoxDynError::from(e.to_string())
            })?;
            return Ok(());
        }
        let ctx = TaskCtx {
            attempt,
            worker: worker.clone(),
            delivery: Arc::from(s.delivery.as_str()),
            stopping,
            lease_lost: Shutdown::new(),
        };
        let (result, panicked) = run_caught(handler, s.msg.clone(), ctx).await;
        if panicked {
            WorkerStats::bump(&stats.panicked);
        }
        let (prior, delay) = match result {
            TaskResult::Done => {
                WorkerStats::bump(&stats.done);
                return Ok(());
            }
            TaskResult::RetryAfter(d) => {
                WorkerStats::bump(&stats.retry_after);
                (s.prior_attempts, d)
            }
            TaskResult::Failed(msg) => {
                WorkerStats::bump(&stats.failed);
                if attempt >= self.opts.max_attempts {
                    warn!(worker = %worker, attempt, error = %msg, "task dead after max attempts");
                    WorkerStats::bump(&stats.dead);
                    if let Some(hook) = &on_dead {
                        hook(s.msg.clone(), attempt, msg.clone()).await;
                    }
                    return Err(msg.into());
                }
                (attempt, self.opts.retry_backoff(attempt))
            }
        };
        let next = Stored {
            msg: s.msg,
            prior_attempts: prior,
            delivery: s.delivery,
        };
        // If the re-push fails the task would be lost: fail the row instead (it stays
        // visible as failed; `reconcile` re-pushes unfinished items from the ledger).
        self.push_stored(next, delay).await.map_err(|e| {
            warn!(worker = %worker, error = %e, "re-queueing a task failed");
            BoxDynError::from(e.to_string())
        })
    }
}

impl super::TaskQueue for EmbeddedQueue {
    fn push_bulk<'a>(
        &'a self,
        tasks: &'a [TaskMsg],
    ) -> futures::future::BoxFuture<'a, Result<usize, QueueError>> {
        EmbeddedQueue::push_bulk(self, tasks).boxed()
    }
    fn push_delayed<'a>(
        &'a self,
        task: &'a TaskMsg,
        delay: Duration,
    ) -> futures::future::BoxFuture<'a, Result<(), QueueError>> {
        EmbeddedQueue::push_delayed(self, task, delay).boxed()
    }
    fn lengths(&self) -> futures::future::BoxFuture<'_, Result<super::QueueLen, QueueError>> {
        EmbeddedQueue::len(self).boxed()
    }
    fn live_tasks(&self) -> futures::future::BoxFuture<'_, Result<Vec<TaskMsg>, QueueError>> {
        EmbeddedQueue::live_tasks(self).boxed()
    }
    fn waiting_shops(
        &self,
        limit: usize,
    ) -> futures::future::BoxFuture<'_, Result<Vec<String>, QueueError>> {
        EmbeddedQueue::waiting_shops(self, limit).boxed()
    }
    fn workers(
        &self,
        _within: Duration,
    ) -> futures::future::BoxFuture<'_, Result<Vec<super::LiveWorker>, QueueError>> {
        EmbeddedQueue::workers(self).boxed()
    }
    fn dead_entries(
        &self,
        limit: usize,
    ) -> futures::future::BoxFuture<'_, Result<Vec<super::DeadEntry>, QueueError>> {
        EmbeddedQueue::dead_entries(self, limit).boxed()
    }
    fn requeue_dead<'a>(
        &'a self,
        id: &'a str,
        task: Option<&'a TaskMsg>,
    ) -> futures::future::BoxFuture<'a, Result<(), QueueError>> {
        EmbeddedQueue::requeue_dead(self, id, task).boxed()
    }
    fn run_worker(
        &self,
        wopts: WorkerOptions,
        handler: super::TaskHandler,
        shutdown: Shutdown,
    ) -> futures::future::BoxFuture<'_, Result<WorkerReport, QueueError>> {
        EmbeddedQueue::run_worker(self, wopts, move |m, c| handler(m, c), shutdown).boxed()
    }
}
