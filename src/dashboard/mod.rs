//! `syncfleet dashboard`: one page an operator reads at a glance, updated live — jobs with
//! progress, rate, ETA, items by status and top failure reasons; gates (configured vs adaptive
//! rate, ceiling, pause, today's burn curve); calls vs useful per API; live workers; queue
//! depth and dead letters. Built from the ledger and Redis only (in embedded mode, from the
//! ledger, the queue file and the configured gates), served by the binary with its assets
//! embedded (the machines are offline: no CDN).
//!
//! Actions that change anything (retry a class of failed items, re-queue dead letters, set a
//! gate's rate with a reason, pause, resume or cancel a job) need the token in `SYNCFLEET_DASHBOARD_TOKEN`, sent as
//! `Authorization: Bearer TOKEN`; without the variable they are disabled. They do what the CLI
//! commands do and are recorded the same way (a gate change lands in `gate_changes`).

mod access;
mod chart;
mod state;

use crate::app::runtime::Runtime;
use crate::clock::Clock;
use crate::jobs::onboard::Onboarding;
use crate::jobs::producer;
use crate::platform::{Api, ErrorClass, Platform};
use crate::store::{ControlAction, ControlChange, GateChange};
use crate::throttle::Gates;
use crate::topology::FLEET_NAMESPACE;
use access::{Access, Token};
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use std::net::SocketAddr;
use std::sync::Arc;

/// The page: static HTML + a small script that polls `/api/state`.
const INDEX_HTML: &str = include_str!("index.html");

/// Why the dashboard could not start or serve.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DashboardError {
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("{addr} is not a loopback address: pass --allow-remote to serve the dashboard beyond this host (put it behind TLS and set SYNCFLEET_DASHBOARD_TOKEN)")]
    NotLoopback { addr: SocketAddr },
    #[error("--allow-remote needs SYNCFLEET_DASHBOARD_TOKEN: a dashboard beyond this host is read with the token too")]
    RemoteWithoutToken,
    #[error("dashboard server: {0}")]
    Serve(#[source] std::io::Error),
    /// The ledger could not be read for the page.
    #[error(transparent)]
    Ledger(#[from] crate::store::StoreError),
    /// plotters could not draw the chart.
    #[error("chart: {0}")]
    Chart(String),
}

struct App {
    rt: Runtime,
    gates: Gates,
    token: Token,
    /// Finished jobs' summaries, counted once (`Store::list_jobs_reusing`).
    finished: tokio::sync::Mutex<crate::store::FinishedSummaries>,
    /// Sellers' onboarding (docs/design.md, "Onboarding a seller"); `None`: its HTTP client
    /// could not be built.
    onboarding: Option<Onboarding>,
}

type Shared = Arc<App>;

/// Serve the dashboard on `addr` until the process ends. `token`: the action token.
pub(crate) async fn serve(
    rt: Runtime,
    addr: SocketAddr,
    allow_remote: bool,
    token: Option<String>,
) -> Result<(), DashboardError> {
    if !addr.ip().is_loopback() && !allow_remote {
        return Err(DashboardError::NotLoopback { addr });
    }
    let token = Token::new(token);
    if allow_remote && !token.is_set() {
        return Err(DashboardError::RemoteWithoutToken);
    }
    let gates = match rt.topology.gates(&rt.cfg, FLEET_NAMESPACE).await {
        Ok(g) => g,
        Err(e) => {
            tracing::warn!(error = %e, "gate state unreachable: showing configured gates");
            Gates::embedded(&rt.cfg) // topology: fallback (the configured gates)
        }
    };
    let keys = match crate::seal::SealKeys::from_env() {
        Ok(keys) => keys,
        Err(e) => {
            tracing::warn!(error = %e, "the token key could not be read: shops cannot be added here");
            None
        }
    };
    let onboarding = match Onboarding::new(rt.cfg.clone(), rt.store.clone(), keys) {
        Ok(o) => Some(o),
        Err(e) => {
            tracing::warn!(error = %e, "onboarding unavailable");
            None
        }
    };
    let app = Arc::new(App {
        rt,
        gates,
        token: token.clone(),
        finished: Default::default(),
        onboarding,
    });
    let access = Access {
        token,
        remote: allow_remote,
    };
    let router = Router::new()
        .route("/", get(index))
        .route("/api/state", get(api_state))
        .route("/chart/burn.svg", get(burn_chart))
        .route("/api/actions/retry", post(action_retry))
        .route("/api/actions/requeue-dead", post(action_requeue_dead))
        .route("/api/actions/gate", post(action_gate))
        .route("/api/actions/job", post(action_job))
        .route("/api/actions/resend-hooks", post(action_resend_hooks))
        .route("/api/shops", get(api_shops))
        .route("/api/actions/shop-link", post(action_shop_link))
        .route("/api/actions/shop", post(action_shop))
        .route("/oauth/callback", get(oauth_callback))
        .layer(axum::middleware::from_fn_with_state(access, access::guard))
        .with_state(app);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| DashboardError::Listen { addr, source })?;
    tracing::info!(%addr, "dashboard listening");
    axum::serve(listener, router)
        .await
        .map_err(DashboardError::Serve)
}

async fn index() -> Html<&'static str> {
    Html(INDEX_HTML)
}

async fn api_state(State(app): State<Shared>) -> Response {
    let mut finished = app.finished.lock().await;
    let token_key = app.onboarding.as_ref().is_some_and(|o| o.can_add());
    match state::collect(
        &app.rt,
        &app.gates,
        app.token.is_set(),
        token_key,
        &mut finished,
    )
    .await
    {
        Ok(s) => Json(s).into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response(),
    }
}

#[derive(Deserialize)]
struct GateQuery {
    platform: Platform,
    api: Api,
}

async fn burn_chart(State(app): State<Shared>, Query(q): Query<GateQuery>) -> Response {
    let now = Clock::system().utc();
    let start = chart::day_start(now);
    let per_minute = match app
        .rt
        .store
        .calls_per_minute(q.platform, q.api, start, now + chrono::Duration::minutes(1))
        .await
    {
        Ok(rows) => rows,
        Err(e) => return (StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response(),
    };
    let mut used = chart::cumulative(start, &per_minute);
    // The calls ledger lags the gate by its 2 s batches: the curve ends at the gate's live
    // count, the "calls today" of the page.
    let live = app
        .gates
        .snapshot_of(q.platform, q.api)
        .await
        .map_or(0, |g| g.used_today);
    chart::end_at(&mut used, start, now, live);
    let today = used.last().map_or(0.0, |p| p.1);
    let quota = app.rt.cfg.gate(q.platform, q.api).daily_quota;
    let title = format!("{}.{}: {today:.0} calls today", q.platform, q.api);
    match chart::burn_svg(&title, start, now, &used, quota) {
        Ok(svg) => ([(header::CONTENT_TYPE, "image/svg+xml")], svg).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

#[derive(Deserialize)]
struct RetryAction {
    job: i64,
    class: ErrorClass,
}

async fn action_retry(
    State(app): State<Shared>,
    headers: HeaderMap,
    Json(a): Json<RetryAction>,
) -> Response {
    if let Err(e) = app.token.check(&headers) {
        return e.into_response();
    }
    if a.class == ErrorClass::Fatal {
        return (
            StatusCode::BAD_REQUEST,
            "fatal failures are caller errors: fix the cause and enqueue those items again",
        )
            .into_response();
    }
    let chunk = app.rt.cfg.queue.chunk_size;
    match producer::retry_class(&app.rt.store, &app.rt.queue, a.job, a.class, chunk).await {
        Ok(r) => {
            tracing::info!(job = a.job, class = %a.class, items = r.items, "dashboard: retry");
            Json(serde_json::json!({"items": r.items, "tasks": r.tasks})).into_response()
        }
        Err(e) => (StatusCode::BAD_REQUEST, format!("{e:#}")).into_response(),
    }
}

/// Send again the completion deliveries that were given up (all, or one job's).
async fn action_resend_hooks(
    State(app): State<Shared>,
    headers: HeaderMap,
    Json(a): Json<RequeueAction>,
) -> Response {
    if let Err(e) = app.token.check(&headers) {
        return e.into_response();
    }
    match app.rt.store.resend_failed_hooks(a.job).await {
        Ok(n) => {
            tracing::info!(job = ?a.job, deliveries = n, "dashboard: hooks resent");
            Json(serde_json::json!({ "deliveries": n })).into_response()
        }
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// Every shop, the config's and the ledger's (token-protected: the list names sellers).
async fn api_shops(State(app): State<Shared>, headers: HeaderMap) -> Response {
    if let Err(e) = app.token.check(&headers) {
        return e.into_response();
    }
    let ledger = match app.rt.store.ledger_shops().await {
        Ok(l) => l,
        Err(e) => return (StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response(),
    };
    let mut out: Vec<serde_json::Value> = app
        .rt
        .cfg
        .shops()
        .map(|(name, s)| {
            serde_json::json!({"shop": name, "platform": s.platform.as_str(), "source": "config",
                "weight": s.weight, "seller": s.seller, "state": "ok"})
        })
        .collect();
    out.extend(ledger.iter().filter(|s| s.removed_at.is_none()).map(|s| {
        let state = match (&s.token_error, s.token_remaining_ms) {
            (Some(e), _) => format!("renewal failing: {e}"),
            (None, Some(ms)) if ms <= 0 => "token ended".to_string(),
            _ => "ok".to_string(),
        };
        serde_json::json!({"shop": s.shop, "platform": s.platform.as_str(), "source": "ledger",
            "weight": s.weight, "seller": s.seller, "state": state})
    }));
    Json(out).into_response()
}

#[derive(Deserialize)]
struct ShopLinkAction {
    platform: Platform,
    shop: Option<String>,
}

/// The address to send a seller to (token-protected: it adds a shop once followed).
async fn action_shop_link(
    State(app): State<Shared>,
    headers: HeaderMap,
    Json(a): Json<ShopLinkAction>,
) -> Response {
    if let Err(e) = app.token.check(&headers) {
        return e.into_response();
    }
    let Some(onboarding) = &app.onboarding else {
        return (StatusCode::SERVICE_UNAVAILABLE, "onboarding is unavailable").into_response();
    };
    let now = Clock::system().utc().timestamp();
    match onboarding.link(a.platform, a.shop.as_deref().filter(|s| !s.is_empty()), now) {
        Ok(url) => Json(serde_json::json!({ "url": url })).into_response(),
        Err(e) => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    }
}

#[derive(Deserialize)]
struct ShopAction {
    platform: Platform,
    shop: String,
    action: String,
}

/// Remove a shop of the ledger, as `syncfleet shop remove` does.
async fn action_shop(
    State(app): State<Shared>,
    headers: HeaderMap,
    Json(a): Json<ShopAction>,
) -> Response {
    if let Err(e) = app.token.check(&headers) {
        return e.into_response();
    }
    if a.action != "remove" {
        return (StatusCode::BAD_REQUEST, "action: expected `remove`").into_response();
    }
    match app.rt.store.remove_ledger_shop(a.platform, &a.shop).await {
        Ok(true) => {
            tracing::info!(platform = %a.platform, shop = a.shop, "dashboard: shop removed");
            Json(serde_json::json!({ "removed": a.shop })).into_response()
        }
        Ok(false) => (
            StatusCode::NOT_FOUND,
            format!(
                "no shop `{}` on {} is served from the ledger",
                a.shop, a.platform
            ),
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

#[derive(Deserialize)]
struct OAuthCallback {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

/// Where the platform sends the seller back: the state (signed, recent) names the platform
/// and the shop, the code is exchanged for the shop's tokens and the shop added. Needs no
/// dashboard token: the seller's browser has none, and the state proves the link was ours.
async fn oauth_callback(State(app): State<Shared>, Query(q): Query<OAuthCallback>) -> Response {
    let page = |status: StatusCode, text: String| {
        let body = format!(
            "<!doctype html><meta charset=utf-8><title>syncfleet: authorisation</title><p id=outcome>{}</p>",
            html_escape(&text)
        );
        (status, Html(body)).into_response()
    };
    if let Some(error) = q.error {
        return page(
            StatusCode::OK,
            format!(
                "The authorisation was not given ({error}{}): no shop was added.",
                q.error_description
                    .map(|d| format!(": {d}"))
                    .unwrap_or_default()
            ),
        );
    }
    let (Some(code), Some(state)) = (q.code, q.state) else {
        return page(
            StatusCode::BAD_REQUEST,
            "This address is where a platform sends a seller back with `code` and `state`.".into(),
        );
    };
    let Some(onboarding) = &app.onboarding else {
        return page(
            StatusCode::SERVICE_UNAVAILABLE,
            "Onboarding is unavailable.".into(),
        );
    };
    let Some(platform) = crate::jobs::oauth_state::OAuthState::claimed_platform(&state) else {
        return page(
            StatusCode::BAD_REQUEST,
            "The state is not one of ours.".into(),
        );
    };
    let now = Clock::system().utc().timestamp();
    let weight = crate::config::DEFAULT_WEIGHT;
    match onboarding
        .complete(
            platform,
            &crate::secret::Secret::new(code),
            &state,
            weight,
            now,
        )
        .await
    {
        Ok(o) => page(
            StatusCode::OK,
            format!(
                "Shop {} on {} is {}. The app's workers serve it from their next look.",
                o.shop,
                o.platform,
                if o.new { "added" } else { "authorised anew" }
            ),
        ),
        Err(e) => {
            tracing::warn!(%platform, error = %e, "a seller's authorisation could not be completed");
            let status = if e.is_input_error() {
                StatusCode::BAD_REQUEST
            } else {
                StatusCode::BAD_GATEWAY
            };
            page(status, format!("The shop could not be added: {e}"))
        }
    }
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[derive(Deserialize)]
struct RequeueAction {
    job: Option<i64>,
}

async fn action_requeue_dead(
    State(app): State<Shared>,
    headers: HeaderMap,
    Json(a): Json<RequeueAction>,
) -> Response {
    if let Err(e) = app.token.check(&headers) {
        return e.into_response();
    }
    let chunk = app.rt.cfg.queue.chunk_size;
    match producer::requeue_dead(&app.rt.store, &app.rt.queue, a.job, chunk).await {
        Ok(r) => {
            tracing::info!(
                items = r.items,
                entries = r.entries,
                "dashboard: dead letters re-queued"
            );
            Json(serde_json::json!({"items": r.items, "tasks": r.tasks, "entries": r.entries}))
                .into_response()
        }
        Err(e) => (StatusCode::BAD_REQUEST, format!("{e:#}")).into_response(),
    }
}

#[derive(Deserialize)]
struct JobAction {
    job: i64,
    /// `pause`, `resume` or `cancel`.
    action: String,
}

/// `syncfleet job pause|resume|cancel N` from the page.
async fn action_job(
    State(app): State<Shared>,
    headers: HeaderMap,
    Json(a): Json<JobAction>,
) -> Response {
    if let Err(e) = app.token.check(&headers) {
        return e.into_response();
    }
    let action = match a.action.as_str() {
        "pause" => ControlAction::Pause,
        "resume" => ControlAction::Resume,
        "cancel" => ControlAction::Cancel,
        other => {
            return (
                StatusCode::BAD_REQUEST,
                format!("`{other}` is not a job action (pause, resume or cancel)"),
            )
                .into_response()
        }
    };
    match app.rt.store.control_job(a.job, action).await {
        Ok(ControlChange::Finished) => (
            StatusCode::BAD_REQUEST,
            format!("job {} has finished (or was cancelled)", a.job),
        )
            .into_response(),
        Ok(change) => {
            tracing::info!(job = a.job, action = %a.action, "dashboard: job control");
            let (changed, cancelled) = match change {
                ControlChange::Done { cancelled } => (true, cancelled),
                _ => (false, 0),
            };
            Json(serde_json::json!({"changed": changed, "cancelled": cancelled})).into_response()
        }
        Err(e) if e.is_input_error() => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

#[derive(Deserialize)]
struct GateAction {
    platform: Platform,
    api: Api,
    rate: f64,
    burst: Option<f64>,
    why: String,
}

async fn action_gate(
    State(app): State<Shared>,
    headers: HeaderMap,
    Json(a): Json<GateAction>,
) -> Response {
    if let Err(e) = app.token.check(&headers) {
        return e.into_response();
    }
    if a.why.trim().is_empty() {
        return (
            StatusCode::BAD_REQUEST,
            "a gate change needs a reason (why)",
        )
            .into_response();
    }
    if let Err(over) = app
        .rt
        .cfg
        .check_gate_rate(a.platform, a.api, a.rate, a.burst)
    {
        return (StatusCode::BAD_REQUEST, over.to_string()).into_response();
    }
    let change = match app.gates.set_rate(a.platform, a.api, a.rate, a.burst).await {
        Ok(c) => c,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("{e:#}")).into_response(),
    };
    let record = GateChange {
        at: Clock::system().utc(),
        who: "dashboard".into(),
        platform: a.platform,
        api: a.api,
        old_rate: Some(change.old.rate),
        new_rate: change.new.rate,
        old_burst: Some(change.old.burst.round() as u32),
        new_burst: Some(change.new.burst.round() as u32),
        why: a.why.clone(),
    };
    if let Err(e) = app.rt.store.record_gate_change(&record).await {
        return (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response();
    }
    tracing::info!(platform = %a.platform, api = %a.api, rate = a.rate, why = %a.why, "dashboard: gate set");
    let applied = if app.rt.topology.reaches_running_workers() {
        "the fleet obeys it within a second"
    } else {
        "recorded; a running embedded worker keeps its rate until restarted with the new value in its config"
    };
    Json(serde_json::json!({
        "old_rate": change.old.rate,
        "new_rate": change.new.rate,
        "applied": applied,
    }))
    .into_response()
}
