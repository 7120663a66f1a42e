//! The semantic checks after parsing: gate bounds, keep-alive against the platform's idle
//! close, the timeout chain against the task budget, retry, breaker and queue bounds.

use super::{Config, ConfigProblem};
use crate::platform::{Api, ApiClass};

/// Reports a problem: its key, what is wrong, and whether it is only a warning.
type Push<'a> = dyn FnMut(String, String, bool) + 'a;

impl Config {
    /// Semantic checks: burst/rate bounds, keep-alive vs idle close, the timeout chain.
    pub(super) fn validate(&self) -> Vec<ConfigProblem> {
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
        self.check_shops(&mut push);
        self.check_retention(&mut push);
        self.check_gates(&mut push);
        self.check_platforms(&mut push);
        self.check_link(&mut push);
        self.check_queue(&mut push);
        out
    }

    /// Shop names, their session variables and weights, and one seller per platform.
    fn check_shops(&self, push: &mut Push<'_>) {
        for (name, shop) in &self.shops {
            if !super::valid_shop_name(name) {
                push(
                    format!("shops.\"{name}\""),
                    "a shop name is 1 to 64 letters, digits, `-`, `_` or `.`".into(),
                    false,
                );
            }
            if shop.session_env.trim().is_empty() {
                push(
                    format!("shops.{name}.session_env"),
                    "must name the environment variable holding the shop's session".into(),
                    false,
                );
            }
            if !(1..=super::MAX_WEIGHT).contains(&shop.weight) {
                push(
                    format!("shops.{name}.weight"),
                    format!(
                        "must be between 1 and {}, got {}",
                        super::MAX_WEIGHT,
                        shop.weight
                    ),
                    false,
                );
            }
        }
        // Two shops of one platform under one seller name: a message could not tell them apart.
        let mut sellers = std::collections::BTreeMap::new();
        for (name, shop) in &self.shops {
            let seller = shop.seller.as_deref().unwrap_or(name);
            if let Some(first) = sellers.insert((shop.platform, seller), name) {
                push(
                    format!("shops.{name}.seller"),
                    format!(
                        "`{seller}` is already the seller of shop `{first}` on {}: each shop's change messages must name it alone",
                        shop.platform
                    ),
                    false,
                );
            }
        }
    }

    /// Retention periods and the prune interval.
    fn check_retention(&self, push: &mut Push<'_>) {
        for (key, days) in self.retention.periods() {
            if !days.is_finite() || days < 0.0 {
                push(
                    format!("retention.{key}"),
                    format!("must be a number of days, 0 (kept forever) or more, got {days}"),
                    false,
                );
            }
        }
        if self.retention.prune_every_s == 0 {
            push(
                "retention.prune_every_s".into(),
                "must be at least 1 second".into(),
                false,
            );
        }
    }

    /// Gate entries: names, rates and bursts against the platforms' caps.
    fn check_gates(&self, push: &mut Push<'_>) {
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
            if let Some(band) = entry.boundary_band_ms {
                if band > super::gates::MAX_BOUNDARY_BAND_MS {
                    push(
                        key("boundary_band_ms"),
                        format!(
                            "must be between 0 and {} ms, got {band}",
                            super::gates::MAX_BOUNDARY_BAND_MS
                        ),
                        false,
                    );
                }
            }
            if let Some(share) = entry.interactive_share {
                if !(0.0..=super::gates::MAX_INTERACTIVE_SHARE).contains(&share) {
                    push(
                        key("interactive_share"),
                        format!(
                            "must be between 0 and {}, got {share}",
                            super::gates::MAX_INTERACTIVE_SHARE
                        ),
                        false,
                    );
                }
            }
            if entry.concurrency == Some(0) {
                push(key("concurrency"), "must be at least 1".into(), false);
            }
            if entry.daily_quota == Some(0) {
                push(key("daily_quota"), "must be at least 1".into(), false);
            }
        }
    }

    /// Each platform's endpoint, keep-alive against its idle close, and the timeout chain.
    fn check_platforms(&self, push: &mut Push<'_>) {
        for (&platform, pc) in &self.platforms {
            let pkey = |field: &str| format!("platforms.{platform}.{field}");
            // A page over the platform's cap is refused (TOP, JD) or cut short without a word
            // (1688): never sent.
            let max = crate::platform::wire::order_page_size_max(platform);
            let size = self.order_page_size(platform);
            if !(1..=max).contains(&size) {
                let key = if pc.order_page_size.is_some() {
                    pkey("order_page_size")
                } else {
                    "jobs.order_page_size".to_string()
                };
                push(
                    key,
                    format!(
                        "must be between 1 and {max} for {platform} (its order list serves at most {max} a page; docs/wire-formats.md), got {size}"
                    ),
                    false,
                );
            }
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
            if pc.daily_quota == Some(0) {
                push(pkey("daily_quota"), "must be at least 1".into(), false);
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
                // Saturating: each may be up to i64::MAX in the file, and a sum that wrapped
                // would pass absurd timeouts as fitting.
                let attempt = pc
                    .pool_wait_ms
                    .saturating_add(t.connect_ms)
                    .saturating_add(t.read_ms);
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
    }

    /// Retry, breaker and stale-answer bounds.
    fn check_link(&self, push: &mut Push<'_>) {
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
        for key in self.link.stale_max_age_s_per_api.keys() {
            if key.parse::<Api>().is_err() {
                push(
                    format!("link.stale_max_age_s_per_api.{key}"),
                    "unknown api".into(),
                    false,
                );
            }
        }
    }

    /// Queue bounds.
    fn check_queue(&self, push: &mut Push<'_>) {
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
    }
}
