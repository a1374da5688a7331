//! Per-CPU data, reached through the GS base, and pagealloc's platform (the CPU from GS,
//! the clock from the TSC).

use crate::arch::{self, rdtsc};
use crate::{IRQ_SLOTS, MAX_CPUS, MAX_ZONES};
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64};
use pagealloc::Platform;

/// One CPU's data, reached through its GS base (`gs:[0]` is the CPU index).
#[repr(C)]
pub(crate) struct PerCpu {
    pub(crate) cpu: u64,
    pub(crate) apic_id: AtomicU32,
    /// An AP's stacks, set by the BSP before its SIPI: CPL 0 (boot, then interrupts taken
    /// at CPL 3) and CPL 3 (the workload).
    pub(crate) kstack_top: AtomicU64,
    pub(crate) ustack_top: AtomicU64,
    pub(crate) started: AtomicBool,
    /// The timer interrupt leaves the allocator alone (the CPU is parked or done).
    pub(crate) parked: AtomicBool,
    pub(crate) irq_ticks: AtomicU64,
    /// Blocks the interrupt allocated (encoded, 0: empty).
    pub(crate) irq_slots: [AtomicU64; IRQ_SLOTS],
    /// A block the main loop hands to the interrupt, which frees it with the nolock free.
    pub(crate) handoff: AtomicU64,
    pub(crate) irq_allocs: AtomicU64,
    pub(crate) irq_alloc_fails: AtomicU64,
    pub(crate) irq_frees: AtomicU64,
    pub(crate) irq_errors: AtomicU64,
    pub(crate) allocs: AtomicU64,
    pub(crate) alloc_fails: AtomicU64,
    pub(crate) frees: AtomicU64,
    pub(crate) remote_frees: AtomicU64,
    pub(crate) pt_maps: AtomicU64,
    pub(crate) errors: AtomicU64,
    pub(crate) ticks: AtomicU64,
    /// Largest `high` seen per zone while working, and `high` when it went idle.
    pub(crate) peak_high: [AtomicI32; MAX_ZONES],
    pub(crate) idle_high: [AtomicI32; MAX_ZONES],
}

#[allow(clippy::declare_interior_mutable_const)] // each use makes a fresh entry
const PERCPU_INIT: PerCpu = PerCpu {
    cpu: 0,
    apic_id: AtomicU32::new(0),
    kstack_top: AtomicU64::new(0),
    ustack_top: AtomicU64::new(0),
    started: AtomicBool::new(false),
    parked: AtomicBool::new(true),
    irq_ticks: AtomicU64::new(0),
    irq_slots: [const { AtomicU64::new(0) }; IRQ_SLOTS],
    handoff: AtomicU64::new(0),
    irq_allocs: AtomicU64::new(0),
    irq_alloc_fails: AtomicU64::new(0),
    irq_frees: AtomicU64::new(0),
    irq_errors: AtomicU64::new(0),
    allocs: AtomicU64::new(0),
    alloc_fails: AtomicU64::new(0),
    frees: AtomicU64::new(0),
    remote_frees: AtomicU64::new(0),
    pt_maps: AtomicU64::new(0),
    errors: AtomicU64::new(0),
    ticks: AtomicU64::new(0),
    peak_high: [const { AtomicI32::new(-1) }; MAX_ZONES],
    idle_high: [const { AtomicI32::new(-1) }; MAX_ZONES],
};

static mut PERCPU: [PerCpu; MAX_CPUS] = [PERCPU_INIT; MAX_CPUS];

pub(crate) fn percpu(cpu: usize) -> &'static PerCpu {
    // SAFETY: PERCPU is written only by `set_percpu` (the `cpu` field of an entry before
    // its CPU starts); everything else in it is atomic, so shared references are sound.
    unsafe { &(*core::ptr::addr_of!(PERCPU))[cpu] }
}

/// Give this CPU index `cpu`: write it into its entry and point GS at the entry. CPL 0.
pub(crate) fn set_percpu(cpu: usize) {
    // SAFETY: each CPU writes its own entry's `cpu` once, before GS points at it and
    // before anyone reads it through GS (the BSP reads entries by index only for their
    // atomic fields); 0xC000_0101 is IA32_GS_BASE and 0xC000_0102 IA32_KERNEL_GS_BASE,
    // both given the entry's address (the kernel never executes `swapgs`, and a
    // hypervisor that swaps them on a change of privilege level leaves GS right).
    unsafe {
        let p = core::ptr::addr_of_mut!(PERCPU[cpu]);
        core::ptr::addr_of_mut!((*p).cpu).write(cpu as u64);
        arch::wrmsr(0xc000_0101, p as u64);
        arch::wrmsr(0xc000_0102, p as u64);
    }
}

/// This CPU's index (`gs:[0]`).
#[inline(always)]
pub(crate) fn this_cpu() -> usize {
    let c: u64;
    // SAFETY: GS points at this CPU's `PerCpu` (set by `set_percpu` before any caller),
    // whose first field is the index.
    unsafe { core::arch::asm!("mov {}, gs:[0]", out(reg) c, options(readonly, nostack)) };
    c as usize
}

/// pagealloc's platform: the CPU from GS, the clock from the TSC.
#[derive(Debug)]
pub(crate) struct KernelPlatform;

impl Platform for KernelPlatform {
    fn current_cpu(&self) -> usize {
        this_cpu()
    }
    fn now_ns(&self) -> u64 {
        arch::tsc_to_ns(rdtsc())
    }
}
