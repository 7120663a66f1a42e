//! The attempt loop against a scripted fake platform: no HTTP, embedded gates, and a retry
//! backoff of at most 1 ms (`base_ms = cap_ms = 1`), so no test waits on a clock and none
//! asserts on timing. The stale test keeps its cache in an in-memory ledger.

use super::*;
use crate::clock::Clock;
use crate::link::breaker::State;
use crate::platform::Item;
use crate::throttle::Gates;
use futures::future::BoxFuture;
use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};

const TB: Platform = Platform::Taobao;

/// A platform that answers from a script, one entry per request, and counts requests.
struct Fake {
    script: Mutex<VecDeque<Result<ApiResponse, CallError>>>,
    sends: AtomicU32,
    /// With the script empty, never answer (a call stuck on the wire).
    hang: bool,
}

impl Fake {
    fn new(script: impl IntoIterator<Item = Result<ApiResponse, CallError>>) -> Arc<Fake> {
        Arc::new(Fake {
            script: Mutex::new(script.into_iter().collect()),
            sends: AtomicU32::new(0),
            hang: false,
        })
    }

    fn hanging() -> Arc<Fake> {
        Arc::new(Fake {
            script: Mutex::new(VecDeque::new()),
            sends: AtomicU32::new(0),
            hang: true,
        })
    }

    fn sends(&self) -> u32 {
        self.sends.load(Ordering::SeqCst)
    }
}

impl Transport for Fake {
    fn call<'a>(
        &'a self,
        req: &'a ApiRequest,
        _slice: Duration,
        _session: Option<&'a crate::secret::Secret>,
    ) -> BoxFuture<'a, Result<ApiResponse, CallError>> {
        self.sends.fetch_add(1, Ordering::SeqCst);
        if self.hang {
            return Box::pin(futures::future::pending());
        }
        let next = self
            .script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| panic!("the script has no answer left for {req:?}"));
        Box::pin(async move { next })
    }
}

/// A config with Taobao and generous gates; `extra` is appended (sections of its own).
fn config(extra: &str) -> Config {
    let text = format!(
        r#"
[platforms.taobao]
endpoint = "http://127.0.0.1:9/router/rest"
app_key = "10000001"
secret_env = "SYNCFLEET_TEST_UNUSED"

[gates.default]
rate = 5000
burst = 5000
concurrency = 64
max_wait_ms = 5000

{extra}
"#
    );
    let mut cfg = Config::parse(Path::new("gateway-test.toml"), &text).expect("test config");
    // Retries wait at most 1 ms: the loop's backoff path runs, nothing waits on a clock.
    cfg.link.retry.base_ms = 1;
    cfg.link.retry.cap_ms = 1;
    cfg
}

/// The test-only gateway: `fake` as Taobao's transport, embedded gates, optional ledger.
fn gateway(cfg: &Config, fake: &Arc<Fake>, store: Option<Store>) -> Gateway {
    gateway_on(cfg, fake, store, Clock::system())
}

/// [`gateway`] whose gates (and so the gateway) read the time from `clock`.
fn gateway_on(cfg: &Config, fake: &Arc<Fake>, store: Option<Store>, clock: Clock) -> Gateway {
    let pc = cfg.platform(TB).expect("taobao config");
    let mut b = Gateway::builder(cfg.link.clone(), Gates::embedded_on(cfg, clock)).transport(
        TB,
        fake.clone(),
        pc,
    );
    if let Some(s) = store {
        b = b.store(s);
    }
    b.build()
}

fn ctx() -> CallContext {
    CallContext::new(Budget::starting_now(Duration::from_secs(30)))
}

fn item_get(id: &str) -> ApiRequest {
    ApiRequest::ItemGet { item_id: id.into() }
}

fn item(id: &str) -> ApiResponse {
    ApiResponse::Item(Item {
        id: id.into(),
        title: format!("item {id}"),
        price: "9.90".into(),
        quantity: 3,
        ..Item::default()
    })
}

fn error(class: ErrorClass, code: &str, http_status: Option<u16>) -> CallError {
    CallError {
        class,
        platform: TB,
        api: Api::ItemGet,
        code: code.into(),
        message: format!("scripted {code}"),
        ban: None,
        quota_spent: false,
        app_quota: false,
        http_status,
        transport: None,
        guessed_limit: false,
        session_refused: false,
    }
}

fn bad_gateway() -> CallError {
    error(ErrorClass::Retry, "http_502", Some(502))
}

fn counters(gw: &Gateway) -> CallCounters {
    gw.snapshot().total
}

#[tokio::test]
async fn ok_is_one_send() {
    let cfg = config("");
    let fake = Fake::new([Ok(item("1"))]);
    let gw = gateway(&cfg, &fake, None);

    let reply = gw.call(TB, item_get("1"), &ctx()).await.expect("ok");

    assert_eq!(reply.response, item("1"));
    assert_eq!(reply.stale, None);
    assert_eq!(fake.sends(), 1);
    let c = counters(&gw);
    assert_eq!((c.calls, c.ok, c.attempts, c.retries), (1, 1, 1, 0));
}

/// A call cut while on the wire (its task stopped, its lease lost) still counts at the gate:
/// the platform saw it and counts it against the quota.
#[tokio::test]
async fn a_call_cut_on_the_wire_still_counts() {
    let cfg = config("");
    let fake = Fake::hanging();
    let gw = gateway(&cfg, &fake, None);
    let caller = gw.clone();
    let call = tokio::spawn(async move { caller.call(TB, item_get("1"), &ctx()).await });
    while fake.sends() == 0 {
        tokio::task::yield_now().await;
    }
    call.abort();
    assert!(call.await.is_err(), "the call was cut");
    let snap = gw
        .inner
        .gates
        .snapshot_of(TB, Api::ItemGet)
        .await
        .expect("gate state");
    assert_eq!(snap.used_today, 1);
}

#[tokio::test]
async fn retry_then_ok_is_two_sends() {
    let cfg = config("");
    let fake = Fake::new([Err(bad_gateway()), Ok(item("1"))]);
    let gw = gateway(&cfg, &fake, None);

    let reply = gw
        .call(TB, item_get("1"), &ctx())
        .await
        .expect("ok after a retry");

    assert_eq!(reply.response, item("1"));
    assert_eq!(reply.stale, None);
    assert_eq!(fake.sends(), 2);
    let c = counters(&gw);
    assert_eq!((c.calls, c.ok, c.attempts, c.retries), (1, 1, 2, 1));
}

#[tokio::test]
async fn slow_with_ban_pauses_the_gate_and_names_when_to_come_back() {
    let cfg = config("");
    let mut limited = error(ErrorClass::Slow, "7", Some(200));
    limited.ban = Some(Duration::from_secs(30));
    let fake = Fake::new([Err(limited.clone())]);
    let gw = gateway(&cfg, &fake, None);

    // The rate limit goes to the gate (a 30 s pause); the loop goes back through the gate,
    // which refuses: the call ends "paused", not failed, and says when to come back.
    let e = gw.call(TB, item_get("1"), &ctx()).await.unwrap_err();
    assert_eq!(e.kind, LinkErrorKind::Paused, "{e}");
    assert_eq!(e.class, ErrorClass::Slow);
    assert_eq!(e.attempts, 1);
    assert_eq!(e.last, Some(limited));
    let retry_at = e.retry_at.expect("retry_at");
    assert!(
        retry_at > Duration::from_secs(25) && retry_at <= Duration::from_secs(30),
        "{retry_at:?}"
    );
    assert_eq!(fake.sends(), 1);

    // The gate stays paused: the next call is refused before the wire.
    let e = gw.call(TB, item_get("2"), &ctx()).await.unwrap_err();
    assert_eq!(e.kind, LinkErrorKind::Paused, "{e}");
    assert_eq!(e.attempts, 0);
    assert_eq!(fake.sends(), 1);
    let c = counters(&gw);
    assert_eq!((c.calls, c.failed, c.refused), (2, 2, 1));
}

#[tokio::test]
async fn a_limit_guessed_from_an_unmapped_code_is_the_items_not_the_gates() {
    let cfg = config("");
    let mut worded = error(ErrorClass::Slow, "isv.item-title-exceeds", Some(200));
    worded.guessed_limit = true;
    let fake = Fake::new([Err(worded.clone()), Ok(item("2"))]);
    let gw = gateway(&cfg, &fake, None);

    // Not retried in the loop, and no "not now": the item's retry rounds bound it.
    let e = gw.call(TB, item_get("1"), &ctx()).await.unwrap_err();
    assert_eq!(e.kind, LinkErrorKind::Platform, "{e}");
    assert_eq!(e.retry_at, None, "{e}");
    assert_eq!(e.last, Some(worded));
    assert_eq!(fake.sends(), 1);
    // The gate did not take it as a limit: the next call goes straight through.
    gw.call(TB, item_get("2"), &ctx())
        .await
        .expect("the gate is open");
    assert_eq!(fake.sends(), 2);
}

#[tokio::test]
async fn fatal_is_not_retried() {
    let cfg = config("");
    let fatal = error(ErrorClass::Fatal, "isv.invalid-parameter", Some(200));
    let fake = Fake::new([Err(fatal.clone())]);
    let gw = gateway(&cfg, &fake, None);

    let e = gw.call(TB, item_get("1"), &ctx()).await.unwrap_err();

    assert_eq!(e.kind, LinkErrorKind::Platform);
    assert_eq!(e.class, ErrorClass::Fatal);
    assert_eq!(e.attempts, 1);
    assert_eq!(e.retry_at, None);
    assert_eq!(e.message, fatal.to_string());
    assert_eq!(e.last, Some(fatal));
    assert_eq!(fake.sends(), 1);
    let c = counters(&gw);
    assert_eq!((c.calls, c.caller_errors, c.failed), (1, 1, 0));
}

#[tokio::test]
async fn open_breaker_refuses_before_the_wire() {
    let cfg = config(
        "[link.retry]\nmax_attempts = 1\n\n[link.breaker]\nmin_samples = 2\nfailure_ratio = 0.5\n",
    );
    let fake = Fake::new([Err(bad_gateway()), Err(bad_gateway())]);
    let gw = gateway(&cfg, &fake, None);

    for id in ["1", "2"] {
        let e = gw.call(TB, item_get(id), &ctx()).await.unwrap_err();
        assert_eq!(e.kind, LinkErrorKind::Platform, "{e}");
        assert_eq!(e.attempts, 1);
    }
    assert!(matches!(
        gw.breaker_state(TB, Api::ItemGet),
        State::Open { .. }
    ));

    let e = gw.call(TB, item_get("3"), &ctx()).await.unwrap_err();
    assert_eq!(e.kind, LinkErrorKind::BreakerOpen, "{e}");
    assert_eq!(e.class, ErrorClass::Retry);
    assert_eq!(e.attempts, 0);
    assert!(e.retry_at.is_some_and(|d| d > Duration::ZERO), "{e:?}");
    assert_eq!(fake.sends(), 2, "the open breaker sent nothing");
    let c = counters(&gw);
    assert_eq!((c.breaker_rejects, c.refused), (1, 1));
}

/// On paused time: a tripped breaker refuses for exactly its open period, then lets a
/// probe reach the wire, and the probes' successes close it. An hour of waits runs in no
/// time, and the instants asserted are exact.
#[tokio::test(start_paused = true)]
async fn on_paused_time_an_open_breaker_probes_after_its_open_period_and_closes() {
    let cfg = config(
        "[link.retry]\nmax_attempts = 1\n\n[link.breaker]\nmin_samples = 2\nfailure_ratio = 0.5\n\
         initial_open_ms = 60000\nopen_s = 600\nclose_after = 2\n",
    );
    let fake = Fake::new([
        Err(bad_gateway()),
        Err(bad_gateway()),
        Ok(item("3")),
        Ok(item("4")),
    ]);
    let gw = gateway_on(&cfg, &fake, None, Clock::following_runtime());
    for id in ["1", "2"] {
        gw.call(TB, item_get(id), &ctx()).await.unwrap_err();
    }
    let tripped = tokio::time::Instant::now();

    // A second before the open period ends: refused, and told to come back in that second.
    tokio::time::advance(Duration::from_secs(59)).await;
    let e = gw.call(TB, item_get("3"), &ctx()).await.unwrap_err();
    assert_eq!(e.kind, LinkErrorKind::BreakerOpen, "{e}");
    assert_eq!(e.retry_at, Some(Duration::from_secs(1)), "{e:?}");
    assert_eq!(fake.sends(), 2, "nothing reached the wire while open");

    // The period over: the next calls are half-open probes; two successes close it.
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(tripped.elapsed(), Duration::from_secs(60));
    for id in ["3", "4"] {
        let reply = gw.call(TB, item_get(id), &ctx()).await.expect("probe");
        assert_eq!(reply.response, item(id));
    }
    assert_eq!(fake.sends(), 4);
    assert_eq!(gw.breaker_state(TB, Api::ItemGet), State::Closed);
}

/// On paused time: a retry sleeps its backoff on the runtime's clock (full jitter, up to its
/// ceiling), and the call's time budget is read on the same clock: a retry whose sleep the
/// budget cannot hold is not slept at all, one it can hold ends inside the budget.
#[tokio::test(start_paused = true)]
async fn on_paused_time_a_retry_sleeps_its_backoff_within_the_call_budget() {
    let mut cfg = config("");
    cfg.link.retry.base_ms = 8_000;
    cfg.link.retry.cap_ms = 8_000;
    let fake = Fake::new([Err(bad_gateway()), Ok(item("1"))]);
    let gw = gateway_on(&cfg, &fake, None, Clock::following_runtime());
    let started = tokio::time::Instant::now();
    gw.call(TB, item_get("1"), &ctx())
        .await
        .expect("ok after a retry");
    let took = started.elapsed();
    assert!(
        took <= Duration::from_secs(8),
        "the retry slept {took:?} of the runtime's clock"
    );
    assert_eq!(fake.sends(), 2);

    // A budget of 3 s, backoffs drawn up to 8 s: each call either gives up at once, or
    // sleeps less than the budget and succeeds.
    let (mut gave_up, mut retried) = (0, 0);
    for _ in 0..20 {
        let fake = Fake::new([Err(bad_gateway()), Ok(item("1"))]);
        let gw = gateway_on(&cfg, &fake, None, Clock::following_runtime());
        let short = CallContext::new(Budget::starting_now(Duration::from_secs(3)));
        let started = tokio::time::Instant::now();
        match gw.call(TB, item_get("1"), &short).await {
            Err(e) => {
                assert!(e.message.ends_with("(no budget left for a retry)"), "{e}");
                assert_eq!(
                    started.elapsed(),
                    Duration::ZERO,
                    "no sleep before giving up"
                );
                assert_eq!(fake.sends(), 1);
                gave_up += 1;
            }
            Ok(_) => {
                assert!(started.elapsed() < Duration::from_secs(3));
                retried += 1;
            }
        }
    }
    assert!(
        gave_up > 0,
        "20 draws up to 8 s, none over 3 s ({retried} retried)"
    );
}

#[tokio::test]
async fn spent_time_budget_refuses_before_the_wire() {
    let cfg = config("");
    let fake = Fake::new([]);
    let gw = gateway(&cfg, &fake, None);
    let spent = CallContext::new(Budget::starting_now(Duration::ZERO));

    let e = gw.call(TB, item_get("1"), &spent).await.unwrap_err();

    assert_eq!(e.kind, LinkErrorKind::BudgetExhausted, "{e}");
    assert_eq!(e.class, ErrorClass::Retry);
    assert_eq!(e.attempts, 0);
    assert_eq!(e.retry_at, None);
    assert_eq!(fake.sends(), 0);
    assert_eq!(counters(&gw).refused, 1);
}

#[tokio::test]
async fn spent_retry_budget_stops_the_retry() {
    let cfg = config("[link.retry]\nbudget_ratio = 0.0\nbudget_min_retries = 0\n");
    let fake = Fake::new([Err(bad_gateway())]);
    let gw = gateway(&cfg, &fake, None);

    let e = gw.call(TB, item_get("1"), &ctx()).await.unwrap_err();

    assert_eq!(e.kind, LinkErrorKind::RetryBudget, "{e}");
    assert_eq!(e.class, ErrorClass::Retry);
    assert_eq!(e.attempts, 1);
    assert!(
        e.message
            .ends_with("(retry budget spent: upstream looks sick)"),
        "{e}"
    );
    assert_eq!(e.last, Some(bad_gateway()));
    assert_eq!(fake.sends(), 1);
}

#[tokio::test]
async fn exhausted_attempts_name_the_count() {
    let cfg = config("");
    let fake = Fake::new([Err(bad_gateway()), Err(bad_gateway()), Err(bad_gateway())]);
    let gw = gateway(&cfg, &fake, None);

    let e = gw.call(TB, item_get("1"), &ctx()).await.unwrap_err();

    assert_eq!(e.kind, LinkErrorKind::Platform);
    assert_eq!(e.attempts, 3);
    assert_eq!(e.message, format!("{} (after 3 attempts)", bad_gateway()));
    assert_eq!(fake.sends(), 3);
    let c = counters(&gw);
    assert_eq!((c.attempts, c.retries, c.failed), (3, 2, 1));
}

#[tokio::test]
async fn failed_read_is_served_stale() {
    let cfg = config("[link.retry]\nmax_attempts = 1\n");
    let store = Store::connect("sqlite::memory:").await.expect("store");
    store.migrate().await.expect("migrate");
    let fake = Fake::new([Ok(item("1")), Err(bad_gateway())]);
    let gw = gateway(&cfg, &fake, Some(store));

    let fresh = gw.call(TB, item_get("1"), &ctx()).await.expect("fresh");
    assert_eq!(fresh.stale, None);

    let reply = gw
        .call(TB, item_get("1"), &ctx())
        .await
        .expect("stale answer");
    assert_eq!(reply.response, item("1"));
    let stale = reply.stale.expect("flagged stale");
    assert_eq!(
        stale.reason,
        format!(
            "taobao item_get: retry (platform): {} (after 1 attempts)",
            bad_gateway()
        )
    );
    assert!(stale.age < Duration::from_secs(60), "{stale:?}");
    assert_eq!(fake.sends(), 2);
    let c = counters(&gw);
    assert_eq!((c.calls, c.ok, c.stale, c.failed), (2, 1, 1, 0));
}

#[tokio::test]
async fn failed_write_is_never_served_stale() {
    let cfg = config("[link.retry]\nmax_attempts = 1\n");
    let store = Store::connect("sqlite::memory:").await.expect("store");
    store.migrate().await.expect("migrate");
    let fake = Fake::new([Err(bad_gateway())]);
    let gw = gateway(&cfg, &fake, Some(store));
    let add = ApiRequest::ItemAdd {
        item: Box::new(crate::fuzzing::new_item("k1")),
    };

    let e = gw.call(TB, add, &ctx()).await.unwrap_err();
    assert_eq!(e.kind, LinkErrorKind::Platform, "{e}");
    assert_eq!(fake.sends(), 1);
}

#[tokio::test]
async fn missing_client_is_fatal_and_named() {
    let cfg = config("");
    let gw = Gateway::builder(cfg.link.clone(), Gates::embedded(&cfg))
        .missing_secret(TB, "TB_SECRET")
        .build();

    let e = gw.call(TB, item_get("1"), &ctx()).await.unwrap_err();
    assert_eq!(e.kind, LinkErrorKind::MissingSecret);
    assert_eq!(e.class, ErrorClass::Fatal);
    assert!(e.message.contains("TB_SECRET"), "{e}");

    let e = gw
        .call(Platform::Jd, item_get("1"), &ctx())
        .await
        .unwrap_err();
    assert_eq!(e.kind, LinkErrorKind::NotConfigured);
    let e = gw
        .probe_call(Platform::Jd, &item_get("1"), Duration::from_secs(2))
        .await
        .unwrap_err();
    assert_eq!(e.kind, LinkErrorKind::NotConfigured);
}

/// The probe and the loop share one step, so a gate refusal maps the same way in both: a
/// token beyond the allowed wait is `RateWait` (the probe used to say `Paused`).
#[tokio::test]
async fn probe_maps_a_rate_wait_like_the_loop() {
    // One call a second, and no caller may wait for a token longer than 10 ms.
    let cfg = config(
        "[gates.\"taobao.item_get\"]\nrate = 1\nburst = 1\nconcurrency = 4\nmax_wait_ms = 10\n",
    );
    let fake = Fake::new([Ok(item("1"))]);
    let gw = gateway(&cfg, &fake, None);
    gw.call(TB, item_get("1"), &ctx()).await.expect("the burst");

    let looped = gw.call(TB, item_get("2"), &ctx()).await.unwrap_err();
    let probed = gw
        .probe_call(TB, &item_get("3"), Duration::from_secs(2))
        .await
        .unwrap_err();

    for e in [&looped, &probed] {
        assert_eq!(e.kind, LinkErrorKind::RateWait, "{e}");
        assert_eq!(e.class, ErrorClass::Slow);
        assert_eq!(e.attempts, 0);
        assert!(e.retry_at.is_some_and(|d| d > Duration::ZERO), "{e:?}");
        assert!(e.message.starts_with("rate: next token in "), "{e}");
    }
    assert_eq!(fake.sends(), 1);
}

#[tokio::test]
async fn probe_sends_past_an_open_breaker() {
    let cfg = config(
        "[link.retry]\nmax_attempts = 1\n\n[link.breaker]\nmin_samples = 2\nfailure_ratio = 0.5\n",
    );
    let fake = Fake::new([Err(bad_gateway()), Err(bad_gateway()), Ok(item("1"))]);
    let gw = gateway(&cfg, &fake, None);
    for id in ["1", "2"] {
        gw.call(TB, item_get(id), &ctx()).await.unwrap_err();
    }
    assert!(matches!(
        gw.breaker_state(TB, Api::ItemGet),
        State::Open { .. }
    ));

    let (result, _took) = gw
        .probe_call(TB, &item_get("1"), Duration::from_secs(2))
        .await
        .expect("a probe is not refused by the breaker");
    assert_eq!(result, Ok(item("1")));
    assert_eq!(fake.sends(), 3);
    // The probe's answer is not a breaker sample, and not a logical call.
    assert!(matches!(
        gw.breaker_state(TB, Api::ItemGet),
        State::Open { .. }
    ));
    assert_eq!(counters(&gw).calls, 2);
}
