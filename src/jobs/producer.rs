//! Producers: write the job and all its items to the ledger in one transaction, then push
//! one task per chunk of items. The ledger is the source of truth; the queue is transport,
//! so `reconcile` can always rebuild the queue's share from the ledger.

use super::orders::slices;
use super::spec::{JobKind, JobSpec};
use crate::config::Config;
use crate::platform::ErrorClass;
use crate::queue::{Lane, LiveCover, Queue, QueueError, TaskMsg};
use crate::store::{Store, StoreError};
use std::collections::HashSet;
use std::time::Duration;

/// What an enqueue did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnqueueReport {
    /// The new job's id in the ledger.
    pub job_id: i64,
    /// Items written to the ledger for the job.
    pub items: usize,
    /// Tasks (chunks of items) pushed to the queue.
    pub tasks: usize,
}

/// Why a producer (enqueue, reconcile, retry, dead-letter requeue) failed.
#[derive(Debug, thiserror::Error)]
pub enum ProducerError {
    /// The ledger failed or refused (no such job, duplicate keys, I/O).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The queue failed.
    #[error(transparent)]
    Queue(#[from] QueueError),
    /// The job spec could not be encoded for the ledger.
    #[error("job spec encoding: {0}")]
    Encode(#[from] serde_json::Error),
    /// The job is in the ledger, but pushing its tasks failed part way: `reconcile` pushes
    /// the rest.
    #[error(
        "job {job_id} is in the ledger but pushing its tasks failed after {pushed} task(s): {error}; \
         run `syncfleet reconcile {job_id}` once the queue is reachable"
    )]
    Push {
        /// The job, already in the ledger.
        job_id: i64,
        /// Tasks pushed before the batch that failed.
        pushed: usize,
        /// The queue's error.
        error: QueueError,
    },
}

/// Tasks pushed per progress report.
const PROGRESS_STEP: usize = 200;

/// The item keys of a job: listing ids as given, order-sync time slices, or the logistics
/// candidates the ledger has now (shipped, unsigned, not queried recently; distinct).
pub(crate) async fn item_keys(
    store: &Store,
    cfg: &Config,
    spec: &JobSpec,
    listing_ids: Vec<String>,
) -> Result<Vec<String>, ProducerError> {
    Ok(match spec {
        JobSpec::Listing { .. } => listing_ids,
        JobSpec::Orders { since, until, .. } => {
            slices(*since, *until, Duration::from_secs(cfg.jobs.order_slice_s))
        }
        JobSpec::Logistics { platform, shop, .. } => {
            let min = Duration::from_secs(cfg.jobs.logistics_min_interval_s);
            store.logistics_candidates(*platform, shop, min).await?
        }
    })
}

/// Create the job with `keys` as its items, then push its tasks. `on_progress(tasks_pushed)`
/// is called as tasks go out.
pub async fn enqueue(
    store: &Store,
    queue: &Queue,
    chunk_size: usize,
    spec: &JobSpec,
    keys: &[String],
    mut on_progress: impl FnMut(usize),
) -> Result<EnqueueReport, ProducerError> {
    // The spec stored in the ledger names the job; the items live in job_items, not in it.
    let mut stored = spec.clone();
    if let JobSpec::Listing { items, .. } = &mut stored {
        items.clear();
    }
    let spec_json = serde_json::to_string(&stored)?;
    let job_id = store.create_job(spec.kind(), &spec_json, keys).await?;
    let share = Share {
        shop: spec.shop().to_string(),
        lane: spec.lane(),
    };
    let tasks = chunk_tasks(job_id, spec.kind(), &share, keys, chunk_size);
    let mut pushed = 0;
    for batch in tasks.chunks(PROGRESS_STEP) {
        queue
            .push_bulk(batch)
            .await
            .map_err(|error| ProducerError::Push {
                job_id,
                pushed,
                error,
            })?;
        pushed += batch.len();
        on_progress(pushed);
    }
    Ok(EnqueueReport {
        job_id,
        items: keys.len(),
        tasks: tasks.len(),
    })
}

/// Whose turn a job's tasks take in the queue: its shop (the fair order) and its lane.
#[derive(Debug, Clone, Default)]
pub struct Share {
    /// The shop the job works for.
    pub shop: String,
    /// The job's lane.
    pub lane: Lane,
}

/// One task per `chunk_size` keys, numbered from 0, in `share`'s turn of the queue.
pub fn chunk_tasks(
    job_id: i64,
    kind: JobKind,
    share: &Share,
    keys: &[String],
    chunk_size: usize,
) -> Vec<TaskMsg> {
    keys.chunks(chunk_size.max(1))
        .enumerate()
        .map(|(i, chunk)| TaskMsg {
            job_id,
            kind,
            chunk: u32::try_from(i).unwrap_or(u32::MAX),
            keys: chunk.to_vec(),
            shop: share.shop.clone(),
            lane: share.lane,
        })
        .collect()
}

/// The shop and lane of a stored job; empty and bulk when its spec no longer parses (its
/// tasks then form one flow of their own; the runner reports the spec).
async fn job_share(store: &Store, job_id: i64) -> Result<Share, ProducerError> {
    Ok(JobSpec::stored(store, job_id)
        .await?
        .map(|s| Share {
            shop: s.shop().to_string(),
            lane: s.lane(),
        })
        .unwrap_or_default())
}

/// The job's pending items that no live task (ready, in flight or delayed) carries: what
/// is stranded (a lost queue, a producer killed between the ledger and the push, a dead
/// task whose items could not be marked). In `seq` order. The ledger is read first, then the
/// queue: an item whose task ends in between looks stranded (and its re-run finds it done);
/// the other way round an item pushed in between would.
pub(crate) async fn uncovered_pending(
    store: &Store,
    queue: &Queue,
    job_id: i64,
) -> Result<Vec<String>, ProducerError> {
    let size = JobSize::of(&store.job_status(job_id).await?.job);
    let mut cover = LiveCover::default();
    cover.want(job_id, pending_hashes(store, job_id, size).await?);
    let cover = queue.live_cover(cover).await?;
    pending_keys_of(store, job_id, size, &cover.uncovered(job_id)).await
}

/// Items a coverage check reads from the ledger at a time, by `seq` range: a million-item
/// job is read in pages and kept as 8-byte hashes, never as one result of its keys.
pub(crate) const PENDING_PAGE: u64 = 50_000;

/// A job's items and how many are pending (the ledger's kept counts): which way its pending
/// keys are read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct JobSize {
    pub(crate) total: u64,
    pub(crate) pending: u64,
}

impl JobSize {
    pub(crate) fn of(job: &crate::store::JobSummary) -> JobSize {
        JobSize {
            total: job.total,
            pending: job.counts.pending,
        }
    }
}

/// Hand `each` the pending keys of `job_id` in `seq` order: in one read by status while at
/// most a page is pending (the status index: the cost follows the pending items, not the
/// job's size: the end of a million-item job cost a second in `seq` pages), else a `seq` page
/// at a time (memory bounded by the page).
async fn each_pending_page(
    store: &Store,
    job_id: i64,
    size: JobSize,
    page_size: u64,
    mut each: impl FnMut(Vec<String>),
) -> Result<(), ProducerError> {
    if size.pending <= page_size {
        each(store.pending_keys(job_id).await?);
        return Ok(());
    }
    for page in 0..size.total.div_ceil(page_size) {
        each(store.chunk_pending_keys(job_id, page, page_size).await?);
    }
    Ok(())
}

/// The hashes ([`LiveCover::key_hash`]) of the pending keys of `job_id`.
pub(crate) async fn pending_hashes(
    store: &Store,
    job_id: i64,
    size: JobSize,
) -> Result<Vec<u64>, ProducerError> {
    let mut hashes = Vec::new();
    each_pending_page(store, job_id, size, PENDING_PAGE, |keys| {
        hashes.extend(keys.iter().map(|k| LiveCover::key_hash(k)));
    })
    .await?;
    Ok(hashes)
}

/// The pending keys of `job_id` whose hashes are in `wanted`, in `seq` order (a second pass;
/// nothing is read when nothing is wanted).
pub(crate) async fn pending_keys_of(
    store: &Store,
    job_id: i64,
    size: JobSize,
    wanted: &HashSet<u64>,
) -> Result<Vec<String>, ProducerError> {
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let mut keys = Vec::new();
    each_pending_page(store, job_id, size, PENDING_PAGE, |page_keys| {
        keys.extend(
            page_keys
                .into_iter()
                .filter(|k| wanted.contains(&LiveCover::key_hash(k))),
        );
    })
    .await?;
    Ok(keys)
}

/// Push `keys` of the job again as fresh tasks, in the job's turn of the queue; returns the
/// tasks pushed.
pub(crate) async fn push_again(
    store: &Store,
    queue: &Queue,
    job_id: i64,
    keys: &[String],
    chunk_size: usize,
) -> Result<usize, ProducerError> {
    let kind = store.job_status(job_id).await?.job.kind;
    let share = job_share(store, job_id).await?;
    let tasks = chunk_tasks(job_id, kind, &share, keys, chunk_size);
    queue.push_bulk(&tasks).await?;
    Ok(tasks.len())
}

/// Re-push the items the ledger says are unfinished and no live task carries: a lost queue
/// (flushed Redis, deleted queue file) loses no work, and items in flight or delayed are
/// not pushed a second time.
pub(crate) async fn reconcile(
    store: &Store,
    queue: &Queue,
    job_id: i64,
    chunk_size: usize,
) -> Result<EnqueueReport, ProducerError> {
    let keys = uncovered_pending(store, queue, job_id).await?;
    let tasks = push_again(store, queue, job_id, &keys, chunk_size).await?;
    Ok(EnqueueReport {
        job_id,
        items: keys.len(),
        tasks,
    })
}

/// What `dead --requeue` did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RequeueReport {
    /// Items put back to pending and pushed.
    pub(crate) items: usize,
    pub(crate) tasks: usize,
    /// Dead-letter entries removed from the queue.
    pub(crate) entries: usize,
}

/// Run dead letters again: the items of `job` (or of every job) that failed as dead letters
/// go back to pending and are pushed as fresh tasks, and the queue's dead entries of those
/// jobs are removed (pushed first, removed after: a failure in between duplicates a task,
/// harmlessly, and never loses one).
pub(crate) async fn requeue_dead(
    store: &Store,
    queue: &Queue,
    job: Option<i64>,
    chunk_size: usize,
) -> Result<RequeueReport, ProducerError> {
    let mut report = RequeueReport::default();
    let entries = queue.dead_entries(usize::MAX >> 1).await?;
    let mut jobs: Vec<i64> = store
        .dead_item_counts()
        .await?
        .into_iter()
        .map(|(j, _)| j)
        .chain(
            entries
                .iter()
                .filter_map(|e| e.task.as_ref().map(|t| t.job_id)),
        )
        .filter(|j| job.is_none_or(|want| want == *j))
        .collect();
    jobs.sort_unstable();
    jobs.dedup();
    let mut pushed: HashSet<(i64, String)> = HashSet::new();
    for job_id in &jobs {
        let status = store.job_status(*job_id).await?;
        let keys = store.dead_items(*job_id).await?;
        let revived = store.revive_dead_items(*job_id, &keys).await?;
        pushed.extend(revived.iter().map(|k| (*job_id, k.clone())));
        let share = job_share(store, *job_id).await?;
        let tasks = chunk_tasks(*job_id, status.job.kind, &share, &revived, chunk_size);
        queue.push_bulk(&tasks).await?;
        report.items += revived.len();
        report.tasks += tasks.len();
    }
    for e in entries {
        let Some(task) = &e.task else { continue };
        if !jobs.contains(&task.job_id) {
            continue;
        }
        // Items the dead hook could not mark are still pending: run them too.
        let pending: Vec<String> = store
            .items_to_run(task.job_id, &task.keys)
            .await?
            .into_iter()
            .filter(|k| !pushed.contains(&(task.job_id, k.clone())))
            .collect();
        let again = (!pending.is_empty()).then(|| TaskMsg {
            keys: pending,
            ..task.clone()
        });
        if let Some(t) = &again {
            report.items += t.keys.len();
            report.tasks += 1;
        }
        queue.requeue_dead(&e.id, again.as_ref()).await?;
        report.entries += 1;
    }
    Ok(report)
}

/// Put a job's items that failed with `class` back to pending and push them again.
pub(crate) async fn retry_class(
    store: &Store,
    queue: &Queue,
    job_id: i64,
    class: ErrorClass,
    chunk_size: usize,
) -> Result<EnqueueReport, ProducerError> {
    let status = store.job_status(job_id).await?;
    let keys = store.items_by_class(job_id, class).await?;
    store.reset_items_to_pending(job_id, &keys).await?;
    let share = job_share(store, job_id).await?;
    let tasks = chunk_tasks(job_id, status.job.kind, &share, &keys, chunk_size);
    queue.push_bulk(&tasks).await?;
    Ok(EnqueueReport {
        job_id,
        items: keys.len(),
        tasks: tasks.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_every_key_once() {
        let keys: Vec<String> = (1..=250).map(|i| i.to_string()).collect();
        let tasks = chunk_tasks(7, JobKind::Listing, &Share::default(), &keys, 100);
        assert_eq!(tasks.len(), 3);
        assert_eq!(tasks[2].keys.len(), 50);
        assert_eq!(tasks[1].chunk, 1);
        let all: Vec<String> = tasks.into_iter().flat_map(|t| t.keys).collect();
        assert_eq!(all, keys);
    }

    /// The pending keys read in one go (few pending) and by `seq` pages (many) are the same
    /// keys in the same order.
    #[tokio::test]
    async fn pending_keys_read_in_one_go_or_by_pages_agree() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::scratch_sqlite(dir.path()).await;
        let keys: Vec<String> = (1..=250).map(|i| i.to_string()).collect();
        let job = store
            .create_job(JobKind::Listing, "{}", &keys)
            .await
            .expect("job");
        let done: Vec<crate::store::ItemOutcome> = keys
            .iter()
            .step_by(3)
            .map(|k| crate::store::ItemOutcome::done(k.clone(), None))
            .collect();
        store.finish_items(job, &done).await.expect("outcomes");
        let size = JobSize::of(&store.job_status(job).await.expect("status").job);
        assert_eq!((size.total, size.pending), (250, 166));
        let mut ways = Vec::new();
        for page_size in [1_000, 40] {
            let mut read = Vec::new();
            each_pending_page(&store, job, size, page_size, |k| read.extend(k))
                .await
                .expect("read");
            ways.push(read);
        }
        let expected: Vec<String> = keys
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 3 != 0)
            .map(|(_, k)| k.clone())
            .collect();
        assert_eq!(ways[0], expected, "one read");
        assert_eq!(ways[1], expected, "by pages");
    }
}
