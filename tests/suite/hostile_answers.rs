//! Answers a platform can really give, against a worker process and the simulator: a
//! permanent error whose code is unmapped and whose words sound like a limit ("title length
//! exceeds 60") is the item's, not the gate's; an answer far larger than any real one, with
//! its length declared or not, is refused without being held, by a worker under a memory
//! limit, and the job goes on.

use crate::jobs_harness::{self, ClientOpts, Harness};
use std::time::Duration;
use syncfleet::config::Config;
use syncfleet::platform::{Api, Platform};
use syncfleet::sim::{DrillPatch, SimConfig};
use syncfleet::store::ItemStatus;
use syncfleet::throttle::Gates;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permanent_error_worded_like_a_limit_fails_its_item_and_leaves_the_gate_alone() {
    let _serial = jobs_harness::serial().await;
    let rounds = 2;
    let opts = ClientOpts {
        item_retry_rounds: rounds,
        ..ClientOpts::default()
    };
    let mut h = Harness::start(jobs_harness::listing_sim(), &opts).await;
    // Items 5 and 9 of the 1688 source answer "title length exceeds 60" with an unmapped code.
    h.sim
        .set_drill(DrillPatch {
            worded_limit_items: Some(vec![5, 9]),
            ..DrillPatch::default()
        })
        .expect("drill");
    let job = h.enqueue_listing(40);
    h.spawn_worker(8, 3);
    let status = h.wait_job(job, Duration::from_secs(120)).await;
    let c = &status.job.counts;
    assert_eq!((c.done, c.failed), (38, 2), "{c:?}");

    // Each bad item was asked once per round (the first run and `rounds` retries), never
    // again and again: before, it came back as "not now" about three times a second forever.
    let gets = h.stats(Platform::Alibaba, Api::ItemGet);
    assert!(
        gets.calls <= 38 + 2 * (u64::from(rounds) + 1),
        "item_get calls: {gets:?}"
    );
    let failed = h
        .store
        .items(job, Some(ItemStatus::Failed), 10)
        .await
        .expect("items");
    assert_eq!(failed.len(), 2);
    for item in &failed {
        let message = item.error_message.clone().unwrap_or_default();
        assert!(
            message.contains("answered like a limit") && message.contains("exceeds 60"),
            "{item:?}"
        );
        assert_eq!(item.error_class.map(|c| c.as_str()), Some("unknown"));
    }
    h.wait_workers(Duration::from_secs(60));

    // The gate was never told of a limit: its adaptive rate is still the configured one,
    // with no measured ceiling.
    let cfg = Config::load(&h.config).expect("config");
    let gates = Gates::redis(&cfg, &h.redis.url).await.expect("gates");
    let snap = gates.snapshot().await.expect("snapshot");
    let gate = snap
        .iter()
        .find(|g| g.platform == Platform::Alibaba && g.api == Api::ItemGet)
        .expect("the item_get gate");
    assert_eq!(gate.ceiling, None, "{gate:?}");
    assert_eq!(gate.adaptive_rate, gate.limits.rate, "{gate:?}");
}

/// Items of `job` in `status`.
async fn count(h: &Harness, job: i64, status: ItemStatus) -> usize {
    h.store
        .items(job, Some(status), 1_000)
        .await
        .expect("items")
        .len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_source_read_feeds_no_write_unless_the_job_allows_it() {
    let _serial = jobs_harness::serial().await;
    let opts = ClientOpts {
        item_retry_rounds: 1,
        ..ClientOpts::default()
    };
    let mut h = Harness::start(jobs_harness::listing_sim(), &opts).await;
    // A first job reads items 1..=10 fresh: the stale cache keeps them.
    let first = h.enqueue_listing(10);
    h.spawn_worker(8, 2);
    assert_eq!(
        h.wait_job(first, Duration::from_secs(120))
            .await
            .job
            .counts
            .done,
        10
    );
    h.wait_workers(Duration::from_secs(60));
    // Then the source goes bad for those items: "service busy" every time.
    h.sim
        .set_drill(DrillPatch {
            busy_items: Some((1..=10).collect()),
            ..DrillPatch::default()
        })
        .expect("drill");
    let items = h.item_file(10);
    let items = items.to_str().expect("utf-8 temp path");
    let adds_before = h.stats(Platform::Taobao, Api::ItemAdd).calls;

    // A relisting job that does not allow stale input writes nothing: each item is retried
    // for a fresh read, then fails.
    let strict = h.enqueue(&[
        "listing", "--from", "alibaba", "--to", "taobao", "--items", items, "--relist",
    ]);
    h.spawn_worker(8, 2);
    let status = h.wait_job(strict, Duration::from_secs(180)).await;
    assert_eq!(status.job.counts.failed, 10, "{:?}", status.job.counts);
    assert_eq!(
        h.stats(Platform::Taobao, Api::ItemAdd).calls,
        adds_before,
        "a write was made from a stale read"
    );
    let failed = h
        .store
        .items(strict, Some(ItemStatus::Failed), 1)
        .await
        .expect("items");
    let message = failed[0].error_message.clone().unwrap_or_default();
    assert!(message.contains("stale cache"), "{message}");
    h.wait_workers(Duration::from_secs(60));

    // Allowed (an hour), the same job writes from the stale reads, flagged.
    let lenient = h.enqueue(&[
        "listing",
        "--from",
        "alibaba",
        "--to",
        "taobao",
        "--items",
        items,
        "--relist",
        "--allow-stale-source",
        "3600",
    ]);
    h.spawn_worker(8, 2);
    let status = h.wait_job(lenient, Duration::from_secs(180)).await;
    assert_eq!(status.job.counts.stale, 10, "{:?}", status.job.counts);
    assert_eq!(count(&h, lenient, ItemStatus::Stale).await, 10);
    assert_eq!(
        h.stats(Platform::Taobao, Api::ItemAdd).calls,
        adds_before + 10
    );
}

/// An order list the platform cannot answer may be served from the stale cache, but a page
/// from it is what the list said earlier: the slice is not counted as read (it was `done`
/// before, so a scheduled run covered it and its watermark moved past changes it never saw).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_order_page_is_not_counted_as_read() {
    let _serial = jobs_harness::serial().await;
    let opts = ClientOpts {
        item_retry_rounds: 0,
        ..ClientOpts::default()
    };
    let mut h = Harness::start(SimConfig::demo(), &opts).await;
    let window = [
        "orders",
        "--platform",
        "taobao",
        "--shop",
        "s1",
        "--since",
        "2026-01-01",
        "--until",
        "2026-01-01T06:00:00Z",
    ];
    // A first job reads the window fresh: the stale cache keeps its pages.
    let first = h.enqueue(&window);
    h.spawn_worker(4, 2);
    let status = h.wait_job(first, Duration::from_secs(120)).await;
    assert!(status.job.counts.done > 0, "{:?}", status.job.counts);
    h.wait_workers(Duration::from_secs(60));
    // Then the order list is down: every page can only come from the cache.
    h.sim
        .set_drill(DrillPatch {
            outage: Some(true),
            ..DrillPatch::default()
        })
        .expect("drill");
    let again = h.enqueue(&window);
    let config = h.config.clone();
    h.spawn_worker_args(
        &config,
        4,
        2,
        &[],
        &[("RUST_LOG", "warn,syncfleet::stale=info")],
    );
    let status = h.wait_job(again, Duration::from_secs(180)).await;
    assert_eq!(status.job.counts.done, 0, "{:?}", status.job.counts);
    assert!(status.job.counts.failed > 0, "{:?}", status.job.counts);
    h.wait_workers(Duration::from_secs(60));
    let logs = h.worker_logs();
    assert!(
        logs.lines()
            .any(|l| l.contains("syncfleet::stale") && l.contains("order_list")),
        "the pages came from the cache and were refused as reads: {logs}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_answer_is_refused_unread_and_the_job_goes_on() {
    let _serial = jobs_harness::serial().await;
    let opts = ClientOpts {
        item_retry_rounds: 1,
        ..ClientOpts::default()
    };
    // 256 MiB answers to items 3 and 7, with the length declared and (a second run) chunked
    // without one: a worker that held one would show it in its peak resident memory.
    for declared in [true, false] {
        let mut h = Harness::start(jobs_harness::listing_sim(), &opts).await;
        h.sim
            .set_drill(DrillPatch {
                huge_answer_items: Some(vec![3, 7]),
                huge_answer_bytes: Some(256 << 20),
                huge_answer_declared: Some(declared),
                ..DrillPatch::default()
            })
            .expect("drill");
        let job = h.enqueue_listing(30);
        // Idle exit after 8 s: still up when the job is seen done, to read its peak.
        let pid = h.spawn_worker(4, 8);
        let status = h.wait_job(job, Duration::from_secs(180)).await;
        let peak = Harness::peak_rss_mb(pid);
        let c = &status.job.counts;
        assert_eq!((c.done, c.failed), (28, 2), "declared {declared}: {c:?}");
        let failed = h
            .store
            .items(job, Some(ItemStatus::Failed), 10)
            .await
            .expect("items");
        for f in &failed {
            let message = f.error_message.clone().unwrap_or_default();
            assert!(
                message.contains("over the limit") || message.contains("body_too_large"),
                "declared {declared}: {f:?}"
            );
        }
        let peak = peak.expect("the worker's peak memory, read while it idled");
        println!("declared {declared}: worker peak resident {peak} MiB");
        assert!(
            peak < 128,
            "declared {declared}: the worker peaked at {peak} MiB"
        );
        let exits = h.wait_workers(Duration::from_secs(60));
        assert!(
            exits.iter().all(|e| e.contains("exit status: 0")),
            "a worker died: {exits:?}"
        );
    }
}
