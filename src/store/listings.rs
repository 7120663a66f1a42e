//! Listed once: which source item became which target item on which target shop
//! (docs/design.md, "Listed once"). A listing job skips what is already here, so a second job
//! (a re-run, a cron, a second producer) makes no second product.

use super::backend::{execute, fetch, sql};
use super::{json_list, QueryCtx, Store, StoreError};
use crate::platform::Platform;
use std::collections::HashMap;

/// Where a listing goes: from a source platform to one shop of a target platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListingRoute<'a> {
    /// The platform the source items are read from.
    pub from: Platform,
    /// The platform the items are created on.
    pub to: Platform,
    /// The target shop.
    pub shop: &'a str,
}

/// Where a source item is listed on a target shop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// The item it became on the target platform.
    pub target_item: String,
    /// The job that listed it.
    pub job_id: i64,
}

impl Store {
    /// Of `source_items`, those already listed on the route's target shop, with the target
    /// item each became and the job that listed it.
    pub async fn listed_items(
        &self,
        route: ListingRoute<'_>,
        source_items: &[String],
    ) -> Result<HashMap<String, Listed>, StoreError> {
        if source_items.is_empty() {
            return Ok(HashMap::new());
        }
        let mut c = self.conn("listed_items").await?;
        let rows = fetch!(
            fetch_all as (String, String, i64),
            c.on(),
            sql!(
                "SELECT source_item, target_item, job_id FROM listings
                 WHERE source_platform = $1 AND target_platform = $2 AND target_shop = $3
                   AND source_item IN (SELECT value FROM " [KEYS "$4" AS k] ")"
            ),
            route.from.as_str(),
            route.to.as_str(),
            route.shop,
            json_list(source_items)
        )
        .ctx(self, "listed_items")?;
        Ok(rows
            .into_iter()
            .map(|(source, target_item, job_id)| {
                (
                    source,
                    Listed {
                        target_item,
                        job_id,
                    },
                )
            })
            .collect())
    }

    /// Record that each `(source_item, target_item)` of `made` is listed on the route's
    /// target shop, by `job_id`, in one transaction. The first record of an item stays, unless
    /// `relist` (a job that asked for new products): then the new listing replaces it.
    pub async fn record_listings(
        &self,
        route: ListingRoute<'_>,
        job_id: i64,
        relist: bool,
        made: &[(String, String)],
    ) -> Result<(), StoreError> {
        if made.is_empty() {
            return Ok(());
        }
        let insert = if relist {
            sql!(
                "INSERT INTO listings (source_platform, source_item, target_platform,
                     target_shop, target_item, job_id, listed_at)
                 VALUES ($1, $2, $3, $4, $5, $6, " NOW ")
                 ON CONFLICT (source_platform, source_item, target_platform, target_shop)
                 DO UPDATE SET target_item = excluded.target_item,
                     job_id = excluded.job_id, listed_at = excluded.listed_at"
            )
        } else {
            sql!(
                "INSERT INTO listings (source_platform, source_item, target_platform,
                     target_shop, target_item, job_id, listed_at)
                 VALUES ($1, $2, $3, $4, $5, $6, " NOW ")
                 ON CONFLICT (source_platform, source_item, target_platform, target_shop)
                 DO NOTHING"
            )
        };
        let mut tx = self.begin("record_listings: begin").await?;
        for (source_item, target_item) in made {
            execute!(
                tx.on(),
                insert,
                route.from.as_str(),
                source_item,
                route.to.as_str(),
                route.shop,
                target_item,
                job_id
            )
            .ctx(self, "record_listings: insert")?;
        }
        tx.commit().await.ctx(self, "record_listings: commit")?;
        Ok(())
    }
}
