//! The Redis Streams queue against a real redis-server: one regression test per apalis-redis
//! 1.0.0 defect of docs/design.md, "The queue", each reproducing the condition against our queue.

use crate::support;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::proxy::FreezableProxy;
use support::queue::{
    dead_recorder, eventually, spawn_worker, spawn_worker_with, stop, stop_within, wait_for, Worker,
};
use support::redis::TestRedis;
use syncfleet::queue::{
    Queue, QueueError, QueueOptions, RedisQueue, Shutdown, TaskCtx, TaskMsg, TaskResult,
    WorkerOptions,
};

fn opts(redis: &TestRedis) -> QueueOptions {
    QueueOptions {
        name: redis.prefix.clone(),
        push_batch: 5000,
        poll_interval: Duration::from_millis(20),
        // Claim idle 1 s: short enough for quick orphan tests, long enough that a live
        // worker's heartbeat (every 250 ms) is never missed on a loaded 2-core machine.
        heartbeat: Duration::from_millis(250),
        missed_heartbeats: 4,
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
    let started = Instant::now();
    let a = spawn_worker(&q, 1, hang(runs.clone()));
    wait_for(10, "first delivery", || runs.total() == 1).await;
    a.0.abort();
    // Worker B recovers it as attempt 2 (and crashes too), no sooner than the claim idle time
    // (1 s) after A's delivery or its last heartbeat, both after `started`.
    let b = spawn_worker(&q, 1, hang(runs.clone()));
    wait_for(20, "recovery", || runs.total() == 2).await;
    assert!(started.elapsed() >= Duration::from_millis(950));
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
    // Claim idle 2 s (eight missed heartbeats of 250 ms: a loaded machine may delay a few),
    // and tasks that run 3 s, longer than that.
    let o = QueueOptions {
        missed_heartbeats: 8,
        ..opts(&redis)
    };
    let q = RedisQueue::connect(&redis.url, o).await.unwrap();
    let runs = Runs::default();
    let slow = |r: Runs| {
        move |m: TaskMsg, ctx: TaskCtx| {
            r.record(&m, &ctx);
            async {
                tokio::time::sleep(Duration::from_secs(3)).await;
                TaskResult::Done
            }
        }
    };
    let a = spawn_worker(&q, 2, slow(runs.clone()));
    q.push_bulk(&msgs(0..2)).await.unwrap();
    wait_for(10, "both started", || runs.total() == 2).await;
    let b = spawn_worker(&q, 2, slow(runs.clone()));
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let (ra, rb) = (stop(a).await, stop(b).await);
    assert_eq!(ra.done + rb.done, 2);
    assert_eq!(rb.recovered, 0);
    assert_eq!(runs.attempts(0), vec![1]);
    assert_eq!(runs.attempts(1), vec![1]);
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

/// The consumer group of every worker of a queue.
const GROUP: &str = "workers";

/// Deliver a new entry for `task` (`a` attempts consumed before it) to consumer `ghost`,
/// which never heartbeats: an orphan once idle for the claim idle time. One script, so no
/// live worker can fetch the entry first; every other entry must already be delivered.
fn make_orphan(redis: &TestRedis, q: &RedisQueue, task: &TaskMsg, a: u32, ghost: &str) -> String {
    let (stream, _, _) = q.key_names();
    let mut c = redis.connection();
    let (added, read): (String, String) = redis::Script::new(
        r"
local id = redis.call('XADD', KEYS[1], '*', 'd', ARGV[1], 'a', ARGV[2])
local r = redis.call('XREADGROUP', 'GROUP', ARGV[3], ARGV[4], 'COUNT', 1, 'STREAMS', KEYS[1], '>')
return {id, r[1][2][1][1]}
",
    )
    .key(&stream)
    .arg(serde_json::to_string(task).unwrap())
    .arg(a)
    .arg(GROUP)
    .arg(ghost)
    .invoke(&mut c)
    .unwrap();
    assert_eq!(added, read, "the orphan was the only undelivered entry");
    added
}

/// Pending entries of the group: (id, consumer, delivery count), in id order.
fn pending(redis: &TestRedis, q: &RedisQueue) -> Vec<(String, String, u64)> {
    let (stream, _, _) = q.key_names();
    let mut c = redis.connection();
    let p: Vec<(String, String, u64, u64)> = redis::cmd("XPENDING")
        .arg(&stream)
        .arg(GROUP)
        .arg("-")
        .arg("+")
        .arg(10_000)
        .query(&mut c)
        .unwrap();
    p.into_iter()
        .map(|(id, who, _idle, n)| (id, who, n))
        .collect()
}

async fn queue_empty(q: &RedisQueue) -> bool {
    q.len().await.is_ok_and(|l| l.total() == 0)
}

/// The orphan sweep follows XAUTOCLAIM's cursor: an orphan behind more live in-flight entries
/// than one XAUTOCLAIM call looks at (COUNT 1 scans 10 PEL entries) is still recovered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphan_behind_many_live_entries_is_recovered() {
    let redis = TestRedis::start();
    // Claim idle 4 s against a 1 s heartbeat: A's live entries stay far from being taken.
    let o = QueueOptions {
        heartbeat: Duration::from_secs(1),
        missed_heartbeats: 4,
        ..opts(&redis)
    };
    let q = RedisQueue::connect(&redis.url, o).await.unwrap();
    let release = Shutdown::new();
    let runs_a = Runs::default();
    let (r, gate) = (runs_a.clone(), release.clone());
    let a = spawn_worker(&q, 15, move |m, ctx| {
        r.record(&m, &ctx);
        let gate = gate.clone();
        async move {
            gate.wait().await;
            TaskResult::Done
        }
    });
    q.push_bulk(&msgs(0..15)).await.unwrap();
    wait_for(30, "A runs 15 tasks", || runs_a.distinct() == 15).await;

    let ghost = "ghost-never-heartbeats";
    let orphan = msgs(100..101).remove(0);
    let orphan_id = make_orphan(&redis, &q, &orphan, 0, ghost);
    let p = pending(&redis, &q);
    assert_eq!(p.len(), 16, "{p:?}");
    assert_eq!(
        p[15],
        (orphan_id, ghost.to_string(), 1),
        "the orphan is last"
    );
    let a_name = p[0].1.clone();
    assert!(p[..15].iter().all(|e| e.1 == a_name), "{p:?}");

    let runs_b = Runs::default();
    let r = runs_b.clone();
    let b = spawn_worker(&q, 1, move |m, ctx| {
        r.record(&m, &ctx);
        async { TaskResult::Done }
    });
    wait_for(40, "B recovers the orphan", || runs_b.total() >= 1).await;
    assert_eq!(runs_b.attempts(100), vec![2], "one attempt charged");
    assert_eq!(runs_b.total(), 1, "B took none of A's live entries");
    let qc = q.clone();
    eventually(20, "the orphan acked", || {
        let (redis, qc) = (&redis, &qc);
        async move { pending(redis, qc).len() == 15 }
    })
    .await;
    assert!(pending(&redis, &q).iter().all(|e| e.1 == a_name));

    release.trigger();
    eventually(20, "A's tasks acked", || queue_empty(&q)).await;
    let (ra, rb) = (stop(a).await, stop(b).await);
    assert_eq!((ra.done, ra.recovered), (15, 0));
    assert_eq!((rb.done, rb.recovered, rb.dead), (1, 1, 0));
    assert!((0..15).all(|c| runs_a.attempts(c) == vec![1]));
    assert_eq!(q.len().await.unwrap().dead, 0);
}

/// What the first worker's handlers saw.
#[derive(Default)]
struct FirstRun {
    /// Loop iterations ("calls") per chunk before the handler returned.
    iterations: HashMap<u32, u64>,
    /// Chunks whose handler returned because `lease_lost` fired.
    lost: HashSet<u32>,
}

/// A worker whose heartbeat comes too late for the claim (another worker took its entries
/// over) learns it through `lease_lost` at its next heartbeat and stops; whatever it then
/// returns (Done, RetryAfter, Failed on its last attempt) leaves the new owner's delivery
/// alone and reports nothing dead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn taken_over_task_stops_on_its_first_worker() {
    let redis = TestRedis::start();
    // A refreshes its claims every 3 s; B takes over entries idle for 500 ms.
    let qa = RedisQueue::connect(
        &redis.url,
        QueueOptions {
            heartbeat: Duration::from_secs(3),
            missed_heartbeats: 4,
            max_attempts: 1,
            ..opts(&redis)
        },
    )
    .await
    .unwrap();
    let qb = RedisQueue::connect(
        &redis.url,
        QueueOptions {
            heartbeat: Duration::from_millis(250),
            missed_heartbeats: 2,
            max_attempts: 3,
            ..opts(&redis)
        },
    )
    .await
    .unwrap();

    let first: Arc<Mutex<FirstRun>> = Arc::default();
    let a_runs = Runs::default();
    let (a_hook, a_dead) = dead_recorder();
    let (f, r) = (first.clone(), a_runs.clone());
    let a = spawn_worker_with(
        &qa,
        WorkerOptions {
            concurrency: 3,
            name: Some("worker-a".into()),
            on_dead: Some(a_hook),
        },
        move |m, ctx| {
            r.record(&m, &ctx);
            let f = f.clone();
            async move {
                let mut n = 0u64;
                // "Call" until the claim is gone (or the worker stops: a failed test ends).
                while !ctx.lease_lost.is_triggered() && !ctx.stopping.is_triggered() {
                    n += 1;
                    tokio::select! {
                        _ = ctx.lease_lost.wait() => {}
                        _ = tokio::time::sleep(Duration::from_millis(20)) => {}
                    }
                }
                let mut g = f.lock().unwrap();
                if ctx.lease_lost.is_triggered() {
                    g.lost.insert(m.chunk);
                }
                g.iterations.insert(m.chunk, n);
                // An ack, a reschedule and a dead letter (A's last attempt), each of an
                // entry A no longer owns.
                match m.chunk {
                    0 => TaskResult::Done,
                    1 => TaskResult::RetryAfter(Duration::from_millis(10)),
                    _ => TaskResult::Failed("stopped: lease lost".into()),
                }
            }
        },
    );
    qa.push_bulk(&msgs(0..3)).await.unwrap();
    wait_for(30, "A runs the three tasks", || a_runs.total() == 3).await;

    let release_b = Shutdown::new();
    let b_runs = Runs::default();
    let (r, gate) = (b_runs.clone(), release_b.clone());
    let b = spawn_worker_with(
        &qb,
        WorkerOptions {
            concurrency: 3,
            name: Some("worker-b".into()),
            on_dead: None,
        },
        move |m, ctx| {
            r.record(&m, &ctx);
            let gate = gate.clone();
            async move {
                gate.wait().await;
                TaskResult::Done
            }
        },
    );
    wait_for(30, "B takes the three tasks over", || {
        b_runs.distinct() == 3
    })
    .await;
    wait_for(30, "A's handlers return", || {
        first.lock().unwrap().iterations.len() == 3
    })
    .await;
    // Stopping A waits for its acks, reschedules and dead letters after the handlers.
    let ra = stop(a).await;
    {
        let g = first.lock().unwrap();
        assert_eq!(g.lost.len(), 3, "A saw lease_lost for every task");
        assert!(g.iterations.values().all(|&n| n > 0), "{:?}", g.iterations);
    }
    assert!(
        a_dead.lock().unwrap().is_empty(),
        "A reported a task it no longer owned dead: {:?}",
        a_dead.lock().unwrap()
    );
    assert_eq!(ra.dead, 0, "{ra:?}");
    let p = pending(&redis, &qb);
    assert_eq!(p.len(), 3, "{p:?}");
    assert!(
        p.iter().all(|e| e.1 == "worker-b"),
        "B still owns all: {p:?}"
    );
    let len = qb.len().await.unwrap();
    assert_eq!(
        (len.in_flight, len.ready, len.delayed, len.dead),
        (3, 0, 0, 0),
        "A's outcomes left B's deliveries alone"
    );
    assert!((0..3).all(|c| b_runs.attempts(c) == vec![2]));

    release_b.trigger();
    eventually(20, "B finishes", || queue_empty(&qb)).await;
    let rb = stop(b).await;
    assert_eq!((rb.done, rb.recovered, rb.dead), (3, 3, 0));
    assert_eq!(qb.len().await.unwrap().dead, 0);
    assert_eq!(a_runs.total(), 3, "A never ran them again");
}

/// A worker cut off from Redis (its connection stalls, sockets open) gives up its claims
/// before the fleet may take them over: its handler sees `lease_lost` and stops calling
/// before the new owner starts the task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_worker_gives_up_its_claims_before_the_fleet_takes_them() {
    let redis = TestRedis::start();
    let proxy = FreezableProxy::start(&redis.url).await;
    // Claim idle 8 s; A's lease runs out well before that (its watchdog ticks every 500 ms).
    let o = QueueOptions {
        heartbeat: Duration::from_secs(2),
        missed_heartbeats: 4,
        ..opts(&redis)
    };
    let qa = RedisQueue::connect(&proxy.url, o.clone()).await.unwrap();
    let qb = RedisQueue::connect(&redis.url, o).await.unwrap();

    type At = Arc<Mutex<Option<(Instant, u32)>>>;
    let (a_started, a_stopped, b_started): (At, At, At) = Default::default();
    let (st, sp) = (a_started.clone(), a_stopped.clone());
    let a = spawn_worker(&qa, 1, move |_m, ctx| {
        *st.lock().unwrap() = Some((Instant::now(), ctx.attempt));
        let sp = sp.clone();
        async move {
            let lost = tokio::select! {
                _ = ctx.lease_lost.wait() => 1,
                _ = ctx.stopping.wait() => 0,
                _ = tokio::time::sleep(Duration::from_secs(50)) => 0,
            };
            *sp.lock().unwrap() = Some((Instant::now(), lost));
            TaskResult::Done
        }
    });
    qb.push_bulk(&msgs(0..1)).await.unwrap();
    wait_for(30, "A starts the task", || {
        a_started.lock().unwrap().is_some()
    })
    .await;
    let bs = b_started.clone();
    let b = spawn_worker(&qb, 1, move |_m, ctx| {
        *bs.lock().unwrap() = Some((Instant::now(), ctx.attempt));
        async { TaskResult::Done }
    });

    let frozen_at = Instant::now();
    proxy.freeze();
    wait_for(40, "B takes the task over", || {
        b_started.lock().unwrap().is_some()
    })
    .await;
    let (b_at, b_attempt) = b_started.lock().unwrap().unwrap();
    let (a_at, a_lost) = a_stopped
        .lock()
        .unwrap()
        .expect("A's handler returned before B started the task");
    eprintln!(
        "after the freeze: A stopped at {:?}, B started at {:?}",
        a_at.saturating_duration_since(frozen_at),
        b_at.saturating_duration_since(frozen_at)
    );
    assert_eq!(a_lost, 1, "A's handler returned on lease_lost");
    assert!(
        a_at > frozen_at,
        "the lease held while heartbeats got through"
    );
    assert!(
        a_at < b_at,
        "A stopped {:?} after the freeze, B started {:?} after it",
        a_at - frozen_at,
        b_at - frozen_at
    );
    assert_eq!(b_attempt, 2, "recovered as an orphan");

    proxy.thaw();
    eventually(30, "B acked the task", || queue_empty(&qb)).await;
    let rb = stop(b).await;
    // A's stalled requests time out (10 s) or drain after the thaw.
    let ra = stop_within(a, 30).await;
    assert_eq!((rb.done, rb.recovered), (1, 1));
    assert_eq!(ra.dead + rb.dead, 0);
    let len = qb.len().await.unwrap();
    assert_eq!((len.total(), len.dead), (0, 0), "{len:?}");
}

/// Every task moved to the dead letters reaches the worker's dead hook: one failed past
/// max_attempts, and an orphan past max_attempts found by the claim sweep. `dead_entries`
/// lists them; `requeue_dead` pushes a fresh task and removes the entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_tasks_reach_the_dead_hook() {
    let redis = TestRedis::start();
    let o = QueueOptions {
        max_attempts: 2,
        ..opts(&redis)
    };
    let q = RedisQueue::connect(&redis.url, o).await.unwrap();
    // Chunk 1: delivered once already ('a' = 1) to a worker that is gone; recovering it
    // would be its third attempt.
    make_orphan(&redis, &q, &msgs(1..2)[0], 1, "ghost-gone");
    q.push_bulk(&msgs(0..1)).await.unwrap();

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
            let ok = h.load(Ordering::SeqCst);
            async move {
                if ok {
                    TaskResult::Done
                } else {
                    TaskResult::Failed("always failing".into())
                }
            }
        },
    );
    wait_for(30, "both tasks dead", || seen.lock().unwrap().len() == 2).await;
    let mut got = seen.lock().unwrap().clone();
    got.sort_by_key(|(t, _, _)| t.chunk);
    assert_eq!(got[0].0, msgs(0..1)[0]);
    assert_eq!((got[0].1, got[0].2.as_str()), (2, "always failing"));
    assert_eq!(got[1].0, msgs(1..2)[0]);
    assert_eq!(got[1].1, 2);
    assert!(got[1].2.contains("worker lost"), "{}", got[1].2);
    assert_eq!(runs.attempts(0), vec![1, 2]);
    assert!(runs.attempts(1).is_empty(), "the dead orphan did not run");

    let mut dead = q.dead_entries(10).await.unwrap();
    assert_eq!(dead.len(), 2);
    assert_eq!(q.dead_entries(1).await.unwrap().len(), 1, "limit");
    dead.sort_by_key(|e| e.task.as_ref().map(|t| t.chunk));
    assert_eq!(dead[0].task.as_ref(), Some(&msgs(0..1)[0]));
    assert_eq!(
        (dead[0].attempts, dead[0].error.as_str()),
        (2, "always failing")
    );
    assert_eq!(dead[1].task.as_ref(), Some(&msgs(1..2)[0]));
    assert_eq!(dead[1].attempts, 2);
    assert!(dead[1].error.contains("worker lost"));
    assert!(dead.iter().all(|e| !e.worker.is_empty()));
    assert_eq!(q.len().await.unwrap().dead, 2);

    healthy.store(true, Ordering::SeqCst);
    for e in &dead {
        q.requeue_dead(&e.id, e.task.as_ref()).await.unwrap();
    }
    assert!(q.dead_entries(10).await.unwrap().is_empty());
    wait_for(30, "requeued tasks run", || {
        runs.attempts(0).len() == 3 && runs.attempts(1).len() == 1
    })
    .await;
    assert_eq!(runs.attempts(0), vec![1, 2, 1], "a fresh task");
    assert_eq!(runs.attempts(1), vec![1], "a fresh task");
    eventually(20, "requeued tasks acked", || queue_empty(&q)).await;
    let report = stop(w).await;
    assert_eq!((report.dead, report.done), (2, 2));
    assert_eq!(seen.lock().unwrap().len(), 2, "no further dead tasks");
    assert_eq!(q.len().await.unwrap().dead, 0);
}

/// A stopping worker gives back what it fetched but did not start with its attempts
/// unchanged: every task's next delivery is still attempt 1, and no handler starts once the
/// worker is stopping. The stop meets the worker (concurrency 1, then 4) mid-task, as a task
/// ends (racing the next fetch), as a task's future starts, and inside the handler call of
/// the first task of a fetched batch (the rest of the batch is handed to apalis but not
/// started).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_releases_unstarted_tasks_uncharged() {
    const N: u32 = 60;
    let redis = TestRedis::start();
    let q = RedisQueue::connect(&redis.url, opts(&redis)).await.unwrap();
    q.push_bulk(&msgs(0..N)).await.unwrap();
    let runs = Runs::default();
    // Handlers entered after their worker began stopping (the stop came from a handler).
    let late = Arc::new(AtomicU64::new(0));
    for round in 0..8u32 {
        let (concurrency, mode) = (if round < 4 { 1 } else { 4 }, round % 4);
        let before = runs.total();
        let mine = Arc::new(AtomicU64::new(0));
        let (r, m2, l2) = (runs.clone(), mine.clone(), late.clone());
        let w = spawn_worker(&q, concurrency, move |m, ctx| {
            r.record(&m, &ctx);
            if mode != 0 && ctx.stopping.is_triggered() {
                l2.fetch_add(1, Ordering::SeqCst);
            }
            let n = m2.fetch_add(1, Ordering::SeqCst) + 1;
            if mode == 3 && n == 1 {
                ctx.stopping.trigger();
            }
            async move {
                if mode == 2 && n == 1 {
                    ctx.stopping.trigger();
                }
                tokio::time::sleep(Duration::from_millis(150)).await;
                if mode == 1 && n == 2 {
                    ctx.stopping.trigger();
                }
                TaskResult::Done
            }
        });
        let want = if mode == 0 || mode == 1 { 2 } else { 1 };
        wait_for(30, "tasks started in this round", || {
            runs.total() >= before + want
        })
        .await;
        let report = stop(w).await;
        assert_eq!(report.done, mine.load(Ordering::SeqCst), "round {round}");
        assert!(
            pending(&redis, &q).is_empty(),
            "round {round}: the stopped worker holds nothing"
        );
        let len = q.len().await.unwrap();
        assert_eq!(
            (len.ready as usize, len.in_flight, len.delayed),
            (N as usize - runs.total(), 0, 0),
            "round {round}"
        );
    }
    assert_eq!(
        late.load(Ordering::SeqCst),
        0,
        "no task started while stopping"
    );
    assert!(
        runs.total() < N as usize,
        "tasks are left for the last worker"
    );
    let r = runs.clone();
    let w = spawn_worker(&q, 4, move |m, ctx| {
        r.record(&m, &ctx);
        async { TaskResult::Done }
    });
    wait_for(30, "every task ran", || runs.distinct() == N as usize).await;
    eventually(20, "all acked", || queue_empty(&q)).await;
    let last = stop(w).await;
    assert_eq!(
        last.recovered, 0,
        "nothing was left to recover as an orphan"
    );
    for c in 0..N {
        assert_eq!(runs.attempts(c), vec![1], "chunk {c} ran once, uncharged");
    }
    assert_eq!(q.len().await.unwrap().dead, 0);
}

/// A queue serves one ledger: the first bind sets its fleet id; another id is refused with
/// an error that names both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_fleet_refuses_another_ledger() {
    let redis = TestRedis::start();
    let q: Queue = RedisQueue::connect(&redis.url, opts(&redis))
        .await
        .unwrap()
        .into();
    let (a, b) = ("fleet-a-7f3e21", "fleet-b-91c2d0");
    q.bind_fleet(a, "/srv/a/ledger.db").await.unwrap();
    q.bind_fleet(a, "/srv/a/ledger.db").await.unwrap();
    // Another process (its own connection) opened another ledger.
    let other = RedisQueue::connect(&redis.url, opts(&redis)).await.unwrap();
    let err = other
        .bind_fleet(b, "/srv/b/ledger.db")
        .await
        .expect_err("bound to another fleet");
    match &err {
        QueueError::FleetMismatch {
            queue_fleet,
            ledger_fleet,
            ledger,
            ..
        } => {
            assert_eq!((queue_fleet.as_str(), ledger_fleet.as_str()), (a, b));
            assert_eq!(ledger, "/srv/b/ledger.db");
        }
        e => panic!("expected FleetMismatch, got {e:?}"),
    }
    let text = err.to_string();
    assert!(text.contains(a) && text.contains(b), "{text}");
    assert!(text.contains("/srv/b/ledger.db"), "{text}");
    // The binding is unchanged, and a queue of another name is another fleet.
    q.bind_fleet(a, "/srv/a/ledger.db").await.unwrap();
    let elsewhere = RedisQueue::connect(
        &redis.url,
        QueueOptions {
            name: format!("{}-other", redis.prefix),
            ..opts(&redis)
        },
    )
    .await
    .unwrap();
    elsewhere.bind_fleet(b, "/srv/b/ledger.db").await.unwrap();
}

/// Tasks pushed for `shop` (one key each, chunks from `from`).
fn shop_msgs(shop: &str, from: u32, n: u32) -> Vec<TaskMsg> {
    msgs(from..from + n)
        .into_iter()
        .map(|m| TaskMsg {
            shop: shop.to_string(),
            ..m
        })
        .collect()
}

/// The shops of the first `n` tasks one worker (one task at a time) hands out after `big`
/// tasks of shop "big" (weight 1) and then 10 of "small" (weight `small_weight`) and 10 of
/// "tiny" (weight 1) were pushed.
async fn first_shops_handed_out(q: Queue, n: usize) -> Vec<String> {
    q.push_bulk(&shop_msgs("big", 0, 200)).await.unwrap();
    q.push_bulk(&shop_msgs("small", 1000, 10)).await.unwrap();
    q.push_bulk(&shop_msgs("tiny", 2000, 10)).await.unwrap();
    let order: Arc<Mutex<Vec<String>>> = Arc::default();
    let o2 = order.clone();
    let w = spawn_worker(&q, 1, move |m, _| {
        o2.lock().unwrap().push(m.shop.clone());
        async { TaskResult::Done }
    });
    wait_for(30, "the first tasks", || order.lock().unwrap().len() >= n).await;
    stop(w).await;
    let got = order.lock().unwrap().clone();
    got.into_iter().take(n).collect()
}

/// A big job enqueued first does not hold back the shops enqueued after it: the queue hands
/// out tasks in the shops' weighted fair order, on Redis and on the embedded queue alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shops_enqueued_after_a_big_job_get_their_weighted_share_at_once() {
    let weights = |o: QueueOptions| QueueOptions {
        shop_weights: [("small".to_string(), 2)].into_iter().collect(),
        ..o
    };
    let redis = TestRedis::start();
    let fleet: Queue = RedisQueue::connect(&redis.url, weights(opts(&redis)))
        .await
        .unwrap()
        .into();
    let dir = tempfile::tempdir().unwrap();
    let embedded: Queue =
        syncfleet::queue::EmbeddedQueue::open(&dir.path().join("q.db"), weights(opts(&redis)))
            .await
            .unwrap()
            .into();
    for (name, q) in [("redis", fleet), ("embedded", embedded)] {
        let first = first_shops_handed_out(q, 20).await;
        let count = |s: &str| first.iter().filter(|x| *x == s).count();
        // Shares 1 : 2 : 1 among the three while all wait: 5, 10 and 5 of the first 20.
        assert!(
            (9..=10).contains(&count("small")),
            "{name}: small (weight 2) should get about half: {first:?}"
        );
        assert!(
            (4..=6).contains(&count("tiny")),
            "{name}: tiny should get about a quarter: {first:?}"
        );
        assert!(
            first[..4].iter().any(|s| s == "tiny") && first[..4].iter().any(|s| s == "small"),
            "{name}: the later shops start at once: {first:?}"
        );
    }
}
