//! Listed once: which source item became which target item on which target shop
//! (docs/design.md, "Listed once"). A listing's identity is claimed here before its write is
//! sent, so two jobs, two workers or two producers never both write it; a claim whose write's
//! outcome is unknown is looked up on the target by its seller code before any second write.

use super::backend::{execute, fetch, sql, Conn, Tx};
use super::{json_list, QueryCtx, Store, StoreError};
use crate::platform::Platform;
use std::collections::{HashMap, HashSet};

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

/// What a claim of a listing's identity found ([`Store::claim_listing`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The job holds the identity, and no write of it was sent before: write.
    Fresh,
    /// The job holds the identity, and an earlier write of it may have made the product (an
    /// earlier run of the same queued task whose answer was lost, a claim its holder gave up,
    /// or one left behind and taken over): look `seller_code` up on the target before writing.
    Unsure {
        /// The code the earlier write carried.
        seller_code: String,
    },
    /// Already listed.
    Listed(Listed),
    /// Another holder's write of it may be on its way (held this long): wait for its outcome.
    /// The holder is another job, or another run of this job's items (a task queued again
    /// while its first run still goes, as after a Redis loss and `reconcile`).
    Held {
        /// The job holding it (`None`: released as it was read).
        job_id: Option<i64>,
        /// How long it has held it (ms).
        age_ms: i64,
    },
}

/// One listing's identity to claim before its write, with the seller's code the write carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRequest {
    /// The source platform.
    pub from: Platform,
    /// The source item.
    pub source_item: String,
    /// The target platform.
    pub to: Platform,
    /// The target shop.
    pub shop: String,
    /// The job that writes it.
    pub job_id: i64,
    /// Who holds the claim while the write may be on its way: the queued task whose run
    /// writes it, the same across that task's re-deliveries (a dead worker's task taken over
    /// runs under its holder), different for a task queued anew (docs/design.md, "Listed
    /// once").
    pub holder: String,
    /// The seller's code the write carries.
    pub seller_code: String,
    /// The job asked for new products even where listed.
    pub relist: bool,
}

/// Claims written by one insert: the same route, job and holder.
type ClaimGroup<'a> = (Platform, Platform, &'a str, i64, &'a str);

/// The `state` of a made listing (a claim's is `claimed`).
const LISTED: &str = "listed";

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
                   AND state = 'listed' AND target_item IS NOT NULL
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
    /// target shop, by `job_id`, in one transaction: the job's claim becomes the listing. A
    /// listing another job recorded stays, unless `relist` (a job that asked for new
    /// products): then the new listing replaces it.
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
        let mut tx = self.begin("record_listings: begin").await?;
        self.insert_listings(&mut tx, route, job_id, relist, made)
            .await?;
        tx.commit().await.ctx(self, "record_listings: commit")?;
        Ok(())
    }

    /// Inside `tx`: the rows of [`Store::record_listings`].
    pub(super) async fn insert_listings(
        &self,
        tx: &mut Tx,
        route: ListingRoute<'_>,
        job_id: i64,
        relist: bool,
        made: &[(String, String)],
    ) -> Result<(), StoreError> {
        // One statement for the group, the pairs bound as one JSON array (see
        // `Store::finish_items` on SQLite for why); a source item named twice is listed once.
        let mut seen = HashSet::with_capacity(made.len());
        let pairs: Vec<&(String, String)> = made
            .iter()
            .filter(|(s, _)| seen.insert(s.as_str()))
            .collect();
        // Serializing strings cannot fail.
        let pairs = serde_json::to_string(&pairs).unwrap_or_else(|_| "[]".to_string());
        let insert = if relist {
            sql!(
                "INSERT INTO listings (source_platform, source_item, target_platform,
                     target_shop, state, target_item, job_id, listed_at)
                 SELECT $1, m.value ->> 0, $2, $3, 'listed', m.value ->> 1, $4, " NOW "
                 FROM " [PAIRS "$5" AS m] " WHERE true
                 ON CONFLICT (source_platform, source_item, target_platform, target_shop)
                 DO UPDATE SET state = 'listed', target_item = excluded.target_item,
                     job_id = excluded.job_id, listed_at = excluded.listed_at"
            )
        } else {
            sql!(
                "INSERT INTO listings (source_platform, source_item, target_platform,
                     target_shop, state, target_item, job_id, listed_at)
                 SELECT $1, m.value ->> 0, $2, $3, 'listed', m.value ->> 1, $4, " NOW "
                 FROM " [PAIRS "$5" AS m] " WHERE true
                 ON CONFLICT (source_platform, source_item, target_platform, target_shop)
                 DO UPDATE SET state = 'listed', target_item = excluded.target_item,
                     listed_at = excluded.listed_at
                 WHERE listings.state = 'claimed' AND listings.job_id = excluded.job_id"
            )
        };
        execute!(
            tx.on(),
            insert,
            route.from.as_str(),
            route.to.as_str(),
            route.shop,
            job_id,
            pairs
        )
        .ctx(self, "record_listings: insert")?;
        Ok(())
    }

    /// Claim each listing of `claims` before its write is sent, in one transaction (a worker
    /// claims the items of all its running tasks together: one commit, not one per item).
    /// A claim of the same job and holder is the holder's own (an earlier run of the task:
    /// unsure); another holder's is waited for until it is listed, released, given up
    /// ([`Store::disown_claims`]) or older than `take_over_ms` since its holder last renewed
    /// it (its write cannot still be on the wire: docs/design.md, "Listed once"); a `relist`
    /// claim takes a listing another job made. The answers are in the order of `claims`.
    pub async fn claim_listings(
        &self,
        claims: &[ClaimRequest],
        take_over_ms: i64,
    ) -> Result<Vec<Claim>, StoreError> {
        let mut tx = self.begin("claim_listings: begin").await?;
        // The usual case first: one insert for each (route, job) of the batch, answering the
        // identities it claimed; only the others (listed, or another job's) are read one by one.
        let mut fresh: HashSet<usize> = HashSet::new();
        // In the order of first appearance: of two jobs asking for one listing in a batch,
        // the first asked gets it.
        let mut groups: Vec<(ClaimGroup<'_>, Vec<usize>)> = Vec::new();
        for (i, c) in claims.iter().enumerate() {
            let plain = |t: &str| !t.contains('\t');
            if plain(&c.source_item) && plain(&c.seller_code) {
                let key = (c.from, c.to, c.shop.as_str(), c.job_id, c.holder.as_str());
                match groups.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, members)) => members.push(i),
                    None => groups.push((key, vec![i])),
                }
            }
        }
        for ((from, to, shop, job_id, holder), members) in groups {
            let pairs: Vec<String> = members
                .iter()
                .map(|&i| format!("{}\t{}", claims[i].source_item, claims[i].seller_code))
                .collect();
            let inserted = fetch!(
                fetch_all as (String,),
                tx.on(),
                sql!(
                    sqlite: "INSERT INTO listings (source_platform, source_item, target_platform,
                                 target_shop, state, seller_code, job_id, claim_holder, claimed_at)
                             SELECT $1, substr(k.value, 1, instr(k.value, char(9)) - 1), $2, $3,
                                 'claimed', substr(k.value, instr(k.value, char(9)) + 1), $4, $6,
                                 CAST(unixepoch('subsec') * 1000 AS BIGINT)
                             FROM json_each($5) AS k WHERE true
                             ON CONFLICT (source_platform, source_item, target_platform, target_shop)
                             DO NOTHING
                             RETURNING source_item",
                    postgres: "INSERT INTO listings (source_platform, source_item, target_platform,
                                 target_shop, state, seller_code, job_id, claim_holder, claimed_at)
                             SELECT $1, split_part(k.value, chr(9), 1), $2, $3, 'claimed',
                                 split_part(k.value, chr(9), 2), $4, $6,
                                 CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)
                             FROM json_array_elements_text(CAST($5 AS json)) AS k(value)
                             ON CONFLICT (source_platform, source_item, target_platform, target_shop)
                             DO NOTHING
                             RETURNING source_item",
                ),
                from.as_str(),
                to.as_str(),
                shop,
                job_id,
                json_list(&pairs),
                holder
            )
            .ctx(self, "claim_listings: insert")?;
            let made: HashSet<String> = inserted.into_iter().map(|(item,)| item).collect();
            fresh.extend(
                members
                    .into_iter()
                    .filter(|&i| made.contains(&claims[i].source_item)),
            );
        }
        let mut out = Vec::with_capacity(claims.len());
        for (i, claim) in claims.iter().enumerate() {
            out.push(if fresh.contains(&i) {
                Claim::Fresh
            } else {
                self.claim_one(&mut tx, claim, take_over_ms).await?
            });
        }
        tx.commit().await.ctx(self, "claim_listings: commit")?;
        Ok(out)
    }

    async fn claim_one(
        &self,
        tx: &mut Tx,
        req: &ClaimRequest,
        take_over_ms: i64,
    ) -> Result<Claim, StoreError> {
        let (from, to, shop) = (req.from.as_str(), req.to.as_str(), req.shop.as_str());
        let (source_item, job_id, seller_code, holder) = (
            req.source_item.as_str(),
            req.job_id,
            req.seller_code.as_str(),
            req.holder.as_str(),
        );
        let inserted = execute!(
            tx.on(),
            sql!(
                "INSERT INTO listings (source_platform, source_item, target_platform,
                     target_shop, state, seller_code, job_id, claim_holder, claimed_at)
                 VALUES ($1, $2, $3, $4, 'claimed', $5, $6, $7, " NOW ")
                 ON CONFLICT (source_platform, source_item, target_platform, target_shop)
                 DO NOTHING"
            ),
            from,
            source_item,
            to,
            shop,
            seller_code,
            job_id,
            holder
        )
        .ctx(self, "claim_listings: insert")?;
        if inserted == 1 {
            return Ok(Claim::Fresh);
        }
        let row = fetch!(
            fetch_optional
                as (
                    String,
                    Option<String>,
                    Option<String>,
                    i64,
                    Option<String>,
                    i64
                ),
            tx.on(),
            sql!(
                "SELECT state, target_item, seller_code, job_id, claim_holder,
                     " NOW " - COALESCE(claimed_at, listed_at, 0)
                 FROM listings
                 WHERE source_platform = $1 AND source_item = $2 AND target_platform = $3
                   AND target_shop = $4"
            ),
            from,
            source_item,
            to,
            shop
        )
        .ctx(self, "claim_listings: read")?;
        // Within one transaction the row the insert met is there; kept for safety.
        let Some((state, target_item, code, job, held_by, age_ms)) = row else {
            return Ok(Claim::Held {
                job_id: None,
                age_ms: 0,
            });
        };
        let listed = state == LISTED;
        match (listed, target_item) {
            (true, Some(target_item)) if !req.relist || job == job_id => {
                return Ok(Claim::Listed(Listed {
                    target_item,
                    job_id: job,
                }))
            }
            _ => {}
        }
        let unsure = || Claim::Unsure {
            seller_code: code.clone().unwrap_or_else(|| seller_code.to_string()),
        };
        let own = job == job_id && held_by.as_deref() == Some(holder);
        if !listed && own {
            return Ok(unsure());
        }
        // Given up by its holder (no write of it on the wire), or not renewed for longer
        // than any write can take: taken over, and looked up first.
        let abandoned = held_by.is_none() || age_ms >= take_over_ms;
        if !listed && !abandoned {
            return Ok(Claim::Held {
                job_id: Some(job),
                age_ms,
            });
        }
        // A listing a relist job replaces, or a claim given up or left behind: take it,
        // unless another worker took it first (the row changed since it was read).
        let taken = execute!(
            tx.on(),
            sql!(
                sqlite: "UPDATE listings SET state = 'claimed', job_id = $5, claim_holder = $9,
                             claimed_at = CAST(unixepoch('subsec') * 1000 AS BIGINT),
                             seller_code = $6
                         WHERE source_platform = $1 AND source_item = $2
                           AND target_platform = $3 AND target_shop = $4 AND job_id = $7
                           AND state = $8 AND claim_holder IS $10",
                postgres: "UPDATE listings SET state = 'claimed', job_id = $5, claim_holder = $9,
                             claimed_at = CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT),
                             seller_code = $6
                         WHERE source_platform = $1 AND source_item = $2
                           AND target_platform = $3 AND target_shop = $4 AND job_id = $7
                           AND state = $8 AND claim_holder IS NOT DISTINCT FROM $10",
            ),
            from,
            source_item,
            to,
            shop,
            job_id,
            if listed {
                seller_code
            } else {
                code.as_deref().unwrap_or(seller_code)
            },
            job,
            state.as_str(),
            holder,
            held_by.as_deref()
        )
        .ctx(self, "claim_listings: take over")?;
        Ok(match (taken, listed) {
            (0, _) => Claim::Held {
                job_id: Some(job),
                age_ms,
            },
            (_, true) => Claim::Fresh,
            (_, false) => unsure(),
        })
    }

    /// Give up `holder`'s claims of `source_items` for `job_id`: their writes surely made
    /// no product (refused, never sent, or the item ended before its write), so the next run,
    /// or another job, claims them afresh. Rows listed or held by another holder are untouched.
    pub async fn release_listings(
        &self,
        route: ListingRoute<'_>,
        job_id: i64,
        holder: &str,
        source_items: &[String],
    ) -> Result<(), StoreError> {
        let mut c = self.conn("release_listings").await?;
        self.delete_released(c.on(), route, job_id, holder, source_items)
            .await
    }

    /// On `conn`: the deletion of [`Store::release_listings`].
    pub(super) async fn delete_released(
        &self,
        conn: Conn<'_>,
        route: ListingRoute<'_>,
        job_id: i64,
        holder: &str,
        source_items: &[String],
    ) -> Result<(), StoreError> {
        if source_items.is_empty() {
            return Ok(());
        }
        execute!(
            conn,
            sql!(
                "DELETE FROM listings
                 WHERE source_platform = $1 AND target_platform = $2 AND target_shop = $3
                   AND job_id = $4 AND claim_holder = $6 AND state = 'claimed'
                   AND source_item IN (SELECT value FROM " [KEYS "$5" AS k] ")"
            ),
            route.from.as_str(),
            route.to.as_str(),
            route.shop,
            job_id,
            json_list(source_items),
            holder
        )
        .ctx(self, "release_listings")?;
        Ok(())
    }

    /// Say that `holder` still runs: its claims count as fresh again, so no other holder
    /// takes them over while its writes may be on their way (a run longer than the
    /// take-over time renews its claims as it goes). Answers how many it holds.
    pub async fn renew_claims(&self, job_id: i64, holder: &str) -> Result<u64, StoreError> {
        let mut c = self.conn("renew_claims").await?;
        let n = execute!(
            c.on(),
            sql!(
                "UPDATE listings SET claimed_at = " NOW "
                 WHERE job_id = $1 AND claim_holder = $2 AND state = 'claimed'"
            ),
            job_id,
            holder
        )
        .ctx(self, "renew_claims")?;
        Ok(n)
    }

    /// `holder`'s run has ended and none of its writes is on the wire any more: the claims
    /// it still holds (writes whose outcome is unknown) are given up, so the next run of
    /// the items, whichever task carries them, looks each up at once instead of waiting
    /// for the take-over time. Answers how many it gave up.
    pub async fn disown_claims(&self, job_id: i64, holder: &str) -> Result<u64, StoreError> {
        let mut c = self.conn("disown_claims").await?;
        self.disown_claims_on(c.on(), job_id, holder).await
    }

    /// On `conn`: the update of [`Store::disown_claims`].
    pub(super) async fn disown_claims_on(
        &self,
        conn: Conn<'_>,
        job_id: i64,
        holder: &str,
    ) -> Result<u64, StoreError> {
        let n = execute!(
            conn,
            sql!(
                "UPDATE listings SET claim_holder = NULL
                 WHERE job_id = $1 AND claim_holder = $2 AND state = 'claimed'"
            ),
            job_id,
            holder
        )
        .ctx(self, "disown_claims")?;
        Ok(n)
    }

    /// The claims of `job_id` on `source_items`, whoever holds them, are given up: their
    /// task went to the dead letters (its runs are over: a dead task is one the queue took
    /// from a worker that stopped heartbeating, as a re-delivery would), so the items run
    /// again by `dead --requeue`, in new tasks, look their products up at once. Answers how
    /// many.
    pub async fn disown_item_claims(
        &self,
        job_id: i64,
        source_items: &[String],
    ) -> Result<u64, StoreError> {
        if source_items.is_empty() {
            return Ok(0);
        }
        let mut c = self.conn("disown_item_claims").await?;
        let n = execute!(
            c.on(),
            sql!(
                "UPDATE listings SET claim_holder = NULL
                 WHERE job_id = $1 AND state = 'claimed'
                   AND source_item IN (SELECT value FROM " [KEYS "$2" AS k] ")"
            ),
            job_id,
            json_list(source_items)
        )
        .ctx(self, "disown_item_claims")?;
        Ok(n)
    }
}
