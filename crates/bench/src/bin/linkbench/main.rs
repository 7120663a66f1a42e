//! Link-layer benchmarks (BENCHMARKS.md, link section) and the second-worker process of the
//! fleet breaker test (tests/processes/link_process.rs).
//!
//! Every figure is measured against the in-process simulator in the same run as its baseline,
//! a naive client: the same signed HTTP client and read timeout, up to 3 attempts with the
//! same full-jitter backoff, but no breaker, no retry budget, no stale degrade.
//!
//! ```text
//! scripts/bench linkbench outage [--rate 80] [--seconds 25]
//! scripts/bench linkbench amplification [--calls 3000] [--concurrency 16]
//! scripts/bench linkbench recovery [--rate 100] [--outage-s 5]
//! scripts/bench linkbench worker --endpoint URL --redis URL --namespace NS --seconds S --every-ms M
//! ```
//!
//! By concern: `harness` holds the simulator, config, clients and measuring helpers every
//! benchmark shares; `outage`, `amplification` and `recovery` one benchmark each; `worker` the
//! fleet test's worker process.

mod amplification;
mod harness;
mod outage;
mod recovery;
mod worker;

use amplification::amplification;
use clap::{Parser, Subcommand};
use outage::outage;
use recovery::recovery;
use syncfleet::platform::Platform;
use worker::worker;

const TB: Platform = Platform::Taobao;

#[derive(Parser)]
#[command(
    name = "linkbench",
    about = "Link-layer benchmarks against the simulator"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// p99 logical-call latency during an outage drill: gateway vs naive client.
    Outage {
        /// Logical calls started per second (open loop).
        #[arg(long, default_value_t = 80)]
        rate: u64,
        #[arg(long, default_value_t = 25)]
        seconds: u64,
        /// Hold calls instead of failing them at once (`outage_hang`): a hanging upstream.
        #[arg(long)]
        hang: bool,
    },
    /// Retry amplification (simulator calls / logical calls) under a 10% error drill.
    Amplification {
        #[arg(long, default_value_t = 3000)]
        calls: u64,
        #[arg(long, default_value_t = 16)]
        concurrency: usize,
        /// Error ratio of the drill.
        #[arg(long, default_value_t = 0.1)]
        errors: f64,
    },
    /// Time from the upstream's recovery after an outage drill to the first successful call
    /// and to the success rate being back at >= 90% of before: the growing open time against
    /// a same-run baseline whose breaker stays open for the full `open_s`.
    Recovery {
        /// Logical calls started per second (open loop).
        #[arg(long, default_value_t = 100)]
        rate: u64,
        /// Healthy seconds before the drill (the reference rate).
        #[arg(long, default_value_t = 3)]
        before_s: u64,
        #[arg(long, default_value_t = 5)]
        outage_s: u64,
        /// Give up on a variant this long after the recovery.
        #[arg(long, default_value_t = 40)]
        after_s: u64,
    },
    /// A worker process for the fleet test: calls item_get every `every_ms` through a fleet
    /// gateway and prints `<unix_ms> <ok|kind>` per call.
    Worker {
        #[arg(long)]
        endpoint: String,
        #[arg(long)]
        redis: String,
        #[arg(long)]
        namespace: String,
        #[arg(long, default_value_t = 5)]
        seconds: u64,
        #[arg(long, default_value_t = 20)]
        every_ms: u64,
        /// Breaker minimum samples of this worker (high: only a fleet trip can stop it).
        #[arg(long, default_value_t = 20)]
        min_samples: u32,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Outage {
            rate,
            seconds,
            hang,
        } => outage(rate, seconds, hang).await,
        Cmd::Amplification {
            calls,
            concurrency,
            errors,
        } => amplification(calls, concurrency, errors).await,
        Cmd::Recovery {
            rate,
            before_s,
            outage_s,
            after_s,
        } => recovery(rate, before_s, outage_s, after_s).await,
        Cmd::Worker {
            endpoint,
            redis,
            namespace,
            seconds,
            every_ms,
            min_samples,
        } => {
            worker(
                &endpoint,
                &redis,
                &namespace,
                seconds,
                every_ms,
                min_samples,
            )
            .await
        }
    }
}
