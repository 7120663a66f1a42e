//! The business side of a verified call: the platforms' parameter names, reading and checking
//! the params, running the call against the generated data, and the empty-field drill.

use super::render::{render_added, render_item, render_messages, render_orders, render_trace};
use super::{parse_gmt8, Call, Failure, Params, TOP_TIME};
use crate::platform::{Api, Platform};
use crate::sim::data::{self, ItemData};
use crate::sim::state::Sim;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

/// Business parameter names per platform: (item id, title, price, quantity, idempotency key,
/// window start, window end, page, page size, order id).
struct Names {
    item_id: &'static str,
    title: &'static str,
    price: &'static str,
    quantity: &'static str,
    key: &'static str,
    start: &'static str,
    end: &'static str,
    page: &'static str,
    page_size: &'static str,
    order: &'static str,
}

const TOP_NAMES: Names = Names {
    item_id: "num_iid",
    title: "title",
    price: "price",
    quantity: "num",
    key: "out_request_id",
    start: "start_modified",
    end: "end_modified",
    page: "page_no",
    page_size: "page_size",
    order: "tid",
};
const JD_NAMES: Names = Names {
    item_id: "wareId",
    title: "title",
    price: "jdPrice",
    quantity: "stockNum",
    key: "outRequestId",
    start: "start_date",
    end: "end_date",
    page: "page",
    page_size: "page_size",
    order: "waybillCode",
};
const ALIBABA_NAMES: Names = Names {
    item_id: "productID",
    title: "subject",
    price: "price",
    quantity: "amount",
    key: "outRequestId",
    start: "modifyStartTime",
    end: "modifyEndTime",
    page: "page",
    page_size: "pageSize",
    order: "orderId",
};

fn names(p: Platform) -> &'static Names {
    match p {
        Platform::Taobao => &TOP_NAMES,
        Platform::Jd => &JD_NAMES,
        Platform::Alibaba => &ALIBABA_NAMES,
    }
}

fn required(params: &Params, key: &str) -> Result<String, Failure> {
    params
        .get(key)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| Failure::Missing(key.into()))
}

fn number<T: std::str::FromStr>(params: &Params, key: &str) -> Result<T, Failure> {
    required(params, key)?
        .trim()
        .parse()
        .map_err(|_| Failure::Invalid(key.into()))
}

fn optional_number(params: &Params, key: &str, default: u64) -> Result<u64, Failure> {
    match params.get(key).filter(|v| !v.is_empty()) {
        None => Ok(default),
        Some(v) => v.trim().parse().map_err(|_| Failure::Invalid(key.into())),
    }
}

fn window_time(p: Platform, params: &Params, key: &str) -> Result<i64, Failure> {
    let s = required(params, key)?;
    let t = match p {
        Platform::Alibaba => {
            // yyyyMMddHHmmssSSS+0800 (the offset is always GMT+8 here).
            let body = s.strip_suffix("+0800").unwrap_or(&s);
            parse_gmt8(body, "%Y%m%d%H%M%S%3f").or_else(|| parse_gmt8(body, "%Y%m%d%H%M%S"))
        }
        _ => parse_gmt8(&s, TOP_TIME),
    };
    t.map(|t| t.timestamp())
        .ok_or_else(|| Failure::Invalid(key.into()))
}

/// The huge answer an `item_get` of a drilled item gets instead of its item: (bytes, whether
/// the length is declared). None for every other call.
pub(super) fn huge_answer(sim: &Sim, call: &Call, params: &Params) -> Option<(u64, bool)> {
    if call.api != Api::ItemGet {
        return None;
    }
    let id: u64 = number(params, names(call.platform).item_id).ok()?;
    sim.with_drill(|d| {
        d.huge_answer_items
            .contains(&id)
            .then_some((d.huge_answer_bytes, d.huge_answer_declared))
    })
}

pub(super) fn execute(
    sim: &Sim,
    call: &Call,
    shop: &str,
    params: &Params,
    now: DateTime<Utc>,
) -> Result<Value, Failure> {
    let p = call.platform;
    let n = names(p);
    let app = &sim.apps[call.app];
    let rid = || sim.request_id();
    let empty = sim.with_drill(|d| d.empty_field.clone());
    let mut body = match call.api {
        Api::ItemGet => {
            let id: u64 = number(params, n.item_id)?;
            if sim.with_drill(|d| d.worded_limit_items.contains(&id)) {
                return Err(Failure::WordedLimit);
            }
            if sim.with_drill(|d| d.busy_items.contains(&id)) {
                return Err(Failure::Busy);
            }
            let item = match data::catalog_item(sim.cfg.seed, sim.cfg.catalog_items, id) {
                Some(i) => i,
                None => app
                    .written
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(id)
                    .cloned()
                    .ok_or_else(|| Failure::NotFound("item", id.to_string()))?,
            };
            render_item(p, &item, rid)
        }
        Api::ItemAdd => {
            let title = required(params, n.title)?;
            let price = data::parse_price(&required(params, n.price)?)
                .ok_or_else(|| Failure::Invalid(n.price.into()))?;
            let quantity: u32 = number(params, n.quantity)?;
            let key = params.get(n.key);
            let item = ItemData {
                id: 0,
                title,
                price_cents: price,
                quantity,
            };
            let out = app.written.lock().unwrap_or_else(|e| e.into_inner()).add(
                key.as_deref(),
                item,
                now.timestamp(),
            );
            if out.duplicate {
                sim.slot(call.app, call.api).duplicate_write();
            }
            render_added(p, out, rid)
        }
        Api::OrderList => {
            let start = window_time(p, params, n.start)?;
            let end = window_time(p, params, n.end)?;
            if end < start {
                return Err(Failure::Invalid(format!("{} before {}", n.end, n.start)));
            }
            if p == Platform::Taobao && end - start > 86_400 {
                return Err(Failure::Invalid(format!(
                    "{} - {} exceeds one day",
                    n.end, n.start
                )));
            }
            let page = optional_number(params, n.page, 1)?.max(1);
            let size = optional_number(params, n.page_size, 40)?;
            if size == 0 || size > 100 {
                return Err(Failure::Invalid(format!("{} must be 1..=100", n.page_size)));
            }
            // The generated orders and the shop's live ones (docs/design.md, "Continuous
            // sync"). TOP sorts newest first (its documentation says so, and tells clients to
            // page from the last page back); the others oldest first.
            let mut all: Vec<data::OrderData> = app.shop.window(start, end).to_vec();
            all.extend(
                sim.live_shop(call.app, shop)
                    .window(start, end, now.timestamp()),
            );
            if p == Platform::Taobao {
                all.sort_by_key(|o| std::cmp::Reverse((o.modified, o.id)));
            }
            let from = ((page - 1) * size).min(all.len() as u64) as usize;
            let to = (from + size as usize).min(all.len());
            let has_next = page * size < all.len() as u64;
            render_orders(p, &all[from..to], all.len(), has_next, rid)
        }
        Api::MessageConsume => {
            let quantity = optional_number(params, "quantity", 100)?;
            if !(10..=200).contains(&quantity) {
                return Err(Failure::Invalid("quantity must be 10..=200".into()));
            }
            let shops = sim.live_shops(call.app);
            let got = app
                .messages
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .consume(&shops, now.timestamp_millis(), quantity as usize);
            render_messages(&got, rid)
        }
        Api::MessageConfirm => {
            let text = required(params, "s_message_ids")?;
            let mut ids = Vec::new();
            for part in text.split(',') {
                ids.push(
                    part.trim()
                        .parse::<u64>()
                        .map_err(|_| Failure::Invalid("s_message_ids".into()))?,
                );
            }
            app.messages
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .confirm(&ids);
            json!({"tmc_messages_confirm_response": {"is_success": true, "request_id": rid()}})
        }
        Api::LogisticsTrace => {
            let id: u64 = number(params, n.order)?;
            let live = sim.live_shop(call.app, shop).get(id, now.timestamp());
            let order = live
                .as_ref()
                .or_else(|| app.shop.get(id))
                .ok_or_else(|| Failure::NotFound("order", id.to_string()))?;
            let steps = data::trace(order, &sim.cfg.orders, sim.started, now.timestamp());
            render_trace(p, order, &steps, rid)
        }
    };
    if !empty.is_empty() {
        blank_field(&mut body, &empty, p);
    }
    Ok(body)
}

/// Empty-field drill: set the named field to "" in every record of the body. `title`,
/// `price` and `num` name the item fields on every platform.
fn blank_field(body: &mut Value, field: &str, p: Platform) {
    let n = names(p);
    let key = match field {
        "title" => n.title,
        "price" => n.price,
        "num" | "quantity" => n.quantity,
        other => other,
    };
    fn walk(v: &mut Value, key: &str) {
        match v {
            Value::Object(m) => {
                for (k, child) in m.iter_mut() {
                    if k == key && !child.is_object() && !child.is_array() {
                        *child = Value::String(String::new());
                    } else {
                        walk(child, key);
                    }
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|c| walk(c, key)),
            _ => {}
        }
    }
    walk(body, key);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn blank_field_maps_logical_names() {
        let mut b = json!({"result": {"toReturn": {"subject": "x", "price": "1.00"}}});
        blank_field(&mut b, "title", Platform::Alibaba);
        assert_eq!(b["result"]["toReturn"]["subject"], "");
        assert_eq!(b["result"]["toReturn"]["price"], "1.00");
    }
}
