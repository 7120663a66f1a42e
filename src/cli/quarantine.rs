//! `syncfleet quarantine`: the records a platform sent that could not be read (an order
//! without a readable time or amount, a change message without a readable time), newest
//! first (docs/design.md, "Quarantine").

use crate::cli::{Cli, CliError};
use crate::store::Store;
use clap::Args;

/// Arguments of `syncfleet quarantine`.
#[derive(Debug, Args)]
pub struct QuarantineArgs {
    /// How many records.
    #[arg(long, default_value_t = 20)]
    pub(crate) limit: u32,
    /// Print each record's raw text as the platform sent it (capped at 4 KB).
    #[arg(long)]
    pub(crate) raw: bool,
}

pub(crate) async fn run(cli: &Cli, args: &QuarantineArgs) -> Result<(), CliError> {
    let store = Store::connect(&cli.db).await?;
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
