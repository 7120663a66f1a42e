//! The stale cache: every fresh read answer is kept (in the ledger; in Redis only for a
//! gateway without a ledger), and a read whose upstream cannot answer is served its last good
//! answer, flagged, while that is young enough. Writes never degrade.
//!
//! Not in the queue's Redis when a ledger exists: a key per read kept for days (100k items:
//! about 100 MB for three days) would grow the one server the queue and the gates need to
//! stay within `maxmemory`; the ledger keeps one row per request, on disk, pruned by age.
//!
//! Ledger writes are batched with the call counts (every 2 s): one upsert per read on the call
//! path would cost a write transaction per call, contending with the outcome batches for
//! SQLite's single writer and adding a round trip per call on PostgreSQL. On SQLite a batch is
//! a few transactions of a few dozen answers, not one: the outcomes take their turns between
//! them (`Store::stale_put_many`). Answers not yet written are served from memory.

use super::attempt::Failed;
use super::{Gateway, Inner, Reply, StaleInfo};
use crate::platform::{Api, ApiRequest, ApiResponse, Platform};
use crate::store::{StaleEntry, Store};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::time::Duration;

/// Stale-cache answers not yet in the ledger: (platform, api, request key) → (body, stored at).
pub(super) type PendingStale = HashMap<(Platform, Api, String), (String, DateTime<Utc>)>;

impl Inner {
    /// Write the answers kept since the last flush (the newest per key) in one transaction.
    pub(super) async fn flush_stale(&self, store: &Store) {
        let batch: Vec<(Platform, Api, String, StaleEntry)> = {
            let mut p = self.stale_pending.lock().unwrap_or_else(|p| p.into_inner());
            p.drain()
                .map(|((platform, api, key), (body, stored_at))| {
                    (platform, api, key, StaleEntry { body, stored_at })
                })
                .collect()
        };
        if batch.is_empty() {
            return;
        }
        if let Err(e) = store.stale_put_many(&batch).await {
            tracing::warn!(
                "stale cache write failed ({} answers dropped): {e}",
                batch.len()
            );
        }
    }
}

impl Gateway {
    fn stale_max_age(&self, api: Api) -> Duration {
        let s = self
            .inner
            .link
            .stale_max_age_s_per_api
            .get(api.as_str())
            .copied()
            .unwrap_or(self.inner.link.stale_max_age_s);
        Duration::from_secs(s)
    }

    /// Keep a fresh read answer as the last good one.
    pub(super) async fn stale_put(&self, platform: Platform, req: &ApiRequest, resp: &ApiResponse) {
        if !self.inner.link.degrade_reads {
            return;
        }
        let (Ok(key), Ok(body)) = (serde_json::to_string(req), serde_json::to_string(resp)) else {
            return;
        };
        let api = req.api();
        let now = self.inner.clock.utc();
        if self.inner.store.is_some() {
            self.inner
                .stale_pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert((platform, api, key), (body, now));
        } else if let Some(fleet) = &self.inner.fleet {
            if let Err(e) = fleet
                .stale_put(platform, api, &key, &body, now, self.stale_max_age(api))
                .await
            {
                self.redis_warn("stale cache", &e);
            }
        }
    }

    /// A read that could not succeed answers with its last good data, flagged, when it is
    /// young enough. Writes never degrade.
    pub(super) async fn degrade(
        &self,
        platform: Platform,
        req: &ApiRequest,
        failed: &Failed,
    ) -> Option<Reply> {
        let api = req.api();
        if api.is_write() || !failed.degradable || !self.inner.link.degrade_reads {
            return None;
        }
        let key = serde_json::to_string(req).ok()?;
        let found = if let Some(store) = &self.inner.store {
            let unwritten = self
                .inner
                .stale_pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&(platform, api, key.clone()))
                .cloned();
            match unwritten {
                Some(found) => Some(found),
                None => match store.stale_get(platform, api, &key).await {
                    Ok(v) => v.map(|e| (e.body, e.stored_at)),
                    Err(e) => {
                        tracing::warn!(%platform, %api, "stale cache read failed: {e}");
                        None
                    }
                },
            }
        } else if let Some(fleet) = &self.inner.fleet {
            match fleet.stale_get(platform, api, &key).await {
                Ok(v) => v,
                Err(e) => {
                    self.redis_warn("stale cache", &e);
                    None
                }
            }
        } else {
            None
        };
        let (body, stored_at) = found?;
        let age = (self.inner.clock.utc() - stored_at)
            .to_std()
            .unwrap_or(Duration::ZERO);
        if age > self.stale_max_age(api) {
            return None;
        }
        let response: ApiResponse = serde_json::from_str(&body).ok()?;
        Some(Reply {
            response,
            stale: Some(StaleInfo {
                age,
                stored_at,
                reason: failed.err.to_string(),
            }),
        })
    }
}
