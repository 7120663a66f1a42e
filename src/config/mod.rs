//! Typed client configuration (`config/syncfleet.toml`).
//!
//! Unknown keys are rejected; every problem names the file and the key (and the line for
//! syntax errors). Secrets are never stored in the file: the config names the environment
//! variable that holds each one.
//!
//! By section: `platforms` (`[platforms.<name>]` and the secrets it names), `shops` (the
//! sellers the app serves, each with its own session), `gates`,
//! `link` (timeouts, retries, breaker), `worker` (queue, jobs, probes); `validate` holds the
//! semantic checks run after parsing.

mod gates;
mod hooks;
mod link;
mod listing;
pub mod listing_map;
mod platforms;
mod retention;
mod shops;
mod validate;
mod worker;

pub use crate::secret::Secret;
pub(crate) use gates::MAX_INTERACTIVE_SHARE;
pub use gates::{GateConfig, Pacing, UnknownPacing};
pub use hooks::HooksConfig;
pub use link::{BreakerConfig, ClassTimeouts, LinkConfig, RetryConfig, TimeoutsConfig};
pub use listing::{ItemType, ListingConfig, MissingShopKey, StuffStatus};
pub(crate) use platforms::read_secret_env;
pub use platforms::{ClientSetupError, MissingSecret, PlatformConfig};
pub use retention::RetentionConfig;
pub(crate) use shops::{valid_shop_name, DEFAULT_WEIGHT, MAX_WEIGHT};
pub use shops::{ShopConfig, ShopError};
pub use worker::{ProbeConfig, QueueConfig};

pub(crate) use crate::file_problem::line_of;
pub use crate::file_problem::{ConfigError, ConfigProblem};
use crate::platform::{Api, Platform};
use crate::time::QuotaDay;
use gates::GateEntry;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use worker::JobsConfig;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    platforms: BTreeMap<String, PlatformConfig>,
    #[serde(default)]
    shops: BTreeMap<String, ShopConfig>,
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
    #[serde(default)]
    hooks: HooksConfig,
    #[serde(default)]
    listing: ListingConfig,
    #[serde(default)]
    retention: RetentionConfig,
    #[serde(default)]
    day: DayConfig,
}

/// `[day]`: the quota day's length. Only tests and benchmarks shorten it, so that pacing
/// over a whole day can be watched in minutes (the simulator's `day_seconds` must match).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DayConfig {
    seconds: Option<u32>,
}

/// The whole client configuration, validated.
#[derive(Debug, Clone)]
pub struct Config {
    pub(crate) file: PathBuf,
    /// Settings of each platform that has a `[platforms.<name>]` section.
    pub platforms: BTreeMap<Platform, PlatformConfig>,
    /// The shops the app serves, by name (`[shops.<name>]`).
    pub(crate) shops: BTreeMap<String, ShopConfig>,
    /// `default` plus `platform.api` entries.
    pub(crate) gates: BTreeMap<String, GateEntry>,
    /// The link layer (`[link]`).
    pub link: LinkConfig,
    /// The task queue (`[queue]`).
    pub queue: QueueConfig,
    pub(crate) jobs: JobsConfig,
    /// The probes (`[probe]`).
    pub probe: ProbeConfig,
    /// Completion hooks (`[hooks]`).
    pub hooks: HooksConfig,
    /// The listing defaults (`[listing]`).
    pub(crate) listing: ListingConfig,
    /// How long the ledger keeps what grows with time (`[retention]`).
    pub retention: RetentionConfig,
    /// The quota day (`[day] seconds`, default the platforms' 86,400 s from 00:00 GMT+8).
    pub day: QuotaDay,
    /// Non-fatal findings of validation.
    pub warnings: Vec<ConfigProblem>,
}

impl Config {
    /// Orders asked per order-list page on `platform`: its own `order_page_size`, else
    /// `jobs.order_page_size`, else the platform's largest page.
    pub(crate) fn order_page_size(&self, platform: Platform) -> u32 {
        self.platforms
            .get(&platform)
            .and_then(|pc| pc.order_page_size)
            .or(self.jobs.order_page_size)
            .unwrap_or_else(|| crate::platform::wire::order_page_size_max(platform))
    }

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
        let raw: RawConfig =
            toml::from_str(text).map_err(|e| ConfigError::of_toml(path, text, &e))?;
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
                Err(e) => problems.push(problem(format!("platforms.{name}"), e.to_string(), false)),
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
        let day = match raw.day.seconds {
            None => QuotaDay::PLATFORM,
            Some(s) => QuotaDay::of_seconds(s).unwrap_or_else(|| {
                problems.push(problem(
                    "day.seconds".into(),
                    format!(
                        "must be {} to 86400 (the platforms' day is 86400; shorter days are for tests)",
                        QuotaDay::MIN_SECONDS
                    ),
                    false,
                ));
                QuotaDay::PLATFORM
            }),
        };
        let cfg = Config {
            file: path.to_path_buf(),
            day,
            platforms,
            shops: raw.shops,
            gates: raw.gates,
            link: raw.link,
            queue: raw.queue,
            jobs: raw.jobs,
            probe: raw.probe,
            hooks: raw.hooks,
            listing: raw.listing,
            retention: raw.retention,
            warnings: Vec::new(),
        };
        problems.extend(cfg.validate());
        for (key, message) in cfg.hooks.problems() {
            problems.push(problem(key, message, false));
        }
        let (warnings, errors): (Vec<_>, Vec<_>) = problems.into_iter().partition(|p| p.warning);
        if errors.is_empty() {
            Ok(Config { warnings, ..cfg })
        } else {
            Err(ConfigError(errors.into_iter().chain(warnings).collect()))
        }
    }

    /// The settings of `platform`; `None` when the config has no section for it.
    pub fn platform(&self, platform: Platform) -> Option<&PlatformConfig> {
        self.platforms.get(&platform)
    }

    /// Whether a gate of `platform` may be set to `rate` per second with `burst` (none: the
    /// configured one): burst + rate must stay within the platform's per-second cap, the rule
    /// `config check` applies to the file, for every way a rate is set at run time (the CLI,
    /// the dashboard).
    pub(crate) fn check_gate_rate(
        &self,
        platform: Platform,
        api: Api,
        rate: f64,
        burst: Option<f64>,
    ) -> Result<(), OverCap> {
        let burst = burst.unwrap_or(self.gate(platform, api).burst);
        match self.platform(platform).and_then(|p| p.per_second_cap) {
            Some(cap) if burst + rate > cap => Err(OverCap {
                platform,
                rate,
                burst,
                cap,
            }),
            _ => Ok(()),
        }
    }
}

/// A gate rate that would exceed the platform's per-second cap.
#[derive(Debug, thiserror::Error)]
#[error(
    "burst {burst} + rate {rate} per second exceeds {platform}'s per-second cap {cap} \
     (platforms.{platform}.per_second_cap)"
)]
pub(crate) struct OverCap {
    platform: Platform,
    rate: f64,
    burst: f64,
    cap: f64,
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
    fn pacing_the_day_and_the_app_quota_are_read_and_checked() {
        let cfg = parse(&format!(
            "{PLATFORM}daily_quota = 5000\n[day]\nseconds = 600\n[gates.default]\npacing = \"even\"\n"
        ))
        .unwrap();
        let g = cfg.gate(Platform::Taobao, Api::ItemAdd);
        assert_eq!(g.pacing, Pacing::Even);
        assert_eq!(g.app_quota, Some(5000));
        assert_eq!(g.day.seconds(), 600);
        assert_eq!(cfg.gate(Platform::Jd, Api::ItemAdd).app_quota, None);
        let err = parse("[day]\nseconds = 10\n").unwrap_err();
        assert_eq!(err.0[0].key, "day.seconds", "{err}");
        let err = parse("[gates.default]\npacing = \"fast\"\n").unwrap_err();
        assert_eq!(err.0[0].line, Some(2), "{err}");
        assert!(err.0[0].message.contains("spend"), "{err}");
    }

    /// Retention periods in days, fractions allowed (integers as before); a negative one and a
    /// prune interval of 0 are refused with their keys.
    #[test]
    fn retention_days_take_fractions_and_refuse_negatives() {
        let cfg = parse(
            "[retention]\nscheduled_jobs_days = 0.5\nmessages_days = 3\nprune_every_s = 60\n",
        )
        .unwrap();
        assert_eq!(cfg.retention.scheduled_jobs_days, 0.5);
        assert_eq!(cfg.retention.messages_days, 3.0);
        assert_eq!(cfg.retention.calls_days, 90.0);
        assert_eq!(cfg.retention.prune_every_s, 60);
        let err = parse("[retention]\ncalls_days = -1\nprune_every_s = 0\n").unwrap_err();
        let keys: Vec<&str> = err.0.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            ["retention.calls_days", "retention.prune_every_s"],
            "{err}"
        );
    }

    /// A table given twice (a README snippet pasted into a config that has it): the error
    /// names the line and quotes it, not only "duplicate key".
    #[test]
    fn a_table_given_twice_is_named() {
        let err = parse(&format!(
            "{PLATFORM}[gates.\"taobao.item_add\"]\nrate = 1\n[gates.\"taobao.item_add\"]\nrate = 2\n"
        ))
        .unwrap_err();
        let p = &err.0[0];
        assert_eq!(p.line, Some(9), "{err}");
        assert!(p.message.contains("[gates.\"taobao.item_add\"]"), "{err}");
    }

    #[test]
    fn an_order_page_over_the_platforms_cap_is_refused() {
        const ALIBABA: &str = "[platforms.alibaba]\nendpoint = \"http://127.0.0.1:7800/openapi\"\napp_key = \"k\"\nsecret_env = \"X\"\n";
        // Unset: each platform's largest page.
        let cfg = parse(&format!("{PLATFORM}{ALIBABA}")).unwrap();
        assert_eq!(cfg.order_page_size(Platform::Taobao), 100);
        assert_eq!(cfg.order_page_size(Platform::Alibaba), 20);
        // 100 for every platform: 1688 serves 20 at most.
        let err = parse(&format!(
            "{PLATFORM}{ALIBABA}[jobs]\norder_page_size = 100\n"
        ))
        .unwrap_err();
        assert_eq!(err.0.len(), 1, "{err}");
        assert_eq!(err.0[0].key, "jobs.order_page_size", "{err}");
        assert!(err.0[0].message.contains("at most 20"), "{err}");
        // A platform's own page size wins and is checked against its own cap.
        let cfg = parse(&format!(
            "{PLATFORM}{ALIBABA}order_page_size = 15\n[jobs]\norder_page_size = 100\n"
        ))
        .unwrap();
        assert_eq!(cfg.order_page_size(Platform::Alibaba), 15);
        assert_eq!(cfg.order_page_size(Platform::Taobao), 100);
        let err = parse(&format!("{PLATFORM}order_page_size = 101\n")).unwrap_err();
        assert_eq!(err.0[0].key, "platforms.taobao.order_page_size", "{err}");
    }

    #[test]
    fn a_hook_is_a_url_or_a_command_not_both_and_one_seller_names_one_shop() {
        let both = parse(
            "[hooks]\nurl = \"http://127.0.0.1:9/h\"\nsecret_env = \"K\"\ncommand = [\"/bin/true\"]\n",
        )
        .unwrap_err();
        assert!(both.0.iter().any(|p| p.key == "hooks.command"), "{both}");
        let empty = parse("[hooks]\ncommand = []\n").unwrap_err();
        assert!(empty.0.iter().any(|p| p.key == "hooks.command"), "{empty}");
        let cfg = parse("[hooks]\ncommand = [\"/usr/local/bin/on-finish\", \"--to\", \"ops\"]\n")
            .unwrap();
        assert!(
            cfg.hooks.secret().unwrap().is_none(),
            "a command needs no key"
        );
        let twice = parse(
            "[shops.a]\nplatform = \"taobao\"\nsession_env = \"A\"\nseller = \"x\"\n\
             [shops.x]\nplatform = \"taobao\"\nsession_env = \"B\"\n",
        )
        .unwrap_err();
        assert!(
            twice.0.iter().any(|p| p.key.ends_with(".seller")),
            "{twice}"
        );
        // The same seller name on two platforms is two sellers.
        parse(
            "[shops.a]\nplatform = \"taobao\"\nsession_env = \"A\"\nseller = \"x\"\n\
             [shops.b]\nplatform = \"jd\"\nsession_env = \"B\"\nseller = \"x\"\n",
        )
        .unwrap();
    }

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
    fn boundary_band_defaults_falls_back_and_is_bounded() {
        let cfg = parse(&format!(
            "{PLATFORM}\n[gates.default]\nboundary_band_ms = 0\n[gates.\"taobao.item_add\"]\nboundary_band_ms = 40\n"
        ))
        .unwrap();
        assert_eq!(
            cfg.gate(Platform::Taobao, Api::ItemAdd).boundary_band_ms,
            40
        );
        assert_eq!(cfg.gate(Platform::Jd, Api::OrderList).boundary_band_ms, 0);
        let plain = parse(PLATFORM).unwrap();
        assert_eq!(
            plain.gate(Platform::Taobao, Api::ItemGet).boundary_band_ms,
            gates::DEFAULT_BOUNDARY_BAND_MS
        );
        let err = parse(&format!(
            "{PLATFORM}\n[gates.default]\nboundary_band_ms = 600\n"
        ))
        .unwrap_err();
        assert!(
            err.0
                .iter()
                .any(|p| !p.warning && p.key == "gates.default.boundary_band_ms"),
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
