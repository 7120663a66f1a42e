//! The fleet on a three-primary Redis Cluster: a listing job with two workers whose two gates
//! live on different shards finishes with every item written once, each gate's keys on the
//! shard of its hash tag; an app's daily quota (one key across gates) is refused at start.

use crate::jobs_harness;
use crate::support::cluster::TestCluster;
use crate::support::ledger::Kind;

use jobs_harness::{ClientOpts, Harness};
use std::time::Duration;
use syncfleet::platform::{Api, Platform};
use syncfleet::store::JobState;

const ITEMS: u64 = 1_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_runs_on_a_cluster_with_its_gates_on_two_shards() {
    let _serial = jobs_harness::serial().await;
    let cluster = TestCluster::start();
    let read_gate = cluster.node_of("{alibaba:item_get}");
    let write_gate = cluster.node_of("{taobao:item_add}");
    assert_ne!(
        read_gate, write_gate,
        "the two gates hash to different shards"
    );
    let opts = ClientOpts {
        rate: 300.0,
        chunk_size: 20,
        heal_interval_s: 2,
        ..ClientOpts::default()
    };
    let mut h = Harness::start_with_redis(
        Kind::Sqlite,
        jobs_harness::listing_sim(),
        &opts,
        cluster.as_test_redis(),
    )
    .await;
    let job = h.enqueue_listing(ITEMS);
    for _ in 0..2 {
        h.spawn_worker(4, 3);
    }
    let status = h.wait_job(job, Duration::from_secs(180)).await;
    let logs = h.worker_logs();
    h.wait_workers(Duration::from_secs(60));
    let c = &status.job.counts;
    assert_eq!(status.job.state, JobState::Finished, "{c:?}\n{logs}");
    assert_eq!((c.done, c.failed), (ITEMS, 0), "{c:?}\n{logs}");
    let add = h.stats(Platform::Taobao, Api::ItemAdd);
    assert_eq!(
        (add.ok - add.duplicate_writes, add.duplicate_writes),
        (ITEMS, 0),
        "each item written once: {add:?}"
    );
    assert!(
        !cluster
            .keys_on(write_gate, "sf:{taobao:item_add}:*")
            .is_empty(),
        "the write gate's state is on its shard"
    );
    assert!(
        !cluster
            .keys_on(read_gate, "sf:{alibaba:item_get}:*")
            .is_empty(),
        "the read gate's state is on its shard"
    );

    // An app's daily quota counts across its gates: refused on a cluster, exit 2, saying why.
    let text = std::fs::read_to_string(&h.config).expect("config");
    let with_quota = text.replacen(
        "[platforms.taobao]\n",
        "[platforms.taobao]\ndaily_quota = 100000\n",
        1,
    );
    assert_ne!(text, with_quota, "the config has a taobao section");
    let path = h.dir.path().join("app-quota.toml");
    std::fs::write(&path, with_quota).expect("write config");
    let out = jobs_harness::output_within(
        h.command_with(&path, &["gate", "show"]),
        Duration::from_secs(60),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("Redis Cluster"), "{err}");
}
