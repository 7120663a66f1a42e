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

/// Gate counts lost from Redis (as writes a failover's new primary never received) come back
/// from the ledger: a worker's heal sweep raises today's quota counter of the gate to the
/// calls the ledger recorded, with no operator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_quota_counts_are_raised_to_the_ledgers() {
    let _serial = jobs_harness::serial().await;
    let opts = ClientOpts {
        rate: 400.0,
        chunk_size: 50,
        heal_interval_s: 1,
        ..ClientOpts::default()
    };
    let mut h = Harness::start(jobs_harness::listing_sim(), &opts).await;
    let day_at_start = syncfleet::time::platform_day(chrono::Utc::now());
    let job = h.enqueue_listing(200);
    h.spawn_worker(4, 3);
    let status = h.wait_job(job, Duration::from_secs(120)).await;
    assert_eq!(status.job.counts.done, 200, "{:?}", status.job.counts);
    h.wait_workers(Duration::from_secs(60));

    let now = chrono::Utc::now();
    if syncfleet::time::platform_day(now) != day_at_start {
        // The job's calls fell on both sides of the quota day's midnight (GMT+8): each day's
        // counter holds a part, and neither can be held against the whole.
        eprintln!("skipped: the run crossed the quota day's midnight");
        return;
    }
    let day = syncfleet::time::QuotaDay::PLATFORM.label(now);
    let ledger = h
        .store
        .report_calls_for_day(syncfleet::time::platform_day(now))
        .await
        .expect("ledger calls");
    let calls = ledger
        .by_api
        .iter()
        .find(|a| (a.platform, a.api) == (TO, Api::ItemAdd))
        .map(|a| a.calls)
        .expect("the ledger counted item_add calls");
    assert!(calls >= 200, "{calls}");
    let key = format!("sf:{{{TO}:{}}}:quota:{day}", Api::ItemAdd);
    let client = redis::Client::open(h.redis.url.as_str()).expect("redis url");
    let mut c = client.get_connection().expect("redis");
    let counted: Option<u64> = redis::cmd("GET").arg(&key).query(&mut c).expect("GET");
    assert!(
        counted.is_some_and(|n| n >= calls),
        "{key}: {counted:?} < {calls}"
    );

    // The counter is lost; the next worker's first sweep brings it back.
    let _: () = redis::cmd("DEL").arg(&key).query(&mut c).expect("DEL");
    h.spawn_worker(1, 3);
    h.wait_workers(Duration::from_secs(60));
    if syncfleet::time::QuotaDay::PLATFORM.label(chrono::Utc::now()) != day {
        return; // the platform day turned during the test: its counter starts again at 0
    }
    let restored: Option<u64> = redis::cmd("GET").arg(&key).query(&mut c).expect("GET");
    assert_eq!(restored, Some(calls), "{key} raised to the ledger's count");
}
