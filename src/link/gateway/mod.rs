//! The gateway: the one entry point business code calls. For every logical call it runs
//! breaker → budget → gate → bulkhead → HTTP → classify → record → retry (within budgets) →
//! degrade, and returns data, data flagged stale, or a classified error. Business code never
//! sees retries, limits or timeouts.
//!
//! By concern: this module holds the public types and the builder; `attempt` the attempt
//! loop; `step` the one attempt (breaker → gate → bulkhead → send → classify) shared by the
//! loop and the probe; `stale` the stale cache; `ledger` the counters and the calls ledger;
//! `fleet_state` the breaker and retry budget, local or fleet-wide; `log` the call, refusal
//! and stale lines; `transport` the seam in front of the HTTP client.

mod attempt;
mod fleet_state;
mod ledger;
mod log;
mod stale;
mod step;
#[cfg(test)]
mod tests;
mod transport;

pub(crate) use log::{CALL_TARGET, REFUSAL_TARGET, STALE_TARGET};
pub(crate) use transport::Transport;

use super::backoff::Backoff;
use super::breaker::Breaker;
use super::budget::Budget;
use super::policy::RetryPolicy;
use super::retry_budget::{LocalRetryBudget, RetryBudgetPolicy};
use super::shared::FleetLink;
use crate::clock::Clock;
use crate::config::{Config, LinkConfig, PlatformConfig};
use crate::platform::clock::PlatformClocks;
use crate::platform::{
    Api, ApiRequest, ApiResponse, CallError, ErrorClass, Platform, PlatformClient,
};
use crate::store::Store;
use crate::throttle::{GateShare, Gates, Lane};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// What one logical call needs besides the request.
#[derive(Debug, Clone)]
pub struct CallContext {
    /// The task's time budget: every attempt and wait takes its slice from it.
    pub(crate) budget: Budget,
    /// Carried into the call log line.
    pub(crate) trace_id: String,
    /// Once triggered, the call makes no new attempt: it gives up at the gate (or before
    /// sending) with [`LinkErrorKind::Halted`]; an attempt already on the wire finishes.
    pub(crate) halt: Option<crate::shutdown::Shutdown>,
    /// The calling shop's session, when it is not the platform's own configured one
    /// (docs/design.md, "Shops"). Never logged.
    pub(crate) session: Option<crate::secret::Secret>,
    /// The call's lane at the gate (docs/design.md, "Lanes").
    pub(crate) lane: Lane,
    /// The shop whose share of the gate the call is booked in (docs/design.md, "Fair
    /// shares at the gate"); `None`: a call for no shop.
    pub(crate) share: Option<Arc<GateShare>>,
}

impl CallContext {
    /// A context with a fresh trace id.
    pub fn new(budget: Budget) -> Self {
        CallContext {
            budget,
            trace_id: ulid::Ulid::new().to_string(),
            halt: None,
            session: None,
            lane: Lane::Bulk,
            share: None,
        }
    }

    /// A context whose budget is the configured task budget, starting now.
    pub fn for_task(link: &LinkConfig) -> Self {
        CallContext::new(Budget::starting_now(Duration::from_millis(
            link.task_budget_ms,
        )))
    }

    /// Use `trace_id` (carried into the call log line) instead of a fresh one.
    pub fn with_trace_id(mut self, trace_id: impl Into<String>) -> Self {
        self.trace_id = trace_id.into();
        self
    }

    /// Give up before the next attempt once `halt` is triggered (the job was paused or
    /// cancelled): at the gate, or before sending.
    pub fn with_halt(mut self, halt: crate::shutdown::Shutdown) -> Self {
        self.halt = Some(halt);
        self
    }

    /// Book the call's gate token in `lane`.
    pub fn with_lane(mut self, lane: Lane) -> Self {
        self.lane = lane;
        self
    }

    /// Book the call's gate token in `share`.
    pub fn with_share(mut self, share: Option<Arc<GateShare>>) -> Self {
        self.share = share;
        self
    }

    /// Sign the call with this shop's session instead of the platform's own.
    pub fn with_session(mut self, session: Option<crate::secret::Secret>) -> Self {
        self.session = session;
        self
    }

    fn halted(&self) -> bool {
        self.halt.as_ref().is_some_and(|h| h.is_triggered())
    }
}

/// Why a stale answer was served, and how old it is.
#[derive(Debug, Clone, PartialEq)]
pub struct StaleInfo {
    /// Age of the served data: now minus when it was stored.
    pub age: Duration,
    pub(crate) stored_at: DateTime<Utc>,
    /// What prevented a fresh answer (the final error, or "breaker open ...").
    pub reason: String,
}

/// A successful logical call: fresh data, or the last good data flagged stale.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The platform's answer: fresh, or the last good one when `stale` is set.
    pub response: ApiResponse,
    /// Set when `response` comes from the stale cache.
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
    /// The caller halted the call before it went out (its job was paused or cancelled).
    Halted,
    /// No client is configured for the platform.
    NotConfigured,
    /// The platform is configured but its client was not built: a secret's environment
    /// variable is missing (the message names it). Fatal: retrying cannot help.
    MissingSecret,
}

impl LinkErrorKind {
    /// The kind's snake_case name, as written in logs and metrics labels.
    pub fn as_str(self) -> &'static str {
        match self {
            LinkErrorKind::Platform => "platform",
            LinkErrorKind::BreakerOpen => "breaker_open",
            LinkErrorKind::BudgetExhausted => "budget_exhausted",
            LinkErrorKind::Busy => "busy",
            LinkErrorKind::RateWait => "rate_wait",
            LinkErrorKind::Paused => "paused",
            LinkErrorKind::RetryBudget => "retry_budget",
            LinkErrorKind::Halted => "halted",
            LinkErrorKind::NotConfigured => "not_configured",
            LinkErrorKind::MissingSecret => "missing_secret",
        }
    }
}

/// A logical call that failed, classified. `retry_at` (Slow, breaker open, busy) tells the job
/// to re-queue the work after that long without consuming a task attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkError {
    pub(crate) platform: Platform,
    pub(crate) api: Api,
    /// What the caller should do about the failure.
    pub class: ErrorClass,
    /// What stopped the call.
    pub kind: LinkErrorKind,
    pub(crate) message: String,
    /// Re-queue the work after this long, without consuming a task attempt.
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

impl LinkError {
    /// A write that failed so surely made nothing: it was never sent, never connected, or the
    /// platform answered it with a refusal of its own. Otherwise its outcome is unknown.
    pub fn write_made_nothing(&self) -> bool {
        self.attempts == 0
            || self
                .last
                .as_ref()
                .is_some_and(|l| l.surely_not_sent() || l.refused_by_platform())
    }
}

/// Call counters of one (platform, api) since start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallCounters {
    /// Logical calls.
    pub calls: u64,
    /// Answered with fresh data.
    pub(crate) ok: u64,
    /// Answered from the stale cache.
    pub stale: u64,
    /// Failed with a caller error (Fatal): taken out of the availability denominator.
    pub caller_errors: u64,
    /// Failed otherwise (upstream, budget, breaker, gate).
    pub(crate) failed: u64,
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
    pub(crate) per_api: Vec<(Platform, Api, CallCounters)>,
    /// The sum over every (platform, api).
    pub total: CallCounters,
}

/// One platform's transport (its own HTTP client in production) and concurrency pool.
struct Bulkhead {
    transport: Arc<dyn Transport>,
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
    /// Ledger rows not yet written.
    ledger: Mutex<ledger::PendingRows>,
    /// Fresh read answers not yet written to the ledger's stale cache (embedded mode).
    stale_pending: Mutex<stale::PendingStale>,
    /// Last time a Redis problem was logged, so an outage logs once per 10 s.
    last_redis_warn: Mutex<Option<Instant>>,
    /// The platforms' clocks, from their answers' `Date`.
    clocks: PlatformClocks,
    /// Where the gateway reads the time: its gates' clock (docs/design.md, "Time you can
    /// pause").
    clock: Clock,
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
    clocks: PlatformClocks,
}

impl GatewayBuilder {
    /// A configured platform whose client is not built because the secret variable `var`
    /// is missing: its calls fail Fatal naming `var`.
    pub(crate) fn missing_secret(mut self, platform: Platform, var: impl Into<String>) -> Self {
        self.missing_secrets.insert(platform, var.into());
        self
    }

    /// Add a platform: its client and the bulkhead size and pool wait of its config.
    pub fn platform(mut self, client: PlatformClient, cfg: &PlatformConfig) -> Self {
        let platform = client.platform();
        self.clocks.insert(platform, client.clock());
        self.transport(platform, Arc::new(client), cfg)
    }

    /// Add a platform that sends through `transport` (a [`PlatformClient`], or a fake in
    /// tests), with the bulkhead size and pool wait of its config.
    pub(crate) fn transport(
        mut self,
        platform: Platform,
        transport: Arc<dyn Transport>,
        cfg: &PlatformConfig,
    ) -> Self {
        let bulkhead = Bulkhead {
            transport,
            slots: Arc::new(Semaphore::new(cfg.max_in_flight.max(1))),
            pool_wait: Duration::from_millis(cfg.pool_wait_ms),
        };
        self.bulkheads.insert(platform, bulkhead);
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

    /// Build the gateway; with a ledger, also start the background task that writes its
    /// pending ledger rows.
    pub fn build(self) -> Gateway {
        let inner = Arc::new(Inner {
            policy: RetryPolicy::from_config(&self.link.retry),
            backoff: Backoff::from_config(&self.link.retry),
            budget_policy: RetryBudgetPolicy::from_config(&self.link.retry),
            clock: self.gates.clock(),
            link: self.link,
            gates: self.gates,
            bulkheads: self.bulkheads,
            missing_secrets: self.missing_secrets,
            fleet: self.fleet,
            store: self.store,
            worker_id: self.worker_id,
            clocks: self.clocks,
            breakers: Mutex::new(HashMap::new()),
            local_budget: Mutex::new(HashMap::new()),
            counters: Mutex::new(HashMap::new()),
            ledger: Mutex::new(HashMap::new()),
            stale_pending: Mutex::new(HashMap::new()),
            last_redis_warn: Mutex::new(None),
        });
        if inner.store.is_some() {
            ledger::spawn_ledger_flusher(Arc::downgrade(&inner));
        }
        Gateway { inner }
    }
}

impl Gateway {
    /// A builder with no platform, no fleet state and no ledger yet, and a fresh worker id.
    pub fn builder(link: LinkConfig, gates: Gates) -> GatewayBuilder {
        GatewayBuilder {
            link,
            gates,
            bulkheads: HashMap::new(),
            missing_secrets: HashMap::new(),
            fleet: None,
            store: None,
            worker_id: ulid::Ulid::new().to_string(),
            clocks: PlatformClocks::default(),
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
    ) -> Result<Gateway, crate::config::ClientSetupError> {
        let mut b = Gateway::builder(cfg.link.clone(), gates);
        for (&platform, pc) in &cfg.platforms {
            if let Some(missing) = pc.missing_secret() {
                tracing::warn!(%platform, variable = %missing.var, "{platform} client not built: {missing}");
                b = b.missing_secret(platform, missing.var);
                continue;
            }
            b = b.platform(pc.client(platform)?, pc);
        }
        if let Some(f) = fleet {
            b = b.fleet(f);
        }
        if let Some(s) = store {
            b = b.store(s);
        }
        Ok(b.build())
    }

    pub(crate) fn worker_id(&self) -> &str {
        &self.inner.worker_id
    }

    /// Where this gateway reads the time (its gates' clock).
    pub(crate) fn clock(&self) -> Clock {
        self.inner.clock
    }

    /// The platforms' clocks as this process's answers show them.
    pub(crate) fn platform_clocks(&self) -> PlatformClocks {
        self.inner.clocks.clone()
    }

    /// The leases that elect this process for a fleet's periodic duties: the fleet's when it
    /// shares state through Redis, else a process alone holds them all.
    pub(crate) fn leases(&self) -> std::sync::Arc<dyn super::lease::Leases> {
        match &self.inner.fleet {
            Some(fleet) => std::sync::Arc::new(fleet.clone()),
            None => std::sync::Arc::new(super::lease::AloneLeases),
        }
    }

    /// The platforms that have a client, sorted.
    pub fn platforms(&self) -> Vec<Platform> {
        let mut v: Vec<_> = self.inner.bulkheads.keys().copied().collect();
        v.sort();
        v
    }

    /// The read timeout of `api`'s class.
    pub(crate) fn read_timeout(&self, api: Api) -> Duration {
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
        let started = self.inner.clock.now();
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
        let took = crate::clock::elapsed_since(started);
        self.account(platform, api, ctx, &result, sends, took);
        result
    }
}
