//! `syncfleet sim`: the platform simulator on a local listener.

use super::CliError;
use crate::sim::{self, DrillPatch, SimConfig};
use clap::Args;
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct SimArgs {
    /// Address to listen on (port 0 picks a free port; the bound address is printed).
    #[arg(long, env = "SYNCFLEET_SIM_LISTEN", default_value = "127.0.0.1:7800")]
    pub(crate) listen: SocketAddr,
    /// The simulator's own config (apps, data, limits). Absent file: the built-in demo.
    #[arg(long, default_value = "config/sim.toml")]
    pub(crate) sim_config: PathBuf,
    /// Drill: latency added to every call, in ms.
    #[arg(long)]
    pub(crate) latency_ms: Option<u64>,
    /// Drill: share of calls answered with a Retry-class error (0..=1).
    #[arg(long)]
    pub(crate) error_ratio: Option<f64>,
    /// Drill: every call fails Retry-class.
    #[arg(long)]
    pub(crate) outage: bool,
    /// Drill: requests on connections idle longer than this many seconds are never answered.
    #[arg(long)]
    pub(crate) idle_close_s: Option<u64>,
    /// Drill: answer this field empty (title, price, num or a platform field name).
    #[arg(long)]
    pub(crate) empty_field: Option<String>,
    /// Drill: every call gets the platform's session error.
    #[arg(long)]
    pub(crate) expired_session: bool,
}

pub(crate) async fn run(args: &SimArgs) -> Result<(), CliError> {
    let mut cfg = if args.sim_config.exists() {
        SimConfig::load(&args.sim_config)?
    } else if args.sim_config == std::path::Path::new("config/sim.toml") {
        tracing::warn!("config/sim.toml not found: using the built-in demo configuration");
        SimConfig::demo()
    } else {
        return Err(CliError::input(format!(
            "{}: simulator config file not found",
            args.sim_config.display()
        )));
    };
    let patch = DrillPatch {
        latency_ms: args.latency_ms,
        error_ratio: args.error_ratio,
        outage: args.outage.then_some(true),
        idle_close_s: args.idle_close_s,
        empty_field: args.empty_field.clone(),
        expired_session: args.expired_session.then_some(true),
        ..Default::default()
    };
    cfg.drill = patch
        .apply(&cfg.drill)
        .map_err(|e| CliError::input(format!("drill flags: {e}")))?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| CliError::runtime(format!("cannot listen on {}: {e}", args.listen)))?;
    let addr = listener
        .local_addr()
        .map_err(|e| CliError::runtime(format!("cannot read the bound address: {e}")))?;
    // The first stdout line names the address: scripts and the load generator read it.
    println!("sim listening on {addr}");
    for app in &cfg.apps {
        tracing::info!(platform = %app.platform, app_key = %app.app_key, "sim app");
    }
    if cfg.drill.any() {
        tracing::info!(drill = ?cfg.drill, "sim drills at start");
    }
    sim::serve(cfg, listener, shutdown_signal())
        .await
        .map_err(|e| CliError::runtime(e.to_string()))?;
    Ok(())
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
