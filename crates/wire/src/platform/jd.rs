//! JD JOS: the signed form (`/routerjson`, business params as `360buy_param_json`) and its
//! `..._responce` bodies (docs/wire-formats.md).

use super::classify::{
    http_class, jd_known, jd_session_refused, keyword_class, or_keywords, CallError,
};
use super::delivery::text_says_signed;
use super::json::{array, boolean, find_key, joined, text, text_or_empty, uint};
use super::model::{format_china_time, parse_china_time, Unreadable};
use super::sign::jd_sign;
use super::wire::{JD_FOUND_FIELDS, JD_ORDER_FIELDS, JD_ORDER_STATES};
use super::{
    Api, ApiRequest, ApiResponse, Credentials, Item, NewItem, Order, OrderPage, Platform, Trace,
    TraceEvent,
};
use crate::time::china_offset;
use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

const P: Platform = Platform::Jd;

/// The form field that carries every business param as one JSON object.
pub const PARAM_JSON: &str = "360buy_param_json";

/// `jingdong.ware.write.add`'s `{"ware":{...},"skus":[...]}` (docs/wire-formats.md,
/// "Writes"): the seller's code as the ware's `outerId` and `itemNum` (the one a search can
/// find), every SKU with its sale attributes, price and stock. A product without variants is
/// one SKU without sale attributes. No `wareStatus`: the ware is not put on sale before its
/// pictures are in JD's image space (docs/design.md, "The listing map").
fn ware_write(item: &NewItem) -> Value {
    let attrs = |props: &[(String, String)]| -> Vec<Value> {
        props
            .iter()
            .enumerate()
            .map(
                |(i, (attr, value))| json!({"attrId": attr, "attrValues": [value], "index": i + 1}),
            )
            .collect()
    };
    let skus: Vec<Value> = if item.skus.is_empty() {
        vec![json!({
            "jdPrice": item.price, "stockNum": item.quantity, "outerId": item.seller_code,
        })]
    } else {
        item.skus
            .iter()
            .map(|s| {
                json!({
                    "saleAttrs": attrs(&s.props),
                    "jdPrice": s.price,
                    "stockNum": s.quantity,
                    "outerId": s.seller_code,
                })
            })
            .collect()
    };
    let props: Vec<Value> = item
        .props
        .iter()
        .map(|(attr, value)| json!({"attrId": attr, "attrValues": [value]}))
        .collect();
    json!({
        "ware": {
            "title": item.title,
            "categoryId": item.category,
            "outerId": item.seller_code,
            "itemNum": item.seller_code,
            "jdPrice": item.price,
            "introduction": item.description,
            "props": props,
        },
        "skus": skus,
    })
}

/// The business params of a typed request: one `360buy_param_json` pair.
pub fn business_params(req: &ApiRequest) -> Vec<(String, String)> {
    let obj = match req {
        ApiRequest::ItemGet { item_id } => json!({ "wareId": item_id }),
        ApiRequest::ItemAdd { item } => ware_write(item),
        // JD finds no ware by `outerId`; `itemNum` (货号), which the write sets to the same
        // code, is searchable.
        ApiRequest::ItemFind { seller_code } => json!({
            "itemNum": seller_code,
            "field": JD_FOUND_FIELDS,
        }),
        ApiRequest::OrderList {
            start,
            end,
            page,
            page_size,
        } => json!({
            "start_date": format_china_time(*start),
            "end_date": format_china_time(*end),
            // Both required: without them JD refuses the call.
            "order_state": JD_ORDER_STATES,
            "optional_fields": JD_ORDER_FIELDS,
            // 0: the window is of modification times; 1: newest first, as the walk reads it.
            "dateType": "0",
            "sortType": "1",
            "page": page.to_string(),
            "page_size": page_size.to_string(),
        }),
        // The carrier's waybill number, which the order list gave; never the order id.
        ApiRequest::LogisticsTrace { tracking, .. } => json!({ "waybillCode": tracking }),
        // Not offered (`Api::offered_by`): the client refuses before building it.
        ApiRequest::LogisticsInfo { .. }
        | ApiRequest::MessageConsume { .. }
        | ApiRequest::MessageConfirm { .. } => json!({}),
    };
    vec![(PARAM_JSON.to_string(), obj.to_string())]
}

/// `360buy_param_json` of raw params: given verbatim, or the pairs as a JSON object of strings.
fn param_json(business: &[(String, String)]) -> String {
    if let Some((_, v)) = business.iter().find(|(k, _)| k == PARAM_JSON) {
        return v.clone();
    }
    let obj: Map<String, Value> = business
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    Value::Object(obj).to_string()
}

/// System params + `360buy_param_json` + `sign`, ready to post as a form. Exactly what JD's
/// SDK sends, all of it signed: `format` and `sign_method` are not sent (md5 is the default).
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
                .format("%Y-%m-%d %H:%M:%S%.3f%z")
                .to_string(),
        ),
        ("v".into(), "2.0".into()),
        (PARAM_JSON.into(), param_json(business)),
    ];
    if let Some(token) = &creds.session {
        form.push(("access_token".into(), token.expose().to_string()));
    }
    let sign = jd_sign(
        creds.secret.expose(),
        form.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    );
    form.push(("sign".into(), sign));
    form
}

/// `jingdong.ware.read.findWareById` → `jingdong_ware_read_findWareById_responce`.
pub fn response_key(api: Api) -> String {
    format!("{}_responce", api.method(P).replace('.', "_"))
}

const MESSAGE_KEYS: [&str; 3] = ["en_desc", "zh_desc", "msg"];

fn platform_error(api: Api, err: &Value, status: u16, now: DateTime<Utc>) -> CallError {
    let code = text(err, "code").unwrap_or_else(|| "?".into());
    let all = joined(err, &MESSAGE_KEYS);
    let (class, guessed) = or_keywords(jd_known(&code), &all);
    let refused = jd_session_refused(&code);
    CallError::platform(P, api, class, code, &all, &all, Some(status), now)
        .limit_guessed(guessed)
        .session_refused(refused)
}

/// Errors of a body: `error_response`, a non-zero `code` inside the response, or a
/// business failure (`apiResult.success=false`, Unknown unless its text says limit).
pub fn check_body(
    api: Api,
    status: u16,
    body: &Value,
    now: DateTime<Utc>,
) -> Result<(), CallError> {
    if let Some(err) = body.get("error_response") {
        return Err(platform_error(api, err, status, now));
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
    let key = response_key(api);
    let Some(r) = body.get(&key) else {
        return Err(CallError::parse(
            P,
            api,
            status,
            format!("no `{key}` in the body"),
        ));
    };
    if text(r, "code").is_some_and(|c| c != "0") {
        return Err(platform_error(api, r, status, now));
    }
    // A business failure: `apiResult{success:false, englishErrCode, chineseErrCode,
    // numberCode}` inside the answer.
    if let Some(result) = find_key(r, "apiResult", 2) {
        if boolean(result, "success") == Some(false) {
            let code = text(result, "numberCode")
                .or_else(|| text(result, "englishErrCode"))
                .unwrap_or_else(|| "apiResult".into());
            let msg = joined(result, &["englishErrCode", "chineseErrCode"]);
            let class = keyword_class(&msg);
            return Err(
                CallError::platform(P, api, class, code, &msg, &msg, Some(status), now)
                    .limit_guessed(true),
            );
        }
    }
    Ok(())
}

fn missing(api: Api, what: &str) -> CallError {
    CallError::missing_field(P, api, what)
}

/// The typed response of a success body (after [`check_body`]).
pub fn parse_response(req: &ApiRequest, body: &Value) -> Result<ApiResponse, CallError> {
    let api = req.api();
    let key = response_key(api);
    let r = body.get(&key).ok_or_else(|| missing(api, &key))?;
    match req {
        ApiRequest::ItemGet { .. } => {
            let ware = r.get("ware").ok_or_else(|| missing(api, "ware"))?;
            let images = array(ware, "images")
                .iter()
                .filter_map(|i| text(i, "imgUrl"))
                .collect();
            Ok(ApiResponse::Item(Item {
                id: text(ware, "wareId").ok_or_else(|| missing(api, "ware.wareId"))?,
                title: text_or_empty(ware, "title"),
                price: text_or_empty(ware, "jdPrice"),
                quantity: uint(ware, "stockNum").unwrap_or(0).min(u32::MAX as u64) as u32,
                category: text_or_empty(ware, "categoryId"),
                attributes: Vec::new(),
                skus: Vec::new(),
                images,
                description: text_or_empty(ware, "introduction"),
            }))
        }
        ApiRequest::ItemFind { .. } => {
            let data = r.get("page").map(|p| array(p, "data")).unwrap_or(&[]);
            let item_ids = data
                .iter()
                .map(|w| text(w, "wareId").ok_or_else(|| missing(api, "page.data.wareId")))
                .collect::<Result<_, _>>()?;
            Ok(ApiResponse::Found { item_ids })
        }
        ApiRequest::ItemAdd { .. } => {
            let id = r
                .get("ware")
                .and_then(|w| text(w, "wareId"))
                .ok_or_else(|| missing(api, "ware.wareId"))?;
            Ok(ApiResponse::ItemAdded { item_id: id })
        }
        ApiRequest::OrderList {
            page, page_size, ..
        } => {
            let result = r
                .get("searchorderinfo_result")
                .ok_or_else(|| missing(api, "searchorderinfo_result"))?;
            let mut orders = Vec::new();
            let mut unreadable = Vec::new();
            for o in array(result, "orderInfoList") {
                match order_info(o) {
                    Ok(Some(order)) => orders.push(order),
                    Ok(None) => return Err(missing(api, "orderInfoList.orderId")),
                    Err(bad) => unreadable.push(bad),
                }
            }
            let total = uint(result, "orderTotal");
            // JD has no has_next: there is more while page x page_size < orderTotal.
            let seen = u64::from(*page) * u64::from(*page_size);
            Ok(ApiResponse::OrderPage(OrderPage {
                orders,
                unreadable,
                has_next: total.is_some_and(|t| seen < t),
                total,
            }))
        }
        ApiRequest::LogisticsTrace { order_id, .. } => {
            let data = array(r, "trace_api_dtos");
            let events: Vec<TraceEvent> = data
                .iter()
                .map(|d| TraceEvent {
                    time: text_or_empty(d, "ope_time"),
                    status: text_or_empty(d, "ope_title"),
                    description: text_or_empty(d, "ope_remark"),
                })
                .collect();
            // Delivery by the last step's title (妥投) or remark; JD documents no list of titles.
            let signed = events
                .last()
                .is_some_and(|e| text_says_signed(&e.status) || text_says_signed(&e.description));
            Ok(ApiResponse::Trace(Trace {
                order_id: order_id.clone(),
                events,
                signed,
            }))
        }
        ApiRequest::LogisticsInfo { .. }
        | ApiRequest::MessageConsume { .. }
        | ApiRequest::MessageConfirm { .. } => Err(CallError::not_offered(P, api)),
    }
}

/// One order of an order list; `Ok(None)` without an `orderId`, `Err` when its time cannot be
/// read (the entry is quarantined, and `syncfleet quarantine replay` reads it again here).
pub(super) fn order_info(o: &Value) -> Result<Option<Order>, Unreadable> {
    let Some(modified) = text(o, "modified").and_then(|m| parse_china_time(&m)) else {
        return Err(Unreadable::entry(o, "orderId", "modified"));
    };
    Ok(text(o, "orderId").map(|order_id| Order {
        order_id,
        status: text_or_empty(o, "orderState"),
        modified,
        amount: text_or_empty(o, "orderTotalPrice"),
        tracking: text(o, "waybill").filter(|w| !w.trim().is_empty()),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::sign::SignMethod;
    use crate::platform::ErrorClass;
    use crate::secret::Secret;
    use chrono::TimeZone;
    use std::time::Duration;

    fn creds() -> Credentials {
        Credentials {
            app_key: "yourappkey".into(),
            secret: Secret::new("yourappSecret"),
            session: Some(Secret::new("yourtoken")),
            sign_method: SignMethod::Md5,
        }
    }

    fn get<'a>(form: &'a [(String, String)], k: &str) -> Option<&'a str> {
        form.iter().find(|(fk, _)| fk == k).map(|(_, v)| v.as_str())
    }

    fn class_of(status: u16, body: &str) -> CallError {
        let now = Utc.with_ymd_and_hms(2026, 1, 1, 4, 0, 0).unwrap();
        let v: Value = serde_json::from_str(body).unwrap();
        check_body(Api::OrderList, status, &v, now).unwrap_err()
    }

    #[test]
    fn form_reproduces_the_published_vector() {
        // 2021-05-07 09:20:39.683 GMT+8 = 01:20:39.683 UTC.
        let now = Utc.with_ymd_and_hms(2021, 5, 7, 1, 20, 39).unwrap()
            + chrono::Duration::milliseconds(683);
        let pj = r#"{"end_date":null,"optional_fields":null,"order_state":"WAIT_SELLER_STOCK_OUT","page":"1","page_size":"200","start_date":null}"#;
        let form = signed_form(
            &creds(),
            Api::OrderList,
            &[(PARAM_JSON.into(), pj.into())],
            now,
        );
        assert_eq!(
            get(&form, "timestamp"),
            Some("2021-05-07 09:20:39.683+0800")
        );
        assert_eq!(get(&form, "method"), Some("jingdong.pop.order.search"));
        assert_eq!(get(&form, "access_token"), Some("yourtoken"));
        assert_eq!(get(&form, "sign"), Some("D70825340F4084360B9362B60DFD7930"));
    }

    #[test]
    fn typed_and_raw_params_become_param_json() {
        let p = business_params(&ApiRequest::ItemAdd {
            item: Box::new(crate::platform::sample::new_item("SF1688-1")),
        });
        let v: Value = serde_json::from_str(get(&p, PARAM_JSON).unwrap()).unwrap();
        // `{"ware":{...},"skus":[...]}`: the code as outerId and itemNum, one SKU.
        assert_eq!(v["ware"]["title"], "Mug");
        assert_eq!(v["ware"]["categoryId"], "50003948");
        assert_eq!(v["ware"]["itemNum"], "SF1688-1");
        assert_eq!(v["ware"]["outerId"], "SF1688-1");
        assert_eq!(v["skus"][0]["jdPrice"], "12.50");
        assert_eq!(v["skus"][0]["stockNum"], 7);
        let p = business_params(&ApiRequest::ItemFind {
            seller_code: "SF1688-1".into(),
        });
        let v: Value = serde_json::from_str(get(&p, PARAM_JSON).unwrap()).unwrap();
        assert_eq!(v["itemNum"], "SF1688-1");
        let start = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let p = business_params(&ApiRequest::OrderList {
            start,
            end: start,
            page: 3,
            page_size: 50,
        });
        let v: Value = serde_json::from_str(get(&p, PARAM_JSON).unwrap()).unwrap();
        assert_eq!(v["start_date"], "2026-01-01 08:00:00");
        assert_eq!(v["page"], "3");
        let raw = signed_form(
            &creds(),
            Api::ItemGet,
            &[("wareId".into(), "123".into())],
            start,
        );
        assert_eq!(get(&raw, PARAM_JSON), Some(r#"{"wareId":"123"}"#));
    }

    #[test]
    fn error_bodies_of_every_class() {
        let e = class_of(
            200,
            r#"{"error_response":{"code":"2","zh_desc":"调用受限","en_desc":"App call limited, this ban will last for 3 more seconds"}}"#,
        );
        assert_eq!(
            (e.class, e.ban),
            (ErrorClass::Slow, Some(Duration::from_secs(3)))
        );
        for c in ["66", "67"] {
            let e = class_of(
                200,
                &format!(
                    r#"{{"error_response":{{"code":"{c}","zh_desc":"服务繁忙","en_desc":"service busy"}}}}"#
                ),
            );
            assert_eq!(e.class, ErrorClass::Retry, "{c}");
        }
        for c in ["19", "14", "20", "60", "22"] {
            let e = class_of(
                200,
                &format!(
                    r#"{{"error_response":{{"code":"{c}","zh_desc":"无效","en_desc":"invalid"}}}}"#
                ),
            );
            assert_eq!(e.class, ErrorClass::Fatal, "{c}");
        }
        let e = class_of(
            200,
            r#"{"jingdong_pop_order_search_responce":{"code":"0","searchorderinfo_result":{"apiResult":{"success":false,"englishErrCode":"shop closed","chineseErrCode":"店铺已关闭","numberCode":100},"orderTotal":0}}}"#,
        );
        assert_eq!((e.class, e.code.as_str()), (ErrorClass::Unknown, "100"));
        let e = class_of(
            200,
            r#"{"jingdong_pop_order_search_responce":{"code":"0","searchorderinfo_result":{"apiResult":{"success":false,"englishErrCode":"too frequent","chineseErrCode":"查询过于频繁","numberCode":7}}}}"#,
        );
        assert_eq!(e.class, ErrorClass::Slow);
        let e = class_of(
            200,
            r#"{"error_response":{"code":"5000","zh_desc":"新错误","en_desc":"brand new"}}"#,
        );
        assert_eq!(e.class, ErrorClass::Unknown);
        let e = class_of(503, r#""Service Unavailable""#);
        assert_eq!(e.class, ErrorClass::Retry);
    }

    #[test]
    fn success_bodies_parse() {
        let ok = |api: Api, s: &str| {
            let v: Value = serde_json::from_str(s).unwrap();
            check_body(api, 200, &v, Utc::now()).unwrap();
            v
        };
        let item = ok(
            Api::ItemGet,
            r#"{"jingdong_ware_read_findWareById_responce":{"code":"0","ware":{"wareId":123,"title":"Mug","jdPrice":"12.50","stockNum":7}}}"#,
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
                price: "12.50".into(),
                quantity: 7,
                ..Item::default()
            })
        );
        let added = ok(
            Api::ItemAdd,
            r#"{"jingdong_ware_write_add_responce":{"code":"0","ware":{"wareId":900000123}}}"#,
        );
        let req = ApiRequest::ItemAdd {
            item: Box::new(crate::platform::sample::new_item("k")),
        };
        assert_eq!(
            parse_response(&req, &added).unwrap(),
            ApiResponse::ItemAdded {
                item_id: "900000123".into()
            }
        );
        let page = ok(
            Api::OrderList,
            r#"{"jingdong_pop_order_search_responce":{"code":"0","searchorderinfo_result":{"apiResult":{"success":true},"orderTotal":250,"orderInfoList":[{"orderId":"1001","orderState":"WAIT_GOODS_RECEIVE_CONFIRM","modified":"2026-01-01 10:00:00","orderTotalPrice":"99.00"}]}}}"#,
        );
        let start = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let page_n = |page| ApiRequest::OrderList {
            start,
            end: start,
            page,
            page_size: 100,
        };
        let ApiResponse::OrderPage(p) = parse_response(&page_n(2), &page).unwrap() else {
            panic!()
        };
        assert!(p.has_next, "200 < 250");
        assert_eq!(
            (
                p.total,
                p.orders[0].order_id.as_str(),
                p.orders[0].amount.as_str()
            ),
            (Some(250), "1001", "99.00")
        );
        let ApiResponse::OrderPage(p) = parse_response(&page_n(3), &page).unwrap() else {
            panic!()
        };
        assert!(!p.has_next, "300 >= 250");
        let trace = ok(
            Api::LogisticsTrace,
            r#"{"jingdong_etms_trace_get_responce":{"code":"0","trace_api_dtos":[{"ope_time":"2026-01-01 10:00:00","ope_remark":"到达","ope_title":"运输中","ope_name":"张三"},{"ope_time":"2026-01-02 10:00:00","ope_remark":"本人签收","ope_title":"妥投","ope_name":"张三"}]}}"#,
        );
        let ApiResponse::Trace(t) = parse_response(
            &ApiRequest::LogisticsTrace {
                order_id: "1001".into(),
                tracking: Some("JDVA00000001001".into()),
            },
            &trace,
        )
        .unwrap() else {
            panic!()
        };
        assert!(t.signed);
        assert_eq!(
            (
                t.order_id.as_str(),
                t.events.len(),
                t.events[0].status.as_str()
            ),
            ("1001", 2, "运输中")
        );
    }
}
