//! The listener: one hyper HTTP/1 serve loop per connection (so the idle-close drill knows
//! each connection's last activity), an axum router for the three platforms and /admin.

use super::drill::DrillPatch;
use super::proto::{self, Failure, Reply};
use super::state::Sim;
use crate::platform::Platform;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use http_body_util::BodyExt;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::{watch, Notify};

fn clock_ms() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    BASE.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// Every answer's `Date` on the platform's clock (hyper would stamp this host's), in the
/// IMF-fixdate form of RFC 9110 section 5.6.7.
fn date_header(headers: &mut axum::http::HeaderMap, now: DateTime<Utc>) {
    let text = now.format("%a, %d %b %Y %H:%M:%S GMT").to_string();
    if let Ok(v) = axum::http::HeaderValue::from_str(&text) {
        headers.insert(axum::http::header::DATE, v);
    }
}

/// Per-connection state for the idle-close drill.
#[derive(Debug)]
pub struct ConnState {
    last_activity_ms: AtomicU64,
    close: Notify,
    /// Close at once, unanswered (the lost-answer drill).
    hangup: Notify,
}

/// Handed to handlers in the request extensions.
#[derive(Debug, Clone)]
struct ConnInfo {
    idle_ms: u64,
    /// When the request's head was read: the instant the platform counts it at. What the
    /// handler does after (reading the body, checking the signature) and how long the
    /// simulator's thread took to get to it are the platform's own time, not the client's.
    arrived: DateTime<Utc>,
    conn: Arc<ConnState>,
}

/// Serve the simulator on `listener` until `shutdown` resolves (or its sender is dropped).
pub async fn run(sim: Arc<Sim>, listener: TcpListener, mut shutdown: watch::Receiver<bool>) {
    let router = router(sim.clone());
    // 1688's pushed messages go out while the server runs (docs/design.md, "Continuous sync").
    if let Some(url) = sim.cfg.orders.live.push_url.clone() {
        tokio::spawn(super::push::run(sim.clone(), url, shutdown.clone()));
    }
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.changed() => break,
        };
        let stream = match accepted {
            Ok((s, _)) => s,
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!("sim accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let conn = Arc::new(ConnState {
            last_activity_ms: AtomicU64::new(clock_ms()),
            close: Notify::new(),
            hangup: Notify::new(),
        });
        let svc = TowerToHyperService::new(router.clone());
        let mut stop = shutdown.clone();
        let hold = Duration::from_secs(sim.cfg.idle_hold_s);
        let platform_clock = sim.clone();
        tokio::spawn(async move {
            let c = conn.clone();
            let service =
                hyper::service::service_fn(move |mut req: Request<hyper::body::Incoming>| {
                    let now = clock_ms();
                    let idle_ms = now.saturating_sub(c.last_activity_ms.swap(now, Relaxed));
                    req.extensions_mut().insert(ConnInfo {
                        idle_ms,
                        arrived: platform_clock.now(),
                        conn: c.clone(),
                    });
                    let fut = hyper::service::Service::call(&svc, req);
                    let c = c.clone();
                    let clock = platform_clock.clone();
                    async move {
                        let mut res = fut.await;
                        c.last_activity_ms.store(clock_ms(), Relaxed);
                        if let Ok(r) = res.as_mut() {
                            date_header(r.headers_mut(), clock.now());
                        }
                        res
                    }
                });
            // A client that never finishes its headers is cut, not held forever. hyper runs this
            // timer while a keep-alive connection idles too, so it is set well above any
            // client keep-alive (25 s configured, reqwest's default 90 s): idle closes are the
            // idle-close drill's business, not a default.
            let served = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(120))
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(served);
            tokio::select! {
                _ = served.as_mut() => {}
                _ = conn.hangup.notified() => {}
                _ = conn.close.notified() => {
                    // The NAT dropped this flow: hold the request unanswered, then close.
                    tokio::select! {
                        _ = tokio::time::sleep(hold) => {}
                        _ = stop.changed() => {}
                    }
                }
                _ = stop.changed() => {}
            }
        });
    }
}

fn router(sim: Arc<Sim>) -> Router {
    Router::new()
        // POST is the contract; GET with query params is answered too (TOP SDKs allow it),
        // so a client using it gets a platform answer rather than a bare 405.
        .route("/router/rest", post(top).get(top))
        .route("/routerjson", post(jd).get(jd))
        .route("/openapi/{*rest}", post(alibaba).get(alibaba))
        // The platforms' token endpoints (TOP's oauth.taobao.com/token, JD's
        // open-oauth.jd.com/oauth2/refresh_token; 1688's is under /openapi, below).
        .route("/token", post(top_token))
        .route("/oauth2/refresh_token", post(jd_token).get(jd_token))
        .route("/oauth2/access_token", post(jd_token).get(jd_token))
        // The authorisation pages (oauth.taobao.com/authorize, open-oauth.jd.com/oauth2/to_login,
        // auth.1688.com/oauth/authorize).
        .route("/authorize", get(top_authorize))
        .route("/oauth2/to_login", get(jd_authorize))
        .route("/oauth/authorize", get(alibaba_authorize))
        .route("/admin/stats", get(stats))
        .route("/admin/reset", post(reset))
        .route("/admin/drill", get(drill_get).post(drill_post))
        .with_state(sim)
}

fn json_response(status: StatusCode, body: &serde_json::Value) -> Response {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    (
        status,
        [(header::CONTENT_TYPE, "application/json;charset=UTF-8")],
        bytes,
    )
        .into_response()
}

/// Read the body up to `limit`; past it, drain (bounded) so the client still reads the error.
async fn read_body(body: Body, limit: usize) -> Result<Bytes, usize> {
    let mut body = body;
    let mut buf = Vec::new();
    let mut total = 0usize;
    let drain_cap = limit.saturating_mul(64);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
            Ok(Some(Ok(f))) => f,
            Ok(None) => break,
            // A broken or stalled body: answer what was read as malformed / too large.
            Ok(Some(Err(_))) | Err(_) => {
                return if total > limit {
                    Err(limit)
                } else {
                    Ok(Bytes::from(buf))
                }
            }
        };
        if let Ok(data) = frame.into_data() {
            total += data.len();
            if total <= limit {
                buf.extend_from_slice(&data);
            } else if total > drain_cap {
                return Err(limit);
            }
        }
    }
    if total > limit {
        Err(limit)
    } else {
        Ok(Bytes::from(buf))
    }
}

/// Query and body pairs; None when the body is not a valid form.
fn form_pairs(query: Option<&str>, body: &[u8]) -> Option<Vec<(String, String)>> {
    let mut pairs: Vec<(String, String)> = match query {
        Some(q) if !q.is_empty() => serde_urlencoded::from_str(q).ok()?,
        _ => Vec::new(),
    };
    if !body.is_empty() {
        std::str::from_utf8(body).ok()?;
        let more: Vec<(String, String)> = serde_urlencoded::from_bytes(body).ok()?;
        pairs.extend(more);
    }
    Some(pairs)
}

/// A token endpoint's call: renew a shop's token (crates/sim/src/tokens.rs).
async fn token_call(sim: Arc<Sim>, platform: Platform, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let bytes = read_body(body, sim.cfg.max_body_bytes)
        .await
        .unwrap_or_default();
    let params = form_pairs(parts.uri.query(), &bytes).unwrap_or_default();
    let now = sim.now().timestamp_millis();
    let (status, body) = match super::proto::form_get(&params, "grant_type") {
        Some("authorization_code") => crate::tokens::exchange(&sim, platform, &params, now),
        _ => crate::tokens::refresh(&sim, platform, &params, now),
    };
    json_response(status, &body)
}

/// An authorisation page: a 302 to the app's callback with a code, or a 400 page.
fn authorize_call(sim: &Sim, platform: Platform, query: Option<&str>) -> Response {
    let params = form_pairs(query, &[]).unwrap_or_default();
    match crate::tokens::authorize(sim, platform, &params, sim.now().timestamp_millis()) {
        Ok(location) => Response::builder()
            .status(StatusCode::FOUND)
            .header(axum::http::header::LOCATION, location)
            .body(Body::empty())
            .unwrap_or_default(),
        Err((status, why)) => (status, why).into_response(),
    }
}

async fn top_authorize(State(sim): State<Arc<Sim>>, uri: axum::http::Uri) -> Response {
    authorize_call(&sim, Platform::Taobao, uri.query())
}

async fn jd_authorize(State(sim): State<Arc<Sim>>, uri: axum::http::Uri) -> Response {
    authorize_call(&sim, Platform::Jd, uri.query())
}

async fn alibaba_authorize(State(sim): State<Arc<Sim>>, uri: axum::http::Uri) -> Response {
    authorize_call(&sim, Platform::Alibaba, uri.query())
}

async fn top_token(State(sim): State<Arc<Sim>>, req: Request) -> Response {
    token_call(sim, Platform::Taobao, req).await
}

async fn jd_token(State(sim): State<Arc<Sim>>, req: Request) -> Response {
    token_call(sim, Platform::Jd, req).await
}

async fn platform_call(sim: Arc<Sim>, platform: Platform, req: Request) -> Response {
    let info = req.extensions().get::<ConnInfo>().cloned();
    let (parts, body) = req.into_parts();
    let bytes = match read_body(body, sim.cfg.max_body_bytes).await {
        Ok(b) => b,
        Err(limit) => {
            return answer(
                proto::unattributed(&sim, platform, Failure::TooLarge(limit)),
                info,
            )
            .await
        }
    };
    let Some(form) = form_pairs(parts.uri.query(), &bytes) else {
        let f = Failure::Invalid("request body is not a UTF-8 form".into());
        return answer(proto::unattributed(&sim, platform, f), info).await;
    };
    let idle_ms = info.as_ref().map(|i| i.idle_ms);
    let identified = match platform {
        Platform::Taobao => proto::identify_top(&sim, form, idle_ms),
        Platform::Jd => proto::identify_jd(&sim, form, idle_ms),
        Platform::Alibaba => {
            let rest = parts.uri.path().strip_prefix("/openapi/").unwrap_or("");
            proto::identify_alibaba(&sim, rest, form, idle_ms)
        }
    };
    let reply = match identified {
        Ok(call) => {
            let arrived = info.as_ref().map_or_else(|| sim.now(), |i| i.arrived);
            proto::run(&sim, call, arrived).await
        }
        Err(reply) => reply,
    };
    answer(reply, info).await
}

async fn answer(reply: Reply, info: Option<ConnInfo>) -> Response {
    match reply {
        Reply::Answer(a) => json_response(a.status, &a.body),
        Reply::Huge { bytes, declared } => huge_response(bytes, declared),
        Reply::DropConnection => {
            if let Some(i) = info {
                i.conn.close.notify_one();
            }
            // Never answered: the connection task closes the socket after the hold.
            std::future::pending::<Response>().await
        }
        Reply::Hangup => {
            if let Some(i) = info {
                i.conn.hangup.notify_one();
            }
            // Never answered: the connection task closes the socket at once.
            std::future::pending::<Response>().await
        }
    }
}

/// A body of `bytes` bytes of JSON-looking filler, made as it is sent (the simulator never
/// holds it), with Content-Length when `declared`, else chunked until done.
fn huge_response(bytes: u64, declared: bool) -> Response {
    const CHUNK: usize = 64 * 1024;
    let chunk = Bytes::from(vec![b' '; CHUNK]);
    let head = Bytes::from_static(b"{\"pad\":\"");
    let mut left = bytes.saturating_sub(head.len() as u64);
    let body = futures::stream::iter(std::iter::once(head).chain(std::iter::from_fn(move || {
        if left == 0 {
            return None;
        }
        let n = left.min(CHUNK as u64) as usize;
        left -= n as u64;
        Some(chunk.slice(..n))
    })))
    .map(Ok::<Bytes, std::convert::Infallible>);
    let mut builder = Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json");
    if declared {
        builder = builder.header(header::CONTENT_LENGTH, bytes);
    }
    builder
        .body(Body::from_stream(body))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

async fn top(State(sim): State<Arc<Sim>>, req: Request) -> Response {
    platform_call(sim, Platform::Taobao, req).await
}

async fn jd(State(sim): State<Arc<Sim>>, req: Request) -> Response {
    platform_call(sim, Platform::Jd, req).await
}

async fn alibaba(State(sim): State<Arc<Sim>>, req: Request) -> Response {
    // 1688's token endpoint: param2/1/system.oauth2/getToken/{appKey}.
    if req
        .uri()
        .path()
        .starts_with("/openapi/param2/1/system.oauth2/getToken/")
    {
        return token_call(sim, Platform::Alibaba, req).await;
    }
    platform_call(sim, Platform::Alibaba, req).await
}

async fn stats(State(sim): State<Arc<Sim>>) -> Response {
    json_response(
        StatusCode::OK,
        &serde_json::to_value(sim.stats()).unwrap_or_default(),
    )
}

async fn reset(State(sim): State<Arc<Sim>>) -> Response {
    sim.reset();
    json_response(StatusCode::OK, &serde_json::json!({"ok": true}))
}

async fn drill_get(State(sim): State<Arc<Sim>>) -> Response {
    json_response(
        StatusCode::OK,
        &serde_json::to_value(sim.drill()).unwrap_or_default(),
    )
}

async fn drill_post(State(sim): State<Arc<Sim>>, body: Bytes) -> Response {
    let patch: DrillPatch = match serde_json::from_slice(&body) {
        Ok(p) => p,
        Err(e) => {
            return json_response(
                StatusCode::BAD_REQUEST,
                &serde_json::json!({"error": e.to_string()}),
            )
        }
    };
    match sim.set_drill(&patch) {
        Ok(d) => {
            tracing::info!(drill = ?d, "sim drill changed");
            json_response(StatusCode::OK, &serde_json::to_value(d).unwrap_or_default())
        }
        Err(e) => json_response(
            StatusCode::BAD_REQUEST,
            &serde_json::json!({"error": e.to_string()}),
        ),
    }
}
