//! rcore's `buddy_system_allocator` 0.13: a `LockedFrameAllocator` (one spin lock around
//! per-order `BTreeSet`s) over the same frame range pagealloc gets.

use buddy_system_allocator::LockedFrameAllocator;

use super::{Block, HandleSpace, Memory, PageSource, SourceError};
use crate::workload::MigrateKind;

const NAME: &str = "buddy_system_allocator";

/// `LockedFrameAllocator` over frames `0..frames`.
pub struct BuddySource {
    alloc: LockedFrameAllocator<33>,
    frames: u64,
    memory: Option<Memory>,
}

impl std::fmt::Debug for BuddySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuddySource")
            .field("frames", &self.frames)
            .finish_non_exhaustive()
    }
}

impl BuddySource {
    /// A buddy allocator of `frames` frames; with `memory`, backed by a prefaulted mapping.
    ///
    /// # Errors
    /// [`SourceError::Build`] if the mapping fails or `frames` is 0.
    pub fn new(frames: u64, memory: bool) -> Result<Self, SourceError> {
        if frames == 0 {
            return Err(SourceError::Build {
                source: NAME,
                why: "no frames".into(),
            });
        }
        let alloc = LockedFrameAllocator::<33>::new();
        alloc.lock().add_frame(0, frames as usize);
        Ok(BuddySource {
            alloc,
            frames,
            memory: Memory::wanted(memory, NAME, frames)?,
        })
    }
}

impl PageSource for BuddySource {
    fn name(&self) -> &'static str {
        NAME
    }

    fn allocate(&self, _cpu: usize, order: u8, _kind: MigrateKind) -> Result<Block, SourceError> {
        let pages = 1usize << order;
        match self.alloc.lock().alloc(pages) {
            Some(start) => Ok(Block {
                handle: start as u64,
                order,
            }),
            None => Err(SourceError::OutOfMemory),
        }
    }

    fn free(&self, _cpu: usize, block: Block) -> Result<(), SourceError> {
        let pages = 1u64 << block.order;
        if block.handle + pages > self.frames {
            return Err(SourceError::Broken {
                source: NAME,
                what: format!("free of {block:?} beyond {} frames", self.frames),
            });
        }
        self.alloc
            .lock()
            .dealloc(block.handle as usize, pages as usize);
        Ok(())
    }

    fn memory(&self) -> Option<&Memory> {
        self.memory.as_ref()
    }

    fn handle_space(&self) -> HandleSpace {
        HandleSpace::Frames {
            frames: self.frames,
        }
    }

    fn validate(&self) -> Result<(), SourceError> {
        // With every block freed, the whole range must be allocatable again: take the
        // largest blocks first until nothing is left, count, and give them back.
        let mut a = self.alloc.lock();
        let mut got = Vec::new();
        let mut total = 0u64;
        let mut size = 1usize << 20;
        while size > 0 {
            while let Some(start) = a.alloc(size) {
                got.push((start, size));
                total += size as u64;
            }
            size >>= 1;
        }
        for (start, size) in got {
            a.dealloc(start, size);
        }
        if total != self.frames {
            return Err(SourceError::Broken {
                source: NAME,
                what: format!(
                    "{total} of {} frames free after the run (blocks leaked or lost)",
                    self.frames
                ),
            });
        }
        Ok(())
    }
}
