//! Differential fuzzing of pagealloc against a plain reference model.
//!
//! The input's first byte picks a configuration and a layout; the rest decodes into
//! operations (allocate any order/type/node/flags, bulk, free, double free, interior and
//! wrong-order frees, foreign frames and holes, drain, tick, clock, high fraction,
//! CPU offline/online), run on the allocator and on the model and compared after every
//! operation with `validate()`. The harness is the one of the proptest version
//! (`crates/pagealloc/tests/differential/model.rs`), so a crash found here replays there.
//!
//! Run: `cd fuzz && cargo +nightly fuzz run differential corpus/differential`
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/pagealloc/tests/differential/model.rs"]
mod model;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let config = model::CONFIGS[sel as usize % model::CONFIGS.len()];
    let layout = (sel as usize / model::CONFIGS.len()) % model::LAYOUTS;
    let mut h = model::Harness::new(config, layout);
    // validate() is O(frames): every 8th operation and at the end keeps the fuzzer fast.
    h.validate_every = 8;
    if let Err(m) = h.run_bytes(rest) {
        panic!("config {config}, layout {layout}: {m}");
    }
});
