//! Circuit breaker per (platform, api): a pure state machine with an injected clock.
//!
//! closed → open when, over a rolling window with at least `min_samples` counted calls, the
//! failure ratio exceeds `failure_ratio` or the slow-call ratio exceeds `slow_ratio`;
//! open → half-open after the current open time; half-open admits `half_open_probes` probes,
//! `close_after` successes close it, any failure re-opens it. Caller errors (Fatal) and rate
//! limits (Slow, handled by the gates) are not upstream failures and are not counted.
//!
//! The open time follows the outage: the first trip opens for `initial_open_ms` (~1 s), each
//! failed half-open probe doubles it up to `open_s`, and closing resets it. A short outage
//! thus costs about its own length plus one short period, while a long one still costs only
//! a few probes per `open_s`.
//!
//! In observe-only mode the machine runs the same way but never refuses a call: it answers
//! [`Decision::WouldReject`] so the caller can log what it would have done.
//!
//! Fleet sharing lives in `shared.rs`: a trip is published as "open for N ms" and other
//! workers feed it in with [`Breaker::force_open`].

use crate::config::BreakerConfig;
use std::time::{Duration, Instant};

/// What one finished call means to the breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The upstream answered usefully (`slow`: it took longer than `slow_call_ms`).
    Success { slow: bool },
    /// Upstream failure (transport error, 5xx, gateway timeout).
    Failure { slow: bool },
    /// Not an upstream-health signal (caller error, rate limit, refused before sending).
    Ignored,
}

/// The answer to "may this call go?".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    Allow,
    /// Allowed as one of the half-open probes: report its outcome with `was_probe = true`.
    Probe,
    /// Refused: the breaker is open (or half-open with its probes taken) for `retry_in`.
    Reject {
        retry_in: Duration,
    },
    /// Observe-only mode: the call goes, but an enforcing breaker would have refused it.
    WouldReject {
        retry_in: Duration,
    },
}

impl Decision {
    #[cfg(test)]
    /// Whether the call may proceed.
    pub(crate) fn proceeds(self) -> bool {
        !matches!(self, Decision::Reject { .. })
    }
    pub(crate) fn is_probe(self) -> bool {
        matches!(self, Decision::Probe)
    }
}

/// Why the breaker opened.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum TripReason {
    FailureRatio {
        ratio: f64,
        samples: u32,
    },
    SlowRatio {
        ratio: f64,
        samples: u32,
    },
    /// A half-open probe failed.
    ProbeFailed,
    /// Another worker published the trip.
    Fleet,
}

impl std::fmt::Display for TripReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TripReason::FailureRatio { ratio, samples } => {
                write!(
                    f,
                    "failure ratio {:.0}% over {samples} calls",
                    ratio * 100.0
                )
            }
            TripReason::SlowRatio { ratio, samples } => {
                write!(
                    f,
                    "slow-call ratio {:.0}% over {samples} calls",
                    ratio * 100.0
                )
            }
            TripReason::ProbeFailed => f.write_str("half-open probe failed"),
            TripReason::Fleet => f.write_str("opened by another worker"),
        }
    }
}

/// A state change, for logging and for publishing to the fleet.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Transition {
    Opened {
        open_for: Duration,
        reason: TripReason,
    },
    HalfOpened,
    Closed,
}

/// Observable state (snapshots, logs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Calls pass; their outcomes fill the rolling window.
    Closed,
    /// Calls are refused.
    Open {
        /// Time left until the breaker half-opens.
        remaining: Duration,
    },
    /// A few probe calls are let through to test the upstream.
    HalfOpen {
        /// Probe calls admitted since the breaker half-opened.
        probes_admitted: u32,
        /// Probes that succeeded so far.
        successes: u32,
    },
}

#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    /// Index of the time slot this bucket currently holds.
    slot: u64,
    total: u32,
    failures: u32,
    slow: u32,
}

#[derive(Debug, Clone, Copy)]
enum Inner {
    Closed,
    Open {
        until: Instant,
    },
    HalfOpen {
        since: Instant,
        admitted: u32,
        successes: u32,
    },
}

/// Number of buckets the rolling window is cut into (1 s each for the default 10 s window).
const BUCKETS: usize = 10;

#[derive(Debug, Clone)]
pub(crate) struct Breaker {
    cfg: BreakerConfig,
    origin: Instant,
    bucket_len: Duration,
    buckets: [Bucket; BUCKETS],
    inner: Inner,
    /// Length of the current (or last) open period; the next failed probe doubles it.
    open_for: Duration,
}

impl Breaker {
    pub(crate) fn new(cfg: BreakerConfig, now: Instant) -> Self {
        let window = Duration::from_secs(cfg.window_s.max(1));
        let mut b = Breaker {
            cfg,
            origin: now,
            bucket_len: window / BUCKETS as u32,
            buckets: [Bucket::default(); BUCKETS],
            inner: Inner::Closed,
            open_for: Duration::ZERO,
        };
        b.open_for = b.initial_open();
        b
    }

    pub(crate) fn observe_only(&self) -> bool {
        self.cfg.observe_only
    }

    /// The cap of the open time (`open_s`, at least 1 ms so a zero config still opens).
    fn max_open(&self) -> Duration {
        Duration::from_secs(self.cfg.open_s).max(Duration::from_millis(1))
    }

    /// The first open period after a trip from closed.
    fn initial_open(&self) -> Duration {
        Duration::from_millis(self.cfg.initial_open_ms.max(1)).min(self.max_open())
    }

    #[cfg(test)]
    /// The open time the next trip (or the current open period) uses.
    pub(crate) fn current_open(&self) -> Duration {
        self.open_for
    }

    fn slot(&self, now: Instant) -> u64 {
        let elapsed = now.saturating_duration_since(self.origin);
        (elapsed.as_nanos() / self.bucket_len.as_nanos().max(1)) as u64
    }

    /// Counts over the buckets still inside the window.
    fn window_counts(&self, now: Instant) -> (u32, u32, u32) {
        let current = self.slot(now);
        self.buckets
            .iter()
            .filter(|b| b.total > 0 && current.saturating_sub(b.slot) < BUCKETS as u64)
            .fold((0, 0, 0), |(t, f, s), b| {
                (t + b.total, f + b.failures, s + b.slow)
            })
    }

    fn reset_window(&mut self) {
        self.buckets = [Bucket::default(); BUCKETS];
    }

    /// Advance time-driven transitions (open → half-open) and report the state.
    pub(crate) fn state(&mut self, now: Instant) -> State {
        self.tick(now);
        match self.inner {
            Inner::Closed => State::Closed,
            Inner::Open { until } => State::Open {
                remaining: until.saturating_duration_since(now),
            },
            Inner::HalfOpen {
                admitted,
                successes,
                ..
            } => State::HalfOpen {
                probes_admitted: admitted,
                successes,
            },
        }
    }

    fn tick(&mut self, now: Instant) -> Option<Transition> {
        match self.inner {
            Inner::Open { until } if now >= until => {
                self.inner = Inner::HalfOpen {
                    since: now,
                    admitted: 0,
                    successes: 0,
                };
                Some(Transition::HalfOpened)
            }
            // Probes that never report (a cancelled call) must not wedge half-open forever:
            // after `open_s` without a verdict, hand out fresh probe slots. Not the current
            // (short) open time: a probe against a hanging upstream legitimately takes a
            // whole read timeout, and re-issuing probes sooner would only pile more on it.
            Inner::HalfOpen { since, .. }
                if now.saturating_duration_since(since) >= self.max_open() =>
            {
                self.inner = Inner::HalfOpen {
                    since: now,
                    admitted: 0,
                    successes: 0,
                };
                None
            }
            _ => None,
        }
    }

    /// May a call go now?
    pub(crate) fn admit(&mut self, now: Instant) -> Decision {
        self.tick(now);
        let refuse = |retry_in: Duration, observe: bool| {
            if observe {
                Decision::WouldReject { retry_in }
            } else {
                Decision::Reject { retry_in }
            }
        };
        let observe = self.cfg.observe_only;
        match &mut self.inner {
            Inner::Closed => Decision::Allow,
            Inner::Open { until } => refuse(until.saturating_duration_since(now), observe),
            Inner::HalfOpen {
                since, admitted, ..
            } => {
                if *admitted < self.cfg.half_open_probes {
                    *admitted += 1;
                    Decision::Probe
                } else {
                    // Probes are out; their verdict comes within one call's time.
                    let next = (*since + self.max_open()).saturating_duration_since(now);
                    refuse(next.min(Duration::from_secs(1)), observe)
                }
            }
        }
    }

    /// Record the outcome of a call admitted earlier.
    pub(crate) fn record(
        &mut self,
        now: Instant,
        outcome: Outcome,
        was_probe: bool,
    ) -> Option<Transition> {
        let ticked = self.tick(now);
        let changed = match self.inner {
            Inner::Closed => {
                if outcome == Outcome::Ignored {
                    return ticked;
                }
                let slot = self.slot(now);
                let b = &mut self.buckets[(slot % BUCKETS as u64) as usize];
                if b.slot != slot {
                    *b = Bucket {
                        slot,
                        ..Bucket::default()
                    };
                }
                b.total += 1;
                match outcome {
                    Outcome::Failure { slow } => {
                        b.failures += 1;
                        b.slow += u32::from(slow);
                    }
                    Outcome::Success { slow } => b.slow += u32::from(slow),
                    Outcome::Ignored => {}
                }
                self.evaluate(now)
            }
            // Calls admitted before the trip finish while open: their verdict is already in.
            Inner::Open { .. } => None,
            Inner::HalfOpen {
                since,
                admitted,
                successes,
            } => {
                if !was_probe {
                    return ticked;
                }
                match outcome {
                    Outcome::Ignored => {
                        // Give the slot back: a caller error says nothing about the upstream.
                        self.inner = Inner::HalfOpen {
                            since,
                            admitted: admitted.saturating_sub(1),
                            successes,
                        };
                        None
                    }
                    Outcome::Failure { .. } => Some(self.trip(now, TripReason::ProbeFailed)),
                    Outcome::Success { .. } => {
                        let successes = successes + 1;
                        if successes >= self.cfg.close_after {
                            self.inner = Inner::Closed;
                            self.reset_window();
                            // The upstream is back: the next outage starts short again.
                            self.open_for = self.initial_open();
                            Some(Transition::Closed)
                        } else {
                            self.inner = Inner::HalfOpen {
                                since,
                                admitted,
                                successes,
                            };
                            None
                        }
                    }
                }
            }
        };
        changed.or(ticked)
    }

    fn evaluate(&mut self, now: Instant) -> Option<Transition> {
        let (total, failures, slow) = self.window_counts(now);
        if total < self.cfg.min_samples.max(1) {
            return None;
        }
        let failure_ratio = failures as f64 / total as f64;
        let slow_ratio = slow as f64 / total as f64;
        if failure_ratio > self.cfg.failure_ratio {
            Some(self.trip(
                now,
                TripReason::FailureRatio {
                    ratio: failure_ratio,
                    samples: total,
                },
            ))
        } else if slow_ratio > self.cfg.slow_ratio {
            Some(self.trip(
                now,
                TripReason::SlowRatio {
                    ratio: slow_ratio,
                    samples: total,
                },
            ))
        } else {
            None
        }
    }

    fn trip(&mut self, now: Instant, reason: TripReason) -> Transition {
        // Only a failed probe grows the open time: it is the evidence that the upstream is
        // still down after a whole open period. A trip from closed starts short.
        let open_for = match self.inner {
            Inner::HalfOpen { .. } => self.open_for.saturating_mul(2).min(self.max_open()),
            _ => self.initial_open(),
        };
        self.open_for = open_for;
        self.inner = Inner::Open {
            until: now + open_for,
        };
        self.reset_window();
        Transition::Opened { open_for, reason }
    }

    /// Another worker tripped this breaker: stay open for `remaining` (never shortens a
    /// longer local open period). Returns the transition when this changed the state.
    pub(crate) fn force_open(&mut self, now: Instant, remaining: Duration) -> Option<Transition> {
        let until = now + remaining;
        // Take over the fleet's open time, so a probe failing here next grows it from there
        // rather than from this worker's own (possibly shorter) step.
        self.open_for = self.open_for.max(remaining.min(self.max_open()));
        match self.inner {
            Inner::Open { until: mine } if mine >= until => None,
            Inner::Open { .. } => {
                self.inner = Inner::Open { until };
                None
            }
            _ => {
                self.inner = Inner::Open { until };
                self.reset_window();
                Some(Transition::Opened {
                    open_for: remaining,
                    reason: TripReason::Fleet,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests;
