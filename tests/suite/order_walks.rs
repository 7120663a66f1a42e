//! An order window that changes under the walk reading it (docs/design.md, "Continuous
//! sync"): on every platform, an order of page 1 changes (it leaves the window) after page 1
//! was read, and a new order comes into the window later in the walk. The walk stores every
//! order the window holds at its end, with nothing missed, and each change costs it one page
//! read again, as the simulator counts.

use crate::jobs_harness::{self, ClientOpts, Harness};
use std::collections::HashSet;
use std::time::Duration;
use syncfleet::platform::{Api, ApiRequest, ApiResponse, Platform, PlatformClient};
use syncfleet::sim::{DrillPatch, SimConfig};

/// The window: one day of the simulator's demo orders, several pages on every platform.
const SINCE: &str = "2026-01-02T00:00:00+08:00";
const UNTIL: &str = "2026-01-03T00:00:00+08:00";

fn client(h: &Harness, p: Platform) -> PlatformClient {
    let cfg = syncfleet::config::Config::load(&h.config).expect("config");
    let app = h.sim.config().app(p).expect("app");
    PlatformClient::new(
        p,
        &cfg.platforms[&p].client_options(),
        app.secret.clone(),
        Some(app.session.clone()),
    )
    .expect("client")
}

/// Every order the window holds now, read forward with nothing changing.
async fn window_now(c: &PlatformClient, p: Platform) -> Vec<String> {
    let start = chrono::DateTime::parse_from_rfc3339(SINCE)
        .unwrap()
        .to_utc();
    let end = chrono::DateTime::parse_from_rfc3339(UNTIL)
        .unwrap()
        .to_utc();
    let size = syncfleet::platform::order_page_size_max(p);
    let mut ids = Vec::new();
    for page in 1.. {
        let req = ApiRequest::OrderList {
            start,
            end,
            page,
            page_size: size,
        };
        let Ok(ApiResponse::OrderPage(op)) = c.call(&req, Duration::from_secs(10)).await else {
            panic!("{p}: page {page}")
        };
        ids.extend(op.orders.iter().map(|o| o.order_id.clone()));
        if !op.has_next || op.orders.is_empty() {
            break;
        }
    }
    ids
}

#[tokio::test]
async fn a_window_changing_under_its_walk_loses_no_order() {
    let _serial = jobs_harness::serial().await;
    let sim_cfg = SimConfig::demo().with_all_limits(10_000, 10_000_000);
    let mut h = Harness::start(sim_cfg, &ClientOpts::default().steady_leases()).await;
    // Before the drill: what the window holds, and so how many pages a walk takes.
    let mut before = Vec::new();
    for p in Platform::ALL {
        before.push(window_now(&client(&h, p), p).await.len());
    }
    h.sim
        .set_drill(DrillPatch {
            walk_shift: Some(true),
            ..Default::default()
        })
        .expect("drill");
    let calls_before: Vec<u64> = Platform::ALL
        .iter()
        .map(|p| h.stats(*p, Api::OrderList).calls)
        .collect();
    let jobs: Vec<i64> = Platform::ALL
        .iter()
        .map(|p| {
            h.enqueue(&[
                "orders",
                "--platform",
                p.as_str(),
                "--shop",
                "default",
                "--since",
                SINCE,
                "--until",
                UNTIL,
            ])
        })
        .collect();
    h.spawn_worker(4, 2);
    for job in &jobs {
        let s = h.wait_job(*job, Duration::from_secs(120)).await;
        let c = &s.job.counts;
        assert!(
            c.failed == 0 && c.done + c.skipped == 1,
            "job {job}: {c:?}\n{}",
            h.worker_warnings()
        );
    }
    for (i, p) in Platform::ALL.into_iter().enumerate() {
        let walked = h.stats(p, Api::OrderList).calls - calls_before[i];
        let c = client(&h, p);
        let after = window_now(&c, p).await;
        // The drill changed the window under the walk: one order out, one in.
        assert_eq!(after.len(), before[i], "{p}: one left and one came");
        let mut missed = Vec::new();
        for id in &after {
            if h.store.get_order(p, id).await.expect("order").is_none() {
                missed.push(id.clone());
            }
        }
        assert!(
            missed.is_empty(),
            "{p}: orders of the window never stored: {missed:?}"
        );
        let unique: HashSet<&String> = after.iter().collect();
        assert_eq!(unique.len(), after.len(), "{p}");
        // One page read again for each change, at most.
        let size = u64::from(syncfleet::platform::order_page_size_max(p));
        let pages = (before[i] as u64).div_ceil(size);
        eprintln!(
            "order walk under changes: {p}: {} orders, {pages} pages, {walked} calls (0 missed)",
            after.len()
        );
        assert!(
            walked <= pages + 2,
            "{p}: {walked} calls for {pages} pages and two changes"
        );
        assert!(
            walked > pages,
            "{p}: the changes were seen (a page read again)"
        );
    }
}
