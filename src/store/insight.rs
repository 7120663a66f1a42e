//! Read models for the dashboard: why a job's items failed, and a gate's calls per minute.

use super::{minute_key, QueryCtx, Store, StoreError};
use crate::platform::{Api, Platform};
use chrono::{DateTime, Utc};

/// One failure reason of a job: error class, message, how many items.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FailureReason {
    pub class: String,
    pub message: String,
    pub items: u64,
}

impl Store {
    /// The most frequent (class, message) of the job's failed items, most items first.
    pub async fn failure_reasons(
        &self,
        job_id: i64,
        limit: u32,
    ) -> Result<Vec<FailureReason>, StoreError> {
        let rows: Vec<(Option<String>, Option<String>, i64)> = sqlx::query_as(
            "SELECT error_class, error_message, count(*) FROM job_items
             WHERE job_id = ? AND status = 'failed'
             GROUP BY 1, 2 ORDER BY 3 DESC LIMIT ?",
        )
        .bind(job_id)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .ctx(self, "failure_reasons")?;
        Ok(rows
            .into_iter()
            .map(|(class, message, n)| FailureReason {
                class: class.unwrap_or_default(),
                message: message.unwrap_or_default(),
                items: u64::try_from(n).unwrap_or(0),
            })
            .collect())
    }

    /// Calls of (platform, api) per minute (every class) in `[from, to)`, oldest first:
    /// (minute key `YYYY-MM-DD HH:MM` UTC, calls).
    pub async fn calls_per_minute(
        &self,
        platform: Platform,
        api: Api,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<(String, u64)>, StoreError> {
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "SELECT minute, SUM(calls) FROM api_calls
             WHERE platform = ? AND api = ? AND minute >= ? AND minute < ?
             GROUP BY minute ORDER BY minute",
        )
        .bind(platform.as_str())
        .bind(api.as_str())
        .bind(minute_key(from))
        .bind(minute_key(to))
        .fetch_all(&self.pool)
        .await
        .ctx(self, "calls_per_minute")?;
        Ok(rows
            .into_iter()
            .map(|(m, n)| (m, u64::try_from(n).unwrap_or(0)))
            .collect())
    }
}
