//! The integration tests, as one test binary (one link instead of twenty): each module is
//! one concern, run against real components (Redis, SQLite, PostgreSQL, the simulator over
//! loopback, worker processes of the built binary, headless Chromium). `scripts/test` runs
//! the modules a few at a time (`scripts/run-test-binaries`); `cargo test --test suite
//! jobs_fleet::` runs one.

// The tests measure and wait on real time (clippy.toml keeps the product's code to its
// clock).
#![allow(clippy::disallowed_methods)]

// The test kit (crates/testkit), under the names the modules use.
use syncfleet_testkit::{jobs_harness, support};

mod hostile_answers;
mod idle;

mod change_messages;
mod config_check;
mod continuous_sync;
mod dashboard_access;
mod dashboard_browser;
mod fleet_postgres;
mod job_control;
mod jobs_chaos;
mod jobs_economy;
mod jobs_fleet;
mod jobs_fleet_backlog;
mod jobs_fleet_faults;
mod jobs_liveness;
mod jobs_logistics;
mod jobs_slow;
mod lanes;
mod ledger_outage;
mod ledger_tls;
mod link;
mod listing_once;
mod listing_real;
mod ops_logs;
mod ops_metrics;
mod order_walks;
mod orders_progress;
mod pacing;
mod parsers_props;
mod platform_sim;
mod queue;
mod queue_contract;
mod queue_embedded;
mod queue_heal;
mod readme;
mod real_clients;
mod redis_cluster;
mod redis_failover;
mod redis_memory;
mod redis_tls;
mod secrets;
mod shop_directory;
mod shops;
mod sim;
mod store;
mod throttle_embedded;
mod throttle_redis;
mod tokens;
mod wire_fixtures;
