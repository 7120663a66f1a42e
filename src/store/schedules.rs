//! Schedules, their runs and each shop's watermark (docs/design.md, "Continuous sync").
//!
//! Every decision that must be made once, fleet-wide, is a compare-and-set in one
//! transaction: a tick is decided by the worker that moves `next_tick` on from the value it
//! read (and the runs' primary key refuses a second row for a tick), a started run's job is
//! created in that same transaction, and a finished run is settled (and the watermark moved)
//! by the worker whose update finds it still `started`.

use super::backend::{execute, fetch, scalar, sql};
use super::{from_ms, QueryCtx, Store, StoreError};
use super::{JobKind, OnOverlap, RunOutcome};
use crate::platform::Platform;
use chrono::{DateTime, Utc};
use std::time::Duration;

/// A schedule to add.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSchedule {
    /// `orders` or `logistics`.
    pub kind: JobKind,
    /// The shop's platform.
    pub platform: Platform,
    /// The shop.
    pub shop: String,
    /// Time between ticks.
    pub every: Duration,
    /// An order run covers up to the tick's time less this (the platform's index settles).
    pub lag: Duration,
    /// An order run starts this long before the watermark (a late `modified` is caught).
    pub overlap: Duration,
    /// A tick while the last run still runs.
    pub on_overlap: OnOverlap,
    /// After downtime, at most this many of the ticks due at once run.
    pub catch_up: u32,
    /// The runs' lane (`bulk` or `interactive`).
    pub lane: String,
    /// Where the shop's order coverage starts when it has no watermark yet.
    pub since: Option<DateTime<Utc>>,
}

/// A stored schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// Its id.
    pub id: i64,
    /// `orders` or `logistics`.
    pub kind: JobKind,
    /// The shop's platform.
    pub platform: Platform,
    /// The shop.
    pub shop: String,
    /// Time between ticks.
    pub every: Duration,
    /// See [`NewSchedule::lag`].
    pub lag: Duration,
    /// See [`NewSchedule::overlap`].
    pub overlap: Duration,
    /// See [`NewSchedule::on_overlap`].
    pub on_overlap: OnOverlap,
    /// See [`NewSchedule::catch_up`].
    pub catch_up: u32,
    /// The runs' lane.
    pub lane: String,
    /// Paused: its ticks are not decided until it is resumed.
    pub paused: bool,
    /// The next tick due (unix ms, the ledger's clock).
    pub next_tick_ms: i64,
}

/// One decided tick.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleRun {
    /// The schedule.
    pub schedule_id: i64,
    /// The tick (unix ms).
    pub tick_ms: i64,
    /// What became of it.
    pub outcome: RunOutcome,
    /// Why (a skip, a miss, a failure).
    pub note: Option<String>,
    /// The run's job, when it started.
    pub job_id: Option<i64>,
    /// The window of modification times an order run covers `[from, to)` (unix ms).
    pub window_ms: Option<(i64, i64)>,
}

/// A schedule with where its shop stands, for `schedule list`.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleView {
    /// The schedule.
    pub schedule: Schedule,
    /// Orders modified before this are in the ledger (order schedules).
    pub watermark: Option<DateTime<Utc>>,
    /// The newest decided tick.
    pub last_run: Option<ScheduleRun>,
    /// Ticks decided, per outcome.
    pub outcomes: Vec<(RunOutcome, u64)>,
}

/// A run to start: its job's spec and items, and the window it covers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StartRun {
    pub(crate) tick_ms: i64,
    pub(crate) spec_json: String,
    pub(crate) keys: Vec<String>,
    pub(crate) window_ms: Option<(i64, i64)>,
}

type ScheduleRow = (
    i64,
    String,
    String,
    String,
    i64,
    i64,
    i64,
    String,
    i64,
    String,
    i64,
    i64,
);
type RunRow = (
    i64,
    i64,
    String,
    Option<String>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
);

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn dur(ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

impl Store {
    fn schedule_from(&self, r: ScheduleRow) -> Result<Schedule, StoreError> {
        Ok(Schedule {
            id: r.0,
            kind: self.parse(&r.1, "schedules.kind")?,
            platform: self.parse(&r.2, "schedules.platform")?,
            shop: r.3,
            every: dur(r.4),
            lag: dur(r.5),
            overlap: dur(r.6),
            on_overlap: self.parse(&r.7, "schedules.on_overlap")?,
            catch_up: u32::try_from(r.8).unwrap_or(1).max(1),
            lane: r.9,
            paused: r.10 != 0,
            next_tick_ms: r.11,
        })
    }

    fn run_from(&self, r: RunRow) -> Result<ScheduleRun, StoreError> {
        Ok(ScheduleRun {
            schedule_id: r.0,
            tick_ms: r.1,
            outcome: self.parse(&r.2, "schedule_runs.outcome")?,
            note: r.3,
            job_id: r.4,
            window_ms: r.5.zip(r.6),
        })
    }

    /// The ledger's clock (unix ms): ticks and windows are decided on it, whichever host
    /// decides them.
    pub async fn clock_ms(&self) -> Result<i64, StoreError> {
        let mut c = self.conn("clock").await?;
        scalar!(fetch_one as i64, c.on(), sql!("SELECT " NOW)).ctx(self, "clock")
    }

    /// Add a schedule; its first tick is due at once. An order schedule of a shop without a
    /// watermark starts its coverage at `since`.
    pub async fn add_schedule(&self, s: &NewSchedule) -> Result<i64, StoreError> {
        let mut tx = self.begin("add_schedule: begin").await?;
        let existing = fetch!(
            fetch_optional as (i64,),
            tx.on(),
            sql!("SELECT id FROM schedules WHERE kind = $1 AND platform = $2 AND shop = $3"),
            s.kind.as_str(),
            s.platform.as_str(),
            &s.shop
        )
        .ctx(self, "add_schedule: look for the shop's schedule")?;
        if let Some((id,)) = existing {
            return Err(StoreError::ScheduleExists {
                db: self.db.to_string(),
                kind: s.kind,
                platform: s.platform,
                shop: s.shop.clone(),
                id,
            });
        }
        let (id,) = fetch!(
            fetch_one as (i64,),
            tx.on(),
            sql!(
                "INSERT INTO schedules (kind, platform, shop, every_ms, lag_ms, overlap_ms,
                     on_overlap, catch_up, lane, paused, next_tick, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 0, " NOW ", " NOW ")
                 RETURNING id"
            ),
            s.kind.as_str(),
            s.platform.as_str(),
            &s.shop,
            ms(s.every),
            ms(s.lag),
            ms(s.overlap),
            s.on_overlap.as_str(),
            i64::from(s.catch_up.max(1)),
            &s.lane
        )
        .ctx(self, "add_schedule: insert")?;
        if let (JobKind::Orders, Some(since)) = (s.kind, s.since) {
            execute!(
                tx.on(),
                sql!(
                    "INSERT INTO sync_watermarks (platform, shop, covered_to, updated_at)
                     VALUES ($1, $2, $3, " NOW ")
                     ON CONFLICT (platform, shop) DO NOTHING"
                ),
                s.platform.as_str(),
                &s.shop,
                since.timestamp_millis()
            )
            .ctx(self, "add_schedule: start the watermark")?;
        }
        tx.commit().await.ctx(self, "add_schedule: commit")?;
        Ok(id)
    }

    /// The schedule `id`.
    pub async fn schedule(&self, id: i64) -> Result<Schedule, StoreError> {
        let mut c = self.conn("schedule").await?;
        let row = sqlx_select_schedule(self, &mut c, Some(id)).await?;
        row.into_iter()
            .next()
            .ok_or_else(|| StoreError::ScheduleNotFound {
                db: self.db.to_string(),
                id,
            })
    }

    /// Every schedule with its shop's watermark, its newest run and its outcome counts.
    pub async fn schedules(&self) -> Result<Vec<ScheduleView>, StoreError> {
        let mut c = self.conn("schedules").await?;
        let all = sqlx_select_schedule(self, &mut c, None).await?;
        let mut out = Vec::with_capacity(all.len());
        for schedule in all {
            let watermark = self.watermark(schedule.platform, &schedule.shop).await?;
            let last_run = self.schedule_runs(schedule.id, 1).await?.into_iter().next();
            let counts = fetch!(
                fetch_all as (String, i64),
                c.on(),
                sql!(
                    "SELECT outcome, COUNT(*) FROM schedule_runs WHERE schedule_id = $1
                     GROUP BY outcome ORDER BY outcome"
                ),
                schedule.id
            )
            .ctx(self, "schedules: outcomes")?;
            let mut outcomes = Vec::with_capacity(counts.len());
            for (o, n) in counts {
                outcomes.push((
                    self.parse(&o, "schedule_runs.outcome")?,
                    u64::try_from(n).unwrap_or(0),
                ));
            }
            out.push(ScheduleView {
                watermark: schedule
                    .kind
                    .eq(&JobKind::Orders)
                    .then_some(watermark)
                    .flatten()
                    .map(from_ms),
                schedule,
                last_run,
                outcomes,
            });
        }
        Ok(out)
    }

    /// Pause or resume schedule `id`. A resumed schedule's next tick is due at once.
    pub async fn set_schedule_paused(&self, id: i64, paused: bool) -> Result<(), StoreError> {
        let mut c = self.conn("set_schedule_paused").await?;
        let n = execute!(
            c.on(),
            sql!(
                "UPDATE schedules SET paused = $2,
                     next_tick = CASE WHEN $2 = 0 THEN " NOW " ELSE next_tick END
                 WHERE id = $1"
            ),
            id,
            i64::from(paused)
        )
        .ctx(self, "set_schedule_paused")?;
        if n == 0 {
            return Err(StoreError::ScheduleNotFound {
                db: self.db.to_string(),
                id,
            });
        }
        Ok(())
    }

    /// Remove schedule `id` and its runs' record. The shop's watermark stays: a schedule
    /// added again for the shop goes on from it. A run still running finishes its job.
    pub async fn remove_schedule(&self, id: i64) -> Result<(), StoreError> {
        let mut tx = self.begin("remove_schedule: begin").await?;
        execute!(
            tx.on(),
            sql!("DELETE FROM schedule_runs WHERE schedule_id = $1"),
            id
        )
        .ctx(self, "remove_schedule: runs")?;
        let n = execute!(tx.on(), sql!("DELETE FROM schedules WHERE id = $1"), id)
            .ctx(self, "remove_schedule")?;
        if n == 0 {
            return Err(StoreError::ScheduleNotFound {
                db: self.db.to_string(),
                id,
            });
        }
        tx.commit().await.ctx(self, "remove_schedule: commit")?;
        Ok(())
    }

    /// Schedules not paused whose next tick is due at `now_ms`.
    pub(crate) async fn due_schedules(&self, now_ms: i64) -> Result<Vec<Schedule>, StoreError> {
        let mut c = self.conn("due_schedules").await?;
        let rows = fetch!(
            fetch_all as ScheduleRow,
            c.on(),
            sql!(
                "SELECT id, kind, platform, shop, every_ms, lag_ms, overlap_ms, on_overlap,
                        catch_up, lane, paused, next_tick
                 FROM schedules WHERE paused = 0 AND next_tick <= $1 ORDER BY next_tick, id"
            ),
            now_ms
        )
        .ctx(self, "due_schedules")?;
        rows.into_iter().map(|r| self.schedule_from(r)).collect()
    }

    /// The schedule's runs not settled yet: whether one is started (running), and the tick
    /// of a queued one.
    pub(crate) async fn open_runs(
        &self,
        schedule_id: i64,
    ) -> Result<(bool, Option<i64>), StoreError> {
        let mut c = self.conn("open_runs").await?;
        let rows = fetch!(
            fetch_all as (i64, String),
            c.on(),
            sql!(
                "SELECT tick, outcome FROM schedule_runs
                 WHERE schedule_id = $1 AND outcome IN ('started', 'queued') ORDER BY tick"
            ),
            schedule_id
        )
        .ctx(self, "open_runs")?;
        let running = rows.iter().any(|(_, o)| o == RunOutcome::Started.as_str());
        let queued = rows
            .iter()
            .find(|(_, o)| o == RunOutcome::Queued.as_str())
            .map(|(t, _)| *t);
        Ok((running, queued))
    }

    /// Orders of `shop` modified before this (unix ms) are in the ledger.
    pub(crate) async fn watermark(
        &self,
        platform: Platform,
        shop: &str,
    ) -> Result<Option<i64>, StoreError> {
        let mut c = self.conn("watermark").await?;
        let row = fetch!(
            fetch_optional as (i64,),
            c.on(),
            sql!("SELECT covered_to FROM sync_watermarks WHERE platform = $1 AND shop = $2"),
            platform.as_str(),
            shop
        )
        .ctx(self, "watermark")?;
        Ok(row.map(|(t,)| t))
    }

    /// Decide the ticks of `schedule` that were due while its next tick was `expected_ms`:
    /// move it to `next_ms`, record `decided` and, with `start`, create the run's job. `None`
    /// when another worker decided them first (nothing written); else the started job's id.
    pub(crate) async fn decide_ticks(
        &self,
        schedule_id: i64,
        expected_ms: i64,
        next_ms: i64,
        decided: &[(i64, RunOutcome, Option<String>)],
        start: Option<&StartRun>,
        kind: JobKind,
    ) -> Result<Option<Option<i64>>, StoreError> {
        let mut tx = self.begin("decide_ticks: begin").await?;
        let moved = execute!(
            tx.on(),
            sql!(
                "UPDATE schedules SET next_tick = $3
                 WHERE id = $1 AND next_tick = $2 AND paused = 0"
            ),
            schedule_id,
            expected_ms,
            next_ms
        )
        .ctx(self, "decide_ticks: move the next tick")?;
        if moved == 0 {
            return Ok(None);
        }
        for (tick, outcome, note) in decided {
            execute!(
                tx.on(),
                sql!(
                    "INSERT INTO schedule_runs (schedule_id, tick, outcome, note, decided_at)
                     VALUES ($1, $2, $3, $4, " NOW ")
                     ON CONFLICT (schedule_id, tick) DO NOTHING"
                ),
                schedule_id,
                *tick,
                outcome.as_str(),
                note.as_deref()
            )
            .ctx(self, "decide_ticks: record a tick")?;
        }
        let job = match start {
            Some(run) => Some(self.start_run_in(&mut tx, schedule_id, run, kind).await?),
            None => None,
        };
        tx.commit().await.ctx(self, "decide_ticks: commit")?;
        Ok(Some(job))
    }

    /// Start the queued run at `run.tick_ms`: `None` when it is no longer queued (another
    /// worker started it).
    pub(crate) async fn start_queued(
        &self,
        schedule_id: i64,
        run: &StartRun,
        kind: JobKind,
    ) -> Result<Option<i64>, StoreError> {
        let mut tx = self.begin("start_queued: begin").await?;
        let n = execute!(
            tx.on(),
            sql!(
                "DELETE FROM schedule_runs
                 WHERE schedule_id = $1 AND tick = $2 AND outcome = 'queued'"
            ),
            schedule_id,
            run.tick_ms
        )
        .ctx(self, "start_queued: take the queued run")?;
        if n == 0 {
            return Ok(None);
        }
        let job = self.start_run_in(&mut tx, schedule_id, run, kind).await?;
        tx.commit().await.ctx(self, "start_queued: commit")?;
        Ok(Some(job))
    }

    async fn start_run_in(
        &self,
        tx: &mut super::backend::Tx,
        schedule_id: i64,
        run: &StartRun,
        kind: JobKind,
    ) -> Result<i64, StoreError> {
        let job = self.insert_job(tx, kind, &run.spec_json, &run.keys).await?;
        execute!(
            tx.on(),
            sql!(
                "INSERT INTO schedule_runs
                     (schedule_id, tick, outcome, job_id, window_from, window_to, decided_at)
                 VALUES ($1, $2, 'started', $3, $4, $5, " NOW ")"
            ),
            schedule_id,
            run.tick_ms,
            job,
            run.window_ms.map(|w| w.0),
            run.window_ms.map(|w| w.1)
        )
        .ctx(self, "start_run: record the run")?;
        Ok(job)
    }

    /// Queued runs whose schedule has no run started: the oldest queued tick of each.
    pub(crate) async fn queued_runs_ready(&self) -> Result<Vec<(Schedule, i64)>, StoreError> {
        let mut c = self.conn("queued_runs_ready").await?;
        let rows = fetch!(
            fetch_all as (i64, i64),
            c.on(),
            sql!(
                "SELECT q.schedule_id, MIN(q.tick) FROM schedule_runs q
                 WHERE q.outcome = 'queued' AND NOT EXISTS (
                     SELECT 1 FROM schedule_runs r
                     WHERE r.schedule_id = q.schedule_id AND r.outcome = 'started')
                 GROUP BY q.schedule_id"
            )
        )
        .ctx(self, "queued_runs_ready")?;
        let mut out = Vec::with_capacity(rows.len());
        for (schedule_id, tick) in rows {
            if let Ok(schedule) = self.schedule(schedule_id).await {
                if !schedule.paused {
                    out.push((schedule, tick));
                }
            }
        }
        Ok(out)
    }

    /// Started runs whose job has finished: what [`Store::settle_run`] settles.
    pub(crate) async fn finished_runs(&self) -> Result<Vec<(Schedule, ScheduleRun)>, StoreError> {
        let mut c = self.conn("finished_runs").await?;
        // The run rows themselves: this runs every second in every worker, so one query, not
        // one per run (and never a schedule's whole history).
        let rows = fetch!(
            fetch_all as RunRow,
            c.on(),
            sql!(
                "SELECT r.schedule_id, r.tick, r.outcome, r.note, r.job_id, r.window_from,
                        r.window_to
                 FROM schedule_runs r JOIN jobs j ON j.id = r.job_id
                 WHERE r.outcome = 'started' AND j.status = 'finished'
                 ORDER BY r.schedule_id, r.tick"
            )
        )
        .ctx(self, "finished_runs")?;
        let mut out: Vec<(Schedule, ScheduleRun)> = Vec::with_capacity(rows.len());
        for row in rows {
            let run = self.run_from(row)?;
            let schedule = match out.last() {
                Some((s, _)) if s.id == run.schedule_id => s.clone(),
                _ => match self.schedule(run.schedule_id).await {
                    Ok(s) => s,
                    // Removed meanwhile: its job finishes, nothing to settle.
                    Err(StoreError::ScheduleNotFound { .. }) => continue,
                    Err(e) => return Err(e),
                },
            };
            out.push((schedule, run));
        }
        Ok(out)
    }

    /// Settle a started run whose job finished: `covered` when every item ended done or
    /// skipped (an order run then moves the shop's watermark to its window's end, if its
    /// window starts at or before the watermark: coverage stays contiguous), else `failed`.
    /// `None` when another worker settled it first.
    pub(crate) async fn settle_run(
        &self,
        schedule: &Schedule,
        run: &ScheduleRun,
    ) -> Result<Option<RunOutcome>, StoreError> {
        let Some(job) = run.job_id else {
            return Ok(None);
        };
        let mut tx = self.begin("settle_run: begin").await?;
        let (unfinished,) = fetch!(
            fetch_one as (i64,),
            tx.on(),
            sql!(
                "SELECT COUNT(*) FROM job_items
                 WHERE job_id = $1 AND status NOT IN ('done', 'skipped')"
            ),
            job
        )
        .ctx(self, "settle_run: count the job's items")?;
        let outcome = if unfinished == 0 {
            RunOutcome::Covered
        } else {
            RunOutcome::Failed
        };
        let note = (unfinished > 0).then(|| format!("{unfinished} item(s) of job {job} did not end done or skipped; the next run covers the window again"));
        let n = execute!(
            tx.on(),
            sql!(
                "UPDATE schedule_runs SET outcome = $3, note = COALESCE($4, note), settled_at = " NOW "
                 WHERE schedule_id = $1 AND tick = $2 AND outcome = 'started'"
            ),
            run.schedule_id,
            run.tick_ms,
            outcome.as_str(),
            note.as_deref()
        )
        .ctx(self, "settle_run: settle")?;
        if n == 0 {
            return Ok(None);
        }
        if let (RunOutcome::Covered, JobKind::Orders, Some((from, to))) =
            (outcome, schedule.kind, run.window_ms)
        {
            execute!(
                tx.on(),
                sql!(
                    "INSERT INTO sync_watermarks (platform, shop, covered_to, updated_at)
                     VALUES ($1, $2, $4, " NOW ")
                     ON CONFLICT (platform, shop) DO UPDATE
                     SET covered_to = excluded.covered_to, updated_at = excluded.updated_at
                     WHERE sync_watermarks.covered_to >= $3
                       AND sync_watermarks.covered_to < excluded.covered_to"
                ),
                schedule.platform.as_str(),
                &schedule.shop,
                from,
                to
            )
            .ctx(self, "settle_run: move the watermark")?;
        }
        tx.commit().await.ctx(self, "settle_run: commit")?;
        Ok(Some(outcome))
    }

    /// The newest `limit` runs of schedule `id`, newest first.
    pub async fn schedule_runs(
        &self,
        schedule_id: i64,
        limit: u32,
    ) -> Result<Vec<ScheduleRun>, StoreError> {
        let mut c = self.conn("schedule_runs").await?;
        let rows = fetch!(
            fetch_all as RunRow,
            c.on(),
            sql!(
                "SELECT schedule_id, tick, outcome, note, job_id, window_from, window_to
                 FROM schedule_runs WHERE schedule_id = $1 ORDER BY tick DESC LIMIT $2"
            ),
            schedule_id,
            i64::from(limit)
        )
        .ctx(self, "schedule_runs")?;
        rows.into_iter().map(|r| self.run_from(r)).collect()
    }

    /// Gaps in the covered windows of the shop's order schedule runs: `(end of the coverage
    /// before, start of the next window)` wherever a covered window starts after everything
    /// before it ended. Empty: coverage is contiguous. The query is the proof the guide
    /// shows (docs/guide/shops-and-schedules.md).
    pub async fn coverage_gaps(
        &self,
        platform: Platform,
        shop: &str,
    ) -> Result<Vec<(DateTime<Utc>, DateTime<Utc>)>, StoreError> {
        let mut c = self.conn("coverage_gaps").await?;
        let rows = fetch!(
            fetch_all as (i64, i64),
            c.on(),
            sql!(
                "SELECT covered_before, window_from FROM (
                     SELECT r.window_from,
                            MAX(r.window_to) OVER (ORDER BY r.window_from, r.tick
                                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS covered_before
                     FROM schedule_runs r JOIN schedules s ON s.id = r.schedule_id
                     WHERE s.kind = 'orders' AND s.platform = $1 AND s.shop = $2
                       AND r.outcome = 'covered') AS w
                 WHERE covered_before IS NOT NULL AND window_from > covered_before"
            ),
            platform.as_str(),
            shop
        )
        .ctx(self, "coverage_gaps")?;
        Ok(rows
            .into_iter()
            .map(|(a, b)| (from_ms(a), from_ms(b)))
            .collect())
    }
}

/// One schedule (`Some(id)`) or all of them, by id.
async fn sqlx_select_schedule(
    store: &Store,
    c: &mut super::backend::Pooled,
    id: Option<i64>,
) -> Result<Vec<Schedule>, StoreError> {
    let rows = fetch!(
        fetch_all as ScheduleRow,
        c.on(),
        sql!(
            "SELECT id, kind, platform, shop, every_ms, lag_ms, overlap_ms, on_overlap, catch_up,
                    lane, paused, next_tick
             FROM schedules WHERE CAST($1 AS BIGINT) IS NULL OR id = $1 ORDER BY id"
        ),
        id
    )
    .ctx(store, "schedules")?;
    rows.into_iter().map(|r| store.schedule_from(r)).collect()
}
