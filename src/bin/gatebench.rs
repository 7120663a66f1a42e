//! Gate benchmarks and the load generator of the multi-process gate tests (BENCHMARKS.md,
//! "Gates"; tests/throttle_redis.rs spawns `gatebench hammer --worker`).
//!
//! ```text
//! cargo build --release --bin gatebench
//! target/release/gatebench --redis URL hammer [--processes 1,2,4,8] [--baseline] [--sim] [--sim-limit N]
//! target/release/gatebench --redis URL hammer --worker ...   # one worker: prints its admissions
//! target/release/gatebench [--redis URL] sim-bench [--limit 100] [--factor 2]
//! ```
//!
//! `hammer` acquires from one gate with `--concurrency` tasks per process; as a spawner it
//! starts N worker processes of itself on a shared wall-clock instant and prints a table
//! (acquisitions/s against a PING baseline, admitted vs R x T + B, the busiest second, and with
//! `--sim`/`--sim-limit` what an in-process simulator saw). `sim-bench` runs the adaptive rate in
//! one process against a simulator whose real limit is below the configured rate.

use clap::{Args, Parser, Subcommand};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use syncfleet::config::Config;
use syncfleet::platform::{Api, ApiRequest, Platform};
use syncfleet::throttle::{GateOutcome, GateRefusal, Gates};

#[derive(Debug, Parser)]
#[command(name = "gatebench", about = "Gate benchmarks and load generator")]
struct Cli {
    /// Redis URL of the fleet gates (`hammer` needs it; `sim-bench` without it uses embedded gates).
    #[arg(long, global = true, env = "SYNCFLEET_REDIS_URL")]
    redis: Option<String>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Load generator: acquire from one gate in N processes (needs --redis).
    Hammer(HammerArgs),
    /// The adaptive rate against the in-process simulator, one process.
    SimBench(SimBenchArgs),
}

fn main() {
    let cli = Cli::parse();
    syncfleet::logging::init_with_default(syncfleet::logging::LogFormat::Text, "info");
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    let result = runtime.block_on(async {
        match &cli.cmd {
            Cmd::Hammer(a) => hammer(cli.redis.as_deref(), a).await,
            Cmd::SimBench(a) => sim_bench(cli.redis.as_deref(), a).await,
        }
    });
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn fmt_opt(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.1}")).unwrap_or_else(|| "-".into())
}

/// Hidden load generator. As a worker it acquires from one gate with `concurrency` tasks until
/// `--seconds` have passed and prints what it got; with `--processes` it spawns that many
/// workers of itself (for each count in the list) and prints a table.
#[derive(Debug, Args)]
struct HammerArgs {
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
    demo.client(Platform::Taobao, pc)
        .map_err(anyhow::Error::msg)
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

async fn hammer(redis: Option<&str>, a: &HammerArgs) -> anyhow::Result<()> {
    let url = redis
        .map(str::to_string)
        .ok_or_else(|| anyhow::anyhow!("hammer needs --redis URL"))?;
    if a.worker {
        hammer_worker(&url, a).await
    } else {
        hammer_spawn(&url, a).await
    }
}

fn hammer_config(a: &HammerArgs) -> anyhow::Result<Config> {
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
                match gates.acquire(platform, api, max_wait.min(left)).await {
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

/// Parsed output of one worker.
#[derive(Debug, Default)]
struct WorkerResult {
    admitted: u64,
    other: u64,
    times: Vec<u64>,
    ok_times: Vec<u64>,
}

fn parse_worker(out: &str) -> WorkerResult {
    let mut r = WorkerResult::default();
    for line in out.lines() {
        if let Some(t) = line.strip_prefix("a ") {
            if let Ok(t) = t.trim().parse() {
                r.times.push(t);
            }
        } else if let Some(t) = line.strip_prefix("s ") {
            if let Ok(t) = t.trim().parse() {
                r.ok_times.push(t);
            }
        } else if let Some(rest) = line.strip_prefix("done ") {
            for kv in rest.split_whitespace() {
                match kv.split_once('=') {
                    Some(("admitted", v)) => r.admitted = v.parse().unwrap_or(0),
                    Some(("other", v)) => r.other = v.parse().unwrap_or(0),
                    _ => {}
                }
            }
        }
    }
    r
}

/// Most admissions in any window of `window_us` (sorted input).
fn busiest_window(sorted: &[u64], window_us: u64) -> usize {
    let (mut best, mut lo) = (0, 0);
    for hi in 0..sorted.len() {
        while sorted[hi] - sorted[lo] >= window_us {
            lo += 1;
        }
        best = best.max(hi - lo + 1);
    }
    best
}

async fn run_workers(
    sim_endpoint: Option<&str>,
    url: &str,
    a: &HammerArgs,
    n: u32,
    mode: &str,
    namespace: &str,
) -> anyhow::Result<(Vec<WorkerResult>, u64)> {
    let exe = std::env::current_exe().map_err(anyhow::Error::new)?;
    // Half a second for the workers to start and connect before the common start.
    let start = now_us() + 500_000;
    let mut children = Vec::new();
    for _ in 0..n {
        let mut cmd = tokio::process::Command::new(&exe);
        cmd.arg("--redis").arg(url).args(["hammer", "--worker"]);
        cmd.args(["--platform", a.platform.as_str(), "--api", a.api.as_str()]);
        cmd.args([
            "--rate",
            &a.rate.to_string(),
            "--burst",
            &a.burst.to_string(),
        ]);
        cmd.args([
            "--concurrency",
            &a.concurrency.to_string(),
            "--seconds",
            &a.seconds.to_string(),
        ]);
        cmd.args([
            "--max-wait-ms",
            &a.max_wait_ms.to_string(),
            "--mode",
            mode,
            "--namespace",
            namespace,
        ]);
        cmd.args(["--start-at-us", &start.to_string()]);
        if a.timestamps || mode == "gate" {
            cmd.arg("--timestamps");
        }
        if let Some(e) = sim_endpoint {
            cmd.args(["--sim-endpoint", e]);
        }
        cmd.stdout(std::process::Stdio::piped()).kill_on_drop(true);
        children.push(
            cmd.spawn()
                .map_err(|e| anyhow::anyhow!(format!("spawning a worker: {e}")))?,
        );
    }
    let mut results = Vec::new();
    for c in children {
        let out = c.wait_with_output().await.map_err(anyhow::Error::new)?;
        if !out.status.success() {
            return Err(anyhow::anyhow!(format!(
                "a hammer worker failed: {}",
                out.status
            )));
        }
        results.push(parse_worker(&String::from_utf8_lossy(&out.stdout)));
    }
    Ok((results, start))
}

async fn hammer_spawn(url: &str, a: &HammerArgs) -> anyhow::Result<()> {
    if let Some(limit) = a.sim_limit {
        return hammer_adaptive(url, a, limit).await;
    }
    // The simulator's limits are far above the gate's: it only counts what arrives.
    let sim = if a.sim {
        let cfg = syncfleet::sim::SimConfig::demo().with_all_limits(1_000_000, 1_000_000_000);
        let addr = "127.0.0.1:0".parse().map_err(anyhow::Error::new)?;
        Some(syncfleet::sim::spawn(cfg, addr).await?)
    } else {
        None
    };
    let endpoint = sim.as_ref().map(|s| s.endpoint(Platform::Taobao));
    println!(
        "gate {}.{} rate {} burst {}, {} task(s) per process, {} s per run{}",
        a.platform,
        a.api,
        a.rate,
        a.burst,
        a.concurrency,
        a.seconds,
        if a.sim {
            ", each admission calls the simulator"
        } else {
            ""
        }
    );
    println!("| processes | PING/s | acquisitions/s | ratio | admitted | ideal R*T+B | admitted/ideal | busiest 1 s, gate side (cap B+R) | sim calls | sim busiest second | busy/errors |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for (i, &n) in a.processes.iter().enumerate() {
        let ping = if a.baseline {
            let (r, _) = run_workers(None, url, a, n, "ping", &a.namespace).await?;
            Some(r.iter().map(|w| w.admitted).sum::<u64>() as f64 / a.seconds)
        } else {
            None
        };
        if let Some(s) = &sim {
            s.reset();
        }
        // A fresh namespace per run: every run starts from a full bucket.
        let ns = format!("{}_{}_{}", a.namespace, std::process::id(), i);
        let (r, start) = run_workers(endpoint.as_deref(), url, a, n, "gate", &ns).await?;
        let other: u64 = r.iter().map(|w| w.other).sum();
        // Admissions inside the common window only: a worker that started late also ends late.
        let end = start + (a.seconds * 1e6) as u64;
        let mut times: Vec<u64> = r
            .into_iter()
            .flat_map(|w| w.times)
            .filter(|&t| t >= start && t <= end)
            .collect();
        times.sort_unstable();
        let admitted = times.len() as u64;
        let per_s = admitted as f64 / a.seconds;
        let ideal = a.rate * a.seconds + a.burst;
        let seen = sim.as_ref().and_then(|s| {
            s.stats()
                .for_platform(Platform::Taobao, Api::ItemGet)
                .map(|st| (st.calls, st.peak_per_second))
        });
        let dash = || "-".to_string();
        println!(
            "| {n} | {} | {per_s:.0} | {} | {admitted} | {ideal:.0} | {:.3} | {} (cap {:.0}) | {} | {} | {other} |",
            ping.map(|p| format!("{p:.0}")).unwrap_or_else(dash),
            ping.map(|p| format!("{:.2}", per_s / p)).unwrap_or_else(dash),
            admitted as f64 / ideal,
            busiest_window(&times, 1_000_000),
            a.burst + a.rate,
            seen.map(|s| s.0.to_string()).unwrap_or_else(dash),
            seen.map(|s| s.1.to_string()).unwrap_or_else(dash),
        );
    }
    Ok(())
}

/// Several worker processes against a simulator whose real limit is below the gate's rate:
/// the fleet-wide adaptive rate, rejections and the steady rate per process count.
async fn hammer_adaptive(url: &str, a: &HammerArgs, limit: u64) -> anyhow::Result<()> {
    let (p, api) = (Platform::Taobao, Api::ItemGet);
    let mut sim_cfg = syncfleet::sim::SimConfig::demo().with_limit(p, api, limit, 1_000_000_000);
    if let Some(l) = sim_cfg.limits.get_mut(&(p, api)) {
        l.latency_median_ms = 20;
        l.latency_p95_ms = 60;
    }
    let addr = "127.0.0.1:0".parse().map_err(anyhow::Error::new)?;
    let sim = syncfleet::sim::spawn(sim_cfg, addr).await?;
    let endpoint = sim.endpoint(p);
    let cfg = hammer_config(a)?;
    println!(
        "gate {p}.{api} rate {} burst {} (simulator limit {limit}/s, latency 20/60 ms), {} task(s) per process, {} s per run",
        a.rate, a.burst, a.concurrency, a.seconds
    );
    println!("| processes | sim calls | rejected (share) | sim busiest second | steady ok/s, last 10 s (/ limit) | whole-run ok/s | adaptive rate at the end (ceiling) |");
    println!("|---|---|---|---|---|---|---|");
    for (i, &n) in a.processes.iter().enumerate() {
        sim.reset();
        let ns = format!("{}_{}_a{}", a.namespace, std::process::id(), i);
        let (r, _) = run_workers(Some(&endpoint), url, a, n, "gate", &ns).await?;
        let mut oks: Vec<u64> = r.into_iter().flat_map(|w| w.ok_times).collect();
        oks.sort_unstable();
        let last = oks.last().copied().unwrap_or(0);
        let steady = oks.iter().filter(|&&t| t + 10_000_000 > last).count() as f64 / 10.0;
        let stats = sim.stats();
        let st = stats
            .for_platform(p, api)
            .ok_or_else(|| anyhow::anyhow!("the simulator saw no calls"))?;
        let rejected = st.rejected_limit + st.rejected_quota;
        let gates = Gates::redis_with_namespace(&cfg, url, &ns).await?;
        let snap = gates
            .snapshot()
            .await?
            .into_iter()
            .find(|s| s.platform == p && s.api == api);
        println!(
            "| {n} | {} | {rejected} ({:.2}%) | {} | {steady:.1} ({:.3}) | {:.1} | {} |",
            st.calls,
            100.0 * rejected as f64 / st.calls.max(1) as f64,
            st.peak_per_second,
            steady / limit as f64,
            st.ok as f64 / a.seconds,
            snap.map(|s| format!("{:.1} ({})", s.adaptive_rate, fmt_opt(s.ceiling)))
                .unwrap_or_else(|| "-".into()),
        );
    }
    sim.shutdown().await;
    Ok(())
}

/// The client configured at `factor` x the simulator's real per-second limit: does the adaptive
/// rate settle below the limit, how many calls are rejected, how much of the limit is used?
#[derive(Debug, Args)]
struct SimBenchArgs {
    /// The simulator's real per-second limit of taobao item_get.
    #[arg(long, default_value_t = 100)]
    pub limit: u64,
    /// Client rate = factor x limit.
    #[arg(long, default_value_t = 2.0)]
    pub factor: f64,
    /// Client burst (default: limit / 5).
    #[arg(long)]
    pub burst: Option<f64>,
    #[arg(long, default_value_t = 16)]
    pub concurrency: u32,
    #[arg(long, default_value_t = 30.0)]
    pub seconds: f64,
    /// The steady rate is measured over the last this many seconds.
    #[arg(long, default_value_t = 10.0)]
    pub steady_seconds: f64,
    /// Simulated latency median / p95, ms.
    #[arg(long, default_value_t = 20)]
    pub latency_ms: u64,
    #[arg(long, default_value_t = 60)]
    pub latency_p95_ms: u64,
    /// AIMD step (calls/s); default: the config's default (5% of the rate).
    #[arg(long)]
    pub aimd_step: Option<f64>,
    /// Consecutive successes per step; default: the config's default.
    #[arg(long)]
    pub aimd_successes: Option<u32>,
}

async fn sim_bench(redis: Option<&str>, a: &SimBenchArgs) -> anyhow::Result<()> {
    use syncfleet::sim::{self, SimConfig};

    let (p, api) = (Platform::Taobao, Api::ItemGet);
    let mut sim_cfg = SimConfig::demo().with_limit(p, api, a.limit, 100_000_000);
    if let Some(l) = sim_cfg.limits.get_mut(&(p, api)) {
        l.latency_median_ms = a.latency_ms;
        l.latency_p95_ms = a.latency_p95_ms.max(a.latency_ms);
    }
    let addr = "127.0.0.1:0".parse().map_err(anyhow::Error::new)?;
    let simh = sim::spawn(sim_cfg, addr).await?;
    let app = simh
        .config()
        .app(p)
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("simulator has no taobao app"))?;
    let rate = a.factor * a.limit as f64;
    let burst = a.burst.unwrap_or((a.limit as f64 / 5.0).max(1.0));
    let toml = format!(
        "[platforms.taobao]\nendpoint = \"{}\"\napp_key = \"{}\"\nsecret_env = \"UNUSED\"\nsign_method = \"md5\"\n\
         [gates.\"taobao.item_get\"]\nrate = {rate}\nburst = {burst}\nconcurrency = {}\nmax_wait_ms = 2000\n{}{}",
        simh.endpoint(p),
        app.app_key,
        a.concurrency,
        a.aimd_step.map(|s| format!("aimd_step = {s}\n")).unwrap_or_default(),
        a.aimd_successes.map(|n| format!("aimd_successes = {n}\n")).unwrap_or_default(),
    );
    let cfg = Config::parse(Path::new("<sim-bench>"), &toml)?;
    let pc = cfg
        .platform(p)
        .ok_or_else(|| anyhow::anyhow!("no taobao platform config"))?;
    let client = simh.config().client(p, pc).map_err(anyhow::Error::msg)?;
    let ns = format!("sf_simbench_{}", std::process::id());
    let gates = match redis {
        Some(url) => Gates::redis_with_namespace(&cfg, url, &ns).await?,
        None => Gates::embedded(&cfg),
    };
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(a.seconds);
    // Client-side successes per 100 ms slot, for the steady rate.
    let slots = Arc::new(Mutex::new(vec![
        0u64;
        (a.seconds * 10.0).ceil() as usize + 1
    ]));
    let mut tasks = Vec::new();
    for t in 0..a.concurrency {
        let (gates, client, slots) = (gates.clone(), client.clone(), slots.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = u64::from(t);
            loop {
                let left = end.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                match gates
                    .acquire(p, api, Duration::from_secs(2).min(left))
                    .await
                {
                    Ok(permit) => {
                        i += 1;
                        let req = ApiRequest::ItemGet {
                            item_id: (1 + i % 50_000).to_string(),
                        };
                        let res = client.call(&req, Duration::from_secs(6)).await;
                        if res.is_ok() {
                            let slot = (start.elapsed().as_millis() / 100) as usize;
                            if let Some(c) = slots
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .get_mut(slot)
                            {
                                *c += 1;
                            }
                        }
                        gates.report(p, api, GateOutcome::of(&res));
                        drop(permit);
                    }
                    Err(GateRefusal::RetryAt(d))
                    | Err(GateRefusal::Paused { remaining: d, .. })
                    | Err(GateRefusal::Unreachable { retry_in: d, .. }) => {
                        tokio::time::sleep(d.min(left)).await
                    }
                    Err(GateRefusal::Busy) => {}
                }
            }
        }));
    }
    // Sample the adaptive rate once a second.
    let mut trace = Vec::new();
    while Instant::now() < end {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if let Ok(s) = gates.snapshot().await {
            if let Some(s) = s.into_iter().find(|s| s.platform == p && s.api == api) {
                trace.push((s.adaptive_rate, s.ceiling));
            }
        }
    }
    for t in tasks {
        let _ = t.await;
    }
    gates.flush().await;
    let stats = simh.stats();
    let st = stats
        .for_platform(p, api)
        .ok_or_else(|| anyhow::anyhow!("simulator saw no calls"))?;
    let slots = slots.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let steady_from = ((a.seconds - a.steady_seconds).max(0.0) * 10.0) as usize;
    let steady_ok: u64 = slots
        .iter()
        .skip(steady_from)
        .take((a.steady_seconds * 10.0) as usize)
        .sum();
    let steady_rate = steady_ok as f64 / a.steady_seconds;
    let rejected = st.rejected_limit + st.rejected_quota;
    let g = cfg.gate(p, api);
    println!(
        "aimd: +{} per {} consecutive successes, halve on a rate limit, ceiling on a second hit within 5 s",
        g.aimd_step, g.aimd_successes
    );
    println!(
        "mode {} | sim limit {}/s | client rate {rate}/s burst {burst} concurrency {} | {} s, latency {}/{} ms",
        gates.mode(), a.limit, a.concurrency, a.seconds, a.latency_ms, a.latency_p95_ms
    );
    println!(
        "simulator: calls {} ok {} rejected {} ({:.3}% of calls) busiest second {} (limit {})",
        st.calls,
        st.ok,
        rejected,
        100.0 * rejected as f64 / st.calls.max(1) as f64,
        st.peak_per_second,
        a.limit
    );
    println!(
        "steady rate over the last {} s: {steady_rate:.1}/s = {:.3} of the limit; whole run {:.1}/s",
        a.steady_seconds,
        steady_rate / a.limit as f64,
        st.ok as f64 / a.seconds
    );
    let fmt_trace: Vec<String> = trace
        .iter()
        .map(|(r, c)| match c {
            Some(c) => format!("{r:.0}(c{c:.0})"),
            None => format!("{r:.0}"),
        })
        .collect();
    println!("adaptive rate each second: {}", fmt_trace.join(" "));
    let per_second: Vec<String> = slots
        .chunks(10)
        .map(|c| c.iter().sum::<u64>().to_string())
        .collect();
    println!("successful calls each second: {}", per_second.join(" "));
    simh.shutdown().await;
    Ok(())
}
