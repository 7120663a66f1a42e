//! `hammer`: the load generator's arguments, the gate config it builds, and one worker
//! process acquiring from the gate (optionally calling the simulator after each admission).

use crate::now_us;
use crate::spawn::hammer_spawn;
use clap::Args;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use syncfleet::config::Config;
use syncfleet::platform::{Api, ApiRequest, Platform};
use syncfleet::throttle::{GateOutcome, GateRefusal, Gates, Lane};

/// Hidden load generator. As a worker it acquires from one gate with `concurrency` tasks until
/// `--seconds` have passed and prints what it got; with `--processes` it spawns that many
/// workers of itself (for each count in the list) and prints a table.
#[derive(Debug, Args)]
pub(super) struct HammerArgs {
    #[arg(long, default_value = "taobao")]
    pub platform: Platform,
    #[arg(long, default_value = "item_get")]
    pub api: Api,
    #[arg(long, default_value_t = 100.0)]
    pub rate: f64,
    #[arg(long, default_value_t = 20.0)]
    pub burst: f64,
    /// Acquiring tasks per process.
    #[arg(long, default_value_t = 8)]
    pub concurrency: u32,
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    #[arg(long, default_value_t = 1000)]
    pub max_wait_ms: u64,
    /// `gate` (acquisitions) or `ping` (plain Redis round trips, the baseline).
    #[arg(long, default_value = "gate")]
    pub mode: String,
    /// Run as one worker (print results) instead of spawning workers.
    #[arg(long)]
    pub worker: bool,
    /// Worker: print each admission's wall-clock time (us since the epoch).
    #[arg(long)]
    pub timestamps: bool,
    /// Worker: start at this wall-clock time (us since the epoch), so workers start together.
    #[arg(long)]
    pub start_at_us: Option<u64>,
    /// Spawner: process counts to run, e.g. 1,2,4,8.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub processes: Vec<u32>,
    /// Spawner: also run the PING baseline with the same processes and tasks.
    #[arg(long)]
    pub baseline: bool,
    #[arg(long, env = "SYNCFLEET_GATE_NAMESPACE", default_value = "sf_hammer")]
    pub namespace: String,
    /// Spawner: run an in-process simulator; every admission calls it (taobao item_get), and
    /// the table shows the simulator's own count of the busiest wall-clock second.
    #[arg(long)]
    pub sim: bool,
    /// Spawner (implies --sim): the simulator's real per-second limit of taobao item_get, for
    /// the adaptive rate across processes (refused calls come back as bans and halve the rate).
    #[arg(long)]
    pub sim_limit: Option<u64>,
    /// Worker: the simulator's TOP endpoint to call after each admission.
    #[arg(long)]
    pub sim_endpoint: Option<String>,
}

/// A client of the simulator's demo taobao app (test-double credentials, not real ones).
fn sim_client(endpoint: &str) -> anyhow::Result<syncfleet::platform::PlatformClient> {
    let demo = syncfleet::sim::SimConfig::demo();
    let app = demo
        .app(Platform::Taobao)
        .ok_or_else(|| anyhow::anyhow!("no demo taobao app"))?;
    let toml = format!(
        "[platforms.taobao]\nendpoint = \"{endpoint}\"\napp_key = \"{}\"\nsecret_env = \"UNUSED\"\nsign_method = \"md5\"\n",
        app.app_key
    );
    let cfg = Config::parse(Path::new("<sim-client>"), &toml)?;
    let pc = cfg
        .platform(Platform::Taobao)
        .ok_or_else(|| anyhow::anyhow!("no taobao platform config"))?;
    demo.client(Platform::Taobao, &pc.client_options())
        .map_err(anyhow::Error::msg)
}

pub(super) async fn hammer(redis: Option<&str>, a: &HammerArgs) -> anyhow::Result<()> {
    let url = redis
        .map(str::to_string)
        .ok_or_else(|| anyhow::anyhow!("hammer needs --redis URL"))?;
    if a.worker {
        hammer_worker(&url, a).await
    } else {
        hammer_spawn(&url, a).await
    }
}

pub(super) fn hammer_config(a: &HammerArgs) -> anyhow::Result<Config> {
    let toml = format!(
        "[gates.\"{}.{}\"]\nrate = {}\nburst = {}\nconcurrency = {}\nmax_wait_ms = {}\n",
        a.platform, a.api, a.rate, a.burst, a.concurrency, a.max_wait_ms
    );
    Ok(Config::parse(Path::new("<hammer>"), &toml)?)
}

async fn hammer_worker(url: &str, a: &HammerArgs) -> anyhow::Result<()> {
    let cfg = hammer_config(a)?;
    let gates = Gates::redis_with_namespace(&cfg, url, &a.namespace).await?;
    let conn = redis::Client::open(url)
        .map_err(anyhow::Error::new)?
        .get_connection_manager()
        .await
        .map_err(anyhow::Error::new)?;
    // With --sim-endpoint every admission makes a real call to the simulator (its demo app).
    let client = match &a.sim_endpoint {
        Some(endpoint) => Some(sim_client(endpoint)?),
        None => None,
    };
    if let Some(start) = a.start_at_us {
        let wait = start.saturating_sub(now_us());
        tokio::time::sleep(Duration::from_micros(wait)).await;
    }
    let start_us = now_us();
    let end = Instant::now() + Duration::from_secs_f64(a.seconds);
    let admitted = Arc::new(Mutex::new(Vec::<u64>::new()));
    // Wall-clock times of the simulator calls that succeeded (with --sim-endpoint).
    let ok_times = Arc::new(Mutex::new(Vec::<u64>::new()));
    let counts = Arc::new(Mutex::new((0u64, 0u64, 0u64))); // ok, refused/paused, busy/errors
    let ping = a.mode == "ping";
    let mut tasks = Vec::new();
    for _ in 0..a.concurrency.max(1) {
        let gates = gates.clone();
        let mut conn = conn.clone();
        let admitted = admitted.clone();
        let counts = counts.clone();
        let (platform, api, keep) = (a.platform, a.api, a.timestamps);
        let max_wait = Duration::from_millis(a.max_wait_ms);
        let client = client.clone();
        let ok_times = ok_times.clone();
        tasks.push(tokio::spawn(async move {
            let (mut ok, mut refused, mut other, mut mine) = (0u64, 0u64, 0u64, Vec::new());
            let mut i = 0u64;
            let mut oks = Vec::new();
            loop {
                let left = end.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                if ping {
                    match redis::cmd("PING").query_async::<String>(&mut conn).await {
                        Ok(_) if Instant::now() <= end => ok += 1,
                        Ok(_) => {}
                        Err(_) => other += 1,
                    }
                    continue;
                }
                match gates
                    .acquire(platform, api, Lane::Bulk, max_wait.min(left))
                    .await
                {
                    Ok(_permit) => {
                        // Admissions after the end (a reservation that slept past it) do not count.
                        if Instant::now() <= end {
                            ok += 1;
                            if keep {
                                mine.push(now_us());
                            }
                            if let Some(client) = &client {
                                i += 1;
                                let req = ApiRequest::ItemGet {
                                    item_id: (1 + i % 50_000).to_string(),
                                };
                                let res = client.call(&req, Duration::from_secs(6)).await;
                                gates.report(platform, api, GateOutcome::of(&res));
                                match res {
                                    Ok(_) if keep => oks.push(now_us()),
                                    Ok(_) => {}
                                    Err(_) => other += 1,
                                }
                            }
                        }
                    }
                    Err(GateRefusal::Paused { remaining, .. }) => {
                        refused += 1;
                        tokio::time::sleep(remaining.min(left)).await;
                    }
                    // The gate's own state unreachable (a response timeout) is an error.
                    Err(GateRefusal::Unreachable { retry_in, .. }) => {
                        other += 1;
                        tokio::time::sleep(retry_in.min(left)).await;
                    }
                    Err(GateRefusal::RetryAt(d)) => {
                        refused += 1;
                        tokio::time::sleep(d.min(left)).await;
                    }
                    Err(GateRefusal::Busy) => other += 1,
                }
            }
            let mut c = counts.lock().unwrap_or_else(|e| e.into_inner());
            c.0 += ok;
            c.1 += refused;
            c.2 += other;
            admitted
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend(mine);
            ok_times
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend(oks);
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let (ok, refused, other) = *counts.lock().unwrap_or_else(|e| e.into_inner());
    let mut out = String::new();
    gates.flush().await;
    for t in admitted.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        out.push_str(&format!("a {t}\n"));
    }
    for t in ok_times.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        out.push_str(&format!("s {t}\n"));
    }
    out.push_str(&format!(
        "done start_us={start_us} admitted={ok} refused={refused} other={other}\n"
    ));
    print!("{out}");
    Ok(())
}
