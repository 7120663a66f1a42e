//! `recovery`: time from the upstream's recovery to the first success and to the rate being
//! back, the growing open time against a fixed full-length one.

use crate::harness::{config, gateway, sim_calls, start_sim};
use crate::TB;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use syncfleet::link::CallContext;
use syncfleet::platform::ApiRequest;
use syncfleet::sim::{DrillPatch, SimHandle};
use syncfleet::throttle::Gates;

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

pub(super) async fn recovery(
    rate: u64,
    before_s: u64,
    outage_s: u64,
    after_s: u64,
) -> anyhow::Result<()> {
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
