//! Jobs: specs and producers, the handlers a worker runs, and the task queue.

pub mod spec;
