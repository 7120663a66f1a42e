//! Gate benchmarks and the load generator of the multi-process gate tests (BENCHMARKS.md,
//! "Gates"; tests/processes/gate_processes.rs spawns `gatebench hammer --worker`).
//!
//! ```text
//! scripts/bench gatebench --redis URL hammer [--processes 1,2,4,8] [--baseline] [--sim] [--sim-limit N]
//! scripts/bench gatebench --redis URL hammer --worker ...   # one worker: prints its admissions
//! scripts/bench gatebench [--redis URL] sim-bench [--limit 100] [--factor 2]
//! ```
//!
//! `hammer` acquires from one gate with `--concurrency` tasks per process; as a spawner it
//! starts N worker processes of itself on a shared wall-clock instant and prints a table
//! (acquisitions/s against a PING baseline, admitted vs R x T + B, the busiest second, and with
//! `--sim`/`--sim-limit` what an in-process simulator saw). `sim-bench` runs the adaptive rate in
//! one process against a simulator whose real limit is below the configured rate.
//!
//! By concern: `hammer` holds the load generator's arguments and its worker process; `spawn`
//! the spawner's runs and tables; `sim_bench` the single-process adaptive-rate benchmark.

mod hammer;
mod sim_bench;
mod spawn;

use clap::{Parser, Subcommand};
use hammer::{hammer, HammerArgs};
use sim_bench::{sim_bench, SimBenchArgs};
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Debug, Parser)]
#[command(name = "gatebench", about = "Gate benchmarks and load generator")]
struct Cli {
    /// Redis URL of the fleet gates (`hammer` needs it; `sim-bench` without it uses embedded gates).
    #[arg(long, global = true, env = "SYNCFLEET_REDIS_URL")]
    redis: Option<String>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Load generator: acquire from one gate in N processes (needs --redis).
    Hammer(HammerArgs),
    /// The adaptive rate against the in-process simulator, one process.
    SimBench(SimBenchArgs),
}

fn main() {
    let cli = Cli::parse();
    syncfleet::app::logging::init_with_default(syncfleet::app::logging::LogFormat::Text, "info");
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    let result = runtime.block_on(async {
        match &cli.cmd {
            Cmd::Hammer(a) => hammer(cli.redis.as_deref(), a).await,
            Cmd::SimBench(a) => sim_bench(cli.redis.as_deref(), a).await,
        }
    });
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}
