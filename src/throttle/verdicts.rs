//! What a gate answers: why it refused a call ([`GateRefusal`]), how one of its operations
//! failed ([`GateError`]), and how a call it let through ended ([`GateOutcome`]).

use super::SLOT_WAIT;
use crate::platform::{Api, Platform};
use std::time::Duration;

/// Why a gate did not let a call through. None of these consumes a task attempt.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GateRefusal {
    /// No concurrency slot within about 1 s: this process is saturated.
    #[error("busy: no concurrency slot free within {} ms", SLOT_WAIT.as_millis())]
    Busy,
    /// The next token is further away than the caller may wait: come back after this long.
    #[error("rate: next token in {} ms, beyond the caller's max wait", .0.as_millis())]
    RetryAt(Duration),
    /// The gate is paused fleet-wide (a platform ban, a spent daily quota).
    #[error("paused for {} ms: {reason}", .remaining.as_millis())]
    Paused {
        /// Time left of the pause.
        remaining: Duration,
        /// Why the gate is paused.
        reason: String,
    },
    /// The gate's shared state (Redis) could not be reached: no worker may assume its share,
    /// so the call is held back like a pause and its task re-queued.
    #[error("gate state unreachable (retry in {} ms): {error}", .retry_in.as_millis())]
    Unreachable {
        /// Try again after this long.
        retry_in: Duration,
        /// Redis's error (or the timeout).
        error: String,
        /// Redis did not answer in time (as opposed to refusing the command).
        timed_out: bool,
    },
}

/// Why the fleet gates' state in Redis could not be reached, read or changed, or a rate
/// change was refused. Redis's error is part of the message (not a `source`), so a
/// `{:#}` chain does not print it twice.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// The Redis URL does not parse, or its TLS files cannot be used.
    #[error("redis for the gates: {0}")]
    BadUrl(crate::redis_conn::RedisOpenError),
    /// No connection to Redis.
    #[error("cannot connect to redis for the gates: {0}")]
    Connect(redis::RedisError),
    /// Redis did not answer `TIME` (the gates run on its clock).
    #[error("cannot read the redis clock for the gates: {0}")]
    Clock(redis::RedisError),
    /// Reading a gate's state failed.
    #[error("reading gate {platform}.{api} from redis: {error}")]
    Read {
        /// The gate's platform.
        platform: Platform,
        /// The gate's API.
        api: Api,
        /// Redis's error.
        error: redis::RedisError,
    },
    /// Writing a gate's rate failed.
    #[error("setting gate {platform}.{api} in redis: {error}")]
    Write {
        /// The gate's platform.
        platform: Platform,
        /// The gate's API.
        api: Api,
        /// Redis's error.
        error: redis::RedisError,
    },
    /// An app's daily quota (`[platforms.X] daily_quota`) with the gates on a Redis Cluster:
    /// not supported yet.
    #[error("[platforms.{0}] daily_quota (the app's daily quota) is not supported with the gates on a Redis Cluster yet: use one Redis or Sentinel, or leave it out (per-gate daily_quota works)")]
    AppQuotaOnCluster(Platform),
    /// `set_rate` with a rate that is not a positive number.
    #[error("rate must be a positive number, got {0}")]
    BadRate(f64),
    /// `set_rate` with a burst below 1.
    #[error("burst must be at least 1, got {0}")]
    BadBurst(f64),
}

/// What a call through the gate ended as.
#[derive(Debug, Clone, PartialEq)]
pub enum GateOutcome {
    /// The call succeeded.
    Success,
    /// The platform said "rate limited". `ban`: its "ban will last N seconds", if it said so;
    /// `quota_spent`: the daily quota is used up (pauses the gate until 00:00 GMT+8).
    RateLimited {
        /// How long the platform said its ban lasts, if it said so.
        ban: Option<Duration>,
        /// The daily quota is used up.
        quota_spent: bool,
        /// The quota spent is the app's, over all its APIs: every gate of the platform stops.
        app_wide: bool,
    },
    /// Any other failure: counts against the quota, leaves the rate alone.
    Failure,
}

impl GateOutcome {
    /// The outcome of a platform call as the gate sees it: a `Slow` error is a rate-limit
    /// answer (with the platform's ban and spent-quota flag), any other error a failure; so is
    /// a `Slow` guessed from an unmapped code's words (`CallError::guessed_limit`).
    pub fn of<T>(result: &Result<T, crate::platform::classify::CallError>) -> GateOutcome {
        match result {
            Ok(_) => GateOutcome::Success,
            Err(e) if e.is_rate_limit() => GateOutcome::RateLimited {
                ban: e.ban,
                quota_spent: e.quota_spent,
                app_wide: e.app_quota,
            },
            Err(_) => GateOutcome::Failure,
        }
    }
}
