//! The link layer (DESIGN section 4): between business code and the platform adapters it
//! decides, for every call, whether to try, how long, whether to try again, and what to
//! return when the platform cannot answer.
//!
//! Policies are small pure types with an injected clock (`breaker`, `budget`,
//! `retry_budget`, `backoff`, `policy`); `shared` holds their fleet-wide state in Redis;
//! `gateway` runs them around every call; `probe` checks each (platform, API class).

pub mod backoff;
pub mod breaker;
pub mod budget;
pub mod gateway;
pub mod policy;
pub mod probe;
pub mod retry_budget;
pub mod shared;

pub use budget::Budget;
pub use gateway::{CallContext, Gateway, LinkError, LinkErrorKind, Reply, StaleInfo};
pub use shared::FleetLink;
