//! Drills: faults switched on at start (CLI flags, `[drill]` in the config) or at run time
//! (`POST /admin/drill`). Plain data, no I/O.

use super::config::LimitKind;
use crate::platform::{Api, Platform};
use serde::{Deserialize, Serialize};

/// A changed limit for one api (all platforms, or one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitOverride {
    /// The API whose limit changes.
    pub api: Api,
    /// Only this platform; `None` = every platform.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<Platform>,
    /// Calls admitted per second (at least 1); `None` leaves it unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_second: Option<u64>,
    /// Calls per platform day (at least 1); `None` leaves it unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daily: Option<u64>,
}

impl LimitOverride {
    /// Whether this override applies to `api` on `platform`.
    pub fn matches(&self, platform: Platform, api: Api) -> bool {
        self.api == api && self.platform.is_none_or(|p| p == platform)
    }
}

/// A changed limit kind for one api (all platforms, or one). On the wire these fields ride
/// in the patch's `limit` object (`{"limit":{"api":"item_get","kind":"bucket","burst":20}}`);
/// they are a type of their own so that [`LimitOverride`] literals stay valid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitKindOverride {
    /// The API whose limit kind changes.
    pub api: Api,
    /// Only this platform; `None` = every platform.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<Platform>,
    /// How the per-second limit is counted; `None` leaves it unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<LimitKind>,
    /// `bucket` only: the bucket size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
}

impl LimitKindOverride {
    /// Whether this override applies to `api` on `platform`.
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
    /// Share of writes (item_add) done and then left unanswered: the product is made, the
    /// connection closes before any answer (a timeout after the commit).
    pub lost_write_answer_ratio: f64,
    /// Share of orders and change messages sent with an unreadable time (`modified`,
    /// `modifyTime`, `pub_time`): the same ones every time (by id), as a platform's bad
    /// record would be.
    #[serde(default)]
    pub malformed_ratio: f64,
    /// Shops (of an app's `shops`) whose session is refused: a seller who withdrew the
    /// app's authorisation, one shop among many.
    #[serde(default)]
    pub refused_shops: Vec<String>,
    /// Items whose `item_get` is answered with a permanent error of an unmapped code worded
    /// like a limit ("title length exceeds 60"): a hostile answer a client must not take for
    /// a rate limit.
    pub worded_limit_items: Vec<u64>,
    /// Items whose `item_get` answers the platform's "service busy" (a transient error) while
    /// every other call is answered: one source going bad under a running job.
    pub busy_items: Vec<u64>,
    /// Items whose `item_get` is answered with a body of `huge_answer_bytes` (a misbehaving
    /// upstream or proxy), declared in Content-Length or not (`huge_answer_declared`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub huge_answer_items: Vec<u64>,
    /// The huge answer's size in bytes (2 GiB when items are set without a size).
    pub huge_answer_bytes: u64,
    /// Whether the huge answer declares its length in Content-Length.
    pub huge_answer_declared: bool,
    /// An order window changes under its walk, once per app: at the first order-list call
    /// for a page after the first, the first order of page 1 changes (it leaves the window);
    /// at the next, a new order comes into the window at its newest end (docs/design.md,
    /// "Continuous sync"; `sim/walk_shift.rs`).
    pub walk_shift: bool,
    /// Changed limits, in the order they were set (later ones win).
    pub limits: Vec<LimitOverride>,
    /// Changed limit kinds / bucket sizes, in the order they were set (later ones win).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub limit_kinds: Vec<LimitKindOverride>,
}

/// A huge answer's size unless the drill names one: 2 GiB, four times a worker's usual
/// memory limit.
const DEFAULT_HUGE_ANSWER_BYTES: u64 = 2 << 30;

/// A drill (or a change of drills) the simulator refuses; nothing changes then.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DrillError {
    /// `error_ratio`, `lost_write_answer_ratio` or `malformed_ratio` outside 0..=1.
    #[error("ratio {0} must be between 0 and 1")]
    ErrorRatio(f64),
    /// A limit override of 0 calls.
    #[error("limit for {0}: per_second and daily must be >= 1")]
    ZeroLimit(Api),
    /// A bucket of 0 calls.
    #[error("limit for {0}: burst must be >= 1")]
    ZeroBurst(Api),
    /// kind/burst given both in `limit` and in `limit_kind`.
    #[error("give kind/burst in `limit` or in `limit_kind`, not both")]
    ShapeTwice,
}

impl Drill {
    /// Check the values: ratios within 0..=1, limits and bucket sizes at least 1.
    pub fn validate(&self) -> Result<(), DrillError> {
        for ratio in [
            self.error_ratio,
            self.lost_write_answer_ratio,
            self.malformed_ratio,
        ] {
            if !(0.0..=1.0).contains(&ratio) || ratio.is_nan() {
                return Err(DrillError::ErrorRatio(ratio));
            }
        }
        for l in &self.limits {
            if l.per_second == Some(0) || l.daily == Some(0) {
                return Err(DrillError::ZeroLimit(l.api));
            }
        }
        for l in &self.limit_kinds {
            if l.burst == Some(0) {
                return Err(DrillError::ZeroBurst(l.api));
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
///
/// On the wire the `limit` object also takes `kind` and `burst` (they become `limit_kind`);
/// `limit_kind` may be given on its own too.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "PatchWire")]
pub struct DrillPatch {
    /// Turn every drill off before applying the other fields.
    pub clear: bool,
    /// Milliseconds added to every answered platform call.
    pub latency_ms: Option<u64>,
    /// Share (0..=1) of calls answered with a Retry-class error.
    pub error_ratio: Option<f64>,
    /// Every call fails Retry-class at once.
    pub outage: Option<bool>,
    /// With `outage`: hold calls (up to the idle hold) instead of answering at once.
    pub outage_hang: Option<bool>,
    /// Never answer a request on a keep-alive connection idle longer than this many
    /// seconds (held, then the connection is closed); 0 = off.
    pub idle_close_s: Option<u64>,
    /// A field answered empty (`title`, `price`, `num`, or a platform's own field name);
    /// empty = off.
    pub empty_field: Option<String>,
    /// Every call gets the platform's session error.
    pub expired_session: Option<bool>,
    /// Share (0..=1) of writes done and then left unanswered (the connection closes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_write_answer_ratio: Option<f64>,
    /// Share (0..=1) of orders and messages sent with an unreadable time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub malformed_ratio: Option<f64>,
    /// Shops whose session is refused; empty = off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused_shops: Option<Vec<String>>,
    /// Items whose `item_get` answers a permanent error worded like a limit; empty = off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worded_limit_items: Option<Vec<u64>>,
    /// Items whose `item_get` answers "service busy"; empty = off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busy_items: Option<Vec<u64>>,
    /// Items whose `item_get` answers a body of `huge_answer_bytes` (default 2 GiB); empty =
    /// off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub huge_answer_items: Option<Vec<u64>>,
    /// Size of a huge answer in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub huge_answer_bytes: Option<u64>,
    /// Whether a huge answer declares its length (Content-Length) or just runs (chunked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub huge_answer_declared: Option<bool>,
    /// An order window changes under its walk: an order of page 1 leaves it, then a new one
    /// comes in (once per app; turning it on again arms it again).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub walk_shift: Option<bool>,
    /// A changed limit; replaces an earlier one for the same (api, platform).
    pub limit: Option<LimitOverride>,
    /// A changed limit kind / bucket size; replaces an earlier one for the same
    /// (api, platform).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_kind: Option<LimitKindOverride>,
}

/// What `POST /admin/drill` accepts: [`DrillPatch`] with `kind`/`burst` allowed in `limit`.
#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct PatchWire {
    clear: bool,
    latency_ms: Option<u64>,
    error_ratio: Option<f64>,
    outage: Option<bool>,
    outage_hang: Option<bool>,
    idle_close_s: Option<u64>,
    empty_field: Option<String>,
    expired_session: Option<bool>,
    lost_write_answer_ratio: Option<f64>,
    malformed_ratio: Option<f64>,
    refused_shops: Option<Vec<String>>,
    worded_limit_items: Option<Vec<u64>>,
    busy_items: Option<Vec<u64>>,
    huge_answer_items: Option<Vec<u64>>,
    huge_answer_bytes: Option<u64>,
    huge_answer_declared: Option<bool>,
    walk_shift: Option<bool>,
    limit: Option<LimitWire>,
    limit_kind: Option<LimitKindOverride>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitWire {
    api: Api,
    #[serde(default)]
    platform: Option<Platform>,
    #[serde(default)]
    per_second: Option<u64>,
    #[serde(default)]
    daily: Option<u64>,
    #[serde(default)]
    kind: Option<LimitKind>,
    #[serde(default)]
    burst: Option<u64>,
}

impl TryFrom<PatchWire> for DrillPatch {
    type Error = DrillError;

    fn try_from(w: PatchWire) -> Result<DrillPatch, DrillError> {
        let mut limit = None;
        let mut limit_kind = w.limit_kind;
        if let Some(l) = w.limit {
            let shape = l.kind.is_some() || l.burst.is_some();
            if shape && limit_kind.is_some() {
                return Err(DrillError::ShapeTwice);
            }
            if shape {
                limit_kind = Some(LimitKindOverride {
                    api: l.api,
                    platform: l.platform,
                    kind: l.kind,
                    burst: l.burst,
                });
            }
            // `{"limit":{"api":..}}` alone is an (empty) rate override, as before.
            if l.per_second.is_some() || l.daily.is_some() || !shape {
                limit = Some(LimitOverride {
                    api: l.api,
                    platform: l.platform,
                    per_second: l.per_second,
                    daily: l.daily,
                });
            }
        }
        Ok(DrillPatch {
            clear: w.clear,
            latency_ms: w.latency_ms,
            error_ratio: w.error_ratio,
            outage: w.outage,
            outage_hang: w.outage_hang,
            idle_close_s: w.idle_close_s,
            empty_field: w.empty_field,
            expired_session: w.expired_session,
            lost_write_answer_ratio: w.lost_write_answer_ratio,
            malformed_ratio: w.malformed_ratio,
            refused_shops: w.refused_shops,
            worded_limit_items: w.worded_limit_items,
            busy_items: w.busy_items,
            huge_answer_items: w.huge_answer_items,
            huge_answer_bytes: w.huge_answer_bytes,
            huge_answer_declared: w.huge_answer_declared,
            walk_shift: w.walk_shift,
            limit,
            limit_kind,
        })
    }
}

impl DrillPatch {
    /// The drills after this patch, or why the patch is refused (nothing changes then).
    pub fn apply(&self, current: &Drill) -> Result<Drill, DrillError> {
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
        if let Some(v) = self.lost_write_answer_ratio {
            d.lost_write_answer_ratio = v;
        }
        if let Some(v) = self.malformed_ratio {
            d.malformed_ratio = v;
        }
        if let Some(v) = &self.refused_shops {
            d.refused_shops = v.clone();
        }
        if let Some(v) = &self.worded_limit_items {
            d.worded_limit_items = v.clone();
        }
        if let Some(v) = &self.busy_items {
            d.busy_items = v.clone();
        }
        if let Some(v) = &self.huge_answer_items {
            d.huge_answer_items = v.clone();
            if d.huge_answer_bytes == 0 {
                d.huge_answer_bytes = DEFAULT_HUGE_ANSWER_BYTES;
            }
        }
        if let Some(v) = self.huge_answer_bytes {
            d.huge_answer_bytes = v;
        }
        if let Some(v) = self.huge_answer_declared {
            d.huge_answer_declared = v;
        }
        if let Some(v) = self.walk_shift {
            d.walk_shift = v;
        }
        if let Some(l) = &self.limit {
            // One override per (api, platform): a new one replaces the old.
            d.limits
                .retain(|o| !(o.api == l.api && o.platform == l.platform));
            d.limits.push(l.clone());
        }
        if let Some(l) = &self.limit_kind {
            d.limit_kinds
                .retain(|o| !(o.api == l.api && o.platform == l.platform));
            d.limit_kinds.push(l.clone());
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
        assert!(d.limit_kinds.is_empty());
    }

    #[test]
    fn limit_patch_takes_kind_and_burst() {
        let p: DrillPatch = serde_json::from_str(
            r#"{"limit":{"api":"item_get","platform":"jd","per_second":5,"kind":"bucket","burst":20}}"#,
        )
        .unwrap();
        assert_eq!(p.limit.as_ref().unwrap().per_second, Some(5));
        let k = p.limit_kind.clone().unwrap();
        assert_eq!(
            (k.api, k.platform, k.kind, k.burst),
            (
                Api::ItemGet,
                Some(Platform::Jd),
                Some(LimitKind::Bucket),
                Some(20)
            )
        );
        // Kind alone: no rate override is recorded.
        let p: DrillPatch =
            serde_json::from_str(r#"{"limit":{"api":"item_get","kind":"sliding"}}"#).unwrap();
        assert!(p.limit.is_none());
        let d = p.apply(&Drill::default()).unwrap();
        assert_eq!(d.limit_kinds[0].kind, Some(LimitKind::Sliding));
        // A serialized patch reads back the same.
        let back: DrillPatch = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        assert_eq!(back, p);
        // Refused: unknown kind, zero burst, kind given twice.
        assert!(
            serde_json::from_str::<DrillPatch>(r#"{"limit":{"api":"item_get","kind":"x"}}"#)
                .is_err()
        );
        assert!(serde_json::from_str::<DrillPatch>(r#"{"bogus":1}"#).is_err());
        let zero: DrillPatch =
            serde_json::from_str(r#"{"limit":{"api":"item_get","burst":0}}"#).unwrap();
        assert!(zero.apply(&Drill::default()).is_err());
        assert!(serde_json::from_str::<DrillPatch>(
            r#"{"limit":{"api":"item_get","kind":"bucket"},"limit_kind":{"api":"item_get"}}"#
        )
        .is_err());
    }
}
