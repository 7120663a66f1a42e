//! The real listing against the strict simulator: a 1688 product with SKUs mapped by the
//! user's map into a write the target takes (every required field), an unmapped category
//! skipped without a write, the same listing queued twice making each product once, and
//! writes whose answers are lost found again by their seller's code instead of made twice.

use crate::jobs_harness::{self, sim_map, ClientOpts, Harness};
use std::collections::HashMap;
use std::time::Duration;
use syncfleet::config::Config;
use syncfleet::link::{Budget, CallContext};
use syncfleet::platform::{Api, ApiRequest, ApiResponse, Item, Platform};
use syncfleet::sim::DrillPatch;
use syncfleet::store::ListingRoute;
use syncfleet::throttle::Gates;

const FROM: Platform = Platform::Alibaba;

/// Products at the simulator beyond the first carrying each seller's code (all shops).
fn duplicate_products(h: &Harness) -> u64 {
    h.sim.stats().totals.duplicate_writes
}

fn listing_args<'a>(to: &'a str, items: &'a str, map: &'a str) -> Vec<&'a str> {
    vec![
        "listing", "--from", "alibaba", "--to", to, "--items", items, "--map", map,
    ]
}

/// `syncfleet ARGS` with `config`, to its end.
fn run_cli(h: &Harness, config: &std::path::Path, args: &[&str]) -> std::process::Output {
    h.command_with(config, args)
        .output()
        .expect("run syncfleet")
}

/// `enqueue listing` to Taobao of `items` with `config` (and `--map` when given).
fn enqueue_listing_cli(
    h: &Harness,
    config: &std::path::Path,
    items: &std::path::Path,
    to: &str,
    map: Option<&std::path::Path>,
) -> std::process::Output {
    let mut args = vec![
        "enqueue",
        "listing",
        "--from",
        "alibaba",
        "--to",
        to,
        "--items",
        items.to_str().expect("utf-8"),
    ];
    if let Some(map) = map {
        args.extend(["--map", map.to_str().expect("utf-8")]);
    }
    run_cli(h, config, &args)
}

/// Read `id` on `platform` through the simulator with the harness's credentials.
async fn read(h: &Harness, platform: Platform, id: &str) -> Item {
    let cfg = Config::load(&h.config).expect("config");
    let gw = h.gateway(&cfg, Gates::embedded(&cfg), None);
    let ctx = CallContext::new(Budget::starting_now(Duration::from_secs(30)));
    let reply = gw
        .call(
            platform,
            ApiRequest::ItemGet {
                item_id: id.to_string(),
            },
            &ctx,
        )
        .await
        .unwrap_or_else(|e| panic!("read {platform} {id}: {e}"));
    match reply.response {
        ApiResponse::Item(item) => item,
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn products_with_skus_list_whole_and_an_unmapped_category_costs_no_write() {
    let _serial = jobs_harness::serial().await;
    let mut h = Harness::start(jobs_harness::listing_sim(), &ClientOpts::default()).await;
    // The shipped map without the lamps' category.
    let shipped = std::fs::read_to_string(sim_map(Platform::Taobao)).expect("shipped map");
    let lamps = "[[category]]\nsource = \"1046002\"\ntarget = \"50001748\"\nname = \"台灯\"\n";
    assert!(shipped.contains(lamps));
    let map = h.dir.path().join("no-lamps.toml");
    std::fs::write(&map, shipped.replace(lamps, "")).expect("write map");
    let items = h.item_file(80);
    let job = h.enqueue(&listing_args(
        "taobao",
        items.to_str().expect("utf-8"),
        map.to_str().expect("utf-8"),
    ));
    h.spawn_worker(8, 2);
    let status = h.wait_job(job, Duration::from_secs(120)).await;
    let c = &status.job.counts;
    assert_eq!(c.done + c.skipped, 80, "{c:?}");
    assert!(c.skipped > 0 && c.done > 0, "{c:?}");
    h.wait_workers(Duration::from_secs(60));
    // Every item read once; a write for each done item and none for the skipped.
    assert_eq!(h.stats(FROM, Api::ItemGet).calls, 80);
    let adds = h.stats(Platform::Taobao, Api::ItemAdd);
    assert_eq!(adds.calls, c.done, "{adds:?}");
    assert_eq!(
        adds.ok, c.done,
        "the strict simulator refused a write: {adds:?}"
    );

    // Each listed product carries its source's SKUs and the mapped category.
    let keys: Vec<String> = (1..=80).map(|i| i.to_string()).collect();
    let route = ListingRoute {
        from: FROM,
        to: Platform::Taobao,
        shop: "default",
    };
    let listed = h.store.listed_items(route, &keys).await.expect("listings");
    assert_eq!(listed.len() as u64, c.done);
    let mut with_skus = 0;
    let mut skipped_lamps = 0;
    for key in &keys {
        let source = read(&h, FROM, key).await;
        match listed.get(key) {
            Some(l) => {
                let target = read(&h, Platform::Taobao, &l.target_item).await;
                assert_eq!(target.skus.len(), source.skus.len(), "item {key}");
                assert_ne!(source.category, "1046002", "a lamp was listed");
                assert_eq!(target.title, source.title, "item {key}");
                if target.skus.len() >= 2 {
                    with_skus += 1;
                }
            }
            None => {
                assert_eq!(source.category, "1046002", "item {key} was not listed");
                skipped_lamps += 1;
            }
        }
    }
    assert!(with_skus > 0, "no product with SKUs among the 80");
    assert_eq!(skipped_lamps, c.skipped);
    let reasons = h
        .store
        .items(job, Some(syncfleet::store::ItemStatus::Skipped), 1000)
        .await
        .expect("skipped items")
        .into_iter()
        .filter(|o| {
            o.result
                .as_deref()
                .is_some_and(|r| r.contains("category `1046002`"))
        })
        .count() as u64;
    assert_eq!(reasons, c.skipped, "each skip names the unmapped category");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_to_jd_writes_ware_and_skus() {
    let _serial = jobs_harness::serial().await;
    let mut h = Harness::start(
        jobs_harness::listing_sim().with_limit(Platform::Jd, Api::ItemAdd, 2_000, 10_000_000),
        &ClientOpts::default(),
    )
    .await;
    let items = h.item_file(40);
    let map = sim_map(Platform::Jd);
    let job = h.enqueue(&listing_args(
        "jd",
        items.to_str().expect("utf-8"),
        map.to_str().expect("utf-8"),
    ));
    h.spawn_worker(8, 2);
    let status = h.wait_job(job, Duration::from_secs(120)).await;
    assert_eq!(status.job.counts.done, 40, "{:?}", status.job.counts);
    h.wait_workers(Duration::from_secs(60));
    let adds = h.stats(Platform::Jd, Api::ItemAdd);
    assert_eq!((adds.calls, adds.ok), (40, 40), "{adds:?}");
    // A map for another target is refused before anything is queued.
    let out = enqueue_listing_cli(&h, &h.config, &items, "taobao", Some(&map));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the map is for jd"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_listing_queued_twice_before_any_worker_writes_each_product_once() {
    let _serial = jobs_harness::serial().await;
    let mut h = Harness::start(jobs_harness::listing_sim(), &ClientOpts::default()).await;
    // Both jobs are queued before a worker runs: the ledger's "already listed" check at
    // enqueue sees nothing; the claim before each write is what keeps the second job out.
    let first = h.enqueue_listing(50);
    let second = h.enqueue_listing(50);
    h.spawn_worker(8, 3);
    h.spawn_worker(8, 3);
    let a = h.wait_job(first, Duration::from_secs(180)).await;
    let b = h.wait_job(second, Duration::from_secs(180)).await;
    h.wait_workers(Duration::from_secs(60));
    let adds = h.stats(Platform::Taobao, Api::ItemAdd);
    assert_eq!(adds.calls, 50, "write calls for 50 items: {adds:?}");
    assert_eq!(duplicate_products(&h), 0);
    // Every item ends done in one job and skipped (already listed) in the other.
    assert_eq!(a.job.counts.done + b.job.counts.done, 50, "{a:?} {b:?}");
    assert_eq!(
        a.job.counts.skipped + b.job.counts.skipped,
        50,
        "{a:?} {b:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_whose_answers_are_lost_are_found_by_their_code_not_made_twice() {
    let _serial = jobs_harness::serial().await;
    let items: u64 = std::env::var("SF_LOST_ANSWERS_ITEMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5_000);
    let mut h = Harness::start(
        jobs_harness::listing_sim(),
        &ClientOpts {
            item_retry_rounds: 6,
            ..ClientOpts::default().steady_leases()
        },
    )
    .await;
    // One write in ten is made at the platform and its answer never comes back.
    h.sim
        .set_drill(DrillPatch {
            lost_write_answer_ratio: Some(0.1),
            ..Default::default()
        })
        .expect("drill");
    let job = h.enqueue_listing(items);
    for _ in 0..3 {
        h.spawn_worker(16, 3);
    }
    let status = h.wait_job(job, Duration::from_secs(600)).await;
    h.wait_workers(Duration::from_secs(120));
    let c = &status.job.counts;
    assert_eq!(c.done, items, "every item done: {c:?}");
    let totals = h.sim.stats().totals;
    assert!(totals.answers_lost > 0, "the drill dropped no answer");
    assert_eq!(
        totals.duplicate_writes, 0,
        "duplicate products by seller code"
    );
    assert_eq!(totals.products, items, "one product per item");
    // Each lost answer cost a look-up before the item went on; a task a loaded machine's
    // worker lost and another ran again looks up the writes it had made and not yet
    // recorded, so there may be a few more.
    let finds = h.stats(Platform::Taobao, Api::ItemFind).calls;
    assert!(
        finds >= totals.answers_lost,
        "look-ups: {finds} for {} lost answers",
        totals.answers_lost
    );
    // The ledger says which source item became which product.
    let keys: Vec<String> = (1..=items).map(|i| i.to_string()).collect();
    let route = ListingRoute {
        from: FROM,
        to: Platform::Taobao,
        shop: "default",
    };
    let listed = h.store.listed_items(route, &keys).await.expect("listings");
    let targets: HashMap<&str, &str> = listed
        .iter()
        .map(|(k, l)| (l.target_item.as_str(), k.as_str()))
        .collect();
    assert_eq!(
        targets.len() as u64,
        items,
        "a product per item, none shared"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_map_is_refused_naming_the_file_line_and_key() {
    let _serial = jobs_harness::serial().await;
    let h = Harness::start(jobs_harness::listing_sim(), &ClientOpts::default()).await;
    let shipped = std::fs::read_to_string(sim_map(Platform::Taobao)).expect("shipped map");
    let bad = h.dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        shipped.replace("markup = \"1.30\"", "markup = \"1.3x\""),
    )
    .expect("write map");
    let line = shipped
        .lines()
        .position(|l| l.starts_with("markup"))
        .expect("a markup line")
        + 1;
    let items = h.item_file(5);
    let out = enqueue_listing_cli(&h, &h.config, &items, "taobao", Some(&bad));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("bad.toml:{line}: key `price.markup`")) && err.contains("decimal"),
        "{err}"
    );
    // The same map named by the config: `config check` says so, exit 2.
    let config = h.dir.path().join("with-map.toml");
    let text = std::fs::read_to_string(&h.config).expect("config").replace(
        &format!("map = \"{}\"", sim_map(Platform::Taobao).display()),
        &format!("map = \"{}\"", bad.display()),
    );
    std::fs::write(&config, text).expect("config");
    let out = run_cli(&h, &config, &["config", "check"]);
    assert_eq!(out.status.code(), Some(2));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("key `price.markup`"), "{said}");
    // A Taobao listing to a shop without a location is refused before anything is queued.
    let config = h.dir.path().join("no-location.toml");
    let text = std::fs::read_to_string(&h.config)
        .expect("config")
        .replace("location_city = \"杭州\"\n", "");
    std::fs::write(&config, text).expect("config");
    let out = enqueue_listing_cli(&h, &config, &items, "taobao", None);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("location_city"), "{err}");
}
