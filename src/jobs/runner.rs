//! The job runner: what a worker does with one task (a chunk of one job's items).
//!
//! Every platform call goes through the link layer ([`Gateway`]); this code never sees
//! retries, limits or timeouts. It reads the ledger to skip items already terminal (so a
//! re-delivered task is harmless), records each item's outcome, and when the link layer
//! says "not now" (Slow, pause, a reservation beyond the wait limit, an open breaker) it
//! re-queues the rest of the chunk for that time without consuming a task attempt.

use super::queue::{Queue, TaskCtx, TaskMsg, TaskResult};
use super::spec::JobSpec;
use super::{listing, logistics, orders};
use crate::config::Config;
use crate::link::gateway::{CallContext, Gateway, LinkError};
use crate::platform::{Api, Platform};
use crate::store::{CallClass, CallRecord, ItemOutcome, ItemStatus, Store, StoreError};
use chrono::Utc;
use futures::StreamExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Items of one chunk run at once. The gate's concurrency slots bound the real
/// parallelism; this only keeps enough calls queued at the gate to use them.
pub(crate) const ITEM_PARALLELISM: usize = 16;

/// The result of running one item.
pub(crate) enum ItemRun {
    /// The item is finished (any terminal status) or recorded an attempt.
    Outcome(ItemOutcome),
    /// Not now: re-queue the item after this long (no attempt consumed).
    Later(Duration),
}

impl ItemRun {
    /// Map a link error: "not now" errors re-queue, the rest fail the item with their class.
    pub(crate) fn from_link_error(key: &str, e: &LinkError) -> ItemRun {
        match e.retry_at {
            Some(after) => ItemRun::Later(after),
            None => ItemRun::Outcome(ItemOutcome::failed(key, e.class, e.to_string())),
        }
    }
}

/// Useful-call tally of one task, written to the calls ledger once per task.
#[derive(Default)]
pub(crate) struct Useful(Mutex<HashMap<(Platform, Api), u64>>);

impl Useful {
    pub(crate) fn add(&self, platform: Platform, api: Api, n: u64) {
        if n == 0 {
            return;
        }
        if let Ok(mut m) = self.0.lock() {
            *m.entry((platform, api)).or_default() += n;
        }
    }

    fn records(&self) -> Vec<CallRecord> {
        let now = Utc::now();
        let map = self.0.lock().map(|m| m.clone()).unwrap_or_default();
        map.into_iter()
            .map(|((platform, api), useful)| CallRecord {
                minute: now,
                platform,
                api,
                class: CallClass::Ok,
                // The gateway counts the calls themselves; this row only adds usefulness.
                calls: 0,
                useful,
            })
            .collect()
    }
}

/// What a task's recorded groups left to do.
#[derive(Default)]
struct Tally {
    /// Items attempted but left pending (a ledger write of the handler failed).
    unfinished: usize,
    /// Items to re-queue ("not now"), and after how long.
    later_keys: Vec<String>,
    later_by: Duration,
}

/// A write chunk records its finished items at least this often (and every
/// [`ITEM_PARALLELISM`] items).
const RECORD_EVERY: Duration = Duration::from_millis(100);

/// Items of one write chunk started and not yet recorded, at most: what a killed worker can
/// leave to repeat (with the same idempotency key) per task.
pub(crate) const UNRECORDED_MAX: usize = 2 * ITEM_PARALLELISM;

/// Everything a task needs: the ledger, the link layer, the queue (to re-queue), config.
pub struct JobRunner {
    pub(crate) store: Store,
    pub(crate) gateway: Gateway,
    pub(crate) queue: Queue,
    pub(crate) cfg: Arc<Config>,
    /// Specs are immutable once a job exists: read each once per process.
    specs: Mutex<HashMap<i64, Arc<JobSpec>>>,
}

impl JobRunner {
    pub fn new(store: Store, gateway: Gateway, queue: Queue, cfg: Arc<Config>) -> JobRunner {
        JobRunner {
            store,
            gateway,
            queue,
            cfg,
            specs: Mutex::new(HashMap::new()),
        }
    }

    pub fn gateway(&self) -> &Gateway {
        &self.gateway
    }

    /// A fresh call context whose budget is the configured per-item budget.
    pub(crate) fn call_context(&self) -> CallContext {
        CallContext::for_task(&self.cfg.link)
    }

    async fn spec(&self, job_id: i64) -> Result<Arc<JobSpec>, String> {
        if let Some(s) = self.specs.lock().ok().and_then(|m| m.get(&job_id).cloned()) {
            return Ok(s);
        }
        let status = self
            .store
            .job_status(job_id)
            .await
            .map_err(|e| e.to_string())?;
        let spec: JobSpec = serde_json::from_str(&status.spec)
            .map_err(|e| format!("job {job_id}: unreadable spec in the ledger: {e}"))?;
        let spec = Arc::new(spec);
        if let Ok(mut m) = self.specs.lock() {
            m.insert(job_id, spec.clone());
        }
        Ok(spec)
    }

    /// Run one task. Failures of the ledger or queue count an attempt (the task is retried);
    /// platform failures are item outcomes, recorded in the ledger.
    pub async fn run_task(&self, task: TaskMsg, ctx: TaskCtx) -> TaskResult {
        match self.try_run_task(&task, &ctx).await {
            Ok(result) => result,
            Err(message) => {
                tracing::warn!(
                    job = task.job_id,
                    chunk = task.chunk,
                    attempt = ctx.attempt,
                    "task failed: {message}"
                );
                TaskResult::Failed(message)
            }
        }
    }

    /// Record finished outcomes in the ledger (one transaction); note the items to re-queue
    /// and those left pending.
    async fn record(
        &self,
        job_id: i64,
        runs: Vec<(String, ItemRun)>,
        tally: &mut Tally,
    ) -> Result<(), String> {
        let mut outcomes = Vec::with_capacity(runs.len());
        for (key, run) in runs {
            match run {
                ItemRun::Outcome(o) => outcomes.push(o),
                ItemRun::Later(after) => {
                    tally.later_by = tally.later_by.max(after);
                    tally.later_keys.push(key);
                }
            }
        }
        if outcomes.is_empty() {
            return Ok(());
        }
        tally.unfinished += outcomes
            .iter()
            .filter(|o| o.status == ItemStatus::Pending)
            .count();
        let report = ledger_write("finish_items", || {
            self.store.finish_items(job_id, &outcomes)
        })
        .await?;
        if report.job_finished {
            tracing::info!(job = job_id, "job finished: every item is terminal");
        }
        Ok(())
    }

    async fn try_run_task(&self, task: &TaskMsg, _ctx: &TaskCtx) -> Result<TaskResult, String> {
        let spec = self.spec(task.job_id).await?;
        if spec.kind().as_str() != task.kind {
            return Err(format!(
                "task kind `{}` does not match job {} ({})",
                task.kind,
                task.job_id,
                spec.kind()
            ));
        }
        // A re-delivered task does only what the ledger still shows pending.
        let keys = self
            .store
            .items_to_run(task.job_id, &task.keys)
            .await
            .map_err(|e| e.to_string())?;
        if keys.is_empty() {
            return Ok(TaskResult::Done);
        }
        let useful = Useful::default();
        let mut tally = Tally::default();
        match &*spec {
            JobSpec::Listing { from, to, .. } => {
                // Writes: outcomes go to the ledger as they land (small groups), so a killed
                // worker leaves only its last few items unrecorded; each of those repeats its
                // write, with the same idempotency key, when the task is recovered.
                // The items keep running while a group is written: a stream left unpolled
                // would starve its in-flight items, which may hold ledger connections (the
                // link layer's stale cache), and the pool would run dry. Instead an item
                // waits for a permit before it starts; permits come back once recorded, so
                // at most UNRECORDED_MAX items of a task are started and not yet recorded.
                let unrecorded = tokio::sync::Semaphore::new(UNRECORDED_MAX);
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
                let produce = async {
                    let runs = listing::stream_chunk(
                        self,
                        task.job_id,
                        (*from, *to),
                        &keys,
                        &useful,
                        &unrecorded,
                    );
                    futures::pin_mut!(runs);
                    while let Some(run) = runs.next().await {
                        if tx.send(run).is_err() {
                            break; // recording failed: stop calling
                        }
                    }
                    drop(tx);
                };
                let consume = async {
                    let mut group = Vec::with_capacity(ITEM_PARALLELISM);
                    let mut last = Instant::now();
                    let result = async {
                        loop {
                            match tokio::time::timeout(RECORD_EVERY, rx.recv()).await {
                                Ok(Some(run)) => group.push(run),
                                Ok(None) => break,
                                Err(_) => {}
                            }
                            if group.len() >= ITEM_PARALLELISM
                                || (!group.is_empty() && last.elapsed() >= RECORD_EVERY)
                            {
                                let n = group.len();
                                self.record(task.job_id, std::mem::take(&mut group), &mut tally)
                                    .await?;
                                unrecorded.add_permits(n);
                                last = Instant::now();
                            }
                        }
                        self.record(task.job_id, std::mem::take(&mut group), &mut tally)
                            .await
                    }
                    .await;
                    if result.is_err() {
                        // Waiting items give up instead of calling.
                        unrecorded.close();
                    }
                    result
                };
                let ((), recorded) = futures::join!(produce, consume);
                recorded?;
            }
            JobSpec::Orders { platform, shop, .. } => {
                let runs = orders::run_chunk(self, *platform, shop, &keys, &useful).await;
                self.record(task.job_id, runs, &mut tally).await?;
            }
            JobSpec::Logistics { platform, .. } => {
                let runs = logistics::run_chunk(self, *platform, &keys, &useful).await?;
                self.record(task.job_id, runs, &mut tally).await?;
            }
        }
        let Tally {
            unfinished,
            later_keys,
            later_by,
        } = tally;
        let records = useful.records();
        if !records.is_empty() {
            // Not worth failing the task for: a re-run finds its items terminal and could
            // not recount their usefulness anyway.
            if let Err(e) = ledger_write("record_calls", || self.store.record_calls(&records)).await
            {
                tracing::warn!(
                    job = task.job_id,
                    chunk = task.chunk,
                    "useful calls not recorded: {e}"
                );
            }
        }
        if !later_keys.is_empty() {
            // A fresh task for the rest of the chunk: the gate's retry-at time, no attempt used.
            let rest = TaskMsg {
                job_id: task.job_id,
                kind: task.kind.clone(),
                chunk: task.chunk,
                keys: later_keys,
            };
            let delay = later_by.max(Duration::from_millis(50));
            self.queue
                .push_delayed(&rest, delay)
                .await
                .map_err(|e| e.to_string())?;
            tracing::debug!(
                job = task.job_id,
                chunk = task.chunk,
                items = rest.keys.len(),
                delay_ms = delay.as_millis() as u64,
                "re-queued the rest of the chunk"
            );
        }
        if unfinished > 0 {
            // An attempt that left items pending (a ledger write of the handler failed):
            // the task must run again, or those items would wait for a reconcile.
            return Ok(TaskResult::Failed(format!(
                "{unfinished} item(s) attempted but not finished"
            )));
        }
        Ok(TaskResult::Done)
    }
}

/// Ledger write attempts on "busy" before the task fails.
const LEDGER_WRITE_ATTEMPTS: u32 = 6;

/// Run a ledger write, retrying "database is locked" with jittered backoff: failing the task
/// instead would repeat its platform calls (and its writes) on the re-run.
pub(crate) async fn ledger_write<T, F, Fut>(what: &str, mut op: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    let mut attempt = 0;
    loop {
        attempt += 1;
        match op().await {
            Ok(v) => return Ok(v),
            Err(e) if e.is_busy() && attempt < LEDGER_WRITE_ATTEMPTS => {
                let base = 20u64 << attempt.min(6);
                let wait = base + rand::random::<u64>() % base;
                tracing::debug!(attempt, wait_ms = wait, "{what}: ledger busy, retrying");
                tokio::time::sleep(Duration::from_millis(wait)).await;
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}
