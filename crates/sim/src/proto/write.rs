//! The simulator's item writes, as strict as the platforms: TOP's `taobao.item.add` checked
//! as its SDK's `check()` and its documentation check it, JD's `jingdong.ware.write.add` as
//! `{"ware":{...},"skus":[...]}`; one product per call whatever the call carries (no platform
//! deduplicates a write), keeping the seller's code so `item_find` finds it
//! (docs/wire-formats.md, "Writes").

use super::{Failure, Params};
use crate::data::{self, ItemData, SkuData};
use crate::platform::wire;
use crate::platform::Platform;
use serde_json::Value;

/// A write the simulator took: the product and the seller's code it carries.
pub(super) struct Write {
    pub(super) item: ItemData,
    pub(super) code: String,
}

fn invalid(key: &str, why: impl std::fmt::Display) -> Failure {
    Failure::Invalid(format!("{key}: {why}"))
}

fn cents(key: &str, v: &str) -> Result<u64, Failure> {
    data::parse_price(v.trim()).ok_or_else(|| invalid(key, format!("`{v}` is not a price")))
}

fn count(key: &str, v: &str) -> Result<u32, Failure> {
    v.trim()
        .parse()
        .map_err(|_| invalid(key, format!("`{v}` is not a count")))
}

/// Read a write of `platform` (its required params already checked present).
pub(super) fn read(platform: Platform, params: &Params) -> Result<Write, Failure> {
    match platform {
        Platform::Taobao => top_item_add(params),
        Platform::Jd => jd_ware_add(params),
        // 1688 offers no write here (`Api::offered_by`).
        Platform::Alibaba => Err(Failure::Method),
    }
}

fn get(params: &Params, key: &str) -> String {
    params.get(key).unwrap_or_default()
}

/// `taobao.item.add`: the values as its documentation takes them.
fn top_item_add(params: &Params) -> Result<Write, Failure> {
    let title = get(params, "title");
    if wire::title_limit(Platform::Taobao).is_some_and(|l| l.cut(&title).is_some()) {
        return Err(invalid("title", "不能超过30字符 (longer than 60 units)"));
    }
    let desc_chars = get(params, "desc").chars().count();
    if !wire::TOP_DESC_CHARS.contains(&desc_chars) {
        return Err(invalid(
            "desc",
            format!("{desc_chars} characters (5-25000)"),
        ));
    }
    let item_type = get(params, "type");
    if !matches!(item_type.as_str(), "fixed" | "auction") {
        return Err(invalid("type", "fixed or auction"));
    }
    let stuff = get(params, "stuff_status");
    if !matches!(stuff.as_str(), "new" | "second" | "unused") {
        return Err(invalid("stuff_status", "new, second or unused"));
    }
    let cid = get(params, "cid");
    let category: u64 = cid
        .parse()
        .map_err(|_| invalid("cid", "not a category id"))?;
    let price = cents("price", &get(params, "price"))?;
    let num = count("num", &get(params, "num"))?;
    let list = |key: &str| -> Vec<String> {
        params
            .get(key)
            .map(|v| v.split(',').map(str::to_string).collect())
            .unwrap_or_default()
    };
    let props = list("sku_properties");
    let mut skus = Vec::new();
    if !props.is_empty() {
        let (quantities, prices) = (list("sku_quantities"), list("sku_prices"));
        // "如果没有sku_outer_ids也要写上这个参数，入参是","".
        if params.get("sku_outer_ids").is_none() {
            return Err(Failure::Missing("sku_outer_ids".into()));
        }
        let outer = list("sku_outer_ids");
        if quantities.len() != props.len()
            || prices.len() != props.len()
            || outer.len() != props.len()
        {
            return Err(invalid(
                "sku_properties",
                "sku_properties, sku_quantities, sku_prices and sku_outer_ids must align",
            ));
        }
        for key in ["sku_properties", "sku_outer_ids"] {
            if get(params, key).len() > 512 {
                return Err(invalid(key, "longer than 512 bytes"));
            }
        }
        let item_props = get(params, "props");
        for (i, p) in props.iter().enumerate() {
            // A SKU's sale properties appear in the item's `props` too.
            if p.split(';')
                .any(|pv| !item_props.split(';').any(|x| x == pv))
            {
                return Err(invalid("props", format!("SKU {i}'s `{p}` is not in props")));
            }
            skus.push(SkuData {
                id: i as u64,
                specs: Vec::new(),
                price_cents: cents("sku_prices", &prices[i])?,
                quantity: count("sku_quantities", &quantities[i])?,
            });
        }
        let sum: u32 = skus.iter().map(|s| s.quantity).sum();
        if sum != num {
            return Err(invalid("num", format!("{num} is not the SKUs' sum {sum}")));
        }
        let low = skus.iter().map(|s| s.price_cents).min().unwrap_or(0);
        let high = skus.iter().map(|s| s.price_cents).max().unwrap_or(0);
        if !(low..=high).contains(&price) {
            return Err(invalid("price", "not within the SKUs' price range"));
        }
    }
    Ok(Write {
        code: get(params, "outer_id"),
        item: ItemData {
            id: 0,
            title,
            price_cents: price,
            quantity: num,
            category,
            attributes: Vec::new(),
            skus,
            images: Vec::new(),
            description: get(params, "desc"),
        },
    })
}

/// `jingdong.ware.write.add`: a ware with a title and a category, and at least one SKU with
/// its price and stock.
fn jd_ware_add(params: &Params) -> Result<Write, Failure> {
    let ware = params
        .json("ware")
        .filter(Value::is_object)
        .ok_or_else(|| Failure::Missing("ware".into()))?;
    let skus = params
        .json("skus")
        .and_then(|v| v.as_array().cloned())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| Failure::Missing("skus".into()))?;
    let field = |v: &Value, key: &str| -> Option<String> {
        match v.get(key)? {
            Value::String(s) if !s.is_empty() => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    };
    let title = field(&ware, "title").ok_or_else(|| Failure::Missing("ware.title".into()))?;
    let category: u64 = field(&ware, "categoryId")
        .ok_or_else(|| Failure::Missing("ware.categoryId".into()))?
        .parse()
        .map_err(|_| invalid("ware.categoryId", "not a category id"))?;
    let mut out = Vec::new();
    for (i, s) in skus.iter().enumerate() {
        let price = field(s, "jdPrice").ok_or_else(|| Failure::Missing("skus.jdPrice".into()))?;
        let stock = field(s, "stockNum").ok_or_else(|| Failure::Missing("skus.stockNum".into()))?;
        out.push(SkuData {
            id: i as u64,
            specs: Vec::new(),
            price_cents: cents("skus.jdPrice", &price)?,
            quantity: count("skus.stockNum", &stock)?,
        });
    }
    Ok(Write {
        code: field(&ware, "itemNum").unwrap_or_default(),
        item: ItemData {
            id: 0,
            title,
            price_cents: out.iter().map(|s| s.price_cents).min().unwrap_or(0),
            quantity: out.iter().map(|s| s.quantity).sum(),
            category,
            attributes: Vec::new(),
            skus: out,
            images: Vec::new(),
            description: field(&ware, "introduction").unwrap_or_default(),
        },
    })
}

/// The codes an `item_find` asks for: TOP's `outer_id` (comma-separated, at most 40), JD's
/// `itemNum`.
pub(super) fn find_codes(platform: Platform, params: &Params) -> Result<Vec<String>, Failure> {
    match platform {
        Platform::Taobao => {
            let codes: Vec<String> = get(params, "outer_id")
                .split(',')
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect();
            if codes.len() > wire::TOP_FIND_CODES_MAX {
                return Err(invalid("outer_id", "最多不超过40个"));
            }
            Ok(codes)
        }
        _ => Ok(vec![get(params, "itemNum")]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn jd(v: Value) -> Params {
        Params::Json(v.as_object().cloned().unwrap_or_default())
    }

    #[test]
    fn a_jd_ware_needs_its_title_category_and_priced_skus() {
        let ok = json!({"ware": {"title": "Mug", "categoryId": "93948", "itemNum": "SF-1"},
            "skus": [{"jdPrice": "12.50", "stockNum": 7}]});
        let w = read(Platform::Jd, &jd(ok.clone())).unwrap();
        assert_eq!((w.code.as_str(), w.item.quantity), ("SF-1", 7));
        let mut no_skus = ok.clone();
        no_skus["skus"] = json!([]);
        assert!(
            matches!(read(Platform::Jd, &jd(no_skus)), Err(Failure::Missing(k)) if k == "skus")
        );
        let mut no_title = ok.clone();
        no_title["ware"]["title"] = json!("");
        assert!(
            matches!(read(Platform::Jd, &jd(no_title)), Err(Failure::Missing(k)) if k == "ware.title")
        );
        let mut no_stock = ok;
        no_stock["skus"] = json!([{"jdPrice": "1.00"}]);
        assert!(matches!(
            read(Platform::Jd, &jd(no_stock)),
            Err(Failure::Missing(_))
        ));
    }

    #[test]
    fn a_top_item_is_checked_as_top_checks_it() {
        let form = |extra: &[(&str, &str)]| {
            let mut f: Vec<(String, String)> = [
                ("cid", "50003948"),
                ("title", "Mug"),
                ("desc", "A mug, glazed."),
                ("price", "12.50"),
                ("num", "7"),
                ("type", "fixed"),
                ("stuff_status", "new"),
                ("outer_id", "SF-1"),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
            f.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
            Params::Form(f)
        };
        assert_eq!(read(Platform::Taobao, &form(&[])).unwrap().code, "SF-1");
        assert!(read(Platform::Taobao, &form(&[("type", "barter")])).is_err());
        let skus = [
            ("sku_properties", "1627207:28341,1627207:28320"),
            ("sku_quantities", "3,4"),
            ("sku_prices", "12.50,13.50"),
            ("props", "1627207:28341;1627207:28320"),
        ];
        // `sku_outer_ids` is required with SKUs, even empty.
        assert!(matches!(
            read(Platform::Taobao, &form(&skus)),
            Err(Failure::Missing(_))
        ));
        let mut with_codes = skus.to_vec();
        with_codes.push(("sku_outer_ids", ","));
        assert_eq!(
            read(Platform::Taobao, &form(&with_codes))
                .unwrap()
                .item
                .skus
                .len(),
            2
        );
        // A SKU property missing from `props`.
        let mut bad = with_codes.clone();
        bad[3] = ("props", "1627207:28341");
        assert!(read(Platform::Taobao, &form(&bad)).is_err());
    }
}
