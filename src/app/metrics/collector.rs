//! The collector: gauges from the state APIs (gates, breakers, link counters, queue lengths,
//! the ledger's jobs), once a second.

use crate::clock::{elapsed_since, monotonic_now};
use crate::config::Config;
use crate::link::breaker::State as BreakerState;
use crate::link::gateway::Gateway;
use crate::metric_names::{
    APP_BURN, APP_QUOTA, APP_QUOTA_BOOKED, BREAKER_STATE, COLLECT_DURATION, COLLECT_ERRORS,
    GATE_ADAPTIVE_RATE, GATE_BURN, GATE_BURST, GATE_CEILING, GATE_PAUSED, GATE_QUOTA,
    GATE_QUOTA_USED, GATE_RATE, GATE_UPPER, ITEMS_FINISHED, ITEMS_PENDING, JOBS_RUNNING,
    LOGICAL_CALLS, LOG_DROPPED, QUEUE_TASKS, RETRY_BUDGET_RATIO, SHOP_PAUSED,
};
use crate::platform::Api;
use crate::queue::Queue;
use crate::store::{JobState, StatusCounts, Store};
use crate::throttle::Gates;
use metrics_exporter_prometheus::PrometheusHandle;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the collector refreshes the gauges.
pub(crate) const COLLECT_EVERY: Duration = Duration::from_secs(1);

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
    /// Shops reported paused at the last refresh (set back to 0 once resumed).
    paused_shops: std::collections::HashSet<(String, String)>,
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
    if last_warn.is_none_or(|t| elapsed_since(t) > Duration::from_secs(60)) {
        *last_warn = Some(monotonic_now());
        tracing::warn!("metrics collector: cannot read the {source}: {e}");
    }
}

impl Collector {
    async fn tick(&mut self, s: &Sources, last_warn: &mut Option<Instant>) {
        let started = monotonic_now();
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
        metrics::counter!(LOG_DROPPED).absolute(crate::app::logging::dropped_lines());
        metrics::gauge!(COLLECT_DURATION).set(elapsed_since(started).as_secs_f64());
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
            metrics::gauge!(GATE_UPPER, &labels).set(g.upper.unwrap_or(0.0));
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
        match s.gates.app_days().await {
            Ok(apps) => {
                for a in apps {
                    let labels = [("platform", a.platform.as_str())];
                    metrics::gauge!(APP_QUOTA, &labels).set(a.quota as f64);
                    metrics::gauge!(APP_QUOTA_BOOKED, &labels).set(a.booked as f64);
                    metrics::gauge!(APP_BURN, &labels).set(a.burn);
                }
            }
            Err(e) => collect_error("gates", &e, last_warn),
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
        for status in ["done", "stale", "failed", "skipped", "cancelled"] {
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
                ("cancelled", now.cancelled, before.cancelled),
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
                kept.cancelled = kept.cancelled.max(now.cancelled);
            }
        }
        metrics::gauge!(JOBS_RUNNING).set(running.len() as f64);
        metrics::gauge!(ITEMS_PENDING).set(pending as f64);
        let paused: std::collections::HashSet<(String, String)> = store
            .shop_pauses()
            .await?
            .into_iter()
            .map(|p| (p.platform.as_str().to_string(), p.shop))
            .collect();
        for (platform, shop) in self.paused_shops.union(&paused) {
            let v = if paused.contains(&(platform.clone(), shop.clone())) {
                1.0
            } else {
                0.0
            };
            metrics::gauge!(SHOP_PAUSED, "platform" => platform.clone(), "shop" => shop.clone())
                .set(v);
        }
        self.paused_shops = paused;
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
