//! The platform simulator (docs/design.md, "The simulator"): Taobao TOP, JD JOS and 1688 on one listener,
//! with their request formats, signatures, error bodies, per-(app, api) limits and quotas,
//! deterministic data and drills. It counts what it saw, so benchmarks measure from the
//! platform's side. The wire contract is docs/wire-formats.md.
//!
//! Library use (tests, the demo, benchmarks):
//!
//! ```no_run
//! # async fn f() -> Result<(), Box<dyn std::error::Error>> {
//! use syncfleet_sim::{self as sim, DrillPatch, SimConfig};
//! use syncfleet_wire::platform::{Api, Platform};
//! let cfg = SimConfig::demo().with_limit(Platform::Taobao, Api::ItemGet, 50, 100_000);
//! let sim = sim::spawn(cfg, "127.0.0.1:0".parse()?).await?;
//! let endpoint = sim.endpoint(Platform::Taobao); // http://127.0.0.1:PORT/router/rest
//! sim.set_drill(DrillPatch { outage: Some(true), ..Default::default() })?;
//! let seen = sim.stats().for_platform(Platform::Taobao, Api::ItemGet).map(|s| s.calls);
//! sim.shutdown().await; // or drop it
//! # let _ = (endpoint, seen); Ok(()) }
//! ```
//!
//! Endpoints: `POST /router/rest` (TOP), `POST /routerjson` (JD),
//! `POST /openapi/param2/1/{namespace}/{apiName}/{appKey}` (1688); admin: `GET /admin/stats`,
//! `POST /admin/reset`, `GET|POST /admin/drill`.

#![warn(missing_docs)]

// The wire layer, under the names the simulator's modules use.
use syncfleet_wire::{file_problem, platform, secret, time};

pub mod config;
pub mod data;
pub mod drill;
pub mod live;
pub mod proto;
pub mod push;
pub mod server;
pub mod state;
pub mod tokens;
pub mod walk_shift;

pub use config::{Limit, LimitKind, OrdersConfig, SimApp, SimConfig};
pub use drill::{Drill, DrillError, DrillPatch, LimitKindOverride, LimitOverride};
pub use live::LiveOrders;
/// Which records a `malformed_ratio` drill sends unreadable (order and message ids).
pub use proto::render::malformed as malformed_record;
pub use state::{ApiStats, ErrorCounts, ShopStats, SimStats, Totals};
pub use tokens::TokenStats;

use crate::platform::client::ClientError;
use crate::platform::Platform;
use state::Sim;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Why the simulator could not start, or a client of it could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The configured drills are refused.
    #[error(transparent)]
    Drill(#[from] DrillError),
    /// Two apps share an app key on one platform.
    #[error("app key {0} is configured twice")]
    DuplicateAppKey(String),
    /// The listen address could not be bound.
    #[error("simulator cannot listen on {addr}: {error}")]
    Listen {
        /// The address asked for.
        addr: SocketAddr,
        /// Why binding failed.
        error: std::io::Error,
    },
    /// The bound listener has no address (the OS refused to say).
    #[error("simulator: cannot read the bound address: {0}")]
    LocalAddr(std::io::Error),
    /// The simulator's own runtime could not be built (threads, timers, the I/O driver).
    #[error("simulator: cannot start its runtime: {0}")]
    Runtime(std::io::Error),
    /// [`SimConfig::client`] for a platform the simulator has no app of.
    #[error("the simulator has no {0} app")]
    NoApp(Platform),
    /// The client of the simulator's app could not be built.
    #[error(transparent)]
    Client(#[from] ClientError),
}

/// Serve the simulator on an already bound listener until `shutdown` resolves.
/// Used by `syncfleet sim` (which binds first so it can print the address).
pub async fn serve(
    cfg: SimConfig,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), SimError> {
    let sim = Arc::new(Sim::new(cfg)?);
    let (tx, rx) = watch::channel(false);
    let stop = tokio::spawn(async move {
        shutdown.await;
        let _ = tx.send(true);
        // Keep the sender alive until the server task has seen it.
        tx.closed().await;
    });
    server::run(sim, listener, rx).await;
    stop.abort();
    Ok(())
}

/// Start the simulator in this process on `listen` (port 0 picks a free port).
pub async fn spawn(cfg: SimConfig, listen: SocketAddr) -> Result<SimHandle, SimError> {
    let sim = Arc::new(Sim::new(cfg)?);
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|error| SimError::Listen {
            addr: listen,
            error,
        })?;
    let addr = listener.local_addr().map_err(SimError::LocalAddr)?;
    let (tx, rx) = watch::channel(false);
    let task = tokio::spawn(server::run(sim.clone(), listener, rx));
    Ok(SimHandle {
        addr,
        sim,
        stop: tx,
        task: Some(task),
    })
}

/// Like [`spawn`], but the simulator runs on a thread and runtime of its own, as a platform
/// runs on machines of its own: the time at which it counts a request against the per-second
/// limit does not wait for the client's own tasks on a shared runtime. The demo uses this;
/// without it, a busy client (or a database server on the same cores) delays the
/// simulator's reading of a request sent in time past a second boundary (BENCHMARKS.md, "The
/// ledger on PostgreSQL").
pub async fn spawn_on_own_thread(
    cfg: SimConfig,
    listen: SocketAddr,
) -> Result<SimHandle, SimError> {
    let sim = Arc::new(Sim::new(cfg)?);
    let listen_err = |error| SimError::Listen {
        addr: listen,
        error,
    };
    let listener = std::net::TcpListener::bind(listen).map_err(listen_err)?;
    listener.set_nonblocking(true).map_err(listen_err)?;
    let addr = listener.local_addr().map_err(SimError::LocalAddr)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(SimError::Runtime)?;
    let (tx, rx) = watch::channel(false);
    let server = sim.clone();
    // A blocking-pool thread is an OS thread of its own; the runtime is dropped on it.
    let task = tokio::task::spawn_blocking(move || {
        runtime.block_on(async move {
            match TcpListener::from_std(listener) {
                Ok(listener) => server::run(server, listener, rx).await,
                Err(e) => tracing::error!("sim: cannot register the listener: {e}"),
            }
        })
    });
    Ok(SimHandle {
        addr,
        sim,
        stop: tx,
        task: Some(task),
    })
}

/// One live order as the simulator changed it (see [`SimHandle::live_orders`]).
#[derive(Debug, Clone, PartialEq)]
pub struct LiveOrder {
    /// The order id.
    pub id: u64,
    /// Every change so far, oldest first: when, and the status it entered. The last is the
    /// order's state; its time is the order's `modified`.
    pub changes: Vec<(chrono::DateTime<chrono::Utc>, String)>,
}

/// A running in-process simulator. Stops on drop or [`SimHandle::shutdown`].
#[derive(Debug)]
pub struct SimHandle {
    addr: SocketAddr,
    sim: Arc<Sim>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl SimHandle {
    /// `http://ADDR`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The endpoint a client config names for `platform` (TOP `/router/rest`, JD
    /// `/routerjson`, 1688 `/openapi`, to which the client appends `/param2/1/...`).
    pub fn endpoint(&self, platform: Platform) -> String {
        let path = match platform {
            Platform::Taobao => "/router/rest",
            Platform::Jd => "/routerjson",
            Platform::Alibaba => "/openapi",
        };
        format!("http://{}{path}", self.addr)
    }

    /// The configuration it runs with (apps, secrets, limits).
    pub fn config(&self) -> &SimConfig {
        &self.sim.cfg
    }

    /// The platform's clock (this host's moved by the config's `clock_offset_s`).
    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.sim.now()
    }

    /// Snapshot of the counters (the same data as `GET /admin/stats`).
    pub fn stats(&self) -> SimStats {
        self.sim.stats()
    }

    /// The drills in force.
    pub fn drill(&self) -> Drill {
        self.sim.drill()
    }

    /// Change drills at run time (as `POST /admin/drill`); returns the drills now in force.
    pub fn set_drill(&self, patch: DrillPatch) -> Result<Drill, DrillError> {
        self.sim.set_drill(&patch)
    }

    /// The live orders of `shop` of the app `app_key` on `platform` (`""`: the app's own
    /// session) as they stand at `at`, each with every change it went through by then, in
    /// the platform's own status words. Empty when the app is unknown or the shops are static.
    pub fn live_orders(
        &self,
        platform: Platform,
        app_key: &str,
        shop: &str,
        at: chrono::DateTime<chrono::Utc>,
    ) -> Vec<LiveOrder> {
        self.live_orders_changed_since(platform, app_key, shop, None, at)
    }

    /// [`SimHandle::live_orders`], only the orders with a change at or after `since` (a
    /// shop with a day of history holds many more).
    pub fn live_orders_changed_since(
        &self,
        platform: Platform,
        app_key: &str,
        shop: &str,
        since: Option<chrono::DateTime<chrono::Utc>>,
        at: chrono::DateTime<chrono::Utc>,
    ) -> Vec<LiveOrder> {
        let Some(app) = self.sim.app(platform, app_key) else {
            return Vec::new();
        };
        let live = self.sim.live_shop(app, shop);
        let now = at.timestamp();
        let from = since.map(|t| t.timestamp());
        let when = |s: i64| chrono::DateTime::from_timestamp(s, 0).unwrap_or_default();
        (from.map_or(0, |t| live.first_changing_after(t))..live.created_by(now))
            .map(|k| live.life(k))
            .map(|life| LiveOrder {
                id: life.id,
                changes: life
                    .changes
                    .iter()
                    .take_while(|c| c.at <= now)
                    .map(|c| {
                        (
                            when(c.at),
                            proto::order_status(platform, c.state).to_string(),
                        )
                    })
                    .collect(),
            })
            .filter(|o| {
                !o.changes.is_empty()
                    && from.is_none_or(|t| o.changes.iter().any(|(c, _)| c.timestamp() >= t))
            })
            .collect()
    }

    /// Change messages the app `app_key` was delivered (redeliveries and drilled duplicates
    /// included).
    pub fn messages_delivered(&self, platform: Platform, app_key: &str) -> u64 {
        self.sim.app(platform, app_key).map_or(0, |app| {
            self.sim.apps[app]
                .messages
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .delivered
        })
    }

    /// Turn all drills off.
    pub fn clear_drills(&self) {
        let _ = self.sim.set_drill(&DrillPatch {
            clear: true,
            ..Default::default()
        });
    }

    /// Zero the stats, the windows, the quota counters and the written items.
    pub fn reset(&self) {
        self.sim.reset();
    }

    /// Stop accepting, close every connection, wait for the server task.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
