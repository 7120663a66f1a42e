//! `syncfleet db migrate`: create or upgrade the SQL ledger named by `--db`.

use super::{Cli, CliError};
use crate::store::{Backend, Store, StoreError};
use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum DbCommand {
    /// Apply the ledger migrations not yet applied to the database named by --db (a SQLite
    /// file is created if missing; a Postgres database too, when the role may create it);
    /// prints what it did and the connection settings (SQLite) or server version (Postgres).
    Migrate,
}

/// A missing ledger or one that is not the fleet's is the operator's input (exit 2).
impl From<crate::app::runtime::RuntimeError> for CliError {
    fn from(e: crate::app::runtime::RuntimeError) -> Self {
        if e.is_input_error() {
            CliError::input(e.to_string())
        } else {
            CliError::runtime(e.to_string())
        }
    }
}

/// Bad URLs and duplicate item keys are the caller's input (exit 2); the rest is runtime (1).
impl From<StoreError> for CliError {
    fn from(e: StoreError) -> Self {
        if e.is_input_error() {
            CliError::input(e.to_string())
        } else {
            CliError::runtime(e.to_string())
        }
    }
}

pub(crate) async fn run(cli: &Cli, cmd: &DbCommand) -> Result<(), CliError> {
    match cmd {
        DbCommand::Migrate => {
            let store = Store::connect(&cli.db).await?;
            let report = store.migrate().await?;
            let db = store.db_name();
            if report.applied.is_empty() {
                println!(
                    "{db}: up to date ({} migration(s) already applied)",
                    report.already_applied
                );
            } else {
                for (version, description) in &report.applied {
                    println!("{db}: applied migration {version} {description}");
                }
                println!(
                    "{db}: {} migration(s) applied, {} already in place",
                    report.applied.len(),
                    report.already_applied
                );
            }
            match store.backend() {
                Backend::Sqlite => {
                    let p = store.pragmas().await?;
                    let synchronous = match p.synchronous {
                        0 => "OFF",
                        1 => "NORMAL",
                        2 => "FULL",
                        3 => "EXTRA",
                        _ => "?",
                    };
                    println!(
                        "{db}: journal_mode={} synchronous={synchronous} busy_timeout={}ms foreign_keys={}",
                        p.journal_mode,
                        p.busy_timeout_ms,
                        if p.foreign_keys { "on" } else { "off" }
                    );
                }
                Backend::Postgres => {
                    println!("{db}: {}", store.server_version().await?);
                }
            }
            store.close().await;
            Ok(())
        }
    }
}
