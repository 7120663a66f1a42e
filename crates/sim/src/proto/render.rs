//! The platforms' answers: success bodies of each API and the error body of every failure
//! (docs/wire-formats.md).

use super::execute::Asked;
use super::{gmt8, parcel, Answer, Failure, TOP_TIME};
use crate::data::{self, AddOutcome, ItemData, OrderData, OrderState, StepKind, TraceStep};
use crate::live::{self, Delivery};
use crate::platform::{Api, Platform};
use crate::state::Sim;
use axum::http::StatusCode;
use serde_json::{json, Value};

fn jd_key(api: Api) -> String {
    format!("{}_responce", api.method(Platform::Jd).replace('.', "_"))
}

/// TOP's property ids the simulator's Taobao items carry (`props_name`, SKU
/// `properties_name`): the attribute or spec name → pid. Values get vid 100 + their index.
const TOP_PIDS: [(&str, u64); 4] = [
    ("颜色", 1_627_207),
    ("尺码", 20_509),
    ("材质", 20_021),
    ("产地", 20_000),
];

fn top_pair(name: &str, value: &str) -> String {
    let pid = TOP_PIDS
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(0, |(_, p)| *p);
    let vid = 100 + value.bytes().map(u64::from).sum::<u64>() % 1000;
    format!("{pid}:{vid}:{name}:{value}")
}

/// A 1688 price as its answers give it: a JSON number (`40.0`).
fn yuan(cents: u64) -> Value {
    json!(cents as f64 / 100.0)
}

pub(super) fn render_item(p: Platform, item: &ItemData, rid: impl Fn() -> String) -> Value {
    let price = data::format_price(item.price_cents);
    let image_url = |path: &String| format!("https://cbu01.alicdn.com/{path}");
    match p {
        Platform::Taobao => {
            let pairs = |specs: &[(&str, &str)]| {
                specs
                    .iter()
                    .map(|(n, v)| top_pair(n, v))
                    .collect::<Vec<_>>()
                    .join(";")
            };
            let skus: Vec<Value> = item
                .skus
                .iter()
                .map(|s| {
                    json!({"sku_id": s.id, "properties_name": pairs(&s.specs),
                        "price": data::format_price(s.price_cents), "quantity": s.quantity})
                })
                .collect();
            let mut item_json = json!({"num_iid": item.id, "title": item.title, "price": price,
                "num": item.quantity, "cid": item.category, "props_name": pairs(&item.attributes),
                "desc": item.description,
                "pic_url": item.images.first().map(image_url),
                "item_imgs": {"item_img": item.images.iter().enumerate()
                    .map(|(i, path)| json!({"url": image_url(path), "position": i}))
                    .collect::<Vec<_>>()}});
            if !skus.is_empty() {
                item_json["skus"] = json!({ "sku": skus });
            }
            json!({"item_seller_get_response": {"item": item_json, "request_id": rid()}})
        }
        Platform::Jd => json!({jd_key(Api::ItemGet): {"code": "0",
            "ware": {"wareId": item.id, "title": item.title, "jdPrice": price,
                "stockNum": item.quantity, "categoryId": item.category,
                "introduction": item.description,
                "images": item.images.iter().enumerate()
                    .map(|(i, path)| json!({"imgUrl": image_url(path), "imgIndex": i + 1}))
                    .collect::<Vec<_>>()}}}),
        // `alibaba.fenxiao.productInfo.get`: relative image paths, numbers for prices.
        Platform::Alibaba => {
            let skus: Vec<Value> = item
                .skus
                .iter()
                .map(|s| {
                    json!({"skuId": s.id, "specId": format!("{:032x}", s.id),
                        "amountOnSale": s.quantity, "price": yuan(s.price_cents + s.price_cents / 10),
                        "consignPrice": yuan(s.price_cents),
                        "attributes": s.specs.iter().map(|(n, v)| json!({
                            "attributeID": 3216, "attributeName": n, "attributeValue": v,
                            "attributeDisplayName": n})).collect::<Vec<_>>()})
                })
                .collect();
            json!({"success": true, "productInfo": {"productID": item.id,
                "productType": "wholesale", "categoryID": item.category,
                "subject": item.title, "description": item.description, "status": "published",
                "productImage": {"images": item.images},
                "productAttribute": item.attributes.iter().map(|(n, v)| json!({
                    "attributeID": 100_031_521, "attributeName": n, "value": v,
                    "isCustom": false})).collect::<Vec<_>>(),
                "productSkuInfos": skus,
                "productSaleInfo": {"amountOnSale": item.quantity, "unit": "件",
                    "consignPrice": yuan(item.price_cents),
                    "priceRanges": [{"startQuantity": 1, "price": yuan(item.price_cents + item.price_cents / 10)}]}}})
        }
    }
}

pub(super) fn render_added(p: Platform, out: AddOutcome, rid: impl Fn() -> String) -> Value {
    match p {
        Platform::Taobao => json!({"item_add_response": {
            "item": {"num_iid": out.id, "created": gmt8(out.created, TOP_TIME)}, "request_id": rid()}}),
        // JD puts the SKUs into the ware it answers ("返回时会将skus放入ware对象").
        Platform::Jd => json!({jd_key(Api::ItemAdd): {"code": "0", "ware": {"wareId": out.id}}}),
        Platform::Alibaba => json!({"result": {"success": true, "productID": out.id}}),
    }
}

/// `item_find`'s answer: the products carrying the code (TOP leaves `items` out when none
/// do; JD answers an empty page).
pub(super) fn render_found(
    p: Platform,
    code: &str,
    ids: &[u64],
    rid: impl Fn() -> String,
) -> Value {
    match p {
        Platform::Taobao if ids.is_empty() => {
            json!({"items_custom_get_response": {"request_id": rid()}})
        }
        Platform::Taobao => json!({"items_custom_get_response": {"items": {"item":
            ids.iter().map(|id| json!({"num_iid": id, "outer_id": code})).collect::<Vec<_>>()},
            "request_id": rid()}}),
        _ => json!({jd_key(Api::ItemFind): {"code": "0", "page": {"data":
            ids.iter().map(|id| json!({"wareId": id, "itemNum": code, "outerId": code})).collect::<Vec<_>>(),
            "pageNo": 1, "pageSize": 20, "totalItem": ids.len()}}}),
    }
}

/// How platform `p` spells order state `s` (TOP `WAIT_SELLER_SEND_GOODS`, JD
/// `WAIT_SELLER_STOCK_OUT`, 1688 `waitsellersend`, ...).
pub fn order_status(p: Platform, s: OrderState) -> &'static str {
    match (p, s) {
        (Platform::Taobao, OrderState::Unshipped) => "WAIT_SELLER_SEND_GOODS",
        (Platform::Taobao, OrderState::Shipped) => "WAIT_BUYER_CONFIRM_GOODS",
        (Platform::Taobao, OrderState::Signed) => "TRADE_FINISHED",
        (Platform::Jd, OrderState::Unshipped) => "WAIT_SELLER_STOCK_OUT",
        (Platform::Jd, OrderState::Shipped) => "WAIT_GOODS_RECEIVE_CONFIRM",
        (Platform::Jd, OrderState::Signed) => "FINISHED_L",
        (Platform::Alibaba, OrderState::Unshipped) => "waitsellersend",
        (Platform::Alibaba, OrderState::Shipped) => "waitbuyerreceive",
        (Platform::Alibaba, OrderState::Signed) => "success",
        (Platform::Taobao, OrderState::Created) => "WAIT_BUYER_PAY",
        (Platform::Taobao, OrderState::Closed) => "TRADE_CLOSED_BY_TAOBAO",
        (Platform::Taobao, OrderState::Refunded) => "TRADE_CLOSED",
        (Platform::Jd, OrderState::Created) => "WAIT_PAY",
        (Platform::Jd, OrderState::Closed | OrderState::Refunded) => "TRADE_CANCELED",
        (Platform::Alibaba, OrderState::Created) => "waitbuyerpay",
        (Platform::Alibaba, OrderState::Closed) => "cancel",
        (Platform::Alibaba, OrderState::Refunded) => "terminated",
    }
}

/// Whether the record `id` is sent with an unreadable time under a drill's
/// `malformed_ratio`: the same ids every time.
pub fn malformed(id: u64, ratio: f64) -> bool {
    ratio > 0.0 && (id % 1000) < (ratio * 1000.0).round() as u64
}

/// A time as the platform writes it, or an unreadable one for a malformed record.
fn time_or_bad(id: u64, ratio: f64, t: i64, format: &str) -> String {
    if malformed(id, ratio) {
        "0000-00-00 unreadable".into()
    } else {
        gmt8(t, format)
    }
}

pub(super) fn render_orders(
    p: Platform,
    page: &[OrderData],
    total: usize,
    has_next: bool,
    asked: &Asked,
    malformed_ratio: f64,
    rid: impl Fn() -> String,
) -> Value {
    let shipped = |o: &OrderData| matches!(o.state, OrderState::Shipped | OrderState::Signed);
    let modified =
        |o: &OrderData, format: &str| time_or_bad(o.id, malformed_ratio, o.modified, format);
    match p {
        Platform::Taobao => {
            let trades: Vec<Value> = page
                .iter()
                .map(|o| {
                    only(asked, json!({"tid": o.id, "status": order_status(p, o.state),
                        "modified": modified(o, TOP_TIME), "payment": data::format_price(o.amount_cents),
                        "type": "fixed", "shipping_type": "express"}))
                })
                .collect();
            // `use_has_next=true` answers `has_next` and drops `total_results`; an empty list
            // is a missing key.
            let mut r = if asked.use_has_next {
                json!({"has_next": has_next, "request_id": rid()})
            } else {
                json!({"total_results": total, "request_id": rid()})
            };
            if !trades.is_empty() {
                r["trades"] = json!({"trade": trades});
            }
            json!({"trades_sold_increment_get_response": r})
        }
        Platform::Jd => {
            let list: Vec<Value> = page
                .iter()
                .map(|o| {
                    let mut v = json!({"orderId": o.id.to_string(), "orderState": order_status(p, o.state),
                        "modified": modified(o, TOP_TIME), "orderTotalPrice": data::format_price(o.amount_cents),
                        "venderId": "10001", "orderType": "22"});
                    if shipped(o) {
                        v["waybill"] = json!(parcel::jd_waybill(o.id));
                        v["logisticsId"] = json!("2087");
                    }
                    only(asked, v)
                })
                .collect();
            json!({jd_key(Api::OrderList): {"code": "0", "searchorderinfo_result": {
                "apiResult": {"success": true},
                "orderTotal": total, "orderInfoList": list}}})
        }
        Platform::Alibaba => {
            let list: Vec<Value> = page
                .iter()
                .map(|o| {
                    // Basic order data only: no parcel ids (1688's own words: for logistics,
                    // call another API). Amounts are JSON numbers in yuan.
                    json!({"baseInfo": {"id": o.id, "idOfStr": o.id.to_string(),
                        "status": order_status(p, o.state),
                        "modifyTime": modified(o, "%Y%m%d%H%M%S000+0800"),
                        "totalAmount": o.amount_cents as f64 / 100.0},
                        "nativeLogistics": {"province": "浙江省", "city": "杭州市"}})
                })
                .collect();
            json!({"result": list, "totalRecord": total})
        }
    }
}

/// Keep only the fields a list call asked for (all of them when it named none).
fn only(asked: &Asked, mut record: Value) -> Value {
    if let (Some(fields), Some(m)) = (&asked.fields, record.as_object_mut()) {
        m.retain(|k, _| fields.iter().any(|f| f == k));
    }
    record
}

/// 1688's `getLogisticsInfos.sellerView`: the order's parcel with its state (`SIGN` once
/// signed for); none before it ships.
pub(super) fn render_parcels(order: &OrderData, steps: &[TraceStep]) -> Value {
    let status = match steps.last().map(|s| s.kind) {
        None => return json!({"result": []}),
        Some(StepKind::Signed) => "SIGN",
        Some(StepKind::Got) => "ACCEPT",
        Some(StepKind::Transport) => "TRANSPORT",
    };
    json!({"result": [{
        "logisticsId": parcel::alibaba_logistics_id(order.id),
        "orderEntryIds": format!("{}", order.id),
        "status": status}]})
}

/// TOP's answer to `taobao.tmc.messages.consume`: each message's `content` is a JSON text.
pub(super) fn render_messages(
    got: &[Delivery],
    malformed_ratio: f64,
    rid: impl Fn() -> String,
) -> Value {
    let p = Platform::Taobao;
    let list: Vec<Value> = got
        .iter()
        .map(|d| {
            let content = json!({"tid": d.order.id, "status": order_status(p, d.order.state),
                "payment": data::format_price(d.order.amount_cents)});
            json!({"id": d.id, "topic": live::topic(d.order.state),
                "pub_time": time_or_bad(d.id, malformed_ratio, d.order.modified, TOP_TIME),
                "user_nick": d.shop,
                "content": content.to_string()})
        })
        .collect();
    json!({"tmc_messages_consume_response": {"messages": {"tmc_message": list}, "request_id": rid()}})
}

pub(super) fn render_trace(
    p: Platform,
    order: &OrderData,
    steps: &[TraceStep],
    rid: impl Fn() -> String,
) -> Value {
    let signed = steps.last().is_some_and(|s| s.kind == StepKind::Signed);
    match p {
        Platform::Taobao => {
            let list: Vec<Value> = steps
                .iter()
                .map(|s| {
                    let action = match s.kind {
                        StepKind::Got => "GOT",
                        StepKind::Transport => "TRANSPORT",
                        StepKind::Signed => "SIGNED",
                    };
                    json!({"status_time": gmt8(s.at, TOP_TIME), "status_desc": s.remark, "action": action})
                })
                .collect();
            // An offline-shipped parcel reads "对方已签收" from the moment it ships.
            let status = if signed || (!steps.is_empty() && parcel::top_offline_shipped(order.id)) {
                "对方已签收"
            } else if steps.is_empty() {
                "等待揽收"
            } else {
                "运输中"
            };
            json!({"logistics_trace_search_response": {"tid": order.id, "status": status,
                "trace_list": {"transit_step_info": list}, "request_id": rid()}})
        }
        Platform::Jd => {
            let list: Vec<Value> = steps
                .iter()
                .map(|s| {
                    let title = match s.kind {
                        StepKind::Got => "揽收",
                        StepKind::Transport => "运输中",
                        StepKind::Signed => "妥投",
                    };
                    json!({"ope_time": gmt8(s.at, TOP_TIME), "ope_remark": s.remark,
                        "ope_title": title, "ope_name": "配送员"})
                })
                .collect();
            let mut r = json!({"code": "0"});
            if !list.is_empty() {
                r["trace_api_dtos"] = json!(list);
            }
            json!({jd_key(Api::LogisticsTrace): r})
        }
        Platform::Alibaba => {
            // A step is its time and the carrier's remark, nothing more.
            let list: Vec<Value> = steps
                .iter()
                .map(|s| json!({"acceptTime": gmt8(s.at, TOP_TIME), "remark": s.remark}))
                .collect();
            let traces = if list.is_empty() {
                json!([])
            } else {
                json!([{"logisticsId": parcel::alibaba_logistics_id(order.id),
                    "orderId": order.id, "logisticsSteps": list}])
            };
            json!({"logisticsTrace": traces})
        }
    }
}

/// The platform's own error for `f` (docs/wire-formats.md).
pub fn render_failure(sim: &Sim, p: Platform, api: Option<Api>, f: &Failure) -> Answer {
    match p {
        Platform::Taobao => {
            let (code, msg, sub_code, sub_msg): (u32, &str, &str, String) = match f {
                // An API's own limit (per second, or its day) and the app key's daily count.
                Failure::Limited(s) | Failure::QuotaSpent(s) => (
                    7,
                    "App Call Limited",
                    "accesscontrol.limited-by-api-access-count",
                    format!("This ban will last for {s} more seconds"),
                ),
                Failure::AppQuotaSpent(s) => (
                    7,
                    "App Call Limited",
                    "accesscontrol.limited-by-app-access-count",
                    format!("This ban will last for {s} more seconds"),
                ),
                Failure::Busy => (
                    10,
                    "Service Currently Unavailable",
                    "isp.service-unavailable",
                    "The service is temporarily unavailable".into(),
                ),
                Failure::Signature => (
                    25,
                    "Invalid signature",
                    "isv.invalid-signature",
                    "Invalid signature".into(),
                ),
                Failure::Session => (
                    27,
                    "Invalid session",
                    "isv.session-expired",
                    "Invalid session".into(),
                ),
                Failure::AppKey => (
                    29,
                    "Invalid app Key",
                    "isv.appkey-not-exists",
                    "Invalid app Key".into(),
                ),
                Failure::Timestamp => (
                    31,
                    "Invalid timestamp",
                    "isv.invalid-timestamp",
                    "timestamp missing, malformed or out of the allowed skew".into(),
                ),
                Failure::Missing(k) => (
                    40,
                    "Missing required arguments",
                    "isv.missing-parameter",
                    format!("Missing required arguments:{k}"),
                ),
                Failure::Invalid(k) => (
                    41,
                    "Invalid arguments",
                    "isv.invalid-parameter",
                    format!("Invalid arguments:{k}"),
                ),
                Failure::TooLarge(n) => (
                    41,
                    "Invalid arguments",
                    "isv.invalid-parameter",
                    format!("request body exceeds {n} bytes"),
                ),
                Failure::Method => (
                    22,
                    "Invalid method",
                    "isv.invalid-method",
                    "Invalid method".into(),
                ),
                Failure::WordedLimit => (
                    100,
                    "Business failed",
                    "isv.item-title-invalid",
                    "title length exceeds 60".into(),
                ),
                Failure::NotFound(what, id) => {
                    let sub = if *what == "item" {
                        "isv.item-not-exist"
                    } else {
                        "isv.trade-not-exist"
                    };
                    (
                        15,
                        "Remote service error",
                        sub,
                        format!("{what} {id} does not exist"),
                    )
                }
            };
            Answer::ok(
                json!({"error_response": {"code": code, "msg": msg, "sub_code": sub_code,
                "sub_msg": sub_msg, "request_id": sim.request_id()}}),
            )
        }
        Platform::Jd => {
            let (code, zh, en): (&str, &str, String) = match f {
                Failure::Limited(s) | Failure::QuotaSpent(s) | Failure::AppQuotaSpent(s) => (
                    "2",
                    "应用调用次数超限",
                    format!("App call limited, this ban will last for {s} more seconds"),
                ),
                Failure::Busy => ("66", "服务繁忙", "Service busy, please retry".into()),
                Failure::Signature => ("12", "无效签名", "Invalid signature".into()),
                Failure::AppKey => ("21", "无效的app_key", "Invalid app_key".into()),
                Failure::Session => ("19", "无效access_token", "Invalid access_token".into()),
                Failure::Timestamp => ("8", "无效的时间戳", "Invalid timestamp".into()),
                Failure::Missing(k) => ("60", "缺少参数", format!("Missing parameter: {k}")),
                Failure::Invalid(k) => ("60", "参数无效", format!("Invalid parameter: {k}")),
                Failure::TooLarge(n) => {
                    ("60", "请求过大", format!("Request body exceeds {n} bytes"))
                }
                Failure::Method => ("15", "无效的方法名", "Invalid method".into()),
                Failure::WordedLimit => {
                    let key = jd_key(api.unwrap_or(Api::ItemGet));
                    return Answer::ok(json!({key: {"code": "0", "apiResult": {"success": false,
                        "englishErrCode": "stock exceeds the limit", "chineseErrCode": "库存超限", "numberCode": 10100017}}}));
                }
                Failure::NotFound(what, id) => {
                    let key = jd_key(api.unwrap_or(Api::ItemGet));
                    return Answer::ok(json!({key: {"code": "0", "apiResult": {"success": false,
                        "englishErrCode": format!("{what} {id} does not exist"), "chineseErrCode": "不存在", "numberCode": 10100001}}}));
                }
            };
            Answer::ok(json!({"error_response": {"code": code, "zh_desc": zh, "en_desc": en}}))
        }
        Platform::Alibaba => {
            let (status, code, msg): (u16, &str, String) = match f {
                Failure::Limited(s) => (
                    400,
                    "gw.QosAppFrequencyLimit",
                    format!(
                        "App call exceeds limited frequency, ban will last for {s} more seconds"
                    ),
                ),
                Failure::QuotaSpent(s) | Failure::AppQuotaSpent(s) => (
                    400,
                    "gw.NoUsageLeftError",
                    format!("No usage left today, ban will last for {s} more seconds"),
                ),
                Failure::Busy => (
                    503,
                    "gw.InternalError",
                    "Service unavailable, please retry".into(),
                ),
                Failure::Signature => (400, "gw.SignatureInvalid", "Signature invalid".into()),
                Failure::AppKey => (400, "gw.AppKeyNotExist", "App key does not exist".into()),
                Failure::Session => (401, "401", "Request need user authorized".into()),
                // 1688 has no timestamp code of its own in the contract: a caller error.
                Failure::Timestamp => (
                    400,
                    "gw.ParamMissing",
                    "_aop_timestamp malformed or out of the allowed skew".into(),
                ),
                Failure::Missing(k) => (400, "gw.ParamMissing", format!("Required argument {k}")),
                Failure::Invalid(k) => (400, "gw.ParamMissing", format!("Invalid parameter: {k}")),
                Failure::TooLarge(n) => (
                    413,
                    "gw.RequestEntityTooLarge",
                    format!("Request body exceeds {n} bytes"),
                ),
                Failure::Method => (400, "gw.APIUnsupported", "API not supported".into()),
                Failure::WordedLimit => {
                    return Answer::ok(json!({"success": false, "errorCode": "TITLE_INVALID",
                        "errorMessage": "title length exceeds 60"}));
                }
                Failure::NotFound(what, id) => {
                    let code = if *what == "item" {
                        "PRODUCT_NOT_EXIST"
                    } else {
                        "ORDER_NOT_EXIST"
                    };
                    return Answer::ok(json!({"success": false, "errorCode": code,
                        "errorMessage": format!("{what} {id} does not exist")}));
                }
            };
            Answer {
                status: StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST),
                body: json!({"error_code": code, "error_message": msg, "exception": msg}),
            }
        }
    }
}
