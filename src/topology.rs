//! Where a process's shared state lives, decided once at start-up (docs/design.md,
//! "Topology").
//!
//! A **fleet** keeps its queue, gate state and link state (breaker trips, retry budgets, the
//! stale cache, leases) in one Redis, so any number of worker processes share them. A process
//! **alone** (no Redis) keeps its queue in a SQLite file of its own and its gates and link
//! state in memory. Every command builds one [`Topology`] from its arguments and takes these
//! pieces from it; nothing else asks which of the two it runs on. The topology also carries
//! the clock the pieces read (docs/design.md, "Time you can pause"): the system's, unless a
//! test gives another.

use crate::clock::Clock;
use crate::config::Config;
use crate::link::FleetLink;
use crate::queue::{EmbeddedQueue, Queue, QueueError, QueueOptions, RedisQueue};
use crate::store::Store;
use crate::throttle::{GateError, Gates};
use std::path::{Path, PathBuf};

/// The key namespace of the fleet's gates and link state in Redis.
pub const FLEET_NAMESPACE: &str = crate::throttle::DEFAULT_NAMESPACE;

/// A fleet on one Redis, or one process alone.
#[derive(Debug, Clone)]
pub struct Topology {
    kind: Kind,
    clock: Clock,
}

#[derive(Debug, Clone)]
enum Kind {
    Fleet { redis_url: String },
    Alone { queue_file: PathBuf },
}

impl Topology {
    /// A fleet on the Redis at `redis_url` when given, else one process whose queue is the
    /// SQLite file `queue_file`.
    pub fn choose(redis_url: Option<&str>, queue_file: &Path) -> Topology {
        let kind = match redis_url {
            Some(url) => Kind::Fleet {
                redis_url: url.to_string(),
            },
            None => Kind::Alone {
                queue_file: queue_file.to_path_buf(),
            },
        };
        Topology {
            kind,
            clock: Clock::system(),
        }
    }

    /// The same topology, its gates and link state reading the time from `clock`.
    pub fn on_clock(mut self, clock: Clock) -> Topology {
        self.clock = clock;
        self
    }

    /// `"fleet"` or `"embedded"`, for people (status lines, the dashboard).
    pub fn name(&self) -> &'static str {
        match self.kind {
            Kind::Fleet { .. } => "fleet",
            Kind::Alone { .. } => "embedded",
        }
    }

    /// Whether state changed through this topology (a gate's rate, a pause) reaches the
    /// running workers: in a fleet they read it from Redis; a process alone keeps its own
    /// in memory, so another process's change reaches it only through the ledger or a restart.
    pub fn reaches_running_workers(&self) -> bool {
        matches!(self.kind, Kind::Fleet { .. })
    }

    /// The task queue. A process alone holds the ledger's worker lock while it works, so a
    /// second one on the same ledger is refused (its limits would not be shared).
    pub async fn queue(&self, opts: QueueOptions, store: &Store) -> Result<Queue, QueueError> {
        Ok(match &self.kind {
            Kind::Fleet { redis_url } => RedisQueue::connect(redis_url, opts).await?.into(),
            Kind::Alone { queue_file } => EmbeddedQueue::open(queue_file, opts)
                .await?
                .with_ledger_lock(store.clone())
                .into(),
        })
    }

    /// The gates under the key namespace `namespace` (a fleet's; [`FLEET_NAMESPACE`] unless
    /// a tool keeps its own).
    pub async fn gates(&self, cfg: &Config, namespace: &str) -> Result<Gates, GateError> {
        match &self.kind {
            Kind::Fleet { redis_url } => {
                Gates::redis_on(cfg, redis_url, namespace, self.clock).await
            }
            Kind::Alone { .. } => Ok(Gates::embedded_on(cfg, self.clock)),
        }
    }

    /// The gates as a viewer shows them: a fleet's live state, or a process alone's
    /// configured gates raised to today's calls in the ledger at `db_url` (its live state is in
    /// the worker's memory, out of reach; a fleet's viewer does not open the ledger).
    pub async fn gates_to_show(
        &self,
        cfg: &Config,
        namespace: &str,
        db_url: &str,
    ) -> Result<Gates, GateError> {
        let gates = self.gates(cfg, namespace).await?;
        if let Kind::Alone { .. } = self.kind {
            if let Ok(store) = Store::connect_existing(db_url).await {
                if let Err(e) = crate::jobs::quota_floor::floor_from_ledger(&store, &gates).await {
                    tracing::warn!("today's calls could not be read from the ledger: {e}");
                }
            }
        }
        Ok(gates)
    }

    /// The link state the gateway shares with the fleet (breaker trips, retry budget, stale
    /// cache, leases); none for a process alone.
    pub async fn link(
        &self,
        namespace: &str,
    ) -> Result<Option<FleetLink>, crate::link::shared::FleetLinkError> {
        match &self.kind {
            Kind::Fleet { redis_url } => Ok(Some(
                FleetLink::connect(redis_url, namespace)
                    .await?
                    .on_clock(self.clock),
            )),
            Kind::Alone { .. } => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redis_url_makes_a_fleet_whose_changes_reach_running_workers() {
        let fleet = Topology::choose(Some("redis://127.0.0.1:6379/"), Path::new("q.db"));
        assert_eq!(fleet.name(), "fleet");
        assert!(fleet.reaches_running_workers());
        let alone = Topology::choose(None, Path::new("q.db"));
        assert_eq!(alone.name(), "embedded");
        assert!(!alone.reaches_running_workers());
    }
}
