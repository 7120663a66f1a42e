//! The queue heals itself: tasks lost from Redis (deleted from the ready set before any
//! worker saw them, as an acknowledged push lost in a failover would be) are found by the
//! fleet's heal sweep and pushed again, with no `reconcile`; items a live task still carries
//! are never pushed twice (the simulator counts no repeated write).

use crate::jobs_harness;

use jobs_harness::{ClientOpts, Harness};
use std::time::Duration;
use syncfleet::platform::{Api, Platform};
use syncfleet::store::JobState;

const TO: Platform = Platform::Taobao;
const ITEMS: u64 = 2_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_tasks_are_pushed_again_without_an_operator() {
    let _serial = jobs_harness::serial().await;
    let opts = ClientOpts {
        rate: 200.0,
        chunk_size: 20,
        heal_interval_s: 2,
        ..ClientOpts::default()
    };
    let mut h = Harness::start(jobs_harness::listing_sim(), &opts).await;
    let job = h.enqueue_listing(ITEMS);
    // 5 of the 100 tasks lost before any worker fetched them.
    let client = redis::Client::open(h.redis.url.as_str()).expect("redis url");
    let mut c = client.get_connection().expect("redis");
    let lost: Vec<String> = redis::cmd("ZRANGE")
        .arg("{syncfleet}:ready")
        .arg(40)
        .arg(44)
        .query(&mut c)
        .expect("ready set");
    assert_eq!(lost.len(), 5, "the job's tasks wait in the ready set");
    let removed: usize = redis::cmd("ZREM")
        .arg("{syncfleet}:ready")
        .arg(&lost)
        .query(&mut c)
        .expect("zrem");
    assert_eq!(removed, 5);
    for _ in 0..2 {
        h.spawn_worker(4, 5);
    }
    let status = h.wait_job(job, Duration::from_secs(180)).await;
    let logs: String = (0..2)
        .map(|n| {
            std::fs::read_to_string(h.dir.path().join(format!("worker{n}.err"))).unwrap_or_default()
        })
        .collect();
    h.wait_workers(Duration::from_secs(60));
    let c = &status.job.counts;
    assert_eq!(status.job.state, JobState::Finished, "{c:?}");
    assert_eq!((c.done, c.failed), (ITEMS, 0), "{c:?}");
    let add = h.stats(TO, Api::ItemAdd);
    assert_eq!(
        (add.ok, add.duplicate_writes),
        (ITEMS, 0),
        "each item written once, none sent twice: {add:?}"
    );
    assert!(
        logs.contains("pushed again"),
        "a worker said it pushed the lost items again:\n{logs}"
    );
}
