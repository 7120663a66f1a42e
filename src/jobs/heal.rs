//! The queue heals itself: pending items that no live task carries are pushed again, by one
//! worker of the fleet at a time, without an operator (docs/design.md, "Self-healing queue").
//!
//! A task can be lost where no worker sees it go: an acknowledged push lost in a Redis
//! failover or to `appendfsync everysec`, an entry deleted, a producer killed between the
//! ledger and the push, a dead task whose items could not be marked. `reconcile` finds such
//! items on demand; the heal loop runs the same check every `[queue] heal_interval_s` under a
//! fleet lease, and pushes an item again only when two sweeps in a row found it uncovered
//! ([`Sweep`]): an item is briefly uncovered while its job is being pushed, and never for
//! a whole interval unless its task is gone.

use super::producer::{pending_hashes, pending_keys_of, push_again, JobSize, ProducerError};
use crate::clock::{elapsed_since, monotonic_now};
use crate::link::lease::Leases;
use crate::queue::LiveCover;
use crate::queue::Queue;
use crate::shutdown::Shutdown;
use crate::store::Store;
use crate::throttle::Gates;
use chrono::{DateTime, Utc};
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// The fleet lease that elects the healing worker.
const HEAL_LEASE: &str = "queue-heal";

/// What the previous sweep found uncovered, per job. Pure: the caller does the reading.
#[derive(Debug, Default)]
pub(crate) struct Sweep {
    last: HashMap<i64, HashSet<String>>,
}

impl Sweep {
    /// This sweep found `found` (job -> pending keys no live task carries); returns the keys
    /// the previous sweep found too (to push again), and remembers this sweep's.
    pub(crate) fn confirm(&mut self, found: HashMap<i64, Vec<String>>) -> Vec<(i64, Vec<String>)> {
        let mut confirmed = Vec::new();
        for (job, keys) in &found {
            if let Some(before) = self.last.get(job) {
                let both: Vec<String> = keys
                    .iter()
                    .filter(|k| before.contains(*k))
                    .cloned()
                    .collect();
                if !both.is_empty() {
                    confirmed.push((*job, both));
                }
            }
        }
        confirmed.sort_by_key(|(job, _)| *job);
        // A confirmed key is pushed now: it must be found twice again before another push.
        self.last = found
            .into_iter()
            .map(|(job, keys)| {
                let pushed: HashSet<&String> = confirmed
                    .iter()
                    .filter(|(j, _)| *j == job)
                    .flat_map(|(_, k)| k.iter())
                    .collect();
                let rest = keys.into_iter().filter(|k| !pushed.contains(k)).collect();
                (job, rest)
            })
            .collect();
        confirmed
    }
}

/// One sweep: the running jobs' pending items that no live task carries, confirmed by the
/// previous sweep, pushed again in their job's turn. Returns the items pushed.
pub(crate) async fn heal_once(
    store: &Store,
    queue: &Queue,
    sweep: &mut Sweep,
    chunk_size: usize,
) -> Result<usize, ProducerError> {
    let jobs = store.running_job_specs().await?;
    // The ledger first, then one consistent snapshot of the queue (as `uncovered_pending`);
    // pending keys are kept as hashes (read in one go while few are pending, else by `seq`
    // pages), so a million-item job costs this sweep megabytes, not the hundreds its keys and
    // tasks would.
    let mut sizes = Vec::with_capacity(jobs.len());
    let mut cover = LiveCover::default();
    for (job, _) in &jobs {
        let size = JobSize::of(&store.job_status(*job).await?.job);
        cover.want(*job, pending_hashes(store, *job, size).await?);
        sizes.push((*job, size));
    }
    if !cover.wants_nothing() {
        cover = queue.live_cover(cover).await?;
    }
    let mut found: HashMap<i64, Vec<String>> = HashMap::new();
    for (job, size) in sizes {
        let keys = pending_keys_of(store, job, size, &cover.uncovered(job)).await?;
        if !keys.is_empty() {
            found.insert(job, keys);
        }
    }
    // What this sweep found, for `status` (which reads it instead of every key itself).
    let job_ids: Vec<i64> = jobs.iter().map(|(job, _)| *job).collect();
    let counts: Vec<(i64, usize)> = found.iter().map(|(job, keys)| (*job, keys.len())).collect();
    store.record_sweep(&job_ids, &counts).await?;
    let mut pushed = 0;
    for (job, keys) in sweep.confirm(found) {
        let tasks = push_again(store, queue, job, &keys, chunk_size).await?;
        tracing::warn!(
            job,
            items = keys.len(),
            tasks,
            "pending items no live task carried (a lost task) pushed again"
        );
        pushed += keys.len();
    }
    Ok(pushed)
}

/// Prune the ledger by `retention` (docs/design.md, "Retention"); logs what went.
async fn prune(store: &Store, retention: &crate::config::RetentionConfig, now: DateTime<Utc>) {
    match store.prune(retention, now).await {
        Ok(p) if p.total() == 0 => {}
        Ok(p) => tracing::info!(
            stale_cache = p.stale_cache,
            messages = p.messages,
            scheduled_jobs = p.scheduled_jobs,
            schedule_runs = p.schedule_runs,
            hook_deliveries = p.hook_deliveries,
            calls = p.calls,
            "pruned the ledger by [retention]"
        ),
        Err(e) => tracing::warn!("pruning the ledger failed (the next round tries again): {e}"),
    }
}

/// Sweep every `interval` until `shutdown`; only the worker holding the heal lease sweeps (1.5 intervals, renewed each round), and prunes the ledger at its first round
/// and then every `[retention] prune_every_s` (at most once a round). Each sweep also raises
/// the gates' counts of today to the ledger's (`quota_floor`).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run_heal_loop(
    store: Store,
    queue: Queue,
    gates: Gates,
    leases: std::sync::Arc<dyn Leases>,
    holder: String,
    interval: Duration,
    chunk_size: usize,
    retention: crate::config::RetentionConfig,
    shutdown: Shutdown,
) {
    let mut sweep = Sweep::default();
    let mut pruned_at: Option<std::time::Instant> = None;
    let mut rounds = shutdown.every(interval);
    while rounds.next().await {
        match leases
            .hold(HEAL_LEASE, &holder, interval + interval / 2)
            .await
        {
            Ok(true) => {}
            // Another worker heals; what this one saw before is stale by its next turn.
            Ok(false) => {
                sweep = Sweep::default();
                continue;
            }
            Err(e) => {
                tracing::debug!("heal round skipped: {e}");
                continue;
            }
        }
        if let Err(e) = heal_once(&store, &queue, &mut sweep, chunk_size).await {
            tracing::warn!("queue heal sweep failed (the next one tries again): {e}");
        }
        let prune_every = Duration::from_secs(retention.prune_every_s.max(1));
        if pruned_at.is_none_or(|t| elapsed_since(t) >= prune_every) {
            prune(&store, &retention, gates.clock().utc()).await;
            pruned_at = Some(monotonic_now());
        }
        match super::quota_floor::floor_from_ledger(&store, &gates).await {
            Ok(0) => {}
            Ok(raised) => tracing::warn!(
                raised,
                "the gates counted fewer calls today than the ledger (lost gate state): raised to the ledger's"
            ),
            Err(e) => tracing::warn!("{e} (the next sweep tries again)"),
        }
    }
    leases.release(HEAL_LEASE, &holder).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(entries: &[(i64, &[&str])]) -> HashMap<i64, Vec<String>> {
        entries
            .iter()
            .map(|(j, keys)| (*j, keys.iter().map(|k| k.to_string()).collect()))
            .collect()
    }

    #[test]
    fn an_item_is_pushed_only_when_two_sweeps_in_a_row_found_it() {
        let mut s = Sweep::default();
        assert!(s.confirm(found(&[(1, &["a", "b"])])).is_empty());
        // "a" was covered again (its push landed); "b" is still uncovered: confirmed.
        let c = s.confirm(found(&[(1, &["b", "c"])]));
        assert_eq!(c, vec![(1, vec!["b".to_string()])]);
        // "b" was pushed: not again until found twice more; "c" now twice.
        let c = s.confirm(found(&[(1, &["b", "c"])]));
        assert_eq!(c, vec![(1, vec!["c".to_string()])]);
        let c = s.confirm(found(&[(1, &["b"]), (2, &["x"])]));
        assert_eq!(c, vec![(1, vec!["b".to_string()])]);
        // A job with nothing uncovered is forgotten.
        assert!(s.confirm(found(&[])).is_empty());
        assert!(s.confirm(found(&[(2, &["x"])])).is_empty());
    }
}
