//! pagealloc itself, with any config, backed by real memory when asked.

use std::sync::Arc;

use ::pagealloc::os::mmap::HugePages;
use ::pagealloc::{AllocError, Allocator, Config, Frame, Gfp, Layout, MigrateType, Pfn};

use super::{
    block_bytes, copy_block, write_block, Block, Counters, HandleSpace, Memory, PageSource,
    PcpInfo, SourceError,
};
use crate::workload::MigrateKind;

const NAME: &str = "pagealloc";

/// pagealloc over one zone of `frames` frames with `cpus` CPUs; thread `i` allocates as
/// CPU `i` (`alloc_on(i, …)`). The decay ticker runs in the background as in the kernel.
///
/// Memory: frame `pfn` is byte `pfn × 4096` of a [`Memory`] mapping (the zone starts at
/// PFN 0), reused across sources; with `poison` in the config the allocator's own
/// mapping (`Allocator::with_memory`) is used instead, so it can poison freed frames.
#[derive(Debug)]
pub struct PageallocSource {
    alloc: Arc<Allocator>,
    memory: Backing,
}

#[derive(Debug)]
enum Backing {
    None,
    Lab(Memory),
    Own,
}

impl PageallocSource {
    /// Builds the allocator; with `memory`, over a fresh prefaulted mapping.
    ///
    /// # Errors
    /// [`SourceError::Build`] for a refused config or layout, or a failed mmap.
    pub fn new(
        config: Config,
        frames: u64,
        cpus: usize,
        memory: bool,
    ) -> Result<Self, SourceError> {
        let layout = Layout::single(frames, cpus.max(1));
        let build = |why: String| SourceError::Build { source: NAME, why };
        let (alloc, memory) = if memory && config.poison {
            let a = Allocator::with_memory(&layout, config, HugePages::None)
                .map_err(|e| build(e.to_string()))?;
            // The mapping is fresh: fault every frame in now, so a touch in the run is a
            // write to present memory, as it is for the pages of a warm kernel.
            let base = a
                .frame_ptr(Frame::new(Pfn(0), 0))
                .ok_or_else(|| build("no memory".into()))?;
            super::memory::prefault(base.as_ptr(), frames as usize * block_bytes(0));
            (a, Backing::Own)
        } else {
            let a = Allocator::new(&layout, config).map_err(|e| build(e.to_string()))?;
            let m = if memory {
                Backing::Lab(Memory::new(NAME, frames)?)
            } else {
                Backing::None
            };
            (a, m)
        };
        let alloc = Arc::new(alloc);
        alloc.start_ticker();
        Ok(PageallocSource { alloc, memory })
    }

    /// The allocator.
    pub fn allocator(&self) -> &Arc<Allocator> {
        &self.alloc
    }
}

/// The request flags of a workload's request type.
pub(crate) fn gfp_of(kind: MigrateKind) -> Gfp {
    Gfp::from_migratetype(match kind {
        MigrateKind::Movable => MigrateType::Movable,
        MigrateKind::Unmovable => MigrateType::Unmovable,
        MigrateKind::Reclaimable => MigrateType::Reclaimable,
    })
}

impl PageSource for PageallocSource {
    fn name(&self) -> &'static str {
        NAME
    }

    fn config(&self) -> Option<String> {
        Some(self.alloc.config().to_string())
    }

    #[inline(always)]
    fn allocate(&self, cpu: usize, order: u8, kind: MigrateKind) -> Result<Block, SourceError> {
        match self.alloc.alloc_on(cpu, order, gfp_of(kind), None) {
            Ok(f) => Ok(Block {
                handle: f.pfn.0,
                order: f.order,
            }),
            Err(AllocError::OutOfMemory) => Err(SourceError::OutOfMemory),
            Err(e) => Err(SourceError::Unsupported {
                source: NAME,
                why: e.to_string(),
            }),
        }
    }

    #[inline(always)]
    fn free(&self, cpu: usize, block: Block) -> Result<(), SourceError> {
        self.alloc
            .free_on(cpu, Frame::new(Pfn(block.handle), block.order))
            .map_err(|e| SourceError::Broken {
                source: NAME,
                what: format!("free of {block:?} refused: {e}"),
            })
    }

    fn touch(&self, block: Block) {
        match &self.memory {
            Backing::None => {}
            Backing::Lab(m) => m.touch(block),
            Backing::Own => {
                let ptr = self
                    .alloc
                    .frame_ptr(Frame::new(Pfn(block.handle), block.order))
                    .expect("a frame of this allocator lies in its memory");
                // SAFETY: 1. the allocator handed out the whole block, which lies in its
                // mapping (frame_ptr checked that every frame of the block is mapped);
                // 2. the executor touches only blocks its thread owns.
                unsafe { write_block(ptr.as_ptr(), block_bytes(block.order)) };
            }
        }
    }

    fn copy(&self, block: Block, buf: &mut [u8], into_block: bool) {
        match &self.memory {
            Backing::None => {}
            Backing::Lab(m) => m.copy(block, buf, into_block),
            Backing::Own => {
                let ptr = self
                    .alloc
                    .frame_ptr(Frame::new(Pfn(block.handle), block.order))
                    .expect("a frame of this allocator lies in its memory");
                // SAFETY: 1. the allocator handed out the whole block, which lies in its
                // mapping (frame_ptr checked the head; blocks never cross the zone end);
                // 2. the executor copies only blocks its thread owns.
                unsafe { copy_block(ptr.as_ptr(), block.order, buf, into_block) };
            }
        }
    }

    fn has_memory(&self) -> bool {
        !matches!(self.memory, Backing::None)
    }

    fn handle_space(&self) -> HandleSpace {
        HandleSpace::Frames {
            frames: self.alloc.managed_pages(),
        }
    }

    fn counters(&self) -> Option<Counters> {
        Some(self.alloc.counters())
    }

    fn cpu_counters(&self, cpu: usize) -> Option<Counters> {
        self.alloc.cpu_counters(cpu)
    }

    fn pcp_pages(&self) -> Option<u64> {
        Some(self.alloc.nr_pcp_pages())
    }

    fn pcp_info(&self, cpu: usize) -> Option<PcpInfo> {
        self.alloc.pcp_info(cpu, 0)
    }

    fn validate(&self) -> Result<(), SourceError> {
        let totals = self.alloc.validate().map_err(|e| SourceError::Broken {
            source: NAME,
            what: format!("validate: {e}"),
        })?;
        if totals.allocated != 0 {
            return Err(SourceError::Broken {
                source: NAME,
                what: format!("{} pages still allocated after the run", totals.allocated),
            });
        }
        Ok(())
    }
}
