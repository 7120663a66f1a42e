//! An order walk keeps its place when its worker stops: a SIGTERM (a scale-in) ends the walk
//! at a page boundary with the pages read so far carried, and the next worker resumes there
//! instead of reading the slice again from page 1; a SIGKILL (the task's claim lost, nothing
//! returned) resumes from the place kept after each stored page. Counted by the simulator
//! against the same job run without a stop.

use crate::jobs_harness::{self, client_toml, ClientOpts, Harness};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use syncfleet::platform::{Api, Platform};
use syncfleet::sim::SimConfig;

const TB: Platform = Platform::Taobao;

fn sim_config() -> SimConfig {
    let mut cfg = SimConfig::demo().with_limit(TB, Api::OrderList, 5_000, 10_000_000);
    cfg.orders.per_shop = 6_000;
    cfg
}

/// The harness's client config with `order_list` slowed to 5 pages a second, so a walk is
/// still going when the worker is stopped and its task cannot end within the stop's grace.
fn slow_pages(h: &Harness) -> PathBuf {
    let text = format!(
        "{}\n[gates.\"taobao.order_list\"]\nrate = 5\nburst = 1\nconcurrency = 4\n",
        client_toml(&h.sim, &ClientOpts::default())
    );
    let path = h.dir.path().join("slow-pages.toml");
    std::fs::write(&path, text).expect("config");
    path
}

fn pages(h: &Harness) -> u64 {
    h.stats(TB, Api::OrderList).calls
}

fn enqueue(h: &Harness, config: &Path) -> i64 {
    h.enqueue_with(
        config,
        &[
            "orders",
            "--platform",
            "taobao",
            "--shop",
            "shop-1",
            "--since",
            "2026-01-01",
            "--until",
            "2026-01-09",
        ],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_order_walk_resumes_where_it_was() {
    let _serial = jobs_harness::serial().await;

    // The same job without a stop: how many pages it takes.
    let mut base = Harness::start(sim_config(), &ClientOpts::default()).await;
    let config = slow_pages(&base);
    let job = enqueue(&base, &config);
    base.spawn_worker_with(&config, 4, 2);
    let s = base.wait_job(job, Duration::from_secs(120)).await;
    assert_eq!(s.job.counts.failed, 0, "{:?}", s.job.counts);
    let baseline = pages(&base);
    base.wait_workers(Duration::from_secs(60));
    drop(base);

    // Stopped a third of the way in, then a new worker.
    stopped_a_third_in(baseline, "stopped", |h, first| {
        h.terminate_worker(first);
        assert!(h.wait_worker(first, Duration::from_secs(60)), "worker exit");
    })
    .await;
    // Killed a third of the way in: its tasks are claimed by the next worker once its
    // heartbeats stop, and each walk resumes after its last stored page.
    stopped_a_third_in(baseline, "killed", |h, first| h.kill_worker(first)).await;
}

/// The job on a fresh harness; its first worker is stopped with `stop` once a third of the
/// `baseline` pages are read, and a new worker finishes it: in all, the pages read must stay
/// within a page on the wire per walk of the `baseline`.
async fn stopped_a_third_in(baseline: u64, how: &str, stop: impl FnOnce(&mut Harness, u32)) {
    let mut h = Harness::start(sim_config(), &ClientOpts::default()).await;
    let config = slow_pages(&h);
    let job = enqueue(&h, &config);
    let first = h.spawn_worker_with(&config, 4, 30);
    let deadline = Instant::now() + Duration::from_secs(60);
    while pages(&h) < baseline / 3 {
        assert!(Instant::now() < deadline, "the walk never got going");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop(&mut h, first);
    let at_stop = pages(&h);
    h.spawn_worker_with(&config, 4, 2);
    let s = h.wait_job(job, Duration::from_secs(120)).await;
    assert_eq!(s.job.counts.failed, 0, "{how}: {:?}", s.job.counts);
    let total = pages(&h);
    println!("pages: baseline {baseline}, {how} at {at_stop}, in all {total}");
    // A page on the wire at the stop is read again at most once per walk in progress.
    assert!(
        total <= baseline + 4,
        "{how}: {total} pages read against {baseline} undisturbed: the walk started over"
    );
    h.wait_workers(Duration::from_secs(60));
}
