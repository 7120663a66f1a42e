//! `syncfleet quarantine replay`: read the quarantined records again with the adapters as they
//! are now, and take those that read (docs/design.md, "Quarantine"). An order is written as an
//! order list's entry would be (only if it advanced), under the shop that read it; a message
//! goes through the listener's own path (dropped if recorded, its order state taken if newer).
//! What still does not read stays, unchanged.

use super::listen::{take_messages, ListenTarget};
use super::orders::to_ledger;
use crate::config::Config;
use crate::platform::reread::{reread_message, reread_order};
use crate::store::{QuarantineRow, Store, StoreError};

/// What a replay did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Replayed {
    /// Records read this time and taken into the ledger (and let out of the quarantine).
    pub(crate) taken: u64,
    /// Records that still do not read: they stay.
    pub(crate) still_unreadable: u64,
}

/// Replay up to `limit` quarantined records, newest first.
pub(crate) async fn replay_quarantine(
    store: &Store,
    cfg: &Config,
    limit: u32,
) -> Result<Replayed, StoreError> {
    let mut done = Replayed::default();
    for row in store.quarantined(limit).await? {
        if take(store, cfg, &row).await? {
            store.release_quarantined(&row.record).await?;
            done.taken += 1;
        } else {
            done.still_unreadable += 1;
        }
    }
    Ok(done)
}

/// Take one record into the ledger if it reads now.
async fn take(store: &Store, cfg: &Config, row: &QuarantineRow) -> Result<bool, StoreError> {
    let q = &row.record;
    match q.source.as_str() {
        "order" => {
            let Some(order) = reread_order(q.platform, &q.raw) else {
                return Ok(false);
            };
            let Ok(order) = to_ledger(q.platform, &q.shop, &order) else {
                return Ok(false);
            };
            store.upsert_orders_if_advanced(&[order]).await?;
            Ok(true)
        }
        "message" => {
            let Some(message) = reread_message(q.platform, &q.raw) else {
                return Ok(false);
            };
            let target = ListenTarget::new(cfg, q.platform, q.shop.clone());
            take_messages(store, &target, std::slice::from_ref(&message)).await?;
            Ok(true)
        }
        _ => Ok(false),
    }
}
