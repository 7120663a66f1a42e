//! Putting failed work back: `dead` (dead letters, optionally requeued), `reconcile` (pending
//! items no task carries) and `retry` (failed items of one error class).

use crate::app::runtime::Runtime;
use crate::cli::{Cli, CliError};
use crate::jobs::producer;
use crate::platform::ErrorClass;
use clap::Args;

/// Arguments of `syncfleet dead`.
#[derive(Debug, Args)]
pub struct DeadArgs {
    /// Only this job's dead letters.
    #[arg(long)]
    pub(crate) job: Option<i64>,
    /// Put the dead letters' items back to pending and push them again (and remove the
    /// dead entries). Fix the cause first: they failed on every attempt.
    #[arg(long)]
    pub(crate) requeue: bool,
    /// Dead entries listed at most.
    #[arg(long, default_value_t = 50)]
    pub(crate) limit: usize,
}

/// `syncfleet dead`: the tasks that exhausted their attempts, and their items.
pub(crate) async fn dead(cli: &Cli, args: &DeadArgs) -> Result<(), CliError> {
    let cfg = cli.load_config()?;
    let chunk = cfg.queue.chunk_size;
    let rt = Runtime::open(cfg, &cli.db, cli.redis.as_deref()).await?;
    if args.requeue {
        let r = producer::requeue_dead(&rt.store, &rt.queue, args.job, chunk).await?;
        println!(
            "{} dead item(s) pending again in {} task(s); {} dead entr{} removed",
            r.items,
            r.tasks,
            r.entries,
            if r.entries == 1 { "y" } else { "ies" }
        );
        return Ok(());
    }
    let entries: Vec<_> = rt
        .queue
        .dead_entries(args.limit.max(1))
        .await
        .map_err(|e| CliError::runtime(e.to_string()))?
        .into_iter()
        .filter(|e| {
            args.job
                .is_none_or(|j| e.task.as_ref().is_some_and(|t| t.job_id == j))
        })
        .collect();
    let counts = rt
        .store
        .dead_item_counts()
        .await
        .map_err(|e| CliError::runtime(e.to_string()))?;
    if entries.is_empty() && counts.is_empty() {
        println!("no dead letters");
        return Ok(());
    }
    if !entries.is_empty() {
        println!(
            "{:<20}  {:>6}  {:>6}  {:>6}  {:>8}  error",
            "entry", "job", "chunk", "items", "attempts"
        );
    }
    for e in &entries {
        let (job, chunk, items) = e
            .task
            .as_ref()
            .map_or(("?".to_string(), "?".to_string(), 0), |t| {
                (t.job_id.to_string(), t.chunk.to_string(), t.keys.len())
            });
        println!(
            "{:<20}  {:>6}  {:>6}  {:>6}  {:>8}  {}",
            e.id, job, chunk, items, e.attempts, e.error
        );
    }
    for (job, n) in counts
        .iter()
        .filter(|(j, _)| args.job.is_none_or(|want| want == *j))
    {
        println!("job {job}: {n} item(s) failed as dead letters");
    }
    println!("run them again: syncfleet dead --requeue [--job N]");
    Ok(())
}

/// Arguments of `syncfleet reconcile`.
#[derive(Debug, Args)]
pub struct ReconcileArgs {
    pub(crate) job: i64,
}

pub(crate) async fn reconcile(cli: &Cli, args: &ReconcileArgs) -> Result<(), CliError> {
    let cfg = cli.load_config()?;
    let chunk = cfg.queue.chunk_size;
    let rt = Runtime::open(cfg, &cli.db, cli.redis.as_deref()).await?;
    let r = producer::reconcile(&rt.store, &rt.queue, args.job, chunk).await?;
    println!(
        "job {}: re-pushed {} unfinished item(s) that no live task carries, in {} task(s)",
        r.job_id, r.items, r.tasks
    );
    Ok(())
}

/// Arguments of `syncfleet retry`.
#[derive(Debug, Args)]
pub struct RetryArgs {
    pub(crate) job: i64,
    /// Error class of the failed items to run again (retry, slow or unknown; fatal needs a fix first).
    #[arg(long)]
    pub(crate) class: ErrorClass,
}

pub(crate) async fn retry(cli: &Cli, args: &RetryArgs) -> Result<(), CliError> {
    if args.class == ErrorClass::Fatal {
        return Err(CliError::input(
            "fatal failures are caller errors (params, signature, session): retrying them only burns quota; fix the cause and enqueue those items again",
        ));
    }
    let cfg = cli.load_config()?;
    let chunk = cfg.queue.chunk_size;
    let rt = Runtime::open(cfg, &cli.db, cli.redis.as_deref()).await?;
    let r = producer::retry_class(&rt.store, &rt.queue, args.job, args.class, chunk).await?;
    println!(
        "job {}: {} item(s) failed as {} are pending again ({} task(s))",
        r.job_id, r.items, args.class, r.tasks
    );
    Ok(())
}
