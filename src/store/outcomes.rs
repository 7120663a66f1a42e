//! Outcomes: items leave `pending` (recorded in batches), go back to it (retry, revive), and
//! the job is finished exactly once when none is left (docs/design.md, "The ledger on two
//! backends").

use super::backend::{execute, sql, Conn, Pool, Tx};
use super::{json_list, to_i64, to_u64, QueryCtx, Store, StoreError};
use super::{FinishReport, ItemOutcome, ItemStatus};
use crate::platform::ErrorClass;

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

impl Store {
    /// Put `keys` back to `pending` (error and result cleared, attempts kept) and reopen the
    /// job. Only `failed`, `stale` and `skipped` items are reset: a `done` item is never run
    /// twice (for a write that would duplicate it on the platform). Returns how many were reset.
    pub async fn reset_items_to_pending(
        &self,
        job_id: i64,
        keys: &[String],
    ) -> Result<u64, StoreError> {
        let mut tx = self.begin("reset_items_to_pending: begin").await?;
        let reset = execute!(
            tx.on(),
            sql!(
                "UPDATE job_items
                 SET status = 'pending', error_class = NULL, error_message = NULL, result = NULL,
                     updated_at = " NOW "
                 WHERE job_id = $1 AND status IN ('failed', 'stale', 'skipped')
                   AND item_key IN (SELECT value FROM " [KEYS "$2" AS k] ")"
            ),
            job_id,
            json_list(keys)
        )
        .ctx(self, "reset_items_to_pending: update items")?;
        if reset > 0 {
            self.reopen_job(&mut tx, job_id, reset).await?;
        }
        tx.commit()
            .await
            .ctx(self, "reset_items_to_pending: commit")?;
        Ok(reset)
    }

    /// Inside `tx`: `terminal` items of the job just left `pending`; mark the job finished (at
    /// `now`, or the database's now) when none is pending any more. True for exactly the
    /// transaction that finished it, under concurrent writers.
    ///
    /// SQLite answers "none pending" from its (job_id, status) index, and `BEGIN IMMEDIATE`
    /// serialises writers. PostgreSQL keeps the count in `jobs.pending_items` instead: under
    /// READ COMMITTED two transactions recording the last items of different chunks would
    /// each still see the other's items pending (neither would finish the job), and a scan
    /// for pending items walks the dead index entries of every item already done, so it grows
    /// with the job (measured: 4 ms per batch at 10k items). The decrement locks the job row:
    /// the later transaction reads the count the earlier one committed.
    pub(super) async fn finish_job_if_done(
        &self,
        tx: &mut Tx,
        job_id: i64,
        now: Option<i64>,
        terminal: u64,
    ) -> Result<bool, StoreError> {
        let none_pending = match tx.on() {
            Conn::Sqlite(_) => true,
            Conn::Postgres(c) => {
                let left: Option<i64> = sqlx::query_scalar(
                    "UPDATE jobs SET pending_items = pending_items - $2 WHERE id = $1
                     RETURNING pending_items",
                )
                .bind(job_id)
                .bind(to_i64(terminal))
                .fetch_optional(&mut *c)
                .await
                .ctx(self, "count pending items")?;
                left == Some(0)
            }
        };
        if !none_pending {
            return Ok(false);
        }
        let finished = execute!(
            tx.on(),
            sql!(
                sqlite: concat!(
                    "UPDATE jobs SET status = 'finished', finished_at = COALESCE($1, ",
                    sql!(@sqlite NOW),
                    ") WHERE id = $2 AND status = 'running'
                       AND NOT EXISTS (SELECT 1 FROM job_items
                                       WHERE job_id = $2 AND status = 'pending')"
                ),
                postgres: concat!(
                    "UPDATE jobs SET status = 'finished', finished_at = COALESCE($1, ",
                    sql!(@postgres NOW),
                    ") WHERE id = $2 AND status = 'running' AND pending_items = 0"
                ),
            ),
            now,
            job_id
        )
        .ctx(self, "finish job")?;
        Ok(finished == 1)
    }

    /// Inside `tx`: the job runs again (`reset` items were put back to pending).
    pub(super) async fn reopen_job(
        &self,
        tx: &mut Tx,
        job_id: i64,
        reset: u64,
    ) -> Result<(), StoreError> {
        execute!(
            tx.on(),
            sql!(
                // Items put back to pending by an operator run again, even in a job that
                // was cancelled (its cancelled items stay cancelled); a pause stays.
                sqlite: "UPDATE jobs SET status = 'running', finished_at = NULL,
                                control = NULLIF(control, 'cancelled')
                         WHERE id = $1",
                postgres: "UPDATE jobs SET status = 'running', finished_at = NULL,
                                  control = NULLIF(control, 'cancelled'),
                                  pending_items = pending_items + $2
                           WHERE id = $1",
            ),
            job_id,
            to_i64(reset)
        )
        .ctx(self, "reopen job")?;
        Ok(())
    }

    /// Record outcomes atomically: status, error class/message, result, attempts + 1. Only
    /// items still `pending` are updated (the first terminal outcome wins, so a duplicate
    /// delivery of a task cannot overwrite a `done` with a `failed`). Marks the job finished
    /// when no pending item remains; `job_finished` is true for exactly the call that did it.
    pub async fn finish_items(
        &self,
        job_id: i64,
        outcomes: &[ItemOutcome],
    ) -> Result<FinishReport, StoreError> {
        match &self.pool {
            Pool::Sqlite(_) => {
                let mut tx = self.begin("finish_items: begin").await?;
                let report = self.finish_items_in(&mut tx, job_id, outcomes).await?;
                tx.commit().await.ctx(self, "finish_items: commit")?;
                Ok(report)
            }
            Pool::Postgres(pg) => self.finish_items_postgres(pg, job_id, outcomes).await,
        }
    }

    /// Inside `tx`: the outcomes of [`Store::finish_items`] and the job's end.
    pub(super) async fn finish_items_in(
        &self,
        tx: &mut Tx,
        job_id: i64,
        outcomes: &[ItemOutcome],
    ) -> Result<FinishReport, StoreError> {
        let (recorded, terminal, now) = match tx {
            Tx::Sqlite(t, _) => self.finish_items_sqlite(t, job_id, outcomes).await?,
            Tx::Postgres(t) => return self.finish_items_postgres(&mut **t, job_id, outcomes).await,
        };
        let job_finished = self
            .finish_job_if_done(tx, job_id, Some(now), terminal)
            .await?;
        Ok(FinishReport {
            recorded,
            job_finished,
        })
    }

    /// SQLite: the batch is one UPDATE joined to the outcomes bound as one JSON array, then
    /// the job's end. One statement, not one per item: every statement is a round trip to the
    /// connection's thread while the transaction holds SQLite's one write lock, and at a
    /// listing's full rate the lock is what every task waits for. The outcomes are a
    /// materialised table the update walks, looking each item up by its key (without it
    /// SQLite walks the job's items and looks each up in the outcomes).
    /// Answers (recorded, terminal, the clock reading the items carry).
    async fn finish_items_sqlite(
        &self,
        conn: &mut sqlx::SqliteConnection,
        job_id: i64,
        outcomes: &[ItemOutcome],
    ) -> Result<(u64, u64, i64), StoreError> {
        // One clock reading for the whole batch: its items and the job's end agree.
        let now: i64 = sqlx::query_scalar(sql!("SELECT " NOW).sqlite)
            .fetch_one(&mut *conn)
            .await
            .ctx(self, "finish_items: read clock")?;
        let statuses: Vec<(String,)> = sqlx::query_as(
            "WITH o AS MATERIALIZED (
                 SELECT value ->> 0 AS item_key, value ->> 1 AS status, value ->> 2 AS class,
                        value ->> 3 AS message, value ->> 4 AS result
                 FROM json_each($1))
             UPDATE job_items
             SET status = o.status, error_class = o.class, error_message = o.message,
                 result = o.result, attempts = attempts + 1, updated_at = $2,
                 carry = CASE WHEN o.status = 'pending' THEN carry END
             FROM o
             WHERE job_items.job_id = $3 AND job_items.item_key = o.item_key
               AND job_items.status = 'pending'
             RETURNING status",
        )
        .bind(outcomes_json(outcomes))
        .bind(now)
        .bind(job_id)
        .fetch_all(&mut *conn)
        .await
        .ctx(self, "finish_items: update items")?;
        let recorded = statuses.len() as u64;
        let terminal = statuses
            .iter()
            .filter(|(status,)| status != ItemStatus::Pending.as_str())
            .count() as u64;
        Ok((recorded, terminal, now))
    }

    /// PostgreSQL: the whole batch is one statement, so one round trip and one implicit
    /// transaction (it was five: BEGIN, the clock, the items, the job row, COMMIT; the server's
    /// CPU is what a fleet shares). The items' columns travel as arrays. The job row's update
    /// is the same decrement [`Store::finish_job_if_done`] makes, folded in: it locks the row,
    /// a concurrent batch waits and re-reads the count, and the batch that brings it to 0 sets
    /// `finished`. When the job row is updated at all, it had items pending, so it was running
    /// (a job is `finished` only with none pending): `finished` after it means this batch did it.
    async fn finish_items_postgres<'e>(
        &self,
        pg: impl sqlx::PgExecutor<'e>,
        job_id: i64,
        outcomes: &[ItemOutcome],
    ) -> Result<FinishReport, StoreError> {
        let keys: Vec<&str> = outcomes.iter().map(|o| o.key.as_str()).collect();
        let statuses: Vec<&str> = outcomes.iter().map(|o| o.status.as_str()).collect();
        let classes: Vec<Option<&str>> = outcomes
            .iter()
            .map(|o| o.error_class.map(ErrorClass::as_str))
            .collect();
        let messages: Vec<Option<&str>> = outcomes
            .iter()
            .map(|o| o.error_message.as_deref().map(truncate))
            .collect();
        let results: Vec<Option<&str>> = outcomes.iter().map(|o| o.result.as_deref()).collect();
        let (recorded, job_finished): (i64, bool) = sqlx::query_as(FINISH_ITEMS_POSTGRES)
            .bind(job_id)
            .bind(keys)
            .bind(statuses)
            .bind(classes)
            .bind(messages)
            .bind(results)
            .fetch_one(pg)
            .await
            .ctx(self, "finish_items: update items and job")?;
        Ok(FinishReport {
            recorded: to_u64(recorded),
            job_finished,
        })
    }
}

/// [`Store::finish_items`] on PostgreSQL, one statement. A volatile CTE (`clock`) is evaluated
/// once, so the items and the job's end carry the same instant.
const FINISH_ITEMS_POSTGRES: &str = concat!(
    "WITH clock AS (SELECT ",
    sql!(@postgres NOW),
    " AS now),
     updated AS (
         UPDATE job_items AS i
         SET status = o.status, error_class = o.class, error_message = o.message,
             result = o.result, attempts = i.attempts + 1, updated_at = clock.now,
             carry = CASE WHEN o.status = 'pending' THEN i.carry END
         FROM clock,
              unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
              AS o(key, status, class, message, result)
         WHERE i.job_id = $1 AND i.item_key = o.key AND i.status = 'pending'
         RETURNING i.status),
     counts AS (
         SELECT COUNT(*) AS recorded, COUNT(*) FILTER (WHERE status <> 'pending') AS terminal
         FROM updated),
     job AS (
         UPDATE jobs AS j
         SET pending_items = j.pending_items - counts.terminal,
             status = CASE WHEN j.pending_items = counts.terminal
                           THEN 'finished' ELSE j.status END,
             finished_at = CASE WHEN j.pending_items = counts.terminal
                                THEN clock.now ELSE j.finished_at END
         FROM counts, clock
         WHERE j.id = $1 AND counts.terminal > 0
         RETURNING j.status = 'finished' AS finished)
     SELECT counts.recorded, COALESCE((SELECT finished FROM job), FALSE) FROM counts"
);

/// `outcomes` as one JSON array of `[key, status, class, message, result]`, one per item: the
/// first outcome of a key in the batch is its outcome.
fn outcomes_json(outcomes: &[ItemOutcome]) -> String {
    let mut seen = std::collections::HashSet::with_capacity(outcomes.len());
    let rows: Vec<_> = outcomes
        .iter()
        .filter(|o| seen.insert(o.key.as_str()))
        .map(|o| {
            (
                o.key.as_str(),
                o.status.as_str(),
                o.error_class.map(ErrorClass::as_str),
                o.error_message.as_deref().map(truncate),
                o.result.as_deref(),
            )
        })
        .collect();
    // Serializing strings and nulls cannot fail.
    serde_json::to_string(&rows).unwrap_or_else(|_| "[]".to_string())
}
