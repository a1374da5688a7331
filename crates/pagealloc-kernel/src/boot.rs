//! Entry: the PVH ELF note, the 32-bit entry QEMU jumps to (protected mode, paging off,
//! `ebx` = the `hvm_start_info`), the switch to long mode on identity-mapped 2 MiB pages
//! covering the low 4 GiB, and the application processors' real-mode trampoline, copied
//! to `AP_TRAMPOLINE` (below 1 MiB) before INIT-SIPI-SIPI.
//!
//! The PVH entry (Xen's `XEN_ELFNOTE_PHYS32_ENTRY`, which QEMU's `-kernel` honours for an
//! ELF) needs no boot loader and no firmware binary beyond what QEMU ships: the kernel is
//! one ELF file built from this repository.

/// Physical address the AP trampoline is copied to (a page below 1 MiB; SIPI vector 8).
pub const AP_TRAMPOLINE: u64 = 0x8000;

core::arch::global_asm!(
    r#"
    /* What the BSP's entry and the AP trampoline both do. Paging on: PAE, CR3 from
       `cr3` (the boot PML4), EFER.LME, then CR0.PG and PE with the caches on (CD, bit
       30, and NW, bit 29, cleared: an AP has them set after INIT). */
    .macro boot_paging_on cr3:vararg
    mov eax, cr4
    or eax, 0x20
    mov cr4, eax
    mov eax, \cr3
    mov cr3, eax
    mov ecx, 0xC0000080
    rdmsr
    or eax, 0x100
    wrmsr
    mov eax, cr0
    and eax, 0x9FFFFFFF
    or eax, 0x80000001
    mov cr0, eax
    .endm

    /* In long mode: the data segments on the GDT's flat data descriptor (0x10), FS and
       GS null (GS's base comes from IA32_GS_BASE later). */
    .macro boot_flat_segments
    mov ax, 0x10
    mov ds, ax
    mov es, ax
    mov ss, ax
    xor eax, eax
    mov fs, ax
    mov gs, ax
    .endm

    .section .note.pvh, "a", @note
    .balign 4
    .long 4
    .long 4
    .long 18
    .asciz "Xen"
    .balign 4
    .long pvh_start
    .balign 4

    .section .data.boot, "aw"
    .balign 4096
    .global boot_pml4
boot_pml4:
    .zero 4096
boot_pdpt:
    .zero 4096
boot_pd:
    .zero 4 * 4096
boot_gdt:
    .quad 0
    .quad 0x00af9a000000ffff
    .quad 0x00cf92000000ffff
boot_gdt_ptr:
    .word 23
    .long boot_gdt
    .long 0

    .section .text.boot, "ax"
    .code32
    .global pvh_start
pvh_start:
    cli
    mov esi, ebx
    /* zero .bss */
    mov edi, offset __bss_start
    mov ecx, offset __bss_end
    sub ecx, edi
    xor eax, eax
    cld
    rep stosb
    /* 2048 2 MiB pages: the low 4 GiB identity-mapped, user-accessible (U/S set at
       every level: the workload runs at CPL 3, see `arch::enter_user`); from 3 GiB on
       (MMIO: the local APIC, the I/O APIC) uncached */
    xor ecx, ecx
1:
    mov eax, ecx
    shl eax, 21
    or eax, 0x87
    cmp ecx, 1536
    jb 2f
    or eax, 0x18
2:
    mov dword ptr [boot_pd + ecx * 8], eax
    mov dword ptr [boot_pd + ecx * 8 + 4], 0
    inc ecx
    cmp ecx, 2048
    jb 1b
    mov eax, offset boot_pd
    or eax, 7
    mov dword ptr [boot_pdpt], eax
    add eax, 4096
    mov dword ptr [boot_pdpt + 8], eax
    add eax, 4096
    mov dword ptr [boot_pdpt + 16], eax
    add eax, 4096
    mov dword ptr [boot_pdpt + 24], eax
    mov eax, offset boot_pdpt
    or eax, 7
    mov dword ptr [boot_pml4], eax
    boot_paging_on offset boot_pml4
    lgdt [boot_gdt_ptr]
    mov eax, offset long_mode
    push 0x08
    push eax
    retf

    .code64
long_mode:
    boot_flat_segments
    mov rsp, offset boot_stack_top
    mov edi, esi
    call kernel_main
3:
    hlt
    jmp 3b

    /* The AP trampoline: copied to 0x8000, entered in real mode by the SIPI. The BSP
       fills ap_cr3, ap_stack and ap_entry in the copy before each SIPI. */
    .code16
    .balign 64
    .global ap_trampoline_start
ap_trampoline_start:
    /* jmp short to offset 62, past the data */
    .byte 0xeb, 0x3c
    .balign 8
    /* offset 8: CR3, 16: stack top, 24: entry, 32: GDT, 56: GDT pointer */
    .quad 0
    .quad 0
    .quad 0
    .quad 0
    .quad 0x00af9a000000ffff
    .quad 0x00cf92000000ffff
    .word 23
    .long 0x8000 + 32
    cli
    xor ax, ax
    mov ds, ax
    lgdt [0x8038]
    boot_paging_on dword ptr [0x8008]
    .byte 0x66, 0xea
    .long 0x8000 + ap_long - ap_trampoline_start
    .word 0x08
    .code64
ap_long:
    boot_flat_segments
    mov rsp, qword ptr [0x8010]
    mov rax, qword ptr [0x8018]
    call rax
4:
    hlt
    jmp 4b
    .global ap_trampoline_end
ap_trampoline_end:

    .section .bss
    .balign 16
boot_stack:
    .zero 65536
    .global boot_stack_top
boot_stack_top:
"#
);

extern "C" {
    static ap_trampoline_start: u8;
    static ap_trampoline_end: u8;
    static boot_pml4: u8;
    static __kernel_start: u8;
    static __kernel_end: u8;
    static boot_stack_top: u8;
}

/// The top of the BSP's boot stack (its CPL 0 stack for good: the TSS's RSP0).
pub fn boot_stack_top_addr() -> u64 {
    // A linker symbol: only its address is taken.
    core::ptr::addr_of!(boot_stack_top) as u64
}

/// Physical range `[start, end)` of the kernel image, `.bss` included.
pub fn kernel_range() -> (u64, u64) {
    // Linker symbols: only their addresses are taken, never their contents.
    (
        core::ptr::addr_of!(__kernel_start) as u64,
        core::ptr::addr_of!(__kernel_end) as u64,
    )
}

/// Copy the AP trampoline to [`AP_TRAMPOLINE`] with the boot page tables, `stack_top` and
/// `entry` filled in, for the next SIPI.
///
/// # Safety
/// `[AP_TRAMPOLINE, AP_TRAMPOLINE + 4 KiB)` is RAM that nothing else uses (it lies below
/// 1 MiB, which the kernel never gives to the frame allocator), identity-mapped, and no
/// AP is executing the trampoline (the BSP starts them one at a time and waits for each
/// to leave it).
pub unsafe fn install_trampoline(stack_top: u64, entry: extern "C" fn() -> !) {
    // SAFETY: the symbols delimit the trampoline in the kernel image; the destination is
    // the reserved page of the contract, which the trampoline (under 4 KiB) fits.
    unsafe {
        let start = core::ptr::addr_of!(ap_trampoline_start);
        let len = core::ptr::addr_of!(ap_trampoline_end) as usize - start as usize;
        assert!(len < 4096);
        let dst = AP_TRAMPOLINE as *mut u8;
        core::ptr::copy_nonoverlapping(start, dst, len);
        let at = |off: usize| dst.add(off).cast::<u64>();
        at(8).write_unaligned(core::ptr::addr_of!(boot_pml4) as u64);
        at(16).write_unaligned(stack_top);
        at(24).write_unaligned(entry as usize as u64);
    }
}
