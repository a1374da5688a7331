//! The memory behind frame-range peers: one anonymous mapping, prefaulted, so a touch
//! measures a write to memory the process already has, not a kernel page fault.

use ::pagealloc::os::mmap::{HugePages, MmapRegion};

use super::{block_bytes, write_block, Block, SourceError};

/// A prefaulted mapping of `frames` 4 KiB frames; frame `i` at `base + i × 4096`.
#[derive(Debug)]
pub struct Memory {
    region: MmapRegion,
}

impl Memory {
    /// Maps `frames` frames (THP-backed where the kernel allows) and writes one byte per
    /// page so every frame is present before a run.
    ///
    /// # Errors
    /// [`SourceError::Build`] if the mapping fails.
    pub fn new(source: &'static str, frames: u64) -> Result<Self, SourceError> {
        let len = usize::try_from(frames)
            .ok()
            .and_then(|f| f.checked_mul(block_bytes(0)))
            .ok_or_else(|| SourceError::Build {
                source,
                why: format!("{frames} frames do not fit the address space"),
            })?;
        let region = MmapRegion::new(len, HugePages::Madvise).map_err(|e| SourceError::Build {
            source,
            why: format!("mmap of {} MiB: {e}", len >> 20),
        })?;
        prefault(region.as_ptr(), region.len());
        Ok(Memory { region })
    }

    /// Writes the whole of `block` (a PFN handle).
    ///
    /// # Panics
    /// If the block is not inside the mapping (a source bug).
    pub fn touch(&self, block: Block) {
        let ptr = self.ptr(block);
        // SAFETY: 1. `ptr(block)` checked that the whole block lies inside the mapping,
        // which lives as long as `self`; 2. the executor calls touch only on blocks its
        // thread owns (allocated and not freed), so no one else accesses these bytes.
        unsafe { write_block(ptr, block_bytes(block.order)) };
    }

    fn ptr(&self, block: Block) -> *mut u8 {
        let end = block.handle + (1u64 << block.order);
        assert!(
            end as usize * block_bytes(0) <= self.region.len(),
            "block {block:?} outside a {}-byte mapping",
            self.region.len()
        );
        self.region
            .frame_ptr(block.handle)
            .expect("checked to be inside the region")
    }
}

/// Writes one byte per 4 KiB page of `[ptr, ptr + len)`.
pub(crate) fn prefault(ptr: *mut u8, len: usize) {
    for off in (0..len).step_by(block_bytes(0)) {
        // SAFETY: 1. `off < len`, so the byte is inside the caller's mapping; 2. the
        // mapping was just created and is not shared with any other thread yet.
        unsafe { ptr.add(off).write_volatile(0) };
    }
}
