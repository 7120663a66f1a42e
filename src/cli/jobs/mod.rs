//! `enqueue`, `work`, `status`, `reconcile`, `retry`, `report`, `job`: the job commands.
//!
//! By concern: `enqueue` (the producer's command), `work` (the worker), `reports` (`status`
//! and `report`, read-only), `repair` (`dead`, `reconcile`, `retry`: items back to the queue),
//! `control` (`job pause|resume|cancel`).

mod control;
mod enqueue;
mod repair;
mod reports;
mod work;

pub use control::JobCommand;
pub use enqueue::{parse_time, EnqueueArgs};
pub use repair::{DeadArgs, ReconcileArgs, RetryArgs};
pub use reports::{ReportArgs, StatusArgs};
pub use work::WorkArgs;

pub(crate) use control::job;
pub(crate) use enqueue::enqueue;
pub(crate) use repair::{dead, reconcile, retry};
pub(crate) use reports::{report, status};
pub(crate) use work::work;
