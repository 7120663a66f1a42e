//! A real PostgreSQL for tests: a fresh database per test on the server named by
//! `TEST_POSTGRES_URL` (or `DATABASE_URL` when it is a postgres URL), dropped when the
//! `TestPg` is dropped. `scripts/test` sets the URL (it starts a private server when the
//! machine has none); the tests never pick a server on their own.

use sqlx::Connection;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

pub struct TestPg {
    /// URL of this test's own database.
    pub url: String,
    admin_url: String,
    name: String,
}

/// The server URL the tests may use to create databases.
pub fn server_url() -> String {
    for var in ["TEST_POSTGRES_URL", "DATABASE_URL"] {
        if let Ok(url) = std::env::var(var) {
            if url.starts_with("postgres://") || url.starts_with("postgresql://") {
                return url;
            }
        }
    }
    panic!(
        "the Postgres tests need TEST_POSTGRES_URL=postgres://USER@127.0.0.1:PORT/postgres \
         (scripts/test sets it, starting a private server when the machine has none)"
    );
}

/// The URL with its database path replaced by `db`.
pub fn with_database(url: &str, db: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (url, String::new()),
    };
    let scheme_end = base.find("://").map(|i| i + 3).unwrap_or(0);
    let host_end = base[scheme_end..]
        .find('/')
        .map(|i| scheme_end + i)
        .unwrap_or(base.len());
    format!("{}/{db}{query}", &base[..host_end])
}

impl TestPg {
    /// Create a new, empty database on the test server.
    pub async fn create() -> TestPg {
        TestPg::create_on(server_url()).await
    }

    /// Create a new, empty database on the TLS-only test server named by
    /// `TEST_POSTGRES_TLS_URL` (`scripts/postgres-for-tests --tls`, which `scripts/test` runs):
    /// its URL verifies the server (`sslmode=verify-full&sslrootcert=CA`).
    pub async fn create_tls() -> TestPg {
        let url = std::env::var("TEST_POSTGRES_TLS_URL").unwrap_or_else(|_| {
            panic!(
                "the ledger TLS tests need TEST_POSTGRES_TLS_URL (scripts/test sets it from \
                 scripts/postgres-for-tests --tls)"
            )
        });
        TestPg::create_on(url).await
    }

    async fn create_on(admin_url: String) -> TestPg {
        static N: AtomicU32 = AtomicU32::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let name = format!(
            "sftest_{}_{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed),
            nanos
        );
        let mut admin = sqlx::PgConnection::connect(&admin_url)
            .await
            .unwrap_or_else(|e| panic!("the test server does not answer: {e}"));
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut admin)
            .await
            .expect("create test database");
        let _ = admin.close().await;
        TestPg {
            url: with_database(&admin_url, &name),
            admin_url,
            name,
        }
    }
}

impl Drop for TestPg {
    /// Drop the database (forcing out connections a test left open). On a thread of its own:
    /// `Drop` may run inside a runtime, which must not be blocked on.
    fn drop(&mut self) {
        let admin_url = self.admin_url.clone();
        let name = self.name.clone();
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                if let Ok(mut admin) = sqlx::PgConnection::connect(&admin_url).await {
                    let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
                    )))
                    .execute(&mut admin)
                    .await;
                    let _ = admin.close().await;
                }
            });
        })
        .join();
    }
}
