//! Schedules at work: every worker looks at the schedules every `[jobs] schedule_check_ms`,
//! settles the runs whose job finished (moving the shop's watermark), starts a queued run
//! whose schedule has nothing running, and decides the due ticks ([`TickPolicy`]) (docs/design.md,
//! "Continuous sync"). Each of those is one compare-and-set transaction in the ledger, so any
//! number of workers can look at once and each tick is decided once: no lease, and no tick
//! waits for a particular worker to be up.
//!
//! An order run reads `[watermark - overlap, now)` in slices of `[jobs] sync_slice_s` and
//! covers (moves the watermark to) `now - lag`, at most `[jobs] sync_catch_up_max_s` of it
//! per run ([`WindowRule`]);
//! its job is created in the transaction that decides its tick, and its tasks are pushed after
//! the commit (a push lost to a crash is pushed again by the self-healing queue).

use super::order_window::{window_clock, WindowRule, CLOCK_AHEAD_WARN_MS};
use super::orders::slices;
use super::producer::{chunk_tasks, ProducerError, Share};
use super::spec::JobSpec;
use super::tick::{Decision, TickPolicy};
use crate::clock::Clock;
use crate::config::Config;
use crate::platform::clock::PlatformClocks;
use crate::queue::Queue;
use crate::shutdown::Shutdown;
use crate::store::{JobKind, RunOutcome, Schedule, StartRun, Store};
use chrono::{DateTime, Utc};
use std::time::Duration;

/// What one look at the schedules did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Looked {
    /// Runs settled (covered or failed).
    pub(crate) settled: usize,
    /// Runs started (their jobs created and pushed).
    pub(crate) started: Vec<i64>,
    /// Ticks recorded without a run (skipped, queued, missed).
    pub(crate) recorded: usize,
}

/// Look at the schedules once.
pub(crate) async fn look_once(
    store: &Store,
    queue: &Queue,
    cfg: &Config,
    clocks: &PlatformClocks,
    host: Clock,
) -> Result<Looked, ProducerError> {
    let mut looked = Looked::default();
    for (schedule, run) in store.finished_runs().await? {
        if let Some(outcome) = store.settle_run(&schedule, &run).await? {
            looked.settled += 1;
            tracing::info!(
                schedule = schedule.id,
                shop = %schedule.shop,
                job = run.job_id,
                outcome = %outcome,
                "scheduled run settled"
            );
        }
    }
    let now = store.clock_ms().await?;
    for schedule in store.due_schedules(now).await? {
        let (running, queued) = store.open_runs(schedule.id).await?;
        let policy = TickPolicy {
            every_ms: i64::try_from(schedule.every.as_millis()).unwrap_or(i64::MAX),
            catch_up: schedule.catch_up,
            on_overlap: schedule.on_overlap,
        };
        let Some(plan) = policy.plan(schedule.next_tick_ms, now, running, queued.is_some()) else {
            continue;
        };
        let mut decided = Vec::new();
        let mut start = None;
        for (tick, decision) in plan.ticks {
            match decision {
                Decision::Start => {
                    match build_run(store, cfg, clocks, host, &schedule, tick, now).await? {
                        Some(run) => start = Some(run),
                        None => decided.push((
                            tick,
                            RunOutcome::Skipped,
                            Some("nothing new to cover".to_string()),
                        )),
                    }
                }
                Decision::Record(outcome, note) => decided.push((tick, outcome, Some(note))),
            }
        }
        let result = store
            .decide_ticks(
                schedule.id,
                schedule.next_tick_ms,
                plan.next_tick_ms,
                &decided,
                start.as_ref(),
                schedule.kind,
            )
            .await?;
        // `None`: another worker decided these ticks first.
        if let Some(job) = result {
            looked.recorded += decided.len();
            if let (Some(job), Some(run)) = (job, &start) {
                push(queue, cfg, &schedule, job, &run.keys).await?;
                looked.started.push(job);
            }
        }
    }
    for (schedule, tick) in store.queued_runs_ready().await? {
        let now = store.clock_ms().await?;
        let Some(run) = build_run(store, cfg, clocks, host, &schedule, tick, now).await? else {
            continue;
        };
        if let Some(job) = store.start_queued(schedule.id, &run, schedule.kind).await? {
            push(queue, cfg, &schedule, job, &run.keys).await?;
            looked.started.push(job);
        }
    }
    Ok(looked)
}

/// Push the tasks of a scheduled run's job, in its shop's turn.
async fn push(
    queue: &Queue,
    cfg: &Config,
    schedule: &Schedule,
    job_id: i64,
    keys: &[String],
) -> Result<(), ProducerError> {
    let share = Share {
        shop: schedule.shop.clone(),
        lane: schedule.lane.parse().unwrap_or_default(),
    };
    let tasks = chunk_tasks(job_id, schedule.kind, &share, keys, cfg.queue.chunk_size);
    queue
        .push_bulk(&tasks)
        .await
        .map_err(|error| ProducerError::Push {
            job_id,
            pushed: 0,
            error,
        })?;
    tracing::info!(
        schedule = schedule.id,
        shop = %schedule.shop,
        job = job_id,
        items = keys.len(),
        "scheduled run started"
    );
    Ok(())
}

/// The run of `schedule`'s tick at `tick_ms`, decided at `now_ms`; `None` when there is
/// nothing to cover (the window is empty, or no shipped order is due a logistics query).
async fn build_run(
    store: &Store,
    cfg: &Config,
    clocks: &PlatformClocks,
    host: Clock,
    schedule: &Schedule,
    tick_ms: i64,
    now_ms: i64,
) -> Result<Option<StartRun>, ProducerError> {
    let lane = schedule.lane.parse().unwrap_or_default();
    let (spec, keys, window_ms) = match schedule.kind {
        JobKind::Orders => {
            let rule = window_rule(cfg, schedule);
            let watermark = store.watermark(schedule.platform, &schedule.shop).await?;
            if let Some(w) = watermark {
                watch_watermark(&rule, schedule, w, now_ms);
            }
            // The run reads up to now and vouches for up to now - lag: what the platform may
            // still be indexing is read if it shows and read again by the next run (the
            // watermark stays behind it), and a change in the last `lag` seconds is not left
            // for a whole period. A shop far behind catches up in runs of bounded size.
            let host_ms = host.utc().timestamp_millis();
            let clock = window_clock(
                now_ms,
                host_ms,
                clocks.ahead_at_least_ms(schedule.platform, host_ms),
            );
            if clock.ledger_ahead > CLOCK_AHEAD_WARN_MS {
                tracing::warn!(
                    schedule = schedule.id,
                    ahead_ms = clock.ledger_ahead,
                    "the ledger's clock is ahead of this host's: order windows are decided on \
                     the host's (keep both in time with NTP)"
                );
            }
            if clock.host_ahead > CLOCK_AHEAD_WARN_MS {
                tracing::warn!(
                    schedule = schedule.id,
                    platform = %schedule.platform,
                    ahead_ms = clock.host_ahead,
                    "this host's clock is ahead of the platform's (its answers' Date): order \
                     windows are decided on the platform's (keep this host in time with NTP)"
                );
            }
            let window_now = clock.now;
            let Some(window) = rule.window(watermark, window_now) else {
                return Ok(None);
            };
            let (since, until) = (at(window.since), at(window.until));
            let slice = Duration::from_secs(
                cfg.jobs
                    .sync_slice_s
                    .clamp(1, cfg.jobs.order_slice_s.max(1)),
            );
            let keys = slices(since, until, slice);
            let spec = JobSpec::Orders {
                platform: schedule.platform,
                shop: schedule.shop.clone(),
                since,
                until,
                lane,
            };
            (spec, keys, Some((window.since, window.vouched)))
        }
        JobKind::Logistics => {
            let min = Duration::from_secs(cfg.jobs.logistics_min_interval_s);
            let keys = store
                .logistics_candidates(schedule.platform, &schedule.shop, min)
                .await?;
            let spec = JobSpec::Logistics {
                platform: schedule.platform,
                shop: schedule.shop.clone(),
                lane,
            };
            (spec, keys, None)
        }
        JobKind::Listing => return Ok(None),
    };
    if keys.is_empty() {
        return Ok(None);
    }
    Ok(Some(StartRun {
        tick_ms,
        spec_json: serde_json::to_string(&spec)?,
        keys,
        window_ms,
    }))
}

/// The order window's rule for `schedule` under this worker's `[jobs]`.
fn window_rule(cfg: &Config, schedule: &Schedule) -> WindowRule {
    let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    WindowRule {
        lag: ms(schedule.lag),
        overlap: ms(schedule.overlap),
        every: ms(schedule.every),
        catch_up_max: ms(Duration::from_secs(cfg.jobs.sync_catch_up_max_s)),
        stall_periods: i64::from(cfg.jobs.watermark_stall_periods),
    }
}

/// Publish how far the shop's watermark is behind, and warn while it is stalled.
fn watch_watermark(rule: &WindowRule, schedule: &Schedule, watermark: i64, now_ms: i64) {
    use crate::metric_names::{WATERMARK_BEHIND, WATERMARK_STALLED};
    let labels = [
        ("platform", schedule.platform.as_str().to_string()),
        ("shop", schedule.shop.clone()),
    ];
    let behind_s = rule.behind(watermark, now_ms) as f64 / 1000.0;
    metrics::gauge!(WATERMARK_BEHIND, &labels).set(behind_s);
    let stalled = rule.stalled(watermark, now_ms);
    metrics::gauge!(WATERMARK_STALLED, &labels).set(if stalled { 1.0 } else { 0.0 });
    if stalled {
        tracing::warn!(
            schedule = schedule.id,
            platform = %schedule.platform,
            shop = %schedule.shop,
            behind_s = behind_s.round(),
            "the shop's order watermark has not kept up: its runs are failing, paused or \
             catching up (`syncfleet schedule list`, `syncfleet quarantine`)"
        );
    }
}

fn at(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

/// Look at the schedules every `every` until `shutdown`. A failed look is logged; the next
/// one tries again (every decision is a transaction: a failed one left nothing half done).
pub(crate) async fn run_schedule_loop(
    store: Store,
    queue: Queue,
    cfg: std::sync::Arc<Config>,
    clocks: PlatformClocks,
    host: Clock,
    every: Duration,
    shutdown: Shutdown,
) {
    let mut rounds = shutdown.every(every);
    while rounds.next().await {
        if let Err(e) = look_once(&store, &queue, &cfg, &clocks, host).await {
            tracing::warn!("schedules not looked at this round (the next one tries again): {e}");
        }
    }
}
