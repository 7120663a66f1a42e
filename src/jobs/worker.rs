//! Assembling a worker process: ledger, queue, gates, link layer and the job runner, in
//! fleet mode (Redis given) or embedded mode (everything on local SQLite, one process).

use super::queue::{Queue, QueueError, QueueOptions, Shutdown, WorkerOptions, WorkerReport};
use super::runner::JobRunner;
use crate::config::Config;
use crate::link::gateway::Gateway;
use crate::link::shared::FleetLink;
use crate::store::{Store, StoreError};
use crate::throttle::Gates;
use std::path::PathBuf;
use std::sync::Arc;

/// Redis key namespace of the fleet (gates and link state).
pub const FLEET_NAMESPACE: &str = "sf";

/// The pieces a command needs, opened once.
#[derive(Clone)]
pub struct Runtime {
    pub cfg: Arc<Config>,
    pub store: Store,
    pub queue: Queue,
    pub redis_url: Option<String>,
}

/// The embedded queue's file: beside the ledger file (`syncfleet.db` → `syncfleet.queue.db`).
pub fn embedded_queue_path(db_url: &str) -> PathBuf {
    let path = db_url
        .strip_prefix("sqlite://")
        .or_else(|| db_url.strip_prefix("sqlite:"))
        .unwrap_or(db_url);
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
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Queue(#[from] QueueError),
}

impl RuntimeError {
    /// The operator's mistake (a missing ledger, a bad URL, a ledger that is not the
    /// fleet's), not a failure of the system: exit 2.
    pub fn is_input_error(&self) -> bool {
        match self {
            RuntimeError::Store(e) => e.is_input_error(),
            RuntimeError::Queue(e) => matches!(
                e,
                QueueError::FleetMismatch { .. } | QueueError::EmbeddedBusy { .. }
            ),
        }
    }
}

impl Runtime {
    /// Open an existing ledger (applying new migrations) and the queue of the mode
    /// `redis_url` selects. A missing ledger is refused (only `db migrate` creates one), and
    /// so is a queue that serves another ledger (its fleet id differs).
    pub async fn open(
        cfg: Config,
        db_url: &str,
        redis_url: Option<&str>,
    ) -> Result<Runtime, RuntimeError> {
        let store = Store::connect_existing(db_url).await?;
        Runtime::with_store(cfg, store, db_url, redis_url).await
    }

    /// [`Runtime::open`], creating the ledger when it does not exist (the demo, tools).
    pub async fn create(
        cfg: Config,
        db_url: &str,
        redis_url: Option<&str>,
    ) -> Result<Runtime, RuntimeError> {
        let store = Store::connect(db_url).await?;
        Runtime::with_store(cfg, store, db_url, redis_url).await
    }

    async fn with_store(
        cfg: Config,
        store: Store,
        db_url: &str,
        redis_url: Option<&str>,
    ) -> Result<Runtime, RuntimeError> {
        store.migrate().await?;
        let opts = QueueOptions::from_config(&cfg.queue);
        let queue = Queue::open(redis_url, &embedded_queue_path(db_url), opts).await?;
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

    /// Gates and the link layer for this mode.
    pub async fn gateway(&self) -> anyhow::Result<Gateway> {
        let (gates, fleet) = match &self.redis_url {
            Some(url) => (
                Gates::redis(&self.cfg, url).await?,
                Some(FleetLink::connect(url, FLEET_NAMESPACE).await?),
            ),
            None => (Gates::embedded(&self.cfg), None),
        };
        Gateway::from_config(&self.cfg, gates, fleet, Some(self.store.clone()))
            .map_err(anyhow::Error::msg)
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
    }
}
