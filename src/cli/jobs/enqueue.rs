//! `syncfleet enqueue`: a job from a spec file or a subcommand, its item list read and checked
//! before anything is written, then pushed to the queue in tasks.

use crate::app::runtime::Runtime;
use crate::cli::{Cli, CliError};
use crate::clock::{elapsed_since, monotonic_now};
use crate::config::listing_map::ListingMap;
use crate::jobs::producer::{self, EnqueueReport, ProducerError};
use crate::jobs::spec::{read_item_ids, JobSpec};
use crate::platform::Platform;
use crate::time::china_offset;
use chrono::{DateTime, NaiveDate, NaiveDateTime, TimeZone, Utc};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Arguments of `syncfleet enqueue`: a spec file, or a subcommand naming the job.
#[derive(Debug, Args)]
pub struct EnqueueArgs {
    /// A job spec file (TOML; examples in jobs/) instead of a subcommand.
    // Not `conflicts_with = "what"`: a subcommand is no argument, and clap's debug assertion
    // panics on it (every debug-build enqueue aborted); spec_from_args refuses both instead.
    #[arg(long)]
    pub(crate) spec: Option<PathBuf>,
    /// Items per task (default: queue.chunk_size of the config).
    #[arg(long, global = true)]
    pub(crate) chunk_size: Option<usize>,
    /// `interactive` (a person or a live change waits: its tasks go first, and its calls use
    /// the share of each gate kept for interactive work) or `bulk` (default; back-fills,
    /// big listings). Overrides a spec file's `lane`.
    #[arg(long, global = true)]
    pub(crate) lane: Option<crate::jobs::spec::Lane>,
    #[command(subcommand)]
    pub(crate) what: Option<EnqueueWhat>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum EnqueueWhat {
    /// Copy items from one platform to another: item_get on --from, item_add on --to.
    Listing {
        /// The platform the items are read from (taobao, jd or alibaba).
        #[arg(long)]
        from: Platform,
        /// The platform the items are created on (taobao, jd or alibaba).
        #[arg(long)]
        to: Platform,
        /// File with one numeric item id per line, or `-` for stdin.
        #[arg(long)]
        items: PathBuf,
        /// The shop on --to the items are listed to. An item already listed there, by any
        /// job, is skipped (reason: already listed) and costs no call.
        #[arg(long, default_value = crate::jobs::spec::DEFAULT_SHOP)]
        to_shop: String,
        /// List again the items already listed on --to-shop: new products, on purpose.
        #[arg(long)]
        relist: bool,
        /// Write from a source read the link layer could only serve from its stale cache
        /// (the source platform failing) when it is at most this many seconds old; flagged
        /// `stale`. Without it, such an item is retried and then fails: no write is made from
        /// degraded input.
        #[arg(long, value_name = "SECONDS")]
        allow_stale_source: Option<u64>,
        /// The listing map (TOML): source category to target category, properties and SKU
        /// specs to the target's ids, price, stock and title rules (examples in maps/).
        /// Default: `[listing] map` of the config.
        #[arg(long, value_name = "FILE")]
        map: Option<PathBuf>,
    },
    /// Sync the orders modified in [--since, --until), one task per platform-sized window.
    Orders {
        /// The platform the shop sells on (taobao, jd or alibaba).
        #[arg(long)]
        platform: Platform,
        /// The shop the orders belong to (its name in the ledger).
        #[arg(long)]
        shop: String,
        /// Start of the window, inclusive: RFC 3339, or `YYYY-MM-DD[ HH:MM:SS]` read as GMT+8.
        #[arg(long, value_parser = parse_time)]
        since: DateTime<Utc>,
        /// End of the window, exclusive; same formats as --since.
        #[arg(long, value_parser = parse_time)]
        until: DateTime<Utc>,
    },
    /// Query logistics of the shop's shipped, unsigned orders not queried recently.
    Logistics {
        /// The platform the shop sells on (taobao, jd or alibaba).
        #[arg(long)]
        platform: Platform,
        /// The shop whose orders are tracked (its name in the ledger).
        #[arg(long)]
        shop: String,
    },
}

/// A `--since`/`--until` value that is not a time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a time (RFC 3339, `YYYY-MM-DD HH:MM:SS` or `YYYY-MM-DD`, GMT+8)")]
pub struct NotATime(pub String);

/// RFC 3339, `YYYY-MM-DD HH:MM:SS` or `YYYY-MM-DD` (GMT+8, the platforms' clock).
pub fn parse_time(s: &str) -> Result<DateTime<Utc>, NotATime> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&Utc));
    }
    let naive = NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S")
        .or_else(|_| {
            NaiveDate::parse_from_str(s, "%Y-%m-%d")
                .map(|d| d.and_hms_opt(0, 0, 0).unwrap_or_default())
        })
        .map_err(|_| NotATime(s.to_string()))?;
    china_offset()
        .from_local_datetime(&naive)
        .single()
        .map(|t| t.with_timezone(&Utc))
        .ok_or_else(|| NotATime(s.to_string()))
}

fn spec_from_args(args: &EnqueueArgs) -> Result<JobSpec, CliError> {
    match (&args.spec, &args.what) {
        (Some(_), Some(_)) => Err(CliError::input(
            "give either --spec FILE or a job subcommand (listing, orders, logistics), not both",
        )),
        (Some(path), None) => JobSpec::load(path).map_err(|e| CliError::input(e.to_string())),
        (
            None,
            Some(EnqueueWhat::Listing {
                from,
                to,
                items,
                to_shop,
                relist,
                allow_stale_source,
                map,
            }),
        ) => Ok(JobSpec::Listing {
            from: *from,
            to: *to,
            items_file: Some(items.clone()),
            items: Vec::new(),
            to_shop: to_shop.clone(),
            relist: *relist,
            allow_stale_source_s: *allow_stale_source,
            lane: Default::default(),
            map_file: map.clone(),
            map: None,
            shop_listing: Default::default(),
        }),
        (
            None,
            Some(EnqueueWhat::Orders {
                platform,
                shop,
                since,
                until,
            }),
        ) => Ok(JobSpec::Orders {
            platform: *platform,
            shop: shop.clone(),
            since: *since,
            until: *until,
            lane: Default::default(),
        }),
        (None, Some(EnqueueWhat::Logistics { platform, shop })) => Ok(JobSpec::Logistics {
            platform: *platform,
            shop: shop.clone(),
            lane: Default::default(),
        }),
        (None, None) => Err(CliError::input(
            "enqueue needs a job: `listing`, `orders`, `logistics` or --spec FILE",
        )),
    }
}

/// A listing's map and target shop, read and checked before anything is written: the job
/// carries the parsed map and what the shop's items say of it (docs/design.md, "The listing
/// map").
fn resolve_listing_map(cfg: &crate::config::Config, spec: &mut JobSpec) -> Result<(), CliError> {
    let JobSpec::Listing {
        to,
        to_shop,
        map_file,
        map,
        shop_listing,
        ..
    } = spec
    else {
        return Ok(());
    };
    let file = map_file.clone().or_else(|| cfg.listing_map_file()).ok_or_else(|| {
        CliError::input(
            "a listing needs a listing map: --map FILE, `map_file` in the spec, or [listing] map in the config (examples in maps/)",
        )
    })?;
    let loaded = ListingMap::load(&file).map_err(|e| CliError::input(e.to_string()))?;
    if loaded.target != *to {
        return Err(CliError::input(format!(
            "{}: the map is for {} (key `target`), the job lists to {to}",
            file.display(),
            loaded.target
        )));
    }
    *shop_listing = cfg
        .shop_listing(to_shop, *to == Platform::Taobao)
        .map_err(|e| CliError::input(format!("{}: {e}", cfg.file.display())))?;
    *map = Some(Box::new(loaded));
    Ok(())
}

/// Read the listing's item ids with a progress spinner; a bad line stops here, before
/// anything is written.
fn listing_ids(spec: &JobSpec) -> Result<Vec<String>, CliError> {
    let JobSpec::Listing {
        items_file, items, ..
    } = spec
    else {
        return Ok(Vec::new());
    };
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} reading item ids: {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    let on_line = |n: usize| bar.set_message(format!("{n} lines"));
    let mut ids = Vec::new();
    let mut duplicates = 0;
    if let Some(file) = items_file {
        let list = if file.as_os_str() == "-" {
            read_item_ids(std::io::stdin().lock(), Path::new("<stdin>"), on_line)
        } else {
            let f = std::fs::File::open(file).map_err(|e| {
                CliError::input(format!("{}: cannot open item list: {e}", file.display()))
            })?;
            read_item_ids(std::io::BufReader::with_capacity(1 << 16, f), file, on_line)
        }
        .map_err(|e| CliError::input(e.to_string()))?;
        duplicates += list.duplicates;
        ids = list.ids;
    }
    if !items.is_empty() {
        let text = items.join("\n");
        let list = read_item_ids(text.as_bytes(), Path::new("<spec items>"), |_| {})
            .map_err(|e| CliError::input(e.to_string()))?;
        let mut seen: std::collections::HashSet<String> = ids.iter().cloned().collect();
        for id in list.ids {
            if seen.insert(id.clone()) {
                ids.push(id);
            } else {
                duplicates += 1;
            }
        }
        duplicates += list.duplicates;
    }
    bar.finish_and_clear();
    if duplicates > 0 {
        // A log line, not a bare eprintln: `--log-format json` keeps stderr one object a line.
        tracing::warn!("{duplicates} duplicate item id(s) listed once");
    }
    if ids.is_empty() {
        return Err(CliError::input("the item list is empty"));
    }
    Ok(ids)
}

pub(crate) async fn enqueue(cli: &Cli, args: &EnqueueArgs) -> Result<(), CliError> {
    let cfg = cli.load_config()?;
    let mut spec = spec_from_args(args)?;
    if let Some(lane) = args.lane {
        spec.set_lane(lane);
    }
    spec.validate()
        .map_err(|e| CliError::input(e.to_string()))?;
    cfg.check_shop(spec.shop_platform(), spec.shop())
        .map_err(|e| CliError::input(e.to_string()))?;
    resolve_listing_map(&cfg, &mut spec)?;
    let ids = listing_ids(&spec)?;
    let chunk = args.chunk_size.unwrap_or(cfg.queue.chunk_size);
    if chunk == 0 {
        return Err(CliError::input("--chunk-size must be at least 1"));
    }
    let rt = Runtime::open(cfg, &cli.db, cli.redis.as_deref()).await?;
    let keys = producer::item_keys(&rt.store, &rt.cfg, &spec, ids).await?;
    let started = monotonic_now();
    let tasks = keys.len().div_ceil(chunk);
    let bar = ProgressBar::new(tasks as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} tasks pushed")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let report = producer::enqueue(&rt.store, &rt.queue, chunk, &spec, &keys, |n| {
        bar.set_position(n as u64)
    })
    .await?;
    bar.finish_and_clear();
    print_enqueued(&report, elapsed_since(started), rt.topology.name());
    Ok(())
}

fn print_enqueued(r: &EnqueueReport, took: Duration, topology: &str) {
    println!(
        "job {}: {} item(s) in {} task(s) enqueued in {:.2} s ({} mode)",
        r.job_id,
        r.items,
        r.tasks,
        took.as_secs_f64(),
        topology
    );
    println!("watch it: syncfleet status {} --follow", r.job_id);
}

/// A producer's failure (the ledger, the queue, a push cut short) is a runtime failure: exit 1.
impl From<ProducerError> for CliError {
    fn from(e: ProducerError) -> Self {
        match e {
            // A job id that does not exist is the caller's mistake, as in `status` (exit 2).
            ProducerError::Store(s) if s.is_input_error() => CliError::input(s.to_string()),
            ProducerError::Store(_)
            | ProducerError::Queue(_)
            | ProducerError::Encode(_)
            | ProducerError::Push { .. } => CliError::runtime(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_in_gmt8() {
        let t = parse_time("2026-11-01").unwrap();
        assert_eq!(t, "2026-10-31T16:00:00Z".parse::<DateTime<Utc>>().unwrap());
        assert_eq!(
            parse_time("2026-11-01 08:00:00").unwrap(),
            "2026-11-01T00:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        assert_eq!(
            parse_time("2026-11-01T00:00:00Z").unwrap(),
            "2026-11-01T00:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        assert!(parse_time("yesterday").is_err());
    }
}
