//! The local APIC (xAPIC, MMIO at 0xfee0_0000, identity-mapped uncached): id, timer,
//! EOI, INIT-SIPI-SIPI.

use super::cpu::{outb, rdtsc};
use super::tsc::{delay_us, ms_to_tsc};

const LAPIC: u64 = 0xfee0_0000;
/// The timer's interrupt vector.
pub const TIMER_VECTOR: u8 = 0x40;
pub(super) const SPURIOUS_VECTOR: u8 = 0xff;

fn lapic_read(reg: u32) -> u32 {
    // SAFETY: an aligned 32-bit read of a local APIC register; the page is mapped
    // uncached by the boot page tables.
    unsafe { ((LAPIC + reg as u64) as *const u32).read_volatile() }
}

fn lapic_write(reg: u32, v: u32) {
    // SAFETY: as `lapic_read`, a write of a register this kernel programs.
    unsafe { ((LAPIC + reg as u64) as *mut u32).write_volatile(v) }
}

/// This CPU's local APIC id.
pub fn lapic_id() -> u32 {
    lapic_read(0x20) >> 24
}

/// Enable this CPU's local APIC (spurious vector register) and mask the legacy PICs.
pub fn lapic_enable() {
    outb(0x21, 0xff);
    outb(0xa1, 0xff);
    lapic_write(0xf0, 0x100 | SPURIOUS_VECTOR as u32);
    lapic_write(0x80, 0); // task priority: accept all
}

/// Local APIC timer ticks (divide by 16) in `ms` milliseconds, measured with the TSC:
/// the least of 5 windows (a vCPU descheduled in a window only adds ticks to it).
pub fn lapic_timer_calibrate(ms: u64) -> u32 {
    lapic_write(0x3e0, 0x3); // divide by 16
    lapic_write(0x320, 1 << 16); // masked, one-shot
    let mut best = u32::MAX;
    for _ in 0..5 {
        lapic_write(0x380, u32::MAX);
        let end = rdtsc() + ms_to_tsc(ms);
        while rdtsc() < end {}
        let left = lapic_read(0x390);
        best = best.min(u32::MAX - left);
    }
    lapic_write(0x380, 0);
    best
}

/// Start this CPU's local APIC timer, periodic, `count` ticks (divide by 16) a period.
pub fn lapic_timer_start(count: u32) {
    lapic_write(0x3e0, 0x3);
    lapic_write(0x320, (1 << 17) | TIMER_VECTOR as u32);
    lapic_write(0x380, count.max(1));
}

/// Stop this CPU's local APIC timer.
pub fn lapic_timer_stop() {
    lapic_write(0x320, 1 << 16);
    lapic_write(0x380, 0);
}

/// End of interrupt.
pub fn lapic_eoi() {
    lapic_write(0xb0, 0);
}

fn icr_send(apic_id: u32, low: u32) {
    lapic_write(0x310, apic_id << 24);
    lapic_write(0x300, low);
    while lapic_read(0x300) & (1 << 12) != 0 {
        core::hint::spin_loop();
    }
}

/// INIT-SIPI-SIPI to `apic_id`, start page `vector` (physical address `vector << 12`).
pub fn start_ap(apic_id: u32, vector: u8) {
    icr_send(apic_id, 0x4500); // INIT, assert
    delay_us(10_000);
    for _ in 0..2 {
        icr_send(apic_id, 0x4600 | vector as u32); // STARTUP
        delay_us(200);
    }
}
