//! Lanes: interactive work while a bulk job saturates the gate.
//!
//! `scripts/bench lanebench [--items 4000] [--rate 100] [--share 0.1] [--asks 30] [--embedded] [--band MS]`
//!
//! A bulk listing (1688 -> Taobao) of `--items` items saturates the item_add gate, set to the
//! simulator's limit `--rate`; 2 worker processes (work --concurrency 8), or with `--embedded`
//! one worker process with no Redis (the embedded queue and gates). Runs, each on a
//! fresh simulator, Redis and ledger:
//! - **bulk alone** (baseline): no interactive share;
//! - **no share**: `--asks` one-item interactive jobs for shop `vip`, one a second, with no
//!   share kept (the interactive tasks go first in the queue, but their calls book behind
//!   bulk's at the gate);
//! - **share**: the same with `interactive_share = --share`.
//!
//! Printed, counted by the simulator: bulk throughput (items / s while it ran) against the
//! baseline's, and for the interactive items the latency from the enqueue command's return
//! to the simulator's item_add of that item (its shop's successful item_add count moving),
//! p50 / p95 / max, against 2 / rate + the calls' p95 latency at the simulator.

use syncfleet_testkit::jobs_harness;

use jobs_harness::{arg, client_toml, ClientOpts, Harness};
use std::time::{Duration, Instant};
use syncfleet::platform::{Api, Platform};
use syncfleet::sim::SimConfig;
use syncfleet::store::JobState;

const FROM: Platform = Platform::Alibaba;
const TO: Platform = Platform::Taobao;

struct Out {
    bulk_per_s: f64,
    latencies: Vec<Duration>,
    rejected: u64,
}

async fn run(items: u64, rate: u64, share: f64, asks: usize, embedded: bool, band: &str) -> Out {
    let sim = SimConfig::demo()
        .with_limit(FROM, Api::ItemGet, 10 * rate, 100_000_000)
        .with_limit(TO, Api::ItemAdd, rate, 100_000_000)
        .with_shops(TO, &["bulk", "vip"]);
    let opts = ClientOpts {
        rate: (10 * rate) as f64,
        chunk_size: 50,
        shops: vec![("bulk".into(), 1), ("vip".into(), 1)],
        ..ClientOpts::default()
    };
    let mut h = Harness::start(sim, &opts).await;
    if embedded {
        h.use_embedded();
    }
    let config = h.dir.path().join("lanes.toml");
    let text = format!(
        "{}\n[gates.\"alibaba.item_get\"]\nrate = {}\nburst = 20\n\n[gates.\"taobao.item_add\"]\nrate = {rate}\nburst = 5\nmax_wait_ms = 2000\ninteractive_share = {share}\n{band}",
        client_toml(&h.sim, &opts),
        10 * rate
    );
    std::fs::write(&config, text).expect("config");
    let bulk_items = h.dir.path().join("bulk.txt");
    std::fs::write(
        &bulk_items,
        (1..=items).map(|i| format!("{i}\n")).collect::<String>(),
    )
    .expect("items");
    let bulk = h.enqueue_with(
        &config,
        &[
            "listing",
            "--from",
            "alibaba",
            "--to",
            "taobao",
            "--to-shop",
            "bulk",
            "--items",
            bulk_items.to_str().expect("utf-8"),
        ],
    );
    let started = Instant::now();
    // Embedded: one process (the embedded queue admits one worker).
    for _ in 0..if embedded { 1 } else { 2 } {
        h.spawn_worker_with(&config, 8, 3);
    }
    // Let the bulk job reach its pace first.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut latencies = Vec::new();
    for i in 0..asks {
        let file = h.dir.path().join(format!("vip-{i}.txt"));
        std::fs::write(&file, format!("{}\n", 90_000 + i)).expect("item");
        let before = h
            .sim
            .stats()
            .for_shop(TO, "vip", Api::ItemAdd)
            .map_or(0, |s| s.ok);
        h.enqueue_with(
            &config,
            &[
                "--lane",
                "interactive",
                "listing",
                "--from",
                "alibaba",
                "--to",
                "taobao",
                "--to-shop",
                "vip",
                "--items",
                file.to_str().expect("utf-8"),
            ],
        );
        let asked = Instant::now();
        let deadline = asked + Duration::from_secs(60);
        loop {
            let now_ok = h
                .sim
                .stats()
                .for_shop(TO, "vip", Api::ItemAdd)
                .map_or(0, |s| s.ok);
            if now_ok > before {
                latencies.push(asked.elapsed());
                break;
            }
            assert!(
                Instant::now() < deadline,
                "interactive item {i} never written"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let st = h.store.job_status(bulk).await.expect("status");
        if st.job.state == JobState::Finished {
            println!("    (the bulk job finished before interactive ask {i})");
            break;
        }
        tokio::time::sleep(Duration::from_millis(1000).saturating_sub(asked.elapsed())).await;
    }
    let status = h.wait_job(bulk, Duration::from_secs(1800)).await;
    let took = started.elapsed().as_secs_f64();
    h.wait_workers(Duration::from_secs(120));
    assert_eq!(status.job.counts.done, items, "{:?}", status.job.counts);
    let stats = h.sim.stats();
    let bulk_stats = stats
        .for_shop(TO, "bulk", Api::ItemAdd)
        .cloned()
        .expect("bulk calls");
    let span_s =
        (bulk_stats.last_ok_ms.unwrap_or(0) - bulk_stats.first_ok_ms.unwrap_or(0)) as f64 / 1000.0;
    let add = h.stats(TO, Api::ItemAdd);
    let get = h.stats(FROM, Api::ItemGet);
    println!(
        "    bulk {items} items: {took:.1} s wall, {span_s:.1} s between its first and last write at the simulator"
    );
    Out {
        bulk_per_s: bulk_stats.ok as f64 / span_s.max(1e-3),
        latencies,
        rejected: add.rejected_limit + get.rejected_limit,
    }
}

fn pct(v: &[Duration], p: usize) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    s.get((s.len() * p / 100).min(s.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("lanebench: run it with `scripts/bench lanebench`");
        return;
    }
    let items: u64 = arg("--items", 4_000);
    let rate: u64 = arg("--rate", 100);
    let share: f64 = arg("--share", 0.1);
    let asks: usize = arg("--asks", 30);
    let embedded = std::env::args().any(|a| a == "--embedded");
    // The item_add gate's boundary band (ms), when given.
    let band = Some(arg("--band", u64::MAX))
        .filter(|ms| *ms != u64::MAX)
        .map(|ms| format!("boundary_band_ms = {ms}\n"))
        .unwrap_or_default();
    println!(
        "lanebench: bulk listing of {items} items, item_add limit {rate}/s, interactive share {share}, {asks} interactive asks, {}",
        if embedded { "one embedded worker (no Redis)" } else { "2 fleet workers" }
    );
    let base = run(items, rate, 0.0, 0, embedded, &band).await;
    println!(
        "bulk alone (baseline)   bulk {:.1} items/s  rejected {}",
        base.bulk_per_s, base.rejected
    );
    for (name, s) in [("no share", 0.0), ("share", share)] {
        let out = run(items, rate, s, asks, embedded, &band).await;
        println!(
            "{name:<8} ({s:.2})         bulk {:.1} items/s ({:.3} of baseline)  interactive latency p50 {:?} p95 {:?} max {:?} ({} asks)  rejected {}",
            out.bulk_per_s,
            out.bulk_per_s / base.bulk_per_s,
            pct(&out.latencies, 50),
            pct(&out.latencies, 95),
            pct(&out.latencies, 100),
            out.latencies.len(),
            out.rejected
        );
    }
}
