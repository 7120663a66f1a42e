//! Continuous sync: a shop's orders kept in sync by a schedule, with the simulator's live
//! store changing orders all the while (docs/design.md, "Continuous sync").
//!
//! Two worker processes look at the schedule, one is killed in the middle and another
//! started: every tick is decided once (no duplicate run, no missed tick), the covered
//! windows are contiguous (the ledger's own query finds no gap), and every order whose last
//! change is before the watermark is in the ledger at that state, counted against the
//! simulator's own record of its live orders; and each run's finish is posted to the
//! completion hook once, signed. On both ledgers.

use crate::jobs_harness::sync::hook_receiver;
use crate::jobs_harness::{self, ClientOpts, Harness};
use crate::support::ledger::Kind;
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};
use syncfleet::platform::Platform;
use syncfleet::sim::{LiveOrders, SimConfig};
use syncfleet::store::RunOutcome;

const TB: Platform = Platform::Taobao;

pub(crate) fn live_sim() -> SimConfig {
    let mut cfg = SimConfig::demo();
    cfg.orders.live = LiveOrders {
        new_per_min: 120.0,
        pay_after_s: 3,
        ship_after_s: 4,
        sign_after_s: 5,
        close_share: 0.1,
        refund_share: 0.1,
        ..LiveOrders::default()
    };
    cfg
}

pub(crate) async fn wait_until<F: std::future::Future<Output = bool>>(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> F,
) {
    let deadline = Instant::now() + timeout;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub(crate) async fn started_runs(h: &Harness, id: i64) -> usize {
    h.store
        .schedule_runs(id, 10_000)
        .await
        .expect("runs")
        .iter()
        .filter(|r| r.job_id.is_some())
        .count()
}

async fn scheduled_sync_through_a_killed_worker(kind: Kind) {
    let mut h = Harness::start_on(kind, live_sim(), &ClientOpts::default()).await;
    let (hook_url, hooks_got) = hook_receiver("hook-key", 0).await;
    h.add_hooks(&hook_url, "hook-key", "");
    let id = h.add_order_schedule("taobao", "2s", "1s", "2s").await;

    let first = h.spawn_worker(4, 600);
    h.spawn_worker(4, 600);
    wait_until("five runs", Duration::from_secs(90), || async {
        started_runs(&h, id).await >= 5
    })
    .await;
    // Killed in the middle of whatever it was doing; a new worker comes up.
    h.kill_worker(first);
    h.spawn_worker(4, 600);
    let at_kill = started_runs(&h, id).await;
    wait_until("five more runs", Duration::from_secs(90), || async {
        started_runs(&h, id).await >= at_kill + 5
    })
    .await;
    h.schedule_action("pause", id);
    // Every started run settles (the killed worker's tasks are claimed by the others).
    h.wait_runs_settled(id, Duration::from_secs(120)).await;

    let runs = h.store.schedule_runs(id, 10_000).await.expect("runs");
    let view = &h.store.schedules().await.expect("schedules")[0];
    println!(
        "{kind:?}: {} ticks, outcomes {:?}, watermark {:?}",
        runs.len(),
        view.outcomes,
        view.watermark
    );
    // Each tick once: one job per started run, no job twice, ticks on the 2 s grid.
    let jobs: HashSet<i64> = runs.iter().filter_map(|r| r.job_id).collect();
    assert_eq!(
        jobs.len(),
        runs.iter().filter(|r| r.job_id.is_some()).count()
    );
    let ticks: Vec<i64> = runs.iter().map(|r| r.tick_ms).collect();
    assert!(
        ticks.windows(2).all(|w| (w[0] - w[1]) % 2000 == 0),
        "{ticks:?}"
    );
    assert!(
        !runs.iter().any(|r| r.outcome == RunOutcome::Missed),
        "a tick was missed with a worker up: {runs:?}"
    );
    assert!(
        !runs.iter().any(|r| r.outcome == RunOutcome::Failed),
        "{runs:?}"
    );
    // Each run's finish posted once, signed: one delivery per job in the ledger, delivered,
    // and the receiver saw each delivery id (a repeat would carry the same id).
    wait_until(
        "every finish delivered",
        Duration::from_secs(60),
        || async {
            let d = h.store.hook_deliveries(10_000).await.expect("deliveries");
            d.len() >= jobs.len() && d.iter().all(|x| x.state == "delivered")
        },
    )
    .await;
    let deliveries = h.store.hook_deliveries(10_000).await.expect("deliveries");
    let hooked: HashSet<i64> = deliveries.iter().map(|d| d.delivery.job_id).collect();
    assert_eq!(hooked, jobs, "one delivery per finished run");
    assert_eq!(deliveries.len(), jobs.len());
    let posts = hooks_got.lock().unwrap().clone();
    let mut per_id: HashMap<String, usize> = HashMap::new();
    for (id, signed) in &posts {
        assert!(signed, "delivery {id} carried a wrong signature");
        *per_id.entry(id.clone()).or_default() += 1;
    }
    let ids: HashSet<String> = deliveries
        .iter()
        .map(|d| d.delivery.delivery_id())
        .collect();
    assert_eq!(per_id.keys().cloned().collect::<HashSet<_>>(), ids);
    let repeats = posts.len() - per_id.len();
    println!(
        "{kind:?}: {} finishes, {} posts, {repeats} repeated",
        ids.len(),
        posts.len()
    );
    assert!(repeats <= 1, "{repeats} deliveries sent twice");
    // Contiguous coverage, by the ledger's own query.
    let gaps = h.store.coverage_gaps(TB, "s1").await.expect("gaps");
    assert!(gaps.is_empty(), "coverage gaps: {gaps:?}");
    // Every order whose last change is before the watermark is in the ledger at that state
    // (an order changed since is beyond the coverage: a later run brings it).
    let watermark = view.watermark.expect("a watermark");
    h.assert_caught_up(TB, watermark, 6).await;

    // Retention (the defaults, the clock moved on): after 15 days the finished scheduled
    // jobs go with their items, their runs stay; after 31 days the runs and the delivered
    // hook deliveries go too; the orders stay, and so does the watermark.
    let retention = syncfleet::config::RetentionConfig::default();
    let now = chrono::Utc::now();
    let early = h
        .store
        .prune(&retention, now + chrono::Duration::days(5))
        .await
        .expect("prune");
    assert_eq!(early.scheduled_jobs + early.schedule_runs, 0, "{early:?}");
    let p = h
        .store
        .prune(&retention, now + chrono::Duration::days(15))
        .await
        .expect("prune");
    println!("{kind:?}: pruned after 15 days: {p:?}");
    assert_eq!(p.scheduled_jobs, jobs.len() as u64, "{p:?}");
    assert_eq!(p.schedule_runs, 0, "{p:?}");
    for job in &jobs {
        assert!(h.store.job_status(*job).await.is_err(), "job {job} kept");
    }
    let p = h
        .store
        .prune(&retention, now + chrono::Duration::days(31))
        .await
        .expect("prune");
    println!("{kind:?}: pruned after 31 days: {p:?}");
    assert_eq!(p.schedule_runs, runs.len() as u64, "{p:?}");
    assert_eq!(p.hook_deliveries, jobs.len() as u64, "{p:?}");
    h.assert_caught_up(TB, watermark, 6).await;
    assert_eq!(
        h.store.schedules().await.expect("schedules")[0].watermark,
        Some(watermark)
    );
}

// Four threads: each leg runs blocking commands (the CLI) on one while its simulator serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_tick_runs_once_and_coverage_is_contiguous_through_a_killed_worker() {
    let _serial = jobs_harness::serial().await;
    // The two ledgers side by side: each leg waits on its schedule's clock, not the CPU.
    tokio::join!(
        scheduled_sync_through_a_killed_worker(Kind::Sqlite),
        scheduled_sync_through_a_killed_worker(Kind::Postgres)
    );
}

/// A run reads up to now and vouches only for up to now - lag: with a lag of an hour (every
/// change of the live store is younger) the runs still bring each order to its state, and the
/// watermark stays an hour behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_reads_past_its_lag_and_the_watermark_stays_behind_it() {
    let _serial = jobs_harness::serial().await;
    let mut h = Harness::start(live_sim(), &ClientOpts::default()).await;
    let begun = chrono::Utc::now();
    let since = (begun - chrono::Duration::hours(2)).to_rfc3339();
    let out = h.run(&[
        "schedule",
        "add",
        "orders",
        "--platform",
        "taobao",
        "--shop",
        "s1",
        "--every",
        "2s",
        "--lag",
        "1h",
        "--overlap",
        "2s",
        "--since",
        &since,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = h.store.schedules().await.expect("schedules")[0].schedule.id;
    let config = h.config.clone();
    h.spawn_worker_with(&config, 4, 600);
    wait_until(
        "every order at its state of 10 s ago",
        Duration::from_secs(90),
        || async {
            let before = chrono::Utc::now() - chrono::Duration::seconds(10);
            let (checked, behind) = h.orders_behind(TB, Some(begun), before).await;
            checked >= 10 && behind.is_empty()
        },
    )
    .await;
    h.schedule_action("pause", id);
    h.wait_runs_settled(id, Duration::from_secs(120)).await;
    let view = &h.store.schedules().await.expect("schedules")[0];
    let watermark = view.watermark.expect("a watermark");
    assert!(
        watermark <= chrono::Utc::now() - chrono::Duration::minutes(59),
        "the watermark {watermark} vouches for what the lag leaves open"
    );
    assert!(h
        .store
        .coverage_gaps(TB, "s1")
        .await
        .expect("gaps")
        .is_empty());
}

/// The platform's clock 5 minutes behind this host's, more than lag + overlap: windows are
/// decided on the platform's clock as its answers' `Date` shows it, so the watermark never
/// passes what the platform has stamped and no change is skipped. On the host's clock the
/// first run vouched for 5 minutes ahead, and each run after it read from there on, never the
/// orders changing now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_platform_clock_behind_the_hosts_skips_no_change() {
    let _serial = jobs_harness::serial().await;
    let sim = live_sim().with_clock_offset(-300);
    let mut h = Harness::start(sim, &ClientOpts::default()).await;
    // The worker has heard from the platform (a one-off order job) before the schedule.
    run_one_job(&mut h).await;
    // No --since: where the first window starts is the clocks' to decide.
    let id = h
        .add_order_schedule_since("taobao", "s1", "2s", "2s", "10s", None)
        .await;
    let begun = h.sim.now();
    wait_until(
        "every order changed since the schedule began at its state of 15 s ago",
        Duration::from_secs(90),
        || async {
            let before = h.sim.now() - chrono::Duration::seconds(15);
            let (checked, behind) = h.orders_behind(TB, Some(begun), before).await;
            checked >= 10 && behind.is_empty()
        },
    )
    .await;
    h.schedule_action("pause", id);
    h.wait_runs_settled(id, Duration::from_secs(120)).await;
    let watermark = h.store.schedules().await.expect("schedules")[0]
        .watermark
        .expect("a watermark");
    assert!(
        watermark <= h.sim.now(),
        "the watermark {watermark} is ahead of the platform's clock {}",
        h.sim.now()
    );
    assert!(h
        .store
        .coverage_gaps(TB, "s1")
        .await
        .expect("gaps")
        .is_empty());
}

/// A shop 30 hours behind (a week-long pause, runs that kept failing) catches up in runs of
/// at most `[jobs] sync_catch_up_max_s` (6 hours by default), each moving the watermark on,
/// instead of one run re-reading everything since the old watermark (60 slices here; the
/// first run read all 30 hours before the cap). Coverage stays contiguous.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shop_far_behind_catches_up_in_bounded_runs() {
    let _serial = jobs_harness::serial().await;
    let mut h = Harness::start(live_sim(), &ClientOpts::default()).await;
    let since = (chrono::Utc::now() - chrono::Duration::hours(30)).to_rfc3339();
    let out = h.run(&[
        "schedule",
        "add",
        "orders",
        "--platform",
        "taobao",
        "--shop",
        "s1",
        "--every",
        "1s",
        "--lag",
        "30s",
        "--overlap",
        "2s",
        "--since",
        &since,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = h.store.schedules().await.expect("schedules")[0].schedule.id;
    let config = h.config.clone();
    h.spawn_worker_with(&config, 4, 600);
    wait_until(
        "the watermark within a minute of now",
        Duration::from_secs(120),
        || async {
            let view = &h.store.schedules().await.expect("schedules")[0];
            view.watermark
                .is_some_and(|w| w > chrono::Utc::now() - chrono::Duration::minutes(2))
        },
    )
    .await;
    h.schedule_action("pause", id);
    h.wait_runs_settled(id, Duration::from_secs(120)).await;
    let runs = h.store.schedule_runs(id, 10_000).await.expect("runs");
    let windows: Vec<(i64, i64)> = runs.iter().filter_map(|r| r.window_ms).collect();
    assert!(windows.len() >= 5, "{windows:?}");
    let six_hours_and_overlap = 6 * 3_600_000 + 2_000;
    assert!(
        windows
            .iter()
            .all(|(from, to)| to - from <= six_hours_and_overlap),
        "every run within the cap: {windows:?}"
    );
    assert!(h
        .store
        .coverage_gaps(TB, "s1")
        .await
        .expect("gaps")
        .is_empty());
}

/// A window of the past walked page by page (5 orders a page, 4 pages a second) while the
/// live store changes a quarter of its orders: each change moves an order out of the window
/// and the ones behind it a place forward. Walked from the last page back, no order that
/// stayed in the window is skipped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_walk_skips_nothing_while_orders_change_under_it() {
    let _serial = jobs_harness::serial().await;
    let mut sim = SimConfig::demo();
    sim.orders.live = LiveOrders {
        new_per_min: 600.0,
        pay_after_s: 20,
        ship_after_s: 20,
        sign_after_s: 20,
        ..LiveOrders::default()
    };
    let opts = ClientOpts {
        order_page_size: Some(5),
        ..ClientOpts::default()
    };
    let mut h = Harness::start(sim, &opts).await;
    let start = chrono::Utc::now();
    let config = h.dir.path().join("slow-pages.toml");
    std::fs::write(
        &config,
        format!(
            "{}\n[gates.\"taobao.order_list\"]\nrate = 4\nburst = 1\nconcurrency = 2\n",
            jobs_harness::client_toml(&h.sim, &opts)
        ),
    )
    .expect("config");
    // Let orders gather and start changing; the window ends in the past.
    tokio::time::sleep(Duration::from_secs(25)).await;
    // Whole seconds: the platform's window ends to the second.
    let until =
        chrono::DateTime::from_timestamp(chrono::Utc::now().timestamp() - 2, 0).expect("a time");
    let job = h.enqueue_with(
        &config,
        &[
            "orders",
            "--platform",
            "taobao",
            "--shop",
            "s1",
            "--since",
            &(start - chrono::Duration::seconds(1)).to_rfc3339(),
            "--until",
            &until.to_rfc3339(),
        ],
    );
    let app_key = h.sim.config().apps[0].app_key.clone();
    let at_start = h.sim.live_orders(TB, &app_key, "", chrono::Utc::now());
    h.spawn_worker_with(&config, 2, 3);
    let s = h.wait_job(job, Duration::from_secs(180)).await;
    assert_eq!(s.job.counts.failed, 0, "{:?}", s.job.counts);
    let at_end = h.sim.live_orders(TB, &app_key, "", chrono::Utc::now());
    let in_window =
        |o: &syncfleet::sim::LiveOrder| o.changes.last().is_some_and(|(t, _)| *t < until);
    let before: HashSet<u64> = at_start
        .iter()
        .filter(|o| in_window(o))
        .map(|o| o.id)
        .collect();
    let stayed: Vec<_> = at_end
        .iter()
        .filter(|o| in_window(o) && before.contains(&o.id))
        .collect();
    let moved = before.len() - stayed.len();
    println!(
        "{} orders in the window at the start, {moved} changed during the walk, {} pages read",
        before.len(),
        h.stats(TB, syncfleet::platform::Api::OrderList).calls
    );
    for item in h.store.items(job, None, 10).await.expect("items") {
        println!("slice {}: {:?} {:?}", item.key, item.status, item.result);
    }
    assert!(moved >= 3, "only {moved} orders changed during the walk");
    for o in stayed {
        let (at, status) = o.changes.last().expect("a change");
        let stored = h
            .store
            .get_order(TB, &o.id.to_string())
            .await
            .expect("read")
            .unwrap_or_else(|| panic!("order {} stayed in the window and was skipped", o.id));
        assert_eq!((stored.order.modified, &stored.order.status), (*at, status));
    }
    h.wait_workers(Duration::from_secs(60));
}

/// Enqueue a one-day order job of shop s1, start a worker (it stays up 600 s idle) and wait
/// (bounded) until the job finished; returns the job.
async fn run_one_job(h: &mut Harness) -> i64 {
    let job = h.enqueue(&[
        "orders",
        "--platform",
        "taobao",
        "--shop",
        "s1",
        "--since",
        "2026-01-01",
        "--until",
        "2026-01-02",
    ]);
    let config = h.config.clone();
    h.spawn_worker_with(&config, 2, 600);
    h.wait_job(job, Duration::from_secs(60)).await;
    job
}

/// Run a one-day order job of shop s1 on a worker, wait (bounded) until the hook took its
/// finish, and return the job and its deliveries.
async fn finish_one_job(h: &mut Harness) -> (i64, Vec<syncfleet::store::HookRecord>) {
    let job = run_one_job(h).await;
    wait_until("the delivery taken", Duration::from_secs(60), || async {
        h.store
            .hook_deliveries(10)
            .await
            .expect("deliveries")
            .iter()
            .any(|d| d.delivery.job_id == job && d.state == "delivered")
    })
    .await;
    let all = h.store.hook_deliveries(10).await.expect("deliveries");
    (
        job,
        all.into_iter()
            .filter(|d| d.delivery.job_id == job)
            .collect(),
    )
}

/// A receiver that answers 503 twice gets the same delivery (same id, same signature) again
/// after a backoff, and the ledger records it delivered on the third attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_hook_receiver_gets_the_finish_again_until_it_takes_it() {
    let _serial = jobs_harness::serial().await;
    let mut h = Harness::start(live_sim(), &ClientOpts::default()).await;
    let (hook_url, got) = hook_receiver("k", 2).await;
    h.add_hooks(&hook_url, "k", "backoff_base_ms = 100\n");
    // Hooks count finishes from when they first run: mark that before the job.
    h.store.fill_hook_outbox().await.expect("hooks start");
    let (_, mine) = finish_one_job(&mut h).await;
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0].delivery.attempts, 3, "{mine:?}");
    let posts = got.lock().unwrap().clone();
    assert_eq!(posts.len(), 3, "{posts:?}");
    assert!(posts
        .iter()
        .all(|(id, signed)| *signed && *id == mine[0].delivery.delivery_id()));
}

/// A delivery given up after its attempts (the receiver was down) is sent again by
/// `syncfleet hooks resend`, with its id, once the receiver is back: no finish is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_given_up_hook_delivery_is_sent_again_by_resend() {
    let _serial = jobs_harness::serial().await;
    let mut h = Harness::start(live_sim(), &ClientOpts::default()).await;
    let (hook_url, got) = hook_receiver("k", 2).await;
    h.add_hooks(&hook_url, "k", "backoff_base_ms = 100\nattempts = 2\n");
    h.store.fill_hook_outbox().await.expect("hooks start");
    let job = run_one_job(&mut h).await;
    let state = |h: &Harness| {
        let store = h.store.clone();
        async move {
            store
                .hook_deliveries(10)
                .await
                .expect("deliveries")
                .into_iter()
                .find(|d| d.delivery.job_id == job)
                .map(|d| d.state)
        }
    };
    wait_until("the delivery given up", Duration::from_secs(60), || async {
        state(&h).await.as_deref() == Some("failed")
    })
    .await;
    let out = h.run(&["hooks", "resend", "--job", &job.to_string()]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!(
            "1 failed delivery(ies) of job {job} pending again"
        )),
        "{out:?}"
    );
    wait_until("the delivery taken", Duration::from_secs(60), || async {
        state(&h).await.as_deref() == Some("delivered")
    })
    .await;
    let posts = got.lock().unwrap().clone();
    assert_eq!(posts.len(), 3, "{posts:?}");
    assert!(posts
        .iter()
        .all(|(id, signed)| *signed && *id == posts[0].0));
}

/// A hook command that fails once is run again after a backoff, gets the finish's JSON on its
/// standard input and the delivery id in its environment, and is not run after it exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_command_runs_once_per_finish_after_a_failed_attempt() {
    let _serial = jobs_harness::serial().await;
    let mut h = Harness::start(live_sim(), &ClientOpts::default()).await;
    let out = h.dir.path().join("hook-out");
    std::fs::create_dir_all(&out).expect("dir");
    // First run: leaves a mark and fails; later runs: record the delivery id and the body.
    let script = format!(
        "d='{}'; env > \"$d/env\"; if [ ! -e \"$d/failed\" ]; then : > \"$d/failed\"; exit 3; fi; \
         echo \"$SYNCFLEET_DELIVERY\" >> \"$d/ids\"; cat >> \"$d/bodies\"; echo >> \"$d/bodies\"",
        out.display()
    );
    let text = std::fs::read_to_string(&h.config).expect("config");
    let argv = serde_json::to_string(&["sh", "-c", &script]).expect("json");
    std::fs::write(
        &h.config,
        format!("{text}\n[hooks]\ncommand = {argv}\nbackoff_base_ms = 100\n"),
    )
    .expect("config");
    h.store.fill_hook_outbox().await.expect("hooks start");
    let (job, mine) = finish_one_job(&mut h).await;
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0].delivery.attempts, 2, "{mine:?}");
    let ids = std::fs::read_to_string(out.join("ids")).expect("ids");
    assert_eq!(
        ids.lines().collect::<Vec<_>>(),
        [mine[0].delivery.delivery_id()]
    );
    let bodies = std::fs::read_to_string(out.join("bodies")).expect("bodies");
    let body: serde_json::Value =
        serde_json::from_str(bodies.trim()).expect("one JSON body on stdin");
    assert_eq!(body["job"], job);
    assert_eq!(body["delivery"], mine[0].delivery.delivery_id());
    assert_eq!(body["shop"], "taobao/s1");
    // The command's environment holds none of the worker's secrets (the harness gives the
    // worker every app secret and session), only what it is documented to get.
    let env = std::fs::read_to_string(out.join("env")).expect("env");
    let names: Vec<&str> = env.lines().filter_map(|l| l.split('=').next()).collect();
    assert!(names.contains(&"SYNCFLEET_DELIVERY"), "{env}");
    for name in &names {
        assert!(
            matches!(
                *name,
                "PATH"
                    | "HOME"
                    | "LANG"
                    | "LC_ALL"
                    | "TZ"
                    | "SYNCFLEET_DELIVERY"
                    | "PWD"
                    | "SHLVL"
                    | "_"
            ),
            "the hook command got `{name}`: {env}"
        );
    }
}

/// Without Redis: one process runs the embedded queue and gates, and the schedules with them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedded_worker_runs_the_schedules_too() {
    let _serial = jobs_harness::serial().await;
    let mut h = Harness::start(live_sim(), &ClientOpts::default()).await;
    h.use_embedded();
    let id = h.add_order_schedule("taobao", "2s", "1s", "2s").await;
    let config = h.config.clone();
    h.spawn_worker_with(&config, 4, 600);
    // Long enough for the first orders to reach their last state (about 12 s of life).
    wait_until("eight runs", Duration::from_secs(120), || async {
        started_runs(&h, id).await >= 8
    })
    .await;
    h.schedule_action("pause", id);
    h.wait_runs_settled(id, Duration::from_secs(120)).await;
    let view = &h.store.schedules().await.expect("schedules")[0];
    assert!(view
        .outcomes
        .iter()
        .all(|(o, _)| matches!(o, RunOutcome::Covered | RunOutcome::Skipped)));
    assert!(h
        .store
        .coverage_gaps(TB, "s1")
        .await
        .expect("gaps")
        .is_empty());
    h.assert_caught_up(TB, view.watermark.expect("a watermark"), 3)
        .await;
}
