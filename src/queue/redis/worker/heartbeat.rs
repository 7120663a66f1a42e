//! Keeping claims fresh: the heartbeat that refreshes this worker's entries, and the lease
//! watchdog that stops in-flight handlers once the claims may be someone else's.

use super::*;
use crate::clock::monotonic_now;

impl Shared {
    /// Give up the claims the fleet may already have taken over: once the lease runs out
    /// (no successful heartbeat for nearly the claim idle time), every in-flight handler
    /// is told to stop calling, so a task is never worked on by two workers at once.
    pub(super) async fn lease_watchdog(self: Arc<Self>) {
        let every = (self.q.opts.heartbeat / 4).max(Duration::from_millis(50));
        loop {
            tokio::time::sleep(every).await;
            let now = monotonic_now();
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
    pub(super) async fn heartbeat_loop(self: Arc<Self>) {
        let q = &self.q;
        let mut tick = tokio::time::interval(q.opts.heartbeat);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut n: u64 = 0;
        loop {
            tick.tick().await;
            n += 1;
            let ids: Vec<String> = lock(&self.owned).keys().cloned().collect();
            let mut c = q.conn.clone();
            let sent = monotonic_now();
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
}
