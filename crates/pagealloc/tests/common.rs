//! Shared helpers for the integration tests.
#![allow(dead_code)]

use pagealloc::{Allocator, Config, Layout, ManualPlatform};
use std::sync::Arc;

/// An allocator on a manual platform (CPU and clock set by the test).
pub(crate) fn manual(layout: &Layout, cfg: Config) -> (Allocator, Arc<ManualPlatform>) {
    let p = Arc::new(ManualPlatform::new());
    let a = Allocator::with_platform(layout, cfg, p.clone()).expect("build");
    (a, p)
}

/// Config of a preset (or a preset with overrides).
pub(crate) fn cfg(name: &str) -> Config {
    name.parse().expect("preset")
}
