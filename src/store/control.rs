//! Job control: an operator pauses, resumes or cancels a job (`syncfleet job ...`,
//! docs/design.md, "Job control"). The ledger holds the decision; every worker reads it
//! before a task and while one runs, so no message has to reach the fleet.

use super::backend::{execute, fetch, sql};
use super::{ItemOutcome, ItemStatus, JobControl, JobState, QueryCtx, Store, StoreError};

/// What an operator asks of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlAction {
    /// Its tasks go back to the queue uncharged until resumed.
    Pause,
    /// A paused job runs again.
    Resume,
    /// Its pending items end `cancelled`; nothing more is called for it.
    Cancel,
}

/// What a control action did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlChange {
    /// The job is now in the asked state (for a cancel: this many items were cancelled).
    Done {
        /// Items that ended `cancelled` (0 for pause and resume).
        cancelled: u64,
    },
    /// It already was (paused again, resumed while running).
    Already,
    /// The job has finished (or was cancelled): there is nothing to pause, resume or cancel.
    Finished,
}

impl Store {
    /// The control of a job: `None` when it runs as enqueued.
    pub async fn job_control(&self, job_id: i64) -> Result<Option<JobControl>, StoreError> {
        let mut c = self.conn("job_control").await?;
        let row = fetch!(
            fetch_optional as (Option<String>,),
            c.on(),
            sql!("SELECT control FROM jobs WHERE id = $1"),
            job_id
        )
        .ctx(self, "job_control")?;
        let Some((control,)) = row else {
            return Err(StoreError::JobNotFound {
                db: self.db.to_string(),
                job_id,
            });
        };
        control.map(|c| self.parse(&c, "jobs.control")).transpose()
    }

    /// Pause, resume or cancel a job. A cancel ends its pending items `cancelled` and the
    /// job `finished`, in one transaction.
    pub async fn control_job(
        &self,
        job_id: i64,
        action: ControlAction,
    ) -> Result<ControlChange, StoreError> {
        let status = self.job_status(job_id).await?;
        let (state, control) = (status.job.state, status.job.control);
        if state == JobState::Finished || control == Some(JobControl::Cancelled) {
            return Ok(ControlChange::Finished);
        }
        match action {
            ControlAction::Pause | ControlAction::Resume => {
                let (to, from) = match action {
                    ControlAction::Pause => (Some(JobControl::Paused.as_str()), None),
                    _ => (None, Some(JobControl::Paused.as_str())),
                };
                let mut c = self.conn("control_job").await?;
                let changed = execute!(
                    c.on(),
                    sql!(
                        "UPDATE jobs SET control = $1
                         WHERE id = $2 AND status = 'running'
                           AND control IS NOT DISTINCT FROM $3"
                    ),
                    to,
                    job_id,
                    from
                )
                .ctx(self, "control_job")?;
                Ok(if changed == 1 {
                    ControlChange::Done { cancelled: 0 }
                } else {
                    ControlChange::Already
                })
            }
            ControlAction::Cancel => {
                let mut tx = self.begin("cancel_job: begin").await?;
                execute!(
                    tx.on(),
                    sql!("UPDATE jobs SET control = 'cancelled' WHERE id = $1"),
                    job_id
                )
                .ctx(self, "cancel_job: mark")?;
                let cancelled = execute!(
                    tx.on(),
                    sql!(
                        "UPDATE job_items SET status = 'cancelled', carry = NULL,
                             updated_at = " NOW "
                         WHERE job_id = $1 AND status = 'pending'"
                    ),
                    job_id
                )
                .ctx(self, "cancel_job: items")?;
                self.finish_job_if_done(&mut tx, job_id, None, cancelled)
                    .await?;
                tx.commit().await.ctx(self, "cancel_job: commit")?;
                Ok(ControlChange::Done { cancelled })
            }
        }
    }

    /// Outcomes that made something (`done`, `stale`) of items a cancel ended `cancelled`
    /// while their call was on the wire: the item says what happened (a listing that made a
    /// product is listed), not that it was cancelled. Both are terminal: the job's counts of
    /// pending items do not change. Returns how many items changed.
    pub async fn record_made_despite_cancel(
        &self,
        job_id: i64,
        outcomes: &[ItemOutcome],
    ) -> Result<u64, StoreError> {
        let mut changed = 0;
        let mut c = self.conn("record_made_despite_cancel").await?;
        for o in outcomes
            .iter()
            .filter(|o| matches!(o.status, ItemStatus::Done | ItemStatus::Stale))
        {
            changed += execute!(
                c.on(),
                sql!(
                    "UPDATE job_items
                     SET status = $1, error_message = $2, result = $3, attempts = attempts + 1,
                         updated_at = " NOW "
                     WHERE job_id = $4 AND item_key = $5 AND status = 'cancelled'"
                ),
                o.status.as_str(),
                o.error_message.as_deref(),
                o.result.as_deref(),
                job_id,
                &o.key
            )
            .ctx(self, "record_made_despite_cancel")?;
        }
        Ok(changed)
    }
}
