//! `[retention]`: how long the ledger keeps what grows with time (docs/design.md,
//! "Retention"). One worker of the fleet prunes, once an hour by default, under the heal
//! loop's lease.

use serde::Deserialize;

/// Days each growing table keeps (fractions allowed: 0.5 is 12 hours); 0 keeps it forever.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RetentionConfig {
    /// Last good read answers (`stale_cache`), by when they were stored. A stale answer
    /// older than `[link] stale_max_age_s` is never served anyway.
    pub(crate) stale_cache_days: f64,
    /// Change messages taken (`platform_messages`): kept to drop a redelivered one.
    pub(crate) messages_days: f64,
    /// Finished jobs that schedules started, with their items.
    pub(crate) scheduled_jobs_days: f64,
    /// Decided runs of schedules (`schedule_runs`; open ones are kept).
    pub(crate) schedule_runs_days: f64,
    /// Completion hook deliveries delivered or given up (pending ones are kept).
    pub(crate) hook_deliveries_days: f64,
    /// The calls ledger's per-minute counts (`api_calls`) and gate changes.
    pub(crate) calls_days: f64,
    /// Seconds between prunes.
    pub(crate) prune_every_s: u64,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig {
            stale_cache_days: 7.0,
            messages_days: 7.0,
            scheduled_jobs_days: 14.0,
            schedule_runs_days: 30.0,
            hook_deliveries_days: 30.0,
            calls_days: 90.0,
            prune_every_s: 3600,
        }
    }
}

impl RetentionConfig {
    /// Each period's key and its days.
    pub fn periods(&self) -> [(&'static str, f64); 6] {
        [
            ("stale_cache_days", self.stale_cache_days),
            ("messages_days", self.messages_days),
            ("scheduled_jobs_days", self.scheduled_jobs_days),
            ("schedule_runs_days", self.schedule_runs_days),
            ("hook_deliveries_days", self.hook_deliveries_days),
            ("calls_days", self.calls_days),
        ]
    }
}
