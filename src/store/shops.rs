//! Paused shops: a shop whose session the platform refused is paused alone, its items wait,
//! and the other shops of the app go on (docs/design.md, "Shops"). The ledger holds the
//! pause; every worker reads it before a task of that shop and while one runs.

use super::backend::{execute, fetch, sql};
use super::{QueryCtx, Store, StoreError};
use crate::platform::Platform;
use chrono::{DateTime, Utc};

/// One paused shop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShopPause {
    /// The shop's platform.
    pub platform: Platform,
    /// The shop.
    pub shop: String,
    /// The platform's answer that paused it (code and message; no session in it).
    pub reason: String,
    /// Keyed fingerprint of the refused session: a worker holding another one resumes it.
    pub session_mark: String,
    /// When it was paused.
    pub paused_at: DateTime<Utc>,
}

impl std::fmt::Display for ShopPause {
    /// `shop S on P, PAUSED since T (why)`: how `status`, `shop list` and the logs say it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "shop {} on {}, PAUSED since {} ({})",
            self.shop,
            self.platform,
            self.paused_at.format("%Y-%m-%d %H:%M:%S UTC"),
            self.reason
        )
    }
}

type PauseRow = (String, String, String, String, i64);

impl Store {
    /// Pause `shop` on `platform` (the first refusal's reason stays). True when this call
    /// paused it.
    pub async fn pause_shop(
        &self,
        platform: Platform,
        shop: &str,
        reason: &str,
        session_mark: &str,
    ) -> Result<bool, StoreError> {
        let mut c = self.conn("pause_shop").await?;
        let n = execute!(
            c.on(),
            sql!(
                "INSERT INTO shop_pauses (platform, shop, reason, session_mark, paused_at)
                 VALUES ($1, $2, $3, $4, " NOW ")
                 ON CONFLICT (platform, shop) DO NOTHING"
            ),
            platform.as_str(),
            shop,
            reason,
            session_mark
        )
        .ctx(self, "pause_shop")?;
        Ok(n == 1)
    }

    /// Resume `shop` on `platform`, or on every platform when `platform` is `None`. With
    /// `only_mark`, only a pause of that session (a worker with another session resumes the
    /// pause of the refused one, not a newer pause). Returns how many pauses ended.
    pub async fn resume_shop(
        &self,
        platform: Option<Platform>,
        shop: &str,
        only_mark: Option<&str>,
    ) -> Result<u64, StoreError> {
        let mut c = self.conn("resume_shop").await?;
        execute!(
            c.on(),
            sql!(
                "DELETE FROM shop_pauses
                 WHERE shop = $1 AND ($2 IS NULL OR platform = $2)
                   AND ($3 IS NULL OR session_mark = $3)"
            ),
            shop,
            platform.map(Platform::as_str),
            only_mark
        )
        .ctx(self, "resume_shop")
    }

    /// Every paused shop, by platform and name.
    pub async fn shop_pauses(&self) -> Result<Vec<ShopPause>, StoreError> {
        let mut c = self.conn("shop_pauses").await?;
        let rows = fetch!(
            fetch_all as PauseRow,
            c.on(),
            sql!(
                "SELECT platform, shop, reason, session_mark, paused_at FROM shop_pauses
                 ORDER BY platform, shop"
            )
        )
        .ctx(self, "shop_pauses")?;
        rows.into_iter().map(|r| self.pause_of(r)).collect()
    }

    /// The pause of one shop, if it is paused.
    pub async fn shop_pause(
        &self,
        platform: Platform,
        shop: &str,
    ) -> Result<Option<ShopPause>, StoreError> {
        let mut c = self.conn("shop_pause").await?;
        let row = fetch!(
            fetch_optional as PauseRow,
            c.on(),
            sql!(
                "SELECT platform, shop, reason, session_mark, paused_at FROM shop_pauses
                 WHERE platform = $1 AND shop = $2"
            ),
            platform.as_str(),
            shop
        )
        .ctx(self, "shop_pause")?;
        row.map(|r| self.pause_of(r)).transpose()
    }

    fn pause_of(
        &self,
        (platform, shop, reason, session_mark, at): PauseRow,
    ) -> Result<ShopPause, StoreError> {
        Ok(ShopPause {
            platform: self.parse(&platform, "shop_pauses.platform")?,
            shop,
            reason,
            session_mark,
            paused_at: DateTime::from_timestamp_millis(at).unwrap_or_default(),
        })
    }
}
