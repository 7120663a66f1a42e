//! Slow answers re-queue, they never fail: a listing job whose target gate
//! (taobao item_add) is configured ten times above what the simulator really grants, so the
//! simulator answers "rate limited, ban N s" (TOP code 7) during the run. The link layer turns
//! each into "not now, come back at T"; the runner re-queues the rest of the chunk for T
//! without consuming an attempt. A worker runs in this process on each queue backend.

use crate::jobs_harness;

use jobs_harness::{ClientOpts, Harness};
use std::time::{Duration, Instant};
use syncfleet::app::runtime::{Runtime, FLEET_NAMESPACE};
use syncfleet::config::Config;
use syncfleet::jobs::producer;
use syncfleet::link::shared::FleetLink;
use syncfleet::platform::{Api, Platform};
use syncfleet::queue::Shutdown;
use syncfleet::sim::SimConfig;
use syncfleet::store::{ItemStatus, JobState};
use syncfleet::throttle::Gates;

const FROM: Platform = Platform::Alibaba;
const TO: Platform = Platform::Taobao;
const ITEMS: u64 = 300;
const CHUNK: usize = 50;
/// What the simulator really grants for taobao item_add ...
const SIM_LIMIT: u64 = 40;
/// ... and what the operator wrote in the client config: ten times too much.
const CLIENT_RATE: u64 = 400;

fn sim_config() -> SimConfig {
    SimConfig::demo()
        .with_limit(FROM, Api::ItemGet, 2_000, 10_000_000)
        .with_limit(TO, Api::ItemAdd, SIM_LIMIT, 10_000_000)
}

/// The harness's client config plus a taobao item_add gate far above the real limit.
fn client_config(h: &Harness) -> Config {
    let opts = ClientOpts {
        chunk_size: CHUNK,
        ..ClientOpts::default()
    };
    let text = format!(
        "{}\n[gates.\"taobao.item_add\"]\nrate = {CLIENT_RATE}\nburst = 20\nconcurrency = 64\np95_ms = 20\n",
        jobs_harness::client_toml(&h.sim, &opts)
    );
    let path = h.dir.path().join("slow-client.toml");
    std::fs::write(&path, &text).expect("write config");
    let cfg = Config::parse(&path, &text).expect("client config");
    assert_eq!(cfg.gate(TO, Api::ItemAdd).rate, CLIENT_RATE as f64);
    cfg
}

async fn run_listing_over_a_slow_target(redis: bool) {
    let _serial = jobs_harness::serial().await;
    let h = Harness::start(sim_config(), &ClientOpts::default()).await;
    let cfg = client_config(&h);
    let redis_url = redis.then(|| h.redis.url.clone());
    let rt = Runtime::open(cfg, &h.db, redis_url.as_deref())
        .await
        .expect("runtime");
    let (gates, fleet) = match &redis_url {
        Some(url) => (
            Gates::redis(&rt.cfg, url).await.expect("redis gates"),
            Some(
                FleetLink::connect(url, FLEET_NAMESPACE)
                    .await
                    .expect("fleet link"),
            ),
        ),
        None => (Gates::embedded(&rt.cfg), None),
    };
    let gateway = h.gateway(&rt.cfg, gates, fleet);

    let keys: Vec<String> = (1..=ITEMS).map(|i| i.to_string()).collect();
    let spec = syncfleet::app::demo::sim_listing(false).expect("the shipped listing map");
    let enq = producer::enqueue(&rt.store, &rt.queue, CHUNK, &spec, &keys, |_| {})
        .await
        .expect("enqueue");
    let chunks = ITEMS.div_ceil(CHUNK as u64);

    let started = Instant::now();
    let shutdown = Shutdown::new();
    let worker = {
        let (rt, gateway, shutdown) = (rt.clone(), gateway.clone(), shutdown.clone());
        tokio::spawn(async move { rt.work(gateway, 4, shutdown).await })
    };
    // 300 writes at 40/s take 7.5 s at best; bans and the halved rates that follow add a few.
    let status = h.wait_job(enq.job_id, Duration::from_secs(60)).await;
    let took = started.elapsed();
    shutdown.trigger();
    let report = tokio::time::timeout(Duration::from_secs(10), worker)
        .await
        .expect("worker stops after shutdown")
        .expect("worker task")
        .expect("worker run");

    let add = h.stats(TO, Api::ItemAdd);
    println!(
        "{} queue: {ITEMS} items in {took:.1?}; item_add calls {} ok {} rejected {} \
         duplicate writes {} peak/s {} (limit {SIM_LIMIT}); worker {report:?}",
        if redis { "redis" } else { "embedded" },
        add.calls,
        add.ok,
        add.rejected_limit,
        add.duplicate_writes,
        add.peak_per_second,
    );

    // The simulator did refuse calls: the Slow path ran.
    assert!(add.rejected_limit > 0, "no Slow answer: {add:?}");
    // ... and nothing else went wrong at the target.
    assert_eq!(add.calls, add.ok + add.rejected_limit, "{add:?}");
    // Every item done, each written exactly once (a refused write did not happen).
    let c = &status.job.counts;
    assert_eq!(status.job.total, ITEMS);
    assert_eq!(c.done, ITEMS, "every item done: {c:?}");
    assert_eq!((c.failed, c.pending), (0, 0), "{c:?}");
    assert_eq!(status.job.state, JobState::Finished);
    assert_eq!(add.ok - add.duplicate_writes, ITEMS, "one write per item");
    assert_eq!(add.duplicate_writes, 0, "{add:?}");
    // No attempt consumed by a Slow answer: each item recorded exactly one outcome (its
    // `done`); a re-queued item records nothing until it finishes.
    let items = h
        .store
        .items(enq.job_id, None, ITEMS as u32 + 1)
        .await
        .expect("items");
    assert_eq!(items.len() as u64, ITEMS);
    let retried: Vec<_> = items
        .iter()
        .filter(|i| i.attempts != 1 || i.status != ItemStatus::Done)
        .map(|i| (i.key.as_str(), i.status, i.attempts))
        .collect();
    assert!(retried.is_empty(), "items with attempts != 1: {retried:?}");
    // ... and no task failed: each refused chunk went back to the queue as itself
    // (RetryAfter, no attempt), never as a second copy: one `done` per chunk.
    assert_eq!((report.failed, report.panicked, report.dead), (0, 0, 0));
    assert!(report.retry_after > 0, "nothing was re-queued: {report:?}");
    assert_eq!(report.done, chunks, "one completion per chunk: {report:?}");
    let left = rt.queue.len().await.expect("queue length");
    assert_eq!((left.total(), left.dead), (0, 0), "{left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_answers_requeue_the_chunk_without_an_attempt_embedded() {
    run_listing_over_a_slow_target(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_answers_requeue_the_chunk_without_an_attempt_redis() {
    run_listing_over_a_slow_target(true).await;
}
