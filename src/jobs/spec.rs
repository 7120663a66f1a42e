//! Job specifications: what `syncfleet enqueue` accepts on the command line or in a
//! `--spec FILE` (examples in `jobs/`), and the item-id list reader.
//!
//! Bad input stops the enqueue before anything is written, naming the file and line.

use crate::config::listing_map::ListingMap;
use crate::platform::{Platform, ShopListing};
pub use crate::store::JobKind;
pub use crate::throttle::Lane;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::fmt;
use std::io::BufRead;
use std::path::{Path, PathBuf};

/// Longest order window one job may sync: 366 days (a leap year). The window becomes one item
/// per day slice (`jobs.order_slice_s`), so an unbounded window (`--since 0001-01-01 --until
/// 9999-12-31`) would queue millions of tasks; a longer sync is several jobs.
pub(crate) const MAX_ORDER_WINDOW_DAYS: i64 = 366;

/// The target shop of a listing that names none: a platform's one configured session.
pub const DEFAULT_SHOP: &str = "default";

fn default_shop() -> String {
    DEFAULT_SHOP.to_string()
}

/// A job as the producer sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum JobSpec {
    /// Copy items from `from` to `to`: `item_get` on the source, `item_add` on the target.
    Listing {
        /// The platform the items are read from.
        from: Platform,
        /// The platform the items are created on.
        to: Platform,
        /// File with one item id per line (`-` = stdin), relative to the spec file.
        #[serde(default)]
        items_file: Option<PathBuf>,
        /// Inline item ids (small jobs and tests).
        #[serde(default)]
        items: Vec<String>,
        /// The shop on `to` the items are listed to: an item already listed there (by any
        /// job) is skipped (docs/design.md, "Listed once").
        #[serde(default = "default_shop")]
        to_shop: String,
        /// List again items already listed on `to_shop`: new products, on purpose.
        #[serde(default)]
        relist: bool,
        /// Write from a source read served from the stale cache (the source could not answer)
        /// when it is at most this many seconds old; `None`: never write from degraded input.
        #[serde(default)]
        allow_stale_source_s: Option<u64>,
        /// Interactive work goes before bulk and has a share kept for it (docs/design.md,
        /// "Lanes").
        #[serde(default, skip_serializing_if = "Lane::is_bulk")]
        lane: Lane,
        /// The listing map file (`--map`; in a spec file, relative to it); read at enqueue
        /// into `map`. Without one, `[listing] map` of the config.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        map_file: Option<PathBuf>,
        /// The listing map the job's items are mapped by, read at enqueue: a map file edited
        /// later changes no job already queued (docs/design.md, "The listing map").
        #[serde(default, skip_serializing_if = "Option::is_none")]
        map: Option<Box<ListingMap>>,
        /// What the target shop's items say of it (location, item type), from the config
        /// at enqueue.
        #[serde(default)]
        shop_listing: ShopListing,
    },
    /// Sync orders modified in [since, until) for one shop.
    Orders {
        /// The platform whose orders are synced.
        platform: Platform,
        /// The shop the synced orders are recorded under in the ledger.
        shop: String,
        /// Start of the modification window (inclusive).
        since: DateTime<Utc>,
        /// End of the modification window (exclusive).
        until: DateTime<Utc>,
        /// Interactive work goes before bulk and has a share kept for it (docs/design.md,
        /// "Lanes").
        #[serde(default, skip_serializing_if = "Lane::is_bulk")]
        lane: Lane,
    },
    /// Query logistics of the shop's shipped, unsigned orders not queried recently.
    Logistics {
        /// The platform the logistics queries go to.
        platform: Platform,
        /// The shop whose orders in the ledger are queried.
        shop: String,
        /// Interactive work goes before bulk and has a share kept for it (docs/design.md,
        /// "Lanes").
        #[serde(default, skip_serializing_if = "Lane::is_bulk")]
        lane: Lane,
    },
}

impl JobSpec {
    pub(crate) fn kind(&self) -> JobKind {
        match self {
            JobSpec::Listing { .. } => JobKind::Listing,
            JobSpec::Orders { .. } => JobKind::Orders,
            JobSpec::Logistics { .. } => JobKind::Logistics,
        }
    }

    /// The shop the job works for: a listing's target shop, else the shop synced. Its
    /// session signs the job's calls on that shop's platform ([`JobSpec::shop_platform`]),
    /// and its weight sets the job's share of the queue (docs/design.md, "Shops").
    pub(crate) fn shop(&self) -> &str {
        match self {
            JobSpec::Listing { to_shop, .. } => to_shop,
            JobSpec::Orders { shop, .. } | JobSpec::Logistics { shop, .. } => shop,
        }
    }

    /// `platform/shop`, as `status` and the dashboard name the shop a job works for.
    pub(crate) fn shop_label(&self) -> String {
        format!("{}/{}", self.shop_platform(), self.shop())
    }

    /// The spec of stored job `job_id`; `None` when it no longer parses (written by another
    /// version): callers that only show or order the job go on without it.
    pub(crate) async fn stored(
        store: &crate::store::Store,
        job_id: i64,
    ) -> Result<Option<JobSpec>, crate::store::StoreError> {
        let text = store.job_spec(job_id).await?;
        Ok(serde_json::from_str(&text).ok())
    }

    /// The job's lane.
    pub(crate) fn lane(&self) -> Lane {
        match self {
            JobSpec::Listing { lane, .. }
            | JobSpec::Orders { lane, .. }
            | JobSpec::Logistics { lane, .. } => *lane,
        }
    }

    /// Put the job in `lane`.
    pub(crate) fn set_lane(&mut self, to: Lane) {
        match self {
            JobSpec::Listing { lane, .. }
            | JobSpec::Orders { lane, .. }
            | JobSpec::Logistics { lane, .. } => *lane = to,
        }
    }

    /// The platform of [`JobSpec::shop`].
    pub(crate) fn shop_platform(&self) -> Platform {
        match self {
            JobSpec::Listing { to, .. } => *to,
            JobSpec::Orders { platform, .. } | JobSpec::Logistics { platform, .. } => *platform,
        }
    }

    /// The platforms the job calls (listing: source then target), for checking at start
    /// that a worker has their secrets.
    pub(crate) fn platforms(&self) -> Vec<Platform> {
        match self {
            JobSpec::Listing { from, to, .. } => vec![*from, *to],
            JobSpec::Orders { platform, .. } | JobSpec::Logistics { platform, .. } => {
                vec![*platform]
            }
        }
    }

    /// Read a spec file (TOML). Relative `items_file` paths resolve against the spec's folder.
    pub(crate) fn load(path: &Path) -> Result<JobSpec, InputError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| InputError::new(path, None, format!("cannot read job spec: {e}")))?;
        JobSpec::parse(path, &text)
    }

    /// Parse and check spec text as [`JobSpec::load`] does; `path` names the file in messages
    /// and is where a relative `items_file` resolves from.
    pub(crate) fn parse(path: &Path, text: &str) -> Result<JobSpec, InputError> {
        // Parsed flat (not as the tagged enum) so toml keeps spans: errors name the line.
        let file: SpecFile = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
            InputError::new(path, line, e.message().to_string())
        })?;
        let mut spec = file
            .into_spec()
            .map_err(|e| InputError::new(path, None, e.to_string()))?;
        if let JobSpec::Listing {
            items_file,
            map_file,
            ..
        } = &mut spec
        {
            for f in [items_file, map_file].into_iter().flatten() {
                if f.is_relative() && f.as_os_str() != "-" {
                    if let Some(dir) = path.parent() {
                        *f = dir.join(&*f);
                    }
                }
            }
        }
        spec.validate()
            .map_err(|e| InputError::new(path, None, e.to_string()))?;
        Ok(spec)
    }

    /// Checks that do not need the item list.
    pub(crate) fn validate(&self) -> Result<(), SpecError> {
        match self {
            JobSpec::Listing {
                from,
                to,
                items_file,
                items,
                to_shop,
                ..
            } => {
                if from == to {
                    return Err(SpecError::ListingToItself(*from));
                }
                if to_shop.trim().is_empty() {
                    return Err(SpecError::EmptyShop);
                }
                if items_file.is_none() && items.is_empty() {
                    return Err(SpecError::NoItems);
                }
                Ok(())
            }
            JobSpec::Orders {
                since, until, shop, ..
            } => {
                if since >= until {
                    return Err(SpecError::WindowNotOrdered {
                        since: *since,
                        until: *until,
                    });
                }
                let window = *until - *since;
                if window > chrono::Duration::days(MAX_ORDER_WINDOW_DAYS) {
                    return Err(SpecError::WindowTooLong {
                        since: *since,
                        until: *until,
                        days: window.num_days(),
                    });
                }
                if shop.trim().is_empty() {
                    return Err(SpecError::EmptyShop);
                }
                Ok(())
            }
            JobSpec::Logistics { shop, .. } => {
                if shop.trim().is_empty() {
                    return Err(SpecError::EmptyShop);
                }
                Ok(())
            }
        }
    }
}

/// A job spec that is well-formed but not a job the producer accepts.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum SpecError {
    /// A listing whose source and target are the same platform.
    #[error("listing from {0} to itself")]
    ListingToItself(Platform),
    /// A listing with neither an item file nor inline items.
    #[error("listing needs `items_file` or `items`")]
    NoItems,
    /// An order window that ends before it starts.
    #[error("`since` ({since}) must be before `until` ({until})")]
    WindowNotOrdered {
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    },
    /// An order window longer than [`MAX_ORDER_WINDOW_DAYS`].
    #[error(
        "order window {since} .. {until} spans {days} days; at most \
         {MAX_ORDER_WINDOW_DAYS} days are allowed per job (enqueue a longer \
         sync as several jobs)"
    )]
    WindowTooLong {
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        days: i64,
    },
    /// An empty `shop`.
    #[error("`shop` is empty")]
    EmptyShop,
    /// A spec file without a key its kind needs.
    #[error("key `{key}` is required for a {kind} job")]
    MissingKey { key: &'static str, kind: JobKind },
}

/// The on-disk shape of a spec file; [`SpecFile::into_spec`] checks which keys each kind needs.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecFile {
    #[serde(deserialize_with = "deserialize_kind")]
    kind: JobKind,
    from: Option<Platform>,
    to: Option<Platform>,
    items_file: Option<PathBuf>,
    #[serde(default)]
    items: Vec<String>,
    to_shop: Option<String>,
    relist: Option<bool>,
    allow_stale_source_s: Option<u64>,
    map_file: Option<PathBuf>,
    platform: Option<Platform>,
    shop: Option<String>,
    since: Option<DateTime<Utc>>,
    until: Option<DateTime<Utc>>,
    lane: Option<Lane>,
}

impl SpecFile {
    fn into_spec(self) -> Result<JobSpec, SpecError> {
        fn need<T>(v: Option<T>, kind: JobKind, key: &'static str) -> Result<T, SpecError> {
            v.ok_or(SpecError::MissingKey { key, kind })
        }
        let kind = self.kind;
        Ok(match kind {
            JobKind::Listing => JobSpec::Listing {
                from: need(self.from, kind, "from")?,
                to: need(self.to, kind, "to")?,
                items_file: self.items_file,
                items: self.items,
                to_shop: self.to_shop.unwrap_or_else(default_shop),
                relist: self.relist.unwrap_or(false),
                allow_stale_source_s: self.allow_stale_source_s,
                lane: self.lane.unwrap_or_default(),
                map_file: self.map_file,
                map: None,
                shop_listing: ShopListing::default(),
            },
            JobKind::Orders => JobSpec::Orders {
                platform: need(self.platform, kind, "platform")?,
                shop: need(self.shop, kind, "shop")?,
                since: need(self.since, kind, "since")?,
                until: need(self.until, kind, "until")?,
                lane: self.lane.unwrap_or_default(),
            },
            JobKind::Logistics => JobSpec::Logistics {
                platform: need(self.platform, kind, "platform")?,
                shop: need(self.shop, kind, "shop")?,
                lane: self.lane.unwrap_or_default(),
            },
        })
    }
}

/// `kind = "..."` read through the ledger's own spelling ([`JobKind`]'s `FromStr`), so the
/// error keeps toml's span and names the line.
fn deserialize_kind<'de, D: serde::Deserializer<'de>>(d: D) -> Result<JobKind, D::Error> {
    let text = String::deserialize(d)?;
    text.parse().map_err(serde::de::Error::custom)
}

/// Bad producer input: which file, which line, what was expected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) struct InputError {
    pub(crate) file: PathBuf,
    pub(crate) line: Option<usize>,
    pub(crate) message: String,
}

impl InputError {
    pub(crate) fn new(file: &Path, line: Option<usize>, message: impl Into<String>) -> Self {
        InputError {
            file: file.to_path_buf(),
            line,
            message: message.into(),
        }
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Item ids read from a list, with what was dropped on the way.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct ItemList {
    pub(crate) ids: Vec<String>,
    /// Lines repeating an id already listed (kept once).
    pub(crate) duplicates: usize,
}

/// Longest item id accepted: all three platforms use 64-bit numeric ids.
const MAX_ID_DIGITS: usize = 20;

/// Read one item id per line. Blank lines and `#` comments are ignored; anything that is
/// not a positive decimal id stops the read with the file and line. `on_line` is called
/// every 10,000 lines (progress).
pub(crate) fn read_item_ids(
    reader: impl BufRead,
    source: &Path,
    mut on_line: impl FnMut(usize),
) -> Result<ItemList, InputError> {
    let mut list = ItemList::default();
    let mut seen = HashSet::new();
    for (idx, line) in reader.lines().enumerate() {
        let lineno = idx + 1;
        let line =
            line.map_err(|e| InputError::new(source, Some(lineno), format!("cannot read: {e}")))?;
        if lineno % 10_000 == 0 {
            on_line(lineno);
        }
        // A file saved by a Windows editor starts with a UTF-8 byte-order mark: not data.
        let line = if lineno == 1 {
            line.strip_prefix('\u{feff}').unwrap_or(&line)
        } else {
            &line
        };
        let id = line.trim();
        if id.is_empty() || id.starts_with('#') {
            continue;
        }
        let valid = id.len() <= MAX_ID_DIGITS
            && id.bytes().all(|b| b.is_ascii_digit())
            && id.bytes().any(|b| b != b'0');
        if !valid {
            let shown: String = id.chars().take(40).collect();
            return Err(InputError::new(
                source,
                Some(lineno),
                format!("expected a positive numeric item id (one per line), found `{shown}`"),
            ));
        }
        let id = id.trim_start_matches('0').to_string();
        if seen.insert(id.clone()) {
            list.ids.push(id);
        } else {
            list.duplicates += 1;
        }
    }
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_ids_skipping_comments_and_duplicates() {
        let text = "# header\n1\n\n 2 \n1\n003\n";
        let list = read_item_ids(text.as_bytes(), Path::new("items.txt"), |_| {}).unwrap();
        assert_eq!(list.ids, vec!["1", "2", "3"]);
        assert_eq!(list.duplicates, 1);
    }

    #[test]
    fn a_byte_order_mark_at_the_start_is_not_part_of_the_first_id() {
        let text = "\u{feff}17\r\n18\r\n";
        let list = read_item_ids(text.as_bytes(), Path::new("items.txt"), |_| {}).unwrap();
        assert_eq!(list.ids, vec!["17", "18"]);
        // Anywhere else it is not an id.
        let text = "17\n\u{feff}18\n";
        assert!(read_item_ids(text.as_bytes(), Path::new("items.txt"), |_| {}).is_err());
    }

    #[test]
    fn bad_line_names_file_and_line() {
        let text = "1\n2\nabc\n4\n";
        let err = read_item_ids(text.as_bytes(), Path::new("items.txt"), |_| {}).unwrap_err();
        assert_eq!(err.line, Some(3));
        assert_eq!(
            err.to_string(),
            "items.txt:3: expected a positive numeric item id (one per line), found `abc`"
        );
    }

    #[test]
    fn zero_and_overlong_ids_are_rejected() {
        for bad in ["0", "000", "123456789012345678901"] {
            assert!(
                read_item_ids(bad.as_bytes(), Path::new("x"), |_| {}).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn spec_file_errors_name_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("job.toml");
        std::fs::write(
            &path,
            "kind = \"listing\"\nfrom = \"alibaba\"\nto = \"ebay\"\nitems = [\"1\"]\n",
        )
        .unwrap();
        let err = JobSpec::load(&path).unwrap_err();
        assert_eq!(err.line, Some(3), "{err}");
    }

    #[test]
    fn listing_spec_resolves_items_file_next_to_spec() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("job.toml");
        std::fs::write(
            &path,
            "kind = \"listing\"\nfrom = \"alibaba\"\nto = \"taobao\"\nitems_file = \"ids.txt\"\n",
        )
        .unwrap();
        match JobSpec::load(&path).unwrap() {
            JobSpec::Listing { items_file, .. } => {
                assert_eq!(items_file, Some(dir.path().join("ids.txt")))
            }
            other => panic!("{other:?}"),
        }
    }

    fn orders(since: &str, until: &str) -> JobSpec {
        JobSpec::Orders {
            platform: Platform::Taobao,
            shop: "s".into(),
            since: since.parse().unwrap(),
            until: until.parse().unwrap(),
            lane: Default::default(),
        }
    }

    #[test]
    fn orders_window_is_bounded() {
        // Exactly the bound (a leap year) is allowed; one millisecond more is not.
        orders("2028-01-01T00:00:00Z", "2029-01-01T00:00:00Z")
            .validate()
            .unwrap();
        let err = orders("2028-01-01T00:00:00Z", "2029-01-01T00:00:00.001Z")
            .validate()
            .unwrap_err()
            .to_string();
        assert!(err.contains("366 days are allowed"), "{err}");
        // The window's bounds: the message says what was given and what is allowed.
        let err = orders("0001-01-01T00:00:00Z", "9999-12-31T00:00:00Z")
            .validate()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("0001-01-01 00:00:00 UTC .. 9999-12-31 00:00:00 UTC")
                && err.contains("spans 3652058 days")
                && err.contains("at most 366 days"),
            "{err}"
        );
    }

    #[test]
    fn orders_window_must_be_ordered() {
        let spec = JobSpec::Orders {
            platform: Platform::Taobao,
            shop: "s".into(),
            since: "2026-01-02T00:00:00Z".parse().unwrap(),
            until: "2026-01-01T00:00:00Z".parse().unwrap(),
            lane: Default::default(),
        };
        assert!(spec.validate().is_err());
    }
}
