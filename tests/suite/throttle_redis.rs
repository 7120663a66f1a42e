//! Fleet gates against a real Redis (a private redis-server, or REDIS_URL).

use crate::support;

use redis::Script;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use support::redis::TestRedis;
use syncfleet::config::Config;
use syncfleet::platform::{Api, Platform};
use syncfleet::throttle::aimd::{AimdParams, AimdState};
use syncfleet::throttle::{gate_keys, GateOutcome, GateRefusal, Gates, Lane};

const P: Platform = Platform::Taobao;
const A: Api = Api::ItemGet;

/// A gate without the boundary band: these tests check the bucket's timing, which a call
/// booked in the last 25 ms of a second would shift to the next one (the band has its own
/// injected-clock test below).
fn cfg(rate: f64, burst: f64, concurrency: u32) -> Config {
    let text = format!(
        "[gates.\"taobao.item_get\"]\nrate = {rate}\nburst = {burst}\nconcurrency = {concurrency}\nmax_wait_ms = 5000\naimd_step = 5\naimd_successes = 10\nboundary_band_ms = 0\n"
    );
    Config::parse(Path::new("test.toml"), &text).expect("test config")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_flush_mid_run_and_acquisition_continues() {
    let redis = TestRedis::start();
    let gates = Gates::redis_with_namespace(&cfg(5_000.0, 5_000.0, 8), &redis.url, &redis.prefix)
        .await
        .unwrap();
    let sha = Script::new(include_str!("../../src/throttle/acquire.lua"))
        .get_hash()
        .to_string();
    let mut con = redis.connection();
    let end = Instant::now() + Duration::from_millis(1200);
    let flush_at = Instant::now() + Duration::from_millis(400);
    let (mut before, mut after, mut flushed) = (0, 0, false);
    while Instant::now() < end {
        if !flushed && Instant::now() >= flush_at {
            let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut con).unwrap();
            let exists: Vec<i64> = redis::cmd("SCRIPT")
                .arg("EXISTS")
                .arg(&sha)
                .query(&mut con)
                .unwrap();
            assert_eq!(exists, vec![0], "the flush removed the script");
            flushed = true;
        }
        match gates
            .acquire(P, A, Lane::Bulk, Duration::from_millis(500))
            .await
        {
            Ok(_) if flushed => after += 1,
            Ok(_) => before += 1,
            // A response timeout on a starved CI machine is not what this test is about, nor
            // is the gate's own rate (a fast machine asks for more than 5,000 in a second, and
            // the next free token can be beyond the wait); any other error (NOSCRIPT above
            // all) fails it.
            Err(GateRefusal::Unreachable {
                timed_out: true, ..
            })
            | Err(GateRefusal::RetryAt(_)) => {}
            Err(e) => panic!("acquisition failed after {before} + {after}: {e}"),
        }
    }
    assert!(before > 10 && after > 10, "before {before}, after {after}");
    let exists: Vec<i64> = redis::cmd("SCRIPT")
        .arg("EXISTS")
        .arg(&sha)
        .query(&mut con)
        .unwrap();
    assert_eq!(exists, vec![1], "the script was loaded again on NOSCRIPT");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_workers_rate_limit_slows_every_worker_and_a_ban_pauses_all() {
    let redis = TestRedis::start();
    let config = cfg(100.0, 5.0, 8);
    let a = Gates::redis_with_namespace(&config, &redis.url, &redis.prefix)
        .await
        .unwrap();
    let b = Gates::redis_with_namespace(&config, &redis.url, &redis.prefix)
        .await
        .unwrap();
    a.report(
        P,
        A,
        GateOutcome::RateLimited {
            ban: None,
            quota_spent: false,
            app_wide: false,
        },
    );
    a.flush().await;
    let snap = b.snapshot().await.unwrap();
    let s = snap.iter().find(|s| s.platform == P && s.api == A).unwrap();
    // Nothing is known to have been admitted in the rejected second: the rate is cut to the
    // floor (2% of 100/s) until the measurement settles.
    assert_eq!(s.adaptive_rate, 2.0, "worker b sees the cut rate");
    // b's acquisitions are now paced at 2/s with a burst of one: three take about a second.
    let t = Instant::now();
    for _ in 0..3 {
        b.acquire(P, A, Lane::Bulk, Duration::from_secs(5))
            .await
            .unwrap();
    }
    assert!(
        t.elapsed() >= Duration::from_millis(400),
        "paced at the new rate: {:?}",
        t.elapsed()
    );

    a.report(
        P,
        A,
        GateOutcome::RateLimited {
            ban: Some(Duration::from_secs(3)),
            quota_spent: false,
            app_wide: false,
        },
    );
    a.flush().await;
    match b.acquire(P, A, Lane::Bulk, Duration::from_secs(1)).await {
        Err(GateRefusal::Paused { remaining, reason }) => {
            assert!(
                // 3 s from the report, less the flush and this call: generous on a loaded box.
                remaining > Duration::from_millis(1000) && remaining <= Duration::from_secs(3),
                "{remaining:?}"
            );
            assert!(reason.contains("ban"), "{reason}");
        }
        other => panic!("expected a pause, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spent_quota_pauses_until_the_reset_and_every_call_counts() {
    let redis = TestRedis::start();
    let gates = Gates::redis_with_namespace(&cfg(100.0, 5.0, 8), &redis.url, &redis.prefix)
        .await
        .unwrap();
    for _ in 0..3 {
        gates.report(P, A, GateOutcome::Success);
    }
    gates.report(P, A, GateOutcome::Failure);
    gates.report(P, A, GateOutcome::Failure);
    gates.flush().await;
    let used = |snaps: Vec<syncfleet::throttle::GateSnapshot>| {
        snaps
            .into_iter()
            .find(|s| s.platform == P && s.api == A)
            .unwrap()
            .used_today
    };
    assert_eq!(
        used(gates.snapshot().await.unwrap()),
        5,
        "failed calls count too"
    );
    gates.report(
        P,
        A,
        GateOutcome::RateLimited {
            ban: None,
            quota_spent: true,
            app_wide: false,
        },
    );
    gates.flush().await;
    assert_eq!(used(gates.snapshot().await.unwrap()), 6);
    let now = chrono::Utc::now();
    let to_reset = (syncfleet::time::QuotaDay::PLATFORM.next_reset(now) - now)
        .to_std()
        .unwrap();
    match gates
        .acquire(P, A, Lane::Bulk, Duration::from_secs(1))
        .await
    {
        Err(GateRefusal::Paused { remaining, reason }) => {
            let diff = to_reset.as_secs_f64() - remaining.as_secs_f64();
            assert!(
                diff.abs() < 5.0,
                "paused {remaining:?}, reset in {to_reset:?}"
            );
            assert!(reason.contains("quota"), "{reason}");
        }
        other => panic!("expected a pause until the reset, got {other:?}"),
    }
    // A spent quota is not a rate signal: the adaptive rate is untouched.
    let s = gates
        .snapshot()
        .await
        .unwrap()
        .into_iter()
        .find(|s| s.platform == P && s.api == A)
        .unwrap();
    assert_eq!(s.adaptive_rate, 100.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reservation_beyond_max_wait_is_refused_and_not_taken() {
    let redis = TestRedis::start();
    let gates = Gates::redis_with_namespace(&cfg(1.0, 1.0, 8), &redis.url, &redis.prefix)
        .await
        .unwrap();
    gates
        .acquire(P, A, Lane::Bulk, Duration::ZERO)
        .await
        .unwrap();
    let first = match gates
        .acquire(P, A, Lane::Bulk, Duration::from_millis(20))
        .await
    {
        Err(GateRefusal::RetryAt(d)) => d,
        other => panic!("expected RetryAt, got {other:?}"),
    };
    let second = match gates
        .acquire(P, A, Lane::Bulk, Duration::from_millis(20))
        .await
    {
        Err(GateRefusal::RetryAt(d)) => d,
        other => panic!("expected RetryAt, got {other:?}"),
    };
    // One interval (1 s, so a slow machine still asks inside it) from the first acquisition,
    // less the time since: how much less depends on the machine, so only the bounds that do
    // not race it are checked.
    assert!(
        first > Duration::ZERO && first <= Duration::from_secs(1),
        "{first:?}"
    );
    // Not taken: the second refusal names (about) the same time, not one interval later.
    assert!(second <= first, "{second:?} vs {first:?}");
    // Within the max wait, the caller sleeps once and goes.
    let p = gates
        .acquire(P, A, Lane::Bulk, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(p.waited() >= second / 2, "{:?} vs {second:?}", p.waited());
}

/// The GCRA script with an injected clock: burst, pacing, refusal not taken, the debt kept in
/// calls when the rate halves, and pauses.
#[test]
fn acquire_script_reserves_on_an_injected_clock() {
    let redis = TestRedis::start();
    let mut con = redis.connection();
    let k = gate_keys(&redis.prefix, P, A);
    let script = Script::new(include_str!("../../src/throttle/acquire.lua"));
    let t0: u64 = 1_700_000_000_000_000;
    let mut call = |now: u64, max_wait: u64| -> (i64, i64, String) {
        let (code, wait, reason, _rate, _second): (i64, i64, String, String, u64) = script
            .key(&k.bucket)
            .key(&k.aimd)
            .key(&k.pause)
            .key(&k.conf)
            .arg(10.0)
            .arg(3.0)
            .arg(max_wait)
            .arg(now)
            .invoke(&mut con)
            .unwrap();
        (code, wait, reason)
    };
    for _ in 0..3 {
        assert_eq!(call(t0, 1_000_000).0, 0, "burst of 3 goes now");
    }
    assert_eq!(call(t0, 1_000_000), (1, 100_000, String::new()));
    assert_eq!(call(t0, 1_000_000), (1, 200_000, String::new()));
    assert_eq!(call(t0, 1_000_000), (1, 300_000, String::new()));
    assert_eq!(
        call(t0, 150_000),
        (2, 400_000, String::new()),
        "beyond max wait: refused"
    );
    assert_eq!(
        call(t0, 150_000),
        (2, 400_000, String::new()),
        "and not taken"
    );
    // Halve the rate: the debt now costs 200 ms a call, so no extra burst appears, and the
    // burst follows the rate (3 -> 1.5 calls): the next cell is at 1.4 s - 1.5 x 200 ms.
    let mut con2 = redis.connection();
    let _: () = redis::cmd("HSET")
        .arg(&k.aimd)
        .arg("rate")
        .arg("5")
        .query(&mut con2)
        .unwrap();
    assert_eq!(call(t0, 10_000_000), (1, 1_100_000, String::new()));
    let until = t0 + 5_000_000;
    let _: () = redis::cmd("HSET")
        .arg(&k.pause)
        .arg("until")
        .arg(until)
        .arg("reason")
        .arg("ban")
        .query(&mut con2)
        .unwrap();
    assert_eq!(
        call(t0 + 1_000_000, 1_000_000),
        (3, 4_000_000, "ban".into())
    );
}

/// A report batch sent again because its reply was lost (a timeout after the script ran) is
/// applied once: the day's count and the rate cut do not double. What marks it applied is
/// one key per reporting process, whatever the number of batches (a key per batch, kept 10
/// minutes, was ~24,000 keys per busy gate and worker).
#[test]
fn a_report_batch_sent_twice_is_applied_once() {
    let redis = TestRedis::start();
    let mut con = redis.connection();
    let k = gate_keys(&redis.prefix, P, A);
    let script = Script::new(include_str!("../../src/throttle/report.lua"));
    let params = AimdParams::new(300.0, 15.0, 20);
    let now_us: u64 = 1_700_000_000_000_000;
    let mut send = |reporter: &str, batch: u64| -> (i64, String) {
        let (used, rate, _ceiling, _effect): (i64, String, String, i64) = script
            .key(&k.aimd)
            .key(&k.pause)
            .key(&k.conf)
            .key(k.quota("20260101"))
            .key(&k.bucket)
            .key(k.reporter(reporter))
            .arg(0)
            .arg(7)
            .arg((now_us / 1000 - 100).to_string())
            .arg(0)
            .arg("")
            .arg(params.max_rate)
            .arg(params.step)
            .arg(params.successes)
            .arg("")
            .arg(params.ceiling_factor)
            .arg(params.hit_cooldown_ms)
            .arg(60)
            .arg(now_us)
            .arg(5.0)
            .arg("")
            .arg("")
            .arg("")
            .arg(params.decrease_margin)
            .arg(params.ceiling_hold_ms)
            .arg(syncfleet::throttle::aimd::MIN_MEASURED)
            .arg(params.settle_ms)
            .arg(params.probe_every_ms)
            .arg("")
            .arg(batch)
            .invoke(&mut con)
            .unwrap();
        (used, rate)
    };
    let first = send("w1", 1);
    assert_eq!(first.0, 7);
    assert!(
        first.1.parse::<f64>().unwrap() < 300.0,
        "a rejection cut the rate: {first:?}"
    );
    // The same batch again: nothing more counted, the rate not cut again.
    assert_eq!(send("w1", 1), first);
    // Another batch counts, and another reporter's first batch too.
    assert_eq!(send("w1", 2).0, 14);
    assert_eq!(send("w2", 1).0, 21);
    // A long run of batches from two reporters: still one mark each.
    for batch in 3..200 {
        send("w1", batch);
    }
    assert_eq!(send("w1", 199).0, 7 * 200, "batch 199 again");
    let marks: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{}*", k.reporter("")))
        .query(&mut con)
        .unwrap();
    assert_eq!(marks.len(), 2, "{marks:?}");
}

/// report.lua implements the rules of the reference type `throttle::aimd`: one event sequence
/// through both, on one injected clock, gives the same rate, ceiling and bracket after every
/// event (a measurement opened, settled, a probe, a rejected probe, a rejection at a held
/// ceiling, recovery past the hold).
#[test]
fn report_script_matches_the_reference_aimd_type() {
    let redis = TestRedis::start();
    let mut con = redis.connection();
    let k = gate_keys(&redis.prefix, P, A);
    let params = AimdParams::new(300.0, 15.0, 20);
    let mut reference = AimdState::new(&params);
    let t0: u64 = 1_700_000_000_000; // ms, on a second boundary
                                     // (reported at, successes, sent at, rejected), ms after t0.
    let mut events: Vec<GateEvent> = Vec::new();
    // A ramp: 3 admitted every 10 ms from 0.5 s, answered 50 ms later; rejected at 0.6 s.
    for i in 0..10 {
        events.push((550 + i * 10, 3, 500 + i * 10, 0));
    }
    events.push((605, 0, 600, 1)); // opens a measurement, before most answers are in
    events.push((640, 0, 610, 1)); // an echo: absorbed
    events.push((660, 3, 595, 0)); // a late answer, sent before the rejection
    events.push((1_100, 2, 1_090, 0)); // settles the measurement (> 605 + 400)
                                       // Steady under the ceiling from 2 s; a rejection early in 5 s with 4 s still in the window.
    for ms in (2_000..5_000).step_by(100) {
        events.push((ms + 20, 3, ms, 0));
    }
    events.push((5_045, 0, 5_040, 1));
    events.push((5_500, 1, 5_450, 0)); // settles: the bracket is open
                                       // Probes half-way up the bracket once a second.
    for ms in (5_600..9_000).step_by(100) {
        events.push((ms + 20, 4, ms, 0));
    }
    events.push((9_030, 0, 9_010, 1)); // while probing: the bracket closes
    events.push((9_500, 1, 9_450, 0));
    for ms in (9_600..20_000).step_by(100) {
        events.push((ms + 20, 3, ms, 0));
    }
    events.push((20_030, 0, 20_010, 1)); // at a held ceiling: the next bracket 5% under
    events.push((20_500, 1, 20_450, 0));
    events.push((700_000, 2_000, 699_990, 0)); // past the hold
                                               // A token bucket of 30 at 30/s: read high at first (37 in a second), then drained at
                                               // 37/s after a one-second ban; the second rejection's reading is capped by what was
                                               // admitted between the two (AimdState::since_hit).
    let b = 800_000;
    for i in 0..37 {
        events.push((b + i * 25 + 20, 1, b + i * 25, 0));
    }
    events.push((b + 950, 0, b + 930, 1));
    events.push((b + 1_400, 1, b + 1_390, 0)); // settles: 37
                                               // Answered 300 ms late: the calls of the last 300 ms before the second rejection answer
                                               // after it, and still count toward the average (the span closes when it settles).
    let drain: Vec<u64> = (b + 1_930..b + 6_230).step_by(27).collect();
    let hit = (b + 6_255, 0, b + 6_235, 1);
    for &ms in drain.iter().filter(|&&ms| ms + 300 <= hit.0) {
        events.push((ms + 300, 1, ms, 0));
    }
    events.push(hit);
    for &ms in drain.iter().filter(|&&ms| ms + 300 > hit.0) {
        events.push((ms + 300, 1, ms, 0));
    }
    events.push((b + 6_700, 1, b + 6_690, 0)); // settles at the drain's average
    replay(&mut con, &k, &params, &mut reference, t0, &events);
    // The sequence went through every rule: a ramp measured exactly (30 in its second), an
    // open bracket probed, a rejected probe, a rejection at a held ceiling, a bucket drained
    // twice (its second reading, about 35, capped so the gate runs at the 30/s admitted in
    // between).
    // The gate runs a call a second under its ceiling.
    assert!(
        reference.ceiling.is_some_and(|c| (30.5..32.0).contains(&c)),
        "{:?}",
        reference.ceiling
    );
}

/// One event of a gate's life for [`replay`]: (reported at, successes, sent at, rejected
/// calls), ms after t0. Rejected calls come in one report (a batch), the first sent at "sent
/// at"; the reference type is told of each.
type GateEvent = (u64, u32, u64, u32);

/// Feed `events` to report.lua and to the reference type alike; after each, the rate, the
/// ceiling and the bracket's top must agree.
fn replay(
    con: &mut redis::Connection,
    k: &syncfleet::throttle::GateKeys,
    params: &AimdParams,
    reference: &mut AimdState,
    t0: u64,
    events: &[GateEvent],
) {
    let script = Script::new(include_str!("../../src/throttle/report.lua"));
    for &(ms, successes, sent, hits) in events {
        let hit = hits > 0;
        if hit {
            for _ in 0..hits {
                reference.on_rate_limited(params, t0 + sent, t0 + ms);
            }
        } else {
            reference.on_successes(params, successes, t0 + sent, t0 + ms);
        }
        let slots = if successes > 0 {
            format!("{}:{successes}", (t0 + sent) / 100)
        } else {
            String::new()
        };
        let (_used, rate, ceiling, _effect): (i64, String, String, i64) = script
            .key(&k.aimd)
            .key(&k.pause)
            .key(&k.conf)
            .key(k.quota("20260101"))
            .key(&k.bucket)
            .arg(successes)
            .arg(successes as u64 + u64::from(hits))
            .arg(if hit {
                (t0 + sent).to_string()
            } else {
                String::new()
            })
            .arg(0)
            .arg("")
            .arg(params.max_rate)
            .arg(params.step)
            .arg(params.successes)
            .arg(slots)
            .arg(params.ceiling_factor)
            .arg(params.hit_cooldown_ms)
            .arg(60)
            .arg((t0 + ms) * 1000)
            .arg(5.0)
            .arg("")
            .arg("")
            .arg("")
            .arg(params.decrease_margin)
            .arg(params.ceiling_hold_ms)
            .arg(syncfleet::throttle::aimd::MIN_MEASURED)
            .arg(params.settle_ms)
            .arg(params.probe_every_ms)
            .arg(hits)
            .invoke(con)
            .unwrap();
        let rate: f64 = rate.parse().unwrap();
        let ceiling: Option<f64> = ceiling.parse().ok();
        let upper: Option<f64> = redis::cmd("HGET")
            .arg(&k.aimd)
            .arg("upper")
            .query::<Option<String>>(con)
            .unwrap()
            .and_then(|u| u.parse().ok());
        let close = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => (a - b).abs() < 1e-6,
            (a, b) => a.is_none() && b.is_none(),
        };
        assert!(
            (rate - reference.rate).abs() < 1e-6,
            "at {ms} ms: lua {rate}, reference {}",
            reference.rate
        );
        assert!(
            close(ceiling, reference.ceiling),
            "at {ms} ms: lua {ceiling:?}, reference {:?}",
            reference.ceiling
        );
        assert!(
            close(upper, reference.upper),
            "at {ms} ms: lua {upper:?}, reference {:?}",
            reference.upper
        );
    }
}

/// A sliding window crossed by arrival jitter at a held ceiling (AimdState::settle): measured
/// exactly at 200, then 198/s for 21 s, then one call refused 300 ms into a second. Read
/// alone that second says 188; the platform refused that call alone and had admitted all the
/// gate sent since the last rejection, so the gate keeps one call of margin (199). The same
/// rejection followed by more (a drained bucket) keeps the lower reading, whether the fleet
/// reports them one by one or in one batch (ARGV 23 of report.lua).
#[test]
fn report_script_tells_a_lone_jitter_rejection_from_a_drain() {
    let redis = TestRedis::start();
    let mut con = redis.connection();
    let params = AimdParams::new(300.0, 15.0, 20);
    let t0: u64 = 1_700_000_000_000;
    // (refused beside it, sent as separate reports or as one batch, gate)
    for (others, batched, gate) in [
        (0u64, false, Api::ItemGet),
        (3, false, Api::ItemAdd),
        (3, true, Api::OrderList),
    ] {
        let k = gate_keys(&redis.prefix, P, gate);
        let mut reference = AimdState::new(&params);
        let mut events: Vec<GateEvent> = Vec::new();
        for slot in 0..9 {
            events.push((slot * 100 + 20, 20, slot * 100, 0));
        }
        events.push((870, 20, 850, 0));
        events.push((910, 0, 905, 1));
        // The gate runs on (the measurement settles at 1.32 s: exactly 200).
        for second in 1..23 {
            for slot in 0..10 {
                let n = if slot == 9 { 18 } else { 20 };
                let sent = second * 1000 + slot * 100;
                events.push((sent + 20, n, sent, 0));
            }
        }
        let second = 23_000;
        for slot in 0..3 {
            events.push((second + slot * 100 + 20, 20, second + slot * 100, 0));
        }
        if batched {
            events.push((second + 305, 0, second + 300, 1 + others as u32));
        } else {
            events.push((second + 305, 0, second + 300, 1));
            for i in 0..others {
                events.push((second + 315 + i * 5, 0, second + 310 + i * 5, 1));
            }
        }
        events.push((second + 750, 19, second + 700, 0)); // settles
        replay(&mut con, &k, &params, &mut reference, t0, &events);
        let c = reference.ceiling.unwrap_or_default();
        if others == 0 {
            assert_eq!(c, 199.0, "{reference:?}");
        } else {
            assert!((185.0..190.0).contains(&c), "{c}: {reference:?}");
        }
    }
}

/// The fleet's send-time check in acquire.lua: however many calls the bucket would let out,
/// at most rate + burst are booked in one clock second of the server, and none in the last
/// `boundary_band_ms` of a second.
/// A fleet call that woke too late for its booked second books again (acquire.lua ARGV 14):
/// that booking is neither counted in the day's budget again nor refused by it, so a loaded
/// worker never spends two of the day's calls on one call, nor loses the last one.
#[test]
fn a_late_waker_booking_again_counts_once_in_the_daily_budget() {
    let redis = TestRedis::start();
    let mut con = redis.connection();
    let k = gate_keys(&redis.prefix, P, A);
    let script = Script::new(include_str!("../../src/throttle/acquire.lua"));
    let day = "20260101";
    let t0: u64 = 1_700_000_000_000_000;
    let mut book = |again: bool| -> i64 {
        let (code, _wait, _reason, _rate, _second): (i64, i64, String, String, u64) = script
            .key(&k.bucket)
            .key(&k.aimd)
            .key(&k.pause)
            .key(&k.conf)
            .key(k.quota(day))
            .key(k.booked(day))
            .arg(10.0) // rate
            .arg(5.0) // burst
            .arg(10_000_000) // max wait (us)
            .arg(t0)
            .arg(0) // band
            .arg(1) // the lane's part
            .arg(1) // bulk
            .arg(0) // pacing: spend
            .arg(2) // the gate's daily quota
            .arg(0) // no app quota
            .arg(86_400_000)
            .arg(0) // no interactive share
            .arg(60)
            .arg(if again { "1" } else { "0" })
            .invoke(&mut con)
            .unwrap();
        code
    };
    let booked = |con: &mut redis::Connection| -> i64 {
        redis::cmd("GET")
            .arg(k.booked(day))
            .query::<Option<i64>>(con)
            .unwrap()
            .unwrap_or(0)
    };
    assert!(book(false) <= 1, "first call booked");
    let mut check = redis.connection();
    assert_eq!(booked(&mut check), 1);
    assert!(book(true) <= 1, "booked again");
    assert_eq!(booked(&mut check), 1, "a booking again is not counted");
    assert!(book(false) <= 1, "second call booked");
    assert_eq!(booked(&mut check), 2);
    // The budget is spent by the calls themselves: the second call's booking again still goes.
    assert!(book(true) <= 1, "not refused by its own first booking");
    assert_eq!(
        book(false),
        3,
        "a third call is paused: the budget is spent"
    );
    assert_eq!(booked(&mut check), 2);
}

#[test]
fn acquire_script_keeps_the_fleet_inside_each_clock_second() {
    let redis = TestRedis::start();
    let mut con = redis.connection();
    let k = gate_keys(&redis.prefix, P, A);
    let script = Script::new(include_str!("../../src/throttle/acquire.lua"));
    let t0: u64 = 1_700_000_000_000_000 + 900_000; // us, 100 ms before a boundary
    let (rate, burst, band_ms) = (100.0, 20.0, 25u64);
    let mut per_second = std::collections::BTreeMap::<u64, u32>::new();
    for _ in 0..400 {
        let (code, wait, _reason, _rate, _second): (i64, i64, String, String, u64) = script
            .key(&k.bucket)
            .key(&k.aimd)
            .key(&k.pause)
            .key(&k.conf)
            .arg(rate)
            .arg(burst)
            .arg(10_000_000)
            .arg(t0)
            .arg(band_ms)
            .invoke(&mut con)
            .unwrap();
        assert!(code <= 1, "booked");
        let at = t0 + wait as u64;
        assert!(
            at % 1_000_000 < 1_000_000 - band_ms * 1000,
            "booked in the band: {at}"
        );
        *per_second.entry(at / 1_000_000).or_default() += 1;
    }
    assert!(
        per_second.values().all(|&n| n <= (rate + burst) as u32),
        "{per_second:?}"
    );
    // 400 calls from 100 ms before a boundary: the bucket alone would put 20 + 10 into the
    // first 100 ms and 100 + its burst into the next second.
    assert!(per_second.len() >= 4, "{per_second:?}");
}

/// The band costs no rate: at 100/s with a burst of one, a backlog of callers (a busy fleet's
/// tasks all waiting at the gate) gets 100 calls into every clock second, none in the band. A
/// call held to the boundary takes the place of the next second's own band calls; when it
/// moved the bucket on from the boundary, each second lost its band's share (98 calls).
#[test]
fn the_boundary_band_costs_no_rate_at_a_burst_of_one() {
    let redis = TestRedis::start();
    let mut con = redis.connection();
    let k = gate_keys(&redis.prefix, P, A);
    let script = Script::new(include_str!("../../src/throttle/acquire.lua"));
    let band_ms = 25u64;
    let now: u64 = 1_700_000_000_000_000;
    let mut per_second = std::collections::BTreeMap::<u64, u32>::new();
    for _ in 0..900 {
        let (code, wait, _reason, _rate, _second): (i64, i64, String, String, u64) = script
            .key(&k.bucket)
            .key(&k.aimd)
            .key(&k.pause)
            .key(&k.conf)
            .arg(100.0)
            .arg(1.0)
            .arg(20_000_000)
            .arg(now)
            .arg(band_ms)
            .invoke(&mut con)
            .unwrap();
        assert!(code <= 1, "booked");
        let at = now + wait as u64;
        assert!(
            at % 1_000_000 < 1_000_000 - band_ms * 1000,
            "booked in the band: {at}"
        );
        *per_second.entry(at / 1_000_000).or_default() += 1;
    }
    // The whole seconds after the first.
    let whole: Vec<u32> = per_second.values().copied().skip(1).take(8).collect();
    assert!(whole.iter().all(|&n| n == 100), "{per_second:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gate_show_lists_the_override_and_the_adaptive_state() {
    let redis = TestRedis::start();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("syncfleet.toml");
    std::fs::write(
        &config,
        "[platforms.taobao]\nendpoint = \"http://127.0.0.1:9/router/rest\"\napp_key = \"k\"\n\
         secret_env = \"SF_GATE_SHOW_UNUSED\"\ndaily_quota = 1000\n\n\
         [gates.\"taobao.item_get\"]\nrate = 100\nburst = 10\npacing = \"even\"\n",
    )
    .unwrap();
    let cfg = Config::load(&config).unwrap();
    let gates = Gates::redis_with_namespace(&cfg, &redis.url, &redis.prefix)
        .await
        .unwrap();
    // One call booked against the app's daily quota.
    drop(
        gates
            .acquire(
                P,
                A,
                syncfleet::throttle::Lane::Interactive,
                Duration::from_secs(1),
            )
            .await
            .unwrap(),
    );
    gates.set_rate(P, A, 40.0, None).await.unwrap();
    gates.report(
        P,
        A,
        GateOutcome::RateLimited {
            ban: Some(Duration::from_secs(30)),
            quota_spent: false,
            app_wide: false,
        },
    );
    gates.flush().await;
    let out = Command::new(env!("CARGO_BIN_EXE_syncfleet"))
        .args(["--redis", &redis.url, "--config"])
        .arg(&config)
        .args(["gate", "show", "--namespace", &redis.prefix])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("taobao.item_get"))
        .expect("a line per gate");
    let cols: Vec<&str> = line.split_whitespace().collect();
    // Nothing admitted is known in the rejected second: cut to the floor (2% of 40/s).
    assert_eq!(&cols[1..5], &["40*", "10", "30", "0.8"], "{line}");
    assert!(line.contains("platform ban"), "{line}");
    assert_eq!(cols[10], "even", "{line}");
    assert!(
        stdout.contains("app taobao: 1 of 1000 calls booked today"),
        "the app's day:\n{stdout}"
    );
    assert!(
        stdout.contains("taobao.logistics_trace") && !stdout.contains("jd."),
        "every gate of the configured platforms is listed:\n{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn measured_p95_latency_is_shared_with_the_fleet() {
    let redis = TestRedis::start();
    let config = cfg(10_000.0, 10_000.0, 16);
    let worker = Gates::redis_with_namespace(&config, &redis.url, &redis.prefix)
        .await
        .unwrap();
    let observer = Gates::redis_with_namespace(&config, &redis.url, &redis.prefix)
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let worker = worker.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..8 {
                let permit = worker
                    .acquire(P, A, Lane::Bulk, Duration::from_secs(1))
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(30)).await; // the "call"
                drop(permit);
                worker.report(P, A, GateOutcome::Success);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    worker.flush().await;
    let s = observer
        .snapshot()
        .await
        .unwrap()
        .into_iter()
        .find(|s| s.platform == P && s.api == A)
        .unwrap();
    let p95 = s.p95_ms_measured.expect("64 calls are enough for a p95");
    assert!((30..1_000).contains(&p95), "p95 {p95} ms for 30 ms calls");
    assert_eq!(s.used_today, 64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ban_cancels_reservations_other_workers_are_sleeping_on() {
    let redis = TestRedis::start();
    // One token in 5 s: the ban below reaches the sleeper long before its token, however slow
    // the machine.
    let config = cfg(0.2, 1.0, 8);
    let a = Gates::redis_with_namespace(&config, &redis.url, &redis.prefix)
        .await
        .unwrap();
    let b = Gates::redis_with_namespace(&config, &redis.url, &redis.prefix)
        .await
        .unwrap();
    // Both pause listeners have subscribed (Redis counts them).
    let channel = format!("{}:gates:pause", redis.prefix);
    let mut con = redis.connection();
    support::queue::eventually(30, "both gates listen for pauses", || {
        let subscribed: Vec<(String, u32)> = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(&channel)
            .query(&mut con)
            .unwrap();
        let n = subscribed.first().map_or(0, |(_, n)| *n);
        async move { n >= 2 }
    })
    .await;
    b.acquire(P, A, Lane::Bulk, Duration::ZERO).await.unwrap();
    // The next token is 5 s away: b reserves it and sleeps.
    let sleeper = {
        let b = b.clone();
        tokio::spawn(async move { b.acquire(P, A, Lane::Bulk, Duration::from_secs(10)).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    a.report(
        P,
        A,
        GateOutcome::RateLimited {
            // Longer than the sleep: the reservation must not fire when it wakes.
            ban: Some(Duration::from_secs(60)),
            quota_spent: false,
            app_wide: false,
        },
    );
    a.flush().await;
    match sleeper.await.unwrap() {
        Err(GateRefusal::Paused { reason, .. }) => assert!(reason.contains("ban"), "{reason}"),
        other => panic!("the sleeping reservation fired into the ban: {other:?}"),
    }
}

/// Fair shares at the gate (acquire.lua ARGV 15-17; docs/design.md, "Fair shares at the
/// gate"): a shop alone books as fast as the gate lets it; while another shop books too and
/// calls are booked ahead, each books at its weighted part of the rate, and a call further
/// ahead than one turn of its shop's pace is told when its turn comes; a shop that stopped
/// booking leaves its part to the others.
#[test]
fn shops_booking_together_each_get_their_weighted_part_of_the_rate() {
    let redis = TestRedis::start();
    let mut con = redis.connection();
    let k = gate_keys(&redis.prefix, P, A);
    let script = Script::new(include_str!("../../src/throttle/acquire.lua"));
    let t0: u64 = 1_700_000_000_000_000;
    // (code, wait us) of one bulk booking of `shop` at `now`, rate 40/s (25 ms), burst 1.
    let mut book = |shop: &str, weight: u32, now: u64| -> (i64, i64) {
        let (code, wait, _reason, _rate, _second): (i64, i64, String, String, u64) = script
            .key(&k.bucket)
            .key(&k.aimd)
            .key(&k.pause)
            .key(&k.conf)
            .key(k.quota("20260101"))
            .key(k.booked("20260101"))
            .key(&k.shares)
            .key(&k.share_weights)
            .arg(40.0) // rate
            .arg(1.0) // burst
            .arg(60_000_000) // max wait (us)
            .arg(now)
            .arg(0) // band
            .arg(1) // the lane's part
            .arg(1) // bulk
            .arg(0) // pacing: spend
            .arg(0) // no daily quota
            .arg(0) // no app quota
            .arg(86_400_000)
            .arg(0) // no interactive share
            .arg(60)
            .arg("0")
            .arg(shop)
            .arg(weight)
            .arg(7) // the shares' keys start at KEYS[7]
            .invoke(&mut con)
            .unwrap();
        (code, wait)
    };
    // Alone at the gate, a shop books as far ahead as it may wait: 40 calls, a second.
    for _ in 0..40 {
        assert!(book("big", 1, t0).0 <= 1);
    }
    // Both shops keep asking every 5 ms for 4 s: each call over its shop's pace is told
    // when its turn comes (code 4), never booked.
    let mut booked = std::collections::HashMap::<&str, u32>::new();
    let mut told_to_wait = 0;
    for step in 0..800u64 {
        let now = t0 + step * 5_000;
        for shop in ["big", "small"] {
            let (code, wait) = book(shop, 1, now);
            match code {
                0 | 1 => *booked.entry(shop).or_default() += 1,
                4 => {
                    told_to_wait += 1;
                    assert!(wait >= 1_000, "{wait}");
                }
                other => panic!("code {other}"),
            }
        }
    }
    let (big, small) = (booked["big"], booked["small"]);
    assert!(told_to_wait > 0);
    // Once the big shop's second booked alone has gone by (1 s), 3 s at 40/s, half each.
    assert!(small.abs_diff(60) <= 5, "small {small}, big {big}");
    assert!(big.abs_diff(small) <= 4, "small {small}, big {big}");
    // The small shop stops (its job is done, or its task gave its slot back): it counts until
    // its next turn and a quarter of a second after its last call leaves (which it booked up
    // to 200 ms ahead), so the big shop is no longer held to half the rate half a second
    // later. Counted for a second, its part went unused meanwhile (1.17 s here): 6% of the
    // gate at 400/s with 20 shops taking turns.
    let after = t0 + 800 * 5_000;
    let mut last_paced_ms = 0;
    for step in 0..400u64 {
        if book("big", 1, after + step * 5_000).0 == 4 {
            last_paced_ms = step * 5;
        }
    }
    assert!(
        last_paced_ms <= 600,
        "the big shop was still held to half the rate {last_paced_ms} ms after the small one stopped"
    );
    // Weights: a shop of weight 3 beside one of weight 1 books three calls to its one.
    let later = t0 + 60_000_000;
    let mut booked = std::collections::HashMap::<&str, u32>::new();
    for step in 0..800u64 {
        let now = later + step * 5_000;
        for (shop, weight) in [("heavy", 3), ("light", 1)] {
            if book(shop, weight, now).0 <= 1 {
                *booked.entry(shop).or_default() += 1;
            }
        }
    }
    let (heavy, light) = (booked["heavy"], booked["light"]);
    assert!(
        (heavy as f64 / light as f64 - 3.0).abs() < 0.3,
        "heavy {heavy}, light {light}"
    );
    // The earlier shops stopped booking a minute ago: they weigh nothing any more.
    let mut check = redis.connection();
    let shops: Vec<String> = redis::cmd("ZRANGE")
        .arg(&k.shares)
        .arg(0)
        .arg(-1)
        .query(&mut check)
        .unwrap();
    assert_eq!(shops.len(), 2, "{shops:?}");
    assert!(!shops.contains(&"big".to_string()), "{shops:?}");
    let sum: i64 = redis::cmd("HGET")
        .arg(&k.share_weights)
        .arg("_sum")
        .query(&mut check)
        .unwrap();
    assert_eq!(sum, 4);
}
