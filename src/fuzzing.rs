//! Entry points into the input parsers, for the `cargo fuzz` targets in `fuzz/` (nightly
//! only) and the property tests of the test suite (`tests/suite/parsers_props.rs`, stable):
//! a platform's answer from raw bytes (JSON decode, `check_body`, `parse_response`, for every
//! API), error classification and ban parsing, the config file, job specs and item files
//! (docs/design.md, "Fuzzing").
//!
//! Every function here takes arbitrary input and never panics itself: a panic is the parser's.
//! The `check_*` functions state what holds for every input (`Err` names the broken
//! property); the fuzz targets panic on it, so a broken property is a crash like any other.
//! Not an API: hidden from the docs, and free to change with the parsers.

use crate::config::{Config, ConfigError, ConfigProblem};
use crate::jobs::spec::{read_item_ids, InputError, JobSpec};
use crate::platform::classify::{keyword_class, parse_ban};
use crate::platform::client::{check_body, decode_body, parse_response};
use crate::platform::{Api, ApiRequest, ApiResponse, CallError, ErrorClass, Platform};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

/// The clock every answer is judged at: 2026-01-01 12:00 GMT+8 (bans to the quota reset
/// are then 12 hours long), so a run is repeatable.
pub fn fixed_now() -> DateTime<Utc> {
    DateTime::from_timestamp(1_767_240_000, 0).unwrap_or_default()
}

pub use crate::platform::sample::new_item;

/// The request each API's answer is parsed for (the parsers read only its API, its order id
/// and the page it asked for).
pub fn request(api: Api) -> ApiRequest {
    let now = fixed_now();
    match api {
        Api::ItemGet => ApiRequest::ItemGet {
            item_id: "1".into(),
        },
        Api::ItemAdd => ApiRequest::ItemAdd {
            item: Box::new(new_item("SF1688-1")),
        },
        Api::ItemFind => ApiRequest::ItemFind {
            seller_code: "SF1688-1".into(),
        },
        Api::OrderList => ApiRequest::OrderList {
            start: now - chrono::TimeDelta::days(1),
            end: now,
            page: 1,
            page_size: 100,
        },
        Api::LogisticsTrace => ApiRequest::LogisticsTrace {
            order_id: "1001".into(),
            tracking: Some("JDVA00000001001".into()),
        },
        Api::LogisticsInfo => ApiRequest::LogisticsInfo {
            order_id: "1001".into(),
        },
        Api::MessageConsume => ApiRequest::MessageConsume { quantity: 100 },
        Api::MessageConfirm => ApiRequest::MessageConfirm { ids: vec![1, 2] },
    }
}

/// What the client makes of an answer of `http_status` with `body` to a call of `api`: the
/// body decoded as the client decodes it, judged, then parsed into the typed response.
pub fn response(
    platform: Platform,
    api: Api,
    http_status: u16,
    body: &[u8],
) -> Result<ApiResponse, CallError> {
    judge(platform, api, http_status, &decode_body(body))
}

/// [`response`] of a decoded body.
fn judge(
    platform: Platform,
    api: Api,
    http_status: u16,
    body: &Value,
) -> Result<ApiResponse, CallError> {
    check_body(platform, api, http_status, body, fixed_now())?;
    parse_response(platform, &request(api), body)
}

/// HTTP statuses each fuzzed body is answered with: success, a caller error the platform
/// does not map, a refused token, a rate limit and a gateway failure.
pub const FUZZ_STATUSES: [u16; 5] = [200, 400, 401, 429, 503];

/// [`response`] of `body` for every API and every status of [`FUZZ_STATUSES`], each checked
/// with [`check_response`]: the first broken property.
pub fn fuzz_response(platform: Platform, body: &[u8]) -> Result<(), String> {
    // Decoded once: the decode is the same for every call.
    let value = decode_body(body);
    for api in Api::ALL {
        for status in FUZZ_STATUSES {
            let result = judge(platform, api, status, &value);
            check_judged(platform, api, status, &value, &result)?;
        }
    }
    Ok(())
}

/// What holds for every answer: a failed HTTP status or a body that is not a JSON object is
/// never a success; a success is the API's own response and survives the JSON round trip of
/// the stale cache; an error satisfies [`check_call_error`].
pub fn check_response(
    platform: Platform,
    api: Api,
    http_status: u16,
    body: &[u8],
    result: &Result<ApiResponse, CallError>,
) -> Result<(), String> {
    check_judged(platform, api, http_status, &decode_body(body), result)
}

/// [`check_response`] of a decoded body.
fn check_judged(
    platform: Platform,
    api: Api,
    http_status: u16,
    body: &Value,
    result: &Result<ApiResponse, CallError>,
) -> Result<(), String> {
    let at = || format!("{platform} {api} HTTP {http_status}");
    match result {
        Ok(resp) => {
            if !(200..300).contains(&http_status) {
                return Err(format!("{}: a failed status parsed as {resp:?}", at()));
            }
            if !body.is_object() {
                return Err(format!(
                    "{}: a body that is not a JSON object parsed as {resp:?}",
                    at()
                ));
            }
            let matches = matches!(
                (api, resp),
                (Api::ItemGet, ApiResponse::Item(_))
                    | (Api::ItemAdd, ApiResponse::ItemAdded { .. })
                    | (Api::OrderList, ApiResponse::OrderPage(_))
                    | (Api::LogisticsTrace, ApiResponse::Trace(_))
                    | (Api::LogisticsInfo, ApiResponse::Parcels { .. })
            );
            if !matches {
                return Err(format!("{}: answer of another API: {resp:?}", at()));
            }
            round_trips(resp).map_err(|e| format!("{}: {e}", at()))
        }
        Err(e) => check_call_error(e).map_err(|v| format!("{}: {v}", at())),
    }
}

/// What holds for every classified error: a spent quota is a rate limit (`slow`), the app's
/// quota is a spent quota, a keyword guess is a `slow` without a ban, a ban of an hour or
/// more spends the quota, the message is bounded, and it displays.
pub fn check_call_error(e: &CallError) -> Result<(), String> {
    if e.quota_spent && e.class != ErrorClass::Slow {
        return Err(format!("quota spent on a {} error: {e:?}", e.class));
    }
    if e.app_quota && !e.quota_spent {
        return Err(format!("the app's quota without a spent quota: {e:?}"));
    }
    if e.guessed_limit && (e.class != ErrorClass::Slow || e.ban.is_some()) {
        return Err(format!(
            "a guessed limit that is not a slow without ban: {e:?}"
        ));
    }
    if e.class == ErrorClass::Slow
        && e.ban.is_some_and(|b| b >= Duration::from_secs(3600))
        && !e.quota_spent
    {
        return Err(format!(
            "a ban of hours that does not spend the quota: {e:?}"
        ));
    }
    if e.message.chars().count() > 301 {
        return Err(format!(
            "message of {} characters (at most 300 and `…`)",
            e.message.chars().count()
        ));
    }
    if e.to_string().is_empty() || e.class_line().is_empty() {
        return Err(format!("an error that displays as nothing: {e:?}"));
    }
    Ok(())
}

/// `value` read back from its JSON is `value` (what the link layer caches and the ledger
/// keeps is read back later).
fn round_trips<T>(value: &T) -> Result<(), String>
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let text = serde_json::to_string(value).map_err(|e| format!("not serialisable: {e}"))?;
    let back: T = serde_json::from_str(&text)
        .map_err(|e| format!("its JSON {text} does not read back: {e}"))?;
    if &back != value {
        return Err(format!("JSON round trip changed {value:?} into {back:?}"));
    }
    Ok(())
}

/// One error answer classified on every platform, and its text read by the shared rules.
#[derive(Debug, Clone)]
pub struct Classification {
    /// The message keywords' class (the fallback for unmapped codes).
    pub keyword: ErrorClass,
    /// The ban the text names ("ban will last for N more seconds").
    pub ban: Option<Duration>,
    /// TOP's `error_response` with this code, sub_code and text (msg and sub_msg).
    pub taobao: CallError,
    /// JOS's `error_response` with this code and text (en_desc).
    pub jd: CallError,
    /// 1688's gateway error with this `error_code` and text (error_message).
    pub alibaba: CallError,
}

/// An error answer of `code`, `sub_code` and `text` at `http_status`, as each platform
/// words it, through the platform's own `check_body` (whose code tables, keyword fallback
/// and ban parsing decide), judged at `now`.
pub fn classify(
    code: &str,
    sub_code: &str,
    http_status: u16,
    text: &str,
    now: DateTime<Utc>,
) -> Classification {
    let judge = |platform: Platform, body: Value| {
        match check_body(platform, Api::ItemGet, http_status, &body, now) {
            Err(e) => e,
            // Each body below is an error answer; an `Ok` would be the parser's bug, kept
            // visible as an error no classification produces.
            Ok(()) => CallError::parse(platform, Api::ItemGet, http_status, "accepted".into()),
        }
    };
    Classification {
        keyword: keyword_class(text),
        ban: parse_ban(text),
        taobao: judge(
            Platform::Taobao,
            json!({"error_response": {"code": code, "msg": text, "sub_code": sub_code, "sub_msg": text}}),
        ),
        jd: judge(
            Platform::Jd,
            json!({"error_response": {"code": code, "en_desc": text}}),
        ),
        alibaba: judge(
            Platform::Alibaba,
            json!({"error_code": code, "error_message": text}),
        ),
    }
}

/// Fuzz input of [`fuzz_classify`]: lines `code`, `sub_code`, `status`, `seconds`, then the
/// text (the rest, newlines included). `status` defaults to 200; `seconds` (modulo two days)
/// after 2026-01-01 00:00 UTC is the clock, so bans near the quota reset are reached.
pub fn fuzz_classify(data: &[u8]) -> Result<(), String> {
    let input = String::from_utf8_lossy(data);
    let mut parts = input.splitn(5, '\n');
    let mut next = || parts.next().unwrap_or("");
    let (code, sub_code, status, seconds, text) = (next(), next(), next(), next(), next());
    let status = status.trim().parse::<u16>().unwrap_or(200);
    let seconds = seconds
        .trim()
        .parse::<i64>()
        .unwrap_or(0)
        .rem_euclid(2 * 86_400);
    let now = DateTime::from_timestamp(1_767_225_600 + seconds, 0).unwrap_or_default();
    let c = classify(code, sub_code, status, text, now);
    check_classification(&c)
}

/// What holds for every classification: each platform's error satisfies
/// [`check_call_error`], and an error answer is never accepted.
pub fn check_classification(c: &Classification) -> Result<(), String> {
    for e in [&c.taobao, &c.jd, &c.alibaba] {
        check_call_error(e).map_err(|v| format!("{}: {v}", e.platform))?;
        if e.code == "parse" && e.message == "accepted" {
            return Err(format!("{}: an error answer was accepted", e.platform));
        }
    }
    Ok(())
}

/// A problem of a config file, job spec or item file: where and what.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// The key it concerns (empty when none: a syntax error, an item line).
    pub key: String,
    /// The 1-based line, when known.
    pub line: Option<usize>,
    /// Only a warning (config files).
    pub warning: bool,
    /// The whole message as shown to the user.
    pub shown: String,
}

fn config_problem(p: &ConfigProblem) -> Problem {
    Problem {
        key: p.key.clone(),
        line: p.line,
        warning: p.warning,
        shown: p.to_string(),
    }
}

fn input_problem(e: &InputError) -> Problem {
    Problem {
        key: String::new(),
        line: e.line,
        warning: false,
        shown: e.to_string(),
    }
}

/// The name config text, job specs and item files are parsed under (messages only).
pub const CONFIG_PATH: &str = "fuzz/syncfleet.toml";
/// See [`CONFIG_PATH`].
pub const SPEC_PATH: &str = "fuzz/job.toml";
/// See [`CONFIG_PATH`].
pub const ITEMS_PATH: &str = "fuzz/items.txt";

/// Config text parsed and validated as `Config::load` does after reading the file.
pub fn config_file(text: &str) -> Result<Config, Vec<Problem>> {
    Config::parse(Path::new(CONFIG_PATH), text)
        .map_err(|ConfigError(problems)| problems.iter().map(config_problem).collect())
}

/// The warnings of a valid config.
pub fn config_warnings(cfg: &Config) -> Vec<Problem> {
    cfg.warnings.iter().map(config_problem).collect()
}

/// [`config_file`] of `data` (bytes that are not UTF-8 are refused when the file is read,
/// before parsing), checked with [`check_config`].
pub fn fuzz_config(data: &[u8]) -> Result<(), String> {
    let Ok(text) = std::str::from_utf8(data) else {
        return Ok(());
    };
    check_config(text, &config_file(text))
}

/// What holds for every config text: a refusal has an error (not only warnings), every line
/// named is in the text; an accepted config gives every gate a positive finite rate, a
/// burst of at least 1 and a concurrency of at least 1, a client setup to every platform it
/// names, and only warnings in `warnings`.
pub fn check_config(text: &str, result: &Result<Config, Vec<Problem>>) -> Result<(), String> {
    let lines = text.lines().count().max(1);
    match result {
        Err(problems) => {
            if !problems.iter().any(|p| !p.warning) {
                return Err(format!("refused without an error: {problems:?}"));
            }
            for p in problems {
                if p.line.is_some_and(|l| l == 0 || l > lines + 1) {
                    return Err(format!("line out of the text ({lines} lines): {p:?}"));
                }
                if p.shown.is_empty() {
                    return Err("a problem shown as nothing".into());
                }
            }
            Ok(())
        }
        Ok(cfg) => {
            if let Some(p) = cfg.warnings.iter().find(|p| !p.warning) {
                return Err(format!("an error among the warnings: {p}"));
            }
            for platform in Platform::ALL {
                for api in Api::ALL {
                    let g = cfg.gate(platform, api);
                    if !(g.rate.is_finite() && g.rate > 0.0) {
                        return Err(format!("gate {platform}.{api}: rate {}", g.rate));
                    }
                    if !(g.burst.is_finite() && g.burst >= 1.0) {
                        return Err(format!("gate {platform}.{api}: burst {}", g.burst));
                    }
                    if g.concurrency < 1 {
                        return Err(format!("gate {platform}.{api}: concurrency 0"));
                    }
                }
                if let Some(pc) = cfg.platform(platform) {
                    let _ = pc.client_options();
                }
            }
            Ok(())
        }
    }
}

/// Spec text parsed and checked as `syncfleet enqueue --spec` does after reading the file
/// (`items_file` resolves next to [`SPEC_PATH`]).
pub fn job_spec(text: &str) -> Result<JobSpec, Problem> {
    JobSpec::parse(Path::new(SPEC_PATH), text).map_err(|e| input_problem(&e))
}

/// A listing's inline `items` as the text enqueue reads them from (one a line, through the
/// item-file reader); `None` for a spec without any.
pub fn inline_items_text(spec: &JobSpec) -> Option<String> {
    match spec {
        JobSpec::Listing { items, .. } if !items.is_empty() => Some(items.join("\n")),
        _ => None,
    }
}

/// [`job_spec`] of `data` (bytes that are not UTF-8 are refused when the file is read),
/// checked with [`check_job_spec`], and a listing's inline items with [`check_item_file`].
pub fn fuzz_job_spec(data: &[u8]) -> Result<(), String> {
    let Ok(text) = std::str::from_utf8(data) else {
        return Ok(());
    };
    let result = job_spec(text);
    check_job_spec(text, &result)?;
    if let Some(items) = result.as_ref().ok().and_then(inline_items_text) {
        check_item_file(items.as_bytes(), &item_file(items.as_bytes()))?;
    }
    Ok(())
}

/// What holds for every spec text: a refusal names a line in the text, or none; an accepted
/// spec passes validation again, names a shop, and reads back from the JSON the ledger
/// keeps as itself.
pub fn check_job_spec(text: &str, result: &Result<JobSpec, Problem>) -> Result<(), String> {
    let lines = text.lines().count().max(1);
    match result {
        Err(p) => {
            if p.line.is_some_and(|l| l == 0 || l > lines + 1) {
                return Err(format!("line out of the text ({lines} lines): {p:?}"));
            }
            if !p.shown.starts_with(SPEC_PATH) {
                return Err(format!("a problem that does not name the file: {p:?}"));
            }
            Ok(())
        }
        Ok(spec) => {
            spec.validate()
                .map_err(|e| format!("accepted, yet invalid: {e}: {spec:?}"))?;
            if spec.shop().trim().is_empty() {
                return Err(format!("accepted without a shop: {spec:?}"));
            }
            round_trips(spec)
        }
    }
}

/// Item ids read from an item file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ItemIds {
    /// The ids, in file order, each once.
    pub ids: Vec<String>,
    /// Lines repeating an id already read.
    pub duplicates: usize,
    /// The line counts the progress callback was given.
    pub progress: Vec<usize>,
}

/// An item file read as `syncfleet enqueue` reads `--items` / `items_file`.
pub fn item_file(data: &[u8]) -> Result<ItemIds, Problem> {
    let mut progress = Vec::new();
    let list = read_item_ids(data, Path::new(ITEMS_PATH), |n| progress.push(n))
        .map_err(|e| input_problem(&e))?;
    Ok(ItemIds {
        ids: list.ids,
        duplicates: list.duplicates,
        progress,
    })
}

/// [`item_file`] of `data`, checked with [`check_item_file`].
pub fn fuzz_item_file(data: &[u8]) -> Result<(), String> {
    check_item_file(data, &item_file(data))
}

/// The lines of `data` as a line reader counts them (a last line needs no newline).
pub fn line_count(data: &[u8]) -> usize {
    data.iter().filter(|b| **b == b'\n').count() + usize::from(!data.ends_with(b"\n"))
        - usize::from(data.is_empty())
}

/// What holds for every item file: each id is 1 to 20 digits without a leading zero, and
/// read once; ids and duplicates are at most the lines; progress is reported every 10,000
/// lines; a refusal names a line of the file.
pub fn check_item_file(data: &[u8], result: &Result<ItemIds, Problem>) -> Result<(), String> {
    let lines = line_count(data);
    match result {
        Err(p) => match p.line {
            Some(l) if (1..=lines).contains(&l) => Ok(()),
            _ => Err(format!("a refusal outside the {lines} lines: {p:?}")),
        },
        Ok(list) => {
            let mut seen = std::collections::HashSet::new();
            for id in &list.ids {
                let valid = (1..=20).contains(&id.len())
                    && id.bytes().all(|b| b.is_ascii_digit())
                    && !id.starts_with('0');
                if !valid {
                    return Err(format!("accepted id `{id}`"));
                }
                if !seen.insert(id) {
                    return Err(format!("id `{id}` read twice"));
                }
            }
            if list.ids.len() + list.duplicates > lines {
                return Err(format!(
                    "{} ids and {} duplicates from {lines} lines",
                    list.ids.len(),
                    list.duplicates
                ));
            }
            let expected: Vec<usize> = (1..=lines / 10_000).map(|k| k * 10_000).collect();
            if list.progress != expected {
                return Err(format!(
                    "progress {:?} for {lines} lines",
                    &list.progress[..list.progress.len().min(5)]
                ));
            }
            Ok(())
        }
    }
}
