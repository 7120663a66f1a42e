//! The PostgreSQL backend's own parts: opening a pool, creating the database for `db migrate`,
//! telling a missing ledger from a mistyped URL, and the error codes worth a retry.

use super::backend::Pool;
use super::pg_tls::{self, TlsDecision};
use super::{redact_url, Store, StoreError};
use sqlx::migrate::MigrateDatabase;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions, PgSslMode};
use sqlx::ConnectOptions;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

/// Connections per process. Workers hold one only for a statement or a short transaction;
/// 8 per process keeps a fleet of dozens under the server's default `max_connections` (100).
const MAX_CONNECTIONS: u32 = 8;

/// The server's bound on one statement (creating a 100k-item job is about a second).
const STATEMENT_TIMEOUT: &str = "60s";
/// The server's bound on a transaction left idle by its client.
const IDLE_IN_TRANSACTION_TIMEOUT: &str = "120s";

/// SQLSTATE `invalid_catalog_name`: the database named in the URL does not exist.
const NO_SUCH_DATABASE: &str = "3D000";

/// Open `postgres://...` (see [`Store::connect`]). With `create`, a database that does not
/// exist yet is created (what `db migrate` does on a fresh server); without it, a missing
/// database, or one without the ledger's tables, is [`StoreError::Missing`].
pub(super) async fn open(url: &str, create: bool) -> Result<Store, StoreError> {
    let shown = redact_url(url);
    let options = PgConnectOptions::from_str(url)
        .map_err(|e| StoreError::BadUrl {
            url: shown.clone(),
            reason: e.to_string(),
        })?
        .application_name("syncfleet")
        // The server ends a statement that runs too long and a transaction left open (a
        // client that vanished mid-transaction holds its locks until then), and probes an
        // idle connection so that a client gone without a word (a host lost, a half-open
        // connection) is noticed in about a minute, not the kernel's two hours. On this side
        // the runner bounds every ledger write (jobs::item::ledger_write): sqlx has no
        // client keepalive, so that bound is what ends a hang on a half-open connection.
        .options([
            ("statement_timeout", STATEMENT_TIMEOUT),
            (
                "idle_in_transaction_session_timeout",
                IDLE_IN_TRANSACTION_TIMEOUT,
            ),
            ("tcp_keepalives_idle", "30"),
            ("tcp_keepalives_interval", "10"),
            ("tcp_keepalives_count", "3"),
        ])
        // Creating a job of 100k items is one statement of about a second, by design: not a
        // warning for the operator (sqlx warns at 1 s by default).
        .log_slow_statements(log::LevelFilter::Info, Duration::from_secs(1));
    let named =
        pg_tls::url_names_mode(url) || std::env::var_os("PGSSLMODE").is_some_and(|v| !v.is_empty());
    let options = match pg_tls::decide(
        options.get_host(),
        options.get_socket().is_some(),
        named,
        options.get_ssl_mode(),
    ) {
        TlsDecision::VerifyFull => options.ssl_mode(PgSslMode::VerifyFull),
        TlsDecision::KeepUnverified => {
            tracing::warn!(
                db = %shown,
                "the ledger's sslmode does not verify the server: anyone on the path can read \
                 and change the ledger; use sslmode=verify-full (with sslrootcert=CA file)"
            );
            options
        }
        TlsDecision::Keep => options,
    };
    let db: Arc<str> = Arc::from(shown.as_str());
    let connect = || {
        PgPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options.clone())
    };
    // One connection first, outside the pool: a refused port or a wrong password is reported
    // as such at once (the pool would retry until its 30 s timeout, then say only that it
    // timed out).
    let pool = match first_connection(&options).await {
        Ok(()) => connect().await,
        Err(e) if is_code(&e, NO_SUCH_DATABASE) && create => {
            sqlx::Postgres::create_database(url)
                .await
                .map_err(|source| StoreError::Connect {
                    db: db.to_string(),
                    source,
                })?;
            connect().await
        }
        Err(e) if is_code(&e, NO_SUCH_DATABASE) => {
            return Err(StoreError::Missing { db: db.to_string() })
        }
        Err(e) => Err(e),
    }
    .map_err(|source| StoreError::Connect {
        db: db.to_string(),
        source,
    })?;
    let store = Store {
        pool: Pool::Postgres(pool),
        db,
        write_turn: Arc::default(),
    };
    if !create {
        let mut c = store.conn("inspect schema").await?;
        if !store.has_migrations_table(&mut c).await? {
            return Err(StoreError::Missing {
                db: store.db.to_string(),
            });
        }
    }
    Ok(store)
}

/// How long the first connection may take (TCP, TLS, authentication) before the open fails.
const FIRST_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Connect once and close: the server's own answer (refused, unknown database, bad password).
async fn first_connection(options: &PgConnectOptions) -> Result<(), sqlx::Error> {
    match tokio::time::timeout(FIRST_CONNECT_TIMEOUT, options.connect()).await {
        Ok(Ok(conn)) => {
            // Only the check's connection: an error closing it changes nothing.
            let _ = sqlx::Connection::close(conn).await;
            Ok(())
        }
        Ok(Err(e)) => Err(e),
        Err(_) => Err(sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no answer within {} s", FIRST_CONNECT_TIMEOUT.as_secs()),
        ))),
    }
}

fn is_code(e: &sqlx::Error, code: &str) -> bool {
    e.as_database_error()
        .and_then(|d| d.code())
        .is_some_and(|c| c == code)
}

/// SQLSTATE `serialization_failure` (40001) and `deadlock_detected` (40P01): the server
/// aborted this transaction so another could go on; running it again is the documented cure.
pub(super) fn is_retry_code(code: &str) -> bool {
    matches!(code, "40001" | "40P01")
}

/// SQLSTATEs of a server that cannot serve now: class 08 (connection exception),
/// `too_many_connections`, `query_canceled` (the statement timeout below), and the
/// shutdown / start-up states (`admin_shutdown`, `crash_shutdown`, `cannot_connect_now`).
pub(super) fn is_unavailable_code(code: &str) -> bool {
    code.starts_with("08") || matches!(code, "53300" | "57014" | "57P01" | "57P02" | "57P03")
}
