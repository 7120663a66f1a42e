//! 1688: the signed form (`{endpoint}/param2/1/{namespace}/{apiName}/{appKey}`) and its
//! bodies (docs/wire-formats.md).

use super::classify::{
    alibaba_known, alibaba_quota_spent, alibaba_session_refused, keyword_class, or_keywords,
    CallError,
};
use super::delivery::text_says_signed;
use super::json::{array, boolean, joined, text, text_or_empty, uint};
use super::model::{Parcel, Unreadable};
use super::sign::alibaba_sign;
use super::wire::ALIBABA_WEBSITE;
use super::{
    Api, ApiRequest, ApiResponse, Credentials, Item, Message, MessageOrder, Order, OrderPage,
    Platform, Trace, TraceEvent,
};
use crate::time::china_offset;
use chrono::{DateTime, Utc};
use serde_json::Value;

const P: Platform = Platform::Alibaba;

/// `yyyyMMddHHmmssSSS+0800`, 1688's time format in params and bodies.
pub fn format_time(t: DateTime<Utc>) -> String {
    t.with_timezone(&china_offset())
        .format("%Y%m%d%H%M%S%3f%z")
        .to_string()
}

/// A time in 1688's format ([`format_time`]); `None` when it is not one.
pub fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_str(s.trim(), "%Y%m%d%H%M%S%3f%z")
        .ok()
        .map(|d| d.with_timezone(&Utc))
}

/// The signed URL path: `param2/1/{namespace}/{apiName}/{appKey}`.
pub fn url_path(api: Api, app_key: &str) -> String {
    format!("param2/1/{}/{app_key}", api.method(P))
}

/// The business params of a typed request.
pub fn business_params(req: &ApiRequest) -> Vec<(String, String)> {
    let p = |k: &str, v: String| (k.to_string(), v);
    match req {
        // The distributor's read of a supplier's product (1688's product id as `offerId`).
        ApiRequest::ItemGet { item_id } => vec![p("offerId", item_id.clone())],
        // Not offered (`Api::offered_by`): 1688 is a listing source; the client refuses first.
        ApiRequest::ItemAdd { .. } | ApiRequest::ItemFind { .. } => Vec::new(),
        ApiRequest::OrderList {
            start,
            end,
            page,
            page_size,
        } => vec![
            p("modifyStartTime", format_time(*start)),
            p("modifyEndTime", format_time(*end)),
            p("page", page.to_string()),
            p("pageSize", page_size.to_string()),
        ],
        // The parcel's `logisticsId` (from the order list's `nativeLogistics`), the order and
        // the site: all three required.
        ApiRequest::LogisticsTrace { order_id, tracking } => vec![
            p("logisticsId", tracking.clone().unwrap_or_default()),
            p("orderId", order_id.clone()),
            p("webSite", ALIBABA_WEBSITE.into()),
        ],
        ApiRequest::LogisticsInfo { order_id } => vec![
            p("orderId", order_id.clone()),
            p("webSite", ALIBABA_WEBSITE.into()),
        ],
        // Not offered (`Api::offered_by`): 1688 pushes its messages; the client refuses first.
        ApiRequest::MessageConsume { .. } | ApiRequest::MessageConfirm { .. } => Vec::new(),
    }
}

/// The URL path to post to (append to the endpoint) and the signed form.
pub fn signed_form(
    creds: &Credentials,
    api: Api,
    business: &[(String, String)],
    now: DateTime<Utc>,
) -> (String, Vec<(String, String)>) {
    let path = url_path(api, &creds.app_key);
    let mut form: Vec<(String, String)> = business
        .iter()
        .filter(|(k, _)| {
            !matches!(
                k.as_str(),
                "access_token" | "_aop_timestamp" | "_aop_signature"
            )
        })
        .cloned()
        .collect();
    if let Some(token) = &creds.session {
        form.push(("access_token".into(), token.expose().to_string()));
    }
    form.push(("_aop_timestamp".into(), now.timestamp_millis().to_string()));
    let sign = alibaba_sign(
        creds.secret.expose(),
        &path,
        form.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    );
    form.push(("_aop_signature".into(), sign));
    (path, form)
}

/// Errors of a body: gateway `error_code` (any status), a bare non-2xx, or a business
/// failure in a 200 body (`success:false` / `errorCode`, Unknown unless its text says limit).
pub fn check_body(
    api: Api,
    status: u16,
    body: &Value,
    now: DateTime<Utc>,
) -> Result<(), CallError> {
    if let Some(code) = text(body, "error_code") {
        let msg = joined(body, &["error_message"]);
        let (class, guessed) = or_keywords(alibaba_known(status, &code), &msg);
        let mut e = CallError::platform(P, api, class, code.clone(), &msg, &msg, Some(status), now)
            .limit_guessed(guessed);
        if alibaba_quota_spent(&code) {
            e.quota_spent = true;
            e.app_quota = true;
        }
        e.session_refused = alibaba_session_refused(&code);
        return Err(e);
    }
    if !(200..300).contains(&status) {
        let msg = body
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| body.to_string());
        let (class, guessed) = or_keywords(alibaba_known(status, ""), &msg);
        return Err(CallError::platform(
            P,
            api,
            class,
            format!("http_{status}"),
            &msg,
            &msg,
            Some(status),
            now,
        )
        .limit_guessed(guessed));
    }
    // Every success answer is a JSON object: anything else (a proxy's HTML page, a bare
    // string) would read as an empty order page or trace, and a sync would skip its window.
    if !body.is_object() {
        return Err(CallError::parse(
            P,
            api,
            status,
            "the body is not a JSON object".into(),
        ));
    }
    // Business errors may sit at the top level or inside `result`.
    let scopes = [Some(body), body.get("result").filter(|r| r.is_object())];
    for scope in scopes.into_iter().flatten() {
        let failed = boolean(scope, "success") == Some(false) || scope.get("errorCode").is_some();
        if failed {
            let code = text(scope, "errorCode").unwrap_or_else(|| "success_false".into());
            let msg = joined(scope, &["errorMessage", "errorMsg", "message"]);
            let class = keyword_class(&format!("{code} {msg}"));
            return Err(
                CallError::platform(P, api, class, code, &msg, &msg, Some(status), now)
                    .limit_guessed(true),
            );
        }
    }
    Ok(())
}

/// Where 1688's relative image paths live ("使用相对路径，需要增加域名").
const IMAGE_HOST: &str = "https://cbu01.alicdn.com/";

fn image_url(path: String) -> String {
    if path.starts_with("http://") || path.starts_with("https://") {
        path
    } else {
        format!("{IMAGE_HOST}{}", path.trim_start_matches('/'))
    }
}

/// A price as 1688 gives it (a number, `40.0`), or `None` when absent or zero.
fn price(v: &Value, key: &str) -> Option<String> {
    text(v, key).filter(|p| p.parse::<f64>().is_ok_and(|f| f > 0.0))
}

/// `alibaba.fenxiao.productInfo.get`'s `productInfo` (docs/wire-formats.md): a distributor
/// pays a SKU's `consignPrice` (分销价), its `price` when none is set.
fn product_info(p: &Value, id: String) -> Item {
    let attr = |a: &Value, value_key: &str| super::Attribute {
        name: text_or_empty(a, "attributeName"),
        value: text_or_empty(a, value_key),
    };
    let skus: Vec<super::Sku> = array(p, "productSkuInfos")
        .iter()
        .map(|s| super::Sku {
            id: text_or_empty(s, "skuId"),
            specs: array(s, "attributes")
                .iter()
                .map(|a| attr(a, "attributeValue"))
                .collect(),
            price: price(s, "consignPrice")
                .or_else(|| price(s, "price"))
                .unwrap_or_default(),
            quantity: uint(s, "amountOnSale").unwrap_or(0).min(u32::MAX as u64) as u32,
        })
        .collect();
    let sale = p.get("productSaleInfo");
    let (price, quantity) = if skus.is_empty() {
        let price = sale
            .and_then(|s| {
                price(s, "consignPrice").or_else(|| {
                    array(s, "priceRanges")
                        .first()
                        .and_then(|r| text(r, "price"))
                })
            })
            .unwrap_or_default();
        let quantity = sale.and_then(|s| uint(s, "amountOnSale")).unwrap_or(0);
        (price, quantity.min(u32::MAX as u64) as u32)
    } else {
        let lowest = skus
            .iter()
            .min_by(|a, b| {
                let f = |s: &super::Sku| s.price.parse::<f64>().unwrap_or(f64::MAX);
                f(a).total_cmp(&f(b))
            })
            .map(|s| s.price.clone())
            .unwrap_or_default();
        (
            lowest,
            skus.iter()
                .map(|s| s.quantity)
                .fold(0u32, u32::saturating_add),
        )
    };
    Item {
        id,
        title: text_or_empty(p, "subject"),
        price,
        quantity,
        category: text_or_empty(p, "categoryID"),
        attributes: array(p, "productAttribute")
            .iter()
            .map(|a| attr(a, "value"))
            .collect(),
        skus,
        images: p
            .get("productImage")
            .map(|i| array(i, "images"))
            .unwrap_or(&[])
            .iter()
            .filter_map(|v| v.as_str().map(|s| image_url(s.to_string())))
            .collect(),
        description: text_or_empty(p, "description"),
    }
}

fn missing(api: Api, what: &str) -> CallError {
    CallError::missing_field(P, api, what)
}

/// The typed response of a success body (after [`check_body`]).
pub fn parse_response(req: &ApiRequest, body: &Value) -> Result<ApiResponse, CallError> {
    let api = req.api();
    match req {
        ApiRequest::ItemGet { .. } => {
            // At the top level as the SDKs read it; one client reads it under `result`.
            let p = body
                .get("productInfo")
                .or_else(|| body.get("result").and_then(|r| r.get("productInfo")))
                .ok_or_else(|| missing(api, "productInfo"))?;
            let id = text(p, "productID").ok_or_else(|| missing(api, "productInfo.productID"))?;
            Ok(ApiResponse::Item(product_info(p, id)))
        }
        ApiRequest::ItemAdd { .. } | ApiRequest::ItemFind { .. } => {
            Err(CallError::not_offered(P, api))
        }
        ApiRequest::OrderList {
            page, page_size, ..
        } => {
            let mut orders = Vec::new();
            let mut unreadable = Vec::new();
            for o in array(body, "result") {
                let b = o
                    .get("baseInfo")
                    .ok_or_else(|| missing(api, "result.baseInfo"))?;
                match base_info(b) {
                    Ok(Some(order)) => orders.push(order),
                    Ok(None) => return Err(missing(api, "baseInfo.id")),
                    Err(bad) => unreadable.push(bad),
                }
            }
            let total = uint(body, "totalRecord");
            let seen = u64::from(*page) * u64::from(*page_size);
            Ok(ApiResponse::OrderPage(OrderPage {
                orders,
                unreadable,
                has_next: total.is_some_and(|t| seen < t),
                total,
            }))
        }
        ApiRequest::LogisticsTrace { order_id, .. } => {
            // One entry per parcel; their steps in order. A step has no status, only its
            // time and the carrier's remark: delivery is read from the last remark.
            let events: Vec<TraceEvent> = array(body, "logisticsTrace")
                .iter()
                .flat_map(|t| array(t, "logisticsSteps"))
                .map(|s| TraceEvent {
                    time: text_or_empty(s, "acceptTime"),
                    status: String::new(),
                    description: text_or_empty(s, "remark"),
                })
                .collect();
            let signed = events
                .last()
                .is_some_and(|e| text_says_signed(&e.description));
            Ok(ApiResponse::Trace(Trace {
                order_id: order_id.clone(),
                events,
                signed,
            }))
        }
        ApiRequest::LogisticsInfo { .. } => {
            // `result[]{logisticsId, logisticsBillNo, status}`; `SIGN` is signed for.
            let mut parcels = Vec::new();
            for r in array(body, "result") {
                let Some(tracking) = text(r, "logisticsId").filter(|t| !t.trim().is_empty()) else {
                    return Err(missing(api, "result.logisticsId"));
                };
                let status = text_or_empty(r, "status");
                parcels.push(Parcel {
                    tracking,
                    signed: status == "SIGN",
                    status,
                });
            }
            Ok(ApiResponse::Parcels { parcels })
        }
        ApiRequest::MessageConsume { .. } | ApiRequest::MessageConfirm { .. } => {
            Err(CallError::not_offered(P, api))
        }
    }
}

/// One order's `baseInfo` of an order list; `Ok(None)` without an `id`, `Err` when its time
/// cannot be read (the entry is quarantined, and `syncfleet quarantine replay` reads it again
/// here). The list gives no parcel ids: the logistics info call does.
pub(super) fn base_info(b: &Value) -> Result<Option<Order>, Unreadable> {
    let Some(modified) = text(b, "modifyTime").and_then(|m| parse_time(&m)) else {
        return Err(Unreadable::entry(b, "id", "baseInfo.modifyTime"));
    };
    Ok(text(b, "id").map(|order_id| Order {
        order_id,
        status: text_or_empty(b, "status"),
        modified,
        amount: text_or_empty(b, "totalAmount"),
        tracking: None,
    }))
}

/// Why a pushed message was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PushError {
    /// The form has no `message` or no `_aop_signature`.
    #[error("a push needs `message` and `_aop_signature`")]
    Missing,
    /// The signature is not the app's (another app's push, or a forgery).
    #[error("the push's signature is not this app's")]
    Signature,
    /// The message is not 1688's message JSON.
    #[error("the pushed message is not a message: {0}")]
    Malformed(&'static str),
}

/// A message 1688 pushed (a form with `message`, the JSON message, and `_aop_signature`,
/// HMAC-SHA1 of `message` + its value under the app secret), checked and read. A trade
/// message carries the order's new status and amount; its `gmtBorn` is the change's time.
pub fn parse_push(secret: &str, form: &[(String, String)]) -> Result<Message, PushError> {
    let get = |k: &str| form.iter().find(|(fk, _)| fk == k).map(|(_, v)| v.as_str());
    let (Some(message), Some(given)) = (get("message"), get("_aop_signature")) else {
        return Err(PushError::Missing);
    };
    let expected = alibaba_sign(secret, "", [("message", message)]);
    if !super::sign::signatures_match(&expected, given) {
        return Err(PushError::Signature);
    }
    let m: Value = serde_json::from_str(message).map_err(|_| PushError::Malformed("not JSON"))?;
    let id = uint(&m, "msgId").ok_or(PushError::Malformed("msgId"))?;
    let born = uint(&m, "gmtBorn")
        .and_then(|ms| i64::try_from(ms).ok())
        .and_then(DateTime::from_timestamp_millis)
        .ok_or(PushError::Malformed("gmtBorn"))?;
    // The push names the order's new status, not the order's own `modifyTime`: `gmtBorn` is
    // when the message was made.
    let order = m.get("data").and_then(|d| {
        Some(MessageOrder {
            order_id: text(d, "orderId")?,
            status: text(d, "currentStatus")?,
            modified: None,
            amount: text_or_empty(d, "totalAmount"),
        })
    });
    Ok(Message {
        id,
        topic: text_or_empty(&m, "type"),
        born,
        seller: text_or_empty(&m, "userInfo"),
        order,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::sign::SignMethod;
    use crate::platform::ErrorClass;
    use crate::secret::Secret;
    use chrono::TimeZone;
    use std::time::Duration;

    fn creds(key: &str, secret: &str, token: Option<&str>) -> Credentials {
        Credentials {
            app_key: key.into(),
            secret: Secret::new(secret),
            session: token.map(Secret::new),
            sign_method: SignMethod::default(),
        }
    }

    fn get<'a>(form: &'a [(String, String)], k: &str) -> Option<&'a str> {
        form.iter().find(|(fk, _)| fk == k).map(|(_, v)| v.as_str())
    }

    fn err_of(status: u16, body: &str) -> CallError {
        let now = Utc.with_ymd_and_hms(2026, 1, 1, 4, 0, 0).unwrap();
        let v: Value = serde_json::from_str(body).unwrap_or(Value::String(body.into()));
        check_body(Api::ItemGet, status, &v, now).unwrap_err()
    }

    #[test]
    fn form_is_signed_over_the_url_path() {
        let now = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let (path, form) = signed_form(
            &creds("1000001", "s3cret", Some("tok")),
            Api::ItemGet,
            &[("offerId".into(), "123".into())],
            now,
        );
        assert_eq!(
            path,
            "param2/1/com.alibaba.fenxiao/alibaba.fenxiao.productInfo.get/1000001"
        );
        assert_eq!(get(&form, "access_token"), Some("tok"));
        assert_eq!(
            get(&form, "_aop_timestamp"),
            Some(now.timestamp_millis().to_string().as_str())
        );
        let expected = alibaba_sign(
            "s3cret",
            &path,
            form.iter()
                .filter(|(k, _)| k != "_aop_signature")
                .map(|(k, v)| (k.as_str(), v.as_str())),
        );
        assert_eq!(get(&form, "_aop_signature"), Some(expected.as_str()));
        assert_eq!(expected.len(), 40);
        // The published 1688 signing vector (sign.rs) through the same signing call.
        assert_eq!(
            alibaba_sign(
                "test123",
                "param2/1/system/currentTime/1000000",
                [("a", "1"), ("b", "2")]
            ),
            "33E54F4F7B989E3E0E912D3FBD2F1A03CA7CCE88"
        );
    }

    #[test]
    fn typed_requests_build_business_params() {
        let start = Utc.with_ymd_and_hms(2026, 1, 1, 2, 0, 0).unwrap();
        let p = business_params(&ApiRequest::OrderList {
            start,
            end: start,
            page: 1,
            page_size: 50,
        });
        assert_eq!(get(&p, "modifyStartTime"), Some("20260101100000000+0800"));
        assert_eq!(get(&p, "pageSize"), Some("50"));
        assert_eq!(parse_time("20260101100000000+0800"), Some(start));
        // A distributor's read of a supplier's product.
        let p = business_params(&ApiRequest::ItemGet {
            item_id: "573741401425".into(),
        });
        assert_eq!(get(&p, "offerId"), Some("573741401425"));
    }

    #[test]
    fn error_bodies_of_every_class() {
        let e = err_of(
            400,
            r#"{"error_code":"gw.QosAppFrequencyLimit","error_message":"App call exceeds limited frequency, ban will last for 1 more seconds"}"#,
        );
        assert_eq!(
            (e.class, e.ban, e.quota_spent),
            (ErrorClass::Slow, Some(Duration::from_secs(1)), false)
        );
        let e = err_of(
            400,
            r#"{"error_code":"gw.NoUsageLeftError","error_message":"No usage left"}"#,
        );
        assert_eq!((e.class, e.quota_spent), (ErrorClass::Slow, true));
        for code in [
            "gw.SignatureInvalid",
            "gw.AppKeyNotExist",
            "gw.ParamMissing",
            "gw.APIUnsupported",
        ] {
            let e = err_of(
                400,
                &format!(r#"{{"error_code":"{code}","error_message":"x"}}"#),
            );
            assert_eq!(e.class, ErrorClass::Fatal, "{code}");
        }
        let e = err_of(
            401,
            r#"{"error_code":"gw.InvalidAccessToken","error_message":"token expired"}"#,
        );
        assert_eq!((e.class, e.http_status), (ErrorClass::Fatal, Some(401)));
        for s in [500, 502, 503] {
            let e = err_of(
                s,
                r#"{"error_code":"gw.InternalError","error_message":"internal error"}"#,
            );
            assert_eq!(e.class, ErrorClass::Retry, "{s}");
        }
        assert_eq!(
            err_of(502, "<html>bad gateway</html>").class,
            ErrorClass::Retry
        );
        let e = err_of(400, r#"{"error_code":"gw.Novel","error_message":"what"}"#);
        assert_eq!(e.class, ErrorClass::Unknown);
        let e = err_of(
            200,
            r#"{"success":false,"errorCode":"PRODUCT_NOT_EXIST","errorMessage":"product not found"}"#,
        );
        assert_eq!(
            (e.class, e.code.as_str()),
            (ErrorClass::Unknown, "PRODUCT_NOT_EXIST")
        );
        let e = err_of(
            200,
            r#"{"result":{"success":false,"errorCode":"REQ_LIMIT","errorMessage":"请求过于频繁"}}"#,
        );
        assert_eq!(e.class, ErrorClass::Slow);
    }

    #[test]
    fn success_bodies_parse() {
        let ok = |api: Api, s: &str| {
            let v: Value = serde_json::from_str(s).unwrap();
            check_body(api, 200, &v, Utc::now()).unwrap();
            v
        };
        // Without SKUs: the consign price of the sale info.
        let item = ok(
            Api::ItemGet,
            r#"{"productInfo":{"productID":123,"categoryID":1031910,"subject":"Mug","productSaleInfo":{"amountOnSale":7,"consignPrice":11.0,"priceRanges":[{"startQuantity":1,"price":12.5}]},"productImage":{"images":["img/ibank/1.jpg"]}}}"#,
        );
        assert_eq!(
            parse_response(
                &ApiRequest::ItemGet {
                    item_id: "123".into()
                },
                &item
            )
            .unwrap(),
            ApiResponse::Item(Item {
                id: "123".into(),
                title: "Mug".into(),
                price: "11.0".into(),
                quantity: 7,
                category: "1031910".into(),
                images: vec!["https://cbu01.alicdn.com/img/ibank/1.jpg".into()],
                ..Item::default()
            })
        );
        let page = ok(
            Api::OrderList,
            r#"{"result":[{"baseInfo":{"id":1001,"status":"waitbuyerreceive","modifyTime":"20260101100000000+0800","totalAmount":"99.00"}}],"totalRecord":250}"#,
        );
        let start = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let req = ApiRequest::OrderList {
            start,
            end: start,
            page: 1,
            page_size: 100,
        };
        let ApiResponse::OrderPage(p) = parse_response(&req, &page).unwrap() else {
            panic!()
        };
        assert!(p.has_next);
        assert_eq!(
            p.orders[0].modified,
            Utc.with_ymd_and_hms(2026, 1, 1, 2, 0, 0).unwrap()
        );
        assert_eq!(
            (p.orders[0].order_id.as_str(), p.orders[0].status.as_str()),
            ("1001", "waitbuyerreceive")
        );
        let trace = ok(
            Api::LogisticsTrace,
            r#"{"success":true,"logisticsTrace":[{"logisticsId":"BX1001","orderId":1001,"logisticsSteps":[{"acceptTime":"2026-01-01 10:00:00","remark":"快件已揽收"},{"acceptTime":"2026-01-02 10:00:00","remark":"快件已被 已签收 签收"}]}]}"#,
        );
        let ApiResponse::Trace(t) = parse_response(
            &ApiRequest::LogisticsTrace {
                order_id: "1001".into(),
                tracking: Some("BX1001".into()),
            },
            &trace,
        )
        .unwrap() else {
            panic!()
        };
        assert!(t.signed);
        assert_eq!(t.events.len(), 2);
    }
}
