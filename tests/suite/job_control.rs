//! Job control from the command line, against a real worker process, counted at the
//! simulator: `job pause` stops the calls and `job resume` lets them go on; `job cancel` ends
//! the pending items `cancelled` and no call is made for them afterwards.

use crate::jobs_harness::{self, ClientOpts, Harness};
use std::time::{Duration, Instant};
use syncfleet::platform::{Api, Platform};
use syncfleet::store::{JobControl, JobState};

const TO: Platform = Platform::Taobao;

/// item_add calls the simulator counted.
fn adds(h: &Harness) -> u64 {
    h.stats(TO, Api::ItemAdd).calls
}

/// Wait until the simulator's item_add count stops moving (two reads a second apart agree);
/// returns it and how long after `since` it last moved.
async fn settled_adds(h: &Harness, since: Instant) -> (u64, Duration) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = adds(h);
    let mut moved = since.elapsed();
    let mut still_since = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let now = adds(h);
        if now != last {
            last = now;
            moved = since.elapsed();
            still_since = Instant::now();
        } else if still_since.elapsed() >= Duration::from_secs(1) {
            return (last, moved);
        }
        assert!(Instant::now() < deadline, "item_add calls never stopped");
    }
}

async fn wait_done_at_least(h: &Harness, job: i64, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while h
        .store
        .job_status(job)
        .await
        .expect("status")
        .job
        .counts
        .done
        < n
    {
        assert!(
            Instant::now() < deadline,
            "job {job} never reached {n} done"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_stops_calls_resume_goes_on_and_cancel_ends_the_pending_items() {
    let _serial = jobs_harness::serial().await;
    // A slow write gate, so the job is still running when the operator acts.
    let opts = ClientOpts {
        rate: 40.0,
        burst: 1.0,
        chunk_size: 20,
        ..ClientOpts::default()
    };
    let mut h = Harness::start(jobs_harness::listing_sim(), &opts).await;
    let job = h.enqueue_listing(2_000);
    h.spawn_worker(4, 30);
    wait_done_at_least(&h, job, 40).await;

    // Pause: the calls stop (those on the wire finish) and stay stopped.
    h.run(&["job", "pause", &job.to_string()]);
    let paused_at = Instant::now();
    let (frozen, last_call) = settled_adds(&h, paused_at).await;
    println!("pause: the last item_add reached the simulator {last_call:?} after the command");
    let status = h.store.job_status(job).await.expect("status");
    assert_eq!(status.job.control, Some(JobControl::Paused));
    assert!(status.job.counts.pending > 0, "{:?}", status.job.counts);
    let shown = h.run(&["status", &job.to_string()]);
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains("(listing, taobao/default, bulk, paused)"),
        "{shown}"
    );
    // A paused job makes no call however long it stays paused (a window, not a race: any
    // call in it is a failure whatever the machine's speed).
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(adds(&h), frozen, "calls were made for a paused job");

    // Resume: the job goes on.
    h.run(&["job", "resume", &job.to_string()]);
    let done_then = status.job.counts.done;
    wait_done_at_least(&h, job, done_then + 40).await;

    // Cancel: the pending items end `cancelled`, the job finishes, and the calls stop.
    h.run(&["job", "cancel", &job.to_string()]);
    let cancelled_at = Instant::now();
    let (frozen, last_call) = settled_adds(&h, cancelled_at).await;
    println!("cancel: the last item_add reached the simulator {last_call:?} after the command");
    let status = h.store.job_status(job).await.expect("status");
    let c = &status.job.counts;
    assert_eq!(status.job.state, JobState::Finished, "{c:?}");
    assert_eq!(status.job.control, Some(JobControl::Cancelled));
    assert_eq!(c.pending, 0, "{c:?}");
    assert!(c.cancelled > 0, "{c:?}");
    assert_eq!(c.done + c.cancelled, 2_000, "{c:?}");
    let shown = h.run(&["status", &job.to_string()]);
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains("(listing, taobao/default, bulk, cancelled)")
            && shown.contains(&format!("cancelled {}", c.cancelled)),
        "{shown}"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(adds(&h), frozen, "calls were made for a cancelled job");
    // Every product made is a done item: a write on the wire at the cancel is recorded
    // over `cancelled`, never lost.
    let s = h.stats(TO, Api::ItemAdd);
    assert_eq!(s.ok - s.duplicate_writes, c.done, "{s:?} vs {c:?}");

    // A finished job cannot be paused: exit 2, said plainly.
    let out = h
        .command_with(&h.config, &["job", "pause", &job.to_string()])
        .output()
        .expect("run job pause");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("finished"));
}
