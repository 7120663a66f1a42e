//! What one platform call costs the fleet in Redis: commands sent (round trips, pipelined
//! ones counted apiece), commands run inside scripts, Redis CPU and worker CPU per 1,000
//! calls, by purpose (gate, report, breaker, lease, stale cache, heartbeat, queue).
//!
//! `scripts/bench costbench [--items 4000] [--rate 400] [--workers 2]` runs a listing
//! of N items (two platform calls each: `item_get`, `item_add`) on W worker processes twice,
//! each on a fresh simulator, Redis and ledger: once with a `MONITOR` connection counting every
//! command (the client's own, and those its scripts ran, which `MONITOR` shows as `lua`), once
//! without it for the CPU figures (`MONITOR` costs the server CPU of its own). Platform calls
//! are the simulator's count.
//!
//! The baseline, in the same run: the same listing's two calls per item made by W bare
//! apalis-redis worker processes (this program again, `--bare-worker`): apalis's own Redis
//! storage, the same signed HTTP calls through the same platform client, and nothing else (no
//! gates, no ledger, no link layer). Its worker CPU per 1,000 calls is what the fleet's
//! machinery is compared against; its Redis CPU is apalis's own queue. It runs twice: as fast
//! as the simulator answers (unpaced), and paced in each process to the fleet's rate (each
//! call waits for its slot at `rate / workers` per API, as a gate would make it wait), so the
//! comparison also holds at the same calls per second: a worker that idles between calls pays
//! for parking and waking its threads, which an unpaced one never does.
//!
//! A benchmark (harness = false) because it needs the built `syncfleet` binary for its worker
//! processes; under `cargo test` it does nothing.

use syncfleet_testkit::jobs_harness;

use apalis::prelude::{BackendExt, TaskSink, WorkerBuilder, WorkerBuilderExt};
use apalis_redis::{Config as ApalisRedisConfig, RedisStorage};
use jobs_harness::{arg, ClientOpts, Harness};
use sha1::{Digest, Sha1};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use syncfleet::config::Config;
use syncfleet::platform::{Api, Platform};
use syncfleet::platform::{ApiRequest, ApiResponse};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// The project's Lua scripts, by the SHA1 that EVALSHA names them with.
fn scripts() -> BTreeMap<String, &'static str> {
    let sources: [(&str, &str); 18] = [
        (
            "gate acquire",
            include_str!("../../../src/throttle/acquire.lua"),
        ),
        (
            "gate report",
            include_str!("../../../src/throttle/report.lua"),
        ),
        ("gate set", include_str!("../../../src/throttle/set.lua")),
        (
            "breaker trip",
            include_str!("../../../src/link/breaker_trip.lua"),
        ),
        ("lease", include_str!("../../../src/link/lease.lua")),
        (
            "lease release",
            include_str!("../../../src/link/lease_release.lua"),
        ),
        (
            "queue push",
            include_str!("../../../src/queue/redis/lua/push.lua"),
        ),
        (
            "queue push delayed",
            include_str!("../../../src/queue/redis/lua/push_delayed.lua"),
        ),
        (
            "queue fetch",
            include_str!("../../../src/queue/redis/lua/fetch.lua"),
        ),
        (
            "queue ack",
            include_str!("../../../src/queue/redis/lua/ack.lua"),
        ),
        (
            "queue dead",
            include_str!("../../../src/queue/redis/lua/dead.lua"),
        ),
        (
            "queue reschedule",
            include_str!("../../../src/queue/redis/lua/reschedule.lua"),
        ),
        (
            "queue release",
            include_str!("../../../src/queue/redis/lua/release.lua"),
        ),
        (
            "queue claim",
            include_str!("../../../src/queue/redis/lua/claim.lua"),
        ),
        (
            "queue heartbeat",
            include_str!("../../../src/queue/redis/lua/heartbeat.lua"),
        ),
        (
            "queue bind fleet",
            include_str!("../../../src/queue/redis/lua/bind_fleet.lua"),
        ),
        (
            "queue gc consumers",
            include_str!("../../../src/queue/redis/lua/gc_consumers.lua"),
        ),
        (
            "queue length",
            include_str!("../../../src/queue/redis/lua/len.lua"),
        ),
    ];
    sources
        .iter()
        .map(|(name, src)| (hex::encode(Sha1::digest(src.as_bytes())), *name))
        .collect()
}

/// What a command the client sent is for, from its script or its first key.
fn purpose(words: &[String], scripts: &BTreeMap<String, &'static str>) -> String {
    let upper = words.first().map(|w| w.to_uppercase()).unwrap_or_default();
    if upper == "EVALSHA" || upper == "EVAL" {
        let sha = words.get(1).cloned().unwrap_or_default();
        return scripts
            .get(&sha)
            .map_or_else(|| "script (other)".to_string(), |s| s.to_string());
    }
    let key = words.get(1).cloned().unwrap_or_default();
    let what = if key.contains(":link:") && key.contains(":stale:") {
        "stale cache"
    } else if key.contains(":link:") && key.contains("lease") {
        "lease"
    } else if key.contains(":link:") {
        "breaker"
    } else if key.ends_with(":fleet") {
        "heartbeat"
    } else if key.starts_with("{syncfleet}") {
        "queue"
    } else if key.contains(":{") {
        "gate"
    } else {
        "other"
    };
    format!("{what} ({})", upper.to_lowercase())
}

/// `"A" "b c" "d"` (MONITOR's quoting) -> words.
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut escaped = false;
    for ch in text.chars() {
        if escaped {
            cur.push(ch);
            escaped = false;
        } else if ch == '\\' && quoted {
            escaped = true;
        } else if ch == '"' {
            if quoted {
                out.push(std::mem::take(&mut cur));
            }
            quoted = !quoted;
        } else if quoted {
            cur.push(ch);
        }
    }
    out
}

#[derive(Default)]
struct Counts {
    /// Commands the clients sent, by purpose.
    sent: BTreeMap<String, u64>,
    /// Commands run inside scripts.
    in_scripts: u64,
}

/// Count every command of the server at `url` until the returned handle is dropped.
async fn monitor(url: &str, counts: Arc<Mutex<Counts>>) -> tokio::task::JoinHandle<()> {
    let addr = url
        .trim_start_matches("redis://")
        .trim_end_matches('/')
        .to_string();
    let mut stream = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect for MONITOR");
    stream.write_all(b"MONITOR\r\n").await.expect("MONITOR");
    let scripts = scripts();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stream).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            // +1700000000.123456 [0 127.0.0.1:5555] "EVALSHA" "..." ...
            let Some(rest) = line.split_once("] ") else {
                continue;
            };
            let from_script = rest.0.ends_with("lua");
            let w = words(rest.1);
            let mut c = counts.lock().expect("counts");
            if from_script {
                c.in_scripts += 1;
            } else if w.first().is_some_and(|c| c != "monitor" && c != "MONITOR") {
                *c.sent.entry(purpose(&w, &scripts)).or_default() += 1;
            }
        }
    })
}

async fn redis_cpu(url: &str) -> f64 {
    let client = redis::Client::open(url).expect("redis url");
    let mut c = client
        .get_multiplexed_async_connection()
        .await
        .expect("redis");
    let info: String = redis::cmd("INFO")
        .arg("cpu")
        .query_async(&mut c)
        .await
        .expect("INFO cpu");
    info.lines()
        .filter(|l| l.starts_with("used_cpu_sys:") || l.starts_with("used_cpu_user:"))
        .filter_map(|l| l.split(':').nth(1)?.trim().parse::<f64>().ok())
        .sum()
}

/// CPU seconds a live process has used (utime + stime), None once it is gone.
fn process_cpu(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// Record the CPU seconds of each live process of `pids` (the last reading of one that is
/// gone stays).
fn sample_cpu(cpu: &mut BTreeMap<u32, f64>, pids: impl IntoIterator<Item = u32>) {
    for pid in pids {
        if let Some(s) = process_cpu(pid) {
            cpu.insert(pid, s);
        }
    }
}

struct Run {
    calls: u64,
    took: Duration,
    redis_cpu_s: f64,
    worker_cpu_s: f64,
}

impl Run {
    fn worker_cpu_per_call(&self) -> f64 {
        self.worker_cpu_s / self.calls as f64
    }

    /// Calls, duration, and Redis and worker CPU in all and per 1,000 calls.
    fn figures(&self) -> String {
        format!(
            "{} platform calls in {:.1} s; Redis CPU {:.2} s ({:.1} ms per 1,000 calls); workers' CPU {:.2} s ({:.1} ms per 1,000 calls)",
            self.calls,
            self.took.as_secs_f64(),
            self.redis_cpu_s,
            1e6 * self.redis_cpu_s / self.calls as f64,
            self.worker_cpu_s,
            1e6 * self.worker_cpu_per_call(),
        )
    }
}

async fn run(items: u64, rate: u64, workers: usize, counts: Option<Arc<Mutex<Counts>>>) -> Run {
    let opts = ClientOpts {
        rate: rate as f64,
        ..ClientOpts::default()
    };
    let mut h = Harness::start(jobs_harness::listing_sim(), &opts).await;
    let job = h.enqueue_listing(items);
    let watch = match &counts {
        Some(c) => Some(monitor(&h.redis.url, c.clone()).await),
        None => None,
    };
    let cpu0 = redis_cpu(&h.redis.url).await;
    let started = Instant::now();
    let pids: Vec<u32> = (0..workers).map(|_| h.spawn_worker(8, 3_600)).collect();
    let mut cpu: BTreeMap<u32, f64> = BTreeMap::new();
    loop {
        sample_cpu(&mut cpu, pids.iter().copied());
        let s = h.store.job_status(job).await.expect("status");
        if s.job.counts.pending == 0 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(1800),
            "the job hangs"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let took = started.elapsed();
    sample_cpu(&mut cpu, pids.iter().copied());
    let cpu1 = redis_cpu(&h.redis.url).await;
    if let Some(w) = watch {
        w.abort();
    }
    for &pid in &pids {
        h.terminate_worker(pid);
    }
    h.wait_workers(Duration::from_secs(120));
    let calls = h.stats(Platform::Alibaba, Api::ItemGet).calls
        + h.stats(Platform::Taobao, Api::ItemAdd).calls;
    Run {
        calls,
        took,
        redis_cpu_s: cpu1 - cpu0,
        worker_cpu_s: cpu.values().sum(),
    }
}

/// The apalis queue the bare workers share.
const BARE_QUEUE: &str = "costbench-bare";

/// A bare apalis-redis worker: each task is an item id; read it on 1688, list it on Taobao,
/// the same two signed calls a listing item makes. Runs until killed.
async fn bare_worker() {
    let config: String = arg("--config", String::new());
    let url: String = arg("--redis", String::new());
    let concurrency: usize = arg("--concurrency", 8);
    // Calls per second per API in this process; 0: unpaced.
    let pace: f64 = arg("--pace", 0.0);
    let slots = Arc::new((Pacer::new(pace), Pacer::new(pace)));
    let cfg = Config::load(std::path::Path::new(&config)).expect("the harness's config");
    let sim = jobs_harness::listing_sim();
    let client = |p: Platform| {
        sim.client(
            p,
            &cfg.platform(p).expect("platform config").client_options(),
        )
        .expect("a client")
    };
    let (read, write) = (
        Arc::new(client(Platform::Alibaba)),
        Arc::new(client(Platform::Taobao)),
    );
    let conn = apalis_redis::connect(url.as_str()).await.expect("redis");
    let storage = RedisStorage::<u64, _>::new(conn).with_config(
        ApalisRedisConfig::default()
            .queue(BARE_QUEUE)
            .batch_size(concurrency),
    );
    let handler = move |item: u64| {
        let (read, write, slots) = (read.clone(), write.clone(), slots.clone());
        async move {
            let timeout = Duration::from_secs(10);
            slots.0.wait().await;
            let got = read
                .call(
                    &ApiRequest::ItemGet {
                        item_id: item.to_string(),
                    },
                    timeout,
                )
                .await?;
            let ApiResponse::Item(it) = got else {
                return Err("item_get answered something else".into());
            };
            slots.1.wait().await;
            write
                .call(
                    &ApiRequest::ItemAdd {
                        // The bare worker writes what it read, without the map's rules.
                        item: Box::new(syncfleet::platform::NewItem {
                            title: it.title,
                            ..syncfleet::fuzzing::new_item(&format!("bare:{item}"))
                        }),
                    },
                    timeout,
                )
                .await?;
            Ok::<(), apalis::prelude::BoxDynError>(())
        }
    };
    let worker = WorkerBuilder::new(format!("bare-{}", std::process::id()))
        .backend(storage.poll_with_interval(Duration::from_millis(10)))
        .concurrency(concurrency)
        .build(handler);
    let run: futures::future::BoxFuture<'static, _> = Box::pin(worker.run());
    if let Err(e) = run.await {
        eprintln!("bare worker: {e}");
        std::process::exit(1);
    }
}

/// One API's pace in a bare worker: each call takes the next slot, `1 / rate` after the
/// previous one, and sleeps until it (no pacing at rate 0).
struct Pacer {
    period: Option<Duration>,
    next: Mutex<Instant>,
}

impl Pacer {
    fn new(rate: f64) -> Self {
        Self {
            period: (rate > 0.0).then(|| Duration::from_secs_f64(1.0 / rate)),
            next: Mutex::new(Instant::now()),
        }
    }

    async fn wait(&self) {
        let Some(period) = self.period else { return };
        let slot = {
            let mut next = self.next.lock().expect("pacer");
            let slot = (*next).max(Instant::now());
            *next = slot + period;
            slot
        };
        tokio::time::sleep_until(slot.into()).await;
    }
}

/// The baseline run: `items` tasks pushed to apalis's Redis storage, `workers` bare worker
/// processes (each paced to `pace` calls/s per API, 0: unpaced) until the simulator counted
/// both calls of every item.
async fn bare(items: u64, workers: usize, pace: f64) -> Run {
    let h = Harness::start(jobs_harness::listing_sim(), &ClientOpts::default()).await;
    let conn = apalis_redis::connect(h.redis.url.as_str())
        .await
        .expect("redis");
    let mut storage = RedisStorage::<u64, _>::new(conn)
        .with_config(ApalisRedisConfig::default().queue(BARE_QUEUE));
    let calls = || {
        h.stats(Platform::Alibaba, Api::ItemGet).calls
            + h.stats(Platform::Taobao, Api::ItemAdd).calls
    };
    let cpu0 = redis_cpu(&h.redis.url).await;
    let started = Instant::now();
    let exe = std::env::current_exe().expect("this program");
    let mut children: Vec<std::process::Child> = (0..workers)
        .map(|_| {
            std::process::Command::new(&exe)
                .args(["--bare-worker", "--config"])
                .arg(&h.config)
                .args(["--redis", &h.redis.url, "--concurrency", "8"])
                .args(["--pace", &pace.to_string()])
                .stdout(std::process::Stdio::null())
                .spawn()
                .expect("a bare worker")
        })
        .collect();
    // Pushed once the workers run: apalis-redis's fetch script moves every due task with one
    // `unpack`, which fails past about 8,000 (Lua's stack), so the backlog must stay small.
    let ids: Vec<u64> = (1..=items).collect();
    for chunk in ids.chunks(1000) {
        storage.push_bulk(chunk.to_vec()).await.expect("push");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut cpu: BTreeMap<u32, f64> = BTreeMap::new();
    while calls() < 2 * items {
        sample_cpu(&mut cpu, children.iter().map(std::process::Child::id));
        // A bare worker that exits (its apalis worker stopped) would leave this loop waiting
        // for calls that never come.
        for c in &mut children {
            if let Ok(Some(status)) = c.try_wait() {
                panic!(
                    "a bare worker exited ({status}) after {} of {} platform calls",
                    calls(),
                    2 * items
                );
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(1800),
            "the bare workers hang"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let took = started.elapsed();
    sample_cpu(&mut cpu, children.iter().map(std::process::Child::id));
    let cpu1 = redis_cpu(&h.redis.url).await;
    for c in &mut children {
        let _ = c.kill();
        let _ = c.wait();
    }
    Run {
        calls: calls(),
        took,
        redis_cpu_s: cpu1 - cpu0,
        worker_cpu_s: cpu.values().sum(),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if std::env::args().any(|a| a == "--bare-worker") {
        bare_worker().await;
        return;
    }
    if !std::env::args().any(|a| a == "--bench") {
        println!("costbench: run it with `scripts/bench costbench`");
        return;
    }
    let items: u64 = arg("--items", 4_000);
    let rate: u64 = arg("--rate", 400);
    let workers: usize = arg("--workers", 2);
    println!("costbench: {items} items, {workers} workers, gates at {rate}/s");

    let counts = Arc::new(Mutex::new(Counts::default()));
    let counted = run(items, rate, workers, Some(counts.clone())).await;
    {
        let c = counts.lock().expect("counts");
        let per = |n: u64| n as f64 / counted.calls as f64;
        let sent: u64 = c.sent.values().sum();
        println!(
        "with MONITOR: {} platform calls in {:.1} s; commands sent {sent} ({:.2} per call), run inside scripts {} ({:.2} per call)",
        counted.calls,
        counted.took.as_secs_f64(),
        per(sent),
        c.in_scripts,
        per(c.in_scripts)
    );
        let mut by: Vec<(&String, &u64)> = c.sent.iter().collect();
        by.sort_by(|a, b| b.1.cmp(a.1));
        for (what, n) in by {
            println!("  {what:<32} {n:>8}  {:.3} per call", per(*n));
        }
    }

    let plain = run(items, rate, workers, None).await;
    println!("without MONITOR: {}", plain.figures());
    for (name, pace) in [
        ("unpaced", 0.0),
        ("paced to the fleet's rate", rate as f64 / workers as f64),
    ] {
        let base = bare(items, workers, pace).await;
        println!(
            "bare apalis-redis workers, {name} (baseline): {}; syncfleet's worker CPU per call {:.2}x the baseline's",
            base.figures(),
            plain.worker_cpu_per_call() / base.worker_cpu_per_call().max(1e-12),
        );
    }
}
