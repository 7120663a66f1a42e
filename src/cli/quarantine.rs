//! `syncfleet quarantine`: the records a platform sent that could not be read (an order
//! without a readable time or amount, a change message without a readable time), newest
//! first; `quarantine replay` reads them again (docs/design.md, "Quarantine").

use crate::cli::{Cli, CliError};
use crate::jobs::replay::replay_quarantine;
use crate::store::Store;
use clap::{Args, Subcommand};

/// Arguments of `syncfleet quarantine`.
#[derive(Debug, Args)]
pub struct QuarantineArgs {
    #[command(subcommand)]
    pub(crate) action: Option<QuarantineAction>,
    /// How many records.
    #[arg(long, default_value_t = 20)]
    pub(crate) limit: u32,
    /// Print each record's raw text as the platform sent it (capped at 4 KB).
    #[arg(long)]
    pub(crate) raw: bool,
}

/// What to do with the quarantine (nothing: list it).
#[derive(Debug, Subcommand)]
pub enum QuarantineAction {
    /// Read every quarantined record again with the adapters as they are now (after an
    /// upgrade, or once the platform fixed its data): those that read are taken into the
    /// ledger as they would have been and leave the quarantine; the rest stay.
    Replay {
        /// At most this many records, newest first.
        #[arg(long, default_value_t = 100_000)]
        limit: u32,
    },
}

pub(crate) async fn run(cli: &Cli, args: &QuarantineArgs) -> Result<(), CliError> {
    let store = Store::connect(&cli.db).await?;
    if let Some(QuarantineAction::Replay { limit }) = &args.action {
        let cfg = cli.load_config()?;
        let r = replay_quarantine(&store, &cfg, *limit).await?;
        println!(
            "quarantine replay: {} record(s) read and taken, {} still unreadable (kept)",
            r.taken, r.still_unreadable
        );
        return Ok(());
    }
    let rows = store.quarantined(args.limit).await?;
    if rows.is_empty() {
        println!("nothing quarantined");
    }
    for r in rows {
        let q = &r.record;
        println!(
            "{:<8} {:<8} {:<22} shop {:<12} seen {} time(s), last {}: {}",
            q.source,
            q.platform,
            q.record_id,
            if q.shop.is_empty() { "-" } else { &q.shop },
            r.seen,
            r.last_seen.format("%Y-%m-%d %H:%M:%S"),
            q.reason
        );
        if args.raw {
            println!("    {}", q.raw);
        }
    }
    Ok(())
}
