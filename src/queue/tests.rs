use super::*;

#[test]
fn backoff_doubles_and_caps() {
    let o = QueueOptions {
        retry_base: Duration::from_millis(100),
        retry_cap: Duration::from_millis(500),
        ..QueueOptions::default()
    };
    assert_eq!(o.retry_backoff(1), Duration::from_millis(100));
    assert_eq!(o.retry_backoff(2), Duration::from_millis(200));
    assert_eq!(o.retry_backoff(3), Duration::from_millis(400));
    assert_eq!(o.retry_backoff(4), Duration::from_millis(500));
    assert_eq!(o.retry_backoff(60), Duration::from_millis(500));
}

#[test]
fn retry_and_dead_letter_settings_come_from_the_config_clamped() {
    let o = QueueOptions::from_config(&QueueConfig {
        retry_base_ms: 250,
        retry_cap_s: 10,
        dead_max: 0,
        consumer_gc_idle_s: 5,
        ..QueueConfig::default()
    });
    assert_eq!(o.retry_backoff(1), Duration::from_millis(250));
    assert_eq!(o.retry_backoff(20), Duration::from_secs(10));
    assert_eq!(o.dead_max, 1);
    assert_eq!(o.consumer_gc_idle, Duration::from_secs(60));
    // A cap below the base is the base.
    let o = QueueOptions::from_config(&QueueConfig {
        retry_base_ms: 5000,
        retry_cap_s: 1,
        ..QueueConfig::default()
    });
    assert_eq!(o.retry_backoff(3), Duration::from_secs(5));
}

#[test]
fn claim_idle_is_heartbeat_times_missed() {
    let o = QueueOptions::from_config(&QueueConfig::default());
    assert_eq!(o.claim_idle(), Duration::from_secs(30));
    assert!(o.push_batch >= 1 && o.push_batch <= 20_000);
}

#[test]
fn worker_names_are_unique() {
    let a = worker_name();
    let b = worker_name();
    assert_ne!(a, b);
    assert!(a.contains(&format!("-{}-", std::process::id())));
}

#[tokio::test]
async fn panics_become_failures() {
    let h = |_m: TaskMsg, ctx: TaskCtx| async move {
        if ctx.attempt == 1 {
            panic!("boom");
        }
        TaskResult::Done
    };
    let msg = TaskMsg {
        job_id: 1,
        kind: crate::store::JobKind::Listing,
        chunk: 0,
        keys: vec![],
        shop: String::new(),
        lane: Default::default(),
    };
    let ctx = TaskCtx::detached;
    let (r, panicked) = run_caught(&h, msg.clone(), ctx(1)).await;
    assert!(panicked);
    assert!(matches!(r, TaskResult::Failed(ref m) if m.contains("boom")));
    assert_eq!(run_caught(&h, msg, ctx(2)).await, (TaskResult::Done, false));
}

#[tokio::test]
async fn shutdown_wait_resolves_after_trigger() {
    let s = Shutdown::new();
    assert!(!s.is_triggered());
    let s2 = s.clone();
    let t = tokio::spawn(async move { s2.wait().await });
    s.trigger();
    tokio::time::timeout(Duration::from_secs(2), t)
        .await
        .expect("wait resolves")
        .expect("join");
    assert!(s.is_triggered());
}

#[test]
fn a_task_names_its_kind_as_the_ledger_spells_it() {
    let wire = r#"{"job_id":7,"kind":"orders","chunk":2,"keys":["a"]}"#;
    let msg: TaskMsg = serde_json::from_str(wire).expect("a task written before kinds were typed");
    assert_eq!(msg.kind, crate::store::JobKind::Orders);
    let again = serde_json::to_string(&msg).expect("encode");
    assert!(again.contains(r#""kind":"orders""#), "{again}");
    let odd = r#"{"job_id":7,"kind":"refunds","chunk":2,"keys":["a"]}"#;
    assert!(serde_json::from_str::<TaskMsg>(odd).is_err());
}

/// The hashes of `keys`, as a list or a set.
fn hashes<C: FromIterator<u64>>(keys: &[&str]) -> C {
    keys.iter().map(|k| LiveCover::key_hash(k)).collect()
}

#[test]
fn a_live_cover_knows_each_jobs_keys_and_no_others() {
    let task = |job_id: i64, keys: &[&str]| TaskMsg {
        job_id,
        kind: crate::store::JobKind::Listing,
        chunk: 0,
        keys: keys.iter().map(|k| k.to_string()).collect(),
        shop: String::new(),
        lane: Lane::Bulk,
    };
    let mut cover = LiveCover::default();
    assert!(cover.wants_nothing());
    cover.want(1, hashes(&["a", "b", "c", "d", "a"]));
    cover.want(2, hashes(&["c"]));
    cover.want(3, hashes(&["a"]));
    assert!(!cover.wants_nothing());
    cover.add(&task(1, &["a", "b", "x"]));
    cover.add(&task(2, &["c"]));
    cover.add(&task(4, &["a"]));
    assert!(cover.covers(1, "a") && cover.covers(1, "b") && cover.covers(2, "c"));
    assert!(!cover.covers(1, "c"), "another job's key");
    assert!(!cover.covers(3, "a"), "a job with no task");
    assert!(!cover.covers(1, "x"), "a key not wanted is not kept");
    assert!(cover.covers_hash(2, LiveCover::key_hash("c")));
    assert_eq!(cover.uncovered(1), hashes(&["c", "d"]));
    assert_eq!(cover.uncovered(3), hashes(&["a"]));
    assert!(cover.uncovered(2).is_empty() && cover.uncovered(9).is_empty());
}
