//! Drills: faults switched on at start (CLI flags, `[drill]` in the config) or at run time
//! (`POST /admin/drill`). Plain data, no I/O.

use crate::platform::{Api, Platform};
use serde::{Deserialize, Serialize};

/// A changed limit for one api (all platforms, or one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitOverride {
    pub api: Api,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<Platform>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_second: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daily: Option<u64>,
}

impl LimitOverride {
    pub fn matches(&self, platform: Platform, api: Api) -> bool {
        self.api == api && self.platform.is_none_or(|p| p == platform)
    }
}

/// The drills in force (`GET /admin/drill`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Drill {
    /// Added to every answered platform call.
    pub latency_ms: u64,
    /// Share of calls answered with a Retry-class error (TOP 10, JD 66, 1688 HTTP 503).
    pub error_ratio: f64,
    /// Every call fails Retry-class at once.
    pub outage: bool,
    /// With `outage`: hold calls (up to the idle hold) instead of answering at once.
    pub outage_hang: bool,
    /// A request on a keep-alive connection idle longer than this is never answered: held,
    /// then the connection is closed (a NAT / LB dropping idle flows). 0 = off.
    pub idle_close_s: u64,
    /// A field answered empty: `title`, `price`, `num` (item fields on every platform) or a
    /// platform's own field name. Empty = off.
    pub empty_field: String,
    /// Every call gets the platform's session error.
    pub expired_session: bool,
    /// Changed limits, in the order they were set (later ones win).
    pub limits: Vec<LimitOverride>,
}

impl Drill {
    pub fn validate(&self) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.error_ratio) || self.error_ratio.is_nan() {
            return Err(format!(
                "error_ratio {} must be between 0 and 1",
                self.error_ratio
            ));
        }
        for l in &self.limits {
            if l.per_second == Some(0) || l.daily == Some(0) {
                return Err(format!(
                    "limit for {}: per_second and daily must be >= 1",
                    l.api
                ));
            }
        }
        Ok(())
    }

    /// Whether any drill is on.
    pub fn any(&self) -> bool {
        *self != Drill::default()
    }
}

/// A change of drills: omitted fields stay as they are; `clear` first turns all off.
/// `idle_close_s: 0` and `empty_field: ""` turn those off.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DrillPatch {
    pub clear: bool,
    pub latency_ms: Option<u64>,
    pub error_ratio: Option<f64>,
    pub outage: Option<bool>,
    pub outage_hang: Option<bool>,
    pub idle_close_s: Option<u64>,
    pub empty_field: Option<String>,
    pub expired_session: Option<bool>,
    pub limit: Option<LimitOverride>,
}

impl DrillPatch {
    /// The drills after this patch, or why the patch is refused (nothing changes then).
    pub fn apply(&self, current: &Drill) -> Result<Drill, String> {
        let mut d = if self.clear {
            Drill::default()
        } else {
            current.clone()
        };
        if let Some(v) = self.latency_ms {
            d.latency_ms = v;
        }
        if let Some(v) = self.error_ratio {
            d.error_ratio = v;
        }
        if let Some(v) = self.outage {
            d.outage = v;
        }
        if let Some(v) = self.outage_hang {
            d.outage_hang = v;
        }
        if let Some(v) = self.idle_close_s {
            d.idle_close_s = v;
        }
        if let Some(v) = &self.empty_field {
            d.empty_field = v.clone();
        }
        if let Some(v) = self.expired_session {
            d.expired_session = v;
        }
        if let Some(l) = &self.limit {
            // One override per (api, platform): a new one replaces the old.
            d.limits
                .retain(|o| !(o.api == l.api && o.platform == l.platform));
            d.limits.push(l.clone());
        }
        d.validate()?;
        Ok(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_changes_only_named_fields_and_clear_resets() {
        let d = DrillPatch {
            outage: Some(true),
            latency_ms: Some(5),
            ..Default::default()
        }
        .apply(&Drill::default())
        .unwrap();
        assert!(d.outage);
        let d2 = DrillPatch {
            error_ratio: Some(0.5),
            ..Default::default()
        }
        .apply(&d)
        .unwrap();
        assert!(d2.outage && d2.latency_ms == 5 && d2.error_ratio == 0.5);
        let cleared = DrillPatch {
            clear: true,
            ..Default::default()
        }
        .apply(&d2)
        .unwrap();
        assert!(!cleared.any());
    }

    #[test]
    fn bad_ratio_refused_and_limits_replace() {
        assert!(DrillPatch {
            error_ratio: Some(1.5),
            ..Default::default()
        }
        .apply(&Drill::default())
        .is_err());
        let lim = |ps| LimitOverride {
            api: Api::ItemGet,
            platform: None,
            per_second: Some(ps),
            daily: None,
        };
        let d = DrillPatch {
            limit: Some(lim(5)),
            ..Default::default()
        }
        .apply(&Drill::default())
        .unwrap();
        let d = DrillPatch {
            limit: Some(lim(9)),
            ..Default::default()
        }
        .apply(&d)
        .unwrap();
        assert_eq!(d.limits, vec![lim(9)]);
        assert!(d.limits[0].matches(Platform::Jd, Api::ItemGet));
        assert!(!d.limits[0].matches(Platform::Jd, Api::ItemAdd));
    }

    #[test]
    fn patch_json_matches_wire_format_example() {
        let p: DrillPatch = serde_json::from_str(
            r#"{"latency_ms":200,"error_ratio":0.1,"outage":true,"idle_close_s":2,"empty_field":"title","expired_session":true,"limit":{"api":"item_get","per_second":50,"daily":100000}}"#,
        )
        .unwrap();
        let d = p.apply(&Drill::default()).unwrap();
        assert_eq!(d.idle_close_s, 2);
        assert_eq!(d.limits[0].per_second, Some(50));
        assert_eq!(d.empty_field, "title");
    }
}
