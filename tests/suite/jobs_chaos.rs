//! The chaos test, bounded to a couple of minutes: a listing job of a few thousand
//! items on 3 workers while workers are SIGKILLed and SIGTERMed (and replaced), Redis
//! restarts empty (then `reconcile`), the upstream answers 10% errors and goes down for a
//! moment. The job must finish with every item `done` (or `stale`, flagged), none `failed`
//! or `pending`, and the simulator must have created exactly one item per listed item.

use crate::jobs_harness;

use jobs_harness::chaos::{self, Chaos};
use jobs_harness::{ClientOpts, Harness};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_survives_kills_restarts_errors_and_an_outage() {
    let _serial = jobs_harness::serial().await;
    let sim = jobs_harness::listing_sim();
    let opts = ClientOpts {
        rate: 300.0,
        ..ClientOpts::default()
    };
    let mut h = Harness::start(sim, &opts).await;
    if !h.redis.owned() {
        eprintln!("skipped: the Redis restart needs a private redis-server (REDIS_URL is set)");
        return;
    }
    let r = chaos::run(&mut h, 3_000, Chaos::Full).await;
    r.assert_every_item_once();
    // Stale items are flagged with the reason.
    let stale = h
        .store
        .items(1, Some(syncfleet::store::ItemStatus::Stale), 10)
        .await
        .expect("stale items");
    assert!(stale.iter().all(|i| i.error_message.is_some()), "{stale:?}");
}
