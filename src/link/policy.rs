//! Whether a failed attempt is tried again, per error class, transport failure and
//! write/idempotency (docs/design.md, "Timeouts and error classes"). Pure: the gateway supplies the facts.
//!
//! No platform deduplicates a write (TOP's `item.add` has no idempotency parameter; neither
//! has JD's `ware.write.add`), so a write is retried here only when it surely made nothing:
//! the platform answered a limit, or the connection was never made. A write whose outcome is
//! unknown (a read timeout, a close after sending, a 5xx) stops here, and the job looks its
//! seller code up on the target before writing again (docs/design.md, "Listed once").

use crate::config::RetryConfig;
use crate::platform::ErrorClass;

/// The facts of one failed attempt the decision depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FailureFacts {
    pub(crate) class: ErrorClass,
    /// The peer closed a (pooled) connection before answering: retry, free of charge.
    pub(crate) peer_closed: bool,
    /// The request surely never reached the platform (the connection was never made).
    pub(crate) surely_not_sent: bool,
}

/// What kind of call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CallShape {
    pub(crate) write: bool,
}

/// Attempts made so far in this logical call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Attempts {
    /// Attempts that count against the limit (the first one included).
    pub(crate) counted: u32,
    /// Retries after a peer close (not counted).
    pub(crate) free: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Retry at once on a fresh connection; does not consume an attempt or retry budget.
    RetryNow,
    /// Retry after a backoff; consumes an attempt and needs the retry budget.
    RetryAfterBackoff,
    /// Rate limited: report to the gate and go back through it (its wait is the backoff).
    BackToGate,
    Stop(StopReason),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StopReason {
    /// Caller error: retrying only burns quota.
    Fatal,
    /// Never seen: no retry, alert.
    Unknown,
    AttemptsExhausted,
    /// A write that may have made its product is never retried blind: a retry could make a
    /// second one.
    WriteOutcomeUnknown,
}

impl StopReason {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            StopReason::Fatal => "fatal error",
            StopReason::Unknown => "unknown error",
            StopReason::AttemptsExhausted => "attempts exhausted",
            StopReason::WriteOutcomeUnknown => "the write's outcome is unknown",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RetryPolicy {
    /// Counted attempts per logical call, first included (reads; writes use the same cap).
    pub(crate) max_attempts: u32,
    /// Peer-closed retries allowed per call: free, but not unbounded.
    pub(crate) max_free_retries: u32,
}

impl RetryPolicy {
    pub(crate) fn from_config(cfg: &RetryConfig) -> Self {
        RetryPolicy {
            max_attempts: cfg.max_attempts.clamp(1, 3),
            max_free_retries: 2,
        }
    }

    pub(crate) fn decide(
        &self,
        failure: FailureFacts,
        shape: CallShape,
        attempts: Attempts,
    ) -> Verdict {
        match failure.class {
            ErrorClass::Fatal => return Verdict::Stop(StopReason::Fatal),
            ErrorClass::Unknown => return Verdict::Stop(StopReason::Unknown),
            ErrorClass::Retry | ErrorClass::Slow => {}
        }
        // Nothing stops a platform from running a write twice: a write goes on only when the
        // platform answered a limit (it made nothing) or the request never left.
        if shape.write && failure.class == ErrorClass::Retry && !failure.surely_not_sent {
            return Verdict::Stop(StopReason::WriteOutcomeUnknown);
        }
        if failure.class == ErrorClass::Retry
            && failure.peer_closed
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
    const READ: CallShape = CallShape { write: false };
    const WRITE: CallShape = CallShape { write: true };

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
        for shape in [READ, WRITE] {
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
            peer_closed: true,
            ..f(ErrorClass::Retry)
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
            p().decide(f(ErrorClass::Slow), WRITE, at(1)),
            Verdict::BackToGate
        );
    }

    #[test]
    fn a_write_that_may_have_arrived_is_never_retried() {
        // A 5xx, a read timeout, a close after sending: the product may exist.
        let peer = FailureFacts {
            peer_closed: true,
            ..f(ErrorClass::Retry)
        };
        for facts in [f(ErrorClass::Retry), peer] {
            assert_eq!(
                p().decide(facts, WRITE, at(1)),
                Verdict::Stop(StopReason::WriteOutcomeUnknown),
                "{facts:?}"
            );
            // The same failure of a read is retried.
            assert_ne!(
                p().decide(facts, READ, at(1)),
                Verdict::Stop(StopReason::WriteOutcomeUnknown)
            );
        }
        // Caller errors keep their own reason.
        assert_eq!(
            p().decide(f(ErrorClass::Fatal), WRITE, at(1)),
            Verdict::Stop(StopReason::Fatal)
        );
    }

    #[test]
    fn a_write_that_surely_made_nothing_goes_on() {
        // Never connected: retried like a read, within the same cap.
        let unsent = FailureFacts {
            surely_not_sent: true,
            ..f(ErrorClass::Retry)
        };
        assert_eq!(p().decide(unsent, WRITE, at(1)), Verdict::RetryAfterBackoff);
        assert_eq!(
            p().decide(unsent, WRITE, at(3)),
            Verdict::Stop(StopReason::AttemptsExhausted)
        );
        // A limit answered: back through the gate.
        assert_eq!(
            p().decide(f(ErrorClass::Slow), WRITE, at(1)),
            Verdict::BackToGate
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
