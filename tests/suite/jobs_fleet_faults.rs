//! The main job in fleet mode under faults, end to end: a worker killed or stopped mid-job,
//! Redis flushed mid-job; a real Redis, a real SQLite ledger in a temp dir, the simulator in
//! this process over loopback, and `syncfleet work` worker processes started from the built
//! binary. (Apart from `jobs_fleet` so the two run as processes of their own, side by side.)

use crate::jobs_harness;

use jobs_harness::{ClientOpts, Harness};
use std::time::Duration;
use syncfleet::platform::{Api, Platform};
use syncfleet::store::JobState;

const TO: Platform = Platform::Taobao;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkilled_worker_loses_no_item_and_writes_none_twice() {
    let _serial = jobs_harness::serial().await;
    let concurrency = 8;
    let mut h = Harness::start(jobs_harness::listing_sim(), &ClientOpts::default()).await;
    let job = h.enqueue_listing(10_000);
    let victim = h.spawn_worker(concurrency, 3);
    h.spawn_worker(concurrency, 3);
    h.spawn_worker(concurrency, 3);
    h.wait_terminal(job, 2_500, Duration::from_secs(60)).await;
    h.kill_worker(victim);
    let at_kill = h.store.job_status(job).await.unwrap().job.counts;
    println!("SIGKILL at {} terminal items", at_kill.terminal());
    assert!(at_kill.pending > 0, "the kill came after the job ended");

    let status = h.wait_job(job, Duration::from_secs(90)).await;
    let exits = h.wait_workers(Duration::from_secs(30));
    println!("{}", exits.join("\n"));
    assert_eq!(status.job.counts.done, 10_000, "{:?}", status.job.counts);
    assert_eq!(status.job.state, JobState::Finished);
    let add = h.stats(TO, Api::ItemAdd);
    println!(
        "item_add at the simulator: ok {} duplicates by seller code {}, look-ups {}",
        add.ok,
        add.duplicate_writes,
        h.stats(TO, Api::ItemFind).calls
    );
    assert_eq!(h.distinct_writes(TO), 10_000, "no item written twice");
    // Only the killed worker's in-flight tasks run again; their claimed items are looked up by
    // seller code before any write, so none is written twice.
    assert_eq!(add.duplicate_writes, 0, "products twice by seller code");
    // Some survivor took over the killed worker's tasks.
    assert!(
        exits.iter().any(|l| !l.contains(", 0 recovered")),
        "no orphan recovered: {exits:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_flushed_mid_job_is_restored_by_reconcile() {
    let _serial = jobs_harness::serial().await;
    let mut h = Harness::start(jobs_harness::listing_sim(), &ClientOpts::default()).await;
    let job = h.enqueue_listing(10_000);
    h.spawn_worker(8, 5);
    h.spawn_worker(8, 5);
    h.wait_terminal(job, 2_500, Duration::from_secs(60)).await;
    assert!(h.redis.owned(), "FLUSHALL needs a private redis-server");
    h.redis.flush();
    let at_flush = h.store.job_status(job).await.unwrap().job.counts;
    println!("FLUSHALL at {} terminal items", at_flush.terminal());
    assert!(at_flush.pending > 0, "the flush came after the job ended");

    let out = h.run(&["reconcile", &job.to_string()]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    println!("{}", text.trim());
    let repushed: u64 = text
        .split("re-pushed ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("reconcile output: {text}"));
    assert!(
        repushed > 0 && repushed <= at_flush.pending,
        "re-pushed {repushed} of {} pending",
        at_flush.pending
    );

    let status = h.wait_job(job, Duration::from_secs(90)).await;
    h.wait_workers(Duration::from_secs(30));
    assert_eq!(status.job.counts.done, 10_000, "{:?}", status.job.counts);
    let add = h.stats(TO, Api::ItemAdd);
    println!(
        "item_add at the simulator: ok {} duplicate writes {}",
        add.ok, add.duplicate_writes
    );
    assert_eq!(h.distinct_writes(TO), 10_000, "no item written twice");
    // Repeats come from the tasks in flight at the flush (2 workers x 8 tasks x 100 items),
    // which ran on while reconcile re-pushed their still-pending items.
    assert!(add.duplicate_writes <= 1_600, "{}", add.duplicate_writes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_in_flight_tasks_and_repeats_nothing() {
    let _serial = jobs_harness::serial().await;
    // No worker is lost here: leases that a loaded machine's late heartbeat cannot break
    // (a broken lease abandons calls on the wire, and they repeat).
    let opts = ClientOpts::default().steady_leases();
    let mut h = Harness::start(jobs_harness::listing_sim(), &opts).await;
    let job = h.enqueue_listing(8_000);
    let leaving = h.spawn_worker(8, 3);
    h.spawn_worker(8, 3);
    h.wait_terminal(job, 1_500, Duration::from_secs(60)).await;
    h.terminate_worker(leaving);
    assert!(h.wait_worker(leaving, Duration::from_secs(30)), "exit code");
    let at_exit = h.store.job_status(job).await.unwrap().job.counts;
    println!(
        "SIGTERM'd worker gone at {} terminal items",
        at_exit.terminal()
    );
    assert!(at_exit.pending > 0, "it left only after the job ended");
    let status = h.wait_job(job, Duration::from_secs(90)).await;
    let exits = h.wait_workers(Duration::from_secs(30));
    println!("{}", exits.join("\n"));
    // The terminated worker exited on its own, cleanly, after finishing what it held.
    assert!(exits[0].contains("exit status: 0"), "{}", exits[0]);
    assert!(!exits[0].contains(" 0 task(s) done"), "{}", exits[0]);
    assert_eq!(status.job.counts.done, 8_000, "{:?}", status.job.counts);
    let add = h.stats(TO, Api::ItemAdd);
    assert_eq!(h.distinct_writes(TO), 8_000);
    // Nothing was abandoned mid-task, so nothing was written twice.
    assert_eq!(
        add.duplicate_writes,
        0,
        "repeats after a graceful stop; the workers warned:\n{}",
        h.worker_warnings()
    );
    assert!(
        exits.iter().all(|l| l.contains(", 0 recovered")),
        "a graceful stop left orphans: {exits:?}"
    );
}
