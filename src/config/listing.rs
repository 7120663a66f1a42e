//! `[listing]`: the listing map a listing job takes when `enqueue` names none, and what a
//! target shop's items say of it (where it ships from, how it sells) for shops whose
//! `[shops.<name>]` does not say it (docs/design.md, "The listing map").

use super::Config;
use crate::platform::ShopListing;
use serde::Deserialize;
use std::path::PathBuf;

/// TOP's `type`: a fixed price or an auction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ItemType {
    /// 一口价.
    #[default]
    Fixed,
    /// 拍卖.
    Auction,
}

/// TOP's `stuff_status`: the goods' condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum StuffStatus {
    /// 全新.
    #[default]
    New,
    /// 二手.
    Second,
    /// 闲置.
    Unused,
}

/// `[listing]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListingConfig {
    /// The listing map (relative to the config file) a listing job takes without `--map`.
    #[serde(default)]
    pub(crate) map: Option<PathBuf>,
    /// Province the shops ship from (TOP `location.state`, e.g. "浙江"), unless
    /// `[shops.<name>]` says.
    #[serde(default)]
    pub(crate) location_state: Option<String>,
    /// City they ship from (TOP `location.city`, e.g. "杭州").
    #[serde(default)]
    pub(crate) location_city: Option<String>,
    /// TOP `type` (default `fixed`).
    #[serde(default)]
    pub(crate) item_type: Option<ItemType>,
    /// TOP `stuff_status` (default `new`).
    #[serde(default)]
    pub(crate) stuff_status: Option<StuffStatus>,
}

/// A target shop without what its platform's write requires.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("shop `{shop}` has no {key}: set it in [shops.{shop}] or [listing] (the platform requires where the shop ships from)")]
pub struct MissingShopKey {
    /// The shop.
    pub shop: String,
    /// The key it lacks.
    pub key: &'static str,
}

impl Config {
    /// The listing map file `[listing] map` names, resolved next to the config file.
    pub(crate) fn listing_map_file(&self) -> Option<PathBuf> {
        let map = self.listing.map.as_ref()?;
        Some(match self.file.parent() {
            Some(dir) if map.is_relative() => dir.join(map),
            _ => map.clone(),
        })
    }

    /// What `shop`'s items say of it: its `[shops.<name>]` keys over `[listing]`'s. TOP
    /// requires the location; a shop without one is refused at enqueue.
    pub(crate) fn shop_listing(
        &self,
        shop: &str,
        location_required: bool,
    ) -> Result<ShopListing, MissingShopKey> {
        let own = self.shops.get(shop);
        let d = &self.listing;
        let out = ShopListing {
            location_state: own
                .and_then(|s| s.location_state.clone())
                .or_else(|| d.location_state.clone())
                .unwrap_or_default(),
            location_city: own
                .and_then(|s| s.location_city.clone())
                .or_else(|| d.location_city.clone())
                .unwrap_or_default(),
            item_type: match own
                .and_then(|s| s.item_type)
                .or(d.item_type)
                .unwrap_or_default()
            {
                ItemType::Fixed => "fixed",
                ItemType::Auction => "auction",
            }
            .into(),
            stuff_status: match own
                .and_then(|s| s.stuff_status)
                .or(d.stuff_status)
                .unwrap_or_default()
            {
                StuffStatus::New => "new",
                StuffStatus::Second => "second",
                StuffStatus::Unused => "unused",
            }
            .into(),
        };
        if location_required {
            for (key, value) in [
                ("location_state", &out.location_state),
                ("location_city", &out.location_city),
            ] {
                if value.trim().is_empty() {
                    return Err(MissingShopKey {
                        shop: shop.to_string(),
                        key,
                    });
                }
            }
        }
        Ok(out)
    }
}
