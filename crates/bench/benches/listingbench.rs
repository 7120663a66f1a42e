//! The real listing: what a write whose answer is lost costs, against the same run without.
//!
//! `scripts/bench listingbench [--items 6000] [--workers 3] [--ratios 0,0.1,0.3]
//! [--write-limit 200]`
//!
//! A 1688 -> Taobao listing of `--items` catalog products (the real product model: SKUs,
//! attributes, the shipped map) on `--workers` worker processes; the simulator grants
//! item_add `--write-limit` calls/s (item_get and item_find twice that), and the gates are
//! set to the grant. One run per
//! `--ratios` entry, each on a fresh simulator, Redis and ledger, with that share of writes
//! made and then left unanswered (the simulator's `lost_write_answer_ratio` drill); the first
//! ratio (0) is the same-run baseline.
//!
//! Printed per run: duration and its ratio to the baseline and to the physical limit (items
//! / write limit), calls per item of item_get, item_add and item_find at the simulator, answers
//! lost, products made and duplicates by seller's code. Under `cargo test` it does nothing (a
//! bench target because it needs the built binary for its worker processes).

use syncfleet_testkit::jobs_harness;

use jobs_harness::{arg, client_toml, ClientOpts, Harness};
use std::time::{Duration, Instant};
use syncfleet::platform::{Api, Platform};
use syncfleet::sim::{DrillPatch, SimConfig};

const FROM: Platform = Platform::Alibaba;
const TO: Platform = Platform::Taobao;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("listingbench: run it with `scripts/bench listingbench`");
        return;
    }
    let items: u64 = arg("--items", 6_000);
    let workers: usize = arg("--workers", 3);
    let ratios: String = arg("--ratios", "0,0.1,0.3".to_string());
    let write_limit: u64 = arg("--write-limit", 200);
    let read_limit = write_limit * 2;
    let physical = items as f64 / write_limit as f64;
    println!(
        "listingbench: {items} items, {workers} workers, item_add {write_limit}/s (physical limit {physical:.1} s)"
    );
    let mut baseline: Option<f64> = None;
    for ratio in ratios.split(',') {
        let ratio: f64 = ratio.trim().parse().expect("--ratios: decimals");
        let sim = SimConfig::demo()
            .with_limit(FROM, Api::ItemGet, read_limit, 100_000_000)
            .with_limit(TO, Api::ItemAdd, write_limit, 100_000_000)
            .with_limit(TO, Api::ItemFind, read_limit, 100_000_000);
        let opts = ClientOpts {
            item_retry_rounds: 8,
            ..ClientOpts::default().steady_leases()
        };
        let mut h = Harness::start(sim, &opts).await;
        let config = h.dir.path().join("bench.toml");
        let text = format!(
            "{}\n[gates.\"alibaba.item_get\"]\nrate = {read_limit}\nburst = 20\n\n[gates.\"taobao.item_add\"]\nrate = {write_limit}\nburst = 20\n\n[gates.\"taobao.item_find\"]\nrate = {read_limit}\nburst = 20\n",
            client_toml(&h.sim, &opts)
        );
        std::fs::write(&config, text).expect("config");
        h.sim
            .set_drill(DrillPatch {
                lost_write_answer_ratio: Some(ratio),
                ..Default::default()
            })
            .expect("drill");
        let job = h.enqueue_listing_to(&config, items, None);
        let started = Instant::now();
        for _ in 0..workers {
            h.spawn_worker_with(&config, 16, 3);
        }
        let status = h.wait_job(job, Duration::from_secs(3600)).await;
        let took = started.elapsed().as_secs_f64();
        h.wait_workers(Duration::from_secs(120));
        let c = &status.job.counts;
        let stats = h.sim.stats();
        let per_item = |p: Platform, api: Api| {
            stats.for_platform(p, api).map_or(0, |s| s.calls) as f64 / items as f64
        };
        let base = *baseline.get_or_insert(took);
        println!(
            "lost {:>4.0}%: {took:>6.1} s  x baseline {:.3}  x physical {:.3}  per item: item_get {:.3} item_add {:.3} item_find {:.3}  answers lost {}  products {}  duplicates {}  done {} skipped {} failed {}",
            ratio * 100.0,
            took / base,
            took / physical,
            per_item(FROM, Api::ItemGet),
            per_item(TO, Api::ItemAdd),
            per_item(TO, Api::ItemFind),
            stats.totals.answers_lost,
            stats.totals.products,
            stats.totals.duplicate_writes,
            c.done,
            c.skipped,
            c.failed
        );
    }
}
