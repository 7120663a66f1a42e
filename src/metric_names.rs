//! The metric names (Prometheus conventions: `syncfleet_` prefix, `_total` counters,
//! `_seconds` durations), their help text and the histograms' buckets.

/// Requests on the wire, by platform, api and class (ok, retry, slow, fatal, unknown).
pub(crate) const PLATFORM_CALLS: &str = "syncfleet_platform_calls_total";
/// Requests on the wire that repeated an earlier request of the same logical call.
pub(crate) const PLATFORM_RETRIES: &str = "syncfleet_platform_retries_total";
/// HTTP time of one request, per gate (platform, api).
pub(crate) const CALL_DURATION: &str = "syncfleet_call_duration_seconds";
/// Logical calls refused before anything went on the wire, by reason.
pub(crate) const REFUSALS: &str = "syncfleet_refusals_total";
/// Reads answered from the stale cache.
pub(crate) const STALE_ANSWERS: &str = "syncfleet_stale_answers_total";
/// Logical calls of this process by outcome (ok, stale, caller_error, failed).
pub(crate) const LOGICAL_CALLS: &str = "syncfleet_logical_calls_total";
/// Gate state.
pub(crate) const GATE_RATE: &str = "syncfleet_gate_rate";
pub(crate) const GATE_BURST: &str = "syncfleet_gate_burst";
pub(crate) const GATE_ADAPTIVE_RATE: &str = "syncfleet_gate_adaptive_rate";
pub(crate) const GATE_CEILING: &str = "syncfleet_gate_ceiling_rate";
pub(crate) const GATE_UPPER: &str = "syncfleet_gate_upper_rate";
pub(crate) const GATE_PAUSED: &str = "syncfleet_gate_paused_seconds";
pub(crate) const GATE_QUOTA_USED: &str = "syncfleet_gate_quota_used";
pub(crate) const GATE_QUOTA: &str = "syncfleet_gate_daily_quota";
pub(crate) const GATE_BURN: &str = "syncfleet_gate_burn_ratio";
/// An app's daily quota over all its APIs (TOP's app-wide count), when configured.
pub(crate) const APP_QUOTA: &str = "syncfleet_app_daily_quota";
pub(crate) const APP_QUOTA_BOOKED: &str = "syncfleet_app_quota_booked";
pub(crate) const APP_BURN: &str = "syncfleet_app_burn_ratio";
/// 0 closed, 1 half-open, 2 open.
pub(crate) const BREAKER_STATE: &str = "syncfleet_breaker_state";
/// The configured retry budget: retries may be at most this share of logical calls.
pub(crate) const RETRY_BUDGET_RATIO: &str = "syncfleet_retry_budget_ratio";
/// Queue depth by state (ready, delayed, in_flight, dead).
pub(crate) const QUEUE_TASKS: &str = "syncfleet_queue_tasks";
pub(crate) const JOBS_RUNNING: &str = "syncfleet_jobs_running";
/// 1 while a shop is paused because the platform refused its session.
pub(crate) const SHOP_PAUSED: &str = "syncfleet_shop_paused";
pub(crate) const ITEMS_PENDING: &str = "syncfleet_items_pending";
/// How far a shop's order watermark is behind where a run would put it, set at each due tick.
pub(crate) const WATERMARK_BEHIND: &str = "syncfleet_watermark_behind_seconds";
/// 1 while a shop's watermark has not kept up for `[jobs] watermark_stall_periods` periods.
pub(crate) const WATERMARK_STALLED: &str = "syncfleet_watermark_stalled";
/// Records set aside because they could not be read, by source (order, message).
pub(crate) const QUARANTINED: &str = "syncfleet_quarantined_total";
pub(crate) const ITEMS_FINISHED: &str = "syncfleet_items_finished_total";
/// A no-op write transaction on the ledger, timed by the collector.
pub(crate) const LEDGER_WRITE: &str = "syncfleet_ledger_write_duration_seconds";
pub(crate) const LOG_DROPPED: &str = "syncfleet_log_lines_dropped_total";
pub(crate) const COLLECT_ERRORS: &str = "syncfleet_metrics_collect_errors_total";
pub(crate) const COLLECT_DURATION: &str = "syncfleet_metrics_collect_duration_seconds";

/// Histogram buckets of one platform request (s): simulator calls take about 1 ms, real ones
/// 20 ms to a few seconds, and the longest read timeout is 15 s.
pub(super) const CALL_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0,
];
/// Histogram buckets of a ledger write (s): an uncontended SQLite commit is well under a
/// millisecond; seconds mean the writers queue behind each other.
pub(super) const LEDGER_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

pub(super) fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!(
        PLATFORM_CALLS,
        "Requests that went on the wire, by platform, api and class (ok, retry, slow, fatal, unknown)"
    );
    describe_counter!(
        PLATFORM_RETRIES,
        "Requests on the wire that repeated an earlier request of the same logical call"
    );
    describe_histogram!(
        CALL_DURATION,
        Unit::Seconds,
        "Time of one request on the wire, per gate (platform, api)"
    );
    describe_counter!(
        REFUSALS,
        "Logical calls refused locally before anything went on the wire, by reason"
    );
    describe_counter!(STALE_ANSWERS, "Reads answered from the stale cache");
    describe_counter!(
        LOGICAL_CALLS,
        "Logical calls of this process by outcome (ok, stale, caller_error, failed)"
    );
    describe_gauge!(
        GATE_RATE,
        "Gate rate in force (calls/s): the operator's override or the config"
    );
    describe_gauge!(GATE_BURST, "Gate burst in force (calls)");
    describe_gauge!(
        GATE_ADAPTIVE_RATE,
        "Adaptive (AIMD) rate of the gate (calls/s), never above the rate in force"
    );
    describe_gauge!(
        GATE_CEILING,
        "The platform's limit as last measured or probed (calls/s); 0 when none"
    );
    describe_gauge!(
        GATE_UPPER,
        "How high the platform's limit may be, as far as the last measurement can tell (calls/s; probed while above the ceiling); 0 when none"
    );
    describe_gauge!(
        GATE_PAUSED,
        Unit::Seconds,
        "Seconds left of the gate's pause (ban, spent quota); 0 when not paused"
    );
    describe_gauge!(
        GATE_QUOTA_USED,
        "Calls counted against today's quota (GMT+8 day), failed ones included"
    );
    describe_gauge!(GATE_QUOTA, "Daily quota of the gate, when configured");
    describe_gauge!(
        APP_QUOTA,
        "Daily quota of the app over all its APIs (the platform's app-wide count), when configured"
    );
    describe_gauge!(
        APP_QUOTA_BOOKED,
        "Calls the app's gates booked today over all its APIs"
    );
    describe_gauge!(
        APP_BURN,
        "(app quota booked / app daily quota) / fraction of the GMT+8 day elapsed"
    );
    describe_gauge!(
        GATE_BURN,
        "(quota used / daily quota) / fraction of the GMT+8 day elapsed; > 1.3 will not last the day"
    );
    describe_gauge!(
        BREAKER_STATE,
        "Breaker of (platform, api) in this process: 0 closed, 1 half-open, 2 open"
    );
    describe_gauge!(
        RETRY_BUDGET_RATIO,
        "Configured retry budget: retries at most this share of logical calls per window"
    );
    describe_gauge!(
        QUEUE_TASKS,
        "Tasks in the queue by state (ready, delayed, in_flight, dead); fleet-wide"
    );
    describe_gauge!(JOBS_RUNNING, "Jobs running in the ledger; fleet-wide");
    describe_gauge!(
        SHOP_PAUSED,
        "1 while a shop is paused because the platform refused its session; fleet-wide"
    );
    describe_gauge!(
        WATERMARK_BEHIND,
        Unit::Seconds,
        "How far a shop's order watermark is behind now - lag, at its schedule's last tick"
    );
    describe_gauge!(
        WATERMARK_STALLED,
        "1 while a shop's order watermark has not kept up for watermark_stall_periods periods"
    );
    describe_counter!(
        QUARANTINED,
        "Records set aside because they could not be read, by source; syncfleet quarantine lists them"
    );
    describe_gauge!(
        ITEMS_PENDING,
        "Pending items of the running jobs in the ledger; fleet-wide"
    );
    describe_counter!(
        ITEMS_FINISHED,
        "Items that reached a terminal status in the ledger (done, stale, failed, skipped, cancelled) while this process watched; fleet-wide"
    );
    describe_histogram!(
        LEDGER_WRITE,
        Unit::Seconds,
        "A no-op write transaction on the ledger timed every second: the wait for the write lock plus commit"
    );
    describe_counter!(
        LOG_DROPPED,
        "Log lines dropped because stderr could not keep up (the writer never blocks workers)"
    );
    describe_counter!(
        COLLECT_ERRORS,
        "Failed reads of the metrics collector, by source (gates, queue, ledger)"
    );
    describe_gauge!(
        COLLECT_DURATION,
        Unit::Seconds,
        "Time of the collector's last refresh"
    );
}
