//! Continuous sync of one shop, the way a seller's day meets it: orders arrive and change all
//! the while (the simulator's live store), and the ledger should follow.
//!
//! `scripts/bench syncbench [--minutes 5] [--per-min 60] [--shops 1] [--pay 60]
//! [--ship 300] [--sign 900] [--ways cron,sweep,messages,drilled] [--chaos-minutes 10]`
//!
//! `--shops N` gives the app N shops (s1, the app's own session, and s2..sN, each with its
//! own session), each with `--per-min` new orders: one schedule per shop, one listener for
//! the app (TOP's message queue is the app's).
//!
//! The shop has a day of orders behind it when each run starts (`history_s`), so a one-day
//! window holds what it would. Three ways to keep the shop in sync, each for `--minutes` on a
//! fresh simulator, Redis and SQLite ledger, one worker process (`work --concurrency 8`):
//! - **cron** (baseline): every minute, an order job over the last day (`enqueue orders
//!   --since NOW-1d --until NOW`), as a crontab line would run today's one-shot jobs;
//! - **sweep**: `schedule add orders --every 60s --lag 5s --overlap 60s`: each run covers
//!   from the shop's watermark;
//! - **messages**: the worker also pulls the change messages (`--listen taobao:s1`); the sweep
//!   as the safety net every 5 minutes;
//! - **drilled**: the same with a 5% loss drill, 5% of messages delivered twice and 5%
//!   delivered 30 s late (what the sweep is for).
//!
//! Counted by the simulator: the order calls (`order_list`, `message_consume`,
//! `message_confirm`) per order it changed; the orders missing at their last state before
//! the final watermark after a closing sweep (cron: before its last window's end); and the
//! change-to-ledger delay of every change (the ledger is read every 250 ms: when an order's
//! stored state's time (`status_at`) first reached the change), p50 / p95.
//!
//! Then **schedules through chaos**: ticks every 30 s for `--chaos-minutes` with 3 workers,
//! one killed (SIGKILL) and another started every 45 s: ticks decided against ticks due,
//! duplicate runs, missed ticks, the coverage's gaps by the ledger's own query, and the
//! completion hook (a receiver on loopback): deliveries per finished run.
//!
//! `--ways cron,sweep,messages,drilled` picks the ways (the cron baseline is always first when run).

use syncfleet_testkit::jobs_harness;

use chrono::{DateTime, Utc};
use jobs_harness::sync::hook_receiver;
use jobs_harness::{arg, ClientOpts, Harness};
use sqlx::sqlite::SqlitePoolOptions;
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};
use syncfleet::platform::{Api, Platform};
use syncfleet::sim::{LiveOrders, SimConfig};
use syncfleet::store::RunOutcome;

const TB: Platform = Platform::Taobao;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Way {
    Cron,
    Sweep,
    Messages,
    /// Messages with the loss, duplicate and delay drills.
    Drilled,
}

/// Mean seconds from creation to payment, payment to shipping, shipping to sign-off.
#[derive(Clone, Copy)]
struct Life(u64, u64, u64);

/// The shops: (the simulator's name, the ledger's): s1 is the app's own session.
fn shop_names(n: usize) -> Vec<(String, String)> {
    (1..=n.max(1))
        .map(|i| {
            let name = format!("s{i}");
            (if i == 1 { String::new() } else { name.clone() }, name)
        })
        .collect()
}

fn sim(per_min: f64, life: Life, drills: bool, shops: usize) -> SimConfig {
    let more: Vec<String> = shop_names(shops).into_iter().skip(1).map(|s| s.1).collect();
    let more: Vec<&str> = more.iter().map(String::as_str).collect();
    let mut cfg = SimConfig::demo().with_shops(TB, &more);
    cfg.orders.live = LiveOrders {
        new_per_min: per_min,
        pay_after_s: life.0,
        ship_after_s: life.1,
        sign_after_s: life.2,
        close_share: 0.1,
        refund_share: 0.05,
        // A day of orders behind the shop: what a one-day window holds.
        history_s: 86_400,
        ..LiveOrders::default()
    };
    if drills {
        cfg.orders.live.message_loss = 0.05;
        cfg.orders.live.message_duplicate = 0.05;
        cfg.orders.live.message_delay = 0.05;
        cfg.orders.live.message_delay_s = 30;
    }
    cfg
}

struct Out {
    calls: u64,
    changed_orders: usize,
    missed: usize,
    checked: usize,
    delays: Vec<Duration>,
    unseen: usize,
    /// Per covered scheduled run: from its tick to its decision, and from the decision to its
    /// job's finish (where a sweep's delay beyond period + lag comes from).
    runs: Vec<(Duration, Duration)>,
}

fn pct(v: &[Duration], p: usize) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    s.get((s.len() * p / 100).min(s.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default()
}

fn order_calls(h: &Harness) -> u64 {
    [Api::OrderList, Api::MessageConsume, Api::MessageConfirm]
        .into_iter()
        .map(|a| h.stats(TB, a).calls)
        .sum()
}

/// `enqueue orders` of `shop` over the day before `until`: what the cron line runs.
fn enqueue_day(h: &Harness, shop: &str, until: DateTime<Utc>) -> i64 {
    h.enqueue(&[
        "orders",
        "--platform",
        "taobao",
        "--shop",
        shop,
        "--since",
        &(until - chrono::Duration::days(1)).to_rfc3339(),
        "--until",
        &until.to_rfc3339(),
    ])
}

async fn run(way: Way, minutes: u64, per_min: f64, life: Life, n_shops: usize) -> Out {
    let shops = shop_names(n_shops);
    let opts = ClientOpts {
        shops: shops.iter().skip(1).map(|s| (s.1.clone(), 1)).collect(),
        ..ClientOpts::default()
    };
    let mut h = Harness::start(sim(per_min, life, way == Way::Drilled, n_shops), &opts).await;
    let app_key = h.sim.config().apps[0].app_key.clone();
    let begun: DateTime<Utc> = Utc::now();
    let every = match way {
        Way::Sweep => "60s",
        _ => "5m",
    };
    let mut schedules = Vec::new();
    if way != Way::Cron {
        for (_, shop) in &shops {
            schedules.push(
                h.add_order_schedule_of("taobao", shop, every, "5s", "60s")
                    .await,
            );
        }
    }
    let config = h.config.clone();
    let listen: &[&str] = if matches!(way, Way::Messages | Way::Drilled) {
        &["--listen", "taobao:s1"]
    } else {
        &[]
    };
    h.spawn_worker_args(&config, 8, 0, listen, &[]);
    let ledger = SqlitePoolOptions::new()
        .max_connections(1)
        .connect(&h.db)
        .await
        .expect("read the ledger");
    // Change -> when (wall clock, as the simulator's changes are) the ledger first held it.
    let mut seen: HashMap<(u64, i64), DateTime<Utc>> = HashMap::new();
    let started = Instant::now();
    let end = started + Duration::from_secs(minutes * 60);
    let mut next_cron = started;
    while Instant::now() < end {
        if way == Way::Cron && Instant::now() >= next_cron {
            let now = Utc::now();
            for (_, shop) in &shops {
                enqueue_day(&h, shop, now);
            }
            next_cron += Duration::from_secs(60);
        }
        let stored: Vec<(String, i64)> = sqlx::query_as(
            "SELECT order_id, status_at FROM orders WHERE platform = 'taobao' AND status_at >= $1",
        )
        .bind(begun.timestamp_millis())
        .fetch_all(&ledger)
        .await
        .expect("orders");
        let stored: HashMap<u64, i64> = stored
            .into_iter()
            .filter_map(|(id, m)| Some((id.parse().ok()?, m)))
            .collect();
        let at = Utc::now();
        for o in shops.iter().flat_map(|(sim_shop, _)| {
            h.sim
                .live_orders_changed_since(TB, &app_key, sim_shop, Some(begun), Utc::now())
        }) {
            let Some(&m) = stored.get(&o.id) else {
                continue;
            };
            for (t, _) in &o.changes {
                if t.timestamp_millis() <= m {
                    seen.entry((o.id, t.timestamp())).or_insert(at);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // The closing pass: one more run over everything up to now, then compare.
    let mut until: Vec<DateTime<Utc>> = Vec::new();
    match way {
        Way::Cron => {
            let to = Utc::now();
            for (_, shop) in &shops {
                let job = enqueue_day(&h, shop, to);
                h.wait_job(job, Duration::from_secs(300)).await;
                until.push(to);
            }
        }
        _ => {
            let asked = Utc::now();
            for id in &schedules {
                h.schedule_action("resume", *id);
            }
            for id in &schedules {
                let deadline = Instant::now() + Duration::from_secs(300);
                loop {
                    let runs = h.store.schedule_runs(*id, 10_000).await.expect("runs");
                    let done = runs.iter().any(|r| {
                        r.outcome == RunOutcome::Covered
                            && r.window_ms
                                .is_some_and(|(_, to)| to >= asked.timestamp_millis() - 10_000)
                    });
                    if done {
                        break;
                    }
                    assert!(Instant::now() < deadline, "the closing sweep never settled");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                let views = h.store.schedules().await.expect("schedules");
                let view = views
                    .iter()
                    .find(|v| v.schedule.id == *id)
                    .expect("the schedule");
                until.push(view.watermark.expect("watermark"));
            }
        }
    }
    let timed: Vec<(i64, i64, i64)> = sqlx::query_as(
        "SELECT r.tick, r.decided_at, j.finished_at FROM schedule_runs r JOIN jobs j ON j.id = r.job_id \
         WHERE r.outcome = 'covered' AND j.finished_at IS NOT NULL",
    )
    .fetch_all(&ledger)
    .await
    .expect("runs");
    let ms = |v: i64| Duration::from_millis(v.max(0) as u64);
    let runs = timed
        .into_iter()
        .map(|(tick, decided, finished)| (ms(decided - tick), ms(finished - decided)))
        .collect();
    let calls = order_calls(&h);
    let mut checked = 0;
    let mut missed = 0;
    let mut live = Vec::new();
    for ((sim_shop, _), to) in shops.iter().zip(&until) {
        let (c, behind) = h.orders_behind_of(TB, sim_shop, Some(begun), *to).await;
        checked += c;
        missed += behind.len();
        live.extend(h.sim.live_orders_changed_since(
            TB,
            &app_key,
            sim_shop,
            Some(begun),
            Utc::now(),
        ));
    }
    let changed_orders = live
        .iter()
        .filter(|o| o.changes.iter().any(|(t, _)| *t >= begun))
        .count();
    let mut delays = Vec::new();
    let mut unseen = 0;
    let run_end = Utc::now() - chrono::Duration::seconds(70);
    for o in &live {
        for (t, _) in &o.changes {
            if *t < begun || *t > run_end {
                continue;
            }
            match seen.get(&(o.id, t.timestamp())) {
                Some(when) => {
                    delays.push((*when - *t).to_std().unwrap_or_default());
                }
                None => unseen += 1,
            }
        }
    }
    Out {
        calls,
        changed_orders,
        missed,
        checked,
        delays,
        unseen,
        runs,
    }
}

/// Ticks every 30 s for `minutes` with 3 workers, one killed and another started every 45 s.
async fn chaos(minutes: u64, per_min: f64, life: Life) {
    let mut h = Harness::start(sim(per_min, life, false, 1), &ClientOpts::default()).await;
    let (hook_url, hook_posts) = hook_receiver("bench-key", 0).await;
    h.add_hooks(&hook_url, "bench-key", "");
    let id = h.add_order_schedule("taobao", "30s", "5s", "30s").await;
    let first_tick = h.store.schedule(id).await.expect("schedule").next_tick_ms;
    let config = h.config.clone();
    let mut workers: Vec<u32> = (0..3).map(|_| h.spawn_worker_with(&config, 8, 0)).collect();
    let started = Instant::now();
    let end = started + Duration::from_secs(minutes * 60);
    let mut kills = 0;
    let mut turn = 0usize;
    while Instant::now() < end {
        tokio::time::sleep(
            Duration::from_secs(45).min(end.saturating_duration_since(Instant::now())),
        )
        .await;
        if Instant::now() >= end {
            break;
        }
        let victim = workers.remove(turn % workers.len());
        h.kill_worker(victim);
        kills += 1;
        turn += 1;
        workers.push(h.spawn_worker_with(&config, 8, 0));
    }
    h.schedule_action("pause", id);
    let paused_at = h.store.schedule(id).await.expect("schedule").next_tick_ms;
    h.wait_runs_settled(id, Duration::from_secs(300)).await;
    let runs = h.store.schedule_runs(id, 100_000).await.expect("runs");
    let due = (paused_at - first_tick) / 30_000;
    let decided = runs.len() as i64;
    let jobs: HashSet<i64> = runs.iter().filter_map(|r| r.job_id).collect();
    let count = |o: RunOutcome| runs.iter().filter(|r| r.outcome == o).count();
    let gaps = h.store.coverage_gaps(TB, "s1").await.expect("gaps");
    // Every finish delivered (the workers still up send what is due).
    let deadline = Instant::now() + Duration::from_secs(120);
    while h
        .store
        .hook_deliveries(100_000)
        .await
        .expect("deliveries")
        .iter()
        .any(|d| d.state != "delivered")
    {
        assert!(
            Instant::now() < deadline,
            "hook deliveries never all delivered"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let deliveries = h.store.hook_deliveries(100_000).await.expect("deliveries");
    let hooked: HashSet<i64> = deliveries.iter().map(|d| d.delivery.job_id).collect();
    let posts = hook_posts.lock().expect("lock").clone();
    let distinct: HashSet<&String> = posts.iter().map(|(id, _)| id).collect();
    println!(
        "chaos: {minutes} min, ticks every 30 s, 3 workers, {kills} killed and replaced: {due} ticks due, {decided} decided ({} covered, {} skipped, {} failed, {} missed), {} jobs for {} started runs (duplicate runs: {}), coverage gaps: {}; completion hook: {} finished runs, {} deliveries, {} posts for {} distinct ids (finished runs without one: {})",
        count(RunOutcome::Covered),
        count(RunOutcome::Skipped),
        count(RunOutcome::Failed),
        count(RunOutcome::Missed),
        jobs.len(),
        runs.iter().filter(|r| r.job_id.is_some()).count(),
        runs.iter().filter(|r| r.job_id.is_some()).count() - jobs.len(),
        gaps.len(),
        jobs.len(),
        deliveries.len(),
        posts.len(),
        distinct.len(),
        jobs.difference(&hooked).count()
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("syncbench: run it with `scripts/bench syncbench`");
        return;
    }
    let minutes: u64 = arg("--minutes", 5);
    let n_shops: usize = arg("--shops", 1);
    let per_min: f64 = arg("--per-min", 60.0);
    let chaos_minutes: u64 = arg("--chaos-minutes", 10);
    let ways: String = arg("--ways", "cron,sweep,messages,drilled".to_string());
    let life = Life(arg("--pay", 60), arg("--ship", 300), arg("--sign", 900));
    println!(
        "syncbench: {n_shops} shop(s) of one app, each with a day of orders behind it and {per_min} new orders a minute (each paid ~{} s, shipped ~{} s, signed ~{} s later; 10% closed, 5% refunded), {minutes} min per way",
        life.0,
        life.1,
        life.2
    );
    let mut base_calls_per_order = 0.0;
    for way in [Way::Cron, Way::Sweep, Way::Messages, Way::Drilled]
        .into_iter()
        .filter(|w| ways.contains(&format!("{w:?}").to_lowercase()))
    {
        let o = run(way, minutes, per_min, life, n_shops).await;
        let per_order = o.calls as f64 / o.changed_orders.max(1) as f64;
        if way == Way::Cron {
            base_calls_per_order = per_order;
        }
        println!(
            "{:<9} order calls {:>5}  changed orders {:>4}  calls per changed order {:>6.3} ({} of cron)  missed {}/{}  change-to-ledger p50 {:.1} s p95 {:.1} s max {:.1} s ({} changes, {} never seen while it ran)",
            format!("{way:?}").to_lowercase(),
            o.calls,
            o.changed_orders,
            per_order,
            if base_calls_per_order > 0.0 {
                format!("{:.3}", per_order / base_calls_per_order)
            } else {
                "n/a".to_string()
            },
            o.missed,
            o.checked,
            pct(&o.delays, 50).as_secs_f64(),
            pct(&o.delays, 95).as_secs_f64(),
            pct(&o.delays, 100).as_secs_f64(),
            o.delays.len(),
            o.unseen
        );
        if !o.runs.is_empty() {
            let late: Vec<Duration> = o.runs.iter().map(|r| r.0).collect();
            let took: Vec<Duration> = o.runs.iter().map(|r| r.1).collect();
            println!(
                "          {} scheduled runs: tick to decision p50 {:.2} s max {:.2} s; decision to job finished p50 {:.2} s p95 {:.2} s max {:.2} s",
                o.runs.len(),
                pct(&late, 50).as_secs_f64(),
                pct(&late, 100).as_secs_f64(),
                pct(&took, 50).as_secs_f64(),
                pct(&took, 95).as_secs_f64(),
                pct(&took, 100).as_secs_f64()
            );
        }
    }
    if chaos_minutes > 0 {
        chaos(chaos_minutes, per_min, life).await;
    }
}
