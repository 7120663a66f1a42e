//! A 1688 answer body from raw bytes: JSON decode, `check_body`, `parse_response`, for
//! every API and a few HTTP statuses (`syncfleet::fuzzing::fuzz_response`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use syncfleet::platform::Platform;

fuzz_target!(|data: &[u8]| {
    if let Err(broken) = syncfleet::fuzzing::fuzz_response(Platform::Alibaba, data) {
        panic!("{broken}");
    }
});
