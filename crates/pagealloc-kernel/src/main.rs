//! A small x86_64 kernel whose frame allocator is pagealloc.
//!
//! Boots through the PVH entry (`boot.rs`), reads the firmware's memory map, MADT and
//! SRAT (`acpi.rs`), builds pagealloc over the real RAM (holes and reserved ranges as
//! zone holes, one zone set per NUMA node) with a bootstrap heap in its image and the
//! frame metadata carved from RAM after it, brings up every CPU (INIT-SIPI-SIPI) and runs
//! a workload on all of them for a set time: allocations and frees of orders 0-10, frees
//! of blocks allocated on another CPU, page tables mapped through the `x86_64` adapter,
//! allocations and frees from the local APIC timer interrupt through the nolock pair, the
//! decay tick from that timer, a CPU taken offline and back; then `validate()`. It prints
//! the counters, each CPU's pagesets and the frames lost, and exits QEMU with a status
//! (isa-debug-exit: 0x10 pass, 0x11 fail). Run it with `cargo run -p pagealloc-qemu`.
//!
//! Only the descriptor tables, MSRs and interrupt handlers run at CPL 0; the rest runs at
//! CPL 3 (`arch::enter_user`), which a PVM `/dev/kvm` runs natively where it emulates
//! CPL 0 instruction by instruction (README.md, "KVM on this machine").
//!
//! Kernel command line (`-append`): `seconds=S` (default 5).
#![no_std]
#![no_main]

extern crate alloc;

mod acpi;
mod arch;
mod boot;

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use arch::rdtsc;
use core::hint::black_box;
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};
use pagealloc::x86_64::FrameAdapter;
use pagealloc::{
    Allocator, Config, CpuLayout, Frame, Gfp, Layout, NodeLayout, PageMeta, Pfn, Platform,
    ZoneKind, ZoneLayout, MAX_ORDER, PAGE_SIZE,
};
use x86_64::structures::paging::mapper::{CleanUp, Translate};
use x86_64::structures::paging::{
    FrameAllocator, FrameDeallocator, Mapper, OffsetPageTable, Page, PageTable, PageTableFlags,
    PhysFrame, Size4KiB,
};
use x86_64::VirtAddr;

/// Most CPUs the kernel brings up.
pub(crate) const MAX_CPUS: usize = 16;
/// Most zones (nodes × DMA/DMA32/Normal) whose pagesets are followed.
const MAX_ZONES: usize = 8;
/// The timer's rate.
const TIMER_HZ: u64 = 100;
/// Timer interrupts between two decay ticks (`Allocator::tick`): 250 ms, a quarter of
/// Linux's 1 s `vmstat_update` period, so that a run of a few seconds shows decay.
const TICK_EVERY: u64 = TIMER_HZ / 4;
/// The allocator's configuration preset.
const CONFIG: &str = "linux-6.18";
/// Blocks the timer interrupt holds at once, per CPU.
const IRQ_SLOTS: usize = 8;

// ---- the bootstrap heap ----

/// The heap the allocator's own structures (`Arc<dyn Platform>`, its `Vec`s and boxed
/// slices) come from before any frame can be allocated: 4 MiB in the kernel image's
/// `.bss`. Used only in process context (never from the interrupt handler).
#[global_allocator]
static HEAP: linked_list_allocator::LockedHeap = linked_list_allocator::LockedHeap::empty();
const HEAP_SIZE: usize = 4 << 20;
static mut HEAP_SPACE: [u8; HEAP_SIZE] = [0; HEAP_SIZE];

// ---- per-CPU data ----

/// One CPU's data, reached through its GS base (`gs:[0]` is the CPU index).
#[repr(C)]
struct PerCpu {
    cpu: u64,
    apic_id: AtomicU32,
    /// An AP's stacks, set by the BSP before its SIPI: CPL 0 (boot, then interrupts taken
    /// at CPL 3) and CPL 3 (the workload).
    kstack_top: AtomicU64,
    ustack_top: AtomicU64,
    started: AtomicBool,
    /// The timer interrupt leaves the allocator alone (the CPU is parked or done).
    parked: AtomicBool,
    irq_ticks: AtomicU64,
    /// Blocks the interrupt allocated (encoded, 0: empty).
    irq_slots: [AtomicU64; IRQ_SLOTS],
    /// A block the main loop hands to the interrupt, which frees it with the nolock free.
    handoff: AtomicU64,
    irq_allocs: AtomicU64,
    irq_alloc_fails: AtomicU64,
    irq_frees: AtomicU64,
    irq_errors: AtomicU64,
    allocs: AtomicU64,
    alloc_fails: AtomicU64,
    frees: AtomicU64,
    remote_frees: AtomicU64,
    pt_maps: AtomicU64,
    errors: AtomicU64,
    ticks: AtomicU64,
    /// Largest `high` seen per zone while working, and `high` when it went idle.
    peak_high: [AtomicI32; MAX_ZONES],
    idle_high: [AtomicI32; MAX_ZONES],
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

fn percpu(cpu: usize) -> &'static PerCpu {
    // SAFETY: PERCPU is written only by `set_percpu` (the `cpu` field of an entry before
    // its CPU starts); everything else in it is atomic, so shared references are sound.
    unsafe { &(*core::ptr::addr_of!(PERCPU))[cpu] }
}

/// Give this CPU index `cpu`: write it into its entry and point GS at the entry. CPL 0.
fn set_percpu(cpu: usize) {
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
fn this_cpu() -> usize {
    let c: u64;
    // SAFETY: GS points at this CPU's `PerCpu` (set by `set_percpu` before any caller),
    // whose first field is the index.
    unsafe { core::arch::asm!("mov {}, gs:[0]", out(reg) c, options(readonly, nostack)) };
    c as usize
}

/// pagealloc's platform: the CPU from GS, the clock from the TSC.
#[derive(Debug)]
struct KernelPlatform;

impl Platform for KernelPlatform {
    fn current_cpu(&self) -> usize {
        this_cpu()
    }
    fn now_ns(&self) -> u64 {
        arch::tsc_to_ns(rdtsc())
    }
}

// ---- shared state ----

static ALLOC: AtomicUsize = AtomicUsize::new(0);

fn alloc() -> &'static Allocator {
    let p = ALLOC.load(Acquire);
    assert!(p != 0, "allocator not built");
    // SAFETY: set once to a leaked `Box<Allocator>` (never freed) before any reader.
    unsafe { &*(p as *const Allocator) }
}

static NCPUS: AtomicUsize = AtomicUsize::new(1);
static GO: AtomicBool = AtomicBool::new(false);
static DONE: AtomicUsize = AtomicUsize::new(0);
static RUN_START: AtomicU64 = AtomicU64::new(0);
static RUN_TICKS: AtomicU64 = AtomicU64::new(0);
static TIMER_COUNT: AtomicU32 = AtomicU32::new(0);
static NEXT_AP: AtomicUsize = AtomicUsize::new(0);
/// The CPU asked to go offline (`usize::MAX`: none), and its acknowledgement.
static OFFLINE_REQ: AtomicUsize = AtomicUsize::new(usize::MAX);
static OFFLINE_ACK: AtomicBool = AtomicBool::new(false);

/// Blocks handed from one CPU to another to free: (block, allocating CPU).
static REMOTE: Spin<Vec<(Frame, usize)>> = Spin::new(Vec::new());

/// A spin lock for the kernel's own shared data (never taken in the interrupt handler).
struct Spin<T> {
    held: AtomicBool,
    v: core::cell::UnsafeCell<T>,
}

// SAFETY: `with` hands out the `&mut T` only while `held` is owned by the caller.
unsafe impl<T: Send> Sync for Spin<T> {}

impl<T> Spin<T> {
    const fn new(v: T) -> Self {
        Spin {
            held: AtomicBool::new(false),
            v: core::cell::UnsafeCell::new(v),
        }
    }
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        while self
            .held
            .compare_exchange_weak(false, true, Acquire, Relaxed)
            .is_err()
        {
            core::hint::spin_loop();
        }
        // SAFETY: `held` is ours (acquired above, released below): no other `&mut T`.
        let r = f(unsafe { &mut *self.v.get() });
        self.held.store(false, Release);
        r
    }
}

fn encode(f: Frame) -> u64 {
    (f.pfn.0 << 8) | f.order as u64 | 0x80
}

fn decode(v: u64) -> Frame {
    Frame::new(Pfn(v >> 8), (v & 0x7f) as u8)
}

// ---- the timer interrupt ----

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

// ---- entry ----

/// The PVH start info's address, for the BSP's CPL 3 part.
static START_INFO: AtomicU64 = AtomicU64::new(0);

/// The BSP's CPL 3 stack.
const USER_STACK: usize = 256 << 10;
static mut BSP_USER_STACK: [u8; USER_STACK] = [0; USER_STACK];

/// The BSP's entry from `boot.rs`, at CPL 0: the serial port, its per-CPU data, GDT, TSS
/// and IDT, the local APIC; then the rest at CPL 3 (`bsp_user`).
#[no_mangle]
extern "C" fn kernel_main(start_info: u32) -> ! {
    arch::serial_init();
    kprintln!("pagealloc-kernel: PVH entry, start info at {start_info:#x}");
    START_INFO.store(start_info as u64, Relaxed);
    set_percpu(0);
    arch::idt_init();
    arch::cpu_tables_init(0, boot::boot_stack_top_addr());
    arch::idt_load();
    arch::lapic_enable();
    arch::kvmclock_enable();
    // The memory type: MTRRs on with write-back by default (qboot leaves them off, which
    // makes every access uncached on hardware that honours them), PAT as it is.
    let mtrr = arch::mtrr_enable_wb();
    let pat = (core::arch::x86_64::__cpuid(1).edx & (1 << 16) != 0)
        // SAFETY: IA32_PAT (0x277) exists when CPUID 1 EDX bit 16 says so.
        .then(|| unsafe { arch::rdmsr(0x277) });
    kprintln!(
        "cpu: CR0 {:#x}, IA32_MTRR_DEF_TYPE (before, after) {:x?} (bit 11 on, type 6 WB), IA32_PAT {:x?}",
        arch::cr0(),
        mtrr,
        pat
    );
    let top = core::ptr::addr_of!(BSP_USER_STACK) as u64 + USER_STACK as u64;
    arch::enter_user(bsp_user, top)
}

/// The BSP at CPL 3: the bootstrap heap, the firmware tables, the run.
extern "C" fn bsp_user() -> ! {
    let start_info = START_INFO.load(Relaxed);
    kprintln!("cpl 3: the kernel continues in user mode (interrupts at CPL 0)");
    // SAFETY: HEAP_SPACE is used by nothing else; the heap is initialised once, here,
    // before the first allocation.
    unsafe {
        HEAP.lock()
            .init(core::ptr::addr_of_mut!(HEAP_SPACE).cast::<u8>(), HEAP_SIZE);
    }
    let (khz, how) = arch::calibrate_tsc();
    kprintln!("tsc: {} MHz ({how})", khz / 1000);
    let fw = match acpi::read(start_info) {
        Ok(fw) => fw,
        Err(e) => fail(e),
    };
    let seconds = cmdline_seconds(start_info).unwrap_or(5);
    match run(&fw, seconds) {
        Ok(()) => {
            kprintln!("RESULT: PASS");
            arch::qemu_exit(0x10)
        }
        Err(e) => fail(e),
    }
}

fn fail(why: &str) -> ! {
    kprintln!("error: {why}");
    kprintln!("RESULT: FAIL");
    arch::qemu_exit(0x11)
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    kprintln!("panic: {info}");
    kprintln!("RESULT: FAIL");
    arch::qemu_exit(0x11)
}

/// `seconds=N` from the PVH command line.
fn cmdline_seconds(info: u64) -> Option<u64> {
    // SAFETY: the start info's command-line pointer (offset 24) is a NUL-terminated
    // string in identity-mapped low memory, or 0.
    let p = unsafe { (info as *const u8).add(24).cast::<u64>().read_unaligned() };
    if p == 0 {
        return None;
    }
    // SAFETY: as above: a NUL-terminated string QEMU placed in RAM.
    let s = unsafe { core::ffi::CStr::from_ptr(p as *const core::ffi::c_char) };
    let s = s.to_str().ok()?;
    kprintln!("command line: {s}");
    s.split_whitespace()
        .find_map(|w| w.strip_prefix("seconds="))
        .and_then(|v| v.parse().ok())
        .filter(|&v| (1..=3600).contains(&v))
}

// ---- the layout from the firmware ----

const PFN_16M: u64 = 0x1000;
const PFN_4G: u64 = 0x10_0000;

/// pagealloc's layout of the machine: the usable RAM of the memory map above 1 MiB,
/// minus `reserved` (PFN ranges), one node per SRAT proximity domain (one node without
/// an SRAT), zones DMA / DMA32 / Normal cut at 16 MiB and 4 GiB, holes where the map has
/// none. `cpu_nodes`: each CPU's node.
fn build_layout(fw: &acpi::Firmware, reserved: (u64, u64), cpu_nodes: &[usize]) -> Layout {
    // Usable frames, sorted, minus the reservation.
    let mut free: Vec<(u64, u64)> = Vec::new();
    for e in fw.e820.iter().filter(|e| e.kind == 1) {
        let s = e.addr.div_ceil(PAGE_SIZE as u64).max(0x100);
        let t = (e.addr + e.size) / PAGE_SIZE as u64;
        if s < t {
            free.push((s, t));
        }
    }
    free.sort_unstable();
    let mut cut = Vec::new();
    for (s, t) in free {
        let (r0, r1) = reserved;
        if t <= r0 || s >= r1 {
            cut.push((s, t));
        } else {
            if s < r0 {
                cut.push((s, r0));
            }
            if r1 < t {
                cut.push((r1, t));
            }
        }
    }
    let doms = domains(fw);
    let nodes = doms.len().max(1);
    let mut layout = Layout {
        nodes: Vec::new(),
        cpus: cpu_nodes
            .iter()
            .map(|&node| CpuLayout {
                node,
                llc_slice_bytes: 2 << 20,
                online: true,
            })
            .collect(),
    };
    for n in 0..nodes {
        // This node's ranges: the SRAT's ranges of its domain, or everything.
        let ranges: Vec<(u64, u64)> = if doms.is_empty() {
            alloc::vec![(0, u64::MAX)]
        } else {
            fw.mem_node
                .iter()
                .filter(|m| m.2 == doms[n])
                .map(|m| (m.0 / PAGE_SIZE as u64, (m.0 + m.1) / PAGE_SIZE as u64))
                .collect()
        };
        let mut zones = Vec::new();
        for (kind, lo, hi) in [
            (ZoneKind::Dma, 0, PFN_16M),
            (ZoneKind::Dma32, PFN_16M, PFN_4G),
            (ZoneKind::Normal, PFN_4G, u64::MAX),
        ] {
            let mut pieces: Vec<(u64, u64)> = Vec::new();
            for &(s, t) in &cut {
                for &(rs, rt) in &ranges {
                    let (a, b) = (s.max(rs).max(lo), t.min(rt).min(hi));
                    if a < b {
                        pieces.push((a, b));
                    }
                }
            }
            pieces.sort_unstable();
            let (Some(first), Some(last)) = (pieces.first(), pieces.last()) else {
                continue;
            };
            let mut z = ZoneLayout::new(kind, first.0, last.1 - first.0);
            for w in pieces.windows(2) {
                if w[0].1 < w[1].0 {
                    z.holes.push((w[0].1, w[1].0));
                }
            }
            zones.push(z);
        }
        layout.nodes.push(NodeLayout {
            zones,
            distance: Vec::new(),
        });
    }
    layout
}

/// The SRAT's proximity domains with memory, sorted (node `i` = the `i`-th).
fn domains(fw: &acpi::Firmware) -> Vec<u32> {
    let mut d: Vec<u32> = fw
        .mem_node
        .iter()
        .filter(|m| m.1 > 0)
        .map(|m| m.2)
        .collect();
    d.sort_unstable();
    d.dedup();
    if d.len() < 2 {
        d.clear();
    }
    d
}

// ---- the run ----

fn run(fw: &acpi::Firmware, seconds: u64) -> Result<(), &'static str> {
    for e in &fw.e820 {
        kprintln!(
            "e820: [{:#012x}, {:#012x}) {}",
            e.addr,
            e.addr + e.size,
            if e.kind == 1 { "usable" } else { "reserved" }
        );
    }
    // CPUs: the BSP first, then the MADT's order.
    let bsp = arch::lapic_id();
    let mut apics: Vec<u32> = alloc::vec![bsp];
    apics.extend(fw.apic_ids.iter().copied().filter(|&a| a != bsp));
    apics.truncate(MAX_CPUS);
    let doms = domains(fw);
    let cpu_nodes: Vec<usize> = apics
        .iter()
        .map(|a| {
            fw.cpu_node
                .iter()
                .find(|c| c.0 == *a)
                .and_then(|c| doms.iter().position(|&d| d == c.1))
                .unwrap_or(0)
        })
        .collect();
    let n = apics.len();
    NCPUS.store(n, Relaxed);
    kprintln!(
        "cpus: {n} (local APIC ids {apics:?}), nodes {:?}",
        cpu_nodes
    );
    for m in &fw.mem_node {
        kprintln!("srat: [{:#012x}, {:#012x}) domain {}", m.0, m.0 + m.1, m.2);
    }

    // The layout without the metadata, to size it; then the metadata right after the
    // kernel image (heap included), reserved with it.
    let (k0, k1) = boot::kernel_range();
    let kpfn = (
        k0 / PAGE_SIZE as u64,
        (k1 as usize).div_ceil(PAGE_SIZE) as u64,
    );
    let l0 = build_layout(fw, kpfn, &cpu_nodes);
    let meta_bytes = l0.metadata_size();
    let meta_pfn = kpfn.1;
    let meta_end = meta_pfn + (meta_bytes as u64).div_ceil(PAGE_SIZE as u64);
    let inside = fw
        .e820
        .iter()
        .any(|e| e.kind == 1 && e.addr <= meta_pfn * 4096 && meta_end * 4096 <= e.addr + e.size);
    if !inside {
        return Err("no usable RAM right after the kernel image for the frame metadata");
    }
    let layout = build_layout(fw, (kpfn.0, meta_end), &cpu_nodes);
    if layout.metadata_size() > meta_bytes {
        return Err("metadata sizing");
    }
    layout.validate().map_err(|e| e.0)?;
    for (i, node) in layout.nodes.iter().enumerate() {
        for z in &node.zones {
            kprintln!(
                "node {i} {:?}: pfn [{:#x}, {:#x}) {} pages managed, holes {:x?}",
                z.kind,
                z.start_pfn,
                z.end_pfn(),
                z.managed(),
                z.holes
            );
        }
    }
    let entries = meta_bytes / core::mem::size_of::<PageMeta>();
    // SAFETY: [meta_pfn, meta_end) is usable RAM (checked against the memory map above),
    // identity-mapped, outside the kernel image and reserved from the frame allocator
    // (a hole of the layout): nothing else reads or writes it. Zeroed bytes are a valid
    // `PageMeta` (`PageMeta::new()` is all zeros), and the slice is handed to the
    // allocator for the rest of the run (`'static`, exclusive).
    let meta: &'static mut [PageMeta] = unsafe {
        let p = (meta_pfn * PAGE_SIZE as u64) as *mut u8;
        core::ptr::write_bytes(p, 0, meta_bytes);
        core::slice::from_raw_parts_mut(p.cast::<PageMeta>(), entries)
    };
    kprintln!(
        "bootstrap: kernel image [{:#x}, {:#x}) with a {} KiB heap; frame metadata {} KiB at {:#x}",
        k0,
        k1,
        HEAP_SIZE >> 10,
        meta_bytes >> 10,
        meta_pfn * PAGE_SIZE as u64
    );
    // The preset of the Linux the host runs (6.18): the kernel models the allocator that
    // its own host would use.
    let cfg = Config::preset(CONFIG).map_err(|_| "unknown config preset")?;
    let a = Allocator::with_metadata(&layout, cfg, Arc::new(KernelPlatform), meta)
        .map_err(|_| "building the allocator failed")?;
    kprintln!(
        "pagealloc: {} zones, {} pages managed ({} MiB), config {}",
        a.nr_zones(),
        a.managed_pages(),
        a.managed_pages() >> 8,
        CONFIG
    );
    ALLOC.store(Box::into_raw(Box::new(a)) as usize, Release);
    let a = alloc();
    a.validate().map_err(|_| "validate() after build failed")?;

    // The timer (the IDT and the local APIC were set up at CPL 0).
    let per_10ms = arch::lapic_timer_calibrate(10);
    TIMER_COUNT.store(per_10ms * (100 / TIMER_HZ as u32).max(1), Relaxed);
    kprintln!("lapic timer: {per_10ms} ticks per 10 ms (divide 16), {TIMER_HZ} Hz");

    measure_pcp_hit(a);

    // Bring up the APs, one at a time.
    for (cpu, &apic) in apics.iter().enumerate().skip(1) {
        let stack = Box::leak(alloc::vec![0u8; 64 << 10].into_boxed_slice());
        let top = (stack.as_ptr() as u64 + stack.len() as u64) & !15;
        let ustack = Box::leak(alloc::vec![0u8; 64 << 10].into_boxed_slice());
        let utop = ustack.as_ptr() as u64 + ustack.len() as u64;
        NEXT_AP.store(cpu, Release);
        percpu(cpu).apic_id.store(apic, Relaxed);
        percpu(cpu).kstack_top.store(top, Relaxed);
        percpu(cpu).ustack_top.store(utop, Relaxed);
        // SAFETY: the trampoline page is below 1 MiB (never the allocator's) and no AP is
        // in it: the previous one signalled `started` after leaving it.
        unsafe { boot::install_trampoline(top, ap_main) };
        arch::start_ap(apic, (boot::AP_TRAMPOLINE >> 12) as u8);
        let t = rdtsc();
        while !percpu(cpu).started.load(Acquire) {
            if rdtsc() - t > arch::ms_to_tsc(2000) {
                return Err("an AP did not start");
            }
            core::hint::spin_loop();
        }
    }
    kprintln!("smp: {n} CPUs up");

    // Run on all CPUs at once.
    let run_ticks = arch::ms_to_tsc(seconds * 1000);
    RUN_TICKS.store(run_ticks, Relaxed);
    RUN_START.store(rdtsc(), Relaxed);
    kprintln!("run: {seconds} s on {n} CPUs");
    GO.store(true, Release);
    arch::lapic_timer_start(TIMER_COUNT.load(Relaxed));
    percpu(0).started.store(true, Release);
    work(0);
    while DONE.load(Acquire) < n {
        core::hint::spin_loop();
    }
    finish(a, n, seconds)
}

/// The APs' entry from the trampoline, at CPL 0: per-CPU data, GDT, TSS, IDT, local
/// APIC; then CPL 3 (`ap_user`).
extern "C" fn ap_main() -> ! {
    let cpu = NEXT_AP.load(Acquire);
    set_percpu(cpu);
    let pc = percpu(cpu);
    arch::cpu_tables_init(cpu, pc.kstack_top.load(Relaxed));
    arch::mtrr_enable_wb();
    arch::idt_load();
    arch::lapic_enable();
    arch::enter_user(ap_user, pc.ustack_top.load(Relaxed))
}

/// An AP at CPL 3: wait for the start, run, stop.
extern "C" fn ap_user() -> ! {
    let cpu = this_cpu();
    percpu(cpu).started.store(true, Release);
    while !GO.load(Acquire) {
        core::hint::spin_loop();
    }
    arch::lapic_timer_start(TIMER_COUNT.load(Relaxed));
    work(cpu);
    arch::halt_forever()
}

/// The PCP hit's cost on CPU 0 before the run (no interrupt source enabled yet): a warm
/// order-0 pair, `alloc_on` + `free_on`, and the nolock pair, 100 000 pairs a round,
/// 9 rounds: the median, and the least (a vCPU on a busy host is descheduled now and
/// then, which only lengthens a round). Picoseconds.
fn measure_pcp_hit(a: &Allocator) {
    let pair = |nolock: bool| -> (u64, u64) {
        let mut r = [0u64; 9];
        for x in r.iter_mut() {
            let n = 100_000u64;
            let t0 = rdtsc();
            for _ in 0..n {
                if nolock {
                    let f = a.alloc_pages_nolock(0, 0, None).expect("nolock alloc");
                    a.free_pages_nolock(0, black_box(f)).expect("nolock free");
                } else {
                    let f = a.alloc_on(0, 0, Gfp::KERNEL, None).expect("alloc");
                    a.free_on(0, black_box(f)).expect("free");
                }
            }
            *x = arch::tsc_to_ns((rdtsc() - t0) * 1000 / n);
        }
        r.sort_unstable();
        (r[4], r[0])
    };
    let ns = |ps: u64| alloc::format!("{}.{:02}", ps / 1000, ps % 1000 / 10);
    let before = a.counters();
    let checked = pair(false);
    let nolock = pair(true);
    let c = a.counters().since(&before);
    kprintln!(
        "pcp hit: {} ns per alloc_on+free_on pair (order 0; least round {}), {} ns per nolock pair (least {}); {} refills, {} zone-lock trips in {} pairs",
        ns(checked.0),
        ns(checked.1),
        ns(nolock.0),
        ns(nolock.1),
        c.pcp_refill,
        c.zone_lock,
        c.nolock_alloc + c.pgalloc - c.nolock_alloc
    );
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One CPU's run: random allocations and frees of orders 0-10 on its pagesets, blocks
/// handed to other CPUs to free, blocks handed to its timer interrupt to free, page
/// tables built and torn down through the `x86_64` adapter; the decay tick every
/// `TICK_EVERY` timer interrupts. Odd CPUs (CPU 0 when alone) go idle for the last 40 %
/// of the run so their `high` decays; the last CPU is taken offline and back at 40 %.
fn work(cpu: usize) {
    let a = alloc();
    let pc = percpu(cpu);
    let n = NCPUS.load(Relaxed);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ ((cpu as u64 + 1) * 0x2545_f491_4f6c_dd1d));
    let mut stash: [Option<Frame>; 128] = [None; 128];
    let start = RUN_START.load(Relaxed);
    let len = RUN_TICKS.load(Relaxed);
    let idle_from = if cpu % 2 == 1 || n == 1 {
        start + len / 10 * 6
    } else {
        u64::MAX
    };
    let offline_at = start + len / 10 * 4;
    let victim = n - 1;
    let mut offline_done = false;
    let mut last_tick = 0u64;
    let mut idle = false;
    let zones = a.nr_zones().min(MAX_ZONES);
    // Interrupts are on (CPL 3): the timer interrupts the workload anywhere, inside the
    // allocator's locks included.
    pc.parked.store(false, Release);
    let mut ops = 0u64;
    loop {
        let now = rdtsc();
        if now - start >= len {
            break;
        }
        // The decay tick.
        let t = pc.irq_ticks.load(Relaxed);
        if t >= last_tick + TICK_EVERY {
            last_tick = t;
            a.tick(cpu);
            pc.ticks.fetch_add(1, Relaxed);
        }
        // CPU offline and back: the last CPU parks (frees what it holds), CPU 0 takes it
        // offline (its pagesets drained) and back online.
        if OFFLINE_REQ.load(Acquire) == cpu {
            park(a, cpu, &mut stash);
            OFFLINE_ACK.store(true, Release);
            while OFFLINE_REQ.load(Acquire) == cpu {
                core::hint::spin_loop();
            }
            pc.parked.store(false, Release);
        }
        if cpu == 0 && !offline_done && now >= offline_at {
            offline_done = true;
            cpu_offline_online(a, victim, &mut stash);
        }
        if now >= idle_from {
            if !idle {
                idle = true;
                for z in 0..zones {
                    if let Some(p) = a.pcp_info(cpu, z) {
                        pc.idle_high[z].store(p.high, Relaxed);
                    }
                }
            }
            arch::hlt();
            continue;
        }
        ops += 1;
        if ops.is_multiple_of(512) {
            for z in 0..zones {
                if let Some(p) = a.pcp_info(cpu, z) {
                    pc.peak_high[z].fetch_max(p.high, Relaxed);
                }
            }
        }
        let k = rng.below(stash.len() as u64) as usize;
        match rng.below(100) {
            0..=47 => {
                let order = match rng.below(100) {
                    0..=69 => 0,
                    70..=89 => 1 + rng.below(3) as u8,
                    90..=98 => 4 + rng.below(6) as u8,
                    _ => MAX_ORDER,
                };
                let gfp = if rng.below(2) == 0 {
                    Gfp::KERNEL
                } else {
                    Gfp::USER
                };
                if let Some(old) = stash[k].take() {
                    free_local(a, cpu, old);
                }
                match a.alloc_on(cpu, order, gfp, None) {
                    Ok(f) => {
                        stash[k] = Some(f);
                        pc.allocs.fetch_add(1, Relaxed);
                    }
                    Err(_) => {
                        pc.alloc_fails.fetch_add(1, Relaxed);
                    }
                }
            }
            48..=87 => {
                if let Some(f) = stash[k].take() {
                    free_local(a, cpu, f);
                }
            }
            88..=94 => {
                // Hand one block to the others, free one of theirs.
                let mine = stash[k].take();
                let theirs = REMOTE.with(|q| {
                    if let Some(f) = mine {
                        if q.len() >= 256 {
                            return Some((f, cpu));
                        }
                        q.push((f, cpu));
                    }
                    let at = q.iter().position(|&(_, c)| c != cpu)?;
                    Some(q.swap_remove(at))
                });
                if let Some((f, from)) = theirs {
                    match a.free_on(cpu, f) {
                        Ok(()) if from != cpu => pc.remote_frees.fetch_add(1, Relaxed),
                        Ok(()) => pc.frees.fetch_add(1, Relaxed),
                        Err(_) => pc.errors.fetch_add(1, Relaxed),
                    };
                }
            }
            95..=97 => {
                // Hand one block to the timer interrupt, which frees it nolock.
                if let Some(f) = stash[k] {
                    if f.order <= 3
                        && pc
                            .handoff
                            .compare_exchange(0, encode(f), AcqRel, Relaxed)
                            .is_ok()
                    {
                        stash[k] = None;
                    }
                }
            }
            _ => match map_page_tables(a, cpu) {
                Ok(()) => {
                    pc.pt_maps.fetch_add(1, Relaxed);
                }
                // Memory ran short (the stashes hold large blocks): not a violation.
                Err(PtError::NoFrame) => {
                    pc.alloc_fails.fetch_add(1, Relaxed);
                }
                Err(PtError::Broken(why)) => {
                    kprintln!("page tables on cpu {cpu}: {why}");
                    pc.errors.fetch_add(1, Relaxed);
                }
            },
        }
    }
    // Done: nothing more from the interrupt, everything back.
    arch::lapic_timer_stop();
    park(a, cpu, &mut stash);
    DONE.fetch_add(1, AcqRel);
}

fn free_local(a: &Allocator, cpu: usize, f: Frame) {
    let pc = percpu(cpu);
    match a.free_on(cpu, f) {
        Ok(()) => pc.frees.fetch_add(1, Relaxed),
        Err(_) => pc.errors.fetch_add(1, Relaxed),
    };
}

/// Stop the interrupt's allocator work on this CPU and free everything the CPU and its
/// interrupt hold (the interrupt's blocks with the ordinary free: it is parked).
fn park(a: &Allocator, cpu: usize, stash: &mut [Option<Frame>]) {
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

/// CPU 0 takes `victim` offline (after it parked) and back online; with one CPU, CPU 0
/// itself.
fn cpu_offline_online(a: &Allocator, victim: usize, stash: &mut [Option<Frame>]) {
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

/// Why [`map_page_tables`] did not complete.
enum PtError {
    /// No frame was left for a table or a page.
    NoFrame,
    /// Something that must not happen.
    Broken(&'static str),
}

/// Build a 4-level page table whose frames all come from pagealloc through the `x86_64`
/// adapter: map 4 pages (its page-table frames allocated by `map_to`), check the
/// translations, unmap them, free the data frames, the emptied tables (`clean_up`) and
/// the top level.
fn map_page_tables(a: &Allocator, cpu: usize) -> Result<(), PtError> {
    let mut fa = FrameAdapter::new(a, 0).map_err(|_| PtError::Broken("adapter"))?;
    let top: PhysFrame<Size4KiB> = fa.allocate_frame().ok_or(PtError::NoFrame)?;
    let top_ptr = top.start_address().as_u64() as *mut PageTable;
    // SAFETY: the frame was just allocated for us (no other owner) and is
    // identity-mapped; zeroed it is an empty page table.
    let table = unsafe {
        core::ptr::write_bytes(top_ptr.cast::<u8>(), 0, PAGE_SIZE);
        &mut *top_ptr
    };
    // SAFETY: physical memory is identity-mapped (offset 0) and `table` is a valid,
    // exclusively owned level-4 table; it is never loaded into CR3.
    let mut m = unsafe { OffsetPageTable::new(table, VirtAddr::new(0)) };
    let base = 0x4000_0000_0000u64 + ((cpu as u64) << 30);
    let mut data = [None; 4];
    let mut result = Ok(());
    for (i, d) in data.iter_mut().enumerate() {
        let Some(f) = FrameAllocator::<Size4KiB>::allocate_frame(&mut fa) else {
            result = Err(PtError::NoFrame);
            break;
        };
        *d = Some(f);
        let page = Page::<Size4KiB>::containing_address(VirtAddr::new(base + i as u64 * 4096));
        let flags = PageTableFlags::PRESENT | PageTableFlags::WRITABLE;
        // SAFETY: the table is not live (never in CR3), so no mapping can alias memory in
        // use; the frames are ours.
        match unsafe { m.map_to(page, f, flags, &mut fa) } {
            Ok(flush) => flush.ignore(),
            Err(x86_64::structures::paging::mapper::MapToError::FrameAllocationFailed) => {
                result = Err(PtError::NoFrame);
                break;
            }
            Err(_) => {
                result = Err(PtError::Broken("map_to failed"));
                break;
            }
        }
        if m.translate_addr(VirtAddr::new(base + i as u64 * 4096 + 8))
            != Some(f.start_address() + 8)
        {
            result = Err(PtError::Broken("translation mismatch"));
        }
    }
    for (i, d) in data.iter().enumerate() {
        if let Some(f) = d {
            let page = Page::<Size4KiB>::containing_address(VirtAddr::new(base + i as u64 * 4096));
            if let Ok((_, flush)) = m.unmap(page) {
                flush.ignore();
            }
            // SAFETY: the frame is unmapped and no longer used.
            unsafe { fa.deallocate_frame(*f) };
        }
    }
    // SAFETY: every mapping was removed: the tables below the top level are empty and
    // unused; then the top level itself, which nothing references.
    unsafe {
        m.clean_up(&mut fa);
        fa.deallocate_frame(top);
    }
    result
}

/// After the run: free what was handed over, drain, validate, print, decide.
fn finish(a: &Allocator, n: usize, seconds: u64) -> Result<(), &'static str> {
    let left = REMOTE.with(core::mem::take);
    for (f, c) in left {
        if a.free_on(0, f).is_err() {
            percpu(0).errors.fetch_add(1, Relaxed);
        }
        let _ = c;
    }
    kprintln!("run: done ({seconds} s)");
    // Pagesets as the run left them (before the final drain).
    kprintln!("pagesets (zone: high_min / peak high while allocating / high when idle began / high now / count):");
    for cpu in 0..n {
        let pc = percpu(cpu);
        let mut line = alloc::format!("  cpu {cpu}:");
        for z in 0..a.nr_zones().min(MAX_ZONES) {
            let Some(p) = a.pcp_info(cpu, z) else {
                continue;
            };
            let idle = pc.idle_high[z].load(Relaxed);
            line += &alloc::format!(
                " z{z} {}/{}/{}/{}/{}",
                p.high_min,
                pc.peak_high[z].load(Relaxed),
                if idle < 0 {
                    alloc::string::String::from("-")
                } else {
                    alloc::format!("{idle}")
                },
                p.high,
                p.count
            );
        }
        kprintln!("{line}");
    }
    let mut errors = 0;
    for cpu in 0..n {
        let p = percpu(cpu);
        kprintln!(
            "  cpu {cpu}: {} allocs ({} failed), {} local frees, {} remote frees, {} page tables, {} decay ticks; irq: {} timer interrupts, {} nolock allocs ({} failed), {} nolock frees",
            p.allocs.load(Relaxed),
            p.alloc_fails.load(Relaxed),
            p.frees.load(Relaxed),
            p.remote_frees.load(Relaxed),
            p.pt_maps.load(Relaxed),
            p.ticks.load(Relaxed),
            p.irq_ticks.load(Relaxed),
            p.irq_allocs.load(Relaxed),
            p.irq_alloc_fails.load(Relaxed),
            p.irq_frees.load(Relaxed)
        );
        let (e, ie) = (p.errors.load(Relaxed), p.irq_errors.load(Relaxed));
        if e + ie > 0 {
            kprintln!(
                "  cpu {cpu}: {e} refused frees or broken page tables, {ie} refused nolock frees"
            );
        }
        errors += e + ie;
    }
    a.drain_all_pages();
    let c = a.counters();
    kprintln!("counters:");
    for (name, v) in c.iter().filter(|&(_, v)| v != 0) {
        kprintln!("  {name} {v}");
    }
    let v = a.validate();
    let lost = a.managed_pages() - a.nr_free_pages();
    match &v {
        Ok(t) => kprintln!(
            "validate: ok (buddy {} pcp {} allocated {} deferred {} managed {})",
            t.buddy,
            t.pcp,
            t.allocated,
            t.deferred,
            t.managed
        ),
        Err(e) => kprintln!("validate: FAILED: {e}"),
    }
    kprintln!("frames lost: {lost}");
    kprintln!("errors: {errors}");
    if v.is_err() || lost != 0 || errors != 0 || c.pgalloc != c.pgfree {
        return Err("the run found violations");
    }
    Ok(())
}
