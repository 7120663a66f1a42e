//! The chaos scenario, shared by `tests/suite/jobs_chaos.rs` (a few thousand items, in
//! the suite) and `crates/bench/benches/chaosbench.rs` (20,000 items against a same-run baseline): a
//! listing job on 3 workers while workers are SIGKILLed and SIGTERMed (and replaced), Redis
//! restarts (then `reconcile`), the upstream answers 10% errors and goes down for a moment.
//! Every event fires on job progress, never on a timer, so a slow machine only stretches it.

use super::Harness;
use crate::support::redis::TestRedis;
use std::time::{Duration, Instant};
use syncfleet::platform::{Api, Platform};
use syncfleet::sim::DrillPatch;
use syncfleet::store::StatusCounts;

const FROM: Platform = Platform::Alibaba;
const TO: Platform = Platform::Taobao;

/// What to do to the fleet while the job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chaos {
    /// No disturbance: the baseline.
    None,
    /// Kills, terminations, a Redis restart, an error drill and an outage.
    Full,
    /// SIGTERM one worker (and start a replacement) every `every` of wall time.
    ScaleIn { every: Duration },
}

/// What the run measured, from the ledger and the simulator.
#[derive(Debug, Clone)]
pub struct ChaosReport {
    pub items: u64,
    pub counts: StatusCounts,
    pub took: Duration,
    /// Products the simulator made.
    pub created: u64,
    /// Products whose seller's code another product of the shop already carried.
    pub duplicate_writes: u64,
    /// Look-ups by seller's code (after a write whose outcome was unknown, or a claim a
    /// killed worker left).
    pub finds: u64,
    /// Stop lines printed by workers that exited on their own.
    pub worker_lines: Vec<String>,
    pub events: Vec<String>,
    /// `syncfleet status` of the job at the end (its failure reasons, when any).
    pub status_report: String,
}

impl ChaosReport {
    /// Print what happened, then assert the promise: every item done (or stale, flagged),
    /// none failed or pending, and exactly one created at the platform per listed item.
    pub fn assert_every_item_once(&self) {
        println!("{:#?}", self.events);
        println!("{}", self.worker_lines.join("\n"));
        println!("{}", self.status_report);
        println!(
            "{:?} in {:?}; created {} (duplicates by seller code: {}; look-ups: {})",
            self.counts, self.took, self.created, self.duplicate_writes, self.finds
        );
        assert_eq!(
            (self.counts.failed, self.counts.pending),
            (0, 0),
            "{:?}",
            self.counts
        );
        assert_eq!(
            self.counts.done + self.counts.stale,
            self.items,
            "{:?}",
            self.counts
        );
        assert_eq!(
            (self.created, self.duplicate_writes),
            (self.items, 0),
            "exactly one created item per listed item"
        );
    }

    /// Attempts charged, as the workers reported them: failed runs plus orphans recovered.
    pub fn attempts_charged(&self) -> u64 {
        fn field(line: &str, suffix: &str) -> u64 {
            line.split(", ")
                .chain(line.split(": "))
                .find_map(|part| part.trim().strip_suffix(suffix))
                .and_then(|n| n.trim().rsplit(' ').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        }
        self.worker_lines
            .iter()
            .map(|l| field(l, "failed") + field(l, "recovered from dead workers"))
            .sum()
    }
}

fn drill(h: &Harness, patch: DrillPatch) {
    h.sim.set_drill(patch).expect("drill");
}

/// Wait (bounded) until `n` items of `job` are terminal.
async fn at(h: &Harness, job: i64, n: u64) {
    h.wait_terminal(job, n, Duration::from_secs(300)).await;
}

/// A small deterministic sequence: which worker each event hits.
struct Pick(u64);
impl Pick {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

/// How long a chaos worker waits on an empty queue before it exits: longer than a restart
/// of Redis (empty) and the `reconcile` that refills it take on a loaded machine, so the
/// fleet does not leave while the queue is briefly empty.
const IDLE_S: u64 = 10;

/// Enqueue `items` listing items, run 3 workers under `chaos`, wait for the job to end.
pub async fn run(h: &mut Harness, items: u64, chaos: Chaos) -> ChaosReport {
    let job = h.enqueue_listing(items);
    let started = Instant::now();
    let mut live: Vec<u32> = (0..3).map(|_| h.spawn_worker(8, IDLE_S)).collect();
    let mut events = Vec::new();
    let mut pick = Pick(0x5eed);
    let pct = |p: u64| items * p / 100;
    match chaos {
        Chaos::None => {}
        Chaos::ScaleIn { every } => {
            let mut next = Instant::now() + every;
            loop {
                let s = h.store.job_status(job).await.expect("status");
                if s.job.counts.pending == 0 {
                    break;
                }
                if Instant::now() >= next {
                    let i = pick.next(live.len());
                    let pid = live.remove(i);
                    h.terminate_worker(pid);
                    live.push(h.spawn_worker(8, IDLE_S));
                    events.push(format!("{:?}: SIGTERM {pid}", started.elapsed()));
                    next += every;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        Chaos::Full => {
            drill(
                h,
                DrillPatch {
                    error_ratio: Some(0.1),
                    ..DrillPatch::default()
                },
            );
            events.push("10% upstream errors from the start".into());
            for (p, what) in [
                (10, "kill"),
                (20, "term"),
                (30, "outage"),
                (45, "redis"),
                (60, "kill"),
                (75, "term"),
            ] {
                at(h, job, pct(p)).await;
                match what {
                    "kill" => {
                        let pid = live.remove(pick.next(live.len()));
                        h.kill_worker(pid);
                        live.push(h.spawn_worker(8, IDLE_S));
                        events.push(format!("{p}%: SIGKILL {pid}, replaced"));
                    }
                    "term" => {
                        let pid = live.remove(pick.next(live.len()));
                        h.terminate_worker(pid);
                        live.push(h.spawn_worker(8, IDLE_S));
                        events.push(format!("{p}%: SIGTERM {pid}, replaced"));
                    }
                    "outage" => {
                        drill(
                            h,
                            DrillPatch {
                                outage: Some(true),
                                ..DrillPatch::default()
                            },
                        );
                        // Down until the fleet has hit it a few times (bounded), then up.
                        let seen = |h: &Harness| {
                            h.stats(TO, Api::ItemAdd).calls + h.stats(FROM, Api::ItemGet).calls
                        };
                        let from = seen(h);
                        let until = Instant::now() + Duration::from_secs(20);
                        while seen(h) < from + 30 && Instant::now() < until {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                        drill(
                            h,
                            DrillPatch {
                                outage: Some(false),
                                ..DrillPatch::default()
                            },
                        );
                        events.push(format!("{p}%: upstream outage, then back"));
                    }
                    _ => {
                        restart_redis(&mut h.redis);
                        let out = h.run(&["reconcile", &job.to_string()]);
                        events.push(format!(
                            "{p}%: redis restarted empty; {}",
                            String::from_utf8_lossy(&out.stdout).trim()
                        ));
                    }
                }
            }
            drill(
                h,
                DrillPatch {
                    error_ratio: Some(0.0),
                    ..DrillPatch::default()
                },
            );
        }
    }
    let status = h.wait_job(job, Duration::from_secs(600)).await;
    let took = started.elapsed();
    let worker_lines = h.wait_workers(Duration::from_secs(120));
    let add = h.stats(TO, Api::ItemAdd);
    ChaosReport {
        items,
        counts: status.job.counts,
        took,
        created: h.sim.stats().totals.products,
        duplicate_writes: add.duplicate_writes,
        finds: h.stats(TO, Api::ItemFind).calls,
        worker_lines,
        events,
        status_report: String::from_utf8_lossy(&h.run(&["status", &job.to_string()]).stdout)
            .into_owned(),
    }
}

fn restart_redis(r: &mut TestRedis) {
    r.stop();
    r.restart();
}
