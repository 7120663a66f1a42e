//! A soak: continuous sync for hours, with bad records and a completion-hook receiver that is
//! down for a while in the middle, the way a fleet meets months of work.
//!
//! `scripts/bench soakbench [--minutes 120] [--down-minutes 30] [--shops 3]
//! [--per-min 10] [--malformed 0.01] [--order-every-s 60] [--logistics-every-s 600] [--oauth]
//! [--workers 2] [--retention-day-s 86400] [--report-every-min 10]`
//!
//! `--retention-day-s S`: a compressed calendar for the ledger's retention: every `[retention]`
//! period at its default number of days, each day lasting S seconds, pruned every hour of it
//! (at least 10 s); with `--retention-day-s 60` a month of retention passes in 30 minutes.
//! `--workers N`: one listening worker and N - 1 others. `--listing-rate R`: a listing
//! (1688 -> Taobao) big enough to keep its gates busy all the run, the simulator and the
//! gates granting R calls a second (one-off jobs are never pruned: its items grow the ledger).
//!
//! `--oauth`: the shops (but the first, the app's own session) are onboarded through the
//! OAuth flow into the ledger's directory (one authorisation link, each seller agreeing on the
//! simulator's page, the code given to `shop authorize`) instead of `[shops]` of the config;
//! an ISV's size is `--shops 1000 --per-min 0.2 --order-every-s 300 --logistics-every-s 600
//! --down-minutes 0 --malformed 0 --oauth`.
//!
//! One app with `--shops` shops on the simulator's live store (each `--per-min` new orders a
//! minute, paid ~60 s, shipped ~300 s, signed ~900 s later), Redis and a SQLite ledger, two
//! worker processes (one listening to the change messages). Per shop an order schedule every
//! 60 s (lag 5 s, overlap 60 s) and a logistics schedule every 10 minutes; retention and hooks
//! at their defaults. A `--malformed` share of orders and messages is sent with an unreadable
//! time (the same ids every time, as a platform's bad record would be); the hook receiver
//! answers 503 for `--down-minutes` in the middle of the run.
//!
//! Counted at the end, against the simulator's live store: watermarks that froze (more than
//! 3 periods behind at any 30 s sample), good orders not at their last state before the final
//! watermark, finished runs whose completion was never delivered (after waiting, bounded, for
//! the hook retries to reach the returned receiver), and the quarantine against the bad
//! records: records quarantined that are not bad, bad orders the sweeps met that are not
//! quarantined. Also: Redis keys and memory and the ledger's size over time, the workers' CPU
//! and RSS, how late each schedule tick's run started (its job's creation against the tick,
//! on the ledger's clock), and watermark samples more than two periods behind.

use syncfleet_testkit::jobs_harness;

use chrono::{DateTime, Utc};
use jobs_harness::sync::hook_receiver_switched;
use jobs_harness::{arg, ClientOpts, Harness};
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use syncfleet::platform::{Api, Platform};
use syncfleet::sim::{malformed_record, DrillPatch, LiveOrders, SimConfig};
use syncfleet::store::RunOutcome;

const TB: Platform = Platform::Taobao;

/// (the simulator's shop name, the ledger's): s1 is the app's own session.
fn shop_names(n: usize) -> Vec<(String, String)> {
    (1..=n.max(1))
        .map(|i| {
            let name = format!("s{i}");
            (if i == 1 { String::new() } else { name.clone() }, name)
        })
        .collect()
}

/// The worker's CPU seconds so far (user + system), from /proc.
fn cpu_s(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

async fn redis_used_memory(url: &str) -> u64 {
    let Ok(client) = redis::Client::open(url) else {
        return 0;
    };
    let Ok(mut c) = client.get_multiplexed_async_connection().await else {
        return 0;
    };
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(&mut c)
        .await
        .unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// How late each schedule tick's run started: its job's creation against the tick (ms, the
/// ledger's clock), every run with a job whose tick came due from `since_ms` on (the first
/// ticks of schedules added before the workers started waited for them, not for the fleet).
async fn tick_lateness_ms(db: &str, since_ms: i64) -> Vec<i64> {
    let Ok(pool) = sqlx::SqlitePool::connect(db).await else {
        return Vec::new();
    };
    let rows: Vec<(i64,)> = sqlx::query_as(
        "SELECT j.created_at - r.tick FROM schedule_runs r JOIN jobs j ON j.id = r.job_id
         WHERE r.tick >= $1",
    )
    .bind(since_ms)
    .fetch_all(&pool)
    .await
    .unwrap_or_default();
    let mut v: Vec<i64> = rows.into_iter().map(|(ms,)| ms).collect();
    v.sort_unstable();
    v
}

fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Onboard the shops `names` through the OAuth flow: one link without a shop name (each
/// seller's shop is named after the seller), each seller agreeing on the simulator's page,
/// the code and state given to `shop authorize`.
async fn onboard(h: &Harness, names: &[&str]) {
    let out = h.run(&["shop", "authorize-url", "--platform", "taobao"]);
    let link = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    for name in names {
        let r = http
            .get(format!("{link}&seller={name}"))
            .send()
            .await
            .expect("the authorisation page");
        let back = r
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .expect("a redirect")
            .to_string();
        let q: Vec<(String, String)> =
            serde_urlencoded::from_str(back.split_once('?').expect("a query").1).expect("query");
        let get = |k: &str| q.iter().find(|(key, _)| key == k).expect(k).1.clone();
        let out = h.run(&[
            "shop",
            "authorize",
            "--platform",
            "taobao",
            "--code",
            &get("code"),
            "--state",
            &get("state"),
        ]);
        assert!(out.status.success(), "{out:?}");
    }
}

/// The gates that have state in Redis: the distinct `{platform:api}` hash tags of its keys.
async fn redis_gates(url: &str) -> usize {
    let Ok(client) = redis::Client::open(url) else {
        return 0;
    };
    let Ok(mut c) = client.get_multiplexed_async_connection().await else {
        return 0;
    };
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("sf:{*}*")
        .query_async(&mut c)
        .await
        .unwrap_or_default();
    keys.iter()
        .filter_map(|k| k.split_once('{').and_then(|(_, r)| r.split_once('}')))
        .map(|(tag, _)| tag.to_string())
        .filter(|tag| tag.contains(':'))
        .collect::<HashSet<_>>()
        .len()
}

async fn redis_keys(url: &str) -> u64 {
    let Ok(client) = redis::Client::open(url) else {
        return 0;
    };
    let Ok(mut c) = client.get_multiplexed_async_connection().await else {
        return 0;
    };
    redis::cmd("DBSIZE").query_async(&mut c).await.unwrap_or(0)
}

fn ledger_bytes(db: &str) -> u64 {
    let path = db.trim_start_matches("sqlite://");
    let path = path.split('?').next().unwrap_or(path);
    ["", "-wal"]
        .iter()
        .filter_map(|s| std::fs::metadata(format!("{path}{s}")).ok())
        .map(|m| m.len())
        .sum()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("soakbench: run it with `scripts/bench soakbench`");
        return;
    }
    let minutes: u64 = arg("--minutes", 120);
    let down_minutes: u64 = arg("--down-minutes", 30);
    let n_shops: usize = arg("--shops", 3);
    let per_min: f64 = arg("--per-min", 10.0);
    let bad: f64 = arg("--malformed", 0.01);
    let order_every_s: i64 = arg("--order-every-s", 60);
    let logistics_every_s: i64 = arg("--logistics-every-s", 600);
    let oauth = std::env::args().any(|a| a == "--oauth");
    let n_workers: usize = arg("--workers", 2usize).max(1);
    let retention_day_s: u64 = arg("--retention-day-s", 86_400u64).max(1);
    let report_every_min: u64 = arg("--report-every-min", 10u64).max(1);
    let listing_rate: u64 = arg("--listing-rate", 0u64);
    // The simulator's catalog holds 100,000 products.
    let listing_items = (listing_rate * (minutes + 1) * 60).min(100_000);
    let shops = shop_names(n_shops);
    let more: Vec<&str> = shops.iter().skip(1).map(|s| s.1.as_str()).collect();
    let mut sim = SimConfig::demo().with_shops(TB, &more);
    if listing_rate > 0 {
        sim = sim
            .with_limit(Platform::Alibaba, Api::ItemGet, listing_rate, 100_000_000)
            .with_limit(TB, Api::ItemAdd, listing_rate, 100_000_000);
    }
    sim.orders.live = LiveOrders {
        new_per_min: per_min,
        pay_after_s: 60,
        ship_after_s: 300,
        sign_after_s: 900,
        close_share: 0.1,
        refund_share: 0.05,
        history_s: 3600,
        ..LiveOrders::default()
    };
    let opts = ClientOpts {
        shops: if oauth {
            Vec::new()
        } else {
            shops.iter().skip(1).map(|s| (s.1.clone(), 1)).collect()
        },
        renew_tokens_every_ms: oauth.then_some(5_000),
        ..ClientOpts::default()
    };
    let mut h = Harness::start(sim, &opts).await;
    if oauth {
        h.env.push(("SYNCFLEET_TOKEN_KEY".into(), "5a".repeat(32)));
        let base = h.sim.base_url();
        let text = std::fs::read_to_string(&h.config).expect("config").replacen(
            "[platforms.taobao]\n",
            &format!(
                "[platforms.taobao]\nauthorize_url = \"{base}/authorize\"\nredirect_uri = \"http://127.0.0.1:9/oauth/callback\"\n"
            ),
            1,
        );
        std::fs::write(&h.config, text).expect("config");
        let onboarding = Instant::now();
        onboard(&h, &more).await;
        println!(
            "soakbench: {} sellers onboarded through OAuth in {:.1} s",
            more.len(),
            onboarding.elapsed().as_secs_f64()
        );
    }
    h.sim
        .set_drill(DrillPatch {
            malformed_ratio: Some(bad),
            ..DrillPatch::default()
        })
        .expect("drill");
    let (hook_url, _posts, down) = hook_receiver_switched("soak-key", 0).await;
    h.add_hooks(&hook_url, "soak-key", "");
    let app_key = h.sim.config().apps[0].app_key.clone();
    let begun: DateTime<Utc> = Utc::now();
    let mut order_schedules = Vec::new();
    for (_, shop) in &shops {
        order_schedules.push(
            h.add_order_schedule_of("taobao", shop, &format!("{order_every_s}s"), "5s", "60s")
                .await,
        );
        let out = h.run(&[
            "schedule",
            "add",
            "logistics",
            "--platform",
            "taobao",
            "--shop",
            shop,
            "--every",
            &format!("{logistics_every_s}s"),
        ]);
        assert!(out.status.success(), "{out:?}");
    }
    if retention_day_s != 86_400 {
        let defaults = syncfleet::config::RetentionConfig::default();
        let mut text = std::fs::read_to_string(&h.config).expect("config");
        text.push_str("\n[retention]\n");
        for (key, days) in defaults.periods() {
            let scaled = days * retention_day_s as f64 / 86_400.0;
            text.push_str(&format!("{key} = {scaled}\n"));
        }
        text.push_str(&format!(
            "prune_every_s = {}\n",
            (retention_day_s / 24).max(10)
        ));
        std::fs::write(&h.config, text).expect("config");
    }
    if listing_rate > 0 {
        let mut text = std::fs::read_to_string(&h.config).expect("config");
        for gate in ["alibaba.item_get", "taobao.item_add"] {
            text.push_str(&format!(
                "\n[gates.\"{gate}\"]\nrate = {listing_rate}\nburst = 1\n"
            ));
        }
        std::fs::write(&h.config, text).expect("config");
        let job = h.enqueue_listing(listing_items);
        println!("soakbench: listing job {job} of {listing_items} items at {listing_rate}/s");
    }
    let config = h.config.clone();
    let mut workers = vec![h.spawn_worker_args(&config, 8, 0, &["--listen", "taobao:s1"], &[])];
    for _ in 1..n_workers {
        workers.push(h.spawn_worker_with(&config, 8, 0));
    }
    let workers_started_ms = Utc::now().timestamp_millis();
    println!(
        "soakbench: {minutes} min, {n_shops} shops x {per_min} new orders/min, {:.1}% malformed orders and messages, hook receiver down {down_minutes} min in the middle, {n_workers} workers{}",
        bad * 100.0,
        if retention_day_s == 86_400 {
            String::new()
        } else {
            format!(", a retention day lasting {retention_day_s} s")
        }
    );

    let started = Instant::now();
    let end = started + Duration::from_secs(minutes * 60);
    let down_from = started + Duration::from_secs((minutes.saturating_sub(down_minutes)) * 30);
    let down_until = down_from + Duration::from_secs(down_minutes * 60);
    let mut worst_behind: BTreeMap<String, i64> = BTreeMap::new();
    let mut frozen: BTreeMap<String, u32> = BTreeMap::new();
    let mut over_two_periods = 0u64;
    let mut watermark_samples = 0u64;
    let mut samples = Vec::new();
    let mut next_report = started + Duration::from_secs(60);
    while Instant::now() < end {
        let now = Instant::now();
        down.store(now >= down_from && now < down_until, Ordering::SeqCst);
        let clock = Utc::now();
        for v in h.store.schedules().await.expect("schedules") {
            let Some(w) = v.watermark else { continue };
            let behind = (clock - w).num_seconds() - 5;
            let worst = worst_behind.entry(v.schedule.shop.clone()).or_default();
            *worst = (*worst).max(behind);
            watermark_samples += 1;
            if behind > 2 * order_every_s {
                over_two_periods += 1;
            }
            if behind > 3 * order_every_s {
                *frozen.entry(v.schedule.shop.clone()).or_default() += 1;
            }
        }
        if now >= next_report {
            let cpu: f64 = workers.iter().filter_map(|p| cpu_s(*p)).sum();
            let sample = (
                started.elapsed().as_secs() / 60,
                redis_keys(&h.redis.url).await,
                ledger_bytes(&h.db),
                cpu,
            );
            println!(
                "  {:>4} min: Redis keys {:>5} ({:.1} MiB used, {} gates), ledger {:>6.1} MiB, workers' CPU {:>7.1} s",
                sample.0,
                sample.1,
                redis_used_memory(&h.redis.url).await as f64 / 1_048_576.0,
                redis_gates(&h.redis.url).await,
                sample.2 as f64 / 1_048_576.0,
                sample.3
            );
            samples.push(sample);
            // At 1 minute, then at every multiple of the interval.
            let n = samples.len() as u64;
            let at_min = if report_every_min == 1 {
                n + 1
            } else {
                report_every_min * n
            };
            next_report = started + Duration::from_secs(at_min * 60);
        }
        tokio::time::sleep(Duration::from_secs(30).min(end.saturating_duration_since(now))).await;
    }
    down.store(false, Ordering::SeqCst);

    // The closing check: a covered run past now for every shop, then every good order at its
    // last state before its shop's watermark.
    let asked = Utc::now();
    let mut watermarks = Vec::new();
    for id in &order_schedules {
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            let runs = h.store.schedule_runs(*id, 100_000).await.expect("runs");
            if runs.iter().any(|r| {
                r.outcome == RunOutcome::Covered
                    && r.window_ms
                        .is_some_and(|(_, to)| to >= asked.timestamp_millis() - 10_000)
            }) {
                break;
            }
            assert!(Instant::now() < deadline, "no covered run after the soak");
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let views = h.store.schedules().await.expect("schedules");
        let view = views.iter().find(|v| v.schedule.id == *id).expect("it");
        watermarks.push(view.watermark.expect("a watermark"));
    }
    let mut checked = 0;
    let mut good_behind = Vec::new();
    let mut bad_met: HashSet<String> = HashSet::new();
    for ((sim_shop, _), to) in shops.iter().zip(&watermarks) {
        let (c, behind) = h.orders_behind_of(TB, sim_shop, Some(begun), *to).await;
        checked += c;
        good_behind.extend(behind.into_iter().filter(|id| !malformed_record(*id, bad)));
        for o in h
            .sim
            .live_orders_changed_since(TB, &app_key, sim_shop, Some(begun), *to)
        {
            if malformed_record(o.id, bad) {
                bad_met.insert(o.id.to_string());
            }
        }
    }
    // Every finished run's completion delivered once the receiver is back (its retries back
    // off up to 30 minutes: bounded wait of 40).
    let deadline = Instant::now() + Duration::from_secs(2400);
    let undelivered = loop {
        let d = h
            .store
            .hook_deliveries(1_000_000)
            .await
            .expect("deliveries");
        let left = d.iter().filter(|d| d.state != "delivered").count();
        if left == 0 || Instant::now() >= deadline {
            break (left, d.len());
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    };
    let q = h.store.quarantined(1_000_000).await.expect("quarantine");
    let q_orders: HashSet<String> = q
        .iter()
        .filter(|r| r.record.source == "order")
        .map(|r| r.record.record_id.clone())
        .collect();
    let q_messages: Vec<&String> = q
        .iter()
        .filter(|r| r.record.source == "message")
        .map(|r| &r.record.record_id)
        .collect();
    let wrongly: Vec<&String> = q_orders
        .iter()
        .chain(q_messages.iter().copied())
        .filter(|id| {
            id.parse::<u64>()
                .map_or(true, |n| !malformed_record(n, bad))
        })
        .collect();
    let bad_not_quarantined = bad_met.difference(&q_orders).count();
    let frozen_total: u32 = frozen.values().sum();
    let late = tick_lateness_ms(&h.db, workers_started_ms).await;
    let cpu_total: f64 = workers.iter().filter_map(|p| cpu_s(*p)).sum();
    println!(
        "  ticks due after the workers started: {} runs started, late by p50 {} ms, p99 {} ms, max {} ms; watermark samples more than two periods behind: {over_two_periods} of {watermark_samples}; workers' CPU {:.1} s in {minutes} min ({:.2} ms per shop per minute)",
        late.len(),
        percentile(&late, 0.5),
        percentile(&late, 0.99),
        late.last().copied().unwrap_or(0),
        cpu_total,
        cpu_total * 1000.0 / n_shops as f64 / minutes.max(1) as f64
    );
    println!(
        "soakbench: {checked} orders checked, good ones not at their last state: {}; watermarks frozen (samples over 3 periods behind): {frozen_total}, worst behind per shop (s): {worst_behind:?}",
        good_behind.len()
    );
    println!(
        "  quarantine: {} orders ({} bad orders met by the sweeps, {bad_not_quarantined} of them not quarantined), {} messages; good records quarantined: {}",
        q_orders.len(),
        bad_met.len(),
        q_messages.len(),
        wrongly.len()
    );
    println!(
        "  hooks: {} deliveries, {} not delivered after the receiver returned; workers' RSS peak {:?} MiB",
        undelivered.1,
        undelivered.0,
        workers.iter().map(|p| Harness::peak_rss_mb(*p)).collect::<Vec<_>>()
    );
    for pid in workers.iter().copied() {
        h.kill_worker(pid);
    }
}
