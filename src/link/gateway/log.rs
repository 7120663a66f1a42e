//! The gateway's log lines (docs/design.md, "Call lines"): one `syncfleet::call` line per
//! request on the wire, a `syncfleet::refusal` line per logical call refused before the wire, a
//! `syncfleet::stale` line per read answered from the stale cache, and breaker transitions.
//! Targets and fields are an interface: tests and the metrics layer parse them.

use super::{CallContext, LinkError, StaleInfo};
use crate::link::breaker::Transition;
use crate::platform::{Api, ApiResponse, CallError, Platform};
use chrono::Utc;
use std::time::Duration;

/// Log target of the one-line-per-call records.
pub(crate) const CALL_TARGET: &str = "syncfleet::call";
/// Log target of local refusals (paused gate, open breaker, wait too long, no slot, no
/// budget): nothing went on the wire, so they are not call lines.
pub(crate) const REFUSAL_TARGET: &str = "syncfleet::refusal";
/// Log target of reads answered from the stale cache.
pub(crate) const STALE_TARGET: &str = "syncfleet::stale";

/// The one line of a request that went on the wire (docs/design.md, "Call lines"): its class,
/// its own cost and how many requests of the same logical call went before it.
pub(super) fn log_send(
    platform: Platform,
    api: Api,
    ctx: &CallContext,
    result: &Result<ApiResponse, CallError>,
    took: Duration,
    before: u32,
) {
    let (ok, class, error) = match result {
        Ok(_) => (true, "ok", String::new()),
        Err(e) => (false, e.class.as_str(), e.to_string()),
    };
    tracing::info!(
        target: CALL_TARGET,
        ts = %log_time(),
        trace_id = %ctx.trace_id,
        platform = platform.as_str(),
        api = api.as_str(),
        ok,
        class,
        cost_ms = took.as_millis() as u64,
        retries = before,
        stale = false,
        error = %error,
        "call"
    );
}

/// The line of a logical call that never reached the wire.
pub(super) fn log_refusal(platform: Platform, api: Api, ctx: &CallContext, e: &LinkError) {
    tracing::info!(
        target: REFUSAL_TARGET,
        ts = %log_time(),
        trace_id = %ctx.trace_id,
        platform = platform.as_str(),
        api = api.as_str(),
        reason = e.kind.as_str(),
        retry_in_ms = e.retry_at.map(|d| d.as_millis() as u64),
        "refused"
    );
}

/// The line of a read answered from the stale cache.
pub(super) fn log_stale(
    platform: Platform,
    api: Api,
    ctx: &CallContext,
    s: &StaleInfo,
    cost: Duration,
) {
    tracing::info!(
        target: STALE_TARGET,
        ts = %log_time(),
        trace_id = %ctx.trace_id,
        platform = platform.as_str(),
        api = api.as_str(),
        stale = true,
        age_s = s.age.as_secs(),
        cost_ms = cost.as_millis() as u64,
        reason = %s.reason,
        "stale"
    );
}

/// An observe-only breaker that would have refused the call it lets through.
pub(super) fn log_would_reject(platform: Platform, api: Api, retry_in: Duration) {
    tracing::warn!(target: "syncfleet::breaker", %platform, %api, retry_in_ms = retry_in.as_millis() as u64,
        "observe-only: breaker would refuse this call");
}

pub(super) fn log_transition(platform: Platform, api: Api, t: Transition, observe_only: bool) {
    let prefix = if observe_only {
        "observe-only: breaker would be "
    } else {
        "breaker "
    };
    match t {
        Transition::Opened { open_for, reason } => tracing::warn!(
            target: "syncfleet::breaker",
            %platform, %api, open_ms = open_for.as_millis() as u64,
            "{prefix}open: {reason}"
        ),
        Transition::HalfOpened => {
            tracing::info!(target: "syncfleet::breaker", %platform, %api, "{prefix}half-open")
        }
        Transition::Closed => {
            tracing::info!(target: "syncfleet::breaker", %platform, %api, "{prefix}closed")
        }
    }
}

/// A call line's time: the host's, like every other log line's (tracing stamps its own with
/// the system clock), so the lines of one process sort together whatever clock it runs on.
#[allow(clippy::disallowed_methods)]
fn log_time() -> impl std::fmt::Display {
    Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ")
}
