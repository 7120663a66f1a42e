//! Lanes at the gate and in the queue, on both backends (a real Redis, and in process): with a
//! share of the gate kept for interactive work, bulk work saturating the gate gets at most the
//! rest, and an interactive call waits no longer than about one interval of its own share;
//! with a daily quota, bulk stops at its part of it and interactive goes on. The queue hands
//! interactive tasks out before bulk ones.

use crate::support;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::queue::{spawn_worker, stop, wait_for};
use support::redis::TestRedis;
use syncfleet::config::Config;
use syncfleet::platform::{Api, Platform};
use syncfleet::queue::{Lane as TaskLane, Queue, QueueOptions, RedisQueue, TaskMsg, TaskResult};
use syncfleet::throttle::{GateRefusal, Gates, Lane};

const P: Platform = Platform::Taobao;
const A: Api = Api::ItemAdd;
const RATE: f64 = 40.0;

fn config(daily_quota: Option<u64>) -> Config {
    let quota = daily_quota.map_or(String::new(), |q| format!("daily_quota = {q}\n"));
    let text = format!(
        "[gates.\"taobao.item_add\"]\nrate = {RATE}\nburst = 2\nconcurrency = 32\nmax_wait_ms = 5000\n\
         boundary_band_ms = 0\ninteractive_share = 0.25\n{quota}"
    );
    Config::parse(Path::new("test.toml"), &text).expect("test config")
}

/// For `secs`, 16 bulk callers take tokens as fast as the gate gives them while one
/// interactive caller asks every 150 ms; returns (bulk tokens, interactive waits).
async fn saturate(gates: &Gates, secs: f64) -> (u64, Vec<Duration>) {
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let mut bulk = Vec::new();
    for _ in 0..16 {
        let g = gates.clone();
        bulk.push(tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < end {
                let left = end.saturating_duration_since(Instant::now());
                if g.acquire(P, A, Lane::Bulk, left).await.is_ok() && Instant::now() <= end {
                    n += 1;
                }
            }
            n
        }));
    }
    let mut waits = Vec::new();
    // Let bulk fill its bookings first.
    tokio::time::sleep(Duration::from_millis(300)).await;
    while Instant::now() + Duration::from_millis(200) < end {
        let asked = Instant::now();
        let permit = gates
            .acquire(P, A, Lane::Interactive, Duration::from_secs(2))
            .await
            .expect("an interactive token");
        waits.push(asked.elapsed());
        drop(permit);
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    let mut total = 0;
    for b in bulk {
        total += b.await.expect("bulk caller");
    }
    (total, waits)
}

fn check(name: &str, secs: f64, bulk: u64, waits: &[Duration]) {
    let mut w = waits.to_vec();
    w.sort();
    let p95 = w[(w.len() * 95 / 100).min(w.len() - 1)];
    println!(
        "{name}: bulk {bulk} tokens in {secs} s; interactive p95 wait {p95:?} ({} asks)",
        w.len()
    );
    // Bulk gets at most its 75% (plus its small burst); a loaded machine may give it less.
    let cap = RATE * 0.75 * secs + 3.0;
    assert!((bulk as f64) <= cap, "{name}: bulk took {bulk} > {cap}");
    assert!(
        bulk as f64 >= RATE * 0.75 * secs * 0.5,
        "{name}: bulk only {bulk}"
    );
    // An interactive ask waits about one interval of its share (10/s: 100 ms), not behind the
    // bulk bookings (16 callers at bulk's 30/s book about 530 ms ahead). The median, not the
    // p95: about fifteen asks, so the p95 is their slowest, which a loaded machine's stall
    // decides.
    let median = w[w.len() / 2];
    assert!(
        median <= Duration::from_millis(300),
        "{name}: interactive median wait {median:?} (p95 {p95:?})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interactive_calls_keep_their_share_while_bulk_saturates_the_gate() {
    let redis = TestRedis::start();
    let fleet = Gates::redis_with_namespace(&config(None), &redis.url, &redis.prefix)
        .await
        .expect("fleet gates");
    let (bulk, waits) = saturate(&fleet, 3.0).await;
    check("redis", 3.0, bulk, &waits);
    let embedded = Gates::embedded(&config(None));
    let (bulk, waits) = saturate(&embedded, 3.0).await;
    check("embedded", 3.0, bulk, &waits);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_stops_at_its_part_of_the_daily_quota_and_interactive_goes_on() {
    let redis = TestRedis::start();
    let fleet = Gates::redis_with_namespace(&config(Some(40)), &redis.url, &redis.prefix)
        .await
        .expect("fleet gates");
    for (name, gates) in [
        ("redis", fleet),
        ("embedded", Gates::embedded(&config(Some(40)))),
    ] {
        // 30 of 40 calls are bulk's (share 0.25 kept): the 31st bulk call is refused until
        // the day's reset, an interactive one still goes. A reply that Redis sent after the
        // client's timeout (a loaded machine) booked a token nobody used: counted apart.
        let (mut bulk, mut lost) = (0, 0);
        let refused = loop {
            match gates
                .acquire(P, A, Lane::Bulk, Duration::from_secs(5))
                .await
            {
                Ok(_) => {
                    gates.report(P, A, syncfleet::throttle::GateOutcome::Success);
                    bulk += 1;
                    gates.flush().await;
                }
                Err(GateRefusal::Unreachable {
                    timed_out: true, ..
                }) if lost < 3 => lost += 1,
                Err(r) => break r,
            }
            assert!(bulk <= 31, "{name}: bulk never stopped");
        };
        assert!(
            bulk <= 30 && bulk + lost >= 30,
            "{name}: {bulk} bulk calls ({lost} replies lost)"
        );
        assert!(
            matches!(&refused, GateRefusal::Paused { remaining, .. } if *remaining > Duration::from_secs(1)),
            "{name}: {refused:?}"
        );
        gates
            .acquire(P, A, Lane::Interactive, Duration::from_secs(5))
            .await
            .unwrap_or_else(|e| panic!("{name}: interactive refused: {e:?}"));
    }
}

/// Interactive tasks pushed after 100 bulk ones are handed out first by the fleet's queue.
/// (The embedded queue runs them on a worker of their own: the next test.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_hands_out_interactive_tasks_before_bulk_ones() {
    let redis = TestRedis::start();
    let opts = QueueOptions {
        name: redis.prefix.clone(),
        poll_interval: Duration::from_millis(20),
        ..QueueOptions::default()
    };
    let q: Queue = RedisQueue::connect(&redis.url, opts)
        .await
        .expect("queue")
        .into();
    let bulk: Vec<TaskMsg> = support::queue::msgs(1, "b", 0..100);
    let interactive: Vec<TaskMsg> = support::queue::msgs(2, "i", 0..3)
        .into_iter()
        .map(|m| TaskMsg {
            lane: TaskLane::Interactive,
            ..m
        })
        .collect();
    q.push_bulk(&bulk).await.expect("push");
    q.push_bulk(&interactive).await.expect("push");
    let order: Arc<std::sync::Mutex<Vec<i64>>> = Arc::default();
    let o = order.clone();
    let w = spawn_worker(&q, 1, move |m, _| {
        o.lock().unwrap().push(m.job_id);
        async { TaskResult::Done }
    });
    wait_for(30, "the first tasks", || order.lock().unwrap().len() >= 5).await;
    stop(w).await;
    let first: Vec<i64> = order.lock().unwrap().iter().take(3).copied().collect();
    assert_eq!(first, vec![2, 2, 2], "{:?}", order.lock().unwrap());
}

/// A worker whose every slot holds a bulk task still starts an interactive task, and no bulk
/// task takes the place kept for it. On both queues: the fleet's worker keeps one slot beyond
/// its concurrency, for an interactive task only; the embedded queue runs a worker of its own
/// on the interactive tasks' queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_worker_keeps_a_slot_for_an_interactive_task() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let redis = TestRedis::start();
    let opts = QueueOptions {
        name: redis.prefix.clone(),
        poll_interval: Duration::from_millis(20),
        ..QueueOptions::default()
    };
    let fleet: Queue = RedisQueue::connect(&redis.url, opts.clone())
        .await
        .expect("queue")
        .into();
    let dir = tempfile::tempdir().expect("dir");
    let embedded: Queue = syncfleet::queue::EmbeddedQueue::open(&dir.path().join("q.db"), opts)
        .await
        .expect("queue")
        .into();
    for (name, q) in [("redis", fleet), ("embedded", embedded)] {
        let release = Arc::new(AtomicBool::new(false));
        let bulk_running = Arc::new(AtomicUsize::new(0));
        let interactive_started = Arc::new(AtomicBool::new(false));
        let (r, b, i) = (
            release.clone(),
            bulk_running.clone(),
            interactive_started.clone(),
        );
        let w = spawn_worker(&q, 2, move |m, _| {
            let (r, b, i) = (r.clone(), b.clone(), i.clone());
            async move {
                if m.lane == TaskLane::Interactive {
                    i.store(true, Ordering::SeqCst);
                } else {
                    b.fetch_add(1, Ordering::SeqCst);
                    while !r.load(Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    b.fetch_sub(1, Ordering::SeqCst);
                }
                TaskResult::Done
            }
        });
        q.push_bulk(&support::queue::msgs(1, "b", 0..5))
            .await
            .expect("push");
        wait_for(30, "both slots held by bulk tasks", || {
            bulk_running.load(Ordering::SeqCst) == 2
        })
        .await;
        let interactive: Vec<TaskMsg> = support::queue::msgs(2, "i", 0..1)
            .into_iter()
            .map(|m| TaskMsg {
                lane: TaskLane::Interactive,
                ..m
            })
            .collect();
        q.push_bulk(&interactive).await.expect("push");
        wait_for(30, "the interactive task to start", || {
            interactive_started.load(Ordering::SeqCst)
        })
        .await;
        assert_eq!(
            bulk_running.load(Ordering::SeqCst),
            2,
            "{name}: no third bulk task took the kept slot"
        );
        release.store(true, Ordering::SeqCst);
        wait_for(30, "the bulk tasks to finish", || {
            bulk_running.load(Ordering::SeqCst) == 0
        })
        .await;
        stop(w).await;
    }
}
