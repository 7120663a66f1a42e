//! Jobs: the task queue (transport between producers and workers); the job handlers
//! are added next to it.

pub mod queue;
