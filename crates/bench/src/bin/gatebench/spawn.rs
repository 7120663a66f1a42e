//! The `hammer` spawner: starts worker processes of this binary on a common instant, reads
//! their admissions back, and prints the tables (plain gate, and the adaptive rate against a
//! limited simulator).

use crate::hammer::{hammer_config, HammerArgs};
use crate::now_us;
use syncfleet::platform::{Api, Platform};
use syncfleet::throttle::Gates;

fn fmt_opt(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.1}")).unwrap_or_else(|| "-".into())
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

pub(super) async fn hammer_spawn(url: &str, a: &HammerArgs) -> anyhow::Result<()> {
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
