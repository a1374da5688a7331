//! The per-CPU GDT and TSS, and the way down to CPL 3.
//!
//! The workload runs at CPL 3 with interrupts on: its port I/O (the serial port, the PIT,
//! isa-debug-exit) is allowed by the TSS's I/O bitmap, its `hlt` is completed by the #GP
//! handler, and MSRs, `cli`/`sti`, GDT/IDT/TSS loads stay with CPL 0. Interrupts and
//! exceptions taken at CPL 3 switch to the TSS's RSP0 stack. Why: some hypervisors behind `/dev/kvm` (PVM,
//! the pagetable-based virtual machine, which nested setups use when the CPU has no
//! SVM/VMX for the guest) run a guest's CPL 3 natively but emulate its CPL 0 one
//! instruction at a time (README.md, "KVM on this machine").

use super::idt::IdtPtr;
use core::arch::asm;

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
