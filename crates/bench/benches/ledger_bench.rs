//! Ledger timings on a real SQLite file in a temp dir (WAL, synchronous=NORMAL).
//!
//! Run: `scripts/bench ledger_bench [ITEMS]` (default 100000 items).
//! Prints create_job of ITEMS items (json_each, one statement) against a same-run baseline
//! of multi-row INSERTs of 500 bound rows, then the per-chunk operations a worker does.

use std::time::{Duration, Instant};
use syncfleet::platform::ErrorClass;
use syncfleet::store::{ItemOutcome, JobKind, Store};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = match syncfleet_testkit::program_args().first() {
        Some(a) => a.parse()?,
        None => 100_000,
    };
    let dir = tempfile::tempdir()?;
    let url = format!("sqlite://{}", dir.path().join("bench.db").display());
    let store = Store::connect(&url).await?;
    store.migrate().await?;
    let keys: Vec<String> = (0..n)
        .map(|i| format!("{}", 600_000_000_000u64 + i as u64))
        .collect();

    const RUNS: usize = 5;
    let mut json_each = Vec::new();
    let mut multirow = Vec::new();
    let mut last_job = 0;
    for _ in 0..RUNS {
        let t = Instant::now();
        last_job = store.create_job(JobKind::Listing, "{}", &keys).await?;
        json_each.push(t.elapsed());
        let t = Instant::now();
        store
            .create_job_multirow_baseline(JobKind::Listing, "{}", &keys, 500)
            .await?;
        multirow.push(t.elapsed());
    }
    let (a, b) = (median(json_each), median(multirow));
    println!("create_job {n} items, median of {RUNS}:");
    println!("  json_each (create_job)        {}", ms(a));
    println!("  multi-row INSERT x500 (base)  {}", ms(b));
    println!(
        "  ratio baseline / create_job   {:.2}x",
        b.as_secs_f64() / a.as_secs_f64()
    );

    // What a worker does per task of 100 items on a job of n items.
    let job = last_job;
    let chunk: Vec<String> = keys[..100].to_vec();
    let t = Instant::now();
    let todo = store.items_to_run(job, &chunk).await?;
    let d_run = t.elapsed();
    let outcomes: Vec<ItemOutcome> = todo
        .iter()
        .enumerate()
        .map(|(i, k)| {
            if i % 10 == 0 {
                ItemOutcome::failed(k, ErrorClass::Fatal, "bad param")
            } else {
                ItemOutcome::done(k, Some("1".into()))
            }
        })
        .collect();
    let t = Instant::now();
    store.finish_items(job, &outcomes).await?;
    let d_finish = t.elapsed();
    let t = Instant::now();
    let status = store.job_status(job).await?;
    let d_status = t.elapsed();
    let t = Instant::now();
    let chunks = store.pending_chunks(job, 100).await?;
    let d_chunks = t.elapsed();
    println!("per task of 100 items on a job of {n}:");
    println!("  items_to_run     {}", ms(d_run));
    println!("  finish_items     {}", ms(d_finish));
    println!(
        "  job_status       {} ({} pending)",
        ms(d_status),
        status.job.counts.pending
    );
    println!(
        "  pending_chunks   {} ({} chunks)",
        ms(d_chunks),
        chunks.len()
    );
    store.close().await;
    Ok(())
}
