//! `sim-bench`: the adaptive rate in one process against a simulator whose real limit is
//! below the configured rate.

use clap::Args;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use syncfleet::config::Config;
use syncfleet::platform::{Api, ApiRequest, Platform};
use syncfleet::throttle::{GateOutcome, GateRefusal, Gates, Lane};

/// The client configured at `factor` x the simulator's real per-second limit: does the adaptive
/// rate settle below the limit, how many calls are rejected, how much of the limit is used?
#[derive(Debug, Args)]
pub(super) struct SimBenchArgs {
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

pub(super) async fn sim_bench(redis: Option<&str>, a: &SimBenchArgs) -> anyhow::Result<()> {
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
    let client = simh
        .config()
        .client(p, &pc.client_options())
        .map_err(anyhow::Error::msg)?;
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
                    .acquire(p, api, Lane::Bulk, Duration::from_secs(2).min(left))
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
        if redis.is_some() { "redis" } else { "embedded" }, a.limit, a.concurrency, a.seconds, a.latency_ms, a.latency_p95_ms
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
