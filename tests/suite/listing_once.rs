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
