//! The x86-64 pieces: port I/O, MSRs, the TSC and its calibration against the PIT, the
//! serial console (COM1), the local APIC (xAPIC MMIO: id, timer, EOI, INIT/SIPI), the IDT
//! with its interrupt stubs, and QEMU's isa-debug-exit.

use core::arch::{asm, global_asm};
use core::fmt;
use core::sync::atomic::{
    AtomicU64,
    Ordering::{Acquire, Relaxed},
};

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

// ---- TSC frequency ----

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

// ---- serial console ----

/// Held while one CPU prints a line.
static SERIAL: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// Set up COM1: 115200 baud, 8N1, FIFO.
pub fn serial_init() {
    let base = 0x3f8;
    outb(base + 1, 0x00);
    outb(base + 3, 0x80);
    outb(base, 0x01);
    outb(base + 1, 0x00);
    outb(base + 3, 0x03);
    outb(base + 2, 0xc7);
    outb(base + 4, 0x03);
}

struct Com1;

impl fmt::Write for Com1 {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for b in s.bytes() {
            while inb(0x3f8 + 5) & 0x20 == 0 {}
            outb(0x3f8, b);
        }
        Ok(())
    }
}

/// Print to the serial console, one caller at a time. Never from an interrupt handler.
pub fn print(args: fmt::Arguments<'_>) {
    use core::sync::atomic::Ordering::{Acquire, Release};
    while SERIAL
        .compare_exchange_weak(false, true, Acquire, Relaxed)
        .is_err()
    {
        core::hint::spin_loop();
    }
    let _ = fmt::write(&mut Com1, args);
    SERIAL.store(false, Release);
}

/// `print!` to COM1.
#[macro_export]
macro_rules! kprint {
    ($($t:tt)*) => { $crate::arch::print(format_args!($($t)*)) };
}

/// `println!` to COM1.
#[macro_export]
macro_rules! kprintln {
    () => { $crate::arch::print(format_args!("\n")) };
    ($($t:tt)*) => { $crate::arch::print(format_args!("{}\n", format_args!($($t)*))) };
}

// ---- QEMU exit ----

/// Exit QEMU through isa-debug-exit (iobase 0xf4): QEMU's status is `code * 2 + 1`.
pub fn qemu_exit(code: u32) -> ! {
    // SAFETY: a 32-bit write to the isa-debug-exit port QEMU was started with.
    unsafe { asm!("out dx, eax", in("dx") 0xf4u16, in("eax") code, options(nomem, nostack)) };
    // Without the device (not under the runner): stop here.
    halt_forever()
}

// ---- local APIC (xAPIC, MMIO at 0xfee0_0000, identity-mapped uncached) ----

const LAPIC: u64 = 0xfee0_0000;
/// The timer's interrupt vector.
pub const TIMER_VECTOR: u8 = 0x40;
const SPURIOUS_VECTOR: u8 = 0xff;

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

// ---- IDT ----

#[repr(C, packed)]
struct IdtPtr {
    limit: u16,
    base: u64,
}

#[repr(C, align(16))]
struct Idt([u64; 512]);

static mut IDT: Idt = Idt([0; 512]);

global_asm!(
    r#"
    .section .text
    .altmacro
    .macro exc_stub v
    exc_stub_\v:
        push \v
        jmp exc_common
    .endm
    .set i, 0
    .rept 32
        exc_stub %i
        .set i, i + 1
    .endr
exc_common:
    mov rdi, rsp
    and rsp, -16
    call exception_handler
5:
    hlt
    jmp 5b

    .macro exc_addr v
        .quad exc_stub_\v
    .endm
    .section .rodata
    .balign 8
    .global exc_stubs
exc_stubs:
    .set i, 0
    .rept 32
        exc_addr %i
        .set i, i + 1
    .endr

    .section .text
    .global timer_stub
timer_stub:
    push rax
    push rcx
    push rdx
    push rsi
    push rdi
    push r8
    push r9
    push r10
    push r11
    push rbp
    mov rbp, rsp
    and rsp, -16
    call timer_interrupt
    mov rsp, rbp
    pop rbp
    pop r11
    pop r10
    pop r9
    pop r8
    pop rdi
    pop rsi
    pop rdx
    pop rcx
    pop rax
    iretq

    .global spurious_stub
spurious_stub:
    iretq

    /* #GP. A `hlt` at CPL 3 (the workload's idle wait, see `hlt`) is completed here:
       halt with interrupts on, return past it. Anything else is an exception as the
       others (vector 13 pushed above the error code). Frame: error code, rip, cs,
       rflags, rsp, ss. */
    .global gp_stub
gp_stub:
    push rax
    mov rax, [rsp + 16]
    test qword ptr [rsp + 24], 3
    jz 6f
    cmp byte ptr [rax], 0xf4
    jne 6f
    inc qword ptr [rsp + 16]
    pop rax
    add rsp, 8
    sti
    hlt
    iretq
6:
    pop rax
    push 13
    jmp exc_common
"#
);

extern "C" {
    static exc_stubs: [u64; 32];
    fn timer_stub();
    fn spurious_stub();
    fn gp_stub();
}

fn set_gate(idt: &mut Idt, v: usize, handler: u64) {
    // Interrupt gate, present, DPL 0 (no software `int` from CPL 3).
    let lo =
        (handler & 0xffff) | (0x08 << 16) | (0x8e00u64 << 32) | ((handler >> 16) & 0xffff) << 48;
    idt.0[2 * v] = lo;
    idt.0[2 * v + 1] = handler >> 32;
}

/// Fill the IDT (exceptions, the timer, the spurious vector). BSP only, before any CPU
/// loads it.
pub fn idt_init() {
    // SAFETY: called once on the BSP before the APs start and before `idt_load`: no other
    // reference to IDT exists. The stubs' addresses are linker-provided.
    unsafe {
        let idt = &mut *core::ptr::addr_of_mut!(IDT);
        for (v, &stub) in exc_stubs.iter().enumerate() {
            set_gate(idt, v, stub);
        }
        set_gate(idt, TIMER_VECTOR as usize, timer_stub as *const () as u64);
        set_gate(
            idt,
            SPURIOUS_VECTOR as usize,
            spurious_stub as *const () as u64,
        );
        set_gate(idt, 13, gp_stub as *const () as u64);
    }
}

/// Load the IDT on this CPU.
pub fn idt_load() {
    let p = IdtPtr {
        limit: (core::mem::size_of::<Idt>() - 1) as u16,
        base: core::ptr::addr_of!(IDT) as u64,
    };
    // SAFETY: the IDT was filled by `idt_init` and lives for the whole run (a static).
    unsafe { asm!("lidt [{}]", in(reg) &p, options(readonly, nostack)) };
}

// ---- GDT, TSS and CPL 3 ----
//
// The workload runs at CPL 3 with interrupts on: its port I/O (the serial port, the PIT,
// isa-debug-exit) is allowed by the TSS's I/O bitmap, its `hlt` is completed by the #GP
// handler, and MSRs, `cli`/`sti`, GDT/IDT/TSS loads stay with CPL 0. Interrupts and
// exceptions taken at CPL 3 switch to the TSS's RSP0 stack. Why: some hypervisors behind `/dev/kvm` (PVM,
// the pagetable-based virtual machine, which nested setups use when the CPU has no
// SVM/VMX for the guest) run a guest's CPL 3 natively but emulate its CPL 0 one
// instruction at a time (README.md, "KVM on this machine").

/// Selectors of the per-CPU GDT.
const KERNEL_CS: u64 = 0x08;
const USER_DS: u64 = 0x18 | 3;
const USER_CS: u64 = 0x20 | 3;
const TSS_SEL: u16 = 0x28;

/// A 64-bit task-state segment: RSP0, and the I/O bitmap after it (`CpuTables::iomap`).
/// (IOPL is 0: a hypervisor may not honour IOPL 3 at CPL 3, PVM does not.)
#[repr(C, packed(4))]
struct Tss {
    _r0: u32,
    rsp0: u64,
    _rsp12: [u64; 2],
    _r1: u64,
    _ist: [u64; 7],
    _r2: u64,
    _r3: u16,
    iomap_base: u16,
}

/// Bytes of an I/O permission bitmap covering every port (one bit each), plus the
/// all-ones byte the architecture wants after it.
const IOMAP_BYTES: usize = 65536 / 8 + 1;

#[repr(C, align(16))]
struct CpuTables {
    gdt: [u64; 7],
    tss: Tss,
    /// Right after the TSS (its `iomap_base`): every port allowed.
    iomap: [u8; IOMAP_BYTES],
}

#[allow(clippy::declare_interior_mutable_const)] // each use makes a fresh entry
const CPU_TABLES_INIT: CpuTables = CpuTables {
    gdt: [0; 7],
    tss: Tss {
        _r0: 0,
        rsp0: 0,
        _rsp12: [0; 2],
        _r1: 0,
        _ist: [0; 7],
        _r2: 0,
        _r3: 0,
        iomap_base: core::mem::size_of::<Tss>() as u16,
    },
    iomap: [0; IOMAP_BYTES],
};

static mut CPU_TABLES: [CpuTables; crate::MAX_CPUS] = [CPU_TABLES_INIT; crate::MAX_CPUS];

/// Give CPU `cpu` its own GDT (kernel and user segments, its TSS) and TSS, whose RSP0 is
/// `kstack_top` (the stack interrupts taken at CPL 3 run on), and load both. Called
/// once per CPU, by that CPU, at CPL 0.
pub fn cpu_tables_init(cpu: usize, kstack_top: u64) {
    // SAFETY: each CPU writes only its own entry, before loading it, and nothing else
    // reads it but the CPU itself (through GDTR and TR); the selectors keep the boot
    // GDT's kernel segments, so reloading them changes no live descriptor.
    unsafe {
        let t = &mut (*core::ptr::addr_of_mut!(CPU_TABLES))[cpu];
        t.tss.rsp0 = kstack_top & !15;
        let base = core::ptr::addr_of!(t.tss) as u64;
        t.iomap[IOMAP_BYTES - 1] = 0xff;
        let limit = (core::mem::size_of::<Tss>() + IOMAP_BYTES) as u64 - 1;
        t.gdt = [
            0,
            0x00af_9a00_0000_ffff, // 0x08 kernel code, 64-bit
            0x00cf_9200_0000_ffff, // 0x10 kernel data
            0x00cf_f200_0000_ffff, // 0x18 user data, DPL 3
            0x00af_fa00_0000_ffff, // 0x20 user code, 64-bit, DPL 3
            (limit & 0xffff)
                | (base & 0xff_ffff) << 16
                | 0x89 << 40 // present, available 64-bit TSS
                | ((limit >> 16) & 0xf) << 48
                | ((base >> 24) & 0xff) << 56,
            base >> 32,
        ];
        let p = IdtPtr {
            limit: (core::mem::size_of::<[u64; 7]>() - 1) as u16,
            base: t.gdt.as_ptr() as u64,
        };
        asm!(
            "lgdt [{p}]",
            "mov ax, 0x10",
            "mov ds, ax",
            "mov es, ax",
            "mov ss, ax",
            "push {cs}",
            "lea rax, [rip + 2f]",
            "push rax",
            "retfq",
            "2:",
            "ltr {tss:x}",
            p = in(reg) &p,
            cs = const KERNEL_CS,
            tss = in(reg) TSS_SEL,
            out("rax") _,
        );
    }
}

/// Continue at CPL 3 in `entry` on the stack ending at `stack_top`, interrupts on,
/// IOPL 0. The CPU's tables must be loaded (`cpu_tables_init`, `idt_load`) and the
/// code and stack mapped user-accessible (the boot page tables map all low memory so).
pub fn enter_user(entry: extern "C" fn() -> !, stack_top: u64) -> ! {
    // An entry point sees the stack as after a `call`: 8 bytes below a 16-byte boundary.
    let sp = (stack_top & !15) - 8;
    // SAFETY: an `iretq` frame to the user code and data selectors of this CPU's GDT;
    // RFLAGS 0x0202 (IOPL 0, IF set: no interrupt source is enabled yet). Nothing after it runs: the caller's frame is
    // abandoned with the CPL 0 code that used it.
    unsafe {
        asm!(
            "push {ss}",
            "push {sp}",
            "push 0x0202",
            "push {cs}",
            "push {ip}",
            "iretq",
            ss = const USER_DS,
            cs = const USER_CS,
            sp = in(reg) sp,
            ip = in(reg) entry as usize as u64,
            options(noreturn),
        )
    }
}

/// An exception: print the vector and the frame, exit QEMU with a failure.
#[no_mangle]
extern "C" fn exception_handler(frame: *const u64) -> ! {
    // SAFETY: `frame` is the stack the stub pushed the vector on, followed by the CPU's
    // exception frame (at least 5 words, plus an error code for some vectors).
    let w = unsafe { core::slice::from_raw_parts(frame, 7) };
    let cr2: u64;
    // SAFETY: reads CR2 into a register.
    unsafe { asm!("mov {}, cr2", out(reg) cr2, options(nomem, nostack)) };
    crate::kprintln!(
        "EXCEPTION vector {} on APIC {}: frame {:#x} {:#x} {:#x} {:#x} {:#x} {:#x} cr2 {:#x}",
        w[0],
        lapic_id(),
        w[1],
        w[2],
        w[3],
        w[4],
        w[5],
        w[6],
        cr2
    );
    crate::kprintln!("RESULT: FAIL (exception)");
    qemu_exit(0x11)
}
