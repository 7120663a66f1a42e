//! Read models for the dashboard: why a job's items failed, and a gate's calls per minute.

use super::backend::{fetch, sql};
use super::{minute_key, QueryCtx, Store, StoreError};
use crate::platform::{Api, Platform};
use chrono::{DateTime, Utc};

/// One failure reason of a job: error class, message, how many items.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct FailureReason {
    pub(crate) class: String,
    pub(crate) message: String,
    pub(crate) items: u64,
}

impl Store {
    /// The most frequent (class, message) of the job's failed items, most items first.
    pub(crate) async fn failure_reasons(
        &self,
        job_id: i64,
        limit: u32,
    ) -> Result<Vec<FailureReason>, StoreError> {
        let mut c = self.conn("failure_reasons").await?;
        let rows = fetch!(
            fetch_all as (Option<String>, Option<String>, i64),
            c.on(),
            sql!(
                "SELECT error_class, error_message, COUNT(*) FROM job_items
                 WHERE job_id = $1 AND status = 'failed'
                 GROUP BY 1, 2 ORDER BY 3 DESC LIMIT $2"
            ),
            job_id,
            i64::from(limit)
        )
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
    pub(crate) async fn calls_per_minute(
        &self,
        platform: Platform,
        api: Api,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<(String, u64)>, StoreError> {
        let mut c = self.conn("calls_per_minute").await?;
        let rows = fetch!(
            fetch_all as (String, i64),
            c.on(),
            sql!(
                "SELECT minute, CAST(SUM(calls) AS BIGINT) FROM api_calls
                 WHERE platform = $1 AND api = $2 AND minute >= $3 AND minute < $4
                 GROUP BY minute ORDER BY minute"
            ),
            platform.as_str(),
            api.as_str(),
            minute_key(from),
            minute_key(to)
        )
        .ctx(self, "calls_per_minute")?;
        Ok(rows
            .into_iter()
            .map(|(m, n)| (m, u64::try_from(n).unwrap_or(0)))
            .collect())
    }
}
