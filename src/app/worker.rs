//! A worker process's life ([`run_worker`]): signals, the queue monitor (idle exit,
//! unreachable exit), the stop grace and the probe loop.

use super::runtime::{GatewayError, Runtime, RuntimeError};
use crate::clock::{elapsed_since, monotonic_now};
use crate::jobs::secrets::SecretsError;
use crate::queue::{QueueError, Shutdown, WorkerReport};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Time the stop may take beyond the shutdown grace: recording outcomes, acks, give-backs.
pub(crate) const STOP_MARGIN: Duration = Duration::from_secs(15);

/// How [`run_worker`] runs a worker.
#[derive(Debug, Clone)]
pub(crate) struct RunOptions {
    /// Tasks run at once by this process.
    pub(crate) concurrency: usize,
    /// Exit once the queue stays empty this long; `None`: run until SIGTERM/SIGINT.
    pub(crate) exit_when_idle: Option<Duration>,
    /// Serve Prometheus metrics here while the worker runs (`--metrics-listen`).
    pub(crate) metrics_listen: Option<std::net::SocketAddr>,
    /// Pull these platforms' change messages while the worker runs (`--listen`).
    /// (platform, the shop of its own session's messages) per `--listen`.
    pub(crate) listen: Vec<(crate::platform::Platform, String)>,
    /// Receive 1688's pushed change messages here, for this shop (`--receive`).
    pub(crate) receive: Option<(std::net::SocketAddr, String)>,
}

/// Why a worker stopped other than by a clean stop (a signal or the idle exit).
#[derive(Debug, thiserror::Error)]
pub(crate) enum WorkerError {
    /// Running jobs need secrets (or platform configs) this worker does not have, or the
    /// ledger could not be read to find out.
    #[error(transparent)]
    Secrets(#[from] SecretsError),
    /// `--receive` could not listen, or the 1688 app's secret (which signs the pushes) is
    /// not set.
    #[error("the push receiver: {0}")]
    Receive(String),
    /// The client that renews shops' tokens could not be built.
    #[error("token renewal: {0}")]
    Tokens(#[source] crate::platform::oauth::TokenClientError),
    /// The token key (`SYNCFLEET_TOKEN_KEY`, `SYNCFLEET_TOKEN_KEY_FILE`) could not be read.
    #[error(transparent)]
    TokenKey(#[from] crate::seal::TokenKeyError),
    /// `[hooks] url` is set and its signing key's variable is not.
    #[error("completion hooks: {0}")]
    HookSecret(#[from] crate::config::MissingSecret),
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
    Metrics(#[from] crate::app::metrics::MetricsError),
}

impl WorkerError {
    /// The operator's mistake (a missing secret, a second embedded worker, a queue that
    /// serves another ledger), not a failure of the system.
    pub(crate) fn is_input_error(&self) -> bool {
        match self {
            WorkerError::Secrets(e) => e.is_input_error(),
            WorkerError::HookSecret(_) | WorkerError::Receive(_) => true,
            WorkerError::Queue(e) => RuntimeError::is_queue_input_error(e),
            WorkerError::Metrics(e) => e.is_input_error(),
            WorkerError::Gateway(e) => e.is_input_error(),
            WorkerError::Unreachable { .. }
            | WorkerError::GraceExceeded { .. }
            | WorkerError::Tokens(_)
            | WorkerError::TokenKey(_) => false,
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
    crate::jobs::secrets::check_running_jobs(&rt.store, &rt.cfg).await?;
    // A Redis that may evict the stream or the gates' state loses work silently.
    rt.queue.check_eviction().await?;
    let (gates, gateway) = rt.gates_and_gateway().await?;
    // The metrics endpoint and collector, stopped when `_metrics` drops at return.
    let _metrics = crate::app::metrics::serve_if(opts.metrics_listen, || {
        rt.metrics_sources(gates.clone(), gateway.clone())
    })
    .await?;
    shutdown_on_signal(shutdown.clone());
    let unreachable = (rt.cfg.queue.unreachable_exit_s > 0)
        .then(|| Duration::from_secs(rt.cfg.queue.unreachable_exit_s));
    let monitor = monitor_queue(rt, opts.exit_when_idle, unreachable, shutdown.clone());
    let duties = start_duties(rt, &gates, &gateway, &shutdown)?;
    // 1688's pushed change messages (docs/design.md, "Continuous sync").
    let receiver = match &opts.receive {
        Some((addr, shop)) => Some(start_receiver(rt, *addr, shop, shutdown.clone()).await?),
        None => None,
    };
    // Shops' tokens renewed before they end, once for the fleet (docs/design.md, "Token
    // lifetimes"); the first look before the first task.
    let tokens = start_token_keeper(rt).await?;
    // Shops added to the ledger while the fleet runs weigh in the queue's order within a
    // heartbeat.
    let weights_loop = Some(tokio::spawn(rt.refresh_shop_weights(
        Duration::from_secs(rt.cfg.queue.heartbeat_s.max(1)),
        shutdown.clone(),
    )));
    let token_loop = tokens.clone().map(|keeper| {
        tokio::spawn(crate::jobs::tokens::run_token_loop(
            keeper,
            shutdown.clone(),
        ))
    });
    // Change messages (docs/design.md, "Continuous sync").
    let listeners: Vec<_> = opts
        .listen
        .iter()
        .map(|(platform, shop)| {
            tokio::spawn(crate::jobs::listen::run_listen_loop(
                gateway.clone(),
                rt.store.clone(),
                rt.cfg.clone(),
                crate::jobs::listen::ListenTarget::new(&rt.cfg, *platform, shop.clone()),
                shutdown.clone(),
            ))
        })
        .collect();
    // After the stop, items already calling get `queue.shutdown_grace_s` to finish and the
    // rest of every chunk goes back uncharged; the margin covers recording and acks. A
    // worker still busy past that exits anyway: its tasks are recovered as orphans.
    let grace = Duration::from_secs(rt.cfg.queue.shutdown_grace_s) + STOP_MARGIN;
    let stopping = shutdown.clone();
    let work = rt.work_renewing(gateway, opts.concurrency, shutdown, tokens);
    tokio::pin!(work);
    let report = tokio::select! {
        r = &mut work => Some(r),
        _ = async { stopping.wait().await; tokio::time::sleep(grace).await } => None,
    };
    // The background loops see the stop and finish what they hold (each within 2 s, else it
    // is cut): the probe and heal loops release their fleet leases (aborted, a lease stayed
    // held for 1.5 intervals by a worker that was gone); a schedule look is a transaction (cut,
    // it rolls back whole); a message batch is acknowledged only once recorded; a hook
    // delivery cut off keeps its claim until it lapses and the next worker sends it again.
    stopping.trigger();
    for mut task in [receiver, token_loop, weights_loop]
        .into_iter()
        .flatten()
        .chain(duties)
        .chain(listeners)
    {
        if tokio::time::timeout(Duration::from_secs(2), &mut task)
            .await
            .is_err()
        {
            task.abort();
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

/// The periodic duties every worker runs beside its tasks: probes and the heal sweep (one
/// worker of a fleet at a time, by lease), schedules and completion hooks. Each stops at
/// `shutdown`; a duty its setting turns off is not started.
fn start_duties(
    rt: &Runtime,
    gates: &crate::throttle::Gates,
    gateway: &crate::link::Gateway,
    shutdown: &Shutdown,
) -> Result<Vec<tokio::task::JoinHandle<()>>, WorkerError> {
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
    // The queue heals itself: one worker of the fleet at a time pushes again what a lost
    // task left pending (docs/design.md, "Self-healing queue").
    let heal = (rt.cfg.queue.heal_interval_s > 0).then(|| {
        tokio::spawn(crate::jobs::heal::run_heal_loop(
            rt.store.clone(),
            rt.queue.clone(),
            gates.clone(),
            gateway.leases(),
            gateway.worker_id().to_string(),
            Duration::from_secs(rt.cfg.queue.heal_interval_s),
            rt.cfg.queue.chunk_size,
            rt.cfg.retention.clone(),
            shutdown.clone(),
        ))
    });
    // Schedules: every worker looks; the ledger decides each tick once (docs/design.md,
    // "Continuous sync").
    let schedules = (rt.cfg.jobs.schedule_check_ms > 0).then(|| {
        tokio::spawn(crate::jobs::schedule::run_schedule_loop(
            rt.store.clone(),
            rt.queue.clone(),
            rt.cfg.clone(),
            gateway.platform_clocks(),
            gateway.clock(),
            Duration::from_millis(rt.cfg.jobs.schedule_check_ms),
            shutdown.clone(),
        ))
    });
    // Completion hooks: every worker sends the deliveries it claims (docs/design.md,
    // "Completion hooks").
    let hooks =
        crate::jobs::hooks::HookSender::new(&rt.cfg.hooks, rt.cfg.hooks.secret()?).map(|s| {
            tokio::spawn(crate::jobs::hooks::run_hook_loop(
                rt.store.clone(),
                s,
                Duration::from_millis(rt.cfg.jobs.schedule_check_ms.max(250)),
                shutdown.clone(),
            ))
        });
    Ok([probes, heal, schedules, hooks]
        .into_iter()
        .flatten()
        .collect())
}

/// Serve 1688's pushed change messages for `shop` on `addr` until `shutdown`.
async fn start_receiver(
    rt: &Runtime,
    addr: std::net::SocketAddr,
    shop: &str,
    shutdown: Shutdown,
) -> Result<tokio::task::JoinHandle<()>, WorkerError> {
    let secret = rt
        .cfg
        .platform(crate::platform::Platform::Alibaba)
        .ok_or_else(|| WorkerError::Receive("the config has no [platforms.alibaba]".into()))?
        .secret()
        .map_err(|e| WorkerError::Receive(e.to_string()))?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| WorkerError::Receive(format!("cannot listen on {addr}: {e}")))?;
    tracing::info!(%addr, shop, "receiving 1688's pushed change messages");
    Ok(tokio::spawn(crate::app::receiver::serve(
        listener,
        rt.store.clone(),
        secret,
        crate::jobs::listen::ListenTarget::new(
            &rt.cfg,
            crate::platform::Platform::Alibaba,
            shop.to_string(),
        ),
        shutdown,
    )))
}

/// The keeper of the shops' tokens, when any shop's can be renewed: the config's renewable
/// shops, and with a token key the ledger's directory (docs/design.md, "Tokens at rest").
/// Its first look is done before the first task.
async fn start_token_keeper(
    rt: &Runtime,
) -> Result<Option<Arc<crate::jobs::tokens::TokenKeeper>>, WorkerError> {
    let ring = crate::seal::SealKeys::from_env()?;
    Ok(if rt.cfg.renewable_shops().is_empty() && ring.is_none() {
        None
    } else {
        let keeper = Arc::new(
            crate::jobs::tokens::TokenKeeper::new(rt.cfg.clone(), rt.store.clone(), ring)
                .map_err(WorkerError::Tokens)?,
        );
        keeper.look().await;
        Some(keeper)
    })
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
                    let since = *empty_since.get_or_insert_with(monotonic_now);
                    if idle.is_some_and(|idle| elapsed_since(since) >= idle) {
                        shutdown.trigger();
                        return Some(MonitorStop::Idle);
                    }
                }
                Err(e) => {
                    empty_since = None;
                    let since = *down_since.get_or_insert_with(monotonic_now);
                    if let Some(limit) = unreachable.filter(|l| elapsed_since(since) >= *l) {
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
