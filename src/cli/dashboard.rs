//! `syncfleet dashboard`: parse, open the ledger and queue, serve.

use super::{Cli, CliError};
use crate::app::runtime::Runtime;
use crate::dashboard::{self, DashboardError};
use clap::Args;
use std::net::SocketAddr;

#[derive(Debug, Args)]
pub struct DashboardArgs {
    /// Address to serve the page on. Loopback unless --allow-remote.
    #[arg(long, default_value = "127.0.0.1:8088")]
    pub(crate) listen: SocketAddr,
    /// Serve on a non-loopback address (put it behind TLS; set the token).
    #[arg(long)]
    pub(crate) allow_remote: bool,
}

/// The token that enables actions (retry, re-queue dead letters, gate set).
pub(crate) const TOKEN_ENV: &str = "SYNCFLEET_DASHBOARD_TOKEN";

pub(crate) async fn run(cli: &Cli, args: &DashboardArgs) -> Result<(), CliError> {
    let cfg = cli.load_config()?;
    let rt = Runtime::open(cfg, &cli.db, cli.redis.as_deref()).await?;
    let token = std::env::var(TOKEN_ENV).ok();
    if token.is_none() {
        eprintln!("note: actions are disabled ({TOKEN_ENV} is not set); the page is read-only");
    }
    eprintln!("dashboard: http://{}/", args.listen);
    dashboard::serve(rt, args.listen, args.allow_remote, token)
        .await
        .map_err(|e| match e {
            DashboardError::NotLoopback { .. } | DashboardError::RemoteWithoutToken => {
                CliError::input(e.to_string())
            }
            DashboardError::Listen { .. } => CliError::input(e.to_string()),
            DashboardError::Serve(_) | DashboardError::Ledger(_) | DashboardError::Chart(_) => {
                CliError::runtime(e.to_string())
            }
        })
}
