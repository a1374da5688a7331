//! A CPU taken offline (its pagesets drained) and back online during the run.

use crate::arch;
use crate::kprintln;
use crate::park::park;
use crate::percpu::percpu;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use pagealloc::{Allocator, Frame};

/// The CPU asked to go offline (`usize::MAX`: none), and its acknowledgement.
pub(crate) static OFFLINE_REQ: AtomicUsize = AtomicUsize::new(usize::MAX);
pub(crate) static OFFLINE_ACK: AtomicBool = AtomicBool::new(false);

/// CPU 0 takes `victim` offline (after it parked) and back online; with one CPU, CPU 0
/// itself.
pub(crate) fn cpu_offline_online(a: &Allocator, victim: usize, stash: &mut [Option<Frame>]) {
    if victim == 0 {
        park(a, 0, stash);
    } else {
        OFFLINE_ACK.store(false, Relaxed);
        OFFLINE_REQ.store(victim, Release);
        while !OFFLINE_ACK.load(Acquire) {
            core::hint::spin_loop();
        }
    }
    let before: i32 = (0..a.nr_zones())
        .filter_map(|z| a.pcp_info(victim, z))
        .map(|p| p.count)
        .sum();
    let ok = a.cpu_offline(victim).is_ok();
    let after: i32 = (0..a.nr_zones())
        .filter_map(|z| a.pcp_info(victim, z))
        .map(|p| p.count)
        .sum();
    arch::delay_us(100_000);
    let back = a.cpu_online(victim).is_ok();
    if victim == 0 {
        percpu(0).parked.store(false, Release);
    } else {
        OFFLINE_REQ.store(usize::MAX, Release);
    }
    kprintln!(
        "hotplug: cpu {victim} offline ({before} pages cached before, {after} after the drain), online again: {}",
        if ok && back && after == 0 { "ok" } else { "FAILED" }
    );
    if !(ok && back && after == 0) {
        percpu(0).errors.fetch_add(1, Relaxed);
    }
}
