//! Jobs: specs and producers, the handlers a worker runs, and the task queue (transport
//! between producers and workers).

pub mod demo;
pub(crate) mod item;
pub mod listing;
pub mod logistics;
pub mod orders;
pub mod producer;
pub mod queue;
pub mod runner;
pub mod secrets;
pub mod spec;
pub mod worker;
