//! Maps every platform error and transport error to an [`ErrorClass`] (docs/design.md,
//! "Timeouts and error classes"; docs/wire-formats.md). Pure functions: no I/O, unit-tested
//! alone.
//!
//! Codes fall behind as platforms add new ones, so an unmapped code whose text mentions a
//! limit (limit, too many, 频繁, 超限, exceed, throttl) is `Slow`; otherwise `Unknown`.

use super::{Api, ErrorClass, Platform};
use crate::time::QuotaDay;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// The code of a body we could not read.
const PARSE_CODE: &str = "parse";

/// What went wrong below HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransportError {
    /// Could not connect (refused, unreachable, connect timeout): the request surely
    /// never arrived, so even a write may be sent again.
    Connect,
    /// No (complete) response within the read timeout: the request may have arrived.
    Timeout,
    /// The peer closed the connection before any response byte — typically a pooled
    /// idle connection the platform had already closed. Retry without consuming an attempt.
    PeerClosed,
    /// Anything else below HTTP (reset mid-body, protocol error): retry, consuming an attempt.
    Other,
    /// The answer's body was larger than the client reads (`ClientOptions::max_body_bytes`):
    /// a misbehaving upstream or proxy must not run a worker out of memory. Retried like
    /// `Other` (the request arrived), so a repeat ends the item within its retry rounds.
    TooLarge,
}

impl TransportError {
    /// The short name used in codes and messages (`connect`, `timeout`, `peer_closed`,
    /// `transport`, `body_too_large`).
    pub fn as_str(self) -> &'static str {
        match self {
            TransportError::Connect => "connect",
            TransportError::Timeout => "timeout",
            TransportError::PeerClosed => "peer_closed",
            TransportError::Other => "transport",
            TransportError::TooLarge => "body_too_large",
        }
    }
}

/// A failed platform call, classified. `Display` shows platform, api, class, code and the
/// platform's message: never secrets, signatures or request params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallError {
    /// What the link layer does with this error.
    pub class: ErrorClass,
    /// The platform called.
    pub platform: Platform,
    /// The API called.
    pub api: Api,
    /// The platform's code (`7`, `isv.invalid-signature` is in `message`; 1688 `gw.*`), or
    /// `http_<status>`, `transport`, `parse` for errors without one.
    pub code: String,
    /// The platform's message (sub_msg / en_desc / error_message), truncated.
    pub message: String,
    /// How long the platform said its ban lasts ("ban will last for N more seconds").
    pub ban: Option<Duration>,
    /// The daily quota is spent (a ban of hours / lasting to the 00:00 GMT+8 reset, or
    /// 1688 `gw.NoUsageLeftError`): stop the gate until the day's reset (`time::QuotaDay::next_reset`).
    pub quota_spent: bool,
    /// The quota spent is the app's own daily count over all its APIs (TOP
    /// `accesscontrol.limited-by-app-access-count`, 1688 `gw.NoUsageLeftError`): every gate
    /// of the platform stops until the reset, not this API's alone.
    pub app_quota: bool,
    /// The answer's HTTP status, or `None` when none came (a transport failure).
    pub http_status: Option<u16>,
    /// The failure below HTTP, or `None` when the platform answered.
    pub transport: Option<TransportError>,
    /// `Slow` only because an unmapped code's text mentions a limit ("title length exceeds
    /// 60", "库存超限"), with no ban named. A limit is the gate's, not one item's: such an
    /// answer is not a rate-limit signal for the gate, and the item gets bounded retry
    /// rounds instead of coming back forever (docs/design.md, "Timeouts and error classes").
    #[serde(default)]
    pub guessed_limit: bool,
    /// The platform refused the shop's session / access token (expired, revoked, invalid):
    /// a problem of one shop, not of the app, so the shop is paused alone
    /// (docs/design.md, "Shops").
    #[serde(default)]
    pub session_refused: bool,
}

impl CallError {
    /// Whether a retry of this error counts against the attempt limit. A connection the
    /// peer already closed does not (docs/design.md, "Timeouts and error classes").
    pub fn consumes_attempt(&self) -> bool {
        self.transport != Some(TransportError::PeerClosed)
    }

    /// Whether the request surely never reached the platform (a write may be retried).
    /// Only a connect failure: after a peer close the request may have been read.
    pub fn surely_not_sent(&self) -> bool {
        self.transport == Some(TransportError::Connect)
    }

    /// The platform answered with a refusal of its own (a limit, a bad parameter, a refused
    /// session): a write so answered made nothing. Not a transport failure, not a body we
    /// could not read, not a 5xx, not a backend failure (`Retry`): after those a write's
    /// product may exist.
    pub fn refused_by_platform(&self) -> bool {
        self.transport.is_none()
            && self.code != PARSE_CODE
            && self.http_status.is_none_or(|s| s < 500)
            && self.class != ErrorClass::Retry
    }

    /// A transport failure (always `Retry`).
    pub fn transport(platform: Platform, api: Api, kind: TransportError, message: String) -> Self {
        CallError {
            class: ErrorClass::Retry,
            platform,
            api,
            code: kind.as_str().to_string(),
            message: truncate(&message),
            ban: None,
            quota_spent: false,
            app_quota: false,
            http_status: None,
            transport: Some(kind),
            guessed_limit: false,
            session_refused: false,
        }
    }

    /// Mark a `Slow` class that came from the message keywords, not from the platform's code
    /// table (`guessed`); an answer naming a ban is taken at its word.
    pub fn limit_guessed(mut self, guessed: bool) -> Self {
        self.guessed_limit = guessed && self.class == ErrorClass::Slow && self.ban.is_none();
        self
    }

    /// Mark an error whose code says the shop's session was refused.
    pub fn session_refused(mut self, refused: bool) -> Self {
        self.session_refused = refused;
        self
    }

    /// A rate-limit answer the gate should hear (`Slow`, not a keyword guess).
    pub fn is_rate_limit(&self) -> bool {
        self.class == ErrorClass::Slow && !self.guessed_limit
    }

    /// A platform-reported error: extracts the ban and flags a spent daily quota.
    /// `text` is every message field of the body joined (where the ban may be).
    #[allow(clippy::too_many_arguments)]
    pub fn platform(
        platform: Platform,
        api: Api,
        class: ErrorClass,
        code: impl Into<String>,
        message: &str,
        text: &str,
        http_status: Option<u16>,
        now: DateTime<Utc>,
    ) -> Self {
        let ban = parse_ban(text);
        let quota_spent =
            class == ErrorClass::Slow && ban.is_some_and(|b| ban_means_quota_spent(b, now));
        CallError {
            class,
            platform,
            api,
            code: code.into(),
            message: truncate(message),
            ban,
            quota_spent,
            app_quota: false,
            http_status,
            transport: None,
            guessed_limit: false,
            session_refused: false,
        }
    }

    /// A body we could not understand (not JSON, a missing field): `Unknown`, alert.
    /// A success body (HTTP 200) without a field the typed response needs.
    pub fn missing_field(platform: Platform, api: Api, what: &str) -> Self {
        CallError::parse(platform, api, 200, format!("missing or malformed `{what}`"))
    }

    /// A call of an API the platform does not offer ([`Api::offered_by`]): `Fatal`, nothing
    /// was sent.
    pub fn not_offered(platform: Platform, api: Api) -> Self {
        CallError {
            class: ErrorClass::Fatal,
            code: "not_offered".into(),
            message: format!("{platform} offers no {api} API"),
            http_status: None,
            ..CallError::parse(platform, api, 0, String::new())
        }
    }

    /// A body we could not understand (`message` says what): `Unknown`, code `parse`.
    pub fn parse(platform: Platform, api: Api, http_status: u16, message: String) -> Self {
        CallError {
            class: ErrorClass::Unknown,
            platform,
            api,
            code: PARSE_CODE.into(),
            message: truncate(&message),
            ban: None,
            quota_spent: false,
            app_quota: false,
            http_status: Some(http_status),
            transport: None,
            guessed_limit: false,
            session_refused: false,
        }
    }

    /// Short class description for the CLI: `slow (ban 2 s, daily quota spent)`.
    pub fn class_line(&self) -> String {
        let mut extras = Vec::new();
        if let Some(t) = self.transport {
            extras.push(t.as_str().replace('_', " "));
        }
        if let Some(b) = self.ban {
            extras.push(format!("ban {} s", b.as_secs()));
        }
        if self.app_quota {
            extras.push("the app's daily quota spent".into());
        } else if self.quota_spent {
            extras.push("daily quota spent".into());
        }
        if extras.is_empty() {
            self.class.to_string()
        } else {
            format!("{} ({})", self.class, extras.join(", "))
        }
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}: {} error {}",
            self.platform, self.api, self.class, self.code
        )?;
        if let Some(s) = self.http_status {
            write!(f, " (HTTP {s})")?;
        }
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        if let Some(b) = self.ban {
            write!(f, " [ban {} s]", b.as_secs())?;
        }
        if self.app_quota {
            f.write_str(" [the app's daily quota spent]")?;
        } else if self.quota_spent {
            f.write_str(" [daily quota spent]")?;
        }
        Ok(())
    }
}

impl std::error::Error for CallError {}

const MAX_MESSAGE: usize = 300;

fn truncate(s: &str) -> String {
    match s.char_indices().nth(MAX_MESSAGE) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// Message keywords that mean "slow down" whatever the code.
pub const SLOW_KEYWORDS: [&str; 6] = ["limit", "too many", "频繁", "超限", "exceed", "throttl"];

/// The fallback for unmapped codes: `Slow` when the text mentions a limit, else `Unknown`.
pub fn keyword_class(text: &str) -> ErrorClass {
    let lower = text.to_lowercase();
    if SLOW_KEYWORDS.iter().any(|k| lower.contains(k)) {
        ErrorClass::Slow
    } else {
        ErrorClass::Unknown
    }
}

/// Seconds from "... ban will last for N more seconds" (any case, anywhere in `text`).
pub fn parse_ban(text: &str) -> Option<Duration> {
    const MARK: &str = "ban will last for ";
    let lower = text.to_ascii_lowercase();
    let start = lower.find(MARK)? + MARK.len();
    let digits: String = lower[start..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    let rest = &lower[start + digits.len()..];
    if !rest.trim_start().starts_with("more second") {
        return None;
    }
    digits.parse::<u64>().ok().map(Duration::from_secs)
}

/// A ban of an hour or more, or one that ends at the next 00:00 GMT+8 quota reset (give or
/// take a few seconds), means the daily quota is spent, not a per-second window.
pub fn ban_means_quota_spent(ban: Duration, now: DateTime<Utc>) -> bool {
    if ban >= Duration::from_secs(3600) {
        return true;
    }
    if ban < Duration::from_secs(60) {
        return false;
    }
    let until_reset = (QuotaDay::PLATFORM.next_reset(now) - now).num_seconds();
    (until_reset - ban.as_secs() as i64).abs() <= 5
}

/// A code table's class, or the message keywords' for a code it does not map; `true` when the
/// keywords decided (`CallError::limit_guessed`).
pub fn or_keywords(known: Option<ErrorClass>, text: &str) -> (ErrorClass, bool) {
    match known {
        Some(class) => (class, false),
        None => (keyword_class(text), true),
    }
}

/// Taobao TOP `error_response` (code, sub_code) → class, when the code is mapped.
pub fn top_known(code: i64, sub_code: &str) -> Option<ErrorClass> {
    Some(match code {
        4..=8 => ErrorClass::Slow,
        10 => ErrorClass::Retry,
        // `isp.*`: a fault of the service behind TOP, to retry after a while, under any code.
        _ if sub_code.starts_with("isp.") => ErrorClass::Retry,
        15 if sub_code.starts_with("isv.") => ErrorClass::Fatal,
        9 | 11..=13 | 21..=34 | 40..=43 | 47 | 53 => ErrorClass::Fatal,
        _ => return None,
    })
}

/// TOP codes of a refused session: 26 missing, 27 invalid or expired (and `isv.session-*`).
pub fn top_session_refused(code: i64, sub_code: &str) -> bool {
    matches!(code, 26 | 27) || sub_code.starts_with("isv.session")
}

/// JD's code of an invalid or expired `access_token`.
pub fn jd_session_refused(code: &str) -> bool {
    code.trim() == "19"
}

/// 1688's codes of an invalid or expired `access_token`: an expired token answers
/// `error_code "401"` ("Request need user authorized").
pub fn alibaba_session_refused(error_code: &str) -> bool {
    matches!(
        error_code,
        "401" | "gw.InvalidAccessToken" | "gw.AccessTokenExpired" | "gw.AccessTokenInvalid"
    )
}

/// JD JOS `error_response.code` → class, when the code is mapped (JOS's system error table,
/// docs/wire-formats.md): 1 service unavailable, 43 system error, 65-67 the backend timed
/// out, is unavailable or failed, 69 data not read: retry; 2 App Call Limited: slow; the
/// rest are the caller's (versions, timestamp 7-8, signature 11-12, method 14-15, token 18-19,
/// app key 20-21, not a merchant 22, no permission 23-25, parameters 60-64, optional fields
/// 68, order state 70, not this vendor's 71-72, a paid API 73).
pub fn jd_known(code: &str) -> Option<ErrorClass> {
    Some(match code.trim().parse::<i64>() {
        Ok(2) => ErrorClass::Slow,
        Ok(1 | 43 | 65 | 66 | 67 | 69) => ErrorClass::Retry,
        Ok(3..=27 | 50 | 60..=64 | 68 | 70..=73) => ErrorClass::Fatal,
        _ => return None,
    })
}

/// 1688 gateway error (`error_code`, HTTP status) → class, when they are mapped.
pub fn alibaba_known(http_status: u16, error_code: &str) -> Option<ErrorClass> {
    const FATAL_PREFIXES: [&str; 2] = ["gw.Signature", "gw.AppKey"];
    const FATAL: [&str; 3] = ["gw.APIACLDecline", "gw.APIUnsupported", "gw.ParamMissing"];
    if matches!(
        error_code,
        "gw.QosAppFrequencyLimit" | "gw.NoUsageLeftError"
    ) {
        return Some(ErrorClass::Slow);
    }
    if FATAL_PREFIXES.iter().any(|p| error_code.starts_with(p)) || FATAL.contains(&error_code) {
        return Some(ErrorClass::Fatal);
    }
    // The gateway could not reach or hear back from the service behind it.
    if matches!(
        error_code,
        "gw.ISPInvokeError" | "gw.ISPConnectError" | "gw.ISPInvokeTimeout"
    ) {
        return Some(ErrorClass::Retry);
    }
    if alibaba_session_refused(error_code) {
        return Some(ErrorClass::Fatal);
    }
    match http_status {
        401 => Some(ErrorClass::Fatal),
        500..=599 => Some(ErrorClass::Retry),
        429 => Some(ErrorClass::Slow),
        _ => None,
    }
}

/// 1688's quota-spent code (the app's daily count).
pub fn alibaba_quota_spent(error_code: &str) -> bool {
    error_code == "gw.NoUsageLeftError"
}

/// TOP's sub-code for the app key's daily call count spent (code 7); the per-API
/// per-second limit is `accesscontrol.limited-by-api-access-count`.
pub fn top_app_quota_spent(sub_code: &str) -> bool {
    sub_code == "accesscontrol.limited-by-app-access-count"
}

/// A non-2xx HTTP status without a body we understand (any platform).
pub fn http_class(status: u16) -> ErrorClass {
    match status {
        500..=599 => ErrorClass::Retry,
        429 => ErrorClass::Slow,
        401 | 403 => ErrorClass::Fatal,
        _ => ErrorClass::Unknown,
    }
}

/// The kind of a reqwest failure. Walks the source chain for hyper's "connection closed
/// before message completed" / "canceled" and for reset / broken-pipe I/O errors, which
/// mean the peer dropped the connection before answering.
pub fn transport_kind(err: &reqwest::Error) -> TransportError {
    if err.is_connect() {
        return TransportError::Connect;
    }
    if err.is_timeout() {
        return TransportError::Timeout;
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(err);
    while let Some(e) = source {
        if let Some(h) = e.downcast_ref::<hyper::Error>() {
            if h.is_incomplete_message() || h.is_canceled() {
                return TransportError::PeerClosed;
            }
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            if matches!(
                io.kind(),
                ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof
            ) {
                return TransportError::PeerClosed;
            }
        }
        source = e.source();
    }
    TransportError::Other
}

/// The error and its causes on one line, without the URL.
pub fn describe_reqwest(err: reqwest::Error) -> String {
    let err = err.without_url();
    let mut out = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(e) = source {
        out.push_str(": ");
        out.push_str(&e.to_string());
        source = e.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    /// Taobao TOP `error_response` (code, sub_code) → class.
    fn top_class(code: i64, sub_code: &str, text: &str) -> ErrorClass {
        or_keywords(top_known(code, sub_code), text).0
    }

    /// JD JOS `error_response.code` → class.
    fn jd_class(code: &str, text: &str) -> ErrorClass {
        or_keywords(jd_known(code), text).0
    }

    /// 1688 gateway error (`error_code`, HTTP status) → class.
    fn alibaba_class(http_status: u16, error_code: &str, text: &str) -> ErrorClass {
        or_keywords(alibaba_known(http_status, error_code), text).0
    }

    #[test]
    fn ban_seconds_are_extracted() {
        assert_eq!(
            parse_ban("This ban will last for 2 more seconds"),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            parse_ban("App call limited, this ban will last for 3 more seconds"),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            parse_ban("App call exceeds limited frequency, ban will last for 1 more seconds"),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            parse_ban("This Ban Will Last For 86000 More Seconds"),
            Some(Duration::from_secs(86_000))
        );
        assert_eq!(parse_ban("App Call Limited"), None);
        assert_eq!(parse_ban("ban will last for many more seconds"), None);
        assert_eq!(parse_ban("ban will last for 5 minutes"), None);
    }

    #[test]
    fn hours_long_or_reset_reaching_bans_mean_quota_spent() {
        // 22:00 GMT+8: the reset is 2 h away.
        let now = Utc.with_ymd_and_hms(2026, 1, 1, 14, 0, 0).unwrap();
        assert!(!ban_means_quota_spent(Duration::from_secs(2), now));
        assert!(ban_means_quota_spent(Duration::from_secs(7200), now));
        assert!(ban_means_quota_spent(Duration::from_secs(4 * 3600), now));
        // 23:50 GMT+8: a ban that lasts exactly to the reset is the quota too.
        let late = Utc.with_ymd_and_hms(2026, 1, 1, 15, 50, 0).unwrap();
        assert!(ban_means_quota_spent(Duration::from_secs(600), late));
        assert!(!ban_means_quota_spent(Duration::from_secs(300), late));
        // A short per-second ban near midnight is still a per-second ban.
        let last_second = Utc.with_ymd_and_hms(2026, 1, 1, 15, 59, 58).unwrap();
        assert!(!ban_means_quota_spent(Duration::from_secs(2), last_second));
    }

    #[test]
    fn top_codes() {
        for code in 4..=8 {
            assert_eq!(
                top_class(code, "accesscontrol.limited-by-app-access-count", ""),
                ErrorClass::Slow
            );
        }
        assert_eq!(
            top_class(10, "isp.service-unavailable", ""),
            ErrorClass::Retry
        );
        assert_eq!(
            top_class(15, "isp.remote-service-error", ""),
            ErrorClass::Retry
        );
        assert_eq!(top_class(15, "isv.item-not-exist", ""), ErrorClass::Fatal);
        for code in [
            9, 11, 12, 13, 21, 22, 25, 26, 27, 28, 29, 31, 34, 40, 41, 43, 47, 53,
        ] {
            assert_eq!(
                top_class(code, "isv.x", ""),
                ErrorClass::Fatal,
                "code {code}"
            );
        }
        assert_eq!(
            top_class(15, "", "Remote service error"),
            ErrorClass::Unknown
        );
        assert_eq!(
            top_class(999, "isv.new-thing", "something new"),
            ErrorClass::Unknown
        );
        assert_eq!(top_class(999, "", "调用频繁"), ErrorClass::Slow);
    }

    #[test]
    fn refused_sessions_are_told_apart_from_other_caller_errors() {
        assert!(top_session_refused(27, "isv.session-expired"));
        assert!(top_session_refused(26, ""));
        assert!(!top_session_refused(25, "isv.invalid-signature"));
        assert!(jd_session_refused("19"));
        assert!(!jd_session_refused("18"));
        assert!(alibaba_session_refused("gw.InvalidAccessToken"));
        assert!(!alibaba_session_refused("gw.SignatureInvalid"));
    }

    #[test]
    fn jd_codes() {
        assert_eq!(jd_class("2", ""), ErrorClass::Slow);
        for c in ["1", "43", "65", "66", "67", "69"] {
            assert_eq!(jd_class(c, ""), ErrorClass::Retry, "code {c}");
        }
        for c in [
            "3", "8", "11", "14", "15", "18", "19", "20", "22", "25", "60", "64", "73",
        ] {
            assert_eq!(jd_class(c, ""), ErrorClass::Fatal, "code {c}");
        }
        assert_eq!(jd_class("9999", "接口调用超限"), ErrorClass::Slow);
        assert_eq!(jd_class("9999", "odd"), ErrorClass::Unknown);
        assert_eq!(
            jd_class("not-a-number", "Too many requests"),
            ErrorClass::Slow
        );
    }

    #[test]
    fn alibaba_codes() {
        assert_eq!(
            alibaba_class(400, "gw.QosAppFrequencyLimit", ""),
            ErrorClass::Slow
        );
        assert_eq!(
            alibaba_class(400, "gw.NoUsageLeftError", ""),
            ErrorClass::Slow
        );
        assert!(alibaba_quota_spent("gw.NoUsageLeftError"));
        for c in [
            "gw.SignatureInvalid",
            "gw.AppKeyNotExist",
            "gw.APIACLDecline",
            "gw.APIUnsupported",
            "gw.ParamMissing",
        ] {
            assert_eq!(alibaba_class(400, c, ""), ErrorClass::Fatal, "{c}");
        }
        assert_eq!(
            alibaba_class(401, "gw.InvalidAccessToken", ""),
            ErrorClass::Fatal
        );
        assert_eq!(
            alibaba_class(500, "gw.InternalError", ""),
            ErrorClass::Retry
        );
        assert_eq!(alibaba_class(503, "", ""), ErrorClass::Retry);
        assert_eq!(
            alibaba_class(400, "gw.SomethingNew", "odd"),
            ErrorClass::Unknown
        );
        assert_eq!(
            alibaba_class(400, "gw.SomethingNew", "request throttled"),
            ErrorClass::Slow
        );
        assert_eq!(
            alibaba_class(200, "BIZ_ERROR", "not found"),
            ErrorClass::Unknown
        );
    }

    #[test]
    fn keyword_fallback() {
        for t in [
            "Call LIMIT reached",
            "too many requests",
            "访问频繁",
            "调用超限",
            "rate exceeded",
            "Throttled",
        ] {
            assert_eq!(keyword_class(t), ErrorClass::Slow, "{t}");
        }
        assert_eq!(keyword_class("invalid parameter"), ErrorClass::Unknown);
    }

    #[test]
    fn generic_http() {
        assert_eq!(http_class(502), ErrorClass::Retry);
        assert_eq!(http_class(429), ErrorClass::Slow);
        assert_eq!(http_class(401), ErrorClass::Fatal);
        assert_eq!(http_class(404), ErrorClass::Unknown);
    }

    #[test]
    fn call_error_display_and_flags() {
        let now = Utc.with_ymd_and_hms(2026, 1, 1, 4, 0, 0).unwrap();
        let e = CallError::platform(
            Platform::Taobao,
            Api::ItemGet,
            ErrorClass::Slow,
            "7",
            "This ban will last for 2 more seconds",
            "App Call Limited This ban will last for 2 more seconds",
            Some(200),
            now,
        );
        assert_eq!(e.ban, Some(Duration::from_secs(2)));
        assert!(!e.quota_spent);
        assert_eq!(e.class_line(), "slow (ban 2 s)");
        assert_eq!(
            e.to_string(),
            "taobao item_get: slow error 7 (HTTP 200): This ban will last for 2 more seconds [ban 2 s]"
        );
        assert!(e.consumes_attempt());
        let long = CallError::platform(
            Platform::Taobao,
            Api::ItemGet,
            ErrorClass::Slow,
            "7",
            "",
            "This ban will last for 43200 more seconds",
            Some(200),
            now,
        );
        assert!(long.quota_spent);
        let closed = CallError::transport(
            Platform::Jd,
            Api::ItemGet,
            TransportError::PeerClosed,
            "x".into(),
        );
        assert_eq!(closed.class, ErrorClass::Retry);
        assert!(!closed.consumes_attempt());
        assert!(!closed.surely_not_sent());
        let timeout = CallError::transport(
            Platform::Jd,
            Api::ItemAdd,
            TransportError::Timeout,
            "x".into(),
        );
        assert!(timeout.consumes_attempt() && !timeout.surely_not_sent());
        let huge = CallError::parse(Platform::Jd, Api::ItemGet, 200, "x".repeat(5000));
        assert!(huge.message.chars().count() <= MAX_MESSAGE + 1);
    }
}
