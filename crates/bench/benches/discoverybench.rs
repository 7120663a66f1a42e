//! Limit discovery against the three kinds of platform limit, counted by the simulator.
//!
//! `scripts/bench discoverybench [--seconds 40] [--cells all|worst] [--kinds ...]
//!  [--rates 30,400] [--workers 2,4] [--factors 3,10] [--reps 1] [--ban 1] [--embedded]
//!  [--right-burst N]`
//!
//! A write-bound listing (1688 `item_get` granted 4x the write limit, Taobao `item_add` granted
//! `rate`/s counted as `kind`, every rejection a ban of `--ban` seconds as on TOP), sized so the
//! write limit alone takes `--seconds`. For each (kind, rate, workers), on a fresh simulator,
//! Redis and ledger each:
//! - **right**: the `item_add` gate at the grant (burst 5% of it): the same-run baseline;
//! - **3x / 10x**: the `item_add` gate at 3 or 10 times the grant, burst 20, the grant unknown.
//!
//! Printed per run: duration / physical limit (items / rate), the run against its baseline,
//! rejected calls and their share of all calls, the seconds the simulator refused calls in
//! (each a ban on TOP: the time lost to bans) and the time lost to running under the limit
//! (the rest of the run's excess over its baseline). `--embedded` runs the baseline once more
//! with one worker process and no Redis (the embedded gates). Under `cargo test` it does
//! nothing (a bench target because it needs the built binary for its worker processes).
//! `SF_TRACE=1` prints what the simulator admitted every 500 ms during each job;
//! `DISCOVERY_LOGS=1` (with `SF_TEST_LOG=info`) the workers' last log lines, the gate's
//! measurements among them.

use syncfleet_testkit::jobs_harness;

use jobs_harness::{client_toml, ClientOpts, Harness};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use syncfleet::platform::{Api, Platform};
use syncfleet::sim::{ApiStats, LimitKind, SimConfig};

const FROM: Platform = Platform::Alibaba;
const TO: Platform = Platform::Taobao;

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_else(|| default.to_string())
}

fn list<T: std::str::FromStr>(name: &str, default: &str) -> Vec<T> {
    arg(name, default)
        .split(',')
        .filter_map(|v| v.trim().parse().ok())
        .collect()
}

/// `--right-burst N`: the known grant's gate at this burst instead of 5% of the grant.
fn right_burst() -> Option<u64> {
    arg("--right-burst", "").parse().ok()
}

fn kind_of(name: &str) -> Option<LimitKind> {
    match name {
        "fixed" => Some(LimitKind::Fixed),
        "sliding" => Some(LimitKind::Sliding),
        "bucket" => Some(LimitKind::Bucket),
        _ => None,
    }
}

#[derive(Clone, Copy)]
struct Setting {
    kind: LimitKind,
    rate: u64,
    workers: usize,
    ban_s: u64,
}

impl Setting {
    fn sim(&self) -> SimConfig {
        SimConfig::demo()
            .with_limit(FROM, Api::ItemGet, self.rate * 4, 100_000_000)
            .with_limit(TO, Api::ItemAdd, self.rate, 100_000_000)
            .with_limit_kind(TO, Api::ItemAdd, self.kind, None)
            .with_limit_ban(TO, Api::ItemAdd, self.ban_s)
    }

    /// The item_add gate of an operator who knows the grant: the grant itself with a burst of
    /// 5% for a clock-aligned window or a bucket (which holds a second's calls); 97% of it at
    /// burst one for a sliding window, which counts arrivals and so the jitter of a loaded
    /// machine too.
    fn right(&self) -> (u64, u64) {
        match self.kind {
            LimitKind::Sliding => (self.rate * 97 / 100, 1),
            _ => (self.rate, right_burst().unwrap_or((self.rate / 20).max(1))),
        }
    }

    fn name(&self) -> String {
        format!("{:?} {}/s {}w", self.kind, self.rate, self.workers).to_lowercase()
    }
}

/// A client config: item_get at its grant, item_add at `write_rate` with `burst`.
fn config(h: &Harness, s: &Setting, name: &str, write_rate: u64, burst: u64) -> PathBuf {
    let read = s.rate * 4;
    let opts = ClientOpts {
        rate: read as f64,
        concurrency: 16,
        ..ClientOpts::default()
    };
    let text = format!(
        "{}\n[gates.\"alibaba.item_get\"]\nrate = {read}\nburst = {}\n\n[gates.\"taobao.item_add\"]\nrate = {write_rate}\nburst = {burst}\nconcurrency = 16\nmax_wait_ms = 2000\n",
        client_toml(&h.sim, &opts),
        (read / 20).max(1),
    );
    let path = h.dir.path().join(name);
    std::fs::write(&path, text).expect("config");
    path
}

struct Run {
    took: Duration,
    get: ApiStats,
    add: ApiStats,
}

impl Run {
    fn rejected(&self) -> u64 {
        self.get.rejected_limit + self.add.rejected_limit
    }

    fn share(&self) -> f64 {
        100.0 * self.rejected() as f64 / (self.get.calls + self.add.calls).max(1) as f64
    }
}

/// Enqueue `items`, run `workers` workers with `config`, wait for the job.
async fn job(h: &mut Harness, config: &Path, items: u64, workers: usize) -> Run {
    let job = h.enqueue_listing_with(config, items);
    let started = Instant::now();
    for _ in 0..workers {
        h.spawn_worker_with(config, 8, 2);
    }
    let status = tokio::select! {
        s = h.wait_job(job, Duration::from_secs(900)) => s,
        _ = trace(h) => unreachable!("the trace never ends"),
    };
    let took = started.elapsed();
    h.wait_workers(Duration::from_secs(120));
    if std::env::var_os("DISCOVERY_LOGS").is_some() {
        println!("{}", h.worker_logs());
    }
    assert_eq!(status.job.counts.done, items, "{:?}", status.job.counts);
    Run {
        took,
        get: h.stats(FROM, Api::ItemGet),
        add: h.stats(TO, Api::ItemAdd),
    }
}

/// With `SF_TRACE` set: what the simulator admitted on `item_add` every 500 ms (calls/s, `R`
/// where it refused one), printed until the job is done (runs forever; the caller drops it).
async fn trace(h: &Harness) {
    if std::env::var_os("SF_TRACE").is_none() {
        return std::future::pending().await;
    }
    let started = Instant::now();
    let (mut ok, mut rejected) = (0, 0);
    let mut line = String::new();
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let st = h.stats(TO, Api::ItemAdd);
        let mark = if st.rejected_limit > rejected {
            "R"
        } else {
            ""
        };
        line.push_str(&format!(
            " {:.1}:{}{mark}",
            started.elapsed().as_secs_f64(),
            (st.ok - ok) * 2
        ));
        (ok, rejected) = (st.ok, st.rejected_limit);
        if line.len() > 150 {
            println!("trace{line}");
            line.clear();
        }
    }
}

fn print(setting: &str, gate: &str, run: &Run, physical: f64, baseline: Option<&Run>, ban_s: u64) {
    let ban_loss = (run.add.limited_seconds * ban_s) as f64;
    let (vs, under) = match baseline {
        Some(b) => (
            format!("{:.3}", run.took.as_secs_f64() / b.took.as_secs_f64()),
            format!(
                "{:>5.1}",
                (run.took.as_secs_f64() - b.took.as_secs_f64() - ban_loss).max(0.0)
            ),
        ),
        None => ("    -".into(), "    -".into()),
    };
    println!(
        "{setting:<20} {gate:<8} {:>6.1} s  x physical {:.3}  x right {vs}  rejected {:>3} ({:.3}%)  banned s {:>3}  under-limit s {under}  item_add peak {}",
        run.took.as_secs_f64(),
        run.took.as_secs_f64() / physical,
        run.rejected(),
        run.share(),
        run.add.limited_seconds,
        run.add.peak_per_second,
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("discoverybench: run it with `scripts/bench discoverybench`");
        return;
    }
    let seconds: u64 = arg("--seconds", "40").parse().unwrap_or(40);
    let kinds: Vec<LimitKind> = arg("--kinds", "fixed,sliding,bucket")
        .split(',')
        .filter_map(kind_of)
        .collect();
    let rates: Vec<u64> = list("--rates", "30,400");
    let workers: Vec<usize> = list("--workers", "2,4");
    let factors: Vec<u64> = list("--factors", "3,10");
    let reps: usize = arg("--reps", "1").parse().unwrap_or(1);
    let ban_s: u64 = arg("--ban", "1").parse().unwrap_or(1);
    let embedded = std::env::args().any(|a| a == "--embedded");
    let skip_right = std::env::args().any(|a| a == "--no-baseline");
    println!(
        "discoverybench: item_add granted R/s (kind as named, a {ban_s} s ban per rejection), item_get 4R/s, items = R x {seconds}; gate right = R burst R/20 (sliding: 0.97R burst 1), high = R x factor burst 20"
    );
    for &kind in &kinds {
        for &rate in &rates {
            for &w in &workers {
                let s = Setting {
                    kind,
                    rate,
                    workers: w,
                    ban_s,
                };
                let items = rate * seconds;
                let physical = items as f64 / rate as f64;
                let baseline = if skip_right {
                    None
                } else {
                    let mut h = Harness::start(s.sim(), &ClientOpts::default()).await;
                    let (right, burst) = s.right();
                    let c = config(&h, &s, "right.toml", right, burst);
                    let run = job(&mut h, &c, items, w).await;
                    print(&s.name(), "right", &run, physical, None, ban_s);
                    Some(run)
                };
                if embedded {
                    let mut h = Harness::start(s.sim(), &ClientOpts::default()).await;
                    h.use_embedded();
                    let (right, burst) = s.right();
                    let c = config(&h, &s, "right.toml", right, burst);
                    let run = job(&mut h, &c, items, 1).await;
                    print(
                        &s.name(),
                        "right-1p",
                        &run,
                        physical,
                        baseline.as_ref(),
                        ban_s,
                    );
                }
                for &factor in &factors {
                    for _ in 0..reps {
                        let mut h = Harness::start(s.sim(), &ClientOpts::default()).await;
                        let c = config(&h, &s, "high.toml", rate * factor, 20);
                        let run = job(&mut h, &c, items, w).await;
                        print(
                            &s.name(),
                            &format!("{factor}x"),
                            &run,
                            physical,
                            baseline.as_ref(),
                            ban_s,
                        );
                    }
                }
            }
        }
    }
}
