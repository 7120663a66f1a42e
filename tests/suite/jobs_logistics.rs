//! Logistics: calls are cut before they are throttled. A simulated shop
//! of 10,000 shipped orders, 70% already signed, synced twice through the real `orders` job
//! over overlapping windows (so every order appears twice in the input); then logistics passes
//! through `syncfleet enqueue logistics` + `syncfleet work`, counted at the simulator, against
//! a naive one-trace-per-input-row baseline run in the same test.

use crate::jobs_harness;

use futures::StreamExt;
use jobs_harness::{ClientOpts, Harness};
use std::time::{Duration, Instant};
use syncfleet::app::runtime::Runtime;
use syncfleet::config::Config;
use syncfleet::jobs::producer;
use syncfleet::jobs::spec::JobSpec;
use syncfleet::platform::{Api, ApiRequest, ApiResponse, Platform};
use syncfleet::sim::SimConfig;

const TB: Platform = Platform::Taobao;
const SHOP: &str = "shop-1";

fn sim_config() -> SimConfig {
    let mut cfg = SimConfig::demo()
        .with_limit(TB, Api::OrderList, 5_000, 10_000_000)
        .with_limit(TB, Api::LogisticsTrace, 20_000, 10_000_000);
    cfg.orders.per_shop = 10_000;
    cfg.orders.shipped_share = 1.0;
    cfg.orders.signed_share = 0.7;
    // No trace gains a step during the test: a later pass has nothing new to find.
    cfg.orders.event_every_s = 10_000_000;
    cfg.orders.sign_after_events = 0;
    cfg
}

async fn count(h: &Harness, sql: &str) -> i64 {
    let pool = sqlx::SqlitePool::connect(&h.db).await.expect("open ledger");
    let n = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_string()))
        .fetch_one(&pool)
        .await
        .expect("count");
    pool.close().await;
    n
}

fn trace_calls(h: &Harness) -> u64 {
    h.sim
        .stats()
        .for_platform(TB, Api::LogisticsTrace)
        .map(|s| s.calls)
        .unwrap_or(0)
}

/// The naive way: list each window's orders (1-day slices, every page) and query the trace of
/// every row, through the platform adapter. Returns the rows traced.
async fn naive_baseline(h: &Harness, windows: &[(&str, &str)]) -> u64 {
    let cfg = Config::load(&h.config).expect("config");
    let client = h
        .sim
        .config()
        .client(
            TB,
            &cfg.platform(TB).expect("taobao config").client_options(),
        )
        .expect("client");
    let timeout = Duration::from_secs(10);
    let mut rows = Vec::new();
    for (since, until) in windows {
        let since = syncfleet::cli::jobs::parse_time(since).unwrap();
        let until = syncfleet::cli::jobs::parse_time(until).unwrap();
        let mut start = since;
        while start < until {
            let end = (start + chrono::Duration::days(1)).min(until);
            for page in 1.. {
                let req = ApiRequest::OrderList {
                    start,
                    end,
                    page,
                    page_size: 100,
                };
                let ApiResponse::OrderPage(p) = client.call(&req, timeout).await.expect("page")
                else {
                    panic!("order_list answered with something else");
                };
                rows.extend(p.orders.iter().map(|o| o.order_id.clone()));
                if !p.has_next || p.orders.is_empty() {
                    break;
                }
            }
            start = end;
        }
    }
    let client = &client;
    let traced = futures::stream::iter(rows)
        .map(|order_id| async move {
            client
                .call(
                    &ApiRequest::LogisticsTrace {
                        order_id,
                        tracking: None,
                    },
                    timeout,
                )
                .await
                .expect("trace")
        })
        .buffer_unordered(32)
        .count()
        .await;
    traced as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logistics_queries_each_unsigned_order_once_and_nothing_within_the_interval() {
    let _serial = jobs_harness::serial().await;
    let mut h = Harness::start(sim_config(), &ClientOpts::default()).await;
    // The simulator's orders span 2026-01-01 .. 01-08 (GMT+8); both windows cover all of them.
    let windows = [("2025-12-31", "2026-01-08"), ("2026-01-01", "2026-01-09")];
    let mut order_jobs = Vec::new();
    for (since, until) in windows {
        order_jobs.push(h.enqueue(&[
            "orders",
            "--platform",
            "taobao",
            "--shop",
            SHOP,
            "--since",
            since,
            "--until",
            until,
        ]));
    }
    h.spawn_worker(4, 2);
    for job in &order_jobs {
        let s = h.wait_job(*job, Duration::from_secs(60)).await;
        assert_eq!(s.job.counts.failed, 0, "{:?}", s.job.counts);
    }
    h.wait_workers(Duration::from_secs(30));
    // Every order was listed twice; the ledger keeps one row per order.
    assert_eq!(count(&h, "SELECT count(*) FROM orders").await, 10_000);
    let unsigned = count(
        &h,
        "SELECT count(*) FROM orders WHERE shipped = 1 AND signed = 0",
    )
    .await as u64;
    assert!((2_700..=3_300).contains(&unsigned), "{unsigned} unsigned");
    // Both jobs listed all 10,000 orders (20,000 rows); each order was new exactly once, and
    // the second sighting changed nothing (upserts only when `modified` advanced).
    let jobs = format!("{}, {}", order_jobs[0], order_jobs[1]);
    let seen = count(
        &h,
        &format!(
            "SELECT sum(CAST(substr(result, instr(result, 'orders=') + 7) AS INTEGER)) \
             FROM job_items WHERE job_id IN ({jobs})"
        ),
    )
    .await;
    let changed = count(
        &h,
        &format!(
            "SELECT sum(CAST(substr(result, instr(result, 'changed=') + 8) AS INTEGER)) \
             FROM job_items WHERE job_id IN ({jobs})"
        ),
    )
    .await;
    assert_eq!((seen, changed), (20_000, 10_000));

    // The calls ledger agrees with the simulator, and counts the pages that changed nothing
    // (every page of a slice's second sighting) as calls without useful data.
    let report = h
        .store
        .report_calls(
            chrono::Utc::now() - chrono::Duration::hours(1),
            chrono::Utc::now() + chrono::Duration::minutes(2),
        )
        .await
        .unwrap();
    let pages = report
        .by_api
        .iter()
        .find(|a| a.platform == TB && a.api == Api::OrderList)
        .cloned()
        .expect("order_list in the calls ledger");
    assert_eq!(pages.calls, h.stats(TB, Api::OrderList).calls);
    println!(
        "order sync: {} order_list calls, {} useful ({:.0}%)",
        pages.calls,
        pages.useful,
        pages.useful_ratio() * 100.0
    );
    // 10,000 orders, 100 per page: at least 100 pages brought new orders, and the second
    // sighting of each day's orders brought nothing.
    assert!(
        pages.useful >= 100 && pages.useful < pages.calls,
        "{pages:?}"
    );

    // Baseline, same run: one trace per input row of both windows.
    let before = trace_calls(&h);
    let rows = naive_baseline(&h, &windows).await;
    let naive_calls = trace_calls(&h) - before;
    assert_eq!(rows, 20_000);
    assert_eq!(naive_calls, 20_000);

    // Pass 1: one call per distinct unsigned order at most.
    let before = trace_calls(&h);
    let pass1 = h.enqueue(&["logistics", "--platform", "taobao", "--shop", SHOP]);
    assert_eq!(h.store.job_status(pass1).await.unwrap().job.total, unsigned);
    h.spawn_worker(8, 2);
    let s1 = h.wait_job(pass1, Duration::from_secs(60)).await;
    h.wait_workers(Duration::from_secs(30));
    let pass1_end = Instant::now();
    let pass1_calls = trace_calls(&h) - before;
    println!(
        "logistics: naive baseline {naive_calls} trace calls, syncfleet first pass {pass1_calls} \
         ({unsigned} distinct unsigned orders; ratio {:.3})",
        pass1_calls as f64 / naive_calls as f64
    );
    assert!(
        pass1_calls <= unsigned,
        "{pass1_calls} calls > {unsigned} orders"
    );
    assert_eq!(s1.job.counts.done, unsigned, "{:?}", s1.job.counts);
    let events = count(&h, "SELECT count(*) FROM logistics_events").await;
    assert_eq!(events as u64, 2 * unsigned, "two steps per unsigned parcel");

    // Pass 2, within the minimum interval (1 h): the enqueue finds nothing ...
    let before = trace_calls(&h);
    let pass2 = h.enqueue(&["logistics", "--platform", "taobao", "--shop", SHOP]);
    assert_eq!(h.store.job_status(pass2).await.unwrap().job.total, 0);
    // ... and a job whose keys were taken before pass 1 (an overlapping enqueue) is cut by the
    // worker: every item skipped, no call.
    let keys: Vec<String> = sqlx::query_scalar(
        "SELECT order_id FROM orders WHERE platform = 'taobao' ORDER BY order_id",
    )
    .fetch_all(&sqlx::SqlitePool::connect(&h.db).await.unwrap())
    .await
    .unwrap();
    {
        let cfg = Config::load(&h.config).unwrap();
        let rt = Runtime::open(cfg, &h.db, Some(&h.redis.url)).await.unwrap();
        let spec = JobSpec::Logistics {
            platform: TB,
            shop: SHOP.into(),
            lane: Default::default(),
        };
        let r = producer::enqueue(&rt.store, &rt.queue, 100, &spec, &keys, |_| {})
            .await
            .unwrap();
        h.spawn_worker(8, 2);
        let s = h.wait_job(r.job_id, Duration::from_secs(60)).await;
        assert_eq!(s.job.counts.skipped, 10_000, "{:?}", s.job.counts);
        h.wait_workers(Duration::from_secs(30));
    }
    assert_eq!(trace_calls(&h) - before, 0, "calls within the interval");

    // Pass 3, after the interval (1 s in this config): the traces have no new step, so
    // nothing new is stored.
    let short = h.write_config(
        "short-interval.toml",
        &ClientOpts {
            logistics_min_interval_s: 1,
            ..ClientOpts::default()
        },
    );
    let wait = Duration::from_millis(1_200).saturating_sub(pass1_end.elapsed());
    tokio::time::sleep(wait).await;
    let before = trace_calls(&h);
    let pass3 = h.enqueue_with(
        &short,
        &["logistics", "--platform", "taobao", "--shop", SHOP],
    );
    assert_eq!(h.store.job_status(pass3).await.unwrap().job.total, unsigned);
    h.spawn_worker_with(&short, 8, 2);
    let s3 = h.wait_job(pass3, Duration::from_secs(60)).await;
    h.wait_workers(Duration::from_secs(30));
    assert_eq!(s3.job.counts.done, unsigned, "{:?}", s3.job.counts);
    assert!(trace_calls(&h) - before <= unsigned);
    assert_eq!(
        count(&h, "SELECT count(*) FROM logistics_events").await,
        events,
        "a pass without new events stored something"
    );
    let new_events = count(
        &h,
        &format!(
            "SELECT count(*) FROM job_items WHERE job_id = {pass3} AND result LIKE 'new_events=0 %'"
        ),
    )
    .await;
    assert_eq!(new_events as u64, unsigned);
}

/// The worker once marked an order queried before its trace was stored, so after a failed
/// event store the task's re-run skipped the order as "queried recently" and its events were
/// never stored. Now the mark is part of the store: a failure leaves the order un-marked and
/// the re-run queries and stores it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_event_store_leaves_order_unmarked_and_rerun_stores_it() {
    let _serial = jobs_harness::serial().await;
    let mut sim_cfg = sim_config();
    sim_cfg.orders.per_shop = 20;
    sim_cfg.orders.signed_share = 0.0;
    // Enough task attempts that the failing runs cannot exhaust them before the store heals.
    let opts = ClientOpts {
        max_attempts: 100,
        ..ClientOpts::default()
    };
    let mut h = Harness::start(sim_cfg, &opts).await;
    // Five of the simulator's orders (ids 1001..), shipped and never queried.
    let ids: Vec<String> = (1001..=1005).map(|i| i.to_string()).collect();
    let seed: Vec<syncfleet::store::OrderRecord> = ids
        .iter()
        .map(|id| syncfleet::store::OrderRecord {
            order: syncfleet::store::Order {
                platform: TB,
                order_id: id.clone(),
                shop: SHOP.into(),
                status: "WAIT_BUYER_CONFIRM_GOODS".into(),
                shipped: true,
                modified: chrono::Utc::now(),
                amount_cents: 100,
                tracking: None,
            },
            status_at: chrono::Utc::now(),
            last_status: None,
            signed: false,
            last_queried_at: None,
        })
        .collect();
    h.store.insert_orders(&seed).await.unwrap();
    // Every event store fails (a real SQLite error) until the trigger is dropped.
    let pool = sqlx::SqlitePool::connect(&h.db).await.unwrap();
    sqlx::query(
        "CREATE TRIGGER fail_events BEFORE INSERT ON logistics_events
         BEGIN SELECT RAISE(ABORT, 'test: event store fails'); END",
    )
    .execute(&pool)
    .await
    .unwrap();
    let job = h.enqueue(&["logistics", "--platform", "taobao", "--shop", SHOP]);
    assert_eq!(h.store.job_status(job).await.unwrap().job.total, 5);
    h.spawn_worker(4, 3);
    // Wait until every item was attempted (its trace called, its store failed).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let min: i64 = sqlx::query_scalar("SELECT min(attempts) FROM job_items WHERE job_id = ?")
            .bind(job)
            .fetch_one(&pool)
            .await
            .unwrap();
        if min >= 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "items not attempted within 60 s\n{}",
            h.worker_logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let marked: i64 =
        sqlx::query_scalar("SELECT count(*) FROM orders WHERE last_queried_at IS NOT NULL")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(
        marked, 0,
        "an order was marked queried though its trace was not stored"
    );
    assert_eq!(count(&h, "SELECT count(*) FROM logistics_events").await, 0);
    // The store heals: the task's re-run queries every order again and stores its events.
    sqlx::query("DROP TRIGGER fail_events")
        .execute(&pool)
        .await
        .unwrap();
    let s = h.wait_job(job, Duration::from_secs(120)).await;
    assert_eq!(
        s.job.counts.done,
        5,
        "{:?}\n{}",
        s.job.counts,
        h.worker_logs()
    );
    assert_eq!(
        count(&h, "SELECT count(*) FROM logistics_events").await,
        10,
        "two steps per parcel"
    );
    let marked: i64 =
        sqlx::query_scalar("SELECT count(*) FROM orders WHERE last_queried_at IS NOT NULL")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(marked, 5);
    pool.close().await;
    h.wait_workers(Duration::from_secs(60));
}
