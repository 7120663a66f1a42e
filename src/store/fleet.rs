//! Dead letters and the ledger's fleet identity.
//!
//! A task that exhausted its attempts ends in the queue's dead-letter stream; its items end
//! here as `failed` with class `dead`, so the job still finishes and SQL shows why
//! (docs/design.md, "Dead letters"). The fleet identity is one random id per ledger, made by
//! the migration: the queue records the id of the ledger it serves, so a worker started with
//! another ledger is refused instead of burning the fleet's tasks.

use super::backend::{execute, fetch, scalar, sql, Tx};
use super::{json_list, QueryCtx, Store, StoreError};

impl Store {
    /// This ledger's fleet identity (made once by the migrations).
    pub async fn fleet_id(&self) -> Result<String, StoreError> {
        let mut c = self.conn("fleet_id").await?;
        scalar!(
            fetch_one as String,
            c.on(),
            sql!("SELECT id FROM fleet WHERE one = 1")
        )
        .ctx(self, "fleet_id")
    }

    /// Mark the still-pending `keys` of a dead task `failed` with class `dead` and `message`,
    /// and finish the job when nothing is pending any more. Returns how many items changed.
    pub async fn fail_dead_items(
        &self,
        job_id: i64,
        keys: &[String],
        message: &str,
    ) -> Result<u64, StoreError> {
        let mut tx = self.begin("fail_dead_items: begin").await?;
        let changed = execute!(
            tx.on(),
            sql!(
                "UPDATE job_items
                 SET status = 'failed', error_class = 'dead', error_message = $1,
                     updated_at = " NOW "
                 WHERE job_id = $2 AND status = 'pending'
                   AND item_key IN (SELECT value FROM " [KEYS "$3" AS k] ")"
            ),
            message.chars().take(2000).collect::<String>(),
            job_id,
            json_list(keys)
        )
        .ctx(self, "fail_dead_items: update items")?;
        self.finish_job_if_done(&mut tx, job_id, None, changed)
            .await?;
        tx.commit().await.ctx(self, "fail_dead_items: commit")?;
        Ok(changed)
    }

    /// Put the dead-failed items among `keys` back to `pending` (reopening the job); returns
    /// those keys, in `seq` order, for the caller to push again.
    pub async fn revive_dead_items(
        &self,
        job_id: i64,
        keys: &[String],
    ) -> Result<Vec<String>, StoreError> {
        let mut tx = self.begin("revive_dead_items: begin").await?;
        let mut revived = fetch!(
            fetch_all as (String, i64),
            tx.on(),
            sql!(
                "UPDATE job_items
                 SET status = 'pending', error_class = NULL, error_message = NULL,
                     updated_at = " NOW "
                 WHERE job_id = $1 AND status = 'failed' AND error_class = 'dead'
                   AND item_key IN (SELECT value FROM " [KEYS "$2" AS k] ")
                 RETURNING item_key, seq"
            ),
            job_id,
            json_list(keys)
        )
        .ctx(self, "revive_dead_items: update items")?;
        if !revived.is_empty() {
            self.reopen_job(&mut tx, job_id, revived.len() as u64)
                .await?;
        }
        tx.commit().await.ctx(self, "revive_dead_items: commit")?;
        // RETURNING promises no order.
        revived.sort_by_key(|(_, seq)| *seq);
        Ok(revived.into_iter().map(|(key, _)| key).collect())
    }

    /// Recorded attempts of the given items (how many transient-retry rounds each used).
    pub(crate) async fn item_attempts(
        &self,
        job_id: i64,
        keys: &[String],
    ) -> Result<Vec<(String, u32)>, StoreError> {
        let mut c = self.conn("item_attempts").await?;
        let rows = fetch!(
            fetch_all as (String, i64),
            c.on(),
            sql!(
                "SELECT i.item_key, i.attempts FROM " [KEYS "$1" AS k]
                " CROSS JOIN job_items AS i WHERE i.job_id = $2 AND i.item_key = k.value"
            ),
            json_list(keys),
            job_id
        )
        .ctx(self, "item_attempts")?;
        Ok(rows
            .into_iter()
            .map(|(k, a)| (k, u32::try_from(a).unwrap_or(u32::MAX)))
            .collect())
    }

    /// Keys of the job's items that failed as dead letters, in `seq` order.
    pub async fn dead_items(&self, job_id: i64) -> Result<Vec<String>, StoreError> {
        let mut c = self.conn("dead_items").await?;
        scalar!(
            fetch_all as String,
            c.on(),
            sql!(
                "SELECT item_key FROM job_items
                 WHERE job_id = $1 AND status = 'failed' AND error_class = 'dead' ORDER BY seq"
            ),
            job_id
        )
        .ctx(self, "dead_items")
    }

    /// Jobs with items failed as dead letters, and how many: (job id, items).
    pub async fn dead_item_counts(&self) -> Result<Vec<(i64, u64)>, StoreError> {
        let mut c = self.conn("dead_item_counts").await?;
        let rows = fetch!(
            fetch_all as (i64, i64),
            c.on(),
            sql!(
                "SELECT job_id, COUNT(*) FROM job_items
                 WHERE status = 'failed' AND error_class = 'dead' GROUP BY job_id ORDER BY job_id"
            )
        )
        .ctx(self, "dead_item_counts")?;
        Ok(rows
            .into_iter()
            .map(|(j, n)| (j, u64::try_from(n).unwrap_or(0)))
            .collect())
    }

    /// [`Store::items_to_run`] with what each pending item carries from an earlier run
    /// (JSON, or `None`): one query for what a (re-)run task must do and what it may reuse.
    pub async fn items_to_run_carrying(
        &self,
        job_id: i64,
        keys: &[String],
    ) -> Result<Vec<(String, Option<String>)>, StoreError> {
        let mut c = self.conn("items_to_run_carrying").await?;
        fetch!(
            fetch_all as (String, Option<String>),
            c.on(),
            sql!(
                "SELECT i.item_key, i.carry FROM " [KEYS "$1" AS k]
                " CROSS JOIN job_items AS i
                 WHERE i.job_id = $2 AND i.item_key = k.value AND i.status = 'pending'
                 ORDER BY i.seq"
            ),
            json_list(keys),
            job_id
        )
        .ctx(self, "items_to_run_carrying")
    }

    /// Keep what pending items already fetched (key, JSON), in one transaction.
    pub(crate) async fn keep_carry(
        &self,
        job_id: i64,
        carry: &[(String, String)],
    ) -> Result<(), StoreError> {
        if carry.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin("keep_carry: begin").await?;
        self.keep_carry_in(&mut tx, job_id, carry).await?;
        tx.commit().await.ctx(self, "keep_carry: commit")?;
        Ok(())
    }

    /// Inside `tx`: the updates of [`Store::keep_carry`].
    pub(super) async fn keep_carry_in(
        &self,
        tx: &mut Tx,
        job_id: i64,
        carry: &[(String, String)],
    ) -> Result<(), StoreError> {
        for (key, json) in carry {
            execute!(
                tx.on(),
                sql!(
                    "UPDATE job_items SET carry = $1
                     WHERE job_id = $2 AND item_key = $3 AND status = 'pending'"
                ),
                json,
                job_id,
                key
            )
            .ctx(self, "keep_carry: update item")?;
        }
        Ok(())
    }
}
