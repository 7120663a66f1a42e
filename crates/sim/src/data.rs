//! Deterministic platform data derived from the seed: catalog items, orders per shop,
//! logistics traces. No I/O; the written items (item_add) live in [`Written`].

use super::config::OrdersConfig;
use crate::time::china_offset;
use chrono::TimeZone;
use std::collections::HashMap;

/// First id handed out to items created through item_add.
pub const CREATED_ID_BASE: u64 = 900_000_000;
/// Order ids of every shop start here.
pub const ORDER_ID_BASE: u64 = 1000;

/// splitmix64: a cheap, well-mixed hash so any id's data is computed without storing it.
pub fn mix(seed: u64, a: u64, b: u64) -> u64 {
    let mut z = seed
        .wrapping_add(a.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .wrapping_add(b.wrapping_mul(0xC2B2_AE3D_27D4_EB4F));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn unit(h: u64) -> f64 {
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// An item as the platforms show it: a 1688 product with its category, attributes, SKUs,
/// images and description (docs/wire-formats.md, "Reads").
#[derive(Debug, Clone, PartialEq)]
pub struct ItemData {
    /// The item's id: 1..=items in the catalog, from [`CREATED_ID_BASE`] when written.
    pub id: u64,
    /// The title (adjective, noun and `#id` for catalog items).
    pub title: String,
    /// With SKUs: the lowest SKU price.
    pub price_cents: u64,
    /// With SKUs: their sum.
    pub quantity: u32,
    /// The 1688 category id ([`CATEGORIES`]).
    pub category: u64,
    /// (name, value) of the item's attributes.
    pub attributes: Vec<(&'static str, &'static str)>,
    /// The SKUs; empty for a product without variants.
    pub skus: Vec<SkuData>,
    /// Image paths relative to 1688's image host, as 1688 gives them.
    pub images: Vec<String>,
    /// The description (HTML for catalog items).
    pub description: String,
}

/// One SKU of a catalog product.
#[derive(Debug, Clone, PartialEq)]
pub struct SkuData {
    /// The SKU's id.
    pub id: u64,
    /// (spec name, value): colour, and size for clothes.
    pub specs: Vec<(&'static str, &'static str)>,
    /// The distributor's price (1688 `consignPrice`).
    pub price_cents: u64,
    /// The SKU's stock.
    pub quantity: u32,
}

/// The catalog's categories: 1688 category id, one per noun of [`NOUN`], and whether its
/// products come in sizes. The shipped listing maps (`maps/`) map every one of them.
pub const CATEGORIES: [(u64, bool); 8] = [
    (1_046_001, false),
    (1_046_002, false),
    (1_031_910, true),
    (1_046_004, false),
    (1_046_005, false),
    (1_046_006, false),
    (1_046_007, false),
    (1_031_918, true),
];

/// The catalog's SKU spec values.
pub const COLOURS: [&str; 4] = ["黑色", "白色", "红色", "蓝色"];
/// The sizes clothes come in (`尺码`).
pub const SIZES: [&str; 3] = ["S", "M", "L"];
/// The catalog's attributes: (name, values).
pub const MATERIALS: [&str; 4] = ["棉", "涤纶", "陶瓷", "不锈钢"];
/// The places of origin (`产地`).
pub const ORIGINS: [&str; 3] = ["广州", "义乌", "深圳"];

const ADJ: [&str; 8] = [
    "Red", "Light", "Classic", "Cotton", "Steel", "Mini", "Pro", "Eco",
];
const NOUN: [&str; 8] = [
    "Mug", "Lamp", "Shirt", "Kettle", "Backpack", "Charger", "Vase", "Scarf",
];

/// Catalog item `id` (1..=items), or None outside the catalog.
pub fn catalog_item(seed: u64, items: u64, id: u64) -> Option<ItemData> {
    if id == 0 || id > items {
        return None;
    }
    let h = mix(seed, 1, id);
    let noun = ((h >> 8) % 8) as usize;
    let (category, sized) = CATEGORIES[noun];
    let base = 100 + (h >> 16) % 99_900;
    let stock = 1 + ((h >> 40) % 500) as u32;
    // One product in five has no variants; the rest 1-3 colours, in 3 sizes for clothes.
    let g = mix(seed, 2, id);
    let skus: Vec<SkuData> = if g.is_multiple_of(5) {
        Vec::new()
    } else {
        let colours = 1 + (g >> 8) % 3;
        let sizes: &[&str] = if sized { &SIZES } else { &[] };
        let mut skus = Vec::new();
        for c in 0..colours as usize {
            let colour = COLOURS[(c + (g >> 16) as usize % 4) % 4];
            let variants: Vec<Vec<(&str, &str)>> = if sizes.is_empty() {
                vec![vec![("颜色", colour)]]
            } else {
                sizes
                    .iter()
                    .map(|s| vec![("颜色", colour), ("尺码", *s)])
                    .collect()
            };
            for specs in variants {
                let n = skus.len() as u64;
                skus.push(SkuData {
                    id: id * 100 + n,
                    specs,
                    price_cents: base + n * 100,
                    quantity: (stock / (n as u32 + 1)).max(1),
                });
            }
        }
        skus
    };
    let (price_cents, quantity) = if skus.is_empty() {
        (base, stock)
    } else {
        (
            skus.iter().map(|s| s.price_cents).min().unwrap_or(base),
            skus.iter().map(|s| s.quantity).sum(),
        )
    };
    let title = format!("{} {} #{id}", ADJ[(h % 8) as usize], NOUN[noun]);
    let images: Vec<String> = (0..1 + (g >> 24) % 3)
        .map(|n| format!("img/ibank/2026/{}/{id}_{n}.jpg", id % 1000))
        .collect();
    Some(ItemData {
        id,
        description: format!(
            "<p>{title}</p><p><img src=\"https://cbu01.alicdn.com/{}\"></p>",
            images[0]
        ),
        title,
        price_cents,
        quantity,
        category,
        attributes: vec![
            ("材质", MATERIALS[((g >> 32) % 4) as usize]),
            ("产地", ORIGINS[((g >> 40) % 3) as usize]),
        ],
        skus,
        images,
    })
}

/// Cents as a decimal price with two decimals (`1250` → `12.50`), the inverse of
/// [`parse_price`].
pub fn format_price(cents: u64) -> String {
    format!("{}.{:02}", cents / 100, cents % 100)
}

/// Parse a decimal price ("12.5", "12.50", "12") into cents.
pub fn parse_price(s: &str) -> Option<u64> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() || frac.len() > 2 || !int.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let whole: u64 = int.parse().ok()?;
    let cents: u64 = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<2}").parse().ok()?
    };
    whole.checked_mul(100)?.checked_add(cents)
}

/// Where an order is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderState {
    /// Placed, not paid yet (live orders only).
    Created,
    /// Paid, not shipped.
    Unshipped,
    /// Shipped, not signed for yet: its trace gains steps ([`trace`]).
    Shipped,
    /// Signed for by the buyer.
    Signed,
    /// Closed unpaid (live orders only).
    Closed,
    /// Refunded after payment (live orders only).
    Refunded,
}

/// An order as the platforms list it.
#[derive(Debug, Clone, PartialEq)]
pub struct OrderData {
    /// The order's id.
    pub id: u64,
    /// Unix seconds.
    pub modified: i64,
    /// Where the order is in its life.
    pub state: OrderState,
    /// The order's amount in cents.
    pub amount_cents: u64,
}

/// One shop's orders sorted by (modified, id), so a window is a binary search.
#[derive(Debug, Clone)]
pub struct Shop {
    /// The orders, sorted by (modified, id).
    pub orders: Vec<OrderData>,
    by_id: HashMap<u64, usize>,
}

impl Shop {
    /// The orders of shop `shop` (an app's index) for `seed`: `cfg.per_shop` of them, modified
    /// within the `cfg.days` from `cfg.start` (GMT+8), shipped and signed in the configured
    /// shares. The same arguments always give the same orders.
    pub fn generate(seed: u64, shop: u64, cfg: &OrdersConfig) -> Shop {
        let start = china_offset()
            .from_local_datetime(&cfg.start)
            .single()
            .map(|t| t.timestamp())
            .unwrap_or(0);
        let span = (cfg.days as i64 * 86_400).max(1);
        let mut orders: Vec<OrderData> = (0..cfg.per_shop as u64)
            .map(|i| {
                let h = mix(seed, 100 + shop, i);
                let h2 = mix(seed, 200 + shop, i);
                let state = if unit(h2) >= cfg.shipped_share {
                    OrderState::Unshipped
                } else if unit(mix(seed, 300 + shop, i)) < cfg.signed_share {
                    OrderState::Signed
                } else {
                    OrderState::Shipped
                };
                OrderData {
                    id: ORDER_ID_BASE + 1 + i,
                    modified: start + (h % span as u64) as i64,
                    state,
                    amount_cents: 100 + (h >> 24) % 50_000,
                }
            })
            .collect();
        orders.sort_by_key(|o| (o.modified, o.id));
        let by_id = orders.iter().enumerate().map(|(i, o)| (o.id, i)).collect();
        Shop { orders, by_id }
    }

    /// Orders with `start <= modified < end` (unix seconds).
    pub fn window(&self, start: i64, end: i64) -> &[OrderData] {
        let lo = self.orders.partition_point(|o| o.modified < start);
        let hi = self.orders.partition_point(|o| o.modified < end).max(lo);
        &self.orders[lo..hi]
    }

    /// The order `id`, if the shop has it.
    pub fn get(&self, id: u64) -> Option<&OrderData> {
        self.by_id.get(&id).map(|&i| &self.orders[i])
    }
}

/// Kind of a trace step; each platform spells them its own way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepKind {
    /// Picked up by the carrier.
    Got,
    /// In transit.
    Transport,
    /// Signed for: the last step.
    Signed,
}

/// One step of an order's logistics trace ([`trace`]).
#[derive(Debug, Clone, PartialEq)]
pub struct TraceStep {
    /// Unix seconds.
    pub at: i64,
    /// What happened.
    pub kind: StepKind,
    /// The carrier's words for it (in Chinese, as the platforms give them).
    pub remark: String,
}

/// The trace of an order at wall time `now` (unix s), the simulator having started at
/// `sim_start`: shipped, unsigned orders gain a step every `event_every_s`, and sign after
/// `sign_after_events` gained steps when that is > 0. Unshipped orders have no steps.
pub fn trace(order: &OrderData, cfg: &OrdersConfig, sim_start: i64, now: i64) -> Vec<TraceStep> {
    if !matches!(order.state, OrderState::Shipped | OrderState::Signed) {
        return Vec::new();
    }
    let got = order.modified + 3600;
    let mut steps = vec![
        TraceStep {
            at: got,
            kind: StepKind::Got,
            remark: "快件已揽收".into(),
        },
        TraceStep {
            at: got + 8 * 3600,
            kind: StepKind::Transport,
            remark: "运输中,已到达转运中心".into(),
        },
    ];
    if order.state == OrderState::Signed {
        steps.push(TraceStep {
            at: got + 30 * 3600,
            kind: StepKind::Signed,
            remark: "已签收".into(),
        });
        return steps;
    }
    let every = cfg.event_every_s.max(1) as i64;
    let gained = ((now - sim_start).max(0) / every) as u64;
    let limit = if cfg.sign_after_events > 0 {
        gained.min(cfg.sign_after_events as u64)
    } else {
        gained
    };
    // Bounded: a long-running simulator keeps at most the last 50 gained steps.
    let first = limit.saturating_sub(50);
    for j in (first + 1)..=limit {
        let signs = cfg.sign_after_events > 0 && j == cfg.sign_after_events as u64;
        steps.push(TraceStep {
            at: sim_start + j as i64 * every,
            kind: if signs {
                StepKind::Signed
            } else {
                StepKind::Transport
            },
            remark: if signs {
                "已签收".into()
            } else {
                format!("运输中,第{j}站")
            },
        });
    }
    steps
}

/// Items written through item_add, per app. Like the platforms, it makes one product per
/// write whatever the write carries: a repeated seller's code makes a second product with the
/// same code (counted as a duplicate), which `item_find` then finds twice.
#[derive(Debug, Default)]
pub struct Written {
    items: HashMap<u64, ItemData>,
    /// (shop, seller's code) → the products carrying it, first made first.
    by_code: HashMap<(String, String), Vec<u64>>,
    next: u64,
}

/// What an item_add did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddOutcome {
    /// The new product's id (from [`CREATED_ID_BASE`]).
    pub id: u64,
    /// Unix seconds.
    pub created: i64,
    /// Another product of the shop already carried the seller's code.
    pub duplicate: bool,
}

impl Written {
    /// Make a product for `shop`, carrying `code` (the seller's own code; may be empty).
    pub fn add(&mut self, shop: &str, code: &str, item: ItemData, now: i64) -> AddOutcome {
        self.next += 1;
        let id = CREATED_ID_BASE + self.next;
        self.items.insert(id, ItemData { id, ..item });
        let mut duplicate = false;
        if !code.is_empty() {
            let same = self
                .by_code
                .entry((shop.to_string(), code.to_string()))
                .or_default();
            duplicate = !same.is_empty();
            same.push(id);
        }
        AddOutcome {
            id,
            created: now,
            duplicate,
        }
    }

    /// The written product `id`, if any.
    pub fn get(&self, id: u64) -> Option<&ItemData> {
        self.items.get(&id)
    }

    /// The products of `shop` carrying `code`.
    pub fn find(&self, shop: &str, code: &str) -> &[u64] {
        self.by_code
            .get(&(shop.to_string(), code.to_string()))
            .map_or(&[], Vec::as_slice)
    }

    /// Products made, and products beyond the first of their (shop, code).
    pub fn counts(&self) -> (u64, u64) {
        let extra = self
            .by_code
            .values()
            .map(|v| v.len().saturating_sub(1) as u64)
            .sum();
        (self.items.len() as u64, extra)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_are_deterministic_and_bounded() {
        let a = catalog_item(7, 100, 5).unwrap();
        assert_eq!(a, catalog_item(7, 100, 5).unwrap());
        assert_ne!(a, catalog_item(8, 100, 5).unwrap());
        assert!(catalog_item(7, 100, 101).is_none());
        assert!(catalog_item(7, 100, 0).is_none());
        assert!(a.price_cents >= 100);
    }

    #[test]
    fn prices_round_trip() {
        assert_eq!(parse_price("12.5"), Some(1250));
        assert_eq!(parse_price("12.05"), Some(1205));
        assert_eq!(parse_price("7"), Some(700));
        assert_eq!(parse_price("1.234"), None);
        assert_eq!(parse_price("-1"), None);
        assert_eq!(parse_price(""), None);
        assert_eq!(format_price(1205), "12.05");
    }

    #[test]
    fn shop_window_and_shares() {
        let cfg = OrdersConfig {
            per_shop: 2000,
            ..OrdersConfig::default()
        };
        let shop = Shop::generate(1, 0, &cfg);
        assert_eq!(shop.orders.len(), 2000);
        let all = shop.window(i64::MIN, i64::MAX);
        assert_eq!(all.len(), 2000);
        let first = shop.orders[0].modified;
        let day = shop.window(first, first + 86_400);
        assert!(day
            .iter()
            .all(|o| o.modified >= first && o.modified < first + 86_400));
        assert!(!day.is_empty() && day.len() < 2000);
        let shipped = shop
            .orders
            .iter()
            .filter(|o| o.state != OrderState::Unshipped)
            .count();
        let signed = shop
            .orders
            .iter()
            .filter(|o| o.state == OrderState::Signed)
            .count();
        let share = signed as f64 / shipped as f64;
        assert!((0.6..0.8).contains(&share), "{share}");
        assert_eq!(shop.get(shop.orders[3].id), Some(&shop.orders[3]));
    }

    #[test]
    fn unsigned_orders_gain_events_and_sign() {
        let cfg = OrdersConfig {
            event_every_s: 10,
            sign_after_events: 3,
            ..OrdersConfig::default()
        };
        let o = OrderData {
            id: 1,
            modified: 0,
            state: OrderState::Shipped,
            amount_cents: 1,
        };
        let t0 = trace(&o, &cfg, 1000, 1005);
        let t1 = trace(&o, &cfg, 1000, 1025);
        assert_eq!(t1.len(), t0.len() + 2);
        assert_ne!(t1.last().unwrap().kind, StepKind::Signed);
        let t2 = trace(&o, &cfg, 1000, 9999);
        assert_eq!(t2.last().unwrap().kind, StepKind::Signed);
        assert_eq!(t2.len(), t0.len() + 3);
    }

    #[test]
    fn every_write_makes_a_product_whatever_its_code() {
        let mut w = Written::default();
        let item = catalog_item(1, 10, 3).unwrap();
        let a = w.add("main", "SF-3", item.clone(), 10);
        let b = w.add("main", "SF-3", item.clone(), 20);
        // As TOP does: a second product, the same code.
        assert!(!a.duplicate && b.duplicate);
        assert_ne!(a.id, b.id);
        assert_eq!(w.find("main", "SF-3"), &[a.id, b.id]);
        // Another shop's code is its own.
        let c = w.add("outlet", "SF-3", item, 30);
        assert!(!c.duplicate);
        assert_eq!(w.counts(), (3, 1));
        assert_eq!(w.get(a.id).unwrap().id, a.id);
    }

    #[test]
    fn catalog_products_have_categories_skus_and_images() {
        let items: Vec<ItemData> = (1..=200).filter_map(|i| catalog_item(7, 200, i)).collect();
        assert!(items
            .iter()
            .all(|i| CATEGORIES.iter().any(|(c, _)| *c == i.category)));
        assert!(items.iter().any(|i| i.skus.is_empty()));
        assert!(items
            .iter()
            .any(|i| i.skus.iter().any(|s| s.specs.len() == 2)));
        for i in &items {
            assert!(!i.images.is_empty());
            if !i.skus.is_empty() {
                let sum: u32 = i.skus.iter().map(|s| s.quantity).sum();
                assert_eq!(i.quantity, sum);
            }
        }
    }
}
