//! The Redis Streams queue against a real redis-server: one regression test per apalis-redis
//! 1.0.0 defect of DESIGN section 10, each reproducing the condition against our queue.

mod support;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::proxy::FreezableProxy;
use support::queue::{
    dead_recorder, eventually, spawn_worker, spawn_worker_with, stop, stop_within, wait_for, Worker,
};
use support::redis::TestRedis;
use syncfleet::jobs::queue::{
    Queue, QueueError, QueueOptions, RedisQueue, Shutdown, TaskCtx, TaskMsg, TaskResult,
    WorkerOptions,
};

fn opts(redis: &TestRedis) -> QueueOptions {
    QueueOptions {
        name: redis.prefix.clone(),
        push_batch: 5000,
        poll_interval: Duration::from_millis(20),
        heartbeat: Duration::from_millis(100),
        missed_heartbeats: 3,
        max_attempts: 3,
        retry_base: Duration::from_millis(50),
        retry_cap: Duration::from_millis(200),
        ..QueueOptions::default()
    }
}

fn msgs(range: std::ops::Range<u32>) -> Vec<TaskMsg> {
    support::queue::msgs(7, "item-", range)
}

/// Per-chunk run counts.
#[derive(Clone, Default)]
struct Runs(Arc<Mutex<HashMap<u32, Vec<u32>>>>);

impl Runs {
    fn record(&self, m: &TaskMsg, ctx: &TaskCtx) {
        self.0
            .lock()
            .unwrap()
            .entry(m.chunk)
            .or_default()
            .push(ctx.attempt);
    }
    fn distinct(&self) -> usize {
        self.0.lock().unwrap().len()
    }
    fn total(&self) -> usize {
        self.0.lock().unwrap().values().map(|v| v.len()).sum()
    }
    fn attempts(&self, chunk: u32) -> Vec<u32> {
        self.0
            .lock()
            .unwrap()
            .get(&chunk)
            .cloned()
            .unwrap_or_default()
    }
}

async fn xlen(redis: &TestRedis, key: &str) -> u64 {
    let mut c = redis.connection();
    redis::cmd("XLEN").arg(key).query(&mut c).unwrap()
}

/// Defect 1: a backlog of 20,000 due tasks (half of them in the delayed set, all due) built
/// while no worker runs is fully processed once workers start; each task runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backlog_of_20k_due_tasks_is_processed() {
    let redis = TestRedis::start();
    let q = RedisQueue::connect(&redis.url, opts(&redis)).await.unwrap();
    assert_eq!(q.push_bulk(&msgs(0..10_000)).await.unwrap(), 10_000);
    assert_eq!(
        q.push_delayed_bulk(&msgs(10_000..20_000), Duration::ZERO)
            .await
            .unwrap(),
        10_000
    );
    let len = q.len().await.unwrap();
    assert_eq!((len.ready, len.delayed), (10_000, 10_000));

    let runs = Runs::default();
    let workers: Vec<Worker> = (0..2)
        .map(|_| {
            let r = runs.clone();
            spawn_worker(&q, 32, move |m, ctx| {
                r.record(&m, &ctx);
                async { TaskResult::Done }
            })
        })
        .collect();
    wait_for(40, "20k tasks run", || runs.distinct() == 20_000).await;
    let mut done = 0;
    for w in workers {
        done += stop(w).await.done;
    }
    assert_eq!(done, 20_000);
    assert_eq!(runs.total(), 20_000, "every task ran exactly once");
    assert_eq!(q.len().await.unwrap().total(), 0);
}

/// Defect 2: dropped connections and a flushed Redis do not kill the worker; a restarted
/// worker gets a new name and proceeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_errors_do_not_kill_the_worker() {
    let redis = TestRedis::start();
    let q = RedisQueue::connect(&redis.url, opts(&redis)).await.unwrap();
    let runs = Runs::default();
    let names = Arc::new(Mutex::new(std::collections::HashSet::<String>::new()));
    let mk = |runs: Runs, names: Arc<Mutex<std::collections::HashSet<String>>>| {
        move |m: TaskMsg, ctx: TaskCtx| {
            runs.record(&m, &ctx);
            names.lock().unwrap().insert(ctx.worker.to_string());
            async {
                tokio::time::sleep(Duration::from_millis(2)).await;
                TaskResult::Done
            }
        }
    };
    let w = spawn_worker(&q, 4, mk(runs.clone(), names.clone()));
    q.push_bulk(&msgs(0..300)).await.unwrap();
    wait_for(10, "first tasks", || runs.distinct() >= 50).await;
    let mut admin = redis.connection();
    // On a shared REDIS_URL server other tests' connections would die too: private only.
    let kills = if redis.owned() { 3 } else { 0 };
    for _ in 0..kills {
        // Kills every client connection but this one (SKIPME yes is the default).
        let _: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("normal")
            .query(&mut admin)
            .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    wait_for(20, "300 tasks after connection kills", || {
        runs.distinct() == 300
    })
    .await;
    assert!(
        !w.0.is_finished(),
        "worker survived the dropped connections"
    );

    // Redis flushed mid-run: the consumer group is gone (NOGROUP) and must be recreated.
    redis.flush();
    tokio::time::sleep(Duration::from_millis(100)).await;
    q.push_bulk(&msgs(300..400)).await.unwrap();
    wait_for(20, "tasks pushed after FLUSHALL", || runs.distinct() == 400).await;
    assert!(!w.0.is_finished(), "worker survived the flush");
    let first = stop(w).await;
    assert!(
        first.backend_errors >= 1,
        "the errors were seen and survived: {first:?}"
    );

    // A restarted worker (new process start) has a new name and proceeds.
    let w2 = spawn_worker(&q, 4, mk(runs.clone(), names.clone()));
    q.push_bulk(&msgs(400..450)).await.unwrap();
    wait_for(10, "tasks of the restarted worker", || {
        runs.distinct() == 450
    })
    .await;
    let second = stop(w2).await;
    assert_ne!(first.worker, second.worker);
    assert_eq!(names.lock().unwrap().len(), 2);
    assert_eq!(runs.total(), 450, "no task ran twice");
}

/// Defect 3: a task whose worker dies without acking is recovered after the claim idle time
/// with its attempt bumped, and is dead (not looping) after max_attempts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashed_worker_task_is_recovered_with_attempts_then_dead() {
    let redis = TestRedis::start();
    let o = QueueOptions {
        max_attempts: 2,
        ..opts(&redis)
    };
    let q = RedisQueue::connect(&redis.url, o).await.unwrap();
    q.push_bulk(&msgs(0..1)).await.unwrap();
    let runs = Runs::default();
    let hang = |r: Runs| {
        move |m: TaskMsg, ctx: TaskCtx| {
            r.record(&m, &ctx);
            std::future::pending::<TaskResult>()
        }
    };
    // Worker A takes the task and "crashes" (aborted: no ack, no heartbeat).
    let a = spawn_worker(&q, 1, hang(runs.clone()));
    wait_for(10, "first delivery", || runs.total() == 1).await;
    a.0.abort();
    let started = Instant::now();
    // Worker B recovers it after the claim idle time (300 ms) as attempt 2, and crashes too.
    let b = spawn_worker(&q, 1, hang(runs.clone()));
    wait_for(10, "recovery", || runs.total() == 2).await;
    assert!(started.elapsed() >= Duration::from_millis(250));
    b.0.abort();
    assert_eq!(runs.attempts(0), vec![1, 2]);
    // Worker C must not run it a third time: it is dead.
    let c = spawn_worker(&q, 1, hang(runs.clone()));
    let mut dead = 0;
    for _ in 0..200 {
        dead = q.len().await.unwrap().dead;
        if dead == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(dead, 1, "task went to the dead letters");
    let report = stop(c).await;
    assert_eq!(report.dead, 1);
    assert_eq!(runs.attempts(0), vec![1, 2], "no third run");
    assert_eq!(q.len().await.unwrap().total(), 0);
}

/// The heartbeat keeps a live worker's slow task from being taken over (a task that runs
/// longer than the claim idle time is not an orphan).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeat_keeps_slow_tasks_owned() {
    let redis = TestRedis::start();
    let q = RedisQueue::connect(&redis.url, opts(&redis)).await.unwrap();
    let runs = Runs::default();
    let slow = |r: Runs| {
        move |m: TaskMsg, ctx: TaskCtx| {
            r.record(&m, &ctx);
            async {
                tokio::time::sleep(Duration::from_millis(1200)).await;
                TaskResult::Done
            }
        }
    };
    let a = spawn_worker(&q, 2, slow(runs.clone()));
    q.push_bulk(&msgs(0..2)).await.unwrap();
    wait_for(10, "both started", || runs.total() == 2).await;
    let b = spawn_worker(&q, 2, slow(runs.clone()));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (ra, rb) = (stop(a).await, stop(b).await);
    assert_eq!(ra.done + rb.done, 2);
    assert_eq!(rb.recovered, 0);
    assert_eq!(runs.attempts(0), vec![1]);
    assert_eq!(runs.attempts(1), vec![1]);
}

/// Defect 4: RetryAfter(d) re-runs the task after at least d, without consuming an attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_reruns_later_without_an_attempt() {
    let redis = TestRedis::start();
    let q = RedisQueue::connect(&redis.url, opts(&redis)).await.unwrap();
    let seen: Arc<Mutex<Vec<(Instant, u32)>>> = Arc::default();
    let s2 = seen.clone();
    let w = spawn_worker(&q, 2, move |_m, ctx| {
        let mut s = s2.lock().unwrap();
        s.push((Instant::now(), ctx.attempt));
        let r = if s.len() < 3 {
            TaskResult::RetryAfter(Duration::from_millis(400))
        } else {
            TaskResult::Done
        };
        async move { r }
    });
    q.push_bulk(&msgs(0..1)).await.unwrap();
    wait_for(10, "three runs", || seen.lock().unwrap().len() == 3).await;
    let report = stop(w).await;
    let s = seen.lock().unwrap().clone();
    assert!(s[1].0 - s[0].0 >= Duration::from_millis(400));
    assert!(s[2].0 - s[1].0 >= Duration::from_millis(400));
    assert_eq!(s.iter().map(|x| x.1).collect::<Vec<_>>(), vec![1, 1, 1]);
    assert_eq!((report.retry_after, report.done, report.dead), (2, 1, 0));
    assert_eq!(q.len().await.unwrap().total(), 0);
}

/// Defect 5: a panicking handler counts one attempt and the task is retried, not dead at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panic_counts_one_attempt_and_retries() {
    let redis = TestRedis::start();
    let q = RedisQueue::connect(&redis.url, opts(&redis)).await.unwrap();
    let runs = Runs::default();
    let r = runs.clone();
    let w = spawn_worker(&q, 2, move |m, ctx| {
        r.record(&m, &ctx);
        async move {
            if ctx.attempt < 3 {
                panic!("handler bug on attempt {}", ctx.attempt);
            }
            TaskResult::Done
        }
    });
    q.push_bulk(&msgs(0..1)).await.unwrap();
    wait_for(10, "third attempt", || runs.total() == 3).await;
    let report = stop(w).await;
    assert_eq!(runs.attempts(0), vec![1, 2, 3]);
    assert_eq!((report.panicked, report.done, report.dead), (2, 1, 0));
    let len = q.len().await.unwrap();
    assert_eq!((len.total(), len.dead), (0, 0));
}

/// Defect 6: acked tasks are deleted (the stream does not grow with finished work) and the
/// dead-letter stream is trimmed to `dead_max`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_stays_bounded() {
    let redis = TestRedis::start();
    let o = QueueOptions {
        max_attempts: 1,
        dead_max: 5,
        ..opts(&redis)
    };
    let q = RedisQueue::connect(&redis.url, o).await.unwrap();
    let (stream, delayed, dead) = q.key_names();
    let done = Arc::new(AtomicU64::new(0));
    let d2 = done.clone();
    let w = spawn_worker(&q, 16, move |m, _ctx| {
        d2.fetch_add(1, Ordering::Relaxed);
        let r = if m.chunk < 20 {
            TaskResult::Failed("permanent".into())
        } else {
            TaskResult::Done
        };
        async move { r }
    });
    q.push_bulk(&msgs(0..2000)).await.unwrap();
    wait_for(20, "2000 runs", || done.load(Ordering::Relaxed) == 2000).await;
    let report = stop(w).await;
    assert_eq!((report.done, report.dead), (1980, 20));
    assert_eq!(xlen(&redis, &stream).await, 0, "acked entries deleted");
    let mut c = redis.connection();
    let zc: u64 = redis::cmd("ZCARD").arg(&delayed).query(&mut c).unwrap();
    assert_eq!(zc, 0);
    assert_eq!(
        xlen(&redis, &dead).await,
        5,
        "dead letters trimmed to dead_max"
    );
}

/// Defect 7: acks work: after all tasks are acked, orphan recovery finds nothing to re-run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acked_tasks_are_not_rerun_by_orphan_recovery() {
    let redis = TestRedis::start();
    let q = RedisQueue::connect(&redis.url, opts(&redis)).await.unwrap();
    let runs = Runs::default();
    let r = runs.clone();
    let w = spawn_worker(&q, 8, move |m, ctx| {
        r.record(&m, &ctx);
        async { TaskResult::Done }
    });
    q.push_bulk(&msgs(0..300)).await.unwrap();
    wait_for(10, "300 runs", || runs.total() == 300).await;
    let a = stop(w).await;
    // Well past the claim idle time, a new worker sweeps for orphans.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let r = runs.clone();
    let w2 = spawn_worker(&q, 8, move |m, ctx| {
        r.record(&m, &ctx);
        async { TaskResult::Done }
    });
    tokio::time::sleep(Duration::from_millis(600)).await;
    let b = stop(w2).await;
    assert_eq!(a.done, 300);
    assert_eq!((b.done, b.recovered), (0, 0));
    assert_eq!(runs.total(), 300, "no re-runs");
    assert_eq!(q.len().await.unwrap().in_flight, 0);
}

/// Defect 8: non-delayed tasks start in push order (FIFO per stream); shown with one slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_delayed_tasks_start_in_fifo_order() {
    let redis = TestRedis::start();
    let q = RedisQueue::connect(&redis.url, opts(&redis)).await.unwrap();
    q.push_bulk(&msgs(0..500)).await.unwrap();
    let order: Arc<Mutex<Vec<u32>>> = Arc::default();
    let o2 = order.clone();
    let w = spawn_worker(&q, 1, move |m, _| {
        o2.lock().unwrap().push(m.chunk);
        async { TaskResult::Done }
    });
    wait_for(10, "500 runs", || order.lock().unwrap().len() == 500).await;
    stop(w).await;
    assert_eq!(*order.lock().unwrap(), (0..500).collect::<Vec<_>>());
}

/// Failed results retry with backoff and are dead after max_attempts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_retry_then_go_dead() {
    let redis = TestRedis::start();
    let q = RedisQueue::connect(&redis.url, opts(&redis)).await.unwrap();
    let runs = Runs::default();
    let r = runs.clone();
    let w = spawn_worker(&q, 2, move |m, ctx| {
        r.record(&m, &ctx);
        async { TaskResult::Failed("always".into()) }
    });
    q.push_bulk(&msgs(0..1)).await.unwrap();
    wait_for(10, "dead", || runs.total() == 3).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let report = stop(w).await;
    assert_eq!(runs.attempts(0), vec![1, 2, 3]);
    assert_eq!((report.failed, report.dead), (3, 1));
    let len = q.len().await.unwrap();
    assert_eq!((len.total(), len.dead), (0, 1));
}

/// Graceful shutdown: stop fetching, finish and ack in-flight tasks, give back the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_finishes_in_flight_and_loses_nothing() {
    let redis = TestRedis::start();
    let q = RedisQueue::connect(&redis.url, opts(&redis)).await.unwrap();
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
    wait_for(10, "4 started", || started.load(Ordering::Relaxed) == 4).await;
    let report = stop(w).await;
    let n = started.load(Ordering::Relaxed);
    assert_eq!(report.done, n, "every started task finished and was acked");
    let len = q.len().await.unwrap();
    assert_eq!(len.in_flight, 0);
    assert_eq!(len.ready, 20 - n, "the rest is still queued");
}

/// push_delayed: the task becomes ready only after the delay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_delayed_waits() {
    let redis = TestRedis::start();
    let q = RedisQueue::connect(&redis.url, opts(&redis)).await.unwrap();
    let pushed = Instant::now();
    q.push_delayed(&msgs(0..1)[0], Duration::from_millis(500))
        .await
        .unwrap();
    assert_eq!(q.len().await.unwrap().delayed, 1);
    let ran: Arc<Mutex<Option<Instant>>> = Arc::default();
    let r2 = ran.clone();
    let w = spawn_worker(&q, 1, move |_m, _| {
        *r2.lock().unwrap() = Some(Instant::now());
        async { TaskResult::Done }
    });
    wait_for(10, "delayed run", || ran.lock().unwrap().is_some()).await;
    stop(w).await;
    let at = ran.lock().unwrap().unwrap();
    assert!(at - pushed >= Duration::from_millis(500));
}

/// A private redis-server on a fixed port, so it can be restarted in place.
struct Restartable {
    port: u16,
    child: Option<std::process::Child>,
}

impl Restartable {
    fn start(port: u16) -> Restartable {
        let mut r = Restartable { port, child: None };
        r.restart();
        r
    }
    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
    fn restart(&mut self) {
        self.kill();
        let child = std::process::Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("redis-server");
        self.child = Some(child);
        let client = redis::Client::open(self.url()).unwrap();
        for _ in 0..250 {
            if let Ok(mut c) = client.get_connection() {
                if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("redis-server did not come back on port {}", self.port);
    }
}

impl Drop for Restartable {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Defect 2, the hard way: Redis goes away for a second and comes back empty (a restart
/// without persistence). The worker logs, backs off, reconnects, recreates its group and
/// processes what is pushed afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_survives_a_redis_restart() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = Restartable::start(port);
    let o = QueueOptions {
        name: "restart".into(),
        poll_interval: Duration::from_millis(20),
        heartbeat: Duration::from_millis(100),
        ..QueueOptions::default()
    };
    let q = RedisQueue::connect(&server.url(), o).await.unwrap();
    let runs = Runs::default();
    let r = runs.clone();
    let w = spawn_worker(&q, 4, move |m, ctx| {
        r.record(&m, &ctx);
        async { TaskResult::Done }
    });
    q.push_bulk(&msgs(0..100)).await.unwrap();
    wait_for(10, "100 runs", || runs.distinct() == 100).await;
    server.kill();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(!w.0.is_finished(), "worker alive while Redis is down");
    server.restart();
    // The producer's connection reconnects too; its first command may see the old socket.
    let mut pushed = false;
    for _ in 0..50 {
        if q.push_bulk(&msgs(100..200)).await.is_ok() {
            pushed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(pushed, "producer reconnected");
    wait_for(20, "tasks pushed after the restart", || {
        runs.distinct() == 200
    })
    .await;
    let report = stop(w).await;
    assert!(report.backend_errors >= 1, "{report:?}");
    assert_eq!(report.done, 200);
}

/// A worker started before Redis is up waits for it instead of failing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_retrying_waits_for_redis() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("redis://127.0.0.1:{port}/");
    assert!(RedisQueue::connect(&url, QueueOptions::default())
        .await
        .is_err());
    let s = Shutdown::new();
    let u2 = url.clone();
    let s2 = s.clone();
    let pending = tokio::spawn(async move {
        RedisQueue::connect_retrying(&u2, QueueOptions::default(), &s2).await
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!pending.is_finished(), "still waiting for Redis");
    let _server = Restartable::start(port);
    let q = tokio::time::timeout(Duration::from_secs(10), pending)
        .await
        .expect("connected after Redis came up")
        .unwrap()
        .unwrap();
    assert_eq!(q.push_bulk(&msgs(0..3)).await.unwrap(), 3);
    // With shutdown triggered and Redis gone, it gives up instead of waiting forever.
    drop(_server);
    s.trigger();
    assert!(
        RedisQueue::connect_retrying(&url, QueueOptions::default(), &s)
            .await
            .is_err()
    );
}
