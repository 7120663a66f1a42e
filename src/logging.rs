//! Logging setup: human text by default, one JSON object per line with `--log-format json`.

use clap::ValueEnum;
use tracing_subscriber::EnvFilter;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Install the global subscriber. Logs go to stderr so command output on stdout stays clean.
/// `RUST_LOG` overrides the default `info` filter.
pub fn init(format: LogFormat) {
    init_with_default(format, "info")
}

/// Like [`init`], with another default filter when `RUST_LOG` is unset (the demo keeps the
/// per-call lines out of its results table).
pub fn init_with_default(format: LogFormat, default_filter: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // try_init: a second init (tests, the demo) is not an error worth dying for.
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init(),
    };
}
