//! Admission by limit kind, the quota day, bans, and drills changing the limits at run time.

use super::window::ban_seconds;
use super::*;
use chrono::TimeZone;
use std::time::Duration;

fn sim(per_second: u64, daily: u64) -> Sim {
    Sim::new(SimConfig::demo().with_limit(Platform::Taobao, Api::ItemGet, per_second, daily))
        .unwrap()
}

#[test]
fn per_second_window_and_peak() {
    let s = sim(2, 100);
    let app = s.app(Platform::Taobao, "10000001").unwrap();
    let slot = s.slot(app, Api::ItemGet);
    let t = Utc.with_ymd_and_hms(2026, 3, 1, 4, 0, 0).unwrap();
    assert_eq!(slot.admit(t), Admit::Ok);
    assert_eq!(slot.admit(t), Admit::Ok);
    assert_eq!(slot.admit(t), Admit::Limited { ban_s: 1 });
    // Next second: the window is free again.
    assert_eq!(slot.admit(t + chrono::Duration::seconds(1)), Admit::Ok);
    let st = slot.snapshot(t);
    assert_eq!(
        (st.calls, st.peak_per_second, st.quota_used_today),
        (4, 3, 4)
    );
}

#[test]
fn a_ban_refuses_every_call_for_its_seconds_after_a_rejection() {
    let s = Sim::new(
        SimConfig::demo()
            .with_limit(Platform::Taobao, Api::ItemGet, 2, 100)
            .with_limit_ban(Platform::Taobao, Api::ItemGet, 2),
    )
    .unwrap();
    let app = s.app(Platform::Taobao, "10000001").unwrap();
    let slot = s.slot(app, Api::ItemGet);
    let t =
        Utc.with_ymd_and_hms(2026, 3, 1, 4, 0, 0).unwrap() + chrono::Duration::milliseconds(900);
    assert_eq!(slot.admit(t), Admit::Ok);
    assert_eq!(slot.admit(t), Admit::Ok);
    assert_eq!(slot.admit(t), Admit::Limited { ban_s: 2 });
    // The window frees at the boundary, the ban does not.
    let ms = |n| t + chrono::Duration::milliseconds(n);
    assert_eq!(slot.admit(ms(200)), Admit::Limited { ban_s: 2 });
    assert_eq!(slot.admit(ms(1_500)), Admit::Limited { ban_s: 1 });
    assert_eq!(slot.admit(ms(2_000)), Admit::Ok);
}

#[test]
fn quota_counts_refused_calls_and_bans_until_reset() {
    let s = sim(1, 3);
    let app = s.app(Platform::Taobao, "10000001").unwrap();
    let slot = s.slot(app, Api::ItemGet);
    // 23:59:00 GMT+8: the quota resets in 60 s.
    let t = Utc.with_ymd_and_hms(2026, 3, 1, 15, 59, 0).unwrap();
    assert_eq!(slot.admit(t), Admit::Ok);
    assert_eq!(slot.admit(t), Admit::Limited { ban_s: 1 });
    assert_eq!(slot.admit(t), Admit::Limited { ban_s: 1 });
    assert_eq!(slot.admit(t), Admit::QuotaSpent { ban_s: 60 });
    // After the reset the day starts over.
    assert_eq!(slot.admit(t + chrono::Duration::seconds(61)), Admit::Ok);
}

fn kind_sim(kind: LimitKind, per_second: u64, burst: Option<u64>) -> Sim {
    Sim::new(
        SimConfig::demo()
            .with_limit(Platform::Taobao, Api::ItemGet, per_second, 1_000_000)
            .with_limit_kind(Platform::Taobao, Api::ItemGet, kind, burst),
    )
    .unwrap()
}

fn ms(t: DateTime<Utc>, ms: i64) -> DateTime<Utc> {
    t + chrono::Duration::milliseconds(ms)
}

#[test]
fn each_kind_admits_exactly_its_burst_at_one_instant() {
    let t =
        Utc.with_ymd_and_hms(2026, 3, 1, 4, 0, 0).unwrap() + chrono::Duration::milliseconds(250);
    for (kind, per_second, burst, admitted) in [
        (LimitKind::Fixed, 3, None, 3),
        (LimitKind::Sliding, 3, None, 3),
        (LimitKind::Bucket, 3, None, 3),
        (LimitKind::Bucket, 3, Some(7), 7),
    ] {
        let s = kind_sim(kind, per_second, burst);
        let slot = s.slot(s.app(Platform::Taobao, "10000001").unwrap(), Api::ItemGet);
        let answers: Vec<Admit> = (0..10).map(|_| slot.admit(t)).collect();
        let ok = answers.iter().filter(|a| **a == Admit::Ok).count();
        assert_eq!(ok, admitted, "{kind}: {answers:?}");
        // Admitted first, then refused with the platforms' whole-second ban.
        assert!(
            answers[..admitted].iter().all(|a| *a == Admit::Ok),
            "{kind}"
        );
        assert!(
            answers[admitted..]
                .iter()
                .all(|a| *a == Admit::Limited { ban_s: 1 }),
            "{kind}: {answers:?}"
        );
        // Quota and peak count every call whatever the kind.
        let st = slot.snapshot(t);
        assert_eq!(
            (st.calls, st.quota_used_today, st.peak_per_second),
            (10, 10, 10),
            "{kind}"
        );
        assert_eq!(st.limit_kind, kind);
        assert_eq!(st.limit_burst, burst.unwrap_or(per_second));
    }
}

#[test]
fn sliding_refuses_what_a_fixed_window_admits_after_a_second_boundary() {
    let t = Utc.with_ymd_and_hms(2026, 3, 1, 4, 0, 0).unwrap();
    let fixed = kind_sim(LimitKind::Fixed, 2, None);
    let sliding = kind_sim(LimitKind::Sliding, 2, None);
    let app = fixed.app(Platform::Taobao, "10000001").unwrap();
    let (f, s) = (
        fixed.slot(app, Api::ItemGet),
        sliding.slot(app, Api::ItemGet),
    );
    // Two calls late in second 0 (at .800 and .900).
    for at in [800, 900] {
        assert_eq!(f.admit(ms(t, at)), Admit::Ok);
        assert_eq!(s.admit(ms(t, at)), Admit::Ok);
    }
    // Just after the boundary: a new fixed window, but the last 1,000 ms hold two calls.
    // The .800 call leaves at 1.800: 700 ms, answered as 1 s.
    assert_eq!(f.admit(ms(t, 1100)), Admit::Ok);
    assert_eq!(s.admit(ms(t, 1100)), Admit::Limited { ban_s: 1 });
    assert_eq!(s.admit(ms(t, 1799)), Admit::Limited { ban_s: 1 });
    // A call exactly 1,000 ms old has left the window.
    assert_eq!(s.admit(ms(t, 1800)), Admit::Ok);
    assert_eq!(s.admit(ms(t, 1850)), Admit::Limited { ban_s: 1 });
    assert_eq!(s.admit(ms(t, 1900)), Admit::Ok);
    // Never more than 2 in any 1,000 ms of this run: .800 .900 1.800 1.900; every
    // call counts against the quota.
    let st = s.snapshot(t);
    assert_eq!((st.calls, st.quota_used_today), (7, 7));
}

#[test]
fn sliding_ban_waits_for_the_call_that_frees_room() {
    // A drill lowering the limit below what the window holds: room opens only when
    // enough calls have left, not the oldest alone.
    let s = kind_sim(LimitKind::Sliding, 3, None);
    let slot = s.slot(s.app(Platform::Taobao, "10000001").unwrap(), Api::ItemGet);
    let t = Utc.with_ymd_and_hms(2026, 3, 1, 4, 0, 0).unwrap();
    for at in [0, 100, 200] {
        assert_eq!(slot.admit(ms(t, at)), Admit::Ok);
    }
    slot.per_second.store(1, Relaxed);
    assert_eq!(slot.admit(ms(t, 1050)), Admit::Limited { ban_s: 1 });
    assert_eq!(slot.admit(ms(t, 1150)), Admit::Limited { ban_s: 1 });
    assert_eq!(slot.admit(ms(t, 1200)), Admit::Ok);
}

#[test]
fn bucket_admits_burst_at_once_then_per_second() {
    let s = kind_sim(LimitKind::Bucket, 2, Some(4));
    let slot = s.slot(s.app(Platform::Taobao, "10000001").unwrap(), Api::ItemGet);
    let t = Utc.with_ymd_and_hms(2026, 3, 1, 4, 0, 0).unwrap();
    let ok_at = |at: i64| slot.admit(ms(t, at)) == Admit::Ok;
    assert_eq!((0..10).filter(|_| ok_at(0)).count(), 4);
    // Then one token every 500 ms: calls every 50 ms get exactly 2 per second.
    for sec in 0..3 {
        let admitted = (1..=20).filter(|i| ok_at(sec * 1000 + i * 50)).count();
        assert_eq!(admitted, 2, "second {sec}");
    }
    // A quiet spell refills the bucket up to `burst`, not beyond.
    assert_eq!((0..10).filter(|_| ok_at(60_000)).count(), 4);
    // An instant earlier than one already seen (racing handlers) does not rewind it.
    assert_eq!(slot.admit(ms(t, 59_000)), Admit::Limited { ban_s: 1 });
}

#[test]
fn ban_seconds_round_up_to_whole_seconds() {
    assert_eq!(ban_seconds(Duration::ZERO), 1);
    assert_eq!(ban_seconds(Duration::from_millis(1)), 1);
    assert_eq!(ban_seconds(Duration::from_millis(1000)), 1);
    assert_eq!(ban_seconds(Duration::from_millis(1001)), 2);
    assert_eq!(ban_seconds(Duration::from_secs(59)), 59);
}

#[test]
fn drill_switches_limit_kind_and_burst_at_run_time() {
    let s = kind_sim(LimitKind::Fixed, 2, None);
    let app = s.app(Platform::Taobao, "10000001").unwrap();
    let slot = s.slot(app, Api::ItemGet);
    let t = Utc.with_ymd_and_hms(2026, 3, 1, 4, 0, 0).unwrap();
    let burst = |at: DateTime<Utc>| (0..10).filter(|_| slot.admit(at) == Admit::Ok).count();
    assert_eq!(burst(t), 2);
    let patch: DrillPatch = serde_json::from_str(
        r#"{"limit":{"api":"item_get","platform":"taobao","kind":"bucket","burst":6}}"#,
    )
    .unwrap();
    s.set_drill(&patch).unwrap();
    let st = slot.snapshot(t);
    assert_eq!(
        (st.limit_kind, st.limit_burst, st.limit_per_second),
        (LimitKind::Bucket, 6, 2)
    );
    assert_eq!(burst(ms(t, 10)), 6);
    // A changed rate builds a new (full) bucket.
    s.set_drill(&DrillPatch {
        limit: Some(super::super::drill::LimitOverride {
            api: Api::ItemGet,
            platform: None,
            per_second: Some(3),
            daily: None,
        }),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(burst(ms(t, 20)), 6);
    // Other platforms and apis keep their kind.
    let jd = s.app(Platform::Jd, "simjdapp").unwrap();
    assert_eq!(s.slot(jd, Api::ItemGet).limit_kind(), LimitKind::Fixed);
    assert_eq!(s.slot(app, Api::ItemAdd).limit_kind(), LimitKind::Fixed);
    s.set_drill(&DrillPatch {
        limit_kind: Some(super::super::drill::LimitKindOverride {
            api: Api::ItemGet,
            platform: Some(Platform::Taobao),
            kind: Some(LimitKind::Sliding),
            burst: None,
        }),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(burst(ms(t, 30)), 3);
    s.set_drill(&DrillPatch {
        clear: true,
        ..Default::default()
    })
    .unwrap();
    let st = slot.snapshot(t);
    assert_eq!(
        (st.limit_kind, st.limit_burst, st.limit_per_second),
        (LimitKind::Fixed, 2, 2)
    );
    assert_eq!(burst(ms(t, 2000)), 2);
}

#[test]
fn drill_limits_override_and_clear_restores() {
    let s = sim(5, 100);
    let patch = DrillPatch {
        limit: Some(super::super::drill::LimitOverride {
            api: Api::ItemGet,
            platform: Some(Platform::Taobao),
            per_second: Some(1),
            daily: None,
        }),
        ..Default::default()
    };
    s.set_drill(&patch).unwrap();
    let app = s.app(Platform::Taobao, "10000001").unwrap();
    assert_eq!(
        s.slot(app, Api::ItemGet)
            .snapshot(Utc::now())
            .limit_per_second,
        1
    );
    s.set_drill(&DrillPatch {
        clear: true,
        ..Default::default()
    })
    .unwrap();
    assert_eq!(
        s.slot(app, Api::ItemGet)
            .snapshot(Utc::now())
            .limit_per_second,
        5
    );
}
