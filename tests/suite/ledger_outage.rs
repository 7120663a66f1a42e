//! A failing ledger is waited out, not turned into dead letters: the fleet's ledger
//! (PostgreSQL) is reached through a loopback proxy that is cut (every connection closed,
//! new ones refused as they come) for longer than a task's attempts last, and later stalled
//! (frozen: nothing forwarded, sockets kept open), in the middle of a listing job with two
//! worker processes. Every item ends done, none failed, none written twice.

use crate::{jobs_harness, support};

use jobs_harness::{ClientOpts, Harness};
use std::time::Duration;
use support::ledger::Kind;
use support::proxy::FreezableProxy;
use syncfleet::platform::{Api, Platform};
use syncfleet::store::JobState;

const TO: Platform = Platform::Taobao;
const ITEMS: u64 = 3_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_cut_and_stalled_mid_job_is_waited_out() {
    let _serial = jobs_harness::serial().await;
    // 3,000 items at 100/s: about 30 s of work around the outages. A task's attempts back
    // off from 200 ms (0.2 + 0.4 + 0.8 + 1.6 s for five), so a cut of a few seconds outlasts
    // them.
    let opts = ClientOpts {
        rate: 100.0,
        retry_base_ms: 200,
        ..ClientOpts::default()
    };
    let mut h = Harness::start_on(Kind::Postgres, jobs_harness::listing_sim(), &opts).await;
    let job = h.enqueue_listing(ITEMS);
    let proxy = FreezableProxy::start(&h.db).await;
    // The workers reach the ledger through the proxy; this process keeps its own way in.
    let direct = std::mem::replace(&mut h.db, proxy.url.clone());
    for _ in 0..2 {
        h.spawn_worker(8, 5);
    }
    h.wait_terminal(job, ITEMS / 5, Duration::from_secs(120))
        .await;
    // Cut for 8 s: more than twice what a task's five attempts take, so a store error
    // counted as the task's failure dead-letters it.
    proxy.cut();
    tokio::time::sleep(Duration::from_secs(8)).await;
    proxy.restore();
    h.wait_terminal(job, ITEMS / 2, Duration::from_secs(120))
        .await;
    // Stalled for 10 s: statements hang, then complete.
    proxy.freeze();
    tokio::time::sleep(Duration::from_secs(10)).await;
    proxy.thaw();
    let status = h.wait_job(job, Duration::from_secs(240)).await;
    h.db = direct;
    let exits = h.wait_workers(Duration::from_secs(60));
    println!("{}", exits.join("\n"));
    let logs: String = (0..2)
        .map(|n| {
            std::fs::read_to_string(h.dir.path().join(format!("worker{n}.err"))).unwrap_or_default()
        })
        .collect();
    let failures: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("fail") || l.contains("dead"))
        .take(10)
        .collect();
    let c = &status.job.counts;
    assert_eq!(status.job.state, JobState::Finished, "{c:?}");
    assert_eq!(
        (c.done, c.failed),
        (ITEMS, 0),
        "{c:?}; the first failures:\n{}",
        failures.join("\n")
    );
    let add = h.stats(TO, Api::ItemAdd);
    assert_eq!(
        add.ok - add.duplicate_writes,
        ITEMS,
        "each item written once: {add:?}"
    );
    assert!(
        logs.contains("the ledger is unreachable"),
        "the workers said they waited for the ledger:\n{logs}"
    );
}
