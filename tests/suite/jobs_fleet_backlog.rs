//! A backlog of 6,000 tasks in fleet mode, end to end: a real Redis, a real SQLite ledger in a
//! temp dir, the simulator in this process over loopback, and `syncfleet work` worker processes
//! started from the built binary. (Apart from `jobs_fleet` so the two heavy runs are processes
//! of their own, side by side.)

use crate::jobs_harness;

use jobs_harness::{ClientOpts, Harness};
use std::time::Duration;
use syncfleet::platform::Platform;
use syncfleet::queue::{QueueOptions, RedisQueue};

const TO: Platform = Platform::Taobao;
/// Far more tasks than the workers hold at once (3 x 16), in more than one push batch.
const BACKLOG: u64 = 6_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_of_6k_tasks_is_processed_once_workers_start() {
    let _serial = jobs_harness::serial().await;
    let mut h = Harness::start(jobs_harness::listing_sim(), &ClientOpts::default()).await;
    let items = h.item_file(BACKLOG);
    // One item per task: 6,000 tasks (two of the producer's push batches) wait in Redis
    // while no worker runs.
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
    assert_eq!(len.total(), BACKLOG, "{len:?}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        h.store.job_status(job).await.unwrap().job.counts.pending,
        BACKLOG
    );

    for _ in 0..3 {
        h.spawn_worker(16, 3);
    }
    // ~12 s on a quiet 2-core machine; the bound is for a loaded one.
    let status = h.wait_job(job, Duration::from_secs(400)).await;
    let exits = h.wait_workers(Duration::from_secs(30));
    println!("{}", exits.join("\n"));
    assert_eq!(status.job.counts.done, BACKLOG, "{:?}", status.job.counts);
    assert_eq!(queue.len().await.expect("queue length").total(), 0);
    assert_eq!(h.distinct_writes(TO), BACKLOG);
    for line in &exits {
        assert!(line.contains("exit status: 0"), "{line}");
    }
}
