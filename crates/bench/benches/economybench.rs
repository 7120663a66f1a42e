//! The quota spent only on useful calls, and unknown limits found fast.
//!
//! `scripts/bench economybench [--items 6000] [--workers 4] [--kinds fixed,sliding,bucket]`
//!
//! A write-bound listing (1688 item_get limited to 400/s, Taobao item_add to 100/s at the
//! simulator), `--workers` worker processes. Runs, each on a fresh simulator, Redis and ledger:
//! - **right**: gates set to the grant (item_get 400/s, item_add 100/s burst 20): the same-run
//!   baseline;
//! - **3x / 10x** for each simulator limit kind: the item_add gate at 300/s or 1,000/s with
//!   burst 20 (the operator does not know the grant);
//! - **second job**: after the 10x run on a fixed window, a second job on the same Redis
//!   starts from the rate the gates learned.
//!
//! Printed per run: duration / physical limit (items / 100 s), item_get and item_add calls
//! per item at the simulator, rejected calls and their share. Under `cargo test` it does
//! nothing (a bench target because it needs the built binary for its worker processes).

use syncfleet_testkit::jobs_harness;

use jobs_harness::{arg, client_toml, ClientOpts, Harness};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use syncfleet::platform::{Api, Platform};
use syncfleet::sim::{ApiStats, LimitKind, SimConfig};

const FROM: Platform = Platform::Alibaba;
const TO: Platform = Platform::Taobao;
const WRITE_LIMIT: u64 = 100;

fn sim(kind: LimitKind) -> SimConfig {
    SimConfig::demo()
        .with_limit(FROM, Api::ItemGet, 400, 100_000_000)
        .with_limit(TO, Api::ItemAdd, WRITE_LIMIT, 100_000_000)
        .with_limit_kind(TO, Api::ItemAdd, kind, None)
}

/// A client config: item_get gate at the grant, item_add gate at `write_rate` with `burst`.
fn config(h: &Harness, name: &str, write_rate: u64, burst: u64) -> PathBuf {
    let opts = ClientOpts {
        rate: 400.0,
        ..ClientOpts::default()
    };
    let text = format!(
        "{}\n[gates.\"alibaba.item_get\"]\nrate = 400\nburst = 20\n\n[gates.\"taobao.item_add\"]\nrate = {write_rate}\nburst = {burst}\nmax_wait_ms = 2000\n",
        client_toml(&h.sim, &opts)
    );
    let path = h.dir.path().join(name);
    std::fs::write(&path, text).expect("config");
    path
}

struct Run {
    name: String,
    items: u64,
    took: Duration,
    get: ApiStats,
    add: ApiStats,
}

impl Run {
    fn print(&self) {
        let physical = self.items as f64 / WRITE_LIMIT as f64;
        let rejected = self.get.rejected_limit + self.add.rejected_limit;
        let calls = self.get.calls + self.add.calls;
        println!(
            "{:<22} {:>6.1} s  x physical {:.3}  item_get/item {:.3}  item_add/item {:.3}  rejected {} ({:.2}%)",
            self.name,
            self.took.as_secs_f64(),
            self.took.as_secs_f64() / physical,
            self.get.calls as f64 / self.items as f64,
            self.add.calls as f64 / self.items as f64,
            rejected,
            100.0 * rejected as f64 / calls.max(1) as f64
        );
    }
}

/// Enqueue `items` for `to_shop` (None: the default shop), run `workers` workers with
/// `config`, wait for the job; the simulator's counters are taken as differences, so a second
/// job on one harness counts only itself.
async fn job(
    h: &mut Harness,
    name: &str,
    config: &Path,
    items: u64,
    workers: usize,
    to_shop: Option<&str>,
) -> Run {
    let (get0, add0) = (h.stats(FROM, Api::ItemGet), h.stats(TO, Api::ItemAdd));
    let job = h.enqueue_listing_to(config, items, to_shop);
    let started = Instant::now();
    for _ in 0..workers {
        h.spawn_worker_with(config, 8, 2);
    }
    let status = h.wait_job(job, Duration::from_secs(1800)).await;
    let took = started.elapsed();
    h.wait_workers(Duration::from_secs(120));
    assert_eq!(status.job.counts.done, items, "{:?}", status.job.counts);
    let (get1, add1) = (h.stats(FROM, Api::ItemGet), h.stats(TO, Api::ItemAdd));
    let minus = |a: &ApiStats, b: &ApiStats| ApiStats {
        calls: a.calls - b.calls,
        ok: a.ok - b.ok,
        rejected_limit: a.rejected_limit - b.rejected_limit,
        ..a.clone()
    };
    Run {
        name: name.to_string(),
        items,
        took,
        get: minus(&get1, &get0),
        add: minus(&add1, &add0),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("economybench: run it with `scripts/bench economybench`");
        return;
    }
    let items: u64 = arg("--items", 6_000);
    let workers: usize = arg("--workers", 4);
    let kinds: String = arg("--kinds", "fixed,sliding,bucket".to_string());
    println!(
        "economybench: {items} items, {workers} workers, item_add limit {WRITE_LIMIT}/s (physical limit {:.1} s)",
        items as f64 / WRITE_LIMIT as f64
    );
    {
        let mut h = Harness::start(sim(LimitKind::Fixed), &ClientOpts::default()).await;
        let c = config(&h, "right.toml", WRITE_LIMIT, 20);
        job(&mut h, "right (baseline)", &c, items, workers, None)
            .await
            .print();
    }
    for kind in kinds.split(',') {
        let kind: LimitKind = match kind {
            "sliding" => LimitKind::Sliding,
            "bucket" => LimitKind::Bucket,
            _ => LimitKind::Fixed,
        };
        for factor in [3, 10] {
            let mut h = Harness::start(sim(kind), &ClientOpts::default()).await;
            let c = config(&h, "high.toml", WRITE_LIMIT * factor, 20);
            let name = format!("{factor}x {kind:?}");
            job(&mut h, &name, &c, items, workers, None).await.print();
            if factor == 10 && kind == LimitKind::Fixed {
                // Same Redis: the gates remember what they learned. Another target shop: the
                // same items for the same shop are listed already and would be skipped.
                job(
                    &mut h,
                    "second job (learned)",
                    &c,
                    items,
                    workers,
                    Some("second"),
                )
                .await
                .print();
            }
        }
    }
}
