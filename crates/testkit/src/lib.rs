//! The test kit of syncfleet: what the integration tests (`tests/suite/`) and the benchmark
//! programs (`crates/bench`) start and drive, compiled once for all of them. `support` opens the
//! real components (a private Redis, Sentinel, Cluster, PostgreSQL databases, TLS material, a
//! frozen TCP proxy, a WebDriver session); `jobs_harness` runs whole jobs: the simulator over
//! loopback, a generated client config, and `syncfleet` child processes.

pub mod jobs_harness;
pub mod support;

use std::path::PathBuf;

/// The `syncfleet` binary of this build, which cargo builds before it runs an integration test
/// of the package (`scripts/bench` before a benchmark): beside the directory of the running
/// executable (`target/PROFILE/deps/NAME-HASH` -> `target/PROFILE/syncfleet`). `SYNCFLEET_BIN` names
/// another.
pub fn syncfleet_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("SYNCFLEET_BIN") {
        return PathBuf::from(bin);
    }
    let exe = std::env::current_exe().expect("the running executable's path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/PROFILE/deps/EXE");
    let bin = profile_dir.join("syncfleet");
    assert!(
        bin.exists(),
        "{} is not built (cargo builds it for the package's tests; `scripts/bench NAME` builds it for a benchmark; SYNCFLEET_BIN names another)",
        bin.display()
    );
    bin
}

/// A benchmark program's arguments: without its own name, and without the `--bench` that
/// `cargo bench` adds.
pub fn program_args() -> Vec<String> {
    std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect()
}

/// The repository's root (its `maps/`, `config/`, `jobs/`).
pub fn repo_root() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}
