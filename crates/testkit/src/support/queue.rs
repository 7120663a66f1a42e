//! Queue test helpers shared by the Redis and embedded queue tests.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::FutureExt;
use syncfleet::queue::{
    DeadHook, Queue, QueueError, Shutdown, TaskCtx, TaskMsg, TaskResult, WorkerOptions,
    WorkerReport,
};
use tokio::task::JoinHandle;

/// One-key tasks `chunk = i` of job `job_id`, keys `{key_prefix}{i}`.
pub fn msgs(job_id: i64, key_prefix: &str, range: std::ops::Range<u32>) -> Vec<TaskMsg> {
    range
        .map(|i| TaskMsg {
            job_id,
            kind: syncfleet::store::JobKind::Listing,
            chunk: i,
            keys: vec![format!("{key_prefix}{i}")],
            shop: String::new(),
            lane: Default::default(),
        })
        .collect()
}

/// A running worker and the signal that stops it.
pub type Worker = (JoinHandle<Result<WorkerReport, QueueError>>, Shutdown);

/// Run a worker of `q` in the background.
pub fn spawn_worker<Q, H, Fut>(q: &Q, concurrency: usize, handler: H) -> Worker
where
    Q: Clone + Into<Queue>,
    H: Fn(TaskMsg, TaskCtx) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = TaskResult> + Send + 'static,
{
    spawn_worker_with(
        q,
        WorkerOptions {
            concurrency,
            name: None,
            on_dead: None,
        },
        handler,
    )
}

/// [`spawn_worker`] with explicit worker options (name, dead hook).
pub fn spawn_worker_with<Q, H, Fut>(q: &Q, wopts: WorkerOptions, handler: H) -> Worker
where
    Q: Clone + Into<Queue>,
    H: Fn(TaskMsg, TaskCtx) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = TaskResult> + Send + 'static,
{
    let q: Queue = q.clone().into();
    let s = Shutdown::new();
    let s2 = s.clone();
    let h = tokio::spawn(async move { q.run_worker(wopts, handler, s2).await });
    (h, s)
}

/// Stop a worker and return its report; it must stop within 10 s.
pub async fn stop(w: Worker) -> WorkerReport {
    stop_within(w, 10).await
}

/// Stop a worker and return its report; it must stop within `secs`.
pub async fn stop_within(w: Worker, secs: u64) -> WorkerReport {
    w.1.trigger();
    tokio::time::timeout(Duration::from_secs(secs), w.0)
        .await
        .unwrap_or_else(|_| panic!("worker stops within {secs} s of shutdown"))
        .expect("worker task did not panic")
        .expect("worker returned Ok")
}

/// What a dead hook was told: task, attempts, error.
pub type DeadSeen = Arc<Mutex<Vec<(TaskMsg, u32, String)>>>;

/// A dead hook that records every call.
pub fn dead_recorder() -> (DeadHook, DeadSeen) {
    let seen: DeadSeen = Arc::default();
    let s2 = seen.clone();
    let hook: DeadHook = Arc::new(move |task, attempts, error| {
        let s = s2.clone();
        async move { s.lock().unwrap().push((task, attempts, error)) }.boxed()
    });
    (hook, seen)
}

/// Poll the async condition `cond` until true or panic after `secs`.
pub async fn eventually<F, Fut>(secs: u64, what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !cond().await {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Poll `cond` until true or panic after `secs`.
pub async fn wait_for<F: FnMut() -> bool>(secs: u64, what: &str, mut cond: F) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
