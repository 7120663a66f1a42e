//! The task queue's contract, one body for every backend: each test runs as
//! `queue_contract::embedded::NAME` (apalis-sqlite in a temp file) and
//! `queue_contract::redis::NAME` (Redis Streams on a private redis-server). What only one
//! backend does (the Redis consumer group's orphans and heartbeats, the embedded worker's
//! ledger lock) is tested in `queue` and `queue_embedded`.

use crate::support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::queue::{dead_recorder, eventually, spawn_worker, spawn_worker_with, stop, wait_for};
use support::redis::TestRedis;
use syncfleet::queue::{
    EmbeddedQueue, Queue, QueueOptions, RedisQueue, Shutdown, TaskCtx, TaskMsg, TaskResult,
    WorkerOptions,
};

/// Which backend a test body runs on.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Embedded,
    Redis,
}

/// What keeps a backend alive for the test: its temp dir or its redis-server (dropped at the
/// test's end).
enum Held {
    Dir(#[allow(dead_code)] tempfile::TempDir),
    Redis(#[allow(dead_code)] TestRedis),
}

/// A fresh queue of `kind` with `max_attempts`; the second value keeps it alive.
async fn open(kind: Kind, max_attempts: u32) -> (Queue, Held) {
    let base = QueueOptions {
        poll_interval: Duration::from_millis(20),
        max_attempts,
        retry_base: Duration::from_millis(10),
        retry_cap: Duration::from_millis(50),
        ..QueueOptions::default()
    };
    match kind {
        Kind::Embedded => {
            let dir = tempfile::tempdir().expect("temp dir");
            let o = QueueOptions {
                name: "syncfleet-test".into(),
                heartbeat: Duration::from_millis(500),
                ..base
            };
            let q = EmbeddedQueue::open(&dir.path().join("queue.db"), o)
                .await
                .expect("embedded queue");
            (q.into(), Held::Dir(dir))
        }
        Kind::Redis => {
            let redis = TestRedis::start();
            let o = QueueOptions {
                name: redis.prefix.clone(),
                heartbeat: Duration::from_millis(250),
                missed_heartbeats: 4,
                ..base
            };
            let q = RedisQueue::connect(&redis.url, o)
                .await
                .expect("redis queue");
            (q.into(), Held::Redis(redis))
        }
    }
}

fn msgs(range: std::ops::Range<u32>) -> Vec<TaskMsg> {
    support::queue::msgs(1, "k", range)
}

/// A chunk's runs: each one's attempt and when it started.
type ChunkRuns = Vec<(u32, Instant)>;

/// Every run of every chunk.
#[derive(Clone, Default)]
struct Runs(Arc<Mutex<HashMap<u32, ChunkRuns>>>);

impl Runs {
    /// Record a run; returns how many runs the chunk has had.
    fn record(&self, m: &TaskMsg, ctx: &TaskCtx) -> usize {
        let mut g = self.0.lock().unwrap();
        let v = g.entry(m.chunk).or_default();
        v.push((ctx.attempt, Instant::now()));
        v.len()
    }
    fn distinct(&self) -> usize {
        self.0.lock().unwrap().len()
    }
    fn attempts(&self, chunk: u32) -> Vec<u32> {
        self.0
            .lock()
            .unwrap()
            .get(&chunk)
            .map(|v| v.iter().map(|x| x.0).collect())
            .unwrap_or_default()
    }
    fn times(&self, chunk: u32) -> Vec<Instant> {
        self.0
            .lock()
            .unwrap()
            .get(&chunk)
            .map(|v| v.iter().map(|x| x.1).collect())
            .unwrap_or_default()
    }
}

async fn empty(q: &Queue) -> bool {
    q.len().await.is_ok_and(|l| l.total() == 0)
}

/// Every pushed task runs once, and the queue is empty after.
async fn pushed_tasks_run_once(kind: Kind) {
    let (q, _held) = open(kind, 3).await;
    assert_eq!(q.push_bulk(&msgs(0..200)).await.unwrap(), 200);
    assert_eq!(q.len().await.unwrap().total(), 200);
    let runs = Runs::default();
    let r = runs.clone();
    let w = spawn_worker(&q, 4, move |m, ctx| {
        r.record(&m, &ctx);
        async { TaskResult::Done }
    });
    wait_for(60, "200 runs", || runs.distinct() == 200).await;
    eventually(30, "the queue empty", || empty(&q)).await;
    let report = stop(w).await;
    assert_eq!(report.done, 200);
    assert!((0..200).all(|c| runs.attempts(c) == vec![1]), "each once");
}

/// `RetryAfter(d)` runs the task again no sooner than `d`, with the same attempt number.
async fn retry_after_reruns_later_without_an_attempt(kind: Kind) {
    let (q, _held) = open(kind, 3).await;
    let runs = Runs::default();
    let r = runs.clone();
    let w = spawn_worker(&q, 2, move |m, ctx| {
        let n = r.record(&m, &ctx);
        async move {
            if n == 1 {
                TaskResult::RetryAfter(Duration::from_millis(300))
            } else {
                TaskResult::Done
            }
        }
    });
    q.push_bulk(&msgs(0..1)).await.unwrap();
    wait_for(30, "the second run", || runs.attempts(0).len() == 2).await;
    eventually(30, "the queue empty", || empty(&q)).await;
    let report = stop(w).await;
    assert_eq!(runs.attempts(0), vec![1, 1], "no attempt consumed");
    let t = runs.times(0);
    assert!(t[1] - t[0] >= Duration::from_millis(300));
    assert_eq!((report.retry_after, report.done), (1, 1));
}

/// Failures and panics each count an attempt; after `max_attempts` the task is dead, not
/// looping, and a task that succeeds on a later attempt is done.
async fn failures_and_panics_count_attempts_then_dead(kind: Kind) {
    let (q, _held) = open(kind, 3).await;
    let runs = Runs::default();
    let r = runs.clone();
    let w = spawn_worker(&q, 4, move |m, ctx| {
        r.record(&m, &ctx);
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
    wait_for(30, "chunk 0 dead and chunk 1 done", || {
        runs.attempts(0).len() == 3 && runs.attempts(1).len() == 2
    })
    .await;
    eventually(30, "nothing left to run, one dead", || async {
        q.len().await.is_ok_and(|l| l.total() == 0 && l.dead == 1)
    })
    .await;
    let report = stop(w).await;
    assert_eq!(runs.attempts(0), vec![1, 2, 3]);
    assert_eq!(runs.attempts(1), vec![1, 2]);
    assert_eq!((report.panicked, report.dead, report.done), (3, 1, 1));
}

/// A task dead after its attempts reaches the worker's dead hook once; `dead_entries` lists
/// it with its attempts and error; `requeue_dead` runs it again as a fresh task.
async fn dead_tasks_reach_the_dead_hook_and_can_be_requeued(kind: Kind) {
    let (q, _held) = open(kind, 2).await;
    q.push_bulk(&msgs(0..2)).await.unwrap();
    let (hook, seen) = dead_recorder();
    let healthy = Arc::new(AtomicBool::new(false));
    let runs = Runs::default();
    let (r, h) = (runs.clone(), healthy.clone());
    let w = spawn_worker_with(
        &q,
        WorkerOptions {
            concurrency: 2,
            name: None,
            on_dead: Some(hook),
        },
        move |m, ctx| {
            r.record(&m, &ctx);
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
    assert_eq!(runs.attempts(0), vec![1, 2]);
    eventually(30, "the dead entry listed", || async {
        q.dead_entries(10).await.is_ok_and(|d| d.len() == 1)
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
    wait_for(30, "the requeued task runs", || runs.attempts(0).len() == 3).await;
    assert_eq!(runs.attempts(0), vec![1, 2, 1], "a fresh task");
    eventually(30, "the requeued task done", || empty(&q)).await;
    let report = stop(w).await;
    assert_eq!((report.dead, report.done), (1, 2));
    assert_eq!(seen.lock().unwrap().len(), 1, "no further dead tasks");
    assert_eq!(runs.attempts(1), vec![1]);
    assert_eq!(q.len().await.unwrap().dead, 0);
}

/// `live_tasks` lists every task that will still run: ready, in flight and delayed.
async fn live_tasks_lists_ready_in_flight_and_delayed(kind: Kind) {
    let (q, _held) = open(kind, 3).await;
    let release = Shutdown::new();
    let runs = Runs::default();
    let (r, gate) = (runs.clone(), release.clone());
    let w = spawn_worker(&q, 1, move |m, ctx| {
        r.record(&m, &ctx);
        let gate = gate.clone();
        async move {
            if m.chunk == 0 {
                gate.wait().await;
            }
            TaskResult::Done
        }
    });
    q.push_bulk(&msgs(0..1)).await.unwrap();
    wait_for(30, "chunk 0 in flight", || runs.distinct() == 1).await;
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
    wait_for(30, "the ready tasks run", || runs.distinct() == 4).await;
    eventually(30, "only the delayed task left", || async {
        q.live_tasks().await.is_ok_and(|l| l == msgs(4..5))
    })
    .await;
    stop(w).await;
    assert_eq!(q.live_tasks().await.unwrap(), msgs(4..5));
}

/// A stopping worker finishes what it started; what it did not start stays queued.
async fn shutdown_finishes_in_flight_and_loses_nothing(kind: Kind) {
    let (q, _held) = open(kind, 3).await;
    let started = Arc::new(AtomicU64::new(0));
    let s2 = started.clone();
    let w = spawn_worker(&q, 4, move |_m, _| {
        s2.fetch_add(1, Ordering::Relaxed);
        async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            TaskResult::Done
        }
    });
    q.push_bulk(&msgs(0..20)).await.unwrap();
    wait_for(30, "4 started", || started.load(Ordering::Relaxed) >= 4).await;
    let report = stop(w).await;
    let n = started.load(Ordering::Relaxed);
    assert_eq!(report.done, n, "every started task finished");
    eventually(30, "the rest queued, none in flight", || async {
        q.len()
            .await
            .is_ok_and(|l| l.in_flight == 0 && l.ready == 20 - n)
    })
    .await;
}

macro_rules! on_both_queues {
    ($($name:ident),+ $(,)?) => {
        mod embedded {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Kind::Embedded).await
                }
            )+
        }
        mod redis {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Kind::Redis).await
                }
            )+
        }
    };
}

on_both_queues!(
    pushed_tasks_run_once,
    retry_after_reruns_later_without_an_attempt,
    failures_and_panics_count_attempts_then_dead,
    dead_tasks_reach_the_dead_hook_and_can_be_requeued,
    live_tasks_lists_ready_in_flight_and_delayed,
    shutdown_finishes_in_flight_and_loses_nothing,
);
