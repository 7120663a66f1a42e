//! The ledger on a PostgreSQL server that accepts TCP only over TLS, with a certificate from a
//! CA of the test run's own (`scripts/postgres-for-tests --tls`): with `sslmode=verify-full`
//! and that CA the ledger opens, migrates and its connections are encrypted; trusting another
//! CA it refuses the server; without TLS the server refuses it. The binary takes the same path.

use crate::support::postgres::TestPg;
use crate::support::tls::TestCa;
use std::process::{Command, Stdio};
use syncfleet::store::Store;

fn with_root(url: &str, ca: &std::path::Path) -> String {
    let (base, query) = url.split_once('?').expect("the TLS URL has a query");
    let kept: Vec<&str> = query
        .split('&')
        .filter(|p| !p.starts_with("sslrootcert="))
        .collect();
    format!("{base}?{}&sslrootcert={}", kept.join("&"), ca.display())
}

fn syncfleet(db: &str, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_syncfleet"))
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("SYNCFLEET_DB")
        .env_remove("SYNCFLEET_REDIS_URL")
        .env_remove("PGSSLMODE")
        .env_remove("PGSSLROOTCERT")
        .stdin(Stdio::null())
        .output()
        .expect("run syncfleet")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_verifies_its_postgres_server() {
    let pg = TestPg::create_tls().await;
    assert!(pg.url.contains("sslmode=verify-full"), "{}", pg.url);

    // Verified: the ledger opens and migrates, and its connections are encrypted.
    let store = Store::connect(&pg.url)
        .await
        .expect("open the ledger over TLS");
    store.migrate().await.expect("migrate over TLS");
    let mut probe = <sqlx::PgConnection as sqlx::Connection>::connect(&pg.url)
        .await
        .expect("probe connection");
    let (encrypted, all): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE s.ssl), count(*) FROM pg_stat_activity a \
         JOIN pg_stat_ssl s USING (pid) WHERE a.application_name = 'syncfleet'",
    )
    .fetch_one(&mut probe)
    .await
    .expect("read pg_stat_ssl");
    assert!(all > 0, "the ledger holds no connection");
    assert_eq!(encrypted, all, "a ledger connection is not encrypted");
    drop(store);

    // Trusting another CA: the server's certificate is refused, before any query.
    let stranger = TestCa::new();
    let other = with_root(&pg.url, &stranger.ca);
    let err = match Store::connect(&other).await {
        Ok(_) => panic!("a server signed by an unknown CA was believed"),
        Err(e) => format!("{e:#}"),
    };
    println!("another CA: {err}");
    assert!(err.to_lowercase().contains("certificate"), "{err}");

    // Without TLS the server lets nobody in.
    let plain = pg.url.replace("sslmode=verify-full", "sslmode=disable");
    assert!(Store::connect(&plain).await.is_err(), "cleartext accepted");

    // The binary: `db migrate` verifies the server the same way.
    let ok = syncfleet(&pg.url, &["db", "migrate"]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let refused = syncfleet(&other, &["db", "migrate"]);
    let text = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{text}");
    assert!(text.to_lowercase().contains("certificate"), "{text}");
}
