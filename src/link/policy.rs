//! Whether a failed attempt is tried again, per error class, transport failure and
//! write/idempotency (DESIGN section 4). Pure: the gateway supplies the facts.

use crate::config::RetryConfig;
use crate::platform::ErrorClass;

/// The facts of one failed attempt the decision depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailureFacts {
    pub class: ErrorClass,
    /// The peer closed a (pooled) connection before answering: retry, free of charge.
    pub peer_closed: bool,
    /// The request surely never reached the platform (connect error).
    pub surely_not_sent: bool,
}

/// What kind of call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallShape {
    pub write: bool,
    pub has_idempotency_key: bool,
}

/// Attempts made so far in this logical call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Attempts {
    /// Attempts that count against the limit (the first one included).
    pub counted: u32,
    /// Retries after a peer close (not counted).
    pub free: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Retry at once on a fresh connection; does not consume an attempt or retry budget.
    RetryNow,
    /// Retry after a backoff; consumes an attempt and needs the retry budget.
    RetryAfterBackoff,
    /// Rate limited: report to the gate and go back through it (its wait is the backoff).
    BackToGate,
    Stop(StopReason),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// Caller error: retrying only burns quota.
    Fatal,
    /// Never seen: no retry, alert.
    Unknown,
    AttemptsExhausted,
    /// A write without an idempotency key is never retried.
    WriteWithoutKey,
    /// The write may have reached the platform (read timeout, reset): a retry could duplicate.
    WriteMayHaveArrived,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Fatal => "fatal error",
            StopReason::Unknown => "unknown error",
            StopReason::AttemptsExhausted => "attempts exhausted",
            StopReason::WriteWithoutKey => "write without idempotency key",
            StopReason::WriteMayHaveArrived => "write may have arrived",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Counted attempts per logical call, first included (reads; writes use the same cap).
    pub max_attempts: u32,
    /// Peer-closed retries allowed per call: free, but not unbounded.
    pub max_free_retries: u32,
}

impl RetryPolicy {
    pub fn from_config(cfg: &RetryConfig) -> Self {
        RetryPolicy {
            max_attempts: cfg.max_attempts.clamp(1, 3),
            max_free_retries: 2,
        }
    }

    pub fn decide(&self, failure: FailureFacts, shape: CallShape, attempts: Attempts) -> Verdict {
        match failure.class {
            ErrorClass::Fatal => return Verdict::Stop(StopReason::Fatal),
            ErrorClass::Unknown => return Verdict::Stop(StopReason::Unknown),
            ErrorClass::Retry | ErrorClass::Slow => {}
        }
        if shape.write {
            if !shape.has_idempotency_key {
                return Verdict::Stop(StopReason::WriteWithoutKey);
            }
            // A rate-limit answer means the platform refused the write: it did not happen.
            if failure.class == ErrorClass::Retry && !failure.surely_not_sent {
                return Verdict::Stop(StopReason::WriteMayHaveArrived);
            }
        }
        if failure.class == ErrorClass::Retry
            && failure.peer_closed
            && !shape.write
            && attempts.free < self.max_free_retries
        {
            return Verdict::RetryNow;
        }
        if attempts.counted >= self.max_attempts {
            return Verdict::Stop(StopReason::AttemptsExhausted);
        }
        match failure.class {
            ErrorClass::Slow => Verdict::BackToGate,
            _ => Verdict::RetryAfterBackoff,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> RetryPolicy {
        RetryPolicy::from_config(&RetryConfig::default())
    }
    const READ: CallShape = CallShape {
        write: false,
        has_idempotency_key: false,
    };
    const WRITE_KEY: CallShape = CallShape {
        write: true,
        has_idempotency_key: true,
    };
    const WRITE_NOKEY: CallShape = CallShape {
        write: true,
        has_idempotency_key: false,
    };

    fn f(class: ErrorClass) -> FailureFacts {
        FailureFacts {
            class,
            peer_closed: false,
            surely_not_sent: false,
        }
    }
    fn at(counted: u32) -> Attempts {
        Attempts { counted, free: 0 }
    }

    #[test]
    fn reads_get_three_attempts() {
        assert_eq!(
            p().decide(f(ErrorClass::Retry), READ, at(1)),
            Verdict::RetryAfterBackoff
        );
        assert_eq!(
            p().decide(f(ErrorClass::Retry), READ, at(2)),
            Verdict::RetryAfterBackoff
        );
        assert_eq!(
            p().decide(f(ErrorClass::Retry), READ, at(3)),
            Verdict::Stop(StopReason::AttemptsExhausted)
        );
    }

    #[test]
    fn fatal_and_unknown_never_retried() {
        for shape in [READ, WRITE_KEY] {
            assert_eq!(
                p().decide(f(ErrorClass::Fatal), shape, at(1)),
                Verdict::Stop(StopReason::Fatal)
            );
            assert_eq!(
                p().decide(f(ErrorClass::Unknown), shape, at(1)),
                Verdict::Stop(StopReason::Unknown)
            );
        }
    }

    #[test]
    fn peer_closed_does_not_consume_an_attempt() {
        let pc = FailureFacts {
            class: ErrorClass::Retry,
            peer_closed: true,
            surely_not_sent: false,
        };
        // Even with all counted attempts used, a peer close is retried (up to the free cap).
        assert_eq!(p().decide(pc, READ, at(3)), Verdict::RetryNow);
        assert_eq!(
            p().decide(
                pc,
                READ,
                Attempts {
                    counted: 3,
                    free: 2
                }
            ),
            Verdict::Stop(StopReason::AttemptsExhausted)
        );
    }

    #[test]
    fn slow_goes_back_to_the_gate() {
        assert_eq!(
            p().decide(f(ErrorClass::Slow), READ, at(1)),
            Verdict::BackToGate
        );
        assert_eq!(
            p().decide(f(ErrorClass::Slow), WRITE_KEY, at(1)),
            Verdict::BackToGate
        );
    }

    #[test]
    fn writes_retry_only_with_key_and_only_on_connect_errors() {
        let connect = FailureFacts {
            class: ErrorClass::Retry,
            peer_closed: false,
            surely_not_sent: true,
        };
        let timeout = f(ErrorClass::Retry);
        let peer = FailureFacts {
            class: ErrorClass::Retry,
            peer_closed: true,
            surely_not_sent: false,
        };
        assert_eq!(
            p().decide(connect, WRITE_KEY, at(1)),
            Verdict::RetryAfterBackoff
        );
        assert_eq!(
            p().decide(timeout, WRITE_KEY, at(1)),
            Verdict::Stop(StopReason::WriteMayHaveArrived)
        );
        assert_eq!(
            p().decide(peer, WRITE_KEY, at(1)),
            Verdict::Stop(StopReason::WriteMayHaveArrived)
        );
        assert_eq!(
            p().decide(connect, WRITE_NOKEY, at(1)),
            Verdict::Stop(StopReason::WriteWithoutKey)
        );
        assert_eq!(
            p().decide(connect, WRITE_KEY, at(3)),
            Verdict::Stop(StopReason::AttemptsExhausted)
        );
    }

    #[test]
    fn attempts_capped_at_three_even_if_configured_higher() {
        let policy = RetryPolicy::from_config(&RetryConfig {
            max_attempts: 7,
            ..RetryConfig::default()
        });
        assert_eq!(policy.max_attempts, 3);
    }
}
