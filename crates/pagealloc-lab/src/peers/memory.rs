//! The memory behind frame-range sources: one anonymous mapping, prefaulted, so a touch
//! measures a write to memory the process already has, not a kernel page fault.
//!
//! Faulting a mapping in is slow on some machines (1 GiB: about 1 s of 4 KiB faults
//! here, 7 s with THP under `defrag=madvise`'s direct compaction), so a dropped
//! mapping is kept for the next source of the same size in this process (at most
//! [`KEEP`] of them): a suite of runs pays for it once. Base pages only, like the
//! kernel peer's blocks.

use std::sync::Mutex;

use ::pagealloc::os::mmap::{HugePages, MmapRegion};

use super::{block_bytes, copy_block, write_block, Block, SourceError};

/// A prefaulted mapping of `frames` 4 KiB frames; frame `i` at `base + i × 4096`.
#[derive(Debug)]
pub struct Memory {
    region: Option<MmapRegion>,
}

/// Mappings kept for reuse.
const KEEP: usize = 2;
static SPARE: Mutex<Vec<MmapRegion>> = Mutex::new(Vec::new());

impl Drop for Memory {
    fn drop(&mut self) {
        if let Some(r) = self.region.take() {
            let mut spare = SPARE.lock().unwrap_or_else(|e| e.into_inner());
            if spare.len() < KEEP {
                spare.push(r);
            }
        }
    }
}

impl Memory {
    /// [`Memory::new`] when `wanted`, else no mapping: a source's optional backing.
    ///
    /// # Errors
    /// As [`Memory::new`].
    pub fn wanted(
        wanted: bool,
        source: &'static str,
        frames: u64,
    ) -> Result<Option<Self>, SourceError> {
        wanted.then(|| Memory::new(source, frames)).transpose()
    }

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
        let reuse = {
            let mut spare = SPARE.lock().unwrap_or_else(|e| e.into_inner());
            spare
                .iter()
                .position(|r| r.len() == len)
                .map(|i| spare.swap_remove(i))
        };
        let region = match reuse {
            Some(r) => r,
            None => {
                let r = MmapRegion::new(len, HugePages::None).map_err(|e| SourceError::Build {
                    source,
                    why: format!("mmap of {} MiB: {e}", len >> 20),
                })?;
                prefault(r.as_ptr(), r.len());
                r
            }
        };
        Ok(Memory {
            region: Some(region),
        })
    }

    /// Address of frame `pfn`'s first byte.
    ///
    /// # Panics
    /// If the frame is outside the mapping.
    pub fn frame_ptr(&self, pfn: u64) -> *mut u8 {
        self.region()
            .frame_ptr(pfn)
            .unwrap_or_else(|| panic!("frame {pfn} outside the mapping"))
    }

    fn region(&self) -> &MmapRegion {
        self.region.as_ref().expect("present until drop")
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

    /// Copies `buf` into the start of `block` or the start of `block` into `buf` (see
    /// [`super::PageSource::copy`]).
    ///
    /// # Panics
    /// If the block is not inside the mapping, or `buf` is larger than the block.
    pub fn copy(&self, block: Block, buf: &mut [u8], into_block: bool) {
        let ptr = self.ptr(block);
        // SAFETY: 1. `ptr(block)` checked that the whole block lies inside the mapping,
        // which lives as long as `self`; 2. the executor copies only blocks its thread
        // owns (allocated and not freed), so no one else accesses these bytes.
        unsafe { copy_block(ptr, block.order, buf, into_block) };
    }

    fn ptr(&self, block: Block) -> *mut u8 {
        let end = block.handle + (1u64 << block.order);
        assert!(
            end as usize * block_bytes(0) <= self.region().len(),
            "block {block:?} outside a {}-byte mapping",
            self.region().len()
        );
        self.frame_ptr(block.handle)
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
