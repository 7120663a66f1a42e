//! The link layer (docs/design.md, "Timeouts and error classes"): between business code and the platform adapters it
//! decides, for every call, whether to try, how long, whether to try again, and what to
//! return when the platform cannot answer.
//!
//! Policies are small pure types with an injected clock (`breaker`, `budget`,
//! `retry_budget`, `backoff`, `policy`); `shared` holds their fleet-wide state in Redis; `lease` elects one worker for a duty;
//! `gateway` runs them around every call; `probe` checks each (platform, API class).
//!
//! Decisions worth knowing when reading the code:
//! - The breaker's window is per worker; its *open* state is fleet-wide (a Redis key that
//!   expires with the open period, read at most every 200 ms). Half-open runs in each worker,
//!   so a fleet of N sends at most 3N probes after an open period. The open period starts at
//!   `initial_open_ms` and doubles per failed probe up to `open_s`: the fleet resumes about as
//!   soon as the upstream does, and a long outage still costs only probes.
//! - Breaker samples are HTTP attempts: Retry-class failures count as failures; Fatal, Slow
//!   (the gates handle rate limits) and Unknown are not upstream-health signals.
//! - The retry budget counts logical calls and retries per (platform, api) over the current
//!   and previous window; peer-closed retries are free (the request never reached the app).
//! - Stale answers stand in only for Retry-class trouble (failures, open breaker, budgets);
//!   never for writes, caller errors or gate refusals (those carry `retry_at`: re-queue).
//! - The calls ledger counts platform calls (HTTP attempts), by class; stale answers are in
//!   the counters and the call log line, not in the ledger.

pub mod backoff;
pub mod breaker;
pub(crate) mod budget;
pub mod gateway;
pub mod lease;
pub(crate) mod policy;
pub mod probe;
pub(crate) mod retry_budget;
pub mod shared;

pub use budget::Budget;
pub use gateway::{CallContext, Gateway, LinkError, LinkErrorKind, Reply, StaleInfo};
pub use shared::FleetLink;
