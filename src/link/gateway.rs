//! The gateway: the one entry point business code calls. For every logical call it runs
//! breaker → budget → gate → bulkhead → HTTP → classify → record → retry (within budgets) →
//! degrade, and returns data, data flagged stale, or a classified error. Business code never
//! sees retries, limits or timeouts.

use super::backoff::Backoff;
use super::breaker::{Breaker, Decision, Outcome, Transition};
use super::budget::Budget;
use super::policy::{Attempts, CallShape, FailureFacts, RetryPolicy, StopReason, Verdict};
use super::retry_budget::{LocalRetryBudget, RetryBudgetPolicy};
use super::shared::FleetLink;
use crate::config::{Config, LinkConfig, PlatformConfig};
use crate::platform::{
    Api, ApiRequest, ApiResponse, CallError, ErrorClass, Platform, PlatformClient, TransportError,
};
use crate::store::{CallClass, CallRecord, Store};
use crate::throttle::{GateOutcome, GateRefusal, Gates};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// Log target of the one-line-per-call records.
pub const CALL_TARGET: &str = "syncfleet::call";
/// Log target of local refusals (paused gate, open breaker, wait too long, no slot, no
/// budget): nothing went on the wire, so they are not call lines.
pub const REFUSAL_TARGET: &str = "syncfleet::refusal";
/// Log target of reads answered from the stale cache.
pub const STALE_TARGET: &str = "syncfleet::stale";

/// How often call counts are written to the ledger.
const LEDGER_FLUSH: Duration = Duration::from_secs(2);

/// What one logical call needs besides the request.
#[derive(Debug, Clone)]
pub struct CallContext {
    /// The task's time budget: every attempt and wait takes its slice from it.
    pub budget: Budget,
    /// Carried into the call log line.
    pub trace_id: String,
    /// Writes are retried like reads (5xx, timeouts, connect errors) only when they carry
    /// one: the platform answers a repeat with the first result. `out_request_id` for
    /// `item_add`.
    pub idempotency_key: Option<String>,
}

impl CallContext {
    /// A context with a fresh trace id.
    pub fn new(budget: Budget) -> Self {
        CallContext {
            budget,
            trace_id: ulid::Ulid::new().to_string(),
            idempotency_key: None,
        }
    }

    /// A context whose budget is the configured task budget, starting now.
    pub fn for_task(link: &LinkConfig) -> Self {
        CallContext::new(Budget::starting_now(Duration::from_millis(
            link.task_budget_ms,
        )))
    }

    pub fn with_trace_id(mut self, trace_id: impl Into<String>) -> Self {
        self.trace_id = trace_id.into();
        self
    }

    pub fn with_idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }
}

/// Why a stale answer was served, and how old it is.
#[derive(Debug, Clone, PartialEq)]
pub struct StaleInfo {
    pub age: Duration,
    pub stored_at: DateTime<Utc>,
    /// What prevented a fresh answer (the final error, or "breaker open ...").
    pub reason: String,
}

/// A successful logical call: fresh data, or the last good data flagged stale.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub response: ApiResponse,
    pub stale: Option<StaleInfo>,
}

/// What stopped a call before or instead of a platform answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkErrorKind {
    /// The platform answered with an error (or the transport failed) and no retry was left.
    Platform,
    /// The breaker of (platform, api) is open.
    BreakerOpen,
    /// The task's time budget cannot cover another attempt.
    BudgetExhausted,
    /// No concurrency slot (gate or platform bulkhead) within the pool wait.
    Busy,
    /// The gate's next token is beyond what this task may wait.
    RateWait,
    /// The gate is paused (ban, spent daily quota).
    Paused,
    /// The fleet's retry budget is spent: the upstream looks sick.
    RetryBudget,
    /// No client is configured for the platform.
    NotConfigured,
    /// The platform is configured but its client was not built: a secret's environment
    /// variable is missing (the message names it). Fatal: retrying cannot help.
    MissingSecret,
}

impl LinkErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LinkErrorKind::Platform => "platform",
            LinkErrorKind::BreakerOpen => "breaker_open",
            LinkErrorKind::BudgetExhausted => "budget_exhausted",
            LinkErrorKind::Busy => "busy",
            LinkErrorKind::RateWait => "rate_wait",
            LinkErrorKind::Paused => "paused",
            LinkErrorKind::RetryBudget => "retry_budget",
            LinkErrorKind::NotConfigured => "not_configured",
            LinkErrorKind::MissingSecret => "missing_secret",
        }
    }
}

/// A logical call that failed, classified. `retry_at` (Slow, breaker open, busy) tells the job
/// to re-queue the work after that long without consuming a task attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkError {
    pub platform: Platform,
    pub api: Api,
    pub class: ErrorClass,
    pub kind: LinkErrorKind,
    pub message: String,
    pub retry_at: Option<Duration>,
    /// HTTP attempts made.
    pub attempts: u32,
    /// The last platform error, when there was one.
    pub last: Option<CallError>,
}

impl fmt::Display for LinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}: {} ({}): {}",
            self.platform,
            self.api,
            self.class,
            self.kind.as_str(),
            self.message
        )?;
        if let Some(r) = self.retry_at {
            write!(f, " [retry in {} ms]", r.as_millis())?;
        }
        Ok(())
    }
}

impl std::error::Error for LinkError {}

/// Call counters of one (platform, api) since start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallCounters {
    /// Logical calls.
    pub calls: u64,
    /// Answered with fresh data.
    pub ok: u64,
    /// Answered from the stale cache.
    pub stale: u64,
    /// Failed with a caller error (Fatal): taken out of the availability denominator.
    pub caller_errors: u64,
    /// Failed otherwise (upstream, budget, breaker, gate).
    pub failed: u64,
    /// HTTP attempts (what the platform saw).
    pub attempts: u64,
    /// Attempts after the first.
    pub retries: u64,
    /// Calls refused by an open breaker.
    pub breaker_rejects: u64,
    /// Logical calls refused before anything went on the wire (any local reason).
    pub refused: u64,
}

impl CallCounters {
    /// ok / (calls - caller errors); 1 when nothing should have succeeded yet.
    pub fn availability(&self) -> f64 {
        let denom = self.calls.saturating_sub(self.caller_errors);
        if denom == 0 {
            1.0
        } else {
            self.ok as f64 / denom as f64
        }
    }

    /// Caller errors / calls.
    pub fn caller_error_ratio(&self) -> f64 {
        ratio(self.caller_errors, self.calls)
    }

    /// Stale answers / calls.
    pub fn stale_ratio(&self) -> f64 {
        ratio(self.stale, self.calls)
    }

    /// HTTP attempts per logical call (retry amplification, client side).
    pub fn amplification(&self) -> f64 {
        if self.calls == 0 {
            1.0
        } else {
            self.attempts as f64 / self.calls as f64
        }
    }

    fn add(&mut self, o: &CallCounters) {
        self.calls += o.calls;
        self.ok += o.ok;
        self.stale += o.stale;
        self.caller_errors += o.caller_errors;
        self.failed += o.failed;
        self.attempts += o.attempts;
        self.retries += o.retries;
        self.breaker_rejects += o.breaker_rejects;
        self.refused += o.refused;
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// The counters of every (platform, api) that saw calls, plus their sum.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinkSnapshot {
    pub per_api: Vec<(Platform, Api, CallCounters)>,
    pub total: CallCounters,
}

/// (minute key, platform, api, class) of a calls-ledger row.
type LedgerKey = (String, Platform, Api, CallClass);

/// One platform's own HTTP client and concurrency pool.
struct Bulkhead {
    client: PlatformClient,
    slots: Arc<Semaphore>,
    pool_wait: Duration,
}

struct Inner {
    link: LinkConfig,
    gates: Gates,
    bulkheads: HashMap<Platform, Bulkhead>,
    /// Configured platforms left without a client: the secret variable that is missing.
    missing_secrets: HashMap<Platform, String>,
    fleet: Option<FleetLink>,
    store: Option<Store>,
    worker_id: String,
    policy: RetryPolicy,
    backoff: Backoff,
    budget_policy: RetryBudgetPolicy,
    breakers: Mutex<HashMap<(Platform, Api), Breaker>>,
    local_budget: Mutex<HashMap<(Platform, Api), LocalRetryBudget>>,
    counters: Mutex<HashMap<(Platform, Api), CallCounters>>,
    /// Ledger rows not yet written: (minute, platform, api, class) → calls.
    ledger: Mutex<HashMap<LedgerKey, (DateTime<Utc>, u64)>>,
    /// Last time a Redis problem was logged (ms since `started`), so an outage logs once per 10 s.
    last_redis_warn: Mutex<Option<Instant>>,
}

/// The link layer of one process. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
}

impl fmt::Debug for Gateway {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gateway")
            .field(
                "platforms",
                &self.inner.bulkheads.keys().collect::<Vec<_>>(),
            )
            .field("fleet", &self.inner.fleet.is_some())
            .field("worker_id", &self.inner.worker_id)
            .finish()
    }
}

/// Builds a [`Gateway`]: platforms (one bulkhead each), then optional fleet state and ledger.
pub struct GatewayBuilder {
    link: LinkConfig,
    gates: Gates,
    bulkheads: HashMap<Platform, Bulkhead>,
    missing_secrets: HashMap<Platform, String>,
    fleet: Option<FleetLink>,
    store: Option<Store>,
    worker_id: String,
}

impl GatewayBuilder {
    /// A configured platform whose client is not built because the secret variable `var`
    /// is missing: its calls fail Fatal naming `var`.
    pub fn missing_secret(mut self, platform: Platform, var: impl Into<String>) -> Self {
        self.missing_secrets.insert(platform, var.into());
        self
    }

    /// Add a platform: its client and the bulkhead size and pool wait of its config.
    pub fn platform(mut self, client: PlatformClient, cfg: &PlatformConfig) -> Self {
        let bulkhead = Bulkhead {
            slots: Arc::new(Semaphore::new(cfg.max_in_flight.max(1))),
            pool_wait: Duration::from_millis(cfg.pool_wait_ms),
            client,
        };
        self.bulkheads.insert(bulkhead.client.platform(), bulkhead);
        self
    }

    /// Share breaker trips, retry budget and stale cache with the fleet through Redis.
    pub fn fleet(mut self, fleet: FleetLink) -> Self {
        self.fleet = Some(fleet);
        self
    }

    /// Write call counts to the calls ledger; also the stale cache when there is no fleet.
    pub fn store(mut self, store: Store) -> Self {
        self.store = Some(store);
        self
    }

    /// Name of this worker in published breaker trips and leases (default: a fresh ULID).
    pub fn worker_id(mut self, id: impl Into<String>) -> Self {
        self.worker_id = id.into();
        self
    }

    pub fn build(self) -> Gateway {
        let inner = Arc::new(Inner {
            policy: RetryPolicy::from_config(&self.link.retry),
            backoff: Backoff::from_config(&self.link.retry),
            budget_policy: RetryBudgetPolicy::from_config(&self.link.retry),
            link: self.link,
            gates: self.gates,
            bulkheads: self.bulkheads,
            missing_secrets: self.missing_secrets,
            fleet: self.fleet,
            store: self.store,
            worker_id: self.worker_id,
            breakers: Mutex::new(HashMap::new()),
            local_budget: Mutex::new(HashMap::new()),
            counters: Mutex::new(HashMap::new()),
            ledger: Mutex::new(HashMap::new()),
            last_redis_warn: Mutex::new(None),
        });
        if inner.store.is_some() {
            spawn_ledger_flusher(Arc::downgrade(&inner));
        }
        Gateway { inner }
    }
}

fn spawn_ledger_flusher(inner: Weak<Inner>) {
    // Outside a runtime (a sync test building a gateway) there is nothing to spawn on;
    // `Gateway::flush` still writes.
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        return;
    };
    handle.spawn(async move {
        loop {
            tokio::time::sleep(LEDGER_FLUSH).await;
            let Some(inner) = inner.upgrade() else { return };
            inner.flush_ledger().await;
        }
    });
}

/// What the attempt loop ended with before degrading.
struct Failed {
    err: LinkError,
    /// Whether a stale answer may stand in (upstream trouble, not a caller error).
    degradable: bool,
}

impl Gateway {
    pub fn builder(link: LinkConfig, gates: Gates) -> GatewayBuilder {
        GatewayBuilder {
            link,
            gates,
            bulkheads: HashMap::new(),
            missing_secrets: HashMap::new(),
            fleet: None,
            store: None,
            worker_id: ulid::Ulid::new().to_string(),
        }
    }

    /// A gateway for every platform of `cfg`, with secrets read from the environment
    /// variables the config names. A platform whose variable is missing gets no client (a
    /// warning names the variable; its calls fail Fatal naming it): only the jobs that use it
    /// need it, and `jobs::secrets` refuses to start a worker for those.
    pub fn from_config(
        cfg: &Config,
        gates: Gates,
        fleet: Option<FleetLink>,
        store: Option<Store>,
    ) -> Result<Gateway, String> {
        let mut b = Gateway::builder(cfg.link.clone(), gates);
        for (&platform, pc) in &cfg.platforms {
            if let Some(missing) = pc.missing_secret() {
                tracing::warn!(%platform, variable = %missing.var, "{platform} client not built: {missing}");
                b = b.missing_secret(platform, missing.var);
                continue;
            }
            b = b.platform(PlatformClient::new(platform, pc)?, pc);
        }
        if let Some(f) = fleet {
            b = b.fleet(f);
        }
        if let Some(s) = store {
            b = b.store(s);
        }
        Ok(b.build())
    }

    pub fn link_config(&self) -> &LinkConfig {
        &self.inner.link
    }

    pub fn worker_id(&self) -> &str {
        &self.inner.worker_id
    }

    pub fn fleet(&self) -> Option<&FleetLink> {
        self.inner.fleet.as_ref()
    }

    pub fn platforms(&self) -> Vec<Platform> {
        let mut v: Vec<_> = self.inner.bulkheads.keys().copied().collect();
        v.sort();
        v
    }

    /// Why `platform` has no client: a missing secret variable (named), or no config.
    fn no_client(&self, platform: Platform) -> (LinkErrorKind, String) {
        match self.inner.missing_secrets.get(&platform) {
            Some(var) => (
                LinkErrorKind::MissingSecret,
                format!("{platform} client not built: environment variable {var} is not set (it must hold the secret)"),
            ),
            None => (
                LinkErrorKind::NotConfigured,
                format!("no client configured for {platform}"),
            ),
        }
    }

    /// The read timeout of `api`'s class.
    pub fn read_timeout(&self, api: Api) -> Duration {
        Duration::from_millis(self.inner.link.timeouts.for_class(api.class()).read_ms)
    }

    /// One logical call: data, data flagged stale (reads only, after retries are exhausted),
    /// or a classified error.
    pub async fn call(
        &self,
        platform: Platform,
        req: ApiRequest,
        ctx: &CallContext,
    ) -> Result<Reply, LinkError> {
        let started = Instant::now();
        let api = req.api();
        let mut sends = 0u32;
        let result = match self.attempts(platform, &req, ctx, &mut sends).await {
            Ok(response) => Ok(Reply {
                response,
                stale: None,
            }),
            Err(failed) => match self.degrade(platform, &req, &failed).await {
                Some(reply) => Ok(reply),
                None => Err(failed.err),
            },
        };
        self.account(platform, api, ctx, &result, sends, started.elapsed());
        result
    }

    /// The attempt loop: breaker → budget → gate → bulkhead → HTTP → classify → retry.
    async fn attempts(
        &self,
        platform: Platform,
        req: &ApiRequest,
        ctx: &CallContext,
        sends: &mut u32,
    ) -> Result<ApiResponse, Failed> {
        let inner = &self.inner;
        let api = req.api();
        let fail = |kind, class, message: String, retry_at, last: Option<CallError>, sends: u32| {
            // Stale data stands in only when the upstream cannot answer (failures, open
            // breaker, budgets). Caller errors must surface, and a gate refusal is "not now":
            // the job re-queues it for fresh data.
            let degradable = class == ErrorClass::Retry
                && matches!(
                    kind,
                    LinkErrorKind::Platform
                        | LinkErrorKind::BreakerOpen
                        | LinkErrorKind::BudgetExhausted
                        | LinkErrorKind::RetryBudget
                );
            Failed {
                err: LinkError {
                    platform,
                    api,
                    class,
                    kind,
                    message,
                    retry_at,
                    attempts: sends,
                    last,
                },
                degradable,
            }
        };
        let Some(bulkhead) = inner.bulkheads.get(&platform) else {
            let (kind, message) = self.no_client(platform);
            return Err(fail(kind, ErrorClass::Fatal, message, None, None, 0));
        };
        let class_timeout = self.read_timeout(api);
        let shape = CallShape {
            write: api.is_write(),
            has_idempotency_key: ctx.idempotency_key.is_some(),
        };
        let slow_call = Duration::from_millis(inner.link.breaker.slow_call_ms);
        self.budget_record_call(platform, api).await;
        let mut attempts = Attempts::default();
        let mut last: Option<CallError> = None;
        // The error to report if something other than the platform stops the loop.
        let last_class =
            |last: &Option<CallError>, dflt: ErrorClass| last.as_ref().map_or(dflt, |e| e.class);
        loop {
            // 1. Breaker.
            let decision = self.admit(platform, api).await;
            if let Decision::Reject { retry_in } = decision {
                self.bump(platform, api, |c| c.breaker_rejects += 1);
                return Err(fail(
                    LinkErrorKind::BreakerOpen,
                    last_class(&last, ErrorClass::Retry),
                    format!("breaker open for {platform} {api}"),
                    Some(retry_in),
                    last,
                    *sends,
                ));
            }
            if let Decision::WouldReject { retry_in } = decision {
                tracing::warn!(target: "syncfleet::breaker", %platform, %api, retry_in_ms = retry_in.as_millis() as u64,
                    "observe-only: breaker would refuse this call");
            }
            let probe = decision.is_probe();
            // Every admitted probe gets a verdict, whatever stops the attempt.
            let ignore = |this: &Self| {
                if probe {
                    this.record_breaker(platform, api, Outcome::Ignored, true);
                }
            };
            // 2. Budget.
            let now = Instant::now();
            if let Err(e) = ctx.budget.slice(now, class_timeout) {
                ignore(self);
                return Err(fail(
                    LinkErrorKind::BudgetExhausted,
                    last_class(&last, ErrorClass::Retry),
                    e.to_string(),
                    None,
                    last,
                    *sends,
                ));
            }
            // 3. Gate (its wait comes out of the budget).
            let max_wait = ctx.budget.wait_allowance(now, class_timeout);
            let permit = match inner.gates.acquire(platform, api, max_wait).await {
                Ok(p) => p,
                Err(refusal) => {
                    ignore(self);
                    let (kind, retry_at) = match &refusal {
                        GateRefusal::Busy => (LinkErrorKind::Busy, Duration::from_secs(1)),
                        GateRefusal::RetryAt(d) => (LinkErrorKind::RateWait, *d),
                        GateRefusal::Paused { remaining, .. } => {
                            (LinkErrorKind::Paused, *remaining)
                        }
                    };
                    return Err(fail(
                        kind,
                        ErrorClass::Slow,
                        refusal.to_string(),
                        Some(retry_at),
                        last,
                        *sends,
                    ));
                }
            };
            // 4. Bulkhead slot: a slow platform cannot take another's connections.
            let slot = match tokio::time::timeout(
                bulkhead.pool_wait,
                bulkhead.slots.clone().acquire_owned(),
            )
            .await
            {
                Ok(Ok(slot)) => slot,
                _ => {
                    ignore(self);
                    drop(permit);
                    return Err(fail(
                        LinkErrorKind::Busy,
                        ErrorClass::Slow,
                        format!(
                            "no {platform} connection slot within {} ms",
                            bulkhead.pool_wait.as_millis()
                        ),
                        Some(Duration::from_secs(1)),
                        last,
                        *sends,
                    ));
                }
            };
            // 5. HTTP, with the slice the budget grants now (the gate may have waited).
            let slice = match ctx.budget.slice(Instant::now(), class_timeout) {
                Ok(s) => s,
                Err(e) => {
                    ignore(self);
                    return Err(fail(
                        LinkErrorKind::BudgetExhausted,
                        last_class(&last, ErrorClass::Retry),
                        e.to_string(),
                        None,
                        last,
                        *sends,
                    ));
                }
            };
            let sent_at = Instant::now();
            let result = bulkhead.client.call(req, slice).await;
            let took = sent_at.elapsed();
            drop(slot);
            drop(permit);
            log_send(platform, api, ctx, &result, took, *sends);
            *sends += 1;
            self.ledger_add(
                platform,
                api,
                result
                    .as_ref()
                    .map_or_else(|e| CallClass::from(e.class), |_| CallClass::Ok),
            );
            // 6. Classify and record.
            let err = match result {
                Ok(resp) => {
                    inner.gates.report(platform, api, GateOutcome::Success);
                    self.record_breaker(
                        platform,
                        api,
                        Outcome::Success {
                            slow: took > slow_call,
                        },
                        probe,
                    );
                    if !api.is_write() {
                        self.stale_put(platform, req, &resp).await;
                    }
                    return Ok(resp);
                }
                Err(e) => e,
            };
            let gate_outcome = match err.class {
                ErrorClass::Slow => GateOutcome::RateLimited {
                    ban: err.ban,
                    quota_spent: err.quota_spent,
                },
                _ => GateOutcome::Failure,
            };
            inner.gates.report(platform, api, gate_outcome);
            let outcome = match err.class {
                ErrorClass::Retry => Outcome::Failure {
                    slow: took > slow_call,
                },
                // Caller errors and rate limits say nothing about upstream health.
                ErrorClass::Fatal | ErrorClass::Slow | ErrorClass::Unknown => Outcome::Ignored,
            };
            self.record_breaker(platform, api, outcome, probe);
            // 7. Retry within the policy and the budgets.
            let facts = FailureFacts {
                class: err.class,
                peer_closed: err.transport == Some(TransportError::PeerClosed),
            };
            let verdict = inner.policy.decide(
                facts,
                shape,
                Attempts {
                    counted: attempts.counted + 1,
                    ..attempts
                },
            );
            if verdict == Verdict::RetryNow {
                attempts.free += 1;
            } else {
                attempts.counted += 1;
            }
            let class = err.class;
            last = Some(err);
            match verdict {
                Verdict::RetryNow => continue,
                Verdict::BackToGate => continue,
                Verdict::RetryAfterBackoff => {
                    let delay = inner.backoff.delay(attempts.counted.saturating_sub(1));
                    if delay > ctx.budget.wait_allowance(Instant::now(), class_timeout) {
                        return Err(fail(
                            LinkErrorKind::Platform,
                            class,
                            format!(
                                "{} (no budget left for a retry)",
                                last.as_ref().map_or(String::new(), |e| e.to_string())
                            ),
                            None,
                            last,
                            *sends,
                        ));
                    }
                    if !self.budget_try_retry(platform, api).await {
                        return Err(fail(
                            LinkErrorKind::RetryBudget,
                            class,
                            format!(
                                "{} (retry budget spent: upstream looks sick)",
                                last.as_ref().map_or(String::new(), |e| e.to_string())
                            ),
                            None,
                            last,
                            *sends,
                        ));
                    }
                    tokio::time::sleep(delay).await;
                }
                Verdict::Stop(reason) => {
                    let message = match (&last, reason) {
                        (Some(e), StopReason::AttemptsExhausted) => {
                            format!("{e} (after {} attempts)", *sends)
                        }
                        (Some(e), StopReason::Fatal | StopReason::Unknown) => e.to_string(),
                        (Some(e), r) => format!("{e} ({})", r.as_str()),
                        (None, r) => r.as_str().to_string(),
                    };
                    // A rate limit is "not now", never a failure of the item: come back after
                    // the ban, or after a second when the platform named none.
                    let retry_at = last
                        .as_ref()
                        .filter(|e| e.class == ErrorClass::Slow)
                        .map(|e| e.ban.unwrap_or(Duration::from_secs(1)));
                    return Err(fail(
                        LinkErrorKind::Platform,
                        class,
                        message,
                        retry_at,
                        last,
                        *sends,
                    ));
                }
            }
        }
    }

    /// Breaker admission, with the fleet's view folded in.
    async fn admit(&self, platform: Platform, api: Api) -> Decision {
        let remote = match &self.inner.fleet {
            Some(fleet) => match fleet.breaker_open(platform, api).await {
                Ok(r) => r,
                Err(e) => {
                    self.redis_warn("breaker check", &e);
                    None
                }
            },
            None => None,
        };
        let now = Instant::now();
        let mut breakers = self
            .inner
            .breakers
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let breaker = breakers
            .entry((platform, api))
            .or_insert_with(|| Breaker::new(self.inner.link.breaker.clone(), now));
        if let Some(left) = remote {
            if let Some(t) = breaker.force_open(now, left) {
                log_transition(platform, api, t, breaker.observe_only());
            }
        }
        breaker.admit(now)
    }

    fn record_breaker(&self, platform: Platform, api: Api, outcome: Outcome, probe: bool) {
        let now = Instant::now();
        let (transition, observe) = {
            let mut breakers = self
                .inner
                .breakers
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let breaker = breakers
                .entry((platform, api))
                .or_insert_with(|| Breaker::new(self.inner.link.breaker.clone(), now));
            (breaker.record(now, outcome, probe), breaker.observe_only())
        };
        let Some(t) = transition else { return };
        log_transition(platform, api, t, observe);
        if let (Transition::Opened { open_for, reason }, false) = (t, observe) {
            if reason == super::breaker::TripReason::Fleet {
                return;
            }
            if let Some(fleet) = self.inner.fleet.clone() {
                // Publish without holding up this call's return; the trip is already local.
                let holder = self.inner.worker_id.clone();
                let this = self.clone();
                tokio::spawn(async move {
                    if let Err(e) = fleet.publish_trip(platform, api, open_for, &holder).await {
                        this.redis_warn("breaker publish", &e);
                    }
                });
            }
        }
    }

    async fn budget_record_call(&self, platform: Platform, api: Api) {
        let now = Instant::now();
        {
            let mut b = self
                .inner
                .local_budget
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            b.entry((platform, api))
                .or_insert_with(|| LocalRetryBudget::new(self.inner.budget_policy, now))
                .record_call(now);
        }
        if let Some(fleet) = &self.inner.fleet {
            if let Err(e) = fleet
                .budget_record_call(platform, api, self.inner.budget_policy.window)
                .await
            {
                self.redis_warn("retry budget", &e);
            }
        }
    }

    async fn budget_try_retry(&self, platform: Platform, api: Api) -> bool {
        if let Some(fleet) = &self.inner.fleet {
            match fleet
                .budget_try_retry(platform, api, &self.inner.budget_policy)
                .await
            {
                Ok(granted) => return granted,
                Err(e) => self.redis_warn("retry budget", &e),
            }
        }
        let now = Instant::now();
        let mut b = self
            .inner
            .local_budget
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        b.entry((platform, api))
            .or_insert_with(|| LocalRetryBudget::new(self.inner.budget_policy, now))
            .try_retry(now)
    }

    fn stale_max_age(&self, api: Api) -> Duration {
        let s = self
            .inner
            .link
            .stale_max_age_s_per_api
            .get(api.as_str())
            .copied()
            .unwrap_or(self.inner.link.stale_max_age_s);
        Duration::from_secs(s)
    }

    async fn stale_put(&self, platform: Platform, req: &ApiRequest, resp: &ApiResponse) {
        if !self.inner.link.degrade_reads {
            return;
        }
        let (Ok(key), Ok(body)) = (serde_json::to_string(req), serde_json::to_string(resp)) else {
            return;
        };
        let api = req.api();
        let now = Utc::now();
        if let Some(fleet) = &self.inner.fleet {
            if let Err(e) = fleet
                .stale_put(platform, api, &key, &body, now, self.stale_max_age(api))
                .await
            {
                self.redis_warn("stale cache", &e);
            }
        } else if let Some(store) = &self.inner.store {
            if let Err(e) = store.stale_put(platform, api, &key, &body, now).await {
                tracing::warn!(%platform, %api, "stale cache write failed: {e}");
            }
        }
    }

    /// A read that could not succeed answers with its last good data, flagged, when it is
    /// young enough. Writes never degrade.
    async fn degrade(
        &self,
        platform: Platform,
        req: &ApiRequest,
        failed: &Failed,
    ) -> Option<Reply> {
        let api = req.api();
        if api.is_write() || !failed.degradable || !self.inner.link.degrade_reads {
            return None;
        }
        let key = serde_json::to_string(req).ok()?;
        let found = if let Some(fleet) = &self.inner.fleet {
            match fleet.stale_get(platform, api, &key).await {
                Ok(v) => v,
                Err(e) => {
                    self.redis_warn("stale cache", &e);
                    None
                }
            }
        } else if let Some(store) = &self.inner.store {
            match store.stale_get(platform, api, &key).await {
                Ok(v) => v.map(|e| (e.body, e.stored_at)),
                Err(e) => {
                    tracing::warn!(%platform, %api, "stale cache read failed: {e}");
                    None
                }
            }
        } else {
            None
        };
        let (body, stored_at) = found?;
        let age = (Utc::now() - stored_at).to_std().unwrap_or(Duration::ZERO);
        if age > self.stale_max_age(api) {
            return None;
        }
        let response: ApiResponse = serde_json::from_str(&body).ok()?;
        Some(Reply {
            response,
            stale: Some(StaleInfo {
                age,
                stored_at,
                reason: failed.err.to_string(),
            }),
        })
    }

    /// Counters, ledger and the one log line of a finished logical call.
    fn account(
        &self,
        platform: Platform,
        api: Api,
        ctx: &CallContext,
        result: &Result<Reply, LinkError>,
        sends: u32,
        cost: Duration,
    ) {
        self.bump(platform, api, |c| {
            c.calls += 1;
            c.attempts += sends as u64;
            c.retries += sends.saturating_sub(1) as u64;
            match result {
                Ok(Reply { stale: None, .. }) => c.ok += 1,
                Ok(_) => c.stale += 1,
                Err(e) if e.class == ErrorClass::Fatal => c.caller_errors += 1,
                Err(_) => c.failed += 1,
            }
        });
        // Each request on the wire already has its call line (`log_send`). Here: a call that
        // never reached the wire is a refusal, a stale answer a degradation, each logged apart
        // so the ratios computed from call lines stay true.
        match result {
            Err(e) if sends == 0 => {
                self.bump(platform, api, |c| c.refused += 1);
                tracing::info!(
                    target: REFUSAL_TARGET,
                    ts = %Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ"),
                    trace_id = %ctx.trace_id,
                    platform = platform.as_str(),
                    api = api.as_str(),
                    reason = e.kind.as_str(),
                    retry_in_ms = e.retry_at.map(|d| d.as_millis() as u64),
                    "refused"
                );
            }
            Ok(Reply { stale: Some(s), .. }) => {
                tracing::info!(
                    target: STALE_TARGET,
                    ts = %Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ"),
                    trace_id = %ctx.trace_id,
                    platform = platform.as_str(),
                    api = api.as_str(),
                    stale = true,
                    age_s = s.age.as_secs(),
                    cost_ms = cost.as_millis() as u64,
                    reason = %s.reason,
                    "stale"
                );
            }
            _ => {}
        }
    }

    fn bump(&self, platform: Platform, api: Api, f: impl FnOnce(&mut CallCounters)) {
        let mut c = self
            .inner
            .counters
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        f(c.entry((platform, api)).or_default());
    }

    fn ledger_add(&self, platform: Platform, api: Api, class: CallClass) {
        if self.inner.store.is_none() {
            return;
        }
        let now = Utc::now();
        let minute = crate::store::minute_key(now);
        let mut l = self.inner.ledger.lock().unwrap_or_else(|p| p.into_inner());
        l.entry((minute, platform, api, class))
            .or_insert((now, 0))
            .1 += 1;
    }

    /// Write pending call counts to the ledger now (also done every 2 s in the background).
    pub async fn flush(&self) {
        self.inner.flush_ledger().await;
    }

    /// Counters per (platform, api) and in total: availability (ok / (calls - caller
    /// errors)), caller-error ratio, stale ratio, amplification.
    pub fn snapshot(&self) -> LinkSnapshot {
        let c = self
            .inner
            .counters
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut per_api: Vec<_> = c.iter().map(|(&(p, a), v)| (p, a, *v)).collect();
        per_api.sort_by_key(|(p, a, _)| (*p, *a));
        let mut total = CallCounters::default();
        for (_, _, v) in &per_api {
            total.add(v);
        }
        LinkSnapshot { per_api, total }
    }

    /// The breaker state of (platform, api) in this process.
    pub fn breaker_state(&self, platform: Platform, api: Api) -> super::breaker::State {
        let now = Instant::now();
        let mut breakers = self
            .inner
            .breakers
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        breakers
            .entry((platform, api))
            .or_insert_with(|| Breaker::new(self.inner.link.breaker.clone(), now))
            .state(now)
    }

    /// One raw attempt for probes: gate → bulkhead → HTTP, no breaker, retry or stale. The
    /// outcome is reported to the gate (it spends quota like any call). Returns the response
    /// or the classified error, and the HTTP time.
    pub async fn probe_call(
        &self,
        platform: Platform,
        req: &ApiRequest,
        max_wait: Duration,
    ) -> Result<(Result<ApiResponse, CallError>, Duration), LinkError> {
        let api = req.api();
        let refuse = |kind, class, message: String, retry_at| LinkError {
            platform,
            api,
            class,
            kind,
            message,
            retry_at,
            attempts: 0,
            last: None,
        };
        let Some(bulkhead) = self.inner.bulkheads.get(&platform) else {
            let (kind, message) = self.no_client(platform);
            return Err(refuse(kind, ErrorClass::Fatal, message, None));
        };
        let permit = self
            .inner
            .gates
            .acquire(platform, api, max_wait)
            .await
            .map_err(|r| {
                let retry_at = match &r {
                    GateRefusal::Busy => Duration::from_secs(1),
                    GateRefusal::RetryAt(d) => *d,
                    GateRefusal::Paused { remaining, .. } => *remaining,
                };
                refuse(
                    LinkErrorKind::Paused,
                    ErrorClass::Slow,
                    r.to_string(),
                    Some(retry_at),
                )
            })?;
        let _slot =
            tokio::time::timeout(bulkhead.pool_wait, bulkhead.slots.clone().acquire_owned())
                .await
                .ok()
                .and_then(Result::ok)
                .ok_or_else(|| {
                    refuse(
                        LinkErrorKind::Busy,
                        ErrorClass::Slow,
                        "bulkhead full".into(),
                        Some(Duration::from_secs(1)),
                    )
                })?;
        let start = Instant::now();
        let result = bulkhead.client.call(req, self.read_timeout(api)).await;
        let took = start.elapsed();
        drop(permit);
        let outcome = match &result {
            Ok(_) => GateOutcome::Success,
            Err(e) if e.class == ErrorClass::Slow => GateOutcome::RateLimited {
                ban: e.ban,
                quota_spent: e.quota_spent,
            },
            Err(_) => GateOutcome::Failure,
        };
        self.inner.gates.report(platform, api, outcome);
        self.ledger_add(
            platform,
            api,
            result
                .as_ref()
                .map_or_else(|e| CallClass::from(e.class), |_| CallClass::Ok),
        );
        Ok((result, took))
    }

    fn redis_warn(&self, what: &str, e: &redis::RedisError) {
        let mut last = self
            .inner
            .last_redis_warn
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if last.is_none_or(|t| t.elapsed() > Duration::from_secs(10)) {
            *last = Some(Instant::now());
            tracing::warn!("link {what}: redis unavailable, using this process's state: {e}");
        }
    }
}

impl Inner {
    async fn flush_ledger(&self) {
        let Some(store) = &self.store else { return };
        let batch: Vec<CallRecord> = {
            let mut l = self.ledger.lock().unwrap_or_else(|p| p.into_inner());
            l.drain()
                .map(|((_, platform, api, class), (minute, calls))| CallRecord {
                    minute,
                    platform,
                    api,
                    class,
                    calls,
                    useful: 0,
                })
                .collect()
        };
        if let Err(e) = store.record_calls(&batch).await {
            tracing::warn!(
                "calls ledger write failed ({} rows dropped): {e}",
                batch.len()
            );
        }
    }
}

fn log_transition(platform: Platform, api: Api, t: Transition, observe_only: bool) {
    let prefix = if observe_only {
        "observe-only: breaker would be "
    } else {
        "breaker "
    };
    match t {
        Transition::Opened { open_for, reason } => tracing::warn!(
            target: "syncfleet::breaker",
            %platform, %api, open_ms = open_for.as_millis() as u64,
            "{prefix}open: {reason}"
        ),
        Transition::HalfOpened => {
            tracing::info!(target: "syncfleet::breaker", %platform, %api, "{prefix}half-open")
        }
        Transition::Closed => {
            tracing::info!(target: "syncfleet::breaker", %platform, %api, "{prefix}closed")
        }
    }
}

/// The one line of a request that went on the wire (docs/design.md, "Call lines"): its class,
/// its own cost and how many requests of the same logical call went before it.
fn log_send(
    platform: Platform,
    api: Api,
    ctx: &CallContext,
    result: &Result<ApiResponse, CallError>,
    took: Duration,
    before: u32,
) {
    let (ok, class, error) = match result {
        Ok(_) => (true, "ok", String::new()),
        Err(e) => (false, e.class.as_str(), e.to_string()),
    };
    tracing::info!(
        target: CALL_TARGET,
        ts = %Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ"),
        trace_id = %ctx.trace_id,
        platform = platform.as_str(),
        api = api.as_str(),
        ok,
        class,
        cost_ms = took.as_millis() as u64,
        retries = before,
        stale = false,
        error = %error,
        "call"
    );
}
