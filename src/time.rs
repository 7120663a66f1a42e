//! Time helpers shared by the gates, the simulator and the ledgers.
//!
//! Platform days (daily quotas, burn ratio) are counted in GMT+8 (Asia/Shanghai, no DST),
//! so a fixed offset is exact and no time-zone database is needed.

use chrono::{DateTime, FixedOffset, NaiveDate, TimeZone, Utc};

/// GMT+8, the clock all three platforms use for timestamps and quota days.
pub fn china_offset() -> FixedOffset {
    // 8 hours is always a valid offset; the `expect` can never fire.
    FixedOffset::east_opt(8 * 3600).expect("GMT+8 is a valid offset")
}

/// The platform day (GMT+8) that the instant `at` belongs to.
pub fn platform_day(at: DateTime<Utc>) -> NaiveDate {
    at.with_timezone(&china_offset()).date_naive()
}

/// The next 00:00 GMT+8 strictly after `at`: when daily quotas reset.
pub fn next_quota_reset(at: DateTime<Utc>) -> DateTime<Utc> {
    let tomorrow = platform_day(at).succ_opt().unwrap_or(NaiveDate::MAX);
    let midnight = tomorrow.and_hms_opt(0, 0, 0).unwrap_or_default();
    china_offset()
        .from_local_datetime(&midnight)
        .single()
        .map(|d| d.with_timezone(&Utc))
        .unwrap_or(at)
}

/// Fraction of the platform day elapsed at `at`, floored at one minute so the burn ratio
/// is not wildly inflated just after midnight.
pub(crate) fn day_fraction_elapsed(at: DateTime<Utc>) -> f64 {
    let local = at.with_timezone(&china_offset());
    let secs = local
        .time()
        .signed_duration_since(chrono::NaiveTime::MIN)
        .num_seconds() as f64;
    secs.max(60.0) / 86_400.0
}

/// Burn ratio: share of the daily quota used divided by share of the day elapsed.
/// > 1.3 means the quota will not last the day; < 0.5 means headroom.
pub(crate) fn burn_ratio(used: u64, daily_quota: u64, at: DateTime<Utc>) -> f64 {
    if daily_quota == 0 {
        return 0.0;
    }
    (used as f64 / daily_quota as f64) / day_fraction_elapsed(at)
}

/// Milliseconds since the Unix epoch of `at` (0 before it): the wall clock by which the
/// platforms count their seconds.
pub(crate) fn wall_ms(at: std::time::SystemTime) -> u64 {
    at.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn day_boundary_is_midnight_gmt8() {
        // 15:59:59 UTC is 23:59:59 GMT+8; one second later is the next platform day.
        let before = Utc.with_ymd_and_hms(2026, 1, 1, 15, 59, 59).unwrap();
        let after = Utc.with_ymd_and_hms(2026, 1, 1, 16, 0, 0).unwrap();
        assert_ne!(platform_day(before), platform_day(after));
        assert_eq!(next_quota_reset(before), after);
    }

    #[test]
    fn burn_ratio_is_one_when_on_pace() {
        // 12:00 GMT+8 = 04:00 UTC: half the day gone, half the quota used.
        let noon = Utc.with_ymd_and_hms(2026, 1, 1, 4, 0, 0).unwrap();
        let ratio = burn_ratio(500, 1000, noon);
        assert!((ratio - 1.0).abs() < 1e-9, "{ratio}");
    }

    #[test]
    fn burn_ratio_floors_elapsed_at_one_minute() {
        let midnight = Utc.with_ymd_and_hms(2026, 1, 1, 16, 0, 0).unwrap();
        assert!((day_fraction_elapsed(midnight) - 60.0 / 86_400.0).abs() < 1e-12);
    }
}
