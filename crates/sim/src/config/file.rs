//! The simulator's configuration file: read, parsed and checked, every problem naming the
//! file and the key (`config/sim.toml`).

use super::{Limit, LimitKind, OrdersConfig, SimApp, SimConfig};
use crate::drill::Drill;
use crate::file_problem::{ConfigError, ConfigProblem};
use crate::live::LiveOrders;
use crate::platform::{Api, Platform};
use crate::secret::Secret;
use crate::time::QuotaDay;
use chrono::NaiveDateTime;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

impl SimConfig {
    /// Read, parse and validate a simulator config file.
    pub fn load(path: &Path) -> Result<SimConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigError(vec![ConfigProblem {
                file: path.to_path_buf(),
                key: String::new(),
                line: None,
                message: format!("cannot read simulator config: {e}"),
                warning: false,
            }])
        })?;
        SimConfig::parse(path, &text)
    }

    /// Parse and validate config text; `path` is used in messages only.
    pub fn parse(path: &Path, text: &str) -> Result<SimConfig, ConfigError> {
        let raw: RawSim = toml::from_str(text).map_err(|e| ConfigError::of_toml(path, text, &e))?;
        let mut problems = Vec::new();
        let mut problem = |key: String, message: String| {
            problems.push(ConfigProblem {
                file: path.to_path_buf(),
                key,
                line: None,
                message,
                warning: false,
            })
        };
        let mut cfg = SimConfig::demo();
        cfg.apps.clear();
        if let Some(v) = raw.seed {
            cfg.seed = v;
        }
        if let Some(v) = raw.timestamp_skew_s {
            cfg.timestamp_skew_s = v;
        }
        if let Some(v) = raw.clock_offset_s {
            cfg.clock_offset_s = v;
        }
        if let Some(v) = raw.day_seconds {
            match QuotaDay::of_seconds(v) {
                Some(d) => cfg.day = d,
                None => problem(
                    "day_seconds".into(),
                    format!("must be {} to 86400", QuotaDay::MIN_SECONDS),
                ),
            }
        }
        if let Some(v) = raw.max_body_bytes {
            if v < 1024 {
                problem("max_body_bytes".into(), "must be at least 1024".into());
            }
            cfg.max_body_bytes = v;
        }
        if let Some(v) = raw.idle_hold_s {
            if v > 60 {
                problem(
                    "idle_hold_s".into(),
                    "must be at most 60 (a held request is bounded)".into(),
                );
            }
            cfg.idle_hold_s = v;
        }
        if let Some(v) = raw.token_lifetime_s {
            cfg.token_lifetime_s = v;
        }
        parse_apps(raw.apps, &mut cfg.apps, &mut problem);
        if cfg.apps.is_empty() {
            problem("apps".into(), "at least one app is required".into());
        }
        if let Some(c) = raw.catalog {
            if c.items == 0 {
                problem("catalog.items".into(), "must be at least 1".into());
            }
            cfg.catalog_items = c.items;
        }
        if let Some(o) = raw.orders {
            parse_orders(o, &mut cfg.orders, &mut problem);
        }
        parse_limits(&raw.limits, &mut cfg, &mut problem);
        if let Some(d) = raw.drill {
            if let Err(e) = d.validate() {
                problem("drill".into(), e.to_string());
            }
            cfg.drill = d;
        }
        if problems.is_empty() {
            Ok(cfg)
        } else {
            Err(ConfigError(problems))
        }
    }
}

/// Reports a problem: the key it concerns and what was expected.
type Problem<'a> = dyn FnMut(String, String) + 'a;

/// `[apps.*]`: each app's platform, key, secret, session and shops.
fn parse_apps(raw: BTreeMap<String, RawApp>, apps: &mut Vec<SimApp>, problem: &mut Problem<'_>) {
    for (name, app) in raw {
        let key = format!("apps.{name}");
        let platform = match app.platform.as_deref().unwrap_or(&name).parse::<Platform>() {
            Ok(p) => p,
            Err(e) => {
                problem(format!("{key}.platform"), e.to_string());
                continue;
            }
        };
        if app.app_key.is_empty() {
            problem(format!("{key}.app_key"), "must not be empty".into());
        }
        if app.secret.is_empty() {
            problem(format!("{key}.secret"), "must not be empty".into());
        }
        if apps.iter().any(|a| a.app_key == app.app_key) {
            problem(format!("{key}.app_key"), "is used by another app".into());
        }
        apps.push(SimApp {
            platform,
            app_key: app.app_key,
            secret: Secret::new(app.secret),
            session: Secret::new(app.session),
            shops: app
                .shops
                .into_iter()
                .map(|(name, session)| (name, Secret::new(session)))
                .collect(),
            daily: app.daily,
        });
        if app.daily == Some(0) {
            problem(format!("{key}.daily"), "must be at least 1".into());
        }
    }
}

/// `[orders]`: the generated orders' window and shares, and their live life.
fn parse_orders(o: RawOrders, d: &mut OrdersConfig, problem: &mut Problem<'_>) {
    if let Some(s) = o.start {
        match NaiveDateTime::parse_from_str(&s, "%Y-%m-%d %H:%M:%S") {
            Ok(t) => d.start = t,
            Err(e) => problem(
                "orders.start".into(),
                format!("expected \"yyyy-MM-dd HH:mm:ss\" (GMT+8): {e}"),
            ),
        }
    }
    if let Some(v) = o.days {
        if v == 0 {
            problem("orders.days".into(), "must be at least 1".into());
        }
        d.days = v;
    }
    if let Some(v) = o.per_shop {
        d.per_shop = v;
    }
    for (k, v, slot) in [
        (
            "orders.shipped_share",
            o.shipped_share,
            &mut d.shipped_share,
        ),
        ("orders.signed_share", o.signed_share, &mut d.signed_share),
    ] {
        if let Some(v) = v {
            if !(0.0..=1.0).contains(&v) {
                problem(k.into(), "must be between 0 and 1".into());
            }
            *slot = v;
        }
    }
    if let Some(v) = o.event_every_s {
        if v == 0 {
            problem("orders.event_every_s".into(), "must be at least 1".into());
        }
        d.event_every_s = v;
    }
    if let Some(v) = o.sign_after_events {
        d.sign_after_events = v;
    }
    if let Some(l) = o.live {
        parse_live(l, &mut d.live, problem);
    }
}

/// `[orders.live]`: new orders, their state changes and their messages over time.
fn parse_live(l: RawLive, live: &mut LiveOrders, problem: &mut Problem<'_>) {
    if let Some(v) = l.history_s {
        if v > 86_400 * 90 {
            problem(
                "orders.live.history_s".into(),
                "must be at most 90 days".into(),
            );
        }
        live.history_s = v;
    }
    if let Some(url) = l.push_url {
        if !url.starts_with("http://127.0.0.1") && !url.starts_with("http://localhost") {
            problem(
                "orders.live.push_url".into(),
                "must be a loopback http:// URL (the simulator pushes only to this host)".into(),
            );
        }
        live.push_url = Some(url);
    }
    if let Some(v) = l.new_per_min {
        if !(0.0..=6_000.0).contains(&v) {
            problem(
                "orders.live.new_per_min".into(),
                "must be between 0 and 6000".into(),
            );
        }
        live.new_per_min = v;
    }
    for (k, v, slot) in [
        (
            "orders.live.pay_after_s",
            l.pay_after_s,
            &mut live.pay_after_s,
        ),
        (
            "orders.live.ship_after_s",
            l.ship_after_s,
            &mut live.ship_after_s,
        ),
        (
            "orders.live.sign_after_s",
            l.sign_after_s,
            &mut live.sign_after_s,
        ),
        (
            "orders.live.message_delay_s",
            l.message_delay_s,
            &mut live.message_delay_s,
        ),
        (
            "orders.live.redeliver_after_s",
            l.redeliver_after_s,
            &mut live.redeliver_after_s,
        ),
    ] {
        if let Some(v) = v {
            if v == 0 || v > 86_400 * 30 {
                problem(k.into(), "must be between 1 and 2592000 seconds".into());
            }
            *slot = v;
        }
    }
    for (k, v, slot) in [
        (
            "orders.live.close_share",
            l.close_share,
            &mut live.close_share,
        ),
        (
            "orders.live.refund_share",
            l.refund_share,
            &mut live.refund_share,
        ),
        (
            "orders.live.message_loss",
            l.message_loss,
            &mut live.message_loss,
        ),
        (
            "orders.live.message_duplicate",
            l.message_duplicate,
            &mut live.message_duplicate,
        ),
        (
            "orders.live.message_delay",
            l.message_delay,
            &mut live.message_delay,
        ),
    ] {
        if let Some(v) = v {
            if !(0.0..=1.0).contains(&v) {
                problem(k.into(), "must be between 0 and 1".into());
            }
            *slot = v;
        }
    }
}

/// What is wrong with limit `l` at `key`: (key, message) pairs.
fn limit_problems(key: &str, l: &Limit) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if l.per_second == 0 {
        out.push((
            format!("{key}.per_second"),
            "must be at least 1".to_string(),
        ));
    }
    if l.daily == 0 {
        out.push((format!("{key}.daily"), "must be at least 1".to_string()));
    }
    if l.burst == Some(0) {
        out.push((format!("{key}.burst"), "must be at least 1".to_string()));
    }
    if l.latency_p95_ms < l.latency_median_ms {
        out.push((
            format!("{key}.latency_p95_ms"),
            "must be >= latency_median_ms".to_string(),
        ));
    }
    out
}

/// `[limits]`: the default limit, then each `PLATFORM.API` over it.
fn parse_limits(raw: &BTreeMap<String, RawLimit>, cfg: &mut SimConfig, problem: &mut Problem<'_>) {
    if let Some(d) = raw.get("default") {
        let l = d.over(Limit::default());
        for (k, m) in limit_problems("limits.default", &l) {
            problem(k, m);
        }
        cfg.default_limit = l;
    }
    for (name, entry) in raw {
        if name == "default" {
            continue;
        }
        let key = format!("limits.\"{name}\"");
        let parsed = name
            .split_once('.')
            .and_then(|(p, a)| Some((p.parse::<Platform>().ok()?, a.parse::<Api>().ok()?)));
        match parsed {
            Some(pair) => {
                let l = entry.over(cfg.default_limit);
                for (k, m) in limit_problems(&key, &l) {
                    problem(k, m);
                }
                cfg.limits.insert(pair, l);
            }
            None => problem(
                key,
                "expected `default` or `PLATFORM.API` (e.g. taobao.item_get)".into(),
            ),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSim {
    seed: Option<u64>,
    timestamp_skew_s: Option<u64>,
    clock_offset_s: Option<i64>,
    max_body_bytes: Option<usize>,
    idle_hold_s: Option<u64>,
    token_lifetime_s: Option<u64>,
    day_seconds: Option<u32>,
    #[serde(default)]
    apps: BTreeMap<String, RawApp>,
    catalog: Option<RawCatalog>,
    orders: Option<RawOrders>,
    #[serde(default)]
    limits: BTreeMap<String, RawLimit>,
    drill: Option<Drill>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawApp {
    platform: Option<String>,
    app_key: String,
    secret: String,
    #[serde(default)]
    session: String,
    /// Shop name -> its session.
    #[serde(default)]
    shops: BTreeMap<String, String>,
    daily: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCatalog {
    items: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOrders {
    start: Option<String>,
    days: Option<u32>,
    per_shop: Option<u32>,
    shipped_share: Option<f64>,
    signed_share: Option<f64>,
    event_every_s: Option<u64>,
    sign_after_events: Option<u32>,
    live: Option<RawLive>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLive {
    new_per_min: Option<f64>,
    pay_after_s: Option<u64>,
    ship_after_s: Option<u64>,
    sign_after_s: Option<u64>,
    close_share: Option<f64>,
    refund_share: Option<f64>,
    message_loss: Option<f64>,
    message_duplicate: Option<f64>,
    message_delay: Option<f64>,
    message_delay_s: Option<u64>,
    redeliver_after_s: Option<u64>,
    push_url: Option<String>,
    history_s: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimit {
    per_second: Option<u64>,
    kind: Option<LimitKind>,
    burst: Option<u64>,
    ban_s: Option<u64>,
    daily: Option<u64>,
    latency_median_ms: Option<u64>,
    latency_p95_ms: Option<u64>,
}

impl RawLimit {
    fn over(&self, base: Limit) -> Limit {
        let median = self.latency_median_ms.unwrap_or(base.latency_median_ms);
        Limit {
            per_second: self.per_second.unwrap_or(base.per_second),
            kind: self.kind.unwrap_or(base.kind),
            burst: self.burst.or(base.burst),
            ban_s: self.ban_s.unwrap_or(base.ban_s),
            daily: self.daily.unwrap_or(base.daily),
            latency_median_ms: median,
            // A median alone means a fixed latency.
            latency_p95_ms: self
                .latency_p95_ms
                .unwrap_or(median.max(base.latency_p95_ms)),
        }
    }
}
