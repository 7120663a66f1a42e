//! Change messages: a worker started with `--listen PLATFORM[:SHOP]` pulls the platform's
//! change messages (TOP's message service) through the gates, interactive lane, and brings
//! the ledger up to date with each (docs/design.md, "Continuous sync").
//!
//! Per batch: the ids already recorded are dropped (a message delivered again costs no
//! write); the orders the others carry are written if they advanced; the messages are
//! recorded; only then is the batch confirmed, so a crash before the confirm gets the same
//! messages again and writes nothing twice. A trade message carries the order's new status
//! and payment, so it costs no call; the incremental sweep stays as the safety net for
//! messages lost, late or never sent.

use super::orders::to_ledger;
use crate::config::Config;
use crate::link::gateway::{CallContext, Gateway, LinkError};
use crate::platform::{ApiRequest, ApiResponse, Message, Platform};
use crate::shutdown::Shutdown;
use crate::store::{ReceivedMessage, Store, StoreError};
use crate::throttle::Lane;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

/// What `--listen` names: the platform, and the shop its own session's messages belong to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListenTarget {
    pub(crate) platform: Platform,
    /// The shop name for messages of the platform's own session (an empty seller).
    pub(crate) shop: String,
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

/// How long to wait before the next pull: none after a batch, then 100 ms, doubling while
/// the queue stays empty, up to `max` (an empty pull is a call: waiting longer when nothing
/// changes keeps the calls per changed order low; `max` bounds the delay a change sees).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IdleWait {
    now: Duration,
    max: Duration,
}

impl IdleWait {
    pub(crate) fn new(max: Duration) -> IdleWait {
        IdleWait {
            now: Duration::ZERO,
            max,
        }
    }

    /// After a pull that brought `n` messages: the wait before the next.
    pub(crate) fn after(&mut self, n: usize) -> Duration {
        self.now = if n > 0 {
            Duration::ZERO
        } else {
            (self.now * 2).max(Duration::from_millis(100)).min(self.max)
        };
        self.now
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
    let shop_of = |m: &Message| {
        if m.seller.is_empty() {
            target.shop.clone()
        } else {
            m.seller.clone()
        }
    };
    let orders: Vec<_> = fresh
        .iter()
        .filter_map(|m| {
            let o = m.order.as_ref()?;
            match to_ledger(target.platform, &shop_of(m), o) {
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
    store.upsert_orders_if_advanced(&orders).await?;
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

/// Pull one batch and bring the ledger up to date; returns the messages the batch held.
pub(crate) async fn listen_once(
    gateway: &Gateway,
    store: &Store,
    cfg: &Config,
    target: &ListenTarget,
    halt: &Shutdown,
) -> Result<usize, ListenError> {
    let ctx = || {
        CallContext::for_task(&cfg.link)
            .with_lane(Lane::Interactive)
            .with_halt(halt.clone())
    };
    let quantity = cfg.jobs.listen_batch.clamp(10, 200);
    let reply = gateway
        .call(
            target.platform,
            ApiRequest::MessageConsume { quantity },
            &ctx(),
        )
        .await?;
    // An answer from the stale cache is an old batch: nothing new in it.
    if reply.stale.is_some() {
        return Ok(0);
    }
    let ApiResponse::Messages(messages) = reply.response else {
        return Ok(0);
    };
    if messages.is_empty() {
        return Ok(0);
    }
    let ids = take_messages(store, target, &messages).await?;
    gateway
        .call(target.platform, ApiRequest::MessageConfirm { ids }, &ctx())
        .await?;
    Ok(messages.len())
}

/// Pull messages until `shutdown`, waiting [`IdleWait`] between empty pulls.
pub(crate) async fn run_listen_loop(
    gateway: Gateway,
    store: Store,
    cfg: Arc<Config>,
    target: ListenTarget,
    shutdown: Shutdown,
) {
    let mut wait = IdleWait::new(Duration::from_millis(cfg.jobs.listen_idle_max_ms.max(100)));
    tracing::info!(platform = %target.platform, shop = %target.shop, "listening for change messages");
    while !shutdown.is_triggered() {
        let pause = match listen_once(&gateway, &store, &cfg, &target, &shutdown).await {
            Ok(n) => wait.after(n),
            Err(e) => {
                tracing::warn!(platform = %target.platform, "change messages not taken this round (they come again): {e}");
                wait.after(0).max(Duration::from_secs(1))
            }
        };
        tokio::select! {
            _ = shutdown.wait() => break,
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_pulls_wait_longer_up_to_the_bound_and_a_batch_resets() {
        let mut w = IdleWait::new(Duration::from_millis(1_000));
        assert_eq!(w.after(5), Duration::ZERO);
        let waits: Vec<u64> = (0..6).map(|_| w.after(0).as_millis() as u64).collect();
        assert_eq!(waits, vec![100, 200, 400, 800, 1_000, 1_000]);
        assert_eq!(w.after(1), Duration::ZERO);
        assert_eq!(w.after(0), Duration::from_millis(100));
    }
}
