//! The embedded queue (apalis-sqlite in its own SQLite file) with real files in temp dirs.

use crate::support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::queue::{spawn_worker, stop, wait_for};
use syncfleet::queue::{
    EmbeddedQueue, Queue, QueueOptions, Shutdown, TaskCtx, TaskMsg, TaskResult, WorkerOptions,
};
use syncfleet::store::Store;

fn opts() -> QueueOptions {
    QueueOptions {
        name: "syncfleet-test".into(),
        poll_interval: Duration::from_millis(20),
        heartbeat: Duration::from_millis(500),
        max_attempts: 3,
        retry_base: Duration::from_millis(10),
        retry_cap: Duration::from_millis(10),
        ..QueueOptions::default()
    }
}

fn msgs(range: std::ops::Range<u32>) -> Vec<TaskMsg> {
    support::queue::msgs(1, "k", range)
}

type Runs = Arc<Mutex<HashMap<u32, Vec<(u32, Instant)>>>>;

fn record(r: &Runs, m: &TaskMsg, ctx: &TaskCtx) -> usize {
    let mut g = r.lock().unwrap();
    let v = g.entry(m.chunk).or_default();
    v.push((ctx.attempt, Instant::now()));
    v.len()
}

/// A second embedded worker process is refused through the ledger's embedded-worker lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_embedded_worker_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = format!("sqlite://{}", dir.path().join("ledger.db").display());
    let store = Store::connect(&ledger).await.unwrap();
    store.migrate().await.unwrap();
    let q1 = EmbeddedQueue::open(&dir.path().join("queue.db"), opts())
        .await
        .unwrap()
        .with_ledger_lock(store.clone());
    let q2 = EmbeddedQueue::open(&dir.path().join("queue.db"), opts())
        .await
        .unwrap()
        .with_ledger_lock(Store::connect(&ledger).await.unwrap());
    let w1 = spawn_worker(&Queue::from(q1), 4, |_m, _| async { TaskResult::Done });
    // The first worker has taken the lock.
    crate::support::queue::eventually(30, "the first worker holds the lock", || async {
        store.embedded_lock_holder().await.unwrap().is_some()
    })
    .await;
    let second = q2
        .run_worker(
            WorkerOptions::default(),
            |_m, _| async { TaskResult::Done },
            Shutdown::new(),
        )
        .await;
    let err = second.expect_err("second embedded worker refused");
    assert!(err.to_string().contains("another embedded worker"), "{err}");
    stop(w1).await;
    // Released on shutdown: a new worker may start.
    assert!(store.embedded_lock_holder().await.unwrap().is_none());
}

/// A task whose worker died is re-enqueued by apalis-sqlite (heartbeat timeout) and counts an
/// attempt, so a task that crashes its process every time ends dead instead of looping.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphans_count_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let o = QueueOptions {
        heartbeat: Duration::from_millis(300),
        missed_heartbeats: 2,
        max_attempts: 2,
        ..opts()
    };
    let q: Queue = EmbeddedQueue::open(&dir.path().join("queue.db"), o)
        .await
        .unwrap()
        .into();
    q.push_bulk(&msgs(0..1)).await.unwrap();
    let runs: Runs = Arc::default();
    let hang = |r: Runs| {
        move |m: TaskMsg, ctx: TaskCtx| {
            record(&r, &m, &ctx);
            std::future::pending::<TaskResult>()
        }
    };
    let a = spawn_worker(&q, 4, hang(runs.clone()));
    wait_for(10, "first run", || runs.lock().unwrap().len() == 1).await;
    a.0.abort();
    let b = spawn_worker(&q, 4, hang(runs.clone()));
    wait_for(20, "recovered run", || {
        runs.lock().unwrap().get(&0).is_some_and(|v| v.len() == 2)
    })
    .await;
    b.0.abort();
    let attempts: Vec<u32> = runs.lock().unwrap()[&0].iter().map(|x| x.0).collect();
    assert_eq!(attempts, vec![1, 2]);
    let c = spawn_worker(&q, 4, hang(runs.clone()));
    let mut dead = 0;
    for _ in 0..500 {
        dead = q.len().await.unwrap().dead;
        if dead == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(dead, 1, "dead, not run a third time");
    let report = stop(c).await;
    assert_eq!(report.dead, 1);
    assert_eq!(runs.lock().unwrap()[&0].len(), 2);
}

/// Queue length counts running tasks as in flight until they finish.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn len_counts_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let q: Queue = EmbeddedQueue::open(&dir.path().join("queue.db"), opts())
        .await
        .unwrap()
        .into();
    q.push_bulk(&msgs(0..10)).await.unwrap();
    let started = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let s2 = started.clone();
    let w = spawn_worker(&q, 4, move |_m, _ctx| {
        s2.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        async {
            // Long enough that the length below is read while these four still run.
            tokio::time::sleep(Duration::from_secs(5)).await;
            TaskResult::Done
        }
    });
    wait_for(10, "4 running", || {
        started.load(std::sync::atomic::Ordering::Relaxed) == 4
    })
    .await;
    let len = q.len().await.unwrap();
    assert!(len.in_flight >= 4, "{len:?}");
    assert_eq!(len.total(), 10);
    let first = stop(w).await;
    // Fetched-but-unstarted tasks are not charged an attempt by the restart.
    let runs: Runs = Arc::default();
    let r = runs.clone();
    let w2 = spawn_worker(&q, 4, move |m, ctx| {
        record(&r, &m, &ctx);
        async { TaskResult::Done }
    });
    let rest = 10 - first.done as usize;
    wait_for(15, "the rest after a restart", || {
        runs.lock().unwrap().len() == rest
    })
    .await;
    stop(w2).await;
    assert!(runs
        .lock()
        .unwrap()
        .values()
        .all(|v| v.len() == 1 && v[0].0 == 1));
}
