//! The embedded-worker lock: a lease with heartbeat in the ledger, so a second embedded
//! worker process is refused (its in-process gates would not be shared), while a crashed
//! holder's lease is taken over once its heartbeat is stale.

use super::backend::{execute, fetch, sql};
use super::HeldBy;
use super::{from_ms, QueryCtx, Store, StoreError};
use std::time::Duration;

/// The lock row's name (one embedded worker per ledger).
const EMBEDDED: &str = "embedded-worker";

/// Heartbeat age after which a holder is presumed dead; heartbeat at least 3x as often.
pub(crate) const EMBEDDED_LOCK_STALE_AFTER: Duration = Duration::from_secs(10);

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
            let mut c = self.conn("acquire embedded lock").await?;
            // One statement decides: insert, re-take our own, or take over a stale lease
            // (heartbeats and their age on the database's clock).
            let taken = execute!(
                c.on(),
                sql!(
                    "INSERT INTO embedded_lock (name, holder, pid, acquired_at, heartbeat_at)
                     VALUES ($1, $2, $3, " NOW ", " NOW ")
                     ON CONFLICT (name) DO UPDATE SET
                         holder = excluded.holder, pid = excluded.pid,
                         acquired_at = CASE WHEN embedded_lock.holder = excluded.holder
                                       THEN embedded_lock.acquired_at
                                       ELSE excluded.acquired_at END,
                         heartbeat_at = excluded.heartbeat_at
                     WHERE embedded_lock.holder = excluded.holder
                        OR embedded_lock.heartbeat_at < excluded.heartbeat_at - $4"
                ),
                EMBEDDED,
                holder,
                i64::from(std::process::id()),
                stale_ms
            )
            .ctx(self, "acquire embedded lock")?;
            drop(c);
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
        let mut c = self.conn("heartbeat embedded lock").await?;
        let updated = execute!(
            c.on(),
            sql!(
                "UPDATE embedded_lock SET heartbeat_at = " NOW
                " WHERE name = $1 AND holder = $2"
            ),
            EMBEDDED,
            holder
        )
        .ctx(self, "heartbeat embedded lock")?;
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
        let mut c = self.conn("release embedded lock").await?;
        let deleted = execute!(
            c.on(),
            sql!("DELETE FROM embedded_lock WHERE name = $1 AND holder = $2"),
            EMBEDDED,
            holder
        )
        .ctx(self, "release embedded lock")?;
        Ok(deleted == 1)
    }

    /// Who holds the embedded-worker lock now, if anyone (stale or not).
    pub async fn embedded_lock_holder(&self) -> Result<Option<HeldBy>, StoreError> {
        let mut c = self.conn("read embedded lock").await?;
        let row = fetch!(
            fetch_optional as (String, i64, i64, i64),
            c.on(),
            sql!(
                "SELECT holder, pid, acquired_at, heartbeat_at FROM embedded_lock WHERE name = $1"
            ),
            EMBEDDED
        )
        .ctx(self, "read embedded lock")?;
        Ok(row.map(|(holder, pid, since, heartbeat)| HeldBy {
            holder,
            pid: u32::try_from(pid).unwrap_or(0),
            since: from_ms(since),
            heartbeat_at: from_ms(heartbeat),
        }))
    }
}
