//! Continuous sync in tests and benchmarks: waiting for a schedule's runs, checking the ledger
//! against the simulator's live orders, and a completion hook receiver on loopback.

use super::Harness;
use chrono::{DateTime, Utc};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use syncfleet::platform::Platform;
use syncfleet::store::RunOutcome;

impl Harness {
    /// `schedule add orders` for shop `s1` of `platform`, its coverage starting 5 s ago, a
    /// tick every `every` (`lag` and `overlap` as the CLI takes them); returns its id.
    pub async fn add_order_schedule(
        &self,
        platform: &str,
        every: &str,
        lag: &str,
        overlap: &str,
    ) -> i64 {
        self.add_order_schedule_of(platform, "s1", every, lag, overlap)
            .await
    }

    /// [`Harness::add_order_schedule`] for shop `shop`.
    pub async fn add_order_schedule_of(
        &self,
        platform: &str,
        shop: &str,
        every: &str,
        lag: &str,
        overlap: &str,
    ) -> i64 {
        let since = (Utc::now() - chrono::Duration::seconds(5)).to_rfc3339();
        self.add_order_schedule_since(platform, shop, every, lag, overlap, Some(&since))
            .await
    }

    /// `schedule add orders` for `shop`, from `since` (the host's clock), or when `None` from
    /// the schedule's own start (the clocks it trusts decide it); returns its id.
    pub async fn add_order_schedule_since(
        &self,
        platform: &str,
        shop: &str,
        every: &str,
        lag: &str,
        overlap: &str,
        since: Option<&str>,
    ) -> i64 {
        let mut args = vec![
            "schedule",
            "add",
            "orders",
            "--platform",
            platform,
            "--shop",
            shop,
            "--every",
            every,
            "--lag",
            lag,
            "--overlap",
            overlap,
        ];
        if let Some(since) = since {
            args.extend(["--since", since]);
        }
        let out = self.run(&args);
        assert!(
            out.status.success(),
            "schedule add: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let all = self.store.schedules().await.expect("schedules");
        all.last().expect("the schedule").schedule.id
    }

    /// `schedule ACTION ID` (pause, resume, remove), asserting it succeeded.
    pub fn schedule_action(&self, action: &str, id: i64) {
        let out = self.run(&["schedule", action, &id.to_string()]);
        assert!(
            out.status.success(),
            "schedule {action}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Wait (bounded) until no run of schedule `id` is started or queued.
    pub async fn wait_runs_settled(&self, id: i64, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let runs = self.store.schedule_runs(id, 100_000).await.expect("runs");
            if runs
                .iter()
                .all(|r| !matches!(r.outcome, RunOutcome::Started | RunOutcome::Queued))
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the runs of schedule {id} never settled"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The simulator's live orders of the app's own session on `platform` whose last change
    /// is in `[from, before)`: how many, and those the ledger does not hold at that state.
    pub async fn orders_behind(
        &self,
        platform: Platform,
        from: Option<DateTime<Utc>>,
        before: DateTime<Utc>,
    ) -> (usize, Vec<u64>) {
        self.orders_behind_of(platform, "", from, before).await
    }

    /// Assert that every live order of `platform` whose last change is before `watermark` is
    /// in the ledger at that state, and that at least `at_least` were checked.
    pub async fn assert_caught_up(
        &self,
        platform: Platform,
        watermark: DateTime<Utc>,
        at_least: usize,
    ) {
        let (checked, behind) = self.orders_behind(platform, None, watermark).await;
        assert!(
            behind.is_empty(),
            "orders not at their last state: {behind:?}"
        );
        assert!(checked >= at_least, "{checked} orders checked");
    }

    /// [`Harness::orders_behind`] for the simulator's shop `sim_shop` (`""`: the app's own
    /// session).
    pub async fn orders_behind_of(
        &self,
        platform: Platform,
        sim_shop: &str,
        from: Option<DateTime<Utc>>,
        before: DateTime<Utc>,
    ) -> (usize, Vec<u64>) {
        let app_key = self
            .sim
            .config()
            .apps
            .iter()
            .find(|a| a.platform == platform)
            .expect("an app of the platform")
            .app_key
            .clone();
        let mut checked = 0;
        let mut behind = Vec::new();
        for o in
            self.sim
                .live_orders_changed_since(platform, &app_key, sim_shop, from, self.sim.now())
        {
            let Some((at, status)) = o
                .changes
                .last()
                .filter(|(at, _)| *at < before && from.is_none_or(|f| *at >= f))
            else {
                continue;
            };
            checked += 1;
            let stored = self
                .store
                .get_order(platform, &o.id.to_string())
                .await
                .expect("read order");
            // The state's own time: an order list's `modified`, or the publication time of
            // the message that brought it (the simulator publishes at the change).
            if stored.is_none_or(|s| s.status_at != *at || &s.order.status != status) {
                behind.push(o.id);
            }
        }
        (checked, behind)
    }

    /// Post completion hooks to `url`, signed with `key` (appended to the harness config).
    pub fn add_hooks(&mut self, url: &str, key: &str, extra: &str) {
        let text = std::fs::read_to_string(&self.config).expect("config");
        std::fs::write(
            &self.config,
            format!(
                "{text}\n[hooks]\nurl = \"{url}\"\nsecret_env = \"SF_JOBTEST_HOOK_KEY\"\n{extra}"
            ),
        )
        .expect("config");
        self.env.push(("SF_JOBTEST_HOOK_KEY".into(), key.into()));
    }
}

/// Every POST a [`hook_receiver`] got: its delivery id and whether its signature was right.
pub type HookPosts = Arc<Mutex<Vec<(String, bool)>>>;

/// A completion hook receiver on loopback: records each POST's delivery id and whether its
/// `X-Syncfleet-Signature` is the body's HMAC-SHA256 under `key`; answers 503 to the first
/// `fail_first` POSTs, then 200. Returns its URL.
pub async fn hook_receiver(key: &'static str, fail_first: usize) -> (String, HookPosts) {
    let (url, posts, _down) = hook_receiver_switched(key, fail_first).await;
    (url, posts)
}

/// [`hook_receiver`] that also answers 503 while the returned switch is on (a receiver down).
pub async fn hook_receiver_switched(
    key: &'static str,
    fail_first: usize,
) -> (String, HookPosts, Arc<std::sync::atomic::AtomicBool>) {
    use hmac::{Hmac, Mac};
    use std::sync::atomic::{AtomicBool, Ordering};
    let down = Arc::new(AtomicBool::new(false));
    let is_down = down.clone();
    let got: HookPosts = Arc::default();
    let sink = got.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(
            move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let header = |k: &str| {
                    headers
                        .get(k)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_string()
                };
                let mut mac =
                    Hmac::<sha2::Sha256>::new_from_slice(key.as_bytes()).expect("any key length");
                mac.update(&body);
                let want = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
                let mut got = sink.lock().expect("lock");
                got.push((
                    header("x-syncfleet-delivery"),
                    header("x-syncfleet-signature") == want,
                ));
                let status = if got.len() <= fail_first || is_down.load(Ordering::SeqCst) {
                    axum::http::StatusCode::SERVICE_UNAVAILABLE
                } else {
                    axum::http::StatusCode::OK
                };
                async move { status }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the hook receiver");
    let url = format!(
        "http://{}/hook",
        listener.local_addr().expect("its address")
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, got, down)
}
