//! Typed client configuration (`config/syncfleet.toml`).
//!
//! Unknown keys are rejected; every problem names the file and the key (and the line for
//! syntax errors). Secrets are never stored in the file: the config names the environment
//! variable that holds each one.

use crate::platform::sign::SignMethod;
use crate::platform::{Api, ApiClass, Platform};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use crate::secret::Secret;

/// A config problem, naming the file and key (and line, when known).
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigProblem {
    pub(crate) file: PathBuf,
    pub(crate) key: String,
    pub(crate) line: Option<usize>,
    pub(crate) message: String,
    /// Warnings are reported but do not fail `config check`.
    pub(crate) warning: bool,
}

impl fmt::Display for ConfigProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let level = if self.warning { "warning" } else { "error" };
        write!(f, "{level}: {}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if !self.key.is_empty() {
            write!(f, ": key `{}`", self.key)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Loading failed: the problems that stopped it (at least one).
#[derive(Debug, thiserror::Error)]
#[error("{}", .0.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("\n"))]
pub struct ConfigError(pub(crate) Vec<ConfigProblem>);

fn default_true() -> bool {
    true
}

/// Per-platform connection and identity settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlatformConfig {
    /// Full URL of the gateway (TOP `/router/rest`, JOS `/routerjson`, 1688 `https://gw.open.1688.com/openapi`).
    pub endpoint: String,
    pub app_key: String,
    /// Name of the environment variable holding the app secret.
    pub(crate) secret_env: String,
    /// Name of the environment variable holding the session / access token.
    #[serde(default)]
    pub(crate) session_env: Option<String>,
    /// TOP only: md5, hmac or hmac-sha256.
    #[serde(default)]
    pub(crate) sign_method: SignMethod,
    /// The platform's hard per-second cap for this app (any one API), if known:
    /// `config check` rejects a gate whose burst + rate exceeds it.
    #[serde(default)]
    pub(crate) per_second_cap: Option<f64>,
    #[serde(default = "PlatformConfig::default_connect_ms")]
    pub(crate) connect_timeout_ms: u64,
    /// Idle keep-alive of pooled connections: must stay below the platform's idle close.
    #[serde(default = "PlatformConfig::default_idle_keepalive_s")]
    pub idle_keepalive_s: u64,
    /// After how long idle the platform closes a connection (observed; about 30 s).
    #[serde(default = "PlatformConfig::default_platform_idle_close_s")]
    pub(crate) platform_idle_close_s: u64,
    /// Bulkhead: at most this many calls in flight to this platform from one process.
    #[serde(default = "PlatformConfig::default_max_in_flight")]
    pub(crate) max_in_flight: usize,
    /// How long a call may wait for a bulkhead slot before failing fast as busy.
    #[serde(default = "PlatformConfig::default_pool_wait_ms")]
    pub(crate) pool_wait_ms: u64,
}

impl PlatformConfig {
    fn default_connect_ms() -> u64 {
        2000
    }
    fn default_idle_keepalive_s() -> u64 {
        25
    }
    fn default_platform_idle_close_s() -> u64 {
        30
    }
    fn default_max_in_flight() -> usize {
        64
    }
    fn default_pool_wait_ms() -> u64 {
        1000
    }

    /// Read the app secret from the environment variable the config names.
    pub(crate) fn secret(&self) -> Result<Secret, MissingSecret> {
        read_secret_env(&self.secret_env)
    }

    /// Read the session / access token, if the config names a variable for it.
    pub(crate) fn session(&self) -> Result<Option<Secret>, MissingSecret> {
        match &self.session_env {
            Some(var) => read_secret_env(var).map(Some),
            None => Ok(None),
        }
    }

    /// The first variable this platform's client needs (app secret, then session) that is
    /// unset or empty; None when every one is there. Reads the environment, shows no value.
    pub(crate) fn missing_secret(&self) -> Option<MissingSecret> {
        std::iter::once(&self.secret_env)
            .chain(self.session_env.as_ref())
            .find_map(|var| read_secret_env(var).err())
    }
}

/// A secret's environment variable is unset or empty. Names the variable, never a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("environment variable {var} is not set (it must hold the secret)")]
pub struct MissingSecret {
    pub(crate) var: String,
}

fn read_secret_env(var: &str) -> Result<Secret, MissingSecret> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Ok(Secret::new(v)),
        _ => Err(MissingSecret {
            var: var.to_string(),
        }),
    }
}

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
}

/// A gate's resolved settings.
#[derive(Debug, Clone, PartialEq)]
pub struct GateConfig {
    pub rate: f64,
    pub burst: f64,
    pub(crate) concurrency: u32,
    pub(crate) p95_ms: u64,
    pub(crate) max_wait: Duration,
    pub(crate) daily_quota: Option<u64>,
    pub aimd_step: f64,
    pub aimd_successes: u32,
}

/// Connect and read timeout of one API class.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ClassTimeouts {
    pub(crate) connect_ms: u64,
    pub read_ms: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimeoutsConfig {
    #[serde(default = "TimeoutsConfig::list")]
    pub(crate) list: ClassTimeouts,
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

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LinkConfig {
    pub timeouts: TimeoutsConfig,
    /// Total time budget of one task; every attempt takes its slice from it.
    pub(crate) task_budget_ms: u64,
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

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QueueConfig {
    /// Items per task.
    pub(crate) chunk_size: usize,
    /// Queue name (Redis key prefix / apalis queue).
    pub(crate) name: String,
    /// Tasks per enqueue round trip.
    pub(crate) push_batch: usize,
    pub(crate) poll_interval_ms: u64,
    pub(crate) heartbeat_s: u64,
    pub(crate) missed_heartbeats: u32,
    /// Attempts per task before it is dead.
    pub(crate) max_attempts: u32,
    /// After SIGTERM, items already calling get this long to finish; the rest of each chunk
    /// goes back to the queue without charging an attempt (docs/design.md, "Scale-in").
    pub(crate) shutdown_grace_s: u64,
    /// A worker that cannot reach the queue for this long exits with status 1 instead of
    /// hanging (0 = wait for it forever).
    pub(crate) unreachable_exit_s: u64,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            chunk_size: 100,
            name: "syncfleet".into(),
            push_batch: 5000,
            poll_interval_ms: 100,
            heartbeat_s: 10,
            missed_heartbeats: 3,
            max_attempts: 5,
            shutdown_grace_s: 5,
            unreachable_exit_s: 120,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct JobsConfig {
    /// A logistics order is not queried again within this interval.
    pub(crate) logistics_min_interval_s: u64,
    /// Order sync slices: the platform's maximum window (1 day on TOP).
    pub(crate) order_slice_s: u64,
    pub(crate) order_page_size: u32,
    /// An item whose call failed with a transient class (retry, or a write whose outcome is
    /// unknown) goes back to the queue with backoff up to this many times before it ends
    /// `failed` (0 = fail at once, the operator runs `retry`).
    pub(crate) item_retry_rounds: u32,
}

impl Default for JobsConfig {
    fn default() -> Self {
        JobsConfig {
            logistics_min_interval_s: 1800,
            order_slice_s: 86_400,
            order_page_size: 100,
            item_retry_rounds: 4,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProbeConfig {
    pub interval_s: u64,
    /// Fixed sample ids used by probes (item id for item_get, order id for logistics).
    pub(crate) sample_item_id: String,
    pub sample_order_id: String,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        ProbeConfig {
            interval_s: 30,
            sample_item_id: "1".into(),
            sample_order_id: "1".into(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    platforms: BTreeMap<String, PlatformConfig>,
    #[serde(default)]
    gates: BTreeMap<String, GateEntry>,
    #[serde(default)]
    link: LinkConfig,
    #[serde(default)]
    queue: QueueConfig,
    #[serde(default)]
    jobs: JobsConfig,
    #[serde(default)]
    probe: ProbeConfig,
}

/// The whole client configuration, validated.
#[derive(Debug, Clone)]
pub struct Config {
    pub(crate) file: PathBuf,
    pub platforms: BTreeMap<Platform, PlatformConfig>,
    /// `default` plus `platform.api` entries.
    pub(crate) gates: BTreeMap<String, GateEntry>,
    pub link: LinkConfig,
    pub queue: QueueConfig,
    pub(crate) jobs: JobsConfig,
    pub probe: ProbeConfig,
    /// Non-fatal findings of validation.
    pub warnings: Vec<ConfigProblem>,
}

/// Built-in fallback when the file has no `[gates.default]` (DESIGN section 3).
const DEFAULT_GATE: (f64, f64, u32) = (20.0, 60.0, 8);

impl Config {
    /// Read, parse and validate a config file. Errors name the file, key and line.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigError(vec![ConfigProblem {
                file: path.to_path_buf(),
                key: String::new(),
                line: None,
                message: format!("cannot read config file: {e}"),
                warning: false,
            }])
        })?;
        Config::parse(path, &text)
    }

    /// Parse and validate config text; `path` is used in messages only.
    pub fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1);
            ConfigError(vec![ConfigProblem {
                file: path.to_path_buf(),
                key: String::new(),
                line,
                message: e.message().to_string(),
                warning: false,
            }])
        })?;
        let mut problems = Vec::new();
        let problem = |key: String, message: String, warning: bool| ConfigProblem {
            file: path.to_path_buf(),
            key,
            line: None,
            message,
            warning,
        };
        let mut platforms = BTreeMap::new();
        for (name, pc) in raw.platforms {
            match name.parse::<Platform>() {
                Ok(p) => {
                    platforms.insert(p, pc);
                }
                Err(e) => problems.push(problem(format!("platforms.{name}"), e, false)),
            }
        }
        for name in raw.gates.keys() {
            if name == "default" {
                continue;
            }
            let ok = name
                .split_once('.')
                .is_some_and(|(p, a)| p.parse::<Platform>().is_ok() && a.parse::<Api>().is_ok());
            if !ok {
                problems.push(problem(
                    format!("gates.\"{name}\""),
                    "gate keys are `default` or `platform.api`, e.g. \"taobao.item_get\"".into(),
                    false,
                ));
            }
        }
        let cfg = Config {
            file: path.to_path_buf(),
            platforms,
            gates: raw.gates,
            link: raw.link,
            queue: raw.queue,
            jobs: raw.jobs,
            probe: raw.probe,
            warnings: Vec::new(),
        };
        problems.extend(cfg.validate());
        let (warnings, errors): (Vec<_>, Vec<_>) = problems.into_iter().partition(|p| p.warning);
        if errors.is_empty() {
            Ok(Config { warnings, ..cfg })
        } else {
            Err(ConfigError(errors.into_iter().chain(warnings).collect()))
        }
    }

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
        }
    }

    pub fn platform(&self, platform: Platform) -> Option<&PlatformConfig> {
        self.platforms.get(&platform)
    }

    /// Semantic checks: burst/rate bounds, keep-alive vs idle close, the timeout chain.
    fn validate(&self) -> Vec<ConfigProblem> {
        let mut out = Vec::new();
        let mut push = |key: String, message: String, warning: bool| {
            out.push(ConfigProblem {
                file: self.file.clone(),
                key,
                line: None,
                message,
                warning,
            })
        };
        for (name, entry) in &self.gates {
            let key = |field: &str| {
                if name == "default" {
                    format!("gates.default.{field}")
                } else {
                    format!("gates.\"{name}\".{field}")
                }
            };
            if let Some(rate) = entry.rate {
                if !(rate > 0.0 && rate.is_finite()) {
                    push(
                        key("rate"),
                        format!("must be a positive number, got {rate}"),
                        false,
                    );
                }
            }
            if let Some(burst) = entry.burst {
                if burst < 1.0 || !burst.is_finite() {
                    push(
                        key("burst"),
                        format!("must be at least 1, got {burst}"),
                        false,
                    );
                }
            }
            if entry.concurrency == Some(0) {
                push(key("concurrency"), "must be at least 1".into(), false);
            }
        }
        for (&platform, pc) in &self.platforms {
            let pkey = |field: &str| format!("platforms.{platform}.{field}");
            if pc.idle_keepalive_s >= pc.platform_idle_close_s {
                push(
                    pkey("idle_keepalive_s"),
                    format!(
                        "{} s must be below platform_idle_close_s ({} s): a reused connection the platform already closed costs a full read timeout",
                        pc.idle_keepalive_s, pc.platform_idle_close_s
                    ),
                    false,
                );
            }
            if pc.endpoint.parse::<reqwest::Url>().is_err() {
                push(
                    pkey("endpoint"),
                    format!("`{}` is not a URL", pc.endpoint),
                    false,
                );
            }
            for api in Api::ALL {
                let g = self.gate(platform, api);
                let gkey = |field: &str| format!("gates.\"{platform}.{api}\".{field}");
                if let Some(cap) = pc.per_second_cap {
                    if g.burst + g.rate > cap {
                        push(
                            gkey("burst"),
                            format!(
                                "burst {} + rate {} per second exceeds the platform's per-second cap {cap} (platforms.{platform}.per_second_cap)",
                                g.burst, g.rate
                            ),
                            false,
                        );
                    }
                    if g.burst < cap / 2.0 - g.rate && g.burst < g.rate {
                        push(
                            gkey("burst"),
                            format!(
                                "burst {} is below the rate {}: bursts will be cut short",
                                g.burst, g.rate
                            ),
                            true,
                        );
                    }
                }
                let needed = (g.rate * g.p95_ms as f64 / 1000.0).ceil() as u32;
                if g.concurrency < needed {
                    push(
                        gkey("concurrency"),
                        format!(
                            "{} is below rate x p95 = {} x {} ms = {needed}: throughput will be capped at {:.1}/s",
                            g.concurrency,
                            g.rate,
                            g.p95_ms,
                            g.concurrency as f64 * 1000.0 / g.p95_ms.max(1) as f64
                        ),
                        true,
                    );
                }
            }
            // Timeout chain: connect + read of one attempt must fit the pool wait and the budget.
            for class in [
                ApiClass::List,
                ApiClass::Detail,
                ApiClass::Batch,
                ApiClass::Logistics,
            ] {
                let t = self.link.timeouts.for_class(class);
                let attempt = pc.pool_wait_ms + t.connect_ms + t.read_ms;
                if attempt >= self.link.task_budget_ms {
                    push(
                        format!("link.timeouts.{}", class.as_str()),
                        format!(
                            "one {} attempt (pool wait {} + connect {} + read {} ms) does not fit the task budget link.task_budget_ms = {} ms",
                            class.as_str(),
                            pc.pool_wait_ms,
                            t.connect_ms,
                            t.read_ms,
                            self.link.task_budget_ms
                        ),
                        false,
                    );
                }
                if t.connect_ms != pc.connect_timeout_ms && t.connect_ms > pc.connect_timeout_ms {
                    push(
                        format!("link.timeouts.{}.connect_ms", class.as_str()),
                        format!(
                            "{} ms exceeds the platform client's connect timeout platforms.{platform}.connect_timeout_ms = {} ms",
                            t.connect_ms, pc.connect_timeout_ms
                        ),
                        false,
                    );
                }
            }
        }
        let r = &self.link.retry;
        if r.max_attempts == 0 {
            push(
                "link.retry.max_attempts".into(),
                "must be at least 1".into(),
                false,
            );
        }
        if !(0.0..=1.0).contains(&r.budget_ratio) {
            push(
                "link.retry.budget_ratio".into(),
                "must be between 0 and 1".into(),
                false,
            );
        }
        if r.base_ms > r.cap_ms {
            push(
                "link.retry.base_ms".into(),
                "must not exceed link.retry.cap_ms".into(),
                false,
            );
        }
        let b = &self.link.breaker;
        if !(0.0..=1.0).contains(&b.failure_ratio) {
            push(
                "link.breaker.failure_ratio".into(),
                "must be between 0 and 1".into(),
                false,
            );
        }
        if b.initial_open_ms == 0 || b.initial_open_ms > b.open_s.saturating_mul(1000) {
            push(
                "link.breaker.initial_open_ms".into(),
                "must be between 1 and link.breaker.open_s x 1000".into(),
                false,
            );
        }
        if b.close_after > b.half_open_probes {
            push(
                "link.breaker.close_after".into(),
                "cannot exceed link.breaker.half_open_probes".into(),
                false,
            );
        }
        if self.queue.chunk_size == 0 {
            push(
                "queue.chunk_size".into(),
                "must be at least 1".into(),
                false,
            );
        }
        if self.queue.push_batch == 0 || self.queue.push_batch > 20_000 {
            push(
                "queue.push_batch".into(),
                "must be 1..=20000 (one huge push outlives the client's response timeout)".into(),
                false,
            );
        }
        for key in self.link.stale_max_age_s_per_api.keys() {
            if key.parse::<Api>().is_err() {
                push(
                    format!("link.stale_max_age_s_per_api.{key}"),
                    "unknown api".into(),
                    false,
                );
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(Path::new("test.toml"), text)
    }

    const PLATFORM: &str = r#"
[platforms.taobao]
endpoint = "http://127.0.0.1:7800/router/rest"
app_key = "k"
secret_env = "X_SECRET"
per_second_cap = 400
"#;

    #[test]
    fn unknown_key_is_rejected_with_line() {
        let err = parse("[queue]\nchunk_size = 10\nchunk_sise = 3\n").unwrap_err();
        let p = &err.0[0];
        assert_eq!(p.line, Some(3), "{p}");
        assert!(p.message.contains("chunk_sise"), "{p}");
    }

    #[test]
    fn gate_entry_falls_back_to_default() {
        let cfg = parse(&format!(
            "{PLATFORM}\n[gates.default]\nrate = 20\nburst = 60\nconcurrency = 8\n[gates.\"taobao.item_get\"]\nrate = 80\nburst = 300\nconcurrency = 24\n"
        ))
        .unwrap();
        let g = cfg.gate(Platform::Taobao, Api::ItemGet);
        assert_eq!((g.rate, g.burst, g.concurrency), (80.0, 300.0, 24));
        let d = cfg.gate(Platform::Jd, Api::OrderList);
        assert_eq!((d.rate, d.burst, d.concurrency), (20.0, 60.0, 8));
    }

    #[test]
    fn burst_plus_rate_above_cap_is_an_error_naming_the_key() {
        let err = parse(&format!(
            "{PLATFORM}\n[gates.\"taobao.item_get\"]\nrate = 80\nburst = 500\nconcurrency = 30\n"
        ))
        .unwrap_err();
        assert!(
            err.0
                .iter()
                .any(|p| !p.warning && p.key == "gates.\"taobao.item_get\".burst"),
            "{err}"
        );
    }

    #[test]
    fn keepalive_must_be_below_idle_close() {
        let err = parse(&format!("{PLATFORM}idle_keepalive_s = 30\n")).unwrap_err();
        assert!(
            err.0
                .iter()
                .any(|p| p.key == "platforms.taobao.idle_keepalive_s"),
            "{err}"
        );
    }

    #[test]
    fn timeout_chain_must_fit_budget() {
        let err = parse(&format!("{PLATFORM}\n[link]\ntask_budget_ms = 5000\n")).unwrap_err();
        assert!(
            err.0.iter().any(|p| p.key == "link.timeouts.detail"),
            "{err}"
        );
    }

    #[test]
    fn low_concurrency_is_a_warning() {
        let cfg = parse(&format!(
            "{PLATFORM}\n[gates.\"taobao.item_get\"]\nrate = 80\nburst = 200\nconcurrency = 10\np95_ms = 300\n"
        ))
        .unwrap();
        assert!(cfg
            .warnings
            .iter()
            .any(|p| p.key == "gates.\"taobao.item_get\".concurrency"));
    }

    #[test]
    fn bad_gate_key_and_platform_are_rejected() {
        let err = parse("[gates.\"taobao.nope\"]\nrate = 1\n[platforms.ebay]\nendpoint=\"http://x\"\napp_key=\"a\"\nsecret_env=\"B\"\n").unwrap_err();
        assert_eq!(err.0.len(), 2, "{err}");
    }

    #[test]
    fn secret_debug_is_redacted() {
        let s = Secret::new("topsecret");
        assert!(!format!("{s:?}{s}").contains("topsecret"));
    }
}
