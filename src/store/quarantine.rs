//! Quarantine: records a platform sent that could not be read, kept with the reason and
//! their raw text, so one bad order or message stops nothing (docs/design.md, "Quarantine").

use super::backend::{execute, fetch, sql};
use super::{from_ms, QueryCtx, Store, StoreError};
use crate::platform::Platform;
use chrono::{DateTime, Utc};

/// Longest raw text kept of a quarantined record (bytes, cut at a character boundary).
pub const RAW_MAX: usize = 4096;

/// One record that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantined {
    /// What it was: `order` (an order list's entry) or `message` (a change message).
    pub source: String,
    /// The platform that sent it.
    pub platform: Platform,
    /// Its id as far as it could be read (`?` and a hash of the raw text when not at all).
    pub record_id: String,
    /// The shop it came for.
    pub shop: String,
    /// Why it could not be read.
    pub reason: String,
    /// What the platform sent, at most [`RAW_MAX`] bytes.
    pub raw: String,
}

/// A quarantined record as `syncfleet quarantine` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuarantineRow {
    /// The record.
    pub record: Quarantined,
    /// When it was first and last met.
    pub first_seen: DateTime<Utc>,
    /// The latest time it came again.
    pub last_seen: DateTime<Utc>,
    /// How many times it came.
    pub seen: u64,
}

/// `text` cut to at most [`RAW_MAX`] bytes on a character boundary.
pub fn cap_raw(text: &str) -> String {
    let mut end = text.len().min(RAW_MAX);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

type Row = (
    String,
    String,
    String,
    String,
    String,
    String,
    i64,
    i64,
    i64,
);

impl Store {
    /// Keep `records`; one met before has its count and last time moved on.
    pub async fn quarantine(&self, records: &[Quarantined]) -> Result<(), StoreError> {
        if records.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin("quarantine: begin").await?;
        for q in records {
            execute!(
                tx.on(),
                sql!(
                    "INSERT INTO quarantine (source, platform, record_id, shop, reason, raw,
                         first_seen, last_seen, seen)
                     VALUES ($1, $2, $3, $4, $5, $6, " NOW ", " NOW ", 1)
                     ON CONFLICT (source, platform, record_id) DO UPDATE SET
                         seen = quarantine.seen + 1, last_seen = excluded.last_seen,
                         reason = excluded.reason, raw = excluded.raw"
                ),
                &q.source,
                q.platform.as_str(),
                &q.record_id,
                &q.shop,
                &q.reason,
                cap_raw(&q.raw)
            )
            .ctx(self, "quarantine")?;
        }
        tx.commit().await.ctx(self, "quarantine: commit")?;
        Ok(())
    }

    /// Let a record out of the quarantine (it was read after all). True when it was there.
    pub async fn release_quarantined(&self, q: &Quarantined) -> Result<bool, StoreError> {
        let mut c = self.conn("release_quarantined").await?;
        let n = execute!(
            c.on(),
            sql!(
                "DELETE FROM quarantine
                 WHERE source = $1 AND platform = $2 AND record_id = $3"
            ),
            &q.source,
            q.platform.as_str(),
            &q.record_id
        )
        .ctx(self, "release_quarantined")?;
        Ok(n == 1)
    }

    /// How many records are quarantined, per source (`order`, `message`).
    pub async fn quarantine_counts(&self) -> Result<Vec<(String, u64)>, StoreError> {
        let mut c = self.conn("quarantine_counts").await?;
        let rows = fetch!(
            fetch_all as (String, i64),
            c.on(),
            sql!("SELECT source, COUNT(*) FROM quarantine GROUP BY source ORDER BY source")
        )
        .ctx(self, "quarantine_counts")?;
        Ok(rows
            .into_iter()
            .map(|(s, n)| (s, u64::try_from(n).unwrap_or(0)))
            .collect())
    }

    /// The newest `limit` quarantined records.
    pub async fn quarantined(&self, limit: u32) -> Result<Vec<QuarantineRow>, StoreError> {
        let mut c = self.conn("quarantined").await?;
        let rows = fetch!(
            fetch_all as Row,
            c.on(),
            sql!(
                "SELECT source, platform, record_id, shop, reason, raw, first_seen, last_seen, seen
                 FROM quarantine ORDER BY last_seen DESC, record_id LIMIT $1"
            ),
            i64::from(limit)
        )
        .ctx(self, "quarantined")?;
        Ok(rows
            .into_iter()
            .filter_map(
                |(source, platform, record_id, shop, reason, raw, first, last, seen)| {
                    Some(QuarantineRow {
                        record: Quarantined {
                            source,
                            platform: platform.parse().ok()?,
                            record_id,
                            shop,
                            reason,
                            raw,
                        },
                        first_seen: from_ms(first),
                        last_seen: from_ms(last),
                        seen: u64::try_from(seen).unwrap_or(0),
                    })
                },
            )
            .collect())
    }
}
