//! From a source product to the item a target takes, by the user's listing map: category,
//! properties, SKUs, price, stock and title (docs/design.md, "The listing map"). Pure: no I/O.
//! An item the map cannot carry is skipped with the reason, before any write.

use crate::config::listing_map::{ListingMap, TooLong};
use crate::platform::wire::{self, TitleLimit};
use crate::platform::{Attribute, Item, NewItem, NewSku, Platform, ShopListing};

/// The most bytes TOP takes in `sku_properties` and in `sku_outer_ids` ("不能超过512字节").
const TOP_SKU_LIST_BYTES: usize = 512;

/// Maps source products onto one target shop.
pub(crate) struct Mapping<'a> {
    pub(crate) map: &'a ListingMap,
    pub(crate) shop: &'a ShopListing,
    pub(crate) target: Platform,
}

/// Why an item is not listed (the item ends `skipped` with it).
pub(crate) type SkipReason = String;

fn cents(price: &str) -> Option<u64> {
    crate::config::listing_map::parse_scaled(price, 2)
}

fn money(cents: u64) -> String {
    format!("{}.{:02}", cents / 100, cents % 100)
}

impl Mapping<'_> {
    /// The target's item for `source`, carrying `seller_code`; or why it is skipped.
    pub(crate) fn map(&self, source: &Item, seller_code: &str) -> Result<NewItem, SkipReason> {
        let map = self.map;
        let category = map.categories.get(&source.category).ok_or_else(|| {
            format!(
                "category `{}` is not in the listing map (add a [[category]] for it)",
                source.category
            )
        })?;
        let title = self.title(source.title.trim())?;
        let description = self.description(source, &title)?;
        let (props, input_props) = self.properties(&source.category, &source.attributes);
        let (price, quantity, skus) = if source.skus.is_empty() {
            let price = self.price(&source.price)?;
            (price, map.stock.apply(source.quantity), Vec::new())
        } else {
            let skus = source
                .skus
                .iter()
                .map(|sku| {
                    Ok(NewSku {
                        props: self.sale_values(&source.category, &sku.specs)?,
                        price: money(self.price(&sku.price)?),
                        quantity: map.stock.apply(sku.quantity),
                        seller_code: sku.id.clone(),
                    })
                })
                .collect::<Result<Vec<_>, SkipReason>>()?;
            // The item's price within its SKUs' range (TOP requires it): the lowest.
            let lowest = skus
                .iter()
                .filter_map(|s| cents(&s.price))
                .min()
                .unwrap_or(0);
            let stock = skus
                .iter()
                .map(|s| s.quantity)
                .fold(0u32, u32::saturating_add);
            (lowest, stock, self.fit_sku_lists(skus)?)
        };
        if quantity == 0 {
            return Err("no stock to list (after the map's stock rule)".into());
        }
        Ok(NewItem {
            seller_code: seller_code.to_string(),
            category: category.clone(),
            title,
            description,
            price: money(price),
            quantity,
            props,
            input_props,
            skus,
            shop: self.shop.clone(),
        })
    }

    fn title(&self, title: &str) -> Result<String, SkipReason> {
        let platform = wire::title_limit(self.target);
        let user = self.map.title.max_chars.map(|max| TitleLimit {
            max,
            wide_counts_two: false,
        });
        let mut out = title;
        for limit in [platform, user].into_iter().flatten() {
            if let Some(cut) = limit.cut(out) {
                match self.map.title.too_long {
                    TooLong::Cut => out = cut,
                    TooLong::Skip => {
                        return Err(format!(
                            "title is longer than {} takes ({} units, counted as {} counts)",
                            self.target, limit.max, self.target
                        ))
                    }
                }
            }
        }
        Ok(out.to_string())
    }

    /// The source's description, else the title; TOP takes 5 to 25,000 characters.
    fn description(&self, source: &Item, title: &str) -> Result<String, SkipReason> {
        let text = if source.description.trim().is_empty() {
            title
        } else {
            source.description.trim()
        };
        if self.target == Platform::Taobao {
            let n = text.chars().count();
            if !wire::TOP_DESC_CHARS.contains(&n) {
                return Err(format!(
                    "the description has {n} characters; taobao takes {} to {}",
                    wire::TOP_DESC_CHARS.start(),
                    wire::TOP_DESC_CHARS.end()
                ));
            }
        }
        Ok(text.to_string())
    }

    /// The attributes the map names: a mapped value as (property, value id), an attribute
    /// whose map lists no values as (property, its text). Attributes the map does not name,
    /// and values its list does not hold, are not sent.
    #[allow(clippy::type_complexity)]
    fn properties(
        &self,
        category: &str,
        attributes: &[Attribute],
    ) -> (Vec<(String, String)>, Vec<(String, String)>) {
        let mut props = Vec::new();
        let mut input = Vec::new();
        for a in attributes {
            let Some(m) = ListingMap::property(&self.map.properties, category, &a.name) else {
                continue;
            };
            if m.values.is_empty() {
                // JD takes value ids only: a text attribute goes to TOP alone.
                if self.target == Platform::Taobao {
                    input.push((m.target.clone(), a.value.replace(',', " ")));
                }
            } else if let Some(vid) = m.values.get(&a.value) {
                props.push((m.target.clone(), vid.clone()));
            }
        }
        (props, input)
    }

    /// A SKU's spec values as the target's sale property values: every spec must be mapped.
    fn sale_values(
        &self,
        category: &str,
        specs: &[Attribute],
    ) -> Result<Vec<(String, String)>, SkipReason> {
        specs
            .iter()
            .map(|spec| {
                let m = ListingMap::property(&self.map.sale_properties, category, &spec.name)
                    .ok_or_else(|| {
                        format!(
                            "SKU spec `{}` is not in the listing map (add a [[sale_property]])",
                            spec.name
                        )
                    })?;
                let vid = m.values.get(&spec.value).ok_or_else(|| {
                    format!(
                        "SKU value `{}` of `{}` has no {} value in the listing map",
                        spec.value, spec.name, self.target
                    )
                })?;
                Ok((m.target.clone(), vid.clone()))
            })
            .collect()
    }

    fn price(&self, source: &str) -> Result<u64, SkipReason> {
        let c = cents(source.trim())
            .ok_or_else(|| format!("source price `{source}` is not a decimal"))?;
        if c == 0 {
            return Err("the source price is 0".into());
        }
        self.map
            .price
            .apply(c)
            .ok_or_else(|| format!("price rule overflows on `{source}`"))
    }

    /// TOP takes at most 512 bytes of `sku_properties` and of `sku_outer_ids`: SKU codes that
    /// do not fit are left out (the list is sent as commas, as TOP asks); properties that do
    /// not fit skip the item.
    fn fit_sku_lists(&self, mut skus: Vec<NewSku>) -> Result<Vec<NewSku>, SkipReason> {
        if self.target != Platform::Taobao {
            return Ok(skus);
        }
        let joined = |f: &dyn Fn(&NewSku) -> usize| {
            skus.iter().map(f).sum::<usize>() + skus.len().saturating_sub(1)
        };
        let props_bytes = joined(&|s| {
            s.props
                .iter()
                .map(|(k, v)| k.len() + v.len() + 1)
                .sum::<usize>()
                + s.props.len().saturating_sub(1)
        });
        if props_bytes > TOP_SKU_LIST_BYTES {
            return Err(format!(
                "{} SKUs make {props_bytes} bytes of sku_properties; taobao takes {TOP_SKU_LIST_BYTES}",
                skus.len()
            ));
        }
        if joined(&|s| s.seller_code.len()) > TOP_SKU_LIST_BYTES {
            for s in &mut skus {
                s.seller_code.clear();
            }
        }
        Ok(skus)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::Sku;
    use std::path::Path;

    const MAP: &str = r#"
target = "taobao"
[price]
markup = "1.5"
round_to = "0.10"
[[category]]
source = "1031910"
target = "50000671"
[[property]]
source = "材质"
target = "20021"
values = { "棉" = "105255" }
[[property]]
source = "产地"
target = "20000"
[[sale_property]]
source = "颜色"
target = "1627207"
values = { "黑色" = "28341", "白色" = "28320" }
"#;

    fn map() -> ListingMap {
        ListingMap::parse(Path::new("m.toml"), MAP).unwrap()
    }

    fn shop() -> ShopListing {
        ShopListing {
            location_state: "浙江".into(),
            location_city: "杭州".into(),
            item_type: "fixed".into(),
            stuff_status: "new".into(),
        }
    }

    fn attr(name: &str, value: &str) -> Attribute {
        Attribute {
            name: name.into(),
            value: value.into(),
        }
    }

    fn product() -> Item {
        Item {
            id: "7".into(),
            title: "Cotton Tee".into(),
            price: "10.00".into(),
            quantity: 30,
            category: "1031910".into(),
            attributes: vec![attr("材质", "棉"), attr("产地", "广州"), attr("季节", "夏")],
            skus: vec![
                Sku {
                    id: "71".into(),
                    specs: vec![attr("颜色", "黑色")],
                    price: "10.00".into(),
                    quantity: 10,
                },
                Sku {
                    id: "72".into(),
                    specs: vec![attr("颜色", "白色")],
                    price: "12.00".into(),
                    quantity: 20,
                },
            ],
            images: vec![],
            description: "A cotton tee, printed.".into(),
        }
    }

    #[test]
    fn a_product_with_skus_maps_every_field() {
        let (m, s) = (map(), shop());
        let mapping = Mapping {
            map: &m,
            shop: &s,
            target: Platform::Taobao,
        };
        let item = mapping.map(&product(), "SF1688-7").unwrap();
        assert_eq!(item.category, "50000671");
        assert_eq!(item.seller_code, "SF1688-7");
        assert_eq!(item.skus.len(), 2);
        assert_eq!(item.skus[0].props, vec![("1627207".into(), "28341".into())]);
        assert_eq!(item.skus[0].price, "15.00");
        assert_eq!(item.skus[1].price, "18.00");
        // The lowest SKU price, the sum of the stock.
        assert_eq!((item.price.as_str(), item.quantity), ("15.00", 30));
        assert_eq!(item.props, vec![("20021".into(), "105255".into())]);
        assert_eq!(item.input_props, vec![("20000".into(), "广州".into())]);
        assert_eq!(item.shop.location_city, "杭州");
    }

    #[test]
    fn what_the_map_cannot_carry_is_skipped_with_the_reason() {
        let (m, s) = (map(), shop());
        let mapping = Mapping {
            map: &m,
            shop: &s,
            target: Platform::Taobao,
        };
        let mut p = product();
        p.category = "999".into();
        assert!(mapping.map(&p, "c").unwrap_err().contains("category `999`"));
        let mut p = product();
        p.skus[1].specs = vec![attr("颜色", "红色")];
        assert!(mapping.map(&p, "c").unwrap_err().contains("`红色`"));
        let mut p = product();
        p.skus[0].specs.push(attr("尺码", "XL"));
        assert!(mapping.map(&p, "c").unwrap_err().contains("`尺码`"));
        let mut p = product();
        p.skus.clear();
        p.quantity = 0;
        assert!(mapping.map(&p, "c").unwrap_err().contains("no stock"));
    }

    #[test]
    fn long_titles_are_cut_or_skipped_as_the_map_says() {
        let (mut m, s) = (map(), shop());
        let mut p = product();
        p.title = "棉".repeat(40);
        let item = Mapping {
            map: &m,
            shop: &s,
            target: Platform::Taobao,
        }
        .map(&p, "c")
        .unwrap();
        assert_eq!(item.title.chars().count(), 30);
        m.title.too_long = TooLong::Skip;
        let skipped = Mapping {
            map: &m,
            shop: &s,
            target: Platform::Taobao,
        }
        .map(&p, "c");
        assert!(skipped.unwrap_err().contains("title"));
        // JD names no limit: the title goes whole unless the map sets one.
        m.title.max_chars = None;
        let jd = Mapping {
            map: &m,
            shop: &s,
            target: Platform::Jd,
        };
        assert_eq!(jd.map(&p, "c").unwrap().title.chars().count(), 40);
    }
}
