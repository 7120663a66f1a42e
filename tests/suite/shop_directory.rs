//! Shops in the ledger (docs/design.md, "Shops in the ledger", "Onboarding a seller", "Tokens
//! at rest"), against worker processes, the dashboard and the simulator's authorisation
//! pages and token services: a seller onboarded through OAuth (the dashboard's callback, and
//! the CLI's `shop authorize`) and a shop added with `shop add` are served by workers that
//! were running before, with no restart; a removed shop is no longer called; the ledger file
//! holds no token in the clear; a key rotation (`shop rekey`) keeps every shop running on
//! workers that hold only the new key.

use crate::jobs_harness::{self, shop_session_env, ClientOpts, Harness};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use syncfleet::platform::{Api, Platform};
use syncfleet::store::JobState;

const OLD_KEY: &str = "1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f";
const NEW_KEY: &str = "2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e";
const DASHBOARD_TOKEN: &str = "dash-t0ken";
const WAIT: Duration = Duration::from_secs(120);

use crate::support::free_port;

/// The harness's config with Taobao's authorisation page on the simulator and its callback
/// on the dashboard at `port`.
fn onboarding_config(h: &Harness, port: u16) -> std::path::PathBuf {
    let text = std::fs::read_to_string(&h.config).expect("config");
    let base = h.sim.base_url();
    let text = text.replacen(
        "[platforms.taobao]\n",
        &format!(
            "[platforms.taobao]\nauthorize_url = \"{base}/authorize\"\n\
             redirect_uri = \"http://127.0.0.1:{port}/oauth/callback\"\n"
        ),
        1,
    );
    let path = h.dir.path().join("onboarding.toml");
    std::fs::write(&path, text).expect("write config");
    path
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// The seller's browser at the platform's authorisation page: logged in as `seller`, it
/// agrees, and the page sends it back to the app's callback. Returns that address.
async fn seller_agrees(http: &reqwest::Client, link: &str, seller: &str) -> String {
    let r = http
        .get(format!("{link}&seller={seller}"))
        .send()
        .await
        .expect("the authorisation page");
    assert_eq!(r.status().as_u16(), 302, "{:?}", r.text().await);
    r.headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .expect("a redirect")
        .to_string()
}

fn query_value(url: &str, key: &str) -> String {
    let q = url.split_once('?').expect("a query").1;
    serde_urlencoded::from_str::<Vec<(String, String)>>(q)
        .expect("query")
        .into_iter()
        .find(|(k, _)| k == key)
        .unwrap_or_else(|| panic!("no {key} in {url}"))
        .1
}

fn start_dashboard(h: &Harness, config: &std::path::Path, port: u16) -> Child {
    let listen = format!("127.0.0.1:{port}");
    h.command_with(config, &["dashboard", "--listen", &listen])
        .env("SYNCFLEET_DASHBOARD_TOKEN", DASHBOARD_TOKEN)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the dashboard")
}

async fn post_json(
    http: &reqwest::Client,
    port: u16,
    path: &str,
    body: serde_json::Value,
) -> reqwest::Response {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = http
            .post(format!("http://127.0.0.1:{port}{path}"))
            .bearer_auth(DASHBOARD_TOKEN)
            .json(&body)
            .send()
            .await;
        if let Ok(r) = r {
            return r;
        }
        assert!(Instant::now() < deadline, "the dashboard never answered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Enqueue a listing of catalog items `from..from+n` to `shop` (a listing is made once per
/// item and shop: each job takes items of its own).
fn list_to(h: &Harness, config: &std::path::Path, shop: &str, from: u64, n: u64) -> i64 {
    let path = h.dir.path().join(format!("items-{shop}-{from}.txt"));
    let text: String = (from..from + n).map(|i| format!("{i}\n")).collect();
    std::fs::write(&path, text).expect("write items");
    let items = path.to_str().expect("utf-8 path");
    h.enqueue_with(
        config,
        &[
            "listing",
            "--from",
            "alibaba",
            "--to",
            "taobao",
            "--items",
            items,
            "--to-shop",
            shop,
        ],
    )
}

fn item_adds(h: &Harness, shop: &str) -> u64 {
    h.sim
        .stats()
        .for_shop(Platform::Taobao, shop, Api::ItemAdd)
        .map_or(0, |s| s.ok)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shops_added_while_the_fleet_runs_are_served_and_removed_ones_are_not() {
    let _serial = jobs_harness::serial().await;
    let sim = jobs_harness::listing_sim().with_shops(Platform::Taobao, &["beta"]);
    let opts = ClientOpts {
        renew_tokens_every_ms: Some(1000),
        ..ClientOpts::default()
    };
    let mut h = Harness::start(sim, &opts).await;
    h.env
        .push(("SYNCFLEET_TOKEN_KEY".into(), OLD_KEY.to_string()));
    let port = free_port();
    let config = onboarding_config(&h, port);
    // Two workers running before any shop of the ledger exists.
    let first = [
        h.spawn_worker_with(&config, 4, 600),
        h.spawn_worker_with(&config, 4, 600),
    ];
    let mut dashboard = start_dashboard(&h, &config, port);
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");

    // 1. A seller onboarded through the dashboard: the operator asks for a link, the seller
    // agrees on the platform's page, the platform sends the browser to the callback.
    let r = post_json(
        &http,
        port,
        "/api/actions/shop-link",
        serde_json::json!({"platform": "taobao", "shop": "acme"}),
    )
    .await;
    assert!(r.status().is_success(), "{:?}", r.text().await);
    let link = r.json::<serde_json::Value>().await.expect("json")["url"]
        .as_str()
        .expect("url")
        .to_string();
    assert!(
        link.starts_with(&format!(
            "{}/authorize?response_type=code&client_id=",
            h.sim.base_url()
        )),
        "{link}"
    );
    let callback = seller_agrees(&http, &link, "acme").await;
    assert!(
        callback.starts_with(&format!("http://127.0.0.1:{port}/oauth/callback?code=")),
        "{callback}"
    );
    // A forged state is refused, and adds nothing.
    let forged = callback.replace("acme", "evil");
    let r = http.get(&forged).send().await.expect("callback");
    assert_eq!(r.status().as_u16(), 400, "{:?}", r.text().await);
    let r = http.get(&callback).send().await.expect("callback");
    let page = r.text().await.expect("page");
    assert!(page.contains("Shop acme on taobao is added"), "{page}");
    // The code is single use: the same callback again is refused by the platform.
    let r = http.get(&callback).send().await.expect("callback");
    assert_eq!(r.status().as_u16(), 400);
    assert_eq!(
        h.sim.stats().tokens_of(Platform::Taobao, "acme").authorized,
        1
    );

    // 2. A seller onboarded with the CLI: a link, the seller agrees, the code pasted in.
    let out = h.run_with(
        &config,
        &["shop", "authorize-url", "--platform", "taobao"],
        WAIT,
    );
    let link = stdout(&out).trim().to_string();
    let back = seller_agrees(&http, &link, "gamma").await;
    let (code, state) = (query_value(&back, "code"), query_value(&back, "state"));
    let out = h.run_with(
        &config,
        &[
            "shop",
            "authorize",
            "--platform",
            "taobao",
            "--code",
            &code,
            "--state",
            &state,
        ],
        WAIT,
    );
    // No shop name chosen: the seller's own name (TOP `taobao_user_nick`).
    assert!(
        stdout(&out).contains("shop gamma on taobao: added"),
        "{}",
        stdout(&out)
    );
    // Without the callback the code was issued for, TOP refuses the exchange: refused here,
    // before a code is spent on it (exit 2, naming the key).
    let out = jobs_harness::output_within(
        h.command_with(
            &h.config,
            &[
                "shop",
                "authorize",
                "--platform",
                "taobao",
                "--code",
                "c0de",
            ],
        ),
        WAIT,
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("redirect_uri"), "{said}");

    // 3. A shop added with tokens the operator holds.
    let beta_var = shop_session_env("beta");
    let out = h.run_with(
        &config,
        &[
            "shop",
            "add",
            "beta",
            "--platform",
            "taobao",
            "--session-env",
            &beta_var,
            "--weight",
            "2",
        ],
        WAIT,
    );
    assert!(
        stdout(&out).contains("shop beta on taobao: added"),
        "{}",
        stdout(&out)
    );
    let out = h.run_with(&config, &["shop", "list"], WAIT);
    for shop in ["acme", "beta", "gamma"] {
        assert!(stdout(&out).contains(shop), "{}", stdout(&out));
    }

    // The running workers serve all three, each under its own token as the platform counts.
    let jobs: Vec<(i64, &str)> = ["acme", "beta", "gamma"]
        .into_iter()
        .map(|shop| (list_to(&h, &config, shop, 1, 30), shop))
        .collect();
    for (job, shop) in &jobs {
        let st = h.wait_job(*job, WAIT).await;
        assert_eq!(
            st.job.counts.done,
            30,
            "{shop}: {st:?}\n{}",
            h.worker_warnings()
        );
        assert_eq!(
            item_adds(&h, shop),
            30,
            "{shop}: the platform counted its calls"
        );
    }

    // Nothing in the ledger file reads as a token: not the session the operator gave, not
    // the ones the platform issued (the simulator's tokens start `sim-taobao-token-`).
    let ledger = h.dir.path().join("ledger.db");
    let mut bytes = Vec::new();
    for f in ["ledger.db", "ledger.db-wal"] {
        if let Ok(b) = std::fs::read(h.dir.path().join(f)) {
            bytes.extend(b);
        }
    }
    assert!(ledger.exists());
    let text = String::from_utf8_lossy(&bytes);
    // The session the harness gave `shop add` (the simulator's for beta).
    let beta_session = h
        .sim
        .config()
        .apps
        .iter()
        .find_map(|a| a.shop_session("beta").map(|s| s.expose().to_string()))
        .expect("beta's session");
    // What was read holds the ledger's rows (the check could see a token if one were there).
    assert!(
        text.contains("gamma") && text.contains("beta"),
        "the ledger's rows were read"
    );
    assert!(!text.contains(&beta_session), "beta's session in the clear");
    assert!(
        !text.contains("sim-taobao-token-"),
        "an issued token in the clear"
    );
    assert!(
        !text.contains("sim-taobao-refresh-"),
        "a refresh token in the clear"
    );

    // 4. A removed shop is no longer called. Its job waits; another shop's job enqueued
    // after it finishes meanwhile, so the workers had every chance to call for it.
    let r = post_json(
        &http,
        port,
        "/api/actions/shop",
        serde_json::json!({"platform": "taobao", "shop": "gamma", "action": "remove"}),
    )
    .await;
    assert!(r.status().is_success(), "{:?}", r.text().await);
    let before = item_adds(&h, "gamma");
    let held = list_to(&h, &config, "gamma", 100, 30);
    let after = list_to(&h, &config, "acme", 100, 30);
    assert_eq!(h.wait_job(after, WAIT).await.job.counts.done, 30);
    let st = h.store.job_status(held).await.expect("status");
    assert_eq!(st.job.counts.done, 0, "{st:?}");
    assert_eq!(item_adds(&h, "gamma"), before, "a removed shop was called");
    h.run_with(&config, &["job", "cancel", &held.to_string()], WAIT);
    let _ = dashboard.kill();
    let _ = dashboard.wait();

    // 5. Key rotation: workers with the new key first and the old one after it replace the
    // first ones, the rekey seals every shop under the new key, and a worker holding only
    // the new key serves every shop.
    let both = format!("{NEW_KEY},{OLD_KEY}");
    let second = h.spawn_worker_args(&config, 4, 600, &[], &[("SYNCFLEET_TOKEN_KEY", &both)]);
    for pid in first {
        h.kill_worker(pid);
    }
    let out = h.run_with(&config, &["shop", "rekey"], WAIT);
    assert!(
        stdout(&out).contains("rekey: 0 shop(s)"),
        "the old key alone seals nothing new: {}",
        stdout(&out)
    );
    let mut cmd = h.command_with(&config, &["shop", "rekey"]);
    cmd.env("SYNCFLEET_TOKEN_KEY", &both);
    let out = jobs_harness::output_within(cmd, WAIT);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout(&out).contains("rekey: 2 shop(s) sealed"),
        "{}",
        stdout(&out)
    );
    let last = h.spawn_worker_args(&config, 4, 600, &[], &[("SYNCFLEET_TOKEN_KEY", NEW_KEY)]);
    h.kill_worker(second);
    for shop in ["acme", "beta"] {
        let before = item_adds(&h, shop);
        let job = list_to(&h, &config, shop, 200, 20);
        let st = h.wait_job(job, WAIT).await;
        assert_eq!(st.job.state, JobState::Finished);
        assert_eq!(
            st.job.counts.done,
            20,
            "{shop}: {st:?}\n{}",
            h.worker_warnings()
        );
        assert_eq!(item_adds(&h, shop), before + 20, "{shop}");
    }
    assert!(h.worker_running(last), "{}", h.worker_warnings());
}
