//! The application: what turns the library into a running process. Runtime wiring (ledger,
//! queue, gates, link layer, chosen once at start-up), a worker's life (signals, idle and
//! unreachable exits, the stop grace), metrics serving, logging, and the demo (which runs the
//! simulator, the test platform: nothing below this layer imports it).

pub mod demo;
pub mod logging;
pub mod metrics;
pub(crate) mod receiver;
pub mod runtime;
pub mod worker;
