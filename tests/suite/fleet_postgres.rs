//! A fleet across hosts with the ledger on PostgreSQL. Every worker runs as its own
//! "host": a child process of the binary in an empty working directory with its own copy of
//! the config, sharing nothing with the others but the network addresses of Redis, PostgreSQL
//! and the simulator (no file, no volume). Network namespaces are not used: they would give
//! each worker its own loopback, and the tests' traffic stays on 127.0.0.1.

use crate::{jobs_harness, support};

use jobs_harness::chaos::{self, Chaos};
use jobs_harness::{ClientOpts, Harness};
use std::time::Duration;
use support::ledger::Kind;
use syncfleet::platform::{Api, Platform};
use syncfleet::store::{Backend, JobState};

const TO: Platform = Platform::Taobao;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_10k_on_separate_hosts_writes_each_item_once() {
    let _serial = jobs_harness::serial().await;
    let mut h = Harness::start_on(
        Kind::Postgres,
        jobs_harness::listing_sim(),
        &ClientOpts::default().steady_leases(),
    )
    .await;
    assert_eq!(h.store.backend(), Backend::Postgres);
    let job = h.enqueue_listing(10_000);
    for _ in 0..3 {
        h.spawn_worker(8, 3);
    }
    let status = h.wait_job(job, Duration::from_secs(120)).await;
    let exits = h.wait_workers(Duration::from_secs(30));
    println!("{}", exits.join("\n"));

    let c = &status.job.counts;
    assert_eq!(c.done, 10_000, "every item done: {c:?}");
    assert_eq!(status.job.state, JobState::Finished);
    let add = h.stats(TO, Api::ItemAdd);
    println!(
        "item_add at the simulator: calls {} ok {} duplicate writes {} rejected {}",
        add.calls, add.ok, add.duplicate_writes, add.rejected_limit
    );
    assert_eq!(add.ok - add.duplicate_writes, 10_000, "one write per item");
    assert_eq!(add.duplicate_writes, 0, "repeated writes without any fault");
    assert_eq!(exits.len(), 3);
    for line in &exits {
        assert!(line.contains("exit status: 0"), "{line}");
        assert!(!line.contains(" 0 task(s) done"), "an idle worker: {line}");
    }
    // Nothing but its config on any host's disk: no ledger file, no queue file.
    assert_eq!(h.host_files(), Vec::<std::path::PathBuf>::new());
    // The calls ledger got every worker's counts through the database (upserts per minute).
    let day = status.job.created_at.date_naive();
    let report = h
        .store
        .report_calls(
            status.job.created_at - chrono::Duration::minutes(1),
            chrono::Utc::now() + chrono::Duration::minutes(1),
        )
        .await
        .expect("report calls");
    let adds: u64 = report
        .by_api
        .iter()
        .filter(|a| a.platform == TO && a.api == Api::ItemAdd)
        .map(|a| a.calls)
        .sum();
    assert_eq!(adds, add.calls, "ledger call count = simulator's ({day})");
}

/// The chaos run on PostgreSQL and separate hosts: SIGKILL and SIGTERM of workers
/// (replaced), Redis restarted empty then `reconcile`, 10% upstream errors and an outage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_on_postgres_loses_nothing_and_writes_nothing_twice() {
    let _serial = jobs_harness::serial().await;
    let opts = ClientOpts {
        rate: 300.0,
        ..ClientOpts::default()
    };
    let mut h = Harness::start_on(Kind::Postgres, jobs_harness::listing_sim(), &opts).await;
    if !h.redis.owned() {
        eprintln!("skipped: the Redis restart needs a private redis-server (REDIS_URL is set)");
        return;
    }
    let r = chaos::run(&mut h, 3_000, Chaos::Full).await;
    r.assert_every_item_once();
    assert_eq!(h.host_files(), Vec::<std::path::PathBuf>::new());
}
