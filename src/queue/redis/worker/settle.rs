//! What happens to each delivery: run the handler, then ack, re-queue with backoff, dead-letter
//! or give it back, each retried until it settles.

use super::*;
use crate::clock::monotonic_now;

impl Shared {
    /// Run a Redis operation until it succeeds, for at most the claim idle time (after that
    /// another worker owns the entry anyway).
    async fn settle<F, Fut>(&self, what: &str, mut op: F) -> bool
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<(), RedisError>>,
    {
        let deadline = monotonic_now() + self.q.opts.claim_idle();
        let mut backoff = SETTLE_RETRY.doubling();
        loop {
            match op().await {
                Ok(()) => return true,
                Err(e) => {
                    self.note_error(what, &e).await;
                    let wait = backoff.next_delay();
                    if monotonic_now() + wait > deadline {
                        warn!(worker = %self.worker, op = what, "giving up; the entry will be recovered as an orphan");
                        return false;
                    }
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    pub(super) async fn execute<H, Fut>(&self, env: Envelope, handler: &H)
    where
        H: Fn(TaskMsg, TaskCtx) -> Fut,
        Fut: Future<Output = TaskResult>,
    {
        let opts = &self.q.opts;
        if self.shutdown.is_triggered() {
            // Handed to apalis but not started before the stop: give it back uncharged.
            self.release(std::slice::from_ref(&env)).await;
            self.finish(&env);
            return;
        }
        let lost = lock(&self.owned)
            .get(&env.id)
            .map(|o| o.lost.clone())
            .unwrap_or_default();
        let (result, panicked) = match serde_json::from_str::<TaskMsg>(&env.raw) {
            Ok(msg) => {
                let ctx = TaskCtx {
                    attempt: env.attempt,
                    worker: self.worker.clone(),
                    delivery: Arc::from(env.id.as_str()),
                    stopping: self.shutdown.clone(),
                    lease_lost: lost.clone(),
                };
                run_caught(handler, msg, ctx).await
            }
            // Retrying cannot fix an undecodable payload.
            Err(e) => {
                self.dead(&env, &format!("undecodable task: {e}")).await;
                self.finish(&env);
                return;
            }
        };
        if panicked {
            WorkerStats::bump(&self.stats.panicked);
        }
        match result {
            TaskResult::Done => {
                let q = &self.q;
                self.settle("ack", || {
                    let mut c = q.conn.clone();
                    let mut inv = q.scripts.ack.prepare_invoke();
                    inv.key(&q.keys.stream)
                        .arg(GROUP)
                        .arg(&*self.worker)
                        .arg(&env.id);
                    async move { inv.invoke_async::<i64>(&mut c).await.map(|_| ()) }
                })
                .await;
                WorkerStats::bump(&self.stats.done);
            }
            TaskResult::RetryAfter(d) => {
                // The new entry carries the attempts consumed before this one.
                self.reschedule(&env, env.attempt.saturating_sub(1), d)
                    .await;
                WorkerStats::bump(&self.stats.retry_after);
            }
            TaskResult::Failed(msg) => {
                WorkerStats::bump(&self.stats.failed);
                if env.attempt >= opts.max_attempts {
                    warn!(worker = %self.worker, id = %env.id, attempt = env.attempt, error = %msg, "task dead after max attempts");
                    self.dead(&env, &msg).await;
                } else {
                    debug!(worker = %self.worker, id = %env.id, attempt = env.attempt, error = %msg, "task failed; retrying");
                    self.reschedule(&env, env.attempt, opts.retry_backoff(env.attempt))
                        .await;
                }
            }
        }
        self.finish(&env);
    }

    fn finish(&self, env: &Envelope) {
        lock(&self.owned).remove(&env.id);
        self.running.fetch_sub(1, Ordering::AcqRel);
        // A fetch waiting with every slot held (for interactive work only) may take any
        // task now.
        self.slot_freed.notify_one();
    }

    async fn reschedule(&self, env: &Envelope, prior_attempts: u32, delay: Duration) {
        let q = &self.q;
        let m = member(prior_attempts, &env.raw);
        self.settle("reschedule", || {
            let mut c = q.conn.clone();
            let mut inv = q.scripts.reschedule.prepare_invoke();
            inv.key(&q.keys.stream)
                .key(&q.keys.delayed)
                .arg(delay.as_millis() as u64)
                .arg(&m)
                .arg(GROUP)
                .arg(&*self.worker)
                .arg(&env.id);
            async move { inv.invoke_async::<i64>(&mut c).await.map(|_| ()) }
        })
        .await;
    }

    async fn dead(&self, env: &Envelope, error: &str) {
        let q = &self.q;
        // DEAD_LUA moves the entry only while this consumer still owns it: a worker whose
        // claim was taken over must not report the new owner's task dead.
        let moved = std::sync::atomic::AtomicBool::new(false);
        let settled = self
            .settle("dead-letter", || {
                let mut c = q.conn.clone();
                let mut inv = q.scripts.dead.prepare_invoke();
                inv.key(&q.keys.stream)
                    .key(&q.keys.dead)
                    .arg(GROUP)
                    .arg(&*self.worker)
                    .arg(&env.id)
                    .arg(&env.raw)
                    .arg(env.attempt)
                    .arg(error)
                    .arg(q.opts.dead_max);
                let moved = &moved;
                async move {
                    let n = inv.invoke_async::<i64>(&mut c).await?;
                    moved.store(n == 1, Ordering::Relaxed);
                    Ok(())
                }
            })
            .await;
        if settled && moved.load(Ordering::Relaxed) {
            WorkerStats::bump(&self.stats.dead);
            self.dead_hook(&env.raw, env.attempt, error).await;
        }
    }

    /// Tell the worker's dead hook (the runner marks the task's items failed).
    pub(super) async fn dead_hook(&self, raw: &str, attempts: u32, error: &str) {
        let Some(hook) = &self.on_dead else { return };
        match serde_json::from_str::<TaskMsg>(raw) {
            Ok(task) => hook(task, attempts, error.to_string()).await,
            Err(e) => {
                warn!(worker = %self.worker, error = %e, "dead task undecodable: its items stay pending until `reconcile`")
            }
        }
    }

    /// Give entries back to the queue with their attempts unchanged (RELEASE_LUA).
    pub(super) async fn release(&self, envs: &[Envelope]) -> bool {
        if envs.is_empty() {
            return true;
        }
        let q = &self.q;
        self.settle("release", || {
            let mut c = q.conn.clone();
            let mut inv = q.scripts.release.prepare_invoke();
            inv.key(&q.keys.stream).arg(GROUP).arg(&*self.worker);
            for e in envs {
                inv.arg(&e.id).arg(&e.raw).arg(e.attempt.saturating_sub(1));
            }
            async move { inv.invoke_async::<i64>(&mut c).await.map(|_| ()) }
        })
        .await
    }
}
