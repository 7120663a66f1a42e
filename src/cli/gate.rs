//! `syncfleet gate show | set`. The gate benchmarks and the load generator of the
//! multi-process gate tests are the `gatebench` program (crates/bench/src/bin/gatebench/).

use super::{Cli, CliError};
use crate::platform::{Api, Platform};
use crate::store::{GateChange, Store};
use crate::throttle::{GateError, DEFAULT_NAMESPACE};
use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum GateCommand {
    /// Every gate: rate, burst, adaptive rate, the measured limit (ceiling) and how high it may
    /// be (upper, probed while above the ceiling), pause, calls today, burn ratio.
    Show {
        /// Redis key namespace of the gates (separate fleets or tests on one Redis).
        #[arg(long, hide = true, env = "SYNCFLEET_GATE_NAMESPACE", default_value = DEFAULT_NAMESPACE)]
        namespace: String,
    },
    /// Set a gate's rate (and burst) for the whole fleet; recorded in gate_changes.
    Set {
        /// taobao, jd or alibaba.
        platform: Platform,
        /// item_get, item_add, order_list or logistics_trace.
        api: Api,
        /// Calls per second, fleet-wide.
        #[arg(long)]
        rate: f64,
        /// Instant burst (calls); unchanged when absent.
        #[arg(long)]
        burst: Option<f64>,
        /// Why (kept in the audit trail).
        #[arg(long)]
        why: String,
        #[arg(long, hide = true, env = "SYNCFLEET_GATE_NAMESPACE", default_value = DEFAULT_NAMESPACE)]
        namespace: String,
    },
}

pub(crate) async fn run(cli: &Cli, cmd: &GateCommand) -> Result<(), CliError> {
    match cmd {
        GateCommand::Show { namespace } => show(cli, namespace).await,
        GateCommand::Set {
            platform,
            api,
            rate,
            burst,
            why,
            namespace,
        } => set(cli, *platform, *api, *rate, *burst, why, namespace).await,
    }
}

/// A refused rate or burst is the caller's input (exit 2); Redis failing is a runtime failure (1).
impl From<GateError> for CliError {
    fn from(e: GateError) -> Self {
        match e {
            GateError::BadRate(_) | GateError::BadBurst(_) | GateError::AppQuotaOnCluster(_) => {
                CliError::input(e.to_string())
            }
            GateError::BadUrl(_)
            | GateError::Connect(_)
            | GateError::Clock(_)
            | GateError::Read { .. }
            | GateError::Write { .. } => CliError::runtime(e.to_string()),
        }
    }
}

fn fmt_opt(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.1}")).unwrap_or_else(|| "-".into())
}

async fn show(cli: &Cli, namespace: &str) -> Result<(), CliError> {
    let cfg = cli.load_config()?;
    let topology = cli.topology();
    let gates = topology.gates_to_show(&cfg, namespace, &cli.db).await?;
    let snaps = gates.snapshot().await?;
    // Written with errors ignored: `gate show | head` must not panic on a closed pipe.
    let mut out = String::new();
    out.push_str(&format!(
        "{:<24} {:>8} {:>7} {:>5} {:>9} {:>8} {:>8} {:>10} {:>12} {:>6} {:>6} {:>7}  pause",
        "gate",
        "rate",
        "burst",
        "conc",
        "adaptive",
        "ceiling",
        "upper",
        "used",
        "quota",
        "burn",
        "pacing",
        "p95 ms"
    ));
    out.push('\n');
    for s in &snaps {
        let pause = match &s.pause {
            Some((d, why)) => format!("{:.0} s: {why}", d.as_secs_f64().ceil()),
            None => "-".into(),
        };
        out.push_str(&format!(
            "{:<24} {:>8} {:>7} {:>5} {:>9.1} {:>8} {:>8} {:>10} {:>12} {:>6} {:>6} {:>7}  {pause}",
            format!("{}.{}", s.platform, s.api),
            format!("{}{}", s.limits.rate, if s.overridden { "*" } else { "" }),
            s.limits.burst,
            s.concurrency,
            s.adaptive_rate,
            fmt_opt(s.ceiling),
            fmt_opt(s.upper),
            s.used_today,
            s.daily_quota
                .map(|q| q.to_string())
                .unwrap_or_else(|| "-".into()),
            s.burn
                .map(|b| format!("{b:.2}"))
                .unwrap_or_else(|| "-".into()),
            cfg.gate(s.platform, s.api).pacing.as_str(),
            s.p95_ms_measured
                .map(|p| p.to_string())
                .unwrap_or_else(|| "-".into()),
        ));
        out.push('\n');
    }
    for a in gates.app_days().await? {
        out.push_str(&format!(
            "app {}: {} of {} calls booked today over all its APIs, burn {:.2}\n",
            a.platform, a.booked, a.quota, a.burn
        ));
    }
    if snaps.iter().any(|s| s.overridden) {
        out.push_str("* set at run time by `syncfleet gate set` (see gate_changes)\n");
    }
    out.push_str(
        "p95 ms: measured call latency (the last reporting worker's); concurrency should be at \
         least rate x p95\n",
    );
    if !topology.reaches_running_workers() {
        out.push_str(
            "note: embedded mode (no --redis): these are the configured values; a running embedded \
             worker keeps its live state (adaptive rate, pauses, usage) in its own memory\n",
        );
    }
    use std::io::Write;
    let _ = std::io::stdout().lock().write_all(out.as_bytes());
    Ok(())
}

/// `$USER@hostname`, for the audit trail.
fn who() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "unknown".into());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown-host".into());
    format!("{user}@{host}")
}

async fn set(
    cli: &Cli,
    platform: Platform,
    api: Api,
    rate: f64,
    burst: Option<f64>,
    why: &str,
    namespace: &str,
) -> Result<(), CliError> {
    if !(rate > 0.0 && rate.is_finite()) {
        return Err(CliError::input(format!(
            "--rate must be a positive number, got {rate}"
        )));
    }
    if let Some(b) = burst {
        if !(b >= 1.0 && b.is_finite()) {
            return Err(CliError::input(format!(
                "--burst must be at least 1, got {b}"
            )));
        }
    }
    if why.trim().is_empty() {
        return Err(CliError::input(
            "--why must say why the rate changes (it is kept in gate_changes)",
        ));
    }
    let cfg = cli.load_config()?;
    if let Err(over) = cfg.check_gate_rate(platform, api, rate, burst) {
        return Err(CliError::input(format!("{over} in {}", cfg.file.display())));
    }
    // A process alone's gates are built here from the config, so the change is measured
    // against the configured rate; it reaches the running worker only through its config.
    let topology = cli.topology();
    let change = topology
        .gates(&cfg, namespace)
        .await?
        .set_rate(platform, api, rate, burst)
        .await?;
    let store = Store::connect_existing(&cli.db).await?;
    store.migrate().await?;
    let record = GateChange {
        at: crate::clock::Clock::system().utc(),
        who: who(),
        platform,
        api,
        old_rate: Some(change.old.rate),
        new_rate: change.new.rate,
        old_burst: Some(change.old.burst.round() as u32),
        new_burst: Some(change.new.burst.round() as u32),
        why: why.to_string(),
    };
    let (id, _) = store.record_gate_change(&record).await.map_err(|e| {
        CliError::runtime(format!(
            "the new rate is in effect but recording it in gate_changes failed: {e}"
        ))
    })?;
    println!(
        "{platform}.{api}: {} -> {} (gate_changes #{id}, by {})",
        change.old, change.new, record.who
    );
    if !topology.reaches_running_workers() {
        println!(
            "note: embedded mode (no --redis): recorded only. A running embedded worker keeps its \
             current rate until restarted; to make the change permanent set \
             [gates.\"{platform}.{api}\"] rate = {rate} in {}",
            cfg.file.display()
        );
    } else {
        println!("every worker of the fleet obeys it on its next acquisition");
    }
    Ok(())
}
