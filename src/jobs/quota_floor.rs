//! Today's quota counts re-learnt from the ledger: the gates' daily counters (calls counted and
//! booked, per gate and per app) are brought back to the calls the ledger recorded for the
//! platform day (a lost counter to all of them, a low one to those of minutes long past), so
//! gate state that lost writes (a Redis failover to a replica that lacked the last
//! second, a restarted Redis, a restarted embedded process) never counts fewer calls than the
//! platform did (docs/design.md, "Beyond one Redis"). Run beside each heal sweep.

use crate::store::{Store, StoreError};
use crate::throttle::{DayCalls, GateError, Gates};

/// Why the counts could not be raised this round (the next round tries again).
#[derive(Debug, thiserror::Error)]
pub(crate) enum FloorError {
    #[error("reading today's calls from the ledger: {0}")]
    Ledger(#[from] StoreError),
    #[error("raising the gates' counts: {0}")]
    Gates(#[from] GateError),
}

/// How long after a minute ends its calls' outcomes have surely been reported to the gates
/// (a report batch is written within a second; one in doubt is resent at the next flush).
const SETTLED_AFTER: chrono::Duration = chrono::Duration::minutes(2);

/// Bring the gates' counts of today back to the ledger's; returns how many counters were
/// raised.
pub(crate) async fn floor_from_ledger(store: &Store, gates: &Gates) -> Result<u32, FloorError> {
    let now = gates.clock().utc();
    let today = crate::time::platform_day(now);
    let all = store.report_calls_for_day(today).await?;
    let settled = store
        .report_calls_for_day_before(today, now - SETTLED_AFTER)
        .await?;
    let calls: Vec<_> = all
        .by_api
        .iter()
        .map(|a| {
            let settled = settled
                .by_api
                .iter()
                .find(|s| (s.platform, s.api) == (a.platform, a.api))
                .map_or(0, |s| s.calls);
            (
                a.platform,
                a.api,
                DayCalls {
                    all: a.calls,
                    settled,
                },
            )
        })
        .collect();
    Ok(gates.floor_today(&calls).await?)
}
