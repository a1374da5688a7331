//! The CPU itself: port I/O, the TSC counter, MSRs, CR0, the MTRRs, `cli`/`hlt`, the
//! privilege level.

use core::arch::asm;

/// Write a byte to an I/O port.
pub fn outb(port: u16, v: u8) {
    // SAFETY: port I/O to the legacy devices this kernel owns (COM1, the PIT, the PICs,
    // isa-debug-exit); it touches no memory.
    unsafe { asm!("out dx, al", in("dx") port, in("al") v, options(nomem, nostack)) }
}

/// Read a byte from an I/O port.
pub fn inb(port: u16) -> u8 {
    let v: u8;
    // SAFETY: as in `outb`: a read of a legacy device register, no memory touched.
    unsafe { asm!("in al, dx", out("al") v, in("dx") port, options(nomem, nostack)) };
    v
}

/// Read the time-stamp counter.
#[inline(always)]
pub fn rdtsc() -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: `rdtsc` reads a counter into registers; no memory, no side effect.
    unsafe { asm!("rdtsc", out("eax") lo, out("edx") hi, options(nomem, nostack)) };
    ((hi as u64) << 32) | lo as u64
}

/// Write a model-specific register.
///
/// # Safety
/// `msr` must exist and `v` be valid for it, with the effect the caller intends.
pub unsafe fn wrmsr(msr: u32, v: u64) {
    // SAFETY: the caller's contract.
    unsafe {
        asm!("wrmsr", in("ecx") msr, in("eax") v as u32, in("edx") (v >> 32) as u32,
             options(nostack))
    }
}

/// Read a model-specific register.
///
/// # Safety
/// `msr` must exist (reading one that does not raises #GP). CPL 0.
pub unsafe fn rdmsr(msr: u32) -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: the caller's contract; `rdmsr` only reads.
    unsafe { asm!("rdmsr", in("ecx") msr, out("eax") lo, out("edx") hi, options(nomem, nostack)) };
    ((hi as u64) << 32) | lo as u64
}

/// CR0 (CPL 0).
pub fn cr0() -> u64 {
    let v: u64;
    // SAFETY: reads CR0 into a register.
    unsafe { asm!("mov {}, cr0", out(reg) v, options(nomem, nostack)) };
    v
}

/// If this CPU's MTRRs are off (IA32_MTRR_DEF_TYPE bit 11 clear: every access
/// uncached, as qboot leaves them), turn them on with write-back as the default type:
/// the boot page tables make the MMIO gigabyte uncached through PAT, which wins over a
/// write-back MTRR. Follows the SDM's order (caches off and flushed around the write).
/// Returns the register before and after; `None` without MTRRs (CPUID 1 EDX bit 12).
/// CPL 0, interrupts off.
pub fn mtrr_enable_wb() -> Option<(u64, u64)> {
    if core::arch::x86_64::__cpuid(1).edx & (1 << 12) == 0 {
        return None;
    }
    // SAFETY: IA32_MTRR_DEF_TYPE (0x2ff) exists (CPUID above). With MTRRs off no
    // variable or fixed range is in force, so enabling them with default WB (6) and no
    // range makes all memory write-back except what the page tables' PAT bits make
    // uncached (the MMIO gigabyte). Caches are disabled and flushed around the change
    // (CR0.CD, wbinvd), as the SDM orders for an MTRR update; no other CPU runs yet or
    // each CPU updates its own MTRRs the same way before it touches shared memory.
    unsafe {
        let before = rdmsr(0x2ff);
        if before & (1 << 11) == 0 {
            let cr0 = cr0();
            asm!("mov cr0, {}", "wbinvd", in(reg) cr0 | (1 << 30), options(nostack));
            wrmsr(0x2ff, (1 << 11) | 6);
            asm!("wbinvd", "mov cr0, {}", in(reg) cr0, options(nostack));
        }
        Some((before, rdmsr(0x2ff)))
    }
}

/// Disable interrupts (CPL 0).
pub fn cli() {
    // SAFETY: masking interrupts on this CPU has no memory effect.
    unsafe { asm!("cli", options(nomem, nostack)) }
}

/// Wait for the next interrupt. At CPL 3 (interrupts on there), `hlt` faults and the
/// #GP handler (`gp_stub`) halts on the caller's behalf and returns past it.
pub fn hlt() {
    // SAFETY: at CPL 0 the caller has interrupts on (or wants to stop); at CPL 3 the
    // instruction is completed by `gp_stub`. No memory is touched.
    unsafe { asm!("hlt", options(nomem, nostack)) }
}

/// Stop this CPU for good: at CPL 0 interrupts off and `hlt`; at CPL 3 `hlt` in a loop
/// (the caller stopped its timer first).
pub fn halt_forever() -> ! {
    if cpl() == 0 {
        cli();
    }
    loop {
        hlt();
    }
}

/// The current privilege level (CS's low two bits).
pub fn cpl() -> u16 {
    let cs: u16;
    // SAFETY: reads CS into a register.
    unsafe { asm!("mov {0:x}, cs", out(reg) cs, options(nomem, nostack)) };
    cs & 3
}
