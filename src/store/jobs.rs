//! Jobs and their items: creation, what to run, outcomes, progress.

use super::{from_ms, json_list, to_i64, to_u64, QueryCtx, Store, StoreError};
use super::{
    FinishReport, ItemOutcome, ItemRecord, ItemStatus, JobKind, JobState, JobStatus, JobSummary,
    StatusCounts, RATE_WINDOW,
};
use crate::platform::ErrorClass;
use std::collections::HashSet;

/// The database's clock in unix milliseconds, as an SQL expression. Every instant the ledger
/// writes (and every "how long ago" it compares) comes from here, not from the writing host:
/// workers on several hosts share one ledger, and their clocks disagree. `'subsec'` needs
/// SQLite 3.42+ (sqlx bundles a newer one; `sql_clock_is_milliseconds` checks it).
macro_rules! now_ms {
    () => {
        "CAST(unixepoch('subsec') * 1000 AS INTEGER)"
    };
}
pub(super) use now_ms;

/// Longest error message kept per item (a platform body can be large; the class says enough).
const MAX_ERROR_MESSAGE: usize = 2000;

fn truncate(s: &str) -> &str {
    if s.len() <= MAX_ERROR_MESSAGE {
        return s;
    }
    let mut end = MAX_ERROR_MESSAGE;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

type JobRow = (i64, String, String, i64, i64, Option<i64>);
/// A job row followed by its spec.
type JobSpecRow = (i64, String, String, i64, i64, Option<i64>, String);
type ItemRow = (
    String,
    i64,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    i64,
    i64,
);

impl Store {
    /// Create a job and all its items (status `pending`, `seq` = position in `item_keys`) in
    /// one transaction: either the job exists with every item, or nothing was written.
    /// A job without items is created finished. Duplicate keys fail with
    /// [`StoreError::DuplicateItem`]. `spec_json` must be valid JSON.
    pub async fn create_job(
        &self,
        kind: JobKind,
        spec_json: &str,
        item_keys: &[String],
    ) -> Result<i64, StoreError> {
        let total = to_i64(item_keys.len() as u64);
        let state = if item_keys.is_empty() {
            JobState::Finished
        } else {
            JobState::Running
        };
        // IMMEDIATE: take the write lock up front so busy_timeout applies (a deferred
        // transaction upgrading to a writer fails at once with SQLITE_BUSY under WAL).
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .ctx(self, "create_job: begin")?;
        // The items get the job's own creation instant (one clock reading for the whole job).
        let (job_id, now): (i64, i64) = sqlx::query_as(concat!(
            "INSERT INTO jobs (kind, spec, status, total_items, created_at, finished_at)
             VALUES (?, ?, ?, ?, ",
            now_ms!(),
            ", NULL) RETURNING id, created_at"
        ))
        .bind(kind.as_str())
        .bind(spec_json)
        .bind(state.as_str())
        .bind(total)
        .fetch_one(&mut *tx)
        .await
        .ctx(self, "create_job: insert job")?;
        // One statement for all items: the keys travel as one JSON array and json_each
        // numbers them (key = array index = seq). Measured in examples/ledger_bench.rs.
        let inserted = sqlx::query(
            "INSERT INTO job_items (job_id, item_key, seq, updated_at)
             SELECT ?, value, key, ? FROM json_each(?)",
        )
        .bind(job_id)
        .bind(now)
        .bind(json_list(item_keys))
        .execute(&mut *tx)
        .await;
        match inserted {
            Ok(_) => {}
            Err(e) if is_unique_violation(&e) => {
                // Dropping `tx` rolls back; find the culprit only on this error path.
                drop(tx);
                let mut seen = HashSet::with_capacity(item_keys.len());
                let key = item_keys
                    .iter()
                    .find(|k| !seen.insert(k.as_str()))
                    .cloned()
                    .unwrap_or_default();
                return Err(StoreError::DuplicateItem {
                    db: self.db.to_string(),
                    key,
                });
            }
            Err(e) => return Err(e).ctx(self, "create_job: insert items"),
        }
        if item_keys.is_empty() {
            // Finished at the instant it was created.
            sqlx::query("UPDATE jobs SET finished_at = created_at WHERE id = ?")
                .bind(job_id)
                .execute(&mut *tx)
                .await
                .ctx(self, "create_job: finish empty job")?;
        }
        tx.commit().await.ctx(self, "create_job: commit")?;
        Ok(job_id)
    }

    /// Baseline for `examples/ledger_bench.rs` only: the same job written with multi-row
    /// INSERTs of `rows_per_statement` bound rows, to compare against [`Store::create_job`].
    #[doc(hidden)]
    pub async fn create_job_multirow_baseline(
        &self,
        kind: JobKind,
        spec_json: &str,
        item_keys: &[String],
        rows_per_statement: usize,
    ) -> Result<i64, StoreError> {
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .ctx(self, "create_job: begin")?;
        let (job_id, now): (i64, i64) = sqlx::query_as(concat!(
            "INSERT INTO jobs (kind, spec, status, total_items, created_at)
             VALUES (?, ?, 'running', ?, ",
            now_ms!(),
            ") RETURNING id, created_at"
        ))
        .bind(kind.as_str())
        .bind(spec_json)
        .bind(to_i64(item_keys.len() as u64))
        .fetch_one(&mut *tx)
        .await
        .ctx(self, "create_job: insert job")?;
        for (chunk_no, chunk) in item_keys.chunks(rows_per_statement.max(1)).enumerate() {
            let base = chunk_no * rows_per_statement.max(1);
            let mut qb = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
                "INSERT INTO job_items (job_id, item_key, seq, updated_at) ",
            );
            qb.push_values(chunk.iter().enumerate(), |mut row, (i, key)| {
                row.push_bind(job_id)
                    .push_bind(key.as_str())
                    .push_bind(to_i64((base + i) as u64))
                    .push_bind(now);
            });
            qb.build()
                .execute(&mut *tx)
                .await
                .ctx(self, "create_job: insert items")?;
        }
        tx.commit().await.ctx(self, "create_job: commit")?;
        Ok(job_id)
    }

    /// Of `keys`, those still pending, in `seq` order: what a (re-)run task must do.
    /// Keys that are terminal or not part of the job are left out.
    pub async fn items_to_run(
        &self,
        job_id: i64,
        keys: &[String],
    ) -> Result<Vec<String>, StoreError> {
        // CROSS JOIN keeps json_each as the outer loop: one primary-key lookup per key,
        // instead of scanning every pending item of a large job.
        sqlx::query_scalar(
            "SELECT i.item_key FROM json_each(?) AS k
             CROSS JOIN job_items AS i ON i.job_id = ? AND i.item_key = k.value
             WHERE i.status = 'pending'
             ORDER BY i.seq",
        )
        .bind(json_list(keys))
        .bind(job_id)
        .fetch_all(&self.pool)
        .await
        .ctx(self, "items_to_run")
    }

    /// Pending keys of chunk `chunk` (items with `chunk * chunk_size <= seq < (chunk + 1) *
    /// chunk_size`), in `seq` order: lets a task carry (job, chunk) instead of its keys.
    pub async fn chunk_pending_keys(
        &self,
        job_id: i64,
        chunk: u64,
        chunk_size: u64,
    ) -> Result<Vec<String>, StoreError> {
        let size = to_i64(chunk_size.max(1));
        let from = to_i64(chunk).saturating_mul(size);
        sqlx::query_scalar(
            "SELECT item_key FROM job_items
             WHERE job_id = ? AND seq >= ? AND seq < ? AND status = 'pending'
             ORDER BY seq",
        )
        .bind(job_id)
        .bind(from)
        .bind(from.saturating_add(size))
        .fetch_all(&self.pool)
        .await
        .ctx(self, "chunk_pending_keys")
    }

    /// Every pending key of the job in `seq` order (for `reconcile`).
    pub async fn pending_keys(&self, job_id: i64) -> Result<Vec<String>, StoreError> {
        sqlx::query_scalar(
            "SELECT item_key FROM job_items WHERE job_id = ? AND status = 'pending' ORDER BY seq",
        )
        .bind(job_id)
        .fetch_all(&self.pool)
        .await
        .ctx(self, "pending_keys")
    }

    /// Chunk numbers (`seq / chunk_size`) that still hold a pending item, ascending
    /// (for `reconcile` to re-push one task per unfinished chunk).
    pub async fn pending_chunks(
        &self,
        job_id: i64,
        chunk_size: u64,
    ) -> Result<Vec<u64>, StoreError> {
        let chunks: Vec<i64> = sqlx::query_scalar(
            "SELECT DISTINCT seq / ? FROM job_items
             WHERE job_id = ? AND status = 'pending' ORDER BY 1",
        )
        .bind(to_i64(chunk_size.max(1)))
        .bind(job_id)
        .fetch_all(&self.pool)
        .await
        .ctx(self, "pending_chunks")?;
        Ok(chunks.into_iter().map(to_u64).collect())
    }

    /// Keys of failed items with error class `class`, in `seq` order (`retry JOB --class`).
    pub async fn items_by_class(
        &self,
        job_id: i64,
        class: ErrorClass,
    ) -> Result<Vec<String>, StoreError> {
        sqlx::query_scalar(
            "SELECT item_key FROM job_items
             WHERE job_id = ? AND status = 'failed' AND error_class = ? ORDER BY seq",
        )
        .bind(job_id)
        .bind(class.as_str())
        .fetch_all(&self.pool)
        .await
        .ctx(self, "items_by_class")
    }

    /// Put `keys` back to `pending` (error and result cleared, attempts kept) and reopen the
    /// job. Only `failed`, `stale` and `skipped` items are reset: a `done` item is never run
    /// twice (for a write that would duplicate it on the platform). Returns how many were reset.
    pub async fn reset_items_to_pending(
        &self,
        job_id: i64,
        keys: &[String],
    ) -> Result<u64, StoreError> {
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .ctx(self, "reset_items_to_pending: begin")?;
        let reset = sqlx::query(concat!(
            "UPDATE job_items
             SET status = 'pending', error_class = NULL, error_message = NULL, result = NULL,
                 updated_at = ",
            now_ms!(),
            " WHERE job_id = ? AND status IN ('failed', 'stale', 'skipped')
               AND item_key IN (SELECT value FROM json_each(?))"
        ))
        .bind(job_id)
        .bind(json_list(keys))
        .execute(&mut *tx)
        .await
        .ctx(self, "reset_items_to_pending: update items")?
        .rows_affected();
        if reset > 0 {
            self.reopen_job(&mut tx, job_id).await?;
        }
        tx.commit()
            .await
            .ctx(self, "reset_items_to_pending: commit")?;
        Ok(reset)
    }

    /// Inside `tx`: mark the job finished (at `now`, or the database's now) when no item is
    /// pending. True for exactly the transaction that finished it.
    pub(super) async fn finish_job_if_done(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
        job_id: i64,
        now: Option<i64>,
    ) -> Result<bool, StoreError> {
        let finished = sqlx::query(concat!(
            "UPDATE jobs SET status = 'finished', finished_at = COALESCE(?, ",
            now_ms!(),
            ") WHERE id = ? AND status = 'running'
               AND NOT EXISTS (SELECT 1 FROM job_items WHERE job_id = ? AND status = 'pending')"
        ))
        .bind(now)
        .bind(job_id)
        .bind(job_id)
        .execute(&mut **tx)
        .await
        .ctx(self, "finish job")?
        .rows_affected();
        Ok(finished == 1)
    }

    /// Inside `tx`: the job runs again (items were put back to pending).
    pub(super) async fn reopen_job(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
        job_id: i64,
    ) -> Result<(), StoreError> {
        sqlx::query("UPDATE jobs SET status = 'running', finished_at = NULL WHERE id = ?")
            .bind(job_id)
            .execute(&mut **tx)
            .await
            .ctx(self, "reopen job")?;
        Ok(())
    }

    /// Record outcomes in one transaction: status, error class/message, result, attempts + 1.
    /// Only items still `pending` are updated (the first terminal outcome wins, so a duplicate
    /// delivery of a task cannot overwrite a `done` with a `failed`). Marks the job finished
    /// when no pending item remains; `job_finished` is true for exactly the call that did it.
    pub async fn finish_items(
        &self,
        job_id: i64,
        outcomes: &[ItemOutcome],
    ) -> Result<FinishReport, StoreError> {
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .ctx(self, "finish_items: begin")?;
        // One clock reading for the whole batch: its items and the job's end agree.
        let now: i64 = sqlx::query_scalar(concat!("SELECT ", now_ms!()))
            .fetch_one(&mut *tx)
            .await
            .ctx(self, "finish_items: read clock")?;
        let mut recorded = 0;
        for o in outcomes {
            recorded += sqlx::query(
                "UPDATE job_items
                 SET status = ?, error_class = ?, error_message = ?, result = ?,
                     attempts = attempts + 1, updated_at = ?,
                     carry = CASE WHEN ? = 'pending' THEN carry END
                 WHERE job_id = ? AND item_key = ? AND status = 'pending'",
            )
            .bind(o.status.as_str())
            .bind(o.error_class.map(ErrorClass::as_str))
            .bind(o.error_message.as_deref().map(truncate))
            .bind(o.result.as_deref())
            .bind(now)
            // A finished item no longer needs what it carried.
            .bind(o.status.as_str())
            .bind(job_id)
            .bind(&o.key)
            .execute(&mut *tx)
            .await
            .ctx(self, "finish_items: update item")?
            .rows_affected();
        }
        let job_finished = self.finish_job_if_done(&mut tx, job_id, Some(now)).await?;
        tx.commit().await.ctx(self, "finish_items: commit")?;
        Ok(FinishReport {
            recorded,
            job_finished,
        })
    }

    /// A job's counts per status, times, and its rate: over the last minute while it runs (for
    /// the ETA), over its whole life once finished (see [`JobSummary::rate_per_sec`]).
    pub async fn job_status(&self, job_id: i64) -> Result<JobStatus, StoreError> {
        let row: Option<JobSpecRow> = sqlx::query_as(
            "SELECT id, kind, status, total_items, created_at, finished_at, spec
             FROM jobs WHERE id = ?",
        )
        .bind(job_id)
        .fetch_optional(&self.pool)
        .await
        .ctx(self, "job_status: read job")?;
        let Some((id, kind, state, total, created, finished, spec)) = row else {
            return Err(StoreError::JobNotFound {
                db: self.db.to_string(),
                job_id,
            });
        };
        let job = self
            .summary((id, kind, state, total, created, finished))
            .await?;
        // "The last minute" on the clock that stamped `updated_at`: the database's.
        let (now, recent): (i64, i64) = sqlx::query_as(concat!(
            "SELECT clock.ms, (SELECT COUNT(*) FROM job_items
                          WHERE job_id = ? AND status IN ('done', 'stale', 'failed', 'skipped')
                            AND updated_at >= clock.ms - ?)
             FROM (SELECT ",
            now_ms!(),
            " AS ms) AS clock"
        ))
        .bind(job_id)
        .bind(i64::try_from(RATE_WINDOW.as_millis()).unwrap_or(i64::MAX))
        .fetch_one(&self.pool)
        .await
        .ctx(self, "job_status: recent rate")?;
        let rate_per_sec = job.rate_per_sec(to_u64(recent), from_ms(now));
        Ok(JobStatus {
            job,
            spec,
            rate_per_sec,
        })
    }

    /// Id and spec (JSON text, as given to `create_job`) of every running job, oldest first:
    /// what a starting worker may be asked to run.
    pub async fn running_job_specs(&self) -> Result<Vec<(i64, String)>, StoreError> {
        sqlx::query_as("SELECT id, spec FROM jobs WHERE status = 'running' ORDER BY id")
            .fetch_all(&self.pool)
            .await
            .ctx(self, "running_job_specs")
    }

    /// The most recent jobs (newest first) with their counts.
    pub async fn list_jobs(&self, limit: u32) -> Result<Vec<JobSummary>, StoreError> {
        let rows: Vec<JobRow> = sqlx::query_as(
            "SELECT id, kind, status, total_items, created_at, finished_at
             FROM jobs ORDER BY id DESC LIMIT ?",
        )
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .ctx(self, "list_jobs")?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            out.push(self.summary(row).await?);
        }
        Ok(out)
    }

    /// Items of a job in `seq` order, optionally of one status, at most `limit`.
    pub async fn items(
        &self,
        job_id: i64,
        status: Option<ItemStatus>,
        limit: u32,
    ) -> Result<Vec<ItemRecord>, StoreError> {
        let rows: Vec<ItemRow> = sqlx::query_as(
            "SELECT item_key, seq, status, error_class, error_message, result, attempts, updated_at
             FROM job_items
             WHERE job_id = ? AND (? IS NULL OR status = ?)
             ORDER BY seq LIMIT ?",
        )
        .bind(job_id)
        .bind(status.map(ItemStatus::as_str))
        .bind(status.map(ItemStatus::as_str))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .ctx(self, "items")?;
        rows.into_iter()
            .map(
                |(key, seq, st, class, message, result, attempts, updated)| {
                    Ok(ItemRecord {
                        key,
                        seq: to_u64(seq),
                        status: self.parse(&st, "job_items.status")?,
                        error_class: match class {
                            Some(c) => Some(self.parse(&c, "job_items.error_class")?),
                            None => None,
                        },
                        error_message: message,
                        result,
                        attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
                        updated_at: from_ms(updated),
                    })
                },
            )
            .collect()
    }

    async fn summary(&self, row: JobRow) -> Result<JobSummary, StoreError> {
        let (id, kind, state, total, created, finished) = row;
        let per_status: Vec<(String, i64)> = sqlx::query_as(
            "SELECT status, COUNT(*) FROM job_items WHERE job_id = ? GROUP BY status",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await
        .ctx(self, "count items per status")?;
        let mut counts = StatusCounts::default();
        for (status, n) in per_status {
            counts.add(self.parse(&status, "job_items.status")?, to_u64(n));
        }
        Ok(JobSummary {
            id,
            kind: self.parse(&kind, "jobs.kind")?,
            state: self.parse(&state, "jobs.status")?,
            total: to_u64(total),
            counts,
            created_at: from_ms(created),
            finished_at: finished.map(from_ms),
        })
    }

    /// Parse a stored enum spelling, naming the column when it is not one we know.
    pub(crate) fn parse<T: std::str::FromStr>(
        &self,
        value: &str,
        what: &'static str,
    ) -> Result<T, StoreError> {
        value.parse().map_err(|_| StoreError::Corrupt {
            db: self.db.to_string(),
            what,
            value: value.to_string(),
        })
    }
}

fn is_unique_violation(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .is_some_and(|d| d.is_unique_violation())
}
