//! The chaos run at scale against a same-run baseline.
//!
//! `scripts/bench chaosbench [--items 20000] [--rate 400]` runs, one after the other
//! on fresh simulators, Redis servers and ledgers:
//! 1. baseline: a listing job of N items on 3 workers, undisturbed;
//! 2. chaos: the same with workers SIGKILLed and SIGTERMed (replaced), an empty Redis
//!    restart followed by `reconcile`, 10% upstream errors and a short outage;
//! 3. scale-in: the same, undisturbed but for one worker SIGTERMed (and replaced) every 10 s.
//!
//! It prints lost / failed items, products made and duplicates by seller code, look-ups by
//! seller code, the duration ratios to the baseline, and the attempts the scale-in charged. A benchmark (harness = false) because it needs the
//! built `syncfleet` binary for its worker processes; under `cargo test` it does nothing.

use syncfleet_testkit::jobs_harness;

use jobs_harness::chaos::{self, Chaos, ChaosReport};
use jobs_harness::{ClientOpts, Harness};
use std::time::Duration;
use syncfleet::platform::{Api, Platform};
use syncfleet::sim::SimConfig;

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn one(items: u64, rate: u64, what: Chaos) -> ChaosReport {
    let sim = SimConfig::demo()
        .with_limit(Platform::Alibaba, Api::ItemGet, 2_000, 100_000_000)
        .with_limit(Platform::Taobao, Api::ItemAdd, 2_000, 100_000_000)
        // Look-ups by seller code after a write of unknown outcome, granted like the rest.
        .with_limit(Platform::Taobao, Api::ItemFind, 2_000, 100_000_000);
    let opts = ClientOpts {
        rate: rate as f64,
        ..ClientOpts::default()
    };
    let mut h = Harness::start(sim, &opts).await;
    chaos::run(&mut h, items, what).await
}

fn print(name: &str, r: &ChaosReport, base: Option<&ChaosReport>) {
    let lost = r.counts.pending;
    let ratio = base.map_or(1.0, |b| r.took.as_secs_f64() / b.took.as_secs_f64());
    println!(
        "{name:<9} {:>7.1} s  ratio {ratio:.3}  done {} stale {} failed {} lost {lost}  created {} (duplicates by seller code {}, look-ups {})  attempts charged {}",
        r.took.as_secs_f64(),
        r.counts.done,
        r.counts.stale,
        r.counts.failed,
        r.created,
        r.duplicate_writes,
        r.finds,
        r.attempts_charged()
    );
    for e in &r.events {
        println!("          {e}");
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("chaosbench: run it with `scripts/bench chaosbench`");
        return;
    }
    let items = arg("--items", 20_000);
    let rate = arg("--rate", 400);
    println!(
        "chaosbench: {items} items, 3 workers, gates at {rate}/s (physical limit {:.1} s)",
        items as f64 / rate as f64
    );
    let base = one(items, rate, Chaos::None).await;
    print("baseline", &base, None);
    let full = one(items, rate, Chaos::Full).await;
    print("chaos", &full, Some(&base));
    let scale = one(
        items,
        rate,
        Chaos::ScaleIn {
            every: Duration::from_secs(10),
        },
    )
    .await;
    print("scale-in", &scale, Some(&base));
}
