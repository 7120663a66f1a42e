//! What the page shows, gathered from the ledger, the queue and the gates in one pass.

use super::DashboardError;
use crate::app::runtime::Runtime;
use crate::jobs::spec::JobSpec;
use crate::queue::LiveWorker;
use crate::store::{FailureReason, JobState};
use crate::throttle::Gates;
use serde::Serialize;
use std::time::Duration;

/// Jobs shown (the latest).
const JOBS: u32 = 20;
/// Failure reasons shown per job.
const REASONS: u32 = 3;
/// A consumer idle longer than this is not shown as a live worker.
const LIVE_WITHIN: Duration = Duration::from_secs(60);

#[derive(Debug, Serialize)]
pub(crate) struct DashboardState {
    mode: &'static str,
    ledger: String,
    jobs: Vec<JobView>,
    gates: Vec<GateView>,
    calls: Vec<CallsView>,
    workers: Vec<LiveWorker>,
    queue: QueueView,
    /// Shops paused because the platform refused their session.
    paused_shops: Vec<PausedShopView>,
    /// How many shops are served, and how their tokens fare.
    shops: ShopsView,
    /// Apps with a daily quota over all their APIs: booked today.
    apps: Vec<AppView>,
    /// Records set aside because they could not be read, per source.
    quarantined: Vec<(String, u64)>,
    /// Completion deliveries given up (a resend sends them again).
    hooks_failed: u64,
    /// Whether the token-protected actions are enabled.
    actions: bool,
}

#[derive(Debug, Serialize)]
struct AppView {
    platform: &'static str,
    quota: u64,
    booked: u64,
    burn: f64,
}

#[derive(Debug, Serialize)]
struct ShopsView {
    /// `[shops]` of the config.
    config: usize,
    /// Served from the ledger's directory.
    ledger: usize,
    /// Ledger shops whose last renewal failed.
    renewal_failing: usize,
    /// Whether this dashboard holds the token key (it can add shops).
    token_key: bool,
}

#[derive(Debug, Serialize)]
struct PausedShopView {
    platform: &'static str,
    shop: String,
    reason: String,
    /// Seconds since it was paused.
    paused_s: i64,
}

#[derive(Debug, Serialize)]
struct JobView {
    id: i64,
    kind: &'static str,
    /// `platform/shop` the job works for ("-" when its spec does not read).
    shop: String,
    lane: &'static str,
    state: &'static str,
    total: u64,
    pending: u64,
    done: u64,
    stale: u64,
    failed: u64,
    skipped: u64,
    cancelled: u64,
    percent: f64,
    rate_per_sec: f64,
    eta_s: Option<u64>,
    failures: Vec<FailureReason>,
}

#[derive(Debug, Serialize)]
struct GateView {
    platform: &'static str,
    api: &'static str,
    rate: f64,
    burst: f64,
    overridden: bool,
    adaptive_rate: f64,
    ceiling: Option<f64>,
    paused_s: Option<f64>,
    pause_reason: Option<String>,
    used_today: u64,
    daily_quota: Option<u64>,
    burn: Option<f64>,
    /// `spend` or `even` (bulk work paced over the day).
    pacing: &'static str,
    /// Part of the rate and daily quota kept for interactive work.
    interactive_share: f64,
}

#[derive(Debug, Serialize)]
struct CallsView {
    platform: &'static str,
    api: &'static str,
    calls: u64,
    useful: u64,
    /// Enough calls to judge, too few useful (`ApiCalls::wasteful`).
    wasteful: bool,
}

#[derive(Debug, Serialize, Default)]
struct QueueView {
    ready: u64,
    in_flight: u64,
    delayed: u64,
    dead: u64,
    /// Items failed as dead letters in the ledger, all jobs.
    dead_items: u64,
    error: Option<String>,
}

pub(crate) async fn collect(
    rt: &Runtime,
    gates: &Gates,
    actions: bool,
    token_key: bool,
    finished: &mut crate::store::FinishedSummaries,
) -> Result<DashboardState, DashboardError> {
    let store = &rt.store;
    let now = crate::clock::Clock::system().utc();
    let mut jobs = Vec::new();
    for j in store.list_jobs_reusing(JOBS, finished).await? {
        // A finished job's counts and rate are in its summary; only a running job needs its
        // last minute read (rate, ETA).
        let (rate_per_sec, eta_s) = match j.state {
            JobState::Finished => (j.rate_per_sec(0, now), Some(0)),
            JobState::Running => {
                let status = store.job_status(j.id).await?;
                (status.rate_per_sec, status.eta().map(|d| d.as_secs()))
            }
        };
        let failures = if j.counts.failed > 0 {
            store.failure_reasons(j.id, REASONS).await?
        } else {
            Vec::new()
        };
        let spec = JobSpec::stored(store, j.id).await?;
        jobs.push(JobView {
            id: j.id,
            kind: j.kind.as_str(),
            shop: spec
                .as_ref()
                .map_or_else(|| "-".into(), JobSpec::shop_label),
            lane: spec.as_ref().map_or("-", |s| s.lane().as_str()),
            state: j.state_label(),
            total: j.total,
            pending: j.counts.pending,
            done: j.counts.done,
            stale: j.counts.stale,
            failed: j.counts.failed,
            skipped: j.counts.skipped,
            cancelled: j.counts.cancelled,
            percent: j.percent(),
            rate_per_sec,
            eta_s,
            failures,
        });
    }
    let today = crate::time::platform_day(now);
    let report = store.report_calls_for_day(today).await?;
    // Gates worth a look: the ones called today, paused or overridden.
    let apps = match gates.app_days().await {
        Ok(all) => all
            .into_iter()
            .map(|a| AppView {
                platform: a.platform.as_str(),
                quota: a.quota,
                booked: a.booked,
                burn: a.burn,
            })
            .collect(),
        Err(e) => {
            tracing::warn!(error = %e, "app quota unreadable");
            Vec::new()
        }
    };
    let gates: Vec<GateView> = match gates.snapshot().await {
        Ok(all) => all
            .into_iter()
            .filter(|g| {
                g.used_today > 0
                    || g.pause.is_some()
                    || g.overridden
                    || report.calls_of(g.platform, g.api) > 0
            })
            .map(|g| GateView {
                platform: g.platform.as_str(),
                api: g.api.as_str(),
                rate: g.limits.rate,
                burst: g.limits.burst,
                overridden: g.overridden,
                adaptive_rate: g.adaptive_rate,
                ceiling: g.ceiling,
                paused_s: g.pause.as_ref().map(|p| p.0.as_secs_f64()),
                pause_reason: g.pause.map(|p| p.1),
                used_today: g.used_today.max(report.calls_of(g.platform, g.api)),
                daily_quota: g.daily_quota,
                burn: g.burn,
                pacing: rt.cfg.gate(g.platform, g.api).pacing.as_str(),
                interactive_share: rt.cfg.gate(g.platform, g.api).interactive_share,
            })
            .collect(),
        Err(e) => {
            tracing::warn!(error = %e, "gate snapshot failed");
            Vec::new()
        }
    };
    // The calls ledger is written in batches (every 2 s per worker); the gate's counter is
    // live. Calls today are the larger of the two, so the table agrees with the gates.
    let calls: Vec<CallsView> = report
        .by_api
        .iter()
        .map(|a| CallsView {
            platform: a.platform.as_str(),
            api: a.api.as_str(),
            calls: gates
                .iter()
                .find(|g| g.platform == a.platform.as_str() && g.api == a.api.as_str())
                .map_or(a.calls, |g| g.used_today.max(a.calls)),
            useful: a.useful,
            wasteful: a.wasteful(),
        })
        .collect();
    let mut queue = match rt.queue.len().await {
        Ok(l) => QueueView {
            ready: l.ready,
            in_flight: l.in_flight,
            delayed: l.delayed,
            dead: l.dead,
            ..QueueView::default()
        },
        Err(e) => QueueView {
            error: Some(e.to_string()),
            ..QueueView::default()
        },
    };
    queue.dead_items = store.dead_item_counts().await?.iter().map(|(_, n)| n).sum();
    let workers = rt.queue.workers(LIVE_WITHIN).await.unwrap_or_default();
    let paused_shops = store
        .shop_pauses()
        .await?
        .into_iter()
        .map(|p| PausedShopView {
            platform: p.platform.as_str(),
            shop: p.shop,
            reason: p.reason,
            paused_s: (now - p.paused_at).num_seconds().max(0),
        })
        .collect();
    Ok(DashboardState {
        mode: rt.topology.name(),
        ledger: store.db_name().to_string(),
        jobs,
        gates,
        calls,
        workers,
        queue,
        paused_shops,
        shops: {
            let ledger = store.ledger_shops().await?;
            let served: Vec<_> = ledger.iter().filter(|s| s.removed_at.is_none()).collect();
            ShopsView {
                config: rt.cfg.shops().count(),
                ledger: served.len(),
                renewal_failing: served.iter().filter(|s| s.token_error.is_some()).count(),
                token_key,
            }
        },
        apps,
        quarantined: store.quarantine_counts().await?,
        hooks_failed: store.failed_hook_count().await?,
        actions,
    })
}
