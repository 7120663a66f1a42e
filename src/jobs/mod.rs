//! Jobs: specs and producers, the runner and the handlers a worker runs. The task queue
//! (transport between producers and workers) is `crate::queue`; the process around them is
//! `crate::app`.

pub(crate) mod control;
pub(crate) mod heal;
pub(crate) mod hooks;
pub(crate) mod item;
pub(crate) mod listen;
pub(crate) mod listing;
pub(crate) mod logistics;
pub(crate) mod oauth_state;
pub(crate) mod onboard;
pub(crate) mod order_window;
pub(crate) mod orders;
pub mod producer;
pub(crate) mod quota_floor;
pub(crate) mod replay;
pub(crate) mod runner;
pub(crate) mod schedule;
pub mod secrets;
pub(crate) mod shops;
pub mod spec;
pub(crate) mod tick;
pub(crate) mod tokens;
pub(crate) mod turns;
