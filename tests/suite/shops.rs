//! One app, many shops, against worker processes, Redis and the simulator (which knows each
//! shop's session and counts its calls): a shop whose session is refused is paused alone
//! while the others go on, and `shop resume` lets it finish; a small job enqueued after a
//! big one for another shop finishes in its share of the time, not after the big one.

use crate::jobs_harness::{self, ClientOpts, Harness};
use std::time::{Duration, Instant};
use syncfleet::platform::{Api, Platform};
use syncfleet::sim::DrillPatch;
use syncfleet::store::JobState;

const TO: Platform = Platform::Taobao;

fn shop_opts(names: &[(&str, u32)], rate: f64) -> ClientOpts {
    ClientOpts {
        rate,
        burst: 1.0,
        chunk_size: 20,
        shops: names.iter().map(|(n, w)| (n.to_string(), *w)).collect(),
        ..ClientOpts::default()
    }
}

/// Successful item_add calls the simulator counted for `shop`, and when the latest landed.
fn shop_adds(h: &Harness, shop: &str) -> (u64, Option<i64>, u64) {
    let stats = h.sim.stats();
    let s = stats.for_shop(TO, shop, Api::ItemAdd);
    (
        s.map_or(0, |s| s.ok),
        s.and_then(|s| s.last_ok_ms),
        s.map_or(0, |s| s.refused),
    )
}

fn enqueue_for(h: &Harness, shop: &str, n: u64) -> i64 {
    let items = h.item_file(n);
    h.enqueue(&[
        "listing",
        "--from",
        "alibaba",
        "--to",
        "taobao",
        "--to-shop",
        shop,
        "--items",
        items.to_str().expect("utf-8 path"),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_session_pauses_its_shop_alone_and_resume_lets_it_finish() {
    let _serial = jobs_harness::serial().await;
    let sim = jobs_harness::listing_sim().with_shops(TO, &["acme", "beta"]);
    let mut h = Harness::start(sim, &shop_opts(&[("acme", 1), ("beta", 1)], 400.0)).await;
    h.sim
        .set_drill(DrillPatch {
            refused_shops: Some(vec!["acme".into()]),
            ..DrillPatch::default()
        })
        .expect("drill");
    let acme = enqueue_for(&h, "acme", 200);
    let beta = enqueue_for(&h, "beta", 200);
    h.spawn_worker(4, 60);

    // beta finishes while acme is refused.
    let done = h.wait_job(beta, Duration::from_secs(120)).await;
    assert_eq!(done.job.counts.done, 200, "{:?}", done.job.counts);
    let (beta_ok, _, beta_refused) = shop_adds(&h, "beta");
    assert_eq!((beta_ok, beta_refused), (200, 0));
    let paused = h.store.shop_pauses().await.expect("pauses");
    assert_eq!(paused.len(), 1, "{paused:?}");
    assert_eq!((paused[0].platform, paused[0].shop.as_str()), (TO, "acme"));
    let a = h.store.job_status(acme).await.expect("status");
    assert_eq!(a.job.state, JobState::Running);
    assert_eq!(
        a.job.counts.pending, 200,
        "acme's items wait: {:?}",
        a.job.counts
    );
    let (acme_ok, _, refused) = shop_adds(&h, "acme");
    assert_eq!(acme_ok, 0);
    // The calls made before the pause reached every worker: at most one task's items per
    // task slot, and nothing after.
    assert!(refused <= 4 * 16, "{refused} refused calls for acme");
    let status = h.run(&["status", &acme.to_string()]);
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("PAUSED"), "{text}");
    assert!(text.contains("taobao/acme, bulk"), "{text}");
    // The job list names each job's shop and lane.
    let all = h.run(&["status"]);
    let all = String::from_utf8_lossy(&all.stdout);
    for shop in ["acme", "beta"] {
        assert!(
            all.lines()
                .any(|l| l.contains(&format!("taobao/{shop}")) && l.contains("bulk")),
            "{all}"
        );
    }
    let listed = h.run(&["shop", "list"]);
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(text.contains("shop acme on taobao, PAUSED since"), "{text}");
    // The dashboard shows the paused shop.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let mut dashboard = h
        .command_with(
            &h.config,
            &["dashboard", "--listen", &format!("127.0.0.1:{port}")],
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start the dashboard");
    let url = format!("http://127.0.0.1:{port}/api/state");
    let deadline = Instant::now() + Duration::from_secs(60);
    let state: serde_json::Value = loop {
        let got = async { reqwest::get(&url).await.ok()?.json().await.ok() }.await;
        if let Some(v) = got {
            break v;
        }
        assert!(Instant::now() < deadline, "the dashboard never answered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let _ = dashboard.kill();
    let _ = dashboard.wait();
    let shown = &state["paused_shops"];
    assert_eq!(shown.as_array().map(Vec::len), Some(1), "{state}");
    assert_eq!(shown[0]["shop"], "acme", "{state}");
    assert_eq!(shown[0]["platform"], "taobao", "{state}");
    // ... and each job's shop and lane.
    let jobs = state["jobs"].as_array().expect("jobs");
    for (id, shop) in [(acme, "taobao/acme"), (beta, "taobao/beta")] {
        let job = jobs
            .iter()
            .find(|j| j["id"] == id)
            .unwrap_or_else(|| panic!("job {id}: {state}"));
        assert_eq!(
            (job["shop"].as_str(), job["lane"].as_str()),
            (Some(shop), Some("bulk"))
        );
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(shop_adds(&h, "acme").2, refused, "no call while paused");

    // The seller authorises the app again; the operator resumes the shop.
    h.sim.clear_drills();
    h.run(&["shop", "resume", "acme"]);
    let done = h.wait_job(acme, Duration::from_secs(120)).await;
    assert_eq!(done.job.counts.done, 200, "{:?}", done.job.counts);
    assert_eq!(shop_adds(&h, "acme").0, 200);
    assert!(h.store.shop_pauses().await.expect("pauses").is_empty());

    // No session in the ledger or the logs.
    let ledger = std::fs::read(h.dir.path().join("ledger.db")).expect("ledger file");
    let logs = h.worker_logs();
    for app in &h.sim.config().apps {
        for session in app.shops.values() {
            let s = session.expose();
            assert!(!logs.contains(s), "a session in the worker logs");
            assert!(
                !ledger.windows(s.len()).any(|w| w == s.as_bytes()),
                "a session in the ledger"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_job_after_a_big_one_finishes_in_its_share_not_after_it() {
    let _serial = jobs_harness::serial().await;
    let sim = jobs_harness::listing_sim().with_shops(TO, &["big", "small"]);
    let rate = 100.0;
    let mut h = Harness::start(sim, &shop_opts(&[("big", 1), ("small", 1)], rate)).await;
    let big = enqueue_for(&h, "big", 800);
    let small = enqueue_for(&h, "small", 80);
    let started = Instant::now();
    h.spawn_worker(4, 60);
    h.wait_job(small, Duration::from_secs(120)).await;
    h.wait_job(big, Duration::from_secs(120)).await;
    // Both measured from the first listing the platform took, so the worker's start-up (which
    // a loaded machine stretches) counts in neither.
    let stats = h.sim.stats();
    let first_ok = |shop| {
        stats
            .for_shop(TO, shop, Api::ItemAdd)
            .and_then(|s| s.first_ok_ms)
            .expect("calls of the shop")
    };
    let start_ms = first_ok("big").min(first_ok("small"));
    let small_s = (shop_adds(&h, "small").1.expect("small calls") - start_ms) as f64 / 1000.0;
    let big_s = (shop_adds(&h, "big").1.expect("big calls") - start_ms) as f64 / 1000.0;
    println!(
        "small job (80 items) done at {small_s:.1} s, big (800) at {big_s:.1} s; {:?} in all",
        started.elapsed()
    );
    // Its fair share is half the gate: 80 items at 50/s = 1.6 s. First come first served it
    // would end with the big one (~8.8 s at 100/s).
    assert!(
        small_s < big_s * 0.5,
        "the small job waited for the big one: {small_s:.1} s vs {big_s:.1} s"
    );
    assert_eq!(shop_adds(&h, "small").0, 80);
    assert_eq!(shop_adds(&h, "big").0, 800);
}
