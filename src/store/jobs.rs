//! Jobs and their items: creation, what to run, outcomes, progress.

use super::backend::{execute, fetch, scalar, sql, Conn, Pooled, Tx};
use super::{from_ms, json_list, to_i64, to_u64, QueryCtx, Store, StoreError};
use super::{
    FinishedSummaries, ItemRecord, ItemStatus, JobKind, JobState, JobStatus, JobSummary,
    StatusCounts, RATE_WINDOW,
};
use crate::platform::ErrorClass;
use std::collections::{HashMap, HashSet};

/// Per item status of one job, with the job's columns: (item status, count, kind, state,
/// total, created, finished). A job without items gives one row with no status.
type SummaryRow = (
    Option<String>,
    Option<i64>,
    String,
    String,
    i64,
    i64,
    Option<i64>,
    Option<String>,
);
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
        let mut tx = self.begin("create_job: begin").await?;
        let job_id = self.insert_job(&mut tx, kind, spec_json, item_keys).await?;
        tx.commit().await.ctx(self, "create_job: commit")?;
        if let Pooled::Postgres(c) = &mut self.conn("create_job: analyze").await? {
            // A bulk load leaves the planner's statistics behind until autovacuum comes by:
            // believing the job has a handful of items, it would answer every outcome batch
            // by hashing all of the job's pending items (measured: 6 ms per batch of 25
            // instead of 0.2 ms). Fresh statistics keep it on primary-key lookups.
            sqlx::query("ANALYZE job_items")
                .execute(&mut **c)
                .await
                .ctx(self, "create_job: analyze")?;
        }
        Ok(job_id)
    }

    /// [`Store::create_job`]'s writes inside the caller's transaction `tx` (a scheduled run
    /// creates its job in the transaction that decides its tick).
    pub(crate) async fn insert_job(
        &self,
        tx: &mut Tx,
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
        // The items get the job's own creation instant (one clock reading for the whole job).
        let (job_id, now) = fetch!(
            fetch_one as (i64, i64),
            tx.on(),
            sql!(
                sqlite: concat!(
                    "INSERT INTO jobs (kind, spec, status, total_items, created_at, finished_at)
                     VALUES ($1, $2, $3, $4, ",
                    sql!(@sqlite NOW),
                    ", NULL) RETURNING id, created_at"
                ),
                postgres: concat!(
                    "INSERT INTO jobs
                        (kind, spec, status, total_items, pending_items, created_at, finished_at)
                     VALUES ($1, $2, $3, $4, $4, ",
                    sql!(@postgres NOW),
                    ", NULL) RETURNING id, created_at"
                ),
            ),
            kind.as_str(),
            spec_json,
            state.as_str(),
            total
        )
        .ctx(self, "create_job: insert job")?;
        // One statement for all items, whatever their number: SQLite numbers the keys of one
        // bound JSON array with json_each (key = array index = seq); PostgreSQL takes them as
        // one text[] parameter and numbers them WITH ORDINALITY. Measured in
        // crates/bench/benches/ledger_bench.rs and BENCHMARKS.md (100k items).
        let inserted = match tx.on() {
            Conn::Sqlite(c) => sqlx::query(
                "INSERT INTO job_items (job_id, item_key, seq, updated_at)
                 SELECT $1, value, key, $2 FROM json_each($3)",
            )
            .bind(job_id)
            .bind(now)
            .bind(json_list(item_keys))
            .execute(&mut *c)
            .await
            .map(|_| ()),
            Conn::Postgres(c) => sqlx::query(
                "INSERT INTO job_items (job_id, item_key, seq, updated_at)
                 SELECT $1, k.key, k.ord - 1, $2 FROM unnest($3::text[]) WITH ORDINALITY AS k(key, ord)",
            )
            .bind(job_id)
            .bind(now)
            .bind(item_keys)
            .execute(&mut *c)
            .await
            .map(|_| ()),
        };
        match inserted {
            Ok(()) => {}
            Err(e) if is_unique_violation(&e) => {
                // The caller's dropped `tx` rolls back; find the culprit only on this path.
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
        // Every item pending: the counts the database keeps from here on (a trigger moves an
        // item's count with its status; migrations, "job_status_counts").
        if !item_keys.is_empty() {
            execute!(
                tx.on(),
                sql!(
                    "INSERT INTO job_status_counts (job_id, status, n)
                     VALUES ($1, 'pending', $2)"
                ),
                job_id,
                total
            )
            .ctx(self, "create_job: count items")?;
        }
        if item_keys.is_empty() {
            // Finished at the instant it was created.
            execute!(
                tx.on(),
                sql!("UPDATE jobs SET finished_at = created_at WHERE id = $1"),
                job_id
            )
            .ctx(self, "create_job: finish empty job")?;
        }
        Ok(job_id)
    }

    /// Baseline for `crates/bench/benches/ledger_bench.rs` only: the same job written with multi-row
    /// INSERTs of `rows_per_statement` bound rows, to compare against [`Store::create_job`].
    #[doc(hidden)]
    pub async fn create_job_multirow_baseline(
        &self,
        kind: JobKind,
        spec_json: &str,
        item_keys: &[String],
        rows_per_statement: usize,
    ) -> Result<i64, StoreError> {
        let mut tx = self.begin("create_job: begin").await?;
        let Tx::Sqlite(lite, _) = &mut tx else {
            return Err(StoreError::Unsupported {
                db: self.db.to_string(),
                what: "the multi-row insert baseline",
                backend: self.backend().as_str(),
            });
        };
        let (job_id, now): (i64, i64) = sqlx::query_as(
            sql!(
                "INSERT INTO jobs (kind, spec, status, total_items, created_at)
                 VALUES ($1, $2, 'running', $3, " NOW ") RETURNING id, created_at"
            )
            .sqlite,
        )
        .bind(kind.as_str())
        .bind(spec_json)
        .bind(to_i64(item_keys.len() as u64))
        .fetch_one(&mut **lite)
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
                .execute(&mut **lite)
                .await
                .ctx(self, "create_job: insert items")?;
        }
        sqlx::query("INSERT INTO job_status_counts (job_id, status, n) VALUES ($1, 'pending', $2)")
            .bind(job_id)
            .bind(to_i64(item_keys.len() as u64))
            .execute(&mut **lite)
            .await
            .ctx(self, "create_job: count items")?;
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
        let mut c = self.conn("items_to_run").await?;
        // CROSS JOIN keeps the key list as the outer loop (SQLite): one primary-key lookup
        // per key, instead of scanning every pending item of a large job.
        scalar!(
            fetch_all as String,
            c.on(),
            sql!(
                "SELECT i.item_key FROM " [KEYS "$1" AS k]
                " CROSS JOIN job_items AS i
                 WHERE i.job_id = $2 AND i.item_key = k.value AND i.status = 'pending'
                 ORDER BY i.seq"
            ),
            json_list(keys),
            job_id
        )
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
        let mut c = self.conn("chunk_pending_keys").await?;
        scalar!(
            fetch_all as String,
            c.on(),
            sql!(
                "SELECT item_key FROM job_items
                 WHERE job_id = $1 AND seq >= $2 AND seq < $3 AND status = 'pending'
                 ORDER BY seq"
            ),
            job_id,
            from,
            from.saturating_add(size)
        )
        .ctx(self, "chunk_pending_keys")
    }

    /// Every pending key of the job in `seq` order (for `reconcile`).
    pub async fn pending_keys(&self, job_id: i64) -> Result<Vec<String>, StoreError> {
        let mut c = self.conn("pending_keys").await?;
        scalar!(
            fetch_all as String,
            c.on(),
            sql!(
                "SELECT item_key FROM job_items WHERE job_id = $1 AND status = 'pending'
                 ORDER BY seq"
            ),
            job_id
        )
        .ctx(self, "pending_keys")
    }

    /// Chunk numbers (`seq / chunk_size`) that still hold a pending item, ascending
    /// (for `reconcile` to re-push one task per unfinished chunk).
    pub async fn pending_chunks(
        &self,
        job_id: i64,
        chunk_size: u64,
    ) -> Result<Vec<u64>, StoreError> {
        let mut c = self.conn("pending_chunks").await?;
        let chunks = scalar!(
            fetch_all as i64,
            c.on(),
            sql!(
                "SELECT DISTINCT seq / $1 FROM job_items
                 WHERE job_id = $2 AND status = 'pending' ORDER BY 1"
            ),
            to_i64(chunk_size.max(1)),
            job_id
        )
        .ctx(self, "pending_chunks")?;
        Ok(chunks.into_iter().map(to_u64).collect())
    }

    /// Keys of failed items with error class `class`, in `seq` order (`retry JOB --class`).
    pub async fn items_by_class(
        &self,
        job_id: i64,
        class: ErrorClass,
    ) -> Result<Vec<String>, StoreError> {
        let mut c = self.conn("items_by_class").await?;
        scalar!(
            fetch_all as String,
            c.on(),
            sql!(
                "SELECT item_key FROM job_items
                 WHERE job_id = $1 AND status = 'failed' AND error_class = $2 ORDER BY seq"
            ),
            job_id,
            class.as_str()
        )
        .ctx(self, "items_by_class")
    }

    /// A job's counts per status, times, and its rate: over the last minute while it runs (for
    /// the ETA), over its whole life once finished (see [`JobSummary::rate_per_sec`]).
    pub async fn job_status(&self, job_id: i64) -> Result<JobStatus, StoreError> {
        let mut c = self.conn("job_status").await?;
        let spec = scalar!(
            fetch_optional as String,
            c.on(),
            sql!("SELECT spec FROM jobs WHERE id = $1"),
            job_id
        )
        .ctx(self, "job_status: read job")?;
        let Some(spec) = spec else {
            return Err(self.job_not_found(job_id));
        };
        drop(c);
        let job = self.summary(job_id).await?;
        let mut c = self.conn("job_status").await?;
        // "The last minute" on the clock that stamped `updated_at`: the database's.
        let (now, recent) = fetch!(
            fetch_one as (i64, i64),
            c.on(),
            sql!(
                "SELECT clock.ms, (SELECT COUNT(*) FROM job_items
                              WHERE job_id = $1 AND status IN ('done', 'stale', 'failed', 'skipped')
                                AND updated_at >= clock.ms - $2)
                 FROM (SELECT " NOW " AS ms) AS clock"
            ),
            job_id,
            i64::try_from(RATE_WINDOW.as_millis()).unwrap_or(i64::MAX)
        )
        .ctx(self, "job_status: recent rate")?;
        let rate_per_sec = job.rate_per_sec(to_u64(recent), from_ms(now));
        Ok(JobStatus {
            job,
            spec,
            rate_per_sec,
        })
    }

    /// Whether the job still runs: one row by primary key, cheap enough to poll often (a full
    /// [`Store::job_status`] counts the job's items).
    pub(crate) async fn job_state(&self, job_id: i64) -> Result<JobState, StoreError> {
        let mut c = self.conn("job_state").await?;
        let state = scalar!(
            fetch_optional as String,
            c.on(),
            sql!("SELECT status FROM jobs WHERE id = $1"),
            job_id
        )
        .ctx(self, "job_state")?;
        match state {
            Some(s) => self.parse(&s, "jobs.status"),
            None => Err(self.job_not_found(job_id)),
        }
    }

    /// A job's spec (JSON text, as given to `create_job`): one row by primary key. A worker
    /// reads it when it meets the job's first task; [`Store::job_status`] would also count
    /// the job's items, and on PostgreSQL a worker's first tasks all asking at once scanned a
    /// 100k-item job side by side (0.7 s before the demo's first call, BENCHMARKS.md).
    pub(crate) async fn job_spec(&self, job_id: i64) -> Result<String, StoreError> {
        let mut c = self.conn("job_spec").await?;
        scalar!(
            fetch_optional as String,
            c.on(),
            sql!("SELECT spec FROM jobs WHERE id = $1"),
            job_id
        )
        .ctx(self, "job_spec")?
        .ok_or_else(|| self.job_not_found(job_id))
    }

    /// Id and spec (JSON text, as given to `create_job`) of every running job, oldest first:
    /// what a starting worker may be asked to run.
    pub(crate) async fn running_job_specs(&self) -> Result<Vec<(i64, String)>, StoreError> {
        let mut c = self.conn("running_job_specs").await?;
        fetch!(
            fetch_all as (i64, String),
            c.on(),
            sql!("SELECT id, spec FROM jobs WHERE status = 'running' ORDER BY id")
        )
        .ctx(self, "running_job_specs")
    }

    /// Keep what a heal sweep found: `uncovered` pending items without a task, per running job
    /// it looked at (`jobs` not named found none).
    pub(crate) async fn record_sweep(
        &self,
        jobs: &[i64],
        uncovered: &[(i64, usize)],
    ) -> Result<(), StoreError> {
        let mut tx = self.begin("record_sweep: begin").await?;
        for job in jobs {
            let n = uncovered
                .iter()
                .find_map(|(j, n)| (j == job).then_some(*n))
                .unwrap_or(0);
            execute!(
                tx.on(),
                sql!(
                    "UPDATE jobs SET uncovered_items = $2, swept_at = " NOW "
                     WHERE id = $1 AND status = 'running'"
                ),
                job,
                i64::try_from(n).unwrap_or(i64::MAX)
            )
            .ctx(self, "record_sweep")?;
        }
        tx.commit().await.ctx(self, "record_sweep: commit")?;
        Ok(())
    }

    /// What the last heal sweep found of `job`: (pending items without a task, milliseconds
    /// since the sweep, database clock); `None` when no sweep looked at it.
    pub async fn last_sweep(&self, job_id: i64) -> Result<Option<(u64, i64)>, StoreError> {
        let mut c = self.conn("last_sweep").await?;
        let row = fetch!(
            fetch_optional as (Option<i64>, Option<i64>),
            c.on(),
            sql!(
                "SELECT uncovered_items, CAST(" NOW " - swept_at AS BIGINT)
                 FROM jobs WHERE id = $1"
            ),
            job_id
        )
        .ctx(self, "last_sweep")?;
        Ok(match row {
            Some((Some(n), Some(ago))) => Some((to_u64(n), ago)),
            _ => None,
        })
    }

    /// The most recent jobs (newest first) with their counts.
    pub async fn list_jobs(&self, limit: u32) -> Result<Vec<JobSummary>, StoreError> {
        self.list_jobs_reusing(limit, &mut FinishedSummaries::default())
            .await
    }

    /// [`Store::list_jobs`], reusing the summaries of jobs that were finished when `known`
    /// kept them and still are, finished at the same instant: a finished job's counts do not
    /// change, and counting a 100k-item job again on every dashboard refresh read its items
    /// every time. `known` keeps the finished ones of this list (only).
    pub async fn list_jobs_reusing(
        &self,
        limit: u32,
        known: &mut FinishedSummaries,
    ) -> Result<Vec<JobSummary>, StoreError> {
        let mut c = self.conn("list_jobs").await?;
        let heads = fetch!(
            fetch_all as (i64, String, Option<i64>),
            c.on(),
            sql!("SELECT id, status, finished_at FROM jobs ORDER BY id DESC LIMIT $1"),
            i64::from(limit)
        )
        .ctx(self, "list_jobs")?;
        drop(c);
        let mut out = Vec::with_capacity(heads.len());
        let mut kept = HashMap::new();
        for (id, state, finished) in heads {
            let state: JobState = self.parse(&state, "jobs.status")?;
            let reusable = known.0.remove(&id).filter(|s| {
                state == JobState::Finished
                    && s.state == JobState::Finished
                    && s.finished_at == finished.map(from_ms)
            });
            let summary = match reusable {
                Some(s) => s,
                None => self.summary(id).await?,
            };
            if summary.state == JobState::Finished {
                kept.insert(id, summary.clone());
            }
            out.push(summary);
        }
        known.0 = kept;
        Ok(out)
    }

    /// Items of a job in `seq` order, optionally of one status, at most `limit`.
    pub async fn items(
        &self,
        job_id: i64,
        status: Option<ItemStatus>,
        limit: u32,
    ) -> Result<Vec<ItemRecord>, StoreError> {
        let mut c = self.conn("items").await?;
        let rows = fetch!(
            fetch_all as ItemRow,
            c.on(),
            sql!(
                "SELECT item_key, seq, status, error_class, error_message, result, attempts,
                        updated_at
                 FROM job_items
                 WHERE job_id = $1 AND ($2 IS NULL OR status = $2)
                 ORDER BY seq LIMIT $3"
            ),
            job_id,
            status.map(ItemStatus::as_str),
            i64::from(limit)
        )
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

    /// The job's columns and its counts per item status, read in one statement (one
    /// snapshot): read apart, a state taken just before the last outcome's commit and counts
    /// taken just after it showed a job "running" with no item pending.
    async fn summary(&self, id: i64) -> Result<JobSummary, StoreError> {
        let mut c = self.conn("count items per status").await?;
        let rows = fetch!(
            fetch_all as SummaryRow,
            c.on(),
            sql!(
                "SELECT c.status, c.n, j.kind, j.status, j.total_items,
                        j.created_at, j.finished_at, j.control
                 FROM jobs AS j LEFT JOIN job_status_counts AS c ON c.job_id = j.id
                 WHERE j.id = $1"
            ),
            id
        )
        .ctx(self, "count items per status")?;
        let Some((_, _, kind, state, total, created, finished, control)) = rows.first().cloned()
        else {
            return Err(self.job_not_found(id));
        };
        let mut counts = StatusCounts::default();
        for (status, n, ..) in rows {
            if let Some(status) = status {
                counts.add(
                    self.parse(&status, "job_status_counts.status")?,
                    to_u64(n.unwrap_or(0)),
                );
            }
        }
        Ok(JobSummary {
            id,
            kind: self.parse(&kind, "jobs.kind")?,
            state: self.parse(&state, "jobs.status")?,
            total: to_u64(total),
            counts,
            created_at: from_ms(created),
            finished_at: finished.map(from_ms),
            control: control
                .map(|c| self.parse(&c, "jobs.control"))
                .transpose()?,
        })
    }

    fn job_not_found(&self, job_id: i64) -> StoreError {
        StoreError::JobNotFound {
            db: self.db.to_string(),
            job_id,
        }
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
