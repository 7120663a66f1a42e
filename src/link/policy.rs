//! Whether a failed attempt is tried again, per error class, transport failure and
//! write/idempotency (docs/design.md, "Timeouts and error classes"). Pure: the gateway supplies the facts.
//!
//! A write with an idempotency key is retried like a read: the platform answers a repeat of
//! the same key (`out_request_id`) with the first write's result, so a retry after a 5xx or a
//! read timeout cannot create a second item. A write without a key is never retried here (the
//! job decides what to do with it).

use crate::config::RetryConfig;
use crate::platform::ErrorClass;

/// The facts of one failed attempt the decision depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FailureFacts {
    pub(crate) class: ErrorClass,
    /// The peer closed a (pooled) connection before answering: retry, free of charge.
    pub(crate) peer_closed: bool,
}

/// What kind of call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CallShape {
    pub(crate) write: bool,
    pub(crate) has_idempotency_key: bool,
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
    /// A write without an idempotency key is never retried: a retry could duplicate it.
    WriteWithoutKey,
}

impl StopReason {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            StopReason::Fatal => "fatal error",
            StopReason::Unknown => "unknown error",
            StopReason::AttemptsExhausted => "attempts exhausted",
            StopReason::WriteWithoutKey => "write without idempotency key",
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
        // Without a key nothing stops the platform from running a write twice. With one, the
        // platform answers a repeat with the first result, so the write goes on like a read.
        if shape.write && !shape.has_idempotency_key {
            return Verdict::Stop(StopReason::WriteWithoutKey);
        }
        // Free for keyed writes too: even if the close came after the write arrived, the
        // repeat is deduplicated.
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

    /// Connect errors, 5xx answers and read timeouts all classify as Retry; the policy sees
    /// the class and whether the peer closed the connection.
    fn retry_class_failures() -> [FailureFacts; 2] {
        let peer = FailureFacts {
            class: ErrorClass::Retry,
            peer_closed: true,
        };
        [f(ErrorClass::Retry), peer]
    }

    #[test]
    fn keyed_write_is_retried_like_a_read_after_5xx_or_timeout() {
        // A 5xx or read timeout (the write may have arrived): retried, the platform dedupes.
        for n in 1..3 {
            assert_eq!(
                p().decide(f(ErrorClass::Retry), WRITE_KEY, at(n)),
                p().decide(f(ErrorClass::Retry), READ, at(n)),
            );
            assert_eq!(
                p().decide(f(ErrorClass::Retry), WRITE_KEY, at(n)),
                Verdict::RetryAfterBackoff
            );
        }
        // Within the same attempt cap as a read.
        assert_eq!(
            p().decide(f(ErrorClass::Retry), WRITE_KEY, at(3)),
            Verdict::Stop(StopReason::AttemptsExhausted)
        );
        // A peer close is free for a keyed write, like for a read.
        let peer = retry_class_failures()[1];
        assert_eq!(p().decide(peer, WRITE_KEY, at(3)), Verdict::RetryNow);
        assert_eq!(
            p().decide(
                peer,
                WRITE_KEY,
                Attempts {
                    counted: 3,
                    free: 2
                }
            ),
            Verdict::Stop(StopReason::AttemptsExhausted)
        );
    }

    #[test]
    fn keyless_write_is_never_retried() {
        for facts in retry_class_failures()
            .into_iter()
            .chain([f(ErrorClass::Slow)])
        {
            assert_eq!(
                p().decide(facts, WRITE_NOKEY, at(1)),
                Verdict::Stop(StopReason::WriteWithoutKey),
                "{facts:?}"
            );
        }
        // Caller errors keep their own reason.
        assert_eq!(
            p().decide(f(ErrorClass::Fatal), WRITE_NOKEY, at(1)),
            Verdict::Stop(StopReason::Fatal)
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
