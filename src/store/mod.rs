//! The SQL ledger: jobs and items, orders and logistics events, call counts, gate changes,
//! the stale-response cache and the embedded-worker lock. ALL SQL of syncfleet lives here.
//!
//! The ledger is the source of truth; the queue is only transport. Every write that must be
//! all-or-nothing (a job with its items, a batch of outcomes, a batch of call counts) runs in
//! one transaction. Instants are stored as unix milliseconds (UTC), read from the database's
//! clock; the API speaks `chrono::DateTime<Utc>` and the crate's own `Platform` / `Api` /
//! `ErrorClass` types, never backend types.
//!
//! Two backends sit behind the same API, chosen by the URL: SQLite (`sqlite://PATH`, the
//! embedded default and the single-host choice) and PostgreSQL (`postgres://...`, a fleet
//! across hosts); see [`backend`] and docs/design.md, "The ledger on two backends".
//!
//! Open with [`Store::connect`], then [`Store::migrate`] (idempotent).

mod backend;
mod calls;
mod control;
mod fleet;
mod group_record;
mod hooks;
mod insight;
mod jobs;
mod listings;
mod lock;
mod messages;
mod orders;
mod outcomes;
mod pg_tls;
mod postgres;
mod quarantine;
mod retention;
mod schedules;
mod shop_directory;
mod shops;
mod sqlite;
mod tokens;
mod types;

pub use backend::Backend;
pub use calls::minute_key;
pub use control::{ControlAction, ControlChange};
pub use group_record::{GroupRecord, ListingsRecord};
pub use hooks::{ClaimedHook, HookDelivery, HookRecord};
pub(crate) use insight::FailureReason;
pub use listings::{Claim, ClaimRequest, Listed, ListingRoute};
pub(crate) use lock::EMBEDDED_LOCK_STALE_AFTER;
pub use messages::{MessageTally, ReceivedMessage};
pub use quarantine::{cap_raw, QuarantineRow, Quarantined};
pub use retention::Pruned;
pub(crate) use schedules::StartRun;
pub use schedules::{NewSchedule, Schedule, ScheduleRun, ScheduleView};
pub use shop_directory::{LedgerShop, NewLedgerShop, LEDGER_SOURCE};
pub use shops::ShopPause;
pub use sqlite::{Pragmas, BUSY_TIMEOUT};
pub use tokens::ShopToken;
pub use types::*;

use backend::{Pool, Pooled, Tx};
use chrono::{DateTime, Utc};
use std::sync::Arc;

/// A ledger failure. Messages name the database (password redacted) and what failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The URL is not one the store understands (exit code 2 for the CLI).
    #[error("bad database URL `{url}`: {reason}")]
    BadUrl {
        /// The URL as given, password redacted.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The database could not be opened or created.
    #[error("cannot open ledger database {db}: {source}")]
    Connect {
        /// The database (path, or URL with the password redacted).
        db: String,
        /// The driver's error.
        #[source]
        source: sqlx::Error,
    },
    /// Applying the migrations failed.
    #[error("migrating ledger database {db} failed: {reason}")]
    Migrate {
        /// The database (path, or URL with the password redacted).
        db: String,
        /// What failed.
        reason: String,
    },
    /// A query failed; `what` names the operation.
    #[error("ledger {db}: {what} failed: {source}")]
    Query {
        /// The database (path, or URL with the password redacted).
        db: String,
        /// The operation that failed.
        what: &'static str,
        /// The driver's error.
        #[source]
        source: sqlx::Error,
    },
    /// `create_job` got the same item key twice; nothing was written.
    #[error("ledger {db}: job not created: item key `{key}` appears more than once")]
    DuplicateItem {
        /// The database (path, or URL with the password redacted).
        db: String,
        /// The first key that appears twice.
        key: String,
    },
    /// The job does not exist.
    #[error("ledger {db}: no job {job_id}")]
    JobNotFound {
        /// The database (path, or URL with the password redacted).
        db: String,
        /// The job id asked for.
        job_id: i64,
    },
    /// A schedule of that kind already exists for the shop.
    #[error("ledger {db}: shop {shop} on {platform} already has a schedule of {kind} (#{id}); remove it first")]
    ScheduleExists {
        /// The database (path, or URL with the password redacted).
        db: String,
        /// The schedule's kind.
        kind: JobKind,
        /// The shop's platform.
        platform: crate::platform::Platform,
        /// The shop.
        shop: String,
        /// The existing schedule.
        id: i64,
    },
    /// The schedule does not exist.
    #[error("ledger {db}: no schedule {id}")]
    ScheduleNotFound {
        /// The database (path, or URL with the password redacted).
        db: String,
        /// The schedule id asked for.
        id: i64,
    },
    /// A stored value does not parse (written by something else, or a newer version).
    #[error("ledger {db}: unexpected value in {what}: {value}")]
    Corrupt {
        /// The database (path, or URL with the password redacted).
        db: String,
        /// The column (`table.column`) holding the value.
        what: &'static str,
        /// The value as stored.
        value: String,
    },
    /// The ledger does not exist (no SQLite file, no Postgres database, or a database without
    /// the ledger's tables): only `db migrate` creates one (a mistyped URL must not start an
    /// empty ledger beside the real one).
    #[error(
        "no ledger at {db}: create it with `syncfleet db migrate` (or fix --db / SYNCFLEET_DB)"
    )]
    Missing {
        /// The database (path, or URL with the password redacted).
        db: String,
    },
    /// Another process holds the embedded-worker lock.
    #[error("ledger {db}: {held}")]
    LockHeld {
        /// The database (path, or URL with the password redacted).
        db: String,
        /// Who holds the lock.
        held: HeldBy,
    },
    /// This process no longer holds the embedded-worker lock (taken over after going stale).
    #[error("ledger {db}: embedded-worker lock lost by `{holder}` (another process took it over)")]
    LockLost {
        /// The database (path, or URL with the password redacted).
        db: String,
        /// The holder name this process used.
        holder: String,
    },
    /// A statement did not answer within the client's bound (a stalled network path, a
    /// half-open connection the server's own timeout cannot see).
    #[error("ledger: {what} did not answer within {} s", .after.as_secs())]
    TimedOut {
        /// The operation.
        what: &'static str,
        /// The bound it passed.
        after: std::time::Duration,
    },
    /// The operation exists on the other backend only.
    #[error("ledger {db}: {what} is not available on {backend}")]
    Unsupported {
        /// The database (path, or URL with the password redacted).
        db: String,
        /// The operation asked for.
        what: &'static str,
        /// The backend that lacks it (`sqlite` or `postgres`).
        backend: &'static str,
    },
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
                | StoreError::ScheduleExists { .. }
                | StoreError::ScheduleNotFound { .. }
        )
    }

    /// True when another writer got in the way and the write is worth retrying as a whole:
    /// SQLite answered "busy"/"locked" (another process held the write lock past
    /// `busy_timeout`; its busy handler polls with growing sleeps, so one waiter can lose
    /// every race), or PostgreSQL aborted the transaction as a deadlock victim or a
    /// serialization failure.
    pub(crate) fn is_busy(&self) -> bool {
        let StoreError::Query {
            source: sqlx::Error::Database(db),
            ..
        } = self
        else {
            return false;
        };
        let Some(code) = db.code() else {
            return false;
        };
        // The codes of one backend mean something else on the other: ask the error's type.
        if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() {
            sqlite::is_busy_code(&code)
        } else {
            postgres::is_retry_code(&code)
        }
    }
}

impl StoreError {
    /// True when the ledger could not be reached or did not answer, rather than refusing the
    /// statement: the connection was refused, reset or timed out, the pool found no
    /// connection in time, the conversation broke off, the server is shutting down or starting, has no connection
    /// slot left, or cancelled the statement at its `statement_timeout`. Such a failure is
    /// waited out (docs/design.md, "A failing ledger"); others count as the task's failure.
    pub(crate) fn is_unavailable(&self) -> bool {
        let source = match self {
            StoreError::TimedOut { .. } => return true,
            StoreError::Query { source, .. } | StoreError::Connect { source, .. } => source,
            _ => return false,
        };
        match source {
            // A connection the peer closed mid-handshake reads as a protocol error (sqlx:
            // "unexpected response from SSLRequest: 0x00"): the next connection is fine.
            sqlx::Error::Io(_)
            | sqlx::Error::Protocol(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed => true,
            sqlx::Error::Database(db) => {
                db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_none()
                    && db.code().is_some_and(|c| postgres::is_unavailable_code(&c))
            }
            _ => false,
        }
    }
}

/// Handle to the ledger: a connection pool. Cheap to clone; share one per process.
#[derive(Clone)]
pub struct Store {
    pool: Pool,
    /// The database as shown in messages (path for SQLite files, URL without password).
    db: Arc<str>,
    /// This process's turn at SQLite's one write lock (unused on PostgreSQL): see
    /// [`Store::begin`].
    write_turn: Arc<tokio::sync::Mutex<()>>,
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

/// Saturating conversions between the API's unsigned counts and the ledger's i64.
pub(crate) fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
pub(crate) fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// A list of strings as one JSON array, bound as a single parameter and expanded in SQL as a
/// table (`[KEYS $n AS k]` in [`backend::sql!`]): one statement whatever the list length, and
/// no SQL text built from data.
pub(crate) fn json_list<S: AsRef<str>>(items: &[S]) -> String {
    let refs: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
    // Serializing a list of strings cannot fail.
    serde_json::to_string(&refs).unwrap_or_else(|_| "[]".to_string())
}

pub use crate::secret::redact_url;

impl Store {
    /// Open the ledger named by `url`, creating it when missing:
    /// - `sqlite://PATH` (`sqlite:PATH` and `sqlite:///ABS/PATH` work too) or
    ///   `sqlite::memory:` (private to this process). Every pooled connection gets WAL,
    ///   `synchronous=NORMAL`, `busy_timeout` 5 s and `foreign_keys=ON`.
    /// - `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE` (or `postgresql://`): the database
    ///   must exist; [`Store::migrate`] creates the tables.
    pub async fn connect(url: &str) -> Result<Store, StoreError> {
        Store::open(url, true).await
    }

    /// A migrated SQLite ledger in `dir`, for unit tests.
    #[cfg(test)]
    pub(crate) async fn scratch_sqlite(dir: &std::path::Path) -> Store {
        let url = format!("sqlite://{}", dir.join("ledger.db").display());
        let store = Store::connect(&url).await.expect("ledger");
        store.migrate().await.expect("migrate");
        store
    }

    /// Like [`Store::connect`], but a ledger that does not exist is refused with
    /// [`StoreError::Missing`] instead of created: every command but `db migrate` (and the
    /// demo, which makes its own) opens the ledger this way.
    pub async fn connect_existing(url: &str) -> Result<Store, StoreError> {
        Store::open(url, false).await
    }

    async fn open(url: &str, create: bool) -> Result<Store, StoreError> {
        if url.starts_with("sqlite:") {
            sqlite::open(url, create).await
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            postgres::open(url, create).await
        } else {
            let scheme = url.split(':').next().unwrap_or("");
            Err(StoreError::BadUrl {
                url: redact_url(url),
                reason: format!(
                    "unsupported scheme `{scheme}` (expected sqlite://PATH, sqlite::memory: \
                     or postgres://USER@HOST/DATABASE)"
                ),
            })
        }
    }

    /// The database as named in messages (path for SQLite files, URL without password).
    pub(crate) fn db_name(&self) -> &str {
        &self.db
    }

    /// Which database holds this ledger.
    pub fn backend(&self) -> Backend {
        self.pool.backend()
    }

    /// Close every pooled connection (waits for checked-out ones to come back).
    pub async fn close(&self) {
        match &self.pool {
            Pool::Sqlite(p) => p.close().await,
            Pool::Postgres(p) => p.close().await,
        }
    }

    /// A pooled connection for one or more statements outside a transaction.
    pub(crate) async fn conn(&self, what: &'static str) -> Result<Pooled, StoreError> {
        match &self.pool {
            Pool::Sqlite(p) => p.acquire().await.map(Pooled::Sqlite),
            Pool::Postgres(p) => p.acquire().await.map(Pooled::Postgres),
        }
        .ctx(self, what)
    }

    /// Begin a write transaction. SQLite: `BEGIN IMMEDIATE`, taking the write lock up front so
    /// `busy_timeout` applies (a deferred transaction upgrading to a writer fails at once with
    /// SQLITE_BUSY under WAL), after this process's turn: its writers queue on an async lock
    /// held until the transaction ends, and each begins the moment the one before it ends.
    /// Left to SQLite, a writer that finds the lock held sleeps in its busy handler (1, 2, 5,
    /// 10 ... 100 ms) however soon the lock is free: a one-millisecond group record waited up
    /// to 230 ms so (docs/design.md, "A job, from enqueue to the ledger"). Other processes
    /// on the same file still meet the busy handler. PostgreSQL: READ COMMITTED; row locks
    /// order the writers, and the job's pending count (`jobs.pending_items`) where a decision
    /// reads other transactions' rows.
    pub(crate) async fn begin(&self, what: &'static str) -> Result<Tx, StoreError> {
        match &self.pool {
            Pool::Sqlite(p) => {
                let turn = self.write_turn.clone().lock_owned().await;
                p.begin_with("BEGIN IMMEDIATE")
                    .await
                    .map(|t| Tx::Sqlite(t, turn))
            }
            Pool::Postgres(p) => p.begin().await.map(Tx::Postgres),
        }
        .ctx(self, what)
    }

    /// Apply the migrations of this backend (`migrations/sqlite/` or `migrations/postgres/`)
    /// that are not applied yet. Idempotent; on PostgreSQL, concurrent callers wait for each
    /// other (sqlx takes an advisory lock).
    pub async fn migrate(&self) -> Result<MigrateReport, StoreError> {
        let migrate_err = |reason: String| StoreError::Migrate {
            db: self.db.to_string(),
            reason,
        };
        let migrator = match &self.pool {
            Pool::Sqlite(p) => {
                sqlite::refuse_apalis_file(self, p).await?;
                sqlx::migrate!("./migrations/sqlite")
            }
            Pool::Postgres(_) => sqlx::migrate!("./migrations/postgres"),
        };
        let applied_before = self.applied_versions().await?;
        match &self.pool {
            Pool::Sqlite(p) => migrator.run(p).await,
            Pool::Postgres(p) => migrator.run(p).await,
        }
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

    /// Versions of the migrations applied so far (none on a new database).
    async fn applied_versions(&self) -> Result<Vec<i64>, StoreError> {
        let mut c = self.conn("migrate: inspect schema").await?;
        if !self.has_migrations_table(&mut c).await? {
            return Ok(Vec::new());
        }
        backend::scalar!(
            fetch_all as i64,
            c.on(),
            backend::sql!("SELECT version FROM _sqlx_migrations WHERE success")
        )
        .ctx(self, "migrate: list applied migrations")
    }

    /// True when the database has sqlx's migration table (it holds a ledger).
    async fn has_migrations_table(&self, c: &mut Pooled) -> Result<bool, StoreError> {
        let n = backend::scalar!(
            fetch_one as i64,
            c.on(),
            backend::sql!(
                sqlite: "SELECT COUNT(*) FROM sqlite_master
                         WHERE type = 'table' AND name = '_sqlx_migrations'",
                postgres: "SELECT COUNT(*) FROM information_schema.tables
                           WHERE table_schema = current_schema() AND table_name = '_sqlx_migrations'",
            )
        )
        .ctx(self, "migrate: inspect schema")?;
        Ok(n > 0)
    }

    /// The settings of one pooled connection (SQLite only).
    pub(crate) async fn pragmas(&self) -> Result<Pragmas, StoreError> {
        sqlite::pragmas(self, 1).await?.pop().ok_or_else(|| {
            // `pragmas(_, 1)` reads one connection or fails.
            StoreError::Unsupported {
                db: self.db.to_string(),
                what: "connection pragmas",
                backend: self.backend().as_str(),
            }
        })
    }

    /// The settings of `n` connections held at the same time (so the pool must open `n`
    /// distinct connections; `n` is capped at the pool size): proves the pragmas are per
    /// connection. SQLite only.
    pub async fn pragmas_per_connection(&self, n: usize) -> Result<Vec<Pragmas>, StoreError> {
        sqlite::pragmas(self, n).await
    }

    /// The server's version (`SELECT version()` on PostgreSQL, `sqlite_version()` on SQLite),
    /// for `db migrate` to print.
    pub(crate) async fn server_version(&self) -> Result<String, StoreError> {
        let mut c = self.conn("server version").await?;
        backend::scalar!(
            fetch_one as String,
            c.on(),
            backend::sql!(
                sqlite: "SELECT 'SQLite ' || sqlite_version()",
                postgres: "SELECT version()",
            )
        )
        .ctx(self, "server version")
    }
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
