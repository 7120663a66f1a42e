//! Probes: a fixed sample call per (platform, API class) that checks auth, latency and that
//! required fields are non-empty, so expired tokens, silently renamed or emptied fields and
//! quota changes are seen before a customer sees them. In a fleet one worker, holding a Redis
//! lease, runs them every interval.
//!
//! The batch class has no API in syncfleet yet, so it has no sample.

use super::gateway::Gateway;
use crate::config::ProbeConfig;
use crate::platform::{ApiClass, ApiRequest, ApiResponse, CallError, ErrorClass, Platform};
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::future::Future;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;

/// Log target of probe results and alerts.
pub(crate) const PROBE_TARGET: &str = "syncfleet::probe";
/// Name of the fleet lease that elects the probing worker.
pub(crate) const PROBE_LEASE: &str = "probe";

/// The result of one probe.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeReport {
    pub(crate) platform: Platform,
    /// The API of the sample call.
    pub api: crate::platform::Api,
    pub(crate) class: ApiClass,
    /// HTTP time of the sample call (zero when it never went out).
    pub(crate) latency: Duration,
    /// What broke; empty when the probe passed.
    pub(crate) problems: Vec<String>,
}

impl ProbeReport {
    /// Whether the probe passed (no problem found).
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }

    /// `probe alert: taobao item_get (detail): auth failed: ...; field `title` is empty`,
    /// or `None` when the probe passed.
    pub fn alert_line(&self) -> Option<String> {
        (!self.ok()).then(|| {
            format!(
                "probe alert: {} {} ({}): {}",
                self.platform,
                self.api,
                self.class.as_str(),
                self.problems.join("; ")
            )
        })
    }

    /// One line for the terminal: the alert, or `probe ok: ...` with the latency.
    pub(crate) fn line(&self) -> String {
        self.alert_line().unwrap_or_else(|| {
            format!(
                "probe ok: {} {} ({}) {} ms",
                self.platform,
                self.api,
                self.class.as_str(),
                self.latency.as_millis()
            )
        })
    }
}

/// The fixed sample of each API class on `platform` at `now` (list: page 1 of the last day,
/// one order; detail: the sample item; logistics: the sample order's trace on TOP, its
/// parcels on 1688, and on JD the trace of the sample waybill when one is configured: JD's
/// trace is asked by waybill, not order).
pub(crate) fn samples(
    cfg: &ProbeConfig,
    platform: Platform,
    now: DateTime<Utc>,
) -> Vec<(ApiClass, ApiRequest)> {
    let logistics = match platform {
        Platform::Taobao => Some(ApiRequest::LogisticsTrace {
            order_id: cfg.sample_order_id.clone(),
            tracking: None,
        }),
        Platform::Jd => cfg
            .sample_waybill
            .clone()
            .map(|waybill| ApiRequest::LogisticsTrace {
                order_id: cfg.sample_order_id.clone(),
                tracking: Some(waybill),
            }),
        Platform::Alibaba => Some(ApiRequest::LogisticsInfo {
            order_id: cfg.sample_order_id.clone(),
        }),
    };
    let mut out = vec![
        (
            ApiClass::List,
            ApiRequest::OrderList {
                start: now - chrono::Duration::days(1),
                end: now,
                page: 1,
                page_size: 1,
            },
        ),
        (
            ApiClass::Detail,
            ApiRequest::ItemGet {
                item_id: cfg.sample_item_id.clone(),
            },
        ),
    ];
    out.extend(logistics.map(|req| (ApiClass::Logistics, req)));
    out
}

/// Whether a platform error is about identity: session / token / signature / app key.
pub(crate) fn is_auth_error(e: &CallError) -> bool {
    if e.http_status == Some(401) {
        return true;
    }
    let text = format!("{} {}", e.code, e.message).to_lowercase();
    e.class == ErrorClass::Fatal
        && [
            "session",
            "token",
            "signature",
            "appkey",
            "app key",
            "app_key",
            "auth",
        ]
        .iter()
        .any(|k| text.contains(k))
}

/// Paths of string fields that are empty, e.g. `title`, `orders[0].status`.
pub(crate) fn empty_fields(resp: &ApiResponse) -> Vec<String> {
    fn walk(v: &Value, path: &str, out: &mut Vec<String>) {
        match v {
            Value::String(s) if s.trim().is_empty() => out.push(path.to_string()),
            Value::Object(m) => {
                for (k, v) in m {
                    // The serde tag names the variant, it is not a platform field; an item's
                    // category and description are empty where its API gives none.
                    if path.is_empty() && matches!(k.as_str(), "kind" | "category" | "description")
                    {
                        continue;
                    }
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    walk(v, &p, out);
                }
            }
            Value::Array(a) => {
                for (i, v) in a.iter().enumerate() {
                    walk(v, &format!("{path}[{i}]"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Ok(v) = serde_json::to_value(resp) {
        walk(&v, "", &mut out);
    }
    out
}

/// Judge one sample call (pure: the checks, without the call).
pub(crate) fn judge(
    result: &Result<ApiResponse, CallError>,
    latency: Duration,
    latency_limit: Duration,
) -> Vec<String> {
    let mut problems = Vec::new();
    match result {
        Ok(resp) => {
            for f in empty_fields(resp) {
                problems.push(format!("required field `{f}` is empty"));
            }
        }
        Err(e) if is_auth_error(e) => problems.push(format!("auth failed: {e}")),
        Err(e) => {
            let what = match e.class {
                ErrorClass::Slow if e.quota_spent => "daily quota spent",
                ErrorClass::Slow => "rate limited",
                ErrorClass::Retry => "upstream failing",
                ErrorClass::Fatal => "call rejected",
                ErrorClass::Unknown => "unknown error",
            };
            problems.push(format!("{what}: {e}"));
        }
    }
    if latency > latency_limit {
        problems.push(format!(
            "slow: {} ms (limit {} ms)",
            latency.as_millis(),
            latency_limit.as_millis()
        ));
    }
    problems
}

/// Run every sample of every platform of the gateway once. Alerts are logged at warn.
pub async fn run_probes(gw: &Gateway, cfg: &ProbeConfig) -> Vec<ProbeReport> {
    let mut out = Vec::new();
    let now = gw.clock().utc();
    for platform in gw.platforms() {
        for (class, req) in samples(cfg, platform, now) {
            let api = req.api();
            let read_timeout = gw.read_timeout(api);
            // Half the read timeout: a probe that slow means real calls are near timing out.
            let limit = read_timeout / 2;
            let (latency, problems) =
                match gw.probe_call(platform, &req, Duration::from_secs(2)).await {
                    Ok((result, took)) => (took, judge(&result, took, limit)),
                    Err(e) => (Duration::ZERO, vec![format!("not sent: {e}")]),
                };
            let report = ProbeReport {
                platform,
                api,
                class,
                latency,
                problems,
            };
            match report.alert_line() {
                Some(line) => {
                    tracing::warn!(target: PROBE_TARGET, %platform, api = api.as_str(), "{line}")
                }
                None => tracing::debug!(target: PROBE_TARGET, "{}", report.line()),
            }
            out.push(report);
        }
    }
    out
}

/// Probe every `cfg.interval_s` until `shutdown` resolves. With a fleet, only the worker
/// holding the probe lease probes (the lease lasts 1.5 intervals and is renewed each round,
/// so a dead holder is replaced within two intervals). Every report goes to `sink` if given.
pub async fn run_probe_loop(
    gw: Gateway,
    cfg: ProbeConfig,
    sink: Option<UnboundedSender<ProbeReport>>,
    shutdown: impl Future<Output = ()>,
) {
    let interval = Duration::from_secs(cfg.interval_s.max(1));
    let leases = gw.leases();
    let holder = gw.worker_id().to_string();
    let lease_ttl = interval + interval / 2;
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            _ = tick.tick() => {}
        }
        match leases.hold(PROBE_LEASE, &holder, lease_ttl).await {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) => {
                tracing::warn!(target: PROBE_TARGET, "probe round skipped: {e}");
                continue;
            }
        }
        for report in run_probes(&gw, &cfg).await {
            if let Some(s) = &sink {
                let _ = s.send(report);
            }
        }
    }
    leases.release(PROBE_LEASE, &holder).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::{Api, Item};

    fn item(title: &str) -> ApiResponse {
        ApiResponse::Item(Item {
            id: "1".into(),
            title: title.into(),
            price: "1.00".into(),
            quantity: 3,
            ..Item::default()
        })
    }

    #[test]
    fn empty_title_is_named() {
        assert_eq!(empty_fields(&item("")), vec!["title".to_string()]);
        assert!(empty_fields(&item("x")).is_empty());
    }

    #[test]
    fn session_error_is_an_auth_failure() {
        let e = CallError::platform(
            Platform::Taobao,
            Api::ItemGet,
            ErrorClass::Fatal,
            "27",
            "Invalid session",
            "Invalid session isv.session-expired",
            Some(200),
            Utc::now(),
        );
        let p = judge(&Err(e), Duration::from_millis(5), Duration::from_secs(1));
        assert!(p[0].starts_with("auth failed"), "{p:?}");
    }

    #[test]
    fn slow_answer_is_flagged() {
        let p = judge(
            &Ok(item("x")),
            Duration::from_millis(900),
            Duration::from_millis(500),
        );
        assert_eq!(p.len(), 1);
        assert!(p[0].starts_with("slow: 900 ms"), "{p:?}");
    }

    #[test]
    fn alert_line_names_platform_api_and_problem() {
        let r = ProbeReport {
            platform: Platform::Jd,
            api: Api::ItemGet,
            class: ApiClass::Detail,
            latency: Duration::from_millis(3),
            problems: vec!["required field `title` is empty".into()],
        };
        assert_eq!(
            r.alert_line().as_deref(),
            Some("probe alert: jd item_get (detail): required field `title` is empty")
        );
    }
}
