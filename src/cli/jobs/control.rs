//! `syncfleet job pause | resume | cancel N`: an operator's control of one job. The ledger
//! holds the decision; every worker reads it before a task and while one runs
//! (docs/design.md, "Job control").

use crate::cli::{Cli, CliError};
use crate::store::{ControlAction, ControlChange, Store};
use clap::Subcommand;

/// The job control subcommands.
#[derive(Debug, Subcommand)]
pub enum JobCommand {
    /// Stop calling for a job: its tasks go back to the queue uncharged until it is resumed
    /// (items already calling finish). Every worker sees it within about a second.
    Pause {
        /// The job id (`syncfleet status` lists them).
        job: i64,
    },
    /// Let a paused job run again.
    Resume {
        /// The job id.
        job: i64,
    },
    /// End a job: its pending items end `cancelled` and nothing more is called for them
    /// (calls already on the wire finish). `retry` can still run its failed items again.
    Cancel {
        /// The job id.
        job: i64,
    },
}

pub(crate) async fn job(cli: &Cli, cmd: &JobCommand) -> Result<(), CliError> {
    let (job, action, done) = match cmd {
        JobCommand::Pause { job } => (*job, ControlAction::Pause, "paused"),
        JobCommand::Resume { job } => (*job, ControlAction::Resume, "resumed"),
        JobCommand::Cancel { job } => (*job, ControlAction::Cancel, "cancelled"),
    };
    let store = Store::connect(&cli.db).await?;
    match store.control_job(job, action).await? {
        ControlChange::Done { cancelled } if action == ControlAction::Cancel => {
            println!(
                "job {job}: cancelled; {cancelled} pending item(s) ended `cancelled` (one whose call was already on the wire ends as what the platform did: `done` if it made something)"
            );
        }
        ControlChange::Done { .. } => println!("job {job}: {done}"),
        ControlChange::Already => println!("job {job}: already {done}"),
        ControlChange::Finished => {
            return Err(CliError::input(format!(
                "job {job} has finished (or was cancelled): nothing to {}",
                match action {
                    ControlAction::Pause => "pause",
                    ControlAction::Resume => "resume",
                    ControlAction::Cancel => "cancel",
                }
            )));
        }
    }
    Ok(())
}
