//! The clock a process reads, taken by what runs on it rather than read from the system in
//! every place (docs/design.md, "Time you can pause").
//!
//! Monotonic time is tokio's (`tokio::time::Instant`), which is the system's unless a test
//! paused the runtime. Wall time is the system's in production; a clock made by
//! [`Clock::following_runtime`] derives it from tokio's clock instead, anchored once, so on a
//! paused runtime the wall clock (clock seconds, the platforms' days, pause ends) moves exactly
//! as far as the runtime advanced, and a test of a rate over seconds runs in milliseconds with
//! exact figures.

use chrono::{DateTime, Utc};
use std::time::{Instant, SystemTime};

/// Where a process reads the time. Cheap to copy.
#[derive(Debug, Clone, Copy, Default)]
pub struct Clock {
    /// The wall time and the runtime's instant it was read at, for a clock that follows the
    /// runtime; none for the system's wall clock.
    anchor: Option<(SystemTime, tokio::time::Instant)>,
}

impl Clock {
    /// The system's clocks (tokio's monotonic clock, which is the system's unless paused).
    pub const fn system() -> Clock {
        Clock { anchor: None }
    }

    /// A wall clock that moves with the runtime's clock from now on: for tests on paused time.
    /// Not for production: over months the monotonic clock drifts from the wall clock NTP
    /// keeps, and the gates count the platform's clock seconds.
    pub fn following_runtime() -> Clock {
        Clock::following_runtime_from(SystemTime::now())
    }

    /// [`Clock::following_runtime`] starting at the wall time `wall` (a test picks where in a
    /// second, or a day, it starts).
    pub fn following_runtime_from(wall: SystemTime) -> Clock {
        Clock {
            anchor: Some((wall, tokio::time::Instant::now())),
        }
    }

    /// The monotonic now (for waits, deadlines and rates).
    pub fn now(&self) -> Instant {
        monotonic_now()
    }

    /// The wall clock (for clock seconds and days).
    pub fn wall(&self) -> SystemTime {
        match self.anchor {
            None => SystemTime::now(),
            Some((wall, at)) => wall + tokio::time::Instant::now().duration_since(at),
        }
    }

    /// The wall clock as a UTC date and time.
    pub fn utc(&self) -> DateTime<Utc> {
        self.wall().into()
    }
}

/// The monotonic now, tokio's (a paused test runtime's when there is one), for code that
/// measures a span and has no [`Clock`] at hand: the same for every clock.
pub fn monotonic_now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// How long since `earlier` (a [`monotonic_now`] reading) on tokio's clock; zero when it is
/// in the future.
pub fn elapsed_since(earlier: Instant) -> std::time::Duration {
    monotonic_now().saturating_duration_since(earlier)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn a_clock_following_the_runtime_moves_with_its_paused_time() {
        let clock = Clock::following_runtime();
        let (wall0, mono0) = (clock.wall(), clock.now());
        tokio::time::advance(Duration::from_secs(3600)).await;
        assert_eq!(
            clock.wall().duration_since(wall0).unwrap(),
            Duration::from_secs(3600)
        );
        assert_eq!(clock.now() - mono0, Duration::from_secs(3600));
        // The system's wall clock did not move an hour.
        let system = Clock::system().wall();
        assert!(system.duration_since(wall0).unwrap_or_default() < Duration::from_secs(600));
    }
}
