//! Circuit breaker per (platform, api): a pure state machine with an injected clock.
//!
//! closed → open when, over a rolling window with at least `min_samples` counted calls, the
//! failure ratio exceeds `failure_ratio` or the slow-call ratio exceeds `slow_ratio`;
//! open → half-open after `open_s`; half-open admits `half_open_probes` probes, `close_after`
//! successes close it, any failure re-opens it. Caller errors (Fatal) and rate limits (Slow,
//! handled by the gates) are not upstream failures and are not counted.
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
pub enum Outcome {
    /// The upstream answered usefully (`slow`: it took longer than `slow_call_ms`).
    Success { slow: bool },
    /// Upstream failure (transport error, 5xx, gateway timeout).
    Failure { slow: bool },
    /// Not an upstream-health signal (caller error, rate limit, refused before sending).
    Ignored,
}

/// The answer to "may this call go?".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
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
    /// Whether the call may proceed.
    pub fn proceeds(self) -> bool {
        !matches!(self, Decision::Reject { .. })
    }
    pub fn is_probe(self) -> bool {
        matches!(self, Decision::Probe)
    }
}

/// Why the breaker opened.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TripReason {
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
pub enum Transition {
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
    Closed,
    Open {
        remaining: Duration,
    },
    HalfOpen {
        probes_admitted: u32,
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
pub struct Breaker {
    cfg: BreakerConfig,
    origin: Instant,
    bucket_len: Duration,
    buckets: [Bucket; BUCKETS],
    inner: Inner,
}

impl Breaker {
    pub fn new(cfg: BreakerConfig, now: Instant) -> Self {
        let window = Duration::from_secs(cfg.window_s.max(1));
        Breaker {
            cfg,
            origin: now,
            bucket_len: window / BUCKETS as u32,
            buckets: [Bucket::default(); BUCKETS],
            inner: Inner::Closed,
        }
    }

    pub fn observe_only(&self) -> bool {
        self.cfg.observe_only
    }

    fn open_for(&self) -> Duration {
        Duration::from_secs(self.cfg.open_s)
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
    pub fn state(&mut self, now: Instant) -> State {
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
            // after another open period without a verdict, hand out fresh probe slots.
            Inner::HalfOpen { since, .. }
                if now.saturating_duration_since(since) >= self.open_for() =>
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
    pub fn admit(&mut self, now: Instant) -> Decision {
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
                    let next = (*since + Duration::from_secs(self.cfg.open_s))
                        .saturating_duration_since(now);
                    refuse(next.min(Duration::from_secs(1)), observe)
                }
            }
        }
    }

    /// Record the outcome of a call admitted earlier.
    pub fn record(
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
        let open_for = self.open_for();
        self.inner = Inner::Open {
            until: now + open_for,
        };
        self.reset_window();
        Transition::Opened { open_for, reason }
    }

    /// Another worker tripped this breaker: stay open for `remaining` (never shortens a
    /// longer local open period). Returns the transition when this changed the state.
    pub fn force_open(&mut self, now: Instant, remaining: Duration) -> Option<Transition> {
        let until = now + remaining;
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
mod tests {
    use super::*;

    fn cfg() -> BreakerConfig {
        BreakerConfig::default()
    }

    fn feed(b: &mut Breaker, now: Instant, n: u32, outcome: Outcome) -> Option<Transition> {
        let mut last = None;
        for _ in 0..n {
            assert!(b.admit(now).proceeds());
            if let Some(t) = b.record(now, outcome, false) {
                last = Some(t);
            }
        }
        last
    }

    const FAIL: Outcome = Outcome::Failure { slow: false };
    const OK: Outcome = Outcome::Success { slow: false };

    #[test]
    fn does_not_open_below_min_samples() {
        let t0 = Instant::now();
        let mut b = Breaker::new(cfg(), t0);
        assert_eq!(feed(&mut b, t0, 19, FAIL), None);
        assert_eq!(b.admit(t0), Decision::Allow);
    }

    #[test]
    fn opens_on_failure_ratio_with_min_samples() {
        let t0 = Instant::now();
        let mut b = Breaker::new(cfg(), t0);
        feed(&mut b, t0, 9, OK);
        let t = feed(&mut b, t0, 11, FAIL);
        assert!(
            matches!(
                t,
                Some(Transition::Opened {
                    reason: TripReason::FailureRatio { samples: 20, .. },
                    ..
                })
            ),
            "{t:?}"
        );
        assert!(
            matches!(b.admit(t0), Decision::Reject { retry_in } if retry_in == Duration::from_secs(30))
        );
    }

    #[test]
    fn exactly_half_failures_does_not_open() {
        let t0 = Instant::now();
        let mut b = Breaker::new(cfg(), t0);
        feed(&mut b, t0, 10, OK);
        assert_eq!(feed(&mut b, t0, 10, FAIL), None);
    }

    #[test]
    fn old_samples_leave_the_window() {
        let t0 = Instant::now();
        let mut b = Breaker::new(cfg(), t0);
        feed(&mut b, t0, 15, FAIL);
        // 11 s later the first 15 failures are out of the 10 s window.
        let t1 = t0 + Duration::from_secs(11);
        assert_eq!(feed(&mut b, t1, 10, FAIL), None);
        assert_eq!(b.state(t1), State::Closed);
    }

    #[test]
    fn caller_errors_do_not_count() {
        let t0 = Instant::now();
        let mut b = Breaker::new(cfg(), t0);
        feed(&mut b, t0, 100, Outcome::Ignored);
        feed(&mut b, t0, 10, OK);
        assert_eq!(
            feed(&mut b, t0, 9, FAIL),
            None,
            "19 counted samples is below the minimum"
        );
    }

    #[test]
    fn slow_ratio_opens() {
        let t0 = Instant::now();
        let mut b = Breaker::new(cfg(), t0);
        let t = feed(&mut b, t0, 20, Outcome::Success { slow: true });
        assert!(
            matches!(
                t,
                Some(Transition::Opened {
                    reason: TripReason::SlowRatio { .. },
                    ..
                })
            ),
            "{t:?}"
        );
    }

    fn tripped() -> (Breaker, Instant) {
        let t0 = Instant::now();
        let mut b = Breaker::new(cfg(), t0);
        feed(&mut b, t0, 20, FAIL);
        (b, t0)
    }

    #[test]
    fn half_open_after_open_period_admits_three_probes() {
        let (mut b, t0) = tripped();
        assert!(!b.admit(t0 + Duration::from_secs(29)).proceeds());
        let t1 = t0 + Duration::from_secs(30);
        assert_eq!(b.admit(t1), Decision::Probe);
        assert_eq!(b.admit(t1), Decision::Probe);
        assert_eq!(b.admit(t1), Decision::Probe);
        assert!(matches!(b.admit(t1), Decision::Reject { .. }));
    }

    #[test]
    fn two_probe_successes_close() {
        let (mut b, t0) = tripped();
        let t1 = t0 + Duration::from_secs(30);
        assert_eq!(b.admit(t1), Decision::Probe);
        assert_eq!(b.admit(t1), Decision::Probe);
        assert_eq!(b.record(t1, OK, true), None);
        assert_eq!(b.record(t1, OK, true), Some(Transition::Closed));
        assert_eq!(b.admit(t1), Decision::Allow);
    }

    #[test]
    fn any_probe_failure_reopens() {
        let (mut b, t0) = tripped();
        let t1 = t0 + Duration::from_secs(30);
        assert_eq!(b.admit(t1), Decision::Probe);
        assert_eq!(b.admit(t1), Decision::Probe);
        assert_eq!(b.record(t1, OK, true), None);
        let t = b.record(t1, FAIL, true);
        assert!(matches!(
            t,
            Some(Transition::Opened {
                reason: TripReason::ProbeFailed,
                ..
            })
        ));
        assert!(!b.admit(t1 + Duration::from_secs(29)).proceeds());
    }

    #[test]
    fn ignored_probe_returns_its_slot() {
        let (mut b, t0) = tripped();
        let t1 = t0 + Duration::from_secs(30);
        for _ in 0..3 {
            assert_eq!(b.admit(t1), Decision::Probe);
        }
        b.record(t1, Outcome::Ignored, true);
        assert_eq!(b.admit(t1), Decision::Probe);
    }

    #[test]
    fn lost_probes_are_replaced_after_an_open_period() {
        let (mut b, t0) = tripped();
        let t1 = t0 + Duration::from_secs(30);
        for _ in 0..3 {
            b.admit(t1);
        }
        assert!(!b.admit(t1).proceeds());
        assert_eq!(b.admit(t1 + Duration::from_secs(30)), Decision::Probe);
    }

    #[test]
    fn observe_only_never_refuses_but_says_so() {
        let t0 = Instant::now();
        let mut b = Breaker::new(
            BreakerConfig {
                observe_only: true,
                ..cfg()
            },
            t0,
        );
        let t = feed(&mut b, t0, 20, FAIL);
        assert!(matches!(t, Some(Transition::Opened { .. })));
        let d = b.admit(t0);
        assert!(matches!(d, Decision::WouldReject { .. }), "{d:?}");
        assert!(d.proceeds());
    }

    #[test]
    fn force_open_from_the_fleet() {
        let t0 = Instant::now();
        let mut b = Breaker::new(cfg(), t0);
        let t = b.force_open(t0, Duration::from_secs(12));
        assert!(matches!(
            t,
            Some(Transition::Opened {
                reason: TripReason::Fleet,
                ..
            })
        ));
        assert!(
            matches!(b.admit(t0), Decision::Reject { retry_in } if retry_in == Duration::from_secs(12))
        );
        // A shorter remote period does not shorten ours.
        assert_eq!(b.force_open(t0, Duration::from_secs(1)), None);
        assert!(!b.admit(t0 + Duration::from_secs(5)).proceeds());
        assert_eq!(b.admit(t0 + Duration::from_secs(12)), Decision::Probe);
    }

    #[test]
    fn outcomes_finishing_while_open_are_ignored() {
        let (mut b, t0) = tripped();
        assert_eq!(b.record(t0, OK, false), None);
        assert!(matches!(b.state(t0), State::Open { .. }));
    }
}
