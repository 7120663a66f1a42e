//! A fresh ledger on either backend, for tests written once and run on both: SQLite in a
//! temporary directory, or a fresh PostgreSQL database (see [`super::postgres`]).

use super::postgres::TestPg;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use syncfleet::store::Store;
use tempfile::TempDir;

/// Which backend a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Sqlite,
    Postgres,
}

/// A ledger that lives as long as this value (temp dir or database dropped after).
pub struct TestLedger {
    pub kind: Kind,
    /// The URL the binary and [`Store::connect`] take.
    pub url: String,
    _dir: Option<TempDir>,
    _pg: Option<TestPg>,
}

impl TestLedger {
    /// An empty ledger location (not migrated).
    pub async fn empty(kind: Kind) -> TestLedger {
        match kind {
            Kind::Sqlite => {
                let dir = tempfile::tempdir().expect("tempdir");
                let url = format!("sqlite://{}", dir.path().join("ledger.db").display());
                TestLedger {
                    kind,
                    url,
                    _dir: Some(dir),
                    _pg: None,
                }
            }
            Kind::Postgres => {
                let pg = TestPg::create().await;
                TestLedger {
                    kind,
                    url: pg.url.clone(),
                    _dir: None,
                    _pg: Some(pg),
                }
            }
        }
    }

    /// A migrated ledger and a store on it.
    pub async fn fresh(kind: Kind) -> (TestLedger, Store) {
        let ledger = TestLedger::empty(kind).await;
        let store = Store::connect(&ledger.url).await.expect("connect");
        store.migrate().await.expect("migrate");
        (ledger, store)
    }

    /// Plain SQL against the same database, as an operator would inspect it.
    pub async fn raw(&self) -> Raw {
        match self.kind {
            Kind::Sqlite => Raw::Sqlite(
                sqlx::SqlitePool::connect(&self.url)
                    .await
                    .expect("raw connect"),
            ),
            Kind::Postgres => {
                Raw::Postgres(sqlx::PgPool::connect(&self.url).await.expect("raw connect"))
            }
        }
    }

    /// The database clock in unix milliseconds, in this backend's SQL.
    pub fn now_ms_sql(&self) -> &'static str {
        match self.kind {
            Kind::Sqlite => "SELECT CAST(unixepoch('subsec') * 1000 AS BIGINT)",
            Kind::Postgres => "SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
        }
    }
}

/// A plain connection pool of either backend.
pub enum Raw {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

impl Raw {
    pub async fn execute(&self, sql: &str) {
        let q = sqlx::AssertSqlSafe(sql.to_string());
        match self {
            Raw::Sqlite(p) => sqlx::raw_sql(q).execute(p).await.map(|_| ()),
            Raw::Postgres(p) => sqlx::raw_sql(q).execute(p).await.map(|_| ()),
        }
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    /// One row of `sql`, decoded as `T` (a tuple), on either backend.
    pub async fn one<T>(&self, sql: &str) -> T
    where
        T: Send + Unpin + for<'r> sqlx::FromRow<'r, SqliteRow> + for<'r> sqlx::FromRow<'r, PgRow>,
    {
        let q = sqlx::AssertSqlSafe(sql.to_string());
        match self {
            Raw::Sqlite(p) => sqlx::query_as::<_, T>(q).fetch_one(p).await,
            Raw::Postgres(p) => sqlx::query_as::<_, T>(q).fetch_one(p).await,
        }
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// All rows of `sql`, decoded as `T`.
    pub async fn all<T>(&self, sql: &str) -> Vec<T>
    where
        T: Send + Unpin + for<'r> sqlx::FromRow<'r, SqliteRow> + for<'r> sqlx::FromRow<'r, PgRow>,
    {
        let q = sqlx::AssertSqlSafe(sql.to_string());
        match self {
            Raw::Sqlite(p) => sqlx::query_as::<_, T>(q).fetch_all(p).await,
            Raw::Postgres(p) => sqlx::query_as::<_, T>(q).fetch_all(p).await,
        }
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }
}

/// Run each named `async fn NAME(kind: Kind)` as two tests, `sqlite::NAME` and
/// `postgres::NAME`: one body, two backends.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),+ $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name($crate::support::ledger::Kind::Sqlite).await
                }
            )+
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name($crate::support::ledger::Kind::Postgres).await
                }
            )+
        }
    };
}
