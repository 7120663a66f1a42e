//! Prometheus metrics: a real `syncfleet work --metrics-listen` child process runs a
//! listing job against the simulator; `/metrics` is scraped during the job and after it, and
//! its values are checked against the simulator's counters and the ledger.

use crate::jobs_harness;

use jobs_harness::{ClientOpts, Harness};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};
use syncfleet::platform::{Api, Platform};
use syncfleet::sim::SimConfig;

const FROM: Platform = Platform::Alibaba;
const TO: Platform = Platform::Taobao;
const ITEMS: u64 = 800;

/// A free loopback port (bound, then released for the worker to take).
use crate::support::free_port;

/// `GET /metrics` over a plain TCP connection; `None` while nothing listens yet.
fn scrape(addr: SocketAddr) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    assert!(head.starts_with("HTTP/1.1 200"), "scrape answered {head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    Some(body.to_string())
}

/// One scrape, parsed: (name, labels sorted) -> value.
struct Scrape(HashMap<(String, Vec<(String, String)>), f64>);

impl Scrape {
    fn parse(text: &str) -> Scrape {
        let mut m = HashMap::new();
        for line in text
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            let (series, value) = line.rsplit_once(' ').expect("`series value`");
            let value: f64 = value.parse().unwrap_or(f64::NAN);
            let (name, labels) = match series.split_once('{') {
                Some((n, rest)) => (n, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            let mut labels: Vec<(String, String)> = labels
                .split(',')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (k, v) = p.split_once('=').expect("label k=v");
                    (k.to_string(), v.trim_matches('"').to_string())
                })
                .collect();
            labels.sort();
            m.insert((name.to_string(), labels), value);
        }
        Scrape(m)
    }

    /// The value of the series `name` with exactly these labels.
    fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let mut want: Vec<(String, String)> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        want.sort();
        self.0.get(&(name.to_string(), want)).copied()
    }

    /// Sum of every series `name` whose labels include these.
    fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.0
            .iter()
            .filter(|((n, l), _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| l.iter().any(|(lk, lv)| lk == k && lv == v))
            })
            .map(|(_, v)| *v)
            .sum()
    }

    /// Every label value of every series: none may be an item or job id.
    fn label_values(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0
            .keys()
            .flat_map(|(_, l)| l.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_during_and_after_a_job_match_the_simulator_and_the_ledger() {
    let _serial = jobs_harness::serial().await;
    // 200 calls/s on the client side: 800 items take about 4 s, so the 1 s collector is
    // scraped several times while the job runs.
    let sim = SimConfig::demo()
        .with_limit(FROM, Api::ItemGet, 250, 10_000_000)
        .with_limit(TO, Api::ItemAdd, 250, 10_000_000);
    let opts = ClientOpts {
        rate: 200.0,
        ..ClientOpts::default()
    };
    let mut h = Harness::start(sim, &opts).await;
    let job = h.enqueue_listing(ITEMS);
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().expect("addr");
    // An app-wide daily quota on taobao (far above the job): its gauges are exported.
    let text = std::fs::read_to_string(&h.config).expect("config");
    let text = text.replacen(
        "[platforms.taobao]\n",
        "[platforms.taobao]\ndaily_quota = 1000000\n",
        1,
    );
    assert!(text.contains("daily_quota = 1000000"), "{text}");
    let config = h.dir.path().join("app-quota.toml");
    std::fs::write(&config, text).expect("config");
    // Idle exit off: the worker keeps serving after the job until it is told to stop.
    let pid = h.spawn_worker_args(&config, 8, 0, &["--metrics-listen", &addr.to_string()], &[]);

    // During the job: the collector shows it running with items pending, and what it shows
    // done never exceeds the ledger.
    let deadline = Instant::now() + Duration::from_secs(60);
    let during = loop {
        assert!(
            Instant::now() < deadline,
            "no scrape showed the job running\n{}",
            h.worker_logs()
        );
        if let Some(text) = scrape(addr) {
            let s = Scrape::parse(&text);
            let ledger = h.store.job_status(job).await.expect("status").job.counts;
            if s.get("syncfleet_jobs_running", &[]) == Some(1.0)
                && s.get("syncfleet_items_pending", &[]).unwrap_or(0.0) > 0.0
                && s.get(
                    "syncfleet_platform_calls_total",
                    &[
                        ("platform", "alibaba"),
                        ("api", "item_get"),
                        ("class", "ok"),
                    ],
                )
                .unwrap_or(0.0)
                    > 0.0
            {
                let done = s
                    .get("syncfleet_items_finished_total", &[("status", "done")])
                    .unwrap_or(0.0);
                assert!(
                    done <= ledger.done as f64,
                    "metrics show {done} done, the ledger {}",
                    ledger.done
                );
                break s;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Gate state as configured: rate 200 on the default gate, breakers closed.
    let gate = [("platform", "taobao"), ("api", "item_add")];
    assert_eq!(during.get("syncfleet_gate_rate", &gate), Some(200.0));
    assert!(during.get("syncfleet_gate_adaptive_rate", &gate).is_some());
    assert_eq!(
        during.get("syncfleet_gate_paused_seconds", &gate),
        Some(0.0)
    );
    assert_eq!(during.get("syncfleet_breaker_state", &gate), Some(0.0));
    for state in ["ready", "delayed", "in_flight", "dead"] {
        assert!(
            during
                .get("syncfleet_queue_tasks", &[("state", state)])
                .is_some(),
            "no queue gauge for {state}"
        );
    }

    // After the job: counters equal the simulator's (one worker: every request it saw is
    // this worker's) and the ledger's items done.
    let status = h.wait_job(job, Duration::from_secs(120)).await;
    assert_eq!(status.job.counts.done, ITEMS, "{:?}", status.job.counts);
    let deadline = Instant::now() + Duration::from_secs(30);
    let after = loop {
        let s = Scrape::parse(&scrape(addr).expect("scrape after the job"));
        let settled = s.get("syncfleet_items_finished_total", &[("status", "done")])
            == Some(ITEMS as f64)
            && s.get("syncfleet_jobs_running", &[]) == Some(0.0);
        if settled {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "metrics did not settle after the job: {:?} {:?}",
            s.get("syncfleet_items_finished_total", &[("status", "done")]),
            s.get("syncfleet_jobs_running", &[])
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(after.get("syncfleet_items_pending", &[]), Some(0.0));
    // The app's day: its quota, and the calls its gates booked (every item_add of the job).
    let app = [("platform", "taobao")];
    assert_eq!(
        after.get("syncfleet_app_daily_quota", &app),
        Some(1_000_000.0)
    );
    let booked = after.get("syncfleet_app_quota_booked", &app).unwrap_or(0.0);
    assert!(
        booked >= ITEMS as f64 && booked <= h.stats(TO, Api::ItemAdd).calls as f64 + 16.0,
        "app booked {booked}"
    );
    assert!(after.get("syncfleet_app_burn_ratio", &app).is_some());
    for (p, a) in [(FROM, Api::ItemGet), (TO, Api::ItemAdd)] {
        let sim = h.stats(p, a);
        let labels = [("platform", p.as_str()), ("api", a.as_str())];
        let ok = after
            .get(
                "syncfleet_platform_calls_total",
                &[labels[0], labels[1], ("class", "ok")],
            )
            .unwrap_or(0.0);
        assert_eq!(ok, sim.ok as f64, "{p} {a}: calls ok vs simulator {sim:?}");
        let all = after.sum("syncfleet_platform_calls_total", &labels);
        assert_eq!(all, sim.calls as f64, "{p} {a}: calls vs simulator {sim:?}");
        // One latency sample per request on the wire.
        assert_eq!(
            after.get("syncfleet_call_duration_seconds_count", &labels),
            Some(sim.calls as f64),
            "{p} {a}"
        );
        assert!(
            after
                .get(
                    "syncfleet_logical_calls_total",
                    &[labels[0], labels[1], ("outcome", "ok")]
                )
                .unwrap_or(0.0)
                >= ITEMS as f64
        );
    }
    assert!(
        after
            .get("syncfleet_ledger_write_duration_seconds_count", &[])
            .unwrap_or(0.0)
            >= 1.0
    );
    // Bounded labels only: no item or job id anywhere.
    for (k, v) in after.label_values() {
        assert!(
            ["platform", "api", "class", "reason", "status", "state", "outcome", "source", "le"]
                .contains(&k),
            "unexpected label {k}={v}"
        );
        if k != "le" {
            assert!(v.parse::<f64>().is_err(), "numeric label value {k}={v}");
        }
    }

    h.terminate_worker(pid);
    assert!(
        h.wait_worker(pid, Duration::from_secs(60)),
        "worker did not stop cleanly\n{}",
        h.worker_logs()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_metrics_address_is_refused_with_exit_2() {
    let _serial = jobs_harness::serial().await;
    let h = Harness::start(SimConfig::demo(), &ClientOpts::default()).await;
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let out = h
        .command_with(
            &h.config,
            &["work", "--exit-when-idle-s", "1", "--metrics-listen", &addr],
        )
        .output()
        .expect("run worker");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--metrics-listen"), "{stderr}");
}
