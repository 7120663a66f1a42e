//! Fetch rounds: orphaned entries first (at most once per heartbeat), then new ones; backend
//! errors are retried with backoff and never reach apalis.

use super::*;
use crate::clock::{elapsed_since, monotonic_now};

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

    /// One fetch round: orphans first (at most once per heartbeat), then new entries;
    /// `interactive_only`: the worker's slots are all held, only an interactive task may
    /// take the slot kept for one.
    async fn try_fetch(
        &self,
        count: usize,
        interactive_only: bool,
    ) -> Result<Vec<Envelope>, RedisError> {
        let q = &self.q;
        let mut c = q.conn.clone();
        let sweep_due = {
            let mut last = lock(&self.last_sweep);
            let due = last.is_none_or(|t| elapsed_since(t) >= q.opts.heartbeat);
            if due {
                *last = Some(monotonic_now());
            }
            due
        };
        if sweep_due && !interactive_only {
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
            .key(&q.keys.ready)
            .key(&q.keys.fair)
            .arg(GROUP)
            .arg(&*self.worker)
            .arg(count)
            .arg(q.opts.promote_batch)
            .arg(if interactive_only { "1" } else { "" })
            .invoke_async(&mut c)
            .await?;
        Ok(Self::parse(&flat))
    }

    /// Fetch until there is work or shutdown (then an empty batch). Backend errors are
    /// logged and retried with backoff; they never reach apalis, whose worker would die.
    pub(super) async fn fetch_batch(self: Arc<Self>) -> Vec<Envelope> {
        let mut backoff = FETCH_RETRY.doubling();
        loop {
            if self.shutdown.is_triggered() {
                return Vec::new();
            }
            let held = self.running.load(Ordering::Acquire);
            let (count, interactive_only) = match self.concurrency.checked_sub(held) {
                Some(free) if free > 0 => (free, false),
                _ => (1, true),
            };
            let sent = monotonic_now();
            let wait = match self.try_fetch(count, interactive_only).await {
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
                // Every slot was held: a freed one may take any task at once.
                _ = self.slot_freed.notified(), if interactive_only => {}
            }
        }
    }

    pub(super) async fn note_error(&self, what: &str, e: &RedisError) {
        WorkerStats::bump(&self.stats.backend_errors);
        warn!(worker = %self.worker, op = what, error = %e, "queue backend error; retrying");
        // A flushed or recreated Redis has no group: create it again.
        if e.code() == Some("NOGROUP") {
            if let Err(e) = self.q.ensure_group().await {
                warn!(worker = %self.worker, error = %e, "recreating consumer group failed");
            }
        }
    }
}
