//! A worker's view of the shops it calls for: each shop's session (read once from the
//! environment variable its `[shops.<name>]` names, or from the ledger's shop directory,
//! sealed) and whether the shop is paused because the platform refused that session or
//! removed from the directory (docs/design.md, "Shops", "Shops in the ledger").
//!
//! A refused session concerns one shop, not the app: the shop is paused in the ledger, its
//! tasks go back uncharged, and the other shops go on. It runs again after `syncfleet shop
//! resume`, or as soon as a worker holding a different session for it (a changed secret)
//! looks: the pause keeps a keyed fingerprint of the refused session, never the session.

use super::control::CONTROL_FRESH;
use super::tokens::{SessionCell, TokenKeeper};
use crate::clock::{elapsed_since, monotonic_now};
use crate::config::{Config, ShopError};
use crate::platform::Platform;
use crate::store::{Store, StoreError};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// What this process knows of one shop.
#[derive(Clone)]
struct Known {
    /// The session its calls carry (`None`: the platform's own); a renewable shop's follows
    /// its renewals.
    session: Option<SessionCell>,
    /// When the ledger's pause was last read, and whether the shop was paused then.
    seen: Option<(Instant, bool)>,
    /// A shop of the ledger's directory (not of the config): its removal is looked for with
    /// its pause.
    in_ledger: bool,
}

/// Sessions and pauses of the shops, per process.
pub(crate) struct ShopAccess {
    cfg: Arc<Config>,
    store: Store,
    known: Mutex<HashMap<(Platform, String), Known>>,
    /// The renewable shops' sessions (docs/design.md, "Token lifetimes").
    tokens: Option<Arc<TokenKeeper>>,
}

impl ShopAccess {
    pub(crate) fn new(
        cfg: Arc<Config>,
        store: Store,
        tokens: Option<Arc<TokenKeeper>>,
    ) -> ShopAccess {
        ShopAccess {
            cfg,
            store,
            known: Mutex::new(HashMap::new()),
            tokens,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(Platform, String), Known>> {
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn known(&self, platform: Platform, shop: &str) -> Result<Known, ShopCheck> {
        if let Some(k) = self.lock().get(&(platform, shop.to_string())) {
            return Ok(k.clone());
        }
        let given = self.cfg.shop_session(platform, shop)?;
        let named = self.cfg.shops().any(|(name, _)| name == shop);
        let mut in_ledger = false;
        let session = if named {
            let renewed = self
                .tokens
                .as_ref()
                .filter(|t| t.renews(platform, shop))
                .and_then(|t| t.cell(platform, shop));
            renewed.or_else(|| given.map(SessionCell::new))
        } else {
            match self.store.ledger_shop(platform, shop).await? {
                // A shop of the directory: its sealed session (a removed one has none, and
                // is held out by `paused`).
                Some(entry) => {
                    in_ledger = true;
                    if entry.removed_at.is_some() {
                        None
                    } else {
                        let tokens = self.tokens.as_ref().ok_or(ShopCheck::NoTokenKey)?;
                        tokens.ledger_cell(platform, shop).await?
                    }
                }
                // Neither the config's nor the directory's: the platform's own session.
                None => None,
            }
        };
        let k = Known {
            session,
            seen: None,
            in_ledger,
        };
        self.lock().insert((platform, shop.to_string()), k.clone());
        Ok(k)
    }

    /// The session to sign `shop`'s calls on `platform` with (`None`: the platform's own).
    pub(crate) async fn session(
        &self,
        platform: Platform,
        shop: &str,
    ) -> Result<Option<SessionCell>, ShopCheck> {
        Ok(self.known(platform, shop).await?.session)
    }

    /// Keyed fingerprint of the session this worker holds for the shop now.
    fn mark(&self, platform: Platform, known: &Known) -> String {
        let pc = self.cfg.platform(platform);
        let held = known
            .session
            .as_ref()
            .map(SessionCell::get)
            .or_else(|| pc.and_then(|pc| pc.session().ok().flatten()));
        let key = pc.and_then(|pc| pc.secret().ok()).unwrap_or_default();
        held.map_or_else(|| "none".to_string(), |s| s.mark(&key))
    }

    /// Whether `shop` is paused (or removed from the directory), as the ledger said at most
    /// [`CONTROL_FRESH`] ago. A pause of a session other than the one this worker holds is
    /// lifted here: the secret was changed, so the shop may run again.
    pub(crate) async fn paused(&self, platform: Platform, shop: &str) -> Result<bool, ShopCheck> {
        self.held(platform, shop, false).await
    }

    /// [`ShopAccess::paused`] before a task starts: a directory shop's removal is read now,
    /// not from the cache, so no task starts for a shop removed before it (one indexed read
    /// a task; running tasks see it within [`CONTROL_FRESH`]).
    pub(crate) async fn held_at_start(
        &self,
        platform: Platform,
        shop: &str,
    ) -> Result<bool, ShopCheck> {
        self.held(platform, shop, true).await
    }

    async fn held(&self, platform: Platform, shop: &str, now: bool) -> Result<bool, ShopCheck> {
        let known = self.known(platform, shop).await?;
        if let Some((at, paused)) = known.seen {
            if elapsed_since(at) < CONTROL_FRESH && !(now && known.in_ledger) {
                return Ok(paused);
            }
        }
        if known.in_ledger {
            // Removed from the directory, or authorised anew (new tokens): looked at as often
            // as a pause, so the fleet follows within a heartbeat.
            let entry = self.store.ledger_shop(platform, shop).await?;
            if entry.is_none_or(|e| e.removed_at.is_some()) {
                // Held out; its session forgotten, so a shop added again is read anew.
                if let Some(t) = &self.tokens {
                    t.forget(platform, shop);
                }
                let first = known.session.is_some() || known.seen.is_none_or(|(_, p)| !p);
                if first {
                    tracing::warn!(%platform, shop, "the shop was removed from the ledger's directory: its tasks are held and its calls stopped (`syncfleet shop add` serves it again; `job cancel` ends its jobs)");
                }
                self.lock().insert(
                    (platform, shop.to_string()),
                    Known {
                        session: None,
                        seen: Some((monotonic_now(), true)),
                        in_ledger: true,
                    },
                );
                return Ok(true);
            }
            if known.session.is_none() {
                // Removed when first seen and added again since: read its session anew.
                self.lock().remove(&(platform, shop.to_string()));
                return Box::pin(self.held(platform, shop, now)).await;
            }
        }
        let mut paused = false;
        if let Some(pause) = self.store.shop_pause(platform, shop).await? {
            if pause.session_mark == self.mark(platform, &known) {
                paused = true;
            } else {
                let lifted = self
                    .store
                    .resume_shop(Some(platform), shop, Some(&pause.session_mark))
                    .await?;
                if lifted > 0 {
                    tracing::info!(
                        %platform,
                        shop,
                        "shop resumed: this worker holds another session than the refused one"
                    );
                }
            }
        }
        self.note(platform, shop, paused);
        Ok(paused)
    }

    /// The platform refused `shop`'s session: pause the shop in the ledger (the first
    /// refusal's reason stays) and here at once.
    pub(crate) async fn pause(
        &self,
        platform: Platform,
        shop: &str,
        reason: &str,
    ) -> Result<(), ShopCheck> {
        let known = self.known(platform, shop).await?;
        if self
            .store
            .pause_shop(platform, shop, reason, &self.mark(platform, &known))
            .await?
        {
            tracing::warn!(
                %platform,
                shop,
                reason,
                "shop paused: the platform refused its session; its items wait until \
                 `syncfleet shop resume {shop}` or a worker with a new session"
            );
        }
        self.note(platform, shop, true);
        Ok(())
    }

    fn note(&self, platform: Platform, shop: &str, paused: bool) {
        if let Some(k) = self.lock().get_mut(&(platform, shop.to_string())) {
            k.seen = Some((monotonic_now(), paused));
        }
    }
}

/// Why a shop's state could not be read or changed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ShopCheck {
    /// The job's shop cannot be used (another platform's shop, its session unset).
    #[error(transparent)]
    Shop(#[from] ShopError),
    /// The ledger failed.
    #[error(transparent)]
    Ledger(#[from] StoreError),
    /// The shop is in the ledger's directory and this worker has no token key to open its
    /// session with.
    #[error("shop in the ledger, and no token key here (SYNCFLEET_TOKEN_KEY or SYNCFLEET_TOKEN_KEY_FILE)")]
    NoTokenKey,
    /// Its sealed session could not be read or opened.
    #[error(transparent)]
    Token(#[from] super::tokens::TokenError),
}
