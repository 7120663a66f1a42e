//! syncfleet: a distributed job-queue worker for bulk e-commerce sync against the
//! Taobao (TOP), JD (JOS) and 1688 open-platform APIs.
//!
//! Layout follows the architecture, and imports only go down (docs/design.md, "Layers";
//! `scripts/check-layers` enforces it): `cli` (thin subcommands) and `dashboard` on top of
//! `app` (runtime wiring, worker lifecycle, metrics, logging, the demo); below it `jobs`
//! (specs, producers, runner, handlers) and the `queue`, chosen with the rest of a process's
//! shared state by its `topology` (a fleet on Redis, or one process alone); below them `link` (resilience
//! policies and the gateway), `throttle` (gates), `store` (all SQL), `config` and `platform`
//! (adapters, signing). `sim` is the test platform: only `app` (the demo) and `cli` use it.

#![warn(missing_docs)]
// Unit tests make the instants they hand to the pure policies (clippy.toml says why the rest
// may not).
#![cfg_attr(test, allow(clippy::disallowed_methods))]

pub mod app;
pub mod cli;
pub use syncfleet_wire::clock;
pub mod config;
pub(crate) mod dashboard;
#[doc(hidden)]
pub mod fuzzing;
pub mod jobs;
pub mod link;
pub(crate) mod metric_names;
pub use syncfleet_wire::platform;
pub mod queue;
pub mod redis_conn;
pub(crate) use syncfleet_wire::{file_problem, seal, secret};
pub mod shutdown;
pub use syncfleet_sim as sim;
pub mod store;
pub mod throttle;
pub use syncfleet_wire::time;
pub mod topology;
