//! The worker side of the Redis Streams queue: the apalis backend that fetches, the
//! heartbeat that keeps claims fresh, the lease watchdog, and what happens to each delivery
//! (ack, re-queue, dead letter). The producer side and the admin reads are in `redis/mod.rs`.
//!
//! By concern: this module holds `run_worker` and the worker's shared state; `fetch` the
//! fetch rounds; `settle` what happens to each delivery; `heartbeat` the heartbeat and the
//! lease watchdog; `backend` the apalis backend and the shutdown.

mod backend;
mod fetch;
mod heartbeat;
mod settle;

use super::*;

impl RedisQueue {
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
        // One slot beyond the worker's concurrency is kept for an interactive task: with
        // every slot held by bulk tasks, the fetch asks for interactive work only
        // (docs/design.md, "Lanes").
        let worker = WorkerBuilder::new(name.clone())
            .backend(backend)
            .concurrency(shared.concurrency + INTERACTIVE_SLOTS)
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

/// One fetched stream entry, as handed to the apalis service.
#[derive(Debug, Clone)]
pub(crate) struct Envelope {
    id: String,
    raw: String,
    /// This delivery's attempt number (1-based).
    attempt: u32,
}

/// Task slots a worker keeps beyond its concurrency for interactive tasks.
pub(super) const INTERACTIVE_SLOTS: usize = 1;

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
    /// Told when a held entry is settled: a slot is free again.
    slot_freed: tokio::sync::Notify,
    shutdown: Shutdown,
    stats: WorkerStats,
    last_sweep: Mutex<Option<Instant>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned set of ids is still a valid set of ids.
    m.lock().unwrap_or_else(|p| p.into_inner())
}
