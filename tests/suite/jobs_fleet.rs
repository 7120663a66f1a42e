//! The main job in fleet mode, end to end: a real Redis, a real SQLite
//! ledger in a temp dir, the simulator in this process over loopback, and `syncfleet work`
//! worker processes started from the built binary.

use crate::jobs_harness;

use jobs_harness::{ClientOpts, Harness};
use std::time::Duration;
use syncfleet::platform::{Api, Platform};
use syncfleet::store::JobState;

const TO: Platform = Platform::Taobao;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_10k_across_three_workers_writes_each_item_once() {
    let _serial = jobs_harness::serial().await;
    let opts = ClientOpts::default().steady_leases();
    let mut h = Harness::start(jobs_harness::listing_sim(), &opts).await;
    let job = h.enqueue_listing(10_000);
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
    assert_eq!(h.distinct_writes(TO), 10_000, "one write per item");
    // No faults in this run: no product twice.
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
