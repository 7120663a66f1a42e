//! Counters and the calls ledger: every logical call bumps the in-process counters, every
//! request on the wire adds one to a (minute, platform, api, class) row, and the rows are
//! written to the ledger in batches (every 2 s in the background, and on [`Gateway::flush`]),
//! with the stale-cache answers kept since the last batch.

use super::log::{log_refusal, log_stale};
use super::{CallContext, CallCounters, Gateway, Inner, LinkError, LinkSnapshot, Reply};
use crate::platform::{Api, ErrorClass, Platform};
use crate::store::{CallClass, CallRecord};
use chrono::{DateTime, Utc};
use std::sync::Weak;
use std::time::Duration;

/// How often call counts are written to the ledger.
const LEDGER_FLUSH: Duration = Duration::from_secs(2);

/// (minute key, platform, api, class) of a calls-ledger row.
pub(super) type LedgerKey = (String, Platform, Api, CallClass);

/// Ledger rows not yet written: (minute, platform, api, class) → (minute start, calls).
pub(super) type PendingRows = std::collections::HashMap<LedgerKey, (DateTime<Utc>, u64)>;

pub(super) fn spawn_ledger_flusher(inner: Weak<Inner>) {
    // Outside a runtime (a sync test building a gateway) there is nothing to spawn on;
    // `Gateway::flush` still writes.
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        return;
    };
    handle.spawn(async move {
        loop {
            tokio::time::sleep(LEDGER_FLUSH).await;
            let Some(inner) = inner.upgrade() else { return };
            inner.flush_ledger().await;
        }
    });
}

impl Gateway {
    /// Counters, ledger and the one log line of a finished logical call.
    pub(super) fn account(
        &self,
        platform: Platform,
        api: Api,
        ctx: &CallContext,
        result: &Result<Reply, LinkError>,
        sends: u32,
        cost: Duration,
    ) {
        self.bump(platform, api, |c| {
            c.calls += 1;
            c.attempts += sends as u64;
            c.retries += sends.saturating_sub(1) as u64;
            match result {
                Ok(Reply { stale: None, .. }) => c.ok += 1,
                Ok(_) => c.stale += 1,
                Err(e) if e.class == ErrorClass::Fatal => c.caller_errors += 1,
                Err(_) => c.failed += 1,
            }
        });
        // Each request on the wire already has its call line (`log_send`). Here: a call that
        // never reached the wire is a refusal, a stale answer a degradation, each logged apart
        // so the ratios computed from call lines stay true.
        match result {
            Err(e) if sends == 0 => {
                self.bump(platform, api, |c| c.refused += 1);
                log_refusal(platform, api, ctx, e);
            }
            Ok(Reply { stale: Some(s), .. }) => log_stale(platform, api, ctx, s, cost),
            _ => {}
        }
    }

    pub(super) fn bump(&self, platform: Platform, api: Api, f: impl FnOnce(&mut CallCounters)) {
        let mut c = self
            .inner
            .counters
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        f(c.entry((platform, api)).or_default());
    }

    /// Count one request on the wire in the pending ledger rows (when there is a ledger).
    pub(super) fn ledger_add(&self, platform: Platform, api: Api, class: CallClass) {
        if self.inner.store.is_none() {
            return;
        }
        let now = self.inner.clock.utc();
        let minute = crate::store::minute_key(now);
        let mut l = self.inner.ledger.lock().unwrap_or_else(|p| p.into_inner());
        l.entry((minute, platform, api, class))
            .or_insert((now, 0))
            .1 += 1;
    }

    /// Write pending call counts to the ledger now (also done every 2 s in the background).
    pub async fn flush(&self) {
        self.inner.flush_ledger().await;
    }

    /// Counters per (platform, api) and in total: availability (ok / (calls - caller
    /// errors)), caller-error ratio, stale ratio, amplification.
    pub fn snapshot(&self) -> LinkSnapshot {
        let c = self
            .inner
            .counters
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut per_api: Vec<_> = c.iter().map(|(&(p, a), v)| (p, a, *v)).collect();
        per_api.sort_by_key(|(p, a, _)| (*p, *a));
        let mut total = CallCounters::default();
        for (_, _, v) in &per_api {
            total.add(v);
        }
        LinkSnapshot { per_api, total }
    }
}

impl Inner {
    async fn flush_ledger(&self) {
        let Some(store) = &self.store else { return };
        let batch: Vec<CallRecord> = {
            let mut l = self.ledger.lock().unwrap_or_else(|p| p.into_inner());
            l.drain()
                .map(|((_, platform, api, class), (minute, calls))| CallRecord {
                    minute,
                    platform,
                    api,
                    class,
                    calls,
                    useful: 0,
                })
                .collect()
        };
        if let Err(e) = store.record_calls(&batch).await {
            tracing::warn!(
                "calls ledger write failed ({} rows dropped): {e}",
                batch.len()
            );
        }
        self.flush_stale(store).await;
    }
}
