//! The read-only commands: `status` (a job's progress, or the latest jobs) and `report` (a
//! platform day's calls ledger with quota burn).

use crate::cli::{Cli, CliError};
use crate::config::Config;
use crate::jobs::producer;
use crate::jobs::spec::JobSpec;
use crate::queue::QueueOptions;
use crate::store::{JobState, ShopPause, Store};
use crate::time::{platform_day, QuotaDay};
use chrono::NaiveDate;
use clap::Args;
use std::time::Duration;

/// Arguments of `syncfleet status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The job; without it, the latest jobs.
    pub(crate) job: Option<i64>,
    /// Refresh every 2 s until the job finishes.
    #[arg(long)]
    pub(crate) follow: bool,
}

async fn open_store(cli: &Cli) -> Result<Store, CliError> {
    let store = Store::connect_existing(&cli.db).await.map_err(|e| {
        if e.is_input_error() {
            CliError::input(e.to_string())
        } else {
            CliError::runtime(e.to_string())
        }
    })?;
    store
        .migrate()
        .await
        .map_err(|e| CliError::runtime(e.to_string()))?;
    Ok(store)
}

fn fmt_eta(eta: Option<Duration>) -> String {
    match eta {
        Some(d) if d.is_zero() => "-".into(),
        Some(d) => {
            let s = d.as_secs();
            format!("{}h{:02}m{:02}s", s / 3600, s / 60 % 60, s % 60)
        }
        None => "unknown (no progress in the last minute)".into(),
    }
}

/// The shop and the lane of a job, as `status` shows them ("-" when its spec does not read).
async fn shop_and_lane(store: &Store, job: i64) -> Result<(String, &'static str), CliError> {
    Ok(JobSpec::stored(store, job)
        .await?
        .map_or(("-".into(), "-"), |s| (s.shop_label(), s.lane().as_str())))
}

/// The pause of the shop `job` works for, if that shop is paused.
async fn paused_shop_of(store: &Store, job: i64) -> Result<Option<ShopPause>, CliError> {
    let Some(spec) = JobSpec::stored(store, job).await? else {
        return Ok(None);
    };
    Ok(store.shop_pause(spec.shop_platform(), spec.shop()).await?)
}

pub(crate) async fn status(cli: &Cli, args: &StatusArgs) -> Result<(), CliError> {
    let store = open_store(cli).await?;
    let Some(job) = args.job else {
        let jobs = store
            .list_jobs(20)
            .await
            .map_err(|e| CliError::runtime(e.to_string()))?;
        if jobs.is_empty() {
            println!("no jobs in {}", store.db_name());
            return Ok(());
        }
        println!(
            "{:>6}  {:<9}  {:<18}  {:<11}  {:<9}  {:>8}  {:>7}  {:>8}  {:>7}  {:>7}  {:>7}  {:>9}",
            "job",
            "kind",
            "shop",
            "lane",
            "state",
            "items",
            "done%",
            "pending",
            "stale",
            "failed",
            "skipped",
            "cancelled"
        );
        for j in jobs {
            let (shop, lane) = shop_and_lane(&store, j.id).await?;
            println!(
                "{:>6}  {:<9}  {:<18}  {:<11}  {:<9}  {:>8}  {:>6.1}%  {:>8}  {:>7}  {:>7}  {:>7}  {:>9}",
                j.id,
                j.kind.as_str(),
                shop,
                lane,
                j.state_label(),
                j.total,
                j.percent(),
                j.counts.pending,
                j.counts.stale,
                j.counts.failed,
                j.counts.skipped,
                j.counts.cancelled
            );
        }
        for p in store.shop_pauses().await? {
            println!(
                "{p}: its jobs' items wait; `syncfleet shop resume {}`",
                p.shop
            );
        }
        return Ok(());
    };
    let (shop, lane) = shop_and_lane(&store, job).await?;
    loop {
        let s = store.job_status(job).await.map_err(CliError::from)?;
        let c = &s.job.counts;
        println!(
            "job {} ({}, {shop}, {lane}, {}): {}/{} terminal ({:.1}%) | done {} stale {} failed {} skipped {} cancelled {} pending {} | {:.1} items/s | ETA {}",
            s.job.id,
            s.job.kind.as_str(),
            s.job.state_label(),
            c.terminal(),
            s.job.total,
            s.job.percent(),
            c.done,
            c.stale,
            c.failed,
            c.skipped,
            c.cancelled,
            c.pending,
            s.rate_per_sec,
            if s.job.control == Some(crate::store::JobControl::Paused) {
                "none while paused".to_string()
            } else {
                fmt_eta(s.eta())
            }
        );
        if s.job.state == JobState::Running && c.pending > 0 {
            if let Some(note) = stranded_note(cli, &store, job, s.job.total).await {
                println!("{note}");
            }
            if let Some(p) = paused_shop_of(&store, job).await? {
                println!(
                    "its {p}: its {} pending item(s) wait; `syncfleet shop resume {}`",
                    c.pending, p.shop
                );
            }
        }
        let dead = store
            .dead_item_counts()
            .await
            .map_err(|e| CliError::runtime(e.to_string()))?
            .into_iter()
            .find_map(|(j, n)| (j == job).then_some(n))
            .unwrap_or(0);
        if dead > 0 {
            println!(
                "{dead} item(s) failed as dead letters (their task exhausted its attempts): `syncfleet dead` shows why, `syncfleet dead --requeue --job {job}` runs them again"
            );
        }
        if !args.follow || s.job.state == JobState::Finished {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// For a job of up to this many items, `status` checks itself that each pending item has a
/// task; for a bigger one it reads what the heal loop's last sweep found, for the whole of the
/// job's life: a check reads every pending key and every queued task, and a status must not
/// cost in proportion to its job (a 1,000,000-item job read 215 MB for 4.7 s with every key
/// checked, and 0.6-1 s with its last 7,000 pending; docs/design.md, "Self-healing queue").
const DIRECT_CHECK_MAX: u64 = 10_000;

/// "N pending items have no task": the job would wait forever without a `reconcile`.
async fn stranded_note(cli: &Cli, store: &Store, job: i64, job_items: u64) -> Option<String> {
    if job_items > DIRECT_CHECK_MAX {
        return match store.last_sweep(job).await.ok()? {
            Some((0, _)) => None,
            Some((n, ago_ms)) => Some(format!(
                "warning: the queue's heal sweep {} s ago found {n} pending item(s) with no task in the queue (a lost task): a running worker pushes them again at its next sweep; `syncfleet reconcile {job}` does it now",
                ago_ms.max(0) / 1000
            )),
            None => Some(format!(
                "no heal sweep has looked at this job yet (a running worker sweeps every [queue] heal_interval_s): `syncfleet reconcile {job}` checks now that every pending item has a task"
            )),
        };
    }
    // Needs the config (queue name) and the queue; without them the check is skipped.
    let cfg = Config::load(&cli.config).ok()?;
    let queue = cli
        .topology()
        .queue(QueueOptions::from_config(&cfg.queue), store)
        .await
        .ok()?;
    let stranded = producer::uncovered_pending(store, &queue, job).await.ok()?;
    (!stranded.is_empty()).then(|| {
        format!(
            "warning: {} pending item(s) have no task in the queue (a lost queue, or a producer stopped before its push): run `syncfleet reconcile {job}`",
            stranded.len()
        )
    })
}

/// Arguments of `syncfleet report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Platform day (GMT+8), YYYY-MM-DD; default today.
    #[arg(long)]
    pub(crate) day: Option<NaiveDate>,
}

pub(crate) async fn report(cli: &Cli, args: &ReportArgs) -> Result<(), CliError> {
    let cfg = cli.load_config()?;
    let store = open_store(cli).await?;
    let now = crate::clock::Clock::system().utc();
    let today = platform_day(now);
    let day = args.day.unwrap_or(today);
    let r = store
        .report_calls_for_day(day)
        .await
        .map_err(|e| CliError::runtime(e.to_string()))?;
    println!("calls ledger for {day} (GMT+8)");
    println!(
        "{:<8} {:<16} {:>10} {:>10} {:>8}  {:>10} {:>8}",
        "platform", "api", "calls", "useful", "useful%", "quota", "burn"
    );
    for a in &r.by_api {
        let quota = cfg.gate(a.platform, a.api).daily_quota;
        // Burn is meaningful for the current day only (the fraction of the day elapsed).
        let burn = match quota {
            Some(q) if day == today => {
                format!("{:.2}", QuotaDay::PLATFORM.burn_ratio(a.calls, q, now))
            }
            _ => "-".into(),
        };
        let flag = if a.wasteful() {
            "  <- below 30%: cache or go incremental"
        } else {
            ""
        };
        println!(
            "{:<8} {:<16} {:>10} {:>10} {:>7.1}%  {:>10} {:>8}{flag}",
            a.platform.as_str(),
            a.api.as_str(),
            a.calls,
            a.useful,
            a.useful_ratio() * 100.0,
            quota.map(|q| q.to_string()).unwrap_or_else(|| "-".into()),
            burn
        );
    }
    println!(
        "total: {} calls, {} useful ({:.1}%)",
        r.total_calls(),
        r.total_useful(),
        r.useful_ratio() * 100.0
    );
    let mut errors: Vec<String> = Vec::new();
    for c in &r.by_class {
        if c.class.as_str() != "ok" && c.calls > 0 {
            errors.push(format!("{}.{} {}={}", c.platform, c.api, c.class, c.calls));
        }
    }
    if !errors.is_empty() {
        println!("non-ok calls: {}", errors.join(", "));
    }
    Ok(())
}
