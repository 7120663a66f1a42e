//! The dashboard in a real headless Chromium: during a real job against the
//! simulator the page shows progress advancing and the gate's burn chart rendered; a gate
//! change without the token is refused and leaves the ledger alone; with the token it lands
//! in `gate_changes`. Screenshots go to `target/test-artifacts/`.
//!
//! Needs Debian's `chromium` and `chromium-driver` (scripts/test installs them).

use crate::jobs_harness;
use crate::support::webdriver::Browser;

use jobs_harness::{ClientOpts, Harness};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use syncfleet::platform::{Api, Platform};
use syncfleet::sim::SimConfig;
use syncfleet::store::{ControlAction, ControlChange, JobControl};

const TOKEN: &str = "test-dashboard-token";

use crate::support::free_port;

/// A child process killed on drop.
struct Kid(Child);
impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_port(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "{what} did not listen on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn artifacts() -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-artifacts");
    std::fs::create_dir_all(&dir).expect("artifacts dir");
    dir
}

/// Poll `f` (bounded, generous) until it yields `Some`.
async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_shows_live_progress_and_guards_its_actions() {
    let _serial = jobs_harness::serial().await;
    for bin in ["/usr/bin/chromium", "/usr/bin/chromedriver"] {
        assert!(
            std::path::Path::new(bin).exists(),
            "{bin} is missing: apt-get install chromium chromium-driver (scripts/test does)"
        );
    }
    let sim = SimConfig::demo()
        .with_limit(Platform::Alibaba, Api::ItemGet, 2_000, 10_000_000)
        .with_limit(Platform::Taobao, Api::ItemAdd, 2_000, 10_000_000);
    let opts = ClientOpts {
        rate: 150.0,
        ..ClientOpts::default()
    };
    let mut h = Harness::start(sim, &opts).await;
    let job = h.enqueue_listing(3_000);
    // The job is held until the page is up: a browser that starts slowly on a loaded machine
    // must not find the job already finished (it would see no progress advance).
    control(&h, job, ControlAction::Pause).await;
    // Idle long enough that the held job's deferred tasks keep it working.
    h.spawn_worker(8, 30);

    let port = free_port();
    let _dashboard = Kid(h
        .command_with(
            &h.config,
            &["dashboard", "--listen", &format!("127.0.0.1:{port}")],
        )
        .env("SYNCFLEET_DASHBOARD_TOKEN", TOKEN)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the dashboard"));
    wait_port(port, "the dashboard");
    let driver_port = free_port();
    let _driver = Kid(Command::new("/usr/bin/chromedriver")
        .arg(format!("--port={driver_port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromedriver"));
    wait_port(driver_port, "chromedriver");
    let profile = tempfile::tempdir().expect("profile dir");
    let caps = serde_json::json!({
        "goog:chromeOptions": {
            "binary": "/usr/bin/chromium",
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-quic", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--window-size=1400,1000",
                format!("--user-data-dir={}", profile.path().display()),
            ]
        }
    });
    let browser = Browser::connect(&format!("http://127.0.0.1:{driver_port}"), caps)
        .await
        .expect("a browser session");
    browser
        .goto(&format!("http://127.0.0.1:{port}/"))
        .await
        .expect("open the page");

    // Progress advances on the page, without a reload, once the held job runs; the job is
    // held again while the rest of the page is checked, so it cannot end meanwhile.
    let done_cell = format!("tr[data-job='{job}'] td.done");
    let read_done = || async {
        let el = browser.find_css(&done_cell).await.ok()?;
        let text = el.text().await.ok()?;
        text.replace([',', '\u{a0}', ' '], "").parse::<u64>().ok()
    };
    let held = eventually("the held job's done count on the page", || async {
        read_done().await
    })
    .await;
    assert_eq!(held, 0, "the job ran while paused");
    control(&h, job, ControlAction::Resume).await;
    let advanced = eventually("the done count to advance", || async {
        read_done().await.filter(|n| *n > held)
    })
    .await;
    control(&h, job, ControlAction::Pause).await;
    assert!(advanced < 3_000, "the job ended before it was held again");
    // The job's row names its shop and lane.
    let row = browser
        .find_css(&format!("tr[data-job='{job}']"))
        .await
        .expect("the job's row")
        .text()
        .await
        .expect("the row's text");
    assert!(
        row.contains("taobao/default") && row.contains("bulk"),
        "the job's row: {row}"
    );
    // Usefulness follows the done items while the job runs, not only at each task's end.
    let useful = eventually("useful item_add calls on the page", || async {
        calls_row(&browser, "taobao.item_add")
            .await
            .filter(|(_, useful)| *useful > 0)
    })
    .await;
    assert!(
        useful.1 <= useful.0,
        "useful {} > calls {}",
        useful.1,
        useful.0
    );
    // The gate's burn chart renders (an SVG image with a size).
    let width = eventually("the burn chart", || async {
        let v = browser
            .execute(
                "const i = document.querySelector('img.burn'); return i && i.complete ? i.naturalWidth : 0;",
                vec![],
            )
            .await
            .ok()?;
        v.as_u64().filter(|w| *w > 0)
    })
    .await;
    assert!(width >= 100, "chart width {width}");
    let shot = browser.screenshot().await.expect("screenshot");
    std::fs::write(artifacts().join("dashboard-progress.png"), shot).expect("save screenshot");

    // A gate change without the token is refused and changes nothing.
    for (id, value) in [
        ("gate", "taobao.item_add"),
        ("rate", "120"),
        ("why", "dashboard test"),
    ] {
        browser
            .find_id(id)
            .await
            .expect(id)
            .send_keys(value)
            .await
            .expect("type");
    }
    let status = || async {
        let v = browser
            .execute(
                "return document.getElementById('result').dataset.status || '';",
                vec![],
            )
            .await
            .ok()?;
        v.as_str().filter(|s| !s.is_empty()).map(str::to_string)
    };
    browser
        .find_id("setgate")
        .await
        .expect("button")
        .click()
        .await
        .expect("click");
    let refused = eventually("the refusal", status).await;
    assert_eq!(refused, "401");
    assert!(
        h.store
            .gate_changes(10)
            .await
            .expect("gate changes")
            .is_empty(),
        "a refused action changed the ledger"
    );
    // With the token it is done and recorded like the CLI's.
    browser
        .execute(
            "document.getElementById('result').dataset.status = '';",
            vec![],
        )
        .await
        .expect("reset");
    browser
        .find_id("token")
        .await
        .expect("token field")
        .send_keys(TOKEN)
        .await
        .expect("type token");
    browser
        .find_id("setgate")
        .await
        .expect("button")
        .click()
        .await
        .expect("click");
    let ok = eventually("the action", status).await;
    assert_eq!(ok, "200");
    let changes = h.store.gate_changes(10).await.expect("gate changes");
    assert_eq!(changes.len(), 1, "{changes:?}");
    let (_, change) = &changes[0];
    assert_eq!(
        (change.who.as_str(), change.why.as_str(), change.new_rate),
        ("dashboard", "dashboard test", 120.0)
    );
    // Job control from the page: resume the held job, pause it, resume it, each seen in the
    // ledger.
    for (action, expect) in [
        ("resume", None),
        ("pause", Some(JobControl::Paused)),
        ("resume", None),
    ] {
        browser
            .execute(
                &format!(
                    "document.getElementById('result').dataset.status = ''; \
                     document.getElementById('job').value = '{job}'; \
                     document.getElementById('control').value = '{action}';"
                ),
                vec![],
            )
            .await
            .expect("fill the job action");
        browser
            .find_id("jobctl")
            .await
            .expect("button")
            .click()
            .await
            .expect("click");
        let ok = eventually("the job action", status).await;
        assert_eq!(ok, "200", "{action}");
        assert_eq!(h.store.job_control(job).await.expect("control"), expect);
    }
    // A record quarantined shows on the page; given-up hooks are sent again from it.
    h.store
        .quarantine(&[syncfleet::store::Quarantined {
            source: "order".into(),
            platform: Platform::Taobao,
            record_id: "4242".into(),
            shop: "default".into(),
            reason: "`modified` missing or unreadable".into(),
            raw: "{}".into(),
        }])
        .await
        .expect("quarantine");
    let shown = eventually("the quarantine on the page", || async {
        let text = browser
            .find_id("quarantine")
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        text.contains("1 order").then_some(text)
    })
    .await;
    assert!(shown.contains("hooks given up"), "{shown}");
    browser
        .execute(
            "document.getElementById('result').dataset.status = ''; \
             document.getElementById('job').value = '';",
            vec![],
        )
        .await
        .expect("clear");
    browser
        .find_id("resendhooks")
        .await
        .expect("button")
        .click()
        .await
        .expect("click");
    assert_eq!(eventually("the resend", status).await, "200");
    let shot = browser.screenshot().await.expect("screenshot");
    std::fs::write(artifacts().join("dashboard-action.png"), shot).expect("save screenshot");

    // Once the job is done: useful item_add calls are the done items, and the burn chart
    // ends at the gate's calls today as the page shows them.
    let done = h
        .wait_job(job, Duration::from_secs(120))
        .await
        .job
        .counts
        .done;
    eventually("useful to reach the done items", || async {
        calls_row(&browser, "taobao.item_add")
            .await
            .filter(|(_, useful)| *useful == done)
    })
    .await;
    let (today, charted) = eventually("the chart to end at the calls today", || async {
        let today = gate_calls_today(&browser, "taobao.item_add").await?;
        let charted = chart_total(&browser, "taobao", "item_add").await?;
        (today == charted && today > 0).then_some((today, charted))
    })
    .await;
    println!("calls today {today}, charted {charted}, done {done}");
    let shot = browser.screenshot().await.expect("screenshot");
    std::fs::write(artifacts().join("dashboard-done.png"), shot).expect("save screenshot");
    browser.close().await.expect("close the browser");
}

/// Pause or resume `job` as an operator would, asserting that it took.
async fn control(h: &Harness, job: i64, action: ControlAction) {
    let change = h.store.control_job(job, action).await.expect("job control");
    assert!(
        matches!(change, ControlChange::Done { .. }),
        "{action:?} job {job}: {change:?}"
    );
}

/// The digits of a number as the page formats it (`3,000`).
fn digits(v: &serde_json::Value) -> Option<u64> {
    let s: String = v.as_str()?.chars().filter(char::is_ascii_digit).collect();
    s.parse().ok()
}

/// (calls, useful) of `api` (`platform.api`) in the page's calls table.
async fn calls_row(browser: &Browser, api: &str) -> Option<(u64, u64)> {
    let v = browser
        .execute(
            "for (const r of document.getElementById('calls').tBodies[0].rows) {                if (r.cells[0].textContent === arguments[0])                  return [r.cells[1].textContent, r.cells[2].textContent]; } return null;",
            vec![serde_json::json!(api)],
        )
        .await
        .ok()?;
    let a = v.as_array()?;
    Some((digits(a.first()?)?, digits(a.get(1)?)?))
}

/// The "calls today" of gate `api` in the page's gates table.
async fn gate_calls_today(browser: &Browser, api: &str) -> Option<u64> {
    let v = browser
        .execute(
            "for (const r of document.getElementById('gates').tBodies[0].rows) {                if (r.cells[0].textContent.startsWith(arguments[0]))                  return r.cells[6].textContent; } return null;",
            vec![serde_json::json!(api)],
        )
        .await
        .ok()?;
    digits(&v)
}

/// The last point of the gate's burn chart, from the chart's own title
/// ("taobao.item_add: N calls today"), fetched as the page's image is.
async fn chart_total(browser: &Browser, platform: &str, api: &str) -> Option<u64> {
    let v = browser
        .execute(
            "const x = new XMLHttpRequest();              x.open('GET', `/chart/burn.svg?platform=${arguments[0]}&api=${arguments[1]}`, false);              x.send(); return x.responseText;",
            vec![serde_json::json!(platform), serde_json::json!(api)],
        )
        .await
        .ok()?;
    let svg = v.as_str()?;
    let end = svg.find(" calls today")?;
    let start = svg[..end].rfind(": ")? + 2;
    svg[start..end].parse().ok()
}
