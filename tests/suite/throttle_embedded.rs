//! Embedded gates (no Redis): same interface, in-process GCRA reservation + AIMD.

use std::path::Path;
use std::time::{Duration, Instant};
use syncfleet::config::Config;
use syncfleet::platform::{Api, Platform};
use syncfleet::throttle::{GateOutcome, GateRefusal, Gates, Lane};

const P: Platform = Platform::Jd;
const A: Api = Api::OrderList;

fn gates(rate: f64, burst: f64, concurrency: u32) -> Gates {
    let text = format!(
        "[gates.\"jd.order_list\"]\nrate = {rate}\nburst = {burst}\nconcurrency = {concurrency}\nmax_wait_ms = 2000\ndaily_quota = 100000\n"
    );
    Gates::embedded(&Config::parse(Path::new("test.toml"), &text).expect("config"))
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_gate_admits_at_most_rate_times_time_plus_burst() {
    let gates = gates(100.0, 10.0, 16);
    let end = Instant::now() + Duration::from_millis(1500);
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let gates = gates.clone();
        tasks.push(tokio::spawn(async move {
            let mut n = 0u32;
            while Instant::now() < end {
                let left = end.saturating_duration_since(Instant::now());
                if gates.acquire(P, A, Lane::Bulk, left).await.is_ok() && Instant::now() <= end {
                    n += 1;
                }
            }
            n
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    // R x T + B = 160; a loaded 2-core machine may admit fewer, never more.
    assert!(total <= 161, "admitted {total}");
    assert!(total >= 40, "admitted only {total}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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
    assert!(
        t.elapsed() >= Duration::from_millis(900),
        "waited {:?} for a slot",
        t.elapsed()
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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
            assert!(remaining > Duration::from_millis(1500), "{remaining:?}");
            assert!(reason.contains("ban"), "{reason}");
        }
        other => panic!("expected a pause, got {other:?}"),
    }
    assert_eq!(gate_snapshot(&gates).await.used_today, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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
    // Starts drained: 6 calls at 20/s take about 300 ms (not a burst at 1000/s).
    assert!(
        t.elapsed() >= Duration::from_millis(200),
        "{:?}",
        t.elapsed()
    );
    let s = gate_snapshot(&gates).await;
    assert!(s.overridden && s.limits.rate == 20.0 && s.adaptive_rate == 20.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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
            d > Duration::from_millis(100) && d <= Duration::from_millis(200),
            "{d:?}"
        ),
        other => panic!("expected RetryAt, got {other:?}"),
    }
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
