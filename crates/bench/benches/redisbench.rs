//! The fleet's Redis beyond one server, counted by the simulator, against a same-run baseline.
//!
//! `scripts/bench redisbench [--mode failover|cluster] [--items 5000] [--rate 100]
//! [--kind fixed|sliding|bucket] [--ban-s 0] [--heal-s 60] [--workers 3] [--logs DIR]`
//!
//! **cluster**: the same job (defaults for the economy run: `--items 6000 --workers 4`) on one
//! Redis and on a three-primary Redis Cluster whose shards hold the two gates apart. Goal:
//! duration within 1.02x of one Redis, 0 rejections with the gates set right.
//!
//! **failover** (the default): each run starts a primary, a replica and three sentinels (private `redis-server`s on
//! loopback), a simulator whose `taobao.item_add` admits `--rate` calls per second counted the
//! `--kind` way (with a ban of `--ban-s` seconds after each rejection, as TOP), and a listing
//! job of `--items` items on 3 workers whose gates are set right (`--rate`, burst 20).
//! 1. **baseline**: no failover.
//! 2. **failover x2**: `SENTINEL FAILOVER` at a third of the job (the old primary is demoted
//!    and replicates the new one), then the new primary's process killed at two thirds (the
//!    sentinels notice after 1 s and promote the demoted one).
//!
//! Reported per run, from the simulator: items written, repeated writes, calls, rejections
//! (and their share of calls); from the ledger: done, failed, pending; from Redis: dead
//! letters, and today's quota counter of the gate beside the ledger's count of calls. Goal
//! (failover run): 0 lost, 0 failed, 0 repeated, no operator, rejections <= 0.1% of calls,
//! duration <= 1.15x the baseline.
//!
//! A benchmark (harness = false) because it needs the built `syncfleet` binary for its worker
//! processes; under `cargo test` it does nothing.

use syncfleet_testkit::{jobs_harness, support};

use jobs_harness::{arg, ClientOpts, Harness};
use std::time::{Duration, Instant};
use support::cluster::TestCluster;
use support::ledger::Kind;
use support::redis::TestRedis;
use support::sentinel::SentinelSet;
use syncfleet::platform::{Api, Platform};
use syncfleet::sim::{LimitKind, SimConfig};

const FROM: Platform = Platform::Alibaba;
const TO: Platform = Platform::Taobao;

struct Settings {
    items: u64,
    workers: usize,
    rate: u64,
    kind: LimitKind,
    ban_s: u64,
    heal_s: u64,
}

struct Run {
    name: &'static str,
    took: Duration,
    done: u64,
    failed: u64,
    pending: u64,
    created: u64,
    repeated: u64,
    calls: u64,
    rejected: u64,
    dead: u64,
    counted: Option<u64>,
    ledger_calls: u64,
    note: String,
}

impl Run {
    fn print(&self, base: Option<&Run>) {
        let ratio = base.map_or(String::new(), |b| {
            format!(
                "  ratio {:.3}",
                self.took.as_secs_f64() / b.took.as_secs_f64()
            )
        });
        println!(
            "{:<12} {:>6.1} s{ratio}  done {} failed {} pending {}  created {} repeated {}  \
             calls {} rejected {} ({:.3}%)  dead letters {}  quota counter {:?} / ledger {}  {}",
            self.name,
            self.took.as_secs_f64(),
            self.done,
            self.failed,
            self.pending,
            self.created,
            self.repeated,
            self.calls,
            self.rejected,
            100.0 * self.rejected as f64 / self.calls.max(1) as f64,
            self.dead,
            self.counted,
            self.ledger_calls,
            self.note
        );
    }
}

fn sim(s: &Settings) -> SimConfig {
    let mut c = SimConfig::demo()
        .with_limit(FROM, Api::ItemGet, 2_000, 10_000_000)
        .with_limit(TO, Api::ItemAdd, s.rate, 10_000_000)
        .with_limit_kind(TO, Api::ItemAdd, s.kind, None);
    if s.ban_s > 0 {
        c = c.with_limit_ban(TO, Api::ItemAdd, s.ban_s);
    }
    c
}

/// Where the fleet's Redis is for one run.
enum Where {
    /// One private server.
    One(TestRedis),
    /// A primary, a replica and three sentinels; failed over twice when `true`.
    Sentinel(SentinelSet, bool),
    /// A three-primary cluster.
    Cluster(TestCluster),
}

impl Where {
    fn name(&self) -> &'static str {
        match self {
            Where::One(_) => "one redis",
            Where::Sentinel(_, false) => "baseline",
            Where::Sentinel(_, true) => "failover x2",
            Where::Cluster(_) => "cluster x3",
        }
    }

    fn test_redis(&self) -> TestRedis {
        match self {
            Where::One(r) => TestRedis::external(r.url.clone()),
            Where::Sentinel(set, _) => set.as_test_redis(),
            Where::Cluster(c) => c.as_test_redis(),
        }
    }

    /// A connection to the node that holds `key` (the queue's or a gate's).
    fn node_for(&self, key: &str) -> redis::Connection {
        let url = match self {
            Where::One(r) => r.url.clone(),
            Where::Sentinel(set, _) => format!("redis://127.0.0.1:{}/", set.primary_port()),
            Where::Cluster(c) => format!("redis://127.0.0.1:{}/", c.node_of(key)),
        };
        redis::Client::open(url)
            .and_then(|c| c.get_connection())
            .expect("a redis node")
    }
}

async fn run(s: &Settings, mut at: Where) -> Run {
    let opts = ClientOpts {
        rate: s.rate as f64,
        burst: 20.0,
        heal_interval_s: s.heal_s,
        ..ClientOpts::default()
    };
    let mut h = Harness::start_with_redis(Kind::Sqlite, sim(s), &opts, at.test_redis()).await;
    let job = h.enqueue_listing(s.items);
    let started = Instant::now();
    // Workers that stay up while the queue looks empty, as a fleet's do (a lost task comes
    // back only through a live worker's heal sweep); stopped once the job is done.
    let workers: Vec<u32> = (0..s.workers).map(|_| h.spawn_worker(8, 3_600)).collect();
    let bound = Duration::from_secs(1_800);
    let mut note = String::new();
    if let Where::Sentinel(set, true) = &mut at {
        h.wait_terminal(job, s.items / 3, bound).await;
        let at = started.elapsed().as_secs_f64();
        let t = Instant::now();
        set.force_failover();
        note.push_str(&format!(
            "forced at {at:.1} s (named in {:.1} s)",
            t.elapsed().as_secs_f64()
        ));
        set.wait_settled(Duration::from_secs(120));
        h.wait_terminal(job, s.items * 2 / 3, bound).await;
        let at = started.elapsed().as_secs_f64();
        let t = Instant::now();
        set.kill_primary();
        note.push_str(&format!(
            "; killed at {at:.1} s (promoted in {:.1} s)",
            t.elapsed().as_secs_f64()
        ));
    }
    let status = h.wait_job(job, bound).await;
    let took = started.elapsed();
    for pid in workers {
        h.terminate_worker(pid);
    }
    h.wait_workers(Duration::from_secs(300));
    // `--logs DIR` keeps the workers' logs (run with SF_TEST_LOG=info for every call).
    let logs: String = arg("--logs", String::new());
    if !logs.is_empty() {
        let _ = std::fs::create_dir_all(&logs);
        for n in 0..s.workers {
            let _ = std::fs::copy(
                h.dir.path().join(format!("worker{n}.err")),
                format!("{logs}/{}-worker{n}.err", at.name().replace(' ', "_")),
            );
        }
    }
    let add = h.stats(TO, Api::ItemAdd);
    let get = h.stats(FROM, Api::ItemGet);
    let dead: u64 = redis::cmd("XLEN")
        .arg("{syncfleet}:dead")
        .query(&mut at.node_for("{syncfleet}"))
        .unwrap_or(0);
    let now = chrono::Utc::now();
    let day = syncfleet::time::QuotaDay::PLATFORM.label(now);
    let gate = format!("sf:{{{TO}:{}}}:quota:{day}", Api::ItemAdd);
    let counted: Option<u64> = redis::cmd("GET")
        .arg(&gate)
        .query(&mut at.node_for(&gate))
        .unwrap_or(None);
    let ledger_calls = h
        .store
        .report_calls_for_day(syncfleet::time::platform_day(now))
        .await
        .map(|r| {
            r.by_api
                .iter()
                .filter(|a| (a.platform, a.api) == (TO, Api::ItemAdd))
                .map(|a| a.calls)
                .sum()
        })
        .unwrap_or(0);
    let c = status.job.counts;
    Run {
        name: at.name(),
        took,
        done: c.done,
        failed: c.failed,
        pending: c.pending,
        created: add.ok - add.duplicate_writes,
        repeated: add.duplicate_writes,
        calls: add.calls + get.calls,
        rejected: add.rejected_limit + get.rejected_limit,
        dead,
        counted,
        ledger_calls,
        note,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("redisbench: run it with `scripts/bench redisbench`");
        return;
    }
    let kind = match arg("--kind", "fixed".to_string()).as_str() {
        "sliding" => LimitKind::Sliding,
        "bucket" => LimitKind::Bucket,
        _ => LimitKind::Fixed,
    };
    let cluster = arg("--mode", "failover".to_string()) == "cluster";
    let s = Settings {
        items: arg("--items", if cluster { 6_000 } else { 5_000 }),
        workers: arg("--workers", if cluster { 4 } else { 3 }),
        rate: arg("--rate", 100),
        kind,
        ban_s: arg("--ban-s", 0),
        heal_s: arg("--heal-s", 60),
    };
    println!(
        "redisbench {}: {} items, {} workers, taobao.item_add {}/s ({kind}, ban {} s), gates set right, heal every {} s",
        if cluster { "cluster" } else { "failover" },
        s.items, s.workers, s.rate, s.ban_s, s.heal_s
    );
    let (base, other) = if cluster {
        (
            Where::One(TestRedis::start()),
            Where::Cluster(TestCluster::start()),
        )
    } else {
        (
            Where::Sentinel(SentinelSet::start(), false),
            Where::Sentinel(SentinelSet::start(), true),
        )
    };
    let base = run(&s, base).await;
    base.print(None);
    let other = run(&s, other).await;
    other.print(Some(&base));
}
