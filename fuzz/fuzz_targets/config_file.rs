//! The config file (`Config::parse`: TOML, then validation), and every gate of what it accepts.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(broken) = syncfleet::fuzzing::fuzz_config(data) {
        panic!("{broken}");
    }
});
