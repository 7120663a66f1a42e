//! `syncfleet schedule add | list | runs | pause | resume | remove`: recurring order and
//! logistics sync per shop, kept in the ledger (docs/design.md, "Continuous sync"). The
//! workers run them: every `work` process looks at the schedules, and each tick runs once.

use super::jobs::parse_time;
use crate::cli::{Cli, CliError};
use crate::platform::Platform;
use crate::store::{JobKind, NewSchedule, OnOverlap, Store};
use crate::throttle::Lane;
use chrono::{DateTime, Utc};
use clap::{Subcommand, ValueEnum};
use std::time::Duration;

/// What a schedule syncs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ScheduleKind {
    /// Orders modified since the shop's watermark (moved on by each covered run).
    Orders,
    /// Logistics of the shop's shipped, unsigned orders not queried recently.
    Logistics,
}

/// The schedule subcommands.
#[derive(Debug, Subcommand)]
pub enum ScheduleCommand {
    /// Add a recurring sync of one shop. Its first tick is due at once.
    Add {
        /// `orders` or `logistics`.
        kind: ScheduleKind,
        /// The platform the shop sells on (taobao, jd or alibaba).
        #[arg(long)]
        platform: Platform,
        /// The shop (its name in the ledger, `[shops.<name>]` for its session).
        #[arg(long)]
        shop: String,
        /// Time between ticks: `90s`, `5m`, `1h` (a bare number is seconds).
        #[arg(long, value_parser = parse_span)]
        every: Duration,
        /// Orders: a run reads up to now but moves the watermark only to now less this, so
        /// orders the platform is still indexing are read again by the next run.
        #[arg(long, value_parser = parse_span, default_value = "30s")]
        lag: Duration,
        /// Orders: a run starts this long before the watermark, so a `modified` stamped late
        /// is still caught.
        #[arg(long, value_parser = parse_span, default_value = "60s")]
        overlap: Duration,
        /// A tick while the last run still runs: `skip` it, or `queue` one run behind it.
        #[arg(long, default_value = "skip", value_parser = parse_overlap)]
        on_overlap: OnOverlap,
        /// After downtime, at most this many of the ticks due at once run; older ones are
        /// recorded `missed` (an order run covers from the watermark whatever it missed).
        #[arg(long, default_value_t = 1)]
        catch_up: u32,
        /// Orders: where the shop's coverage starts when it has no watermark yet (RFC 3339,
        /// or `YYYY-MM-DD[ HH:MM:SS]` read as GMT+8; default one day ago).
        #[arg(long, value_parser = parse_time)]
        since: Option<DateTime<Utc>>,
        /// The runs' lane: `bulk` or `interactive`.
        #[arg(long, default_value = "bulk")]
        lane: Lane,
    },
    /// Every schedule: its next tick, the shop's watermark and lag, its last run, and its
    /// ticks per outcome.
    List,
    /// The newest runs of one schedule, and whether its order coverage has a gap.
    Runs {
        /// The schedule's id.
        id: i64,
        /// How many runs.
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
    /// Stop deciding its ticks (a run in progress finishes).
    Pause {
        /// The schedule's id.
        id: i64,
    },
    /// Decide its ticks again; the next is due at once.
    Resume {
        /// The schedule's id.
        id: i64,
    },
    /// Remove it and its runs' record; the shop's watermark stays for a schedule added later.
    Remove {
        /// The schedule's id.
        id: i64,
    },
}

/// A span that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a span of time (a number with s, m, h or d, such as 90s or 5m; a bare number is seconds)")]
pub struct NotASpan(pub String);

/// `90`, `90s`, `5m`, `1h`, `1d`; at least one second.
pub fn parse_span(s: &str) -> Result<Duration, NotASpan> {
    let t = s.trim();
    let (digits, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
    let n: u64 = digits.parse().map_err(|_| NotASpan(s.to_string()))?;
    let scale = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(NotASpan(s.to_string())),
    };
    n.checked_mul(scale)
        .filter(|&secs| (1..=366 * 86_400).contains(&secs))
        .map(Duration::from_secs)
        .ok_or_else(|| NotASpan(s.to_string()))
}

fn parse_overlap(s: &str) -> Result<OnOverlap, String> {
    s.parse()
        .map_err(|e: crate::platform::UnknownName| e.to_string())
}

fn span(d: Duration) -> String {
    let s = d.as_secs();
    if s.is_multiple_of(3600) && s > 0 {
        format!("{}h", s / 3600)
    } else if s.is_multiple_of(60) && s > 0 {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

fn when(ms: i64) -> String {
    DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .format("%Y-%m-%d %H:%M:%S")
        .to_string()
}

pub(crate) async fn run(cli: &Cli, cmd: &ScheduleCommand) -> Result<(), CliError> {
    let store = Store::connect(&cli.db).await?;
    match cmd {
        ScheduleCommand::Add {
            kind,
            platform,
            shop,
            every,
            lag,
            overlap,
            on_overlap,
            catch_up,
            since,
            lane,
        } => {
            if *catch_up == 0 {
                return Err(CliError::input("--catch-up must be at least 1"));
            }
            if shop.trim().is_empty() {
                return Err(CliError::input("--shop must name a shop"));
            }
            let kind = match kind {
                ScheduleKind::Orders => JobKind::Orders,
                ScheduleKind::Logistics => JobKind::Logistics,
            };
            let since = since
                .or_else(|| Some(crate::clock::Clock::system().utc() - chrono::Duration::days(1)));
            let id = store
                .add_schedule(&NewSchedule {
                    kind,
                    platform: *platform,
                    shop: shop.clone(),
                    every: *every,
                    lag: *lag,
                    overlap: *overlap,
                    on_overlap: *on_overlap,
                    catch_up: *catch_up,
                    lane: lane.as_str().to_string(),
                    since,
                })
                .await?;
            println!(
                "schedule {id}: {kind} of shop {shop} on {platform} every {}; the workers run it (its first tick is due now)",
                span(*every)
            );
            Ok(())
        }
        ScheduleCommand::List => {
            let all = store.schedules().await?;
            if all.is_empty() {
                println!("no schedules: add one with `syncfleet schedule add orders --platform P --shop S --every 5m`");
                return Ok(());
            }
            let now = store.clock_ms().await?;
            println!(
                "{:>4}  {:<9} {:<16} {:<7} {:<6} {:<19}  {:<19} {:>8}  {:<28} outcomes",
                "id", "kind", "shop", "every", "state", "next tick", "watermark", "lag", "last run"
            );
            for v in all {
                let s = &v.schedule;
                let (wm, lag) = match v.watermark {
                    Some(w) => (
                        w.format("%Y-%m-%d %H:%M:%S").to_string(),
                        format!("{}s", (now - w.timestamp_millis()).max(0) / 1000),
                    ),
                    None => ("-".into(), "-".into()),
                };
                let last = v
                    .last_run
                    .as_ref()
                    .map(|r| {
                        format!(
                            "{} {}{}",
                            when(r.tick_ms),
                            r.outcome,
                            r.job_id.map(|j| format!(" job {j}")).unwrap_or_default()
                        )
                    })
                    .unwrap_or_else(|| "-".into());
                let outcomes = v
                    .outcomes
                    .iter()
                    .map(|(o, n)| format!("{o}={n}"))
                    .collect::<Vec<_>>()
                    .join(" ");
                println!(
                    "{:>4}  {:<9} {:<16} {:<7} {:<6} {:<19}  {:<19} {:>8}  {:<28} {}",
                    s.id,
                    s.kind.as_str(),
                    format!("{}/{}", s.platform, s.shop),
                    span(s.every),
                    if s.paused { "PAUSED" } else { "on" },
                    when(s.next_tick_ms),
                    wm,
                    lag,
                    last,
                    outcomes
                );
            }
            Ok(())
        }
        ScheduleCommand::Runs { id, limit } => {
            let s = store.schedule(*id).await?;
            let runs = store.schedule_runs(*id, *limit).await?;
            if runs.is_empty() {
                println!(
                    "schedule {id}: no tick decided yet (the workers decide them; is one running?)"
                );
            }
            for r in runs {
                let window = r
                    .window_ms
                    .map(|(a, b)| format!(" [{} .. {})", when(a), when(b)))
                    .unwrap_or_default();
                println!(
                    "{}  {:<8}{}{}{}",
                    when(r.tick_ms),
                    r.outcome,
                    r.job_id.map(|j| format!(" job {j}")).unwrap_or_default(),
                    window,
                    r.note.map(|n| format!("  ({n})")).unwrap_or_default()
                );
            }
            if s.kind == JobKind::Orders {
                let gaps = store.coverage_gaps(s.platform, &s.shop).await?;
                if gaps.is_empty() {
                    println!("coverage of {}/{}: contiguous", s.platform, s.shop);
                } else {
                    for (a, b) in gaps {
                        println!("coverage of {}/{}: GAP from {a} to {b}", s.platform, s.shop);
                    }
                }
            }
            Ok(())
        }
        ScheduleCommand::Pause { id } => {
            store.set_schedule_paused(*id, true).await?;
            println!("schedule {id}: paused (a run in progress finishes)");
            Ok(())
        }
        ScheduleCommand::Resume { id } => {
            store.set_schedule_paused(*id, false).await?;
            println!("schedule {id}: resumed; its next tick is due now");
            Ok(())
        }
        ScheduleCommand::Remove { id } => {
            store.remove_schedule(*id).await?;
            println!("schedule {id}: removed (the shop's watermark stays)");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_parse_with_units_and_refuse_the_rest() {
        assert_eq!(parse_span("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_span("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_span("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_span("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_span("1d"), Ok(Duration::from_secs(86_400)));
        for bad in ["", "0", "5x", "m", "-5s", "1.5m", "99999999999999999999"] {
            assert!(parse_span(bad).is_err(), "{bad}");
        }
    }
}
