//! A worker's view of the operators' job control (paused, cancelled): read from the ledger,
//! at most once a second per job per process, before a task and while it runs
//! (docs/design.md, "Job control").

use crate::clock::{elapsed_since, monotonic_now};
use crate::store::{JobControl, Store, StoreError};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How old a job's control read may be before it is read again.
pub(crate) const CONTROL_FRESH: Duration = Duration::from_secs(1);

/// While a task runs, how often it looks at its job's control (served from the cache).
pub(crate) const CONTROL_POLL: Duration = Duration::from_millis(250);

/// Jobs whose control a process keeps at most before it lets the stale reads go: a
/// long-running worker meets a new job every scheduled run, and a read older than
/// [`CONTROL_FRESH`] is read again anyway.
pub(crate) const CONTROLS_KEPT: usize = 256;

/// How soon a task of a paused job comes back to look again (uncharged).
pub(crate) const PAUSED_RECHECK: Duration = Duration::from_secs(2);

/// The jobs' control as this process last read it.
pub(crate) struct JobControls {
    store: Store,
    seen: Mutex<HashMap<i64, (Instant, Option<JobControl>)>>,
}

impl JobControls {
    pub(crate) fn new(store: Store) -> JobControls {
        JobControls {
            store,
            seen: Mutex::new(HashMap::new()),
        }
    }

    /// The job's control, read from the ledger when the last read is older than
    /// [`CONTROL_FRESH`].
    pub(crate) async fn get(&self, job_id: i64) -> Result<Option<JobControl>, StoreError> {
        if let Some(&(at, control)) = self.lock().get(&job_id) {
            if elapsed_since(at) < CONTROL_FRESH {
                return Ok(control);
            }
        }
        let control = self.store.job_control(job_id).await?;
        let mut seen = self.lock();
        if seen.len() >= CONTROLS_KEPT {
            seen.retain(|_, (at, _)| elapsed_since(*at) < CONTROL_FRESH);
        }
        seen.insert(job_id, (monotonic_now(), control));
        Ok(control)
    }

    /// Jobs whose control is kept.
    #[cfg(test)]
    fn kept(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i64, (Instant, Option<JobControl>)>> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::JobKind;

    /// A worker that meets thousands of jobs keeps only the recent reads.
    #[tokio::test]
    async fn the_reads_kept_stay_bounded() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::scratch_sqlite(dir.path()).await;
        let controls = JobControls::new(store.clone());
        let key = vec!["k".to_string()];
        for _ in 0..(CONTROLS_KEPT + 50) {
            let job = store
                .create_job(JobKind::Listing, "{}", &key)
                .await
                .expect("job");
            assert_eq!(controls.get(job).await.expect("control"), None);
        }
        // Reads younger than CONTROL_FRESH are all kept; once stale they are let go.
        tokio::time::sleep(CONTROL_FRESH).await;
        let job = store
            .create_job(JobKind::Listing, "{}", &key)
            .await
            .expect("job");
        controls.get(job).await.expect("control");
        assert_eq!(controls.kept(), 1);
    }
}
