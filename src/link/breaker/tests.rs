//! The breaker driven with explicit instants: opening on failure and slow ratios, half-open
//! probes, observe-only mode, fleet trips, and the open time growing and resetting with outages.

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
            if let Some(Transition::Opened { open_for, .. }) = b.record(now, outcome, d.is_probe())
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
