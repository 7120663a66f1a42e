//! Prometheus metrics of a worker (issue 11): `syncfleet work --metrics-listen ADDR`.
//!
//! Two sources, neither on the call path:
//! - [`MetricsLayer`], a `tracing` layer, turns the events the gateway already emits for every
//!   request on the wire (`syncfleet::call`), every local refusal (`syncfleet::refusal`) and
//!   every stale answer (`syncfleet::stale`) into counters and the latency histogram. The call
//!   path stays as it is: the link layer does not know metrics exist.
//! - A collector task reads the state APIs once a second (gates, breakers, link counters,
//!   queue lengths, the ledger's jobs) and sets gauges.
//!
//! Names follow the Prometheus conventions: `syncfleet_` prefix, counters end in `_total`,
//! durations are `_seconds`, and labels are bounded sets (platform, api, class, reason,
//! status, state): never an item or job id. Values that are not a known label value are
//! exported as `other`, so a new spelling cannot grow the series count.
//!
//! The exporter crate renders the text; [`serve`] serves it from a small axum route rather
//! than the exporter's own HTTP listener: axum/hyper are already in the binary (the exporter's
//! listener would add a second HTTP server stack), and the route's task is ours to stop with
//! the worker and to report a bind failure as the operator's error before any work starts.

use crate::config::Config;
use crate::jobs::queue::Queue;
use crate::link::breaker::State as BreakerState;
use crate::link::gateway::{Gateway, CALL_TARGET, REFUSAL_TARGET, STALE_TARGET};
use crate::platform::{Api, Platform};
use crate::store::{JobState, StatusCounts, Store};
use crate::throttle::Gates;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Context, Layer};

/// Requests on the wire, by platform, api and class (ok, retry, slow, fatal, unknown).
pub(crate) const PLATFORM_CALLS: &str = "syncfleet_platform_calls_total";
/// Requests on the wire that repeated an earlier request of the same logical call.
pub(crate) const PLATFORM_RETRIES: &str = "syncfleet_platform_retries_total";
/// HTTP time of one request, per gate (platform, api).
pub(crate) const CALL_DURATION: &str = "syncfleet_call_duration_seconds";
/// Logical calls refused before anything went on the wire, by reason.
pub(crate) const REFUSALS: &str = "syncfleet_refusals_total";
/// Reads answered from the stale cache.
pub(crate) const STALE_ANSWERS: &str = "syncfleet_stale_answers_total";
/// Logical calls of this process by outcome (ok, stale, caller_error, failed).
pub(crate) const LOGICAL_CALLS: &str = "syncfleet_logical_calls_total";
/// Gate state.
pub(crate) const GATE_RATE: &str = "syncfleet_gate_rate";
pub(crate) const GATE_BURST: &str = "syncfleet_gate_burst";
pub(crate) const GATE_ADAPTIVE_RATE: &str = "syncfleet_gate_adaptive_rate";
pub(crate) const GATE_CEILING: &str = "syncfleet_gate_ceiling_rate";
pub(crate) const GATE_PAUSED: &str = "syncfleet_gate_paused_seconds";
pub(crate) const GATE_QUOTA_USED: &str = "syncfleet_gate_quota_used";
pub(crate) const GATE_QUOTA: &str = "syncfleet_gate_daily_quota";
pub(crate) const GATE_BURN: &str = "syncfleet_gate_burn_ratio";
/// 0 closed, 1 half-open, 2 open.
pub(crate) const BREAKER_STATE: &str = "syncfleet_breaker_state";
/// The configured retry budget: retries may be at most this share of logical calls.
pub(crate) const RETRY_BUDGET_RATIO: &str = "syncfleet_retry_budget_ratio";
/// Queue depth by state (ready, delayed, in_flight, dead).
pub(crate) const QUEUE_TASKS: &str = "syncfleet_queue_tasks";
pub(crate) const JOBS_RUNNING: &str = "syncfleet_jobs_running";
pub(crate) const ITEMS_PENDING: &str = "syncfleet_items_pending";
pub(crate) const ITEMS_FINISHED: &str = "syncfleet_items_finished_total";
/// A no-op write transaction on the ledger, timed by the collector.
pub(crate) const LEDGER_WRITE: &str = "syncfleet_ledger_write_duration_seconds";
pub(crate) const LOG_DROPPED: &str = "syncfleet_log_lines_dropped_total";
pub(crate) const COLLECT_ERRORS: &str = "syncfleet_metrics_collect_errors_total";
pub(crate) const COLLECT_DURATION: &str = "syncfleet_metrics_collect_duration_seconds";

/// Histogram buckets of one platform request (s): simulator calls take about 1 ms, real ones
/// 20 ms to a few seconds, and the longest read timeout is 15 s.
const CALL_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0,
];
/// Histogram buckets of a ledger write (s): an uncontended SQLite commit is well under a
/// millisecond; seconds mean the writers queue behind each other.
const LEDGER_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// How often the collector refreshes the gauges.
pub(crate) const COLLECT_EVERY: Duration = Duration::from_secs(1);

/// Why metrics could not be started.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("--metrics-listen {addr}: cannot listen: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("metrics exporter: {0}")]
    Build(#[from] metrics_exporter_prometheus::BuildError),
}

impl MetricsError {
    /// A bad or busy address is the operator's to fix (exit 2); the rest is ours.
    pub(crate) fn is_input_error(&self) -> bool {
        matches!(self, MetricsError::Bind { .. })
    }
}

impl From<MetricsError> for crate::cli::CliError {
    fn from(e: MetricsError) -> Self {
        if e.is_input_error() {
            crate::cli::CliError::input(e.to_string())
        } else {
            crate::cli::CliError::runtime(e.to_string())
        }
    }
}

/// Whether the command line asks for metrics: the logging setup then adds [`MetricsLayer`].
pub fn wanted(command: &crate::cli::Command) -> bool {
    match command {
        crate::cli::Command::Work(a) => a.metrics_listen.is_some(),
        crate::cli::Command::Demo(a) => a.metrics_listen.is_some(),
        _ => false,
    }
}

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
static INSTALL: Mutex<()> = Mutex::new(());

/// Install the Prometheus recorder as the process's `metrics` recorder (once; later calls
/// return the same handle) and describe every metric.
pub(crate) fn install() -> Result<PrometheusHandle, MetricsError> {
    let _once = INSTALL.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(h) = HANDLE.get() {
        return Ok(h.clone());
    }
    // Histograms with buckets render as Prometheus histograms (aggregatable across workers);
    // without, the exporter would render per-process summaries.
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Full(CALL_DURATION.into()), CALL_BUCKETS)?
        .set_buckets_for_metric(Matcher::Full(LEDGER_WRITE.into()), LEDGER_BUCKETS)?
        .build_recorder();
    let handle = recorder.handle();
    if metrics::set_global_recorder(recorder).is_err() {
        // Another recorder owns the process (an embedding program): our handle then renders
        // nothing, which the scrape shows plainly rather than failing the worker.
        tracing::warn!("a metrics recorder is already installed: /metrics stays empty");
    }
    describe();
    let _ = HANDLE.set(handle.clone());
    Ok(handle)
}

fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!(
        PLATFORM_CALLS,
        "Requests that went on the wire, by platform, api and class (ok, retry, slow, fatal, unknown)"
    );
    describe_counter!(
        PLATFORM_RETRIES,
        "Requests on the wire that repeated an earlier request of the same logical call"
    );
    describe_histogram!(
        CALL_DURATION,
        Unit::Seconds,
        "Time of one request on the wire, per gate (platform, api)"
    );
    describe_counter!(
        REFUSALS,
        "Logical calls refused locally before anything went on the wire, by reason"
    );
    describe_counter!(STALE_ANSWERS, "Reads answered from the stale cache");
    describe_counter!(
        LOGICAL_CALLS,
        "Logical calls of this process by outcome (ok, stale, caller_error, failed)"
    );
    describe_gauge!(
        GATE_RATE,
        "Gate rate in force (calls/s): the operator's override or the config"
    );
    describe_gauge!(GATE_BURST, "Gate burst in force (calls)");
    describe_gauge!(
        GATE_ADAPTIVE_RATE,
        "Adaptive (AIMD) rate of the gate (calls/s), never above the rate in force"
    );
    describe_gauge!(
        GATE_CEILING,
        "Remembered rate at which the platform's limit was hit (calls/s); 0 when none"
    );
    describe_gauge!(
        GATE_PAUSED,
        Unit::Seconds,
        "Seconds left of the gate's pause (ban, spent quota); 0 when not paused"
    );
    describe_gauge!(
        GATE_QUOTA_USED,
        "Calls counted against today's quota (GMT+8 day), failed ones included"
    );
    describe_gauge!(GATE_QUOTA, "Daily quota of the gate, when configured");
    describe_gauge!(
        GATE_BURN,
        "(quota used / daily quota) / fraction of the GMT+8 day elapsed; > 1.3 will not last the day"
    );
    describe_gauge!(
        BREAKER_STATE,
        "Breaker of (platform, api) in this process: 0 closed, 1 half-open, 2 open"
    );
    describe_gauge!(
        RETRY_BUDGET_RATIO,
        "Configured retry budget: retries at most this share of logical calls per window"
    );
    describe_gauge!(
        QUEUE_TASKS,
        "Tasks in the queue by state (ready, delayed, in_flight, dead); fleet-wide"
    );
    describe_gauge!(JOBS_RUNNING, "Jobs running in the ledger; fleet-wide");
    describe_gauge!(
        ITEMS_PENDING,
        "Pending items of the running jobs in the ledger; fleet-wide"
    );
    describe_counter!(
        ITEMS_FINISHED,
        "Items that reached a terminal status in the ledger (done, stale, failed, skipped) while this process watched; fleet-wide"
    );
    describe_histogram!(
        LEDGER_WRITE,
        Unit::Seconds,
        "A no-op write transaction on the ledger timed every second: the wait for the write lock plus commit"
    );
    describe_counter!(
        LOG_DROPPED,
        "Log lines dropped because stderr could not keep up (the writer never blocks workers)"
    );
    describe_counter!(
        COLLECT_ERRORS,
        "Failed reads of the metrics collector, by source (gates, queue, ledger)"
    );
    describe_gauge!(
        COLLECT_DURATION,
        Unit::Seconds,
        "Time of the collector's last refresh"
    );
}

// ---------------------------------------------------------------------------------------
// The tracing layer: counters from the gateway's events.

/// The filter of [`MetricsLayer`]: only the gateway's call, refusal and stale events, at
/// info. It is a per-layer filter, so `RUST_LOG=warn` keeps those lines out of the log and
/// the metrics still see them.
pub(crate) fn event_filter() -> Targets {
    Targets::new()
        .with_target(CALL_TARGET, Level::INFO)
        .with_target(REFUSAL_TARGET, Level::INFO)
        .with_target(STALE_TARGET, Level::INFO)
}

/// Counts the gateway's `syncfleet::call`, `syncfleet::refusal` and `syncfleet::stale`
/// events (install with [`event_filter`]).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct MetricsLayer;

/// The fields of a gateway event that metrics use.
#[derive(Debug, Default)]
struct EventFields {
    platform: &'static str,
    api: &'static str,
    class: &'static str,
    reason: &'static str,
    cost_ms: Option<u64>,
    retries: u64,
}

/// Classes of a call line (`ok` or an error class).
const CLASSES: &[&str] = &["ok", "retry", "slow", "fatal", "unknown"];
/// Reasons of a refusal: `LinkErrorKind::as_str` (the unit test keeps them in step).
const REASONS: &[&str] = &[
    "platform",
    "breaker_open",
    "budget_exhausted",
    "busy",
    "rate_wait",
    "paused",
    "retry_budget",
    "not_configured",
    "missing_secret",
];

/// `value` as one of the known label values, else `other`: labels stay a bounded set and
/// need no allocation.
fn bounded(value: &str, known: impl IntoIterator<Item = &'static str>) -> &'static str {
    known.into_iter().find(|k| *k == value).unwrap_or("other")
}

impl Visit for EventFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "platform" => self.platform = bounded(value, Platform::ALL.map(Platform::as_str)),
            "api" => self.api = bounded(value, Api::ALL.map(Api::as_str)),
            "class" => self.class = bounded(value, CLASSES.iter().copied()),
            "reason" => self.reason = bounded(value, REASONS.iter().copied()),
            _ => {}
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            "cost_ms" => self.cost_ms = Some(value),
            "retries" => self.retries = value,
            _ => {}
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.record_u64(field, u64::try_from(value).unwrap_or(0));
    }

    // Other fields (ts, trace_id, error, message) are Display/Debug values: ignoring them
    // here means they are never formatted for metrics.
    fn record_debug(&mut self, _field: &Field, _value: &dyn std::fmt::Debug) {}
}

impl<S: Subscriber> Layer<S> for MetricsLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let target = event.metadata().target();
        let mut f = EventFields {
            platform: "other",
            api: "other",
            class: "other",
            reason: "other",
            ..EventFields::default()
        };
        if target == CALL_TARGET {
            event.record(&mut f);
            let labels = [("platform", f.platform), ("api", f.api)];
            metrics::counter!(PLATFORM_CALLS, "platform" => f.platform, "api" => f.api, "class" => f.class)
                .increment(1);
            if f.retries > 0 {
                metrics::counter!(PLATFORM_RETRIES, &labels).increment(1);
            }
            if let Some(ms) = f.cost_ms {
                metrics::histogram!(CALL_DURATION, &labels).record(ms as f64 / 1000.0);
            }
        } else if target == REFUSAL_TARGET {
            event.record(&mut f);
            metrics::counter!(REFUSALS, "platform" => f.platform, "api" => f.api, "reason" => f.reason)
                .increment(1);
        } else if target == STALE_TARGET {
            event.record(&mut f);
            metrics::counter!(STALE_ANSWERS, "platform" => f.platform, "api" => f.api).increment(1);
        }
    }
}

// ---------------------------------------------------------------------------------------
// The collector: gauges from the state APIs, once a second.

/// What the collector reads. Clones of the worker's own handles (they share its state).
#[derive(Clone)]
pub(crate) struct Sources {
    pub(crate) cfg: Arc<Config>,
    pub(crate) gates: Gates,
    pub(crate) gateway: Gateway,
    pub(crate) queue: Queue,
    pub(crate) store: Store,
}

/// Terminal counts of the jobs the collector watches (to turn ledger totals into counters).
#[derive(Default)]
struct Collector {
    seen: HashMap<i64, StatusCounts>,
}

fn breaker_value(s: &BreakerState) -> f64 {
    match s {
        BreakerState::Closed => 0.0,
        BreakerState::HalfOpen { .. } => 1.0,
        BreakerState::Open { .. } => 2.0,
    }
}

fn collect_error(source: &'static str, e: &dyn std::fmt::Display, last_warn: &mut Option<Instant>) {
    metrics::counter!(COLLECT_ERRORS, "source" => source).increment(1);
    // One line a minute at most: a Redis outage must not flood the log from here too.
    if last_warn.is_none_or(|t| t.elapsed() > Duration::from_secs(60)) {
        *last_warn = Some(Instant::now());
        tracing::warn!("metrics collector: cannot read the {source}: {e}");
    }
}

impl Collector {
    async fn tick(&mut self, s: &Sources, last_warn: &mut Option<Instant>) {
        let started = Instant::now();
        self.gates(s, last_warn).await;
        self.link(s);
        match s.queue.len().await {
            Ok(q) => {
                for (state, n) in [
                    ("ready", q.ready),
                    ("delayed", q.delayed),
                    ("in_flight", q.in_flight),
                    ("dead", q.dead),
                ] {
                    metrics::gauge!(QUEUE_TASKS, "state" => state).set(n as f64);
                }
            }
            Err(e) => collect_error("queue", &e, last_warn),
        }
        if let Err(e) = self.jobs(&s.store).await {
            collect_error("ledger", &e, last_warn);
        }
        // Ledger write latency is recorded by the writes themselves (`jobs::runner::
        // ledger_write`): probing with a write of its own every second would take SQLite's
        // single write lock from the workers it measures.
        metrics::counter!(LOG_DROPPED).absolute(crate::logging::dropped_lines());
        metrics::gauge!(COLLECT_DURATION).set(started.elapsed().as_secs_f64());
    }

    async fn gates(&self, s: &Sources, last_warn: &mut Option<Instant>) {
        let snaps = match s.gates.snapshot().await {
            Ok(v) => v,
            Err(e) => return collect_error("gates", &e, last_warn),
        };
        for g in snaps {
            let labels = [("platform", g.platform.as_str()), ("api", g.api.as_str())];
            metrics::gauge!(GATE_RATE, &labels).set(g.limits.rate);
            metrics::gauge!(GATE_BURST, &labels).set(g.limits.burst);
            metrics::gauge!(GATE_ADAPTIVE_RATE, &labels).set(g.adaptive_rate);
            metrics::gauge!(GATE_CEILING, &labels).set(g.ceiling.unwrap_or(0.0));
            metrics::gauge!(GATE_PAUSED, &labels)
                .set(g.pause.as_ref().map_or(0.0, |(d, _)| d.as_secs_f64()));
            metrics::gauge!(GATE_QUOTA_USED, &labels).set(g.used_today as f64);
            // Only gates with a daily quota have these: an absent series says "no quota"
            // where a 0 would read as "nothing allowed".
            if let Some(q) = g.daily_quota {
                metrics::gauge!(GATE_QUOTA, &labels).set(q as f64);
            }
            if let Some(b) = g.burn {
                metrics::gauge!(GATE_BURN, &labels).set(b);
            }
        }
    }

    fn link(&self, s: &Sources) {
        for p in s.gateway.platforms() {
            for a in Api::ALL {
                let state = s.gateway.breaker_state(p, a);
                metrics::gauge!(BREAKER_STATE, "platform" => p.as_str(), "api" => a.as_str())
                    .set(breaker_value(&state));
            }
        }
        // The gateway keeps these as process-lifetime totals: `absolute` exports them as
        // counters without a second count on the call path.
        for (p, a, c) in s.gateway.snapshot().per_api {
            for (outcome, n) in [
                ("ok", c.ok),
                ("stale", c.stale),
                ("caller_error", c.caller_errors),
                ("failed", c.failed),
            ] {
                metrics::counter!(LOGICAL_CALLS, "platform" => p.as_str(), "api" => a.as_str(), "outcome" => outcome)
                    .absolute(n);
            }
        }
        metrics::gauge!(RETRY_BUDGET_RATIO).set(s.cfg.link.retry.budget_ratio);
    }

    /// Running jobs: pending items as a gauge, newly terminal items into the counter. A job
    /// first seen counts every item already terminal (a counter that starts high is read
    /// correctly by `rate()`); a job that finished is read once more, then forgotten.
    async fn jobs(&mut self, store: &Store) -> Result<(), crate::store::StoreError> {
        let running: Vec<i64> = store
            .running_job_specs()
            .await?
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        let mut ids = running.clone();
        ids.extend(self.seen.keys().filter(|id| !running.contains(id)));
        let mut pending = 0u64;
        // Every status exists from the first refresh (at 0): an alert on "nothing finished in
        // 10 minutes" needs the series even when nothing ever finished.
        for status in ["done", "stale", "failed", "skipped"] {
            metrics::counter!(ITEMS_FINISHED, "status" => status).increment(0);
        }
        for id in ids {
            let status = match store.job_status(id).await {
                Ok(s) => s,
                // Deleted under us: forget it.
                Err(crate::store::StoreError::JobNotFound { .. }) => {
                    self.seen.remove(&id);
                    continue;
                }
                Err(e) => return Err(e),
            };
            let now = status.job.counts;
            let before = self.seen.get(&id).copied().unwrap_or_default();
            for (name, n, b) in [
                ("done", now.done, before.done),
                ("stale", now.stale, before.stale),
                ("failed", now.failed, before.failed),
                ("skipped", now.skipped, before.skipped),
            ] {
                // Counts only go up, except when an operator puts items back to pending
                // (`retry`, `dead --requeue`); those come back through here when they end.
                if n > b {
                    metrics::counter!(ITEMS_FINISHED, "status" => name).increment(n - b);
                }
            }
            if status.job.state == JobState::Finished {
                self.seen.remove(&id);
            } else {
                pending += now.pending;
                // Keep the highest terminal counts seen, so items retried and finished again
                // are counted again only above what was already counted.
                let kept = self.seen.entry(id).or_default();
                kept.done = kept.done.max(now.done);
                kept.stale = kept.stale.max(now.stale);
                kept.failed = kept.failed.max(now.failed);
                kept.skipped = kept.skipped.max(now.skipped);
            }
        }
        metrics::gauge!(JOBS_RUNNING).set(running.len() as f64);
        metrics::gauge!(ITEMS_PENDING).set(pending as f64);
        Ok(())
    }
}

/// Run the collector until aborted: every [`COLLECT_EVERY`], refresh the gauges and let the
/// exporter drain its histogram buckets.
pub(crate) async fn collect(sources: Sources, handle: PrometheusHandle) {
    let mut collector = Collector::default();
    let mut last_warn = None;
    let mut every = tokio::time::interval(COLLECT_EVERY);
    // After a slow tick (a Redis hiccup) carry on at the normal pace, no catch-up burst.
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        collector.tick(&sources, &mut last_warn).await;
        handle.run_upkeep();
    }
}

/// The running metrics endpoint and collector; both stop when this is dropped.
pub(crate) struct MetricsServer {
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Install the recorder, bind `addr`, and serve `GET /metrics` there while the collector
/// refreshes the gauges from `sources` every second. A bind failure is returned before
/// anything runs. Hold the returned value for as long as metrics should be served.
pub(crate) async fn serve(
    addr: SocketAddr,
    sources: Sources,
) -> Result<MetricsServer, MetricsError> {
    let handle = install()?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| MetricsError::Bind { addr, source })?;
    let local = listener
        .local_addr()
        .map_err(|source| MetricsError::Bind { addr, source })?;
    let render = handle.clone();
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let render = render.clone();
            async move {
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "text/plain; version=0.0.4; charset=utf-8",
                    )],
                    render.render(),
                )
            }
        }),
    );
    let server = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!("metrics endpoint stopped: {e}");
        }
    });
    let collector = tokio::spawn(collect(sources, handle));
    tracing::info!(%local, "metrics on http://{local}/metrics");
    Ok(MetricsServer {
        tasks: vec![server, collector],
    })
}

/// [`serve`] when `addr` is given; `None` (metrics off, the default) otherwise.
pub(crate) async fn serve_if(
    addr: Option<SocketAddr>,
    sources: impl FnOnce() -> Sources,
) -> Result<Option<MetricsServer>, MetricsError> {
    match addr {
        Some(addr) => serve(addr, sources()).await.map(Some),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::gateway::LinkErrorKind;

    #[test]
    fn refusal_reasons_are_the_link_error_kinds() {
        // An exhaustive match: a new kind fails to compile here until REASONS has it.
        let all = |k: LinkErrorKind| match k {
            LinkErrorKind::Platform
            | LinkErrorKind::BreakerOpen
            | LinkErrorKind::BudgetExhausted
            | LinkErrorKind::Busy
            | LinkErrorKind::RateWait
            | LinkErrorKind::Paused
            | LinkErrorKind::RetryBudget
            | LinkErrorKind::NotConfigured
            | LinkErrorKind::MissingSecret => k.as_str(),
        };
        for k in [
            LinkErrorKind::Platform,
            LinkErrorKind::BreakerOpen,
            LinkErrorKind::BudgetExhausted,
            LinkErrorKind::Busy,
            LinkErrorKind::RateWait,
            LinkErrorKind::Paused,
            LinkErrorKind::RetryBudget,
            LinkErrorKind::NotConfigured,
            LinkErrorKind::MissingSecret,
        ] {
            assert!(REASONS.contains(&all(k)), "{k:?} missing from REASONS");
        }
    }

    #[test]
    fn unknown_label_values_become_other() {
        assert_eq!(
            bounded("taobao", Platform::ALL.map(Platform::as_str)),
            "taobao"
        );
        assert_eq!(
            bounded("item 123", Platform::ALL.map(Platform::as_str)),
            "other"
        );
        assert_eq!(bounded("slow", CLASSES.iter().copied()), "slow");
    }

    #[test]
    fn call_events_become_counters_and_histogram() {
        use tracing_subscriber::layer::SubscriberExt;
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(CALL_DURATION.into()), CALL_BUCKETS)
            .expect("buckets")
            .build_recorder();
        let handle = recorder.handle();
        let subscriber =
            tracing_subscriber::registry().with(MetricsLayer.with_filter(event_filter()));
        metrics::with_local_recorder(&recorder, || {
            tracing::subscriber::with_default(subscriber, || {
                tracing::info!(target: "syncfleet::call", platform = "taobao", api = "item_add", ok = true, class = "ok", cost_ms = 12u64, retries = 0u64, "call");
                tracing::info!(target: "syncfleet::call", platform = "taobao", api = "item_add", ok = false, class = "retry", cost_ms = 3u64, retries = 1u64, "call");
                tracing::info!(target: "syncfleet::refusal", platform = "taobao", api = "item_add", reason = "paused", "refused");
                tracing::info!(target: "syncfleet::stale", platform = "alibaba", api = "item_get", "stale");
                tracing::info!(target: "syncfleet::other", platform = "taobao", "ignored");
            });
        });
        let text = handle.render();
        for line in [
            r#"syncfleet_platform_calls_total{platform="taobao",api="item_add",class="ok"} 1"#,
            r#"syncfleet_platform_calls_total{platform="taobao",api="item_add",class="retry"} 1"#,
            r#"syncfleet_platform_retries_total{platform="taobao",api="item_add"} 1"#,
            r#"syncfleet_refusals_total{platform="taobao",api="item_add",reason="paused"} 1"#,
            r#"syncfleet_stale_answers_total{platform="alibaba",api="item_get"} 1"#,
            r#"syncfleet_call_duration_seconds_count{platform="taobao",api="item_add"} 2"#,
            r#"syncfleet_call_duration_seconds_bucket{platform="taobao",api="item_add",le="0.005"} 1"#,
        ] {
            assert!(text.contains(line), "missing `{line}` in\n{text}");
        }
    }
}
