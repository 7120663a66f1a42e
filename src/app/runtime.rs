//! Assembling a process: ledger, queue, gates, link layer and the job runner, on the
//! topology its arguments choose (`crate::topology`: a fleet on Redis, or one process alone).
//! The worker's life is in [`super::worker`].

use crate::config::Config;
use crate::jobs::runner::JobRunner;
use crate::jobs::tokens::TokenKeeper;
use crate::link::gateway::Gateway;
use crate::queue::{Queue, QueueError, QueueOptions, Shutdown, WorkerOptions, WorkerReport};
use crate::store::{Store, StoreError};
use crate::throttle::{GateError, Gates};
use crate::topology::Topology;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use crate::topology::FLEET_NAMESPACE;

/// The pieces a command needs, opened once.
#[derive(Clone)]
pub struct Runtime {
    /// The client configuration.
    pub cfg: Arc<Config>,
    /// The SQL ledger.
    pub store: Store,
    /// The task queue (Redis in fleet mode, else embedded).
    pub queue: Queue,
    /// A fleet on Redis or one process alone, chosen once when the runtime opened.
    pub topology: Topology,
    /// The shops' weights the queue orders by (shared with it).
    shop_weights: crate::queue::ShopWeights,
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
    pub(super) fn is_queue_input_error(e: &QueueError) -> bool {
        matches!(
            e,
            QueueError::FleetMismatch { .. }
                | QueueError::EmbeddedBusy { .. }
                | QueueError::Evicting { .. }
                | QueueError::Setup { .. }
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
    ) -> crate::app::metrics::Sources {
        crate::app::metrics::Sources {
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
        let weights = crate::queue::ShopWeights::new(shop_weights(&cfg, &store).await?);
        let opts = QueueOptions {
            shop_weights: weights.clone(),
            ..QueueOptions::from_config(&cfg.queue)
        };
        let topology = Topology::choose(redis_url, queue_file);
        let queue = topology.queue(opts, &store).await?;
        queue
            .bind_fleet(&store.fleet_id().await?, store.db_name())
            .await?;
        Ok(Runtime {
            cfg: Arc::new(cfg),
            store,
            queue,
            topology,
            shop_weights: weights,
        })
    }

    /// Read the shops' weights again every `every` until `stop` (the ledger's directory
    /// changes while the fleet runs: a shop added weighs what it was added with).
    pub(crate) fn refresh_shop_weights(
        &self,
        every: std::time::Duration,
        stop: Shutdown,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let (cfg, store, weights) = (
            self.cfg.clone(),
            self.store.clone(),
            self.shop_weights.clone(),
        );
        async move {
            loop {
                tokio::select! {
                    _ = stop.wait() => return,
                    _ = tokio::time::sleep(every) => {}
                }
                match shop_weights(&cfg, &store).await {
                    Ok(w) => weights.replace(w),
                    Err(e) => tracing::debug!(error = %e, "shops' weights not read; kept"),
                }
            }
        }
    }

    /// [`Runtime::gateway`] and the gates inside it (clones share their state): the metrics
    /// collector reads the gates the worker's calls go through.
    pub(crate) async fn gates_and_gateway(&self) -> Result<(Gates, Gateway), GatewayError> {
        let gates = self.topology.gates(&self.cfg, FLEET_NAMESPACE).await?;
        let fleet = self.topology.link(FLEET_NAMESPACE).await?;
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
        self.work_renewing(gateway, concurrency, shutdown, None)
            .await
    }

    /// [`Runtime::work`] signing renewable shops' calls with the tokens `tokens` keeps.
    pub(crate) async fn work_renewing(
        &self,
        gateway: Gateway,
        concurrency: usize,
        shutdown: Shutdown,
        tokens: Option<Arc<TokenKeeper>>,
    ) -> Result<WorkerReport, QueueError> {
        let queue = self.queue.clone();
        let runner = Arc::new(JobRunner::new(
            self.store.clone(),
            gateway.clone(),
            self.cfg.clone(),
            tokens,
            self.shop_weights.clone(),
            queue.clone(),
            concurrency.max(1),
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
    Build(#[from] crate::config::ClientSetupError),
}

impl GatewayError {
    /// The operator's configuration cannot run as given (an app quota on a cluster).
    pub(crate) fn is_input_error(&self) -> bool {
        matches!(self, GatewayError::Gates(GateError::AppQuotaOnCluster(_)))
    }
}

/// Every shop's weight: the config's `[shops]`, and the served shops of the ledger's
/// directory (docs/design.md, "Shops in the ledger").
async fn shop_weights(cfg: &Config, store: &Store) -> Result<BTreeMap<String, u32>, StoreError> {
    let mut weights: BTreeMap<String, u32> = cfg
        .shops()
        .map(|(name, shop)| (name.to_string(), shop.weight))
        .collect();
    for s in store.ledger_shops().await? {
        if s.removed_at.is_none() {
            weights.entry(s.shop).or_insert(s.weight);
        }
    }
    Ok(weights)
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
