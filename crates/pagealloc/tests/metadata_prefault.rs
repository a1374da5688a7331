//! The host platform faults in the frame metadata at build; a manual (simulator) platform
//! leaves it to the OS to back lazily (`Platform::prefault_metadata`). Observed through
//! the process's resident size (`/proc/self/statm`), so Linux only. One test in its own
//! binary: no other test allocates while it measures.

#![cfg(all(target_os = "linux", feature = "std", not(loom)))]

use std::sync::Arc;

use pagealloc::{Allocator, Config, Layout, ManualPlatform, PageMeta, Platform};

/// Resident bytes of this process.
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("procfs");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .expect("statm has a resident field")
        .parse()
        .expect("a number");
    // SAFETY: `sysconf` only reads a configuration value. No lock: nothing shared.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * u64::try_from(page).expect("a page size")
}

/// Resident growth of building an allocator over `frames` frames on `platform`, with the
/// allocator alive.
fn growth(frames: u64, platform: Arc<dyn Platform>) -> u64 {
    let before = rss_bytes();
    let a = Allocator::with_platform(&Layout::single(frames, 1), Config::default(), platform)
        .expect("builds");
    let after = rss_bytes();
    drop(a);
    after.saturating_sub(before)
}

#[test]
fn the_host_platform_faults_the_metadata_in_and_a_manual_one_does_not() {
    // 16 GiB of frames: 64 MiB of metadata, far above malloc's mmap threshold, so the
    // array is a fresh mapping of its own and is unmapped again when the allocator drops.
    let frames = 1u64 << 22;
    let meta = frames * std::mem::size_of::<PageMeta>() as u64;
    let host = growth(frames, Arc::new(pagealloc::OsPlatform));
    assert!(
        host >= meta / 8 * 7,
        "host platform: {host} resident bytes after building over {meta} bytes of metadata"
    );
    // Building writes one head per free block (order 10: one entry per 16 KiB of
    // metadata), a quarter of the array's 4 KiB pages. With transparent huge pages on
    // `always` the OS may back the lazy array with 2 MiB pages at those writes and make
    // all of it resident, so the lazy bound is checked only without that.
    let thp_always = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .is_ok_and(|s| s.contains("[always]"));
    let manual = growth(frames, Arc::new(ManualPlatform::new()));
    if !thp_always {
        assert!(
            manual <= meta / 2,
            "manual platform: {manual} resident bytes after building over {meta} bytes of metadata"
        );
    }
}
