//! `enqueue`, `work`, `status`, `reconcile`, `retry`, `report`: the job commands.

use super::{Cli, CliError};
use crate::config::Config;
use crate::jobs::producer::{self, EnqueueReport, ProducerError};
use crate::jobs::queue::Shutdown;
use crate::jobs::queue::{Queue, QueueOptions};
use crate::jobs::spec::{read_item_ids, JobSpec};
use crate::jobs::worker::{embedded_queue_path, run_worker, RunOptions, Runtime, WorkerError};
use crate::platform::{ErrorClass, Platform};
use crate::store::{JobState, Store};
use crate::time::{burn_ratio, china_offset, platform_day};
use chrono::{DateTime, NaiveDate, NaiveDateTime, TimeZone, Utc};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Args)]
pub struct EnqueueArgs {
    /// A job spec file (TOML; examples in jobs/) instead of a subcommand.
    // Not `conflicts_with = "what"`: a subcommand is no argument, and clap's debug assertion
    // panics on it (every debug-build enqueue aborted); spec_from_args refuses both instead.
    #[arg(long)]
    pub(crate) spec: Option<PathBuf>,
    /// Items per task (default: queue.chunk_size of the config).
    #[arg(long)]
    pub(crate) chunk_size: Option<usize>,
    #[command(subcommand)]
    pub(crate) what: Option<EnqueueWhat>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum EnqueueWhat {
    /// Copy items from one platform to another: item_get on --from, item_add on --to.
    Listing {
        #[arg(long)]
        from: Platform,
        #[arg(long)]
        to: Platform,
        /// File with one numeric item id per line, or `-` for stdin.
        #[arg(long)]
        items: PathBuf,
    },
    /// Sync the orders modified in [--since, --until), one task per platform-sized window.
    Orders {
        #[arg(long)]
        platform: Platform,
        #[arg(long)]
        shop: String,
        /// RFC 3339, or `YYYY-MM-DD[ HH:MM:SS]` read as GMT+8.
        #[arg(long, value_parser = parse_time)]
        since: DateTime<Utc>,
        #[arg(long, value_parser = parse_time)]
        until: DateTime<Utc>,
    },
    /// Query logistics of the shop's shipped, unsigned orders not queried recently.
    Logistics {
        #[arg(long)]
        platform: Platform,
        #[arg(long)]
        shop: String,
    },
}

/// RFC 3339, `YYYY-MM-DD HH:MM:SS` or `YYYY-MM-DD` (GMT+8, the platforms' clock).
pub fn parse_time(s: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&Utc));
    }
    let naive = NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S")
        .or_else(|_| {
            NaiveDate::parse_from_str(s, "%Y-%m-%d")
                .map(|d| d.and_hms_opt(0, 0, 0).unwrap_or_default())
        })
        .map_err(|_| {
            format!("`{s}` is not a time (RFC 3339, `YYYY-MM-DD HH:MM:SS` or `YYYY-MM-DD`, GMT+8)")
        })?;
    china_offset()
        .from_local_datetime(&naive)
        .single()
        .map(|t| t.with_timezone(&Utc))
        .ok_or_else(|| format!("`{s}` is not a valid GMT+8 time"))
}

fn spec_from_args(args: &EnqueueArgs) -> Result<JobSpec, CliError> {
    match (&args.spec, &args.what) {
        (Some(_), Some(_)) => Err(CliError::input(
            "give either --spec FILE or a job subcommand (listing, orders, logistics), not both",
        )),
        (Some(path), None) => JobSpec::load(path).map_err(|e| CliError::input(e.to_string())),
        (None, Some(EnqueueWhat::Listing { from, to, items })) => Ok(JobSpec::Listing {
            from: *from,
            to: *to,
            items_file: Some(items.clone()),
            items: Vec::new(),
        }),
        (
            None,
            Some(EnqueueWhat::Orders {
                platform,
                shop,
                since,
                until,
            }),
        ) => Ok(JobSpec::Orders {
            platform: *platform,
            shop: shop.clone(),
            since: *since,
            until: *until,
        }),
        (None, Some(EnqueueWhat::Logistics { platform, shop })) => Ok(JobSpec::Logistics {
            platform: *platform,
            shop: shop.clone(),
        }),
        (None, None) => Err(CliError::input(
            "enqueue needs a job: `listing`, `orders`, `logistics` or --spec FILE",
        )),
    }
}

/// Read the listing's item ids with a progress spinner; a bad line stops here, before
/// anything is written.
fn listing_ids(spec: &JobSpec) -> Result<Vec<String>, CliError> {
    let JobSpec::Listing {
        items_file, items, ..
    } = spec
    else {
        return Ok(Vec::new());
    };
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} reading item ids: {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    let on_line = |n: usize| bar.set_message(format!("{n} lines"));
    let mut ids = Vec::new();
    let mut duplicates = 0;
    if let Some(file) = items_file {
        let list = if file.as_os_str() == "-" {
            read_item_ids(std::io::stdin().lock(), Path::new("<stdin>"), on_line)
        } else {
            let f = std::fs::File::open(file).map_err(|e| {
                CliError::input(format!("{}: cannot open item list: {e}", file.display()))
            })?;
            read_item_ids(std::io::BufReader::with_capacity(1 << 16, f), file, on_line)
        }
        .map_err(|e| CliError::input(e.to_string()))?;
        duplicates += list.duplicates;
        ids = list.ids;
    }
    if !items.is_empty() {
        let text = items.join("\n");
        let list = read_item_ids(text.as_bytes(), Path::new("<spec items>"), |_| {})
            .map_err(|e| CliError::input(e.to_string()))?;
        let mut seen: std::collections::HashSet<String> = ids.iter().cloned().collect();
        for id in list.ids {
            if seen.insert(id.clone()) {
                ids.push(id);
            } else {
                duplicates += 1;
            }
        }
        duplicates += list.duplicates;
    }
    bar.finish_and_clear();
    if duplicates > 0 {
        // A log line, not a bare eprintln: `--log-format json` keeps stderr one object a line.
        tracing::warn!("{duplicates} duplicate item id(s) listed once");
    }
    if ids.is_empty() {
        return Err(CliError::input("the item list is empty"));
    }
    Ok(ids)
}

pub(crate) async fn enqueue(cli: &Cli, args: &EnqueueArgs) -> Result<(), CliError> {
    let cfg = cli.load_config()?;
    let spec = spec_from_args(args)?;
    spec.validate()
        .map_err(|e| CliError::input(e.to_string()))?;
    let ids = listing_ids(&spec)?;
    let chunk = args.chunk_size.unwrap_or(cfg.queue.chunk_size);
    if chunk == 0 {
        return Err(CliError::input("--chunk-size must be at least 1"));
    }
    let rt = Runtime::open(cfg, &cli.db, cli.redis.as_deref()).await?;
    let keys = producer::item_keys(&rt.store, &rt.cfg, &spec, ids).await?;
    let started = std::time::Instant::now();
    let tasks = keys.len().div_ceil(chunk);
    let bar = ProgressBar::new(tasks as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} tasks pushed")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let report = producer::enqueue(&rt.store, &rt.queue, chunk, &spec, &keys, |n| {
        bar.set_position(n as u64)
    })
    .await?;
    bar.finish_and_clear();
    print_enqueued(&report, started.elapsed(), cli.redis.is_some());
    Ok(())
}

fn print_enqueued(r: &EnqueueReport, took: Duration, fleet: bool) {
    println!(
        "job {}: {} item(s) in {} task(s) enqueued in {:.2} s ({} mode)",
        r.job_id,
        r.items,
        r.tasks,
        took.as_secs_f64(),
        if fleet { "fleet" } else { "embedded" }
    );
    println!("watch it: syncfleet status {} --follow", r.job_id);
}

#[derive(Debug, Args)]
pub struct WorkArgs {
    /// Tasks run at once by this process.
    #[arg(long, default_value_t = 8)]
    pub(crate) concurrency: usize,
    /// Exit once the queue stays empty this many seconds (0 = run until SIGTERM/SIGINT).
    #[arg(long, default_value_t = 0)]
    pub(crate) exit_when_idle_s: u64,
    /// Serve Prometheus metrics at http://ADDR/metrics while the worker runs (off by
    /// default), e.g. 127.0.0.1:9464.
    #[arg(long, value_name = "ADDR")]
    pub(crate) metrics_listen: Option<std::net::SocketAddr>,
}

/// A producer's failure (the ledger, the queue, a push cut short) is a runtime failure: exit 1.
impl From<ProducerError> for CliError {
    fn from(e: ProducerError) -> Self {
        match e {
            ProducerError::Store(_)
            | ProducerError::Queue(_)
            | ProducerError::Encode(_)
            | ProducerError::Push { .. } => CliError::runtime(e.to_string()),
        }
    }
}

/// The worker's exit code from its error type: a missing secret, a second embedded worker or
/// a queue of another ledger is the operator's input (exit 2); the rest is a runtime failure
/// (exit 1: the queue unreachable, the stop grace exceeded, the gates or queue failing).
impl From<WorkerError> for CliError {
    fn from(e: WorkerError) -> Self {
        if e.is_input_error() {
            CliError::input(e.to_string())
        } else {
            CliError::runtime(e.to_string())
        }
    }
}

pub(crate) async fn work(cli: &Cli, args: &WorkArgs) -> Result<(), CliError> {
    let cfg = cli.load_config()?;
    let rt = Runtime::open(cfg, &cli.db, cli.redis.as_deref()).await?;
    let opts = RunOptions {
        concurrency: args.concurrency,
        exit_when_idle: (args.exit_when_idle_s > 0)
            .then(|| Duration::from_secs(args.exit_when_idle_s)),
        metrics_listen: args.metrics_listen,
    };
    let report = run_worker(&rt, &opts, Shutdown::new()).await?;
    println!(
        "worker {} stopped: {} task(s) done, {} re-queued for later, {} failed, {} dead, {} recovered from dead workers",
        report.worker, report.done, report.retry_after, report.failed, report.dead, report.recovered
    );
    Ok(())
}

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
            "{:>6}  {:<9}  {:<8}  {:>8}  {:>7}  {:>8}  {:>7}  {:>7}  {:>7}",
            "job", "kind", "state", "items", "done%", "pending", "stale", "failed", "skipped"
        );
        for j in jobs {
            println!(
                "{:>6}  {:<9}  {:<8}  {:>8}  {:>6.1}%  {:>8}  {:>7}  {:>7}  {:>7}",
                j.id,
                j.kind.as_str(),
                j.state.as_str(),
                j.total,
                j.percent(),
                j.counts.pending,
                j.counts.stale,
                j.counts.failed,
                j.counts.skipped
            );
        }
        return Ok(());
    };
    loop {
        let s = store.job_status(job).await.map_err(CliError::from)?;
        let c = &s.job.counts;
        println!(
            "job {} ({}, {}): {}/{} terminal ({:.1}%) | done {} stale {} failed {} skipped {} pending {} | {:.1} items/s | ETA {}",
            s.job.id,
            s.job.kind.as_str(),
            s.job.state.as_str(),
            c.terminal(),
            s.job.total,
            s.job.percent(),
            c.done,
            c.stale,
            c.failed,
            c.skipped,
            c.pending,
            s.rate_per_sec,
            fmt_eta(s.eta())
        );
        if s.job.state == JobState::Running && c.pending > 0 {
            if let Some(note) = stranded_note(cli, &store, job).await {
                println!("{note}");
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

/// "N pending items have no task": the job would wait forever without a `reconcile`.
/// Needs the config (queue name) and the queue; without them the check is skipped.
async fn stranded_note(cli: &Cli, store: &Store, job: i64) -> Option<String> {
    let cfg = Config::load(&cli.config).ok()?;
    let queue = Queue::open(
        cli.redis.as_deref(),
        &embedded_queue_path(&cli.db),
        QueueOptions::from_config(&cfg.queue),
    )
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

#[derive(Debug, Args)]
pub struct DeadArgs {
    /// Only this job's dead letters.
    #[arg(long)]
    pub(crate) job: Option<i64>,
    /// Put the dead letters' items back to pending and push them again (and remove the
    /// dead entries). Fix the cause first: they failed on every attempt.
    #[arg(long)]
    pub(crate) requeue: bool,
    /// Dead entries listed at most.
    #[arg(long, default_value_t = 50)]
    pub(crate) limit: usize,
}

/// `syncfleet dead`: the tasks that exhausted their attempts, and their items.
pub(crate) async fn dead(cli: &Cli, args: &DeadArgs) -> Result<(), CliError> {
    let cfg = cli.load_config()?;
    let chunk = cfg.queue.chunk_size;
    let rt = Runtime::open(cfg, &cli.db, cli.redis.as_deref()).await?;
    if args.requeue {
        let r = producer::requeue_dead(&rt.store, &rt.queue, args.job, chunk).await?;
        println!(
            "{} dead item(s) pending again in {} task(s); {} dead entr{} removed",
            r.items,
            r.tasks,
            r.entries,
            if r.entries == 1 { "y" } else { "ies" }
        );
        return Ok(());
    }
    let entries: Vec<_> = rt
        .queue
        .dead_entries(args.limit.max(1))
        .await
        .map_err(|e| CliError::runtime(e.to_string()))?
        .into_iter()
        .filter(|e| {
            args.job
                .is_none_or(|j| e.task.as_ref().is_some_and(|t| t.job_id == j))
        })
        .collect();
    let counts = rt
        .store
        .dead_item_counts()
        .await
        .map_err(|e| CliError::runtime(e.to_string()))?;
    if entries.is_empty() && counts.is_empty() {
        println!("no dead letters");
        return Ok(());
    }
    if !entries.is_empty() {
        println!(
            "{:<20}  {:>6}  {:>6}  {:>6}  {:>8}  error",
            "entry", "job", "chunk", "items", "attempts"
        );
    }
    for e in &entries {
        let (job, chunk, items) = e
            .task
            .as_ref()
            .map_or(("?".to_string(), "?".to_string(), 0), |t| {
                (t.job_id.to_string(), t.chunk.to_string(), t.keys.len())
            });
        println!(
            "{:<20}  {:>6}  {:>6}  {:>6}  {:>8}  {}",
            e.id, job, chunk, items, e.attempts, e.error
        );
    }
    for (job, n) in counts
        .iter()
        .filter(|(j, _)| args.job.is_none_or(|want| want == *j))
    {
        println!("job {job}: {n} item(s) failed as dead letters");
    }
    println!("run them again: syncfleet dead --requeue [--job N]");
    Ok(())
}

#[derive(Debug, Args)]
pub struct ReconcileArgs {
    pub(crate) job: i64,
}

pub(crate) async fn reconcile(cli: &Cli, args: &ReconcileArgs) -> Result<(), CliError> {
    let cfg = cli.load_config()?;
    let chunk = cfg.queue.chunk_size;
    let rt = Runtime::open(cfg, &cli.db, cli.redis.as_deref()).await?;
    let r = producer::reconcile(&rt.store, &rt.queue, args.job, chunk).await?;
    println!(
        "job {}: re-pushed {} unfinished item(s) that no live task carries, in {} task(s)",
        r.job_id, r.items, r.tasks
    );
    Ok(())
}

#[derive(Debug, Args)]
pub struct RetryArgs {
    pub(crate) job: i64,
    /// Error class of the failed items to run again (retry, slow or unknown; fatal needs a fix first).
    #[arg(long)]
    pub(crate) class: ErrorClass,
}

pub(crate) async fn retry(cli: &Cli, args: &RetryArgs) -> Result<(), CliError> {
    if args.class == ErrorClass::Fatal {
        return Err(CliError::input(
            "fatal failures are caller errors (params, signature, session): retrying them only burns quota; fix the cause and enqueue those items again",
        ));
    }
    let cfg = cli.load_config()?;
    let chunk = cfg.queue.chunk_size;
    let rt = Runtime::open(cfg, &cli.db, cli.redis.as_deref()).await?;
    let r = producer::retry_class(&rt.store, &rt.queue, args.job, args.class, chunk).await?;
    println!(
        "job {}: {} item(s) failed as {} are pending again ({} task(s))",
        r.job_id, r.items, args.class, r.tasks
    );
    Ok(())
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Platform day (GMT+8), YYYY-MM-DD; default today.
    #[arg(long)]
    pub(crate) day: Option<NaiveDate>,
}

pub(crate) async fn report(cli: &Cli, args: &ReportArgs) -> Result<(), CliError> {
    let cfg = cli.load_config()?;
    let store = open_store(cli).await?;
    let now = Utc::now();
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
            Some(q) if day == today => format!("{:.2}", burn_ratio(a.calls, q, now)),
            _ => "-".into(),
        };
        let flag = if a.calls > 0 && a.useful_ratio() < 0.3 {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_in_gmt8() {
        let t = parse_time("2026-11-01").unwrap();
        assert_eq!(t, "2026-10-31T16:00:00Z".parse::<DateTime<Utc>>().unwrap());
        assert_eq!(
            parse_time("2026-11-01 08:00:00").unwrap(),
            "2026-11-01T00:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        assert_eq!(
            parse_time("2026-11-01T00:00:00Z").unwrap(),
            "2026-11-01T00:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        assert!(parse_time("yesterday").is_err());
    }
}
