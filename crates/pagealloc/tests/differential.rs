//! Differential test of the allocator against a plain reference model (see
//! `differential/model.rs`, shared with the cargo-fuzz target in `fuzz/`): random
//! operation sequences on several configs and layouts, outcomes compared after every
//! operation, `validate()` after every operation and at the end.
//!
//! `PROPTEST_CASES` sets the sequences per config (default 48).

#[path = "differential/model.rs"]
mod model;
use model::{Harness, CONFIGS, LAYOUTS};
use proptest::prelude::*;

fn run(config: &str, layout: usize, bytes: &[u8]) -> Result<(), TestCaseError> {
    let mut h = Harness::new(config, layout);
    h.run_bytes(bytes)
        .map_err(|m| TestCaseError::fail(format!("config {config}, layout {layout}: {m}")))
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48)
}

macro_rules! differential {
    ($($name:ident => $config:expr;)*) => {$(
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(cases()))]
            #[test]
            fn $name(layout in 0..LAYOUTS, bytes in prop::collection::vec(any::<u8>(), 0..1200)) {
                run($config, layout, &bytes)?;
            }
        }
    )*};
}

differential! {
    base => "base";
    patch7 => "patch7";
    linux_6_12 => "linux-6.12";
    merge_skip_count_min => CONFIGS[3];
    clustered_fixed => CONFIGS[4];
    no_pcp => CONFIGS[5];
}

/// Every config the fuzz target can pick is one of the proptest configs above, so a
/// crash the fuzzer finds replays here.
#[test]
fn fuzz_configs_are_covered() {
    assert_eq!(CONFIGS.len(), 6);
    for c in CONFIGS {
        c.parse::<pagealloc::Config>().expect(c);
    }
}

/// Long sequences that fill memory: allocations dominate, so watermarks, the slow path,
/// fallbacks across nodes and OutOfMemory are reached; then everything is checked free.
#[test]
fn pressure_sequences_reach_oom() {
    for (i, config) in ["base", "patch7", "linux-6.12"].iter().enumerate() {
        for layout in 0..LAYOUTS {
            let mut h = Harness::new(config, layout);
            // Allocation ops (tag 0..=11) of order 2, no flags beyond the byte, on a
            // rotating CPU; every 16th op a tick or an order-3 free.
            let mut bytes = Vec::new();
            for k in 0..1500u32 {
                if k % 16 == 15 {
                    bytes.extend_from_slice(&[28, 1, (k % 3) as u8]);
                } else {
                    bytes.extend_from_slice(&[k as u8 % 12, (k + i as u32) as u8, 2, 0x20, 0]);
                }
            }
            h.run_bytes(&bytes)
                .unwrap_or_else(|m| panic!("{config}/{layout}: {m}"));
            assert!(
                h.tally.oom > 0,
                "{config}/{layout}: never ran out: {:?}",
                h.tally
            );
        }
    }
}
