//! Change messages: a worker started with `--listen PLATFORM[:SHOP]` pulls the platform's
//! change messages (TOP's message service) through the gates, interactive lane, and brings
//! the ledger up to date with each (docs/design.md, "Continuous sync").
//!
//! Per batch: the ids already recorded are dropped (a message delivered again costs no
//! write); the orders the others carry are written if they advanced; the messages are
//! recorded; only then is the batch confirmed, so a crash before the confirm gets the same
//! messages again and writes nothing twice. A trade message carries the order's new status
//! and payment, so it costs no call; its state is taken when it is newer than the one held,
//! and the order's own `modified` is never the message's time; the incremental sweep stays as the safety net for
//! messages lost, late or never sent.

use super::orders::{count_quarantined, to_notice};
use crate::config::Config;
use crate::link::gateway::{CallContext, Gateway, LinkError};
use crate::platform::{ApiRequest, ApiResponse, Message, Platform};
use crate::shutdown::Shutdown;
use crate::store::{Quarantined, ReceivedMessage, Store, StoreError};
use crate::throttle::Lane;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

/// What `--listen` names: the platform, and the shop its own session's messages belong to.
/// One listener takes the whole app's messages: each names its seller, which finds its shop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListenTarget {
    pub(crate) platform: Platform,
    /// The shop name for messages of the platform's own session (an empty seller).
    pub(crate) shop: String,
    /// Seller name -> shop (`[shops.<name>] seller`); a seller not here is its own shop name.
    pub(crate) sellers: std::collections::BTreeMap<String, String>,
}

impl ListenTarget {
    /// The target for `platform`'s messages, its sellers' shops from `cfg`.
    pub(crate) fn new(cfg: &Config, platform: Platform, shop: String) -> ListenTarget {
        ListenTarget {
            platform,
            shop,
            sellers: cfg.shops_by_seller(platform),
        }
    }

    /// This target, also mapping the directory's served shops of its platform by seller (the
    /// config's own mapping wins).
    pub(crate) fn with_directory(&self, shops: &[crate::store::LedgerShop]) -> ListenTarget {
        let mut t = self.clone();
        for s in shops
            .iter()
            .filter(|s| s.platform == self.platform && s.removed_at.is_none())
        {
            if let Some(seller) = &s.seller {
                t.sellers
                    .entry(seller.clone())
                    .or_insert_with(|| s.shop.clone());
            }
        }
        t
    }

    /// The shop a message of `seller` belongs to.
    pub(crate) fn shop_of(&self, seller: &str) -> String {
        if seller.is_empty() {
            return self.shop.clone();
        }
        self.sellers
            .get(seller)
            .cloned()
            .unwrap_or_else(|| seller.to_string())
    }
}

/// Why a batch was not taken.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ListenError {
    /// A call of the message API failed.
    #[error(transparent)]
    Call(#[from] LinkError),
    /// The ledger could not record the batch (it is not confirmed: it comes again).
    #[error(transparent)]
    Ledger(#[from] StoreError),
}

/// When to pull and when to acknowledge: a pure policy. Each pull and each confirm is a call
/// counted against the app's quota, so a listener pulls every `every` (at once again after a
/// full batch, less often while nothing comes, up to `idle_max`) and acknowledges what it
/// recorded in batches, at the latest `confirm_within` after the oldest (below the platform's
/// redelivery time: a message not yet acknowledged is delivered again, and dropped by id).
/// `every` bounds how late a change is seen while changes flow; `idle_max` after a quiet
/// spell (docs/design.md, "Continuous sync").
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cadence {
    every: Duration,
    idle_max: Duration,
    confirm_within: Duration,
    idle: Duration,
    /// Recorded, not acknowledged yet, and how long the oldest has waited.
    unconfirmed: Vec<u64>,
    waited: Duration,
}

/// Ids acknowledged per confirm call at most.
pub(crate) const CONFIRM_BATCH: usize = 200;

/// Ids kept waiting for an acknowledgement at most: while confirms keep failing the oldest
/// are dropped (the platform delivers them again, and they are dropped by id), so a
/// listener's memory stays bounded however long the outage.
pub(crate) const UNCONFIRMED_MAX: usize = 50 * CONFIRM_BATCH;

impl Cadence {
    pub(crate) fn new(every: Duration, idle_max: Duration, confirm_within: Duration) -> Cadence {
        Cadence {
            every,
            idle_max: idle_max.max(every),
            confirm_within,
            idle: every,
            unconfirmed: Vec::new(),
            waited: Duration::ZERO,
        }
    }

    /// A pull brought `n` messages of at most `quantity`, the ledger has them and `ids` are
    /// to acknowledge: the wait before the next pull.
    pub(crate) fn pulled(&mut self, n: usize, quantity: usize, ids: Vec<u64>) -> Duration {
        if self.unconfirmed.is_empty() {
            self.waited = Duration::ZERO;
        }
        self.unconfirmed.extend(ids);
        self.keep_bounded();
        let wait = if n >= quantity {
            Duration::ZERO
        } else if n > 0 {
            self.idle = self.every;
            self.every
        } else {
            let wait = self.idle;
            self.idle = (self.idle * 2).min(self.idle_max);
            wait
        };
        // Never sleep past the acknowledgement that is due.
        if self.unconfirmed.is_empty() {
            wait
        } else {
            wait.min(self.confirm_within.saturating_sub(self.waited))
        }
    }

    /// `slept` passed since the last call.
    pub(crate) fn slept(&mut self, slept: Duration) {
        if !self.unconfirmed.is_empty() {
            self.waited += slept;
        }
    }

    /// The ids to acknowledge now: a full batch, or all once the oldest waited long enough
    /// (or `stopping`).
    pub(crate) fn take_due(&mut self, stopping: bool) -> Vec<u64> {
        let due = self.unconfirmed.len() >= CONFIRM_BATCH
            || (!self.unconfirmed.is_empty() && (stopping || self.waited >= self.confirm_within));
        if !due {
            return Vec::new();
        }
        let n = self.unconfirmed.len().min(CONFIRM_BATCH);
        let out: Vec<u64> = self.unconfirmed.drain(..n).collect();
        if self.unconfirmed.is_empty() {
            self.waited = Duration::ZERO;
        }
        out
    }

    /// A confirm of `ids` failed: they wait for the next one (the oldest beyond
    /// [`UNCONFIRMED_MAX`] are let go).
    pub(crate) fn put_back(&mut self, ids: Vec<u64>) {
        // Older than those recorded since: back in front.
        let newer = std::mem::replace(&mut self.unconfirmed, ids);
        self.unconfirmed.extend(newer);
        self.keep_bounded();
    }

    fn keep_bounded(&mut self) {
        if let Some(over) = self.unconfirmed.len().checked_sub(UNCONFIRMED_MAX) {
            self.unconfirmed.drain(..over);
        }
    }
}

/// Bring the ledger up to date with `messages` (pulled or pushed): drop the ids recorded
/// already, write the orders the others carry if they advanced, record the ids. Returns every
/// id of the batch: what may be acknowledged now.
pub(crate) async fn take_messages(
    store: &Store,
    target: &ListenTarget,
    messages: &[Message],
) -> Result<Vec<u64>, StoreError> {
    let ids: Vec<u64> = messages.iter().map(|m| m.id).collect();
    let known = store.known_messages(target.platform, &ids).await?;
    let mut seen = HashSet::new();
    let fresh: Vec<&Message> = messages
        .iter()
        .filter(|m| !known.contains(&m.id) && seen.insert(m.id))
        .collect();
    // The directory's shops are added while the listener runs: their sellers are read with
    // each batch that has news (docs/design.md, "Shops in the ledger").
    let directory;
    let target = if fresh.iter().any(|m| !m.seller.is_empty()) {
        directory = target.with_directory(&store.ledger_shops().await?);
        &directory
    } else {
        target
    };
    let shop_of = |m: &Message| target.shop_of(&m.seller);
    let notices: Vec<_> = fresh
        .iter()
        .filter_map(|m| {
            let o = m.order.as_ref()?;
            match to_notice(target.platform, &shop_of(m), o, m.born) {
                Ok(order) => Some(order),
                Err(amount) => {
                    tracing::warn!(
                        message = m.id,
                        order = %o.order_id,
                        "a message's order not stored: its amount `{amount}` is not a decimal (the sweep reads it again)"
                    );
                    None
                }
            }
        })
        .collect();
    store.apply_order_notices(&notices).await?;
    let records: Vec<ReceivedMessage> = fresh
        .iter()
        .map(|m| ReceivedMessage {
            id: m.id,
            topic: m.topic.clone(),
            shop: shop_of(m),
            order_id: m.order.as_ref().map(|o| o.order_id.clone()),
            born: m.born,
        })
        .collect();
    store.record_messages(target.platform, &records).await?;
    Ok(ids)
}

/// Pull one batch and bring the ledger up to date; returns how many messages it held and
/// the ids to acknowledge.
pub(crate) async fn listen_once(
    gateway: &Gateway,
    store: &Store,
    cfg: &Config,
    target: &ListenTarget,
    halt: &Shutdown,
) -> Result<(usize, Vec<u64>), ListenError> {
    let quantity = cfg.jobs.listen_batch.clamp(10, 200);
    let reply = gateway
        .call(
            target.platform,
            ApiRequest::MessageConsume { quantity },
            &call_context(cfg, halt),
        )
        .await?;
    // An answer from the stale cache is an old batch: nothing new in it.
    if reply.stale.is_some() {
        return Ok((0, Vec::new()));
    }
    let ApiResponse::Messages {
        messages,
        unreadable,
    } = reply.response
    else {
        return Ok((0, Vec::new()));
    };
    let mut ids = take_messages(store, target, &messages).await?;
    // A message that cannot be read is quarantined alone and acknowledged (when its id could
    // be read): it neither holds back its batch nor comes back to be paid for again.
    if !unreadable.is_empty() {
        let bad: Vec<Quarantined> = unreadable
            .iter()
            .map(|u| Quarantined {
                source: "message".into(),
                platform: target.platform,
                record_id: u.record_id(),
                // The listener's own shop: a replay files the message as this listener would.
                shop: target.shop.clone(),
                reason: u.reason.clone(),
                raw: u.raw.clone(),
            })
            .collect();
        store.quarantine(&bad).await?;
        count_quarantined(&bad);
        tracing::warn!(platform = %target.platform, messages = bad.len(), "change messages that could not be read were quarantined (syncfleet quarantine lists them)");
        ids.extend(
            unreadable
                .iter()
                .filter_map(|u| u.id.as_deref().and_then(|id| id.parse::<u64>().ok())),
        );
    }
    Ok((messages.len() + unreadable.len(), ids))
}

fn call_context(cfg: &Config, halt: &Shutdown) -> CallContext {
    CallContext::for_task(&cfg.link)
        .with_lane(Lane::Interactive)
        .with_halt(halt.clone())
}

/// Acknowledge what [`Cadence`] says is due; a failed confirm puts the ids back.
async fn confirm_due(
    gateway: &Gateway,
    cfg: &Config,
    target: &ListenTarget,
    cadence: &mut Cadence,
    stopping: bool,
) {
    loop {
        let ids = cadence.take_due(stopping);
        if ids.is_empty() {
            return;
        }
        // The stop must not cut the last acknowledgement: a context that is not halted.
        let ctx = CallContext::for_task(&cfg.link).with_lane(Lane::Interactive);
        let confirm = ApiRequest::MessageConfirm { ids: ids.clone() };
        if let Err(e) = gateway.call(target.platform, confirm, &ctx).await {
            tracing::warn!(platform = %target.platform, "change messages not acknowledged (they come again and are dropped by id): {e}");
            if !stopping {
                cadence.put_back(ids);
            }
            return;
        }
    }
}

/// Pull messages until `shutdown` on the [`Cadence`], acknowledging in batches.
pub(crate) async fn run_listen_loop(
    gateway: Gateway,
    store: Store,
    cfg: Arc<Config>,
    target: ListenTarget,
    shutdown: Shutdown,
) {
    let quantity = cfg.jobs.listen_batch.clamp(10, 200) as usize;
    let mut cadence = Cadence::new(
        Duration::from_millis(cfg.jobs.listen_every_ms.max(100)),
        Duration::from_millis(cfg.jobs.listen_idle_max_ms.max(100)),
        Duration::from_millis(cfg.jobs.listen_confirm_within_ms.max(100)),
    );
    tracing::info!(platform = %target.platform, shop = %target.shop, "listening for change messages");
    while !shutdown.is_triggered() {
        let pause = match listen_once(&gateway, &store, &cfg, &target, &shutdown).await {
            Ok((n, ids)) => cadence.pulled(n, quantity, ids),
            Err(e) => {
                tracing::warn!(platform = %target.platform, "change messages not taken this round (they come again): {e}");
                cadence
                    .pulled(0, quantity, Vec::new())
                    .max(Duration::from_secs(1))
            }
        };
        confirm_due(&gateway, &cfg, &target, &mut cadence, false).await;
        let started = tokio::time::Instant::now();
        tokio::select! {
            _ = shutdown.wait() => {}
            _ = tokio::time::sleep(pause) => {}
        }
        cadence.slept(started.elapsed());
    }
    confirm_due(&gateway, &cfg, &target, &mut cadence, true).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_finds_its_shop_by_seller() {
        let text = "[shops.acme]\nplatform = \"taobao\"\nsession_env = \"X\"\nseller = \"acme-flagship\"\n\
                    [shops.beta]\nplatform = \"taobao\"\nsession_env = \"Y\"\n";
        let cfg = Config::parse(std::path::Path::new("c.toml"), text).expect("config");
        let t = ListenTarget::new(&cfg, Platform::Taobao, "own".into());
        assert_eq!(t.shop_of("acme-flagship"), "acme");
        assert_eq!(t.shop_of("beta"), "beta");
        assert_eq!(t.shop_of(""), "own", "the app's own session");
        assert_eq!(t.shop_of("stranger"), "stranger", "unknown: its own name");
        // The directory's shops: by their seller; the config's mapping wins; removed ones
        // and other platforms' do not count.
        let shop = |name: &str, seller: &str, platform: Platform, removed: bool| {
            crate::store::LedgerShop {
                platform,
                shop: name.into(),
                weight: 1,
                seller: Some(seller.into()),
                added_at: chrono::Utc::now(),
                removed_at: removed.then(chrono::Utc::now),
                renewable: true,
                token_remaining_ms: None,
                token_error: None,
            }
        };
        let t = t.with_directory(&[
            shop("gamma", "gamma-nick", Platform::Taobao, false),
            shop("other", "acme-flagship", Platform::Taobao, false),
            shop("gone", "gone-nick", Platform::Taobao, true),
            shop("jd1", "jd-nick", Platform::Jd, false),
        ]);
        assert_eq!(t.shop_of("gamma-nick"), "gamma");
        assert_eq!(t.shop_of("acme-flagship"), "acme");
        assert_eq!(t.shop_of("gone-nick"), "gone-nick");
        assert_eq!(t.shop_of("jd-nick"), "jd-nick");
    }

    /// Confirms failing for a long time: the ids waiting stay bounded, the newest kept.
    #[test]
    fn ids_waiting_for_a_failing_confirm_stay_bounded() {
        let s = Duration::from_secs;
        let mut c = Cadence::new(s(2), s(8), s(4));
        let mut next = 0u64;
        for _ in 0..200 {
            let ids: Vec<u64> = (next..next + 200).collect();
            next += 200;
            c.pulled(200, 200, ids);
            let due = c.take_due(false);
            assert!(!due.is_empty(), "a full batch is due at once");
            c.put_back(due);
            assert!(
                c.unconfirmed.len() <= UNCONFIRMED_MAX,
                "{}",
                c.unconfirmed.len()
            );
        }
        assert_eq!(c.unconfirmed.len(), UNCONFIRMED_MAX);
        assert!(c.unconfirmed.contains(&(next - 1)), "the newest kept");
        assert!(!c.unconfirmed.contains(&0), "the oldest let go");
    }

    #[test]
    fn pulls_follow_the_flow_and_acknowledgements_are_batched() {
        let s = Duration::from_secs;
        let mut c = Cadence::new(s(2), s(8), s(4));
        // A full batch: again at once; a partial one: after `every`.
        assert_eq!(c.pulled(100, 100, (0..100).collect()), Duration::ZERO);
        assert!(c.take_due(false).is_empty(), "not due yet");
        assert_eq!(c.pulled(3, 100, vec![100, 101, 102]), s(2));
        c.slept(s(2));
        assert!(c.take_due(false).is_empty());
        // Quiet: the waits grow to the bound, never past the acknowledgement due.
        assert_eq!(c.pulled(0, 100, vec![]), s(2));
        c.slept(s(2));
        let due = c.take_due(false);
        assert_eq!(due.len(), 103, "the oldest waited 4 s");
        assert_eq!(c.pulled(0, 100, vec![]), s(4));
        assert_eq!(c.pulled(0, 100, vec![]), s(8));
        assert_eq!(c.pulled(0, 100, vec![]), s(8));
        // A message after the quiet spell: acknowledged within 4 s, pulls back to `every`.
        assert_eq!(c.pulled(1, 100, vec![7]), s(2));
        c.slept(s(2));
        assert_eq!(
            c.pulled(0, 100, vec![]),
            s(2),
            "capped by the acknowledgement due"
        );
        c.slept(s(2));
        assert_eq!(c.take_due(false), vec![7]);
        // 200 waiting: acknowledged at once, 200 a call; the stop takes the rest.
        c.pulled(100, 100, (0..100).collect());
        c.pulled(100, 100, (100..200).collect());
        c.pulled(50, 100, (200..250).collect());
        assert_eq!(c.take_due(false).len(), 200);
        assert!(c.take_due(false).is_empty());
        assert_eq!(c.take_due(true).len(), 50);
    }
}
