//! Logging setup: human text by default, one JSON object per line with `--log-format json`.
//!
//! - Colour only when stderr is a terminal (and `NO_COLOR` is unset): logs sent to a file or
//!   a collector carry no ANSI escapes.
//! - JSON: every tracing event of the process goes through the one JSON formatter; the
//!   binary's own last words (a command's error, dropped-line note) are written as JSON
//!   objects too ([`print_error`]), so every stderr line parses.
//! - The binary writes through a non-blocking writer ([`init_with`] with `non_blocking`): a
//!   slow sink (a full pipe, a stalled collector) must never stall the workers' threads.

use clap::ValueEnum;
use std::io::IsTerminal;
use std::sync::OnceLock;
use tracing_appender::non_blocking::{ErrorCounter, NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::fmt::writer::BoxMakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// Format of the log lines on stderr (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum LogFormat {
    /// Human-readable lines, coloured when stderr is a terminal.
    #[default]
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// Lines the non-blocking writer holds while stderr is slow (tracing-appender's default):
/// a burst of call lines rides it out; beyond it lines are dropped and counted.
const BUFFERED_LINES: usize = 128_000;

/// Dropped-line counter of the non-blocking writer, when one is installed.
static DROPPED: OnceLock<ErrorCounter> = OnceLock::new();

/// What [`init_with`] sets up.
#[derive(Debug, Clone, Copy)]
pub struct LogOptions<'a> {
    /// Text or JSON lines.
    pub format: LogFormat,
    /// Filter when `RUST_LOG` is unset.
    pub default_filter: &'a str,
    /// Count the gateway's call, refusal and stale events as metrics
    /// ([`crate::app::metrics::MetricsLayer`]), whatever the log filter.
    pub metrics: bool,
    /// Write through a background thread (the binary); the caller must hold the returned
    /// guard until it exits. Off: lines are written by the thread that logs them.
    pub non_blocking: bool,
}

/// Keeps the non-blocking writer's thread alive; [`LogGuard::finish`] (or dropping it) writes
/// what is buffered. Hold it for the life of the process.
#[must_use = "dropping the guard stops the log writer: hold it until the process exits"]
pub struct LogGuard {
    _worker: Option<WorkerGuard>,
}

impl LogGuard {
    /// Write out every buffered line and stop the writer thread (waits at most about a
    /// second for a stuck sink). Call before `process::exit`, which runs no destructors.
    pub fn finish(self) {}
}

/// Like [`init`], with another default filter when `RUST_LOG` is unset (the demo keeps the
/// per-call lines out of its results table). Writes from the logging thread (no guard to hold).
pub fn init_with_default(format: LogFormat, default_filter: &str) {
    init_with(LogOptions {
        format,
        default_filter,
        metrics: false,
        non_blocking: false,
    })
    .finish();
}

/// Whether text logs get colour: stderr is a terminal and `NO_COLOR` is unset or empty.
pub(crate) fn colour_on_stderr() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Install the global subscriber as `opts` says. A second call (tests, the demo) keeps the
/// first subscriber.
pub fn init_with(opts: LogOptions<'_>) -> LogGuard {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(opts.default_filter));
    let (writer, worker) = if opts.non_blocking {
        // lossy = true: when the buffer is full a line is dropped (and counted, exported as
        // syncfleet_log_lines_dropped_total) rather than blocking the thread that logs it,
        // which is a tokio worker running calls. The ledger, not the log, is the record of
        // every call and outcome, so a lost line costs a line; a blocked runtime costs the
        // gates' pace and every in-flight budget.
        let (nb, guard) = NonBlockingBuilder::default()
            .lossy(true)
            .buffered_lines_limit(BUFFERED_LINES)
            .thread_name("syncfleet-log")
            .finish(std::io::stderr());
        let _ = DROPPED.set(nb.error_counter());
        (BoxMakeWriter::new(nb), Some(guard))
    } else {
        (BoxMakeWriter::new(std::io::stderr), None)
    };
    let fmt = match opts.format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_ansi(colour_on_stderr())
            .with_writer(writer)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_ansi(false)
            .with_writer(writer)
            .boxed(),
    };
    // Per-layer filters: the log keeps `RUST_LOG`'s choice, the metrics layer sees the
    // gateway's info events even under `RUST_LOG=warn`.
    let metrics = opts.metrics.then(|| {
        crate::app::metrics::MetricsLayer.with_filter(crate::app::metrics::event_filter())
    });
    // try_init: a second init (tests, the demo) is not an error worth dying for.
    let _ = tracing_subscriber::registry()
        .with(fmt.with_filter(filter))
        .with(metrics)
        .try_init();
    LogGuard { _worker: worker }
}

/// Lines the non-blocking writer dropped so far (0 without one).
pub(crate) fn dropped_lines() -> u64 {
    DROPPED.get().map_or(0, |c| c.dropped_lines() as u64)
}

/// Print a command's final error on stderr in the log format: as is in text, one JSON
/// object (level ERROR, the exit code) in JSON, so a JSON log stays one object per line.
pub fn print_error(format: LogFormat, message: &str, exit_code: i32) {
    match format {
        LogFormat::Text => eprintln!("{message}"),
        LogFormat::Json => eprintln!(
            "{}",
            serde_json::json!({
                "timestamp": crate::clock::Clock::system().utc().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
                "level": "ERROR",
                "target": "syncfleet",
                "message": message,
                "exit_code": exit_code,
            })
        ),
    }
}

/// After the writer is finished: say on stderr how many lines it had to drop, if any.
pub fn report_dropped(format: LogFormat) {
    let n = dropped_lines();
    if n == 0 {
        return;
    }
    let message = format!("{n} log line(s) dropped: stderr could not keep up");
    match format {
        LogFormat::Text => eprintln!("note: {message}"),
        LogFormat::Json => eprintln!(
            "{}",
            serde_json::json!({
                "timestamp": crate::clock::Clock::system().utc().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
                "level": "WARN",
                "target": "syncfleet",
                "message": message,
                "dropped_lines": n,
            })
        ),
    }
}
