//! The SQL ledger against real databases: each test body runs on SQLite (a file in a temporary
//! directory) and on PostgreSQL (a fresh database on the server `scripts/test` provides);
//! tests of one backend's own features say so.

use crate::support;
use syncfleet_testkit::on_both_backends;

use chrono::{Duration as ChronoDuration, TimeZone, Utc};
use std::time::Duration;
use support::ledger::{Kind, TestLedger};
use syncfleet::platform::{Api, ErrorClass, Platform};
use syncfleet::store::*;

#[test]
fn test_databases_replace_only_the_path_of_the_server_url() {
    use support::postgres::with_database;
    assert_eq!(
        with_database(
            "postgres://u:p@127.0.0.1:5432/postgres?sslmode=disable",
            "x"
        ),
        "postgres://u:p@127.0.0.1:5432/x?sslmode=disable"
    );
    assert_eq!(with_database("postgres://u@h", "x"), "postgres://u@h/x");
}

fn keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("item-{i:06}")).collect()
}

on_both_backends!(
    a_listing_is_claimed_by_one_job_before_its_write,
    a_group_records_its_listings_claims_carry_and_outcomes_together,
    migrations_apply_twice_idempotently,
    only_migrate_creates_a_ledger,
    fleet_id_is_made_once_and_kept,
    dead_items_fail_finish_the_job_and_revive,
    create_job_is_atomic,
    empty_job_is_created_finished,
    rerun_skips_terminal_items,
    finish_items_finishes_job_only_when_all_terminal,
    concurrent_finishers_see_job_finished_exactly_once,
    retry_by_class_resets_failed_items_and_reopens_job,
    job_status_of_unknown_job_is_not_found,
    upsert_order_only_when_modified_advances,
    a_late_change_message_never_holds_back_a_later_order_list,
    the_shop_directory_adds_authorises_anew_removes_and_reseals,
    the_kept_counts_equal_a_recount_after_every_kind_of_change,
    logistics_events_dedup_with_insert_or_ignore,
    record_trace_marks_queried_only_together_with_the_events,
    ledger_instants_come_from_the_database_clock,
    logistics_candidates_skip_signed_recent_and_unshipped,
    record_calls_increments_and_reports,
    embedded_lock_refuses_second_holder_until_stale,
    gate_changes_and_stale_cache_round_trip,
    views_report_progress_and_useful_ratio,
    a_listing_is_recorded_once_per_target_shop,
    job_control_pauses_resumes_and_cancels,
    listing_again_reuses_finished_jobs_until_they_reopen,
    a_hook_delivery_is_recorded_only_by_its_claim_holder_and_resent_when_given_up,
);

/// A worker whose hook attempt outlasted its claim (another worker took the delivery over)
/// changes nothing: it cannot turn the other's `delivered` back into `pending`. A delivery
/// given up (`failed`) is pending again after a resend, its attempts counted afresh.
async fn a_hook_delivery_is_recorded_only_by_its_claim_holder_and_resent_when_given_up(kind: Kind) {
    let (_ledger, store) = TestLedger::fresh(kind).await;
    store.fill_hook_outbox().await.unwrap();
    let ks = keys(1);
    let id = store.create_job(JobKind::Listing, "{}", &ks).await.unwrap();
    let r = store
        .finish_items(id, &[ItemOutcome::done(&ks[0], None)])
        .await
        .unwrap();
    assert!(r.job_finished);
    assert_eq!(store.fill_hook_outbox().await.unwrap(), 1);
    // A claim that lapses at once: the next worker takes the delivery over.
    let slow = store.claim_hook(0).await.unwrap().expect("a delivery due");
    let fast = loop {
        if let Some(c) = store.claim_hook(60_000).await.unwrap() {
            break c;
        }
    };
    assert_eq!(slow.delivery, fast.delivery);
    assert!(store.hook_delivered(&fast).await.unwrap());
    // The slow worker's failure comes after: nothing changes.
    assert!(!store
        .hook_attempt_failed(&slow, "timed out", Some(1_000))
        .await
        .unwrap());
    assert!(!store.hook_delivered(&slow).await.unwrap());
    let all = store.hook_deliveries(10).await.unwrap();
    assert_eq!(
        (all[0].state.as_str(), all[0].delivery.attempts),
        ("delivered", 1),
        "{all:?}"
    );
    assert_eq!(store.resend_failed_hooks(None).await.unwrap(), 0);

    // Another finish, given up after its attempts: sent again by a resend.
    let id2 = store.create_job(JobKind::Listing, "{}", &ks).await.unwrap();
    store
        .finish_items(id2, &[ItemOutcome::done(&ks[0], None)])
        .await
        .unwrap();
    store.fill_hook_outbox().await.unwrap();
    let c = store.claim_hook(60_000).await.unwrap().expect("due");
    assert_eq!(c.delivery.job_id, id2);
    assert!(store.hook_attempt_failed(&c, "503", None).await.unwrap());
    assert!(
        store.claim_hook(60_000).await.unwrap().is_none(),
        "given up"
    );
    assert_eq!(store.resend_failed_hooks(Some(id)).await.unwrap(), 0);
    assert_eq!(store.resend_failed_hooks(Some(id2)).await.unwrap(), 1);
    let again = store
        .claim_hook(60_000)
        .await
        .unwrap()
        .expect("pending again");
    assert_eq!((again.delivery.job_id, again.delivery.attempts), (id2, 0));
}

/// The dashboard lists jobs every refresh: a finished job is counted once and then reused,
/// and counted again once a retry reopened it.
async fn listing_again_reuses_finished_jobs_until_they_reopen(kind: Kind) {
    let (_ledger, store) = TestLedger::fresh(kind).await;
    let ks = keys(3);
    let finished = store.create_job(JobKind::Listing, "{}", &ks).await.unwrap();
    store
        .finish_items(
            finished,
            &[
                ItemOutcome::done(&ks[0], None),
                ItemOutcome::failed(&ks[1], ErrorClass::Slow, "limited"),
                ItemOutcome::done(&ks[2], None),
            ],
        )
        .await
        .unwrap();
    let running = store.create_job(JobKind::Listing, "{}", &ks).await.unwrap();
    let mut known = FinishedSummaries::default();
    let first = store.list_jobs_reusing(10, &mut known).await.unwrap();
    assert_eq!(first, store.list_jobs(10).await.unwrap());
    // Newest first: the running job, then the finished one.
    assert_eq!(
        first.iter().map(|j| j.state).collect::<Vec<_>>(),
        vec![JobState::Running, JobState::Finished]
    );
    assert!(running > finished);
    // Listed again: the same, the finished one from what was kept.
    assert_eq!(
        store.list_jobs_reusing(10, &mut known).await.unwrap(),
        first
    );
    // A retry reopens it: counted again, with its item pending.
    store
        .reset_items_to_pending(finished, &[ks[1].clone()])
        .await
        .unwrap();
    let again = store.list_jobs_reusing(10, &mut known).await.unwrap();
    let reopened = &again[1];
    assert_eq!(reopened.state, JobState::Running);
    assert_eq!((reopened.counts.pending, reopened.counts.failed), (1, 0));
    assert_eq!(again, store.list_jobs(10).await.unwrap());
}

async fn job_control_pauses_resumes_and_cancels(kind: Kind) {
    let (_ledger, store) = TestLedger::fresh(kind).await;
    let ks = keys(6);
    let id = store.create_job(JobKind::Listing, "{}", &ks).await.unwrap();
    store
        .finish_items(
            id,
            &[
                ItemOutcome::done(&ks[0], Some("1".into())),
                ItemOutcome::failed(&ks[1], ErrorClass::Unknown, "odd answer"),
            ],
        )
        .await
        .unwrap();
    assert_eq!(store.job_control(id).await.unwrap(), None);
    let done = ControlChange::Done { cancelled: 0 };
    assert_eq!(
        store.control_job(id, ControlAction::Pause).await.unwrap(),
        done
    );
    assert_eq!(
        store.control_job(id, ControlAction::Pause).await.unwrap(),
        ControlChange::Already
    );
    assert_eq!(
        store.job_control(id).await.unwrap(),
        Some(JobControl::Paused)
    );
    assert_eq!(
        store.control_job(id, ControlAction::Resume).await.unwrap(),
        done
    );
    assert_eq!(store.job_control(id).await.unwrap(), None);
    // Cancel: the four pending items end cancelled and the job finishes.
    store.control_job(id, ControlAction::Pause).await.unwrap();
    assert_eq!(
        store.control_job(id, ControlAction::Cancel).await.unwrap(),
        ControlChange::Done { cancelled: 4 }
    );
    let st = store.job_status(id).await.unwrap();
    assert_eq!(st.job.state, JobState::Finished);
    assert_eq!(st.job.control, Some(JobControl::Cancelled));
    assert_eq!((st.job.counts.cancelled, st.job.counts.pending), (4, 0));
    assert_eq!(
        store.control_job(id, ControlAction::Resume).await.unwrap(),
        ControlChange::Finished
    );
    // A write that was on the wire at the cancel: what it made is recorded over `cancelled`.
    let late = [ItemOutcome::done(&ks[2], Some("2".into()))];
    assert_eq!(store.finish_items(id, &late).await.unwrap().recorded, 0);
    assert_eq!(
        store.record_made_despite_cancel(id, &late).await.unwrap(),
        1
    );
    let st = store.job_status(id).await.unwrap();
    assert_eq!((st.job.counts.done, st.job.counts.cancelled), (2, 3));
    // Retrying the failed item runs the job again: the cancel is lifted, cancelled items stay.
    assert_eq!(
        store
            .reset_items_to_pending(id, &[ks[1].clone()])
            .await
            .unwrap(),
        1
    );
    let st = store.job_status(id).await.unwrap();
    assert_eq!(st.job.state, JobState::Running);
    assert_eq!(st.job.control, None);
    assert_eq!((st.job.counts.pending, st.job.counts.cancelled), (1, 3));
    store
        .finish_items(id, &[ItemOutcome::done(&ks[1], None)])
        .await
        .unwrap();
    assert_eq!(
        store.job_status(id).await.unwrap().job.state,
        JobState::Finished
    );
}

async fn a_listing_is_recorded_once_per_target_shop(kind: Kind) {
    let (_ledger, store) = TestLedger::fresh(kind).await;
    let main = ListingRoute {
        from: Platform::Alibaba,
        to: Platform::Taobao,
        shop: "main",
    };
    let outlet = ListingRoute {
        shop: "outlet",
        ..main
    };
    let asked = vec!["1".to_string(), "2".to_string(), "3".to_string()];
    assert!(store.listed_items(main, &asked).await.unwrap().is_empty());
    store
        .record_listings(main, 7, false, &[("1".into(), "T-1".into())])
        .await
        .unwrap();
    store
        .record_listings(main, 7, false, &[("2".into(), "T-2".into())])
        .await
        .unwrap();
    // A second job's record does not replace the first; a relist does.
    store
        .record_listings(main, 8, false, &[("1".into(), "T-1b".into())])
        .await
        .unwrap();
    store
        .record_listings(main, 9, true, &[("2".into(), "T-2r".into())])
        .await
        .unwrap();
    let listed = store.listed_items(main, &asked).await.unwrap();
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert_eq!(
        listed["1"],
        Listed {
            target_item: "T-1".into(),
            job_id: 7
        }
    );
    assert_eq!(
        listed["2"],
        Listed {
            target_item: "T-2r".into(),
            job_id: 9
        }
    );
    // Another shop of the same platform has its own listings.
    assert!(store.listed_items(outlet, &asked).await.unwrap().is_empty());
    assert!(store.listed_items(main, &[]).await.unwrap().is_empty());
}

async fn a_listing_is_claimed_by_one_job_before_its_write(kind: Kind) {
    let (_ledger, store) = TestLedger::fresh(kind).await;
    let held_by = |item: &str, job_id: i64, relist: bool, holder: &str| ClaimRequest {
        from: Platform::Alibaba,
        source_item: item.to_string(),
        to: Platform::Taobao,
        shop: "main".to_string(),
        job_id,
        holder: holder.to_string(),
        seller_code: format!("SF1688-{item}"),
        relist,
    };
    let claim = |item: &str, job_id: i64, relist: bool| held_by(item, job_id, relist, "entry-a");
    const WAIT: i64 = 600_000;
    // Two jobs in one batch: the first claims, the second finds it held.
    let got = store
        .claim_listings(
            &[
                claim("1", 7, false),
                claim("2", 7, false),
                claim("1", 8, false),
            ],
            WAIT,
        )
        .await
        .unwrap();
    assert_eq!(got[0], Claim::Fresh);
    assert_eq!(got[1], Claim::Fresh);
    assert!(
        matches!(
            got[2],
            Claim::Held {
                job_id: Some(7),
                ..
            }
        ),
        "{got:?}"
    );
    // The same job again: an earlier write may have made it (look it up first).
    let again = store
        .claim_listings(&[claim("1", 7, false)], WAIT)
        .await
        .unwrap();
    assert_eq!(
        again[0],
        Claim::Unsure {
            seller_code: "SF1688-1".into()
        }
    );
    // The same job's items queued anew while the first run may still write (a Redis loss
    // and `reconcile`): the other run waits for the first one's outcome.
    let other_run = store
        .claim_listings(&[held_by("1", 7, false, "entry-b")], WAIT)
        .await
        .unwrap();
    assert!(
        matches!(
            other_run[0],
            Claim::Held {
                job_id: Some(7),
                ..
            }
        ),
        "{other_run:?}"
    );
    // A run that goes on renews its claims; one that ended gives up what it still holds,
    // and the next run looks it up at once.
    assert_eq!(store.renew_claims(7, "entry-a").await.unwrap(), 2);
    store
        .claim_listings(&[held_by("3", 7, false, "entry-a")], WAIT)
        .await
        .unwrap();
    assert_eq!(store.disown_claims(7, "entry-a").await.unwrap(), 3);
    assert_eq!(store.renew_claims(7, "entry-a").await.unwrap(), 0);
    let after_disown = store
        .claim_listings(&[held_by("3", 7, false, "entry-b")], WAIT)
        .await
        .unwrap();
    assert_eq!(
        after_disown[0],
        Claim::Unsure {
            seller_code: "SF1688-3".into()
        }
    );
    // The first run's claims of "1" and "2" are given up too: taken back by it below.
    for item in ["1", "2"] {
        store
            .claim_listings(&[claim(item, 7, false)], WAIT)
            .await
            .unwrap();
    }
    // Written: listed; another job skips it.
    let main = ListingRoute {
        from: Platform::Alibaba,
        to: Platform::Taobao,
        shop: "main",
    };
    store
        .record_listings(main, 7, false, &[("1".into(), "T-1".into())])
        .await
        .unwrap();
    let listed = store
        .claim_listings(&[claim("1", 8, false)], WAIT)
        .await
        .unwrap();
    assert_eq!(
        listed[0],
        Claim::Listed(Listed {
            target_item: "T-1".into(),
            job_id: 7
        })
    );
    // A released claim (the write surely made nothing) is claimed afresh by the next.
    store
        .release_listings(main, 7, "entry-a", &["2".to_string()])
        .await
        .unwrap();
    let next = store
        .claim_listings(&[claim("2", 8, false)], WAIT)
        .await
        .unwrap();
    assert_eq!(next[0], Claim::Fresh);
    // A claim left behind past the wait is taken over, and looked up first.
    let taken = store
        .claim_listings(&[claim("2", 9, false)], 0)
        .await
        .unwrap();
    assert_eq!(
        taken[0],
        Claim::Unsure {
            seller_code: "SF1688-2".into()
        }
    );
    // A relisting job takes a listed row for a new product.
    let relist = store
        .claim_listings(&[claim("1", 10, true)], WAIT)
        .await
        .unwrap();
    assert_eq!(relist[0], Claim::Fresh);
    assert!(store
        .listed_items(main, &["1".to_string()])
        .await
        .unwrap()
        .is_empty());
}

/// One task's group, one transaction: the product made is listed and its item done, the
/// claim of an item whose write surely made nothing released, what a pending item fetched
/// kept; an item named twice takes its first outcome.
async fn a_group_records_its_listings_claims_carry_and_outcomes_together(kind: Kind) {
    let (_ledger, store) = TestLedger::fresh(kind).await;
    let ks = keys(4);
    let id = store.create_job(JobKind::Listing, "{}", &ks).await.unwrap();
    let main = ListingRoute {
        from: Platform::Alibaba,
        to: Platform::Taobao,
        shop: "main",
    };
    let claim = |item: &str, job_id: i64| ClaimRequest {
        from: Platform::Alibaba,
        source_item: item.to_string(),
        to: Platform::Taobao,
        shop: "main".to_string(),
        job_id,
        holder: "entry-a".to_string(),
        seller_code: format!("SF1688-{item}"),
        relist: false,
    };
    let claims: Vec<ClaimRequest> = ks.iter().map(|k| claim(k, id)).collect();
    let got = store.claim_listings(&claims, 600_000).await.unwrap();
    assert!(got.iter().all(|c| *c == Claim::Fresh), "{got:?}");
    let listings = |made, released, last| {
        Some(ListingsRecord {
            route: main,
            relist: false,
            holder: "entry-a",
            made,
            released,
            last,
        })
    };
    let made = vec![(ks[0].clone(), "T-0".to_string())];
    let released = vec![ks[1].clone()];
    let carry = vec![(ks[2].clone(), r#"{"read":1}"#.to_string())];
    let outcomes = vec![
        ItemOutcome::done(&ks[0], Some("T-0".into())),
        ItemOutcome::failed(&ks[1], ErrorClass::Fatal, "refused"),
        ItemOutcome::failed(&ks[0], ErrorClass::Fatal, "a second outcome"),
    ];
    let report = store
        .record_group(&GroupRecord {
            job_id: id,
            listings: listings(&made, &released, false),
            carry: &carry,
            outcomes: &outcomes,
            calls: &[CallRecord {
                minute: Utc::now(),
                platform: Platform::Taobao,
                api: Api::ItemAdd,
                class: CallClass::Ok,
                calls: 0,
                useful: 1,
            }],
        })
        .await
        .unwrap();
    assert_eq!(
        report,
        FinishReport {
            recorded: 2,
            job_finished: false
        }
    );
    let counts = store.job_status(id).await.unwrap().job.counts;
    assert_eq!(
        (counts.done, counts.failed, counts.pending),
        (1, 1, 2),
        "{counts:?}"
    );
    // Another job finds the product listed, and the released item free.
    let other = store
        .claim_listings(&[claim(&ks[0], id + 1), claim(&ks[1], id + 1)], 600_000)
        .await
        .unwrap();
    assert_eq!(
        other,
        vec![
            Claim::Listed(Listed {
                target_item: "T-0".into(),
                job_id: id
            }),
            Claim::Fresh
        ]
    );
    assert_eq!(
        store.items_to_run_carrying(id, &ks).await.unwrap(),
        vec![
            (ks[2].clone(), Some(r#"{"read":1}"#.to_string())),
            (ks[3].clone(), None)
        ]
    );
    let useful: u64 = store
        .report_calls(
            Utc::now() - ChronoDuration::minutes(2),
            Utc::now() + ChronoDuration::minutes(2),
        )
        .await
        .unwrap()
        .by_api
        .iter()
        .map(|a| a.useful)
        .sum();
    assert_eq!(useful, 1);
    // The run's last group finishes the job, once, and gives up the claim its run still
    // holds (a write whose outcome is unknown): the next run looks it up at once.
    let made = vec![(ks[2].clone(), "T-2".to_string())];
    let last = [
        ItemOutcome::done(&ks[2], Some("T-2".into())),
        ItemOutcome::failed(&ks[3], ErrorClass::Retry, "timed out"),
    ];
    let report = store
        .record_group(&GroupRecord {
            job_id: id,
            listings: listings(&made, &[], true),
            carry: &[],
            outcomes: &last,
            calls: &[],
        })
        .await
        .unwrap();
    assert!(report.job_finished, "{report:?}");
    let next_run = ClaimRequest {
        holder: "entry-b".to_string(),
        ..claim(&ks[3], id)
    };
    assert_eq!(
        store.claim_listings(&[next_run], 600_000).await.unwrap(),
        vec![Claim::Unsure {
            seller_code: format!("SF1688-{}", ks[3])
        }]
    );
}

async fn migrations_apply_twice_idempotently(kind: Kind) {
    let ledger = TestLedger::empty(kind).await;
    let url = ledger.url.clone();
    let store = Store::connect(&url).await.unwrap();
    let first = store.migrate().await.unwrap();
    let dir = match kind {
        Kind::Sqlite => "sqlite",
        Kind::Postgres => "postgres",
    };
    let migrations = std::fs::read_dir(format!("{}/migrations/{dir}", env!("CARGO_MANIFEST_DIR")))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "sql")
        })
        .count();
    assert_eq!(first.applied.len(), migrations, "{first:?}");
    assert_eq!(first.already_applied, 0);
    let second = store.migrate().await.unwrap();
    assert!(second.applied.is_empty(), "{second:?}");
    assert_eq!(second.already_applied, migrations);
    store.close().await;
    // A new process opening the same file finds everything in place, data included.
    let again = Store::connect(&url).await.unwrap();
    let id = again
        .create_job(JobKind::Listing, "{}", &keys(3))
        .await
        .unwrap();
    let third = again.migrate().await.unwrap();
    assert!(third.applied.is_empty());
    assert_eq!(again.job_status(id).await.unwrap().job.total, 3);
}

async fn only_migrate_creates_a_ledger(kind: Kind) {
    let ledger = TestLedger::empty(kind).await;
    let url = match kind {
        // A mistyped file name.
        Kind::Sqlite => ledger.url.replace("ledger.db", "mistyped.db"),
        // A mistyped database name on the right server.
        Kind::Postgres => format!("{}_mistyped", ledger.url),
    };
    let err = Store::connect_existing(&url).await.unwrap_err();
    assert!(err.is_input_error(), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("mistyped") && msg.contains("db migrate"),
        "{msg}"
    );
    if kind == Kind::Sqlite {
        let path = url.trim_start_matches("sqlite://");
        assert!(
            !std::path::Path::new(path).exists(),
            "a refused open must not create the file"
        );
    }
    // A database that exists but holds no ledger is refused the same way (Postgres: the DBA
    // made the database; the SQLite counterpart is an existing empty file, which migrates).
    if kind == Kind::Postgres {
        let err = Store::connect_existing(&ledger.url).await.unwrap_err();
        assert!(matches!(err, StoreError::Missing { .. }), "{err}");
    }
    // Once created (what `db migrate` does), it opens.
    Store::connect(&ledger.url)
        .await
        .unwrap()
        .migrate()
        .await
        .unwrap();
    Store::connect_existing(&ledger.url).await.unwrap();
}

async fn fleet_id_is_made_once_and_kept(kind: Kind) {
    let ledger = TestLedger::empty(kind).await;
    let url = ledger.url.clone();
    let a = Store::connect(&url).await.unwrap();
    a.migrate().await.unwrap();
    let id = a.fleet_id().await.unwrap();
    assert_eq!(id.len(), 32, "{id}");
    a.close().await;
    let b = Store::connect_existing(&url).await.unwrap();
    b.migrate().await.unwrap();
    assert_eq!(b.fleet_id().await.unwrap(), id);
    let (_l2, other) = TestLedger::fresh(kind).await;
    assert_ne!(
        other.fleet_id().await.unwrap(),
        id,
        "each ledger has its own"
    );
}

async fn dead_items_fail_finish_the_job_and_revive(kind: Kind) {
    let (_ledger, store) = TestLedger::fresh(kind).await;
    let id = store
        .create_job(JobKind::Listing, "{}", &keys(4))
        .await
        .unwrap();
    let ks = keys(4);
    store
        .finish_items(id, &[ItemOutcome::done(&ks[0], None)])
        .await
        .unwrap();
    // The dead task carried items 0..3: only the pending ones change.
    let n = store
        .fail_dead_items(id, &ks, "dead letter after 5 attempt(s): boom")
        .await
        .unwrap();
    assert_eq!(n, 3);
    let st = store.job_status(id).await.unwrap();
    assert_eq!(
        st.job.state,
        JobState::Finished,
        "nothing pending: finished"
    );
    assert_eq!(st.job.counts.failed, 3);
    assert_eq!(store.dead_items(id).await.unwrap(), ks[1..].to_vec());
    assert_eq!(store.dead_item_counts().await.unwrap(), vec![(id, 3)]);
    let failed = store.items(id, Some(ItemStatus::Failed), 10).await.unwrap();
    assert_eq!(failed.len(), 3);
    assert!(
        failed
            .iter()
            .all(|i| i.error_class == Some(ItemErrorClass::Dead)),
        "{failed:?}"
    );
    let revived = store.revive_dead_items(id, &ks).await.unwrap();
    assert_eq!(revived.len(), 3);
    let st = store.job_status(id).await.unwrap();
    assert_eq!(st.job.state, JobState::Running);
    assert_eq!(st.job.counts.pending, 3);
    assert!(store.dead_items(id).await.unwrap().is_empty());
}

#[tokio::test]
async fn pragmas_in_effect_on_every_pooled_connection() {
    let (_ledger, store) = TestLedger::fresh(Kind::Sqlite).await;
    let all = store.pragmas_per_connection(4).await.unwrap();
    assert_eq!(all.len(), 4);
    for p in all {
        assert_eq!(p.journal_mode, "wal");
        assert_eq!(p.synchronous, 1, "synchronous=NORMAL");
        assert_eq!(p.busy_timeout_ms, 5000);
        assert!(p.foreign_keys);
    }
}

#[tokio::test]
async fn bad_urls_are_input_errors_naming_the_url() {
    for url in [
        "postgres://u:pw@127.0.0.1:notaport/x",
        "sqlite://",
        "mysql://h/db",
    ] {
        let err = Store::connect(url).await.unwrap_err();
        assert!(err.is_input_error(), "{url}: {err}");
        let msg = err.to_string();
        assert!(!msg.contains("pw@"), "password leaked: {msg}");
        assert!(msg.contains(url.split("://").next().unwrap()), "{msg}");
    }
    let missing = "sqlite:///nonexistent-dir-for-syncfleet/ledger.db";
    let err = Store::connect(missing).await.unwrap_err();
    assert!(!err.is_input_error());
    assert!(
        err.to_string()
            .contains("/nonexistent-dir-for-syncfleet/ledger.db"),
        "{err}"
    );
}

#[tokio::test]
async fn in_memory_ledger_works() {
    let store = Store::connect("sqlite::memory:").await.unwrap();
    store.migrate().await.unwrap();
    let id = store
        .create_job(JobKind::Orders, "{}", &keys(5))
        .await
        .unwrap();
    assert_eq!(store.pending_keys(id).await.unwrap().len(), 5);
}

async fn create_job_is_atomic(kind: Kind) {
    let (ledger, store) = TestLedger::fresh(kind).await;
    let mut ks = keys(5000);
    // A duplicate deep in the list: the job row and thousands of items are already written
    // inside the transaction when the insert fails.
    ks[4000] = ks[10].clone();
    let err = store
        .create_job(JobKind::Listing, r#"{"from":"alibaba"}"#, &ks)
        .await
        .unwrap_err();
    match &err {
        StoreError::DuplicateItem { key, .. } => assert_eq!(key, "item-000010"),
        other => panic!("unexpected {other}"),
    }
    assert!(err.is_input_error());
    assert!(store.list_jobs(10).await.unwrap().is_empty());
    let raw = ledger.raw().await;
    let (items,): (i64,) = raw.one("SELECT COUNT(*) FROM job_items").await;
    assert_eq!(items, 0);
    // Invalid spec JSON is refused by the schema, also leaving nothing.
    assert!(store
        .create_job(JobKind::Listing, "{not json", &keys(3))
        .await
        .is_err());
    assert!(store.list_jobs(10).await.unwrap().is_empty());
    // A valid job afterwards gets everything, numbered in order.
    let id = store
        .create_job(JobKind::Listing, r#"{"from":"alibaba"}"#, &keys(5000))
        .await
        .unwrap();
    let items = store.items(id, None, 3).await.unwrap();
    assert_eq!(
        items
            .iter()
            .map(|i| (i.key.as_str(), i.seq))
            .collect::<Vec<_>>(),
        vec![("item-000000", 0), ("item-000001", 1), ("item-000002", 2)]
    );
    let st = store.job_status(id).await.unwrap();
    assert_eq!(st.job.total, 5000);
    assert_eq!(st.job.counts.pending, 5000);
    assert_eq!(st.job.state, JobState::Running);
    assert_eq!(st.spec, r#"{"from":"alibaba"}"#);
}

async fn empty_job_is_created_finished(kind: Kind) {
    let (_ledger, store) = TestLedger::fresh(kind).await;
    let id = store
        .create_job(JobKind::Logistics, "{}", &[])
        .await
        .unwrap();
    let st = store.job_status(id).await.unwrap();
    assert_eq!(st.job.state, JobState::Finished);
    assert!(st.job.finished_at.is_some());
    assert_eq!(st.eta(), Some(Duration::ZERO));
}

async fn rerun_skips_terminal_items(kind: Kind) {
    let (_ledger, store) = TestLedger::fresh(kind).await;
    let ks = keys(10);
    let id = store.create_job(JobKind::Listing, "{}", &ks).await.unwrap();
    store
        .finish_items(
            id,
            &[
                ItemOutcome::done(&ks[1], Some("9001".into())),
                ItemOutcome::failed(&ks[3], ErrorClass::Fatal, "bad param"),
                ItemOutcome::skipped(&ks[5], "unchanged"),
                ItemOutcome::attempted(&ks[7], ErrorClass::Retry, "timeout"),
            ],
        )
        .await
        .unwrap();
    // Asked in reverse order plus an unknown key: pending ones come back in seq order.
    let mut asked: Vec<String> = ks.iter().rev().cloned().collect();
    asked.push("not-in-job".into());
    let run = store.items_to_run(id, &asked).await.unwrap();
    let expect: Vec<String> = [0, 2, 4, 6, 7, 8, 9]
        .iter()
        .map(|&i| ks[i].clone())
        .collect();
    assert_eq!(run, expect);
    assert_eq!(store.pending_keys(id).await.unwrap(), expect);
    // Chunks of 4: chunk 0 = seq 0..4 (0, 2 pending), chunk 1 = 4..8, chunk 2 = 8..10.
    assert_eq!(store.pending_chunks(id, 4).await.unwrap(), vec![0, 1, 2]);
    assert_eq!(
        store.chunk_pending_keys(id, 1, 4).await.unwrap(),
        vec![ks[4].clone(), ks[6].clone(), ks[7].clone()]
    );
    let done = store.items(id, Some(ItemStatus::Done), 10).await.unwrap();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].result.as_deref(), Some("9001"));
    assert_eq!(done[0].attempts, 1);
    let attempted = store
        .items(id, Some(ItemStatus::Pending), 100)
        .await
        .unwrap();
    let seven = attempted.iter().find(|i| i.key == ks[7]).unwrap();
    assert_eq!(seven.attempts, 1);
    assert_eq!(
        seven.error_class,
        Some(ItemErrorClass::Call(ErrorClass::Retry))
    );
}

async fn finish_items_finishes_job_only_when_all_terminal(kind: Kind) {
    let (_ledger, store) = TestLedger::fresh(kind).await;
    let ks = keys(4);
    let id = store.create_job(JobKind::Listing, "{}", &ks).await.unwrap();
    let r = store
        .finish_items(
            id,
            &[
                ItemOutcome::done(&ks[0], None),
                ItemOutcome::stale(&ks[1], None, "breaker open"),
                ItemOutcome::attempted(&ks[2], ErrorClass::Slow, "limited"),
            ],
        )
        .await
        .unwrap();
    assert_eq!(r.recorded, 3);
    assert!(!r.job_finished, "ks[2] and ks[3] are still pending");
    let r = store
        .finish_items(id, &[ItemOutcome::failed(&ks[2], ErrorClass::Fatal, "x")])
        .await
        .unwrap();
    assert!(!r.job_finished);
    assert_eq!(
        store.job_status(id).await.unwrap().job.state,
        JobState::Running
    );
    let r = store
        .finish_items(id, &[ItemOutcome::skipped(&ks[3], "signed")])
        .await
        .unwrap();
    assert_eq!(r.recorded, 1);
    assert!(r.job_finished);
    // A duplicate delivery: nothing recorded, the first outcome stays, not "finished" twice.
    let r = store
        .finish_items(
            id,
            &[ItemOutcome::failed(&ks[0], ErrorClass::Retry, "late")],
        )
        .await
        .unwrap();
    assert_eq!(r.recorded, 0);
    assert!(!r.job_finished);
    let st = store.job_status(id).await.unwrap();
    assert_eq!(st.job.state, JobState::Finished);
    assert!(st.job.finished_at.is_some());
    assert_eq!(
        st.job.counts,
        StatusCounts {
            pending: 0,
            done: 1,
            stale: 1,
            failed: 1,
            skipped: 1,
            cancelled: 0,
        }
    );
    assert!((st.job.percent() - 100.0).abs() < 1e-9);
    assert!(st.rate_per_sec > 0.0, "4 items finished within the minute");
}

async fn concurrent_finishers_see_job_finished_exactly_once(kind: Kind) {
    let (ledger, store) = TestLedger::fresh(kind).await;
    let ks = keys(800);
    let id = store.create_job(JobKind::Listing, "{}", &ks).await.unwrap();
    // A second pool on the same ledger stands in for a second worker process.
    let other = Store::connect(&ledger.url).await.unwrap();
    let mut tasks = Vec::new();
    for (i, chunk) in ks.chunks(50).enumerate() {
        let s = if i % 2 == 0 {
            store.clone()
        } else {
            other.clone()
        };
        let outcomes: Vec<ItemOutcome> = chunk.iter().map(|k| ItemOutcome::done(k, None)).collect();
        tasks.push(tokio::spawn(
            async move { s.finish_items(id, &outcomes).await },
        ));
    }
    let mut finished = 0;
    for t in tasks {
        let r = t.await.unwrap().unwrap();
        assert_eq!(r.recorded, 50);
        finished += usize::from(r.job_finished);
    }
    assert_eq!(finished, 1);
    assert_eq!(store.job_status(id).await.unwrap().job.counts.done, 800);
}

async fn retry_by_class_resets_failed_items_and_reopens_job(kind: Kind) {
    let (_ledger, store) = TestLedger::fresh(kind).await;
    let ks = keys(5);
    let id = store.create_job(JobKind::Listing, "{}", &ks).await.unwrap();
    store
        .finish_items(
            id,
            &[
                ItemOutcome::done(&ks[0], Some("1".into())),
                ItemOutcome::failed(&ks[1], ErrorClass::Slow, "limited"),
                ItemOutcome::failed(&ks[2], ErrorClass::Fatal, "bad sign"),
                ItemOutcome::failed(&ks[3], ErrorClass::Slow, "limited"),
                ItemOutcome::skipped(&ks[4], "dup"),
            ],
        )
        .await
        .unwrap();
    assert_eq!(
        store.job_status(id).await.unwrap().job.state,
        JobState::Finished
    );
    let slow = store.items_by_class(id, ErrorClass::Slow).await.unwrap();
    assert_eq!(slow, vec![ks[1].clone(), ks[3].clone()]);
    // `done` is never reset, even when asked.
    let mut asked = slow.clone();
    asked.push(ks[0].clone());
    assert_eq!(store.reset_items_to_pending(id, &asked).await.unwrap(), 2);
    let st = store.job_status(id).await.unwrap();
    assert_eq!(st.job.state, JobState::Running);
    assert!(st.job.finished_at.is_none());
    assert_eq!(st.job.counts.pending, 2);
    assert_eq!(st.job.counts.done, 1);
    assert_eq!(store.items_to_run(id, &ks).await.unwrap(), slow);
    let r = store
        .finish_items(
            id,
            &slow
                .iter()
                .map(|k| ItemOutcome::done(k, None))
                .collect::<Vec<_>>(),
        )
        .await
        .unwrap();
    assert!(r.job_finished);
    let items = store.items(id, Some(ItemStatus::Done), 10).await.unwrap();
    let one = items.iter().find(|i| i.key == ks[1]).unwrap();
    assert_eq!(one.attempts, 2, "attempts survive the reset");
    assert_eq!(one.error_class, None);
}

async fn job_status_of_unknown_job_is_not_found(kind: Kind) {
    let (_ledger, store) = TestLedger::fresh(kind).await;
    match store.job_status(42).await {
        Err(e @ StoreError::JobNotFound { job_id: 42, .. }) => {
            assert!(e.is_input_error());
            assert!(e.to_string().contains("no job 42"), "{e}");
        }
        other => panic!("{other:?}"),
    }
}

fn order(id: &str, modified_s: i64, status: &str) -> Order {
    Order {
        platform: Platform::Taobao,
        order_id: id.into(),
        shop: "shop1".into(),
        status: status.into(),
        shipped: true,
        modified: Utc.timestamp_opt(1_767_225_600 + modified_s, 0).unwrap(),
        amount_cents: 9900,
        tracking: None,
    }
}

async fn upsert_order_only_when_modified_advances(kind: Kind) {
    let (_ledger, store) = TestLedger::fresh(kind).await;
    let o = order("1001", 0, "WAIT_SELLER_SEND_GOODS");
    assert!(store.upsert_order_if_advanced(&o).await.unwrap(), "new");
    assert!(
        !store.upsert_order_if_advanced(&o).await.unwrap(),
        "unchanged"
    );
    let older = order("1001", -60, "TRADE_CLOSED");
    assert!(
        !store.upsert_order_if_advanced(&older).await.unwrap(),
        "older"
    );
    store
        .set_last_status(Platform::Taobao, "1001", "运输中", false)
        .await
        .unwrap();
    let newer = order("1001", 60, "WAIT_BUYER_CONFIRM_GOODS");
    assert!(
        store.upsert_order_if_advanced(&newer).await.unwrap(),
        "advanced"
    );
    let rec = store
        .get_order(Platform::Taobao, "1001")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.order, newer);
    assert_eq!(rec.last_status.as_deref(), Some("运输中"), "logistics kept");
    // Same order id on another platform is another order.
    let mut jd = o.clone();
    jd.platform = Platform::Jd;
    assert!(store.upsert_order_if_advanced(&jd).await.unwrap());
    // A page: one new, one unchanged, one advanced.
    let page = vec![
        order("2002", 0, "A"),
        newer.clone(),
        order("1001", 120, "B"),
    ];
    assert_eq!(store.upsert_orders_if_advanced(&page).await.unwrap(), 2);
}

fn notice(id: &str, born_s: i64, status: &str) -> OrderNotice {
    OrderNotice {
        platform: Platform::Taobao,
        order_id: id.into(),
        shop: "shop1".into(),
        status: status.into(),
        shipped: false,
        modified: None,
        amount_cents: 9900,
        born: Utc.timestamp_opt(1_767_225_600 + born_s, 0).unwrap(),
    }
}

/// A message published late (its change at 0 s, published at 600 s) and a later change at
/// 300 s whose message was lost: the order list that brings the 300 s state must win. When a
/// message's order took `modified = pub_time`, the list's real, earlier `modified` was refused
/// and the order kept the paid status for good (shown below on the old write).
async fn a_late_change_message_never_holds_back_a_later_order_list(kind: Kind) {
    let (_ledger, store) = TestLedger::fresh(kind).await;
    let shipped = order("3003", 300, "WAIT_BUYER_CONFIRM_GOODS");
    // The old write: the message's order stored with its publication time as `modified`.
    let mut as_before = order("3003", 600, "WAIT_SELLER_SEND_GOODS");
    as_before.order_id = "3004".into();
    assert!(store.upsert_order_if_advanced(&as_before).await.unwrap());
    let mut shipped_before = shipped.clone();
    shipped_before.order_id = "3004".into();
    assert!(
        !store
            .upsert_order_if_advanced(&shipped_before)
            .await
            .unwrap(),
        "the old write refuses the later list"
    );

    // A notice keeps the order's own time unknown; the list then wins.
    assert_eq!(
        store
            .apply_order_notices(&[notice("3003", 600, "WAIT_SELLER_SEND_GOODS")])
            .await
            .unwrap(),
        1
    );
    assert!(store.upsert_order_if_advanced(&shipped).await.unwrap());
    let rec = store
        .get_order(Platform::Taobao, "3003")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.order.status, "WAIT_BUYER_CONFIRM_GOODS");
    assert_eq!(rec.order.modified, shipped.modified, "the order's own time");

    // Messages late and out of order: one older than the state held changes nothing (the
    // list's state at 300 s is newer than a message of 200 s), a newer one is taken and keeps
    // the order's own time.
    assert_eq!(
        store
            .apply_order_notices(&[notice("3003", 200, "WAIT_SELLER_SEND_GOODS")])
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        store
            .apply_order_notices(&[notice("3003", 900, "TRADE_FINISHED")])
            .await
            .unwrap(),
        1
    );
    let rec = store
        .get_order(Platform::Taobao, "3003")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.order.status, "TRADE_FINISHED");
    assert_eq!(rec.order.modified, shipped.modified);
    assert_eq!(
        store
            .apply_order_notices(&[notice("3003", 800, "WAIT_BUYER_CONFIRM_GOODS")])
            .await
            .unwrap(),
        0,
        "an older message after a newer one"
    );
    // A message that carries the order's own time moves it.
    let mut own = notice("3003", 1000, "TRADE_CLOSED");
    own.modified = Some(Utc.timestamp_opt(1_767_225_600 + 990, 0).unwrap());
    assert_eq!(store.apply_order_notices(&[own.clone()]).await.unwrap(), 1);
    let rec = store
        .get_order(Platform::Taobao, "3003")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.order.modified, own.modified.unwrap());
    assert_eq!(rec.order.status, "TRADE_CLOSED");
}

async fn logistics_events_dedup_with_insert_or_ignore(kind: Kind) {
    let (_ledger, store) = TestLedger::fresh(kind).await;
    let ev = |t: &str, s: &str| LogisticsEvent {
        event_time: t.into(),
        status: s.into(),
        description: "…".into(),
    };
    let a = ev("2026-01-01 10:00:00", "TRANSPORT");
    assert!(store.insert_event(Platform::Jd, "1", &a).await.unwrap());
    assert!(!store.insert_event(Platform::Jd, "1", &a).await.unwrap());
    // Same step for another order or platform is new data.
    assert!(store.insert_event(Platform::Jd, "2", &a).await.unwrap());
    assert!(store.insert_event(Platform::Taobao, "1", &a).await.unwrap());
    let trace = vec![
        a.clone(),
        ev("2026-01-01 12:00:00", "TRANSPORT"),
        ev("2026-01-01 12:00:00", "SIGNED"),
    ];
    assert_eq!(
        store
            .insert_events(Platform::Jd, "1", &trace)
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        store
            .insert_events(Platform::Jd, "1", &trace)
            .await
            .unwrap(),
        0
    );
    assert_eq!(store.events(Platform::Jd, "1").await.unwrap().len(), 3);
}

/// An order was marked queried before its trace was stored, so after a failed store
/// a re-run skipped it as "queried recently" and its events were never stored.
async fn record_trace_marks_queried_only_together_with_the_events(kind: Kind) {
    let (ledger, store) = TestLedger::fresh(kind).await;
    let mut o = order("t1", 0, "WAIT_BUYER_CONFIRM_GOODS");
    o.shop = "shop1".into();
    o.shipped = true;
    store
        .insert_orders(&[OrderRecord {
            status_at: o.modified,
            order: o,
            last_status: None,
            signed: false,
            last_queried_at: None,
        }])
        .await
        .unwrap();
    let trace = vec![
        LogisticsEvent {
            event_time: "2026-01-01 10:00:00".into(),
            status: "已揽收".into(),
            description: "got".into(),
        },
        LogisticsEvent {
            event_time: "2026-01-02 10:00:00".into(),
            status: "对方已签收".into(),
            description: "signed".into(),
        },
    ];
    // The second event fails to store (a real database error, as a full disk would give).
    let raw = ledger.raw().await;
    raw.execute(match kind {
        Kind::Sqlite => {
            "CREATE TRIGGER fail_second_event BEFORE INSERT ON logistics_events
             WHEN NEW.event_time = '2026-01-02 10:00:00'
             BEGIN SELECT RAISE(ABORT, 'test: event store fails'); END"
        }
        Kind::Postgres => {
            "CREATE FUNCTION fail_second_event() RETURNS trigger AS $$
             BEGIN RAISE EXCEPTION 'test: event store fails'; END $$ LANGUAGE plpgsql;
             CREATE TRIGGER fail_second_event BEFORE INSERT ON logistics_events
             FOR EACH ROW WHEN (NEW.event_time = '2026-01-02 10:00:00')
             EXECUTE FUNCTION fail_second_event();"
        }
    })
    .await;
    let err = store
        .record_trace(Platform::Taobao, "t1", &trace, true)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("event store fails"), "{err}");
    // Nothing of it stayed: no event, no status, not marked queried, still a candidate.
    let rec = store
        .get_order(Platform::Taobao, "t1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (rec.last_queried_at, rec.last_status.as_deref(), rec.signed),
        (None, None, false)
    );
    assert!(store
        .events(Platform::Taobao, "t1")
        .await
        .unwrap()
        .is_empty());
    let interval = Duration::from_secs(3600);
    assert_eq!(
        store
            .logistics_candidates(Platform::Taobao, "shop1", interval)
            .await
            .unwrap(),
        vec!["t1".to_string()]
    );
    // The re-run stores everything and marks the order, in one go.
    raw.execute(match kind {
        Kind::Sqlite => "DROP TRIGGER fail_second_event",
        Kind::Postgres => "DROP TRIGGER fail_second_event ON logistics_events",
    })
    .await;
    assert_eq!(
        store
            .record_trace(Platform::Taobao, "t1", &trace, true)
            .await
            .unwrap(),
        2
    );
    let rec = store
        .get_order(Platform::Taobao, "t1")
        .await
        .unwrap()
        .unwrap();
    assert!(rec.last_queried_at.is_some());
    assert_eq!(rec.last_status.as_deref(), Some("对方已签收"));
    assert!(rec.signed);
    assert_eq!(store.events(Platform::Taobao, "t1").await.unwrap(), trace);
    assert!(store
        .logistics_candidates(Platform::Taobao, "shop1", interval)
        .await
        .unwrap()
        .is_empty());
    // A repeat brings nothing new but is still a query.
    assert_eq!(
        store
            .record_trace(Platform::Taobao, "t1", &trace, true)
            .await
            .unwrap(),
        0
    );
}

/// Ledger instants are the database's clock in unix milliseconds.
async fn ledger_instants_come_from_the_database_clock(kind: Kind) {
    let (ledger, store) = TestLedger::fresh(kind).await;
    let raw = ledger.raw().await;
    let db_now = || async { raw.one::<(i64,)>(ledger.now_ms_sql()).await.0 };
    let before = db_now().await;
    let ks = keys(2);
    let id = store.create_job(JobKind::Listing, "{}", &ks).await.unwrap();
    store
        .finish_items(
            id,
            &[
                ItemOutcome::done(&ks[0], None),
                ItemOutcome::done(&ks[1], None),
            ],
        )
        .await
        .unwrap();
    let after = db_now().await;
    let st = store.job_status(id).await.unwrap();
    let created = st.job.created_at.timestamp_millis();
    let finished = st.job.finished_at.expect("finished").timestamp_millis();
    assert!(before <= created && created <= finished && finished <= after);
    for item in store.items(id, None, 10).await.unwrap() {
        assert_eq!(item.updated_at.timestamp_millis(), finished);
    }
    // Milliseconds, not seconds: within a minute of this host's clock on the same machine.
    assert!((created - Utc::now().timestamp_millis()).abs() < 60_000);
}

async fn logistics_candidates_skip_signed_recent_and_unshipped(kind: Kind) {
    let (_ledger, store) = TestLedger::fresh(kind).await;
    let now = Utc::now();
    let rec = |id: &str, shop: &str, shipped: bool, signed: bool, queried_min_ago: Option<i64>| {
        let mut o = order(id, 0, "WAIT_BUYER_CONFIRM_GOODS");
        o.shop = shop.into();
        o.shipped = shipped;
        OrderRecord {
            status_at: o.modified,
            order: o,
            last_status: None,
            signed,
            last_queried_at: queried_min_ago.map(|m| now - ChronoDuration::minutes(m)),
        }
    };
    let mut jd_order = rec("j1", "shop1", true, false, None);
    jd_order.order.platform = Platform::Jd;
    let seeded = store
        .insert_orders(&[
            rec("a-never", "shop1", true, false, None),
            rec("b-old", "shop1", true, false, Some(120)),
            rec("c-recent", "shop1", true, false, Some(5)),
            rec("d-signed", "shop1", true, true, None),
            rec("e-unshipped", "shop1", false, false, None),
            rec("f-other-shop", "shop2", true, false, None),
            jd_order,
        ])
        .await
        .unwrap();
    assert_eq!(seeded, 7);
    let interval = Duration::from_secs(30 * 60);
    let c = store
        .logistics_candidates(Platform::Taobao, "shop1", interval)
        .await
        .unwrap();
    assert_eq!(c, vec!["a-never".to_string(), "b-old".to_string()]);
    // Queried now: no longer candidates until the interval passes.
    assert_eq!(store.mark_queried(Platform::Taobao, &c).await.unwrap(), 2);
    assert!(store
        .logistics_candidates(Platform::Taobao, "shop1", interval)
        .await
        .unwrap()
        .is_empty());
    // "Now" is the database's: with a 4-minute interval only the order queried 5 minutes ago
    // is due; with none, every unsigned shipped order is.
    assert_eq!(
        store
            .logistics_candidates(Platform::Taobao, "shop1", Duration::from_secs(4 * 60))
            .await
            .unwrap(),
        vec!["c-recent".to_string()]
    );
    let later = Duration::ZERO;
    assert_eq!(
        store
            .logistics_candidates(Platform::Taobao, "shop1", later)
            .await
            .unwrap()
            .len(),
        3,
        "a-never, b-old and c-recent are due again"
    );
    assert!(store
        .queried_within(Platform::Taobao, "a-never", interval)
        .await
        .unwrap());
    assert!(!store
        .queried_within(Platform::Taobao, "c-recent", Duration::from_secs(4 * 60))
        .await
        .unwrap());
    assert!(!store
        .queried_within(Platform::Taobao, "d-signed", interval)
        .await
        .unwrap());
    // Signed is final, even if a later trace says otherwise.
    assert!(store
        .set_last_status(Platform::Taobao, "a-never", "对方已签收", true)
        .await
        .unwrap());
    assert!(store
        .set_last_status(Platform::Taobao, "a-never", "运输中", false)
        .await
        .unwrap());
    let c = store
        .logistics_candidates(Platform::Taobao, "shop1", later)
        .await
        .unwrap();
    assert_eq!(c, vec!["b-old".to_string(), "c-recent".to_string()]);
    assert!(!store
        .set_last_status(Platform::Taobao, "missing", "x", false)
        .await
        .unwrap());
}

async fn record_calls_increments_and_reports(kind: Kind) {
    let (_ledger, store) = TestLedger::fresh(kind).await;
    // 15:59 UTC is 23:59 GMT+8 on Jan 1; 16:00 UTC is Jan 2 in GMT+8.
    let t = Utc.with_ymd_and_hms(2026, 1, 1, 15, 59, 10).unwrap();
    let next_day = Utc.with_ymd_and_hms(2026, 1, 1, 16, 0, 0).unwrap();
    let rec = |at, api, class, calls, useful| CallRecord {
        minute: at,
        platform: Platform::Taobao,
        api,
        class,
        calls,
        useful,
    };
    let batch = vec![
        rec(t, Api::ItemGet, CallClass::Ok, 10, 8),
        rec(t, Api::ItemGet, CallClass::Slow, 2, 0),
        rec(t, Api::LogisticsTrace, CallClass::Ok, 5, 1),
    ];
    store.record_calls(&batch).await.unwrap();
    store.record_calls(&batch).await.unwrap();
    store
        .record_calls(&[rec(next_day, Api::ItemGet, CallClass::Ok, 100, 100)])
        .await
        .unwrap();
    let day1 = store
        .report_calls_for_day(chrono::NaiveDate::from_ymd_opt(2026, 1, 1).unwrap())
        .await
        .unwrap();
    assert_eq!(day1.calls_of(Platform::Taobao, Api::ItemGet), 24);
    assert_eq!(day1.calls_of(Platform::Taobao, Api::LogisticsTrace), 10);
    assert_eq!(day1.total_calls(), 34);
    assert_eq!(day1.total_useful(), 18);
    let item_get = &day1.by_api[0];
    assert_eq!((item_get.api, item_get.useful), (Api::ItemGet, 16));
    assert!((item_get.useful_ratio() - 16.0 / 24.0).abs() < 1e-9);
    assert!(day1
        .by_class
        .iter()
        .any(|c| c.api == Api::ItemGet && c.class == CallClass::Slow && c.calls == 4));
    let day2 = store
        .report_calls_for_day(chrono::NaiveDate::from_ymd_opt(2026, 1, 2).unwrap())
        .await
        .unwrap();
    assert_eq!(day2.total_calls(), 100);
    assert_eq!(minute_key(t), "2026-01-01 15:59");
}

async fn embedded_lock_refuses_second_holder_until_stale(kind: Kind) {
    let (ledger, store) = TestLedger::fresh(kind).await;
    let other = Store::connect(&ledger.url).await.unwrap();
    // Long enough that the refusal below comes inside it on a slow machine.
    let stale = Duration::from_secs(3);
    store
        .try_acquire_embedded_lock("worker-a", stale)
        .await
        .unwrap();
    match other.try_acquire_embedded_lock("worker-b", stale).await {
        Err(StoreError::LockHeld { held, .. }) => {
            assert_eq!(held.holder, "worker-a");
            assert_eq!(held.pid, std::process::id());
            let msg = StoreError::LockHeld {
                db: "x".into(),
                held,
            }
            .to_string();
            assert!(msg.contains("worker-a"), "{msg}");
        }
        other => panic!("second holder not refused: {other:?}"),
    }
    // The holder may re-take and heartbeat its own lock.
    store
        .try_acquire_embedded_lock("worker-a", stale)
        .await
        .unwrap();
    store.heartbeat_embedded_lock("worker-a").await.unwrap();
    // Without heartbeats the lease goes stale and another process takes it over.
    tokio::time::sleep(stale + Duration::from_millis(500)).await;
    other
        .try_acquire_embedded_lock("worker-b", stale)
        .await
        .unwrap();
    match store.heartbeat_embedded_lock("worker-a").await {
        Err(StoreError::LockLost { .. }) => {}
        other => panic!("old holder must learn it lost the lock: {other:?}"),
    }
    assert!(!store.release_embedded_lock("worker-a").await.unwrap());
    assert_eq!(
        store.embedded_lock_holder().await.unwrap().unwrap().holder,
        "worker-b"
    );
    assert!(other.release_embedded_lock("worker-b").await.unwrap());
    store
        .try_acquire_embedded_lock("worker-a", stale)
        .await
        .unwrap();
}

async fn gate_changes_and_stale_cache_round_trip(kind: Kind) {
    let (_ledger, store) = TestLedger::fresh(kind).await;
    let at = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    let change = GateChange {
        at,
        who: "ops@host".into(),
        platform: Platform::Taobao,
        api: Api::ItemGet,
        old_rate: Some(80.0),
        new_rate: 60.0,
        old_burst: Some(300),
        new_burst: Some(200),
        why: "429s at noon".into(),
    };
    // Stamped by the database's clock, not by the `at` the caller passed.
    let (id1, at1) = store.record_gate_change(&change).await.unwrap();
    assert!(
        (Utc::now() - at1).num_minutes().abs() < 10,
        "recorded at {at1}, passed {at}"
    );
    let mut second = change.clone();
    second.new_rate = 70.0;
    second.old_burst = None;
    let (id2, at2) = store.record_gate_change(&second).await.unwrap();
    assert!(at2 >= at1);
    let change = GateChange { at: at1, ..change };
    second.at = at2;
    let list = store.gate_changes(10).await.unwrap();
    assert_eq!(list, vec![(id2, second), (id1, change)]);
    assert_eq!(store.gate_changes(1).await.unwrap().len(), 1);

    assert!(store
        .stale_get(Platform::Jd, Api::ItemGet, "42")
        .await
        .unwrap()
        .is_none());
    store
        .stale_put(Platform::Jd, Api::ItemGet, "42", r#"{"v":1}"#, at)
        .await
        .unwrap();
    let later = at + ChronoDuration::hours(1);
    store
        .stale_put(Platform::Jd, Api::ItemGet, "42", r#"{"v":2}"#, later)
        .await
        .unwrap();
    let got = store
        .stale_get(Platform::Jd, Api::ItemGet, "42")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        got,
        StaleEntry {
            body: r#"{"v":2}"#.into(),
            stored_at: later
        }
    );
    assert!(store
        .stale_put(Platform::Jd, Api::ItemGet, "43", "not json", at)
        .await
        .is_err());
    // A batch (what the gateway flushes): one new key, one replaced.
    let entry = |v: &str| StaleEntry {
        body: format!(r#"{{"v":{v}}}"#),
        stored_at: later,
    };
    store
        .stale_put_many(&[
            (Platform::Jd, Api::ItemGet, "44".into(), entry("4")),
            (Platform::Jd, Api::ItemGet, "42".into(), entry("3")),
        ])
        .await
        .unwrap();
    // A key twice in one batch (two reads of one item before a flush): the latest wins.
    let newest = StaleEntry {
        body: r#"{"v":7}"#.into(),
        stored_at: later + ChronoDuration::milliseconds(5),
    };
    store
        .stale_put_many(&[
            (Platform::Jd, Api::ItemGet, "47".into(), newest.clone()),
            (Platform::Jd, Api::ItemGet, "47".into(), entry("6")),
        ])
        .await
        .unwrap();
    assert_eq!(
        store
            .stale_get(Platform::Jd, Api::ItemGet, "47")
            .await
            .unwrap(),
        Some(newest.clone())
    );
    for (key, v) in [("44", "4"), ("42", "3")] {
        let got = store
            .stale_get(Platform::Jd, Api::ItemGet, key)
            .await
            .unwrap();
        assert_eq!(got, Some(entry(v)), "{key}");
    }
    // A worker's 2 s of reads: on SQLite several transactions (the write lock is given up
    // between them); every answer is kept, the latest of a key wherever its copies fall.
    let mut big: Vec<(Platform, Api, String, StaleEntry)> = (0..100)
        .map(|i| (Platform::Jd, Api::ItemGet, format!("b{i:03}"), entry("8")))
        .collect();
    big.push((Platform::Jd, Api::ItemGet, "b000".into(), newest.clone()));
    store.stale_put_many(&big).await.unwrap();
    for i in 0..100 {
        let got = store
            .stale_get(Platform::Jd, Api::ItemGet, &format!("b{i:03}"))
            .await
            .unwrap();
        let want = if i == 0 { newest.clone() } else { entry("8") };
        assert_eq!(got, Some(want), "b{i:03}");
    }
    let bad = StaleEntry {
        body: "not json".into(),
        stored_at: later,
    };
    assert!(store
        .stale_put_many(&[
            (Platform::Jd, Api::ItemGet, "45".into(), entry("5")),
            (Platform::Jd, Api::ItemGet, "46".into(), bad),
        ])
        .await
        .is_err());
    assert_eq!(
        store
            .stale_get(Platform::Jd, Api::ItemGet, "45")
            .await
            .unwrap(),
        None,
        "a failed batch writes nothing"
    );
    assert_eq!(store.stale_purge(later).await.unwrap(), 0);
    assert_eq!(
        store
            .stale_purge(later + ChronoDuration::seconds(1))
            .await
            .unwrap(),
        103,
        "keys 42, 44, 47 and the 100 of the big batch"
    );
}

async fn views_report_progress_and_useful_ratio(kind: Kind) {
    let (ledger, store) = TestLedger::fresh(kind).await;
    let ks = keys(4);
    let id = store.create_job(JobKind::Listing, "{}", &ks).await.unwrap();
    store
        .finish_items(
            id,
            &[
                ItemOutcome::done(&ks[0], None),
                ItemOutcome::failed(&ks[1], ErrorClass::Fatal, "x"),
            ],
        )
        .await
        .unwrap();
    let minute = Utc::now();
    store
        .record_calls(&[
            CallRecord {
                minute,
                platform: Platform::Alibaba,
                api: Api::OrderList,
                class: CallClass::Ok,
                calls: 8,
                useful: 2,
            },
            CallRecord {
                minute,
                platform: Platform::Alibaba,
                api: Api::OrderList,
                class: CallClass::Retry,
                calls: 2,
                useful: 0,
            },
        ])
        .await
        .unwrap();
    // The views as an operator reads them; the casts make the numeric columns one type on both.
    let raw = ledger.raw().await;
    let row: (i64, String, i64, i64, i64, i64, i64, i64, f64) = raw
        .one(&format!(
            "SELECT job_id, kind, total, pending, done, stale, failed, skipped,
                    CAST(percent AS DOUBLE PRECISION)
             FROM job_progress WHERE job_id = {id}"
        ))
        .await;
    assert_eq!(row, (id, "listing".into(), 4, 2, 1, 0, 1, 0, 50.0));
    let calls: (String, String, i64, i64, f64) = raw
        .one(
            "SELECT platform, api, CAST(calls AS BIGINT), CAST(useful AS BIGINT),
                    CAST(useful_ratio AS DOUBLE PRECISION)
             FROM calls_by_api",
        )
        .await;
    assert_eq!(calls, ("alibaba".into(), "order_list".into(), 10, 2, 0.2));
}

#[test]
fn db_migrate_command_reports_and_uses_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("cli.db").display());
    let run = |db: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_syncfleet"))
            .args(["--db", db, "db", "migrate"])
            .output()
            .expect("run syncfleet")
    };
    let first = run(&url);
    let out = String::from_utf8_lossy(&first.stdout);
    assert_eq!(first.status.code(), Some(0), "{out}");
    assert!(out.contains("applied migration"), "{out}");
    assert!(out.contains("journal_mode=wal"), "{out}");
    let second = run(&url);
    let out = String::from_utf8_lossy(&second.stdout);
    assert_eq!(second.status.code(), Some(0));
    assert!(out.contains("up to date"), "{out}");
    // A malformed URL is the operator's input: exit 2, password never shown.
    let bad = run("postgres://app:hunter2@127.0.0.1:notaport/ledger");
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(2), "{err}");
    assert!(err.contains("postgres://app:***@127.0.0.1"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
    // A server that does not answer is a runtime failure (exit 1), named without the password,
    // with the reason the connection failed (not the pool's "timed out" after 30 s).
    let down = run("postgres://app:hunter2@127.0.0.1:1/ledger");
    let err = String::from_utf8_lossy(&down.stderr);
    assert_eq!(down.status.code(), Some(1), "{err}");
    assert!(err.to_lowercase().contains("refused"), "{err}");
    assert!(
        err.contains("postgres://app:***@127.0.0.1:1/ledger"),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "{err}");
}

/// `db migrate` on PostgreSQL creates the database when missing, then reports it up to date.
#[tokio::test]
async fn db_migrate_command_on_postgres() {
    let ledger = TestLedger::empty(Kind::Postgres).await;
    // A database that does not exist yet, on the test server: `db migrate` creates it.
    let url = format!("{}_new", ledger.url);
    let run = |db: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_syncfleet"))
            .args(["--db", db, "db", "migrate"])
            .output()
            .expect("run syncfleet")
    };
    let first = run(&url);
    let out = String::from_utf8_lossy(&first.stdout);
    assert_eq!(
        first.status.code(),
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert!(
        out.contains("applied migration") && out.contains("PostgreSQL"),
        "{out}"
    );
    let second = run(&url);
    let out = String::from_utf8_lossy(&second.stdout);
    assert!(out.contains("up to date"), "{out}");
    // Clean up the database the command made (the fixture drops only its own).
    let store = Store::connect_existing(&url).await.unwrap();
    assert_eq!(store.backend(), Backend::Postgres);
    store.close().await;
    let raw = ledger.raw().await;
    raw.execute(&format!(
        "DROP DATABASE IF EXISTS {} WITH (FORCE)",
        url.rsplit('/').next().unwrap()
    ))
    .await;
}

/// `enqueue orders --since 0001-01-01 --until 9999-12-31` queued 3.65M tasks. The
/// window is bounded: exit 2 with what was given and what is allowed, nothing written.
#[test]
fn enqueue_orders_refuses_an_unbounded_window() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("client.toml");
    std::fs::write(
        &config,
        "[platforms.taobao]\nendpoint = \"http://127.0.0.1:1/router/rest\"\napp_key = \"k\"\nsecret_env = \"SF_TEST_UNUSED_SECRET\"\n",
    )
    .unwrap();
    let db = dir.path().join("ledger.db");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_syncfleet"))
        .arg("--config")
        .arg(&config)
        .arg("--db")
        .arg(format!("sqlite://{}", db.display()))
        .args([
            "enqueue",
            "orders",
            "--platform",
            "taobao",
            "--shop",
            "shop-1",
            "--since",
            "0001-01-01",
            "--until",
            "9999-12-31",
        ])
        .env_remove("SYNCFLEET_CONFIG")
        .env_remove("SYNCFLEET_REDIS_URL")
        .env_remove("SYNCFLEET_DB")
        .output()
        .expect("run syncfleet");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("9999-12-30 16:00:00 UTC") && err.contains("at most 366 days"),
        "{err}"
    );
    assert!(!db.exists(), "nothing may be written for a refused job");
}

/// The shop directory: a shop added with sealed tokens (never in the clear), authorised anew
/// (the token row's generation moves on, a pause lifts), removed (tokens deleted, schedules
/// paused, not among the served shops' tokens), resealed only when unchanged since read.
async fn the_shop_directory_adds_authorises_anew_removes_and_reseals(kind: Kind) {
    let (_ledger, store) = TestLedger::fresh(kind).await;
    let shop = |access: &str, lifetime_ms: Option<i64>| NewLedgerShop {
        platform: Platform::Taobao,
        shop: "acme".into(),
        weight: 3,
        seller: Some("acme-nick".into()),
        sealed_access: access.into(),
        sealed_refresh: Some("sealed-r".into()),
        lifetime_ms,
    };
    assert!(store
        .add_ledger_shop(&shop("sealed-a1", Some(3_600_000)))
        .await
        .unwrap());
    let listed = store.ledger_shops().await.unwrap();
    assert_eq!(listed.len(), 1);
    let s = &listed[0];
    assert_eq!(
        (s.weight, s.seller.as_deref(), s.renewable),
        (3, Some("acme-nick"), true)
    );
    let left = s.token_remaining_ms.expect("an end");
    assert!(left > 3_500_000 && left <= 3_600_000, "{left}");
    let tokens = store.ledger_shop_tokens().await.unwrap();
    assert_eq!(tokens.len(), 1);
    let gen0 = tokens[0].2.generation;
    assert_eq!(tokens[0].2.source_mark, LEDGER_SOURCE);

    // Authorised anew: new tokens, the next generation, and a pause of the old session lifts.
    store
        .pause_shop(Platform::Taobao, "acme", "refused", "mark")
        .await
        .unwrap();
    assert!(
        !store
            .add_ledger_shop(&shop("sealed-a2", None))
            .await
            .unwrap(),
        "not new"
    );
    let t = store
        .shop_token(Platform::Taobao, "acme")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (t.sealed_access.as_str(), t.generation),
        ("sealed-a2", gen0 + 1)
    );
    assert!(store
        .shop_pause(Platform::Taobao, "acme")
        .await
        .unwrap()
        .is_none());

    // Resealed only when unchanged since read.
    assert!(!store
        .reseal_tokens(
            Platform::Taobao,
            "acme",
            ("sealed-a1", "sealed-r"),
            ("x", "y")
        )
        .await
        .unwrap());
    assert!(store
        .reseal_tokens(
            Platform::Taobao,
            "acme",
            ("sealed-a2", "sealed-r"),
            ("k.a", "k.r")
        )
        .await
        .unwrap());
    let t = store
        .shop_token(Platform::Taobao, "acme")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (t.sealed_access.as_str(), t.generation),
        ("k.a", gen0 + 1),
        "same tokens, same generation"
    );
    assert_eq!(store.sealed_tokens().await.unwrap().len(), 1);

    // Removed: its tokens gone, not among the served shops, removed once.
    assert!(store
        .remove_ledger_shop(Platform::Taobao, "acme")
        .await
        .unwrap());
    assert!(!store
        .remove_ledger_shop(Platform::Taobao, "acme")
        .await
        .unwrap());
    assert!(store
        .shop_token(Platform::Taobao, "acme")
        .await
        .unwrap()
        .is_none());
    assert!(store.ledger_shop_tokens().await.unwrap().is_empty());
    let s = store
        .ledger_shop(Platform::Taobao, "acme")
        .await
        .unwrap()
        .unwrap();
    assert!(s.removed_at.is_some());
    // Added again: served.
    assert!(
        store
            .add_ledger_shop(&shop("sealed-a3", None))
            .await
            .unwrap(),
        "new again"
    );
    let s = store
        .ledger_shop(Platform::Taobao, "acme")
        .await
        .unwrap()
        .unwrap();
    assert!(s.removed_at.is_none() && s.token_remaining_ms.is_none());
}

/// A job's counts are kept by the database as its items change (not counted at each status):
/// after finishes of every outcome, a reset to pending, a cancel, they equal a recount of
/// the items themselves.
async fn the_kept_counts_equal_a_recount_after_every_kind_of_change(kind: Kind) {
    let (_ledger, store) = TestLedger::fresh(kind).await;
    let ks = keys(40);
    let id = store.create_job(JobKind::Listing, "{}", &ks).await.unwrap();
    let recount = |items: Vec<ItemRecord>| {
        let n = |s: ItemStatus| items.iter().filter(|i| i.status == s).count() as u64;
        StatusCounts {
            pending: n(ItemStatus::Pending),
            done: n(ItemStatus::Done),
            stale: n(ItemStatus::Stale),
            failed: n(ItemStatus::Failed),
            skipped: n(ItemStatus::Skipped),
            cancelled: n(ItemStatus::Cancelled),
        }
    };
    let check = |store: Store| async move {
        let kept = store.job_status(id).await.unwrap().job.counts;
        let items = store.items(id, None, 1_000).await.unwrap();
        assert_eq!(kept, recount(items));
        kept
    };
    assert_eq!(check(store.clone()).await.pending, 40);
    let mut outcomes = Vec::new();
    for (i, k) in ks.iter().take(30).enumerate() {
        outcomes.push(match i % 4 {
            0 => ItemOutcome::done(k, None),
            1 => ItemOutcome::failed(k, ErrorClass::Slow, "limited"),
            2 => ItemOutcome::skipped(k, "dup"),
            _ => ItemOutcome::done(k, Some("1".into())),
        });
    }
    store.finish_items(id, &outcomes).await.unwrap();
    // The same outcomes again (a re-delivered task) change nothing.
    store.finish_items(id, &outcomes).await.unwrap();
    let c = check(store.clone()).await;
    assert_eq!((c.pending, c.failed), (10, 8));
    let slow = store.items_by_class(id, ErrorClass::Slow).await.unwrap();
    assert_eq!(store.reset_items_to_pending(id, &slow).await.unwrap(), 8);
    assert_eq!(check(store.clone()).await.pending, 18);
    store.control_job(id, ControlAction::Cancel).await.unwrap();
    let c = check(store.clone()).await;
    assert_eq!((c.pending, c.cancelled), (0, 18));
}
