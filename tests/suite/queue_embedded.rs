//! The embedded queue (apalis-sqlite in its own SQLite file) with real files in temp dirs.

use crate::support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::queue::{dead_recorder, eventually, spawn_worker, spawn_worker_with, stop, wait_for};
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_and_run() {
    let dir = tempfile::tempdir().unwrap();
    let q: Queue = EmbeddedQueue::open(&dir.path().join("queue.db"), opts())
        .await
        .unwrap()
        .into();
    assert_eq!(q.push_bulk(&msgs(0..200)).await.unwrap(), 200);
    assert_eq!(q.len().await.unwrap().total(), 200);
    let runs: Runs = Arc::default();
    let r = runs.clone();
    let w = spawn_worker(&q, 4, move |m, ctx| {
        record(&r, &m, &ctx);
        async { TaskResult::Done }
    });
    wait_for(30, "200 runs", || runs.lock().unwrap().len() == 200).await;
    let report = stop(w).await;
    assert_eq!(report.done, 200);
    assert!(runs.lock().unwrap().values().all(|v| v.len() == 1));
    assert_eq!(q.len().await.unwrap().total(), 0);
}

/// apalis-sqlite leaves a task stuck forever on `RetryAfterError`; ours re-runs it after the
/// delay (whole seconds in apalis-sqlite) with the same attempt number.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_is_not_stuck() {
    let dir = tempfile::tempdir().unwrap();
    let q: Queue = EmbeddedQueue::open(&dir.path().join("queue.db"), opts())
        .await
        .unwrap()
        .into();
    let runs: Runs = Arc::default();
    let r = runs.clone();
    let w = spawn_worker(&q, 4, move |m, ctx| {
        let n = record(&r, &m, &ctx);
        async move {
            if n == 1 {
                TaskResult::RetryAfter(Duration::from_millis(300))
            } else {
                TaskResult::Done
            }
        }
    });
    q.push_bulk(&msgs(0..1)).await.unwrap();
    wait_for(15, "second run", || {
        runs.lock().unwrap().get(&0).is_some_and(|v| v.len() == 2)
    })
    .await;
    let report = stop(w).await;
    let v = runs.lock().unwrap()[&0].clone();
    assert_eq!((v[0].0, v[1].0), (1, 1), "no attempt consumed");
    assert!(v[1].1 - v[0].1 >= Duration::from_millis(300));
    assert_eq!((report.retry_after, report.done), (1, 1));
    assert_eq!(q.len().await.unwrap().total(), 0);
}

/// Failures and panics count attempts; after max_attempts the task is dead, not looping.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_and_panics_count_attempts_then_dead() {
    let dir = tempfile::tempdir().unwrap();
    let q: Queue = EmbeddedQueue::open(&dir.path().join("queue.db"), opts())
        .await
        .unwrap()
        .into();
    let runs: Runs = Arc::default();
    let r = runs.clone();
    let w = spawn_worker(&q, 4, move |m, ctx| {
        record(&r, &m, &ctx);
        async move {
            if m.chunk == 0 {
                panic!("bug");
            }
            if ctx.attempt < 2 {
                TaskResult::Failed("flaky".into())
            } else {
                TaskResult::Done
            }
        }
    });
    q.push_bulk(&msgs(0..2)).await.unwrap();
    wait_for(15, "chunk 0 dead and chunk 1 done", || {
        let g = runs.lock().unwrap();
        g.get(&0).is_some_and(|v| v.len() == 3) && g.get(&1).is_some_and(|v| v.len() == 2)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let report = stop(w).await;
    let g = runs.lock().unwrap().clone();
    let attempts = |c: u32| g[&c].iter().map(|x| x.0).collect::<Vec<_>>();
    assert_eq!(attempts(0), vec![1, 2, 3]);
    assert_eq!(attempts(1), vec![1, 2]);
    assert_eq!((report.panicked, report.dead, report.done), (3, 1, 1));
    let len = q.len().await.unwrap();
    assert_eq!(len.total(), 0);
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
    // Let the first worker take the lock.
    tokio::time::sleep(Duration::from_millis(300)).await;
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
            tokio::time::sleep(Duration::from_millis(500)).await;
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

/// A task failed past max_attempts reaches the worker's dead hook with its attempts and
/// error; `dead_entries` lists it (until the worker's exit vacuum), `requeue_dead` pushes a
/// fresh task and removes the row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_tasks_reach_the_dead_hook() {
    let dir = tempfile::tempdir().unwrap();
    let o = QueueOptions {
        max_attempts: 2,
        ..opts()
    };
    let q: Queue = EmbeddedQueue::open(&dir.path().join("queue.db"), o)
        .await
        .unwrap()
        .into();
    q.push_bulk(&msgs(0..2)).await.unwrap();
    let (hook, seen) = dead_recorder();
    let healthy = Arc::new(AtomicBool::new(false));
    let runs: Runs = Arc::default();
    let (r, h) = (runs.clone(), healthy.clone());
    let w = spawn_worker_with(
        &q,
        WorkerOptions {
            concurrency: 2,
            name: None,
            on_dead: Some(hook),
        },
        move |m, ctx| {
            record(&r, &m, &ctx);
            let ok = m.chunk == 1 || h.load(Ordering::SeqCst);
            async move {
                if ok {
                    TaskResult::Done
                } else {
                    TaskResult::Failed("always failing".into())
                }
            }
        },
    );
    wait_for(30, "chunk 0 dead", || !seen.lock().unwrap().is_empty()).await;
    {
        let got = seen.lock().unwrap().clone();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, msgs(0..1)[0]);
        assert_eq!((got[0].1, got[0].2.as_str()), (2, "always failing"));
    }
    let attempts = |c: u32| -> Vec<u32> {
        runs.lock()
            .unwrap()
            .get(&c)
            .map(|v| v.iter().map(|x| x.0).collect())
            .unwrap_or_default()
    };
    assert_eq!(attempts(0), vec![1, 2]);

    // The row turns Failed once apalis records the handler's error.
    let qc = q.clone();
    eventually(20, "dead row listed", || {
        let q = qc.clone();
        async move { q.dead_entries(10).await.is_ok_and(|d| d.len() == 1) }
    })
    .await;
    let dead = q.dead_entries(10).await.unwrap().remove(0);
    assert_eq!(dead.task.as_ref(), Some(&msgs(0..1)[0]));
    assert_eq!(dead.attempts, 2, "{dead:?}");
    assert!(dead.error.contains("always failing"), "{dead:?}");
    assert_eq!(q.len().await.unwrap().dead, 1);

    healthy.store(true, Ordering::SeqCst);
    q.requeue_dead(&dead.id, dead.task.as_ref()).await.unwrap();
    assert!(q.dead_entries(10).await.unwrap().is_empty());
    wait_for(30, "the requeued task runs", || attempts(0).len() == 3).await;
    assert_eq!(attempts(0), vec![1, 2, 1], "a fresh task");
    eventually(20, "requeued task done", || {
        let q = qc.clone();
        async move { q.len().await.is_ok_and(|l| l.total() == 0) }
    })
    .await;
    let report = stop(w).await;
    assert_eq!((report.dead, report.done), (1, 2));
    assert_eq!(seen.lock().unwrap().len(), 1, "no further dead tasks");
    assert_eq!(attempts(1), vec![1]);
}

/// `live_tasks` lists every task that will still run: ready, in flight and delayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_tasks_lists_ready_in_flight_and_delayed() {
    let dir = tempfile::tempdir().unwrap();
    let q: Queue = EmbeddedQueue::open(&dir.path().join("queue.db"), opts())
        .await
        .unwrap()
        .into();
    let release = Shutdown::new();
    let runs: Runs = Arc::default();
    let (r, gate) = (runs.clone(), release.clone());
    let w = spawn_worker(&q, 1, move |m, ctx| {
        record(&r, &m, &ctx);
        let gate = gate.clone();
        async move {
            if m.chunk == 0 {
                gate.wait().await;
            }
            TaskResult::Done
        }
    });
    q.push_bulk(&msgs(0..1)).await.unwrap();
    wait_for(30, "chunk 0 in flight", || runs.lock().unwrap().len() == 1).await;
    q.push_bulk(&msgs(1..4)).await.unwrap();
    q.push_delayed(&msgs(4..5)[0], Duration::from_secs(120))
        .await
        .unwrap();

    let sorted = |mut v: Vec<TaskMsg>| {
        v.sort_by_key(|t| t.chunk);
        v
    };
    assert_eq!(sorted(q.live_tasks().await.unwrap()), msgs(0..5));
    assert_eq!(q.len().await.unwrap().total(), 5);

    release.trigger();
    wait_for(30, "ready tasks run", || runs.lock().unwrap().len() == 4).await;
    let qc = q.clone();
    eventually(20, "only the delayed task left", || {
        let q = qc.clone();
        async move { q.live_tasks().await.is_ok_and(|l| l == msgs(4..5)) }
    })
    .await;
    stop(w).await;
    assert_eq!(q.live_tasks().await.unwrap(), msgs(4..5));
}
