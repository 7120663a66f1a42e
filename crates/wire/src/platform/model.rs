//! Typed requests and responses, the same on every platform. All are Serialize +
//! Deserialize + Clone: the link layer caches responses as JSON for stale reads.

use super::Api;
use crate::time::china_offset;
use chrono::{DateTime, NaiveDateTime, TimeZone, Utc};
use serde::{Deserialize, Serialize};

/// What business code asks of a platform.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "api", rename_all = "snake_case")]
pub enum ApiRequest {
    /// Read one item.
    ItemGet {
        /// The platform's item id.
        item_id: String,
    },
    /// Create one item, carrying the seller's own code (no platform deduplicates a write:
    /// the code is how a write whose answer was lost is found again, [`ApiRequest::ItemFind`]).
    ItemAdd {
        /// The item as the target takes it, mapped from the source (jobs/listing/mapping.rs).
        item: Box<NewItem>,
    },
    /// The shop's items carrying this seller's code (TOP `outer_id`, JD `itemNum`).
    ItemFind {
        /// The seller's code the write carried.
        seller_code: String,
    },
    /// One page (from 1) of orders modified in `[start, end)`.
    OrderList {
        /// Start of the modification window (inclusive).
        start: DateTime<Utc>,
        /// End of the modification window (exclusive).
        end: DateTime<Utc>,
        /// Page number, from 1.
        page: u32,
        /// Orders per page.
        page_size: u32,
    },
    /// The logistics trace of one order.
    LogisticsTrace {
        /// The platform's order id.
        order_id: String,
        /// The parcel's id as the order list gave it ([`Order::tracking`]): JD's trace takes
        /// the carrier's waybill number and 1688's the `logisticsId`; TOP's takes the order id.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tracking: Option<String>,
    },
    /// The parcels of one order (1688: their `logisticsId` and state).
    LogisticsInfo {
        /// The platform's order id.
        order_id: String,
    },
    /// Pull up to `quantity` change messages.
    MessageConsume {
        /// Messages at most (TOP: 10..=200).
        quantity: u32,
    },
    /// Acknowledge these messages.
    MessageConfirm {
        /// The messages' ids.
        ids: Vec<u64>,
    },
}

impl ApiRequest {
    /// The API this request calls.
    pub fn api(&self) -> Api {
        match self {
            ApiRequest::ItemGet { .. } => Api::ItemGet,
            ApiRequest::ItemAdd { .. } => Api::ItemAdd,
            ApiRequest::ItemFind { .. } => Api::ItemFind,
            ApiRequest::OrderList { .. } => Api::OrderList,
            ApiRequest::LogisticsTrace { .. } => Api::LogisticsTrace,
            ApiRequest::LogisticsInfo { .. } => Api::LogisticsInfo,
            ApiRequest::MessageConsume { .. } => Api::MessageConsume,
            ApiRequest::MessageConfirm { .. } => Api::MessageConfirm,
        }
    }
}

/// What a platform answered, parsed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ApiResponse {
    /// Answer to [`ApiRequest::ItemGet`].
    Item(Item),
    /// Answer to [`ApiRequest::ItemAdd`].
    ItemAdded {
        /// The id the platform gave the new item.
        item_id: String,
    },
    /// Answer to [`ApiRequest::ItemFind`]: the ids of the items carrying the code (none when
    /// no write made one).
    Found {
        /// The items' ids.
        item_ids: Vec<String>,
    },
    /// Answer to [`ApiRequest::OrderList`].
    OrderPage(OrderPage),
    /// Answer to [`ApiRequest::LogisticsTrace`].
    Trace(Trace),
    /// Answer to [`ApiRequest::LogisticsInfo`]: the order's parcels (none before it ships).
    Parcels {
        /// The parcels, first shipped first.
        parcels: Vec<Parcel>,
    },
    /// Answer to [`ApiRequest::MessageConsume`].
    Messages {
        /// The messages read.
        messages: Vec<Message>,
        /// Messages that could not be read (quarantined and acknowledged when their id was
        /// read: one bad message must not hold back, or be paid for with, its batch).
        unreadable: Vec<Unreadable>,
    },
    /// Answer to [`ApiRequest::MessageConfirm`].
    Confirmed,
}

/// One change message (docs/design.md, "Continuous sync").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// The platform's message id: a message delivered twice has the same id.
    pub id: u64,
    /// Its topic (`taobao_trade_TradeBuyerPay`, ...).
    pub topic: String,
    /// When the change happened (TOP's `pub_time`).
    pub born: DateTime<Utc>,
    /// The seller the change concerns (TOP's `user_nick`).
    pub seller: String,
    /// The order's new state, when the message carries it (a trade message names the order,
    /// its status and payment).
    pub order: Option<MessageOrder>,
}

/// An order's state as a change message carries it. Unlike an order list's [`Order`], its
/// own `modified` is known only when the message says it: the message's publication time is
/// when the state was true, not the order's time (docs/design.md, "Change messages").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageOrder {
    /// The platform's order id.
    pub order_id: String,
    /// The platform's own status text.
    pub status: String,
    /// The order's own `modified`, when the message carries it.
    pub modified: Option<DateTime<Utc>>,
    /// Decimal string as the platform gives it.
    pub amount: String,
}

/// One item (product) as read from a platform: what a listing maps from. The fields after
/// `quantity` are empty where the source API does not give them (and in reads kept by an
/// older version).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Item {
    /// The platform's item id.
    pub id: String,
    /// The item's title.
    pub title: String,
    /// Decimal string as the platform gives it (no float rounding); with SKUs, the lowest
    /// SKU price.
    pub price: String,
    /// Stock quantity (with SKUs, their sum).
    pub quantity: u32,
    /// The platform's category id.
    #[serde(default)]
    pub category: String,
    /// Item attributes (not SKU specs): material, origin...
    #[serde(default)]
    pub attributes: Vec<Attribute>,
    /// The variants on sale, each with its own specs, price and stock.
    #[serde(default)]
    pub skus: Vec<Sku>,
    /// Image URLs, main image first (absolute).
    #[serde(default)]
    pub images: Vec<String>,
    /// The description (HTML as the platform gives it).
    #[serde(default)]
    pub description: String,
}

/// One named attribute value (`颜色` = `黑色`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attribute {
    /// The attribute's name as the platform shows it.
    pub name: String,
    /// Its value as the platform shows it.
    pub value: String,
}

/// One variant of an item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sku {
    /// The platform's SKU id.
    pub id: String,
    /// Its spec values (colour, size...).
    pub specs: Vec<Attribute>,
    /// Decimal string (for a 1688 distributor: the consign price it pays).
    pub price: String,
    /// Stock.
    pub quantity: u32,
}

/// An item as a target platform takes it: every field the platform requires, mapped from a
/// source [`Item`] by the listing map (docs/design.md, "The listing map").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewItem {
    /// The seller's own code: the listing's identity (TOP `outer_id`, JD `outerId` and
    /// `itemNum`), by which a write whose answer was lost is found.
    pub seller_code: String,
    /// The target category id (TOP `cid`, JD `categoryId`).
    pub category: String,
    /// The title, within the target's limit.
    pub title: String,
    /// The description (TOP `desc`, JD `introduction`).
    pub description: String,
    /// The item price (decimal string): the lowest SKU price when it has SKUs.
    pub price: String,
    /// The item stock: the sum of the SKUs' when it has SKUs.
    pub quantity: u32,
    /// Mapped attribute values: (property id, value id).
    pub props: Vec<(String, String)>,
    /// Attributes sent as text: (property id, text) (TOP `input_pids` / `input_str`).
    pub input_props: Vec<(String, String)>,
    /// The variants.
    pub skus: Vec<NewSku>,
    /// Where the shop ships from, and how it sells (TOP requires them).
    pub shop: ShopListing,
}

/// One variant as the target takes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewSku {
    /// Its sale property values: (property id, value id).
    pub props: Vec<(String, String)>,
    /// Decimal string.
    pub price: String,
    /// Stock.
    pub quantity: u32,
    /// The seller's code of the variant.
    pub seller_code: String,
}

/// What a target shop's items say of the shop (`[shops.<name>]`, `[listing]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ShopListing {
    /// Province the shop ships from (TOP `location.state`).
    pub location_state: String,
    /// City (TOP `location.city`).
    pub location_city: String,
    /// TOP `type`: `fixed` (a fixed price) or `auction`.
    pub item_type: String,
    /// TOP `stuff_status`: `new`, `second` or `unused`.
    pub stuff_status: String,
}

/// An entry of an answer that could not be read (an order without a readable time, a
/// message without a readable id or time): the job quarantines it and goes on with the rest
/// (docs/design.md, "Quarantine").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unreadable {
    /// Its id, when that much could be read.
    pub id: Option<String>,
    /// What could not be read.
    pub reason: String,
    /// The entry as the platform sent it (JSON text).
    pub raw: String,
}

impl Unreadable {
    /// Its id, or `?` and a hash of its text when none could be read (two such entries
    /// stay apart).
    pub fn record_id(&self) -> String {
        use std::hash::{Hash, Hasher};
        self.id.clone().unwrap_or_else(|| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            self.raw.hash(&mut h);
            format!("?{:016x}", h.finish())
        })
    }

    /// `entry` of an answer, whose `field` could not be read; its id from `id_field`.
    pub fn entry(entry: &serde_json::Value, id_field: &str, field: &str) -> Unreadable {
        let id = match entry.get(id_field) {
            Some(serde_json::Value::String(s)) => Some(s.clone()),
            Some(serde_json::Value::Number(n)) => Some(n.to_string()),
            _ => None,
        };
        Unreadable {
            id,
            reason: format!("`{field}` missing or unreadable"),
            raw: entry.to_string(),
        }
    }
}

/// One page of an order list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderPage {
    /// The orders on this page.
    pub orders: Vec<Order>,
    /// Entries of the page that could not be read (quarantined; the walk goes on).
    #[serde(default)]
    pub unreadable: Vec<Unreadable>,
    /// Whether a later page holds more orders.
    pub has_next: bool,
    /// Total matching orders, when the platform says.
    pub total: Option<u64>,
}

/// One order as a platform's order list gives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Order {
    /// The platform's order id.
    pub order_id: String,
    /// The platform's own status text.
    pub status: String,
    /// When the platform last modified the order.
    pub modified: DateTime<Utc>,
    /// Decimal string as the platform gives it.
    pub amount: String,
    /// The id the platform's logistics trace is asked by, when the order list gives one:
    /// JD's `waybill` (the carrier's waybill number), 1688's
    /// `nativeLogistics.logisticsItems[].logisticsCode` (its `logisticsId`). None on TOP,
    /// whose trace takes the order id (docs/wire-formats.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracking: Option<String>,
}

/// The logistics trace of one order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trace {
    /// The platform's order id.
    pub order_id: String,
    /// The trace's steps, in the order the platform lists them (latest last).
    pub events: Vec<TraceEvent>,
    /// The parcel was signed for: no later query can add anything.
    pub signed: bool,
}

/// One parcel of an order, as 1688's logistics info gives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Parcel {
    /// The id its trace is asked by (1688's `logisticsId`).
    pub tracking: String,
    /// The platform's state of the parcel (1688: `SIGN` once signed for).
    pub status: String,
    /// The state says the parcel was signed for.
    pub signed: bool,
}

/// One step of a logistics trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceEvent {
    /// The event time exactly as the platform gives it (GMT+8, usually
    /// `yyyy-MM-dd HH:mm:ss`); kept verbatim so dedupe keys are stable.
    pub time: String,
    /// The step's status as the platform gives it (e.g. TOP's `SIGNED`).
    pub status: String,
    /// The step's text as the platform gives it (the carrier's remark on 1688).
    pub description: String,
}

impl TraceEvent {
    /// The event time as UTC, when it is in the usual `yyyy-MM-dd HH:mm:ss` GMT+8 form.
    pub fn time_utc(&self) -> Option<DateTime<Utc>> {
        parse_china_time(&self.time)
    }
}

/// `yyyy-MM-dd HH:mm:ss` in GMT+8 (TOP and JD bodies).
pub fn format_china_time(t: DateTime<Utc>) -> String {
    t.with_timezone(&china_offset())
        .format("%Y-%m-%d %H:%M:%S")
        .to_string()
}

/// Parse `yyyy-MM-dd HH:mm:ss` (optionally with `.SSS`) read as GMT+8; JD's traces write
/// the date with slashes (`yyyy/MM/dd HH:mm:ss`).
pub fn parse_china_time(s: &str) -> Option<DateTime<Utc>> {
    let s = s.trim();
    let naive = NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.f")
        .or_else(|_| NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S"))
        .or_else(|_| NaiveDateTime::parse_from_str(s, "%Y/%m/%d %H:%M:%S"))
        .ok()?;
    china_offset()
        .from_local_datetime(&naive)
        .single()
        .map(|d| d.with_timezone(&Utc))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn china_time_round_trips() {
        let t = Utc.with_ymd_and_hms(2026, 1, 1, 2, 0, 0).unwrap();
        assert_eq!(format_china_time(t), "2026-01-01 10:00:00");
        assert_eq!(parse_china_time("2026-01-01 10:00:00"), Some(t));
        assert_eq!(parse_china_time("2026-01-01 10:00:00.000"), Some(t));
        assert_eq!(parse_china_time("yesterday"), None);
    }

    #[test]
    fn responses_round_trip_as_json() {
        let r = ApiResponse::Trace(Trace {
            order_id: "1".into(),
            events: vec![TraceEvent {
                time: "2026-01-01 10:00:00".into(),
                status: "SIGNED".into(),
                description: "签收".into(),
            }],
            signed: true,
        });
        let json = serde_json::to_string(&r).unwrap();
        let back: ApiResponse = serde_json::from_str(&json).unwrap();
        assert_eq!(back, r);
        let req = ApiRequest::OrderList {
            start: Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap(),
            end: Utc.with_ymd_and_hms(2026, 1, 2, 0, 0, 0).unwrap(),
            page: 1,
            page_size: 100,
        };
        let back: ApiRequest = serde_json::from_str(&serde_json::to_string(&req).unwrap()).unwrap();
        assert_eq!(back, req);
        assert_eq!(req.api(), Api::OrderList);
    }
}
