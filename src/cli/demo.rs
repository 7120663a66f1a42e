//! `syncfleet demo`: the main job on the embedded default, with its results table.

use super::{Cli, CliError};
use crate::app::demo::{self, DemoError, DemoOptions};
use crate::clock::{elapsed_since, monotonic_now};
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Items in the listing job (1688 -> Taobao).
    #[arg(long, default_value_t = 100_000)]
    pub(crate) items: u64,
    /// Directory for the demo's ledger and queue (recreated on every run).
    #[arg(long, default_value = "syncfleet-demo")]
    pub(crate) dir: PathBuf,
    /// Target duration in seconds: the simulator's per-second limits are scaled to it.
    #[arg(long, default_value_t = 60)]
    pub(crate) target_s: u64,
    /// Tasks the worker runs at once.
    #[arg(long, default_value_t = 16)]
    pub(crate) concurrency: usize,
    /// Serve Prometheus metrics at http://ADDR/metrics during the run (off by default).
    #[arg(long, value_name = "ADDR")]
    pub(crate) metrics_listen: Option<std::net::SocketAddr>,
    /// Put the ledger on this database instead of a new SQLite file in --dir, e.g.
    /// postgres://USER@127.0.0.1/DB (a scratch database: the demo adds its job to it). The
    /// queue stays embedded in --dir.
    #[arg(long, value_name = "URL")]
    pub(crate) ledger: Option<String>,
}

/// The demo's failures are runtime failures (exit 1), whatever their cause.
impl From<DemoError> for CliError {
    fn from(e: DemoError) -> Self {
        CliError::runtime(e.to_string())
    }
}

pub(crate) async fn run(_cli: &Cli, args: &DemoArgs) -> Result<(), CliError> {
    if args.items == 0 {
        return Err(CliError::input("--items must be at least 1"));
    }
    let opts = DemoOptions {
        items: args.items,
        dir: args.dir.clone(),
        target: Duration::from_secs(args.target_s.max(1)),
        concurrency: args.concurrency.max(1),
        metrics_listen: args.metrics_listen,
        ledger: args.ledger.clone(),
    };
    let limit = demo::scaled_limit(opts.items, opts.target);
    let ledger = match &opts.ledger {
        Some(url) => format!("the ledger on {}", crate::store::redact_url(url)),
        None => "SQLite ledger".to_string(),
    };
    println!(
        "syncfleet demo: listing {} items 1688 -> Taobao on the embedded default (SQLite queue, in-process gates, {ledger}), \
         against the simulator limited to {limit} calls/s per API",
        opts.items
    );
    let started = monotonic_now();
    let report = demo::run(&opts, |s| {
        let c = &s.job.counts;
        println!(
            "  {:>6.1}%  {} of {} items terminal, {:.0} items/s",
            s.job.percent(),
            c.terminal(),
            s.job.total,
            c.terminal() as f64 / elapsed_since(started).as_secs_f64().max(1e-3)
        );
    })
    .await?;
    let c = &report.status.job.counts;
    println!();
    println!(
        "items by status     done {}  stale {}  failed {}  skipped {}  pending {}",
        c.done, c.stale, c.failed, c.skipped, c.pending
    );
    println!();
    println!(
        "{:<8} {:<10} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10}",
        "platform", "api", "calls", "ok", "rejected", "dup.write", "peak/s", "limit/s"
    );
    for a in &report.apis {
        println!(
            "{:<8} {:<10} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10}",
            a.platform.as_str(),
            a.api.as_str(),
            a.calls,
            a.ok,
            a.rejected,
            a.duplicate_writes,
            a.peak_per_second,
            a.limit_per_second
        );
    }
    println!("(counted by the simulator)");
    println!();
    println!(
        "useful-call ratio   {:.1}% ({} useful of {} calls in the ledger)",
        report.calls.useful_ratio() * 100.0,
        report.calls.total_useful(),
        report.calls.total_calls()
    );
    println!(
        "quota utilisation   {:.2}% (simulator-side calls / calls the limit allowed over the run)",
        report.quota_utilisation * 100.0
    );
    println!(
        "duration            {:.1} s vs physical limit {:.1} s (ratio {:.3})",
        report.duration.as_secs_f64(),
        report.physical_limit.as_secs_f64(),
        report.duration.as_secs_f64() / report.physical_limit.as_secs_f64().max(1e-9)
    );
    println!();
    let client = if opts.ledger.is_some() {
        "psql"
    } else {
        "sqlite3"
    };
    println!(
        "inspect with SQL:   {client} {} \"SELECT status, count(*) FROM job_items GROUP BY status\"",
        report.ledger
    );
    Ok(())
}
