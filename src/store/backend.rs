//! The two ledger backends behind one API: SQLite (embedded default, one host) and PostgreSQL
//! (a fleet across hosts). docs/design.md, "The ledger on two backends".
//!
//! Most statements are the same text on both: `$N` placeholders (sqlx's SQLite driver reads
//! them too), standard upserts, `RETURNING`, `COUNT(*) FILTER`. What differs is spelled once
//! per statement with [`sql!`]: the database clock (`NOW`), a bound JSON list of strings
//! expanded as a table (`[KEYS $n AS alias]`), or two whole texts where the dialects part
//! (`INSERT OR IGNORE` vs `ON CONFLICT DO NOTHING`). The macros below run one [`Sql`] on a
//! connection of either backend with the same binds, so each store method is written once.

use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, PgPool, Postgres, Sqlite, SqliteConnection, SqlitePool, Transaction};
use tokio::sync::OwnedMutexGuard;

/// Which database holds the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A SQLite file (or `sqlite::memory:`): one host, one writer at a time.
    Sqlite,
    /// A PostgreSQL database: workers on many hosts, concurrent writers.
    Postgres,
}

impl Backend {
    /// `sqlite` or `postgres`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

/// A connection pool of either backend.
#[derive(Clone, Debug)]
pub(crate) enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

impl Pool {
    pub(crate) fn backend(&self) -> Backend {
        match self {
            Pool::Sqlite(_) => Backend::Sqlite,
            Pool::Postgres(_) => Backend::Postgres,
        }
    }
}

/// One statement in both dialects (static text: nothing is ever built from data).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sql {
    pub(crate) sqlite: &'static str,
    pub(crate) postgres: &'static str,
}

/// A connection of either backend, borrowed for one statement.
pub(crate) enum Conn<'c> {
    Sqlite(&'c mut SqliteConnection),
    Postgres(&'c mut PgConnection),
}

/// A connection checked out of the pool.
pub(crate) enum Pooled {
    Sqlite(PoolConnection<Sqlite>),
    Postgres(PoolConnection<Postgres>),
}

impl Pooled {
    pub(crate) fn on(&mut self) -> Conn<'_> {
        match self {
            Pooled::Sqlite(c) => Conn::Sqlite(c),
            Pooled::Postgres(c) => Conn::Postgres(c),
        }
    }
}

/// An open transaction of either backend; dropped without [`Tx::commit`] it rolls back.
pub(crate) enum Tx {
    /// With this process's write turn, given up when the transaction ends ([`Store::begin`]).
    Sqlite(Transaction<'static, Sqlite>, OwnedMutexGuard<()>),
    Postgres(Transaction<'static, Postgres>),
}

impl Tx {
    pub(crate) fn on(&mut self) -> Conn<'_> {
        match self {
            Tx::Sqlite(t, _) => Conn::Sqlite(t),
            Tx::Postgres(t) => Conn::Postgres(t),
        }
    }

    pub(crate) async fn commit(self) -> Result<(), sqlx::Error> {
        match self {
            Tx::Sqlite(t, _turn) => t.commit().await,
            Tx::Postgres(t) => t.commit().await,
        }
    }
}

/// One statement in both dialects, from parts: string literals are the same on both; `NOW` is
/// the database clock in unix milliseconds; `[KEYS $n AS k]` is the JSON array of strings bound
/// as parameter `$n`, as a table `k` with one column `value`; `[PAIRS $n AS m]` the JSON array of
/// arrays bound as `$n`, as a table `m` whose `value` is one inner array (`m.value ->> 0`). `sql!(sqlite: "..", postgres:
/// "..")` gives two whole texts where the dialects part.
///
/// The clock: every instant the ledger writes (and every "how long ago" it compares) comes from
/// the database, not from the writing host, whose clocks disagree across a fleet. SQLite's
/// `'subsec'` needs 3.42+ (sqlx bundles a newer one); PostgreSQL's `clock_timestamp()` is the
/// statement's own instant, like SQLite's `'now'`, not the transaction's start.
macro_rules! sql {
    (sqlite: $lite:expr, postgres: $pg:expr $(,)?) => {
        $crate::store::backend::Sql { sqlite: $lite, postgres: $pg }
    };
    (@sqlite NOW) => { "CAST(unixepoch('subsec') * 1000 AS BIGINT)" };
    (@postgres NOW) => { "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)" };
    (@sqlite GREATEST) => { "MAX" };
    (@postgres GREATEST) => { "GREATEST" };
    (@sqlite [KEYS $n:literal AS $alias:ident]) => {
        concat!("json_each(", $n, ") AS ", stringify!($alias))
    };
    (@postgres [KEYS $n:literal AS $alias:ident]) => {
        concat!("json_array_elements_text(CAST(", $n, " AS json)) AS ", stringify!($alias), "(value)")
    };
    (@sqlite [PAIRS $n:literal AS $alias:ident]) => {
        concat!("json_each(", $n, ") AS ", stringify!($alias))
    };
    (@postgres [PAIRS $n:literal AS $alias:ident]) => {
        concat!("json_array_elements(CAST(", $n, " AS json)) AS ", stringify!($alias), "(value)")
    };
    (@sqlite $text:literal) => { $text };
    (@postgres $text:literal) => { $text };
    // After the `@` rules: they must never be read as parts.
    ($($part:tt)+) => {
        $crate::store::backend::Sql {
            sqlite: concat!($($crate::store::backend::sql!(@sqlite $part)),+),
            postgres: concat!($($crate::store::backend::sql!(@postgres $part)),+),
        }
    };
}
pub(crate) use sql;

/// Run a statement on a [`Conn`] with binds; `Result<u64 rows affected, sqlx::Error>`.
macro_rules! execute {
    ($conn:expr, $sql:expr $(, $arg:expr)* $(,)?) => {{
        let sql: $crate::store::backend::Sql = $sql;
        match $conn {
            $crate::store::backend::Conn::Sqlite(c) => sqlx::query(sql.sqlite)
                $(.bind($arg))*
                .execute(&mut *c)
                .await
                .map(|r| r.rows_affected()),
            $crate::store::backend::Conn::Postgres(c) => sqlx::query(sql.postgres)
                $(.bind($arg))*
                .execute(&mut *c)
                .await
                .map(|r| r.rows_affected()),
        }
    }};
}
pub(crate) use execute;

/// Run a query on a [`Conn`] with binds and decode rows as `$ty` (a tuple) with `$method`
/// (`fetch_one`, `fetch_optional`, `fetch_all`).
macro_rules! fetch {
    ($method:ident as $ty:ty, $conn:expr, $sql:expr $(, $arg:expr)* $(,)?) => {{
        let sql: $crate::store::backend::Sql = $sql;
        match $conn {
            $crate::store::backend::Conn::Sqlite(c) => sqlx::query_as::<_, $ty>(sql.sqlite)
                $(.bind($arg))*
                .$method(&mut *c)
                .await,
            $crate::store::backend::Conn::Postgres(c) => sqlx::query_as::<_, $ty>(sql.postgres)
                $(.bind($arg))*
                .$method(&mut *c)
                .await,
        }
    }};
}
pub(crate) use fetch;

/// [`fetch!`] for one column, decoded as `$ty`.
macro_rules! scalar {
    ($method:ident as $ty:ty, $conn:expr, $sql:expr $(, $arg:expr)* $(,)?) => {{
        let sql: $crate::store::backend::Sql = $sql;
        match $conn {
            $crate::store::backend::Conn::Sqlite(c) => sqlx::query_scalar::<_, $ty>(sql.sqlite)
                $(.bind($arg))*
                .$method(&mut *c)
                .await,
            $crate::store::backend::Conn::Postgres(c) => {
                sqlx::query_scalar::<_, $ty>(sql.postgres)
                    $(.bind($arg))*
                    .$method(&mut *c)
                    .await
            }
        }
    }};
}
pub(crate) use scalar;

#[cfg(test)]
mod tests {
    #[test]
    fn parts_expand_per_dialect() {
        let s = sql!("SELECT " NOW " FROM " [KEYS "$1" AS k] " WHERE x");
        assert_eq!(
            s.sqlite,
            "SELECT CAST(unixepoch('subsec') * 1000 AS BIGINT) FROM json_each($1) AS k WHERE x"
        );
        assert_eq!(
            s.postgres,
            "SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT) FROM \
             json_array_elements_text(CAST($1 AS json)) AS k(value) WHERE x"
        );
    }
}
