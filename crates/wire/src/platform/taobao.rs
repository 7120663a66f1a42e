//! Taobao TOP: the signed form (`/router/rest`) and its bodies (docs/wire-formats.md).

use super::classify::{
    http_class, or_keywords, top_app_quota_spent, top_known, top_session_refused, CallError,
};
use super::delivery::top_step_signed;
use super::json::{array, boolean, joined, text, text_or_empty, uint};
use super::model::{format_china_time, parse_china_time, Unreadable};
use super::sign::top_sign;
use super::wire::{TOP_FOUND_FIELDS, TOP_ITEM_FIELDS, TOP_TRADE_FIELDS};
use super::{
    Api, ApiRequest, ApiResponse, Attribute, Credentials, ErrorClass, Item, Message, MessageOrder,
    NewItem, Order, OrderPage, Platform, Sku, Trace, TraceEvent,
};
use crate::time::china_offset;
use chrono::{DateTime, Utc};
use serde_json::Value;

const P: Platform = Platform::Taobao;

/// The business params of a typed request.
pub fn business_params(req: &ApiRequest) -> Vec<(String, String)> {
    let p = |k: &str, v: String| (k.to_string(), v);
    match req {
        ApiRequest::ItemGet { item_id } => {
            vec![
                p("fields", TOP_ITEM_FIELDS.into()),
                p("num_iid", item_id.clone()),
            ]
        }
        ApiRequest::ItemAdd { item } => item_add_params(item),
        ApiRequest::ItemFind { seller_code } => vec![
            p("outer_id", seller_code.clone()),
            p("fields", TOP_FOUND_FIELDS.into()),
        ],
        ApiRequest::OrderList {
            start,
            end,
            page,
            page_size,
        } => vec![
            p("start_modified", format_china_time(*start)),
            p("end_modified", format_china_time(*end)),
            // Only the fields named come back. No `use_has_next`: with it TOP drops
            // `total_results`, and the walk from the last page back needs the total.
            p("fields", TOP_TRADE_FIELDS.into()),
            p("page_no", page.to_string()),
            p("page_size", page_size.to_string()),
        ],
        ApiRequest::LogisticsTrace { order_id, .. } => vec![p("tid", order_id.clone())],
        // Not offered (`Api::offered_by`): the client refuses before building it.
        ApiRequest::LogisticsInfo { .. } => Vec::new(),
        ApiRequest::MessageConsume { quantity } => {
            vec![p("quantity", quantity.clamp(&10, &200).to_string())]
        }
        ApiRequest::MessageConfirm { ids } => vec![p(
            "s_message_ids",
            ids.iter().map(u64::to_string).collect::<Vec<_>>().join(","),
        )],
    }
}

/// `taobao.item.add`'s params (docs/wire-formats.md, "Writes"): every field `check()`
/// requires, the SKU lists aligned one to one (`sku_outer_ids` sent even when empty: "如果没有
/// sku_outer_ids也要写上这个参数"), the SKUs' sale properties also in `props`, `num` the sum
/// of the SKUs' stock, and the seller's code as `outer_id`.
fn item_add_params(item: &NewItem) -> Vec<(String, String)> {
    let p = |k: &str, v: String| (k.to_string(), v);
    let pairs = |props: &[(String, String)]| {
        props
            .iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect::<Vec<_>>()
            .join(";")
    };
    let mut props: Vec<(String, String)> = item.props.clone();
    for sku in &item.skus {
        for pv in &sku.props {
            if !props.contains(pv) {
                props.push(pv.clone());
            }
        }
    }
    let mut out = vec![
        p("cid", item.category.clone()),
        p("title", item.title.clone()),
        p("desc", item.description.clone()),
        p("price", item.price.clone()),
        p("num", item.quantity.to_string()),
        p("type", item.shop.item_type.clone()),
        p("stuff_status", item.shop.stuff_status.clone()),
        p("location.state", item.shop.location_state.clone()),
        p("location.city", item.shop.location_city.clone()),
        p("outer_id", item.seller_code.clone()),
    ];
    if !props.is_empty() {
        out.push(p("props", pairs(&props)));
    }
    if !item.input_props.is_empty() {
        let (pids, texts): (Vec<_>, Vec<_>) = item.input_props.iter().cloned().unzip();
        out.push(p("input_pids", pids.join(",")));
        out.push(p("input_str", texts.join(",")));
    }
    if !item.skus.is_empty() {
        let list = |f: &dyn Fn(&super::NewSku) -> String| {
            item.skus.iter().map(f).collect::<Vec<_>>().join(",")
        };
        out.push(p("sku_properties", list(&|s| pairs(&s.props))));
        out.push(p("sku_quantities", list(&|s| s.quantity.to_string())));
        out.push(p("sku_prices", list(&|s| s.price.clone())));
        out.push(p("sku_outer_ids", list(&|s| s.seller_code.clone())));
    }
    out
}

/// TOP's `pid:vid:name:value;...` text (`props_name`, a SKU's `properties_name`) as named
/// values, with the property id of each.
fn named_props(text: &str) -> Vec<(String, Attribute)> {
    text.split(';')
        .filter_map(|part| {
            let mut it = part.splitn(4, ':');
            let (pid, _vid, name, value) = (it.next()?, it.next()?, it.next()?, it.next()?);
            Some((
                pid.to_string(),
                Attribute {
                    name: name.to_string(),
                    value: value.to_string(),
                },
            ))
        })
        .collect()
}

/// An item of `taobao.item.seller.get` (the fields [`TOP_ITEM_FIELDS`] asks).
fn parse_item(item: &Value) -> Option<Item> {
    let skus: Vec<(Vec<String>, Sku)> = item
        .get("skus")
        .map(|s| array(s, "sku"))
        .unwrap_or(&[])
        .iter()
        .map(|s| {
            let named = named_props(&text_or_empty(s, "properties_name"));
            let pids = named.iter().map(|(pid, _)| pid.clone()).collect();
            let sku = Sku {
                id: text_or_empty(s, "sku_id"),
                specs: named.into_iter().map(|(_, a)| a).collect(),
                price: text_or_empty(s, "price"),
                quantity: uint(s, "quantity").unwrap_or(0).min(u32::MAX as u64) as u32,
            };
            (pids, sku)
        })
        .collect();
    let sale_pids: Vec<&String> = skus.iter().flat_map(|(p, _)| p).collect();
    let attributes = named_props(&text_or_empty(item, "props_name"))
        .into_iter()
        .filter(|(pid, _)| !sale_pids.contains(&pid))
        .map(|(_, a)| a)
        .collect();
    let mut images: Vec<String> = text(item, "pic_url").into_iter().collect();
    for img in item
        .get("item_imgs")
        .map(|i| array(i, "item_img"))
        .unwrap_or(&[])
    {
        if let Some(url) = text(img, "url").filter(|u| !images.contains(u)) {
            images.push(url);
        }
    }
    Some(Item {
        id: text(item, "num_iid")?,
        title: text_or_empty(item, "title"),
        price: text_or_empty(item, "price"),
        quantity: uint(item, "num").unwrap_or(0).min(u32::MAX as u64) as u32,
        category: text_or_empty(item, "cid"),
        attributes,
        skus: skus.into_iter().map(|(_, s)| s).collect(),
        images,
        description: text_or_empty(item, "desc"),
    })
}

/// System params + business params + `sign`, ready to post as a form.
pub fn signed_form(
    creds: &Credentials,
    api: Api,
    business: &[(String, String)],
    now: DateTime<Utc>,
) -> Vec<(String, String)> {
    let mut form: Vec<(String, String)> = vec![
        ("method".into(), api.method(P).into()),
        ("app_key".into(), creds.app_key.clone()),
        (
            "timestamp".into(),
            now.with_timezone(&china_offset())
                .format("%Y-%m-%d %H:%M:%S")
                .to_string(),
        ),
        ("format".into(), "json".into()),
        ("v".into(), "2.0".into()),
        ("sign_method".into(), creds.sign_method.as_str().into()),
        ("simplify".into(), "false".into()),
    ];
    if let Some(session) = &creds.session {
        form.push(("session".into(), session.expose().to_string()));
    }
    // A business param never overrides a system param (the signature covers both).
    for (k, v) in business {
        if !form.iter().any(|(fk, _)| fk == k) {
            form.push((k.clone(), v.clone()));
        }
    }
    let sign = top_sign(
        creds.secret.expose(),
        creds.sign_method,
        form.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    );
    form.push(("sign".into(), sign));
    form
}

/// The success key of a method: `taobao.item.seller.get` → `item_seller_get_response`.
pub fn response_key(api: Api) -> String {
    let method = api.method(P);
    let tail = method.strip_prefix("taobao.").unwrap_or(method);
    format!("{}_response", tail.replace('.', "_"))
}

/// Errors of a body: TOP answers HTTP 200 with `error_response`; gateway trouble may
/// come as a bare 5xx.
pub fn check_body(
    api: Api,
    status: u16,
    body: &Value,
    now: DateTime<Utc>,
) -> Result<(), CallError> {
    if let Some(err) = body.get("error_response") {
        let code_num = uint(err, "code").map(|c| c as i64).unwrap_or(-1);
        let sub_code = text_or_empty(err, "sub_code");
        let all = joined(err, &["msg", "sub_code", "sub_msg"]);
        let (class, guessed) = or_keywords(top_known(code_num, &sub_code), &all);
        let message = match (text(err, "msg"), text(err, "sub_msg")) {
            (Some(m), Some(s)) => format!("{m} ({sub_code}): {s}"),
            (Some(m), None) => m,
            (None, Some(s)) => s,
            (None, None) => String::new(),
        };
        let code = text(err, "code").unwrap_or_else(|| "?".into());
        let mut e = CallError::platform(P, api, class, code, &message, &all, Some(status), now)
            .limit_guessed(guessed)
            .session_refused(top_session_refused(code_num, &sub_code));
        if class == ErrorClass::Slow && top_app_quota_spent(&sub_code) {
            e.quota_spent = true;
            e.app_quota = true;
        }
        return Err(e);
    }
    if !(200..300).contains(&status) {
        let class = http_class(status);
        let msg = body
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| body.to_string());
        return Err(CallError::platform(
            P,
            api,
            class,
            format!("http_{status}"),
            &msg,
            &msg,
            Some(status),
            now,
        ));
    }
    if body.get(response_key(api)).is_none() {
        return Err(CallError::parse(
            P,
            api,
            status,
            format!("no `{}` in the body", response_key(api)),
        ));
    }
    Ok(())
}

fn missing(api: Api, what: &str) -> CallError {
    CallError::missing_field(P, api, what)
}

/// The typed response of a success body (after [`check_body`]).
pub fn parse_response(req: &ApiRequest, body: &Value) -> Result<ApiResponse, CallError> {
    let api = req.api();
    let r = body
        .get(response_key(api))
        .ok_or_else(|| missing(api, &response_key(api)))?;
    match req {
        ApiRequest::ItemGet { .. } => {
            let item = r.get("item").ok_or_else(|| missing(api, "item"))?;
            parse_item(item)
                .map(ApiResponse::Item)
                .ok_or_else(|| missing(api, "item.num_iid"))
        }
        ApiRequest::ItemFind { .. } => {
            // No item carries the code: TOP leaves `items` out.
            let items = r.get("items").map(|i| array(i, "item")).unwrap_or(&[]);
            let item_ids = items
                .iter()
                .map(|i| text(i, "num_iid").ok_or_else(|| missing(api, "items.item.num_iid")))
                .collect::<Result<_, _>>()?;
            Ok(ApiResponse::Found { item_ids })
        }
        ApiRequest::ItemAdd { .. } => {
            let id = r
                .get("item")
                .and_then(|i| text(i, "num_iid"))
                .ok_or_else(|| missing(api, "item.num_iid"))?;
            Ok(ApiResponse::ItemAdded { item_id: id })
        }
        ApiRequest::OrderList {
            page, page_size, ..
        } => {
            let trades = r.get("trades").map(|t| array(t, "trade")).unwrap_or(&[]);
            let mut orders = Vec::with_capacity(trades.len());
            let mut unreadable = Vec::new();
            for t in trades {
                match trade(t) {
                    Ok(Some(order)) => orders.push(order),
                    Ok(None) => return Err(missing(api, "trade.tid")),
                    Err(bad) => unreadable.push(bad),
                }
            }
            // Without `use_has_next` TOP answers the total, and more follow while this page
            // ends before it; `has_next` is read when an answer carries it.
            let total = uint(r, "total_results");
            let seen = u64::from(*page) * u64::from(*page_size);
            let has_next =
                boolean(r, "has_next").unwrap_or_else(|| total.is_some_and(|t| seen < t));
            Ok(ApiResponse::OrderPage(OrderPage {
                orders,
                unreadable,
                has_next,
                total,
            }))
        }
        ApiRequest::LogisticsTrace { order_id, .. } => {
            let steps = r
                .get("trace_list")
                .map(|t| array(t, "transit_step_info"))
                .unwrap_or(&[]);
            let events: Vec<TraceEvent> = steps
                .iter()
                .map(|s| TraceEvent {
                    time: text_or_empty(s, "status_time"),
                    status: text_or_empty(s, "action"),
                    description: text_or_empty(s, "status_desc"),
                })
                .collect();
            // Signed only by a signing step: the trace's `status` reads "对方已签收" from the
            // moment an offline-shipped parcel ships (docs/wire-formats.md).
            let signed = events
                .last()
                .is_some_and(|e| top_step_signed(&e.status, &e.description));
            Ok(ApiResponse::Trace(Trace {
                order_id: text(r, "tid").unwrap_or_else(|| order_id.clone()),
                events,
                signed,
            }))
        }
        ApiRequest::MessageConsume { .. } => {
            let list = r
                .get("messages")
                .map(|m| array(m, "tmc_message"))
                .unwrap_or(&[]);
            let mut messages = Vec::with_capacity(list.len());
            let mut unreadable = Vec::new();
            for m in list {
                match tmc_message(m) {
                    Some(message) => messages.push(message),
                    None => unreadable.push(Unreadable::entry(m, "id", "id or pub_time")),
                }
            }
            Ok(ApiResponse::Messages {
                messages,
                unreadable,
            })
        }
        ApiRequest::MessageConfirm { .. } => Ok(ApiResponse::Confirmed),
        ApiRequest::LogisticsInfo { .. } => Err(CallError::not_offered(P, api)),
    }
}

/// One trade of an order list; `Ok(None)` without a `tid`, `Err` when its time cannot be read
/// (the entry is quarantined, and `syncfleet quarantine replay` reads it again here).
pub(super) fn trade(t: &Value) -> Result<Option<Order>, Unreadable> {
    let Some(modified) = text(t, "modified").and_then(|m| parse_china_time(&m)) else {
        return Err(Unreadable::entry(t, "tid", "modified"));
    };
    Ok(text(t, "tid").map(|order_id| Order {
        order_id,
        status: text_or_empty(t, "status"),
        modified,
        amount: text_or_empty(t, "payment"),
        tracking: None,
    }))
}

/// One TMC message: its envelope, and the order's new state when its `content` (a JSON
/// text) names the trade with its status (a trade or refund message).
pub(super) fn tmc_message(m: &Value) -> Option<Message> {
    let id = uint(m, "id")?;
    let born = parse_china_time(&text(m, "pub_time")?)?;
    let content: Option<Value> = text(m, "content").and_then(|c| serde_json::from_str(&c).ok());
    // A trade notice may carry the order's own `modified` (TOP SDK `NotifyTrade`, "交易修改时间",
    // docs/wire-formats.md); without it the order's time is unknown, never `pub_time`.
    let order = content.as_ref().and_then(|c| {
        Some(MessageOrder {
            order_id: text(c, "tid")?,
            status: text(c, "status")?,
            modified: text(c, "modified").and_then(|t| parse_china_time(&t)),
            amount: text_or_empty(c, "payment"),
        })
    });
    Some(Message {
        id,
        topic: text_or_empty(m, "topic"),
        born,
        seller: text_or_empty(m, "user_nick"),
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

    fn class_of(body: &str) -> (ErrorClass, CallError) {
        let now = chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 1, 1, 4, 0, 0).unwrap();
        let v: Value = serde_json::from_str(body).unwrap();
        let e = check_body(Api::ItemGet, 200, &v, now).unwrap_err();
        (e.class, e)
    }

    fn creds(method: SignMethod) -> Credentials {
        Credentials {
            app_key: "12345678".into(),
            secret: Secret::new("helloworld"),
            session: Some(Secret::new("test")),
            sign_method: method,
        }
    }

    fn get<'a>(form: &'a [(String, String)], k: &str) -> Option<&'a str> {
        form.iter().find(|(fk, _)| fk == k).map(|(_, v)| v.as_str())
    }

    #[test]
    fn item_get_form_is_signed_like_the_vector() {
        // 2016-01-01 12:00:00 GMT+8 = 04:00 UTC. With simplify dropped this is the TOP
        // signing vector of sign.rs, so the form carries exactly what top_sign signs.
        let now = Utc.with_ymd_and_hms(2016, 1, 1, 4, 0, 0).unwrap();
        let business = vec![
            (
                "fields".to_string(),
                "num_iid,title,nick,price,num".to_string(),
            ),
            ("num_iid".to_string(), "11223344".to_string()),
        ];
        let form = signed_form(&creds(SignMethod::Md5), Api::ItemGet, &business, now);
        assert_eq!(get(&form, "method"), Some("taobao.item.seller.get"));
        assert_eq!(get(&form, "timestamp"), Some("2016-01-01 12:00:00"));
        assert_eq!(get(&form, "session"), Some("test"));
        assert_eq!(get(&form, "sign_method"), Some("md5"));
        let expected = top_sign(
            "helloworld",
            SignMethod::Md5,
            form.iter()
                .filter(|(k, _)| k != "sign")
                .map(|(k, v)| (k.as_str(), v.as_str())),
        );
        assert_eq!(get(&form, "sign"), Some(expected.as_str()));
        let without_simplify: Vec<(&str, &str)> = form
            .iter()
            .filter(|(k, _)| k != "simplify")
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            top_sign("helloworld", SignMethod::Md5, without_simplify),
            "66987CB115214E59E6EC978214934FB8"
        );
    }

    #[test]
    fn typed_requests_build_business_params() {
        let start = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let req = ApiRequest::OrderList {
            start,
            end: start + chrono::Duration::days(1),
            page: 2,
            page_size: 100,
        };
        let p = business_params(&req);
        assert_eq!(get(&p, "start_modified"), Some("2026-01-01 08:00:00"));
        assert_eq!(get(&p, "end_modified"), Some("2026-01-02 08:00:00"));
        assert_eq!(get(&p, "page_no"), Some("2"));
        // No `use_has_next`: TOP would drop the total the walk needs.
        assert_eq!(get(&p, "use_has_next"), None);
        assert_eq!(get(&p, "fields"), Some(TOP_TRADE_FIELDS));
        // Every field `check()` requires, the seller's code as `outer_id`, no
        // idempotency parameter (TOP has none).
        let mut item = crate::platform::sample::new_item("SF1688-1");
        item.skus = vec![
            crate::platform::NewSku {
                props: vec![("1627207".into(), "28341".into())],
                price: "12.50".into(),
                quantity: 3,
                seller_code: "11".into(),
            },
            crate::platform::NewSku {
                props: vec![("1627207".into(), "28320".into())],
                price: "13.50".into(),
                quantity: 4,
                seller_code: String::new(),
            },
        ];
        let p = business_params(&ApiRequest::ItemAdd {
            item: Box::new(item),
        });
        for key in crate::platform::wire::spec(P, Api::ItemAdd)
            .unwrap()
            .required
        {
            assert!(get(&p, key).is_some_and(|v| !v.is_empty()), "{key}");
        }
        assert_eq!(get(&p, "outer_id"), Some("SF1688-1"));
        assert_eq!(get(&p, "out_request_id"), None);
        assert_eq!(
            get(&p, "sku_properties"),
            Some("1627207:28341,1627207:28320")
        );
        assert_eq!(get(&p, "sku_quantities"), Some("3,4"));
        assert_eq!(get(&p, "sku_prices"), Some("12.50,13.50"));
        // Sent even where a SKU has no code.
        assert_eq!(get(&p, "sku_outer_ids"), Some("11,"));
        // The SKUs' sale properties are in `props` too.
        assert_eq!(get(&p, "props"), Some("1627207:28341;1627207:28320"));
        // A business param cannot smuggle in a system param.
        let form = signed_form(
            &creds(SignMethod::HmacSha256),
            Api::ItemAdd,
            &[("method".into(), "taobao.other".into())],
            start,
        );
        assert_eq!(get(&form, "method"), Some("taobao.item.add"));
        assert_eq!(get(&form, "sign").map(str::len), Some(64));
    }

    #[test]
    fn error_bodies_of_every_class() {
        // An API's per-second limit: a rate signal with its ban.
        let (c, e) = class_of(
            r#"{"error_response":{"code":7,"msg":"App Call Limited","sub_code":"accesscontrol.limited-by-api-access-count","sub_msg":"This ban will last for 2 more seconds","request_id":"r1"}}"#,
        );
        assert_eq!(c, ErrorClass::Slow);
        assert_eq!(e.ban, Some(Duration::from_secs(2)));
        assert_eq!(e.code, "7");
        assert!(!e.quota_spent && !e.app_quota);
        // The app key's daily count: spent for every API of the app, however long the ban.
        let (c, e) = class_of(
            r#"{"error_response":{"code":7,"msg":"App Call Limited","sub_code":"accesscontrol.limited-by-app-access-count","sub_msg":"This ban will last for 20 more seconds"}}"#,
        );
        assert_eq!(c, ErrorClass::Slow);
        assert!(e.quota_spent && e.app_quota);
        // 12:00 GMT+8: a ban to midnight is 12 hours: a daily quota is spent.
        let (c, e) = class_of(
            r#"{"error_response":{"code":7,"msg":"App Call Limited","sub_code":"accesscontrol.limited-by-api-access-count","sub_msg":"This ban will last for 43200 more seconds"}}"#,
        );
        assert_eq!(c, ErrorClass::Slow);
        assert!(e.quota_spent && !e.app_quota);
        let (c, _) = class_of(
            r#"{"error_response":{"code":10,"msg":"Service currently unavailable","sub_code":"isp.service-unavailable"}}"#,
        );
        assert_eq!(c, ErrorClass::Retry);
        let (c, _) = class_of(
            r#"{"error_response":{"code":15,"msg":"Remote service error","sub_code":"isp.remote-service-error"}}"#,
        );
        assert_eq!(c, ErrorClass::Retry);
        let (c, e) = class_of(
            r#"{"error_response":{"code":25,"msg":"Invalid signature","sub_code":"isv.invalid-signature"}}"#,
        );
        assert_eq!(c, ErrorClass::Fatal);
        assert!(e.to_string().contains("Invalid signature"), "{e}");
        for body in [
            r#"{"error_response":{"code":27,"msg":"Invalid session","sub_code":"isv.session-expired"}}"#,
            r#"{"error_response":{"code":29,"msg":"Invalid app Key","sub_code":"isv.appkey-not-exists"}}"#,
            r#"{"error_response":{"code":31,"msg":"Invalid timestamp","sub_code":"isv.invalid-timestamp"}}"#,
            r#"{"error_response":{"code":41,"msg":"Invalid arguments","sub_code":"isv.invalid-parameter"}}"#,
            r#"{"error_response":{"code":22,"msg":"Invalid method","sub_code":"isv.invalid-method"}}"#,
            r#"{"error_response":{"code":15,"msg":"Remote service error","sub_code":"isv.item-not-exist","sub_msg":"item not found"}}"#,
        ] {
            assert_eq!(class_of(body).0, ErrorClass::Fatal, "{body}");
        }
        let (c, _) = class_of(r#"{"error_response":{"code":"888","msg":"Something new"}}"#);
        assert_eq!(c, ErrorClass::Unknown);
        let (c, _) = class_of(r#"{"error_response":{"code":888,"msg":"调用过于频繁"}}"#);
        assert_eq!(c, ErrorClass::Slow);
    }

    #[test]
    fn bare_http_errors_and_odd_bodies() {
        let now = Utc::now();
        let e = check_body(
            Api::ItemGet,
            502,
            &Value::String("<html>bad gateway</html>".into()),
            now,
        )
        .unwrap_err();
        assert_eq!((e.class, e.http_status), (ErrorClass::Retry, Some(502)));
        let e = check_body(
            Api::ItemGet,
            200,
            &serde_json::json!({"other_response":{}}),
            now,
        )
        .unwrap_err();
        assert_eq!(e.class, ErrorClass::Unknown);
    }

    #[test]
    fn success_bodies_parse() {
        let item: Value = serde_json::from_str(r#"{"item_seller_get_response":{"item":{"num_iid":123,"title":"Mug","price":"12.50","num":7},"request_id":"r"}}"#).unwrap();
        check_body(Api::ItemGet, 200, &item, Utc::now()).unwrap();
        let r = parse_response(
            &ApiRequest::ItemGet {
                item_id: "123".into(),
            },
            &item,
        )
        .unwrap();
        assert_eq!(
            r,
            ApiResponse::Item(Item {
                id: "123".into(),
                title: "Mug".into(),
                price: "12.50".into(),
                quantity: 7,
                ..Item::default()
            })
        );
        let added: Value = serde_json::from_str(r#"{"item_add_response":{"item":{"num_iid":900000123,"created":"2026-01-01 12:00:00"},"request_id":"r"}}"#).unwrap();
        let req = ApiRequest::ItemAdd {
            item: Box::new(crate::platform::sample::new_item("k")),
        };
        assert_eq!(
            parse_response(&req, &added).unwrap(),
            ApiResponse::ItemAdded {
                item_id: "900000123".into()
            }
        );
        let page: Value = serde_json::from_str(r#"{"trades_sold_increment_get_response":{"total_results":250,"has_next":true,"trades":{"trade":[{"tid":1001,"status":"WAIT_BUYER_CONFIRM_GOODS","modified":"2026-01-01 10:00:00","payment":"99.00"}]}}}"#).unwrap();
        let start = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let req = ApiRequest::OrderList {
            start,
            end: start,
            page: 1,
            page_size: 100,
        };
        let ApiResponse::OrderPage(p) = parse_response(&req, &page).unwrap() else {
            panic!("not a page")
        };
        assert!(p.has_next);
        assert_eq!(p.total, Some(250));
        assert_eq!(p.orders[0].order_id, "1001");
        assert_eq!(
            p.orders[0].modified,
            Utc.with_ymd_and_hms(2026, 1, 1, 2, 0, 0).unwrap()
        );
        assert_eq!(p.orders[0].amount, "99.00");
        let empty: Value = serde_json::from_str(
            r#"{"trades_sold_increment_get_response":{"total_results":0,"has_next":false}}"#,
        )
        .unwrap();
        let ApiResponse::OrderPage(p) = parse_response(&req, &empty).unwrap() else {
            panic!("not a page")
        };
        assert!(p.orders.is_empty() && !p.has_next);
        let trace: Value = serde_json::from_str(r#"{"logistics_trace_search_response":{"tid":1001,"status":"对方已签收","trace_list":{"transit_step_info":[{"status_time":"2026-01-01 10:00:00","status_desc":"揽收","action":"TRANSPORT"},{"status_time":"2026-01-02 10:00:00","status_desc":"签收","action":"SIGNED"}]}}}"#).unwrap();
        let ApiResponse::Trace(t) = parse_response(
            &ApiRequest::LogisticsTrace {
                order_id: "1001".into(),
                tracking: None,
            },
            &trace,
        )
        .unwrap() else {
            panic!("not a trace")
        };
        assert!(t.signed);
        assert_eq!(t.events.len(), 2);
        assert_eq!(t.events[0].status, "TRANSPORT");
        assert_eq!(
            t.events[0].time_utc(),
            Some(Utc.with_ymd_and_hms(2026, 1, 1, 2, 0, 0).unwrap())
        );
        let moving: Value = serde_json::from_str(r#"{"logistics_trace_search_response":{"tid":1002,"status":"运输中","trace_list":{"transit_step_info":[{"status_time":"2026-01-01 10:00:00","status_desc":"…","action":"TRANSPORT"}]}}}"#).unwrap();
        let ApiResponse::Trace(t) = parse_response(
            &ApiRequest::LogisticsTrace {
                order_id: "1002".into(),
                tracking: None,
            },
            &moving,
        )
        .unwrap() else {
            panic!("not a trace")
        };
        assert!(!t.signed);
        // A body that lost its id is an Unknown error, not a silently empty item.
        let broken: Value =
            serde_json::from_str(r#"{"item_seller_get_response":{"item":{"title":"x"}}}"#).unwrap();
        let e = parse_response(
            &ApiRequest::ItemGet {
                item_id: "1".into(),
            },
            &broken,
        )
        .unwrap_err();
        assert_eq!(e.class, ErrorClass::Unknown);
    }

    #[test]
    fn a_limit_worded_by_an_unmapped_code_is_marked_guessed() {
        let now = chrono::Utc::now();
        let body = |code: u64, sub: &str, msg: &str| {
            serde_json::json!({"error_response": {"code": code, "msg": "Remote service error",
                "sub_code": sub, "sub_msg": msg}})
        };
        // An unmapped code whose words mention a limit: slow, but guessed.
        let e = check_body(
            Api::ItemAdd,
            200,
            &body(999, "isv.title-error", "title length exceeds 60"),
            now,
        )
        .unwrap_err();
        assert_eq!(e.class, ErrorClass::Slow);
        assert!(e.guessed_limit && !e.is_rate_limit(), "{e:?}");
        // TOP's own limit code: a rate limit.
        let e = check_body(
            Api::ItemAdd,
            200,
            &body(
                7,
                "accesscontrol.limited-by-api-access-count",
                "This ban will last for 1 more seconds",
            ),
            now,
        )
        .unwrap_err();
        assert!(!e.guessed_limit && e.is_rate_limit(), "{e:?}");
        // Words of a limit that name a ban are taken at their word.
        let e = check_body(
            Api::ItemAdd,
            200,
            &body(
                999,
                "isv.x",
                "call limit exceeded, ban will last for 3 more seconds",
            ),
            now,
        )
        .unwrap_err();
        assert!(!e.guessed_limit && e.is_rate_limit(), "{e:?}");
    }
}
