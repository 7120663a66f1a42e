//! Operating the fleet (issue 11): what a running worker shows to the people who run it.
//!
//! `metrics` exports Prometheus metrics (`work --metrics-listen ADDR`) from the events the
//! link layer already logs and from the state APIs of the gates, the queue and the ledger,
//! so nothing on the call path changes for it.

pub mod metrics;
