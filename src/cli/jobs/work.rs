//! `syncfleet work`: run a worker over the queue until it is stopped (or idle), and the
//! worker's exit code by error.

use crate::app::runtime::Runtime;
use crate::app::worker::{run_worker, RunOptions, WorkerError};
use crate::cli::{Cli, CliError};
use crate::platform::{Api, Platform};
use crate::queue::Shutdown;
use clap::Args;
use std::time::Duration;

/// Arguments of `syncfleet work`.
#[derive(Debug, Args)]
pub struct WorkArgs {
    /// Tasks run at once by this process.
    #[arg(long, default_value_t = 8)]
    pub(crate) concurrency: usize,
    /// Exit once the queue stays empty this many seconds (0 = run until SIGTERM/SIGINT). The
    /// tasks of a paused job or shop are in the queue: it does not exit while they wait
    /// (`job cancel` or `shop resume` them). Not with --listen or --receive: a listener's work
    /// comes from the platform, not the queue.
    #[arg(long, default_value_t = 0)]
    pub(crate) exit_when_idle_s: u64,
    /// Serve Prometheus metrics at http://ADDR/metrics while the worker runs (off by
    /// default), e.g. 127.0.0.1:9464.
    #[arg(long, value_name = "ADDR")]
    pub(crate) metrics_listen: Option<std::net::SocketAddr>,
    /// Also pull the platform's change messages and write each change to the ledger
    /// (`taobao`). One listener takes the whole app's messages: each names its seller, whose
    /// shop is the `[shops.NAME]` with that `seller` (default: the shop named like the
    /// seller); `taobao:SHOP` names the shop of the app's own session's messages (default
    /// `default`). Repeatable. Not with --exit-when-idle-s (refused, exit 2).
    #[arg(long, value_name = "PLATFORM[:SHOP]", value_parser = parse_listen)]
    pub(crate) listen: Vec<(Platform, String)>,
    /// Receive 1688's pushed change messages at http://ADDR/ (its message service posts each
    /// change; point it, or the simulator's `[orders.live] push_url`, here), e.g.
    /// 127.0.0.1:7900. Not with --exit-when-idle-s.
    #[arg(long, value_name = "ADDR")]
    pub(crate) receive: Option<std::net::SocketAddr>,
    /// The shop the pushed messages of the app's own session belong to.
    #[arg(
        long,
        value_name = "SHOP",
        default_value = "default",
        requires = "receive"
    )]
    pub(crate) receive_shop: String,
}

/// `taobao` or `taobao:SHOP`; only platforms that offer pulled messages.
fn parse_listen(s: &str) -> Result<(Platform, String), String> {
    let (p, shop) = s.split_once(':').unwrap_or((s, "default"));
    let platform: Platform = p
        .parse()
        .map_err(|e: crate::platform::UnknownName| e.to_string())?;
    if !Api::MessageConsume.offered_by(platform) {
        return Err(format!(
            "{platform} offers no pulled change messages (taobao does; 1688 pushes them over HTTP)"
        ));
    }
    if shop.trim().is_empty() {
        return Err("the shop after `:` is empty".into());
    }
    Ok((platform, shop.to_string()))
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
    if args.exit_when_idle_s > 0 && (!args.listen.is_empty() || args.receive.is_some()) {
        // Before: the listener kept the worker up and the flag was silently ignored.
        return Err(CliError::input(
            "--exit-when-idle-s does not go with --listen or --receive: a listener's work comes from the platform, not the queue (run the listener without it)",
        ));
    }
    let cfg = cli.load_config()?;
    let rt = Runtime::open(cfg, &cli.db, cli.redis.as_deref()).await?;
    let opts = RunOptions {
        concurrency: args.concurrency,
        exit_when_idle: (args.exit_when_idle_s > 0)
            .then(|| Duration::from_secs(args.exit_when_idle_s)),
        metrics_listen: args.metrics_listen,
        listen: args.listen.clone(),
        receive: args.receive.map(|a| (a, args.receive_shop.clone())),
    };
    let report = run_worker(&rt, &opts, Shutdown::new()).await?;
    println!(
        "worker {} stopped: {} task(s) done, {} re-queued for later, {} failed, {} dead, {} recovered from dead workers",
        report.worker, report.done, report.retry_after, report.failed, report.dead, report.recovered
    );
    Ok(())
}
