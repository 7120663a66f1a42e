//! Link-layer benchmarks (BENCHMARKS.md, link section) and the second-worker process of the
//! fleet breaker test (tests/link_process.rs).
//!
//! Every figure is measured against the in-process simulator in the same run as its baseline,
//! a naive client: the same signed HTTP client and read timeout, up to 3 attempts with the
//! same full-jitter backoff, but no breaker, no retry budget, no stale degrade.
//!
//! ```text
//! cargo build --release --bin linkbench
//! target/release/linkbench outage [--rate 80] [--seconds 25]
//! target/release/linkbench amplification [--calls 3000] [--concurrency 16]
//! target/release/linkbench recovery [--rate 100] [--outage-s 5]
//! target/release/linkbench worker --endpoint URL --redis URL --namespace NS --seconds S --every-ms M
//! ```

use clap::{Parser, Subcommand};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use syncfleet::config::{Config, LinkConfig};
use syncfleet::link::backoff::Backoff;
use syncfleet::link::{CallContext, FleetLink, Gateway};
use syncfleet::platform::{Api, ApiRequest, ErrorClass, Platform, PlatformClient};
use syncfleet::sim::{self, DrillPatch, SimConfig, SimHandle};
use syncfleet::throttle::Gates;

const TB: Platform = Platform::Taobao;

#[derive(Parser)]
#[command(
    name = "linkbench",
    about = "Link-layer benchmarks against the simulator"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// p99 logical-call latency during an outage drill: gateway vs naive client.
    Outage {
        /// Logical calls started per second (open loop).
        #[arg(long, default_value_t = 80)]
        rate: u64,
        #[arg(long, default_value_t = 25)]
        seconds: u64,
        /// Hold calls instead of failing them at once (`outage_hang`): a hanging upstream.
        #[arg(long)]
        hang: bool,
    },
    /// Retry amplification (simulator calls / logical calls) under a 10% error drill.
    Amplification {
        #[arg(long, default_value_t = 3000)]
        calls: u64,
        #[arg(long, default_value_t = 16)]
        concurrency: usize,
        /// Error ratio of the drill.
        #[arg(long, default_value_t = 0.1)]
        errors: f64,
    },
    /// Time from the upstream's recovery after an outage drill to the first successful call
    /// and to the success rate being back at >= 90% of before: the growing open time against
    /// a same-run baseline whose breaker stays open for the full `open_s`.
    Recovery {
        /// Logical calls started per second (open loop).
        #[arg(long, default_value_t = 100)]
        rate: u64,
        /// Healthy seconds before the drill (the reference rate).
        #[arg(long, default_value_t = 3)]
        before_s: u64,
        #[arg(long, default_value_t = 5)]
        outage_s: u64,
        /// Give up on a variant this long after the recovery.
        #[arg(long, default_value_t = 40)]
        after_s: u64,
    },
    /// A worker process for the fleet test: calls item_get every `every_ms` through a fleet
    /// gateway and prints `<unix_ms> <ok|kind>` per call.
    Worker {
        #[arg(long)]
        endpoint: String,
        #[arg(long)]
        redis: String,
        #[arg(long)]
        namespace: String,
        #[arg(long, default_value_t = 5)]
        seconds: u64,
        #[arg(long, default_value_t = 20)]
        every_ms: u64,
        /// Breaker minimum samples of this worker (high: only a fleet trip can stop it).
        #[arg(long, default_value_t = 20)]
        min_samples: u32,
    },
}

fn config(endpoint: &str, extra: &str) -> anyhow::Result<Config> {
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
    demo.client(TB, pc).map_err(anyhow::Error::msg)
}

fn gateway(cfg: &Config, fleet: Option<FleetLink>, gates: Gates) -> anyhow::Result<Gateway> {
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
struct Naive {
    client: PlatformClient,
    backoff: Backoff,
    read_timeout: Duration,
}

impl Naive {
    fn new(cfg: &Config) -> anyhow::Result<Naive> {
        Ok(Naive {
            client: client(cfg)?,
            backoff: Backoff::from_config(&cfg.link.retry),
            read_timeout: Duration::from_millis(
                cfg.link.timeouts.for_class(Api::ItemGet.class()).read_ms,
            ),
        })
    }

    async fn call(&self, req: &ApiRequest) -> bool {
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

async fn start_sim(latency: (u64, u64)) -> anyhow::Result<SimHandle> {
    let mut cfg = SimConfig::demo().with_all_limits(10_000_000, 1_000_000_000);
    cfg.default_limit.latency_median_ms = latency.0;
    cfg.default_limit.latency_p95_ms = latency.1;
    cfg.idle_hold_s = 60;
    Ok(sim::spawn(cfg, "127.0.0.1:0".parse()?).await?)
}

fn sim_calls(sim: &SimHandle) -> u64 {
    sim.stats()
        .for_platform(TB, Api::ItemGet)
        .map_or(0, |s| s.calls)
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

/// Start `rate` logical calls per second for `seconds` (open loop) and collect latencies.
async fn open_loop<F, Fut>(rate: u64, seconds: u64, call: F) -> (Vec<Duration>, u64)
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

fn line(name: &str, lat: &[Duration], ok: u64, sim: u64) {
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

async fn outage(rate: u64, seconds: u64, hang: bool) -> anyhow::Result<()> {
    let sim = start_sim((20, 60)).await?;
    let cfg = config(&sim.endpoint(TB), "")?;
    println!(
        "outage drill{}: {rate} logical item_get calls/s for {seconds} s, sim latency median 20 ms p95 60 ms, read timeout {} ms",
        if hang { " (hanging upstream)" } else { "" },
        cfg.link.timeouts.detail.read_ms
    );
    let drill = DrillPatch {
        outage: Some(true),
        outage_hang: Some(hang),
        ..Default::default()
    };
    // Baseline first, on a fresh simulator state.
    let naive = Arc::new(Naive::new(&cfg)?);
    sim.set_drill(drill.clone()).map_err(anyhow::Error::msg)?;
    let (lat, ok) = open_loop(rate, seconds, move |i| {
        let naive = naive.clone();
        async move {
            naive
                .call(&ApiRequest::ItemGet {
                    item_id: (i + 1).to_string(),
                })
                .await
        }
    })
    .await;
    let baseline_p99 = pct(&lat, 0.99);
    line("naive", &lat, ok, sim_calls(&sim));

    sim.clear_drills();
    sim.reset();
    let gw = gateway(&cfg, None, Gates::embedded(&cfg))?;
    sim.set_drill(drill).map_err(anyhow::Error::msg)?;
    let link = cfg.link.clone();
    let g = gw.clone();
    let (lat, ok) = open_loop(rate, seconds, move |i| {
        let (gw, link) = (g.clone(), link.clone());
        async move {
            let ctx = CallContext::for_task(&link);
            gw.call(
                TB,
                ApiRequest::ItemGet {
                    item_id: (i + 1).to_string(),
                },
                &ctx,
            )
            .await
            .is_ok()
        }
    })
    .await;
    let p99 = pct(&lat, 0.99);
    line("gateway", &lat, ok, sim_calls(&sim));
    let snap = gw.snapshot().total;
    println!(
        "gateway: breaker rejects {}, availability {:.3}; p99 ratio gateway/naive = {:.3}",
        snap.breaker_rejects,
        snap.availability(),
        p99.as_secs_f64() / baseline_p99.as_secs_f64().max(1e-9)
    );
    sim.shutdown().await;
    Ok(())
}

async fn amplification(calls: u64, concurrency: usize, errors: f64) -> anyhow::Result<()> {
    use futures::stream::{self, StreamExt};
    let sim = start_sim((0, 0)).await?;
    println!(
        "{:.0}% error drill: {calls} logical item_get calls, {concurrency} at a time",
        errors * 100.0
    );
    let drill = DrillPatch {
        error_ratio: Some(errors),
        ..Default::default()
    };
    let run =
        |name: &'static str,
         f: Arc<dyn Fn(u64) -> futures::future::BoxFuture<'static, bool> + Send + Sync>| {
            let sim = &sim;
            let drill = drill.clone();
            async move {
                sim.clear_drills();
                sim.reset();
                sim.set_drill(drill).map_err(anyhow::Error::msg)?;
                let ok = stream::iter(0..calls)
                    .map(|i| f(i))
                    .buffer_unordered(concurrency)
                    .filter(|ok| futures::future::ready(*ok))
                    .count()
                    .await;
                let amp = sim_calls(sim) as f64 / calls as f64;
                println!(
                    "{name:<28} amplification {amp:.3}x  success {:.4}",
                    ok as f64 / calls as f64
                );
                anyhow::Ok(amp)
            }
        };
    let cfg = config(&sim.endpoint(TB), "")?;
    let naive = Arc::new(Naive::new(&cfg)?);
    let base = run(
        "naive 3-attempt client",
        Arc::new(move |i| {
            let n = naive.clone();
            Box::pin(async move {
                n.call(&ApiRequest::ItemGet {
                    item_id: (i + 1).to_string(),
                })
                .await
            })
        }),
    )
    .await?;
    for (name, ratio) in [
        ("gateway (budget_ratio 0.10)", 0.10),
        ("gateway (budget_ratio 0.05)", 0.05),
    ] {
        let cfg = config(
            &sim.endpoint(TB),
            &format!("[link.retry]\nbudget_ratio = {ratio}\n"),
        )?;
        let gw = gateway(&cfg, None, Gates::embedded(&cfg))?;
        let link: LinkConfig = cfg.link.clone();
        let amp = run(
            name,
            Arc::new(move |i| {
                let (gw, link) = (gw.clone(), link.clone());
                Box::pin(async move {
                    let ctx = CallContext::for_task(&link);
                    gw.call(
                        TB,
                        ApiRequest::ItemGet {
                            item_id: (i + 1).to_string(),
                        },
                        &ctx,
                    )
                    .await
                    .is_ok()
                })
            }),
        )
        .await?;
        println!("{:<28} ratio to naive {:.3}", "", amp / base);
    }
    sim.shutdown().await;
    Ok(())
}

/// One finished logical call of the recovery drive.
#[derive(Clone, Copy)]
struct Done {
    at: Instant,
    ok: bool,
}

/// What one variant of the recovery drill measured.
struct Recovered {
    /// Successful calls per second before the drill.
    before_rate: f64,
    /// From the drill's end to the first successful call.
    first_ok: Option<Duration>,
    /// From the drill's end to the first successful call that starts a `RATE_WINDOW` with
    /// >= 90% of the rate before.
    rate_back: Option<Duration>,
    /// Simulator calls while the drill was on (what the outage cost the upstream).
    sim_calls_down: u64,
}

/// Window the recovered rate is measured over.
const RATE_WINDOW: Duration = Duration::from_millis(500);

fn recovery_figures(done: &[Done], start: Instant, down: Instant, up: Instant) -> Recovered {
    let before_rate = done
        .iter()
        .filter(|d| d.ok && d.at >= start + Duration::from_secs(1) && d.at < down)
        .count() as f64
        / (down - start - Duration::from_secs(1)).as_secs_f64();
    let first_ok = done
        .iter()
        .filter(|d| d.ok && d.at >= up)
        .map(|d| d.at - up)
        .min();
    let want = (0.9 * before_rate * RATE_WINDOW.as_secs_f64()).ceil() as usize;
    let last = done.iter().map(|d| d.at).max().unwrap_or(up);
    let mut oks: Vec<Instant> = done
        .iter()
        .filter(|d| d.ok && d.at >= up)
        .map(|d| d.at)
        .collect();
    oks.sort();
    // Windows start at a successful call (so the figure is never before the first one); only
    // windows that ended before the drive did are judged.
    let rate_back = oks
        .iter()
        .enumerate()
        .take_while(|(_, &t)| t + RATE_WINDOW <= last)
        .find(|(i, &t)| oks[*i..].partition_point(|&o| o < t + RATE_WINDOW) >= want.max(1))
        .map(|(_, &t)| t - up);
    Recovered {
        before_rate,
        first_ok,
        rate_back,
        sim_calls_down: 0,
    }
}

async fn recovery_variant(
    sim: &SimHandle,
    name: &str,
    extra: &str,
    rate: u64,
    phases: (u64, u64, u64),
) -> anyhow::Result<Recovered> {
    let (before_s, outage_s, after_s) = phases;
    sim.clear_drills();
    sim.reset();
    let cfg = config(&sim.endpoint(TB), extra)?;
    let gw = gateway(&cfg, None, Gates::embedded(&cfg))?;
    let done: Arc<Mutex<Vec<Done>>> = Arc::default();
    let start = Instant::now();
    let down = start + Duration::from_secs(before_s);
    let up = down + Duration::from_secs(outage_s);
    let give_up = up + Duration::from_secs(after_s);
    let mut tick = tokio::time::interval(Duration::from_nanos(1_000_000_000 / rate.max(1)));
    let (mut drilled, mut cleared) = (false, false);
    let (mut calls_at_down, mut calls_at_up) = (0, 0);
    let mut i = 0u64;
    let mut tasks = Vec::new();
    loop {
        tick.tick().await;
        let now = Instant::now();
        if !drilled && now >= down {
            calls_at_down = sim_calls(sim);
            sim.set_drill(DrillPatch {
                outage: Some(true),
                ..Default::default()
            })
            .map_err(anyhow::Error::msg)?;
            drilled = true;
        }
        if !cleared && now >= up {
            calls_at_up = sim_calls(sim);
            sim.clear_drills();
            cleared = true;
        }
        // Stop a second after the rate is back (or at the limit): the figures are in.
        if i.is_multiple_of(rate.max(1)) && cleared {
            let seen = done.lock().map(|d| d.clone()).unwrap_or_default();
            let r = recovery_figures(&seen, start, down, up);
            if r.rate_back
                .is_some_and(|t| now > up + t + RATE_WINDOW + Duration::from_secs(1))
            {
                break;
            }
        }
        if now >= give_up {
            break;
        }
        i += 1;
        let (gw, link, done) = (gw.clone(), cfg.link.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let ctx = CallContext::for_task(&link);
            let ok = gw
                .call(
                    TB,
                    ApiRequest::ItemGet {
                        item_id: (i % 1000 + 1).to_string(),
                    },
                    &ctx,
                )
                .await
                .is_ok_and(|r| r.stale.is_none());
            if let Ok(mut d) = done.lock() {
                d.push(Done {
                    at: Instant::now(),
                    ok,
                });
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let seen = done.lock().map(|d| d.clone()).unwrap_or_default();
    let mut r = recovery_figures(&seen, start, down, up);
    r.sim_calls_down = calls_at_up.saturating_sub(calls_at_down);
    let ms = |d: Option<Duration>| {
        d.map_or("never".to_string(), |d| format!("{:.2} s", d.as_secs_f64()))
    };
    let snap = gw.snapshot().total;
    println!(
        "{name:<34} before {:>6.1} ok/s  first ok after recovery {:>7}  rate >= 90% after {:>7}  breaker rejects {:>5}  simulator calls during the outage {:>5}",
        r.before_rate,
        ms(r.first_ok),
        ms(r.rate_back),
        snap.breaker_rejects,
        r.sim_calls_down,
    );
    Ok(r)
}

async fn recovery(rate: u64, before_s: u64, outage_s: u64, after_s: u64) -> anyhow::Result<()> {
    let sim = start_sim((20, 60)).await?;
    let defaults = syncfleet::config::BreakerConfig::default();
    println!(
        "recovery drill: {rate} logical item_get calls/s, healthy {before_s} s, outage {outage_s} s, \
         then until the rate is back (at most {after_s} s); sim latency median 20 ms p95 60 ms; \
         rate = ok calls per {} ms window vs the healthy rate",
        RATE_WINDOW.as_millis()
    );
    let phases = (before_s, outage_s, after_s);
    let old = recovery_variant(
        &sim,
        &format!("baseline: fixed open {} s", defaults.open_s),
        &format!(
            "[link.breaker]\ninitial_open_ms = {}\n",
            defaults.open_s * 1000
        ),
        rate,
        phases,
    )
    .await?;
    let new = recovery_variant(
        &sim,
        &format!(
            "growing open {} ms .. {} s",
            defaults.initial_open_ms, defaults.open_s
        ),
        "",
        rate,
        phases,
    )
    .await?;
    if let (Some(a), Some(b)) = (old.rate_back, new.rate_back) {
        println!(
            "rate back: {:.2} s vs {:.2} s baseline (goal <= 3 s)",
            b.as_secs_f64(),
            a.as_secs_f64()
        );
    }
    sim.shutdown().await;
    Ok(())
}

async fn worker(
    endpoint: &str,
    redis: &str,
    namespace: &str,
    seconds: u64,
    every_ms: u64,
    min_samples: u32,
) -> anyhow::Result<()> {
    let cfg = config(
        endpoint,
        // A fixed 10 s open period: the fleet test checks that a trip holds every process,
        // with seconds of margin on both sides so a loaded machine cannot flake it.
        &format!(
            "[link.breaker]\nopen_s = 10\ninitial_open_ms = 10000\nmin_samples = {min_samples}\n"
        ),
    )?;
    let gates = Gates::redis_with_namespace(&cfg, redis, namespace).await?;
    let fleet = FleetLink::connect(redis, namespace).await?;
    let gw = gateway(&cfg, Some(fleet), gates)?;
    let end = Instant::now() + Duration::from_secs(seconds);
    let mut i = 0u64;
    println!("ready");
    while Instant::now() < end {
        i += 1;
        let ctx = CallContext::new(syncfleet::link::Budget::starting_now(Duration::from_secs(
            5,
        )));
        let kind = match gw
            .call(
                TB,
                ApiRequest::ItemGet {
                    item_id: (50_000 + i).to_string(),
                },
                &ctx,
            )
            .await
        {
            Ok(r) if r.stale.is_some() => "stale".to_string(),
            Ok(_) => "ok".to_string(),
            Err(e) => e.kind.as_str().to_string(),
        };
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        println!("{ms} {kind}");
        tokio::time::sleep(Duration::from_millis(every_ms)).await;
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Outage {
            rate,
            seconds,
            hang,
        } => outage(rate, seconds, hang).await,
        Cmd::Amplification {
            calls,
            concurrency,
            errors,
        } => amplification(calls, concurrency, errors).await,
        Cmd::Recovery {
            rate,
            before_s,
            outage_s,
            after_s,
        } => recovery(rate, before_s, outage_s, after_s).await,
        Cmd::Worker {
            endpoint,
            redis,
            namespace,
            seconds,
            every_ms,
            min_samples,
        } => {
            worker(
                &endpoint,
                &redis,
                &namespace,
                seconds,
                every_ms,
                min_samples,
            )
            .await
        }
    }
}
