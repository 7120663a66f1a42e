//! Pruning what grows with time, by the `[retention]` settings (docs/design.md, "Retention").
//! Each table's cutoff is measured from `now`, which the caller supplies (the pruner passes
//! the clock; tests move it forward).

use super::backend::{execute, sql};
use super::calls::minute_key;
use super::{to_ms, QueryCtx, Store, StoreError};
use crate::config::RetentionConfig;
use chrono::{DateTime, Utc};

/// Rows each prune removed, per table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Last good read answers.
    pub stale_cache: u64,
    /// Change messages taken.
    pub messages: u64,
    /// Finished scheduled jobs (their items go with them).
    pub scheduled_jobs: u64,
    /// Decided runs of schedules.
    pub schedule_runs: u64,
    /// Hook deliveries delivered or given up.
    pub hook_deliveries: u64,
    /// Per-minute call counts and gate changes.
    pub calls: u64,
}

impl Pruned {
    /// Rows removed in all.
    pub fn total(&self) -> u64 {
        self.stale_cache
            + self.messages
            + self.scheduled_jobs
            + self.schedule_runs
            + self.hook_deliveries
            + self.calls
    }
}

/// The instant `days` before `now` (to the millisecond), or `None` when `days` is 0 (kept
/// forever; `config check` refuses a negative or non-finite one).
fn cutoff(now: DateTime<Utc>, days: f64) -> Option<DateTime<Utc>> {
    (days > 0.0).then(|| now - chrono::Duration::milliseconds((days * 86_400_000.0) as i64))
}

impl Store {
    /// Delete what `retention` no longer keeps as of `now`. Open work is never touched: a
    /// running job, a job whose finish a hook has still to tell, a pending hook delivery, a
    /// schedule run still open.
    pub async fn prune(
        &self,
        retention: &RetentionConfig,
        now: DateTime<Utc>,
    ) -> Result<Pruned, StoreError> {
        let mut out = Pruned::default();
        if let Some(t) = cutoff(now, retention.stale_cache_days) {
            out.stale_cache = self.stale_purge(t).await?;
        }
        let mut c = self.conn("prune").await?;
        if let Some(t) = cutoff(now, retention.messages_days) {
            out.messages = execute!(
                c.on(),
                sql!("DELETE FROM platform_messages WHERE received_at < $1"),
                to_ms(t)
            )
            .ctx(self, "prune: platform_messages")?;
        }
        // Jobs before the runs that name them: a run is how a job is known to be scheduled.
        if let Some(t) = cutoff(now, retention.scheduled_jobs_days) {
            execute!(
                c.on(),
                sql!(
                    "DELETE FROM job_items WHERE job_id IN (
                         SELECT j.id FROM jobs j JOIN schedule_runs r ON r.job_id = j.id
                         WHERE j.status = 'finished' AND j.finished_at < $1
                           AND j.id NOT IN (SELECT job_id FROM hook_deliveries
                                            WHERE state = 'pending'))"
                ),
                to_ms(t)
            )
            .ctx(self, "prune: scheduled job items")?;
            out.scheduled_jobs = execute!(
                c.on(),
                sql!(
                    "DELETE FROM jobs WHERE status = 'finished' AND finished_at < $1
                       AND id IN (SELECT job_id FROM schedule_runs WHERE job_id IS NOT NULL)
                       AND id NOT IN (SELECT job_id FROM hook_deliveries WHERE state = 'pending')"
                ),
                to_ms(t)
            )
            .ctx(self, "prune: scheduled jobs")?;
        }
        if let Some(t) = cutoff(now, retention.schedule_runs_days) {
            out.schedule_runs = execute!(
                c.on(),
                sql!(
                    "DELETE FROM schedule_runs
                     WHERE decided_at < $1 AND outcome NOT IN ('started', 'queued')
                       AND (job_id IS NULL OR job_id NOT IN (SELECT id FROM jobs))"
                ),
                to_ms(t)
            )
            .ctx(self, "prune: schedule_runs")?;
        }
        if let Some(t) = cutoff(now, retention.hook_deliveries_days) {
            out.hook_deliveries = execute!(
                c.on(),
                sql!(
                    "DELETE FROM hook_deliveries
                     WHERE state IN ('delivered', 'failed') AND created_at < $1"
                ),
                to_ms(t)
            )
            .ctx(self, "prune: hook_deliveries")?;
        }
        if let Some(t) = cutoff(now, retention.calls_days) {
            out.calls = execute!(
                c.on(),
                sql!("DELETE FROM api_calls WHERE minute < $1"),
                minute_key(t)
            )
            .ctx(self, "prune: api_calls")?;
            out.calls += execute!(
                c.on(),
                sql!("DELETE FROM gate_changes WHERE at < $1"),
                to_ms(t)
            )
            .ctx(self, "prune: gate_changes")?;
        }
        Ok(out)
    }
}
