//! The ledger on PostgreSQL beside SQLite, in the same run.
//!
//! `scripts/bench ledgerbench [--items 100000] [--outcomes 40000] [--procs 1,2,4,8]
//!  [--demo-items 100000 --demo-target-s 60]`
//!
//! Needs `TEST_POSTGRES_URL` (a server where it may create databases; `scripts/postgres-for-tests`
//! prints one). Three parts:
//! 1. **enqueue**: `create_job` of `--items` items, median of 5, SQLite file vs PostgreSQL
//!    (goal on PostgreSQL: < 2 s).
//! 2. **ledger-bound throughput**, gates out of the way: `--procs` worker processes (children
//!    of this program) record the outcomes of one job of `--outcomes` items the way a worker's
//!    tasks do (per chunk of 100: read what to run, record outcomes in batches of 25, add the
//!    call counts), 4 tasks at once per process; outcomes recorded per second, from the start
//!    signal to the last child's exit. No platform calls: the ledger is the only work.
//! 3. **demo** (with `--demo-items N`): the demo's quota utilisation and duration ratio with
//!    the ledger on SQLite and on PostgreSQL.
//!
//! Under `cargo test` it does nothing (a bench target: it starts processes and takes minutes).

use syncfleet_testkit::support::postgres;

use std::io::{BufRead, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use syncfleet::app::demo::{self, DemoOptions};
use syncfleet::platform::{Api, Platform};
use syncfleet::store::{CallClass, CallRecord, ItemOutcome, JobKind, Store};

/// Items per task, outcomes per recorded batch, tasks at once per process (as a worker with
/// `chunk_size` 100 and the runner's batches of at most 32 unrecorded items).
const CHUNK: usize = 100;
const BATCH: usize = 25;
const TASKS_PER_PROC: usize = 4;

fn arg<T: std::str::FromStr>(name: &str, default: T) -> T {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn keys(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("{}", 600_000_000_000u64 + i as u64))
        .collect()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// A fresh ledger of one backend: its URL and the guard keeping it alive.
struct Ledger {
    url: String,
    _dir: Option<tempfile::TempDir>,
    _pg: Option<postgres::TestPg>,
}

async fn fresh(name: &'static str) -> Ledger {
    let ledger = if name == "sqlite" {
        let dir = tempfile::tempdir().expect("tempdir");
        Ledger {
            url: format!("sqlite://{}", dir.path().join("bench.db").display()),
            _dir: Some(dir),
            _pg: None,
        }
    } else {
        let pg = postgres::TestPg::create().await;
        Ledger {
            url: pg.url.clone(),
            _dir: None,
            _pg: Some(pg),
        }
    };
    Store::connect(&ledger.url)
        .await
        .expect("connect")
        .migrate()
        .await
        .expect("migrate");
    ledger
}

async fn enqueue(items: usize) {
    println!("## enqueue: create_job of {items} items, median of 5");
    let keys = keys(items);
    let mut medians = Vec::new();
    for name in ["sqlite", "postgres"] {
        let ledger = fresh(name).await;
        let store = Store::connect(&ledger.url).await.expect("connect");
        let mut runs = Vec::new();
        for _ in 0..5 {
            let t = Instant::now();
            store
                .create_job(JobKind::Listing, "{}", &keys)
                .await
                .expect("create_job");
            runs.push(t.elapsed());
        }
        let m = median(runs);
        println!("  {name:<9} {:>8.0} ms", m.as_secs_f64() * 1000.0);
        medians.push(m);
        store.close().await;
    }
    println!(
        "  postgres / sqlite: {:.2}x; postgres goal < 2 s: {}",
        medians[1].as_secs_f64() / medians[0].as_secs_f64(),
        if medians[1] < Duration::from_secs(2) {
            "met"
        } else {
            "MISSED"
        }
    );
}

/// One child process: record outcomes for tasks `first..first + count` of the job.
async fn child(url: &str, job: i64, first: usize, count: usize) {
    let store = Store::connect_existing(url).await.expect("connect");
    let mut line = String::new();
    // Wait for the start signal, so every process starts at once.
    std::io::stdin().lock().read_line(&mut line).expect("start");
    let all = keys((first + count) * CHUNK);
    let tasks: Vec<Vec<String>> = all[first * CHUNK..]
        .chunks(CHUNK)
        .map(<[String]>::to_vec)
        .collect();
    let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let tasks = std::sync::Arc::new(tasks);
    let mut handles = Vec::new();
    for _ in 0..TASKS_PER_PROC {
        let (store, next, tasks) = (store.clone(), next.clone(), tasks.clone());
        handles.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(task) = tasks.get(i) else { break };
                let run = store
                    .items_to_run_carrying(job, task)
                    .await
                    .expect("items to run");
                for batch in run.chunks(BATCH) {
                    let outcomes: Vec<ItemOutcome> = batch
                        .iter()
                        .map(|(k, _)| ItemOutcome::done(k, Some("9001".into())))
                        .collect();
                    store
                        .finish_items(job, &outcomes)
                        .await
                        .expect("finish items");
                }
                store
                    .record_calls(&[CallRecord {
                        minute: chrono::Utc::now(),
                        platform: Platform::Taobao,
                        api: Api::ItemAdd,
                        class: CallClass::Ok,
                        calls: CHUNK as u64,
                        useful: CHUNK as u64,
                    }])
                    .await
                    .expect("record calls");
            }
        }));
    }
    for h in handles {
        h.await.expect("task");
    }
}

/// The machine's CPU time so far, (busy, total), in clock ticks (Linux `/proc/stat`; zeros
/// elsewhere). Tells a run bound by the cores (busy near 100%) from one bound by a lock.
fn cpu_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let fields: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    let total: u64 = fields.iter().take(8).sum();
    // idle + iowait
    let idle = fields.get(3).copied().unwrap_or(0) + fields.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

/// Outcomes per second with `procs` processes on a fresh ledger of `name`, and the share of
/// the machine's CPU that was busy meanwhile.
async fn throughput(name: &'static str, outcomes: usize, procs: usize) -> (f64, f64) {
    let ledger = fresh(name).await;
    let store = Store::connect(&ledger.url).await.expect("connect");
    let job = store
        .create_job(JobKind::Listing, "{}", &keys(outcomes))
        .await
        .expect("create_job");
    let tasks = outcomes / CHUNK;
    let exe = std::env::current_exe().expect("own path");
    let mut children = Vec::new();
    for p in 0..procs {
        let first = tasks * p / procs;
        let count = tasks * (p + 1) / procs - first;
        children.push(
            Command::new(&exe)
                .args([
                    "--bench",
                    "--child",
                    &ledger.url,
                    &job.to_string(),
                    &first.to_string(),
                    &count.to_string(),
                ])
                .stdin(Stdio::piped())
                .spawn()
                .expect("start child"),
        );
    }
    // Let every child connect before the clock starts.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let t = Instant::now();
    let cpu_before = cpu_ticks();
    for c in &mut children {
        if let Some(stdin) = c.stdin.as_mut() {
            stdin.write_all(b"go\n").expect("start signal");
        }
    }
    for mut c in children {
        let status = c.wait().expect("child exit");
        assert!(status.success(), "child failed: {status}");
    }
    let took = t.elapsed();
    let cpu_after = cpu_ticks();
    let busy = (cpu_after.0 - cpu_before.0) as f64 / (cpu_after.1 - cpu_before.1).max(1) as f64;
    let st = store.job_status(job).await.expect("status");
    assert_eq!(st.job.counts.done, outcomes as u64, "{:?}", st.job.counts);
    store.close().await;
    (outcomes as f64 / took.as_secs_f64(), busy)
}

async fn demo_on(items: u64, target_s: u64, ledger: Option<String>) -> (f64, f64, u64) {
    let dir = std::env::temp_dir().join(format!("ledgerbench-demo-{}", std::process::id()));
    let opts = DemoOptions {
        items,
        dir: dir.clone(),
        target: Duration::from_secs(target_s),
        concurrency: 16,
        metrics_listen: None,
        ledger,
    };
    let report = demo::run(&opts, |_| {}).await.expect("demo");
    let _ = std::fs::remove_dir_all(&dir);
    let rejected = report.apis.iter().map(|a| a.rejected).sum();
    (
        report.quota_utilisation,
        report.duration.as_secs_f64() / report.physical_limit.as_secs_f64(),
        rejected,
    )
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        let field = |k: usize| args.get(i + k).cloned().unwrap_or_default();
        child(
            &field(1),
            field(2).parse().expect("job"),
            field(3).parse().expect("first"),
            field(4).parse().expect("count"),
        )
        .await;
        return;
    }
    if !args.iter().any(|a| a == "--bench") {
        println!("ledgerbench: run it with `scripts/bench ledgerbench`");
        return;
    }
    let items: usize = arg("--items", 100_000);
    let outcomes: usize = arg("--outcomes", 40_000);
    let procs: String = arg("--procs", "1,2,4,8".to_string());
    let demo_items: u64 = arg("--demo-items", 0);
    let demo_target_s: u64 = arg("--demo-target-s", 60);
    println!(
        "ledgerbench on {} cores; postgres at {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        syncfleet::store::redact_url(&postgres::server_url())
    );
    enqueue(items).await;

    println!(
        "## ledger-bound throughput: {outcomes} outcomes, tasks of {CHUNK}, batches of {BATCH}, \
         {TASKS_PER_PROC} tasks per process (outcomes recorded per second)"
    );
    println!("  procs   sqlite (cpu busy)   postgres (cpu busy)   postgres/sqlite");
    for p in procs
        .split(',')
        .filter_map(|p| p.trim().parse::<usize>().ok())
    {
        let (lite, lite_busy) = throughput("sqlite", outcomes, p).await;
        let (pg, pg_busy) = throughput("postgres", outcomes, p).await;
        println!(
            "  {p:>5} {lite:>8.0} ({:>3.0}%) {pg:>13.0} ({:>3.0}%) {:>17.2}",
            lite_busy * 100.0,
            pg_busy * 100.0,
            pg / lite
        );
    }

    if demo_items > 0 {
        println!("## demo: {demo_items} items, target {demo_target_s} s");
        let server = postgres::TestPg::create().await;
        for (name, ledger) in [("sqlite", None), ("postgres", Some(server.url.clone()))] {
            let (util, ratio, rejected) = demo_on(demo_items, demo_target_s, ledger).await;
            println!(
                "  {name:<9} utilisation {:.2}%  duration/physical limit {ratio:.3}  rejected {rejected}",
                util * 100.0
            );
        }
    }
}
