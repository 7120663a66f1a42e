//! The queue seam: what producers, workers and the operator's commands need of the task
//! transport, as one trait implemented by the fleet backend (Redis Streams, [`RedisQueue`])
//! and the embedded one (SQLite, [`EmbeddedQueue`]). [`Queue`] holds the backend chosen once
//! at start-up; nothing above this module asks which one it is (docs/design.md, "Layers").

use super::{
    DeadEntry, LiveWorker, QueueError, QueueLen, Shutdown, TaskCtx, TaskMsg, TaskResult,
    WorkerOptions, WorkerReport,
};
use futures::future::BoxFuture;
use futures::FutureExt;
use std::sync::Arc;
use std::time::Duration;

/// A worker's task handler, boxed so that a backend behind `dyn` can run it.
pub type TaskHandler =
    Arc<dyn Fn(TaskMsg, TaskCtx) -> BoxFuture<'static, TaskResult> + Send + Sync>;

/// One task transport. Methods return boxed futures so the trait can sit behind `dyn`.
pub trait TaskQueue: Send + Sync {
    /// Push tasks in pipelined batches; returns the number pushed.
    fn push_bulk<'a>(&'a self, tasks: &'a [TaskMsg]) -> BoxFuture<'a, Result<usize, QueueError>>;
    /// Push one task to run after `delay` (a fresh task: its attempts start at 1).
    fn push_delayed<'a>(
        &'a self,
        task: &'a TaskMsg,
        delay: Duration,
    ) -> BoxFuture<'a, Result<(), QueueError>>;
    /// Queue lengths.
    fn lengths(&self) -> BoxFuture<'_, Result<QueueLen, QueueError>>;
    /// Every task that will still run: ready, in flight and delayed (not dead).
    fn live_tasks(&self) -> BoxFuture<'_, Result<Vec<TaskMsg>, QueueError>>;
    /// The shops of the first `limit` tasks waiting for a worker, in the order they will be
    /// handed out (a shop once per task).
    fn waiting_shops(&self, limit: usize) -> BoxFuture<'_, Result<Vec<String>, QueueError>>;
    /// Which of `cover`'s wanted items the live tasks carry ([`super::LiveCover`]): the same
    /// snapshot as [`TaskQueue::live_tasks`], folded as it is read where the transport can.
    fn live_cover(
        &self,
        mut cover: super::LiveCover,
    ) -> BoxFuture<'_, Result<super::LiveCover, QueueError>> {
        async move {
            for t in self.live_tasks().await? {
                cover.add(&t);
            }
            Ok(cover)
        }
        .boxed()
    }
    /// The fleet's workers seen recently; none for a transport without a fleet.
    fn workers(&self, within: Duration) -> BoxFuture<'_, Result<Vec<LiveWorker>, QueueError>> {
        let _ = within;
        async { Ok(Vec::new()) }.boxed()
    }
    /// The dead-letter entries, oldest first (at most `limit`).
    fn dead_entries(&self, limit: usize) -> BoxFuture<'_, Result<Vec<DeadEntry>, QueueError>>;
    /// Push `task` (when given) as a fresh task, then remove dead entry `id`.
    fn requeue_dead<'a>(
        &'a self,
        id: &'a str,
        task: Option<&'a TaskMsg>,
    ) -> BoxFuture<'a, Result<(), QueueError>>;
    /// Check that the transport keeps what it is given under memory pressure (Redis's
    /// `maxmemory-policy`); one without eviction has nothing to check.
    fn check_eviction(&self) -> BoxFuture<'_, Result<(), QueueError>> {
        async { Ok(()) }.boxed()
    }
    /// Check that this transport serves the ledger whose fleet id is `ledger_fleet`; one
    /// that sits beside its ledger has nothing to check.
    fn bind_fleet<'a>(
        &'a self,
        ledger_fleet: &'a str,
        ledger: &'a str,
    ) -> BoxFuture<'a, Result<(), QueueError>> {
        let _ = (ledger_fleet, ledger);
        async { Ok(()) }.boxed()
    }
    /// Run a worker until `shutdown` is triggered; then finish in-flight tasks and return.
    fn run_worker(
        &self,
        wopts: WorkerOptions,
        handler: TaskHandler,
        shutdown: Shutdown,
    ) -> BoxFuture<'_, Result<WorkerReport, QueueError>>;
}

/// The task queue of this process: the backend chosen at start-up. Cheap to clone.
#[derive(Clone)]
pub struct Queue(Arc<dyn TaskQueue>);

impl<T: TaskQueue + 'static> From<T> for Queue {
    fn from(backend: T) -> Queue {
        Queue(Arc::new(backend))
    }
}

impl Queue {
    /// Push tasks in pipelined batches of `push_batch`; returns the number pushed.
    pub async fn push_bulk(&self, tasks: &[TaskMsg]) -> Result<usize, QueueError> {
        self.0.push_bulk(tasks).await
    }

    /// Push one task to run after `delay` (a fresh task: its attempts start at 1).
    pub async fn push_delayed(&self, task: &TaskMsg, delay: Duration) -> Result<(), QueueError> {
        self.0.push_delayed(task, delay).await
    }

    /// Queue lengths. The embedded queue reports its delayed tasks as ready.
    pub async fn len(&self) -> Result<QueueLen, QueueError> {
        self.0.lengths().await
    }

    /// See [`TaskQueue::waiting_shops`].
    pub(crate) async fn waiting_shops(&self, limit: usize) -> Result<Vec<String>, QueueError> {
        self.0.waiting_shops(limit).await
    }

    /// Every task that will still run: ready, in flight and delayed (not dead). What
    /// `reconcile` and `status` compare with the ledger's pending items.
    pub async fn live_tasks(&self) -> Result<Vec<TaskMsg>, QueueError> {
        self.0.live_tasks().await
    }

    /// What the live tasks carry, per job, as key hashes (the coverage check's input).
    pub async fn live_cover(
        &self,
        cover: super::LiveCover,
    ) -> Result<super::LiveCover, QueueError> {
        self.0.live_cover(cover).await
    }

    /// The workers of the fleet seen by the queue recently (consumers idle less than
    /// `within`); empty for the embedded queue (its one worker holds the ledger lock).
    pub(crate) async fn workers(&self, within: Duration) -> Result<Vec<LiveWorker>, QueueError> {
        self.0.workers(within).await
    }

    /// The dead-letter entries, oldest first (at most `limit`).
    pub async fn dead_entries(&self, limit: usize) -> Result<Vec<DeadEntry>, QueueError> {
        self.0.dead_entries(limit).await
    }

    /// Push `task` (when given) as a fresh task, then remove dead entry `id`.
    pub async fn requeue_dead(&self, id: &str, task: Option<&TaskMsg>) -> Result<(), QueueError> {
        self.0.requeue_dead(id, task).await
    }

    /// Refuse a Redis that may evict the queue's keys (`allkeys-*`); warn about one that
    /// evicts keys with an expiry first (`volatile-*`: bans, bucket state, quota counters).
    pub async fn check_eviction(&self) -> Result<(), QueueError> {
        self.0.check_eviction().await
    }

    /// Check that this queue serves the ledger whose fleet id is `ledger_fleet` (a queue
    /// that serves none yet is bound to it). The embedded queue sits beside its ledger.
    pub async fn bind_fleet(&self, ledger_fleet: &str, ledger: &str) -> Result<(), QueueError> {
        self.0.bind_fleet(ledger_fleet, ledger).await
    }

    /// Run a worker until `shutdown` is triggered; then finish in-flight tasks and return.
    /// Backend errors are logged and retried with backoff; they never end the worker.
    pub async fn run_worker<H, Fut>(
        &self,
        wopts: WorkerOptions,
        handler: H,
        shutdown: Shutdown,
    ) -> Result<WorkerReport, QueueError>
    where
        H: Fn(TaskMsg, TaskCtx) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = TaskResult> + Send + 'static,
    {
        let handler: TaskHandler = Arc::new(move |m, c| handler(m, c).boxed());
        self.0.run_worker(wopts, handler, shutdown).await
    }
}
