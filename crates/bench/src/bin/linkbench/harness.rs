//! What every benchmark shares: the simulator, the config and clients it is called with, the
//! naive baseline client, and the open-loop driver with its latency figures.

use crate::TB;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use syncfleet::config::Config;
use syncfleet::link::backoff::Backoff;
use syncfleet::link::{FleetLink, Gateway};
use syncfleet::platform::{Api, ApiRequest, ErrorClass, PlatformClient};
use syncfleet::sim::{self, SimConfig, SimHandle};
use syncfleet::throttle::Gates;

pub(super) fn config(endpoint: &str, extra: &str) -> anyhow::Result<Config> {
    let text = format!(
        r#"
[platforms.taobao]
endpoint = "{endpoint}"
app_key = "10000001"
secret_env = "LINKBENCH_UNUSED"

[gates.default]
rate = 100000
burst = 100000
concurrency = 256
max_wait_ms = 5000

{extra}
"#
    );
    Config::parse(Path::new("linkbench.toml"), &text).map_err(|e| anyhow::anyhow!("{e}"))
}

fn client(cfg: &Config) -> anyhow::Result<PlatformClient> {
    let demo = SimConfig::demo();
    let pc = cfg
        .platform(TB)
        .ok_or_else(|| anyhow::anyhow!("no taobao config"))?;
    demo.client(TB, &pc.client_options())
        .map_err(anyhow::Error::msg)
}

pub(super) fn gateway(
    cfg: &Config,
    fleet: Option<FleetLink>,
    gates: Gates,
) -> anyhow::Result<Gateway> {
    let pc = cfg
        .platform(TB)
        .ok_or_else(|| anyhow::anyhow!("no taobao config"))?;
    let mut b = Gateway::builder(cfg.link.clone(), gates).platform(client(cfg)?, pc);
    if let Some(f) = fleet {
        b = b.fleet(f);
    }
    Ok(b.build())
}

/// The baseline: 3 attempts, the same backoff, nothing else.
pub(super) struct Naive {
    client: PlatformClient,
    backoff: Backoff,
    read_timeout: Duration,
}

impl Naive {
    pub(super) fn new(cfg: &Config) -> anyhow::Result<Naive> {
        Ok(Naive {
            client: client(cfg)?,
            backoff: Backoff::from_config(&cfg.link.retry),
            read_timeout: Duration::from_millis(
                cfg.link.timeouts.for_class(Api::ItemGet.class()).read_ms,
            ),
        })
    }

    pub(super) async fn call(&self, req: &ApiRequest) -> bool {
        for attempt in 0..3u32 {
            match self.client.call(req, self.read_timeout).await {
                Ok(_) => return true,
                Err(e) if matches!(e.class, ErrorClass::Fatal | ErrorClass::Unknown) => {
                    return false
                }
                Err(_) if attempt < 2 => tokio::time::sleep(self.backoff.delay(attempt)).await,
                Err(_) => return false,
            }
        }
        false
    }
}

pub(super) async fn start_sim(latency: (u64, u64)) -> anyhow::Result<SimHandle> {
    let mut cfg = SimConfig::demo().with_all_limits(10_000_000, 1_000_000_000);
    cfg.default_limit.latency_median_ms = latency.0;
    cfg.default_limit.latency_p95_ms = latency.1;
    cfg.idle_hold_s = 60;
    Ok(sim::spawn(cfg, "127.0.0.1:0".parse()?).await?)
}

pub(super) fn sim_calls(sim: &SimHandle) -> u64 {
    sim.stats()
        .for_platform(TB, Api::ItemGet)
        .map_or(0, |s| s.calls)
}

pub(super) fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

/// Start `rate` logical calls per second for `seconds` (open loop) and collect latencies.
pub(super) async fn open_loop<F, Fut>(rate: u64, seconds: u64, call: F) -> (Vec<Duration>, u64)
where
    F: Fn(u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = bool> + Send + 'static,
{
    let lat = Arc::new(Mutex::new(Vec::new()));
    let ok = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut tick = tokio::time::interval(Duration::from_nanos(1_000_000_000 / rate.max(1)));
    let mut tasks = Vec::new();
    for i in 0..rate * seconds {
        tick.tick().await;
        let (lat, ok, call) = (lat.clone(), ok.clone(), call.clone());
        tasks.push(tokio::spawn(async move {
            let t = Instant::now();
            if call(i).await {
                ok.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            if let Ok(mut l) = lat.lock() {
                l.push(t.elapsed());
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let mut v = lat.lock().map(|l| l.clone()).unwrap_or_default();
    v.sort();
    (v, ok.load(std::sync::atomic::Ordering::Relaxed))
}

pub(super) fn line(name: &str, lat: &[Duration], ok: u64, sim: u64) {
    println!(
        "{name:<10} calls {:>5}  ok {:>5}  p50 {:>8.1} ms  p99 {:>8.1} ms  max {:>8.1} ms  simulator calls {:>6} ({:.2} per call)",
        lat.len(),
        ok,
        pct(lat, 0.5).as_secs_f64() * 1000.0,
        pct(lat, 0.99).as_secs_f64() * 1000.0,
        lat.last().copied().unwrap_or_default().as_secs_f64() * 1000.0,
        sim,
        sim as f64 / lat.len().max(1) as f64
    );
}
