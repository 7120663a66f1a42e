//! A backlog of 20,000 tasks in fleet mode, end to end: a real Redis, a real SQLite ledger in a
//! temp dir, the simulator in this process over loopback, and `syncfleet work` worker processes
//! started from the built binary. (Apart from `jobs_fleet` so the two heavy runs are processes
//! of their own, side by side.)

use crate::jobs_harness;

use jobs_harness::{ClientOpts, Harness};
use std::time::Duration;
use syncfleet::platform::Platform;
use syncfleet::queue::{QueueOptions, RedisQueue};

const TO: Platform = Platform::Taobao;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backlog_of_20k_tasks_is_processed_once_workers_start() {
    let _serial = jobs_harness::serial().await;
    let mut h = Harness::start(jobs_harness::listing_sim(), &ClientOpts::default()).await;
    let items = h.item_file(20_000);
    // One item per task: 20,000 tasks wait in Redis while no worker runs.
    let job = h.enqueue(&[
        "--chunk-size",
        "1",
        "listing",
        "--from",
        "alibaba",
        "--to",
        "taobao",
        "--items",
        items.to_str().unwrap(),
    ]);
    let queue = RedisQueue::connect(&h.redis.url, QueueOptions::default())
        .await
        .expect("connect queue");
    let len = queue.len().await.expect("queue length");
    assert_eq!(len.total(), 20_000, "{len:?}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        h.store.job_status(job).await.unwrap().job.counts.pending,
        20_000
    );

    for _ in 0..3 {
        h.spawn_worker(16, 3);
    }
    // ~40 s on a quiet 2-core machine; the bound is for a loaded one.
    let status = h.wait_job(job, Duration::from_secs(400)).await;
    let exits = h.wait_workers(Duration::from_secs(30));
    println!("{}", exits.join("\n"));
    assert_eq!(status.job.counts.done, 20_000, "{:?}", status.job.counts);
    assert_eq!(queue.len().await.expect("queue length").total(), 0);
    assert_eq!(h.distinct_writes(TO), 20_000);
    for line in &exits {
        assert!(line.contains("exit status: 0"), "{line}");
    }
}
