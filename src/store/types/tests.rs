use super::*;

#[test]
fn text_enums_round_trip() {
    for s in ItemStatus::ALL {
        assert_eq!(s.as_str().parse::<ItemStatus>(), Ok(*s));
    }
    for k in JobKind::ALL {
        assert_eq!(k.to_string().parse::<JobKind>(), Ok(*k));
    }
    assert!("bogus".parse::<CallClass>().is_err());
}

fn summary(
    state: JobState,
    counts: StatusCounts,
    created_at: DateTime<Utc>,
    finished_at: Option<DateTime<Utc>>,
) -> JobSummary {
    JobSummary {
        id: 1,
        kind: JobKind::Listing,
        state,
        total: counts.pending + counts.terminal(),
        counts,
        created_at,
        finished_at,
        control: None,
    }
}

fn at(s: &str) -> DateTime<Utc> {
    s.parse().expect("test instant")
}

#[test]
fn finished_job_rate_is_over_its_life_whenever_asked() {
    // 100,000 items in 1,034 s: 96.7 items/s, asked right after it finished, a minute
    // later and a day later (it once read 80.7, then 0.0).
    let job = summary(
        JobState::Finished,
        StatusCounts {
            done: 99_000,
            failed: 600,
            skipped: 400,
            ..Default::default()
        },
        at("2026-12-01T10:00:00Z"),
        Some(at("2026-12-01T10:17:14Z")),
    );
    let expected = 100_000.0 / 1034.0;
    for now in [
        "2026-12-01T10:17:14Z",
        "2026-12-01T10:20:00Z",
        "2026-12-02T10:00:00Z",
    ] {
        // `recent` is what the last minute saw: irrelevant once finished.
        for recent in [0, 5_000] {
            let rate = job.rate_per_sec(recent, at(now));
            assert!((rate - expected).abs() < 1e-9, "{now} {recent}: {rate}");
        }
    }
}

#[test]
fn running_job_rate_is_over_the_last_minute_or_its_life() {
    let counts = StatusCounts {
        pending: 10,
        done: 90,
        ..Default::default()
    };
    let created = at("2026-12-01T10:00:00Z");
    let job = summary(JobState::Running, counts, created, None);
    // Older than the window: the last minute's items over 60 s.
    assert!((job.rate_per_sec(120, at("2026-12-01T10:05:00Z")) - 2.0).abs() < 1e-9);
    // 20 s old: over its 20 s of life.
    assert!((job.rate_per_sec(40, at("2026-12-01T10:00:20Z")) - 2.0).abs() < 1e-9);
    // Younger than a second: over one second, not a burst divided by ~0.
    assert!((job.rate_per_sec(3, at("2026-12-01T10:00:00.200Z")) - 3.0).abs() < 1e-9);
}

#[test]
fn finished_job_without_items_has_no_rate() {
    let t = at("2026-12-01T10:00:00Z");
    let job = summary(JobState::Finished, StatusCounts::default(), t, Some(t));
    assert_eq!(job.rate_per_sec(0, t), 0.0);
}

#[test]
fn eta_uses_rate() {
    let status = JobStatus {
        job: JobSummary {
            id: 1,
            kind: JobKind::Listing,
            state: JobState::Running,
            total: 100,
            counts: StatusCounts {
                pending: 50,
                done: 50,
                ..Default::default()
            },
            created_at: Utc::now(),
            finished_at: None,
            control: None,
        },
        spec: "{}".into(),
        rate_per_sec: 10.0,
    };
    assert_eq!(status.eta(), Some(Duration::from_secs(5)));
    assert!((status.job.percent() - 50.0).abs() < 1e-9);
    // Paused: the last minute's rate says nothing of when it will be resumed.
    let mut paused = status.clone();
    paused.job.control = Some(JobControl::Paused);
    assert_eq!(paused.eta(), None);
}

#[test]
fn an_api_is_judged_wasteful_only_on_enough_calls() {
    let calls = |calls, useful| ApiCalls {
        platform: Platform::Taobao,
        api: Api::OrderList,
        calls,
        useful,
    };
    // A probe's two calls a day, none useful: nothing to judge.
    assert!(!calls(2, 0).wasteful());
    assert!(!calls(ApiCalls::CALLS_TO_JUDGE - 1, 0).wasteful());
    assert!(calls(ApiCalls::CALLS_TO_JUDGE, 29).wasteful());
    assert!(!calls(ApiCalls::CALLS_TO_JUDGE, 30).wasteful());
    assert!(!calls(1000, 1000).wasteful());
}
