//! Today's quota counts re-learnt from the ledger: the gates' daily counters (calls counted and
//! booked, per gate and per app) are raised to the calls the ledger recorded for the platform
//! day, so gate state that lost writes (a Redis failover to a replica that lacked the last
//! second, a restarted Redis, a restarted embedded process) never counts fewer calls than the
//! platform did (docs/design.md, "Beyond one Redis"). Run beside each heal sweep.

use crate::store::{Store, StoreError};
use crate::throttle::{GateError, Gates};

/// Why the counts could not be raised this round (the next round tries again).
#[derive(Debug, thiserror::Error)]
pub(crate) enum FloorError {
    #[error("reading today's calls from the ledger: {0}")]
    Ledger(#[from] StoreError),
    #[error("raising the gates' counts: {0}")]
    Gates(#[from] GateError),
}

/// Raise the gates' counts of today to the ledger's; returns how many counters were raised.
pub(crate) async fn floor_from_ledger(store: &Store, gates: &Gates) -> Result<u32, FloorError> {
    let today = crate::time::platform_day(chrono::Utc::now());
    let report = store.report_calls_for_day(today).await?;
    let calls: Vec<_> = report
        .by_api
        .iter()
        .map(|a| (a.platform, a.api, a.calls))
        .collect();
    Ok(gates.floor_today(&calls).await?)
}
