//! The platform side of the three protocols (docs/wire-formats.md): parse and verify a
//! request, count it, run it against the generated data, answer in the platform's format.
//!
//! Order of checks for every call: identify (app key, method) → idle-close drill →
//! per-second window and daily quota (every call counts) → latency → outage / error drills →
//! timestamp → signature → session → business params → data.

use super::data::{self, AddOutcome, ItemData, OrderData, OrderState, StepKind, TraceStep};
use super::state::{Admit, Outcome, Sim};
use crate::platform::sign::{self, SignMethod};
use crate::platform::{Api, Platform};
use crate::time::china_offset;
use axum::http::StatusCode;
use chrono::{DateTime, NaiveDateTime, TimeZone, Utc};
use serde_json::{json, Map, Value};
use std::time::Duration;

/// Why a call failed, before the platform spells it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Failure {
    Limited(u64),
    QuotaSpent(u64),
    Busy,
    Signature,
    AppKey,
    Timestamp,
    Session,
    Missing(String),
    Invalid(String),
    Method,
    NotFound(&'static str, String),
    TooLarge(usize),
}

impl Failure {
    fn outcome(&self, platform: Platform) -> Outcome {
        match self {
            Failure::Limited(_) => Outcome::RejectedLimit,
            Failure::QuotaSpent(_) => Outcome::RejectedQuota,
            Failure::Busy => Outcome::Retry,
            // TOP says isv.*-not-exist (Fatal); JD and 1688 answer a business failure in a
            // success body, which clients see as Unknown.
            Failure::NotFound(..) if platform != Platform::Taobao => Outcome::Unknown,
            _ => Outcome::Fatal,
        }
    }
}

/// A platform answer: HTTP status and JSON body.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) body: Value,
}

impl Answer {
    fn ok(body: Value) -> Answer {
        Answer {
            status: StatusCode::OK,
            body,
        }
    }
}

/// What the handler does with the request.
#[derive(Debug)]
pub(crate) enum Reply {
    Answer(Answer),
    /// Idle-close drill: never answer, hold, then close the connection.
    DropConnection,
}

/// The request's parameters: form pairs (TOP, 1688) or the fields of `360buy_param_json` (JD).
pub(crate) enum Params {
    Form(Vec<(String, String)>),
    Json(Map<String, Value>),
}

impl Params {
    fn get(&self, key: &str) -> Option<String> {
        match self {
            Params::Form(pairs) => pairs
                .iter()
                .rev()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone()),
            Params::Json(m) => match m.get(key)? {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                Value::Bool(b) => Some(b.to_string()),
                _ => None,
            },
        }
    }
}

fn form_get<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn gmt8(ts: i64, fmt: &str) -> String {
    china_offset()
        .timestamp_opt(ts, 0)
        .single()
        .map(|t| t.format(fmt).to_string())
        .unwrap_or_default()
}

fn parse_gmt8(s: &str, fmt: &str) -> Option<DateTime<Utc>> {
    let naive = NaiveDateTime::parse_from_str(s, fmt).ok()?;
    china_offset()
        .from_local_datetime(&naive)
        .single()
        .map(|t| t.with_timezone(&Utc))
}

const TOP_TIME: &str = "%Y-%m-%d %H:%M:%S";

/// A failure answered before the call could be pinned to an (app, api): not counted
/// against any quota.
pub(crate) fn unattributed(sim: &Sim, platform: Platform, f: Failure) -> Reply {
    sim.unattributed();
    Reply::Answer(render_failure(sim, platform, None, &f))
}

/// Everything identified about a call before admission.
pub(crate) struct Call {
    pub(crate) platform: Platform,
    pub(crate) app: usize,
    pub(crate) api: Api,
    /// How long the connection was idle before this request (ms), if known.
    pub(crate) idle_ms: Option<u64>,
    /// The signed params as received (all form pairs).
    pub(crate) form: Vec<(String, String)>,
    /// 1688: the url path that is signed.
    pub(crate) url_path: String,
}

/// Identify a TOP call from its form, or answer its error.
pub(crate) fn identify_top(
    sim: &Sim,
    form: Vec<(String, String)>,
    idle_ms: Option<u64>,
) -> Result<Call, Reply> {
    let p = Platform::Taobao;
    let Some(app) = form_get(&form, "app_key").and_then(|k| sim.app(p, k)) else {
        return Err(unattributed(sim, p, Failure::AppKey));
    };
    let Some(method) = form_get(&form, "method") else {
        return Err(unattributed(sim, p, Failure::Missing("method".into())));
    };
    let Some(api) = Api::from_method(p, method) else {
        return Err(unattributed(sim, p, Failure::Method));
    };
    Ok(Call {
        platform: p,
        app,
        api,
        idle_ms,
        form,
        url_path: String::new(),
    })
}

/// Identify a JD call.
pub(crate) fn identify_jd(
    sim: &Sim,
    form: Vec<(String, String)>,
    idle_ms: Option<u64>,
) -> Result<Call, Reply> {
    let p = Platform::Jd;
    let Some(app) = form_get(&form, "app_key").and_then(|k| sim.app(p, k)) else {
        return Err(unattributed(sim, p, Failure::AppKey));
    };
    let Some(api) = form_get(&form, "method").and_then(|m| Api::from_method(p, m)) else {
        return Err(unattributed(sim, p, Failure::Method));
    };
    Ok(Call {
        platform: p,
        app,
        api,
        idle_ms,
        form,
        url_path: String::new(),
    })
}

/// Identify a 1688 call from the path segments after `/openapi/`.
pub(crate) fn identify_alibaba(
    sim: &Sim,
    path_after_openapi: &str,
    form: Vec<(String, String)>,
    idle_ms: Option<u64>,
) -> Result<Call, Reply> {
    let p = Platform::Alibaba;
    // param2/1/{namespace}/{apiName}/{appKey}
    let parts: Vec<&str> = path_after_openapi.split('/').collect();
    let [proto, version, namespace, api_name, app_key] = parts.as_slice() else {
        return Err(unattributed(sim, p, Failure::Method));
    };
    if *proto != "param2" || *version != "1" {
        return Err(unattributed(sim, p, Failure::Method));
    }
    let Some(app) = sim.app(p, app_key) else {
        return Err(unattributed(sim, p, Failure::AppKey));
    };
    let Some(api) = Api::from_method(p, &format!("{namespace}/{api_name}")) else {
        return Err(unattributed(sim, p, Failure::Method));
    };
    Ok(Call {
        platform: p,
        app,
        api,
        idle_ms,
        form,
        url_path: path_after_openapi.to_string(),
    })
}

/// Log-normal sample with the given median and p95 (ms).
fn sample_latency(median: u64, p95: u64) -> u64 {
    if median == 0 {
        return 0;
    }
    let sigma = ((p95.max(median) as f64) / median as f64).ln() / 1.644_853_6;
    // Box-Muller; 1 - u keeps ln away from 0.
    let u1: f64 = 1.0 - rand::random::<f64>();
    let u2: f64 = rand::random::<f64>();
    let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
    let ms = (median as f64) * (sigma * z).exp();
    // Bounded so a tail sample cannot hang a call.
    ms.min(60_000.0) as u64
}

/// Run an identified call to its answer.
pub(crate) async fn run(sim: &Sim, call: Call) -> Reply {
    let slot = sim.slot(call.app, call.api);
    let (idle_close_s, latency_ms, error_ratio, outage, outage_hang, expired) =
        sim.with_drill(|d| {
            (
                d.idle_close_s,
                d.latency_ms,
                d.error_ratio,
                d.outage,
                d.outage_hang,
                d.expired_session,
            )
        });
    if idle_close_s > 0 && call.idle_ms.is_some_and(|ms| ms > idle_close_s * 1000) {
        slot.idle_closed();
        return Reply::DropConnection;
    }
    let now = Utc::now();
    let admitted = slot.admit(now);
    let result = match admitted {
        Admit::Limited { ban_s } => Err(Failure::Limited(ban_s)),
        Admit::QuotaSpent { ban_s } => Err(Failure::QuotaSpent(ban_s)),
        Admit::Ok => {
            let wait = latency_ms + sample_latency(slot.latency.0, slot.latency.1);
            if wait > 0 {
                tokio::time::sleep(Duration::from_millis(wait)).await;
            }
            if outage {
                if outage_hang {
                    tokio::time::sleep(Duration::from_secs(sim.cfg.idle_hold_s)).await;
                }
                Err(Failure::Busy)
            } else if error_ratio > 0.0 && rand::random::<f64>() < error_ratio {
                Err(Failure::Busy)
            } else {
                verify(sim, &call, now, expired)
                    .and_then(|params| execute(sim, &call, &params, now))
            }
        }
    };
    let answer = match result {
        Ok(body) => {
            slot.record(Outcome::Ok);
            Answer::ok(body)
        }
        Err(f) => {
            slot.record(f.outcome(call.platform));
            render_failure(sim, call.platform, Some(call.api), &f)
        }
    };
    Reply::Answer(answer)
}

/// Timestamp, signature and session; returns the business params.
fn verify(sim: &Sim, call: &Call, now: DateTime<Utc>, expired: bool) -> Result<Params, Failure> {
    let app = &sim.apps[call.app].cfg;
    let skew = sim.cfg.timestamp_skew_s as i64;
    let within = |t: DateTime<Utc>| (now - t).num_seconds().abs() <= skew;
    let form = &call.form;
    let given_sign;
    let expected;
    let session_param;
    match call.platform {
        Platform::Taobao => {
            let ts = form_get(form, "timestamp").and_then(|s| parse_gmt8(s, TOP_TIME));
            if !ts.is_some_and(within) {
                return Err(Failure::Timestamp);
            }
            let method = match form_get(form, "sign_method") {
                None => SignMethod::Md5,
                Some(m) => SignMethod::parse(m).ok_or(Failure::Invalid("sign_method".into()))?,
            };
            given_sign = form_get(form, "sign");
            expected = sign::top_sign(
                app.secret.expose(),
                method,
                form.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            );
            session_param = "session";
        }
        Platform::Jd => {
            let ts = form_get(form, "timestamp")
                .and_then(|s| DateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.3f%z").ok())
                .map(|t| t.with_timezone(&Utc));
            if !ts.is_some_and(within) {
                return Err(Failure::Timestamp);
            }
            given_sign = form_get(form, "sign");
            expected = sign::jd_sign(
                app.secret.expose(),
                form.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            );
            session_param = "access_token";
        }
        Platform::Alibaba => {
            let Some(ts) = form_get(form, "_aop_timestamp") else {
                return Err(Failure::Missing("_aop_timestamp".into()));
            };
            let ts = ts
                .parse::<i64>()
                .ok()
                .and_then(DateTime::<Utc>::from_timestamp_millis);
            if !ts.is_some_and(within) {
                return Err(Failure::Timestamp);
            }
            given_sign = form_get(form, "_aop_signature");
            expected = sign::alibaba_sign(
                app.secret.expose(),
                &call.url_path,
                form.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            );
            session_param = "access_token";
        }
    }
    if !given_sign.is_some_and(|s| sign::signatures_match(&expected, s)) {
        return Err(Failure::Signature);
    }
    if expired || form_get(form, session_param) != Some(app.session.expose()) {
        return Err(Failure::Session);
    }
    match call.platform {
        Platform::Jd => {
            let raw = form_get(form, "360buy_param_json")
                .ok_or_else(|| Failure::Missing("360buy_param_json".into()))?;
            match serde_json::from_str::<Value>(raw) {
                Ok(Value::Object(m)) => Ok(Params::Json(m)),
                _ => Err(Failure::Invalid("360buy_param_json".into())),
            }
        }
        _ => Ok(Params::Form(form.clone())),
    }
}

/// Business parameter names per platform: (item id, title, price, quantity, idempotency key,
/// window start, window end, page, page size, order id).
struct Names {
    item_id: &'static str,
    title: &'static str,
    price: &'static str,
    quantity: &'static str,
    key: &'static str,
    start: &'static str,
    end: &'static str,
    page: &'static str,
    page_size: &'static str,
    order: &'static str,
}

const TOP_NAMES: Names = Names {
    item_id: "num_iid",
    title: "title",
    price: "price",
    quantity: "num",
    key: "out_request_id",
    start: "start_modified",
    end: "end_modified",
    page: "page_no",
    page_size: "page_size",
    order: "tid",
};
const JD_NAMES: Names = Names {
    item_id: "wareId",
    title: "title",
    price: "jdPrice",
    quantity: "stockNum",
    key: "outRequestId",
    start: "start_date",
    end: "end_date",
    page: "page",
    page_size: "page_size",
    order: "waybillCode",
};
const ALIBABA_NAMES: Names = Names {
    item_id: "productID",
    title: "subject",
    price: "price",
    quantity: "amount",
    key: "outRequestId",
    start: "modifyStartTime",
    end: "modifyEndTime",
    page: "page",
    page_size: "pageSize",
    order: "orderId",
};

fn names(p: Platform) -> &'static Names {
    match p {
        Platform::Taobao => &TOP_NAMES,
        Platform::Jd => &JD_NAMES,
        Platform::Alibaba => &ALIBABA_NAMES,
    }
}

fn required(params: &Params, key: &str) -> Result<String, Failure> {
    params
        .get(key)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| Failure::Missing(key.into()))
}

fn number<T: std::str::FromStr>(params: &Params, key: &str) -> Result<T, Failure> {
    required(params, key)?
        .trim()
        .parse()
        .map_err(|_| Failure::Invalid(key.into()))
}

fn optional_number(params: &Params, key: &str, default: u64) -> Result<u64, Failure> {
    match params.get(key).filter(|v| !v.is_empty()) {
        None => Ok(default),
        Some(v) => v.trim().parse().map_err(|_| Failure::Invalid(key.into())),
    }
}

fn window_time(p: Platform, params: &Params, key: &str) -> Result<i64, Failure> {
    let s = required(params, key)?;
    let t = match p {
        Platform::Alibaba => {
            // yyyyMMddHHmmssSSS+0800 (the offset is always GMT+8 here).
            let body = s.strip_suffix("+0800").unwrap_or(&s);
            parse_gmt8(body, "%Y%m%d%H%M%S%3f").or_else(|| parse_gmt8(body, "%Y%m%d%H%M%S"))
        }
        _ => parse_gmt8(&s, TOP_TIME),
    };
    t.map(|t| t.timestamp())
        .ok_or_else(|| Failure::Invalid(key.into()))
}

fn execute(sim: &Sim, call: &Call, params: &Params, now: DateTime<Utc>) -> Result<Value, Failure> {
    let p = call.platform;
    let n = names(p);
    let app = &sim.apps[call.app];
    let rid = || sim.request_id();
    let empty = sim.with_drill(|d| d.empty_field.clone());
    let mut body = match call.api {
        Api::ItemGet => {
            let id: u64 = number(params, n.item_id)?;
            let item = match data::catalog_item(sim.cfg.seed, sim.cfg.catalog_items, id) {
                Some(i) => i,
                None => app
                    .written
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(id)
                    .cloned()
                    .ok_or_else(|| Failure::NotFound("item", id.to_string()))?,
            };
            render_item(p, &item, rid)
        }
        Api::ItemAdd => {
            let title = required(params, n.title)?;
            let price = data::parse_price(&required(params, n.price)?)
                .ok_or_else(|| Failure::Invalid(n.price.into()))?;
            let quantity: u32 = number(params, n.quantity)?;
            let key = params.get(n.key);
            let item = ItemData {
                id: 0,
                title,
                price_cents: price,
                quantity,
            };
            let out = app.written.lock().unwrap_or_else(|e| e.into_inner()).add(
                key.as_deref(),
                item,
                now.timestamp(),
            );
            if out.duplicate {
                sim.slot(call.app, call.api).duplicate_write();
            }
            render_added(p, out, rid)
        }
        Api::OrderList => {
            let start = window_time(p, params, n.start)?;
            let end = window_time(p, params, n.end)?;
            if end < start {
                return Err(Failure::Invalid(format!("{} before {}", n.end, n.start)));
            }
            if p == Platform::Taobao && end - start > 86_400 {
                return Err(Failure::Invalid(format!(
                    "{} - {} exceeds one day",
                    n.end, n.start
                )));
            }
            let page = optional_number(params, n.page, 1)?.max(1);
            let size = optional_number(params, n.page_size, 40)?;
            if size == 0 || size > 100 {
                return Err(Failure::Invalid(format!("{} must be 1..=100", n.page_size)));
            }
            let all = app.shop.window(start, end);
            let from = ((page - 1) * size).min(all.len() as u64) as usize;
            let to = (from + size as usize).min(all.len());
            let has_next = page * size < all.len() as u64;
            render_orders(p, &all[from..to], all.len(), has_next, rid)
        }
        Api::LogisticsTrace => {
            let id: u64 = number(params, n.order)?;
            let order = app
                .shop
                .get(id)
                .ok_or_else(|| Failure::NotFound("order", id.to_string()))?;
            let steps = data::trace(order, &sim.cfg.orders, sim.started, now.timestamp());
            render_trace(p, order, &steps, rid)
        }
    };
    if !empty.is_empty() {
        blank_field(&mut body, &empty, p);
    }
    Ok(body)
}

/// Empty-field drill: set the named field to "" in every record of the body. `title`,
/// `price` and `num` name the item fields on every platform.
fn blank_field(body: &mut Value, field: &str, p: Platform) {
    let n = names(p);
    let key = match field {
        "title" => n.title,
        "price" => n.price,
        "num" | "quantity" => n.quantity,
        other => other,
    };
    fn walk(v: &mut Value, key: &str) {
        match v {
            Value::Object(m) => {
                for (k, child) in m.iter_mut() {
                    if k == key && !child.is_object() && !child.is_array() {
                        *child = Value::String(String::new());
                    } else {
                        walk(child, key);
                    }
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|c| walk(c, key)),
            _ => {}
        }
    }
    walk(body, key);
}

fn jd_key(api: Api) -> String {
    format!("{}_responce", api.method(Platform::Jd).replace('.', "_"))
}

fn render_item(p: Platform, item: &ItemData, rid: impl Fn() -> String) -> Value {
    let price = data::format_price(item.price_cents);
    match p {
        Platform::Taobao => json!({"item_seller_get_response": {
            "item": {"num_iid": item.id, "title": item.title, "price": price, "num": item.quantity},
            "request_id": rid()}}),
        Platform::Jd => json!({jd_key(Api::ItemGet): {"code": "0",
            "ware": {"wareId": item.id, "title": item.title, "jdPrice": price, "stockNum": item.quantity}}}),
        Platform::Alibaba => json!({"result": {"success": true,
            "toReturn": {"productID": item.id, "subject": item.title, "price": price, "amount": item.quantity}}}),
    }
}

fn render_added(p: Platform, out: AddOutcome, rid: impl Fn() -> String) -> Value {
    match p {
        Platform::Taobao => json!({"item_add_response": {
            "item": {"num_iid": out.id, "created": gmt8(out.created, TOP_TIME)}, "request_id": rid()}}),
        Platform::Jd => json!({jd_key(Api::ItemAdd): {"code": "0", "ware": {"wareId": out.id}}}),
        Platform::Alibaba => json!({"result": {"success": true, "productID": out.id}}),
    }
}

fn order_status(p: Platform, s: OrderState) -> &'static str {
    match (p, s) {
        (Platform::Taobao, OrderState::Unshipped) => "WAIT_SELLER_SEND_GOODS",
        (Platform::Taobao, OrderState::Shipped) => "WAIT_BUYER_CONFIRM_GOODS",
        (Platform::Taobao, OrderState::Signed) => "TRADE_FINISHED",
        (Platform::Jd, OrderState::Unshipped) => "WAIT_SELLER_STOCK_OUT",
        (Platform::Jd, OrderState::Shipped) => "WAIT_GOODS_RECEIVE_CONFIRM",
        (Platform::Jd, OrderState::Signed) => "FINISHED_L",
        (Platform::Alibaba, OrderState::Unshipped) => "waitsellersend",
        (Platform::Alibaba, OrderState::Shipped) => "waitbuyerreceive",
        (Platform::Alibaba, OrderState::Signed) => "success",
    }
}

fn render_orders(
    p: Platform,
    page: &[OrderData],
    total: usize,
    has_next: bool,
    rid: impl Fn() -> String,
) -> Value {
    match p {
        Platform::Taobao => {
            let trades: Vec<Value> = page
                .iter()
                .map(|o| {
                    json!({"tid": o.id, "status": order_status(p, o.state),
                        "modified": gmt8(o.modified, TOP_TIME), "payment": data::format_price(o.amount_cents)})
                })
                .collect();
            json!({"trades_sold_increment_get_response": {"total_results": total, "has_next": has_next,
                "trades": {"trade": trades}, "request_id": rid()}})
        }
        Platform::Jd => {
            let list: Vec<Value> = page
                .iter()
                .map(|o| {
                    json!({"orderId": o.id.to_string(), "orderState": order_status(p, o.state),
                        "modified": gmt8(o.modified, TOP_TIME), "orderTotalPrice": data::format_price(o.amount_cents)})
                })
                .collect();
            json!({jd_key(Api::OrderList): {"code": "0", "searchorderinfo_result": {
                "apiResult": {"success": true}, "orderTotal": total, "orderInfoList": list}}})
        }
        Platform::Alibaba => {
            let list: Vec<Value> = page
                .iter()
                .map(|o| {
                    json!({"baseInfo": {"id": o.id, "status": order_status(p, o.state),
                        "modifyTime": gmt8(o.modified, "%Y%m%d%H%M%S000+0800"),
                        "totalAmount": data::format_price(o.amount_cents)}})
                })
                .collect();
            json!({"result": list, "totalRecord": total})
        }
    }
}

fn render_trace(
    p: Platform,
    order: &OrderData,
    steps: &[TraceStep],
    rid: impl Fn() -> String,
) -> Value {
    let signed = steps.last().is_some_and(|s| s.kind == StepKind::Signed);
    match p {
        Platform::Taobao => {
            let list: Vec<Value> = steps
                .iter()
                .map(|s| {
                    let action = match s.kind {
                        StepKind::Got => "GOT",
                        StepKind::Transport => "TRANSPORT",
                        StepKind::Signed => "SIGNED",
                    };
                    json!({"status_time": gmt8(s.at, TOP_TIME), "status_desc": s.remark, "action": action})
                })
                .collect();
            let status = if signed {
                "对方已签收"
            } else if steps.is_empty() {
                "等待揽收"
            } else {
                "运输中"
            };
            json!({"logistics_trace_search_response": {"tid": order.id, "status": status,
                "trace_list": {"transit_step_info": list}, "request_id": rid()}})
        }
        Platform::Jd => {
            let list: Vec<Value> = steps
                .iter()
                .map(|s| {
                    let title = match s.kind {
                        StepKind::Got => "揽收",
                        StepKind::Transport => "运输中",
                        StepKind::Signed => "妥投",
                    };
                    json!({"ope_time": gmt8(s.at, TOP_TIME), "ope_remark": s.remark, "ope_title": title})
                })
                .collect();
            json!({jd_key(Api::LogisticsTrace): {"code": "0", "querytrace_result": {"data": list}}})
        }
        Platform::Alibaba => {
            let list: Vec<Value> = steps
                .iter()
                .map(|s| {
                    let status = match s.kind {
                        StepKind::Got => "GOT",
                        StepKind::Transport => "TRANSPORT",
                        StepKind::Signed => "SIGNED",
                    };
                    json!({"acceptTime": gmt8(s.at, TOP_TIME), "remark": s.remark, "status": status})
                })
                .collect();
            let traces = if list.is_empty() {
                json!([])
            } else {
                json!([{"logisticsSteps": list}])
            };
            json!({"success": true, "logisticsTrace": traces})
        }
    }
}

/// The platform's own error for `f` (docs/wire-formats.md).
pub(crate) fn render_failure(sim: &Sim, p: Platform, api: Option<Api>, f: &Failure) -> Answer {
    match p {
        Platform::Taobao => {
            let (code, msg, sub_code, sub_msg): (u32, &str, &str, String) = match f {
                Failure::Limited(s) | Failure::QuotaSpent(s) => (
                    7,
                    "App Call Limited",
                    "accesscontrol.limited-by-app-access-count",
                    format!("This ban will last for {s} more seconds"),
                ),
                Failure::Busy => (
                    10,
                    "Service Currently Unavailable",
                    "isp.service-unavailable",
                    "The service is temporarily unavailable".into(),
                ),
                Failure::Signature => (
                    25,
                    "Invalid signature",
                    "isv.invalid-signature",
                    "Invalid signature".into(),
                ),
                Failure::Session => (
                    27,
                    "Invalid session",
                    "isv.session-expired",
                    "Invalid session".into(),
                ),
                Failure::AppKey => (
                    29,
                    "Invalid app Key",
                    "isv.appkey-not-exists",
                    "Invalid app Key".into(),
                ),
                Failure::Timestamp => (
                    31,
                    "Invalid timestamp",
                    "isv.invalid-timestamp",
                    "timestamp missing, malformed or out of the allowed skew".into(),
                ),
                Failure::Missing(k) => (
                    40,
                    "Missing required arguments",
                    "isv.missing-parameter",
                    format!("Missing required arguments:{k}"),
                ),
                Failure::Invalid(k) => (
                    41,
                    "Invalid arguments",
                    "isv.invalid-parameter",
                    format!("Invalid arguments:{k}"),
                ),
                Failure::TooLarge(n) => (
                    41,
                    "Invalid arguments",
                    "isv.invalid-parameter",
                    format!("request body exceeds {n} bytes"),
                ),
                Failure::Method => (
                    22,
                    "Invalid method",
                    "isv.invalid-method",
                    "Invalid method".into(),
                ),
                Failure::NotFound(what, id) => {
                    let sub = if *what == "item" {
                        "isv.item-not-exist"
                    } else {
                        "isv.trade-not-exist"
                    };
                    (
                        15,
                        "Remote service error",
                        sub,
                        format!("{what} {id} does not exist"),
                    )
                }
            };
            Answer::ok(
                json!({"error_response": {"code": code, "msg": msg, "sub_code": sub_code,
                "sub_msg": sub_msg, "request_id": sim.request_id()}}),
            )
        }
        Platform::Jd => {
            let (code, zh, en): (&str, &str, String) = match f {
                Failure::Limited(s) | Failure::QuotaSpent(s) => (
                    "2",
                    "应用调用次数超限",
                    format!("App call limited, this ban will last for {s} more seconds"),
                ),
                Failure::Busy => ("66", "服务繁忙", "Service busy, please retry".into()),
                Failure::Signature => ("14", "签名无效", "Invalid signature".into()),
                Failure::AppKey => ("20", "app_key无效", "Invalid app_key".into()),
                Failure::Session => ("19", "access_token无效", "Invalid access_token".into()),
                Failure::Timestamp => ("22", "时间戳无效", "Invalid timestamp".into()),
                Failure::Missing(k) => ("60", "缺少参数", format!("Missing parameter: {k}")),
                Failure::Invalid(k) => ("60", "参数无效", format!("Invalid parameter: {k}")),
                Failure::TooLarge(n) => {
                    ("60", "请求过大", format!("Request body exceeds {n} bytes"))
                }
                Failure::Method => ("24", "方法不存在", "Invalid method".into()),
                Failure::NotFound(what, id) => {
                    let key = jd_key(api.unwrap_or(Api::ItemGet));
                    return Answer::ok(json!({key: {"code": "0", "apiResult": {"success": false,
                        "resultCode": "NOT_FOUND", "resultDescribe": format!("{what} {id} does not exist")}}}));
                }
            };
            Answer::ok(json!({"error_response": {"code": code, "zh_desc": zh, "en_desc": en}}))
        }
        Platform::Alibaba => {
            let (status, code, msg): (u16, &str, String) = match f {
                Failure::Limited(s) => (
                    400,
                    "gw.QosAppFrequencyLimit",
                    format!(
                        "App call exceeds limited frequency, ban will last for {s} more seconds"
                    ),
                ),
                Failure::QuotaSpent(s) => (
                    400,
                    "gw.NoUsageLeftError",
                    format!("No usage left today, ban will last for {s} more seconds"),
                ),
                Failure::Busy => (
                    503,
                    "gw.InternalError",
                    "Service unavailable, please retry".into(),
                ),
                Failure::Signature => (400, "gw.SignatureInvalid", "Signature invalid".into()),
                Failure::AppKey => (400, "gw.AppKeyNotExist", "App key does not exist".into()),
                Failure::Session => (
                    401,
                    "gw.InvalidAccessToken",
                    "Access token invalid or expired".into(),
                ),
                // 1688 has no timestamp code of its own in the contract: a caller error.
                Failure::Timestamp => (
                    400,
                    "gw.ParamMissing",
                    "_aop_timestamp malformed or out of the allowed skew".into(),
                ),
                Failure::Missing(k) => (400, "gw.ParamMissing", format!("Missing parameter: {k}")),
                Failure::Invalid(k) => (400, "gw.ParamMissing", format!("Invalid parameter: {k}")),
                Failure::TooLarge(n) => (
                    413,
                    "gw.RequestEntityTooLarge",
                    format!("Request body exceeds {n} bytes"),
                ),
                Failure::Method => (400, "gw.APIUnsupported", "API not supported".into()),
                Failure::NotFound(what, id) => {
                    let code = if *what == "item" {
                        "PRODUCT_NOT_EXIST"
                    } else {
                        "ORDER_NOT_EXIST"
                    };
                    return Answer::ok(json!({"success": false, "errorCode": code,
                        "errorMessage": format!("{what} {id} does not exist")}));
                }
            };
            Answer {
                status: StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST),
                body: json!({"error_code": code, "error_message": msg}),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_samples_center_on_median() {
        assert_eq!(sample_latency(0, 100), 0);
        let mut v: Vec<u64> = (0..2001).map(|_| sample_latency(50, 200)).collect();
        v.sort();
        let median = v[1000];
        assert!((35..=70).contains(&median), "median {median}");
        let p95 = v[1900];
        assert!((120..=300).contains(&p95), "p95 {p95}");
    }

    #[test]
    fn blank_field_maps_logical_names() {
        let mut b = json!({"result": {"toReturn": {"subject": "x", "price": "1.00"}}});
        blank_field(&mut b, "title", Platform::Alibaba);
        assert_eq!(b["result"]["toReturn"]["subject"], "");
        assert_eq!(b["result"]["toReturn"]["price"], "1.00");
    }
}
