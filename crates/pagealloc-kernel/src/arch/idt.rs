//! The IDT: the exception stubs, the timer's, the spurious vector's and #GP's (which
//! completes a CPL 3 `hlt`), and the exception handler.

use super::console::qemu_exit;
use super::lapic::{lapic_id, SPURIOUS_VECTOR, TIMER_VECTOR};
use core::arch::{asm, global_asm};

/// The operand of `lidt` and `lgdt`: a descriptor table's limit and base.
#[repr(C, packed)]
pub(super) struct IdtPtr {
    pub(super) limit: u16,
    pub(super) base: u64,
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
