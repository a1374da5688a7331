//! The x86-64 pieces, one a file: the CPU itself (`cpu.rs`: port I/O, MSRs, CR0, the
//! MTRRs, `hlt`), the TSC and its calibration (`tsc.rs`), the serial console and QEMU's
//! isa-debug-exit (`console.rs`), the local APIC (`lapic.rs`: id, timer, EOI,
//! INIT/SIPI), the IDT with its interrupt stubs (`idt.rs`), the GDT, TSS and CPL 3
//! (`cpl3.rs`). Callers name them `arch::…`.

mod console;
mod cpl3;
mod cpu;
mod idt;
mod lapic;
mod tsc;

pub use console::*;
pub use cpl3::*;
pub use cpu::*;
pub use idt::*;
pub use lapic::*;
pub use tsc::*;
