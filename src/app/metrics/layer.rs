//! The tracing layer: counters from the gateway's events (`syncfleet::call`,
//! `syncfleet::refusal`, `syncfleet::stale`), with every label kept to a bounded set.

use crate::link::gateway::{CALL_TARGET, REFUSAL_TARGET, STALE_TARGET};
use crate::metric_names::{
    CALL_DURATION, PLATFORM_CALLS, PLATFORM_RETRIES, REFUSALS, STALE_ANSWERS,
};
use crate::platform::{Api, Platform};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Context, Layer};

/// The filter of [`MetricsLayer`]: only the gateway's call, refusal and stale events, at
/// info. It is a per-layer filter, so `RUST_LOG=warn` keeps those lines out of the log and
/// the metrics still see them.
pub(crate) fn event_filter() -> Targets {
    Targets::new()
        .with_target(CALL_TARGET, Level::INFO)
        .with_target(REFUSAL_TARGET, Level::INFO)
        .with_target(STALE_TARGET, Level::INFO)
}

/// Counts the gateway's `syncfleet::call`, `syncfleet::refusal` and `syncfleet::stale`
/// events (install with [`event_filter`]).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct MetricsLayer;

/// The fields of a gateway event that metrics use.
#[derive(Debug, Default)]
struct EventFields {
    platform: &'static str,
    api: &'static str,
    class: &'static str,
    reason: &'static str,
    cost_ms: Option<u64>,
    retries: u64,
}

/// Classes of a call line (`ok` or an error class).
const CLASSES: &[&str] = &["ok", "retry", "slow", "fatal", "unknown"];
/// Reasons of a refusal: `LinkErrorKind::as_str` (the unit test keeps them in step).
const REASONS: &[&str] = &[
    "platform",
    "breaker_open",
    "budget_exhausted",
    "busy",
    "rate_wait",
    "paused",
    "retry_budget",
    "halted",
    "not_configured",
    "missing_secret",
];

/// `value` as one of the known label values, else `other`: labels stay a bounded set and
/// need no allocation.
fn bounded(value: &str, known: impl IntoIterator<Item = &'static str>) -> &'static str {
    known.into_iter().find(|k| *k == value).unwrap_or("other")
}

impl Visit for EventFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "platform" => self.platform = bounded(value, Platform::ALL.map(Platform::as_str)),
            "api" => self.api = bounded(value, Api::ALL.map(Api::as_str)),
            "class" => self.class = bounded(value, CLASSES.iter().copied()),
            "reason" => self.reason = bounded(value, REASONS.iter().copied()),
            _ => {}
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            "cost_ms" => self.cost_ms = Some(value),
            "retries" => self.retries = value,
            _ => {}
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.record_u64(field, u64::try_from(value).unwrap_or(0));
    }

    // Other fields (ts, trace_id, error, message) are Display/Debug values: ignoring them
    // here means they are never formatted for metrics.
    fn record_debug(&mut self, _field: &Field, _value: &dyn std::fmt::Debug) {}
}

impl<S: Subscriber> Layer<S> for MetricsLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let target = event.metadata().target();
        let mut f = EventFields {
            platform: "other",
            api: "other",
            class: "other",
            reason: "other",
            ..EventFields::default()
        };
        if target == CALL_TARGET {
            event.record(&mut f);
            let labels = [("platform", f.platform), ("api", f.api)];
            metrics::counter!(PLATFORM_CALLS, "platform" => f.platform, "api" => f.api, "class" => f.class)
                .increment(1);
            if f.retries > 0 {
                metrics::counter!(PLATFORM_RETRIES, &labels).increment(1);
            }
            if let Some(ms) = f.cost_ms {
                metrics::histogram!(CALL_DURATION, &labels).record(ms as f64 / 1000.0);
            }
        } else if target == REFUSAL_TARGET {
            event.record(&mut f);
            metrics::counter!(REFUSALS, "platform" => f.platform, "api" => f.api, "reason" => f.reason)
                .increment(1);
        } else if target == STALE_TARGET {
            event.record(&mut f);
            metrics::counter!(STALE_ANSWERS, "platform" => f.platform, "api" => f.api).increment(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::gateway::LinkErrorKind;
    use crate::metric_names::CALL_BUCKETS;
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};

    #[test]
    fn refusal_reasons_are_the_link_error_kinds() {
        // An exhaustive match: a new kind fails to compile here until REASONS has it.
        let all = |k: LinkErrorKind| match k {
            LinkErrorKind::Platform
            | LinkErrorKind::BreakerOpen
            | LinkErrorKind::BudgetExhausted
            | LinkErrorKind::Busy
            | LinkErrorKind::RateWait
            | LinkErrorKind::Paused
            | LinkErrorKind::RetryBudget
            | LinkErrorKind::Halted
            | LinkErrorKind::NotConfigured
            | LinkErrorKind::MissingSecret => k.as_str(),
        };
        for k in [
            LinkErrorKind::Platform,
            LinkErrorKind::BreakerOpen,
            LinkErrorKind::BudgetExhausted,
            LinkErrorKind::Busy,
            LinkErrorKind::RateWait,
            LinkErrorKind::Paused,
            LinkErrorKind::RetryBudget,
            LinkErrorKind::Halted,
            LinkErrorKind::NotConfigured,
            LinkErrorKind::MissingSecret,
        ] {
            assert!(REASONS.contains(&all(k)), "{k:?} missing from REASONS");
        }
    }

    #[test]
    fn unknown_label_values_become_other() {
        assert_eq!(
            bounded("taobao", Platform::ALL.map(Platform::as_str)),
            "taobao"
        );
        assert_eq!(
            bounded("item 123", Platform::ALL.map(Platform::as_str)),
            "other"
        );
        assert_eq!(bounded("slow", CLASSES.iter().copied()), "slow");
    }

    #[test]
    fn call_events_become_counters_and_histogram() {
        use tracing_subscriber::layer::SubscriberExt;
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(CALL_DURATION.into()), CALL_BUCKETS)
            .expect("buckets")
            .build_recorder();
        let handle = recorder.handle();
        let subscriber =
            tracing_subscriber::registry().with(MetricsLayer.with_filter(event_filter()));
        metrics::with_local_recorder(&recorder, || {
            tracing::subscriber::with_default(subscriber, || {
                tracing::info!(target: "syncfleet::call", platform = "taobao", api = "item_add", ok = true, class = "ok", cost_ms = 12u64, retries = 0u64, "call");
                tracing::info!(target: "syncfleet::call", platform = "taobao", api = "item_add", ok = false, class = "retry", cost_ms = 3u64, retries = 1u64, "call");
                tracing::info!(target: "syncfleet::refusal", platform = "taobao", api = "item_add", reason = "paused", "refused");
                tracing::info!(target: "syncfleet::stale", platform = "alibaba", api = "item_get", "stale");
                tracing::info!(target: "syncfleet::other", platform = "taobao", "ignored");
            });
        });
        let text = handle.render();
        for line in [
            r#"syncfleet_platform_calls_total{platform="taobao",api="item_add",class="ok"} 1"#,
            r#"syncfleet_platform_calls_total{platform="taobao",api="item_add",class="retry"} 1"#,
            r#"syncfleet_platform_retries_total{platform="taobao",api="item_add"} 1"#,
            r#"syncfleet_refusals_total{platform="taobao",api="item_add",reason="paused"} 1"#,
            r#"syncfleet_stale_answers_total{platform="alibaba",api="item_get"} 1"#,
            r#"syncfleet_call_duration_seconds_count{platform="taobao",api="item_add"} 2"#,
            r#"syncfleet_call_duration_seconds_bucket{platform="taobao",api="item_add",le="0.005"} 1"#,
        ] {
            assert!(text.contains(line), "missing `{line}` in\n{text}");
        }
    }
}
