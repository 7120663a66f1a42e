//! Assembling a worker process: ledger, queue, gates, link layer and the job runner, in
//! fleet mode (Redis given) or embedded mode (everything on local SQLite, one process).

use super::queue::{Queue, QueueOptions, Shutdown, WorkerOptions, WorkerReport};
use super::runner::JobRunner;
use crate::config::Config;
use crate::link::gateway::Gateway;
use crate::link::shared::FleetLink;
use crate::store::Store;
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

impl Runtime {
    /// Open the ledger (migrating it) and the queue of the mode `redis_url` selects.
    pub async fn open(
        cfg: Config,
        db_url: &str,
        redis_url: Option<&str>,
    ) -> anyhow::Result<Runtime> {
        let store = Store::connect(db_url).await?;
        store.migrate().await?;
        let opts = QueueOptions::from_config(&cfg.queue);
        let queue = Queue::open(redis_url, &embedded_queue_path(db_url), opts).await?;
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
    ) -> anyhow::Result<WorkerReport> {
        let queue = match &self.queue {
            Queue::Embedded(q) => Queue::Embedded(q.clone().with_ledger_lock(self.store.clone())),
            other => other.clone(),
        };
        let runner = Arc::new(JobRunner::new(
            self.store.clone(),
            gateway.clone(),
            queue.clone(),
            self.cfg.clone(),
        ));
        let opts = WorkerOptions {
            concurrency: concurrency.max(1),
            name: None,
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
