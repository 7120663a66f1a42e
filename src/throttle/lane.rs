//! Lanes: interactive work (a person waiting, a change to push) goes before bulk work, and a
//! configured share of each gate's rate and daily quota is kept for it (docs/design.md,
//! "Lanes").

use crate::config::MAX_INTERACTIVE_SHARE;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Which lane a job, a task or a call is in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lane {
    /// A person or a live change is waiting: ahead of bulk work, with a reserved share.
    Interactive,
    /// Bulk work (listings, back-fills): what is left after the interactive reserve.
    #[default]
    Bulk,
}

impl Lane {
    /// The spelling in specs, the CLI and the logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Lane::Interactive => "interactive",
            Lane::Bulk => "bulk",
        }
    }

    /// Whether this is the default lane (`bulk`): left out of serialized tasks.
    pub fn is_bulk(&self) -> bool {
        *self == Lane::Bulk
    }
}

impl fmt::Display for Lane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Not `interactive` or `bulk`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown lane `{0}` (expected `interactive` or `bulk`)")]
pub struct UnknownLane(String);

impl FromStr for Lane {
    type Err = UnknownLane;
    fn from_str(s: &str) -> Result<Lane, UnknownLane> {
        match s {
            "interactive" => Ok(Lane::Interactive),
            "bulk" => Ok(Lane::Bulk),
            other => Err(UnknownLane(other.to_string())),
        }
    }
}

/// The rate bulk work may use of a gate whose rate is `rate` with `share` kept for
/// interactive work (0 keeps nothing: bulk may use it all).
pub(crate) fn bulk_rate(rate: f64, share: f64) -> f64 {
    rate * (1.0 - share.clamp(0.0, MAX_INTERACTIVE_SHARE))
}

/// The calls of a day's `quota` bulk work may use with `share` kept for interactive work.
pub(crate) fn bulk_quota(quota: u64, share: f64) -> u64 {
    (quota as f64 * (1.0 - share.clamp(0.0, MAX_INTERACTIVE_SHARE))).floor() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bulk_keeps_what_the_reserve_leaves() {
        assert_eq!(bulk_rate(100.0, 0.0), 100.0);
        assert!((bulk_rate(100.0, 0.1) - 90.0).abs() < 1e-9);
        assert!(
            (bulk_rate(100.0, 5.0) - 10.0).abs() < 1e-9,
            "at most 90% is kept"
        );
        assert_eq!(bulk_quota(10_000, 0.2), 8_000);
        assert_eq!(bulk_quota(10_000, 0.0), 10_000);
        assert_eq!("interactive".parse::<Lane>(), Ok(Lane::Interactive));
        assert!("fast".parse::<Lane>().is_err());
    }
}
