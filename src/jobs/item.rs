//! What the job handlers share with the runner: the context they call through, an item's
//! result ([`ItemRun`]), the useful-call tally, the stop signal of a task, and ledger writes
//! that ride out a busy SQLite. Its own module so the handlers (listing, orders, logistics)
//! depend on it and not on the runner that calls them.

use super::tokens::SessionCell;
use crate::clock::{elapsed_since, monotonic_now};
use crate::config::Config;
use crate::link::backoff::Backoff;
use crate::link::gateway::{CallContext, Gateway, LinkError, LinkErrorKind};
use crate::platform::{Api, ErrorClass, Platform};
use crate::queue::TaskCtx;
use crate::store::{CallClass, CallRecord, ItemOutcome, Store, StoreError};
use crate::throttle::{GateShare, Lane};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a handler calls through: the ledger, the link layer, the configuration, and the
/// session of the shop the task works for.
#[derive(Clone)]
pub(crate) struct HandlerCtx {
    pub(crate) store: Store,
    pub(crate) gateway: Gateway,
    pub(crate) cfg: Arc<Config>,
    /// The task's shop's session (`None`: the platform's own; docs/design.md, "Shops"), read
    /// at each call: a renewed token is used from the next call on.
    pub(crate) shop_session: Option<SessionCell>,
    /// The task's job's lane: every call of the task books its gate token in it.
    pub(crate) lane: Lane,
    /// The task's shop's share of the gates (docs/design.md, "Fair shares at the gate"):
    /// every call of the task, a listing's source read too, is made for that shop.
    pub(crate) share: Option<Arc<GateShare>>,
}

impl HandlerCtx {
    /// This context for a task of a shop whose calls carry `session`, in `lane`, booked in
    /// the shop's `share` of the gates.
    pub(crate) fn for_task(
        &self,
        session: Option<SessionCell>,
        lane: Lane,
        share: GateShare,
    ) -> HandlerCtx {
        HandlerCtx {
            shop_session: session,
            lane,
            share: Some(Arc::new(share)),
            ..self.clone()
        }
    }

    /// [`HandlerCtx::call_context_until`] for a call made as the task's shop (a listing's
    /// write, an order or logistics read): it carries the shop's session.
    pub(crate) fn shop_call_context_until(&self, stop: &Stop) -> CallContext {
        self.call_context_until(stop)
            .with_session(self.shop_session.as_ref().map(SessionCell::get))
    }

    /// A fresh call context whose budget is the configured per-item budget.
    pub(crate) fn call_context(&self) -> CallContext {
        CallContext::for_task(&self.cfg.link)
    }

    /// [`HandlerCtx::call_context`] that gives up before calling once `stop` holds the job
    /// (paused or cancelled).
    pub(crate) fn call_context_until(&self, stop: &Stop) -> CallContext {
        self.call_context()
            .with_halt(stop.held.clone())
            .with_lane(self.lane)
            .with_share(self.share.clone())
    }
}

/// Items of one chunk run at once. The gate's concurrency slots bound the real
/// parallelism; this only keeps enough calls queued at the gate to use them.
pub(crate) const ITEM_PARALLELISM: usize = 16;

/// The result of running one item.
pub(crate) enum ItemRun {
    /// The item is finished (any terminal status) or recorded an attempt.
    Outcome(ItemOutcome),
    /// Not now: re-queue the item after this long (no attempt consumed).
    Later(Duration),
    /// A transient failure (the failed outcome it would end with): run it again after a
    /// backoff while the item has retry rounds left, else record the failure.
    Again(ItemOutcome),
    /// `run`, and keep `carry` (JSON) with the item: what this run already fetched, so the
    /// next run does not call for it again (docs/design.md, "No call thrown away").
    Carry { carry: String, run: Box<ItemRun> },
    /// The platform refused the session the call carried: the shop is paused and the item
    /// waits for it, uncharged (docs/design.md, "Shops").
    SessionRefused {
        /// The call's platform and API (a listing's source read carries the platform's own
        /// session, its write the target shop's).
        platform: Platform,
        api: Api,
        /// The platform's answer (code and message).
        reason: String,
    },
}

impl ItemRun {
    /// `self`, keeping `carry` when the item is not finished by it.
    pub(crate) fn carrying(self, carry: impl FnOnce() -> Option<String>) -> ItemRun {
        match self {
            ItemRun::Later(_) | ItemRun::Again(_) | ItemRun::SessionRefused { .. } => match carry()
            {
                Some(carry) => ItemRun::Carry {
                    carry,
                    run: Box::new(self),
                },
                None => self,
            },
            other => other,
        }
    }
}

/// "Not now" for a platform whose secret this worker lacks: another worker may have it.
const MISSING_SECRET_RETRY: Duration = Duration::from_secs(60);

impl ItemRun {
    /// Map a link error: "not now" errors re-queue, transient ones (class `retry`) run
    /// again within the item's retry rounds, the rest fail the item with their class.
    pub(crate) fn from_link_error(key: &str, e: &LinkError) -> ItemRun {
        if let Some(after) = e.retry_at {
            return ItemRun::Later(after);
        }
        if let Some(last) = e.last.as_ref().filter(|l| l.session_refused) {
            return ItemRun::SessionRefused {
                platform: last.platform,
                api: last.api,
                reason: format!("{} {}", last.code, last.message),
            };
        }
        if e.kind == LinkErrorKind::MissingSecret {
            tracing::error!(error = %e, "this worker cannot call the platform: handing the item back");
            return ItemRun::Later(MISSING_SECRET_RETRY);
        }
        if e.last.as_ref().is_some_and(|l| l.guessed_limit) {
            // An unmapped code worded like a limit ("title length exceeds 60"): retry rounds
            // with backoff, then `unknown`, never "not now" forever.
            let failed = ItemOutcome::failed(
                key,
                ErrorClass::Unknown,
                format!("answered like a limit with an unmapped code: {e}"),
            );
            return ItemRun::Again(failed);
        }
        let failed = ItemOutcome::failed(key, e.class, e.to_string());
        match e.class {
            ErrorClass::Retry => ItemRun::Again(failed),
            _ => ItemRun::Outcome(failed),
        }
    }
}

/// Backoff before an item's next transient-retry round (`round` counts from 0): doubling
/// from 1 s, capped at 30 s, with equal jitter (between half the ceiling and the ceiling):
/// spread so a burst of failures does not come back together, yet never back at once.
pub(crate) fn item_retry_backoff(round: u32) -> Duration {
    ITEM_RETRY.equal_jitter(round)
}

const ITEM_RETRY: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));

/// A busy ledger's retries: 40-80 ms after the first, doubling to at most 1.3-2.6 s.
const LEDGER_BUSY_RETRY: Backoff =
    Backoff::new(Duration::from_millis(80), Duration::from_millis(2560));

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

    /// The tally since the last drain, as ledger rows of the minute of `now`; the tally starts
    /// again from zero.
    pub(crate) fn drain(&self, now: DateTime<Utc>) -> Vec<CallRecord> {
        let map = self
            .0
            .lock()
            .map(|mut m| std::mem::take(&mut *m))
            .unwrap_or_default();
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

/// When a task must stop calling: the worker is stopping (no new item; items already
/// calling get `grace`), the task's claim is gone (stop at once), or its job was paused or
/// cancelled (`held`: no new item, and no new call: an item waiting at its gate gives up,
/// while a call already on the wire finishes and is recorded, so no product is made that
/// the ledger does not know).
pub(crate) struct Stop {
    stopping: crate::queue::Shutdown,
    lease_lost: crate::queue::Shutdown,
    /// The job was paused or cancelled while the task ran; given to every call's context.
    pub(crate) held: crate::queue::Shutdown,
    /// The task's turn is over: other tasks wait for a worker slot (docs/design.md, "Fair
    /// shares at the gate"). No new item; items started finish; the rest goes back.
    pub(crate) turn_over: crate::queue::Shutdown,
    grace: Duration,
}

impl Stop {
    pub(crate) fn new(ctx: &TaskCtx, grace: Duration) -> Stop {
        Stop {
            stopping: ctx.stopping.clone(),
            lease_lost: ctx.lease_lost.clone(),
            held: crate::queue::Shutdown::new(),
            turn_over: crate::queue::Shutdown::new(),
            grace,
        }
    }

    /// No new item may start.
    pub(crate) fn refuses_new_items(&self) -> bool {
        self.stopping.is_triggered()
            || self.lease_lost.is_triggered()
            || self.held.is_triggered()
            || self.turn_over.is_triggered()
    }

    /// Resolves when running items must be abandoned.
    pub(crate) async fn expired(&self) {
        tokio::select! {
            _ = self.lease_lost.wait() => {}
            _ = async {
                self.stopping.wait().await;
                tokio::time::sleep(self.grace).await;
            } => {}
        }
    }

    /// Run `work` unless it must be abandoned first (`None`).
    pub(crate) async fn cut_short<T>(
        &self,
        work: impl std::future::Future<Output = T>,
    ) -> Option<T> {
        tokio::select! {
            r = work => Some(r),
            _ = self.expired() => None,
        }
    }
}

/// Ledger write attempts on "busy" before the task fails.
const LEDGER_WRITE_ATTEMPTS: u32 = 6;

/// The client's bound on one ledger write: the server's `statement_timeout` cannot see a
/// stalled path or a half-open connection; the write is tried again (docs/design.md,
/// "A failing ledger").
pub(crate) const LEDGER_WRITE_BOUND: Duration = Duration::from_secs(30);

/// How long a write waits out an unreachable ledger, holding its task (and so the outcomes
/// of the calls it made), before handing the task back.
pub(crate) const LEDGER_OUTAGE_WAIT: Duration = Duration::from_secs(90);

/// Backoff between tries of a write while the ledger is unreachable.
const LEDGER_OUTAGE_RETRY: Backoff =
    Backoff::new(Duration::from_millis(250), Duration::from_secs(5));

/// Run a ledger write, retrying "database is locked" with jittered backoff, and waiting out
/// an unreachable ledger (each try bounded by [`LEDGER_WRITE_BOUND`], for up to
/// [`LEDGER_OUTAGE_WAIT`]): failing the task instead would repeat its platform calls (and
/// its writes) on the re-run.
pub(crate) async fn ledger_write<T, F, Fut>(what: &'static str, mut op: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    let mut attempt = 0;
    let mut outage: Option<(Instant, u32)> = None;
    loop {
        attempt += 1;
        let started = monotonic_now();
        let result = match tokio::time::timeout(LEDGER_WRITE_BOUND, op()).await {
            Ok(r) => r,
            Err(_) => Err(StoreError::TimedOut {
                what,
                after: LEDGER_WRITE_BOUND,
            }),
        };
        // A no-op unless a metrics recorder is installed (`work --metrics-listen`).
        metrics::histogram!(crate::metric_names::LEDGER_WRITE)
            .record(elapsed_since(started).as_secs_f64());
        match result {
            Ok(v) => {
                if let Some((since, _)) = outage {
                    tracing::info!(
                        waited_s = elapsed_since(since).as_secs(),
                        "{what}: the ledger answers again"
                    );
                }
                return Ok(v);
            }
            Err(e) if e.is_busy() && attempt < LEDGER_WRITE_ATTEMPTS => {
                let wait = LEDGER_BUSY_RETRY.equal_jitter(attempt - 1);
                tracing::debug!(attempt, wait = ?wait, "{what}: ledger busy, retrying");
                tokio::time::sleep(wait).await;
            }
            Err(e) if e.is_unavailable() => {
                let (since, tries) = outage.get_or_insert((monotonic_now(), 0));
                if elapsed_since(*since) >= LEDGER_OUTAGE_WAIT {
                    return Err(e);
                }
                *tries += 1;
                let wait = LEDGER_OUTAGE_RETRY.equal_jitter(*tries - 1);
                if *tries == 1 {
                    tracing::warn!(error = %e, "{what}: the ledger is unreachable; waiting it out");
                }
                tokio::time::sleep(wait).await;
            }
            Err(e) => return Err(e),
        }
    }
}
