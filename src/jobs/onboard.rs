//! Onboarding a seller (docs/design.md, "Onboarding a seller"): the link to the platform's
//! authorisation page, the exchange of the code the seller's browser brings back for the
//! shop's tokens, and a shop added to the ledger's directory with its tokens sealed under the
//! token key. `syncfleet shop add` (tokens the operator already has) goes through the same
//! [`Onboarding::add`]. Workers serve a new shop from their next look at it, with no restart.

use super::oauth_state::{OAuthState, StateError};
use crate::config::{valid_shop_name, Config, MAX_WEIGHT};
use crate::platform::oauth::{self, RenewError, TokenClient, TokenClientError};
use crate::platform::Platform;
use crate::seal::{SealError, SealKeys};
use crate::secret::Secret;
use crate::store::{NewLedgerShop, Store, StoreError};
use std::sync::Arc;
use std::time::Duration;

/// The exchange's timeout.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(15);

/// Why a seller could not be onboarded or a shop added. Never carries a token or a code.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OnboardError {
    /// No token key: shops in the ledger need one to seal their tokens.
    #[error("no token key: set SYNCFLEET_TOKEN_KEY (64 hex digits, e.g. `openssl rand -hex 32`) or SYNCFLEET_TOKEN_KEY_FILE on every worker and here")]
    NoTokenKey,
    /// The platform has no `[platforms.<p>]` section, or its app secret is unset.
    #[error("[platforms.{platform}]: {why}")]
    Platform {
        /// The platform.
        platform: Platform,
        /// What is missing.
        why: String,
    },
    /// A shop name that cannot be a ledger label.
    #[error("shop name `{0}`: expected 1-64 letters, digits, `-`, `_` or `.`")]
    BadName(String),
    /// A weight out of range.
    #[error("weight {0}: expected 1 to {MAX_WEIGHT}")]
    BadWeight(u32),
    /// The config's `[shops]` names the shop: it is served from the config, not the ledger.
    #[error(
        "shop `{0}` is a [shops.{0}] of the config: remove it there first, or choose another name"
    )]
    ConfigShop(String),
    /// The callback's `state` was refused.
    #[error(transparent)]
    State(#[from] StateError),
    /// The platform refused the code or could not be reached.
    #[error("the code exchange: {0}")]
    Exchange(#[from] RenewError),
    /// Neither the link nor the platform's answer names the shop.
    #[error("the platform's answer names no seller: give the shop a name (--shop)")]
    NoName,
    /// A token could not be sealed.
    #[error(transparent)]
    Seal(#[from] SealError),
    /// The ledger failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The HTTP client could not be built.
    #[error(transparent)]
    Client(#[from] TokenClientError),
    /// The authorisation page's address is not a URL.
    #[error("[platforms.{0}] authorize_url is not a URL")]
    BadUrl(Platform),
}

impl OnboardError {
    /// Whether the operator's input (or config) is at fault: exit 2, not 1.
    pub(crate) fn is_input_error(&self) -> bool {
        !matches!(
            self,
            OnboardError::Store(_)
                | OnboardError::Client(_)
                | OnboardError::Exchange(RenewError::Transient(_))
        )
    }
}

/// A shop's tokens, as the operator or the platform gave them.
pub(crate) struct ShopTokens {
    /// The access token (TOP session).
    pub(crate) access: Secret,
    /// The refresh token, if any.
    pub(crate) refresh: Option<Secret>,
    /// How long the access token lives from now, if known.
    pub(crate) lifetime: Option<Duration>,
}

/// A shop onboarded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Onboarded {
    /// The platform.
    pub(crate) platform: Platform,
    /// The shop's name.
    pub(crate) shop: String,
    /// The seller as messages name it.
    pub(crate) seller: Option<String>,
    /// False: the shop was served already and was authorised anew.
    pub(crate) new: bool,
    /// Whether its token is renewed before it ends.
    pub(crate) renewable: bool,
}

/// Onboarding against one config and ledger.
pub(crate) struct Onboarding {
    cfg: Arc<Config>,
    store: Store,
    keys: Option<SealKeys>,
    client: TokenClient,
}

impl Onboarding {
    /// With the token key ring `keys` (`None`: links can be made, shops not added).
    pub(crate) fn new(
        cfg: Arc<Config>,
        store: Store,
        keys: Option<SealKeys>,
    ) -> Result<Onboarding, OnboardError> {
        Ok(Onboarding {
            cfg,
            store,
            keys,
            client: TokenClient::new(EXCHANGE_TIMEOUT)?,
        })
    }

    fn app(
        &self,
        platform: Platform,
    ) -> Result<(&crate::config::PlatformConfig, Secret), OnboardError> {
        let pc = self.cfg.platform(platform).ok_or(OnboardError::Platform {
            platform,
            why: "no such section".into(),
        })?;
        let secret = pc.secret().map_err(|e| OnboardError::Platform {
            platform,
            why: e.to_string(),
        })?;
        Ok((pc, secret))
    }

    /// Whether shops can be added (a token key is held).
    pub(crate) fn can_add(&self) -> bool {
        self.keys.is_some()
    }

    /// The callback registered for `platform`'s app (`[platforms.<p>] redirect_uri`).
    pub(crate) fn redirect_uri(&self, platform: Platform) -> Result<String, OnboardError> {
        let (pc, _) = self.app(platform)?;
        pc.redirect_uri.clone().ok_or(OnboardError::Platform {
            platform,
            why: "redirect_uri is not set (the callback registered for the app)".into(),
        })
    }

    fn check_name(&self, shop: &str) -> Result<(), OnboardError> {
        if !valid_shop_name(shop) {
            return Err(OnboardError::BadName(shop.to_string()));
        }
        if self.cfg.shops().any(|(name, _)| name == shop) {
            return Err(OnboardError::ConfigShop(shop.to_string()));
        }
        Ok(())
    }

    /// The address to send a seller to, made at `now_s`: the platform's authorisation page
    /// with a signed state naming `shop` (`None`: the seller's own name).
    pub(crate) fn link(
        &self,
        platform: Platform,
        shop: Option<&str>,
        now_s: i64,
    ) -> Result<String, OnboardError> {
        if let Some(shop) = shop {
            self.check_name(shop)?;
        }
        let (pc, secret) = self.app(platform)?;
        let redirect = self.redirect_uri(platform)?;
        let base = pc
            .authorize_url
            .as_deref()
            .unwrap_or(oauth::default_authorize_url(platform));
        let state = OAuthState::new(platform, shop, now_s).encode(&secret);
        oauth::authorize_url(platform, base, &pc.app_key, &redirect, &state)
            .map_err(|_| OnboardError::BadUrl(platform))
    }

    /// The seller's browser came back with `code` and `state`: check the state, exchange the
    /// code at the platform's token service and add the shop.
    pub(crate) async fn complete(
        &self,
        platform: Platform,
        code: &Secret,
        state: &str,
        weight: u32,
        now_s: i64,
    ) -> Result<Onboarded, OnboardError> {
        let (_, secret) = self.app(platform)?;
        let st = OAuthState::verify(state, &secret, platform, now_s)?;
        self.exchange(platform, code, st.shop.as_deref(), weight)
            .await
    }

    /// Exchange `code` (pasted by an operator, or from [`Onboarding::complete`]) and add the
    /// shop as `shop`, or as the seller's name.
    pub(crate) async fn exchange(
        &self,
        platform: Platform,
        code: &Secret,
        shop: Option<&str>,
        weight: u32,
    ) -> Result<Onboarded, OnboardError> {
        if let Some(shop) = shop {
            self.check_name(shop)?;
        }
        if self.keys.is_none() {
            return Err(OnboardError::NoTokenKey);
        }
        let (pc, secret) = self.app(platform)?;
        // TOP and 1688 check the exchange's callback against the one the code was issued
        // for: refused here, before the single-use code is spent on a sure refusal.
        let redirect = if oauth::exchange_names_callback(platform) {
            self.redirect_uri(platform)?
        } else {
            self.redirect_uri(platform).unwrap_or_default()
        };
        let token_endpoint = pc
            .token_endpoint
            .clone()
            .unwrap_or_else(|| oauth::default_endpoint(platform, &pc.app_key));
        let endpoint = oauth::code_endpoint(platform, &token_endpoint);
        let granted = self
            .client
            .exchange_code(platform, &endpoint, &pc.app_key, &secret, code, &redirect)
            .await?;
        let name = match shop {
            Some(s) => s.to_string(),
            None => granted
                .seller
                .clone()
                .filter(|s| valid_shop_name(s))
                .ok_or(OnboardError::NoName)?,
        };
        let added = self
            .add(
                platform,
                &name,
                weight,
                granted.seller.clone(),
                ShopTokens {
                    access: granted.tokens.access,
                    refresh: granted.tokens.refresh,
                    lifetime: Some(granted.tokens.lifetime),
                },
            )
            .await?;
        tracing::info!(%platform, shop = name, new = added.new, "seller onboarded through OAuth");
        Ok(added)
    }

    /// Add `shop` (or authorise it anew) with `tokens`, sealed under the token key.
    pub(crate) async fn add(
        &self,
        platform: Platform,
        shop: &str,
        weight: u32,
        seller: Option<String>,
        tokens: ShopTokens,
    ) -> Result<Onboarded, OnboardError> {
        self.check_name(shop)?;
        if !(1..=MAX_WEIGHT).contains(&weight) {
            return Err(OnboardError::BadWeight(weight));
        }
        let (_, secret) = self.app(platform)?;
        let keys = self
            .keys
            .as_ref()
            .ok_or(OnboardError::NoTokenKey)?
            .clone()
            .opening_app_secret(secret);
        let ctx = super::tokens::context(platform, shop);
        let sealed_access = keys.seal(&tokens.access, &ctx)?;
        let sealed_refresh = tokens
            .refresh
            .as_ref()
            .map(|r| keys.seal(r, &ctx))
            .transpose()?;
        let new = self
            .store
            .add_ledger_shop(&NewLedgerShop {
                platform,
                shop: shop.to_string(),
                weight,
                seller: seller.clone(),
                sealed_access,
                sealed_refresh,
                lifetime_ms: tokens
                    .lifetime
                    .map(|l| i64::try_from(l.as_millis()).unwrap_or(i64::MAX / 4)),
            })
            .await?;
        Ok(Onboarded {
            platform,
            shop: shop.to_string(),
            seller,
            new,
            renewable: tokens.refresh.is_some(),
        })
    }
}
