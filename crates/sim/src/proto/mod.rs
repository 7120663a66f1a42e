//! The platform side of the three protocols (docs/wire-formats.md): parse and verify a
//! request, count it, run it against the generated data, answer in the platform's format.
//!
//! Order of checks for every call: identify (app key, method) → idle-close drill →
//! per-second window and daily quota (every call counts) → latency → outage / error drills →
//! timestamp → signature → session → business params → data.
//!
//! By concern: this module holds the call types, identification and the run of a call;
//! `verify` the timestamp, signature and session checks; `execute` the business params and
//! the data they ask for; `render` the platforms' success and error bodies.

mod execute;
mod parcel;
pub mod render;
mod verify;
mod write;
pub use render::order_status;

use super::state::{Admit, Outcome, Sim};
use crate::platform::{Api, Platform};
use crate::time::china_offset;
use axum::http::StatusCode;
use chrono::{DateTime, NaiveDateTime, TimeZone, Utc};
use execute::{execute, huge_answer};
use render::render_failure;
use serde_json::{Map, Value};
use std::time::Duration;
use verify::verify;

/// Why a call failed, before the platform spells it.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// Over the API's per-second limit; the ban in seconds.
    Limited(u64),
    /// The API's daily quota is spent; seconds to the day's reset.
    QuotaSpent(u64),
    /// The app key's daily count over all its APIs is spent.
    AppQuotaSpent(u64),
    /// Service busy: a transient, Retry-class error.
    Busy,
    /// The signature does not match.
    Signature,
    /// No app with this key on this platform.
    AppKey,
    /// The timestamp is missing, malformed or out of the allowed skew.
    Timestamp,
    /// The session is refused: unknown, ended, or refused by a drill.
    Session,
    /// A required parameter is missing (named).
    Missing(String),
    /// A parameter is invalid (named, or what is wrong with it).
    Invalid(String),
    /// The method (or 1688 path) names no API the simulator knows.
    Method,
    /// No such object: what it is (`item`, `order`, ...) and its id.
    NotFound(&'static str, String),
    /// The request body exceeds this many bytes.
    TooLarge(usize),
    /// A permanent business error with an unmapped code, worded like a limit.
    WordedLimit,
}

impl Failure {
    fn outcome(&self, platform: Platform) -> Outcome {
        match self {
            Failure::Limited(_) => Outcome::RejectedLimit,
            Failure::QuotaSpent(_) | Failure::AppQuotaSpent(_) => Outcome::RejectedQuota,
            Failure::Busy => Outcome::Retry,
            // TOP says isv.*-not-exist (Fatal); JD and 1688 answer a business failure in a
            // success body, which clients see as Unknown.
            Failure::NotFound(..) if platform != Platform::Taobao => Outcome::Unknown,
            Failure::WordedLimit => Outcome::Unknown,
            _ => Outcome::Fatal,
        }
    }
}

/// A platform answer: HTTP status and JSON body.
#[derive(Debug)]
pub struct Answer {
    /// The HTTP status.
    pub status: StatusCode,
    /// The JSON body.
    pub body: Value,
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
pub enum Reply {
    /// Send this answer.
    Answer(Answer),
    /// A body of this many bytes, with its length declared or not (the huge-answer drill).
    Huge {
        /// The body's size in bytes.
        bytes: u64,
        /// Whether Content-Length declares it.
        declared: bool,
    },
    /// Idle-close drill: never answer, hold, then close the connection.
    DropConnection,
    /// Lost-answer drill: the call was done; close the connection at once, unanswered.
    Hangup,
}

/// The request's parameters: form pairs (TOP, 1688) or the fields of `360buy_param_json` (JD).
pub enum Params {
    /// The form pairs, in the order received.
    Form(Vec<(String, String)>),
    /// The fields of JD's `360buy_param_json`.
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
                // An object or a list is there when it holds something (JD's `ware`, `skus`).
                Value::Object(o) if !o.is_empty() => Some(Value::Object(o.clone()).to_string()),
                Value::Array(a) if !a.is_empty() => Some(Value::Array(a.clone()).to_string()),
                _ => None,
            },
        }
    }

    /// A JSON value of JD's `360buy_param_json` (None on a form).
    fn json(&self, key: &str) -> Option<Value> {
        match self {
            Params::Form(_) => None,
            Params::Json(m) => m.get(key).cloned(),
        }
    }
}

/// The value of `key` among form pairs; the last one when it repeats.
pub fn form_get<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
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
pub fn unattributed(sim: &Sim, platform: Platform, f: Failure) -> Reply {
    sim.unattributed();
    Reply::Answer(render_failure(sim, platform, None, &f))
}

/// Everything identified about a call before admission.
pub struct Call {
    /// The platform called.
    pub platform: Platform,
    /// The app's index in [`Sim::apps`].
    pub app: usize,
    /// The API called.
    pub api: Api,
    /// How long the connection was idle before this request (ms), if known.
    pub idle_ms: Option<u64>,
    /// The signed params as received (all form pairs).
    pub form: Vec<(String, String)>,
    /// 1688: the url path that is signed.
    pub url_path: String,
}

/// Identify a TOP call from its form, or answer its error.
pub fn identify_top(
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
pub fn identify_jd(
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
pub fn identify_alibaba(
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

/// Run an identified call to its answer. `arrived`: when the request reached the platform,
/// the instant its per-second limit and quota count it at.
pub async fn run(sim: &Sim, call: Call, arrived: DateTime<Utc>) -> Reply {
    let slot = sim.slot(call.app, call.api);
    let (idle_close_s, latency_ms, error_ratio, outage, outage_hang, expired, lost_answers) = sim
        .with_drill(|d| {
            (
                d.idle_close_s,
                d.latency_ms,
                d.error_ratio,
                d.outage,
                d.outage_hang,
                d.expired_session,
                d.lost_write_answer_ratio,
            )
        });
    if idle_close_s > 0 && call.idle_ms.is_some_and(|ms| ms > idle_close_s * 1000) {
        slot.idle_closed();
        return Reply::DropConnection;
    }
    let now = arrived;
    // The app's daily count is checked first: when it is spent no API counts the call.
    let admitted = match sim.apps[call.app].admit(sim.cfg.day, now) {
        Some(ban_s) => {
            slot.count_refused();
            Admit::AppQuotaSpent { ban_s }
        }
        None => slot.admit(now),
    };
    let result = match admitted {
        Admit::Limited { ban_s } => Err(Failure::Limited(ban_s)),
        Admit::QuotaSpent { ban_s } => Err(Failure::QuotaSpent(ban_s)),
        Admit::AppQuotaSpent { ban_s } => Err(Failure::AppQuotaSpent(ban_s)),
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
                let verified = verify(sim, &call, now, expired);
                if let Some((bytes, declared)) = verified
                    .as_ref()
                    .ok()
                    .and_then(|(params, _)| huge_answer(sim, &call, params))
                {
                    slot.record(Outcome::Retry);
                    return Reply::Huge { bytes, declared };
                }
                verified.and_then(|(params, shop)| {
                    let body = execute(sim, &call, &shop, &params, now)?;
                    if !shop.is_empty() {
                        sim.shop_ok(call.platform, &shop, call.api, now);
                    }
                    Ok(body)
                })
            }
        }
    };
    let answer = match result {
        // The write is done; its answer never reaches the caller (a timeout after the commit).
        Ok(_)
            if call.api.is_write()
                && lost_answers > 0.0
                && rand::random::<f64>() < lost_answers =>
        {
            slot.record(Outcome::Ok);
            slot.answer_lost();
            return Reply::Hangup;
        }
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
}
