//! General-purpose allocators serving page blocks: mimalloc, jemalloc (tikv-jemallocator)
//! and the system allocator (glibc malloc), each asked for 2^order × 4 KiB bytes aligned
//! to their size through `GlobalAlloc` — without being installed as the global allocator.
//! mimalloc and jemalloc are C builds behind the lab's `peers` feature (on by default).

use std::alloc::{GlobalAlloc, Layout, System};

#[cfg(feature = "peers")]
use mimalloc::MiMalloc;
#[cfg(feature = "peers")]
use tikv_jemallocator::Jemalloc;

use super::{block_bytes, copy_block, write_block, Block, HandleSpace, PageSource, SourceError};
use crate::workload::MigrateKind;

/// Which general-purpose allocator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MallocKind {
    /// mimalloc.
    #[cfg(feature = "peers")]
    Mimalloc,
    /// jemalloc.
    #[cfg(feature = "peers")]
    Jemalloc,
    /// `std::alloc::System` (glibc malloc on Linux).
    System,
}

/// A general-purpose allocator as a page source.
#[derive(Debug)]
pub struct MallocSource {
    kind: MallocKind,
}

impl MallocSource {
    /// The source for `kind`.
    pub fn new(kind: MallocKind) -> Self {
        MallocSource { kind }
    }

    fn layout(order: u8) -> Layout {
        let bytes = block_bytes(order);
        Layout::from_size_align(bytes, bytes).expect("power-of-two size and alignment")
    }
}

impl PageSource for MallocSource {
    fn name(&self) -> &'static str {
        match self.kind {
            #[cfg(feature = "peers")]
            MallocKind::Mimalloc => "mimalloc",
            #[cfg(feature = "peers")]
            MallocKind::Jemalloc => "jemalloc",
            MallocKind::System => "system",
        }
    }

    #[inline]
    fn allocate(&self, _cpu: usize, order: u8, _kind: MigrateKind) -> Result<Block, SourceError> {
        if order > crate::workload::MAX_ORDER {
            return Err(SourceError::Unsupported {
                source: self.name(),
                why: format!("order {order} above {}", crate::workload::MAX_ORDER),
            });
        }
        let layout = Self::layout(order);
        // SAFETY: 1. the layout has a non-zero size (at least 4 KiB); 2. the block is
        // freed only through `free` with the same order, hence the same layout.
        let p = unsafe {
            match self.kind {
                #[cfg(feature = "peers")]
                MallocKind::Mimalloc => MiMalloc.alloc(layout),
                #[cfg(feature = "peers")]
                MallocKind::Jemalloc => Jemalloc.alloc(layout),
                MallocKind::System => System.alloc(layout),
            }
        };
        if p.is_null() {
            return Err(SourceError::OutOfMemory);
        }
        Ok(Block {
            handle: p as u64,
            order,
        })
    }

    #[inline]
    fn free(&self, _cpu: usize, block: Block) -> Result<(), SourceError> {
        if block.handle == 0 || block.order > crate::workload::MAX_ORDER {
            return Err(SourceError::Broken {
                source: self.name(),
                what: format!("free of {block:?}: not a block of this allocator"),
            });
        }
        let layout = Self::layout(block.order);
        let p = block.handle as *mut u8;
        // SAFETY: 1. `p` came from `allocate` of this same allocator with the layout of
        // `block.order` (the executor checks every block is freed once, with its order);
        // 2. it is not used after this call.
        unsafe {
            match self.kind {
                #[cfg(feature = "peers")]
                MallocKind::Mimalloc => MiMalloc.dealloc(p, layout),
                #[cfg(feature = "peers")]
                MallocKind::Jemalloc => Jemalloc.dealloc(p, layout),
                MallocKind::System => System.dealloc(p, layout),
            }
        }
        Ok(())
    }

    fn touch(&self, block: Block) {
        // SAFETY: 1. the block is a live allocation of `block_bytes(order)` bytes;
        // 2. the executor touches only blocks its thread owns.
        unsafe { write_block(block.handle as *mut u8, block_bytes(block.order)) };
    }

    fn copy(&self, block: Block, buf: &mut [u8], into_block: bool) {
        // SAFETY: 1. the block is a live allocation of `block_bytes(order)` bytes;
        // 2. the executor copies only blocks its thread owns.
        unsafe { copy_block(block.handle as *mut u8, block.order, buf, into_block) };
    }

    fn has_memory(&self) -> bool {
        true
    }

    fn handle_space(&self) -> HandleSpace {
        HandleSpace::Addresses { size_aligned: true }
    }
}
