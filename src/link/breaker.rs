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
    /// The default first open period.
    const INITIAL: Duration = Duration::from_secs(1);
    const MS: Duration = Duration::from_millis(1);

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
        // The first open period is the short initial one, not `open_s`.
        assert!(
            matches!(b.admit(t0), Decision::Reject { retry_in } if retry_in == INITIAL),
            "{:?}",
            b.admit(t0)
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
        assert!(!b.admit(t0 + INITIAL - MS).proceeds());
        let t1 = t0 + INITIAL;
        assert_eq!(b.admit(t1), Decision::Probe);
        assert_eq!(b.admit(t1), Decision::Probe);
        assert_eq!(b.admit(t1), Decision::Probe);
        assert!(matches!(b.admit(t1), Decision::Reject { .. }));
    }

    #[test]
    fn two_probe_successes_close() {
        let (mut b, t0) = tripped();
        let t1 = t0 + INITIAL;
        assert_eq!(b.admit(t1), Decision::Probe);
        assert_eq!(b.admit(t1), Decision::Probe);
        assert_eq!(b.record(t1, OK, true), None);
        assert_eq!(b.record(t1, OK, true), Some(Transition::Closed));
        assert_eq!(b.admit(t1), Decision::Allow);
    }

    #[test]
    fn any_probe_failure_reopens() {
        let (mut b, t0) = tripped();
        let t1 = t0 + INITIAL;
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
        // Re-opened for twice the first period.
        assert!(!b.admit(t1 + 2 * INITIAL - MS).proceeds());
        assert_eq!(b.admit(t1 + 2 * INITIAL), Decision::Probe);
    }

    #[test]
    fn ignored_probe_returns_its_slot() {
        let (mut b, t0) = tripped();
        let t1 = t0 + INITIAL;
        for _ in 0..3 {
            assert_eq!(b.admit(t1), Decision::Probe);
        }
        b.record(t1, Outcome::Ignored, true);
        assert_eq!(b.admit(t1), Decision::Probe);
    }

    #[test]
    fn lost_probes_are_replaced_after_open_s() {
        let (mut b, t0) = tripped();
        let t1 = t0 + INITIAL;
        for _ in 0..3 {
            b.admit(t1);
        }
        assert!(!b.admit(t1).proceeds());
        // Not after the short open time: a probe may legitimately take a whole read timeout.
        assert!(!b.admit(t1 + Duration::from_secs(29)).proceeds());
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

    /// Drive `callers` concurrent callers, each trying once every `every`, from `from` to
    /// `to` against an upstream that is down while `down(now)`; all outcomes of one tick are
    /// recorded after all its admissions, like calls in flight together. Returns the calls
    /// that reached the upstream and the Opened periods, in order.
    fn drive(
        b: &mut Breaker,
        from: Instant,
        to: Instant,
        every: Duration,
        callers: u32,
        down: impl Fn(Instant) -> bool,
    ) -> (u32, Vec<Duration>) {
        let (mut sent, mut opens) = (0, Vec::new());
        let mut now = from;
        while now < to {
            let admitted: Vec<Decision> = (0..callers)
                .map(|_| b.admit(now))
                .filter(|d| d.proceeds())
                .collect();
            sent += admitted.len() as u32;
            for d in admitted {
                let outcome = if down(now) { FAIL } else { OK };
                if let Some(Transition::Opened { open_for, .. }) =
                    b.record(now, outcome, d.is_probe())
                {
                    opens.push(open_for);
                }
            }
            now += every;
        }
        (sent, opens)
    }

    /// The first instant from `from` at which a call is let through as an ordinary call.
    fn closed_at(b: &mut Breaker, from: Instant, step: Duration) -> Instant {
        let mut now = from;
        for _ in 0..1_000_000 {
            if b.state(now) == State::Closed {
                return now;
            }
            while let Decision::Probe = b.admit(now) {
                if b.record(now, OK, true) == Some(Transition::Closed) {
                    return now;
                }
            }
            now += step;
        }
        panic!("never closed");
    }

    #[test]
    fn short_outage_reopens_for_about_a_second_and_closes_right_after_recovery() {
        let (mut b, t0) = tripped();
        // The upstream is back 600 ms after the trip: nobody calls before the first period
        // ends, and the breaker closes as soon as it does.
        let recovered = t0 + Duration::from_millis(600);
        let (sent, opens) = drive(&mut b, t0, recovered, 10 * MS, 4, |_| true);
        assert_eq!(
            (sent, opens.len()),
            (0, 0),
            "open: nothing reaches the upstream"
        );
        let closed = closed_at(&mut b, recovered, 10 * MS);
        assert_eq!(
            closed,
            t0 + INITIAL,
            "closed right after the first open period"
        );
        assert!(closed - recovered <= INITIAL);
        assert_eq!(b.admit(closed), Decision::Allow);
    }

    #[test]
    fn five_second_outage_costs_a_few_probes_and_ends_within_a_few_seconds() {
        let t0 = Instant::now();
        let mut b = Breaker::new(cfg(), t0);
        let recovered = t0 + Duration::from_secs(5);
        let (sent, opens) = drive(&mut b, t0, recovered, 10 * MS, 4, |n| n < recovered);
        // 20 samples to trip, then one round of probes per open period: 1 + 2 s fit in 5 s.
        assert_eq!(
            opens,
            [INITIAL, 2 * INITIAL, 4 * INITIAL],
            "opened at the trip and after each failed round of probes"
        );
        assert!(sent <= 20 + 3 * 2, "{sent} calls reached the upstream");
        let closed = closed_at(&mut b, recovered, 10 * MS);
        // The trip came 40 ms after the outage started (20 samples from 4 callers every
        // 10 ms); the open periods 1 + 2 + 4 s then end 2.04 s after the upstream is back.
        let lag = closed - recovered;
        assert!(
            lag <= Duration::from_millis(2_100),
            "closed {lag:?} after recovery"
        );
    }

    #[test]
    fn long_outage_open_time_doubles_to_the_cap() {
        let (mut b, t0) = tripped();
        let (_, opens) = drive(
            &mut b,
            t0,
            t0 + Duration::from_secs(300),
            10 * MS,
            4,
            |_| true,
        );
        let secs: Vec<u64> = opens.iter().map(|d| d.as_secs()).collect();
        assert_eq!(&secs[..7], [2, 4, 8, 16, 30, 30, 30], "{secs:?}");
        assert!(secs.iter().all(|&s| s <= 30));
        assert_eq!(b.current_open(), Duration::from_secs(30));
    }

    #[test]
    fn open_time_resets_after_the_breaker_closes() {
        let (mut b, t0) = tripped();
        // Two failed rounds: the open time is 4 s.
        let until = t0 + Duration::from_millis(3_010);
        let (_, opens) = drive(&mut b, t0, until, 10 * MS, 4, |_| true);
        assert_eq!(opens, [2 * INITIAL, 4 * INITIAL]);
        let closed = closed_at(&mut b, until, 10 * MS);
        assert_eq!(b.current_open(), INITIAL);
        // The next outage starts short again.
        let t = feed(&mut b, closed, 20, FAIL);
        assert!(
            matches!(t, Some(Transition::Opened { open_for, .. }) if open_for == INITIAL),
            "{t:?}"
        );
    }

    #[test]
    fn calls_during_a_long_outage_are_bounded() {
        let t0 = Instant::now();
        let mut b = Breaker::new(cfg(), t0);
        let end = t0 + Duration::from_secs(600);
        // 8 callers, each every 10 ms: 480,000 calls without a breaker.
        let (sent, opens) = drive(&mut b, t0, end, 10 * MS, 8, |_| true);
        // Open periods 1, 2, 4, 8, 16 s, then 30 s: 5 + 569 / 30 rounds of at most 3 probes.
        let rounds = opens.len() as u32 - 1;
        assert!((5..=5 + 19).contains(&rounds), "{rounds} rounds of probes");
        // 20 samples to trip (plus the rest of that tick's calls, in flight together), then
        // at most 3 probes per round.
        assert!(
            sent <= 20 + 8 + 3 * rounds,
            "{sent} calls reached the upstream in 10 minutes"
        );
        // The same outage with the old fixed 30 s open time costs about as much.
        let mut old = Breaker::new(
            BreakerConfig {
                initial_open_ms: 30_000,
                ..cfg()
            },
            t0,
        );
        let (old_sent, _) = drive(&mut old, t0, end, 10 * MS, 8, |_| true);
        assert!(
            sent <= old_sent + 3 * 5,
            "growing open time {sent} vs fixed {old_sent}"
        );
    }

    #[test]
    fn trips_report_the_current_open_time_for_the_fleet() {
        let (mut b, t0) = tripped();
        // What the gateway publishes is the Opened transition's `open_for`: the current open
        // time (1 s after the trip, 2 s after a failed probe), never `open_s`.
        assert_eq!(b.current_open(), INITIAL);
        let t1 = t0 + INITIAL;
        assert_eq!(b.admit(t1), Decision::Probe);
        assert_eq!(
            b.record(t1, FAIL, true),
            Some(Transition::Opened {
                open_for: 2 * INITIAL,
                reason: TripReason::ProbeFailed
            })
        );
    }

    #[test]
    fn force_open_adopts_the_fleet_open_time() {
        let t0 = Instant::now();
        let mut b = Breaker::new(cfg(), t0);
        b.force_open(t0, Duration::from_secs(4));
        let t1 = t0 + Duration::from_secs(4);
        assert_eq!(b.admit(t1), Decision::Probe);
        // This worker's failed probe grows the fleet's 4 s, not its own 1 s.
        assert!(matches!(
            b.record(t1, FAIL, true),
            Some(Transition::Opened { open_for, .. }) if open_for == Duration::from_secs(8)
        ));
    }

    #[test]
    fn initial_open_is_capped_by_open_s() {
        let t0 = Instant::now();
        let mut b = Breaker::new(
            BreakerConfig {
                open_s: 2,
                initial_open_ms: 5_000,
                ..cfg()
            },
            t0,
        );
        let t = feed(&mut b, t0, 20, FAIL);
        assert!(
            matches!(t, Some(Transition::Opened { open_for, .. }) if open_for == Duration::from_secs(2)),
            "{t:?}"
        );
    }
}
