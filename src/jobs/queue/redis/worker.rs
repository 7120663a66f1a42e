//! The worker side of the Redis Streams queue: the apalis backend that fetches, the
//! heartbeat that keeps claims fresh, the lease watchdog, and what happens to each delivery
//! (ack, re-queue, dead letter). The producer side and the admin reads are in `mod.rs`.

use super::*;

impl RedisQueue {
    fn backend_with(
        &self,
        worker: &str,
        concurrency: usize,
        shutdown: Shutdown,
        on_dead: Option<DeadHook>,
    ) -> StreamsBackend {
        StreamsBackend {
            shared: Arc::new(Shared {
                q: self.clone(),
                worker: Arc::from(worker),
                concurrency: concurrency.max(1),
                owned: Mutex::new(HashMap::new()),
                running: AtomicUsize::new(0),
                shutdown,
                stats: WorkerStats::default(),
                last_sweep: Mutex::new(None),
                claim_cursor: Mutex::new("0-0".to_string()),
                lease: Mutex::new(LeaseWatch::new(self.opts.claim_idle(), self.opts.heartbeat)),
                on_dead,
            }),
            buf: VecDeque::new(),
            fetch: None,
            close: None,
        }
    }

    /// Run an apalis worker over this queue until `shutdown`; then stop fetching, finish and
    /// ack in-flight tasks, give back fetched-but-unstarted ones, and return its counters.
    pub async fn run_worker<H, Fut>(
        &self,
        wopts: WorkerOptions,
        handler: H,
        shutdown: Shutdown,
    ) -> Result<WorkerReport, QueueError>
    where
        H: Fn(TaskMsg, TaskCtx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = TaskResult> + Send + 'static,
    {
        let name = wopts.name.clone().unwrap_or_else(worker_name);
        let backend = self.backend_with(
            &name,
            wopts.concurrency,
            shutdown.clone(),
            wopts.on_dead.clone(),
        );
        let shared = backend.shared.clone();
        let handler = Arc::new(handler);
        let svc_shared = shared.clone();
        let service = move |env: Envelope| {
            let sh = svc_shared.clone();
            let h = handler.clone();
            async move {
                sh.execute(env, &*h).await;
                Ok::<(), BoxDynError>(())
            }
            .boxed()
        };
        let worker = WorkerBuilder::new(name.clone())
            .backend(backend)
            .concurrency(shared.concurrency)
            .build(service);
        info!(worker = %name, concurrency = shared.concurrency, "queue worker starting");
        let stop = shutdown.clone();
        // Boxed here, where the types are concrete: spawning the unboxed future trips a
        // rustc higher-ranked `Send` inference bug on apalis's worker stream.
        let run = worker
            .run_until(async move {
                stop.wait().await;
                Ok::<(), std::io::Error>(())
            })
            .boxed();
        let hb = shared.clone().heartbeat_loop();
        let watch = shared.clone().lease_watchdog();
        // The heartbeat ends when the worker does: it must never outlive the worker's claim.
        let res = tokio::select! {
            r = run => r,
            _ = hb => Ok(()),
            _ = watch => Ok(()),
        };
        let report = shared.stats.report(&name);
        info!(worker = %name, ?report, "queue worker stopped");
        res.map(|_| report).map_err(|e| QueueError::Worker {
            worker: name,
            msg: e.to_string(),
        })
    }
}

/// One fetched stream entry, as handed to the apalis service.
#[derive(Debug, Clone)]
pub(crate) struct Envelope {
    id: String,
    raw: String,
    /// This delivery's attempt number (1-based).
    attempt: u32,
}

/// An entry this worker holds (buffered or running).
struct Owned {
    /// When the fetch that took it was sent: its first refresh.
    fetched_at: Instant,
    /// Fired when the claim is gone: the handler stops calling.
    lost: Shutdown,
}

struct Shared {
    q: RedisQueue,
    worker: Arc<str>,
    concurrency: usize,
    /// Entries this worker holds (buffered or running): refreshed every heartbeat.
    owned: Mutex<HashMap<String, Owned>>,
    /// Where the next orphan sweep resumes XAUTOCLAIM's scan.
    claim_cursor: Mutex<String>,
    /// Successful heartbeats: when the claims may be someone else's.
    lease: Mutex<LeaseWatch>,
    on_dead: Option<DeadHook>,
    /// Tasks handed to apalis and not finished.
    running: AtomicUsize,
    shutdown: Shutdown,
    stats: WorkerStats,
    last_sweep: Mutex<Option<Instant>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned set of ids is still a valid set of ids.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    fn parse(flat: &[String]) -> Vec<Envelope> {
        flat.chunks_exact(3)
            .map(|c| Envelope {
                id: c[0].clone(),
                raw: c[1].clone(),
                attempt: c[2].parse().unwrap_or(1),
            })
            .collect()
    }

    /// One fetch round: orphans first (at most once per heartbeat), then new entries.
    async fn try_fetch(&self, count: usize) -> Result<Vec<Envelope>, RedisError> {
        let q = &self.q;
        let mut c = q.conn.clone();
        let sweep_due = {
            let mut last = lock(&self.last_sweep);
            let due = last.is_none_or(|t| t.elapsed() >= q.opts.heartbeat);
            if due {
                *last = Some(Instant::now());
            }
            due
        };
        if sweep_due {
            let cursor = lock(&self.claim_cursor).clone();
            let flat: Vec<String> = q
                .scripts
                .claim
                .key(&q.keys.stream)
                .key(&q.keys.dead)
                .arg(GROUP)
                .arg(&*self.worker)
                .arg(q.opts.claim_idle().as_millis() as u64)
                .arg(count)
                .arg(q.opts.max_attempts)
                .arg(q.opts.dead_max)
                .arg(&cursor)
                .invoke_async(&mut c)
                .await?;
            if let Some(next) = flat.first() {
                *lock(&self.claim_cursor) = next.clone();
            }
            let n: usize = flat.get(1).and_then(|s| s.parse().ok()).unwrap_or(0);
            let rest = flat.get(2..).unwrap_or(&[]);
            let (claimed, dead) = rest.split_at((n * 3).min(rest.len()));
            if !dead.is_empty() {
                let count = dead.len() / 2;
                warn!(worker = %self.worker, dead = count, "orphaned tasks past max attempts moved to dead letters");
                self.stats
                    .dead
                    .fetch_add(count as u64, std::sync::atomic::Ordering::Relaxed);
                for pair in dead.chunks_exact(2) {
                    let attempts = pair[1].parse().unwrap_or(0);
                    self.dead_hook(
                        &pair[0],
                        attempts,
                        "worker lost (no heartbeat) on every attempt",
                    )
                    .await;
                }
            }
            let got = Self::parse(claimed);
            if !got.is_empty() {
                info!(worker = %self.worker, n = got.len(), "recovered orphaned tasks");
                self.stats
                    .recovered
                    .fetch_add(got.len() as u64, std::sync::atomic::Ordering::Relaxed);
                return Ok(got);
            }
        }
        let flat: Vec<String> = q
            .scripts
            .fetch
            .key(&q.keys.stream)
            .key(&q.keys.delayed)
            .arg(GROUP)
            .arg(&*self.worker)
            .arg(count)
            .arg(q.opts.promote_batch)
            .invoke_async(&mut c)
            .await?;
        Ok(Self::parse(&flat))
    }

    /// Fetch until there is work or shutdown (then an empty batch). Backend errors are
    /// logged and retried with backoff; they never reach apalis, whose worker would die.
    async fn fetch_batch(self: Arc<Self>) -> Vec<Envelope> {
        let mut backoff = FETCH_RETRY.doubling();
        loop {
            if self.shutdown.is_triggered() {
                return Vec::new();
            }
            let free = self
                .concurrency
                .saturating_sub(self.running.load(Ordering::Acquire))
                .max(1);
            let sent = Instant::now();
            let wait = match self.try_fetch(free).await {
                Ok(got) if !got.is_empty() => {
                    let mut owned = lock(&self.owned);
                    for e in &got {
                        owned.insert(
                            e.id.clone(),
                            Owned {
                                fetched_at: sent,
                                lost: Shutdown::new(),
                            },
                        );
                    }
                    return got;
                }
                Ok(_) => {
                    backoff.reset();
                    self.q.opts.poll_interval
                }
                Err(e) => {
                    self.note_error("fetch", &e).await;
                    backoff.next_delay()
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = self.shutdown.wait() => {}
            }
        }
    }

    async fn note_error(&self, what: &str, e: &RedisError) {
        WorkerStats::bump(&self.stats.backend_errors);
        warn!(worker = %self.worker, op = what, error = %e, "queue backend error; retrying");
        // A flushed or recreated Redis has no group: create it again.
        if e.code() == Some("NOGROUP") {
            if let Err(e) = self.q.ensure_group().await {
                warn!(worker = %self.worker, error = %e, "recreating consumer group failed");
            }
        }
    }

    /// Run a Redis operation until it succeeds, for at most the claim idle time (after that
    /// another worker owns the entry anyway).
    async fn settle<F, Fut>(&self, what: &str, mut op: F) -> bool
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<(), RedisError>>,
    {
        let deadline = Instant::now() + self.q.opts.claim_idle();
        let mut backoff = SETTLE_RETRY.doubling();
        loop {
            match op().await {
                Ok(()) => return true,
                Err(e) => {
                    self.note_error(what, &e).await;
                    let wait = backoff.next_delay();
                    if Instant::now() + wait > deadline {
                        warn!(worker = %self.worker, op = what, "giving up; the entry will be recovered as an orphan");
                        return false;
                    }
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    async fn execute<H, Fut>(&self, env: Envelope, handler: &H)
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
    async fn dead_hook(&self, raw: &str, attempts: u32, error: &str) {
        let Some(hook) = &self.on_dead else { return };
        match serde_json::from_str::<TaskMsg>(raw) {
            Ok(task) => hook(task, attempts, error.to_string()).await,
            Err(e) => {
                warn!(worker = %self.worker, error = %e, "dead task undecodable: its items stay pending until `reconcile`")
            }
        }
    }

    /// Give entries back to the queue with their attempts unchanged (RELEASE_LUA).
    async fn release(&self, envs: &[Envelope]) -> bool {
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

    /// Give up the claims the fleet may already have taken over: once the lease runs out
    /// (no successful heartbeat for nearly the claim idle time), every in-flight handler
    /// is told to stop calling, so a task is never worked on by two workers at once.
    async fn lease_watchdog(self: Arc<Self>) {
        let every = (self.q.opts.heartbeat / 4).max(Duration::from_millis(50));
        loop {
            tokio::time::sleep(every).await;
            let now = Instant::now();
            let lease = lock(&self.lease).clone();
            let mut gone = 0;
            for o in lock(&self.owned).values() {
                if !o.lost.is_triggered() && lease.expired(o.fetched_at, now) {
                    o.lost.trigger();
                    gone += 1;
                }
            }
            if gone > 0 {
                warn!(worker = %self.worker, tasks = gone, lost_after = ?lease.lost_after(),
                    "no heartbeat reached the queue for too long: stopping in-flight tasks (the fleet may reclaim them)");
            }
        }
    }

    /// Keep our claims fresh; now and then drop long-idle consumers of earlier starts.
    async fn heartbeat_loop(self: Arc<Self>) {
        let q = &self.q;
        let mut tick = tokio::time::interval(q.opts.heartbeat);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut n: u64 = 0;
        loop {
            tick.tick().await;
            n += 1;
            let ids: Vec<String> = lock(&self.owned).keys().cloned().collect();
            let mut c = q.conn.clone();
            let sent = Instant::now();
            if !ids.is_empty() {
                let mut inv = q.scripts.heartbeat.prepare_invoke();
                inv.key(&q.keys.stream).arg(GROUP).arg(&*self.worker);
                for id in &ids {
                    inv.arg(id);
                }
                match inv.invoke_async::<Vec<String>>(&mut c).await {
                    Ok(lost) => {
                        lock(&self.lease).renewed(sent);
                        if !lost.is_empty() {
                            let owned = lock(&self.owned);
                            for id in &lost {
                                if let Some(o) = owned.get(id) {
                                    o.lost.trigger();
                                }
                            }
                            warn!(worker = %self.worker, lost = lost.len(), "in-flight tasks were taken over by other workers (missed heartbeats): stopping them");
                        }
                    }
                    Err(e) => self.note_error("heartbeat", &e).await,
                }
            }
            if n % 60 == 1 {
                let r = q
                    .scripts
                    .gc
                    .key(&q.keys.stream)
                    .arg(GROUP)
                    .arg(q.opts.consumer_gc_idle.as_millis() as u64)
                    .arg(&*self.worker)
                    .invoke_async::<i64>(&mut c)
                    .await;
                match r {
                    Ok(0) => {}
                    Ok(removed) => {
                        debug!(removed, "removed idle consumers of earlier worker starts")
                    }
                    Err(e) => self.note_error("consumer gc", &e).await,
                }
            }
        }
    }

    /// Shutdown: give back buffered entries and leave the group if nothing is pending.
    async fn close(
        self: Arc<Self>,
        pending: Option<BoxFuture<'static, Vec<Envelope>>>,
        mut buf: Vec<Envelope>,
    ) {
        if let Some(f) = pending {
            buf.extend(f.await);
        }
        let q = &self.q;
        if !buf.is_empty() {
            let released = self.release(&buf).await;
            debug!(worker = %self.worker, n = buf.len(), released, "released unstarted tasks");
        }
        lock(&self.owned).clear();
        // Leave the group only with an empty PEL (DELCONSUMER drops pending entries).
        let mut c = q.conn.clone();
        let pend: Result<Vec<redis::Value>, RedisError> = redis::cmd("XPENDING")
            .arg(&q.keys.stream)
            .arg(GROUP)
            .arg("-")
            .arg("+")
            .arg(1)
            .arg(&*self.worker)
            .query_async(&mut c)
            .await;
        if let Ok(p) = pend {
            if p.is_empty() {
                let _: Result<i64, RedisError> = redis::cmd("XGROUP")
                    .arg("DELCONSUMER")
                    .arg(&q.keys.stream)
                    .arg(GROUP)
                    .arg(&*self.worker)
                    .query_async(&mut c)
                    .await;
            }
        }
    }
}

/// The apalis backend: yields fetched entries one by one; fetches again (up to the free
/// concurrency) when its buffer is empty; never yields an error.
pub(crate) struct StreamsBackend {
    shared: Arc<Shared>,
    buf: VecDeque<Envelope>,
    fetch: Option<BoxFuture<'static, Vec<Envelope>>>,
    close: Option<BoxFuture<'static, ()>>,
}

impl Backend for StreamsBackend {
    type Task = Task<Envelope>;
    type Error = QueueError;

    fn poll_ready(
        &mut self,
        _: &mut Context<'_>,
        _: &WorkerContext,
    ) -> Poll<Result<(), QueueError>> {
        Poll::Ready(Ok(()))
    }

    fn poll_next(
        &mut self,
        cx: &mut Context<'_>,
        _: &WorkerContext,
    ) -> Poll<Option<Result<Task<Envelope>, QueueError>>> {
        loop {
            if let Some(e) = self.buf.pop_front() {
                self.shared.running.fetch_add(1, Ordering::AcqRel);
                return Poll::Ready(Some(Ok(Task::new(e))));
            }
            let shared = self.shared.clone();
            let fut = self
                .fetch
                .get_or_insert_with(|| shared.fetch_batch().boxed());
            match fut.poll_unpin(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(got) => {
                    self.fetch = None;
                    if got.is_empty() {
                        // Only on shutdown: apalis then drains in-flight tasks and closes.
                        return Poll::Ready(None);
                    }
                    self.buf.extend(got);
                }
            }
        }
    }

    fn poll_close(
        &mut self,
        cx: &mut Context<'_>,
        _: &WorkerContext,
    ) -> Poll<Result<(), QueueError>> {
        if self.close.is_none() {
            let pending = self.fetch.take();
            let buf: Vec<Envelope> = self.buf.drain(..).collect();
            self.close = Some(self.shared.clone().close(pending, buf).boxed());
        }
        match self.close.as_mut() {
            Some(f) => f.poll_unpin(cx).map(|_| Ok(())),
            None => Poll::Ready(Ok(())),
        }
    }
}

impl BackendConfig for StreamsBackend {
    type Args = Envelope;
    type Id = RandomId;
    type Kind = Ephemeral;
    type Config = QueueOptions;
    type Layer = Identity;

    fn config(&self) -> &QueueOptions {
        &self.shared.q.opts
    }

    fn middleware(&mut self, _: &mut WorkerContext) -> Identity {
        Identity::new()
    }
}
