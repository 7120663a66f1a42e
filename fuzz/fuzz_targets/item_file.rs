//! An item file (`enqueue listing --items FILE`, `items_file`): one numeric id a line.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(broken) = syncfleet::fuzzing::fuzz_item_file(data) {
        panic!("{broken}");
    }
});
