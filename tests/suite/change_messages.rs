//! Change messages: TOP's pulled messages (one listener for the app's shops, with loss,
//! duplicate and delay drills) and 1688's pushed ones, with the sweep as the safety net
//! (docs/design.md, "Continuous sync"). Apart from `continuous_sync` so the two run as two
//! test processes at once.

use crate::continuous_sync::{live_sim, started_runs, wait_until};
use crate::jobs_harness::{self, ClientOpts, Harness};
use crate::support::ledger::Kind;
use std::collections::HashSet;
use std::time::Duration;
use syncfleet::platform::Platform;

const TB: Platform = Platform::Taobao;

/// A listening worker with a 10% message-loss drill, 20% of messages delivered twice and 10%
/// five seconds late, and the sweep every 6 s as the safety net.
async fn messages_with_drills(kind: Kind) {
    let mut sim = live_sim();
    sim.orders.live.message_loss = 0.1;
    sim.orders.live.message_duplicate = 0.2;
    sim.orders.live.message_delay = 0.1;
    sim.orders.live.message_delay_s = 5;
    let mut h = Harness::start_on(kind, sim, &ClientOpts::default()).await;
    let id = h.add_order_schedule("taobao", "6s", "1s", "2s").await;
    let config = h.config.clone();
    h.spawn_worker_args(&config, 4, 0, &["--listen", "taobao:s1"], &[]);
    wait_until("four sweeps", Duration::from_secs(90), || async {
        started_runs(&h, id).await >= 4
    })
    .await;
    h.schedule_action("pause", id);
    h.wait_runs_settled(id, Duration::from_secs(120)).await;
    let view = &h.store.schedules().await.expect("schedules")[0];
    let watermark = view.watermark.expect("a watermark");
    let app_key = h.sim.config().apps[0].app_key.clone();
    let tallies = h.store.message_tallies(TB).await.expect("tallies");
    let recorded: u64 = tallies.iter().map(|t| t.received).sum();
    let delivered = h.sim.messages_delivered(TB, &app_key);
    let live = h.sim.live_orders(TB, &app_key, "", chrono::Utc::now());
    let changes: usize = live.iter().map(|o| o.changes.len()).sum();
    println!(
        "{kind:?}: {changes} changes, {delivered} deliveries, {recorded} messages recorded, tallies {tallies:?}"
    );
    // Duplicates and redeliveries came, and each message was recorded once.
    assert!(
        delivered > recorded,
        "{delivered} deliveries, {recorded} recorded"
    );
    assert!(
        recorded > 0 && (recorded as usize) < changes,
        "{recorded} of {changes}"
    );
    assert!(tallies.iter().all(|t| t.shop == "s1"), "{tallies:?}");
    // Lost and late messages: the sweep brought every order before the watermark.
    h.assert_caught_up(TB, watermark, 6).await;
}

// Four threads: each leg runs blocking commands (the CLI) on one while its simulator serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn messages_lost_repeated_or_late_leave_no_order_behind() {
    let _serial = jobs_harness::serial().await;
    // The two ledgers side by side: each leg waits on its schedule's clock, not the CPU.
    tokio::join!(
        messages_with_drills(Kind::Sqlite),
        messages_with_drills(Kind::Postgres)
    );
}

/// One listener takes the whole app's messages: a shop whose seller name differs from its own
/// (`[shops.second] seller = "nick2"`) gets its orders, the app's own session's go to the
/// listener's shop, and both are brought to their last state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_listener_takes_the_whole_apps_messages_each_to_its_shop() {
    let _serial = jobs_harness::serial().await;
    let opts = ClientOpts {
        shops: vec![("nick2".into(), 1)],
        ..ClientOpts::default()
    };
    let mut h = Harness::start(live_sim().with_shops(TB, &["nick2"]), &opts).await;
    let text = std::fs::read_to_string(&h.config).expect("config");
    assert!(text.contains("[shops.nick2]\n"), "{text}");
    std::fs::write(
        &h.config,
        text.replace("[shops.nick2]\n", "[shops.second]\nseller = \"nick2\"\n"),
    )
    .expect("config");
    let begun = chrono::Utc::now();
    let config = h.config.clone();
    h.spawn_worker_args(&config, 4, 0, &["--listen", "taobao:s1"], &[]);
    // Every order whose state is 10 s old is in the ledger at that state (the listener pulls
    // every few seconds), for at least 10 such orders of each shop.
    for sim_shop in ["", "nick2"] {
        wait_until(
            "the shop's orders at their state",
            Duration::from_secs(90),
            || async {
                let before = chrono::Utc::now() - chrono::Duration::seconds(10);
                let (checked, behind) = h.orders_behind_of(TB, sim_shop, Some(begun), before).await;
                checked >= 10 && behind.is_empty()
            },
        )
        .await;
    }
    let cut = chrono::Utc::now() - chrono::Duration::seconds(10);
    let app_key = h
        .sim
        .config()
        .app(TB)
        .expect("a taobao app")
        .app_key
        .clone();
    for (sim_shop, shop) in [("", "s1"), ("nick2", "second")] {
        let live = h.sim.live_orders(TB, &app_key, sim_shop, cut);
        assert!(!live.is_empty());
        for o in live {
            if let Some(stored) = h
                .store
                .get_order(TB, &o.id.to_string())
                .await
                .expect("read")
            {
                assert_eq!(stored.order.shop, shop, "order {}", o.id);
            }
        }
    }
    let tallies = h.store.message_tallies(TB).await.expect("tallies");
    let shops: HashSet<&str> = tallies.iter().map(|t| t.shop.as_str()).collect();
    assert_eq!(shops, HashSet::from(["s1", "second"]), "{tallies:?}");
}

/// 1688 pushes: the simulator POSTs each change of its 1688 app to the worker's receiver
/// (`work --receive`), 10% lost, 20% sent twice; the receiver records each message once and
/// answers only after recording; the sweep brings what was lost.
// Four threads: each leg runs blocking commands (the CLI) on one while its simulator serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pushed_messages_from_1688_are_taken_once_and_the_sweep_brings_the_lost() {
    let _serial = jobs_harness::serial().await;
    // The two ledgers side by side: each leg waits on its schedule's clock, not the CPU.
    tokio::join!(
        pushed_messages(Kind::Sqlite),
        pushed_messages(Kind::Postgres)
    );
}

async fn pushed_messages(kind: Kind) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut sim = live_sim();
    sim.orders.live.message_loss = 0.1;
    sim.orders.live.message_duplicate = 0.2;
    sim.orders.live.push_url = Some(format!("http://127.0.0.1:{port}/push"));
    let mut h = Harness::start_on(kind, sim, &ClientOpts::default()).await;
    const AL: Platform = Platform::Alibaba;
    let id = h.add_order_schedule("alibaba", "6s", "1s", "2s").await;
    let config = h.config.clone();
    let addr = format!("127.0.0.1:{port}");
    h.spawn_worker_args(
        &config,
        4,
        0,
        &["--receive", &addr, "--receive-shop", "s1"],
        &[],
    );
    wait_until("three sweeps", Duration::from_secs(90), || async {
        started_runs(&h, id).await >= 3
    })
    .await;
    h.schedule_action("pause", id);
    h.wait_runs_settled(id, Duration::from_secs(120)).await;
    let watermark = h.store.schedules().await.expect("schedules")[0]
        .watermark
        .expect("a watermark");
    let app_key = h
        .sim
        .config()
        .apps
        .iter()
        .find(|a| a.platform == AL)
        .expect("a 1688 app")
        .app_key
        .clone();
    let tallies = h.store.message_tallies(AL).await.expect("tallies");
    let recorded: u64 = tallies.iter().map(|t| t.received).sum();
    let delivered = h.sim.messages_delivered(AL, &app_key);
    println!("{kind:?}: {delivered} pushes accepted or sent, {recorded} messages recorded");
    assert!(recorded > 10, "{recorded} pushed messages recorded");
    assert!(
        delivered > recorded,
        "{delivered} pushes, {recorded} recorded"
    );
    h.assert_caught_up(AL, watermark, 6).await;
}

/// Orders and messages the platform sends with an unreadable time (5% of them, the same ones
/// every time) are quarantined one by one: the sweeps still cover their windows (the
/// watermark moves), the listener's batches are taken and acknowledged, and every other
/// order is at its last state. `syncfleet quarantine` lists them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unreadable_orders_and_messages_are_quarantined_and_stop_nothing() {
    let _serial = jobs_harness::serial().await;
    let mut h = Harness::start(live_sim(), &ClientOpts::default()).await;
    h.sim
        .set_drill(syncfleet::sim::DrillPatch {
            malformed_ratio: Some(0.05),
            ..syncfleet::sim::DrillPatch::default()
        })
        .expect("drill");
    let malformed = |id: u64| id % 1000 < 50;
    let id = h.add_order_schedule("taobao", "6s", "1s", "2s").await;
    let config = h.config.clone();
    h.spawn_worker_args(&config, 4, 0, &["--listen", "taobao:s1"], &[]);
    wait_until("four sweeps", Duration::from_secs(90), || async {
        started_runs(&h, id).await >= 4
    })
    .await;
    h.schedule_action("pause", id);
    h.wait_runs_settled(id, Duration::from_secs(120)).await;
    let runs = h.store.schedule_runs(id, 1000).await.expect("runs");
    assert!(
        runs.iter()
            .all(|r| r.outcome != syncfleet::store::RunOutcome::Failed),
        "{runs:?}"
    );
    let view = &h.store.schedules().await.expect("schedules")[0];
    let watermark = view.watermark.expect("the watermark moved");
    let quarantined = h.store.quarantined(10_000).await.expect("quarantine");
    let ids: HashSet<(String, u64)> = quarantined
        .iter()
        .map(|q| {
            let id: u64 = q.record.record_id.parse().expect("an id was read");
            assert!(malformed(id), "{q:?} was readable");
            (q.record.source.clone(), id)
        })
        .collect();
    println!(
        "{} quarantined ({} orders), watermark {watermark}",
        ids.len(),
        ids.iter().filter(|(s, _)| s == "order").count()
    );
    assert!(ids.iter().any(|(s, _)| s == "order"), "{ids:?}");
    // Every order at its last state but the unreadable ones, each of which is quarantined.
    let (checked, behind) = h.orders_behind(TB, None, watermark).await;
    assert!(checked >= 6, "{checked} orders checked");
    for order in &behind {
        assert!(
            malformed(*order) && ids.contains(&("order".to_string(), *order)),
            "order {order} behind and not quarantined"
        );
    }
    // The listener's batches went through: messages were recorded and none is left
    // unacknowledged at the simulator.
    let tallies = h.store.message_tallies(TB).await.expect("tallies");
    assert!(
        tallies.iter().map(|t| t.received).sum::<u64>() > 0,
        "{tallies:?}"
    );
    let out = h.run(&["quarantine"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("order") && text.contains("unreadable"),
        "{text}"
    );
    // Read again as they are, they still do not read: a replay takes none and keeps all.
    let out = h.run(&["quarantine", "replay"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "0 record(s) read and taken, {} still unreadable",
            quarantined.len()
        )),
        "{text}"
    );
}

/// A replay takes what reads now (an adapter that learnt to read it, a platform that fixed its
/// data) as the run or the listener would have, under the shop that met it, and keeps what
/// still does not read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quarantine_replay_takes_what_reads_now_and_keeps_the_rest() {
    use syncfleet::store::Quarantined;
    let _serial = jobs_harness::serial().await;
    let h = Harness::start(live_sim(), &ClientOpts::default()).await;
    let row = |source: &str, id: &str, raw: String| Quarantined {
        source: source.into(),
        platform: TB,
        record_id: id.into(),
        shop: "s1".into(),
        reason: "`modified` missing or unreadable".into(),
        raw,
    };
    let message = serde_json::json!({
        "id": 9_000_001u64, "topic": "taobao_trade_TradeBuyerPay",
        "pub_time": "2026-01-01 10:00:05", "user_nick": "",
        "content": r#"{"tid":"556","status":"WAIT_SELLER_SEND_GOODS","payment":"3.00"}"#,
    });
    h.store
        .quarantine(&[
            row(
                "order",
                "555",
                r#"{"tid":"555","status":"TRADE_FINISHED","modified":"2026-01-01 10:00:00","payment":"9.90"}"#.into(),
            ),
            row(
                "order",
                "557",
                r#"{"tid":"557","modified":"0000-00-00 unreadable"}"#.into(),
            ),
            row("message", "9000001", message.to_string()),
        ])
        .await
        .expect("quarantine");
    let out = h.run(&["quarantine", "replay"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("2 record(s) read and taken, 1 still unreadable"),
        "{text}"
    );
    let order = h
        .store
        .get_order(TB, "555")
        .await
        .expect("read")
        .expect("stored");
    assert_eq!(
        (order.order.shop.as_str(), order.order.amount_cents),
        ("s1", 990)
    );
    let from_message = h
        .store
        .get_order(TB, "556")
        .await
        .expect("read")
        .expect("stored");
    assert_eq!(from_message.order.status, "WAIT_SELLER_SEND_GOODS");
    assert_eq!(from_message.order.shop, "s1", "the listener's own shop");
    assert_eq!(
        h.store
            .known_messages(TB, &[9_000_001])
            .await
            .expect("known")
            .len(),
        1,
        "the message recorded as the listener records it"
    );
    let left = h.store.quarantined(100).await.expect("quarantine");
    assert_eq!(
        left.iter()
            .map(|q| q.record.record_id.as_str())
            .collect::<Vec<_>>(),
        ["557"]
    );
}
