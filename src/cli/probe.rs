//! `syncfleet probe [--once]`: a fixed sample per (platform, API class) checking auth,
//! latency and required fields. `--once` probes and exits (1 when anything broke); without it
//! probes every `probe.interval_s` until Ctrl-C, and in a fleet (`--redis`) only the worker
//! holding the probe lease probes.

use super::{Cli, CliError};
use crate::link::probe::{run_probe_loop, run_probes};
use crate::link::Gateway;
use crate::throttle::DEFAULT_NAMESPACE;
use clap::Args;

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// Probe once, print one line per probe and exit (1 when any probe raised an alert).
    #[arg(long)]
    pub(crate) once: bool,
    /// Redis key namespace of gates and link state (separate fleets or tests on one Redis).
    #[arg(long, hide = true, env = "SYNCFLEET_GATE_NAMESPACE", default_value = DEFAULT_NAMESPACE)]
    pub(crate) namespace: String,
}

pub(crate) async fn run(cli: &Cli, args: &ProbeArgs) -> Result<(), CliError> {
    let cfg = cli.load_config()?;
    if cfg.platforms.is_empty() {
        return Err(CliError::input(format!(
            "{}: no [platforms.*] to probe",
            cfg.file.display()
        )));
    }
    let topology = cli.topology();
    let gates = topology.gates(&cfg, &args.namespace).await?;
    let fleet = topology
        .link(&args.namespace)
        .await
        .map_err(|e| CliError::runtime(e.to_string()))?;
    let gw = Gateway::from_config(&cfg, gates, fleet, None)
        .map_err(|e| CliError::input(e.to_string()))?;
    if args.once {
        let reports = run_probes(&gw, &cfg.probe).await;
        for r in &reports {
            println!("{}", r.line());
        }
        let failed = reports.iter().filter(|r| !r.ok()).count();
        return if failed == 0 {
            Ok(())
        } else {
            Err(CliError::runtime(format!(
                "{failed} of {} probes raised an alert",
                reports.len()
            )))
        };
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<crate::link::probe::ProbeReport>();
    let printer = tokio::spawn(async move {
        while let Some(r) = rx.recv().await {
            println!(
                "{} {}",
                crate::clock::Clock::system()
                    .utc()
                    .format("%Y-%m-%dT%H:%M:%SZ"),
                r.line()
            );
        }
    });
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    run_probe_loop(gw, cfg.probe.clone(), Some(tx), shutdown).await;
    let _ = printer.await;
    Ok(())
}
