//! The link layer's sections (`[link]`): timeouts per API class, retries and their budget,
//! the circuit breaker, the task budget and stale reads.

use crate::platform::ApiClass;
use serde::Deserialize;
use std::collections::BTreeMap;

fn default_true() -> bool {
    true
}

/// Connect and read timeout of one API class.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ClassTimeouts {
    pub(crate) connect_ms: u64,
    /// Read timeout of one attempt, milliseconds.
    pub read_ms: u64,
}

/// Connect and read timeouts per API class (`[link.timeouts]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimeoutsConfig {
    #[serde(default = "TimeoutsConfig::list")]
    pub(crate) list: ClassTimeouts,
    /// Single-object calls (`item_get`, `item_add`); default 2 s connect, 6 s read.
    #[serde(default = "TimeoutsConfig::detail")]
    pub detail: ClassTimeouts,
    #[serde(default = "TimeoutsConfig::batch")]
    pub(crate) batch: ClassTimeouts,
    #[serde(default = "TimeoutsConfig::logistics")]
    pub(crate) logistics: ClassTimeouts,
}

impl TimeoutsConfig {
    fn list() -> ClassTimeouts {
        ClassTimeouts {
            connect_ms: 2000,
            read_ms: 3000,
        }
    }
    fn detail() -> ClassTimeouts {
        ClassTimeouts {
            connect_ms: 2000,
            read_ms: 6000,
        }
    }
    fn batch() -> ClassTimeouts {
        ClassTimeouts {
            connect_ms: 2000,
            read_ms: 15000,
        }
    }
    fn logistics() -> ClassTimeouts {
        ClassTimeouts {
            connect_ms: 2000,
            read_ms: 4000,
        }
    }

    /// The timeouts of API class `class`.
    pub fn for_class(&self, class: ApiClass) -> ClassTimeouts {
        match class {
            ApiClass::List => self.list,
            ApiClass::Detail => self.detail,
            ApiClass::Batch => self.batch,
            ApiClass::Logistics => self.logistics,
        }
    }
}

impl Default for TimeoutsConfig {
    fn default() -> Self {
        TimeoutsConfig {
            list: Self::list(),
            detail: Self::detail(),
            batch: Self::batch(),
            logistics: Self::logistics(),
        }
    }
}

/// Retries of a logical call: attempts, backoff and the fleet-wide retry budget
/// (`[link.retry]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetryConfig {
    /// Attempts for reads, first one included.
    pub(crate) max_attempts: u32,
    pub(crate) base_ms: u64,
    pub(crate) cap_ms: u64,
    /// Retries may be at most this share of calls over the window (fleet-wide).
    pub(crate) budget_ratio: f64,
    pub(crate) budget_window_s: u64,
    /// Retries always allowed per window, so a quiet gate can still retry.
    pub(crate) budget_min_retries: u64,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            max_attempts: 3,
            base_ms: 200,
            cap_ms: 4000,
            budget_ratio: 0.1,
            budget_window_s: 10,
            budget_min_retries: 10,
        }
    }
}

/// The circuit breaker of each (platform, api) (`[link.breaker]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BreakerConfig {
    pub(crate) window_s: u64,
    pub(crate) failure_ratio: f64,
    /// Calls slower than this count as slow; a slow ratio above `slow_ratio` opens too.
    pub(crate) slow_call_ms: u64,
    pub(crate) slow_ratio: f64,
    pub(crate) min_samples: u32,
    /// Longest open period: the cap of the growing open time.
    pub open_s: u64,
    /// First open period after a trip; doubles with each failed half-open probe (up to
    /// `open_s`) and falls back here once the breaker closes.
    pub initial_open_ms: u64,
    pub(crate) half_open_probes: u32,
    pub(crate) close_after: u32,
    /// Log what the breaker would do without doing it.
    pub(crate) observe_only: bool,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            window_s: 10,
            failure_ratio: 0.5,
            slow_call_ms: 5000,
            slow_ratio: 0.8,
            min_samples: 20,
            open_s: 30,
            initial_open_ms: 1000,
            half_open_probes: 3,
            close_after: 2,
            observe_only: false,
        }
    }
}

/// The link layer (`[link]`): timeouts, task budget, retries, breaker and stale reads.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LinkConfig {
    /// Connect and read timeouts per API class.
    pub timeouts: TimeoutsConfig,
    /// Total time budget of one task; every attempt takes its slice from it.
    pub(crate) task_budget_ms: u64,
    /// Retry attempts, backoff and retry budget.
    pub retry: RetryConfig,
    pub(crate) breaker: BreakerConfig,
    /// Stale reads older than this are refused (per API override in `stale_max_age_s_per_api`).
    pub(crate) stale_max_age_s: u64,
    pub(crate) stale_max_age_s_per_api: BTreeMap<String, u64>,
    #[serde(default = "default_true")]
    pub(crate) degrade_reads: bool,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            timeouts: TimeoutsConfig::default(),
            task_budget_ms: 60_000,
            retry: RetryConfig::default(),
            breaker: BreakerConfig::default(),
            stale_max_age_s: 3 * 86_400,
            stale_max_age_s_per_api: BTreeMap::new(),
            degrade_reads: true,
        }
    }
}
