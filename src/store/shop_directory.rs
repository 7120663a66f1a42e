//! Shops in the ledger (docs/design.md, "Shops in the ledger"): the shops added while the fleet
//! runs, by `syncfleet shop add` or a seller's OAuth authorisation. A row names the shop, its
//! weight and its seller; its tokens are its `shop_tokens` row, sealed by the caller. Workers
//! read the directory every heartbeat, so a shop added or removed reaches the fleet without a
//! restart.

use super::backend::{execute, fetch, sql};
use super::{QueryCtx, Store, StoreError};
use crate::platform::Platform;
use chrono::{DateTime, Utc};

/// `shop_tokens.source_mark` of a ledger shop's tokens: they were given to the ledger (by
/// `shop add` or OAuth), not seeded from an environment variable.
pub const LEDGER_SOURCE: &str = "ledger";

/// One shop of the directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerShop {
    /// The platform it sells on.
    pub platform: Platform,
    /// Its name (what jobs and schedules name).
    pub shop: String,
    /// Its share among the shops with work waiting.
    pub weight: u32,
    /// The seller's account name as change messages carry it.
    pub seller: Option<String>,
    /// When it was added (or last authorised).
    pub added_at: DateTime<Utc>,
    /// When it was removed; `None`: it is served.
    pub removed_at: Option<DateTime<Utc>>,
    /// Whether its tokens row holds a refresh token (renewed before its access token ends).
    pub renewable: bool,
    /// Milliseconds its access token has left (database clock); `None`: no token row or the
    /// end is not known.
    pub token_remaining_ms: Option<i64>,
    /// The last renewal's failure.
    pub token_error: Option<String>,
}

/// What a shop is added with. The tokens are sealed already: the ledger never sees one.
#[derive(Debug, Clone)]
pub struct NewLedgerShop {
    /// The platform it sells on.
    pub platform: Platform,
    /// Its name.
    pub shop: String,
    /// Its weight.
    pub weight: u32,
    /// The seller's account name.
    pub seller: Option<String>,
    /// The access token, sealed.
    pub sealed_access: String,
    /// The refresh token, sealed; `None`: the access token is never renewed.
    pub sealed_refresh: Option<String>,
    /// How long the access token lives from now, when the platform said (`expires_in`).
    pub lifetime_ms: Option<i64>,
}

type ShopRow = (
    String,
    String,
    i64,
    Option<String>,
    i64,
    Option<i64>,
    Option<String>,
    Option<i64>,
    Option<i64>,
    Option<String>,
);

/// The directory's rows with their tokens' state (a [`ShopRow`] each), then `$tail`.
macro_rules! shop_rows_sql {
    ($tail:literal) => {
        sql!(
            "SELECT s.platform, s.shop, s.weight, s.seller, s.added_at, s.removed_at,
                    t.sealed_refresh,
                    CASE WHEN t.expires_at > 0
                         THEN CAST(t.expires_at - " NOW " AS BIGINT) END,
                    t.lifetime_ms, t.last_error
             FROM shops s LEFT JOIN shop_tokens t
               ON t.platform = s.platform AND t.shop = s.shop"
            $tail
        )
    };
}

impl Store {
    /// Add `s`, or authorise it anew: a removed shop comes back, a served one keeps its name
    /// with the new weight, seller and tokens (the token row's generation moves on, so every
    /// worker picks the new tokens up). True when the shop was not served before.
    pub async fn add_ledger_shop(&self, s: &NewLedgerShop) -> Result<bool, StoreError> {
        let mut tx = self.begin("add_ledger_shop: begin").await?;
        let before = fetch!(
            fetch_optional as (Option<i64>,),
            tx.on(),
            sql!("SELECT removed_at FROM shops WHERE platform = $1 AND shop = $2"),
            s.platform.as_str(),
            &s.shop
        )
        .ctx(self, "add_ledger_shop: look")?;
        let was_served = matches!(before, Some((None,)));
        execute!(
            tx.on(),
            sql!(
                "INSERT INTO shops (platform, shop, weight, seller, added_at, removed_at)
                 VALUES ($1, $2, $3, $4, " NOW ", NULL)
                 ON CONFLICT (platform, shop) DO UPDATE SET weight = excluded.weight,
                    seller = excluded.seller, added_at = excluded.added_at, removed_at = NULL"
            ),
            s.platform.as_str(),
            &s.shop,
            i64::from(s.weight),
            s.seller.as_deref()
        )
        .ctx(self, "add_ledger_shop: shop")?;
        let lifetime = s.lifetime_ms.unwrap_or(0).max(0);
        execute!(
            tx.on(),
            sql!(
                "INSERT INTO shop_tokens (platform, shop, sealed_access, sealed_refresh,
                    source_mark, generation, expires_at, lifetime_ms, updated_at)
                 VALUES ($1, $2, $3, $4, $5, 0,
                    CASE WHEN $6 > 0 THEN " NOW " + $6 ELSE 0 END, $6, " NOW ")
                 ON CONFLICT (platform, shop) DO UPDATE SET
                    sealed_access = excluded.sealed_access,
                    sealed_refresh = excluded.sealed_refresh,
                    source_mark = excluded.source_mark,
                    generation = shop_tokens.generation + 1,
                    expires_at = excluded.expires_at, lifetime_ms = excluded.lifetime_ms,
                    renewing_until = NULL, last_error = NULL, updated_at = excluded.updated_at"
            ),
            s.platform.as_str(),
            &s.shop,
            &s.sealed_access,
            s.sealed_refresh.as_deref().unwrap_or(""),
            LEDGER_SOURCE,
            lifetime
        )
        .ctx(self, "add_ledger_shop: tokens")?;
        // A new authorisation is a new session: a pause of the refused one no longer holds.
        execute!(
            tx.on(),
            sql!("DELETE FROM shop_pauses WHERE platform = $1 AND shop = $2"),
            s.platform.as_str(),
            &s.shop
        )
        .ctx(self, "add_ledger_shop: lift its pause")?;
        tx.commit().await.ctx(self, "add_ledger_shop: commit")?;
        Ok(!was_served)
    }

    /// Remove a served shop: its tokens are deleted, its schedules stop, and workers stop
    /// calling for it within a heartbeat. False when it was not served.
    pub async fn remove_ledger_shop(
        &self,
        platform: Platform,
        shop: &str,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin("remove_ledger_shop: begin").await?;
        let n = execute!(
            tx.on(),
            sql!(
                "UPDATE shops SET removed_at = " NOW "
                 WHERE platform = $1 AND shop = $2 AND removed_at IS NULL"
            ),
            platform.as_str(),
            shop
        )
        .ctx(self, "remove_ledger_shop: shop")?;
        if n == 0 {
            return Ok(false);
        }
        execute!(
            tx.on(),
            sql!("DELETE FROM shop_tokens WHERE platform = $1 AND shop = $2"),
            platform.as_str(),
            shop
        )
        .ctx(self, "remove_ledger_shop: tokens")?;
        execute!(
            tx.on(),
            sql!("UPDATE schedules SET paused = 1 WHERE platform = $1 AND shop = $2"),
            platform.as_str(),
            shop
        )
        .ctx(self, "remove_ledger_shop: schedules")?;
        tx.commit().await.ctx(self, "remove_ledger_shop: commit")?;
        Ok(true)
    }

    /// The directory: every shop, served ones and removed ones, by platform and name.
    pub async fn ledger_shops(&self) -> Result<Vec<LedgerShop>, StoreError> {
        let mut c = self.conn("ledger_shops").await?;
        let rows = fetch!(
            fetch_all as ShopRow,
            c.on(),
            shop_rows_sql!(" ORDER BY s.platform, s.shop")
        )
        .ctx(self, "ledger_shops")?;
        rows.into_iter().map(|r| self.ledger_shop_of(r)).collect()
    }

    /// One shop of the directory (served or removed).
    pub async fn ledger_shop(
        &self,
        platform: Platform,
        shop: &str,
    ) -> Result<Option<LedgerShop>, StoreError> {
        let mut c = self.conn("ledger_shop").await?;
        let row = fetch!(
            fetch_optional as ShopRow,
            c.on(),
            shop_rows_sql!(" WHERE s.platform = $1 AND s.shop = $2"),
            platform.as_str(),
            shop
        )
        .ctx(self, "ledger_shop")?;
        row.map(|r| self.ledger_shop_of(r)).transpose()
    }

    fn ledger_shop_of(
        &self,
        (platform, shop, weight, seller, added, removed, refresh, remaining, _life, error): ShopRow,
    ) -> Result<LedgerShop, StoreError> {
        Ok(LedgerShop {
            platform: self.parse(&platform, "shops.platform")?,
            shop,
            weight: u32::try_from(weight.max(1)).unwrap_or(u32::MAX),
            seller,
            added_at: DateTime::from_timestamp_millis(added).unwrap_or_default(),
            removed_at: removed.and_then(DateTime::from_timestamp_millis),
            renewable: refresh.is_some_and(|r| !r.is_empty()),
            token_remaining_ms: remaining,
            token_error: error,
        })
    }

    /// Every token row, sealed, for a rekey: (platform, shop, sealed access, sealed refresh).
    pub async fn sealed_tokens(
        &self,
    ) -> Result<Vec<(Platform, String, String, String)>, StoreError> {
        let mut c = self.conn("sealed_tokens").await?;
        let rows = fetch!(
            fetch_all as (String, String, String, String),
            c.on(),
            sql!(
                "SELECT platform, shop, sealed_access, sealed_refresh FROM shop_tokens
                 ORDER BY platform, shop"
            )
        )
        .ctx(self, "sealed_tokens")?;
        rows.into_iter()
            .map(|(p, s, a, r)| Ok((self.parse(&p, "shop_tokens.platform")?, s, a, r)))
            .collect()
    }

    /// Replace a row's sealed tokens with the same tokens sealed under another key, unless
    /// the row changed meanwhile (a renewal): the generation stays, since the tokens did.
    /// False when it changed (the rekey reads it again).
    pub async fn reseal_tokens(
        &self,
        platform: Platform,
        shop: &str,
        was: (&str, &str),
        now: (&str, &str),
    ) -> Result<bool, StoreError> {
        let mut c = self.conn("reseal_tokens").await?;
        let n = execute!(
            c.on(),
            sql!(
                "UPDATE shop_tokens SET sealed_access = $5, sealed_refresh = $6
                 WHERE platform = $1 AND shop = $2 AND sealed_access = $3
                   AND sealed_refresh = $4"
            ),
            platform.as_str(),
            shop,
            was.0,
            was.1,
            now.0,
            now.1
        )
        .ctx(self, "reseal_tokens")?;
        Ok(n == 1)
    }
}
