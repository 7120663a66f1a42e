//! Thin subcommands: parse arguments, build the pieces, call the library, print.

use crate::app::logging::LogFormat;
use crate::config::{Config, ConfigError};
use clap::{Parser, Subcommand};
use std::path::PathBuf;

pub(crate) mod call;
pub(crate) mod config_cmd;
pub(crate) mod dashboard;
pub(crate) mod db;
pub(crate) mod demo;
pub mod entry;
pub(crate) mod gate;
pub(crate) mod hooks;
pub mod jobs;
pub(crate) mod probe;
pub(crate) mod quarantine;
pub(crate) mod schedule;
pub(crate) mod shop;
pub(crate) mod sim;

/// syncfleet: spend the platforms' quota fully and only on useful calls.
#[derive(Debug, Parser)]
#[command(name = "syncfleet", version, about, long_about = None)]
pub struct Cli {
    /// Client configuration file.
    #[arg(
        long,
        global = true,
        default_value = "config/syncfleet.toml",
        env = "SYNCFLEET_CONFIG"
    )]
    pub(crate) config: PathBuf,
    /// Redis URL for fleet mode (queue and gates shared by all workers). Absent: embedded mode.
    #[arg(long, global = true, env = "SYNCFLEET_REDIS_URL")]
    pub(crate) redis: Option<String>,
    /// SQL ledger URL.
    #[arg(
        long,
        global = true,
        env = "SYNCFLEET_DB",
        default_value = "sqlite://syncfleet.db"
    )]
    pub(crate) db: String,
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// The subcommand to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands of `syncfleet`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The main job end to end on the embedded default: simulator, queue and worker in one
    /// process; prints items by status, calls, rejections, quota utilisation and duration.
    Demo(demo::DemoArgs),
    /// The platform simulator: TOP, JOS and 1688 on one local listener.
    Sim(sim::SimArgs),
    /// One signed call: prints the response JSON and its error class.
    Call(call::CallArgs),
    /// Enqueue a job: the job and all its items go to the ledger in one transaction, then
    /// one task per chunk of items goes to the queue.
    Enqueue(jobs::EnqueueArgs),
    /// Run a worker: pulls tasks, calls the platforms through the gates and the link layer,
    /// records every outcome. SIGTERM finishes in-flight tasks, then exits.
    Work(jobs::WorkArgs),
    /// Progress of a job (counts per status, rate, ETA), or the latest jobs.
    Status(jobs::StatusArgs),
    /// The calls ledger of a day: calls vs useful data per API, useful-call ratio, burn ratio.
    Report(jobs::ReportArgs),
    /// Re-push the items the ledger says are unfinished and no live task carries (after a
    /// lost queue, or a producer stopped between the ledger and the push).
    Reconcile(jobs::ReconcileArgs),
    /// Put a job's items that failed with one error class back to pending and push them.
    Retry(jobs::RetryArgs),
    /// Pause, resume or cancel a job, fleet-wide.
    #[command(subcommand)]
    Job(jobs::JobCommand),
    /// The shops the app serves; resume one paused because its session was refused.
    #[command(subcommand)]
    Shop(shop::ShopCommand),
    /// Recurring order and logistics sync per shop (the workers run them, each tick once).
    #[command(subcommand)]
    Schedule(schedule::ScheduleCommand),
    /// Completion hook deliveries: one per finished job, pending, delivered or failed.
    Hooks(hooks::HooksArgs),
    /// Records a platform sent that could not be read (kept with the reason and raw text;
    /// the runs went on without them).
    Quarantine(quarantine::QuarantineArgs),
    /// Dead letters: tasks that exhausted their attempts (their items end `failed` with
    /// class `dead`); `--requeue` runs them again.
    Dead(jobs::DeadArgs),
    /// A live page of jobs, gates, calls, workers and the queue (loopback by default);
    /// actions need SYNCFLEET_DASHBOARD_TOKEN.
    Dashboard(dashboard::DashboardArgs),
    /// Fleet-wide gates: show their state, or set a rate at run time.
    #[command(subcommand)]
    Gate(gate::GateCommand),
    /// Probe every (platform, API class): auth, latency, required fields.
    Probe(probe::ProbeArgs),
    /// Configuration commands.
    #[command(subcommand)]
    Config(config_cmd::ConfigCommand),
    /// The SQL ledger: `db migrate` creates or upgrades it.
    #[command(subcommand)]
    Db(db::DbCommand),
}

/// A command failure with its exit code: 1 runtime failure, 2 bad input.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct CliError {
    /// The process exit code: 1 runtime failure, 2 bad input.
    pub code: i32,
    pub(crate) message: String,
}

impl CliError {
    /// Bad input (config, arguments, files): exit 2.
    pub(crate) fn input(message: impl Into<String>) -> Self {
        CliError {
            code: 2,
            message: message.into(),
        }
    }
    /// Runtime failure: exit 1.
    pub(crate) fn runtime(message: impl Into<String>) -> Self {
        CliError {
            code: 1,
            message: message.into(),
        }
    }
}

impl From<crate::app::metrics::MetricsError> for CliError {
    /// A bad or busy address is the operator's to fix (exit 2); the rest is ours.
    fn from(e: crate::app::metrics::MetricsError) -> Self {
        if e.is_input_error() {
            CliError::input(e.to_string())
        } else {
            CliError::runtime(e.to_string())
        }
    }
}

impl Command {
    /// Whether the command line asks for metrics: the logging setup then adds the metrics
    /// layer.
    pub fn wants_metrics(&self) -> bool {
        match self {
            Command::Work(a) => a.metrics_listen.is_some(),
            Command::Demo(a) => a.metrics_listen.is_some(),
            _ => false,
        }
    }

    /// Whether the command serves for long (a worker, the demo, the dashboard, the
    /// simulator): those keep SIGPIPE ignored; the others are reports and short commands.
    pub fn serves(&self) -> bool {
        matches!(
            self,
            Command::Work(_) | Command::Demo(_) | Command::Sim(_) | Command::Dashboard(_)
        )
    }

    /// Whether the command runs on one thread: a worker waits on replies most of the time, and
    /// on a multi-thread runtime each reply woke one thread from another, which cost the worker
    /// more CPU than its own work did; a fleet scales with processes (`docs/design.md`, "What a
    /// call costs the worker").
    pub fn single_threaded(&self) -> bool {
        matches!(self, Command::Work(_))
    }
}

impl From<ConfigError> for CliError {
    fn from(e: ConfigError) -> Self {
        CliError::input(e.to_string())
    }
}

impl Cli {
    /// Load the config named by `--config`, mapping failure to exit code 2.
    pub(crate) fn load_config(&self) -> Result<Config, CliError> {
        let cfg = Config::load(&self.config)?;
        for w in &cfg.warnings {
            tracing::warn!("{w}");
        }
        Ok(cfg)
    }

    /// The topology `--redis` chooses: a fleet on that Redis, or one process alone with its
    /// queue beside the `--db` ledger (`crate::topology`).
    pub(crate) fn topology(&self) -> crate::topology::Topology {
        crate::topology::Topology::choose(
            self.redis.as_deref(),
            &crate::app::runtime::embedded_queue_path(&self.db),
        )
    }
}

/// Run the parsed command line.
pub async fn run(cli: Cli) -> Result<(), CliError> {
    match &cli.command {
        Command::Config(cmd) => config_cmd::run(&cli, cmd).await,
        Command::Db(cmd) => db::run(&cli, cmd).await,
        Command::Gate(cmd) => gate::run(&cli, cmd).await,
        Command::Call(args) => call::run(&cli, args).await,
        Command::Probe(args) => probe::run(&cli, args).await,
        Command::Demo(a) => demo::run(&cli, a).await,
        Command::Dashboard(a) => dashboard::run(&cli, a).await,
        Command::Enqueue(a) => jobs::enqueue(&cli, a).await,
        Command::Work(a) => jobs::work(&cli, a).await,
        Command::Status(a) => jobs::status(&cli, a).await,
        Command::Reconcile(a) => jobs::reconcile(&cli, a).await,
        Command::Retry(a) => jobs::retry(&cli, a).await,
        Command::Dead(a) => jobs::dead(&cli, a).await,
        Command::Job(cmd) => jobs::job(&cli, cmd).await,
        Command::Shop(cmd) => shop::run(&cli, cmd).await,
        Command::Schedule(cmd) => schedule::run(&cli, cmd).await,
        Command::Hooks(a) => hooks::run(&cli, a).await,
        Command::Quarantine(a) => quarantine::run(&cli, a).await,
        Command::Report(a) => jobs::report(&cli, a).await,
        Command::Sim(args) => sim::run(args).await,
    }
}
