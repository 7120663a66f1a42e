//! One gate shared by several processes through Redis: the load generator is the `gatebench`
//! program beside these tests, each process booking from the same gate as a fleet's workers do.

use crate::support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use support::redis::TestRedis;
use syncfleet::platform::{Api, Platform};
use syncfleet::throttle::gate_keys;
use syncfleet_testkit::syncfleet_bin;

const P: Platform = Platform::Taobao;
const A: Api = Api::ItemGet;

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

fn hammer_worker(
    redis: &TestRedis,
    ns: &str,
    rate: f64,
    burst: f64,
    seconds: f64,
    start_at: u64,
) -> Command {
    // The load generator is the `gatebench` program (src/bin/gatebench/).
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gatebench"));
    cmd.args(["--redis", &redis.url, "hammer", "--worker", "--timestamps"])
        .args(["--rate", &rate.to_string(), "--burst", &burst.to_string()])
        .args([
            "--concurrency",
            "8",
            "--seconds",
            &seconds.to_string(),
            "--max-wait-ms",
            "1000",
        ])
        .args(["--namespace", ns, "--start-at-us", &start_at.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    cmd
}

fn admissions(out: &[u8]) -> Vec<u64> {
    String::from_utf8_lossy(out)
        .lines()
        .filter_map(|l| l.strip_prefix("a ").and_then(|t| t.parse().ok()))
        .collect()
}

fn busiest_window(sorted: &[u64], window_us: u64) -> usize {
    let (mut best, mut lo) = (0, 0);
    for hi in 0..sorted.len() {
        while sorted[hi] - sorted[lo] >= window_us {
            lo += 1;
        }
        best = best.max(hi - lo + 1);
    }
    best
}

#[test]
fn four_processes_share_one_gate_within_rate_and_burst() {
    let redis = TestRedis::start();
    let (rate, burst, seconds) = (200.0, 20.0, 4.0);
    let start = now_us() + 1_500_000;
    let children: Vec<_> = (0..4)
        .map(|_| {
            hammer_worker(&redis, &redis.prefix, rate, burst, seconds, start)
                .spawn()
                .expect("spawn hammer")
        })
        .collect();
    let mut all = Vec::new();
    let mut per_process = Vec::new();
    for c in children {
        let out = c.wait_with_output().expect("hammer output");
        assert!(out.status.success(), "hammer failed: {}", out.status);
        let a = admissions(&out.stdout);
        per_process.push(a.len());
        all.extend(a);
    }
    all.sort_unstable();
    // The window: from the first admission (a process slow to start on a loaded machine does
    // not count against the gate) to the common end; every worker runs at least until then.
    let first = all.first().copied().expect("some admissions");
    let end = start + (seconds * 1e6) as u64;
    let window_s = (end - first) as f64 / 1e6;
    assert!(
        window_s > seconds - 0.5,
        "the workers started {:.2} s late",
        seconds - window_s
    );
    let in_window: Vec<u64> = all.iter().copied().filter(|&t| t <= end).collect();
    let ideal = rate * window_s + burst;
    let admitted = in_window.len() as f64;
    assert!(
        admitted <= ideal + 1.0,
        "admitted {admitted} > R*T+B = {ideal}"
    );
    // The gate lets the rate through (a stall of the whole machine loses a few admissions:
    // the bound is loose, the upper one above is the property).
    assert!(
        admitted >= 0.9 * ideal,
        "admitted {admitted} < 90% of {ideal} (per process {per_process:?})"
    );
    let busiest = busiest_window(&in_window, 1_000_000);
    assert!(
        busiest as f64 <= burst + rate + 1.0,
        "busiest 1 s window {busiest} > B+R = {}",
        burst + rate
    );
    assert!(
        per_process.iter().all(|&n| n > 0),
        "every process got a share: {per_process:?}"
    );
    assert!(first >= start, "no admission before the common start");
}

#[test]
fn gate_set_is_obeyed_by_a_running_process_within_a_second() {
    let redis = TestRedis::start();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("syncfleet.toml");
    std::fs::write(
        &config,
        "[gates.\"taobao.item_get\"]\nrate = 100\nburst = 10\n",
    )
    .unwrap();
    let db = format!("sqlite://{}", dir.path().join("ledger.db").display());
    let migrated = Command::new(syncfleet_bin())
        .args(["--db", &db, "db", "migrate"])
        .output()
        .unwrap();
    assert!(migrated.status.success(), "db migrate");
    let start = now_us() + 1_000_000;
    // Ten seconds: the change (a process of its own, slow to start on a loaded machine) comes
    // well inside the run.
    let child = hammer_worker(&redis, &redis.prefix, 100.0, 10.0, 10.0, start)
        .spawn()
        .unwrap();
    // Let it run at 100/s for a second (from its first acquisition, which creates the bucket
    // key: a loaded machine may start it late), then set 10/s from another process.
    let bucket = gate_keys(&redis.prefix, P, A).bucket;
    let mut con = redis.connection();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !redis::cmd("EXISTS")
        .arg(&bucket)
        .query::<bool>(&mut con)
        .unwrap()
    {
        assert!(Instant::now() < deadline, "the hammer never acquired");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(1200));
    let set_started = now_us();
    let out = Command::new(syncfleet_bin())
        .args(["--redis", &redis.url, "--db", &db, "--config"])
        .arg(&config)
        .args([
            "gate",
            "set",
            "taobao",
            "item_get",
            "--rate",
            "10",
            "--burst",
            "2",
            "--why",
            "test: slow down",
        ])
        .args(["--namespace", &redis.prefix])
        .output()
        .unwrap();
    let set_done = now_us();
    assert!(
        out.status.success(),
        "gate set failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("rate 100 burst 10 -> rate 10 burst 2"),
        "{stdout}"
    );
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let times = admissions(&out.stdout);
    // The hammer's own start (it may have started after `start` on a loaded machine).
    let ran_from: u64 = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .find_map(|w| w.strip_prefix("start_us=").and_then(|v| v.parse().ok()))
        .expect("the hammer reports its start");
    let end = ran_from.max(start) + 10_000_000;
    assert!(
        end > set_done + 2_000_000,
        "the change came too late in the run"
    );
    // Skip the first 200 ms (the burst of 10) when measuring the rate before the change.
    let fast_from = times.first().copied().expect("admissions") + 200_000;
    let fast = times
        .iter()
        .filter(|&&t| t >= fast_from && t < set_started)
        .count() as f64;
    let fast_rate = fast / ((set_started - fast_from) as f64 / 1e6);
    assert!(
        fast_rate > 60.0,
        "ran at {fast_rate:.1}/s before the change"
    );
    // From one second after the change: 10/s plus the new burst of 2 (one call of slack).
    let from = set_done + 1_000_000;
    let slow = times.iter().filter(|&&t| t >= from && t <= end).count() as f64;
    let allowed = 10.0 * (end - from) as f64 / 1e6 + 2.0 + 1.0;
    assert!(
        slow <= allowed,
        "{slow} admissions in the last {:.1} s, allowed {allowed}",
        (end - from) as f64 / 1e6
    );
    assert!(
        slow >= 0.5 * allowed,
        "still running after the change: {slow}"
    );

    // The audit trail has it.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let changes = rt.block_on(async {
        let store = syncfleet::store::Store::connect(&db).await.unwrap();
        store.gate_changes(10).await.unwrap()
    });
    let (_, c) = changes.first().expect("one gate change recorded");
    assert_eq!(
        (c.platform, c.api, c.old_rate, c.new_rate),
        (P, A, Some(100.0), 10.0)
    );
    assert_eq!((c.old_burst, c.new_burst), (Some(10), Some(2)));
    assert_eq!(c.why, "test: slow down");
    assert!(c.who.contains('@'), "{}", c.who);
}
