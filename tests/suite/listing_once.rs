//! A listing is made once per target shop: the same item list enqueued again (a re-run, a cron,
//! a second producer) creates no second product on the marketplace, counted at the
//! simulator; `--relist` asks for new ones on purpose.

use crate::jobs_harness::{self, ClientOpts, Harness};
use std::time::Duration;
use syncfleet::platform::{Api, Platform};

const TO: Platform = Platform::Taobao;

/// Products the simulator made through item_add.
fn created(h: &Harness) -> u64 {
    h.sim.stats().totals.products
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_listing_enqueued_twice_creates_each_item_once() {
    let _serial = jobs_harness::serial().await;
    let mut h = Harness::start(jobs_harness::listing_sim(), &ClientOpts::default()).await;
    let first = h.enqueue_listing(50);
    h.spawn_worker(8, 2);
    let status = h.wait_job(first, Duration::from_secs(120)).await;
    assert_eq!(status.job.counts.done, 50, "{:?}", status.job.counts);
    h.wait_workers(Duration::from_secs(60));
    assert_eq!(created(&h), 50);
    let adds_after_first = h.stats(TO, Api::ItemAdd).calls;

    // The same file again, as a second job: every item is already listed on that shop.
    let second = h.enqueue_listing(50);
    h.spawn_worker(8, 2);
    let status = h.wait_job(second, Duration::from_secs(120)).await;
    assert_eq!(status.job.counts.skipped, 50, "{:?}", status.job.counts);
    h.wait_workers(Duration::from_secs(60));
    assert_eq!(created(&h), 50, "a second job created products");
    assert_eq!(
        h.stats(TO, Api::ItemAdd).calls,
        adds_after_first,
        "the second job called item_add for items already listed"
    );

    // Asked to relist: new products, on purpose.
    let items = h.item_file(50);
    let third = h.enqueue(&[
        "listing",
        "--from",
        "alibaba",
        "--to",
        "taobao",
        "--items",
        items.to_str().expect("utf-8 temp path"),
        "--relist",
    ]);
    h.spawn_worker(8, 2);
    let status = h.wait_job(third, Duration::from_secs(120)).await;
    assert_eq!(status.job.counts.done, 50, "{:?}", status.job.counts);
    h.wait_workers(Duration::from_secs(60));
    assert_eq!(created(&h), 100);
}

/// The same job's items queued anew while their first run is still writing them (Redis lost
/// and `reconcile` run: the queue no longer knows the first run's task) are written once:
/// the second run waits for the first's claims instead of looking up and writing beside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_queued_anew_while_their_first_run_writes_are_written_once() {
    const ITEMS: u64 = 40;
    let _serial = jobs_harness::serial().await;
    // Slow enough (5 calls/s per API) that the first run is still writing when the second
    // starts; a heartbeat of 30 s so the first run does not learn of the Redis loss before.
    let opts = ClientOpts {
        rate: 5.0,
        burst: 1.0,
        heartbeat_s: 30,
        missed_heartbeats: 3,
        ..ClientOpts::default()
    };
    let mut h = Harness::start(jobs_harness::listing_sim(), &opts).await;
    if !h.redis.owned() {
        eprintln!("skipped: the Redis restart needs a private redis-server (REDIS_URL is set)");
        return;
    }
    let job = h.enqueue_listing(ITEMS);
    h.spawn_worker(8, 3);
    // The first run has written a few items and goes on with the rest.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while h.stats(TO, Api::ItemAdd).calls < 5 {
        assert!(std::time::Instant::now() < deadline, "no write started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    h.redis.stop();
    h.redis.restart();
    let out = h.run(&["reconcile", &job.to_string()]);
    assert!(out.status.success(), "{out:?}");
    h.spawn_worker(8, 3);
    let status = h.wait_job(job, Duration::from_secs(300)).await;
    assert_eq!(status.job.counts.done, ITEMS, "{:?}", status.job.counts);
    h.wait_workers(Duration::from_secs(120));
    let add = h.stats(TO, Api::ItemAdd);
    assert_eq!(
        (created(&h), add.duplicate_writes),
        (ITEMS, 0),
        "products and duplicates by seller code ({} item_add calls)",
        add.calls
    );
}
