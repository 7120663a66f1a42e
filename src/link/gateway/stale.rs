//! The stale cache: every fresh read answer is kept (in Redis with a fleet, else in the
//! ledger), and a read whose upstream cannot answer is served its last good answer, flagged,
//! while that is young enough. Writes never degrade.

use super::attempt::Failed;
use super::{Gateway, Reply, StaleInfo};
use crate::platform::{Api, ApiRequest, ApiResponse, Platform};
use chrono::Utc;
use std::time::Duration;

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
        let now = Utc::now();
        if let Some(fleet) = &self.inner.fleet {
            if let Err(e) = fleet
                .stale_put(platform, api, &key, &body, now, self.stale_max_age(api))
                .await
            {
                self.redis_warn("stale cache", &e);
            }
        } else if let Some(store) = &self.inner.store {
            if let Err(e) = store.stale_put(platform, api, &key, &body, now).await {
                tracing::warn!(%platform, %api, "stale cache write failed: {e}");
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
        let found = if let Some(fleet) = &self.inner.fleet {
            match fleet.stale_get(platform, api, &key).await {
                Ok(v) => v,
                Err(e) => {
                    self.redis_warn("stale cache", &e);
                    None
                }
            }
        } else if let Some(store) = &self.inner.store {
            match store.stale_get(platform, api, &key).await {
                Ok(v) => v.map(|e| (e.body, e.stored_at)),
                Err(e) => {
                    tracing::warn!(%platform, %api, "stale cache read failed: {e}");
                    None
                }
            }
        } else {
            None
        };
        let (body, stored_at) = found?;
        let age = (Utc::now() - stored_at).to_std().unwrap_or(Duration::ZERO);
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
