//! A breaker trip in one worker stops a second worker *process* within a second: the trip
//! travels only through Redis. The second process (`linkbench worker`) calls item_get every
//! 20 ms with a breaker that can never trip on its own samples, and prints each outcome.

use crate::support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use support::redis::TestRedis;
use syncfleet::config::Config;
use syncfleet::link::{Budget, CallContext, FleetLink, Gateway, LinkErrorKind};
use syncfleet::platform::{Api, ApiRequest, Platform};
use syncfleet::sim::{self, DrillPatch, SimConfig};
use syncfleet::throttle::Gates;

const TB: Platform = Platform::Taobao;

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn trip_in_one_process_stops_another_process_within_a_second() {
    let redis = TestRedis::start();
    let sim = sim::spawn(
        SimConfig::demo().with_all_limits(100_000, 100_000_000),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let endpoint = sim.endpoint(TB);

    let mut child = Command::new(env!("CARGO_BIN_EXE_linkbench"))
        .args([
            "worker",
            "--endpoint",
            &endpoint,
            "--redis",
            &redis.url,
            "--namespace",
            &redis.prefix,
        ])
        .args([
            "--seconds",
            "12",
            "--every-ms",
            "20",
            "--min-samples",
            "100000",
        ])
        .env("RUST_LOG", "error")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start linkbench worker");
    let lines: Arc<Mutex<Vec<(u128, String)>>> = Arc::default();
    let stdout = child.stdout.take().unwrap();
    let sink = lines.clone();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line == "ready" {
                let _ = ready_tx.send(());
                continue;
            }
            if let Some((ms, kind)) = line.split_once(' ') {
                if let Ok(ms) = ms.parse() {
                    sink.lock().unwrap().push((ms, kind.to_string()));
                }
            }
        }
    });
    ready_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("worker process ready");

    // This process is worker 1, on the same Redis namespace.
    let text = format!(
        "[platforms.taobao]\nendpoint = \"{endpoint}\"\napp_key = \"10000001\"\nsecret_env = \"UNUSED\"\n\
         [gates.default]\nrate = 5000\nburst = 5000\nconcurrency = 64\n[link.breaker]\nopen_s = 10\ninitial_open_ms = 10000\n"
    );
    let cfg = Config::parse(Path::new("t.toml"), &text).unwrap();
    let pc = cfg.platform(TB).unwrap();
    let client = sim.config().client(TB, &pc.client_options()).unwrap();
    let gates = Gates::redis_with_namespace(&cfg, &redis.url, &redis.prefix)
        .await
        .unwrap();
    let fleet = FleetLink::connect(&redis.url, &redis.prefix).await.unwrap();
    let worker1 = Gateway::builder(cfg.link.clone(), gates)
        .platform(client, pc)
        .fleet(fleet)
        .build();

    tokio::time::sleep(Duration::from_millis(500)).await;
    sim.set_drill(DrillPatch {
        outage: Some(true),
        ..Default::default()
    })
    .unwrap();
    // Failures trip it after `min_samples` (20) of them. A gate that could not reach Redis
    // for a moment (a loaded machine) refuses a call without a verdict on the platform, so
    // the calls go on for up to 5 s rather than a fixed count (the child calls for 12 s).
    let mut tripped_at = None;
    let mut seen = Vec::new();
    let calling_until = std::time::Instant::now() + Duration::from_secs(5);
    for i in 0u64.. {
        if std::time::Instant::now() > calling_until {
            break;
        }
        let ctx = CallContext::new(Budget::starting_now(Duration::from_secs(10)));
        let err = worker1
            .call(
                TB,
                ApiRequest::ItemGet {
                    item_id: (10 + i).to_string(),
                },
                &ctx,
            )
            .await
            .unwrap_err();
        if err.kind == LinkErrorKind::BreakerOpen {
            tripped_at = Some(now_ms());
            break;
        }
        if seen.len() < 80 {
            seen.push(format!("{:?}: {}", err.kind, err));
        }
    }
    let tripped_at =
        tripped_at.unwrap_or_else(|| panic!("worker 1 tripped its breaker; its errors: {seen:#?}"));
    // The other process must have stopped well before 2 s, and the trip holds 10 s: the
    // window [2 s, 8 s] after it leaves seconds of margin on both sides.
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    let calls_at_2s = sim.stats().for_platform(TB, Api::ItemGet).unwrap().calls;
    tokio::time::sleep(Duration::from_millis(6_000)).await;
    let calls_at_8s = sim.stats().for_platform(TB, Api::ItemGet).unwrap().calls;

    let _ = child.wait();
    let _ = reader.join();
    let lines = lines.lock().unwrap().clone();
    assert!(
        lines.iter().any(|(_, k)| k == "ok"),
        "the worker process called successfully before the drill"
    );
    let window: Vec<_> = lines
        .iter()
        .filter(|(ms, _)| *ms >= tripped_at + 2_000 && *ms <= tripped_at + 8_000)
        .collect();
    assert!(
        window.len() >= 20,
        "the worker process kept calling: {} lines",
        window.len()
    );
    assert!(
        window.iter().all(|(_, k)| k == "breaker_open"),
        "every call of the other process from 2 s after the trip is refused: {window:?}"
    );
    assert_eq!(
        calls_at_2s, calls_at_8s,
        "no process reached the simulator while open"
    );
}
