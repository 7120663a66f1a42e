//! Token lifetimes (docs/design.md, "Token lifetimes"): shops' access tokens end every few
//! seconds in the simulator, and a fleet of two worker processes keeps every shop of every
//! platform syncing: no call refused for an ended token, one renewal per token lifetime for
//! the whole fleet (the simulator's count), no shop paused, no worker restarted. A refresh
//! token the platform refuses pauses its shop alone, with the reason.

use crate::continuous_sync::{live_sim, wait_until};
use crate::jobs_harness::{self, ClientOpts, Harness};
use std::time::{Duration, Instant};
use syncfleet::platform::{Api, Platform};
use syncfleet::store::RunOutcome;

/// Seconds a shop's access token lives in these drills (SF_TOKENS_LIFETIME_S changes it, as a
/// measurement at another setting).
fn lifetime_s() -> u64 {
    std::env::var("SF_TOKENS_LIFETIME_S")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12)
}

const SHOPS: [(Platform, [&str; 3]); 3] = [
    (Platform::Taobao, ["t1", "t2", "t3"]),
    (Platform::Jd, ["j1", "j2", "j3"]),
    (Platform::Alibaba, ["a1", "a2", "a3"]),
];

fn opts() -> ClientOpts {
    ClientOpts {
        shops: SHOPS
            .iter()
            .flat_map(|(_, names)| names.iter().map(|n| (n.to_string(), 1)))
            .collect(),
        // Renewal at 80% of a 12 s token leaves 2.4 s to renew it and for every worker to take
        // the new one: looking every 500 ms keeps most of that window as margin for a loaded
        // machine.
        renew_tokens_every_ms: Some(500),
        ..ClientOpts::default().steady_leases()
    }
}

fn sim_config() -> syncfleet::sim::SimConfig {
    let mut cfg = live_sim().with_token_lifetime(lifetime_s());
    for (p, names) in SHOPS {
        cfg = cfg.with_shops(p, &names);
    }
    cfg
}

#[tokio::test]
async fn a_fleet_keeps_every_shop_running_through_its_tokens_lifetimes() {
    let _serial = jobs_harness::serial().await;
    let mut h = Harness::start(sim_config(), &opts()).await;
    let started = Instant::now();
    let mut schedules = Vec::new();
    for (p, names) in SHOPS {
        for shop in names {
            schedules.push(
                h.add_order_schedule_of(p.as_str(), shop, "2s", "1s", "2s")
                    .await,
            );
        }
    }
    let workers = [h.spawn_worker(4, 600), h.spawn_worker(4, 600)];
    // Five lifetimes of every token (SF_TOKENS_RUN_S runs it longer, as a measurement).
    let run_for = Duration::from_secs(
        std::env::var("SF_TOKENS_RUN_S")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(5 * lifetime_s()),
    );
    tokio::time::sleep(run_for).await;
    for id in &schedules {
        h.schedule_action("pause", *id);
    }
    for id in &schedules {
        h.wait_runs_settled(*id, Duration::from_secs(120)).await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let stats = h.sim.stats();
    let lifetimes = elapsed / lifetime_s() as f64;
    for (p, names) in SHOPS {
        for shop in names {
            let t = stats.tokens_of(p, shop);
            let ok = stats.for_shop(p, shop, Api::OrderList).map_or(0, |c| c.ok);
            eprintln!(
                "tokens: {p} {shop}: {} renewals in {elapsed:.0} s ({lifetimes:.1} lifetimes), {} refused for an ended token, {ok} order calls ok",
                t.refreshes, t.expired_refused
            );
            assert_eq!(
                t.expired_refused,
                0,
                "{p} {shop}: calls refused for an ended token: {t:?}\n{}",
                h.worker_warnings()
            );
            // One renewal a lifetime for the fleet (at 80% of it, plus the first, which learns
            // the given token's end): never one per worker.
            assert!(
                t.refreshes as f64 >= lifetimes - 1.0
                    && t.refreshes as f64 <= lifetimes / 0.7 + 2.0,
                "{p} {shop}: {} renewals in {elapsed:.0} s of {} s tokens",
                t.refreshes,
                lifetime_s()
            );
            // The shop kept syncing after its first token ended, on renewed ones.
            let calls = stats
                .for_shop(p, shop, Api::OrderList)
                .unwrap_or_else(|| panic!("{p} {shop} made no order call"));
            assert_eq!(calls.refused, 0, "{p} {shop}: {calls:?}");
            let last_ok = calls.last_ok_ms.unwrap_or(0);
            let first_ended =
                calls.first_ok_ms.unwrap_or(i64::MAX) + 2 * lifetime_s() as i64 * 1000;
            assert!(
                last_ok > first_ended,
                "{p} {shop}: no call after its second lifetime: {calls:?}"
            );
        }
    }
    for id in &schedules {
        let runs = h.store.schedule_runs(*id, 10_000).await.expect("runs");
        assert!(
            runs.iter()
                .filter(|r| r.outcome == RunOutcome::Covered)
                .count()
                >= 3,
            "schedule {id}: {runs:?}"
        );
        assert!(
            !runs.iter().any(|r| r.outcome == RunOutcome::Failed),
            "schedule {id}: a failed run: {runs:?}\n{}",
            h.worker_warnings()
        );
    }
    let paused = h.store.shop_pauses().await.expect("pauses");
    assert!(paused.is_empty(), "{paused:?}");
    // No restart: both workers still running.
    for pid in workers {
        assert!(
            h.worker_running(pid),
            "worker {pid} exited\n{}",
            h.worker_warnings()
        );
    }
}

#[tokio::test]
async fn a_refused_refresh_token_pauses_its_shop_alone() {
    let _serial = jobs_harness::serial().await;
    let mut h = Harness::start(sim_config(), &opts()).await;
    // j2's refresh token is not the one the platform gave.
    h.env.push((
        jobs_harness::shop_refresh_env("j2"),
        "not-the-refresh-token".into(),
    ));
    h.spawn_worker(2, 600);
    wait_until("j2 paused", Duration::from_secs(60), || async {
        h.store
            .shop_pause(Platform::Jd, "j2")
            .await
            .expect("pause")
            .is_some()
    })
    .await;
    let pause = h
        .store
        .shop_pause(Platform::Jd, "j2")
        .await
        .expect("pause")
        .expect("paused");
    assert!(
        pause.reason.contains("refused the refresh token"),
        "{pause}"
    );
    assert!(
        !pause.reason.contains("not-the-refresh-token"),
        "no secret in the reason"
    );
    // The others renewed theirs and are not paused.
    wait_until(
        "the other shops renewed",
        Duration::from_secs(60),
        || async {
            let s = h.sim.stats();
            SHOPS.iter().all(|(p, names)| {
                names
                    .iter()
                    .filter(|n| **n != "j2")
                    .all(|n| s.tokens_of(*p, n).refreshes >= 1)
            })
        },
    )
    .await;
    assert_eq!(h.store.shop_pauses().await.expect("pauses").len(), 1);
    // Nothing in the ledger holds a token in the clear.
    let row = h
        .store
        .shop_token(Platform::Taobao, "t1")
        .await
        .expect("row")
        .expect("seeded");
    assert!(!row.sealed_access.contains("sim-taobao"), "sealed");
    assert!(!row.sealed_refresh.contains("refresh"), "sealed");
}
