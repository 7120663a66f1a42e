//! The listing map a user keeps for one target platform (`enqueue listing --map FILE`, or
//! `[listing] map` in the config): which source category becomes which target category,
//! which source attributes and SKU specs become which target properties, and the price,
//! stock and title rules (docs/design.md, "The listing map"). Read and checked once at
//! enqueue; the job carries the parsed map, so a file edited later changes no running job.
//!
//! Every problem names the file, the line and the key, and what was expected.

use super::{ConfigError, ConfigProblem};
use crate::platform::Platform;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use toml::Spanned;

/// A parsed, checked listing map.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListingMap {
    /// The platform whose ids the map names.
    pub target: Platform,
    /// How the target price is made from the source price.
    pub price: PriceRule,
    /// How much of the source stock is listed.
    pub stock: StockRule,
    /// What happens to a title longer than the target takes.
    pub title: TitleRule,
    /// Source category id → target category id.
    pub categories: BTreeMap<String, String>,
    /// Item attributes (not SKU specs) the target takes, by source attribute name.
    pub properties: Vec<PropertyMap>,
    /// SKU specs (colour, size...) as the target's sale properties, by source spec name.
    pub sale_properties: Vec<PropertyMap>,
}

/// One source attribute (or SKU spec) as a target property.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PropertyMap {
    /// Only for this source category; `None`: every category.
    pub category: Option<String>,
    /// The source attribute's name as the source platform gives it (`颜色`).
    pub source: String,
    /// The target property id (TOP `pid`, JD `attrId`).
    pub target: String,
    /// Source value → target value id (TOP `vid`, JD attribute value id). Empty for an item
    /// attribute: its text is sent as the property's input text.
    pub values: BTreeMap<String, String>,
}

/// The target price: `source × markup + add`, rounded up to a multiple of `round_to`, never
/// below `floor`. Money is in cents, the markup in ten-thousandths: no float rounding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriceRule {
    /// The multiplier in ten-thousandths (`1.30` = 13000).
    pub markup_per_10k: u64,
    /// Added after the markup (cents).
    pub add_cents: u64,
    /// Rounded up to a multiple of this (cents, at least 1).
    pub round_to_cents: u64,
    /// The lowest price listed (cents).
    pub floor_cents: u64,
}

impl Default for PriceRule {
    fn default() -> Self {
        PriceRule {
            markup_per_10k: 10_000,
            add_cents: 0,
            round_to_cents: 1,
            floor_cents: 1,
        }
    }
}

impl PriceRule {
    /// The target price of a source price (cents); `None` on overflow.
    pub fn apply(&self, source_cents: u64) -> Option<u64> {
        let marked = source_cents
            .checked_mul(self.markup_per_10k)?
            .div_ceil(10_000)
            .checked_add(self.add_cents)?;
        let step = self.round_to_cents.max(1);
        let rounded = marked.div_ceil(step).checked_mul(step)?;
        Some(rounded.max(self.floor_cents))
    }
}

/// The listed stock: the source stock less `keep_back`, at most `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StockRule {
    /// Kept back from every SKU's source stock (a margin against overselling).
    pub keep_back: u32,
    /// The most listed per SKU.
    pub max: u32,
}

impl Default for StockRule {
    fn default() -> Self {
        StockRule {
            keep_back: 0,
            max: 999_999,
        }
    }
}

impl StockRule {
    /// The stock listed for a source stock.
    pub fn apply(&self, source: u32) -> u32 {
        source.saturating_sub(self.keep_back).min(self.max)
    }
}

/// What to do with a title longer than the target takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum TooLong {
    /// Cut it at the limit (on a character boundary).
    #[default]
    Cut,
    /// Skip the item, with the reason.
    Skip,
}

/// The title rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct TitleRule {
    /// Cut or skip a title over the limit.
    pub too_long: TooLong,
    /// A limit of the user's, in characters, below the platform's own (TOP: 30 Chinese
    /// characters; JD names none).
    pub max_chars: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMap {
    target: Spanned<String>,
    #[serde(default)]
    price: RawPrice,
    #[serde(default)]
    stock: StockRule,
    #[serde(default)]
    title: TitleRule,
    #[serde(default)]
    category: Vec<RawCategory>,
    #[serde(default)]
    property: Vec<RawProperty>,
    #[serde(default)]
    sale_property: Vec<RawProperty>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawPrice {
    markup: Option<Spanned<String>>,
    add: Option<Spanned<String>>,
    round_to: Option<Spanned<String>>,
    floor: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCategory {
    source: Spanned<String>,
    target: Spanned<String>,
    /// For the reader of the file only.
    #[serde(default)]
    #[allow(dead_code)]
    name: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProperty {
    #[serde(default)]
    category: Option<Spanned<String>>,
    source: Spanned<String>,
    target: Spanned<String>,
    #[serde(default)]
    values: Option<Spanned<BTreeMap<String, String>>>,
}

/// A decimal with at most `places` decimal places, scaled by 10^places (`"1.3"`, 4 → 13000).
pub(crate) fn parse_scaled(s: &str, places: u32) -> Option<u64> {
    let s = s.trim();
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty()
        || frac.len() > places as usize
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let scale = 10u64.checked_pow(places)?;
    let whole = int.parse::<u64>().ok()?.checked_mul(scale)?;
    let frac = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<width$}", width = places as usize)
            .parse::<u64>()
            .ok()?
    };
    whole.checked_add(frac)
}

fn is_id(s: &str) -> bool {
    !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit())
}

impl ListingMap {
    /// Read and check the map at `path`.
    pub fn load(path: &Path) -> Result<ListingMap, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigError(vec![ConfigProblem {
                file: path.to_path_buf(),
                key: String::new(),
                line: None,
                message: format!("cannot read the listing map: {e}"),
                warning: false,
            }])
        })?;
        ListingMap::parse(path, &text)
    }

    /// Parse and check map text; `path` is used in messages only.
    pub fn parse(path: &Path, text: &str) -> Result<ListingMap, ConfigError> {
        let line_of = |at: usize| super::line_of(text, at);
        let raw: RawMap = toml::from_str(text).map_err(|e| ConfigError::of_toml(path, text, &e))?;
        let mut problems = Vec::new();
        let mut problem = |key: String, at: usize, message: String| {
            problems.push(ConfigProblem {
                file: path.to_path_buf(),
                key,
                line: Some(line_of(at)),
                message,
                warning: false,
            })
        };
        let target = match raw.target.get_ref().parse::<Platform>() {
            Ok(p @ (Platform::Taobao | Platform::Jd)) => p,
            Ok(Platform::Alibaba) => {
                problem(
                    "target".into(),
                    raw.target.span().start,
                    "1688 is a listing source, not a target: expected taobao or jd".into(),
                );
                Platform::Taobao
            }
            Err(e) => {
                problem("target".into(), raw.target.span().start, e.to_string());
                Platform::Taobao
            }
        };
        let mut price = PriceRule::default();
        let mut money = |key: &str, v: &Option<Spanned<String>>, places: u32, out: &mut u64| {
            if let Some(v) = v {
                match parse_scaled(v.get_ref(), places) {
                    Some(n) => *out = n,
                    None => problem(
                        format!("price.{key}"),
                        v.span().start,
                        format!(
                            "`{}` is not a decimal with at most {places} places",
                            v.get_ref()
                        ),
                    ),
                }
            }
        };
        money("markup", &raw.price.markup, 4, &mut price.markup_per_10k);
        money("add", &raw.price.add, 2, &mut price.add_cents);
        money(
            "round_to",
            &raw.price.round_to,
            2,
            &mut price.round_to_cents,
        );
        money("floor", &raw.price.floor, 2, &mut price.floor_cents);
        if price.round_to_cents == 0 {
            if let Some(v) = &raw.price.round_to {
                problem(
                    "price.round_to".into(),
                    v.span().start,
                    "must be at least 0.01".into(),
                );
            }
            price.round_to_cents = 1;
        }
        if price.markup_per_10k == 0 {
            if let Some(v) = &raw.price.markup {
                problem(
                    "price.markup".into(),
                    v.span().start,
                    "a markup of 0 lists everything at the floor price".into(),
                );
            }
        }
        let mut categories = BTreeMap::new();
        for (i, c) in raw.category.iter().enumerate() {
            let key = |f: &str| format!("category[{i}].{f}");
            if c.source.get_ref().trim().is_empty() {
                problem(key("source"), c.source.span().start, "empty".into());
            }
            if !is_id(c.target.get_ref()) {
                problem(
                    key("target"),
                    c.target.span().start,
                    format!(
                        "`{}` is not a {target} category id (digits)",
                        c.target.get_ref()
                    ),
                );
            }
            if categories
                .insert(c.source.get_ref().clone(), c.target.get_ref().clone())
                .is_some()
            {
                problem(
                    key("source"),
                    c.source.span().start,
                    format!("category `{}` is mapped twice", c.source.get_ref()),
                );
            }
        }
        let mut props = |table: &str, list: &[RawProperty], values_needed: bool| {
            let mut seen = HashSet::new();
            let mut out = Vec::new();
            for (i, p) in list.iter().enumerate() {
                let key = |f: &str| format!("{table}[{i}].{f}");
                let category = p.category.as_ref().map(|c| c.get_ref().clone());
                if !is_id(p.target.get_ref()) {
                    problem(
                        key("target"),
                        p.target.span().start,
                        format!(
                            "`{}` is not a {target} property id (digits)",
                            p.target.get_ref()
                        ),
                    );
                }
                let values = p
                    .values
                    .as_ref()
                    .map(|v| v.get_ref().clone())
                    .unwrap_or_default();
                if let Some((bad, at)) = p.values.as_ref().and_then(|v| {
                    v.get_ref()
                        .values()
                        .find(|id| !is_id(id))
                        .map(|id| (id.clone(), v.span().start))
                }) {
                    problem(
                        key("values"),
                        at,
                        format!("value id `{bad}` is not a {target} value id (digits)"),
                    );
                }
                if values_needed && values.is_empty() {
                    problem(
                        key("values"),
                        p.source.span().start,
                        "a SKU spec needs its values mapped to the target's value ids".into(),
                    );
                }
                if !seen.insert((category.clone(), p.source.get_ref().clone())) {
                    problem(
                        key("source"),
                        p.source.span().start,
                        format!("`{}` is mapped twice", p.source.get_ref()),
                    );
                }
                out.push(PropertyMap {
                    category,
                    source: p.source.get_ref().clone(),
                    target: p.target.get_ref().clone(),
                    values,
                });
            }
            out
        };
        let properties = props("property", &raw.property, false);
        let sale_properties = props("sale_property", &raw.sale_property, true);
        if categories.is_empty() {
            problems.push(ConfigProblem {
                file: path.to_path_buf(),
                key: "category".into(),
                line: None,
                message: "no [[category]]: every item would be skipped as unmapped".into(),
                warning: false,
            });
        }
        if !problems.is_empty() {
            return Err(ConfigError(problems));
        }
        Ok(ListingMap {
            target,
            price,
            stock: raw.stock,
            title: raw.title,
            categories,
            properties,
            sale_properties,
        })
    }

    /// The map of source attribute `name` in source `category`: one naming the category
    /// before one for every category.
    pub(crate) fn property<'a>(
        list: &'a [PropertyMap],
        category: &str,
        name: &str,
    ) -> Option<&'a PropertyMap> {
        list.iter()
            .filter(|p| p.source == name)
            .find(|p| p.category.as_deref() == Some(category))
            .or_else(|| {
                list.iter()
                    .find(|p| p.source == name && p.category.is_none())
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
target = "taobao"
[price]
markup = "1.3"
add = "2"
round_to = "0.10"
floor = "9.90"
[stock]
keep_back = 2
max = 100
[title]
too_long = "skip"
[[category]]
source = "1031910"
target = "50000671"
name = "T恤"
[[property]]
source = "材质"
target = "20021"
[[sale_property]]
source = "颜色"
target = "1627207"
values = { "黑色" = "28341" }
"#;

    fn parse(text: &str) -> Result<ListingMap, ConfigError> {
        ListingMap::parse(Path::new("map.toml"), text)
    }

    #[test]
    fn a_good_map_parses() {
        let m = parse(GOOD).unwrap();
        assert_eq!(m.target, Platform::Taobao);
        assert_eq!(m.categories["1031910"], "50000671");
        assert_eq!(m.price.markup_per_10k, 13_000);
        assert_eq!(m.title.too_long, TooLong::Skip);
        assert_eq!(m.sale_properties[0].values["黑色"], "28341");
        assert!(ListingMap::property(&m.properties, "1", "材质").is_some());
        assert!(ListingMap::property(&m.properties, "1", "产地").is_none());
    }

    #[test]
    fn price_rule_marks_up_rounds_up_and_floors() {
        let m = parse(GOOD).unwrap();
        // 10.00 × 1.3 + 2 = 15.00, a multiple of 0.10 already.
        assert_eq!(m.price.apply(1000), Some(1500));
        // 10.01 × 1.3 = 13.013 → 13.02 (up), + 2 = 15.02 → 15.10.
        assert_eq!(m.price.apply(1001), Some(1510));
        // 1.00 → 3.30, below the floor of 9.90.
        assert_eq!(m.price.apply(100), Some(990));
        assert_eq!(m.stock.apply(50), 48);
        assert_eq!(m.stock.apply(1000), 100);
        assert_eq!(m.stock.apply(1), 0);
    }

    #[test]
    fn problems_name_the_line_and_key() {
        let bad = GOOD
            .replace("markup = \"1.3\"", "markup = \"1.3x\"")
            .replace("target = \"50000671\"", "target = \"T-shirts\"");
        let e = parse(&bad).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("map.toml:4: key `price.markup`"), "{text}");
        assert!(text.contains("category[0].target"), "{text}");
        let unvalued = GOOD.replace("values = { \"黑色\" = \"28341\" }", "");
        let e = parse(&unvalued).unwrap_err().to_string();
        assert!(e.contains("sale_property[0].values"), "{e}");
        let alibaba = GOOD.replace("target = \"taobao\"", "target = \"1688\"");
        assert!(parse(&alibaba)
            .unwrap_err()
            .to_string()
            .contains("not a target"));
        let typo = GOOD.replace("[stock]", "[stocks]");
        assert!(parse(&typo).is_err());
    }

    #[test]
    fn scaled_decimals() {
        assert_eq!(parse_scaled("1.35", 4), Some(13_500));
        assert_eq!(parse_scaled("12", 2), Some(1200));
        assert_eq!(parse_scaled("0.1", 2), Some(10));
        assert_eq!(parse_scaled("1.234", 2), None);
        assert_eq!(parse_scaled("-1", 2), None);
        assert_eq!(parse_scaled("", 2), None);
    }
}
