//! The worker's sections: the task queue (`[queue]`), the job handlers (`[jobs]`) and the
//! probes (`[probe]`).

use serde::Deserialize;

/// The task queue (`[queue]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QueueConfig {
    /// Items per task.
    pub(crate) chunk_size: usize,
    /// Queue name (Redis key prefix / apalis queue).
    pub(crate) name: String,
    /// Tasks per enqueue round trip.
    pub(crate) push_batch: usize,
    pub(crate) poll_interval_ms: u64,
    pub(crate) heartbeat_s: u64,
    pub(crate) missed_heartbeats: u32,
    /// Attempts per task before it is dead.
    pub(crate) max_attempts: u32,
    /// After SIGTERM, items already calling get this long to finish; the rest of each chunk
    /// goes back to the queue without charging an attempt (docs/design.md, "Scale-in").
    pub(crate) shutdown_grace_s: u64,
    /// A worker that cannot reach the queue for this long exits with status 1 instead of
    /// hanging (0 = wait for it forever).
    pub(crate) unreachable_exit_s: u64,
    /// Backoff after a task's first failed attempt; it doubles per attempt.
    pub(crate) retry_base_ms: u64,
    /// Longest backoff after a failed attempt.
    pub(crate) retry_cap_s: u64,
    /// Dead-letter entries kept (oldest trimmed first).
    pub(crate) dead_max: usize,
    /// A consumer with nothing pending and idle this long leaves the Redis group.
    pub(crate) consumer_gc_idle_s: u64,
    /// How often one worker of the fleet looks for pending items no live task carries (a
    /// lost task) and pushes them again (0 = never; `reconcile` does it on demand).
    pub(crate) heal_interval_s: u64,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            chunk_size: 100,
            name: "syncfleet".into(),
            push_batch: 5000,
            poll_interval_ms: 100,
            heartbeat_s: 10,
            missed_heartbeats: 3,
            max_attempts: 5,
            shutdown_grace_s: 5,
            unreachable_exit_s: 120,
            retry_base_ms: 1000,
            retry_cap_s: 60,
            dead_max: 10_000,
            consumer_gc_idle_s: 3600,
            heal_interval_s: 60,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct JobsConfig {
    /// A logistics order is not queried again within this interval.
    pub(crate) logistics_min_interval_s: u64,
    /// Order sync slices: the platform's maximum window (1 day on TOP).
    pub(crate) order_slice_s: u64,
    /// Orders asked per page on every platform without its own `order_page_size`; unset: each
    /// platform's largest page (TOP 100, JD 50, 1688 20).
    pub(crate) order_page_size: Option<u32>,
    /// An item whose call failed with a transient class (retry, or a write whose outcome is
    /// unknown) goes back to the queue with backoff up to this many times before it ends
    /// `failed` (0 = fail at once, the operator runs `retry`).
    pub(crate) item_retry_rounds: u32,
    /// How often this worker looks at the schedules: decides due ticks, starts queued runs,
    /// settles finished ones (0 = never; another worker of the fleet does).
    pub(crate) schedule_check_ms: u64,
    /// Slices of a scheduled order run: TOP allows a day and recommends 30 minutes or less.
    pub(crate) sync_slice_s: u64,
    /// The longest window one scheduled order run reads (0: no cap). A shop far behind (paused,
    /// or its runs failing) catches up in runs of this size instead of one run re-reading
    /// everything since its old watermark.
    pub(crate) sync_catch_up_max_s: u64,
    /// A shop's order watermark this many periods behind is stalled: warned in the log and
    /// `syncfleet_watermark_stalled` is 1 (0 turns it off).
    pub(crate) watermark_stall_periods: u32,
    /// Change messages pulled per call (TOP: 10..=200).
    pub(crate) listen_batch: u32,
    /// How often a worker looks at the renewable shops' tokens: renews the ones near their
    /// end (one worker of the fleet does), and picks up the ones another renewed.
    pub(crate) token_check_ms: u64,
    /// A pull of change messages this often while changes flow (at once after a full batch):
    /// each pull is a call; this bounds how late a change is seen.
    pub(crate) listen_every_ms: u64,
    /// While nothing comes, the wait between pulls doubles up to this.
    pub(crate) listen_idle_max_ms: u64,
    /// Recorded messages are acknowledged in batches, at the latest this long after the
    /// oldest (keep it below the platform's redelivery time).
    pub(crate) listen_confirm_within_ms: u64,
}

impl Default for JobsConfig {
    fn default() -> Self {
        JobsConfig {
            logistics_min_interval_s: 1800,
            order_slice_s: 86_400,
            order_page_size: None,
            item_retry_rounds: 4,
            schedule_check_ms: 1000,
            sync_slice_s: 1800,
            sync_catch_up_max_s: 21_600,
            watermark_stall_periods: 3,
            listen_batch: 100,
            token_check_ms: 5000,
            listen_every_ms: 4000,
            listen_idle_max_ms: 4000,
            listen_confirm_within_ms: 4000,
        }
    }
}

/// The probes of every (platform, API class) (`[probe]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProbeConfig {
    /// Seconds between probe rounds; 0 turns off the probes a worker runs.
    pub interval_s: u64,
    /// Fixed sample ids used by probes (item id for item_get, order id for logistics).
    pub(crate) sample_item_id: String,
    /// Order id of the logistics probe's sample call.
    pub sample_order_id: String,
    /// JD: the carrier's waybill number of the sample order (JD's trace is asked by waybill);
    /// without one, JD's logistics API is not probed.
    pub(crate) sample_waybill: Option<String>,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        ProbeConfig {
            interval_s: 30,
            sample_item_id: "1".into(),
            sample_order_id: "1".into(),
            sample_waybill: None,
        }
    }
}
