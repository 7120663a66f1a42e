//! Gate entries (`[gates.default]`, `[gates."platform.api"]`) and their resolution into the
//! settings of one gate.

use super::Config;
use crate::platform::{Api, Platform};
use crate::time::QuotaDay;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// A gate entry as written in the file: every field optional, falling back to `default`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GateEntry {
    /// Long-run rate, calls per second (fleet-wide).
    pub(crate) rate: Option<f64>,
    /// Instant burst, calls.
    pub(crate) burst: Option<f64>,
    /// In-flight calls per process; derived as rate x p95 when absent.
    pub(crate) concurrency: Option<u32>,
    /// Expected p95 latency, for deriving concurrency and the config check warning.
    pub(crate) p95_ms: Option<u64>,
    /// Longest a caller waits for a token; a later reservation is refused with its time.
    pub(crate) max_wait_ms: Option<u64>,
    /// Daily quota of the app for this API (calls per day, GMT+8).
    pub(crate) daily_quota: Option<u64>,
    /// AIMD: rate added after `aimd_successes` consecutive successes.
    pub(crate) aimd_step: Option<f64>,
    pub(crate) aimd_successes: Option<u32>,
    /// The end of each clock second in which an embedded gate sends nothing (ms).
    pub(crate) boundary_band_ms: Option<u64>,
    /// Share of the rate and of the daily quota kept for interactive work (0 to 0.9).
    pub(crate) interactive_share: Option<f64>,
    /// How bulk work spends the daily quotas: `spend` (default) or `even`.
    pub(crate) pacing: Option<Pacing>,
}

/// A gate's resolved settings.
#[derive(Debug, Clone, PartialEq)]
pub struct GateConfig {
    /// Long-run rate, calls per second (fleet-wide).
    pub rate: f64,
    /// Instant burst, calls.
    pub burst: f64,
    pub(crate) concurrency: u32,
    pub(crate) p95_ms: u64,
    pub(crate) max_wait: Duration,
    pub(crate) daily_quota: Option<u64>,
    /// AIMD: rate (calls per second) added after `aimd_successes` consecutive successes.
    pub aimd_step: f64,
    /// AIMD: consecutive successes needed for one `aimd_step` increase.
    pub aimd_successes: u32,
    /// The end of each clock second in which an embedded gate sends nothing: a call due there
    /// waits for the boundary (`throttle::second_guard`). 0 turns the band off.
    pub(crate) boundary_band_ms: u64,
    /// Share of the rate and of the daily quota kept for interactive work: bulk calls use at
    /// most `rate x (1 - share)` and stop at `daily_quota x (1 - share)` (docs/design.md,
    /// "Lanes"). 0 keeps nothing.
    pub interactive_share: f64,
    /// How bulk work spends the gate's and the app's daily quotas.
    pub pacing: Pacing,
    /// The app's daily quota over all its APIs (`[platforms.<name>] daily_quota`), as TOP
    /// counts it: every gate of the platform books against it.
    pub(crate) app_quota: Option<u64>,
    /// The quota day (`[day] seconds`; 86,400 s from 00:00 GMT+8).
    pub(crate) day: QuotaDay,
}

/// How bulk work spends a daily quota (docs/design.md, "Pacing"; the policy is
/// `throttle::pacing`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pacing {
    /// As fast as the gate allows, until bulk work's part of the quota is gone.
    #[default]
    Spend,
    /// Along the day: the quota used tracks the share of the day gone.
    Even,
}

impl Pacing {
    /// The spelling in the config and the logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Pacing::Spend => "spend",
            Pacing::Even => "even",
        }
    }

    /// The number acquire.lua takes for this policy.
    pub(crate) fn code(self) -> u8 {
        match self {
            Pacing::Spend => 0,
            Pacing::Even => 1,
        }
    }
}

impl fmt::Display for Pacing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Not `spend` or `even`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown pacing `{0}` (expected `spend` or `even`)")]
pub struct UnknownPacing(String);

impl FromStr for Pacing {
    type Err = UnknownPacing;
    fn from_str(s: &str) -> Result<Pacing, UnknownPacing> {
        match s {
            "spend" => Ok(Pacing::Spend),
            "even" => Ok(Pacing::Even),
            other => Err(UnknownPacing(other.to_string())),
        }
    }
}

/// Default of `boundary_band_ms` (docs/design.md, "Gates").
pub(crate) const DEFAULT_BOUNDARY_BAND_MS: u64 = 25;

/// The largest share of a gate that may be kept for interactive work: bulk always keeps some.
pub(crate) const MAX_INTERACTIVE_SHARE: f64 = 0.9;

/// The widest band accepted: half a second, so every second keeps most of its time.
pub(crate) const MAX_BOUNDARY_BAND_MS: u64 = 500;

/// Built-in fallback when the file has no `[gates.default]` (docs/design.md, "Gates").
const DEFAULT_GATE: (f64, f64, u32) = (20.0, 60.0, 8);

impl Config {
    /// The resolved gate settings of (platform, api): its entry over `default` over built-ins.
    pub fn gate(&self, platform: Platform, api: Api) -> GateConfig {
        let specific = self.gates.get(&format!("{platform}.{api}"));
        let default = self.gates.get("default");
        macro_rules! pick {
            ($field:ident) => {
                specific
                    .and_then(|e| e.$field)
                    .or_else(|| default.and_then(|e| e.$field))
            };
        }
        let rate = pick!(rate).unwrap_or(DEFAULT_GATE.0);
        let burst = pick!(burst).unwrap_or(DEFAULT_GATE.1);
        let p95_ms = pick!(p95_ms).unwrap_or(300);
        // Concurrency = rate x p95 (in-flight = QPS x latency), at least 1.
        let derived = ((rate * p95_ms as f64 / 1000.0).ceil() as u32).max(1);
        // An entry that sets its own rate does not inherit default's concurrency.
        let inherited = match specific.and_then(|e| e.rate) {
            Some(_) => None,
            None => default.and_then(|e| e.concurrency),
        };
        let concurrency = specific
            .and_then(|e| e.concurrency)
            .or(inherited)
            .unwrap_or(derived);
        GateConfig {
            rate,
            burst,
            concurrency,
            p95_ms,
            max_wait: Duration::from_millis(pick!(max_wait_ms).unwrap_or(5000)),
            daily_quota: pick!(daily_quota),
            aimd_step: pick!(aimd_step).unwrap_or((rate * 0.05).max(0.5)),
            aimd_successes: pick!(aimd_successes).unwrap_or(20),
            boundary_band_ms: pick!(boundary_band_ms).unwrap_or(DEFAULT_BOUNDARY_BAND_MS),
            interactive_share: pick!(interactive_share).unwrap_or(0.0),
            pacing: pick!(pacing).unwrap_or_default(),
            app_quota: self.platform(platform).and_then(|p| p.daily_quota),
            day: self.day,
        }
    }
}
