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
//!
//! This file is the boot path, top to bottom: the BSP's entry (`kernel_main`, CPL 0),
//! its CPL 3 part (`bsp_user`), the run (`run`: the layout, the allocator, the timer, the
//! APs), the APs' entry (`ap_main`, `ap_user`). One concept a file beside it:
//!
//! | file | what |
//! |---|---|
//! | `boot.rs` | the PVH entry, long mode, the APs' trampoline |
//! | `arch/` | port I/O and MSRs, the TSC, serial, the local APIC, the IDT, CPL 3: one a file |
//! | `acpi.rs` | the memory map, MADT and SRAT |
//! | `percpu.rs` | per-CPU data through GS; pagealloc's `Platform` |
//! | `layout.rs` | pagealloc's `Layout` from the firmware's tables |
//! | `measure.rs` | the PCP hit's cost before the run |
//! | `irq.rs` | the timer interrupt: the nolock allocations and frees |
//! | `workload.rs` | the workload each CPU runs |
//! | `park.rs` | giving back what a CPU and its interrupt hold |
//! | `hotplug.rs` | a CPU taken offline and back |
//! | `pagetables.rs` | page tables through the `x86_64` adapter |
//! | `spin.rs` | the kernel's spin lock |
//! | `report.rs` | the end of the run: counters, `validate()`, frames lost, verdict |
#![no_std]
#![no_main]

extern crate alloc;

mod acpi;
mod arch;
mod boot;
mod hotplug;
mod irq;
mod layout;
mod measure;
mod pagetables;
mod park;
mod percpu;
mod report;
mod spin;
mod workload;

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use arch::rdtsc;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};
use layout::{build_layout, domains};
use pagealloc::{Allocator, Config, PageMeta, PAGE_SIZE};
use percpu::{percpu, set_percpu, this_cpu, KernelPlatform};

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

    measure::measure_pcp_hit(a);

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
    workload::work(0);
    while DONE.load(Acquire) < n {
        core::hint::spin_loop();
    }
    report::finish(a, n, seconds)
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
    workload::work(cpu);
    arch::halt_forever()
}
