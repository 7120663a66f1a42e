//! Token lifetimes (docs/design.md, "Token lifetimes"): a shop's access token expires, and the
//! platform renews it with the shop's refresh token. For every shop whose `[shops.<name>]`
//! names a `refresh_env`, each worker looks every `[jobs] token_check_ms`: the first look
//! seeds the ledger's row with the tokens the operator gave; a token near its end is renewed
//! by the one worker that claims its row (a compare-and-set), and every worker picks up the
//! renewed token from the row, sealed, and signs its next call with it. A refresh the platform
//! refuses pauses the shop with the reason, as a refused session does.

use crate::config::{Config, Secret};
use crate::platform::oauth::{self, RenewError, TokenClient, TokenClientError};
use crate::platform::Platform;
use crate::seal::{seal, unseal};
use crate::store::{ShopToken, Store};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// How long a worker holds a claimed renewal (the refresh call's own timeout is shorter).
const CLAIM_HOLD: Duration = Duration::from_secs(30);
/// The refresh call's timeout.
const REFRESH_TIMEOUT: Duration = Duration::from_secs(10);

/// The session a shop's calls carry, as the worker holds it now: fixed for a shop without a
/// refresh token, replaced in place when a renewal lands for one with it. Calls read it when
/// they are made, so a long task signs its later calls with the renewed token.
#[derive(Clone)]
pub(crate) struct SessionCell(Arc<RwLock<Secret>>);

impl SessionCell {
    pub(crate) fn new(session: Secret) -> SessionCell {
        SessionCell(Arc::new(RwLock::new(session)))
    }

    /// The session now.
    pub(crate) fn get(&self) -> Secret {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set(&self, session: Secret) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = session;
    }
}

/// When a token is renewed: with a fifth of its life left, and never so late that it could
/// end before the next look (two looks' worth of margin); a seeded token, whose end is not
/// known, at once. No I/O: the times are the ledger's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RenewalPolicy {
    /// The interval between two looks.
    pub(crate) check_every: Duration,
}

impl RenewalPolicy {
    /// Whether a token with `remaining_ms` of its `lifetime_ms` left is renewed now.
    pub(crate) fn due(&self, remaining_ms: i64, lifetime_ms: i64) -> bool {
        if lifetime_ms <= 0 {
            return true;
        }
        let margin = i64::try_from(self.check_every.as_millis())
            .unwrap_or(i64::MAX / 4)
            .saturating_mul(2);
        remaining_ms <= (lifetime_ms / 5).max(margin)
    }
}

/// What one look did, for the logs and the tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TokenLook {
    /// Tokens this worker renewed.
    pub(crate) renewed: u32,
    /// Renewed tokens this worker picked up (its own or another worker's).
    pub(crate) picked_up: u32,
    /// Renewals that failed (refused or unreachable).
    pub(crate) failed: u32,
}

struct Held {
    cell: SessionCell,
    generation: Option<i64>,
}

/// The renewable shops' sessions of one worker process.
pub(crate) struct TokenKeeper {
    cfg: Arc<Config>,
    store: Store,
    client: TokenClient,
    policy: RenewalPolicy,
    held: Mutex<HashMap<(Platform, String), Held>>,
    /// Shops whose last look failed: warned once, not at every look.
    failing: Mutex<std::collections::HashSet<(Platform, String)>>,
}

/// The ledger row's context: binds a sealed token to its shop.
fn context(platform: Platform, shop: &str) -> String {
    format!("{platform}/{shop}")
}

impl TokenKeeper {
    pub(crate) fn new(cfg: Arc<Config>, store: Store) -> Result<TokenKeeper, TokenClientError> {
        let client = TokenClient::new(REFRESH_TIMEOUT)?;
        let policy = RenewalPolicy {
            check_every: Duration::from_millis(cfg.jobs.token_check_ms.max(1)),
        };
        Ok(TokenKeeper {
            cfg,
            store,
            client,
            policy,
            held: Mutex::new(HashMap::new()),
            failing: Mutex::new(Default::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(Platform, String), Held>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `shop` on `platform` has its tokens renewed here.
    pub(crate) fn renews(&self, platform: Platform, shop: &str) -> bool {
        self.cfg
            .renewable_shops()
            .iter()
            .any(|(p, s, _)| *p == platform && s == shop)
    }

    /// The cell of a renewable shop's session; it starts with the session the operator gave
    /// and follows the renewals. None when the shop's session variable is unset.
    pub(crate) fn cell(&self, platform: Platform, shop: &str) -> Option<SessionCell> {
        let key = (platform, shop.to_string());
        if let Some(h) = self.lock().get(&key) {
            return Some(h.cell.clone());
        }
        let given = self.cfg.shop_session(platform, shop).ok().flatten()?;
        let cell = SessionCell::new(given);
        self.lock().insert(
            key,
            Held {
                cell: cell.clone(),
                generation: None,
            },
        );
        Some(cell)
    }

    /// One look at every renewable shop.
    pub(crate) async fn look(&self) -> TokenLook {
        let mut out = TokenLook::default();
        for (platform, shop, refresh_var) in self.cfg.renewable_shops() {
            let result = self.look_at(platform, &shop, &refresh_var, &mut out).await;
            let mut failing = self.failing.lock().unwrap_or_else(|e| e.into_inner());
            match result {
                Err(e) => {
                    if failing.insert((platform, shop.clone())) {
                        tracing::warn!(%platform, shop, error = %e, "the shop's token could not be looked at (said once until it can)");
                    }
                }
                Ok(()) => {
                    failing.remove(&(platform, shop));
                }
            }
        }
        out
    }

    async fn look_at(
        &self,
        platform: Platform,
        shop: &str,
        refresh_var: &str,
        out: &mut TokenLook,
    ) -> Result<(), TokenError> {
        let pc = self
            .cfg
            .platform(platform)
            .ok_or(TokenError::Config("no [platforms] section"))?;
        let app_secret = pc
            .secret()
            .map_err(|_| TokenError::Config("app secret unset"))?;
        let ctx = context(platform, shop);
        let given_refresh = crate::config::read_secret_env(refresh_var)
            .map_err(|_| TokenError::Config("refresh token variable unset"))?;
        let mark = given_refresh.mark(&app_secret);
        let mut row = self.store.shop_token(platform, shop).await?;
        if row.as_ref().is_none_or(|r| r.source_mark != mark) {
            let Some(cell) = self.cell(platform, shop) else {
                return Err(TokenError::Config("session variable unset"));
            };
            let access = seal(&cell.get(), &app_secret, &ctx)?;
            let refresh = seal(&given_refresh, &app_secret, &ctx)?;
            self.store
                .seed_shop_token(platform, shop, &access, &refresh, &mark)
                .await?;
            row = self.store.shop_token(platform, shop).await?;
        }
        let Some(mut row) = row else {
            return Ok(());
        };
        // A refresh the platform refused is not sent again while the shop stays paused for it:
        // a new refresh token (the variable) or `shop resume` lets it try again.
        let refused_before =
            row.last_error.is_some() && self.store.shop_pause(platform, shop).await?.is_some();
        if !refused_before
            && self.policy.due(row.remaining_ms, row.lifetime_ms)
            && !row.renewing
            && self
                .store
                .claim_token_renewal(
                    platform,
                    shop,
                    row.generation,
                    CLAIM_HOLD.as_millis() as i64,
                )
                .await?
        {
            match self.renew(platform, shop, pc, &app_secret, &row).await {
                Ok(()) => out.renewed += 1,
                Err(e) => {
                    out.failed += 1;
                    let why = e.to_string();
                    self.store
                        .token_renewal_failed(platform, shop, row.generation, &why)
                        .await?;
                    if let TokenError::Renew(RenewError::Refused { .. }) = e {
                        // The shop's calls would all be refused: pause it with the reason
                        // (its session's keyed fingerprint, never the token).
                        let current = unseal(&row.sealed_access, &app_secret, &ctx)?;
                        let paused = self
                            .store
                            .pause_shop(platform, shop, &why, &current.mark(&app_secret))
                            .await?;
                        if paused {
                            tracing::warn!(%platform, shop, reason = %why, "shop paused: the platform refused its refresh token; give it a new one ({refresh_var}) and `syncfleet shop resume {shop}`");
                        }
                    } else {
                        tracing::warn!(%platform, shop, error = %why, "token renewal failed; the next look tries again");
                    }
                }
            }
            if let Some(r) = self.store.shop_token(platform, shop).await? {
                row = r;
            }
        }
        self.pick_up(platform, shop, &app_secret, &ctx, &row, out)
    }

    async fn renew(
        &self,
        platform: Platform,
        shop: &str,
        pc: &crate::config::PlatformConfig,
        app_secret: &Secret,
        row: &ShopToken,
    ) -> Result<(), TokenError> {
        let ctx = &context(platform, shop);
        let refresh = unseal(&row.sealed_refresh, app_secret, ctx)?;
        let endpoint = pc
            .token_endpoint
            .clone()
            .unwrap_or_else(|| oauth::default_endpoint(platform, &pc.app_key));
        let renewed = self
            .client
            .renew(platform, &endpoint, &pc.app_key, app_secret, &refresh)
            .await?;
        let access = seal(&renewed.access, app_secret, ctx)?;
        // 1688 gives no new refresh token: the old one stays valid.
        let refresh = seal(
            renewed.refresh.as_ref().unwrap_or(&refresh),
            app_secret,
            ctx,
        )?;
        let lifetime_ms = i64::try_from(renewed.lifetime.as_millis()).unwrap_or(i64::MAX / 4);
        self.store
            .store_renewed_token(
                platform,
                shop,
                row.generation,
                &access,
                &refresh,
                lifetime_ms,
            )
            .await?;
        tracing::info!(%platform, shop, lifetime_s = renewed.lifetime.as_secs(), "shop token renewed");
        Ok(())
    }

    /// Hold the row's token when it is newer than the one held.
    fn pick_up(
        &self,
        platform: Platform,
        shop: &str,
        app_secret: &Secret,
        ctx: &str,
        row: &ShopToken,
        out: &mut TokenLook,
    ) -> Result<(), TokenError> {
        let held = self
            .lock()
            .get(&(platform, shop.to_string()))
            .and_then(|h| h.generation);
        if held == Some(row.generation) {
            return Ok(());
        }
        let access = unseal(&row.sealed_access, app_secret, ctx)?;
        let cell = self
            .cell(platform, shop)
            .unwrap_or_else(|| SessionCell::new(access.clone()));
        cell.set(access);
        self.lock().insert(
            (platform, shop.to_string()),
            Held {
                cell,
                generation: Some(row.generation),
            },
        );
        if held.is_some() {
            out.picked_up += 1;
        }
        Ok(())
    }
}

/// Why a shop's token could not be looked at or renewed. Never carries a token.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TokenError {
    #[error("config: {0}")]
    Config(&'static str),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    Seal(#[from] crate::seal::SealError),
    #[error(transparent)]
    Renew(#[from] RenewError),
}

/// Look at the renewable shops' tokens every `[jobs] token_check_ms` until `stop`; the first
/// look at once, so a worker starts with the fleet's current tokens.
pub(crate) async fn run_token_loop(keeper: Arc<TokenKeeper>, stop: crate::shutdown::Shutdown) {
    let every = keeper.policy.check_every;
    loop {
        let look = keeper.look().await;
        if look != TokenLook::default() {
            tracing::debug!(?look, "shop tokens looked at");
        }
        tokio::select! {
            _ = stop.wait() => return,
            _ = tokio::time::sleep(every) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_renewed_with_a_fifth_of_their_life_left_or_two_looks() {
        let p = RenewalPolicy {
            check_every: Duration::from_secs(5),
        };
        // A seeded token (life unknown): at once.
        assert!(p.due(1_000_000, 0));
        // 10 h token: with 2 h left, not before.
        let life = 36_000_000;
        assert!(!p.due(life / 5 + 1, life));
        assert!(p.due(life / 5, life));
        assert!(p.due(-1, life));
        // A 20 s token looked at every 5 s: with 10 s left (two looks), not 4 s.
        assert!(!p.due(10_001, 20_000));
        assert!(p.due(10_000, 20_000));
    }

    #[test]
    fn a_cell_follows_its_renewals() {
        let c = SessionCell::new(Secret::new("a"));
        let seen_by_a_task = c.clone();
        c.set(Secret::new("b"));
        assert_eq!(seen_by_a_task.get().expose(), "b");
    }
}
