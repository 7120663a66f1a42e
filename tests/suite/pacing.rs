//! The day as a budget, at the gates, on both backends (a real Redis, and in process), on a
//! compressed day (`[day] seconds`): with `even` pacing, bulk calls follow the line of the day
//! (the quota times the share of the day gone) whatever the gate's rate, under the gate's
//! own quota and under the app's quota shared by every gate of the platform; a spent app
//! quota reported by one gate stops the app's other gates too.

use crate::support;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::redis::TestRedis;
use syncfleet::config::Config;
use syncfleet::platform::{Api, Platform};
use syncfleet::throttle::{GateOutcome, GateRefusal, Gates, Lane};
use syncfleet::time::QuotaDay;

const P: Platform = Platform::Taobao;
const DAY_S: u32 = 60;
/// Calls a day: 5 a second along the line, against gates at 200/s.
const QUOTA: u64 = 300;
const BURST: f64 = 5.0;

/// Gates for `apis` of taobao at 200/s, `even` pacing on a 60 s day; the quota on each gate
/// (`gate_quota`) or on the app (`[platforms.taobao] daily_quota`).
fn config(apis: &[Api], gate_quota: bool) -> Config {
    let mut text = format!(
        "[day]\nseconds = {DAY_S}\n\n[platforms.taobao]\nendpoint = \"http://127.0.0.1:9/router/rest\"\n\
         app_key = \"k\"\nsecret_env = \"SF_PACING_TEST_SECRET\"\n{}\n",
        if gate_quota {
            String::new()
        } else {
            format!("daily_quota = {QUOTA}\n")
        }
    );
    for api in apis {
        text.push_str(&format!(
            "[gates.\"taobao.{api}\"]\nrate = 200\nburst = {BURST}\nconcurrency = 32\nmax_wait_ms = 2000\n\
             boundary_band_ms = 0\npacing = \"even\"\n{}\n",
            if gate_quota {
                format!("daily_quota = {QUOTA}\n")
            } else {
                String::new()
            }
        ));
    }
    Config::parse(Path::new("test.toml"), &text).expect("test config")
}

/// Wait, when needed, so that `secs` from now stay inside one quota day (the counters reset
/// at the day's start, and the line starts again).
async fn inside_one_day(secs: f64) {
    let day = QuotaDay::of_seconds(DAY_S).expect("a valid day");
    let now = chrono::Utc::now();
    let left = (day.next_reset(now) - now).to_std().unwrap_or_default();
    if left.as_secs_f64() < secs + 1.0 {
        tokio::time::sleep(left + Duration::from_millis(200)).await;
    }
}

/// The line of the day at `at`: calls bulk work may have made by that instant.
fn line_at(at: chrono::DateTime<chrono::Utc>) -> f64 {
    let day = QuotaDay::of_seconds(DAY_S).expect("a valid day");
    QUOTA as f64 * day.elapsed_ms(at) as f64 / (f64::from(DAY_S) * 1000.0)
}

/// For `secs`, 16 bulk callers per API take every token they get (a refusal is waited out as
/// it says); returns the calls that left (their permit came back before the end) and the
/// end, on the wall clock (the line is read there, not after the callers are joined).
async fn drive(gates: &Gates, apis: &[Api], secs: f64) -> (u64, chrono::DateTime<chrono::Utc>) {
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let end_wall = chrono::Utc::now() + chrono::Duration::milliseconds((secs * 1000.0) as i64);
    let sent = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for &api in apis {
        for _ in 0..16 {
            let (g, sent) = (gates.clone(), sent.clone());
            tasks.push(tokio::spawn(async move {
                while Instant::now() < end {
                    let left = end.saturating_duration_since(Instant::now());
                    match g.acquire(P, api, Lane::Bulk, left).await {
                        Ok(_permit) if Instant::now() <= end => {
                            sent.fetch_add(1, Ordering::Relaxed);
                            g.report(P, api, GateOutcome::Success);
                        }
                        Ok(_) => {}
                        Err(GateRefusal::RetryAt(d))
                        | Err(GateRefusal::Paused { remaining: d, .. }) => {
                            tokio::time::sleep(d.min(left).max(Duration::from_millis(5))).await
                        }
                        Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                    }
                }
            }));
        }
    }
    for t in tasks {
        t.await.expect("bulk caller");
    }
    (sent.load(Ordering::Relaxed), end_wall)
}

/// The calls made follow the line: never above it by more than the lead (the burst per gate)
/// and one call, never far below it (the gates run at 200/s, the line at 5/s: what lags is
/// at most the calls booked at the pace and not yet left, one second of it).
fn check(name: &str, sent: u64, line: f64, gates: usize) {
    println!("{name}: {sent} calls, the line at {line:.1}");
    let lead = BURST * gates as f64;
    assert!(
        sent as f64 <= line + lead + 1.0,
        "{name}: {sent} calls, above the line {line:.1} + lead {lead}"
    );
    assert!(
        sent as f64 >= line - 5.0 * gates as f64 - 1.0,
        "{name}: {sent} calls, far below the line {line:.1}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn even_pacing_follows_the_line_of_the_day_under_a_gate_quota() {
    let _serial = crate::jobs_harness::serial().await;
    let redis = TestRedis::start();
    let apis = [Api::ItemAdd];
    let cfg = config(&apis, true);
    let fleet = Gates::redis_with_namespace(&cfg, &redis.url, &redis.prefix)
        .await
        .expect("fleet gates");
    for (name, gates) in [("redis", fleet), ("embedded", Gates::embedded(&cfg))] {
        inside_one_day(4.0).await;
        let (sent, end) = drive(&gates, &apis, 4.0).await;
        check(name, sent, line_at(end), 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn even_pacing_under_the_app_quota_counts_every_gate_of_the_app() {
    let _serial = crate::jobs_harness::serial().await;
    let redis = TestRedis::start();
    let apis = [Api::ItemAdd, Api::ItemGet];
    let cfg = config(&apis, false);
    let fleet = Gates::redis_with_namespace(&cfg, &redis.url, &redis.prefix)
        .await
        .expect("fleet gates");
    for (name, gates) in [("redis", fleet), ("embedded", Gates::embedded(&cfg))] {
        inside_one_day(4.0).await;
        let (sent, end) = drive(&gates, &apis, 4.0).await;
        // Both gates together under one line.
        check(name, sent, line_at(end), apis.len());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_app_quota_stops_every_gate_of_the_app() {
    let redis = TestRedis::start();
    let cfg = config(&[Api::ItemAdd, Api::ItemGet], false);
    let fleet = Gates::redis_with_namespace(&cfg, &redis.url, &redis.prefix)
        .await
        .expect("fleet gates");
    for (name, gates) in [("redis", fleet), ("embedded", Gates::embedded(&cfg))] {
        let permit = gates
            .acquire(P, Api::ItemAdd, Lane::Interactive, Duration::from_secs(2))
            .await
            .unwrap_or_else(|e| panic!("{name}: {e:?}"));
        drop(permit);
        gates.report(
            P,
            Api::ItemAdd,
            GateOutcome::RateLimited {
                ban: Some(Duration::from_secs(30)),
                quota_spent: true,
                app_wide: true,
            },
        );
        gates.flush().await;
        // Another API of the app, another lane: stopped until the day's reset.
        let refused = gates
            .acquire(P, Api::ItemGet, Lane::Interactive, Duration::from_secs(2))
            .await
            .expect_err("the app's quota is spent");
        assert!(
            matches!(&refused, GateRefusal::Paused { reason, .. } if reason.contains("app's daily quota")),
            "{name}: {refused:?}"
        );
        // Another platform is not concerned.
        gates
            .acquire(
                Platform::Jd,
                Api::ItemGet,
                Lane::Interactive,
                Duration::from_secs(2),
            )
            .await
            .unwrap_or_else(|e| panic!("{name}: jd refused: {e:?}"));
    }
}
