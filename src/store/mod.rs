//! The SQL ledger: jobs and items, orders and logistics events, call counts, gate changes,
//! the stale-response cache and the embedded-worker lock. ALL SQL of syncfleet lives here.
//!
//! The ledger is the source of truth; the queue is only transport. Every write that must be
//! all-or-nothing (a job with its items, a batch of outcomes, a batch of call counts) runs in
//! one transaction. Instants are stored as unix milliseconds (UTC); the API speaks
//! `chrono::DateTime<Utc>` and the crate's own `Platform` / `Api` / `ErrorClass` types, never
//! backend types, so a Postgres backend can sit behind the same signatures later.
//!
//! Open with [`Store::connect`], then [`Store::migrate`] (idempotent).

mod calls;
mod fleet;
mod insight;
mod jobs;
mod lock;
mod orders;
mod types;

pub use calls::minute_key;
pub use fleet::DEAD_CLASS;
pub use insight::FailureReason;
pub use lock::EMBEDDED_LOCK_STALE_AFTER;
pub use types::*;

use chrono::{DateTime, Utc};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

/// How long a connection waits on a locked database before failing (SQLite `busy_timeout`).
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Pool size for file databases. SQLite has one writer at a time; readers run in parallel (WAL).
const MAX_CONNECTIONS: u32 = 8;

/// A ledger failure. Messages name the database (password redacted) and what failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The URL is not one the store understands (exit code 2 for the CLI).
    #[error("bad database URL `{url}`: {reason}")]
    BadUrl { url: String, reason: String },
    /// The database could not be opened or created.
    #[error("cannot open ledger database {db}: {source}")]
    Connect {
        db: String,
        #[source]
        source: sqlx::Error,
    },
    /// Applying the migrations failed.
    #[error("migrating ledger database {db} failed: {reason}")]
    Migrate { db: String, reason: String },
    /// A query failed; `what` names the operation.
    #[error("ledger {db}: {what} failed: {source}")]
    Query {
        db: String,
        what: &'static str,
        #[source]
        source: sqlx::Error,
    },
    /// `create_job` got the same item key twice; nothing was written.
    #[error("ledger {db}: job not created: item key `{key}` appears more than once")]
    DuplicateItem { db: String, key: String },
    /// The job does not exist.
    #[error("ledger {db}: no job {job_id}")]
    JobNotFound { db: String, job_id: i64 },
    /// A stored value does not parse (written by something else, or a newer version).
    #[error("ledger {db}: unexpected value in {what}: {value}")]
    Corrupt {
        db: String,
        what: &'static str,
        value: String,
    },
    /// The ledger file does not exist: only `db migrate` creates one (a mistyped path must
    /// not start an empty ledger beside the real one).
    #[error(
        "no ledger at {db}: create it with `syncfleet db migrate` (or fix --db / SYNCFLEET_DB)"
    )]
    Missing { db: String },
    /// Another process holds the embedded-worker lock.
    #[error("ledger {db}: {held}")]
    LockHeld { db: String, held: HeldBy },
    /// This process no longer holds the embedded-worker lock (taken over after going stale).
    #[error("ledger {db}: embedded-worker lock lost by `{holder}` (another process took it over)")]
    LockLost { db: String, holder: String },
}

impl StoreError {
    /// True for errors caused by the caller's input (bad URL, duplicate item keys, a job id
    /// that does not exist): exit 2.
    pub fn is_input_error(&self) -> bool {
        matches!(
            self,
            StoreError::BadUrl { .. }
                | StoreError::Missing { .. }
                | StoreError::DuplicateItem { .. }
                | StoreError::JobNotFound { .. }
        )
    }

    /// True when SQLite answered "busy"/"locked": another process held the write lock past
    /// `busy_timeout`. SQLite's busy handler polls with growing sleeps, so with several worker
    /// processes writing, one waiter can lose every race for the whole timeout; the write is
    /// worth retrying.
    pub fn is_busy(&self) -> bool {
        let StoreError::Query {
            source: sqlx::Error::Database(db),
            ..
        } = self
        else {
            return false;
        };
        // Primary result codes SQLITE_BUSY (5) and SQLITE_LOCKED (6); extended codes keep
        // them in the low byte.
        db.code()
            .and_then(|c| c.parse::<i64>().ok())
            .is_some_and(|c| matches!(c & 0xff, 5 | 6))
    }
}

/// Handle to the ledger: a connection pool. Cheap to clone; share one per process.
#[derive(Clone)]
pub struct Store {
    pool: SqlitePool,
    /// The database as shown in messages (URL with any password removed).
    db: Arc<str>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("db", &self.db).finish()
    }
}

/// What [`Store::migrate`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrateReport {
    /// Migrations applied by this call: (version, description).
    pub applied: Vec<(i64, String)>,
    /// Migrations that were already in place.
    pub already_applied: usize,
}

/// Connection settings read back from one pooled connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pragmas {
    /// `wal` for file databases (`memory` for in-memory ones).
    pub journal_mode: String,
    /// 0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA.
    pub synchronous: i64,
    pub busy_timeout_ms: i64,
    pub foreign_keys: bool,
}

/// Convert a sqlx error into a [`StoreError::Query`] naming the operation.
pub(crate) trait QueryCtx<T> {
    fn ctx(self, store: &Store, what: &'static str) -> Result<T, StoreError>;
}

impl<T> QueryCtx<T> for Result<T, sqlx::Error> {
    fn ctx(self, store: &Store, what: &'static str) -> Result<T, StoreError> {
        self.map_err(|source| StoreError::Query {
            db: store.db.to_string(),
            what,
            source,
        })
    }
}

/// Unix milliseconds of an instant (the ledger's time representation).
pub(crate) fn to_ms(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

/// The instant of stored unix milliseconds.
pub(crate) fn from_ms(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

/// Saturating conversions between the API's unsigned counts and SQLite's i64.
pub(crate) fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
pub(crate) fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// A list of strings as one JSON array, bound as a single parameter and expanded in SQL with
/// `json_each`: one statement whatever the list length, and no SQL text built from data.
pub(crate) fn json_list<S: AsRef<str>>(items: &[S]) -> String {
    let refs: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
    // Serializing a list of strings cannot fail.
    serde_json::to_string(&refs).unwrap_or_else(|_| "[]".to_string())
}

pub use crate::secret::redact_url;

impl Store {
    /// Open the ledger named by `url`: `sqlite://PATH` (created if missing; `sqlite:PATH` and
    /// `sqlite:///ABS/PATH` work too) or `sqlite::memory:` (private to this process).
    ///
    /// Every pooled connection gets WAL, `synchronous=NORMAL`, `busy_timeout` 5 s and
    /// `foreign_keys=ON` (set at connect time, so no connection is ever without them).
    pub async fn connect(url: &str) -> Result<Store, StoreError> {
        Store::open(url, true).await
    }

    /// Like [`Store::connect`], but a ledger file that does not exist is refused with
    /// [`StoreError::Missing`] instead of created: every command but `db migrate` (and the
    /// demo, which makes its own) opens the ledger this way.
    pub async fn connect_existing(url: &str) -> Result<Store, StoreError> {
        Store::open(url, false).await
    }

    async fn open(url: &str, create: bool) -> Result<Store, StoreError> {
        let bad = |reason: &str| StoreError::BadUrl {
            url: redact_url(url),
            reason: reason.to_string(),
        };
        if !url.starts_with("sqlite:") {
            let scheme = url.split(':').next().unwrap_or("");
            return Err(bad(&format!(
                "unsupported scheme `{scheme}` (expected sqlite://PATH or sqlite::memory:)"
            )));
        }
        let rest = url
            .trim_start_matches("sqlite://")
            .trim_start_matches("sqlite:");
        if rest.is_empty() || rest.starts_with('?') {
            return Err(bad("no database path (expected sqlite://PATH)"));
        }
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|e| bad(&e.to_string()))?
            .create_if_missing(create)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true);
        let in_memory = rest.starts_with(":memory:") || url.contains("mode=memory");
        if !create && !in_memory && !options.get_filename().exists() {
            return Err(StoreError::Missing {
                db: options.get_filename().display().to_string(),
            });
        }
        let db: Arc<str> = if in_memory {
            Arc::from(url)
        } else {
            Arc::from(options.get_filename().display().to_string())
        };
        // An in-memory database lives as long as one of its connections and shared-cache
        // connections fail with "table is locked" instead of waiting: use exactly one, forever.
        let pool_options = if in_memory {
            SqlitePoolOptions::new()
                .max_connections(1)
                .min_connections(1)
                .idle_timeout(None)
                .max_lifetime(None)
        } else {
            SqlitePoolOptions::new().max_connections(MAX_CONNECTIONS)
        };
        let pool = pool_options
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options)
            .await
            .map_err(|source| StoreError::Connect {
                db: db.to_string(),
                source,
            })?;
        Ok(Store { pool, db })
    }

    /// The database as named in messages (path for SQLite files).
    pub fn db_name(&self) -> &str {
        &self.db
    }

    /// Close every pooled connection (waits for checked-out ones to come back).
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Apply the migrations under `migrations/` that are not applied yet. Idempotent.
    pub async fn migrate(&self) -> Result<MigrateReport, StoreError> {
        let migrate_err = |reason: String| StoreError::Migrate {
            db: self.db.to_string(),
            reason,
        };
        // apalis-sqlite's `Jobs` table would collide with our `jobs` (SQLite names are
        // case-insensitive): the embedded queue needs its own file.
        let apalis: Option<String> = sqlx::query_scalar(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'Workers'",
        )
        .fetch_optional(&self.pool)
        .await
        .ctx(self, "migrate: inspect schema")?;
        if apalis.is_some() {
            return Err(migrate_err(
                "this file holds an apalis-sqlite queue (table `Workers`); \
                 the ledger and the embedded queue must use separate database files"
                    .to_string(),
            ));
        }
        let migrator = sqlx::migrate!("./migrations");
        let applied_before = self.applied_versions().await?;
        migrator
            .run(&self.pool)
            .await
            .map_err(|e| migrate_err(e.to_string()))?;
        let mut report = MigrateReport {
            applied: Vec::new(),
            already_applied: 0,
        };
        for m in migrator.iter() {
            if applied_before.contains(&m.version) {
                report.already_applied += 1;
            } else {
                report.applied.push((m.version, m.description.to_string()));
            }
        }
        Ok(report)
    }

    async fn applied_versions(&self) -> Result<Vec<i64>, StoreError> {
        let exists: Option<String> = sqlx::query_scalar(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
        )
        .fetch_optional(&self.pool)
        .await
        .ctx(self, "migrate: inspect schema")?;
        if exists.is_none() {
            return Ok(Vec::new());
        }
        sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success = 1")
            .fetch_all(&self.pool)
            .await
            .ctx(self, "migrate: list applied migrations")
    }

    /// The settings of one pooled connection.
    pub async fn pragmas(&self) -> Result<Pragmas, StoreError> {
        let mut conn = self.pool.acquire().await.ctx(self, "acquire connection")?;
        read_pragmas(self, &mut conn).await
    }

    /// The settings of `n` connections held at the same time (so the pool must open `n`
    /// distinct connections; `n` is capped at the pool size): proves the pragmas are per
    /// connection.
    pub async fn pragmas_per_connection(&self, n: usize) -> Result<Vec<Pragmas>, StoreError> {
        let max = usize::try_from(self.pool.options().get_max_connections()).unwrap_or(1);
        let n = n.min(max);
        let mut held = Vec::with_capacity(n);
        for _ in 0..n {
            held.push(self.pool.acquire().await.ctx(self, "acquire connection")?);
        }
        let mut out = Vec::with_capacity(n);
        for conn in held.iter_mut() {
            out.push(read_pragmas(self, conn).await?);
        }
        Ok(out)
    }
}

async fn read_pragmas(
    store: &Store,
    conn: &mut sqlx::pool::PoolConnection<sqlx::Sqlite>,
) -> Result<Pragmas, StoreError> {
    let journal_mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(&mut **conn)
        .await
        .ctx(store, "read pragma journal_mode")?;
    let synchronous: i64 = sqlx::query_scalar("PRAGMA synchronous")
        .fetch_one(&mut **conn)
        .await
        .ctx(store, "read pragma synchronous")?;
    let busy_timeout_ms: i64 = sqlx::query_scalar("PRAGMA busy_timeout")
        .fetch_one(&mut **conn)
        .await
        .ctx(store, "read pragma busy_timeout")?;
    let foreign_keys: i64 = sqlx::query_scalar("PRAGMA foreign_keys")
        .fetch_one(&mut **conn)
        .await
        .ctx(store, "read pragma foreign_keys")?;
    Ok(Pragmas {
        journal_mode,
        synchronous,
        busy_timeout_ms,
        foreign_keys: foreign_keys == 1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_passwords_only() {
        assert_eq!(
            redact_url("postgres://app:s3cret@db.local:5432/ledger"),
            "postgres://app:***@db.local:5432/ledger"
        );
        assert_eq!(redact_url("sqlite://syncfleet.db"), "sqlite://syncfleet.db");
    }

    #[test]
    fn json_list_escapes() {
        assert_eq!(json_list(&["a\"b", "c"]), r#"["a\"b","c"]"#);
    }
}
