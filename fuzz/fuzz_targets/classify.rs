//! Error classification: code tables, the keyword fallback and ban parsing on every platform.
//! Input: lines code, sub_code, status, seconds, then the text (`fuzzing::fuzz_classify`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(broken) = syncfleet::fuzzing::fuzz_classify(data) {
        panic!("{broken}");
    }
});
