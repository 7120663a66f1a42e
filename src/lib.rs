//! syncfleet: a distributed job-queue worker for bulk e-commerce sync against the
//! Taobao (TOP), JD (JOS) and 1688 open-platform APIs.
//!
//! Layout follows the architecture: `platform` (adapters, signing), `throttle` (gates),
//! `link` (resilience policies + gateway), `jobs` (handlers, producers, queue),
//! `store` (all SQL), `sim` (the platform simulator), `cli` (thin subcommands).

#![warn(missing_docs)]

pub mod cli;
pub mod config;
pub(crate) mod dashboard;
pub mod jobs;
pub mod link;
pub mod logging;
// Issue 11: metrics for operators (src/ops/).
pub mod ops;
pub mod platform;
pub(crate) mod secret;
pub mod sim;
pub mod store;
pub mod throttle;
pub mod time;
