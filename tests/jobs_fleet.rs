//! The main job in fleet mode, end to end (issue 5's done-when): a real Redis, a real SQLite
//! ledger in a temp dir, the simulator in this process over loopback, and `syncfleet work`
//! worker processes started from the built binary.

mod jobs_harness;
mod support;

use jobs_harness::{ClientOpts, Harness};
use std::time::Duration;
use syncfleet::platform::{Api, Platform};
use syncfleet::sim::SimConfig;
use syncfleet::store::JobState;

const FROM: Platform = Platform::Alibaba;
const TO: Platform = Platform::Taobao;

/// Limits high enough to finish fast; the client gates (ClientOpts::default, 1,900/s + burst
/// 20) sit under them the way an operator sizes a gate from the console.
fn sim_config() -> SimConfig {
    SimConfig::demo()
        .with_limit(FROM, Api::ItemGet, 2_000, 10_000_000)
        .with_limit(TO, Api::ItemAdd, 2_000, 10_000_000)
}

/// Distinct items written at the simulator (item_add answered ok, minus repeats of a key).
fn distinct_writes(h: &Harness) -> u64 {
    let s = h.stats(TO, Api::ItemAdd);
    s.ok - s.duplicate_writes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_10k_across_three_workers_writes_each_item_once() {
    let mut h = Harness::start(sim_config(), &ClientOpts::default()).await;
    let items = h.item_file(10_000);
    let job = h.enqueue(&[
        "listing",
        "--from",
        "alibaba",
        "--to",
        "taobao",
        "--items",
        items.to_str().unwrap(),
    ]);
    for _ in 0..3 {
        h.spawn_worker(8, 3);
    }
    let status = h.wait_job(job, Duration::from_secs(90)).await;
    let exits = h.wait_workers(Duration::from_secs(30));
    println!("{}", exits.join("\n"));

    let c = &status.job.counts;
    assert_eq!(status.job.total, 10_000);
    assert_eq!(c.done, 10_000, "every item done: {c:?}");
    assert_eq!(status.job.state, JobState::Finished);
    let add = h.stats(TO, Api::ItemAdd);
    println!(
        "item_add at the simulator: calls {} ok {} duplicate writes {} rejected {} peak/s {}",
        add.calls, add.ok, add.duplicate_writes, add.rejected_limit, add.peak_per_second
    );
    assert_eq!(distinct_writes(&h), 10_000, "one write per item");
    // No faults in this run: not even a harmless repeat of an idempotency key.
    assert_eq!(add.duplicate_writes, 0, "repeated writes without any fault");
    // All three processes took part (each prints its task count when it exits).
    assert_eq!(exits.len(), 3);
    for line in &exits {
        assert!(line.contains("exit status: 0"), "{line}");
        assert!(!line.contains(" 0 task(s) done"), "an idle worker: {line}");
    }
    let out = h.run(&["status", &job.to_string()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("finished") && text.contains("10000/10000"),
        "{text}"
    );
}
