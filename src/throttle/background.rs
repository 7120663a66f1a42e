//! The fleet gates' duties beside the calls, one task each, holding only a weak reference to
//! the gates so they end with the last `Gates` clone: writing batched outcomes, and holding a
//! gate locally when another worker announces a pause (docs/design.md, "Gates").

use super::shared::spawn_pause_listener;
use super::{Inner, FLUSH_INTERVAL};
use crate::redis_conn::RedisTarget;
use std::sync::{Arc, Weak};
use tokio::sync::mpsc;

/// Start both duties for `inner`'s state: `kick` wakes the writer at once (a hit, a pause, a
/// full batch), `pauses` is the channel pauses are announced on.
pub(super) fn start(
    inner: &Arc<Inner>,
    kick: Option<mpsc::UnboundedReceiver<()>>,
    pauses: (RedisTarget, String),
) {
    spawn_flusher(Arc::downgrade(inner), kick);
    let (gone, holder) = (Arc::downgrade(inner), Arc::downgrade(inner));
    spawn_pause_listener(
        pauses,
        move || gone.strong_count() == 0,
        move |platform, api, span, reason| {
            if let Some(inner) = holder.upgrade() {
                inner
                    .local_gate(platform, api)
                    .hold_for(inner.clock.now(), span, &reason);
            }
        },
    );
}

/// Writes batched outcomes every flush interval, or at once when kicked.
fn spawn_flusher(inner: Weak<Inner>, kick: Option<mpsc::UnboundedReceiver<()>>) {
    let Some(mut rx) = kick else { return };
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(FLUSH_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                msg = rx.recv() => if msg.is_none() { break },
                _ = tick.tick() => {}
            }
            let Some(inner) = inner.upgrade() else { break };
            inner.backend.flush(inner.as_ref()).await;
        }
    });
}
