//! Completion hooks' outbox: one delivery per finish of a job, claimed by one worker at a time
//! (docs/design.md, "Completion hooks").

use super::backend::{execute, fetch, sql};
use super::{from_ms, QueryCtx, Store, StoreError};
use chrono::{DateTime, Utc};

/// One finish of a job to tell the hook about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookDelivery {
    /// The job.
    pub job_id: i64,
    /// When it finished (unix ms): with the job, the delivery's identity.
    pub finished_ms: i64,
    /// Attempts made before this one.
    pub attempts: u32,
}

impl HookDelivery {
    /// The id the receiver sees (`X-Syncfleet-Delivery`): the same on every attempt, so a
    /// receiver drops a repeat.
    pub fn delivery_id(&self) -> String {
        format!("job-{}-{}", self.job_id, self.finished_ms)
    }
}

/// A delivery this worker holds the claim of: only its holder may record what came of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedHook {
    /// The delivery.
    pub delivery: HookDelivery,
    /// The claim's token: a state change by a worker whose claim lapsed and was taken by
    /// another changes nothing.
    pub claim: String,
}

/// A delivery as `hooks` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookRecord {
    /// The delivery.
    pub delivery: HookDelivery,
    /// `pending`, `delivered` or `failed`.
    pub state: String,
    /// The last attempt's error.
    pub last_error: Option<String>,
    /// When the receiver acknowledged it.
    pub delivered_at: Option<DateTime<Utc>>,
}

type HookRow = (i64, i64, i64, String, Option<String>, Option<i64>);

/// How far before the newest finish looked at a look reads again: a finish is stamped with
/// the clock at its statement, and its transaction may commit after a later-stamped one.
const LATE_COMMIT_MS: i64 = 60_000;

impl Store {
    /// Add a pending delivery for every finish of a job since hooks were first run (the first
    /// call marks that instant). Reads only the finishes from a minute before the newest one
    /// already looked at (a transaction may commit a finish stamped a little earlier). Returns
    /// how many were added.
    pub async fn fill_hook_outbox(&self) -> Result<u64, StoreError> {
        let mut c = self.conn("fill_hook_outbox").await?;
        execute!(
            c.on(),
            sql!(
                "INSERT INTO hook_state (id, since, looked_to) VALUES (1, " NOW ", 0)
                 ON CONFLICT (id) DO NOTHING"
            )
        )
        .ctx(self, "fill_hook_outbox: mark the start")?;
        let (since, looked_to) = fetch!(
            fetch_one as (i64, i64),
            c.on(),
            sql!("SELECT since, looked_to FROM hook_state WHERE id = 1")
        )
        .ctx(self, "fill_hook_outbox: read the mark")?;
        let from = since.max(looked_to - LATE_COMMIT_MS);
        let added = execute!(
            c.on(),
            sql!(
                "INSERT INTO hook_deliveries (job_id, finished_at, state, next_at, created_at)
                 SELECT j.id, j.finished_at, 'pending', " NOW ", " NOW "
                 FROM jobs j
                 WHERE j.finished_at >= $1 AND j.status = 'finished'
                 ON CONFLICT (job_id, finished_at) DO NOTHING"
            ),
            from
        )
        .ctx(self, "fill_hook_outbox")?;
        execute!(
            c.on(),
            sql!(
                "UPDATE hook_state SET looked_to = (SELECT MAX(finished_at) FROM jobs
                     WHERE finished_at >= $1)
                 WHERE id = 1 AND EXISTS (SELECT 1 FROM jobs WHERE finished_at > looked_to)"
            ),
            from
        )
        .ctx(self, "fill_hook_outbox: move the mark")?;
        Ok(added)
    }

    /// Claim one pending delivery that is due, for `lease_ms`: `None` when none is (or another
    /// worker claimed it first).
    pub async fn claim_hook(&self, lease_ms: i64) -> Result<Option<ClaimedHook>, StoreError> {
        let mut c = self.conn("claim_hook").await?;
        let due = fetch!(
            fetch_optional as (i64, i64, i64),
            c.on(),
            sql!(
                "SELECT job_id, finished_at, attempts FROM hook_deliveries
                 WHERE state = 'pending' AND next_at <= " NOW "
                   AND (claimed_until IS NULL OR claimed_until < " NOW ")
                 ORDER BY next_at, job_id LIMIT 1"
            )
        )
        .ctx(self, "claim_hook: look")?;
        let Some((job_id, finished_ms, attempts)) = due else {
            return Ok(None);
        };
        let claim = ulid::Ulid::new().to_string();
        let n = execute!(
            c.on(),
            sql!(
                "UPDATE hook_deliveries SET claimed_until = " NOW " + $3, claim = $4
                 WHERE job_id = $1 AND finished_at = $2 AND state = 'pending'
                   AND (claimed_until IS NULL OR claimed_until < " NOW ")"
            ),
            job_id,
            finished_ms,
            lease_ms,
            &claim
        )
        .ctx(self, "claim_hook")?;
        Ok((n == 1).then(|| ClaimedHook {
            delivery: HookDelivery {
                job_id,
                finished_ms,
                attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
            },
            claim,
        }))
    }

    /// The receiver acknowledged the delivery. False when the claim was no longer this
    /// worker's (it lapsed and another worker took it): nothing is changed.
    pub async fn hook_delivered(&self, d: &ClaimedHook) -> Result<bool, StoreError> {
        let mut c = self.conn("hook_delivered").await?;
        let n = execute!(
            c.on(),
            sql!(
                "UPDATE hook_deliveries SET state = 'delivered', attempts = attempts + 1,
                     delivered_at = " NOW ", claimed_until = NULL, claim = NULL,
                     last_error = NULL
                 WHERE job_id = $1 AND finished_at = $2 AND claim = $3 AND state = 'pending'"
            ),
            d.delivery.job_id,
            d.delivery.finished_ms,
            &d.claim
        )
        .ctx(self, "hook_delivered")?;
        Ok(n == 1)
    }

    /// An attempt failed with `error`: try again after `retry_in_ms`, or give up (`failed`).
    /// False when the claim was no longer this worker's: nothing is changed.
    pub async fn hook_attempt_failed(
        &self,
        d: &ClaimedHook,
        error: &str,
        retry_in_ms: Option<i64>,
    ) -> Result<bool, StoreError> {
        let mut c = self.conn("hook_attempt_failed").await?;
        let n = execute!(
            c.on(),
            sql!(
                "UPDATE hook_deliveries SET attempts = attempts + 1, last_error = $3,
                     claimed_until = NULL, claim = NULL,
                     state = CASE WHEN $4 < 0 THEN 'failed' ELSE 'pending' END,
                     next_at = " NOW " + CASE WHEN $4 < 0 THEN 0 ELSE $4 END
                 WHERE job_id = $1 AND finished_at = $2 AND claim = $5 AND state = 'pending'"
            ),
            d.delivery.job_id,
            d.delivery.finished_ms,
            error,
            retry_in_ms.unwrap_or(-1),
            &d.claim
        )
        .ctx(self, "hook_attempt_failed")?;
        Ok(n == 1)
    }

    /// Send again the deliveries that were given up (`failed`), of `job` or of every job:
    /// pending from now, their attempts counted afresh. Answers how many.
    pub async fn resend_failed_hooks(&self, job: Option<i64>) -> Result<u64, StoreError> {
        let mut c = self.conn("resend_failed_hooks").await?;
        let n = execute!(
            c.on(),
            sql!(
                "UPDATE hook_deliveries SET state = 'pending', attempts = 0, next_at = " NOW ",
                     claimed_until = NULL, claim = NULL
                 WHERE state = 'failed' AND ($1 < 0 OR job_id = $1)"
            ),
            job.unwrap_or(-1)
        )
        .ctx(self, "resend_failed_hooks")?;
        Ok(n)
    }

    /// How many deliveries were given up (`failed`): what `resend_failed_hooks` would send.
    pub async fn failed_hook_count(&self) -> Result<u64, StoreError> {
        let mut c = self.conn("failed_hook_count").await?;
        let n = fetch!(
            fetch_one as (i64,),
            c.on(),
            sql!("SELECT COUNT(*) FROM hook_deliveries WHERE state = 'failed'")
        )
        .ctx(self, "failed_hook_count")?;
        Ok(u64::try_from(n.0).unwrap_or(0))
    }

    /// The newest `limit` deliveries.
    pub async fn hook_deliveries(&self, limit: u32) -> Result<Vec<HookRecord>, StoreError> {
        let mut c = self.conn("hook_deliveries").await?;
        let rows = fetch!(
            fetch_all as HookRow,
            c.on(),
            sql!(
                "SELECT job_id, finished_at, attempts, state, last_error, delivered_at
                 FROM hook_deliveries ORDER BY created_at DESC, job_id DESC LIMIT $1"
            ),
            i64::from(limit)
        )
        .ctx(self, "hook_deliveries")?;
        Ok(rows
            .into_iter()
            .map(
                |(job_id, finished_ms, attempts, state, last_error, delivered)| HookRecord {
                    delivery: HookDelivery {
                        job_id,
                        finished_ms,
                        attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
                    },
                    state,
                    last_error,
                    delivered_at: delivered.map(from_ms),
                },
            )
            .collect())
    }
}
