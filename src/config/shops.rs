//! The shops one app serves (`[shops.<name>]`): each seller who authorised the app has a
//! session of its own, named here by the environment variable that holds it, and a weight
//! (its share of the queue and of each gate among the shops with work waiting;
//! docs/design.md, "Shops").
//!
//! A job names its shop. A shop the config does not name is the platform's own one
//! (`[platforms.<p>].session_env`), so a single-shop setup needs no `[shops]` at all.

use super::platforms::{read_secret_env, MissingSecret};
use super::{Config, Secret};
use crate::platform::Platform;
use serde::Deserialize;

/// The weight of a shop the config does not name.
pub(crate) const DEFAULT_WEIGHT: u32 = 1;
/// The largest weight: shares are ratios, and a bound keeps one shop from shutting out the
/// others by a typo.
pub(crate) const MAX_WEIGHT: u32 = 1000;

/// One shop of the app: `[shops.<name>]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShopConfig {
    /// The platform the shop sells on.
    pub platform: Platform,
    /// Name of the environment variable holding this shop's session / access token.
    pub session_env: String,
    /// Name of the environment variable holding this shop's refresh token: with it, the
    /// shop's access token is renewed before it expires, once for the fleet, and every worker
    /// signs with the renewed one (docs/design.md, "Token lifetimes").
    #[serde(default)]
    pub refresh_env: Option<String>,
    /// Share among the shops with work waiting (1 to 1000).
    #[serde(default = "ShopConfig::default_weight")]
    pub weight: u32,
    /// The seller's account name as the platform's change messages carry it (TOP's
    /// `user_nick`, 1688's `userInfo`); default: the shop's name.
    #[serde(default)]
    pub seller: Option<String>,
    /// Province the shop ships from (TOP `location.state`), over `[listing]`'s.
    #[serde(default)]
    pub location_state: Option<String>,
    /// City it ships from (TOP `location.city`), over `[listing]`'s.
    #[serde(default)]
    pub location_city: Option<String>,
    /// TOP `type` of its listed items, over `[listing]`'s (default `fixed`).
    #[serde(default)]
    pub item_type: Option<super::listing::ItemType>,
    /// TOP `stuff_status` of its listed items, over `[listing]`'s (default `new`).
    #[serde(default)]
    pub stuff_status: Option<super::listing::StuffStatus>,
}

impl ShopConfig {
    fn default_weight() -> u32 {
        DEFAULT_WEIGHT
    }
}

/// A job names a shop that cannot be used as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShopError {
    /// `[shops.<name>]` sells on another platform than the job's.
    #[error("shop `{shop}` is a {configured} shop ([shops.{shop}] platform), not a {asked} one")]
    WrongPlatform {
        /// The shop.
        shop: String,
        /// Its platform in the config.
        configured: Platform,
        /// The platform the job calls for it.
        asked: Platform,
    },
    /// The shop's session variable is unset: names it, never a value.
    #[error("shop `{shop}`: {missing}")]
    MissingSession {
        /// The shop.
        shop: String,
        /// The variable.
        missing: MissingSecret,
    },
}

/// A shop name is a ledger label and part of queue keys: letters, digits, `-`, `_`, `.`.
pub(crate) fn valid_shop_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

impl Config {
    /// The session to sign `shop`'s calls on `platform` with: the shop's own when the config
    /// names it, `None` for a shop it does not name (the platform's own session is used).
    pub(crate) fn shop_session(
        &self,
        platform: Platform,
        shop: &str,
    ) -> Result<Option<Secret>, ShopError> {
        let Some(sc) = self.shops.get(shop) else {
            return Ok(None);
        };
        if sc.platform != platform {
            return Err(ShopError::WrongPlatform {
                shop: shop.to_string(),
                configured: sc.platform,
                asked: platform,
            });
        }
        read_secret_env(&sc.session_env)
            .map(Some)
            .map_err(|missing| ShopError::MissingSession {
                shop: shop.to_string(),
                missing,
            })
    }

    /// The shops whose tokens are renewed (those naming a `refresh_env`): (platform, shop,
    /// the variable of its refresh token).
    pub(crate) fn renewable_shops(&self) -> Vec<(Platform, String, String)> {
        self.shops
            .iter()
            .filter_map(|(name, s)| {
                s.refresh_env
                    .as_ref()
                    .map(|var| (s.platform, name.clone(), var.clone()))
            })
            .collect()
    }

    /// Check that `shop` may be used on `platform` (a named shop's platform matches),
    /// without reading its session.
    pub(crate) fn check_shop(&self, platform: Platform, shop: &str) -> Result<(), ShopError> {
        match self.shops.get(shop) {
            Some(sc) if sc.platform != platform => Err(ShopError::WrongPlatform {
                shop: shop.to_string(),
                configured: sc.platform,
                asked: platform,
            }),
            _ => Ok(()),
        }
    }

    /// The shops of `platform` by the seller name their change messages carry (`seller`, or
    /// the shop's name): how a message of the app's queue finds its shop.
    pub(crate) fn shops_by_seller(
        &self,
        platform: Platform,
    ) -> std::collections::BTreeMap<String, String> {
        self.shops
            .iter()
            .filter(|(_, s)| s.platform == platform)
            .map(|(name, s)| {
                (
                    s.seller.clone().unwrap_or_else(|| name.clone()),
                    name.clone(),
                )
            })
            .collect()
    }

    /// The configured shops, by name.
    pub fn shops(&self) -> impl Iterator<Item = (&str, &ShopConfig)> {
        self.shops.iter().map(|(n, s)| (n.as_str(), s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const TEXT: &str = "[shops.acme]\nplatform = \"taobao\"\nsession_env = \"SF_SHOPS_UNIT_ACME\"\nweight = 3\nseller = \"acme-flagship\"\n\
                        [shops.beta]\nplatform = \"jd\"\nsession_env = \"SF_SHOPS_UNIT_NEVER_SET\"\n";

    #[test]
    fn a_named_shop_has_its_weight_and_platform_and_others_fall_back() {
        let cfg = Config::parse(Path::new("c.toml"), TEXT).unwrap();
        let weights: Vec<(&str, u32)> = cfg.shops().map(|(n, s)| (n, s.weight)).collect();
        assert_eq!(weights, vec![("acme", 3), ("beta", DEFAULT_WEIGHT)]);
        assert!(cfg.check_shop(Platform::Taobao, "acme").is_ok());
        assert!(cfg.check_shop(Platform::Jd, "unnamed").is_ok());
        let err = cfg.check_shop(Platform::Jd, "acme").unwrap_err();
        assert!(matches!(err, ShopError::WrongPlatform { .. }), "{err}");
        assert!(matches!(
            cfg.shop_session(Platform::Jd, "unnamed"),
            Ok(None)
        ));
        let err = cfg.shop_session(Platform::Jd, "beta").unwrap_err();
        assert!(err.to_string().contains("SF_SHOPS_UNIT_NEVER_SET"), "{err}");
        let taobao = cfg.shops_by_seller(Platform::Taobao);
        assert_eq!(
            taobao.get("acme-flagship").map(String::as_str),
            Some("acme")
        );
        assert_eq!(taobao.len(), 1);
        let jd = cfg.shops_by_seller(Platform::Jd);
        assert_eq!(jd.get("beta").map(String::as_str), Some("beta"));
    }

    #[test]
    fn bad_names_weights_and_platforms_name_the_key() {
        for (text, key) in [
            (
                "[shops.\"a b\"]\nplatform = \"jd\"\nsession_env = \"X\"\n",
                "shops.\"a b\"",
            ),
            (
                "[shops.a]\nplatform = \"jd\"\nsession_env = \"X\"\nweight = 0\n",
                "shops.a.weight",
            ),
            (
                "[shops.a]\nplatform = \"jd\"\nsession_env = \"\"\n",
                "shops.a.session_env",
            ),
        ] {
            let err = Config::parse(Path::new("c.toml"), text).unwrap_err();
            assert!(err.0.iter().any(|p| p.key == key), "{text}: {err}");
        }
        let err = Config::parse(
            Path::new("c.toml"),
            "[shops.a]\nplatform = \"ebay\"\nsession_env = \"X\"\n",
        )
        .unwrap_err();
        assert!(err.0[0].line == Some(2), "{err}");
    }
}
