//! The hard cases at scale, counted by the simulator, against a same-run baseline.
//!
//! `scripts/bench hardbench [--items 5000] [--rate 100] [--only ledger,lost,hostile]`
//! (PostgreSQL from `TEST_POSTGRES_URL`, as the suite: `scripts/postgres-for-tests`) runs,
//! each on a fresh simulator, Redis and ledger:
//! 1. **ledger**: a listing job of N items on 3 workers whose PostgreSQL ledger is reached
//!    through a loopback proxy: undisturbed (the baseline); frozen for 60 s at a fifth of the
//!    job (nothing forwarded, sockets open); its connections reset ten times, 3 s apart (every
//!    connection closed, new ones let in after 0.5 s). Goal: 0 dead letters, 0 failed, the job
//!    finishes with no operator, duration <= 60 s + 1.1x the baseline.
//! 2. **lost**: the same job (SQLite ledger, tasks of `--lost-chunk` 20 items) with 5% of its
//!    queued tasks deleted from Redis at a fifth of the job, from the ready set and the stream
//!    alike. Goal: it finishes on its own, and
//!    no item is written twice (the simulator counts repeated writes).
//! 3. **hostile**: 1,000 items, of which 10 have a 2 GiB source answer (five with the length
//!    declared, five chunked) for one worker in a 512 MiB memory cgroup (when the machine lets
//!    the bench make one; else its peak resident memory is read), and 10 a permanent error
//!    worded like a limit. Goal: the worker survives, those items end `failed` within their
//!    retry rounds, the gate's rate is unchanged.
//!
//! A benchmark (harness = false) because it needs the built `syncfleet` binary for its worker
//! processes; under `cargo test` it does nothing.

use syncfleet_testkit::{jobs_harness, support};

use jobs_harness::{arg, ClientOpts, Harness};
use std::time::{Duration, Instant};
use support::ledger::Kind;
use support::proxy::FreezableProxy;
use syncfleet::config::Config;
use syncfleet::platform::{Api, Platform};
use syncfleet::sim::DrillPatch;
use syncfleet::store::{ItemStatus, JobState, StatusCounts};
use syncfleet::throttle::Gates;

const FROM: Platform = Platform::Alibaba;
const TO: Platform = Platform::Taobao;
const WORKERS: usize = 3;

struct Run {
    name: String,
    took: Duration,
    counts: StatusCounts,
    state: JobState,
    created: u64,
    repeated: u64,
    dead: u64,
    note: String,
}

impl Run {
    /// The job's own duration (its workers were stopped after it, which `finish` counts).
    fn with_took(mut self, took: Duration, state: JobState) -> Run {
        self.took = took;
        self.state = state;
        self
    }

    fn print(&self, base: Option<&Run>) {
        let ratio = base.map_or(String::new(), |b| {
            format!(
                "  ratio {:.3}  over baseline {:+.1} s",
                self.took.as_secs_f64() / b.took.as_secs_f64(),
                self.took.as_secs_f64() - b.took.as_secs_f64()
            )
        });
        let c = &self.counts;
        println!(
            "{:<22} {:>7.1} s{ratio}  {:?}  done {} failed {} pending {}  dead letters {}  created {} repeated writes {}  {}",
            self.name,
            self.took.as_secs_f64(),
            self.state,
            c.done,
            c.failed,
            c.pending,
            self.dead,
            self.created,
            self.repeated,
            self.note
        );
    }
}

fn opts(rate: u64) -> ClientOpts {
    ClientOpts {
        rate: rate as f64,
        ..ClientOpts::default()
    }
}

/// Dead letters of the fleet's queue (all jobs), read from Redis.
async fn dead_letters(h: &Harness) -> u64 {
    let client = redis::Client::open(h.redis.url.as_str()).expect("redis url");
    let mut c = client
        .get_multiplexed_async_connection()
        .await
        .expect("redis");
    redis::cmd("XLEN")
        .arg("{syncfleet}:dead")
        .query_async::<u64>(&mut c)
        .await
        .unwrap_or(0)
}

async fn finish(h: &mut Harness, name: &str, job: i64, started: Instant, note: String) -> Run {
    let status = h.wait_job(job, Duration::from_secs(1800)).await;
    let took = started.elapsed();
    h.wait_workers(Duration::from_secs(300));
    let add = h.stats(TO, Api::ItemAdd);
    Run {
        name: name.to_string(),
        took,
        counts: status.job.counts,
        state: status.job.state,
        created: add.ok - add.duplicate_writes,
        repeated: add.duplicate_writes,
        dead: dead_letters(h).await,
        note,
    }
}

#[derive(Clone, Copy, PartialEq)]
enum LedgerFault {
    None,
    Freeze60,
    Resets,
}

async fn ledger_run(items: u64, rate: u64, fault: LedgerFault) -> Run {
    let mut h = Harness::start_on(Kind::Postgres, jobs_harness::listing_sim(), &opts(rate)).await;
    let job = h.enqueue_listing(items);
    let proxy = FreezableProxy::start(&h.db).await;
    let direct = std::mem::replace(&mut h.db, proxy.url.clone());
    let started = Instant::now();
    for _ in 0..WORKERS {
        h.spawn_worker(8, 5);
    }
    h.db = direct.clone();
    h.wait_terminal(job, items / 5, Duration::from_secs(600))
        .await;
    let note = match fault {
        LedgerFault::None => String::new(),
        LedgerFault::Freeze60 => {
            let at = started.elapsed();
            proxy.freeze();
            tokio::time::sleep(Duration::from_secs(60)).await;
            proxy.thaw();
            format!("frozen 60 s from {:.1} s", at.as_secs_f64())
        }
        LedgerFault::Resets => {
            let at = started.elapsed();
            for _ in 0..10 {
                proxy.cut();
                tokio::time::sleep(Duration::from_millis(500)).await;
                proxy.restore();
                tokio::time::sleep(Duration::from_secs(3)).await;
            }
            format!("10 resets from {:.1} s", at.as_secs_f64())
        }
    };
    let name = match fault {
        LedgerFault::None => "ledger baseline",
        LedgerFault::Freeze60 => "ledger frozen 60 s",
        LedgerFault::Resets => "ledger resets x10",
    };
    finish(&mut h, name, job, started, note).await
}

/// Remove `share` of the fleet's queued tasks (ready set and stream); how many went.
fn delete_tasks(h: &Harness, share: f64) -> (usize, usize) {
    let client = redis::Client::open(h.redis.url.as_str()).expect("redis url");
    let mut c = client.get_connection().expect("redis");
    let ready: Vec<String> = redis::cmd("ZRANGE")
        .arg("{syncfleet}:ready")
        .arg(0)
        .arg(-1)
        .query(&mut c)
        .expect("ready set");
    let stream: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
        .arg("{syncfleet}:stream")
        .arg("-")
        .arg("+")
        .query(&mut c)
        .expect("stream");
    let every = (1.0 / share).round() as usize;
    let gone_ready: Vec<&String> = ready.iter().step_by(every).collect();
    let gone_stream: Vec<&String> = stream.iter().map(|(id, _)| id).step_by(every).collect();
    if !gone_ready.is_empty() {
        let _: usize = redis::cmd("ZREM")
            .arg("{syncfleet}:ready")
            .arg(&gone_ready)
            .query(&mut c)
            .expect("zrem");
    }
    if !gone_stream.is_empty() {
        let _: usize = redis::cmd("XDEL")
            .arg("{syncfleet}:stream")
            .arg(&gone_stream)
            .query(&mut c)
            .expect("xdel");
    }
    (gone_ready.len(), gone_stream.len())
}

async fn lost_run(items: u64, rate: u64, chunk: usize, lose: bool) -> Run {
    // Small tasks (`--lost-chunk`, 20 items): a job of many tasks, so 5% of them is a count.
    let opts = ClientOpts {
        chunk_size: chunk,
        ..opts(rate)
    };
    let mut h = Harness::start(jobs_harness::listing_sim(), &opts).await;
    let job = h.enqueue_listing(items);
    let started = Instant::now();
    // Workers that stay up while the queue looks empty, as a fleet's do: the lost items come
    // back only through a live worker's heal sweep. Stopped once the job is done.
    let workers: Vec<u32> = (0..WORKERS).map(|_| h.spawn_worker(8, 3_600)).collect();
    h.wait_terminal(job, items / 5, Duration::from_secs(600))
        .await;
    let (note, name) = if lose {
        let (ready, stream) = delete_tasks(&h, 0.05);
        (
            format!(
                "deleted at {:.1} s: {ready} waiting and {stream} delivered tasks; heal every 60 s",
                started.elapsed().as_secs_f64()
            ),
            "5% of tasks deleted",
        )
    } else {
        (String::new(), "queue baseline")
    };
    let status = h.wait_job(job, Duration::from_secs(1800)).await;
    let took = started.elapsed();
    for pid in workers {
        h.terminate_worker(pid);
    }
    finish(&mut h, name, job, started, note)
        .await
        .with_took(took, status.job.state)
}

/// A memory cgroup (v1 or v2) of `limit` bytes for the bench's worker, when the machine lets
/// one be made: its directory.
fn memory_cgroup(limit: u64) -> Option<std::path::PathBuf> {
    let name = format!("syncfleet-hardbench-{}", std::process::id());
    for (root, file) in [
        ("/sys/fs/cgroup/memory", "memory.limit_in_bytes"),
        ("/sys/fs/cgroup", "memory.max"),
    ] {
        let dir = std::path::Path::new(root).join(&name);
        if std::fs::create_dir(&dir).is_ok() {
            if std::fs::write(dir.join(file), limit.to_string()).is_ok() {
                return Some(dir);
            }
            let _ = std::fs::remove_dir(&dir);
        }
    }
    None
}

fn read_u64(path: &std::path::Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

async fn hostile_run() {
    let items = 1_000;
    let opts = ClientOpts {
        item_retry_rounds: 2,
        ..opts(200)
    };
    let mut h = Harness::start(jobs_harness::listing_sim(), &opts).await;
    let huge: Vec<u64> = (1..=10).map(|i| i * 97).collect();
    let worded: Vec<u64> = (1..=10).map(|i| i * 89 + 5).collect();
    h.sim
        .set_drill(DrillPatch {
            huge_answer_items: Some(huge.clone()),
            huge_answer_bytes: Some(2 << 30),
            huge_answer_declared: Some(true),
            worded_limit_items: Some(worded.clone()),
            ..DrillPatch::default()
        })
        .expect("drill");
    let job = h.enqueue_listing(items);
    let cgroup = memory_cgroup(512 << 20);
    let started = Instant::now();
    let pid = h.spawn_worker(8, 5);
    if let Some(dir) = &cgroup {
        let procs = ["cgroup.procs", "tasks"]
            .iter()
            .map(|f| dir.join(f))
            .find(|p| p.exists())
            .expect("a cgroup's process list");
        std::fs::write(procs, pid.to_string()).expect("move the worker into its cgroup");
    }
    // Half of the huge answers chunked without a length: switched once a third is done.
    h.wait_terminal(job, items / 3, Duration::from_secs(600))
        .await;
    h.sim
        .set_drill(DrillPatch {
            huge_answer_declared: Some(false),
            ..DrillPatch::default()
        })
        .expect("drill");
    let mut peak_rss = 0;
    let status = loop {
        if let Some(mb) = Harness::peak_rss_mb(pid) {
            peak_rss = peak_rss.max(mb);
        }
        let s = h.store.job_status(job).await.expect("status");
        if s.job.counts.pending == 0 {
            break s;
        }
        assert!(started.elapsed() < Duration::from_secs(900), "hostile run");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    if let Some(mb) = Harness::peak_rss_mb(pid) {
        peak_rss = peak_rss.max(mb);
    }
    let took = started.elapsed();
    let exits = h.wait_workers(Duration::from_secs(120));
    let c = &status.job.counts;
    let failed = h
        .store
        .items(job, Some(ItemStatus::Failed), 100)
        .await
        .expect("items");
    let too_large = failed
        .iter()
        .filter(|f| {
            f.error_message
                .as_deref()
                .is_some_and(|m| m.contains("over the limit") || m.contains("body_too_large"))
        })
        .count();
    let like_limit = failed
        .iter()
        .filter(|f| {
            f.error_message
                .as_deref()
                .is_some_and(|m| m.contains("answered like a limit"))
        })
        .count();
    let gets = h.stats(FROM, Api::ItemGet);
    println!(
        "hostile                {:>7.1} s  done {} failed {} (body too large {too_large}, worded like a limit {like_limit})  item_get calls {} for {items} items: the 20 bad ones asked {} times (bound: 10 worded x {} rounds + 10 huge x {} rounds x 3 tries = {})",
        took.as_secs_f64(),
        c.done,
        c.failed,
        gets.calls,
        gets.calls - (items - 20),
        u64::from(opts.item_retry_rounds) + 1,
        u64::from(opts.item_retry_rounds) + 1,
        10 * (u64::from(opts.item_retry_rounds) + 1) * 4,
    );
    println!("          worker exit: {}", exits.join("; "));
    match &cgroup {
        Some(dir) => {
            let peak = read_u64(&dir.join("memory.max_usage_in_bytes"))
                .or_else(|| read_u64(&dir.join("memory.peak")))
                .unwrap_or(0);
            let failcnt = read_u64(&dir.join("memory.failcnt")).unwrap_or(0);
            println!(
                "          worker in a 512 MiB memory cgroup: peak {} MiB (cgroup, page cache included), limit hits {failcnt}; peak resident {peak_rss} MiB",
                peak >> 20
            );
            let _ = std::fs::remove_dir(dir);
        }
        None => println!(
            "          no memory cgroup could be made here: peak resident memory {peak_rss} MiB"
        ),
    }
    let cfg = Config::load(&h.config).expect("config");
    let gates = Gates::redis(&cfg, &h.redis.url).await.expect("gates");
    let snap = gates.snapshot().await.expect("snapshot");
    if let Some(g) = snap
        .iter()
        .find(|g| g.platform == FROM && g.api == Api::ItemGet)
    {
        println!(
            "          item_get gate: configured {} /s, adaptive {} /s, ceiling {:?}",
            g.limits.rate, g.adaptive_rate, g.ceiling
        );
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("hardbench: run it with `scripts/bench hardbench`");
        return;
    }
    let items: u64 = arg("--items", 5_000);
    let rate: u64 = arg("--rate", 100);
    let only: String = arg("--only", "ledger,lost,hostile".to_string());
    println!(
        "hardbench: {items} items, {WORKERS} workers, gates at {rate}/s (physical limit {:.1} s)",
        items as f64 / rate as f64
    );
    if only.contains("ledger") {
        let base = ledger_run(items, rate, LedgerFault::None).await;
        base.print(None);
        for fault in [LedgerFault::Freeze60, LedgerFault::Resets] {
            ledger_run(items, rate, fault).await.print(Some(&base));
        }
    }
    if only.contains("lost") {
        let chunk: usize = arg("--lost-chunk", 20);
        let base = lost_run(items, rate, chunk, false).await;
        base.print(None);
        lost_run(items, rate, chunk, true).await.print(Some(&base));
    }
    if only.contains("hostile") {
        hostile_run().await;
    }
}
