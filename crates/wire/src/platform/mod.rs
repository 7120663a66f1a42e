//! Platform adapters: request building and signing, typed parsing, and the mapping of
//! every platform error to an [`ErrorClass`]. HTTP to the platforms lives only here.

pub mod alibaba;
pub mod classify;
pub mod client;
pub mod clock;
mod delivery;
pub mod jd;
mod json;
pub mod model;
pub mod oauth;
pub mod reread;
#[doc(hidden)]
pub mod sample;
pub mod sign;
pub mod taobao;
pub mod webhook;
pub mod wire;

pub use classify::{CallError, TransportError};
pub use client::{PlatformClient, RawResponse};
pub use model::{
    ApiRequest, ApiResponse, Attribute, Item, Message, MessageOrder, NewItem, NewSku, Order,
    OrderPage, Parcel, ShopListing, Sku, Trace, TraceEvent, Unreadable,
};
pub use wire::order_page_size_max;

use crate::secret::Secret;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Who the adapter signs as: app key, app secret, session / access token, and (TOP only)
/// the signature method. `Debug` never shows the secrets.
#[derive(Debug, Clone)]
pub struct Credentials {
    /// The app key the platform issued (`app_key` / `appKey` in requests).
    pub app_key: String,
    /// The app secret that signs every request; never sent.
    pub secret: Secret,
    /// The shop's session / access token, when the call acts for a shop.
    pub session: Option<Secret>,
    /// TOP's signature method; JD and 1688 do not send it.
    pub sign_method: sign::SignMethod,
}

/// The three open platforms syncfleet talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    /// Taobao Open Platform (TOP).
    Taobao,
    /// JD Open Service (JOS).
    Jd,
    /// 1688 open platform (Alibaba wholesale).
    Alibaba,
}

impl Platform {
    /// Every platform, in declaration order.
    pub const ALL: [Platform; 3] = [Platform::Taobao, Platform::Jd, Platform::Alibaba];

    /// The lowercase name used in config keys, the ledger and messages (`taobao`, `jd`,
    /// `alibaba`).
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Taobao => "taobao",
            Platform::Jd => "jd",
            Platform::Alibaba => "alibaba",
        }
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not one of a fixed set (a platform, an API, an error class, a ledger
/// status): what was given and what was expected, for the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} `{given}` (expected {expected})")]
pub struct UnknownName {
    /// What kind of name it was meant to be ("platform", "api", ...).
    pub what: &'static str,
    /// The name given.
    pub given: String,
    /// The names accepted, as a phrase.
    pub expected: String,
}

impl UnknownName {
    /// `given` is not a `what`; `expected` lists what is.
    pub fn new(what: &'static str, given: &str, expected: impl Into<String>) -> UnknownName {
        UnknownName {
            what,
            given: given.to_string(),
            expected: expected.into(),
        }
    }
}

impl FromStr for Platform {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "taobao" | "top" => Ok(Platform::Taobao),
            "jd" | "jos" => Ok(Platform::Jd),
            "alibaba" | "1688" => Ok(Platform::Alibaba),
            other => Err(UnknownName::new("platform", other, "taobao, jd or alibaba")),
        }
    }
}

/// The API families syncfleet uses, named the same on every platform (the message APIs are
/// TOP's only: [`Api::offered_by`]).
/// Gates, breakers and ledgers are keyed by (platform, api).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// Read one item (detail).
    ItemGet,
    /// Create one item (a write: no platform deduplicates it).
    ItemAdd,
    /// Find the shop's items by the seller's own code (what a lost write's answer would have
    /// said).
    ItemFind,
    /// One page of orders modified in a time window (list).
    OrderList,
    /// The logistics trace of one order.
    LogisticsTrace,
    /// The parcels of one order with their ids and states (1688's only: its trace is asked by
    /// a parcel id that its order list does not give).
    LogisticsInfo,
    /// Pull the app's change messages (TOP's message service, TMC).
    MessageConsume,
    /// Acknowledge consumed messages (unacknowledged ones are delivered again).
    MessageConfirm,
}

impl Api {
    /// Every API, in declaration order.
    pub const ALL: [Api; 8] = [
        Api::ItemGet,
        Api::ItemAdd,
        Api::ItemFind,
        Api::OrderList,
        Api::LogisticsTrace,
        Api::LogisticsInfo,
        Api::MessageConsume,
        Api::MessageConfirm,
    ];

    /// The snake_case name used in config keys, the ledger and messages (e.g. `item_get`).
    pub fn as_str(self) -> &'static str {
        match self {
            Api::ItemGet => "item_get",
            Api::ItemAdd => "item_add",
            Api::ItemFind => "item_find",
            Api::OrderList => "order_list",
            Api::LogisticsTrace => "logistics_trace",
            Api::LogisticsInfo => "logistics_info",
            Api::MessageConsume => "message_consume",
            Api::MessageConfirm => "message_confirm",
        }
    }

    /// Timeout class of the API (docs/design.md, "Timeouts and error classes").
    pub fn class(self) -> ApiClass {
        match self {
            Api::ItemGet => ApiClass::Detail,
            Api::ItemAdd | Api::ItemFind => ApiClass::Detail,
            Api::OrderList => ApiClass::List,
            Api::LogisticsTrace | Api::LogisticsInfo => ApiClass::Logistics,
            Api::MessageConsume => ApiClass::List,
            Api::MessageConfirm => ApiClass::Detail,
        }
    }

    /// Whether `platform` offers this API: the pulled change messages are TOP's (1688 pushes
    /// its messages over HTTP; JD has no such queue for an ISV app); the parcel lookup is 1688's.
    pub fn offered_by(self, platform: Platform) -> bool {
        !self.method(platform).is_empty()
    }

    /// Whether the call changes platform state (writes never degrade and retry only
    /// when the request surely never arrived).
    pub fn is_write(self) -> bool {
        matches!(self, Api::ItemAdd)
    }

    /// The platform's method name (TOP / JOS) or `namespace/apiName` (1688), from the
    /// platform's table ([`wire`]); empty when the platform does not offer the API.
    pub fn method(self, platform: Platform) -> &'static str {
        wire::spec(platform, self).map_or("", |s| s.method)
    }

    /// The logical API behind a platform method name, if it is one syncfleet knows.
    pub fn from_method(platform: Platform, method: &str) -> Option<Api> {
        Api::ALL
            .into_iter()
            .find(|api| api.offered_by(platform) && api.method(platform) == method)
    }
}

impl fmt::Display for Api {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Api {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Api::ALL
            .into_iter()
            .find(|api| api.as_str() == s)
            .ok_or_else(|| {
                UnknownName::new(
                    "api",
                    s,
                    "item_get, item_add, item_find, order_list, logistics_trace, logistics_info, message_consume or message_confirm",
                )
            })
    }
}

/// Timeout classes (docs/design.md, "Timeouts and error classes"): list 2/3 s, detail 2/6 s, batch 2/15 s, logistics 2/4 s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApiClass {
    /// List calls (`order_list`).
    List,
    /// Single-object calls (`item_get`, `item_add`).
    Detail,
    /// Batch calls (no API of [`Api`] uses it yet).
    Batch,
    /// Logistics calls (`logistics_trace`).
    Logistics,
}

impl ApiClass {
    /// The snake_case name (`list`, `detail`, `batch`, `logistics`), as serde writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            ApiClass::List => "list",
            ApiClass::Detail => "detail",
            ApiClass::Batch => "batch",
            ApiClass::Logistics => "logistics",
        }
    }
}

/// What the link layer does with a failed call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// Transient (network, 5xx, gateway timeout): retry with backoff within budgets.
    Retry,
    /// Rate limit or quota: back off longer, through the gate.
    Slow,
    /// Caller error (params, signature, permission, session): retrying only burns quota.
    Fatal,
    /// Never seen before: no retry, alert.
    Unknown,
}

impl ErrorClass {
    /// The spelling in config, the ledger and call lines.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Retry => "retry",
            ErrorClass::Slow => "slow",
            ErrorClass::Fatal => "fatal",
            ErrorClass::Unknown => "unknown",
        }
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ErrorClass {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "retry" => Ok(ErrorClass::Retry),
            "slow" => Ok(ErrorClass::Slow),
            "fatal" => Ok(ErrorClass::Fatal),
            "unknown" => Ok(ErrorClass::Unknown),
            other => Err(UnknownName::new(
                "error class",
                other,
                "retry, slow, fatal or unknown",
            )),
        }
    }
}
