//! Jobs: specs and producers, the handlers a worker runs, and the task queue (transport
//! between producers and workers).

pub mod demo;
pub(crate) mod item;
pub(crate) mod listing;
pub(crate) mod logistics;
pub(crate) mod orders;
pub mod producer;
pub mod queue;
pub(crate) mod runner;
pub mod secrets;
pub mod spec;
pub mod worker;
