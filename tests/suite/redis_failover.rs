//! The fleet's Redis behind Sentinel (a primary, a replica, three sentinels): a listing job with
//! three workers meets a forced failover (`SENTINEL FAILOVER`) and then its new primary killed,
//! and finishes with no operator: every item written once at the simulator, none failed, and
//! the workers follow the primary each time.

use crate::jobs_harness;
use crate::support::sentinel::SentinelSet;

use crate::support::ledger::Kind;
use jobs_harness::{ClientOpts, Harness};
use std::time::Duration;
use syncfleet::platform::{Api, Platform};
use syncfleet::store::JobState;

const TO: Platform = Platform::Taobao;
const ITEMS: u64 = 2_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_survives_two_failovers_without_an_operator() {
    let _serial = jobs_harness::serial().await;
    let mut set = SentinelSet::start();
    let first_primary = set.primary_port();
    let opts = ClientOpts {
        rate: 150.0,
        chunk_size: 20,
        heal_interval_s: 2,
        ..ClientOpts::default()
    };
    let mut h = Harness::start_with_redis(
        Kind::Sqlite,
        jobs_harness::listing_sim(),
        &opts,
        set.as_test_redis(),
    )
    .await;
    let job = h.enqueue_listing(ITEMS);
    for _ in 0..3 {
        h.spawn_worker(4, 10);
    }
    let bound = Duration::from_secs(180);

    h.wait_terminal(job, ITEMS / 4, bound).await;
    let second_primary = set.force_failover();
    assert_ne!(second_primary, first_primary);
    // The demoted primary replicates the new one before the next failover can promote it.
    set.wait_settled(Duration::from_secs(60));

    h.wait_terminal(job, ITEMS * 3 / 5, bound).await;
    let third_primary = set.kill_primary();
    assert_eq!(
        third_primary, first_primary,
        "the demoted first primary is the only replica left to promote"
    );

    let status = h.wait_job(job, bound).await;
    let logs = h.worker_logs();
    h.wait_workers(Duration::from_secs(120));
    for n in 0..3 {
        let err = std::fs::read_to_string(h.dir.path().join(format!("worker{n}.err")))
            .unwrap_or_default();
        assert!(
            err.contains("redis primary moved"),
            "worker {n} followed the primary:\n{err}"
        );
    }
    let c = &status.job.counts;
    assert_eq!(status.job.state, JobState::Finished, "{c:?}\n{logs}");
    assert_eq!((c.done, c.failed), (ITEMS, 0), "{c:?}\n{logs}");
    let add = h.stats(TO, Api::ItemAdd);
    assert_eq!(
        (add.ok - add.duplicate_writes, add.duplicate_writes),
        (ITEMS, 0),
        "each item written once at the platform, none twice: {add:?}"
    );
}
