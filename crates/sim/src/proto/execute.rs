//! The business side of a verified call: the platforms' parameter names, reading and checking
//! the params, running the call against the generated data, and the empty-field drill.

use super::parcel;
use super::render::{
    render_added, render_found, render_item, render_messages, render_orders, render_parcels,
    render_trace,
};
use super::write;
use super::{parse_gmt8, Call, Failure, Params, TOP_TIME};
use crate::data;
use crate::platform::wire;
use crate::platform::{Api, Platform};
use crate::state::Sim;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

/// Business parameter names per platform: (item id, window start, window end, page, page size).
struct Names {
    item_id: &'static str,
    start: &'static str,
    end: &'static str,
    page: &'static str,
    page_size: &'static str,
}

const TOP_NAMES: Names = Names {
    item_id: "num_iid",
    start: "start_modified",
    end: "end_modified",
    page: "page_no",
    page_size: "page_size",
};
const JD_NAMES: Names = Names {
    item_id: "wareId",
    start: "start_date",
    end: "end_date",
    page: "page",
    page_size: "page_size",
};
const ALIBABA_NAMES: Names = Names {
    item_id: "offerId",
    start: "modifyStartTime",
    end: "modifyEndTime",
    page: "page",
    page_size: "pageSize",
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
    // Every parameter the platform's SDK requires, refused with the platform's own error when
    // missing or empty.
    for key in wire::spec(p, call.api).map_or(&[][..], |s| s.required) {
        required(params, key)?;
    }
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
            let w = write::read(p, params)?;
            let out = app.written.lock().unwrap_or_else(|e| e.into_inner()).add(
                shop,
                &w.code,
                w.item,
                now.timestamp(),
            );
            if out.duplicate {
                sim.slot(call.app, call.api).duplicate_write();
            }
            render_added(p, out, rid)
        }
        Api::ItemFind => {
            let codes = write::find_codes(p, params)?;
            let written = app.written.lock().unwrap_or_else(|e| e.into_inner());
            let ids: Vec<u64> = codes
                .iter()
                .flat_map(|c| written.find(shop, c).iter().copied())
                .collect();
            render_found(p, codes.first().map_or("", String::as_str), &ids, rid)
        }
        Api::OrderList => {
            let start = window_time(p, params, n.start)?;
            let end = window_time(p, params, n.end)?;
            if end < start {
                return Err(Failure::Invalid(format!("{} before {}", n.end, n.start)));
            }
            let spec = wire::spec(p, Api::OrderList);
            if let Some(max) = spec.and_then(|s| s.window_max_s) {
                if end - start > max as i64 {
                    return Err(Failure::Invalid(format!(
                        "{} - {} exceeds {} s",
                        n.end, n.start, max
                    )));
                }
            }
            let page = optional_number(params, n.page, 1)?.max(1);
            let size = optional_number(params, n.page_size, 20)?;
            // TOP and JD refuse a page over their cap; 1688 serves at most 20 whatever is
            // asked, without a word (docs/wire-formats.md).
            let cap = u64::from(wire::order_page_size_max(p));
            if size == 0 || (size > cap && p != Platform::Alibaba) {
                return Err(Failure::Invalid(format!(
                    "{} must be 1..={cap}",
                    n.page_size
                )));
            }
            let served = size.min(cap);
            // The generated orders and the shop's live ones (docs/design.md, "Continuous
            // sync"), with what the walk-shift drill changed laid over them. TOP lists newest
            // first (its documentation says so, and tells clients to page from the last page
            // back); JD when asked with `sortType=1`; 1688 oldest first.
            let newest_first = match p {
                Platform::Taobao => true,
                Platform::Jd => params.get("sortType").is_some_and(|v| v == "1"),
                Platform::Alibaba => false,
            };
            let window = || {
                let mut all: Vec<data::OrderData> = app.shop.window(start, end).to_vec();
                all.extend(
                    sim.live_shop(call.app, shop)
                        .window(start, end, now.timestamp()),
                );
                sim.walk_shift.lay_over(call.app, start, end, &mut all);
                if newest_first {
                    all.sort_by_key(|o| std::cmp::Reverse((o.modified, o.id)));
                } else if sim.walk_shift.touched(call.app) {
                    all.sort_by_key(|o| (o.modified, o.id));
                }
                all
            };
            let mut all = window();
            if sim.with_drill(|d| d.walk_shift)
                && sim
                    .walk_shift
                    .step(call.app, page, end, now.timestamp(), all.first())
            {
                all = window();
            }
            // JD lists the orders in the states asked for, and only the fields asked for.
            let asked = Asked::of(p, params);
            if let Some(states) = &asked.states {
                all.retain(|o| states.iter().any(|s| s == super::order_status(p, o.state)));
            }
            let from = ((page - 1) * size).min(all.len() as u64) as usize;
            let to = (from + served as usize).min(all.len());
            let has_next = page * size < all.len() as u64;
            let malformed = sim.with_drill(|d| d.malformed_ratio);
            render_orders(
                p,
                &all[from..to],
                all.len(),
                has_next,
                &asked,
                malformed,
                rid,
            )
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
            let malformed = sim.with_drill(|d| d.malformed_ratio);
            render_messages(&got, malformed, rid)
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
        Api::LogisticsInfo => {
            let id: u64 = number(params, "orderId")?;
            let order = shop_order(sim, call.app, shop, id, now)?;
            let steps = data::trace(&order, &sim.cfg.orders, sim.started, now.timestamp());
            render_parcels(&order, &steps)
        }
        Api::LogisticsTrace => {
            let id = traced_order(p, params)?;
            let order = shop_order(sim, call.app, shop, id, now)?;
            let steps = data::trace(&order, &sim.cfg.orders, sim.started, now.timestamp());
            render_trace(p, &order, &steps, rid)
        }
    };
    if !empty.is_empty() {
        blank_field(&mut body, &empty, p);
    }
    Ok(body)
}

/// What a list call asked for beyond its window: TOP's `fields`, JD's `optional_fields` and
/// `order_state`, TOP's `use_has_next`.
pub(super) struct Asked {
    /// The fields of each order to answer with; None: all of them.
    pub(super) fields: Option<Vec<String>>,
    /// The order states to list; None: every state.
    pub(super) states: Option<Vec<String>>,
    /// TOP: answer `has_next` instead of `total_results`.
    pub(super) use_has_next: bool,
}

impl Asked {
    fn of(p: Platform, params: &Params) -> Asked {
        let list = |key: &str| {
            params.get(key).map(|v| {
                v.split(',')
                    .map(|f| f.trim().to_string())
                    .filter(|f| !f.is_empty())
                    .collect()
            })
        };
        match p {
            Platform::Taobao => Asked {
                fields: list("fields"),
                states: None,
                use_has_next: params.get("use_has_next").is_some_and(|v| v == "true"),
            },
            Platform::Jd => Asked {
                fields: list("optional_fields"),
                states: list("order_state"),
                use_has_next: false,
            },
            Platform::Alibaba => Asked {
                fields: None,
                states: None,
                use_has_next: false,
            },
        }
    }
}

/// Order `id` of the shop as it is at `now`: a live one, or a generated one as the
/// walk-shift drill left it.
fn shop_order(
    sim: &Sim,
    app: usize,
    shop: &str,
    id: u64,
    now: DateTime<Utc>,
) -> Result<data::OrderData, Failure> {
    sim.live_shop(app, shop)
        .get(id, now.timestamp())
        .or_else(|| sim.walk_shift.get(app, id, sim.apps[app].shop.get(id)))
        .ok_or_else(|| Failure::NotFound("order", id.to_string()))
}

/// The order a trace asks about: TOP names it (`tid`); JD names the carrier's waybill; 1688
/// names the parcel (`logisticsId`) and the order, which must agree.
fn traced_order(p: Platform, params: &Params) -> Result<u64, Failure> {
    match p {
        Platform::Taobao => number(params, "tid"),
        Platform::Jd => {
            let waybill = required(params, "waybillCode")?;
            match parcel::order_of_jd_waybill(&waybill) {
                Some(order) => Ok(order),
                None => Err(Failure::NotFound("waybill", waybill)),
            }
        }
        Platform::Alibaba => {
            let order: u64 = number(params, "orderId")?;
            let id = required(params, "logisticsId")?;
            match parcel::order_of_alibaba_logistics_id(&id) {
                Some(of) if of == order => Ok(order),
                _ => Err(Failure::NotFound("logistics", id)),
            }
        }
    }
}

/// Empty-field drill: set the named field to "" in every record of the body. `title`,
/// `price` and `num` name the item fields on every platform.
fn blank_field(body: &mut Value, field: &str, p: Platform) {
    // The item fields' names per platform (1688's price is the SKUs' consign price, and their
    // wholesale price behind it).
    let keys: &[&str] = match (field, p) {
        ("title", Platform::Alibaba) => &["subject"],
        ("price", Platform::Jd) => &["jdPrice"],
        ("price", Platform::Alibaba) => &["consignPrice", "price"],
        ("num" | "quantity", Platform::Taobao) => &["num", "quantity"],
        ("num" | "quantity", Platform::Jd) => &["stockNum"],
        ("num" | "quantity", Platform::Alibaba) => &["amountOnSale"],
        _ => &[],
    };
    if keys.is_empty() {
        walk(body, field);
    }
    for key in keys {
        walk(body, key);
    }
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
