//! The apalis backend over the stream: built per worker, it yields fetched entries one by one
//! and on shutdown gives back what was fetched but not started.

use super::*;

impl RedisQueue {
    pub(super) fn backend_with(
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
                slot_freed: tokio::sync::Notify::new(),
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
}

impl Shared {
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
    pub(super) shared: Arc<Shared>,
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
