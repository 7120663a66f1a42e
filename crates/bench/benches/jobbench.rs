//! Main-job benchmarks (BENCHMARKS.md, "Main job"), each with a baseline measured in the same run.
//!
//! ```text
//! scripts/bench jobbench enqueue  [--items 100000] [--rounds 3]
//! scripts/bench jobbench fleet    [--limit 400] [--seconds 10] [--procs 1,2,4]
//! scripts/bench jobbench overhead [--tasks 5000] [--concurrency 32]
//! ```
//!
//! - `enqueue`: `producer::enqueue` of a 100k-item listing job (ledger transaction + task
//!   pushes), embedded and Redis; baseline: the ledger insert alone plus the task push alone,
//!   each on a fresh ledger / queue of the same round. Then the CLI end to end (process start,
//!   reading the 100k-line id file, enqueue).
//! - `fleet`: 1, 2, 4 `syncfleet work` processes on one binding gate pair (the simulator's
//!   alibaba item_get and taobao item_add limited to `--limit`/s): items/s vs the limit, and
//!   the busiest aligned one-second window the simulator counted (goal: never above the cap).
//! - `overhead`: tasks/s of `syncfleet work` (one process, non-binding gates) on 1-item tasks,
//!   (a) listing items that make their two platform calls, (b) tasks whose items the ledger
//!   already shows done (the worker's own cost: fetch, ledger check, ack), vs a bare
//!   apalis-redis worker with a no-op handler on the same Redis.
//!
//! Uses REDIS_URL when set, else a private redis-server on a free loopback port. The
//! simulator runs in this process; workers are the `syncfleet` binary beside this program's
//! directory (`target/release/syncfleet`) unless `--bin PATH` says otherwise.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use apalis::prelude::{BackendExt, TaskSink, WorkerBuilder, WorkerBuilderExt};
use apalis_redis::{Config as ApalisRedisConfig, RedisStorage};
use syncfleet::app::runtime::{embedded_queue_path, Runtime};
use syncfleet::config::Config;
use syncfleet::jobs::producer;
use syncfleet::jobs::spec::{JobKind, JobSpec};
use syncfleet::platform::{Api, Platform};
use syncfleet::queue::{QueueOptions, Shutdown, TaskMsg};
use syncfleet::sim::{self, SimConfig, SimHandle};
use syncfleet::store::Store;
use syncfleet::topology::Topology;

// The tests' Redis helper: `REDIS_URL`, or a private redis-server on a free port, killed on drop.
use syncfleet_testkit::support::redis as test_redis;

fn flushall(url: &str) -> anyhow::Result<()> {
    let mut c = redis::Client::open(url)?.get_connection()?;
    redis::cmd("FLUSHALL").query::<()>(&mut c)?;
    Ok(())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn arg<T: std::str::FromStr>(name: &str, default: T) -> T {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn syncfleet_bin() -> PathBuf {
    let given: String = arg("--bin", String::new());
    if given.is_empty() {
        syncfleet_testkit::syncfleet_bin()
    } else {
        PathBuf::from(given)
    }
}

fn secret_env(p: Platform) -> String {
    format!("JOBBENCH_{}_SECRET", p.as_str().to_uppercase())
}
fn session_env(p: Platform) -> String {
    format!("JOBBENCH_{}_SESSION", p.as_str().to_uppercase())
}

/// Client config for `sim`: one default gate (`rate`, `burst`), fast queue polling, probes off.
fn client_toml(sim: Option<&SimHandle>, rate: f64, burst: f64, queue: &str) -> String {
    let mut t = String::new();
    if let Some(sim) = sim {
        for app in &sim.config().apps {
            let p = app.platform;
            t.push_str(&format!(
                "[platforms.{p}]\nendpoint = \"{}\"\napp_key = \"{}\"\nsecret_env = \"{}\"\nsession_env = \"{}\"\nmax_in_flight = 256\n\n",
                sim.endpoint(p),
                app.app_key,
                secret_env(p),
                session_env(p)
            ));
        }
    }
    t.push_str(&format!(
        "[gates.default]\nrate = {rate}\nburst = {burst}\nconcurrency = 128\np95_ms = 5\nmax_wait_ms = 5000\n\n\
         [queue]\nname = \"{queue}\"\nchunk_size = 100\npoll_interval_ms = 20\n\n[probe]\ninterval_s = 0\n"
    ));
    t
}

fn command(bin: &Path, sim: &SimHandle, cfg: &Path, db: &str, redis: Option<&str>) -> Command {
    let mut c = Command::new(bin);
    c.arg("--config").arg(cfg).arg("--db").arg(db);
    if let Some(url) = redis {
        c.arg("--redis").arg(url);
    }
    c.env("RUST_LOG", "error")
        .env_remove("SYNCFLEET_REDIS_URL")
        .stdin(Stdio::null());
    for app in &sim.config().apps {
        c.env(secret_env(app.platform), app.secret.expose());
        c.env(session_env(app.platform), app.session.expose());
    }
    c
}

fn listing_spec() -> JobSpec {
    syncfleet::app::demo::sim_listing(false).expect("the shipped listing map")
}

fn keys(n: u64) -> Vec<String> {
    (1..=n).map(|i| i.to_string()).collect()
}

// ---------------------------------------------------------------------------------------------
// enqueue

async fn enqueue_bench(url: &str) -> anyhow::Result<()> {
    let items: u64 = arg("--items", 100_000);
    let rounds: usize = arg("--rounds", 3);
    let keys = keys(items);
    let spec = listing_spec();
    let dir = tempfile::tempdir()?;
    for (mode, redis) in [("embedded", None), ("redis", Some(url))] {
        let (mut total, mut ledger, mut queue) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..rounds {
            let cfg = Config::parse(
                Path::new("bench.toml"),
                &client_toml(None, 100.0, 10.0, &format!("enq{round}")),
            )
            .map_err(|e| anyhow::anyhow!("{e}"))?;
            let db = format!("sqlite://{}/{mode}-{round}.db", dir.path().display());
            let rt = Runtime::create(cfg.clone(), &db, redis).await?;
            let t = Instant::now();
            let r = producer::enqueue(&rt.store, &rt.queue, 100, &spec, &keys, |_| {}).await?;
            total.push(t.elapsed().as_secs_f64());
            anyhow::ensure!(r.items == keys.len() && r.tasks == keys.len().div_ceil(100));

            // Baseline, same round: the two halves alone, each on a fresh ledger / queue.
            let db2 = format!("sqlite://{}/{mode}-{round}-base.db", dir.path().display());
            let store = Store::connect(&db2).await?;
            store.migrate().await?;
            let t = Instant::now();
            let job = store.create_job(JobKind::Listing, "{}", &keys).await?;
            ledger.push(t.elapsed().as_secs_f64());
            let q = Topology::choose(redis, &embedded_queue_path(&db2))
                .queue(
                    QueueOptions {
                        name: format!("enqbase{round}"),
                        ..QueueOptions::from_config(&cfg.queue)
                    },
                    &store,
                )
                .await?;
            let tasks = producer::chunk_tasks(
                job,
                JobKind::Listing,
                &producer::Share::default(),
                &keys,
                100,
            );
            let t = Instant::now();
            q.push_bulk(&tasks).await?;
            queue.push(t.elapsed().as_secs_f64());
            println!(
                "{mode} round {round}: enqueue {:.3} s | ledger insert alone {:.3} s + task push alone {:.3} s",
                total[round], ledger[round], queue[round]
            );
        }
        let (t, l, q) = (median(total), median(ledger), median(queue));
        println!(
            "{mode}: enqueue of {items} items ({} tasks), median of {rounds}: {t:.3} s; baseline ledger {l:.3} s + push {q:.3} s = {:.3} s; ratio {:.2}",
            items.div_ceil(100),
            l + q,
            t / (l + q)
        );
    }

    // The CLI end to end: process start, config, reading the id file, enqueue.
    let file = dir.path().join("items.txt");
    std::fs::write(
        &file,
        keys.iter().map(|k| format!("{k}\n")).collect::<String>(),
    )?;
    let sim = sim::spawn(SimConfig::demo(), "127.0.0.1:0".parse()?).await?;
    for (mode, redis) in [("embedded", None), ("redis", Some(url))] {
        flushall(url)?;
        let cfg = dir.path().join(format!("cli-{mode}.toml"));
        std::fs::write(&cfg, client_toml(Some(&sim), 100.0, 10.0, "cli"))?;
        let db = format!("sqlite://{}/cli-{mode}.db", dir.path().display());
        let t = Instant::now();
        let out = command(&syncfleet_bin(), &sim, &cfg, &db, redis)
            .args([
                "enqueue", "listing", "--from", "alibaba", "--to", "taobao", "--items",
            ])
            .arg(&file)
            .stderr(Stdio::null())
            .output()?;
        let wall = t.elapsed().as_secs_f64();
        anyhow::ensure!(out.status.success(), "enqueue CLI failed");
        println!(
            "CLI {mode}: `syncfleet enqueue listing --items <100k lines>` wall {wall:.3} s; it printed: {}",
            String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or("")
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// fleet

struct Workers(Vec<Child>);

impl Drop for Workers {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Workers {
    fn wait(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        for c in &mut self.0 {
            loop {
                if c.try_wait()?.is_some() {
                    break;
                }
                anyhow::ensure!(Instant::now() < deadline, "a worker did not exit");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Ok(())
    }
}

async fn fleet_bench(url: &str) -> anyhow::Result<()> {
    let limit: u64 = arg("--limit", 400);
    let seconds: u64 = arg("--seconds", 10);
    let procs: String = arg("--procs", "1,2,4".to_string());
    let bin = syncfleet_bin();
    let items = limit * seconds;
    // The gate an operator writes from the console: 0.5% under the grant, burst 1.
    let rate = limit as f64 * 0.995;
    println!(
        "binding gate: simulator limit {limit}/s on alibaba item_get and taobao item_add, client gate rate {rate}/s burst 1, {items} items per run"
    );
    println!("| processes | items/s | items/s ÷ limit | busiest second item_get / item_add (cap {limit}) | rejected by the simulator | done |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for n in procs
        .split(',')
        .filter_map(|p| p.trim().parse::<usize>().ok())
    {
        flushall(url)?;
        let sim_cfg = SimConfig::demo()
            .with_limit(Platform::Alibaba, Api::ItemGet, limit, 100_000_000)
            .with_limit(Platform::Taobao, Api::ItemAdd, limit, 100_000_000);
        let sim = sim::spawn(sim_cfg, "127.0.0.1:0".parse()?).await?;
        let dir = tempfile::tempdir()?;
        let cfg_path = dir.path().join("client.toml");
        std::fs::write(&cfg_path, client_toml(Some(&sim), rate, 1.0, "fleet"))?;
        let db = format!("sqlite://{}/ledger.db", dir.path().display());
        let cfg = Config::load(&cfg_path).map_err(|e| anyhow::anyhow!("{e}"))?;
        let rt = Runtime::create(cfg, &db, Some(url)).await?;
        let job = producer::enqueue(
            &rt.store,
            &rt.queue,
            100,
            &listing_spec(),
            &keys(items),
            |_| {},
        )
        .await?
        .job_id;
        let mut workers = Workers(Vec::new());
        for _ in 0..n {
            workers.0.push(
                command(&bin, &sim, &cfg_path, &db, Some(url))
                    .args(["work", "--concurrency", "8", "--exit-when-idle-s", "1"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()?,
            );
        }
        let calls = |sim: &SimHandle| {
            sim.stats()
                .for_platform(Platform::Alibaba, Api::ItemGet)
                .map(|s| s.calls)
                .unwrap_or(0)
        };
        let deadline = Instant::now() + Duration::from_secs(seconds * 6 + 30);
        while calls(&sim) == 0 {
            anyhow::ensure!(Instant::now() < deadline, "no call reached the simulator");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let t0 = Instant::now();
        let status = loop {
            let s = rt.store.job_status(job).await?;
            if s.job.counts.pending == 0 {
                break s;
            }
            anyhow::ensure!(Instant::now() < deadline, "job not finished");
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let secs = t0.elapsed().as_secs_f64();
        workers.wait(Duration::from_secs(30))?;
        let stats = sim.stats();
        let get = stats.for_platform(Platform::Alibaba, Api::ItemGet).cloned();
        let add = stats.for_platform(Platform::Taobao, Api::ItemAdd).cloned();
        let (Some(get), Some(add)) = (get, add) else {
            anyhow::bail!("no simulator stats");
        };
        let per_s = items as f64 / secs;
        println!(
            "| {n} | {per_s:.1} | {:.3} | {} / {} | {} | {}/{items} |",
            per_s / limit as f64,
            get.peak_per_second,
            add.peak_per_second,
            get.rejected_limit + add.rejected_limit,
            status.job.counts.done
        );
        sim.shutdown().await;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// overhead

async fn bare_apalis(url: &str, n: usize, concurrency: usize, round: usize) -> anyhow::Result<f64> {
    let conn = apalis_redis::connect(url).await?;
    let cfg = ApalisRedisConfig::default()
        .queue(format!("bench-apalis-{round}"))
        .batch_size(concurrency)
        .missed_heartbeats(2);
    let mut storage = RedisStorage::<TaskMsg, _>::new(conn).with_config(cfg);
    let tasks = producer::chunk_tasks(
        1,
        JobKind::Listing,
        &producer::Share::default(),
        &keys(n as u64),
        1,
    );
    for chunk in tasks.chunks(1000) {
        storage.push_bulk(chunk.to_vec()).await?;
    }
    let done = Arc::new(AtomicU64::new(0));
    let d2 = done.clone();
    let handler = move |_m: TaskMsg| {
        let d = d2.clone();
        async move {
            d.fetch_add(1, Ordering::Relaxed);
            Ok::<(), apalis::prelude::BoxDynError>(())
        }
    };
    let worker = WorkerBuilder::new(format!("bare-apalis-{}-{round}", std::process::id()))
        .backend(storage.poll_with_interval(Duration::from_millis(20)))
        .concurrency(concurrency)
        .build(handler);
    let start = Instant::now();
    let stop = Shutdown::new();
    let s2 = stop.clone();
    let fut: futures::future::BoxFuture<'static, _> = Box::pin(worker.run_until(async move {
        s2.wait().await;
        Ok::<(), std::io::Error>(())
    }));
    let w = tokio::spawn(fut);
    let deadline = Instant::now() + Duration::from_secs(120);
    while done.load(Ordering::Relaxed) < n as u64 {
        anyhow::ensure!(Instant::now() < deadline, "bare apalis worker stalled");
        anyhow::ensure!(!w.is_finished(), "bare apalis worker died");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let secs = start.elapsed().as_secs_f64();
    stop.trigger();
    let _ = tokio::time::timeout(Duration::from_secs(10), w).await;
    Ok(n as f64 / secs)
}

/// One `syncfleet work` process over `n` one-item tasks; returns tasks/s from the process
/// start to the queue being empty. With `already_done`, the items are finished first (the
/// tasks are pushed again), so the worker only fetches, checks the ledger and acks.
async fn syncfleet_worker(
    url: &str,
    n: usize,
    concurrency: usize,
    already_done: bool,
) -> anyhow::Result<f64> {
    flushall(url)?;
    let sim = sim::spawn(
        SimConfig::demo().with_all_limits(1_000_000, 1_000_000_000),
        "127.0.0.1:0".parse()?,
    )
    .await?;
    let dir = tempfile::tempdir()?;
    let cfg_path = dir.path().join("client.toml");
    std::fs::write(
        &cfg_path,
        client_toml(Some(&sim), 1_000_000.0, 1_000_000.0, "overhead"),
    )?;
    let db = format!("sqlite://{}/ledger.db", dir.path().display());
    let cfg = Config::load(&cfg_path).map_err(|e| anyhow::anyhow!("{e}"))?;
    let rt = Runtime::create(cfg, &db, Some(url)).await?;
    let keys = keys(n as u64);
    let r = producer::enqueue(&rt.store, &rt.queue, 1, &listing_spec(), &keys, |_| {}).await?;
    let bin = syncfleet_bin();
    let spawn = || {
        command(&bin, &sim, &cfg_path, &db, Some(url))
            .args([
                "work",
                "--concurrency",
                &concurrency.to_string(),
                "--exit-when-idle-s",
                "1",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
    };
    if already_done {
        let mut w = Workers(vec![spawn()?]);
        w.wait(Duration::from_secs(300))?;
        anyhow::ensure!(rt.store.job_status(r.job_id).await?.job.counts.pending == 0);
        rt.queue
            .push_bulk(&producer::chunk_tasks(
                r.job_id,
                JobKind::Listing,
                &producer::Share::default(),
                &keys,
                1,
            ))
            .await?;
    }
    let t = Instant::now();
    let mut w = Workers(vec![spawn()?]);
    let deadline = Instant::now() + Duration::from_secs(300);
    while rt.queue.len().await?.total() > 0 {
        anyhow::ensure!(Instant::now() < deadline, "worker too slow");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let secs = t.elapsed().as_secs_f64();
    w.wait(Duration::from_secs(30))?;
    anyhow::ensure!(rt.store.job_status(r.job_id).await?.job.counts.done == n as u64);
    Ok(n as f64 / secs)
}

async fn overhead_bench(url: &str) -> anyhow::Result<()> {
    let n: usize = arg("--tasks", 5000);
    let concurrency: usize = arg("--concurrency", 32);
    let rounds: usize = arg("--rounds", 3);
    let (mut bare, mut idle, mut real) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        flushall(url)?;
        bare.push(bare_apalis(url, n, concurrency, round).await?);
        idle.push(syncfleet_worker(url, n, concurrency, true).await?);
        real.push(syncfleet_worker(url, n, concurrency, false).await?);
        println!(
            "round {round}: bare apalis-redis no-op {:.0} tasks/s | syncfleet work, items already done {:.0} tasks/s | syncfleet work, 1 item = 2 platform calls {:.0} tasks/s",
            bare[round], idle[round], real[round]
        );
    }
    let (b, i, r) = (median(bare), median(idle), median(real));
    println!(
        "{n} one-item tasks, concurrency {concurrency}, median of {rounds}: bare apalis-redis {b:.0} tasks/s; syncfleet worker (ledger check only) {i:.0} tasks/s, ratio {:.2}; syncfleet worker (real listing item) {r:.0} tasks/s, ratio {:.2}",
        i / b,
        r / b
    );
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let what = syncfleet_testkit::program_args()
        .first()
        .cloned()
        .unwrap_or_default();
    let server = test_redis::TestRedis::start();
    let url = server.url.clone();
    match what.as_str() {
        "enqueue" => enqueue_bench(&url).await,
        "fleet" => fleet_bench(&url).await,
        "overhead" => overhead_bench(&url).await,
        _ => anyhow::bail!("usage: jobbench enqueue|fleet|overhead [options] (see the file's doc)"),
    }
}
