//! The demo: the main job end to end in one process on the embedded default — the platform
//! simulator, the embedded queue (apalis-sqlite), embedded gates and the SQLite ledger — a
//! 1688 → Taobao listing job of N items, measured from the simulator's side.

use super::runtime::{Runtime, RuntimeError};
use crate::clock::{elapsed_since, monotonic_now};
use crate::config::listing_map::ListingMap;
use crate::config::{Config, ConfigError};
use crate::jobs::producer::{self, ProducerError};
use crate::jobs::spec::JobSpec;
use crate::link::gateway::Gateway;
use crate::link::shared::FleetLink;
use crate::platform::{Api, Platform, ShopListing};
use crate::queue::Shutdown;
use crate::sim::{self, SimConfig, SimError};
use crate::store::{CallReport, JobState, JobStatus, Store, StoreError};
use crate::throttle::Gates;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What the demo runs.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// Items in the listing job (1688 → Taobao).
    pub items: u64,
    /// Where the ledger and queue files go (recreated).
    pub dir: PathBuf,
    /// The ledger: `None` for a new SQLite file in `dir`; a `postgres://` URL puts it on a
    /// PostgreSQL server (a scratch database: the demo adds its job to what is there).
    pub ledger: Option<String>,
    /// Target duration: the simulator's per-second limit is scaled to items / this.
    pub target: Duration,
    /// Tasks a worker runs at once.
    pub concurrency: usize,
    /// Serve Prometheus metrics here during the run (metricsbench's "on" run).
    pub metrics_listen: Option<std::net::SocketAddr>,
}

/// One API's figures, measured at the simulator.
#[derive(Debug, Clone)]
pub struct ApiFigures {
    pub(crate) platform: Platform,
    pub(crate) api: Api,
    pub(crate) calls: u64,
    pub(crate) ok: u64,
    /// Calls the simulator refused for its per-second limit or daily quota.
    pub rejected: u64,
    pub(crate) duplicate_writes: u64,
    pub(crate) peak_per_second: u64,
    pub(crate) limit_per_second: u64,
}

/// What the demo measured.
#[derive(Debug, Clone)]
pub struct DemoReport {
    /// The job at the end, from the ledger: item counts per status, times and rate.
    pub status: JobStatus,
    pub(crate) calls: CallReport,
    /// Figures of the two APIs the job calls: 1688 `item_get` and Taobao `item_add`.
    pub apis: Vec<ApiFigures>,
    /// From the worker's start to the job's end as the ledger recorded it (`job_duration`).
    pub duration: Duration,
    /// Calls needed / the per-second limit: the fastest the job can physically go.
    pub physical_limit: Duration,
    /// Simulator-side calls / calls the limit allowed over the run, per API, the lower.
    pub quota_utilisation: f64,
    /// The ledger as named in messages (SQLite path, or Postgres URL without password).
    pub(crate) ledger: String,
}

/// The simulator's per-second limit for `items` in about `target`.
pub(crate) fn scaled_limit(items: u64, target: Duration) -> u64 {
    let secs = target.as_secs_f64().max(1.0);
    ((items as f64 / secs).ceil() as u64).clamp(20, 5_000)
}

/// Why the demo could not run to the end.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The demo folder could not be cleared.
    #[error("cannot clear {}: {error}", path.display())]
    Clear {
        /// The demo folder.
        path: PathBuf,
        /// Why removing it failed.
        error: std::io::Error,
    },
    /// The demo folder could not be created.
    #[error("cannot create {}: {error}", path.display())]
    Create {
        /// The demo folder.
        path: PathBuf,
        /// Why creating it failed.
        error: std::io::Error,
    },
    /// The generated client configuration was refused (a bug of the demo).
    #[error("demo config: {0}")]
    Config(ConfigError),
    /// The simulator could not start, or a client of it could not be built.
    #[error(transparent)]
    Sim(#[from] SimError),
    /// The ledger or the queue could not be opened.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// `--metrics-listen` could not be served.
    #[error(transparent)]
    Metrics(#[from] crate::app::metrics::MetricsError),
    /// The job could not be enqueued.
    #[error(transparent)]
    Producer(#[from] ProducerError),
    /// The ledger failed while the demo watched the job.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The gates could not be set up.
    #[error(transparent)]
    Gates(#[from] crate::throttle::GateError),
    /// The shipped listing map does not parse (a build defect).
    #[error("the simulator's listing map: {0}")]
    Map(String),
    /// The worker ended while items were still pending.
    #[error("the worker stopped before the job finished")]
    WorkerStopped,
}

/// The client configuration of the demo: the two gates set just under the app's granted
/// rate (what an operator writes from the platform console), a burst of 1 so no aligned
/// one-second window can exceed the grant, and concurrency well above rate x latency.
fn client_config(sim: &sim::SimHandle, limit: u64, dir: &Path) -> Result<Config, DemoError> {
    // 0.2% under the grant (3 calls/s at the default scale). The gate's send-time check keeps
    // late wakers from bunching into one aligned second and holds calls out of the last
    // milliseconds of each second, so a call still in transit at a boundary is not counted
    // in the next one; a rejection costs a measured rate cut and, on TOP, a one-second ban
    // (BENCHMARKS.md).
    let rate = limit as f64 * 0.998;
    let mut text = String::new();
    for (platform, app) in [
        (Platform::Alibaba, "1000001"),
        (Platform::Taobao, "10000001"),
    ] {
        text.push_str(&format!(
            "[platforms.{platform}]\nendpoint = \"{}\"\napp_key = \"{app}\"\nsecret_env = \"SYNCFLEET_DEMO_{}_SECRET\"\nmax_in_flight = 256\n\n",
            sim.endpoint(platform),
            platform.as_str().to_uppercase()
        ));
    }
    text.push_str(&format!(
        "[gates.default]\nrate = {rate}\nburst = 1\nconcurrency = 128\nmax_wait_ms = 5000\n\n[queue]\nchunk_size = 100\npoll_interval_ms = 20\n"
    ));
    Config::parse(&dir.join("demo-client.toml"), &text).map_err(DemoError::Config)
}

/// The listing map of the simulator's catalog to Taobao, as shipped in `maps/`.
pub fn sim_listing_map() -> Result<ListingMap, DemoError> {
    const TEXT: &str = include_str!("../../maps/sim-1688-taobao.toml");
    ListingMap::parse(std::path::Path::new("maps/sim-1688-taobao.toml"), TEXT)
        .map_err(|e| DemoError::Map(e.to_string()))
}

/// The listing of the simulator's 1688 catalog to the default Taobao shop (items given at
/// enqueue), mapped by the shipped map, from a shop in Hangzhou.
pub fn sim_listing(relist: bool) -> Result<JobSpec, DemoError> {
    Ok(JobSpec::Listing {
        from: Platform::Alibaba,
        to: Platform::Taobao,
        items_file: None,
        items: Vec::new(),
        to_shop: crate::jobs::spec::DEFAULT_SHOP.into(),
        relist,
        allow_stale_source_s: None,
        lane: Default::default(),
        map_file: None,
        map: Some(Box::new(sim_listing_map()?)),
        shop_listing: ShopListing {
            location_state: "浙江".into(),
            location_city: "杭州".into(),
            item_type: "fixed".into(),
            stuff_status: "new".into(),
        },
    })
}

/// A gateway whose credentials come from the simulator's apps (the demo, tests and
/// benchmarks play the operator who holds them), not from environment variables.
pub fn sim_gateway(
    cfg: &Config,
    sim_cfg: &SimConfig,
    store: &Store,
    gates: Gates,
    fleet: Option<FleetLink>,
) -> Result<Gateway, SimError> {
    let mut b = Gateway::builder(cfg.link.clone(), gates).store(store.clone());
    for (&platform, pc) in &cfg.platforms {
        b = b.platform(sim_cfg.client(platform, &pc.client_options())?, pc);
    }
    if let Some(f) = fleet {
        b = b.fleet(f);
    }
    Ok(b.build())
}

/// The job's run, from the worker's start to the job's end as the ledger recorded it (the
/// commit that finished its last item), not to when the demo's poll saw it: a poll waits its
/// turn behind the worker's writes, up to 100 ms at the end of a run. `seen` (the poll's
/// reading) bounds it, and is the answer when the ledger's clock is not this host's (a
/// PostgreSQL ledger elsewhere) or the job has no end time.
fn job_duration(
    started: chrono::DateTime<chrono::Utc>,
    finished: Option<chrono::DateTime<chrono::Utc>>,
    seen: Duration,
) -> Duration {
    finished
        .and_then(|f| (f - started).to_std().ok())
        .filter(|d| *d <= seen)
        .unwrap_or(seen)
}

/// Run the demo; `on_progress(status)` is called about every 2 s.
pub async fn run(
    opts: &DemoOptions,
    mut on_progress: impl FnMut(&JobStatus),
) -> Result<DemoReport, DemoError> {
    if opts.dir.exists() {
        std::fs::remove_dir_all(&opts.dir).map_err(|error| DemoError::Clear {
            path: opts.dir.clone(),
            error,
        })?;
    }
    std::fs::create_dir_all(&opts.dir).map_err(|error| DemoError::Create {
        path: opts.dir.clone(),
        error,
    })?;
    let limit = scaled_limit(opts.items, opts.target);
    let mut sim_cfg = SimConfig::demo();
    sim_cfg.catalog_items = sim_cfg.catalog_items.max(opts.items);
    for (platform, api) in [
        (Platform::Alibaba, Api::ItemGet),
        (Platform::Taobao, Api::ItemAdd),
    ] {
        let l = sim_cfg
            .limits
            .entry((platform, api))
            .or_insert(sim_cfg.default_limit);
        l.per_second = limit;
        l.daily = l.daily.max(opts.items * 2);
    }
    let loopback = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let sim = sim::spawn_on_own_thread(sim_cfg.clone(), loopback).await?;
    let cfg = client_config(&sim, limit, &opts.dir)?;
    let sqlite_ledger = opts.dir.join("ledger.db");
    let db_url = match &opts.ledger {
        Some(url) => url.clone(),
        None => format!("sqlite://{}", sqlite_ledger.display()),
    };
    let rt = Runtime::create_with_queue_file(cfg, &db_url, &opts.dir.join("queue.db")).await?;
    let gates = rt
        .topology
        .gates(&rt.cfg, crate::topology::FLEET_NAMESPACE)
        .await?;
    let gateway = sim_gateway(&rt.cfg, &sim_cfg, &rt.store, gates.clone(), None)?;
    // Stopped when dropped at the end of the run.
    let _metrics = crate::app::metrics::serve_if(opts.metrics_listen, || {
        rt.metrics_sources(gates, gateway.clone())
    })
    .await?;

    let keys: Vec<String> = (1..=opts.items).map(|i| i.to_string()).collect();
    // A demo lists afresh on every run (a new simulator each time), even on a ledger that
    // keeps the listings of an earlier run (`--ledger postgres://...`).
    let spec = sim_listing(true)?;
    let enq = producer::enqueue(
        &rt.store,
        &rt.queue,
        rt.cfg.queue.chunk_size,
        &spec,
        &keys,
        |_| {},
    )
    .await?;

    let shutdown = Shutdown::new();
    let started = monotonic_now();
    let started_wall = crate::clock::Clock::system().utc();
    let worker = {
        let (rt, gateway, shutdown) = (rt.clone(), gateway.clone(), shutdown.clone());
        let concurrency = opts.concurrency;
        tokio::spawn(async move { rt.work(gateway, concurrency, shutdown).await })
    };
    // Poll the job's state (one row) every 25 ms; count its items (a scan of the job) only for
    // the progress line every 2 s: on PostgreSQL a count every 200 ms took CPU from the server
    // the worker writes to.
    let mut last_print = monotonic_now();
    loop {
        tokio::time::sleep(Duration::from_millis(25)).await;
        if rt.store.job_state(enq.job_id).await? == JobState::Finished {
            break;
        }
        if elapsed_since(last_print) >= Duration::from_secs(2) {
            on_progress(&rt.store.job_status(enq.job_id).await?);
            last_print = monotonic_now();
        }
        if worker.is_finished() {
            return Err(DemoError::WorkerStopped);
        }
    }
    let seen = elapsed_since(started);
    let status = rt.store.job_status(enq.job_id).await?;
    let duration = job_duration(started_wall, status.job.finished_at, seen);
    shutdown.trigger();
    match worker.await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::warn!("worker ended with an error: {e:#}"),
        Err(e) => tracing::warn!("worker task failed: {e}"),
    }
    gateway.flush().await;
    let stats = sim.stats();
    let apis: Vec<ApiFigures> = [
        (Platform::Alibaba, Api::ItemGet),
        (Platform::Taobao, Api::ItemAdd),
    ]
    .into_iter()
    .filter_map(|(p, a)| stats.for_platform(p, a))
    .map(|s| ApiFigures {
        platform: s.platform,
        api: s.api,
        calls: s.calls,
        ok: s.ok,
        rejected: s.rejected_limit + s.rejected_quota,
        duplicate_writes: s.duplicate_writes,
        peak_per_second: s.peak_per_second,
        limit_per_second: s.limit_per_second,
    })
    .collect();
    let allowed = limit as f64 * duration.as_secs_f64();
    let quota_utilisation = apis
        .iter()
        .map(|a| a.calls as f64 / allowed)
        .fold(f64::INFINITY, f64::min);
    let physical_limit = Duration::from_secs_f64(opts.items as f64 / limit as f64);
    let calls = rt
        .store
        // From the job's own first minute: a reused (Postgres) ledger holds earlier runs.
        .report_calls(
            status.job.created_at,
            crate::clock::Clock::system().utc() + chrono::Duration::minutes(1),
        )
        .await?;
    let status = rt.store.job_status(enq.job_id).await.unwrap_or(status);
    sim.shutdown().await;
    Ok(DemoReport {
        status,
        calls,
        apis,
        duration,
        physical_limit,
        quota_utilisation: if quota_utilisation.is_finite() {
            quota_utilisation
        } else {
            0.0
        },
        ledger: rt.store.db_name().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::job_duration;
    use chrono::{TimeZone, Utc};
    use std::time::Duration;

    #[test]
    fn a_run_ends_where_the_ledger_recorded_the_job_finished() {
        let start = Utc
            .timestamp_millis_opt(1_000_000)
            .single()
            .expect("a time");
        let seen = Duration::from_millis(60_300);
        let finished = Some(start + chrono::Duration::milliseconds(60_180));
        assert_eq!(
            job_duration(start, finished, seen),
            Duration::from_millis(60_180)
        );
        // No end time, or one the poll cannot have seen yet (another host's clock ahead),
        // or before the start (a clock behind): the poll's reading.
        assert_eq!(job_duration(start, None, seen), seen);
        let ahead = Some(start + chrono::Duration::milliseconds(61_000));
        assert_eq!(job_duration(start, ahead, seen), seen);
        let behind = Some(start - chrono::Duration::milliseconds(5));
        assert_eq!(job_duration(start, behind, seen), seen);
    }
}
