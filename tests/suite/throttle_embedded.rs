//! Embedded gates (no Redis): same interface, in-process GCRA reservation + AIMD. The timing
//! tests run on paused tokio time with a wall clock that follows it (`Clock::following_runtime_from`):
//! seconds pass only as the gates wait, so the figures are exact and a day can end in a test
//! (docs/design.md, "Time you can pause").

use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};
use syncfleet::clock::Clock;
use syncfleet::config::Config;
use syncfleet::platform::{Api, Platform};
use syncfleet::throttle::{GateOutcome, GateRefusal, Gates, Lane};
use tokio::time::Instant;

const P: Platform = Platform::Jd;
const A: Api = Api::OrderList;

/// 2026-12-05 15:59:00 UTC: 23:59:00 in GMT+8, a minute before the platforms' day ends.
const A_MINUTE_BEFORE_THE_PLATFORMS_MIDNIGHT: u64 = 1_796_486_340;

fn config(rate: f64, burst: f64, concurrency: u32, daily_quota: u64) -> Config {
    let text = format!(
        "[gates.\"jd.order_list\"]\nrate = {rate}\nburst = {burst}\nconcurrency = {concurrency}\nmax_wait_ms = 2000\ndaily_quota = {daily_quota}\n"
    );
    Config::parse(Path::new("test.toml"), &text).expect("config")
}

/// Gates on paused time whose wall clock starts at `wall_ms` (ms since the epoch).
fn gates_at(rate: f64, burst: f64, concurrency: u32, daily_quota: u64, wall_ms: u64) -> Gates {
    let wall = UNIX_EPOCH + Duration::from_millis(wall_ms);
    Gates::embedded_on(
        &config(rate, burst, concurrency, daily_quota),
        Clock::following_runtime_from(wall),
    )
}

/// Gates on paused time, 100 ms into a clock second.
fn gates(rate: f64, burst: f64, concurrency: u32) -> Gates {
    gates_at(rate, burst, concurrency, 100_000, 1_796_400_000_100)
}

fn snap(g: &syncfleet::throttle::GateSnapshot) -> (f64, Option<f64>, u64) {
    (g.adaptive_rate, g.ceiling, g.used_today)
}

async fn gate_snapshot(gates: &Gates) -> syncfleet::throttle::GateSnapshot {
    gates
        .snapshot()
        .await
        .unwrap()
        .into_iter()
        .find(|s| s.platform == P && s.api == A)
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn embedded_gate_admits_at_most_rate_times_time_plus_burst() {
    let gates = gates(100.0, 10.0, 16);
    let start = Instant::now();
    let end = start + Duration::from_millis(1500);
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let gates = gates.clone();
        tasks.push(tokio::spawn(async move {
            let mut admitted = Vec::new();
            while Instant::now() < end {
                let left = end.saturating_duration_since(Instant::now());
                match gates.acquire(P, A, Lane::Bulk, left).await {
                    Ok(_) if Instant::now() <= end => admitted.push(Instant::now() - start),
                    Ok(_) => {}
                    // Come back when told, as a task would (paused time moves only while
                    // every task waits).
                    Err(GateRefusal::RetryAt(wait)) => tokio::time::sleep(wait.min(left)).await,
                    Err(other) => panic!("{other:?}"),
                }
            }
            admitted
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort();
    // R x T + B = 160; on paused time nothing is lost to a busy machine, so the gate admits
    // exactly that: the burst of 10 up front, then 100/s, and never more than 100 in a clock
    // second (the first ends 0.9 s after the start).
    let total = all.len();
    assert!((159..=161).contains(&total), "admitted {total}");
    let in_first_clock_second = all
        .iter()
        .filter(|t| **t < Duration::from_millis(900))
        .count();
    assert!(
        in_first_clock_second <= 100,
        "{in_first_clock_second} in one clock second"
    );
    let second_clock_second = all
        .iter()
        .filter(|t| **t >= Duration::from_millis(900))
        .count();
    assert!(
        second_clock_second <= 100,
        "{second_clock_second} in the next"
    );
}

#[tokio::test(start_paused = true)]
async fn slot_first_then_busy_after_about_a_second() {
    let gates = gates(1000.0, 100.0, 2);
    let _a = gates
        .acquire(P, A, Lane::Bulk, Duration::from_secs(5))
        .await
        .unwrap();
    let _b = gates
        .acquire(P, A, Lane::Bulk, Duration::from_secs(5))
        .await
        .unwrap();
    let t = Instant::now();
    assert_eq!(
        gates
            .acquire(P, A, Lane::Bulk, Duration::from_secs(5))
            .await
            .unwrap_err(),
        GateRefusal::Busy
    );
    // Exactly the slot wait: no more, no less.
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_secs(1) && waited <= Duration::from_millis(1001),
        "waited {waited:?} for a slot"
    );
    drop(_a);
    assert!(
        gates
            .acquire(P, A, Lane::Bulk, Duration::from_secs(5))
            .await
            .is_ok(),
        "a dropped permit frees its slot"
    );
}

#[tokio::test(start_paused = true)]
async fn rate_limit_cuts_ban_pauses_and_every_call_counts() {
    let gates = gates(40.0, 10.0, 4);
    gates.report(P, A, GateOutcome::Success);
    gates.report(P, A, GateOutcome::Failure);
    gates.report(
        P,
        A,
        GateOutcome::RateLimited {
            ban: None,
            quota_spent: false,
            app_wide: false,
        },
    );
    // At most one success is known in the rejected second: the rate is cut to the floor
    // (2% of 40/s, or what is known) until the measurement settles; no ceiling yet.
    let (rate, ceiling, used) = snap(&gate_snapshot(&gates).await);
    assert!(rate <= 1.0, "{rate}");
    assert_eq!((ceiling, used), (None, 3));
    gates.report(
        P,
        A,
        GateOutcome::RateLimited {
            ban: Some(Duration::from_secs(2)),
            quota_spent: false,
            app_wide: false,
        },
    );
    match gates
        .acquire(P, A, Lane::Bulk, Duration::from_secs(1))
        .await
    {
        Err(GateRefusal::Paused { remaining, reason }) => {
            // No time passed: the whole ban is left.
            assert!(
                remaining > Duration::from_millis(1990) && remaining <= Duration::from_secs(2),
                "{remaining:?}"
            );
            assert!(reason.contains("ban"), "{reason}");
        }
        other => panic!("expected a pause, got {other:?}"),
    }
    assert_eq!(gate_snapshot(&gates).await.used_today, 4);
    // The ban ends when it said: a moment before, still paused; after it, a call goes.
    tokio::time::advance(Duration::from_millis(1900)).await;
    assert!(matches!(
        gates.acquire(P, A, Lane::Bulk, Duration::ZERO).await,
        Err(GateRefusal::Paused { .. })
    ));
    tokio::time::advance(Duration::from_millis(200)).await;
    assert!(gates
        .acquire(P, A, Lane::Bulk, Duration::from_secs(2))
        .await
        .is_ok());
}

#[tokio::test(start_paused = true)]
async fn set_rate_takes_effect_at_once() {
    let gates = gates(1000.0, 5.0, 64);
    let change = gates.set_rate(P, A, 20.0, Some(2.0)).await.unwrap();
    assert_eq!(
        (
            change.old.rate,
            change.old.burst,
            change.new.rate,
            change.new.burst
        ),
        (1000.0, 5.0, 20.0, 2.0)
    );
    let t = Instant::now();
    for _ in 0..6 {
        gates
            .acquire(P, A, Lane::Bulk, Duration::from_secs(2))
            .await
            .unwrap();
    }
    // Starts drained: 6 calls at 20/s, one every 50 ms, not a burst at 1000/s.
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(250) && took <= Duration::from_millis(301),
        "{took:?}"
    );
    let s = gate_snapshot(&gates).await;
    assert!(s.overridden && s.limits.rate == 20.0 && s.adaptive_rate == 20.0);
}

#[tokio::test(start_paused = true)]
async fn beyond_max_wait_is_refused_with_the_retry_time() {
    let gates = gates(5.0, 1.0, 4);
    gates
        .acquire(P, A, Lane::Bulk, Duration::ZERO)
        .await
        .unwrap();
    match gates
        .acquire(P, A, Lane::Bulk, Duration::from_millis(10))
        .await
    {
        Err(GateRefusal::RetryAt(d)) => assert!(
            d > Duration::from_millis(190) && d <= Duration::from_millis(200),
            "{d:?}"
        ),
        other => panic!("expected RetryAt, got {other:?}"),
    }
}

/// A spent daily quota pauses the gate until the platforms' midnight (GMT+8), and the new day
/// opens it with a fresh count: a minute of paused time instead of a day of waiting.
#[tokio::test(start_paused = true)]
async fn a_spent_daily_quota_pauses_until_the_platforms_midnight_and_the_new_day_opens_it() {
    let gates = gates_at(
        100.0,
        10.0,
        4,
        5,
        A_MINUTE_BEFORE_THE_PLATFORMS_MIDNIGHT * 1000,
    );
    for _ in 0..5 {
        gates
            .acquire(P, A, Lane::Bulk, Duration::from_secs(1))
            .await
            .expect("within the quota");
        gates.report(P, A, GateOutcome::Success);
    }
    assert_eq!(gate_snapshot(&gates).await.used_today, 5);
    // The platform refuses the next one: its quota is spent for the day.
    gates.report(
        P,
        A,
        GateOutcome::RateLimited {
            ban: None,
            quota_spent: true,
            app_wide: false,
        },
    );
    match gates.acquire(P, A, Lane::Bulk, Duration::ZERO).await {
        Err(GateRefusal::Paused { remaining, reason }) => {
            assert!(
                remaining > Duration::from_secs(59) && remaining <= Duration::from_secs(60),
                "paused {remaining:?}, not until midnight"
            );
            assert!(reason.contains("daily quota"), "{reason}");
        }
        other => panic!("expected the gate paused to midnight, got {other:?}"),
    }
    tokio::time::advance(Duration::from_secs(61)).await;
    gates
        .acquire(P, A, Lane::Bulk, Duration::from_secs(1))
        .await
        .expect("a new day, a new quota");
    gates.report(P, A, GateOutcome::Success);
    assert_eq!(
        gate_snapshot(&gates).await.used_today,
        1,
        "the count starts again"
    );
}

#[test]
fn gate_set_without_redis_records_and_says_what_happens() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("syncfleet.toml");
    std::fs::write(
        &config,
        "[platforms.jd]\nendpoint = \"http://127.0.0.1:1/routerjson\"\napp_key = \"k\"\nsecret_env = \"X\"\nper_second_cap = 100\n[gates.\"jd.item_get\"]\nrate = 40\nburst = 20\n",
    )
    .unwrap();
    let db = format!("sqlite://{}", dir.path().join("ledger.db").display());
    let run = |rate: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_syncfleet"))
            .env_remove("SYNCFLEET_REDIS_URL")
            .args(["--db", &db, "--config"])
            .arg(&config)
            .args([
                "gate",
                "set",
                "jd",
                "item_get",
                "--rate",
                rate,
                "--why",
                "quota raised",
            ])
            .output()
            .unwrap()
    };
    // Only `db migrate` creates a ledger; `gate set` refuses a missing one.
    let refused = run("30");
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("db migrate"));
    let migrated = std::process::Command::new(env!("CARGO_BIN_EXE_syncfleet"))
        .args(["--db", &db, "db", "migrate"])
        .output()
        .unwrap();
    assert!(migrated.status.success());
    let out = run("30");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("rate 40 burst 20 -> rate 30 burst 20"),
        "{stdout}"
    );
    assert!(stdout.contains("recorded only"), "{stdout}");
    // burst 20 + rate 90 is above the platform's per-second cap of 100: bad input, exit 2.
    let out = run("90");
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("per_second_cap"));
}

/// A restarted process starts its day at zero: the ledger's count of every call brings it
/// back. A counter that holds some is raised only to the calls of minutes long past (the last
/// ones may still be on their way from report batches), and never lowered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn todays_count_is_raised_to_the_ledgers_never_lowered() {
    use syncfleet::throttle::DayCalls;
    let gates = gates(100.0, 10.0, 16);
    assert_eq!(gate_snapshot(&gates).await.used_today, 0);
    let day = |all, settled| DayCalls { all, settled };
    let raised = gates
        .floor_today(&[(P, A, day(42, 30))])
        .await
        .expect("floor");
    assert!(raised >= 1, "{raised}");
    assert_eq!(gate_snapshot(&gates).await.used_today, 42);
    assert_eq!(
        gates
            .floor_today(&[(P, A, day(50, 40))])
            .await
            .expect("floor"),
        0
    );
    assert_eq!(
        gate_snapshot(&gates).await.used_today,
        42,
        "between settled and all: left"
    );
    gates
        .floor_today(&[(P, A, day(60, 45))])
        .await
        .expect("floor");
    assert_eq!(
        gate_snapshot(&gates).await.used_today,
        45,
        "raised to the settled calls"
    );
    assert_eq!(
        gates
            .floor_today(&[(P, A, day(7, 7))])
            .await
            .expect("floor"),
        0
    );
    assert_eq!(gate_snapshot(&gates).await.used_today, 45, "never lowered");
}
