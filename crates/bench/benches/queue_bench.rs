//! Queue benchmark: tasks/s of syncfleet's queue worker with a no-op handler vs a bare
//! apalis-redis 1.0 worker with a no-op handler, same Redis, same run; plus `push_bulk` of
//! 1,000 tasks of 100 keys (100k items).
//!
//! scripts/bench queue_bench [TASKS CONCURRENCY ROUNDS]
//!
//! Uses REDIS_URL when set, else starts a private redis-server on a free loopback port.
//! TASKS stays below ~8,000 by default: a larger due backlog kills every apalis-redis 1.0.0
//! worker (docs/design.md, "The queue", defect 1), which would end the baseline rather than measure it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use apalis::prelude::{BackendExt, TaskSink, WorkerBuilder, WorkerBuilderExt};
use apalis_redis::{Config as ApalisRedisConfig, RedisStorage};
use syncfleet::queue::{QueueOptions, RedisQueue, Shutdown, TaskMsg, TaskResult, WorkerOptions};

// The tests' Redis helper: `REDIS_URL`, or a private redis-server on a free port, killed on drop.
use syncfleet_testkit::support::redis as test_redis;

fn tasks(n: usize, keys: usize) -> Vec<TaskMsg> {
    (0..n)
        .map(|i| TaskMsg {
            job_id: 1,
            kind: syncfleet::store::JobKind::Listing,
            chunk: i as u32,
            keys: (0..keys).map(|k| format!("item-{i:06}-{k:03}")).collect(),
            shop: String::new(),
            lane: Default::default(),
        })
        .collect()
}

async fn ours(url: &str, n: usize, concurrency: usize, round: usize) -> anyhow::Result<f64> {
    let q = RedisQueue::connect(
        url,
        QueueOptions {
            name: format!("bench-ours-{round}"),
            poll_interval: Duration::from_millis(10),
            ..QueueOptions::default()
        },
    )
    .await?;
    q.push_bulk(&tasks(n, 1)).await?;
    let done = Arc::new(AtomicU64::new(0));
    let d2 = done.clone();
    let shutdown = Shutdown::new();
    let s2 = shutdown.clone();
    let q2 = q.clone();
    let start = Instant::now();
    let w = tokio::spawn(async move {
        q2.run_worker(
            WorkerOptions {
                concurrency,
                name: None,
                on_dead: None,
            },
            move |_m, _ctx| {
                d2.fetch_add(1, Ordering::Relaxed);
                async { TaskResult::Done }
            },
            s2,
        )
        .await
    });
    while done.load(Ordering::Relaxed) < n as u64 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // Acks land after the handler returns: the run ends when the queue is empty.
    while q.len().await?.total() > 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let secs = start.elapsed().as_secs_f64();
    shutdown.trigger();
    w.await??;
    Ok(n as f64 / secs)
}

async fn bare_apalis(url: &str, n: usize, concurrency: usize, round: usize) -> anyhow::Result<f64> {
    let conn = apalis_redis::connect(url).await?;
    let cfg = ApalisRedisConfig::default()
        .queue(format!("bench-apalis-{round}"))
        .batch_size(concurrency)
        .missed_heartbeats(2);
    let mut storage = RedisStorage::<TaskMsg, _>::new(conn).with_config(cfg);
    for chunk in tasks(n, 1).chunks(1000) {
        storage.push_bulk(chunk.to_vec()).await?;
    }
    let done = Arc::new(AtomicU64::new(0));
    let d2 = done.clone();
    let handler = move |_m: TaskMsg| {
        let d = d2.clone();
        async move {
            d.fetch_add(1, Ordering::Relaxed);
            Ok::<(), apalis::prelude::BoxDynError>(())
        }
    };
    let worker = WorkerBuilder::new(format!("bare-apalis-{}-{round}", std::process::id()))
        .backend(storage.poll_with_interval(Duration::from_millis(10)))
        .concurrency(concurrency)
        .build(handler);
    let start = Instant::now();
    let stop = Shutdown::new();
    let s2 = stop.clone();
    let w = tokio::spawn(
        worker
            .run_until(async move {
                s2.wait().await;
                Ok::<(), std::io::Error>(())
            })
            .boxed_local_free(),
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    while done.load(Ordering::Relaxed) < n as u64 {
        anyhow::ensure!(Instant::now() < deadline, "bare apalis worker stalled");
        anyhow::ensure!(!w.is_finished(), "bare apalis worker died");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let secs = start.elapsed().as_secs_f64();
    stop.trigger();
    let _ = tokio::time::timeout(Duration::from_secs(10), w).await;
    Ok(n as f64 / secs)
}

async fn ours_embedded(dir: &std::path::Path, n: usize, concurrency: usize) -> anyhow::Result<f64> {
    let q = syncfleet::queue::EmbeddedQueue::open(
        &dir.join("ours.queue.db"),
        QueueOptions {
            poll_interval: Duration::from_millis(10),
            ..QueueOptions::default()
        },
    )
    .await?;
    q.push_bulk(&tasks(n, 1)).await?;
    let done = Arc::new(AtomicU64::new(0));
    let d2 = done.clone();
    let shutdown = Shutdown::new();
    let s2 = shutdown.clone();
    let q2 = q.clone();
    let start = Instant::now();
    let w = tokio::spawn(async move {
        q2.run_worker(
            WorkerOptions {
                concurrency,
                name: None,
                on_dead: None,
            },
            move |_m, _ctx| {
                d2.fetch_add(1, Ordering::Relaxed);
                async { TaskResult::Done }
            },
            s2,
        )
        .await
    });
    while done.load(Ordering::Relaxed) < n as u64 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let secs = start.elapsed().as_secs_f64();
    shutdown.trigger();
    w.await??;
    Ok(n as f64 / secs)
}

async fn bare_sqlite(dir: &std::path::Path, n: usize, concurrency: usize) -> anyhow::Result<f64> {
    use apalis_sqlite::SqliteStorage;
    let url = format!("sqlite://{}?mode=rwc", dir.join("bare.queue.db").display());
    let pool = sqlx::SqlitePool::connect(&url).await?;
    SqliteStorage::setup(&pool).await?;
    let mut storage = SqliteStorage::<TaskMsg>::new(&pool);
    for chunk in tasks(n, 1).chunks(1000) {
        storage.push_bulk(chunk.to_vec()).await?;
    }
    let done = Arc::new(AtomicU64::new(0));
    let d2 = done.clone();
    let handler = move |_m: TaskMsg| {
        let d = d2.clone();
        async move {
            d.fetch_add(1, Ordering::Relaxed);
            Ok::<(), apalis::prelude::BoxDynError>(())
        }
    };
    let worker = WorkerBuilder::new(format!("bare-sqlite-{}", std::process::id()))
        .backend(storage.poll_with_interval(Duration::from_millis(10)))
        .concurrency(concurrency)
        .build(handler);
    let start = Instant::now();
    let stop = Shutdown::new();
    let s2 = stop.clone();
    let w = tokio::spawn(
        worker
            .run_until(async move {
                s2.wait().await;
                Ok::<(), std::io::Error>(())
            })
            .boxed_local_free(),
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    while done.load(Ordering::Relaxed) < n as u64 {
        anyhow::ensure!(
            Instant::now() < deadline,
            "bare apalis-sqlite worker stalled"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let secs = start.elapsed().as_secs_f64();
    stop.trigger();
    let _ = tokio::time::timeout(Duration::from_secs(10), w).await;
    Ok(n as f64 / secs)
}

/// `.boxed()` where the worker's types are concrete (see src/jobs/queue/redis.rs).
trait BoxedFree: std::future::Future + Send + Sized + 'static {
    fn boxed_local_free(self) -> futures::future::BoxFuture<'static, Self::Output> {
        Box::pin(self)
    }
}
impl<F: std::future::Future + Send + 'static> BoxedFree for F {}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n = args.first().copied().unwrap_or(5000);
    let concurrency = args.get(1).copied().unwrap_or(32);
    let rounds = args.get(2).copied().unwrap_or(3).max(1);
    let server = test_redis::TestRedis::start();
    let url = server.url.clone();

    // push_bulk: 1,000 tasks x 100 keys = 100k items.
    let q = RedisQueue::connect(
        &url,
        QueueOptions {
            name: "bench-push".into(),
            ..QueueOptions::default()
        },
    )
    .await?;
    let big = tasks(1000, 100);
    let mut push_ms = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        q.push_bulk(&big).await?;
        push_ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    println!(
        "push_bulk 1000 tasks x 100 keys (100k items), push_batch {}: median {:.1} ms over 5 (all: {:?})",
        q.options().push_batch,
        median(push_ms.clone()),
        push_ms.iter().map(|x| (x * 10.0).round() / 10.0).collect::<Vec<_>>()
    );

    let (mut a, mut b) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        // Alternate the order so neither side always runs on a warmer server.
        if round % 2 == 0 {
            a.push(ours(&url, n, concurrency, round).await?);
            b.push(bare_apalis(&url, n, concurrency, round).await?);
        } else {
            b.push(bare_apalis(&url, n, concurrency, round).await?);
            a.push(ours(&url, n, concurrency, round).await?);
        }
        println!(
            "round {round}: syncfleet {:.0} tasks/s, bare apalis-redis {:.0} tasks/s",
            a[round], b[round]
        );
    }
    let (ma, mb) = (median(a), median(b));
    println!(
        "no-op handler, {n} tasks, concurrency {concurrency}, median of {rounds}: syncfleet {ma:.0} tasks/s, bare apalis-redis {mb:.0} tasks/s, ratio {:.2}",
        ma / mb
    );

    // Embedded mode: our apalis-sqlite queue vs a bare apalis-sqlite worker, same run.
    let dir = tempfile::tempdir()?;
    let m = n.min(3000);
    let e_ours = ours_embedded(dir.path(), m, concurrency).await?;
    let e_bare = bare_sqlite(dir.path(), m, concurrency).await?;
    println!(
        "embedded, no-op handler, {m} tasks, concurrency {concurrency}: syncfleet {e_ours:.0} tasks/s, bare apalis-sqlite {e_bare:.0} tasks/s, ratio {:.2}",
        e_ours / e_bare
    );
    Ok(())
}
