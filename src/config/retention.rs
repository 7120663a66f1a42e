//! `[retention]`: how long the ledger keeps what grows with time (docs/design.md,
//! "Retention"). One worker of the fleet prunes, once an hour, under the heal loop's lease.

use serde::Deserialize;

/// Days each growing table keeps; 0 keeps it forever.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct RetentionConfig {
    /// Last good read answers (`stale_cache`), by when they were stored. A stale answer
    /// older than `[link] stale_max_age_s` is never served anyway.
    pub(crate) stale_cache_days: u32,
    /// Change messages taken (`platform_messages`): kept to drop a redelivered one.
    pub(crate) messages_days: u32,
    /// Finished jobs that schedules started, with their items.
    pub(crate) scheduled_jobs_days: u32,
    /// Decided runs of schedules (`schedule_runs`; open ones are kept).
    pub(crate) schedule_runs_days: u32,
    /// Completion hook deliveries delivered or given up (pending ones are kept).
    pub(crate) hook_deliveries_days: u32,
    /// The calls ledger's per-minute counts (`api_calls`) and gate changes.
    pub(crate) calls_days: u32,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig {
            stale_cache_days: 7,
            messages_days: 7,
            scheduled_jobs_days: 14,
            schedule_runs_days: 30,
            hook_deliveries_days: 30,
            calls_days: 90,
        }
    }
}
