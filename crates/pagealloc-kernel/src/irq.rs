//! The timer interrupt: the nolock allocations and frees, and the tick count the decay
//! tick follows.

use crate::percpu::{percpu, this_cpu};
use crate::{alloc, arch, IRQ_SLOTS};
use core::sync::atomic::Ordering::*;
use pagealloc::{Frame, Pfn};

/// A block as one `u64` for the interrupt's slots and the hand-off (0: empty).
pub(crate) fn encode(f: Frame) -> u64 {
    (f.pfn.0 << 8) | f.order as u64 | 0x80
}

pub(crate) fn decode(v: u64) -> Frame {
    Frame::new(Pfn(v >> 8), (v & 0x7f) as u8)
}

/// The local APIC timer: counts the tick, and unless the CPU is parked, frees the block
/// the main loop handed over and allocates or frees one block of its own, all through
/// the nolock pair (the interrupted code may hold this CPU's pageset or a zone lock).
#[no_mangle]
extern "C" fn timer_interrupt() {
    let cpu = this_cpu();
    let pc = percpu(cpu);
    let t = pc.irq_ticks.fetch_add(1, Relaxed);
    if !pc.parked.load(Acquire) {
        let a = alloc();
        let h = pc.handoff.swap(0, AcqRel);
        if h != 0 {
            match a.free_pages_nolock(cpu, decode(h)) {
                Ok(()) => pc.irq_frees.fetch_add(1, Relaxed),
                Err(_) => pc.irq_errors.fetch_add(1, Relaxed),
            };
        }
        let slot = &pc.irq_slots[(t as usize) % IRQ_SLOTS];
        let v = slot.swap(0, AcqRel);
        if v == 0 {
            let order = [0u8, 0, 1, 3, 0, 2, 0, 9][(t as usize / IRQ_SLOTS) % 8];
            match a.alloc_pages_nolock(cpu, order, None) {
                Ok(f) => {
                    slot.store(encode(f), Release);
                    pc.irq_allocs.fetch_add(1, Relaxed);
                }
                Err(_) => {
                    pc.irq_alloc_fails.fetch_add(1, Relaxed);
                }
            }
        } else {
            match a.free_pages_nolock(cpu, decode(v)) {
                Ok(()) => pc.irq_frees.fetch_add(1, Relaxed),
                Err(_) => pc.irq_errors.fetch_add(1, Relaxed),
            };
        }
    }
    arch::lapic_eoi();
}
