//! The fleet's Redis behind Sentinel (a primary, a replica, three sentinels): a listing job with
//! three workers meets a forced failover (`SENTINEL FAILOVER`) and then its new primary killed,
//! and finishes with no operator: every item made once at the simulator, none failed, the
//! workers follow the primary each time, and today's quota count lost at most the moments of
//! the moves.

use crate::jobs_harness;
use crate::support::ledger::Kind;
use crate::support::sentinel::SentinelSet;

use jobs_harness::{ClientOpts, Harness};
use std::time::Duration;
use syncfleet::platform::{Api, Platform};
use syncfleet::store::JobState;

const TO: Platform = Platform::Taobao;
const ITEMS: u64 = 2_400;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_survives_two_failovers_without_an_operator() {
    let _serial = jobs_harness::serial().await;
    let mut set = SentinelSet::start();
    let first_primary = set.primary_port();
    // 60 s of work at the gate's rate, so both failovers come in the middle of the job (a
    // forced failover settles in 20-35 s: Sentinel demotes the old primary on its own clock).
    let opts = ClientOpts {
        rate: 40.0,
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
    // The quota day the job starts in (GMT+8): a run across its midnight counts in two days.
    let day_at_start = syncfleet::time::platform_day(chrono::Utc::now());
    let job = h.enqueue_listing(ITEMS);
    for _ in 0..3 {
        h.spawn_worker(4, 10);
    }
    let bound = Duration::from_secs(180);
    let pending = |s: &syncfleet::store::JobStatus| s.job.counts.pending;

    h.wait_terminal(job, ITEMS / 5, bound).await;
    let second_primary = set.force_failover();
    assert_ne!(second_primary, first_primary);
    let at_first = h.store.job_status(job).await.expect("status");
    assert!(pending(&at_first) > 0, "the first failover came mid-job");
    // The demoted primary replicates the new one before the next failover can promote it.
    set.wait_settled(Duration::from_secs(120));

    h.wait_terminal(job, ITEMS * 3 / 5, bound).await;
    let third_primary = set.kill_primary();
    assert_eq!(
        third_primary, first_primary,
        "the demoted first primary is the only replica left to promote"
    );
    let at_second = h.store.job_status(job).await.expect("status");
    let second_mid_job = pending(&at_second) > 0;

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
    assert!(second_mid_job, "the second failover came mid-job");
    let c = &status.job.counts;
    assert_eq!(status.job.state, JobState::Finished, "{c:?}\n{logs}");
    assert_eq!((c.done, c.failed), (ITEMS, 0), "{c:?}\n{logs}");
    // Made once each. A key may be sent twice (a task fetched from the old primary in the
    // moment before the move is fetched again from the new one); the platform answers a
    // repeated key with the product it made.
    let add = h.stats(TO, Api::ItemAdd);
    assert_eq!(add.ok - add.duplicate_writes, ITEMS, "{add:?}");
    assert!(add.duplicate_writes <= ITEMS / 10, "{add:?}");

    // Today's count on the last primary lost at most the moments of the two moves (a
    // connection that kept writing to a replaced primary would lose seconds of counts).
    let now = chrono::Utc::now();
    let key = format!(
        "sf:{{{TO}:{}}}:quota:{}",
        Api::ItemAdd,
        syncfleet::time::QuotaDay::PLATFORM.label(now)
    );
    let calls = h
        .store
        .report_calls_for_day(syncfleet::time::platform_day(now))
        .await
        .expect("ledger calls")
        .by_api
        .iter()
        .filter(|a| (a.platform, a.api) == (TO, Api::ItemAdd))
        .map(|a| a.calls)
        .sum::<u64>();
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{third_primary}/"))
        .and_then(|c| c.get_connection())
        .expect("the last primary");
    let counted: Option<u64> = redis::cmd("GET").arg(&key).query(&mut c).expect("GET");
    let one_day = [now, chrono::Utc::now()]
        .iter()
        .all(|t| syncfleet::time::platform_day(*t) == day_at_start);
    assert!(
        counted.is_some_and(|n| n * 100 >= calls * 95) || !one_day,
        "{key}: {counted:?}, the ledger's {calls}"
    );
}
