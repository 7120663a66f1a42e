//! Fair shares: a big job enqueued first does not hold back the small jobs of other shops.
//!
//! `scripts/bench fairbench [--shops 10] [--big 20000] [--small 1000] [--workers 3]
//!  [--chunk 50] [--configs fixed:400,sliding:200] [--weight1 1] [--no-baseline]
//!  [--ledger sqlite|postgres] [--embedded]
//!  [--sliding-gate F [--sliding-burst B] [--sliding-band MS]]`
//!
//! `--sliding-gate F` sets the item_add gate on a sliding window as an operator who knows a
//! sliding grant would (docs/design.md, "Limit discovery"): F x the limit, burst one, so the
//! burst and the arrival jitter do not cross the window (`--sliding-burst B`: another burst;
//! `--sliding-band MS`: the gate's `boundary_band_ms`, which only a clock-aligned window needs).
//! Utilisation is still counted against the limit.
//!
//! `--embedded` runs one worker process alone, without Redis (the embedded queue and gates:
//! there the shares are the slots' turns by shop and the task turns; `--workers` is ignored).
//!
//! `--ledger postgres` puts the workers' ledger on PostgreSQL (`TEST_POSTGRES_URL`, as
//! `scripts/postgres-for-tests` prints it), each worker as a host of its own.
//!
//! `--weight1 W` gives shop 1 the weight W (the others 1): its fair share is then W / (sum of
//! the weights) of the gate.
//!
//! One app (1688 -> Taobao listing), `--shops` shops each with a session of its own at the
//! simulator. Shop 0 enqueues a `--big` job first, then shops 1.. enqueue `--small` jobs;
//! `--workers` worker processes (work --concurrency 8, the default) run them, in tasks of
//! `--chunk` items (the worker's default is 100). The item_add gate is set to
//! the grant (rate = the simulator's limit, burst 20, or the rate when lower): fairness, not
//! discovery, is measured.
//! Each configuration (`kind:rate` of the simulator's item_add limit) runs twice, each on a
//! fresh simulator, Redis and ledger:
//! - **one shop** (baseline): every job for the same shop: the queue hands tasks out first
//!   come, first served;
//! - **shops**: each job for its own shop (weight 1).
//!
//! Printed per run, counted by the simulator: each small job's finish (its shop's last
//! successful item_add; for the baseline, when the ledger showed the job finished) against
//! its fair-share time (items / (rate / active shops)), the big job's finish, the gate's
//! utilisation (items / (rate x duration)) and rejections. Under `cargo test` it does nothing.

use syncfleet_testkit::jobs_harness;
use syncfleet_testkit::support::ledger::Kind;

use jobs_harness::{arg, client_toml, ClientOpts, Harness};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use syncfleet::platform::{Api, Platform};
use syncfleet::sim::{LimitKind, SimConfig};
use syncfleet::store::JobState;

const FROM: Platform = Platform::Alibaba;
const TO: Platform = Platform::Taobao;

fn shop_name(i: usize) -> String {
    format!("shop{i}")
}

struct Setup {
    kind: LimitKind,
    rate: u64,
    shops: usize,
    big: u64,
    small: u64,
    workers: usize,
    chunk: usize,
    weight1: u32,
    /// On a sliding window: the item_add gate at this share of the limit, and its burst.
    sliding_gate: Option<f64>,
    sliding_burst: f64,
    /// On a sliding window with `sliding_gate`: the gate's boundary band (ms), when given.
    sliding_band_ms: Option<u64>,
    /// The ledger the workers share.
    ledger: Kind,
    /// One worker process alone, no Redis: the embedded queue and gates.
    embedded: bool,
}

/// Enqueue a listing of items `first..first+n` for `shop`.
fn enqueue(h: &Harness, config: &std::path::Path, shop: &str, first: u64, n: u64) -> i64 {
    let path = h.dir.path().join(format!("items-{shop}-{first}.txt"));
    let text: String = (first..first + n).map(|i| format!("{i}\n")).collect();
    std::fs::write(&path, text).expect("items");
    h.enqueue_with(
        config,
        &[
            "listing",
            "--from",
            "alibaba",
            "--to",
            "taobao",
            "--to-shop",
            shop,
            "--items",
            path.to_str().expect("utf-8 path"),
        ],
    )
}

async fn run(s: &Setup, fair: bool) {
    let names: Vec<String> = (0..s.shops).map(shop_name).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let sim = SimConfig::demo()
        .with_limit(FROM, Api::ItemGet, 4 * s.rate, 100_000_000)
        .with_limit(TO, Api::ItemAdd, s.rate, 100_000_000)
        .with_limit_kind(TO, Api::ItemAdd, s.kind, None)
        .with_shops(TO, &refs);
    let opts = ClientOpts {
        rate: (4 * s.rate) as f64,
        chunk_size: s.chunk,
        shops: names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), if i == 1 { s.weight1 } else { 1 }))
            .collect(),
        ..ClientOpts::default()
    };
    let mut h = Harness::start_on(s.ledger, sim, &opts).await;
    if s.embedded {
        h.use_embedded();
    }
    let config = h.dir.path().join("fair.toml");
    let (add_rate, add_burst, band) = match (s.kind, s.sliding_gate) {
        (LimitKind::Sliding, Some(share)) => (
            s.rate as f64 * share,
            s.sliding_burst,
            s.sliding_band_ms
                .map(|ms| format!("boundary_band_ms = {ms}\n"))
                .unwrap_or_default(),
        ),
        // A burst above a second's grant is a rejection on a fixed window.
        _ => (s.rate as f64, 20.0f64.min(s.rate as f64), String::new()),
    };
    let text = format!(
        "{}\n[gates.\"alibaba.item_get\"]\nrate = {}\nburst = 20\n\n[gates.\"taobao.item_add\"]\nrate = {add_rate}\nburst = {add_burst}\nmax_wait_ms = 2000\n{band}",
        client_toml(&h.sim, &opts),
        4 * s.rate,
    );
    std::fs::write(&config, text).expect("config");
    let shop_of = |i: usize| if fair { shop_name(i) } else { shop_name(0) };
    // Distinct ids within the simulator's catalog (items 1..=100,000).
    let mut jobs = vec![(
        enqueue(&h, &config, &shop_of(0), 1, s.big),
        shop_of(0),
        s.big,
    )];
    for i in 1..s.shops {
        let first = 1 + s.big + (i as u64 - 1) * s.small;
        jobs.push((
            enqueue(&h, &config, &shop_of(i), first, s.small),
            shop_of(i),
            s.small,
        ));
    }
    let start_ms = chrono::Utc::now().timestamp_millis();
    let started = Instant::now();
    // One process alone holds the embedded queue (its ledger's lock).
    let workers = if s.embedded { 1 } else { s.workers };
    for _ in 0..workers {
        h.spawn_worker_with(&config, 8, 2);
    }
    // When the ledger first shows each job finished.
    let mut finished: HashMap<i64, f64> = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(3600);
    while finished.len() < jobs.len() {
        for (job, _, _) in &jobs {
            if finished.contains_key(job) {
                continue;
            }
            let st = h.store.job_status(*job).await.expect("status");
            if st.job.state == JobState::Finished {
                assert_eq!(st.job.counts.done, st.job.total, "{:?}", st.job.counts);
                finished.insert(*job, started.elapsed().as_secs_f64());
            }
        }
        assert!(Instant::now() < deadline, "jobs did not finish");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let took = started.elapsed().as_secs_f64();
    h.wait_workers(Duration::from_secs(120));
    let stats = h.sim.stats();
    let add = h.stats(TO, Api::ItemAdd);
    let get = h.stats(FROM, Api::ItemGet);
    let items = s.big + s.small * (s.shops as u64 - 1);
    let total_weight = (s.shops as u32 - 1 + s.weight1) as f64;
    let weight_of = |shop: &str| {
        if fair && shop == shop_name(1) {
            s.weight1
        } else {
            1
        }
    };
    let label = if fair { "shops" } else { "one shop (baseline)" };
    println!(
        "{:>8} {:>4}/s  {label:<20} {took:>6.1} s  utilisation {:.2}%  item_add calls {} (ok {})  rejected {}",
        s.kind.to_string(),
        s.rate,
        100.0 * items as f64 / (s.rate as f64 * took),
        add.calls,
        add.ok,
        add.rejected_limit + get.rejected_limit
    );
    let mut ratios = Vec::new();
    for (job, shop, n) in &jobs {
        let fair_share_s = if fair {
            s.small as f64 / (s.rate as f64 * f64::from(weight_of(shop)) / total_weight)
        } else {
            s.small as f64 / (s.rate as f64 / s.shops as f64)
        };
        let ledger_s = finished[job];
        let sim_s = if fair {
            stats
                .for_shop(TO, shop, Api::ItemAdd)
                .and_then(|x| x.last_ok_ms)
                .map(|ms| (ms - start_ms) as f64 / 1000.0)
        } else {
            None
        };
        let at = sim_s.unwrap_or(ledger_s);
        if *n == s.small {
            ratios.push(at / fair_share_s);
        }
        println!(
            "    job {job:>3} {shop:<7} {n:>6} items: last write {} / ledger finished {ledger_s:>6.1} s{}",
            sim_s.map_or("-".to_string(), |v| format!("{v:>6.1} s")),
            if *n == s.small {
                format!("  x fair share ({fair_share_s:.1} s) {:.2}", at / fair_share_s)
            } else {
                String::new()
            }
        );
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "    small jobs x fair share: min {:.2} median {:.2} max {:.2}",
        ratios.first().copied().unwrap_or(0.0),
        ratios.get(ratios.len() / 2).copied().unwrap_or(0.0),
        ratios.last().copied().unwrap_or(0.0)
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("fairbench: run it with `scripts/bench fairbench`");
        return;
    }
    let shops: usize = arg("--shops", 10);
    let big: u64 = arg("--big", 20_000);
    let small: u64 = arg("--small", 1_000);
    let workers: usize = arg("--workers", 3);
    let chunk: usize = arg("--chunk", 50);
    let configs: String = arg("--configs", "fixed:400,sliding:200".to_string());
    let weight1: u32 = arg("--weight1", 1);
    let baseline = !std::env::args().any(|a| a == "--no-baseline");
    let sliding_gate = Some(arg("--sliding-gate", 0.0)).filter(|share| *share > 0.0);
    let sliding_burst: f64 = arg("--sliding-burst", 1.0);
    let sliding_band_ms = Some(arg("--sliding-band", u64::MAX)).filter(|ms| *ms != u64::MAX);
    let ledger = match arg("--ledger", "sqlite".to_string()).as_str() {
        "postgres" => Kind::Postgres,
        "sqlite" => Kind::Sqlite,
        other => {
            eprintln!("fairbench: --ledger takes sqlite or postgres, not `{other}`");
            std::process::exit(2);
        }
    };
    println!(
        "fairbench: {shops} shops, one {big}-item job first then {} jobs of {small}, {workers} workers, chunks of {chunk}",
        shops - 1
    );
    for c in configs.split(',') {
        let (kind, rate) = c.split_once(':').unwrap_or((c, "400"));
        let kind = match kind {
            "sliding" => LimitKind::Sliding,
            "bucket" => LimitKind::Bucket,
            _ => LimitKind::Fixed,
        };
        let setup = Setup {
            kind,
            rate: rate.parse().unwrap_or(400),
            shops,
            big,
            small,
            workers,
            chunk,
            weight1,
            sliding_gate,
            sliding_burst,
            sliding_band_ms,
            ledger,
            embedded: std::env::args().any(|a| a == "--embedded"),
        };
        if baseline {
            run(&setup, false).await;
        }
        run(&setup, true).await;
    }
}
