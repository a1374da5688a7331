//! Giving back what a CPU holds: its own frees (`free_local`), and `park`, which stops
//! the timer interrupt's allocator work on the CPU and frees its blocks and the
//! interrupt's (at the end of the run, and before the CPU goes offline).

use crate::irq::decode;
use crate::percpu::percpu;
use core::sync::atomic::Ordering::*;
use pagealloc::{Allocator, Frame};

/// Free `f` on `cpu` with the ordinary free, counting it.
pub(crate) fn free_local(a: &Allocator, cpu: usize, f: Frame) {
    let pc = percpu(cpu);
    match a.free_on(cpu, f) {
        Ok(()) => pc.frees.fetch_add(1, Relaxed),
        Err(_) => pc.errors.fetch_add(1, Relaxed),
    };
}

/// Stop the interrupt's allocator work on this CPU and free everything the CPU and its
/// interrupt hold (the interrupt's blocks with the ordinary free: it is parked).
pub(crate) fn park(a: &Allocator, cpu: usize, stash: &mut [Option<Frame>]) {
    let pc = percpu(cpu);
    // From here the timer interrupt leaves the allocator alone: an interrupt on this CPU
    // runs to completion before the code it interrupted goes on, and checks `parked`
    // first, so the slots below are ours once the store is done.
    pc.parked.store(true, Release);
    for s in stash.iter_mut() {
        if let Some(f) = s.take() {
            free_local(a, cpu, f);
        }
    }
    for v in pc
        .irq_slots
        .iter()
        .map(|s| s.swap(0, AcqRel))
        .chain([pc.handoff.swap(0, AcqRel)])
    {
        if v != 0 {
            match a.free_on(cpu, decode(v)) {
                Ok(()) => pc.irq_frees.fetch_add(1, Relaxed),
                Err(_) => pc.irq_errors.fetch_add(1, Relaxed),
            };
        }
    }
}
