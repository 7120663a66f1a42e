//! The real adapters against the real simulator over loopback: every platform's four APIs,
//! idempotent writes, page walks, and each error class the simulator can produce.
//! Clients are built from config/local.toml (endpoints pointed at the test's simulator),
//! so the file's app keys are checked against the simulator's demo apps too.

use chrono::{Duration as ChronoDuration, TimeZone, Utc};
use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;
use syncfleet::config::{Config, PlatformConfig, Secret};
use syncfleet::platform::{
    Api, ApiRequest, ApiResponse, ErrorClass, Platform, PlatformClient, TransportError,
};
use syncfleet::sim::{self, DrillPatch, LimitOverride, SimConfig, SimHandle};

const T: Duration = Duration::from_secs(5);

fn local_config_text() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/local.toml");
    std::fs::read_to_string(&path).expect("config/local.toml is readable")
}

/// config/local.toml with its endpoints moved to `base` (http://127.0.0.1:PORT).
fn local_config(base: &str) -> Config {
    let text = local_config_text().replace("http://127.0.0.1:7800", base);
    Config::parse(Path::new("config/local.toml"), &text).expect("config/local.toml is valid")
}

fn platform_config(sim: &SimHandle, platform: Platform) -> PlatformConfig {
    let cfg = local_config(&sim.base_url());
    let pc = cfg.platforms[&platform].clone();
    assert_eq!(pc.endpoint, sim.endpoint(platform));
    pc
}

fn client_with(
    sim: &SimHandle,
    pc: &PlatformConfig,
    platform: Platform,
    secret: Option<&str>,
) -> PlatformClient {
    let app = sim
        .config()
        .app(platform)
        .expect("the simulator has a demo app");
    assert_eq!(
        pc.app_key, app.app_key,
        "config/local.toml names the simulator's demo app"
    );
    let secret = secret
        .map(Secret::new)
        .unwrap_or_else(|| app.secret.clone());
    PlatformClient::new(
        platform,
        &pc.client_options(),
        secret,
        Some(app.session.clone()),
    )
    .expect("client builds")
}

fn client(sim: &SimHandle, platform: Platform) -> PlatformClient {
    client_with(sim, &platform_config(sim, platform), platform, None)
}

async fn start(cfg: SimConfig) -> SimHandle {
    sim::spawn(cfg, "127.0.0.1:0".parse().unwrap())
        .await
        .expect("simulator starts")
}

/// Generous limits so the functional tests never meet a window.
fn roomy() -> SimConfig {
    SimConfig::demo().with_all_limits(10_000, 10_000_000)
}

fn signed_marker(platform: Platform) -> &'static str {
    match platform {
        Platform::Taobao => "SIGNED",
        Platform::Jd => "妥投",
        // A 1688 step has no status (docs/wire-formats.md).
        Platform::Alibaba => "",
    }
}

/// The trace request of an order as each platform asks it: TOP by the order id, JD by the
/// waybill its order list gave, 1688 by the `logisticsId` its logistics info call gives.
async fn trace_request(
    c: &PlatformClient,
    p: Platform,
    order: &syncfleet::platform::Order,
) -> ApiRequest {
    let tracking = match p {
        Platform::Taobao => None,
        Platform::Jd => order.tracking.clone(),
        Platform::Alibaba => {
            let info = c
                .call(
                    &ApiRequest::LogisticsInfo {
                        order_id: order.order_id.clone(),
                    },
                    T,
                )
                .await
                .unwrap_or_else(|e| panic!("{p}: {e}"));
            let ApiResponse::Parcels { parcels } = info else {
                panic!("{p}: not parcels")
            };
            parcels.first().map(|x| x.tracking.clone())
        }
    };
    ApiRequest::LogisticsTrace {
        order_id: order.order_id.clone(),
        tracking,
    }
}

#[test]
fn local_config_is_clean_and_matches_the_sim_demo_apps() {
    let cfg = local_config("http://127.0.0.1:7800");
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    // The limits local.toml was sized for: the simulator's own config file.
    let demo = SimConfig::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("config/sim.toml"))
        .expect("config/sim.toml is valid");
    for p in Platform::ALL {
        let pc = &cfg.platforms[&p];
        let app = demo.app(p).unwrap();
        assert_eq!(pc.app_key, app.app_key, "{p}");
        // Every gate fits the simulator's per-second window for its API.
        for api in Api::ALL {
            let g = cfg.gate(p, api);
            let cap = demo.limit(p, api).per_second as f64;
            assert!(
                g.rate + g.burst <= cap,
                "{p}.{api}: rate {} + burst {} > demo cap {cap}",
                g.rate,
                g.burst
            );
        }
    }
}

#[tokio::test]
async fn items_read_with_their_skus_and_every_write_makes_a_product_its_code_finds() {
    let sim = start(roomy()).await;
    for p in Platform::ALL {
        let c = client(&sim, p);
        let r = c
            .call(
                &ApiRequest::ItemGet {
                    item_id: "42".into(),
                },
                T,
            )
            .await
            .unwrap_or_else(|e| panic!("{p}: {e}"));
        let ApiResponse::Item(item) = r else {
            panic!("{p}: not an item: {r:?}")
        };
        assert_eq!(item.id, "42", "{p}");
        assert!(
            !item.title.is_empty() && !item.price.is_empty() && !item.category.is_empty(),
            "{p}: {item:?}"
        );
        assert!(!item.images.is_empty(), "{p}: {item:?}");
        if p == Platform::Jd {
            // JD's ware read gives no SKUs; 1688 and TOP do.
            continue;
        }
        if p == Platform::Alibaba {
            assert!(
                item.images
                    .iter()
                    .all(|u| u.starts_with("https://cbu01.alicdn.com/")),
                "relative paths made absolute: {item:?}"
            );
            // 1688 offers no write to a distributor here.
            continue;
        }
        assert!(!item.attributes.is_empty(), "{p}: {item:?}");

        // Two writes of the same code: two products, as the platform makes them.
        let code = format!("SF-{p}");
        let add = ApiRequest::ItemAdd {
            item: Box::new(syncfleet::fuzzing::new_item(&code)),
        };
        let first = c.call(&add, T).await.unwrap_or_else(|e| panic!("{p}: {e}"));
        let again = c.call(&add, T).await.unwrap_or_else(|e| panic!("{p}: {e}"));
        assert_ne!(first, again, "{p}: no platform deduplicates a write");
        let stats = sim.stats();
        let s = stats.for_platform(p, Api::ItemAdd).expect("item_add stats");
        assert_eq!((s.calls, s.duplicate_writes), (2, 1), "{p}: {s:?}");
        let found = c
            .call(
                &ApiRequest::ItemFind {
                    seller_code: code.clone(),
                },
                T,
            )
            .await
            .unwrap_or_else(|e| panic!("{p}: {e}"));
        let ApiResponse::Found { item_ids } = found else {
            panic!("{p}: {found:?}")
        };
        assert_eq!(item_ids.len(), 2, "{p}: the code finds both");
        let none = c
            .call(
                &ApiRequest::ItemFind {
                    seller_code: "SF-never-written".into(),
                },
                T,
            )
            .await
            .unwrap_or_else(|e| panic!("{p}: {e}"));
        assert_eq!(none, ApiResponse::Found { item_ids: vec![] }, "{p}");

        // The written item reads back.
        let ApiResponse::ItemAdded { item_id } = &first else {
            panic!("{p}: {first:?}")
        };
        let back = c
            .call(
                &ApiRequest::ItemGet {
                    item_id: item_id.clone(),
                },
                T,
            )
            .await
            .unwrap_or_else(|e| panic!("{p}: {e}"));
        let ApiResponse::Item(back) = back else {
            panic!("{p}")
        };
        assert_eq!(
            (back.title.as_str(), back.price.as_str(), back.quantity),
            ("Mug", "12.50", 7)
        );
    }
    // JD: the ware and its SKUs; a ware without SKUs is refused.
    let c = client(&sim, Platform::Jd);
    let add = ApiRequest::ItemAdd {
        item: Box::new(syncfleet::fuzzing::new_item("SF-jd")),
    };
    let made = c.call(&add, T).await.expect("jd write");
    assert!(matches!(made, ApiResponse::ItemAdded { .. }), "{made:?}");
}

#[tokio::test]
async fn order_pages_walk_to_the_end_and_traces_parse() {
    let sim = start(roomy()).await;
    // The demo shop's first day (GMT+8), one TOP-sized window.
    let start = Utc.with_ymd_and_hms(2025, 12, 31, 16, 0, 0).unwrap();
    let end = start + ChronoDuration::days(1);
    for p in Platform::ALL {
        let c = client(&sim, p);
        let mut ids = Vec::new();
        let mut shipped = Vec::new();
        let mut page = 1;
        let mut total = None;
        loop {
            let req = ApiRequest::OrderList {
                start,
                end,
                page,
                page_size: syncfleet::platform::order_page_size_max(p),
            };
            let r = c
                .call(&req, T)
                .await
                .unwrap_or_else(|e| panic!("{p} page {page}: {e}"));
            let ApiResponse::OrderPage(op) = r else {
                panic!("{p}: not a page")
            };
            for o in &op.orders {
                assert!(
                    o.modified >= start && o.modified < end,
                    "{p}: {o:?} outside the window"
                );
                assert!(!o.amount.is_empty() && !o.status.is_empty(), "{p}: {o:?}");
                ids.push(o.order_id.clone());
                shipped.push(o.clone());
            }
            total = op.total.or(total);
            if !op.has_next {
                break;
            }
            page += 1;
            assert!(page <= 50, "{p}: the walk must end");
        }
        assert!(page >= 2, "{p}: a day of demo orders spans several pages");
        let unique: HashSet<&String> = ids.iter().collect();
        assert_eq!(unique.len(), ids.len(), "{p}: no order twice");
        if let Some(t) = total {
            assert_eq!(ids.len() as u64, t, "{p}: the walk saw every order");
        }

        let (mut signed, mut moving) = (0, 0);
        shipped.retain(|o| {
            matches!(
                o.status.as_str(),
                "WAIT_BUYER_CONFIRM_GOODS"
                    | "TRADE_FINISHED"
                    | "WAIT_GOODS_RECEIVE_CONFIRM"
                    | "FINISHED_L"
                    | "waitbuyerreceive"
                    | "success"
            )
        });
        for order in shipped.iter().take(30) {
            let id = &order.order_id;
            let req = trace_request(&c, p, order).await;
            let r = c.call(&req, T).await.unwrap_or_else(|e| panic!("{p}: {e}"));
            let ApiResponse::Trace(t) = r else {
                panic!("{p}: not a trace")
            };
            assert_eq!(&t.order_id, id, "{p}");
            if t.signed {
                signed += 1;
                let last = t.events.last().expect("a signed trace has events");
                assert_eq!(last.status, signed_marker(p), "{p}: {t:?}");
            } else if !t.events.is_empty() {
                moving += 1;
            }
            for e in &t.events {
                assert!(
                    e.time_utc().is_some(),
                    "{p}: event time `{}` parses",
                    e.time
                );
            }
        }
        assert!(
            signed > 0 && moving > 0,
            "{p}: {signed} signed, {moving} moving of 30"
        );
    }
}

#[tokio::test]
async fn wrong_secret_and_expired_session_are_fatal() {
    let sim = start(roomy()).await;
    let codes = [
        (Platform::Taobao, "25"),
        (Platform::Jd, "12"),
        (Platform::Alibaba, "gw.SignatureInvalid"),
    ];
    for (p, code) in codes {
        let c = client_with(&sim, &platform_config(&sim, p), p, Some("not-the-secret"));
        let e = c
            .call(
                &ApiRequest::ItemGet {
                    item_id: "1".into(),
                },
                T,
            )
            .await
            .unwrap_err();
        assert_eq!(
            (e.class, e.code.as_str()),
            (ErrorClass::Fatal, code),
            "{p}: {e}"
        );
        assert!(!e.to_string().contains("not-the-secret"), "{e}");
    }
    sim.set_drill(DrillPatch {
        expired_session: Some(true),
        ..Default::default()
    })
    .unwrap();
    for p in Platform::ALL {
        let e = client(&sim, p)
            .call(
                &ApiRequest::ItemGet {
                    item_id: "1".into(),
                },
                T,
            )
            .await
            .unwrap_err();
        assert_eq!(e.class, ErrorClass::Fatal, "{p}: {e}");
    }
}

#[tokio::test]
async fn overrunning_a_limit_is_slow_with_the_ban_parsed() {
    let sim = start(roomy()).await;
    for p in Platform::ALL {
        let limit = LimitOverride {
            api: Api::ItemGet,
            platform: Some(p),
            per_second: Some(2),
            daily: None,
        };
        sim.set_drill(DrillPatch {
            limit: Some(limit),
            ..Default::default()
        })
        .unwrap();
        let c = client(&sim, p);
        let calls = (0..8).map(|i| {
            let c = c.clone();
            async move {
                c.call(
                    &ApiRequest::ItemGet {
                        item_id: (i + 1).to_string(),
                    },
                    T,
                )
                .await
            }
        });
        let results = futures::future::join_all(calls).await;
        let slow: Vec<_> = results.iter().filter_map(|r| r.as_ref().err()).collect();
        assert!(!slow.is_empty(), "{p}: 8 calls at once overran 2/s");
        for e in &slow {
            assert_eq!(e.class, ErrorClass::Slow, "{p}: {e}");
            let ban = e.ban.unwrap_or_else(|| panic!("{p}: ban parsed from {e}"));
            assert!(
                ban >= Duration::from_secs(1) && ban < Duration::from_secs(60),
                "{p}: {ban:?}"
            );
            assert!(
                !e.quota_spent,
                "{p}: a per-second ban is not the daily quota"
            );
        }
        let stats = sim.stats();
        let s = stats.for_platform(p, Api::ItemGet).unwrap();
        assert_eq!(
            s.rejected_limit,
            slow.len() as u64,
            "{p}: the platform counted what we saw"
        );
    }
}

#[tokio::test]
async fn a_spent_daily_quota_is_flagged() {
    let until_reset = syncfleet::time::QuotaDay::PLATFORM.next_reset(Utc::now()) - Utc::now();
    if until_reset < ChronoDuration::seconds(120) {
        // Within two minutes of 00:00 GMT+8 the quota ban is too short to tell apart.
        return;
    }
    let sim = start(roomy()).await;
    for p in Platform::ALL {
        let limit = LimitOverride {
            api: Api::LogisticsTrace,
            platform: Some(p),
            per_second: None,
            daily: Some(2),
        };
        sim.set_drill(DrillPatch {
            limit: Some(limit),
            ..Default::default()
        })
        .unwrap();
        let c = client(&sim, p);
        let req = match p {
            Platform::Taobao => ApiRequest::LogisticsTrace {
                order_id: "1001".into(),
                tracking: None,
            },
            Platform::Jd => ApiRequest::LogisticsTrace {
                order_id: "1001".into(),
                tracking: Some("JDVA00000001001".into()),
            },
            Platform::Alibaba => ApiRequest::LogisticsTrace {
                order_id: "1001".into(),
                tracking: Some("BX1001".into()),
            },
        };
        for _ in 0..2 {
            c.call(&req, T).await.unwrap_or_else(|e| panic!("{p}: {e}"));
        }
        let e = c.call(&req, T).await.unwrap_err();
        assert_eq!(e.class, ErrorClass::Slow, "{p}: {e}");
        assert!(e.quota_spent, "{p}: {e}");
    }
}

/// The app key's daily count spans its APIs: once spent, a call of any API is refused with
/// the platform's own answer (TOP `limited-by-app-access-count`, 1688 `gw.NoUsageLeftError`),
/// which the adapters flag as the app's quota; the simulator counts every call, refused ones
/// too, and the refusals apart.
#[tokio::test]
async fn a_spent_app_quota_is_flagged_for_the_whole_app() {
    let sim = start(
        roomy()
            .with_app_daily(Platform::Taobao, 3)
            .with_app_daily(Platform::Alibaba, 3),
    )
    .await;
    for p in [Platform::Taobao, Platform::Alibaba] {
        let c = client(&sim, p);
        let trace = ApiRequest::LogisticsTrace {
            order_id: "1001".into(),
            tracking: (p == Platform::Alibaba).then(|| "BX1001".to_string()),
        };
        let item = ApiRequest::ItemGet {
            item_id: "7".into(),
        };
        for req in [&trace, &item, &trace] {
            c.call(req, T).await.unwrap_or_else(|e| panic!("{p}: {e}"));
        }
        let e = c.call(&item, T).await.unwrap_err();
        assert_eq!(e.class, ErrorClass::Slow, "{p}: {e}");
        assert!(e.quota_spent && e.app_quota, "{p}: {e}");
        let app = sim.stats().app(p).cloned().expect("app stats");
        assert_eq!((app.used_today, app.rejected_app_quota), (4, 1), "{p}");
    }
}

#[tokio::test]
async fn error_ratio_drill_is_retry() {
    let sim = start(roomy()).await;
    sim.set_drill(DrillPatch {
        error_ratio: Some(1.0),
        ..Default::default()
    })
    .unwrap();
    for p in Platform::ALL {
        let e = client(&sim, p)
            .call(
                &ApiRequest::ItemGet {
                    item_id: "1".into(),
                },
                T,
            )
            .await
            .unwrap_err();
        assert_eq!(
            (e.class, e.transport),
            (ErrorClass::Retry, None),
            "{p}: {e}"
        );
    }
    sim.set_drill(DrillPatch {
        clear: true,
        outage: Some(true),
        ..Default::default()
    })
    .unwrap();
    for p in Platform::ALL {
        let e = client(&sim, p)
            .call(
                &ApiRequest::ItemGet {
                    item_id: "1".into(),
                },
                T,
            )
            .await
            .unwrap_err();
        assert_eq!(e.class, ErrorClass::Retry, "{p}: {e}");
    }
    sim.clear_drills();
    for p in Platform::ALL {
        client(&sim, p)
            .call(
                &ApiRequest::ItemGet {
                    item_id: "1".into(),
                },
                T,
            )
            .await
            .unwrap_or_else(|e| panic!("{p}: {e}"));
    }
}

/// Idle close: the "NAT" drops flows idle over 2 s. A client keeping connections 25 s
/// reuses a dead one and fails (PeerClosed once the hold ends); one keeping them 1 s
/// opens a fresh connection and never notices.
#[tokio::test]
async fn idle_close_hits_only_a_keepalive_longer_than_it() {
    let mut cfg = roomy();
    cfg.idle_hold_s = 1;
    let sim = start(cfg).await;
    sim.set_drill(DrillPatch {
        idle_close_s: Some(2),
        ..Default::default()
    })
    .unwrap();
    let req = ApiRequest::ItemGet {
        item_id: "1".into(),
    };
    for p in Platform::ALL {
        let long = client(&sim, p);
        let mut short_pc = platform_config(&sim, p);
        short_pc.idle_keepalive_s = 1;
        let short = client_with(&sim, &short_pc, p, None);
        long.call(&req, T)
            .await
            .unwrap_or_else(|e| panic!("{p}: {e}"));
        short
            .call(&req, T)
            .await
            .unwrap_or_else(|e| panic!("{p}: {e}"));
        tokio::time::sleep(Duration::from_millis(2600)).await;
        let (l, s) = tokio::join!(long.call(&req, T), short.call(&req, T));
        let e = l.expect_err("the reused idle connection was dropped");
        assert_eq!(
            (e.class, e.transport),
            (ErrorClass::Retry, Some(TransportError::PeerClosed)),
            "{p}: {e}"
        );
        assert!(!e.consumes_attempt());
        s.unwrap_or_else(|e| panic!("{p}: the short keep-alive client failed: {e}"));
        // The next call of the long client opens a new connection and succeeds.
        long.call(&req, T)
            .await
            .unwrap_or_else(|e| panic!("{p}: {e}"));
    }
    assert_eq!(sim.stats().totals.idle_closed, 3);
}

/// Same drill with a hold longer than the read timeout: the call times out instead.
#[tokio::test]
async fn idle_close_with_a_long_hold_times_out() {
    let sim = start(roomy()).await; // hold 60 s
    sim.set_drill(DrillPatch {
        idle_close_s: Some(1),
        ..Default::default()
    })
    .unwrap();
    let c = client(&sim, Platform::Jd);
    let req = ApiRequest::ItemGet {
        item_id: "1".into(),
    };
    c.call(&req, T).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1600)).await;
    let e = c.call(&req, Duration::from_millis(800)).await.unwrap_err();
    assert_eq!(
        (e.class, e.transport),
        (ErrorClass::Retry, Some(TransportError::Timeout)),
        "{e}"
    );
    assert!(e.consumes_attempt() && !e.surely_not_sent());
}

/// `syncfleet call` end to end: exit 0 with `class: ok`, 1 on a platform error, 2 on bad
/// input (and the missing variable is named, never a value).
/// `syncfleet call` books in the API's gate like a worker: with `--redis`, the fleet's gate
/// counts it in its day (`gate show`), so a call typed at a terminal is inside the app's limits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_from_the_terminal_books_in_the_fleet_gate() {
    let redis = crate::support::redis::TestRedis::start();
    if !redis.is_private() {
        eprintln!("skipped: needs a private redis-server (the gates use the default namespace)");
        return;
    }
    let sim = start(roomy()).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg_path = dir.path().join("local.toml");
    std::fs::write(
        &cfg_path,
        local_config_text().replace("http://127.0.0.1:7800", &sim.base_url()),
    )
    .unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_syncfleet"))
            .arg("--config")
            .arg(&cfg_path)
            .args(["--redis", &redis.url])
            .args(args)
            .env("SIM_JD_SECRET", "sim-jd-secret")
            .env("SIM_JD_TOKEN", "sim-jd-token")
            .output()
            .expect("syncfleet runs")
    };
    let out = run(&[
        "call",
        "jd",
        "item_get",
        "wareId=7",
        "--lane",
        "interactive",
    ]);
    assert!(out.status.success(), "{out:?}");
    let shown = run(&["gate", "show"]);
    let text = String::from_utf8_lossy(&shown.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("jd.item_get"))
        .unwrap_or_else(|| panic!("{text}"));
    let cols: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(cols[7], "1", "one call counted today: {line}");
    assert_eq!(
        sim.stats()
            .for_platform(Platform::Jd, Api::ItemGet)
            .map(|s| s.calls),
        Some(1)
    );
}

/// Without Redis the gates live in each process, so `gate show` starts at zero: it counts
/// today's calls from the ledger, where `call` (like a worker) records its call (before: 0
/// after any number of calls).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedded_gate_show_counts_todays_calls_from_the_ledger() {
    let sim = start(roomy()).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg_path = dir.path().join("local.toml");
    std::fs::write(
        &cfg_path,
        local_config_text().replace("http://127.0.0.1:7800", &sim.base_url()),
    )
    .unwrap();
    let db = format!("sqlite://{}", dir.path().join("ledger.db").display());
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_syncfleet"))
            .arg("--config")
            .arg(&cfg_path)
            .args(["--db", &db])
            .args(args)
            .env_remove("SYNCFLEET_REDIS_URL")
            .env("SIM_JD_SECRET", "sim-jd-secret")
            .env("SIM_JD_TOKEN", "sim-jd-token")
            .output()
            .expect("syncfleet runs")
    };
    assert!(run(&["db", "migrate"]).status.success());
    for id in ["7", "8"] {
        let out = run(&["call", "jd", "item_get", &format!("wareId={id}")]);
        assert!(out.status.success(), "{out:?}");
    }
    let shown = run(&["gate", "show"]);
    let text = String::from_utf8_lossy(&shown.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("jd.item_get"))
        .unwrap_or_else(|| panic!("{text}"));
    let cols: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(cols[7], "2", "two calls counted today: {line}");
}

#[tokio::test]
async fn call_subcommand_exit_codes() {
    let sim = start(roomy()).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg_path = dir.path().join("local.toml");
    std::fs::write(
        &cfg_path,
        local_config_text().replace("http://127.0.0.1:7800", &sim.base_url()),
    )
    .unwrap();
    let envs = crate::support::LOCAL_CONFIG_ENV;
    let run = |args: &[&str], overrides: &[(&str, Option<&str>)]| {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_syncfleet"));
        cmd.arg("--config").arg(&cfg_path).arg("call").args(args);
        for (k, v) in envs {
            cmd.env(k, v);
        }
        for (k, v) in overrides {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        cmd.kill_on_drop(true);
        async move {
            let out = cmd.output().await.expect("syncfleet runs");
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).to_string(),
                String::from_utf8_lossy(&out.stderr).to_string(),
            )
        }
    };
    let (code, out, err) = run(&["jd", "item_get", "wareId=7"], &[]).await;
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains("\"wareId\": 7") && out.trim_end().ends_with("class: ok"),
        "{out}"
    );

    let (code, out, err) = run(
        &["taobao", "item_get", "num_iid=1"],
        &[("SIM_TAOBAO_SECRET", Some("wrong"))],
    )
    .await;
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        out.contains("isv.invalid-signature") && out.trim_end().ends_with("class: fatal"),
        "{out}"
    );

    sim.set_drill(DrillPatch {
        limit: Some(LimitOverride {
            api: Api::ItemGet,
            platform: Some(Platform::Alibaba),
            per_second: Some(1),
            daily: None,
        }),
        ..Default::default()
    })
    .unwrap();
    let mut saw_slow = false;
    for _ in 0..6 {
        let (code, out, _) = run(&["alibaba", "item_get", "offerId=1"], &[]).await;
        if code == Some(1) {
            assert!(out.trim_end().ends_with("class: slow (ban 1 s)"), "{out}");
            saw_slow = true;
            break;
        }
    }
    assert!(saw_slow, "six calls in a row at 1/s met the limit");

    for (args, env) in [
        (vec!["ebay", "item_get"], None),
        (vec!["jd", "item_gett"], None),
        (vec!["jd", "item_get", "wareId"], None),
        (vec!["jd", "item_get", "wareId=1"], Some("SIM_JD_TOKEN")),
    ] {
        let overrides: Vec<(&str, Option<&str>)> = env.iter().map(|k| (*k, None)).collect();
        let (code, out, err) = run(&args, &overrides).await;
        assert_eq!(code, Some(2), "{args:?}: {out}{err}");
        if let Some(var) = env {
            assert!(err.contains(var), "{err}");
        }
        for (_, v) in envs {
            assert!(
                !err.contains(v) && !out.contains(v),
                "a secret leaked: {out}{err}"
            );
        }
    }
}
