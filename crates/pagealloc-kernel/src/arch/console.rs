//! What the kernel says to the outside: the serial console (COM1, `kprint!`,
//! `kprintln!`) and QEMU's isa-debug-exit.

use super::cpu::{halt_forever, inb, outb};
use core::arch::asm;
use core::fmt;
use core::sync::atomic::Ordering::Relaxed;

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

/// Exit QEMU through isa-debug-exit (iobase 0xf4): QEMU's status is `code * 2 + 1`.
pub fn qemu_exit(code: u32) -> ! {
    // SAFETY: a 32-bit write to the isa-debug-exit port QEMU was started with.
    unsafe { asm!("out dx, eax", in("dx") 0xf4u16, in("eax") code, options(nomem, nostack)) };
    // Without the device (not under the runner): stop here.
    halt_forever()
}
