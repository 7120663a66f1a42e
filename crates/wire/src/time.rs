//! Time helpers shared by the gates, the simulator and the ledgers.
//!
//! Platform days (daily quotas, burn ratio) are counted in GMT+8 (Asia/Shanghai, no DST),
//! so a fixed offset is exact and no time-zone database is needed.

use chrono::{DateTime, FixedOffset, NaiveDate, Utc};

/// GMT+8, the clock all three platforms use for timestamps and quota days.
pub fn china_offset() -> FixedOffset {
    // 8 hours is always a valid offset; the `expect` can never fire.
    FixedOffset::east_opt(8 * 3600).expect("GMT+8 is a valid offset")
}

/// The platform day (GMT+8) that the instant `at` belongs to.
pub fn platform_day(at: DateTime<Utc>) -> NaiveDate {
    at.with_timezone(&china_offset()).date_naive()
}

/// The platforms' quota day: `seconds` long, counted from 00:00 GMT+8. Daily quotas reset at
/// each day's start; the burn ratio and pacing read how much of the day is gone. Production
/// days are 86,400 s ([`QuotaDay::PLATFORM`]); tests and benchmarks compress them (config
/// `[day] seconds`, the simulator's `day_seconds`) so a whole day runs in minutes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaDay {
    seconds: u32,
}

impl Default for QuotaDay {
    fn default() -> QuotaDay {
        QuotaDay::PLATFORM
    }
}

/// GMT+8 as seconds east of UTC.
const GMT8_S: i64 = 8 * 3600;

impl QuotaDay {
    /// The platforms' own day: 00:00 to 24:00 GMT+8.
    pub const PLATFORM: QuotaDay = QuotaDay { seconds: 86_400 };
    /// The shortest day accepted (a minute: pacing needs time to steer).
    pub const MIN_SECONDS: u32 = 60;

    /// A day of `seconds` (at least [`QuotaDay::MIN_SECONDS`], at most 86,400).
    pub fn of_seconds(seconds: u32) -> Option<QuotaDay> {
        (Self::MIN_SECONDS..=86_400)
            .contains(&seconds)
            .then_some(QuotaDay { seconds })
    }

    /// The day's length in seconds.
    pub fn seconds(self) -> u32 {
        self.seconds
    }

    /// Whether this is the platforms' real day.
    pub fn is_platform(self) -> bool {
        self.seconds == 86_400
    }

    /// Which day `at` falls in (days since the epoch's first day start, GMT+8).
    pub fn index(self, at: DateTime<Utc>) -> i64 {
        (at.timestamp() + GMT8_S).div_euclid(i64::from(self.seconds))
    }

    /// The day's name in counter keys: `yyyymmdd` (GMT+8) for the real day, else the length
    /// and the index (`600s4712345`), so a compressed day never shares a counter with a date.
    pub fn label(self, at: DateTime<Utc>) -> String {
        if self.is_platform() {
            platform_day(at).format("%Y%m%d").to_string()
        } else {
            format!("{}s{}", self.seconds, self.index(at))
        }
    }

    /// Milliseconds of the day gone at `at`.
    pub fn elapsed_ms(self, at: DateTime<Utc>) -> u64 {
        let len = i64::from(self.seconds) * 1000;
        u64::try_from((at.timestamp_millis() + GMT8_S * 1000).rem_euclid(len)).unwrap_or(0)
    }

    /// The next day start strictly after `at`: when daily quotas reset.
    pub fn next_reset(self, at: DateTime<Utc>) -> DateTime<Utc> {
        let left = i64::from(self.seconds) * 1000 - self.elapsed_ms(at) as i64;
        at + chrono::TimeDelta::milliseconds(left)
    }

    /// Fraction of the day elapsed at `at`, floored at 1/1440 of the day (a minute of a real
    /// day) so the burn ratio is not wildly inflated just after the reset.
    pub fn fraction_elapsed(self, at: DateTime<Utc>) -> f64 {
        let len = f64::from(self.seconds) * 1000.0;
        (self.elapsed_ms(at) as f64).max(len / 1440.0) / len
    }

    /// Burn ratio: share of the daily quota used divided by share of the day elapsed.
    /// > 1.3 means the quota will not last the day; < 0.5 means headroom.
    pub fn burn_ratio(self, used: u64, daily_quota: u64, at: DateTime<Utc>) -> f64 {
        if daily_quota == 0 {
            return 0.0;
        }
        (used as f64 / daily_quota as f64) / self.fraction_elapsed(at)
    }
}

/// Milliseconds since the Unix epoch of `at` (0 before it): the wall clock by which the
/// platforms count their seconds.
pub fn wall_ms(at: std::time::SystemTime) -> u64 {
    at.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn day_boundary_is_midnight_gmt8() {
        // 15:59:59 UTC is 23:59:59 GMT+8; one second later is the next platform day.
        let before = Utc.with_ymd_and_hms(2026, 1, 1, 15, 59, 59).unwrap();
        let after = Utc.with_ymd_and_hms(2026, 1, 1, 16, 0, 0).unwrap();
        assert_ne!(platform_day(before), platform_day(after));
        assert_eq!(QuotaDay::PLATFORM.next_reset(before), after);
    }

    #[test]
    fn burn_ratio_is_one_when_on_pace() {
        // 12:00 GMT+8 = 04:00 UTC: half the day gone, half the quota used.
        let noon = Utc.with_ymd_and_hms(2026, 1, 1, 4, 0, 0).unwrap();
        let ratio = QuotaDay::PLATFORM.burn_ratio(500, 1000, noon);
        assert!((ratio - 1.0).abs() < 1e-9, "{ratio}");
    }

    #[test]
    fn burn_ratio_floors_elapsed_at_one_minute() {
        let midnight = Utc.with_ymd_and_hms(2026, 1, 1, 16, 0, 0).unwrap();
        let f = QuotaDay::PLATFORM.fraction_elapsed(midnight);
        assert!((f - 60.0 / 86_400.0).abs() < 1e-12, "{f}");
    }

    #[test]
    fn the_platform_day_is_the_gmt8_date() {
        let d = QuotaDay::PLATFORM;
        let before = Utc.with_ymd_and_hms(2026, 1, 1, 15, 59, 59).unwrap();
        let after = Utc.with_ymd_and_hms(2026, 1, 1, 16, 0, 0).unwrap();
        assert_eq!(d.label(before), "20260101");
        assert_eq!(d.label(after), "20260102");
        assert_eq!(d.index(after), d.index(before) + 1);
        assert_eq!(d.next_reset(before), after);
        assert_eq!(d.next_reset(after), after + chrono::TimeDelta::days(1));
        assert_eq!(d.elapsed_ms(after), 0);
    }

    #[test]
    fn a_compressed_day_starts_at_gmt8_midnight_and_repeats() {
        let d = QuotaDay::of_seconds(600).unwrap();
        let midnight = Utc.with_ymd_and_hms(2026, 1, 1, 16, 0, 0).unwrap();
        assert_eq!(d.elapsed_ms(midnight), 0);
        let later = midnight + chrono::TimeDelta::seconds(900);
        assert_eq!(d.elapsed_ms(later), 300_000);
        assert_eq!(d.index(later), d.index(midnight) + 1);
        assert!((d.fraction_elapsed(later) - 0.5).abs() < 1e-12);
        assert_eq!(
            d.next_reset(later),
            midnight + chrono::TimeDelta::seconds(1200)
        );
        assert_ne!(d.label(later), d.label(midnight));
        assert!((d.burn_ratio(50, 100, later) - 1.0).abs() < 1e-12);
        assert_eq!(QuotaDay::of_seconds(59), None);
        assert_eq!(QuotaDay::of_seconds(86_401), None);
    }
}
