//! `syncfleet hooks`: the completion hooks' deliveries, newest first; `hooks resend` sends
//! the given-up ones again (docs/design.md, "Completion hooks").

use crate::cli::{Cli, CliError};
use crate::store::Store;
use clap::{Args, Subcommand};

/// Arguments of `syncfleet hooks`.
#[derive(Debug, Args)]
pub struct HooksArgs {
    #[command(subcommand)]
    pub(crate) action: Option<HooksAction>,
    /// How many deliveries to list.
    #[arg(long, default_value_t = 20)]
    pub(crate) limit: u32,
}

/// What to do with the deliveries (default: list them).
#[derive(Debug, Subcommand)]
pub enum HooksAction {
    /// Send the deliveries that were given up (`failed`) again: pending from now, their
    /// attempts counted afresh; the workers send them on their next round.
    Resend {
        /// Only this job's deliveries (default: every job's).
        #[arg(long)]
        job: Option<i64>,
    },
}

pub(crate) async fn run(cli: &Cli, args: &HooksArgs) -> Result<(), CliError> {
    let store = Store::connect(&cli.db).await?;
    if let Some(HooksAction::Resend { job }) = args.action {
        let n = store.resend_failed_hooks(job).await?;
        match job {
            Some(job) => println!("{n} failed delivery(ies) of job {job} pending again"),
            None => println!("{n} failed delivery(ies) pending again"),
        }
        return Ok(());
    }
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
