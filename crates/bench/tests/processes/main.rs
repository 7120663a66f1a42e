//! Tests of several processes that the benchmark programs play: `gatebench hammer --worker`
//! booking from one Redis gate beside others, and `linkbench worker` obeying a breaker another
//! process tripped. They live with the programs (cargo builds a package's own programs for
//! its tests), which keeps them out of the product that `cargo install` installs.

// The test kit (crates/testkit), under the names the modules use.
use syncfleet_testkit::support;

mod bench_script;
mod gate_processes;
mod link_process;
