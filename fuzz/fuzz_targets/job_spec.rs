//! A job spec file (`enqueue --spec`), and a listing's inline items.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(broken) = syncfleet::fuzzing::fuzz_job_spec(data) {
        panic!("{broken}");
    }
});
