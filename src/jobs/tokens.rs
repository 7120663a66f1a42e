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
use crate::seal::{SealKeys, TokenKeyError};
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
    /// The token key ring (`SYNCFLEET_TOKEN_KEY`); `None`: each platform's app secret seals,
    /// and shops in the ledger cannot be served (docs/design.md, "Tokens at rest").
    ring: Option<SealKeys>,
}

/// The ledger row's context: binds a sealed token to its shop.
pub(crate) fn context(platform: Platform, shop: &str) -> String {
    format!("{platform}/{shop}")
}

impl TokenKeeper {
    pub(crate) fn new(
        cfg: Arc<Config>,
        store: Store,
        ring: Option<SealKeys>,
    ) -> Result<TokenKeeper, TokenClientError> {
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
            ring,
        })
    }

    /// The keys `platform`'s tokens are sealed and opened with: the token key ring (opening
    /// what the app secret sealed before it was set), else the app secret.
    pub(crate) fn keys(&self, platform: Platform) -> Result<SealKeys, TokenError> {
        let app_secret = self.cfg.platform(platform).and_then(|pc| pc.secret().ok());
        match (&self.ring, app_secret) {
            (Some(ring), Some(app)) => Ok(ring.clone().opening_app_secret(app)),
            // A worker without this platform's secret still opens the ring's values.
            (Some(ring), None) => Ok(ring.clone()),
            (None, Some(app)) => Ok(SealKeys::from_app_secret(app)),
            (None, None) => Err(TokenError::Config("app secret unset")),
        }
    }

    /// The session of a shop in the ledger (`shop add`, OAuth), held from now on and following
    /// its renewals. None when it has no token row (removed meanwhile).
    pub(crate) async fn ledger_cell(
        &self,
        platform: Platform,
        shop: &str,
    ) -> Result<Option<SessionCell>, TokenError> {
        let key = (platform, shop.to_string());
        if let Some(cell) = self
            .lock()
            .get(&key)
            .filter(|h| h.generation.is_some())
            .map(|h| h.cell.clone())
        {
            return Ok(Some(cell));
        }
        if self.ring.is_none() {
            return Err(TokenError::NoTokenKey);
        }
        let Some(row) = self.store.shop_token(platform, shop).await? else {
            return Ok(None);
        };
        let access = self
            .keys(platform)?
            .unseal(&row.sealed_access, &context(platform, shop))?;
        let cell = SessionCell::new(access);
        self.lock().insert(
            key,
            Held {
                cell: cell.clone(),
                generation: Some(row.generation),
            },
        );
        Ok(Some(cell))
    }

    /// Forget a removed shop's session.
    pub(crate) fn forget(&self, platform: Platform, shop: &str) {
        self.lock().remove(&(platform, shop.to_string()));
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
        let mut shops: Vec<(Platform, String, Option<String>, Option<ShopToken>)> = self
            .cfg
            .renewable_shops()
            .into_iter()
            .map(|(p, s, var)| (p, s, Some(var), None))
            .collect();
        if self.ring.is_some() {
            // The directory's shops and their rows in one read.
            match self.store.ledger_shop_tokens().await {
                Ok(rows) => {
                    shops.extend(rows.into_iter().map(|(p, s, row)| (p, s, None, Some(row))))
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the ledger's shops could not be read; their tokens wait for the next look");
                }
            }
        }
        for (platform, shop, refresh_var, row) in shops {
            let result = self
                .look_at(platform, &shop, refresh_var.as_deref(), row, &mut out)
                .await;
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
        refresh_var: Option<&str>,
        read: Option<ShopToken>,
        out: &mut TokenLook,
    ) -> Result<(), TokenError> {
        let Some(pc) = self.cfg.platform(platform) else {
            // A platform this worker's config does not know: its shops are another worker's.
            if refresh_var.is_none() {
                return Ok(());
            }
            return Err(TokenError::Config("no [platforms] section"));
        };
        let Ok(app_secret) = pc.secret() else {
            // A worker that does not call this platform (its secret unset here) neither renews
            // nor holds its shops' tokens: a worker that does, does.
            if refresh_var.is_none() {
                return Ok(());
            }
            return Err(TokenError::Config("app secret unset"));
        };
        let keys = self.keys(platform)?;
        let ctx = context(platform, shop);
        let mut row = match read {
            Some(r) => Some(r),
            None => self.store.shop_token(platform, shop).await?,
        };
        if let Some(refresh_var) = refresh_var {
            // A shop of the config: its row is seeded from its variables.
            let given_refresh = crate::config::read_secret_env(refresh_var)
                .map_err(|_| TokenError::Config("refresh token variable unset"))?;
            let mark = given_refresh.mark(&app_secret);
            if row.as_ref().is_none_or(|r| r.source_mark != mark) {
                let Some(cell) = self.cell(platform, shop) else {
                    return Err(TokenError::Config("session variable unset"));
                };
                let access = keys.seal(&cell.get(), &ctx)?;
                let refresh = keys.seal(&given_refresh, &ctx)?;
                self.store
                    .seed_shop_token(platform, shop, &access, &refresh, &mark)
                    .await?;
                row = self.store.shop_token(platform, shop).await?;
            }
        }
        let Some(mut row) = row else {
            return Ok(());
        };
        let renewable = !row.sealed_refresh.is_empty();
        // A refresh the platform refused is not sent again while the shop stays paused for it:
        // a new refresh token (the variable) or `shop resume` lets it try again.
        let refused_before =
            row.last_error.is_some() && self.store.shop_pause(platform, shop).await?.is_some();
        if !refused_before
            && renewable
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
            match self
                .renew(platform, shop, pc, &app_secret, &keys, &row)
                .await
            {
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
                        let current = keys.unseal(&row.sealed_access, &ctx)?;
                        let paused = self
                            .store
                            .pause_shop(platform, shop, &why, &current.mark(&app_secret))
                            .await?;
                        if paused {
                            let how = match refresh_var {
                                Some(var) => format!("give it a new one ({var}) and `syncfleet shop resume {shop}`"),
                                None => "its seller authorises the app again (docs/design.md, \"Onboarding a seller\")".to_string(),
                            };
                            tracing::warn!(%platform, shop, reason = %why, "shop paused: the platform refused its refresh token; {how}");
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
        self.pick_up(platform, shop, &keys, &ctx, &row, out)
    }

    async fn renew(
        &self,
        platform: Platform,
        shop: &str,
        pc: &crate::config::PlatformConfig,
        app_secret: &Secret,
        keys: &SealKeys,
        row: &ShopToken,
    ) -> Result<(), TokenError> {
        let ctx = &context(platform, shop);
        let refresh = keys.unseal(&row.sealed_refresh, ctx)?;
        let endpoint = pc
            .token_endpoint
            .clone()
            .unwrap_or_else(|| oauth::default_endpoint(platform, &pc.app_key));
        let renewed = self
            .client
            .renew(platform, &endpoint, &pc.app_key, app_secret, &refresh)
            .await?;
        let access = keys.seal(&renewed.access, ctx)?;
        // 1688 gives no new refresh token: the old one stays valid.
        let refresh = keys.seal(renewed.refresh.as_ref().unwrap_or(&refresh), ctx)?;
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
        keys: &SealKeys,
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
        let access = keys.unseal(&row.sealed_access, ctx)?;
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
    /// A shop of the ledger, and no token key to open its tokens with.
    #[error("the shop's tokens are in the ledger, and this process has no token key (SYNCFLEET_TOKEN_KEY or SYNCFLEET_TOKEN_KEY_FILE)")]
    NoTokenKey,
    /// The token key could not be read.
    #[error(transparent)]
    Key(#[from] TokenKeyError),
}

/// What a rekey did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct RekeyReport {
    /// Shops whose tokens were sealed anew under the ring's first key.
    pub(crate) resealed: usize,
    /// Shops whose tokens were under it already.
    pub(crate) current: usize,
    /// Shops (`platform/shop`) whose tokens no key of the ring opens.
    pub(crate) unopened: Vec<String>,
}

/// Seal every token row under `ring`'s first key (docs/design.md, "Tokens at rest"). Each row
/// is replaced only if unchanged since it was read (a renewal meanwhile seals under the key
/// its worker holds; the next pass takes it). The tokens do not change, so workers holding
/// them go on; a worker picks up the new sealing only at the next renewal.
pub(crate) async fn rekey(
    cfg: &Config,
    store: &Store,
    ring: &SealKeys,
) -> Result<RekeyReport, crate::store::StoreError> {
    let mut report = RekeyReport::default();
    for pass in 0..3 {
        let mut raced = 0;
        for (platform, shop, access, refresh) in store.sealed_tokens().await? {
            let keys = match cfg.platform(platform).and_then(|pc| pc.secret().ok()) {
                Some(app) => ring.clone().opening_app_secret(app),
                None => ring.clone(),
            };
            let refresh_current = refresh.is_empty() || keys.is_current(&refresh);
            if keys.is_current(&access) && refresh_current {
                if pass == 0 {
                    report.current += 1;
                }
                continue;
            }
            let ctx = context(platform, &shop);
            let opened = keys.unseal(&access, &ctx).and_then(|a| {
                let r = if refresh.is_empty() {
                    None
                } else {
                    Some(keys.unseal(&refresh, &ctx)?)
                };
                Ok((a, r))
            });
            let Ok((a, r)) = opened else {
                if pass == 0 {
                    report.unopened.push(format!("{platform}/{shop}"));
                }
                continue;
            };
            let sealed = keys.seal(&a, &ctx).and_then(|na| {
                let nr = match &r {
                    Some(r) => keys.seal(r, &ctx)?,
                    None => String::new(),
                };
                Ok((na, nr))
            });
            let Ok((na, nr)) = sealed else {
                raced += 1;
                continue;
            };
            if store
                .reseal_tokens(platform, &shop, (&access, &refresh), (&na, &nr))
                .await?
            {
                report.resealed += 1;
            } else {
                raced += 1;
            }
        }
        if raced == 0 {
            break;
        }
    }
    Ok(report)
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
