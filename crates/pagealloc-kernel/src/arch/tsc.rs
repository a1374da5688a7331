//! The TSC's frequency (CPUID 0x15, KVM's pvclock or the PIT) and conversions with it.

use super::cpu::{inb, outb, rdtsc, wrmsr};
use core::sync::atomic::{
    AtomicU64,
    Ordering::{Acquire, Relaxed},
};

static TSC_KHZ: AtomicU64 = AtomicU64::new(1_000_000);

/// KVM's pvclock for this CPU (`pvclock_vcpu_time_info`), written by the hypervisor once
/// `kvmclock_enable` gave it the address.
#[repr(C, align(32))]
struct PvClock([u32; 8]);

static mut PVCLOCK: PvClock = PvClock([0; 8]);
static KVMCLOCK: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// Under KVM (CPUID 0x4000_0000 "KVMKVMKVM", 0x4000_0001 EAX bit 3: the clock source 2
/// MSRs), ask it to keep the BSP's pvclock, whose TSC-to-ns factor gives the TSC rate
/// exactly. CPL 0 (a `wrmsr`).
pub fn kvmclock_enable() {
    let sig = core::arch::x86_64::__cpuid(0x4000_0000);
    let kvm = sig.ebx == 0x4b4d_564b && sig.ecx == 0x564b_4d56 && sig.edx == 0x4d;
    if !kvm || sig.eax < 0x4000_0001 || core::arch::x86_64::__cpuid(0x4000_0001).eax & 8 == 0 {
        return;
    }
    // SAFETY: MSR_KVM_SYSTEM_TIME_NEW exists (the feature bit above); it is given the
    // address (bit 0: enable) of a 32-byte-aligned static that only the hypervisor
    // writes and `kvmclock_khz` reads.
    unsafe { wrmsr(0x4b56_4d01, core::ptr::addr_of!(PVCLOCK) as u64 | 1) };
    KVMCLOCK.store(true, Relaxed);
}

/// TSC ticks per millisecond from the pvclock's factor (ns = ticks << shift * mul >> 32).
fn kvmclock_khz() -> Option<u64> {
    if !KVMCLOCK.load(Relaxed) {
        return None;
    }
    let p = core::ptr::addr_of!(PVCLOCK).cast::<u32>();
    for _ in 0..1000 {
        // SAFETY: reads of the static the hypervisor updates; `version` is odd while it
        // writes, so a pair of equal even versions brackets a consistent factor.
        let (v0, mul, shift, v1) = unsafe {
            let v0 = p.read_volatile();
            core::sync::atomic::fence(Acquire);
            let mul = p.add(6).read_volatile();
            let shift = p.add(7).read_volatile() as u8 as i8;
            core::sync::atomic::fence(Acquire);
            (v0, mul, shift, p.read_volatile())
        };
        if v0 == v1 && v0 & 1 == 0 && mul != 0 {
            let khz = (1_000_000u64 << 32) / mul as u64;
            return Some(if shift >= 0 {
                khz >> shift
            } else {
                khz << -shift
            });
        }
        core::hint::spin_loop();
    }
    None
}

/// TSC ticks per millisecond: CPUID leaf 0x15 when it gives the crystal, else KVM's
/// pvclock factor (`kvmclock_enable`), else measured against the PIT (channel 2): the
/// least of 5 windows of 10 ms, as a vCPU descheduled while the PIT expires only
/// lengthens a window. Returns the value and how it was found.
pub fn calibrate_tsc() -> (u64, &'static str) {
    let leaf0 = core::arch::x86_64::__cpuid(0);
    if leaf0.eax >= 0x15 {
        let l = core::arch::x86_64::__cpuid(0x15);
        if l.eax != 0 && l.ebx != 0 && l.ecx != 0 {
            let khz = l.ecx as u64 * l.ebx as u64 / l.eax as u64 / 1000;
            TSC_KHZ.store(khz, Relaxed);
            return (khz, "CPUID 0x15");
        }
    }
    if let Some(khz) = kvmclock_khz() {
        TSC_KHZ.store(khz, Relaxed);
        return (khz, "kvmclock");
    }
    // PIT channel 2, mode 0, gate through port 0x61.
    const PIT_HZ: u64 = 1_193_182;
    let ms = 10;
    let count = PIT_HZ * ms / 1000;
    let mut best = u64::MAX;
    for _ in 0..5 {
        let p61 = inb(0x61);
        outb(0x61, p61 & !0x03); // gate low, speaker off
        outb(0x43, 0xb0); // channel 2, lobyte/hibyte, mode 0
        outb(0x42, count as u8);
        outb(0x42, (count >> 8) as u8);
        outb(0x61, (p61 & !0x02) | 0x01); // gate high: counting starts
        let t0 = rdtsc();
        while inb(0x61) & 0x20 == 0 {}
        best = best.min(rdtsc() - t0);
    }
    let khz = best / ms;
    TSC_KHZ.store(khz, Relaxed);
    (khz, "PIT")
}

/// Nanoseconds of `ticks` TSC ticks.
#[inline]
pub fn tsc_to_ns(ticks: u64) -> u64 {
    (ticks as u128 * 1_000_000 / TSC_KHZ.load(Relaxed).max(1) as u128) as u64
}

/// TSC ticks in `ms` milliseconds.
pub fn ms_to_tsc(ms: u64) -> u64 {
    ms * TSC_KHZ.load(Relaxed)
}

/// Busy-wait `us` microseconds.
pub fn delay_us(us: u64) {
    let end = rdtsc() + us * TSC_KHZ.load(Relaxed) / 1000;
    while rdtsc() < end {
        core::hint::spin_loop();
    }
}
