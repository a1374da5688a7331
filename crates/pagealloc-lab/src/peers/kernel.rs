//! The live kernel's page allocator: every block is a fresh anonymous mapping faulted in
//! at allocation (`MAP_POPULATE`: the kernel allocates and zeroes the pages) and unmapped
//! at free (`munmap`: the pages go back through the kernel's per-CPU lists to its buddy).
//!
//! # What it measures
//! The kernel's page allocator plus what a fault and an unmap always cost: the system
//! calls, the VMA, the page tables and the zeroing. Blocks of order >= 9 are mapped
//! 2 MiB-aligned with `MADV_HUGEPAGE`, so the kernel may serve them as one THP.

use std::io;

use super::{block_bytes, write_block, Block, HandleSpace, PageSource, SourceError};
use crate::workload::MigrateKind;

const NAME: &str = "kernel";
const HUGE: usize = 2 << 20;

/// mmap/munmap per block.
#[derive(Debug, Default)]
pub struct KernelSource;

impl KernelSource {
    /// The kernel source.
    pub fn new() -> Self {
        KernelSource
    }
}

fn mmap(len: usize, flags: libc::c_int) -> Result<*mut u8, io::Error> {
    // SAFETY: 1. a fresh private anonymous mapping chosen by the kernel (no fixed
    // address) cannot alias any existing memory; 2. the result is checked below.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | flags,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        Err(io::Error::last_os_error())
    } else {
        Ok(p.cast())
    }
}

fn munmap(p: *mut u8, len: usize) {
    if len == 0 {
        return;
    }
    // SAFETY: 1. `[p, p + len)` is a range of a mapping this source created and that is
    // no longer used (freed by its owner, or the unused head/tail of an over-map).
    let rc = unsafe { libc::munmap(p.cast(), len) };
    assert_eq!(rc, 0, "munmap: {}", io::Error::last_os_error());
}

fn oom(e: &io::Error) -> SourceError {
    match e.raw_os_error() {
        Some(libc::ENOMEM) | Some(libc::EAGAIN) => SourceError::OutOfMemory,
        _ => SourceError::Broken {
            source: NAME,
            what: format!("mmap: {e}"),
        },
    }
}

impl PageSource for KernelSource {
    fn name(&self) -> &'static str {
        NAME
    }

    fn allocate(&self, _cpu: usize, order: u8, _kind: MigrateKind) -> Result<Block, SourceError> {
        let len = block_bytes(order);
        if len < HUGE {
            let p = mmap(len, libc::MAP_POPULATE).map_err(|e| oom(&e))?;
            return Ok(Block {
                handle: p as u64,
                order,
            });
        }
        // Over-map by 2 MiB, keep an aligned window, ask for THP, then fault it in.
        let base = mmap(len + HUGE, libc::MAP_NORESERVE).map_err(|e| oom(&e))?;
        let addr = base as usize;
        let head = addr.next_multiple_of(HUGE) - addr;
        let start = base.wrapping_add(head);
        munmap(base, head);
        munmap(start.wrapping_add(len), HUGE - head);
        // SAFETY: 1. `[start, start + len)` is the part of the mapping kept above;
        // MADV_HUGEPAGE changes only the huge-page policy of the range.
        unsafe { libc::madvise(start.cast(), len, libc::MADV_HUGEPAGE) };
        super::memory::prefault(start, len);
        Ok(Block {
            handle: start as u64,
            order,
        })
    }

    fn free(&self, _cpu: usize, block: Block) -> Result<(), SourceError> {
        if block.handle == 0 || block.handle % block_bytes(0) as u64 != 0 {
            return Err(SourceError::Broken {
                source: NAME,
                what: format!("free of {block:?}: not a mapping of this source"),
            });
        }
        munmap(block.handle as *mut u8, block_bytes(block.order));
        Ok(())
    }

    fn touch(&self, block: Block) {
        // SAFETY: 1. the block is a live mapping of `block_bytes(order)` bytes made by
        // `allocate`; 2. the executor touches only blocks its thread owns.
        unsafe { write_block(block.handle as *mut u8, block_bytes(block.order)) };
    }

    fn has_memory(&self) -> bool {
        true
    }

    fn handle_space(&self) -> HandleSpace {
        HandleSpace::Addresses {
            size_aligned: false,
        }
    }
}
