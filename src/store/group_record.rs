//! A task's group of finished items, recorded in one transaction: the products its writes
//! made, the claims it gives up, what its pending items keep for their next run, the items'
//! outcomes and the useful calls tallied since the last group (docs/design.md, "A job, from
//! enqueue to the ledger"). One transaction a group, not one per part: SQLite has one writer,
//! and at a listing's full rate the groups' transactions are most of its work.

use super::backend::Pool;
use super::listings::ListingRoute;
use super::{CallRecord, FinishReport, ItemOutcome, QueryCtx, Store, StoreError};

/// What one group of a task's items leaves in the ledger.
#[derive(Debug, Clone, Copy)]
pub struct GroupRecord<'a> {
    /// The job the items belong to.
    pub job_id: i64,
    /// A listing job's products and released claims (`None` for other jobs).
    pub listings: Option<ListingsRecord<'a>>,
    /// What pending items fetched already (key, JSON), kept for their next run.
    pub carry: &'a [(String, String)],
    /// The items' outcomes (see [`Store::finish_items`]).
    pub outcomes: &'a [ItemOutcome],
    /// Call counts to add (see [`Store::record_calls`]): the useful calls tallied since the
    /// task's last record.
    pub calls: &'a [CallRecord],
}

/// A listing group's part of a [`GroupRecord`].
#[derive(Debug, Clone, Copy)]
pub struct ListingsRecord<'a> {
    /// Where the job lists.
    pub route: ListingRoute<'a>,
    /// The job asked for new products even where items are listed already.
    pub relist: bool,
    /// The task run holding the group's claims.
    pub holder: &'a str,
    /// (source item, target item) of each product the group's writes made: see
    /// [`Store::record_listings`].
    pub made: &'a [(String, String)],
    /// Source items whose writes surely made nothing: their claims are given up (see
    /// [`Store::release_listings`]).
    pub released: &'a [String],
    /// The task run's last group: none of its writes is on the wire any more, so the claims
    /// it still holds are given up after the rest (see [`Store::disown_claims`]).
    pub last: bool,
}

impl Store {
    /// Record `group` in one transaction: its listings first, so the products and the
    /// outcomes saying so land together or not at all.
    pub async fn record_group(&self, group: &GroupRecord<'_>) -> Result<FinishReport, StoreError> {
        let listed = group
            .listings
            .is_some_and(|l| !l.made.is_empty() || !l.released.is_empty() || l.last);
        let outcomes_only = !listed && group.carry.is_empty() && group.calls.is_empty();
        if outcomes_only && group.outcomes.is_empty() {
            return Ok(FinishReport::default());
        }
        if outcomes_only && matches!(self.pool, Pool::Postgres(_)) {
            // PostgreSQL records outcomes alone in one statement, no transaction around it.
            return self.finish_items(group.job_id, group.outcomes).await;
        }
        let mut tx = self.begin("record_group: begin").await?;
        if let Some(l) = &group.listings {
            if !l.made.is_empty() {
                self.insert_listings(&mut tx, l.route, group.job_id, l.relist, l.made)
                    .await?;
            }
            self.delete_released(tx.on(), l.route, group.job_id, l.holder, l.released)
                .await?;
            if l.last {
                self.disown_claims_on(tx.on(), group.job_id, l.holder)
                    .await?;
            }
        }
        self.record_calls_in(&mut tx, group.calls).await?;
        self.keep_carry_in(&mut tx, group.job_id, group.carry)
            .await?;
        let report = if group.outcomes.is_empty() {
            FinishReport::default()
        } else {
            self.finish_items_in(&mut tx, group.job_id, group.outcomes)
                .await?
        };
        tx.commit().await.ctx(self, "record_group: commit")?;
        Ok(report)
    }
}
