//! The embedded-worker lock: a lease with heartbeat in the ledger, so a second embedded
//! worker process is refused (its in-process gates would not be shared), while a crashed
//! holder's lease is taken over once its heartbeat is stale.

use super::HeldBy;
use super::{from_ms, to_ms, QueryCtx, Store, StoreError};
use chrono::Utc;
use std::time::Duration;

/// The lock row's name (one embedded worker per ledger).
const EMBEDDED: &str = "embedded-worker";

/// Heartbeat age after which a holder is presumed dead; heartbeat at least 3x as often.
pub const EMBEDDED_LOCK_STALE_AFTER: Duration = Duration::from_secs(10);

impl Store {
    /// Take the embedded-worker lock for `holder` (unique per process, e.g. host:pid:ulid).
    /// Succeeds when the lock is free, already ours, or its holder's heartbeat is older than
    /// `stale_after`; otherwise fails with [`StoreError::LockHeld`] naming the holder.
    pub async fn try_acquire_embedded_lock(
        &self,
        holder: &str,
        stale_after: Duration,
    ) -> Result<(), StoreError> {
        let stale_ms = i64::try_from(stale_after.as_millis()).unwrap_or(i64::MAX);
        // A holder that releases between our two statements makes us look again; bounded.
        for _ in 0..3 {
            let now = to_ms(Utc::now());
            // One statement decides: insert, re-take our own, or take over a stale lease.
            let taken = sqlx::query(
                "INSERT INTO embedded_lock (name, holder, pid, acquired_at, heartbeat_at)
                 VALUES (?, ?, ?, ?, ?)
                 ON CONFLICT (name) DO UPDATE SET
                     holder = excluded.holder, pid = excluded.pid,
                     acquired_at = CASE WHEN embedded_lock.holder = excluded.holder
                                   THEN embedded_lock.acquired_at ELSE excluded.acquired_at END,
                     heartbeat_at = excluded.heartbeat_at
                 WHERE embedded_lock.holder = excluded.holder OR embedded_lock.heartbeat_at < ?",
            )
            .bind(EMBEDDED)
            .bind(holder)
            .bind(i64::from(std::process::id()))
            .bind(now)
            .bind(now)
            .bind(now.saturating_sub(stale_ms))
            .execute(&self.pool)
            .await
            .ctx(self, "acquire embedded lock")?
            .rows_affected();
            if taken == 1 {
                return Ok(());
            }
            if let Some(held) = self.embedded_lock_holder().await? {
                return Err(StoreError::LockHeld {
                    db: self.db.to_string(),
                    held,
                });
            }
        }
        Err(StoreError::LockLost {
            db: self.db.to_string(),
            holder: holder.to_string(),
        })
    }

    /// Refresh the lease. Fails with [`StoreError::LockLost`] when another process took it
    /// over (this one was presumed dead): the caller must stop working.
    pub async fn heartbeat_embedded_lock(&self, holder: &str) -> Result<(), StoreError> {
        let updated =
            sqlx::query("UPDATE embedded_lock SET heartbeat_at = ? WHERE name = ? AND holder = ?")
                .bind(to_ms(Utc::now()))
                .bind(EMBEDDED)
                .bind(holder)
                .execute(&self.pool)
                .await
                .ctx(self, "heartbeat embedded lock")?
                .rows_affected();
        if updated == 1 {
            Ok(())
        } else {
            Err(StoreError::LockLost {
                db: self.db.to_string(),
                holder: holder.to_string(),
            })
        }
    }

    /// Give the lock up (on shutdown). True when `holder` held it.
    pub async fn release_embedded_lock(&self, holder: &str) -> Result<bool, StoreError> {
        let deleted = sqlx::query("DELETE FROM embedded_lock WHERE name = ? AND holder = ?")
            .bind(EMBEDDED)
            .bind(holder)
            .execute(&self.pool)
            .await
            .ctx(self, "release embedded lock")?
            .rows_affected();
        Ok(deleted == 1)
    }

    /// Who holds the embedded-worker lock now, if anyone (stale or not).
    pub async fn embedded_lock_holder(&self) -> Result<Option<HeldBy>, StoreError> {
        let row: Option<(String, i64, i64, i64)> = sqlx::query_as(
            "SELECT holder, pid, acquired_at, heartbeat_at FROM embedded_lock WHERE name = ?",
        )
        .bind(EMBEDDED)
        .fetch_optional(&self.pool)
        .await
        .ctx(self, "read embedded lock")?;
        Ok(row.map(|(holder, pid, since, heartbeat)| HeldBy {
            holder,
            pid: u32::try_from(pid).unwrap_or(0),
            since: from_ms(since),
            heartbeat_at: from_ms(heartbeat),
        }))
    }
}
