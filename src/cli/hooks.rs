//! `syncfleet hooks`: the completion hooks' deliveries, newest first (docs/design.md,
//! "Completion hooks").

use crate::cli::{Cli, CliError};
use crate::store::Store;
use clap::Args;

/// Arguments of `syncfleet hooks`.
#[derive(Debug, Args)]
pub struct HooksArgs {
    /// How many deliveries.
    #[arg(long, default_value_t = 20)]
    pub(crate) limit: u32,
}

pub(crate) async fn run(cli: &Cli, args: &HooksArgs) -> Result<(), CliError> {
    let store = Store::connect(&cli.db).await?;
    let all = store.hook_deliveries(args.limit).await?;
    if all.is_empty() {
        println!("no completion hook deliveries (set [hooks] url and secret_env; workers send one per finished job)");
    }
    for h in all {
        println!(
            "{:<28} job {:<6} {:<9} attempts {:<3} {}{}",
            h.delivery.delivery_id(),
            h.delivery.job_id,
            h.state,
            h.delivery.attempts,
            h.delivered_at
                .map(|t| format!("delivered {}", t.format("%Y-%m-%d %H:%M:%S")))
                .unwrap_or_default(),
            h.last_error
                .map(|e| format!("  last error: {e}"))
                .unwrap_or_default()
        );
    }
    Ok(())
}
