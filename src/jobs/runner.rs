//! The job runner: what a worker does with one task (a chunk of one job's items).
//!
//! Every platform call goes through the link layer ([`Gateway`]); this code never sees
//! retries, limits or timeouts. It reads the ledger to skip items already terminal (so a
//! re-delivered task is harmless), records each item's outcome, and when the link layer
//! says "not now" (Slow, pause, a reservation beyond the wait limit, an open breaker) it
//! re-queues the task for that time without consuming a task attempt: the re-run does only
//! what the ledger still shows pending. Transient failures (class `retry`) go back the same
//! way with backoff for `jobs.item_retry_rounds` rounds before an item ends `failed`.
//! When the worker stops (SIGTERM) no new item starts, items already calling get the
//! shutdown grace, and the rest go back uncharged (docs/design.md, "Scale-in").

use super::control::{JobControls, CONTROL_POLL, PAUSED_RECHECK};
use super::item::{
    item_retry_backoff, ledger_write, HandlerCtx, ItemRun, Stop, Useful, ITEM_PARALLELISM,
};
use super::shops::{ShopAccess, ShopCheck};
use super::spec::{JobSpec, DEFAULT_SHOP};
use super::tokens::{SessionCell, TokenKeeper};
use super::turns::TaskTurns;
use super::{listing, logistics, orders};
use crate::clock::{elapsed_since, monotonic_now};
use listing_task::ListingTask;

mod listing_task;
use crate::config::{Config, DEFAULT_WEIGHT};
use crate::link::gateway::Gateway;
use crate::platform::{Api, Platform};
use crate::queue::DeadHook;
use crate::queue::{Queue, ShopWeights, TaskCtx, TaskMsg, TaskResult};
use crate::store::{
    CallRecord, GroupRecord, ItemOutcome, ItemStatus, JobControl, JobKind, ListingRoute,
    ListingsRecord, Store, StoreError,
};
use crate::throttle::GateShare;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a task's recorded groups left to do.
struct Tally {
    /// Items attempted but left pending (a ledger write of the handler failed).
    unfinished: usize,
    /// Pending outcomes of the group being recorded that are retry rounds, not unfinished.
    retried: usize,
    /// Items to re-queue ("not now"), and after how long.
    later_keys: Vec<String>,
    later_by: Duration,
    /// The task's shop (platform, name), paused when the platform refuses its session.
    shop: (Platform, String),
    /// A listing's source platform: its reads carry that platform's own session (shop
    /// `default` there).
    source: Option<Platform>,
}

/// A write chunk records its finished items at least this often (and every
/// [`ITEM_PARALLELISM`] items).
const RECORD_EVERY: Duration = Duration::from_millis(100);

/// Job specs a worker keeps read at most.
const SPECS_KEPT: usize = 1024;

/// A write chunk records its useful calls at least this often while it runs.
const USEFUL_EVERY: Duration = Duration::from_secs(1);

/// Items of one write chunk started and not yet recorded, at most: what a killed worker can
/// leave per task for the re-run to look up by seller code. Four groups: while one group's
/// ledger transaction waits its turn at the writer, the next ones keep calling (docs/design.md,
/// "A job, from enqueue to the ledger").
pub(crate) const UNRECORDED_MAX: usize = 4 * ITEM_PARALLELISM;

/// Runs tasks: reads what is pending, calls the job's handler per item through the shared
/// [`HandlerCtx`], records outcomes, and decides what goes back to the queue.
pub(crate) struct JobRunner {
    ctx: HandlerCtx,
    /// Specs are immutable once a job exists: read each once per process.
    specs: Mutex<HashMap<i64, Arc<JobSpec>>>,
    /// Paused or cancelled jobs, as the ledger said at most a second ago.
    controls: Arc<JobControls>,
    /// The shops' sessions, and which are paused (a refused session).
    shops: Arc<ShopAccess>,
    /// The shops' weights: their shares of the queue and of the gates.
    weights: ShopWeights,
    /// The queue this worker takes tasks from: a task whose turn is over gives its slot
    /// back when others wait there.
    queue: Queue,
    /// The tasks running in this worker per shop, and its task slots.
    turns: Arc<Mutex<TaskTurns>>,
    slots: usize,
    /// The shops waiting in the queue as last looked at, and when.
    waiting_seen: Arc<Mutex<Option<WaitingSeen>>>,
}

/// The shops waiting in the queue, and when they were read.
type WaitingSeen = (Instant, Arc<Vec<String>>);

/// A task counted in [`TaskTurns`] while it runs (unless it gave its slot back).
struct Running {
    turns: Arc<Mutex<TaskTurns>>,
    shop: String,
    gave_back: crate::queue::Shutdown,
}

impl Drop for Running {
    fn drop(&mut self) {
        if !self.gave_back.is_triggered() {
            self.turns
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .end(&self.shop);
        }
    }
}

impl JobRunner {
    pub(crate) fn new(
        store: Store,
        gateway: Gateway,
        cfg: Arc<Config>,
        tokens: Option<Arc<TokenKeeper>>,
        weights: ShopWeights,
        queue: Queue,
        slots: usize,
    ) -> JobRunner {
        JobRunner {
            weights,
            queue,
            turns: Arc::new(Mutex::new(TaskTurns::default())),
            slots: slots.max(1),
            waiting_seen: Arc::new(Mutex::new(None)),
            controls: Arc::new(JobControls::new(store.clone())),
            shops: Arc::new(ShopAccess::new(cfg.clone(), store.clone(), tokens)),
            ctx: HandlerCtx {
                store,
                gateway,
                cfg,
                shop_session: None,
                lane: Default::default(),
                share: None,
            },
            specs: Mutex::new(HashMap::new()),
        }
    }

    async fn spec(&self, job_id: i64) -> Result<Arc<JobSpec>, TaskError> {
        if let Some(s) = self.specs.lock().ok().and_then(|m| m.get(&job_id).cloned()) {
            return Ok(s);
        }
        let text = self.ctx.store.job_spec(job_id).await?;
        let spec: JobSpec =
            serde_json::from_str(&text).map_err(|e| TaskError::Spec { job_id, source: e })?;
        let spec = Arc::new(spec);
        if let Ok(mut m) = self.specs.lock() {
            // A long-running worker meets a new job every scheduled run: forget them all now
            // and then (a spec never changes; a miss reads it again).
            if m.len() >= SPECS_KEPT {
                m.clear();
            }
            m.insert(job_id, spec.clone());
        }
        Ok(spec)
    }

    /// While the task runs, look at its job's control: a pause or a cancel stops new items and
    /// new calls. Ends when the returned guard drops (the task's end).
    /// The task's shop is watched the same way: a shop paused meanwhile (a refused session)
    /// stops the task's calls too.
    fn watch_control(&self, job_id: i64, shop: (Platform, String), stop: &Stop) -> AbortOnDrop {
        let controls = self.controls.clone();
        let shops = self.shops.clone();
        let held = stop.held.clone();
        AbortOnDrop(tokio::spawn(async move {
            loop {
                tokio::time::sleep(CONTROL_POLL).await;
                // Paused or cancelled. (A ledger error: the check before the next task
                // decides.)
                let job_held = matches!(controls.get(job_id).await, Ok(Some(_)));
                if job_held || matches!(shops.paused(shop.0, &shop.1).await, Ok(true)) {
                    held.trigger();
                    return;
                }
            }
        }))
    }

    /// Once the task has run [`TASK_TURN`], at each turn: if its shop runs more tasks in this
    /// worker than its share while another shop's task waits in the queue, the task's turn is
    /// over (`stop.turn_over`): it starts no new item and the rest of its chunk goes back to
    /// the queue, behind the waiting shops in the fair order ([`TaskTurns`]).
    fn watch_turn(&self, stop: &Stop, shop: &str) -> (Running, AbortOnDrop) {
        self.turns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .start(shop);
        let running = Running {
            turns: self.turns.clone(),
            shop: shop.to_string(),
            gave_back: stop.turn_over.clone(),
        };
        let queue = self.queue.clone();
        let seen = self.waiting_seen.clone();
        let turns = self.turns.clone();
        let weights = self.weights.clone();
        let slots = self.slots;
        let shop = shop.to_string();
        let turn_over = stop.turn_over.clone();
        let watch = AbortOnDrop(tokio::spawn(async move {
            loop {
                tokio::time::sleep(TASK_TURN).await;
                // One look at the queue serves every task of this worker whose turn comes
                // within a second of it; a queue that does not answer: the next turn asks again.
                let fresh = seen
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .as_ref()
                    .filter(|(at, _)| elapsed_since(*at) < WAITING_FRESH)
                    .map(|(_, w)| w.clone());
                let waiting = match fresh {
                    Some(w) => w,
                    None => {
                        let Ok(w) = queue.waiting_shops(WAITING_LOOKED_AT).await else {
                            continue;
                        };
                        let w = Arc::new(w);
                        *seen.lock().unwrap_or_else(|e| e.into_inner()) =
                            Some((monotonic_now(), w.clone()));
                        w
                    }
                };
                let weight = |s: &str| weights.get(s).unwrap_or(DEFAULT_WEIGHT);
                let over = turns
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .over_its_turn(&shop, slots, &waiting, weight);
                if over {
                    turn_over.trigger();
                    return;
                }
            }
        }));
        (running, watch)
    }

    /// Run one task. Failures of the ledger or queue count an attempt (the task is retried);
    /// platform failures are item outcomes, recorded in the ledger. A task of a job this
    /// ledger does not know is handed back, never burned: the worker was given another
    /// ledger than the fleet's, or the job was deleted.
    pub(crate) async fn run_task(&self, task: TaskMsg, ctx: TaskCtx) -> TaskResult {
        match self.try_run_task(&task, &ctx).await {
            Ok(result) => result,
            Err(TaskError::Ledger(StoreError::JobNotFound { db, job_id })) => {
                tracing::error!(
                    job = job_id,
                    chunk = task.chunk,
                    "the ledger {db} has no job {job_id}: handing the task back (is this worker's --db the fleet's ledger?)"
                );
                TaskResult::RetryAfter(UNKNOWN_JOB_RETRY)
            }
            // The ledger is down or does not answer: the task waits it out in the queue,
            // uncharged (a dead letter would fail items that only need the ledger back).
            Err(TaskError::Ledger(e)) if e.is_unavailable() => {
                // 2.5 to 5 s, spread so a fleet's tasks do not all come back at once.
                let retry = LEDGER_DOWN_RETRY.equal_jitter(1);
                tracing::warn!(
                    job = task.job_id,
                    chunk = task.chunk,
                    retry_s = retry.as_secs_f64(),
                    "the ledger is unreachable: handing the task back: {e}"
                );
                TaskResult::RetryAfter(retry)
            }
            Err(e) => {
                tracing::warn!(
                    job = task.job_id,
                    chunk = task.chunk,
                    attempt = ctx.attempt,
                    "task failed: {e}"
                );
                TaskResult::Failed(e.to_string())
            }
        }
    }

    /// Record finished outcomes in the ledger (one transaction); note the items to re-queue
    /// and those left pending.
    /// [`JobRunner::record`] of a chunk with no listings: the useful calls go with the
    /// outcomes they belong to, in one transaction.
    async fn record_with_useful(
        &self,
        job_id: i64,
        runs: Vec<(String, ItemRun)>,
        tally: &mut Tally,
        useful: &Useful,
    ) -> Result<(), TaskError> {
        let calls = useful.drain(self.ctx.gateway.clock().utc());
        self.record(job_id, runs, tally, None, &calls).await
    }

    async fn record(
        &self,
        job_id: i64,
        runs: Vec<(String, ItemRun)>,
        tally: &mut Tally,
        listings: Option<ListingsRecord<'_>>,
        calls: &[CallRecord],
    ) -> Result<(), TaskError> {
        let mut outcomes = Vec::with_capacity(runs.len());
        let mut again = Vec::new();
        let mut keep = Vec::new();
        let mut refused: Vec<((Platform, String), String)> = Vec::new();
        for (key, run) in runs {
            let run = match run {
                ItemRun::Carry { carry, run } => {
                    keep.push((key.clone(), carry));
                    *run
                }
                run => run,
            };
            match run {
                ItemRun::Outcome(o) => outcomes.push(o),
                ItemRun::Later(after) => {
                    tally.later_by = tally.later_by.max(after);
                    tally.later_keys.push(key);
                }
                ItemRun::Again(failed) => again.push(failed),
                ItemRun::SessionRefused {
                    platform,
                    api,
                    reason,
                } => {
                    tally.later_by = tally.later_by.max(SHOP_PAUSED_RECHECK);
                    tally.later_keys.push(key);
                    let shop = match tally.source {
                        Some(source) if platform == source && api == Api::ItemGet => {
                            (source, DEFAULT_SHOP.to_string())
                        }
                        _ => tally.shop.clone(),
                    };
                    // Many items of a group meet the same refusal: one pause each.
                    if !refused.iter().any(|(s, _)| *s == shop) {
                        refused.push((shop, reason));
                    }
                }
                ItemRun::Carry { .. } => {}
            }
        }
        for ((platform, shop), reason) in refused {
            match self.shops.pause(platform, &shop, &reason).await {
                Ok(()) => {}
                Err(ShopCheck::Ledger(e)) => return Err(e.into()),
                Err(e) => tracing::error!(error = %e, "cannot pause the shop"),
            }
        }
        if !again.is_empty() {
            let keys: Vec<String> = again.iter().map(|o| o.key.clone()).collect();
            let rounds: HashMap<String, u32> = ledger_write("item_attempts", || {
                self.ctx.store.item_attempts(job_id, &keys)
            })
            .await?
            .into_iter()
            .collect();
            let allowed = self.ctx.cfg.jobs.item_retry_rounds;
            for failed in again {
                let round = rounds.get(&failed.key).copied().unwrap_or(0);
                if round < allowed {
                    // Pending with attempts + 1: the re-run finds it and counts the round.
                    let after = item_retry_backoff(round);
                    tally.later_by = tally.later_by.max(after);
                    tally.later_keys.push(failed.key.clone());
                    outcomes.push(ItemOutcome {
                        status: ItemStatus::Pending,
                        ..failed
                    });
                    tally.retried += 1;
                } else {
                    outcomes.push(failed);
                }
            }
        }
        tally.unfinished += outcomes
            .iter()
            .filter(|o| o.status == ItemStatus::Pending)
            .count()
            - tally.retried;
        tally.retried = 0;
        let group = GroupRecord {
            job_id,
            listings,
            carry: &keep,
            outcomes: &outcomes,
            calls,
        };
        let report = ledger_write("record_group", || self.ctx.store.record_group(&group)).await?;
        if report.recorded < outcomes.len() as u64
            // Read fresh, not from the cache: the cancel may be younger than a second.
            && matches!(
                self.ctx.store.job_control(job_id).await,
                Ok(Some(JobControl::Cancelled))
            )
        {
            // Items no longer pending in a cancelled job: the cancel came while their call was
            // on the wire. What a call made is recorded over `cancelled` (docs/design.md,
            // "Job control"). (A duplicate delivery's items are terminal already: nothing.)
            ledger_write("record_made_despite_cancel", || {
                self.ctx.store.record_made_despite_cancel(job_id, &outcomes)
            })
            .await?;
        }
        if report.job_finished {
            tracing::info!(job = job_id, "job finished: every item is terminal");
        }
        Ok(())
    }

    /// Told by the queue about a task that went to the dead-letter stream: its items still
    /// pending end `failed` with class `dead`, so the job finishes and SQL says why;
    /// `syncfleet dead --requeue` puts them back.
    pub(crate) fn dead_hook(&self) -> DeadHook {
        let store = self.ctx.store.clone();
        Arc::new(move |task: TaskMsg, attempts: u32, error: String| {
            let store = store.clone();
            Box::pin(async move {
                let message = format!("dead letter after {attempts} attempt(s): {error}");
                // A listing's items keep no claim of the dead task's runs: requeued, they
                // look their products up at once (docs/design.md, "Listed once").
                if let Err(e) = store.disown_item_claims(task.job_id, &task.keys).await {
                    tracing::warn!(job = task.job_id, error = %e, "the dead task's listing claims could not be given up (a requeue waits the take-over time for them)");
                }
                match ledger_write("fail_dead_items", || {
                    store.fail_dead_items(task.job_id, &task.keys, &message)
                })
                .await
                {
                    Ok(n) => tracing::warn!(
                        job = task.job_id,
                        chunk = task.chunk,
                        items = n,
                        "task dead: its pending items are failed with class `dead` (syncfleet dead --requeue puts them back)"
                    ),
                    Err(e) => tracing::error!(
                        job = task.job_id,
                        chunk = task.chunk,
                        error = %e,
                        "task dead and its items could not be marked: `syncfleet status` shows them pending with no task; run `syncfleet reconcile`"
                    ),
                }
            })
        })
    }

    /// The session the job's shop calls with, or the task handed back, uncharged: its shop is
    /// paused for a refused session (docs/design.md, "Shops"), or this worker cannot call as
    /// the shop (another worker may hold the session).
    async fn shop_session(
        &self,
        job_id: i64,
        (platform, shop): &(Platform, String),
    ) -> Result<Result<Option<SessionCell>, TaskResult>, TaskError> {
        let session = match self.shops.held_at_start(*platform, shop).await {
            Ok(true) => return Ok(Err(TaskResult::RetryAfter(SHOP_PAUSED_RECHECK))),
            Ok(false) => self.shops.session(*platform, shop).await,
            Err(e) => Err(e),
        };
        match session {
            Ok(s) => Ok(Ok(s)),
            Err(ShopCheck::Ledger(e)) => Err(e.into()),
            Err(e) => {
                tracing::error!(job = job_id, error = %e, "this worker cannot call as the job's shop: handing the task back");
                Ok(Err(TaskResult::RetryAfter(MISSING_SESSION_RETRY)))
            }
        }
    }

    async fn try_run_task(&self, task: &TaskMsg, ctx: &TaskCtx) -> Result<TaskResult, TaskError> {
        let stop = Stop::new(
            ctx,
            Duration::from_secs(self.ctx.cfg.queue.shutdown_grace_s),
        );
        if stop.refuses_new_items() {
            return Ok(TaskResult::RetryAfter(HAND_BACK_DELAY));
        }
        // An operator's pause or cancel (docs/design.md, "Job control"): a paused job's task
        // goes back uncharged; a cancelled job's items are no longer pending.
        match self.controls.get(task.job_id).await? {
            Some(JobControl::Paused) => return Ok(TaskResult::RetryAfter(PAUSED_RECHECK)),
            Some(JobControl::Cancelled) => return Ok(TaskResult::Done),
            None => {}
        }
        let spec = self.spec(task.job_id).await?;
        if spec.kind() != task.kind {
            return Err(TaskError::KindMismatch {
                task_kind: task.kind,
                job_id: task.job_id,
                job_kind: spec.kind(),
            });
        }
        let shop = (spec.shop_platform(), spec.shop().to_string());
        let session = match self.shop_session(task.job_id, &shop).await? {
            Ok(session) => session,
            Err(back) => return Ok(back),
        };
        let _watch = self.watch_control(task.job_id, shop.clone(), &stop);
        let _turn = self.watch_turn(&stop, &shop.1);
        let weight = self.weights.get(&shop.1).unwrap_or(DEFAULT_WEIGHT);
        let hctx = self
            .ctx
            .for_task(session, spec.lane(), GateShare::new(&shop.1, weight));
        // A re-delivered task does only what the ledger still shows pending.
        let pending = self
            .ctx
            .store
            .items_to_run_carrying(task.job_id, &task.keys)
            .await?;
        let carried: HashMap<String, String> = pending
            .iter()
            .filter_map(|(k, c)| c.clone().map(|c| (k.clone(), c)))
            .collect();
        let keys: Vec<String> = pending.into_iter().map(|(k, _)| k).collect();
        if keys.is_empty() {
            return Ok(TaskResult::Done);
        }
        let useful = Useful::default();
        let mut tally = Tally {
            shop,
            source: match &*spec {
                JobSpec::Listing { from, .. } => Some(*from),
                _ => None,
            },
            unfinished: 0,
            retried: 0,
            later_keys: Vec::new(),
            later_by: Duration::ZERO,
        };
        match &*spec {
            JobSpec::Listing {
                from,
                to,
                to_shop,
                relist,
                allow_stale_source_s,
                map,
                shop_listing,
                ..
            } => {
                let target = listing::Target {
                    job_id: task.job_id,
                    route: ListingRoute {
                        from: *from,
                        to: *to,
                        shop: to_shop,
                    },
                    relist: *relist,
                    allow_stale_s: *allow_stale_source_s,
                    map: map.as_deref(),
                    shop: shop_listing,
                };
                self.run_listing(
                    ListingTask {
                        task,
                        holder: &ctx.delivery,
                        hctx: &hctx,
                        target,
                        keys: &keys,
                        carried: &carried,
                        useful: &useful,
                        stop: &stop,
                    },
                    &mut tally,
                )
                .await?;
            }
            JobSpec::Orders { platform, shop, .. } => {
                let run = orders::run_chunk(
                    &hctx,
                    task.job_id,
                    *platform,
                    shop,
                    &keys,
                    &useful,
                    &carried,
                    &stop,
                );
                let Some(runs) = stop.cut_short(run).await else {
                    return Ok(TaskResult::RetryAfter(HAND_BACK_DELAY));
                };
                self.record_with_useful(task.job_id, runs, &mut tally, &useful)
                    .await?;
            }
            JobSpec::Logistics { platform, .. } => {
                let run = logistics::run_chunk(&hctx, *platform, &keys, &useful, &stop);
                let Some(runs) = stop.cut_short(run).await else {
                    return Ok(TaskResult::RetryAfter(HAND_BACK_DELAY));
                };
                self.record_with_useful(task.job_id, runs?, &mut tally, &useful)
                    .await?;
            }
        }
        let Tally {
            unfinished,
            later_keys,
            later_by,
            ..
        } = tally;
        if unfinished > 0 {
            // An attempt that left items pending (a ledger write of the handler failed):
            // the task must run again (every pending item of it, deferred ones included),
            // or those items would wait for a reconcile.
            return Err(TaskError::Unfinished(unfinished));
        }
        if !later_keys.is_empty() {
            // The same task again after the gate's retry-at time (or the retry backoff), no
            // attempt used: the re-run does only the items the ledger still shows pending.
            let delay = later_by.max(HAND_BACK_DELAY);
            tracing::debug!(
                job = task.job_id,
                chunk = task.chunk,
                items = later_keys.len(),
                delay_ms = delay.as_millis() as u64,
                "re-queued the rest of the chunk"
            );
            return Ok(TaskResult::RetryAfter(delay));
        }
        Ok(TaskResult::Done)
    }
}

/// Why a task run failed (it counts an attempt, except [`StoreError::JobNotFound`]).
#[derive(Debug, thiserror::Error)]
pub(crate) enum TaskError {
    #[error(transparent)]
    Ledger(#[from] StoreError),
    #[error("job {job_id}: unreadable spec in the ledger: {source}")]
    Spec {
        job_id: i64,
        #[source]
        source: serde_json::Error,
    },
    #[error("task kind `{task_kind}` does not match job {job_id} ({job_kind})")]
    KindMismatch {
        task_kind: JobKind,
        job_id: i64,
        job_kind: JobKind,
    },
    #[error("{0} item(s) attempted but not finished")]
    Unfinished(usize),
}

/// A task that ends aborts what it spawned.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How soon a handed-back task (worker stopping, items deferred) may run again.
const HAND_BACK_DELAY: Duration = Duration::from_millis(50);
/// How long a task runs before it may give its worker slot to a task waiting in the queue.
pub(crate) const TASK_TURN: Duration = Duration::from_secs(5);
/// Tasks at the head of the queue whose shops a turn looks at.
const WAITING_LOOKED_AT: usize = 64;
/// How long one look at the waiting shops serves the worker's other tasks.
const WAITING_FRESH: Duration = Duration::from_secs(1);
/// How soon a task of a paused shop comes back to look again (uncharged).
const SHOP_PAUSED_RECHECK: Duration = Duration::from_secs(5);
/// How soon a task of a shop whose session this worker lacks comes back (another worker may
/// hold it).
const MISSING_SESSION_RETRY: Duration = Duration::from_secs(60);
/// How soon a task of a job the ledger does not know comes back.
const UNKNOWN_JOB_RETRY: Duration = Duration::from_secs(60);

/// When a task handed back for an unreachable ledger comes back (`equal_jitter(1)`).
const LEDGER_DOWN_RETRY: crate::link::backoff::Backoff =
    crate::link::backoff::Backoff::new(Duration::from_millis(2500), Duration::from_secs(5));
