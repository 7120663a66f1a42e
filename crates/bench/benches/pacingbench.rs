//! Pacing: the day as a budget, over one whole compressed day.
//!
//! `scripts/bench pacingbench [--day 120] [--configs fixed:200,sliding:100]
//!     [--share 0.05] [--ask-every 4]`
//!
//! For each simulator configuration `kind:rate` (the item_add limit's window kind and calls
//! per second), the simulator and the client share a quota day of `--day` seconds, and
//! Taobao's app key counts a daily quota of `rate x day / 4` calls over all its APIs: a bulk
//! backlog at the gate's rate would spend it a quarter into the day ("by mid-morning").
//! A bulk listing (1688 -> Taobao, shop `bulk`) bigger than the quota is enqueued at the day's
//! start, 2 worker processes (work --concurrency 8); every `--ask-every` seconds a one-item
//! interactive listing for shop `vip`. Two runs per configuration, each on a fresh
//! simulator, Redis and ledger:
//! - **spend, no share** (baseline: as fast as the limit allows, today's behaviour);
//! - **even, `--share`** kept for interactive work.
//!
//! Printed, counted by the simulator: the app's calls at each quarter of the day against the
//! line of the day, when the quota ran out, what was left unused when the day ended, the
//! fewest calls left at any sample against the interactive reserve of the rest of the day,
//! the interactive items written within the day (of those asked) and the calls the platform
//! refused for the spent quota.

use syncfleet_testkit::jobs_harness;

use jobs_harness::{arg, client_toml, ClientOpts, Harness};
use std::time::{Duration, Instant};
use syncfleet::platform::{Api, Platform};
use syncfleet::sim::{LimitKind, SimConfig};
use syncfleet::time::QuotaDay;

const FROM: Platform = Platform::Alibaba;
const TO: Platform = Platform::Taobao;

struct Out {
    /// Calls counted at each quarter of the day (0.25, 0.5, 0.75, the end).
    quarters: [u64; 4],
    /// Share of the day gone when the quota ran out, if it did.
    spent_at: Option<f64>,
    /// The quota left when the day ended.
    unused: u64,
    /// The smallest (calls left - reserve of the rest of the day) of any sample.
    reserve_margin: f64,
    asked: u64,
    served: u64,
    rejected_quota: u64,
    rejected_limit: u64,
}

async fn run(
    kind: LimitKind,
    rate: u64,
    day_s: u32,
    pacing: &str,
    share: f64,
    ask_every: f64,
) -> Out {
    let quota = rate * u64::from(day_s) / 4;
    let sim = SimConfig::demo()
        .with_day_seconds(day_s)
        .with_app_daily(TO, quota)
        .with_limit(FROM, Api::ItemGet, 10 * rate, 100_000_000)
        .with_limit(TO, Api::ItemAdd, rate, 100_000_000)
        .with_limit_kind(TO, Api::ItemAdd, kind, None)
        .with_shops(TO, &["bulk", "vip"]);
    let opts = ClientOpts {
        rate: (10 * rate) as f64,
        chunk_size: 50,
        shops: vec![("bulk".into(), 1), ("vip".into(), 1)],
        ..ClientOpts::default()
    };
    let mut h = Harness::start(sim, &opts).await;
    let config = h.dir.path().join("pacing.toml");
    let text = format!(
        "{}\n[day]\nseconds = {day_s}\n\n[gates.\"alibaba.item_get\"]\nrate = {}\nburst = 20\n\n\
         [gates.\"taobao.item_add\"]\nrate = {rate}\nburst = 5\nmax_wait_ms = 2000\n\
         interactive_share = {share}\npacing = \"{pacing}\"\n",
        client_toml(&h.sim, &opts).replace(
            "[platforms.taobao]\n",
            &format!("[platforms.taobao]\ndaily_quota = {quota}\n")
        ),
        10 * rate
    );
    std::fs::write(&config, text).expect("config");
    let bulk_items = h.dir.path().join("bulk.txt");
    let backlog = quota + quota / 2;
    std::fs::write(
        &bulk_items,
        (1..=backlog).map(|i| format!("{i}\n")).collect::<String>(),
    )
    .expect("items");
    // Start at a day's start: the whole day is watched.
    let day = QuotaDay::of_seconds(day_s).expect("--day is 60 to 86400");
    let now = chrono::Utc::now();
    tokio::time::sleep((day.next_reset(now) - now).to_std().unwrap_or_default()).await;
    let day_index = day.index(chrono::Utc::now());
    let day_start = Instant::now();
    h.enqueue_with(
        &config,
        &[
            "listing",
            "--from",
            "alibaba",
            "--to",
            "taobao",
            "--to-shop",
            "bulk",
            "--items",
            bulk_items.to_str().expect("utf-8"),
        ],
    );
    let mut workers = Vec::new();
    for _ in 0..2 {
        workers.push(h.spawn_worker_with(&config, 8, 3600));
    }
    let day_len = Duration::from_secs(u64::from(day_s));
    let mut quarters = [0u64; 4];
    let mut spent_at = None;
    let mut reserve_margin = f64::INFINITY;
    let mut asked = 0u64;
    let mut next_ask = Duration::from_secs_f64(ask_every);
    let mut used = 0;
    // Sample until just before the day ends (the counters reset then).
    while day_start.elapsed() + Duration::from_millis(300) < day_len
        && day.index(chrono::Utc::now()) == day_index
    {
        let gone = day_start.elapsed();
        if gone >= next_ask {
            let file = h.dir.path().join(format!("vip-{asked}.txt"));
            std::fs::write(&file, format!("{}\n", 90_000 + asked)).expect("item");
            h.enqueue_with(
                &config,
                &[
                    "--lane",
                    "interactive",
                    "listing",
                    "--from",
                    "alibaba",
                    "--to",
                    "taobao",
                    "--to-shop",
                    "vip",
                    "--items",
                    file.to_str().expect("utf-8"),
                ],
            );
            asked += 1;
            next_ask += Duration::from_secs_f64(ask_every);
        }
        used = h.sim.stats().app(TO).map_or(0, |a| a.used_today);
        let f = day.elapsed_ms(chrono::Utc::now()) as f64 / (f64::from(day_s) * 1000.0);
        for (q, slot) in quarters.iter_mut().enumerate() {
            if f < (q + 1) as f64 / 4.0 {
                *slot = used;
            }
        }
        if spent_at.is_none() && used >= quota {
            spent_at = Some(f);
        }
        let margin = (quota as f64 - used as f64) - share * quota as f64 * (1.0 - f);
        reserve_margin = reserve_margin.min(margin);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    quarters[3] = used;
    let stats = h.sim.stats();
    let served = stats.for_shop(TO, "vip", Api::ItemAdd).map_or(0, |s| s.ok);
    let app = stats.app(TO).cloned().expect("the app's count");
    for pid in workers {
        h.kill_worker(pid);
    }
    Out {
        quarters,
        spent_at,
        unused: quota.saturating_sub(used),
        reserve_margin,
        asked,
        served,
        rejected_quota: app.rejected_app_quota,
        rejected_limit: h.stats(TO, Api::ItemAdd).rejected_limit,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("pacingbench: run it with `scripts/bench pacingbench`");
        return;
    }
    let day_s: u32 = arg("--day", 120);
    let share: f64 = arg("--share", 0.05);
    let ask_every: f64 = arg("--ask-every", 4.0);
    let configs: String = arg("--configs", "fixed:200,sliding:100".to_string());
    for c in configs.split(',') {
        let (kind, rate) = c.split_once(':').expect("--configs kind:rate,...");
        let kind = match kind {
            "sliding" => LimitKind::Sliding,
            "bucket" => LimitKind::Bucket,
            _ => LimitKind::Fixed,
        };
        let rate: u64 = rate.parse().expect("a rate");
        let quota = rate * u64::from(day_s) / 4;
        println!(
            "pacingbench: {kind} {rate}/s item_add, a day of {day_s} s, the app's quota {quota} calls, interactive asks every {ask_every} s"
        );
        for (pacing, s) in [("spend", 0.0), ("even", share)] {
            let o = run(kind, rate, day_s, pacing, s, ask_every).await;
            let line: Vec<String> = o
                .quarters
                .iter()
                .enumerate()
                .map(|(q, u)| format!("{:.3}", *u as f64 / (quota as f64 * (q + 1) as f64 / 4.0)))
                .collect();
            println!(
                "  {pacing:<5} share {s:.2}: used/line at each quarter {}  quota spent at {}  unused at the end {} ({:.2}%)  reserve margin {:.1} calls  interactive {}/{} written  refused for the quota {}  rejected by the limit {}",
                line.join(" "),
                o.spent_at.map_or("never".to_string(), |f| format!("{:.0}% of the day", f * 100.0)),
                o.unused,
                o.unused as f64 * 100.0 / quota as f64,
                o.reserve_margin,
                o.served,
                o.asked,
                o.rejected_quota,
                o.rejected_limit,
            );
        }
    }
}
