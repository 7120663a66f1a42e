//! Assembling a worker process: ledger, queue, gates, link layer and the job runner, in
//! fleet mode (Redis given) or embedded mode (everything on local SQLite, one process); and
//! its lifecycle ([`run_worker`]): signals, the queue monitor (idle exit, unreachable exit),
//! the stop grace and the probe loop.

use super::queue::{Queue, QueueError, QueueOptions, Shutdown, WorkerOptions, WorkerReport};
use super::runner::JobRunner;
use super::secrets::SecretsError;
use crate::config::Config;
use crate::link::gateway::Gateway;
use crate::link::shared::FleetLink;
use crate::store::{Store, StoreError};
use crate::throttle::{GateError, Gates};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Redis key namespace of the fleet (gates and link state).
pub const FLEET_NAMESPACE: &str = "sf";

/// The pieces a command needs, opened once.
#[derive(Clone)]
pub struct Runtime {
    /// The client configuration.
    pub cfg: Arc<Config>,
    /// The SQL ledger.
    pub store: Store,
    /// The task queue (Redis in fleet mode, else embedded).
    pub queue: Queue,
    pub(crate) redis_url: Option<String>,
}

/// The embedded queue's file: beside a SQLite ledger file (`syncfleet.db` →
/// `syncfleet.queue.db`); for a ledger on a database server (PostgreSQL), `syncfleet.queue.db`
/// in the working directory: without Redis the queue lives on the one host that runs
/// everything.
pub fn embedded_queue_path(db_url: &str) -> PathBuf {
    let Some(path) = db_url
        .strip_prefix("sqlite://")
        .or_else(|| db_url.strip_prefix("sqlite:"))
    else {
        return PathBuf::from("syncfleet.queue.db");
    };
    let path = path.split('?').next().unwrap_or(path);
    let p = PathBuf::from(path);
    let stem = p
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_else(|| "syncfleet".into());
    p.with_file_name(format!("{stem}.queue.db"))
}

/// Why the pieces of a command could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The ledger could not be opened or prepared.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The queue could not be opened, or it serves another ledger.
    #[error(transparent)]
    Queue(#[from] QueueError),
}

impl RuntimeError {
    /// The operator's mistake (a missing ledger, a bad URL, a ledger that is not the
    /// fleet's), not a failure of the system: exit 2.
    pub(crate) fn is_input_error(&self) -> bool {
        match self {
            RuntimeError::Store(e) => e.is_input_error(),
            RuntimeError::Queue(e) => RuntimeError::is_queue_input_error(e),
        }
    }

    /// A queue that serves another ledger, or a second embedded worker: exit 2.
    fn is_queue_input_error(e: &QueueError) -> bool {
        matches!(
            e,
            QueueError::FleetMismatch { .. } | QueueError::EmbeddedBusy { .. }
        )
    }
}

impl Runtime {
    /// What the metrics collector reads: this runtime's ledger, queue and config, and the
    /// gates and gateway the worker calls through.
    pub(crate) fn metrics_sources(
        &self,
        gates: Gates,
        gateway: Gateway,
    ) -> crate::ops::metrics::Sources {
        crate::ops::metrics::Sources {
            cfg: self.cfg.clone(),
            gates,
            gateway,
            queue: self.queue.clone(),
            store: self.store.clone(),
        }
    }

    /// Open an existing ledger (applying new migrations) and the queue of the mode
    /// `redis_url` selects. A missing ledger is refused (only `db migrate` creates one), and
    /// so is a queue that serves another ledger (its fleet id differs).
    pub async fn open(
        cfg: Config,
        db_url: &str,
        redis_url: Option<&str>,
    ) -> Result<Runtime, RuntimeError> {
        let store = Store::connect_existing(db_url).await?;
        Runtime::with_store(cfg, store, &embedded_queue_path(db_url), redis_url).await
    }

    /// [`Runtime::open`], creating the ledger when it does not exist (the demo, tools).
    pub async fn create(
        cfg: Config,
        db_url: &str,
        redis_url: Option<&str>,
    ) -> Result<Runtime, RuntimeError> {
        let store = Store::connect(db_url).await?;
        Runtime::with_store(cfg, store, &embedded_queue_path(db_url), redis_url).await
    }

    /// [`Runtime::create`] with the embedded queue in `queue_file` (the demo keeps it in its
    /// own directory whatever the ledger).
    pub(crate) async fn create_with_queue_file(
        cfg: Config,
        db_url: &str,
        queue_file: &Path,
    ) -> Result<Runtime, RuntimeError> {
        let store = Store::connect(db_url).await?;
        Runtime::with_store(cfg, store, queue_file, None).await
    }

    async fn with_store(
        cfg: Config,
        store: Store,
        queue_file: &Path,
        redis_url: Option<&str>,
    ) -> Result<Runtime, RuntimeError> {
        store.migrate().await?;
        let opts = QueueOptions::from_config(&cfg.queue);
        let queue = Queue::open(redis_url, queue_file, opts).await?;
        queue
            .bind_fleet(&store.fleet_id().await?, store.db_name())
            .await?;
        Ok(Runtime {
            cfg: Arc::new(cfg),
            store,
            queue,
            redis_url: redis_url.map(str::to_string),
        })
    }

    /// [`Runtime::gateway`] and the gates inside it (clones share their state): the metrics
    /// collector reads the gates the worker's calls go through (issue 11).
    pub(crate) async fn gates_and_gateway(&self) -> Result<(Gates, Gateway), GatewayError> {
        let (gates, fleet) = match &self.redis_url {
            Some(url) => (
                Gates::redis(&self.cfg, url).await?,
                Some(
                    FleetLink::connect(url, FLEET_NAMESPACE)
                        .await
                        .map_err(GatewayError::FleetLink)?,
                ),
            ),
            None => (Gates::embedded(&self.cfg), None),
        };
        Gateway::from_config(&self.cfg, gates.clone(), fleet, Some(self.store.clone()))
            .map(|gateway| (gates, gateway))
            .map_err(GatewayError::Build)
    }

    /// Run a worker until `shutdown`; in embedded mode it holds the ledger's worker lock so a
    /// second embedded worker process is refused (its limits would not be shared).
    pub async fn work(
        &self,
        gateway: Gateway,
        concurrency: usize,
        shutdown: Shutdown,
    ) -> Result<WorkerReport, QueueError> {
        let queue = match &self.queue {
            Queue::Embedded(q) => Queue::Embedded(q.clone().with_ledger_lock(self.store.clone())),
            other => other.clone(),
        };
        let runner = Arc::new(JobRunner::new(
            self.store.clone(),
            gateway.clone(),
            self.cfg.clone(),
        ));
        let opts = WorkerOptions {
            concurrency: concurrency.max(1),
            name: None,
            on_dead: Some(runner.dead_hook()),
        };
        let report = queue
            .run_worker(
                opts,
                move |task, ctx| {
                    let runner = runner.clone();
                    async move { runner.run_task(task, ctx).await }
                },
                shutdown,
            )
            .await?;
        gateway.flush().await;
        Ok(report)
    }
}

/// Why the gates and the link layer could not be set up.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GatewayError {
    /// The fleet gates (Redis) could not be reached.
    #[error(transparent)]
    Gates(#[from] GateError),
    /// The fleet link state (Redis) could not be reached.
    #[error(transparent)]
    FleetLink(#[from] crate::link::shared::FleetLinkError),
    /// A platform client could not be built from the configuration.
    #[error(transparent)]
    Build(#[from] crate::platform::client::ClientError),
}

/// Time the stop may take beyond the shutdown grace: recording outcomes, acks, give-backs.
pub(crate) const STOP_MARGIN: Duration = Duration::from_secs(15);

/// How [`run_worker`] runs a worker.
#[derive(Debug, Clone)]
pub(crate) struct RunOptions {
    /// Tasks run at once by this process.
    pub(crate) concurrency: usize,
    /// Exit once the queue stays empty this long; `None`: run until SIGTERM/SIGINT.
    pub(crate) exit_when_idle: Option<Duration>,
    /// Serve Prometheus metrics here while the worker runs (`--metrics-listen`, issue 11).
    pub(crate) metrics_listen: Option<std::net::SocketAddr>,
}

/// Why a worker stopped other than by a clean stop (a signal or the idle exit).
#[derive(Debug, thiserror::Error)]
pub(crate) enum WorkerError {
    /// Running jobs need secrets (or platform configs) this worker does not have, or the
    /// ledger could not be read to find out.
    #[error(transparent)]
    Secrets(#[from] SecretsError),
    /// The gates or the link layer could not be set up.
    #[error(transparent)]
    Gateway(#[from] GatewayError),
    /// The queue was unreachable for `queue.unreachable_exit_s`.
    #[error(
        "the queue was unreachable for {for_s} s (queue.unreachable_exit_s): {error}; exiting"
    )]
    Unreachable {
        /// `queue.unreachable_exit_s`.
        for_s: u64,
        /// The last error the queue answered.
        error: QueueError,
    },
    /// In-flight tasks did not finish within the shutdown grace plus [`STOP_MARGIN`].
    #[error(
        "in-flight tasks did not finish within {grace_s} s of the stop signal; exiting (their tasks will be recovered by another worker)"
    )]
    GraceExceeded {
        /// `queue.shutdown_grace_s` + [`STOP_MARGIN`], seconds.
        grace_s: u64,
    },
    /// The worker itself failed (its queue refused it, e.g. a second embedded worker).
    #[error(transparent)]
    Queue(#[from] QueueError),
    /// `--metrics-listen` could not be served (a busy or bad address).
    #[error(transparent)]
    Metrics(#[from] crate::ops::metrics::MetricsError),
}

impl WorkerError {
    /// The operator's mistake (a missing secret, a second embedded worker, a queue that
    /// serves another ledger), not a failure of the system.
    pub(crate) fn is_input_error(&self) -> bool {
        match self {
            WorkerError::Secrets(e) => e.is_input_error(),
            WorkerError::Queue(e) => RuntimeError::is_queue_input_error(e),
            WorkerError::Metrics(e) => e.is_input_error(),
            WorkerError::Gateway(_)
            | WorkerError::Unreachable { .. }
            | WorkerError::GraceExceeded { .. } => false,
        }
    }
}

/// Run a worker process's whole life: check the secrets of the running jobs, set up the gates
/// and the link layer, stop on SIGTERM/SIGINT (or when `shutdown` is triggered), on an idle
/// queue (`opts.exit_when_idle`) or an unreachable one (`queue.unreachable_exit_s`), run the
/// probe loop (`[probe] interval_s`), and give in-flight tasks the shutdown grace.
pub(crate) async fn run_worker(
    rt: &Runtime,
    opts: &RunOptions,
    shutdown: Shutdown,
) -> Result<WorkerReport, WorkerError> {
    // Secrets of the platforms the running jobs use: a missing one is named.
    super::secrets::check_running_jobs(&rt.store, &rt.cfg).await?;
    let (gates, gateway) = rt.gates_and_gateway().await?;
    // Issue 11: metrics endpoint and collector, stopped when `_metrics` drops at return.
    let _metrics = crate::ops::metrics::serve_if(opts.metrics_listen, || {
        rt.metrics_sources(gates, gateway.clone())
    })
    .await?;
    shutdown_on_signal(shutdown.clone());
    let unreachable = (rt.cfg.queue.unreachable_exit_s > 0)
        .then(|| Duration::from_secs(rt.cfg.queue.unreachable_exit_s));
    let monitor = monitor_queue(rt, opts.exit_when_idle, unreachable, shutdown.clone());
    // Probes: in a fleet only the holder of the probe lease runs them. `[probe] interval_s
    // = 0` turns them off (their sample calls would otherwise land in exact call counts).
    let probes = (rt.cfg.probe.interval_s > 0).then(|| {
        let probe_stop = shutdown.clone();
        tokio::spawn(crate::link::probe::run_probe_loop(
            gateway.clone(),
            rt.cfg.probe.clone(),
            None,
            async move { probe_stop.wait().await },
        ))
    });
    // After the stop, items already calling get `queue.shutdown_grace_s` to finish and the
    // rest of every chunk goes back uncharged; the margin covers recording and acks. A
    // worker still busy past that exits anyway: its tasks are recovered as orphans.
    let grace = Duration::from_secs(rt.cfg.queue.shutdown_grace_s) + STOP_MARGIN;
    let stopping = shutdown.clone();
    let work = rt.work(gateway, opts.concurrency, shutdown);
    tokio::pin!(work);
    let report = tokio::select! {
        r = &mut work => Some(r),
        _ = async { stopping.wait().await; tokio::time::sleep(grace).await } => None,
    };
    if let Some(mut p) = probes {
        // Let the probe loop see the stop and release the fleet's probe lease (aborting it
        // left the lease held for 1.5 intervals by a worker that was gone).
        stopping.trigger();
        if tokio::time::timeout(Duration::from_secs(2), &mut p)
            .await
            .is_err()
        {
            p.abort();
        }
    }
    let why = if monitor.is_finished() {
        monitor.await.ok().flatten()
    } else {
        monitor.abort();
        None
    };
    if let Some(MonitorStop::Unreachable { for_s, error }) = why {
        return Err(WorkerError::Unreachable { for_s, error });
    }
    let Some(report) = report else {
        return Err(WorkerError::GraceExceeded {
            grace_s: grace.as_secs(),
        });
    };
    Ok(report?)
}

/// Trigger `shutdown` on SIGTERM or SIGINT: stop fetching, finish in-flight tasks, exit.
fn shutdown_on_signal(shutdown: Shutdown) {
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let (Ok(mut term), Ok(mut int)) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            ) else {
                tracing::warn!("cannot install signal handlers: only a kill stops this worker");
                return;
            };
            tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
        tracing::info!("signal received: finishing in-flight tasks, then exiting");
        shutdown.trigger();
    });
}

/// Why the queue monitor stopped the worker.
#[derive(Debug)]
enum MonitorStop {
    /// The queue stayed empty for `--exit-when-idle-s`.
    Idle,
    /// The queue was unreachable for `queue.unreachable_exit_s`.
    Unreachable { for_s: u64, error: QueueError },
}

/// Watch the queue every half second: trigger `shutdown` once it has been empty for `idle`
/// (when given), or once it has been unreachable for `unreachable` (when given). An error
/// never counts as "empty", and never resets the unreachable clock.
fn monitor_queue(
    rt: &Runtime,
    idle: Option<Duration>,
    unreachable: Option<Duration>,
    shutdown: Shutdown,
) -> tokio::task::JoinHandle<Option<MonitorStop>> {
    let queue = rt.queue.clone();
    tokio::spawn(async move {
        let mut empty_since: Option<Instant> = None;
        let mut down_since: Option<Instant> = None;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                _ = shutdown.wait() => return None,
            }
            match queue.len().await {
                Ok(len) => {
                    down_since = None;
                    if len.total() > 0 {
                        empty_since = None;
                        continue;
                    }
                    let since = *empty_since.get_or_insert_with(Instant::now);
                    if idle.is_some_and(|idle| since.elapsed() >= idle) {
                        shutdown.trigger();
                        return Some(MonitorStop::Idle);
                    }
                }
                Err(e) => {
                    empty_since = None;
                    let since = *down_since.get_or_insert_with(Instant::now);
                    if let Some(limit) = unreachable.filter(|l| since.elapsed() >= *l) {
                        tracing::error!(error = %e, "the queue has been unreachable for {} s: stopping", limit.as_secs());
                        shutdown.trigger();
                        return Some(MonitorStop::Unreachable {
                            for_s: limit.as_secs(),
                            error: e,
                        });
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_file_sits_beside_the_ledger() {
        assert_eq!(
            embedded_queue_path("sqlite://syncfleet.db"),
            PathBuf::from("syncfleet.queue.db")
        );
        assert_eq!(
            embedded_queue_path("sqlite:///var/lib/sf/ledger.db?mode=rwc"),
            PathBuf::from("/var/lib/sf/ledger.queue.db")
        );
        // A server ledger: the working directory, never a path made of the URL.
        assert_eq!(
            embedded_queue_path("postgres://sf:pw@db.internal/ledger"),
            PathBuf::from("syncfleet.queue.db")
        );
    }
}
