//! The SQLite backend's own parts: opening a file with the pragmas every connection needs,
//! reading them back, refusing an apalis queue file, and SQLite's "busy" codes.

use super::backend::{Pool, Pooled};
use super::{redact_url, QueryCtx, Store, StoreError};
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

/// Connection settings read back from one pooled connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pragmas {
    /// `wal` for file databases (`memory` for in-memory ones).
    pub journal_mode: String,
    /// 0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA.
    pub synchronous: i64,
    /// `busy_timeout` in milliseconds (set to [`BUSY_TIMEOUT`] on open).
    pub busy_timeout_ms: i64,
    /// Whether foreign-key constraints are enforced (`PRAGMA foreign_keys`).
    pub foreign_keys: bool,
}

/// Open `sqlite:...` (see [`Store::connect`]). With `create` false, a file that does not exist
/// is [`StoreError::Missing`].
pub(super) async fn open(url: &str, create: bool) -> Result<Store, StoreError> {
    let bad = |reason: &str| StoreError::BadUrl {
        url: redact_url(url),
        reason: reason.to_string(),
    };
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
    Ok(Store {
        pool: Pool::Sqlite(pool),
        db,
        write_turn: Arc::default(),
    })
}

/// apalis-sqlite's `Jobs` table would collide with our `jobs` (SQLite names are
/// case-insensitive): the embedded queue needs its own file.
pub(super) async fn refuse_apalis_file(store: &Store, pool: &SqlitePool) -> Result<(), StoreError> {
    let apalis: Option<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'Workers'",
    )
    .fetch_optional(pool)
    .await
    .ctx(store, "migrate: inspect schema")?;
    match apalis {
        Some(_) => Err(StoreError::Migrate {
            db: store.db.to_string(),
            reason: "this file holds an apalis-sqlite queue (table `Workers`); \
                     the ledger and the embedded queue must use separate database files"
                .to_string(),
        }),
        None => Ok(()),
    }
}

/// SQLite's primary result codes SQLITE_BUSY (5) and SQLITE_LOCKED (6); extended codes keep
/// them in the low byte.
pub(super) fn is_busy_code(code: &str) -> bool {
    code.parse::<i64>().is_ok_and(|c| matches!(c & 0xff, 5 | 6))
}

/// The pragmas of `n` connections held at the same time (`n` capped at the pool size).
pub(super) async fn pragmas(store: &Store, n: usize) -> Result<Vec<Pragmas>, StoreError> {
    let Pool::Sqlite(pool) = &store.pool else {
        return Err(StoreError::Unsupported {
            db: store.db.to_string(),
            what: "connection pragmas",
            backend: store.backend().as_str(),
        });
    };
    let max = usize::try_from(pool.options().get_max_connections()).unwrap_or(1);
    let n = n.clamp(1, max);
    let mut held = Vec::with_capacity(n);
    for _ in 0..n {
        held.push(store.conn("acquire connection").await?);
    }
    let mut out = Vec::with_capacity(n);
    for conn in held.iter_mut() {
        let Pooled::Sqlite(conn) = conn else {
            continue;
        };
        out.push(read_pragmas(store, conn).await?);
    }
    Ok(out)
}

async fn read_pragmas(
    store: &Store,
    conn: &mut sqlx::SqliteConnection,
) -> Result<Pragmas, StoreError> {
    let journal_mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(&mut *conn)
        .await
        .ctx(store, "read pragma journal_mode")?;
    let synchronous: i64 = sqlx::query_scalar("PRAGMA synchronous")
        .fetch_one(&mut *conn)
        .await
        .ctx(store, "read pragma synchronous")?;
    let busy_timeout_ms: i64 = sqlx::query_scalar("PRAGMA busy_timeout")
        .fetch_one(&mut *conn)
        .await
        .ctx(store, "read pragma busy_timeout")?;
    let foreign_keys: i64 = sqlx::query_scalar("PRAGMA foreign_keys")
        .fetch_one(&mut *conn)
        .await
        .ctx(store, "read pragma foreign_keys")?;
    Ok(Pragmas {
        journal_mode,
        synchronous,
        busy_timeout_ms,
        foreign_keys: foreign_keys == 1,
    })
}
