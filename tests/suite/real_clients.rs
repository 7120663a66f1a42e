//! The simulator held to clients no one here wrote: TOP's and JD's own Python SDKs (`topsdk`,
//! `jd-sdk` from PyPI) sign and send the order list, the trace and an error call each
//! (tests/support/real_clients.py), and what the simulator answers is checked here.
//! The SDKs live in `SYNCFLEET_PY_SDKS` (a PYTHONPATH directory), which scripts/test fills.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;
use syncfleet::platform::{Api, Platform};
use syncfleet::sim::{self, SimConfig, SimHandle};

const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

/// The installed SDKs; a missing install fails the test (never a silent skip).
fn sdk_dir() -> PathBuf {
    let dir = std::env::var_os("SYNCFLEET_PY_SDKS").unwrap_or_else(|| {
        panic!(
            "SYNCFLEET_PY_SDKS is unset: run scripts/test, which installs jd-sdk==1.1.1 and \
             topsdk==20.4.21.40 into target/py-sdks (or point SYNCFLEET_PY_SDKS at a \
             directory holding them)"
        )
    });
    let dir = PathBuf::from(dir);
    for sdk in ["jd/api/base.py", "top/api/base.py"] {
        assert!(
            dir.join(sdk).is_file(),
            "{} has no {sdk}: run scripts/test, which installs jd-sdk==1.1.1 and \
             topsdk==20.4.21.40 there",
            dir.display()
        );
    }
    dir
}

/// (env prefix, platform) of the apps the script signs as.
const APPS: [(&str, Platform); 2] = [("TOP", Platform::Taobao), ("JD", Platform::Jd)];

/// Run the script against `sim`; its lines, parsed.
async fn run_script(sim: &SimHandle, sdks: &Path) -> Vec<Value> {
    let base = sim.base_url();
    let authority = base
        .strip_prefix("http://")
        .unwrap_or_else(|| panic!("base url {base}"));
    let (host, port) = authority
        .rsplit_once(':')
        .unwrap_or_else(|| panic!("base url {base}"));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/real_clients.py");
    let mut cmd = tokio::process::Command::new("python3");
    cmd.arg(&script)
        .env("PYTHONPATH", sdks)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        // China Standard Time (POSIX form, no tzdata needed), as where the SDKs run: JD's
        // SDK stamps its local time with its offset.
        .env("TZ", "CST-8")
        .env("SIM_HOST", host)
        .env("SIM_PORT", port)
        .kill_on_drop(true);
    for (prefix, p) in APPS {
        let app = sim.config().app(p).expect("the simulator has a demo app");
        cmd.env(format!("{prefix}_APP_KEY"), &app.app_key)
            .env(format!("{prefix}_SECRET"), app.secret.expose())
            .env(format!("{prefix}_SESSION"), app.session.expose());
    }
    let out = tokio::time::timeout(SCRIPT_TIMEOUT, cmd.output())
        .await
        .unwrap_or_else(|_| panic!("{} ran over {SCRIPT_TIMEOUT:?}", script.display()))
        .expect("python3 runs (scripts/test installs it)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{} failed ({}):\n{stdout}\n{stderr}",
        script.display(),
        out.status
    );
    // Shown with --nocapture, and by the harness when the test fails.
    eprintln!("{stdout}{stderr}");
    stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("line `{l}` is not JSON: {e}")))
        .collect()
}

/// The `n`th call (0-based) of `platform` to `method`; its response, or the failure.
fn outcome<'a>(
    lines: &'a [Value],
    platform: &str,
    method: &str,
    n: usize,
) -> Result<&'a Value, &'a Value> {
    let line = lines
        .iter()
        .filter(|l| l["platform"] == platform && l["method"] == method)
        .nth(n)
        .unwrap_or_else(|| panic!("no call #{n} of {platform} {method} in {lines:#?}"));
    match (line.get("response"), line.get("error")) {
        (Some(r), None) => Ok(r),
        (None, Some(e)) => Err(e),
        _ => panic!("neither response nor error: {line}"),
    }
}

fn response<'a>(lines: &'a [Value], platform: &str, method: &str, n: usize) -> &'a Value {
    outcome(lines, platform, method, n)
        .unwrap_or_else(|e| panic!("{platform} {method} #{n} failed: {e}"))
}

fn error<'a>(lines: &'a [Value], platform: &str, method: &str, n: usize) -> &'a Value {
    match outcome(lines, platform, method, n) {
        Ok(r) => panic!("{platform} {method} #{n} must fail, answered {r}"),
        Err(e) => e,
    }
}

#[tokio::test]
async fn the_platforms_own_sdks_are_answered() {
    let sdks = sdk_dir();
    let sim = sim::spawn(
        SimConfig::demo().with_all_limits(10_000, 10_000_000),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .expect("simulator starts");
    let lines = run_script(&sim, &sdks).await;

    // TOP: the order page, with only the fields asked for.
    let orders = "taobao.trades.sold.increment.get";
    let page = &response(&lines, "taobao", orders, 0)["trades_sold_increment_get_response"];
    assert!(
        page["total_results"].as_u64().is_some_and(|n| n > 0),
        "{page}"
    );
    let trades = page["trades"]["trade"].as_array().expect("trades.trade");
    assert!(!trades.is_empty(), "{page}");
    for t in trades {
        let keys: Vec<&str> = t
            .as_object()
            .expect("a trade")
            .keys()
            .map(|k| k.as_str())
            .collect();
        for f in ["tid", "status", "modified", "payment"] {
            assert!(keys.contains(&f), "{f} in {t}");
        }
        assert_eq!(keys.len(), 4, "only the fields asked for: {t}");
    }
    let trace = &response(&lines, "taobao", "taobao.logistics.trace.search", 0)
        ["logistics_trace_search_response"];
    assert!(trace["trace_list"].is_object(), "{trace}");
    // Without `fields`: missing required arguments.
    let e = error(&lines, "taobao", orders, 1);
    assert_eq!(e["code"], 40, "{e}");

    // JD: the order page with waybills, the waybill's trace, a wrong secret.
    let orders = "jingdong.pop.order.search";
    let page = &response(&lines, "jd", orders, 0)["jingdong_pop_order_search_responce"];
    let list = page["searchorderinfo_result"]["orderInfoList"]
        .as_array()
        .unwrap_or_else(|| panic!("orderInfoList in {page}"));
    assert!(!list.is_empty(), "{page}");
    assert!(
        list.iter()
            .any(|o| o["waybill"].as_str().is_some_and(|w| !w.is_empty())),
        "a shipped order carries its waybill: {page}"
    );
    let trace =
        &response(&lines, "jd", "jingdong.etms.trace.get", 0)["jingdong_etms_trace_get_responce"];
    assert!(
        trace["trace_api_dtos"]
            .as_array()
            .is_some_and(|a| !a.is_empty()),
        "{trace}"
    );
    let e = error(&lines, "jd", orders, 1);
    assert_eq!(e["code"], "12", "{e}");

    // The simulator counted each call against its API: two order lists (one refused) and
    // one trace per platform.
    let stats = sim.stats();
    for p in [Platform::Taobao, Platform::Jd] {
        let list = stats
            .for_platform(p, Api::OrderList)
            .expect("order list stats");
        assert_eq!((list.calls, list.ok), (2, 1), "{p}: {list:?}");
        let trace = stats
            .for_platform(p, Api::LogisticsTrace)
            .expect("trace stats");
        assert_eq!((trace.calls, trace.ok), (1, 1), "{p}: {trace:?}");
    }
    assert_eq!(stats.totals.unattributed, 0, "{:?}", stats.totals);
}
