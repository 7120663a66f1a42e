//! Renewable shops' tokens, sealed (docs/design.md, "Token lifetimes"): one row a shop, its
//! renewals claimed by compare-and-set so the fleet renews each token once. Instants are the
//! database's clock, so hosts whose clocks disagree agree on when a token ends.

use super::backend::{execute, fetch, sql};
use super::{QueryCtx, Store, StoreError};
use crate::platform::Platform;

/// A shop's token row as a worker reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShopToken {
    /// The access token, sealed.
    pub sealed_access: String,
    /// The refresh token, sealed.
    pub sealed_refresh: String,
    /// Keyed fingerprint of the refresh token the operator gave.
    pub source_mark: String,
    /// Moves on with every renewal and reseed.
    pub generation: i64,
    /// Milliseconds the access token has left (database clock); negative: expired.
    pub remaining_ms: i64,
    /// The access token's whole lifetime in ms; 0: not known (a seeded token).
    pub lifetime_ms: i64,
    /// Another worker holds the renewal now.
    pub renewing: bool,
    /// The last renewal's failure, if it failed.
    pub last_error: Option<String>,
}

type TokenRow = (String, String, String, i64, i64, i64, i64, Option<String>);

fn token_of(
    (access, refresh, mark, generation, remaining, lifetime, renewing, error): TokenRow,
) -> ShopToken {
    ShopToken {
        sealed_access: access,
        sealed_refresh: refresh,
        source_mark: mark,
        generation,
        remaining_ms: remaining,
        lifetime_ms: lifetime,
        renewing: renewing != 0,
        last_error: error,
    }
}

impl Store {
    /// Seed `shop`'s row with the tokens the operator gave, or reseed it when the refresh token
    /// the operator gives now is another (`source_mark` differs). A seeded token's end is not
    /// known: it is due for renewal at once. True when the row was written.
    pub async fn seed_shop_token(
        &self,
        platform: Platform,
        shop: &str,
        sealed_access: &str,
        sealed_refresh: &str,
        source_mark: &str,
    ) -> Result<bool, StoreError> {
        let mut c = self.conn("seed_shop_token").await?;
        let n = execute!(
            c.on(),
            sql!(
                "INSERT INTO shop_tokens (platform, shop, sealed_access, sealed_refresh,
                    source_mark, generation, expires_at, lifetime_ms, updated_at)
                 VALUES ($1, $2, $3, $4, $5, 0, 0, 0, " NOW ")
                 ON CONFLICT (platform, shop) DO UPDATE SET
                    sealed_access = excluded.sealed_access,
                    sealed_refresh = excluded.sealed_refresh,
                    source_mark = excluded.source_mark,
                    generation = shop_tokens.generation + 1, expires_at = 0, lifetime_ms = 0,
                    renewing_until = NULL, last_error = NULL, updated_at = excluded.updated_at
                 WHERE shop_tokens.source_mark <> excluded.source_mark"
            ),
            platform.as_str(),
            shop,
            sealed_access,
            sealed_refresh,
            source_mark
        )
        .ctx(self, "seed_shop_token")?;
        Ok(n == 1)
    }

    /// `shop`'s token row, if it was seeded.
    pub async fn shop_token(
        &self,
        platform: Platform,
        shop: &str,
    ) -> Result<Option<ShopToken>, StoreError> {
        let mut c = self.conn("shop_token").await?;
        let row = fetch!(
            fetch_optional as TokenRow,
            c.on(),
            sql!(
                "SELECT sealed_access, sealed_refresh, source_mark, generation,
                        CAST(expires_at - " NOW " AS BIGINT), lifetime_ms,
                        CAST(CASE WHEN renewing_until > " NOW " THEN 1 ELSE 0 END AS BIGINT),
                        last_error
                 FROM shop_tokens WHERE platform = $1 AND shop = $2"
            ),
            platform.as_str(),
            shop
        )
        .ctx(self, "shop_token")?;
        Ok(row.map(token_of))
    }

    /// The token rows of every served shop of the directory, in one read (a worker looks at
    /// a thousand shops every few seconds).
    pub async fn ledger_shop_tokens(
        &self,
    ) -> Result<Vec<(Platform, String, ShopToken)>, StoreError> {
        let mut c = self.conn("ledger_shop_tokens").await?;
        let rows = fetch!(
            fetch_all
                as (
                    String,
                    String,
                    String,
                    String,
                    String,
                    i64,
                    i64,
                    i64,
                    i64,
                    Option<String>
                ),
            c.on(),
            sql!(
                "SELECT t.platform, t.shop, t.sealed_access, t.sealed_refresh, t.source_mark,
                        t.generation, CAST(t.expires_at - " NOW " AS BIGINT), t.lifetime_ms,
                        CAST(CASE WHEN t.renewing_until > " NOW " THEN 1 ELSE 0 END AS BIGINT),
                        t.last_error
                 FROM shop_tokens t JOIN shops s ON s.platform = t.platform AND s.shop = t.shop
                 WHERE s.removed_at IS NULL
                 ORDER BY t.platform, t.shop"
            )
        )
        .ctx(self, "ledger_shop_tokens")?;
        rows.into_iter()
            .map(
                |(p, shop, a, r, mark, generation, remaining, lifetime, renewing, error)| {
                    let token =
                        token_of((a, r, mark, generation, remaining, lifetime, renewing, error));
                    Ok((self.parse(&p, "shop_tokens.platform")?, shop, token))
                },
            )
            .collect()
    }

    /// Claim the renewal of `shop`'s token of `generation` for `hold_ms`: true for one worker
    /// of the fleet; false when the token was renewed meanwhile or another worker holds it.
    pub async fn claim_token_renewal(
        &self,
        platform: Platform,
        shop: &str,
        generation: i64,
        hold_ms: i64,
    ) -> Result<bool, StoreError> {
        let mut c = self.conn("claim_token_renewal").await?;
        let n = execute!(
            c.on(),
            sql!(
                "UPDATE shop_tokens SET renewing_until = " NOW " + $4
                 WHERE platform = $1 AND shop = $2 AND generation = $3
                   AND (renewing_until IS NULL OR renewing_until < " NOW ")"
            ),
            platform.as_str(),
            shop,
            generation,
            hold_ms
        )
        .ctx(self, "claim_token_renewal")?;
        Ok(n == 1)
    }

    /// Keep the renewed tokens of the claimed `generation`: the next generation, living
    /// `lifetime_ms` from now. False when the row moved on (a reseed) meanwhile.
    pub async fn store_renewed_token(
        &self,
        platform: Platform,
        shop: &str,
        generation: i64,
        sealed_access: &str,
        sealed_refresh: &str,
        lifetime_ms: i64,
    ) -> Result<bool, StoreError> {
        let mut c = self.conn("store_renewed_token").await?;
        let n = execute!(
            c.on(),
            sql!(
                "UPDATE shop_tokens SET sealed_access = $4, sealed_refresh = $5,
                    lifetime_ms = $6, expires_at = " NOW " + $6, generation = generation + 1,
                    renewing_until = NULL, last_error = NULL, updated_at = " NOW "
                 WHERE platform = $1 AND shop = $2 AND generation = $3"
            ),
            platform.as_str(),
            shop,
            generation,
            sealed_access,
            sealed_refresh,
            lifetime_ms
        )
        .ctx(self, "store_renewed_token")?;
        Ok(n == 1)
    }

    /// A renewal of `generation` failed: release the claim, keep why (no token in it).
    pub async fn token_renewal_failed(
        &self,
        platform: Platform,
        shop: &str,
        generation: i64,
        error: &str,
    ) -> Result<(), StoreError> {
        let mut c = self.conn("token_renewal_failed").await?;
        execute!(
            c.on(),
            sql!(
                "UPDATE shop_tokens SET renewing_until = NULL, last_error = $4,
                    updated_at = " NOW "
                 WHERE platform = $1 AND shop = $2 AND generation = $3"
            ),
            platform.as_str(),
            shop,
            generation,
            error
        )
        .ctx(self, "token_renewal_failed")?;
        Ok(())
    }
}
